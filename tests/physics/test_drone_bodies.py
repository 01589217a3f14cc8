"""Worlds with both 6-DOF drones and movable bodies: one state (``TorchStateWithBodies`` with the
drone fields), the drone kernel after the body substep, every step path giving the same bits, and
gradients through drone thrust -> contact -> body (``warp_step``, ``rollout``, ``GradRing``,
``RolloutGraph``); the same step paths for drones without bodies and bodies without drones."""

import pytest
import torch

from swarp import AgentConfig, Body, Obstacle, Stepper, TorchStateWithBodies, World, WorldConfig, rollout, warp_step
from swarp.core.types import BODY_FIELDS, DRONE_FIELDS
from swarp.physics.autograd import GradRing, RolloutGraph, step_fields
from swarp.physics.compile import compiled_warp_step

from .test_bodies import assert_step_paths_agree

F64 = torch.float64
DRONE = AgentConfig(model="drone", mass=0.5, radius=0.1)
WALKER = AgentConfig(radius=0.1)


def scene(drones: bool = True, substeps: int = 2, bodies: bool = True) -> tuple[Stepper, TorchStateWithBodies]:
    """A drone (or a holonomic agent) touching a disc body from the left, a holonomic agent from
    the right; more than hover thrust lifts the drone while the contact pushes the disc. Without
    ``bodies`` the two agents touch each other (a ``TorchState``)."""
    disc = (Body((Obstacle.circle((0, 0), 0.15),), mass=1.0),) if bodies else ()
    world = WorldConfig(bounds=1.0, bodies=disc, collision_k=50.0, collision_damping=1.0)
    agents = [DRONE if drones else WALKER, WALKER]
    stepper = Stepper(agents, dt=0.05, device="cpu", world=world, substeps=substeps, dtype="float64")
    state = World(stepper, 2).state.torch  # every field allocated, the attitude at identity
    state = type(state)(*(t.clone() for t in state))
    gap = 1.0 if bodies else 0.8  # agents 0.19 m apart without the disc between them
    state.pos.copy_(gap * torch.tensor([[-0.23, 0.02], [0.24, -0.01]], dtype=F64))
    state.vel.copy_(torch.tensor([[0.3, 0.0], [-0.2, 0.05]], dtype=F64))
    state.pos_z.fill_(0.4)
    if bodies:
        state.body_pos[:, 0, 1] = torch.tensor([0.0, 0.03], dtype=F64)
    return stepper, state


def actions_for(stepper: Stepper, n_steps: int | None = None, seed: int = 3) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    shape = (*(() if n_steps is None else (n_steps,)), 2, 2, stepper.act_dim)
    actions = 0.2 * torch.randn(*shape, generator=generator, dtype=F64)
    if stepper.model.has_drones:
        actions[..., 0, :] += DRONE.mass * 9.81 / 4 + 0.5  # more than hover: the drone climbs
    return actions


@pytest.mark.parametrize("substeps", [1, 2, 3])
def test_in_place_no_grad_and_taped_steps_give_the_same_bits(substeps):
    stepper, state = scene(substeps=substeps)
    assert step_fields(stepper)[5:] == DRONE_FIELDS + BODY_FIELDS
    world = assert_step_paths_agree(stepper, state, [actions_for(stepper, seed=t) for t in range(3)])
    final = world.state.torch
    assert float((final.pos_z[:, 0] - state.pos_z[:, 0]).min()) > 0, "the drone climbed"
    assert float((final.body_pos - state.body_pos).norm(dim=-1).min()) > 1e-3, "the bodies were pushed"
    assert torch.equal(final.pos_z[:, 1], state.pos_z[:, 1]), "the planar agent's drone fields pass through"


