"""Movable rigid bodies and joints (``swarp/physics/bodies.py``): Newton's third law bit for bit,
momentum bookkeeping, spin, body-body and wall contacts, gravity, joint error and long-run
stability, the no-body path untouched, and gradients through body motion (float64 on the CPU)."""

import math

import pytest
import torch
import warp as wp

from swarp import AgentConfig, Obstacle, Stepper, TorchState, WorldConfig, rollout, warp_step
from swarp.core.config import Body, Joint
from swarp.core.types import TorchStateWithBodies, complete_state
from swarp.physics.autograd import GradRing
from swarp.physics.bodies import BodyForces
from swarp.physics.world import World

F64 = torch.float64
#: A T: bar over stem, frame at the centre of mass (as push_t builds it).
T_SHAPES = (Obstacle.box((0.0, 0.0857), (0.2, 0.05)), Obstacle.box((0.0, -0.1143), (0.05, 0.15)))
#: Momentum drift allowed over a whole run in float64 [kg m/s] (rounding only).
MOMENTUM_ATOL = 1e-12
#: Relative step of the central finite differences [-] and their agreement with the tape.
FD_EPS = 1e-6
FD_RTOL = 1e-5
#: A free-flying (acceleration-controlled, unclamped, undamped) agent.
FREE_AGENT = AgentConfig(ctrl_mode="acceleration", max_speed=100.0, max_accel=100.0, radius=0.05)


def world_of(bodies, joints=(), **kwargs) -> WorldConfig:
    return WorldConfig(bodies=tuple(bodies), joints=tuple(joints), **kwargs)


def set_bodies(world: World, pos, theta=None, vel=None, ang_vel=None) -> None:
    state = world.state.torch
    state.body_pos.copy_(torch.tensor(pos, dtype=state.pos.dtype).expand_as(state.body_pos))
    if theta is not None:
        state.body_theta.copy_(torch.tensor(theta, dtype=state.pos.dtype).expand_as(state.body_theta))
    if vel is not None:
        state.body_vel.copy_(torch.tensor(vel, dtype=state.pos.dtype).expand_as(state.body_vel))
    if ang_vel is not None:
        state.body_ang_vel.copy_(torch.tensor(ang_vel, dtype=state.pos.dtype).expand_as(state.body_ang_vel))


def set_agents(world: World, pos, vel=None) -> None:
    state = world.state.torch
    state.pos.copy_(torch.tensor(pos, dtype=state.pos.dtype).expand_as(state.pos))
    if vel is not None:
        state.vel.copy_(torch.tensor(vel, dtype=state.pos.dtype).expand_as(state.vel))
    world.build_neighbors()


def momentum(world: World) -> torch.Tensor:
    """[E, 2] total linear momentum of agents and bodies [kg m/s]."""
    state = world.state.torch
    agent_mass = torch.tensor([cfg.mass for cfg in world.model.agents], dtype=state.pos.dtype)
    body_mass = torch.tensor([b.mass for b in world.model.world.bodies], dtype=state.pos.dtype)
    return (state.vel * agent_mass.view(1, -1, 1)).sum(1) + (state.body_vel * body_mass.view(1, -1, 1)).sum(1)


# --- Newton's third law and momentum ---------------------------------------------------------------


def test_reaction_on_the_body_is_the_agents_force_negated_bit_for_bit():
    """Two agents press on a T; the wrench's force is minus the sum of their body-contact forces,
    computed in the body thread's order, with no rounding difference."""
    world = World(Stepper([FREE_AGENT] * 2, dt=0.05, device="cpu", world=world_of([Body(T_SHAPES)])), 1)
    set_bodies(world, [[0.0, 0.0]], theta=[0.3], vel=[[0.1, -0.2]], ang_vel=[0.7])
    set_agents(world, [[-0.23, 0.05], [0.03, -0.3]], vel=[[0.5, 0.0], [0.0, 0.4]])
    world.step(torch.zeros(1, 2, 2))
    forces: BodyForces = world.forces
    on_agents = wp.to_torch(forces.total) - wp.to_torch(forces.contact)
    assert bool((on_agents.norm(dim=-1) > 0).all()), "both agents must touch the T"
    wrench = wp.to_torch(forces.wrench)[0, 0]
    expected = (torch.zeros(2) - on_agents[0, 0]) - on_agents[0, 1]
    assert torch.equal(wrench[:2], expected)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_total_momentum_is_conserved_through_every_kind_of_contact(dtype):
    """No walls, no damping, free agents: agents hit a T and a disc, the disc hits the T and a
    second box (circle-box and box-box contacts), agents hit each other. Momentum stays put."""
    bodies = [
        Body(T_SHAPES, mass=2.0),
        Body((Obstacle.circle((0, 0), 0.1),), mass=0.7),
        Body((Obstacle.box((0, 0), (0.1, 0.1)),), mass=1.3),
    ]
    agents = [FREE_AGENT] * 4
    world = World(
        Stepper(agents, dt=0.05, device="cpu", world=world_of(bodies, collision_damping=0.5), substeps=2, dtype=dtype),
        2,
    )
    set_bodies(
        world, [[0.0, 0.0], [0.5, 0.1], [-0.15, -0.55]], theta=[0.2, 0.0, 0.6], vel=[[0, 0], [-0.8, 0], [0.1, 0.6]]
    )
    set_agents(
        world, [[-0.6, 0.08], [0.02, 0.6], [0.9, -0.5], [1.05, -0.5]], vel=[[1.0, 0], [0, -1.0], [0.5, 0], [-0.4, 0.0]]
    )
    before = momentum(world).clone()
    start = world.state.torch.body_vel.clone()
    for _ in range(120):
        world.step(torch.zeros(2, 4, 2, dtype=world.state.torch.pos.dtype))
    atol = MOMENTUM_ATOL if dtype == "float64" else 2e-5
    torch.testing.assert_close(momentum(world), before, atol=atol, rtol=0)
    moved = (world.state.torch.body_vel - start).norm(dim=-1)
    assert bool((moved > 0.05).all()), f"every body must have been hit: {moved}"


def test_a_body_spins_when_pushed_off_centre_and_not_when_pushed_through_its_centre():
    box = Body((Obstacle.box((0, 0), (0.2, 0.05)),), mass=1.0)
    world = World(
        Stepper([AgentConfig(radius=0.05)] * 2, dt=0.05, device="cpu", world=world_of([box]), dtype="float64"), 2
    )
    set_bodies(world, [[0.0, 0.0]])
    # env 0: push up under the right end; env 1: push the left face through the centre.
    state = world.state.torch
    state.pos.copy_(torch.tensor([[[0.15, -0.09], [3.0, 3.0]], [[-0.24, 0.0], [3.0, 3.0]]], dtype=F64))
    world.build_neighbors()
    actions = torch.tensor([[[0.0, 0.5], [0, 0]], [[0.5, 0.0], [0, 0]]], dtype=F64)
    for _ in range(10):
        world.step(actions)
    assert state.body_ang_vel[0, 0] > 0.1, "a push up on the right end turns the box counter-clockwise"
    assert state.body_vel[1, 0, 0] > 0.1 and state.body_ang_vel[1, 0] == 0.0 and state.body_theta[1, 0] == 0.0