def test_gradcheck_through_drone_thrust_contact_and_body():
    stepper, state = scene()
    state = TorchStateWithBodies(*(x[:1].contiguous() for x in state))
    actions = actions_for(stepper, 2)[:, :1].contiguous().requires_grad_()
    moving = {"pos": state.pos, "quat": state.quat, "body_vel": state.body_vel}
    leaves = [t.clone().requires_grad_() for t in moving.values()]

    def run(actions_seq, *tensors):
        final, _ = rollout(stepper, state._replace(**dict(zip(moving, tensors, strict=True))), actions_seq)
        return final.pos_z, final.body_pos, final.body_theta

    assert torch.autograd.gradcheck(run, (actions, *leaves), eps=1e-6, atol=1e-6, rtol=1e-5)
    _, body_pos, _ = run(actions, *leaves)
    (grad,) = torch.autograd.grad(body_pos.sum(), actions)
    assert float(grad[:, 0, 0].abs().sum()) > 1e-6, "the drone's thrust moves the body through the contact"


@pytest.mark.parametrize(
    ("drones", "bodies"), [(True, True), (False, True), (True, False)], ids=["drones+bodies", "bodies", "drones"]
)
def test_ring_and_graph_rollouts_match_rollout(drones, bodies):
    """``GradRing`` and ``RolloutGraph`` run the same kernels as ``rollout``: the same trajectory
    bits, gradients equal up to the order of float additions (the graph sums adjoints in Warp)."""
    stepper, state = scene(drones, bodies=bodies)
    n_steps = 4
    actions = actions_for(stepper, n_steps)
    ring = GradRing(stepper, 2, stepper.act_dim, capacity=n_steps)
    graph = RolloutGraph(stepper, 2, n_steps)
    results = []
    for run in (
        lambda s, a: rollout(stepper, s, a),
        lambda s, a: rollout(stepper, s, a, ring),
        graph,
    ):
        start = type(state)(*(t.clone().requires_grad_() for t in state))
        acts = actions.clone().requires_grad_()
        final, trajectory = run(start, acts)
        loss = final.vel.square().sum() + trajectory.pos.sum() + trajectory.pos_z.sum()
        if bodies:
            loss = loss + final.body_pos.square().sum()
        loss.backward()
        results.append((trajectory, acts.grad, start.pos.grad, start.pos_z.grad, start.quat.grad))
    (trajectory, *grads), *others = results
    assert type(trajectory) is type(state) and isinstance(state, TorchStateWithBodies) == bodies
    for other_trajectory, *other_grads in others:
        for name in trajectory._fields:
            assert torch.equal(getattr(trajectory, name).detach(), getattr(other_trajectory, name).detach()), name
        for grad, other in zip(grads, other_grads, strict=True):
            torch.testing.assert_close(other, grad, rtol=1e-12, atol=1e-14)
    assert float(grads[0].abs().sum()) > 0 and float(grads[2].abs().sum()) > 0
    if not drones:
        # Planar fleet: the drone fields pass through, unchanged at every step.
        assert torch.equal(trajectory.quat.detach(), state.quat.expand(n_steps, *state.quat.shape))


def test_the_compile_op_steps_drones_like_warp_step():
    """``swarp::step`` (eager call of ``compiled_warp_step``) integrates the drone fields: the same
    bits and gradients as ``warp_step``; a world with bodies is refused with a clear error."""
    stepper, state = scene(bodies=False)
    actions = actions_for(stepper)
    outputs, grads = [], []
    for step in (warp_step, compiled_warp_step):
        start = type(state)(*(t.clone().requires_grad_() for t in state))
        out = step(stepper, start, actions)
        (out.pos_z.sum() + out.quat[..., 0].sum() + out.pos.sum()).backward()
        outputs.append(out)
        grads.append([t.grad for t in start])
    for name, a, b in zip(state._fields, *outputs, strict=True):
        assert torch.equal(a.detach(), b.detach()), name
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert float(grads[0][7].abs().sum()) > 0, "the attitude gets a gradient"
    body_stepper, body_state = scene()
    with pytest.raises(ValueError, match="worlds without movable bodies"):
        compiled_warp_step(body_stepper, body_state, actions)