def test_a_distant_body_changes_no_agent_bit():
    """Agent-agent contacts with and without an untouched body: identical agent trajectories."""
    agents = [AgentConfig(radius=0.1)] * 3
    plain = World(Stepper(agents, dt=0.1, device="cpu", world=WorldConfig(bounds=1.0)), 2)
    # 5 kg: a 1 kg T (0.23 kg at its rim) is beyond the contact stability limit at h = 0.1 s.
    bodied = World(Stepper(agents, dt=0.1, device="cpu", world=world_of([Body(T_SHAPES, mass=5.0)], bounds=10.0)), 2)
    # Same walls for the agents: the bounded world's walls are out of reach in both.
    plain = World(Stepper(agents, dt=0.1, device="cpu", world=WorldConfig(bounds=10.0)), 2)
    set_bodies(bodied, [[8.0, 8.0]])
    for world in (plain, bodied):
        set_agents(world, [[0.0, 0.0], [0.15, 0.05], [-0.1, 0.12]])
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        actions = torch.rand(2, 3, 2, generator=generator) - 0.5
        plain.step(actions)
        bodied.step(actions)
    for name in TorchState._fields:
        assert torch.equal(getattr(plain.state.torch, name), getattr(bodied.state.torch, name)), name
    assert plain.stepper.bodies is None and isinstance(plain.forces, wp.array)


def test_walls_hold_bodies_and_gravity_rests_them_on_the_floor():
    falling = Body(
        (Obstacle.box((0, 0), (0.2, 0.03)),), mass=1.0, gravity=(0.0, -2.0), linear_damping=0.5, angular_damping=0.5
    )
    rolling = Body((Obstacle.circle((0, 0), 0.1),), mass=1.0)
    world = World(
        Stepper(
            [AgentConfig()],
            dt=0.1,
            device="cpu",
            world=world_of([falling, rolling], bounds=1.0, collision_k=400.0),
            substeps=4,
        ),
        1,
    )
    set_bodies(world, [[0.0, 0.5], [0.5, 0.0]], theta=[0.4, 0.0], vel=[[0, 0], [2.0, 0.0]])
    set_agents(world, [[-0.8, 0.8]])
    for _ in range(300):
        world.step(torch.zeros(1, 1, 2))
    state = world.state.torch
    assert abs(float(state.body_pos[0, 0, 1]) - (-1.0 + 0.03)) < 0.01, "the box lies on the floor"
    assert abs(float(state.body_theta[0, 0])) < 0.02, "flat"
    assert float(state.body_vel[0, 0].norm()) < 1e-3
    assert float(state.body_pos[0, 1].abs().max()) < 1.0 - 0.1 + 0.01, "the disc stays inside the walls"


# --- joints ----------------------------------------------------------------------------------------


def joint_world(substeps: int, n_envs: int = 1) -> tuple[World, tuple[Joint, Joint]]:
    """An agent towing a box by a 0.3 m rod; a disc hangs off the box's other end by a 0.25 m rod.
    The box weighs 2 kg: at 1 kg (0.25 kg at its corners) its contacts would exceed the stability
    limit of one 0.1 s substep."""
    bodies = (Body((Obstacle.box((0, 0), (0.2, 0.05)),), mass=2.0), Body((Obstacle.circle((0, 0), 0.08),), mass=0.5))
    joints = (
        Joint(body=0, agent=0, anchor=(0.2, 0.0), length=0.3),
        Joint(body=1, other_body=0, other_anchor=(-0.2, 0.0), length=0.25),
    )
    world = World(
        Stepper([AgentConfig(max_speed=1.0)], dt=0.1, device="cpu", world=world_of(bodies, joints), substeps=substeps),
        n_envs,
    )
    set_bodies(world, [[0.0, 0.0], [-0.45, 0.0]])
    set_agents(world, [[0.5, 0.0]])
    return world, joints


def joint_errors(world: World) -> torch.Tensor:
    """[2] |anchor distance - rest length| of the two joints of ``joint_world`` [m]."""
    s = world.state.torch
    axis = torch.stack([torch.cos(s.body_theta[0, 0]), torch.sin(s.body_theta[0, 0])])
    tow = (s.pos[0, 0] - (s.body_pos[0, 0] + 0.2 * axis)).norm() - 0.3
    hang = (s.body_pos[0, 1] - (s.body_pos[0, 0] - 0.2 * axis)).norm() - 0.25
    return torch.stack([tow, hang]).abs()


@pytest.mark.slow
@pytest.mark.parametrize(("substeps", "bound"), [(1, 0.2), (4, 0.05)])
def test_joint_error_stays_bounded_over_10000_steps(substeps, bound):
    """The agent drives circles at half its top speed, dragging the chain (default dt = 0.1 s)."""
    world, _ = joint_world(substeps)
    worst = torch.zeros(2)
    actions = torch.zeros(1, 1, 2)
    for t in range(10_000):
        actions[0, 0] = 0.5 * torch.tensor([math.cos(0.01 * t), math.sin(0.01 * t)])
        world.step(actions)
        worst = torch.maximum(worst, joint_errors(world))
    assert bool(torch.isfinite(worst).all()) and float(worst.max()) < bound, worst
    assert float(world.state.torch.body_vel.norm(dim=-1).max()) > 0.1, "the chain was dragged"


@pytest.mark.slow
def test_no_nan_or_energy_blow_up_over_100000_steps_at_defaults():
    """A T pushed around by agents with random bounded velocity commands, a tethered disc, walls."""
    bodies = (Body(T_SHAPES, mass=2.0, linear_damping=1.0, angular_damping=1.0), Body((Obstacle.circle((0, 0), 0.08),)))
    joints = (Joint(body=1, agent=0, length=0.2),)
    stepper = Stepper([AgentConfig()] * 4, device="cpu", world=world_of(bodies, joints, bounds=1.0))
    world = World(stepper, 1)
    set_bodies(world, [[0.0, 0.0], [0.6, 0.6]])
    set_agents(world, [[0.6, 0.4], [-0.5, 0.0], [0.0, -0.6], [0.5, 0.0]])
    generator = torch.Generator().manual_seed(3)
    worst_speed = 0.0
    for _ in range(1000):
        world.actions.copy_(2.0 * torch.rand(1, 4, 2, generator=generator) - 1.0)
        for _step in range(100):
            world.run_step()
        state = world.state.torch
        worst_speed = max(
            worst_speed, float(state.body_vel.norm(dim=-1).max()), float(state.body_ang_vel.abs().max()) * 0.3
        )
    for name, tensor in state._asdict().items():
        assert bool(torch.isfinite(tensor).all()), name
    # Agents move at most 1 m/s; a body driven by them and by contacts stays of that order.
    assert worst_speed < 5.0, worst_speed
    assert float(state.body_pos.abs().max()) < 1.0


# --- gradients -------------------------------------------------------------------------------------


def contact_scene(joints=(), substeps: int = 2) -> tuple[Stepper, TorchStateWithBodies]:
    """Two free agents, one pressing on a rotated T and one on a disc body; optionally a rod."""
    bodies = (Body(T_SHAPES, mass=2.0, linear_damping=0.5, angular_damping=0.3), Body((Obstacle.circle((0, 0), 0.1),)))
    world = world_of(bodies, joints, bounds=1.0, collision_k=50.0, collision_damping=1.0)
    stepper = Stepper([FREE_AGENT] * 2, dt=0.05, device="cpu", world=world, substeps=substeps, dtype="float64")
    state = TorchStateWithBodies(
        pos=torch.tensor([[[-0.22, 0.1], [0.5, 0.42]]], dtype=F64),
        theta=torch.zeros(1, 2, dtype=F64),
        vel=torch.tensor([[[0.6, 0.05], [0.1, -0.3]]], dtype=F64),
        speed=torch.zeros(1, 2, dtype=F64),
        ang_vel=torch.zeros(1, 2, dtype=F64),
        body_pos=torch.tensor([[[0.0, 0.0], [0.5, 0.3]]], dtype=F64),
        body_theta=torch.tensor([[0.15, 0.0]], dtype=F64),
        body_vel=torch.tensor([[[0.05, 0.0], [0.0, 0.1]]], dtype=F64),
        body_ang_vel=torch.tensor([[0.2, -0.1]], dtype=F64),
    )
    return stepper, complete_state(state)  # the drone fields at rest: every field is a tensor


@pytest.mark.parametrize(
    "joints", [(), (Joint(body=1, agent=0, length=0.6, stiffness=30.0, damping=1.0),)], ids=["contact", "joint"]
)
def test_gradcheck_through_a_rollout_with_bodies(joints):
    stepper, state = contact_scene(joints)
    generator = torch.Generator().manual_seed(1)
    actions = (0.5 * torch.randn(3, 1, 2, 2, generator=generator, dtype=F64)).requires_grad_()
    fields = [t.clone().requires_grad_() for t in state]

    def run(actions_seq, *tensors):
        final, _ = rollout(stepper, TorchStateWithBodies(*tensors), actions_seq)
        return tuple(final)

    assert torch.autograd.gradcheck(run, (actions, *fields), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_body_position_gradient_wrt_the_pushing_agents_action_matches_finite_differences():
    """d(T position after 4 steps)/d(action of the pushing agent at step 0): nonzero, and equal to a
    central difference of the no-grad simulation."""
    stepper, state = contact_scene()
    actions = torch.zeros(4, 1, 2, 2, dtype=F64)
    actions[:, 0, 0] = torch.tensor([1.0, 0.2], dtype=F64)
    actions.requires_grad_()
    final, _ = rollout(stepper, state, actions)
    final.body_pos[0, 0].sum().backward()
    grad = actions.grad[0, 0, 0]
    assert float(grad.abs().min()) > 1e-4, f"the push must move the T: {grad}"

    def body_pos_sum(delta: torch.Tensor) -> float:
        perturbed = actions.detach().clone()
        perturbed[0, 0, 0] += delta
        with torch.no_grad():
            out, _ = rollout(stepper, state, perturbed)
        return float(out.body_pos[0, 0].sum())

    for k in range(2):
        step = torch.zeros(2, dtype=F64)
        step[k] = FD_EPS
        fd = (body_pos_sum(step) - body_pos_sum(-step)) / (2 * FD_EPS)
        assert math.isclose(float(grad[k]), fd, rel_tol=FD_RTOL), (k, float(grad[k]), fd)


def test_state_of_a_world_with_bodies_must_carry_them():
    stepper, state = contact_scene()
    with pytest.raises(TypeError, match="TorchStateWithBodies"):
        warp_step(stepper, TorchState(*state[:5]), torch.zeros(1, 2, 2, dtype=F64))
    bad = state._replace(body_theta=torch.zeros(1, 3, dtype=F64))
    with pytest.raises(ValueError, match=r"body_theta must have shape \[1, 2\]"):
        warp_step(stepper, bad, torch.zeros(1, 2, 2, dtype=F64))


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Body(()), ValueError, "at least one"),
        (lambda: Body((Obstacle.segment((0, 0), (1, 0)),)), ValueError, "CIRCLE or BOX"),
        (lambda: Body((Obstacle.circle((0, 0), 0.1),), mass=0.0), ValueError, "Body.mass must be > 0"),
        (lambda: Joint(body=0), ValueError, "exactly one of agent= and other_body="),
        (lambda: Joint(body=0, agent=0, other_body=1), ValueError, "exactly one"),
        (lambda: Joint(body=1, other_body=1), ValueError, "to itself"),
        (lambda: Joint(body=0, agent=0, length=-1.0), ValueError, "Joint.length must be >= 0"),
        (lambda: world_of([], [Joint(body=0, agent=0)]), ValueError, r"joints\[0\].body=0 but there are 0 bodies"),
        (
            lambda: (
                world_of([Body(T_SHAPES)], [Joint(body=0, agent=3)])
                and Stepper([AgentConfig()], world=world_of([Body(T_SHAPES)], [Joint(body=0, agent=3)]), device="cpu")
            ),
            ValueError,
            "agent=3 but there are 1 agents",
        ),
        (lambda: WorldConfig(bodies=(Obstacle.circle((0, 0), 1.0),)), TypeError, "must be a Body"),
    ],
)
def test_bad_bodies_and_joints_are_rejected(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_inertia_of_a_uniform_disc_and_the_t_bounding_radius():
    disc = Body((Obstacle.circle((0, 0), 0.2),), mass=3.0)
    assert math.isclose(disc.moment_of_inertia, 0.5 * 3.0 * 0.2**2)
    # The farthest corners: the stem's foot (0.05, -0.2643) beats the bar's top (0.2, 0.1357).
    assert math.isclose(Body(T_SHAPES).bounding_radius, math.hypot(0.05, 0.1143 + 0.15))


def test_grad_ring_rollouts_with_bodies_match_fresh_scratch():
    """The ring's reused taped scratch (body forces and body state included) gives the same values
    and gradients as fresh allocations, iteration after iteration."""
    stepper, state = contact_scene((Joint(body=1, agent=1, length=0.2),))
    ring = GradRing(stepper, n_envs=1, act_dim=2, capacity=4)
    generator = torch.Generator().manual_seed(2)
    for _ in range(2):
        actions = (0.5 * torch.randn(4, 1, 2, 2, generator=generator, dtype=F64)).requires_grad_()
        results = []
        for use_ring in (ring, None):
            final, trajectory = rollout(stepper, state, actions, ring=use_ring)
            (final.body_pos.sum() + trajectory.body_theta.sum()).backward()
            results.append((final, actions.grad.clone()))
            actions.grad = None
        assert all(torch.equal(a, b) for a, b in zip(results[0][0], results[1][0], strict=True))
        assert torch.equal(results[0][1], results[1][1]) and float(results[0][1].abs().sum()) > 0


def test_world_set_state_takes_body_fields():
    world = World(Stepper([AgentConfig()], device="cpu", world=world_of([Body(T_SHAPES)]), substeps=2), 2)
    pose = torch.tensor([[[0.3, -0.2]], [[0.0, 0.5]]])
    world.set_state(body_pos=pose, body_theta=torch.tensor([[0.5], [-1.0]]))
    assert torch.equal(world.state.torch.body_pos, pose)
    with pytest.raises(ValueError, match=r"body_pos must have shape \[2, 1, 2\]"):
        world.set_state(body_pos=torch.zeros(2, 2, 2))


def assert_step_paths_agree(stepper: Stepper, state, actions_seq) -> World:
    """Step ``state`` by each of ``actions_seq`` in place (``World.step``), through the recycled
    no-grad buffers and taped (``warp_step``); assert every field agrees bit for bit after each
    step. Returns the world (in its final state)."""
    world = World(stepper, state.pos.shape[0])
    world.set_state(**state._asdict())
    no_grad, taped = state, state
    for actions in actions_seq:
        world.step(actions)
        no_grad = type(state)(*(t.clone() for t in warp_step(stepper, no_grad, actions)))
        taped = warp_step(stepper, taped, actions.clone().requires_grad_())
        for name in state._fields:
            in_place = getattr(world.state.torch, name)
            assert torch.equal(in_place, getattr(no_grad, name)), name
            assert torch.equal(in_place, getattr(taped, name).detach()), name
    return world


@pytest.mark.parametrize("substeps", [1, 2, 3])
def test_in_place_no_grad_and_taped_steps_give_the_same_bits(substeps):
    """The in-place step alternates the bodies with spare arrays and integrates them in the contact
    launch (an odd count's last substep in place, separately); the taped step writes fresh arrays
    with a separate integration launch. Every field agrees bit for bit after each step."""
    stepper, state = contact_scene((Joint(body=1, other_body=0, anchor=(0.0, 0.1), length=0.4),), substeps)
    generator = torch.Generator().manual_seed(4)
    actions_seq = [0.5 * torch.randn(1, 2, 2, generator=generator, dtype=F64) for _ in range(3)]
    world = assert_step_paths_agree(stepper, state, actions_seq)
    assert float(world.state.torch.body_ang_vel.abs().min()) > 0, "the bodies were pushed and turned"
