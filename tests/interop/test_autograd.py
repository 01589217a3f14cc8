"""The autograd bridge (``swarp/interop/autograd.py``): strict float64 gradchecks of every dynamics
model and control mode with contacts active, closed-form gradients, saturation and NaN actions,
the no-grad path, and ``GradRing``."""

import math

import pytest
import torch
import warp as wp

from swarp import AgentConfig, Obstacle, State, Stepper, TorchState, WorldConfig, rollout, warp_step
from swarp.core.types import complete_state
from swarp.physics.autograd import GradRing, RolloutGraph, invalid_actions

MODELS = ["holonomic", "diff_drive", "kinematic_bicycle"]
CTRL_MODES = ["velocity", "acceleration"]
INTEGRATORS = ["euler", "rk4"]
RADIUS = 0.1
#: One obstacle of each shape; the scene below puts one agent in contact with each.
OBSTACLES = (
    Obstacle.circle((-0.6, 0.0), 0.2),
    Obstacle.box((0.6, 0.4), (0.15, 0.1), 0.3),
    Obstacle.segment((-0.5, -0.6), (0.5, -0.6), 0.02),
)
SCENE = WorldConfig(bounds=1.0, obstacles=OBSTACLES, collision_k=50.0, collision_damping=1.0)
#: Agent positions [m]: an overlapping pair, then one agent touching the circle, the box (below its
#: rotated bottom face), the segment and the left wall.
SCENE_POS = [
    (0.0, 0.0),
    (0.15, 0.03),
    (-0.33, 0.05),
    (0.6 + 0.15 * math.sin(0.3), 0.4 - 0.15 * math.cos(0.3)),
    (0.1, -0.5),
    (-0.93, 0.6),
]
#: Jitter of the scene positions [m]: small enough to keep every contact.
JITTER = 0.005
DT = 0.05


def make_stepper(agents, world=SCENE, substeps=2, integrator="euler", dtype="float64", dt=DT) -> Stepper:
    return Stepper(agents, dt=dt, device="cpu", world=world, substeps=substeps, integrator=integrator, dtype=dtype)


def scene_state(generator, n_envs: int = 1, dtype=torch.float64) -> TorchState:
    """The contact scene with random velocities, headings (away from +-pi), speeds and yaw rates."""
    n_agents = len(SCENE_POS)

    def uniform(*shape, scale):
        return scale * (2.0 * torch.rand(*shape, generator=generator, dtype=dtype) - 1.0)

    pos = torch.tensor(SCENE_POS, dtype=dtype).expand(n_envs, -1, -1) + uniform(n_envs, n_agents, 2, scale=JITTER)
    state = TorchState(
        pos=pos.contiguous(),
        theta=uniform(n_envs, n_agents, scale=2.0),
        vel=uniform(n_envs, n_agents, 2, scale=0.3),
        speed=uniform(n_envs, n_agents, scale=0.4),
        ang_vel=uniform(n_envs, n_agents, scale=1.0),
    )
    return complete_state(state)  # with the drone fields at rest: every field is a tensor


def interior_actions(stepper: Stepper, generator, *lead: int) -> torch.Tensor:
    """Random actions within half of each agent's action bounds (no clamp active)."""
    _, high = stepper.model.action_bounds("cpu", stepper.torch_dtype)
    u = 2.0 * torch.rand(*lead, *high.shape, generator=generator, dtype=stepper.torch_dtype) - 1.0
    return 0.5 * high * u


def contact_forces(stepper: Stepper, state: TorchState, actions: torch.Tensor) -> torch.Tensor:
    """[E, A, 2] contact forces of the first substep from ``state``."""
    scratch = stepper.allocate_scratch(state.pos.shape[0], requires_grad=False)
    flag = wp.zeros(1, dtype=wp.int32, device="cpu")
    state_in = State.from_torch(TorchState(*(t.contiguous() for t in state)), stepper.scalar)
    stepper.simulate_functional(state_in, wp.from_torch(actions.contiguous()), flag, scratch=scratch)
    return wp.to_torch(scratch.forces[0]).clone()


def step_fn(stepper: Stepper):
    """``(actions, *state fields) -> 5 state fields`` for gradcheck."""

    def fn(actions, *fields):
        return tuple(warp_step(stepper, TorchState(*fields), actions))

    return fn


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


# --- gradcheck ----------------------------------------------------------------------------------


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("ctrl_mode", CTRL_MODES)
@pytest.mark.parametrize("model", MODELS)
def test_gradcheck_one_step_with_every_contact(model, ctrl_mode, integrator, generator):
    agents = [AgentConfig(model=model, ctrl_mode=ctrl_mode, radius=RADIUS)] * len(SCENE_POS)
    stepper = make_stepper(agents, substeps=2, integrator=integrator)
    state = scene_state(generator)
    actions = interior_actions(stepper, generator, 1)
    # Every agent is in contact (with its partner, an obstacle of each shape, or the wall).
    assert (contact_forces(stepper, state, actions).norm(dim=-1) > 0).all()
    assert torch.autograd.gradcheck(step_fn(stepper), leaves(actions, *state))


def test_gradcheck_multi_step_rollout_of_a_mixed_fleet(generator):
    agents = [
        AgentConfig(model=model, ctrl_mode=ctrl, radius=RADIUS)
        for model, ctrl in [
            ("holonomic", "velocity"),
            ("diff_drive", "acceleration"),
            ("kinematic_bicycle", "velocity"),
            ("holonomic", "acceleration"),
            ("diff_drive", "velocity"),
            ("kinematic_bicycle", "acceleration"),
        ]
    ]
    stepper = make_stepper(agents, substeps=2, integrator="rk4")
    state = scene_state(generator)
    actions = interior_actions(stepper, generator, 3, 1)

    def fn(actions_seq, *fields):
        final, trajectory = rollout(stepper, TorchState(*fields), actions_seq)
        return (*trajectory, *final)

    assert torch.autograd.gradcheck(fn, leaves(actions, *state))


def test_gradcheck_several_envs_and_substeps(generator):
    """Envs are independent batches of the same scene; three substeps per step."""
    agents = [AgentConfig(model="diff_drive", radius=RADIUS)] * len(SCENE_POS)
    stepper = make_stepper(agents, substeps=3)
    state = scene_state(generator, n_envs=2)
    actions = interior_actions(stepper, generator, 2, 2)

    def fn(actions_seq, pos, vel):
        return rollout(stepper, state._replace(pos=pos, vel=vel), actions_seq)[1].pos

    assert torch.autograd.gradcheck(fn, leaves(actions, state.pos, state.vel))


# --- closed forms -----------------------------------------------------------------------------


def free_agents(n_agents: int, dtype=torch.float64) -> TorchState:
    """Agents 1 m apart on a line, at rest: nothing touches within the tests below."""
    pos = torch.stack([torch.arange(n_agents, dtype=dtype), torch.zeros(n_agents, dtype=dtype)], -1)
    zeros = torch.zeros(1, n_agents, dtype=dtype)
    return complete_state(TorchState(pos.unsqueeze(0), zeros, torch.zeros(1, n_agents, 2, dtype=dtype), zeros, zeros))


def final_jacobian(stepper, state, actions, field):
    """d final.<field> / d actions as [E, A, 2, T, E, A, 2]."""
    return torch.autograd.functional.jacobian(lambda a: getattr(rollout(stepper, state, a)[0], field), actions)


def test_holonomic_velocity_control_moves_by_dt_per_unit_action(generator):
    n_steps, n_agents, dt = 4, 3, 0.1
    stepper = make_stepper([AgentConfig()] * n_agents, world=WorldConfig(), substeps=2, dt=dt)
    actions = interior_actions(stepper, generator, n_steps, 1)
    eye = torch.eye(n_agents * 2, dtype=torch.float64).view(1, n_agents, 2, 1, n_agents, 2)
    # d pos_T / d a_t = dt I for every t, exactly.
    expected = (dt * eye).unsqueeze(3).expand(-1, -1, -1, n_steps, -1, -1, -1)
    assert torch.equal(final_jacobian(stepper, free_agents(n_agents), actions, "pos"), expected)
    # d vel_T / d a_t = I for the last step, 0 before.
    expected = torch.zeros_like(expected)
    expected[:, :, :, -1] = eye
    assert torch.equal(final_jacobian(stepper, free_agents(n_agents), actions, "vel"), expected)


@pytest.mark.parametrize(("integrator", "offset"), [("euler", 0.0), ("rk4", 0.5)])
def test_holonomic_acceleration_control_is_a_double_integrator(integrator, offset, generator):
    """Semi-implicit Euler over N = T S substeps of length h: d p_N / d a(k) = h^2 (N - k) for the
    action held in substep k; RK4 integrates the constant acceleration exactly: h^2 (N - k - 1/2)."""
    n_steps, substeps, n_agents, dt = 3, 2, 2, 0.1
    h, n_sub = dt / substeps, n_steps * substeps
    agents = [AgentConfig(ctrl_mode="acceleration", max_accel=2.0, max_speed=5.0)] * n_agents
    stepper = make_stepper(agents, world=WorldConfig(), substeps=substeps, integrator=integrator, dt=dt)
    actions = interior_actions(stepper, generator, n_steps, 1)
    weight = torch.tensor(
        [sum(h * h * (n_sub - k - offset) for k in range(t * substeps, (t + 1) * substeps)) for t in range(n_steps)],
        dtype=torch.float64,
    )
    eye = torch.eye(n_agents * 2, dtype=torch.float64).view(1, n_agents, 2, 1, n_agents, 2)
    expected = weight.view(1, 1, 1, n_steps, 1, 1, 1) * eye.unsqueeze(3)
    torch.testing.assert_close(
        final_jacobian(stepper, free_agents(n_agents), actions, "pos"), expected, rtol=1e-12, atol=1e-15
    )
    # Velocity integrates each step's acceleration over dt.
    torch.testing.assert_close(
        final_jacobian(stepper, free_agents(n_agents), actions, "vel"),
        dt * eye.unsqueeze(3).expand_as(expected),
        rtol=1e-12,
        atol=1e-15,
    )


# --- where gradients stop ---------------------------------------------------------------------


def output_loss(state: TorchState, generator) -> torch.Tensor:
    """A random linear functional of every output field."""
    return sum((torch.randn(t.shape, generator=generator, dtype=t.dtype) * t).sum() for t in state)


@pytest.mark.parametrize("ctrl_mode", CTRL_MODES)
@pytest.mark.parametrize("model", ["diff_drive", "kinematic_bicycle"])
def test_saturated_actions_get_exactly_zero_finite_gradient(model, ctrl_mode, generator):
    agents = [AgentConfig(model=model, ctrl_mode=ctrl_mode, radius=RADIUS)] * len(SCENE_POS)
    stepper = make_stepper(agents)
    _, high = stepper.model.action_bounds("cpu", torch.float64)
    sign = torch.where(torch.rand(high.shape, generator=generator) < 0.5, -1.0, 1.0).double()
    actions = (3.0 * high * sign).unsqueeze(0).requires_grad_()
    output_loss(warp_step(stepper, scene_state(generator), actions), generator).backward()
    assert torch.isfinite(actions.grad).all()
    assert torch.equal(actions.grad, torch.zeros_like(actions))


@pytest.mark.parametrize("ctrl_mode", CTRL_MODES)
def test_holonomic_norm_clip_passes_only_the_tangential_gradient(ctrl_mode, generator):
    """Holonomic commands are clipped by norm: a projection onto the limit circle, whose gradient
    has no radial component (the magnitude is saturated) but keeps the direction's."""
    agents = [AgentConfig(ctrl_mode=ctrl_mode, radius=RADIUS)] * len(SCENE_POS)
    stepper = make_stepper(agents)
    _, high = stepper.model.action_bounds("cpu", torch.float64)
    angle = 2.0 * math.pi * torch.rand(len(SCENE_POS), generator=generator, dtype=torch.float64)
    actions = (3.0 * high * torch.stack([angle.cos(), angle.sin()], -1)).unsqueeze(0).requires_grad_()
    output_loss(warp_step(stepper, scene_state(generator), actions), generator).backward()
    grad = actions.grad
    assert torch.isfinite(grad).all() and (grad.norm(dim=-1) > 0).all()
    radial = (grad * actions.detach()).sum(-1) / actions.detach().norm(dim=-1)
    assert radial.abs().max() < 1e-12 * grad.norm(dim=-1).max()


def test_non_finite_actions_act_as_zero_with_zero_gradient(generator):
    agents = [AgentConfig(model=m, radius=RADIUS) for m in MODELS] * 2
    stepper = make_stepper(agents)
    state = scene_state(generator)
    clean = interior_actions(stepper, generator, 1)
    bad = clean.clone()
    bad[0, 0, 0] = math.nan
    bad[0, 2, 1] = math.inf
    bad[0, 4, 0] = -math.inf
    zeroed = torch.where(torch.isfinite(bad), bad, torch.zeros_like(bad))
    assert not invalid_actions(stepper)
    actions = bad.clone().requires_grad_()
    out = warp_step(stepper, state, actions)
    assert invalid_actions(stepper)
    reference = leaves(zeroed)[0]
    expected = warp_step(stepper, state, reference)
    for got, want in zip(out, expected, strict=True):
        assert torch.equal(got, want)
    seed = torch.Generator().manual_seed(1)
    output_loss(out, seed).backward()
    output_loss(expected, torch.Generator().manual_seed(1)).backward()
    finite = torch.isfinite(bad)
    assert torch.isfinite(actions.grad).all()
    assert torch.equal(actions.grad[~finite], torch.zeros(int((~finite).sum()), dtype=torch.float64))
    assert torch.equal(actions.grad[finite], reference.grad[finite])


def test_state_gradients_without_action_gradients(generator):
    """Any input may carry the gradient: here only the initial positions do."""
    stepper = make_stepper([AgentConfig(model="diff_drive", radius=RADIUS)] * len(SCENE_POS))
    state = scene_state(generator)
    pos = state.pos.clone().requires_grad_()
    out = warp_step(stepper, state._replace(pos=pos), interior_actions(stepper, generator, 1))
    out.pos.sum().backward()
    assert torch.isfinite(pos.grad).all() and pos.grad.abs().sum() > 0


# --- the no-grad path -------------------------------------------------------------------------


def mixed_stepper(**kwargs) -> Stepper:
    agents = [AgentConfig(model=m, ctrl_mode=c, radius=RADIUS) for m in MODELS for c in CTRL_MODES]
    return make_stepper(agents, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_no_grad_forward_equals_grad_forward_bit_for_bit(dtype, generator):
    stepper = mixed_stepper(substeps=3, integrator="rk4", dtype=dtype)
    torch_dtype = stepper.torch_dtype
    state = TorchState(*(t.to(torch_dtype) for t in scene_state(generator, n_envs=3)))
    actions = interior_actions(stepper, generator, 6, 3)
    with torch.no_grad():
        final_plain, trajectory_plain = rollout(stepper, state, actions)
        step_plain = TorchState(*(t.clone() for t in warp_step(stepper, state, actions[0])))
    final_taped, trajectory_taped = rollout(stepper, state, actions.clone().requires_grad_())
    step_taped = warp_step(stepper, state, actions[0].clone().requires_grad_())
    assert trajectory_taped.pos.requires_grad and not trajectory_plain.pos.requires_grad
    for plain, taped in [(final_plain, final_taped), (trajectory_plain, trajectory_taped), (step_plain, step_taped)]:
        for name in TorchState._fields:
            assert torch.equal(getattr(plain, name), getattr(taped, name)), name


def test_no_grad_steps_recycle_two_buffers(generator):
    stepper = mixed_stepper()
    state = scene_state(generator, n_envs=2)
    actions = interior_actions(stepper, generator, 2)
    pointers = set()
    previous = None
    with torch.no_grad():
        for _ in range(6):
            before = state.pos.clone()
            state = warp_step(stepper, state, actions)
            pointers.add(state.pos.data_ptr())
            if previous is not None:
                # The input (the previous output) was not overwritten by its own step.
                assert torch.equal(previous.pos, before)
            previous = state
    assert len(pointers) == 2


def test_nothing_requiring_grad_takes_the_no_grad_path(generator):
    stepper = mixed_stepper()
    state = scene_state(generator)
    out = warp_step(stepper, state, interior_actions(stepper, generator, 1))
    assert not out.pos.requires_grad and out.pos.grad_fn is None
    # A rollout in grad mode with nothing requiring grad recycles buffers yet returns every step.
    actions = interior_actions(stepper, generator, 4, 1)
    final, trajectory = rollout(stepper, state, actions)
    with torch.no_grad():
        expected_final, expected = rollout(stepper, state, actions)
    assert not trajectory.pos.requires_grad
    for name in TorchState._fields:
        assert torch.equal(getattr(trajectory, name), getattr(expected, name)), name
        assert torch.equal(getattr(final, name), getattr(expected_final, name)), name


# --- GradRing -----------------------------------------------------------------------------------


def ring_problem(generator):
    stepper = mixed_stepper(substeps=2, integrator="rk4")
    state = scene_state(generator, n_envs=2)
    actions = interior_actions(stepper, generator, 5, 2).requires_grad_()
    return stepper, state, actions


def plan_loss(final: TorchState, trajectory: TorchState) -> torch.Tensor:
    return final.pos.square().sum() + trajectory.vel.square().sum() + torch.sin(trajectory.theta).sum()


def test_grad_ring_reuse_gives_the_gradients_of_fresh_allocation(generator):
    stepper, state, actions = ring_problem(generator)
    ring = GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=5)
    fresh_opt = torch.optim.SGD([actions], lr=0.01)
    ring_actions = actions.detach().clone().requires_grad_()
    ring_opt = torch.optim.SGD([ring_actions], lr=0.01)
    for _ in range(3):
        fresh_opt.zero_grad()
        ring_opt.zero_grad()
        fresh_loss = plan_loss(*rollout(stepper, state, actions))
        ring_loss = plan_loss(*rollout(stepper, state, ring_actions, ring=ring))
        fresh_loss.backward()
        ring_loss.backward()
        assert torch.equal(fresh_loss, ring_loss)
        assert torch.equal(actions.grad, ring_actions.grad)
        fresh_opt.step()
        ring_opt.step()


def test_grad_ring_refuses_to_overwrite_a_live_graph(generator):
    stepper, state, actions = ring_problem(generator)
    ring = GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=5)
    first = plan_loss(*rollout(stepper, state, actions, ring=ring))
    with pytest.raises(RuntimeError, match="still used by a step whose graph is alive"):
        rollout(stepper, state, actions, ring=ring)
    first.backward()
    plan_loss(*rollout(stepper, state, actions, ring=ring)).backward()  # backpropagated: free again
    # A graph that is dropped without backward frees its slots too.
    rollout(stepper, state, actions, ring=ring)
    rollout(stepper, state, actions, ring=ring)


def test_grad_ring_detects_a_stale_retained_graph(generator):
    stepper, state, actions = ring_problem(generator)
    ring = GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=5)
    retained = plan_loss(*rollout(stepper, state, actions, ring=ring))
    retained.backward(retain_graph=True)
    plan_loss(*rollout(stepper, state, actions, ring=ring)).backward()
    with pytest.raises(RuntimeError, match="slot this step's tape reads was reused"):
        retained.backward()


def test_grad_ring_guards_the_inputs_of_chained_steps(generator):
    """Steps chained by hand through a small ring: a step never overwrites its own input's slot, and
    a retained step whose input slot was reused since cannot be replayed."""
    stepper, state, actions = ring_problem(generator)
    single = GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=1)
    first = warp_step(stepper, state, actions[0], ring=single)
    first.pos.sum().backward()  # slot 0 is free again, but holds the next step's input
    with pytest.raises(RuntimeError, match="would write the GradRing slot its own input lives in"):
        warp_step(stepper, first, actions[1], ring=single)

    pair = GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=2)
    second = warp_step(stepper, warp_step(stepper, state, actions[0], ring=pair), actions[1], ring=pair)
    second.pos.sum().backward(retain_graph=True)
    warp_step(stepper, state, actions[2], ring=pair)  # reuses slot 0: the second step's input
    with pytest.raises(RuntimeError, match="slot this step's tape reads was reused"):
        second.pos.sum().backward()


def test_grad_ring_checks_its_batch_and_capacity(generator):
    stepper, state, actions = ring_problem(generator)
    with pytest.raises(ValueError, match="capacity >= T"):
        rollout(stepper, state, actions, ring=GradRing(stepper, n_envs=2, act_dim=stepper.act_dim, capacity=4))
    with pytest.raises(ValueError, match="serves n_envs=3"):
        rollout(stepper, state, actions, ring=GradRing(stepper, n_envs=3, act_dim=stepper.act_dim, capacity=5))
    with pytest.raises(ValueError, match="act_dim must be the stepper's act_dim"):
        GradRing(stepper, n_envs=2, act_dim=3, capacity=5)
    with pytest.raises(ValueError, match="different stepper"):
        rollout(mixed_stepper(), state, actions, ring=GradRing(stepper, n_envs=2, act_dim=2, capacity=5))


# --- RolloutGraph -------------------------------------------------------------------------------


def test_rollout_graph_equals_rollout_across_iterations(generator):
    """The two-graph rollout runs the same kernels: the forward (loss) is bit-identical to the
    step-by-step rollout's and the gradients (actions and start state) agree to float64 rounding
    (the trajectory's incoming gradient and the next step's adjoint are summed in another order),
    over optimizer iterations that change the inputs between calls."""
    stepper, state, actions = ring_problem(generator)
    graph = RolloutGraph(stepper, n_envs=2, n_steps=5)
    start = TorchState(*(t.clone().requires_grad_() for t in state))
    graphed_start = TorchState(*(t.clone().requires_grad_() for t in state))
    graphed_actions = actions.detach().clone().requires_grad_()
    opt = torch.optim.SGD([actions, *start], lr=0.01)
    graphed_opt = torch.optim.SGD([graphed_actions, *graphed_start], lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        graphed_opt.zero_grad()
        loss = plan_loss(*rollout(stepper, start, actions))
        graphed_loss = plan_loss(*graph(graphed_start, graphed_actions))
        loss.backward()
        graphed_loss.backward()
        assert torch.equal(loss, graphed_loss)
        torch.testing.assert_close(graphed_actions.grad, actions.grad, rtol=1e-12, atol=1e-14)
        for field, graphed_field in zip(start, graphed_start, strict=True):
            torch.testing.assert_close(graphed_field.grad, field.grad, rtol=1e-12, atol=1e-14)
        opt.step()
        graphed_opt.step()


def test_rollout_graph_outputs_are_copies_and_stale_backward_raises(generator):
    stepper, state, actions = ring_problem(generator)
    graph = RolloutGraph(stepper, n_envs=2, n_steps=5)
    first_final, first_trajectory = graph(state, actions)
    kept = first_trajectory.pos.detach().clone()
    with torch.no_grad():
        graph(state, actions * 0.5)
    assert torch.equal(first_trajectory.pos, kept)  # the later call did not overwrite the outputs
    with pytest.raises(RuntimeError, match="ran again since the forward being backpropagated"):
        plan_loss(first_final, first_trajectory).backward()


def test_rollout_graph_checks_its_inputs(generator):
    stepper, state, actions = ring_problem(generator)
    graph = RolloutGraph(stepper, n_envs=2, n_steps=5)
    with pytest.raises(ValueError, match=r"actions_seq must be a \[T, n_envs, n_agents, act_dim\]"):
        graph(state, actions[:4])
    with pytest.raises(ValueError, match="n_steps must be an int >= 1"):
        RolloutGraph(stepper, n_envs=2, n_steps=0)
    with pytest.raises(ValueError, match="serves n_envs=3"):
        RolloutGraph(stepper, n_envs=3, n_steps=5)(state, actions)


# --- validation ---------------------------------------------------------------------------------


def test_warp_step_rejects_bad_inputs(generator):
    stepper = mixed_stepper()
    state = scene_state(generator)
    actions = interior_actions(stepper, generator, 1)
    with pytest.raises(ValueError, match=r"state.theta must have shape \[1, 6\], got \[1, 5\]"):
        warp_step(stepper, state._replace(theta=state.theta[:, :5]), actions)
    with pytest.raises(TypeError, match="state.vel must have dtype torch.float64, got torch.float32"):
        warp_step(stepper, state._replace(vel=state.vel.float()), actions)
    with pytest.raises(ValueError, match=r"actions must have shape \[n_envs, n_agents, act_dim\]"):
        warp_step(stepper, state, actions[:, :3])
    with pytest.raises(TypeError, match="state must be a TorchState"):
        warp_step(stepper, state[:3], actions)
    with pytest.raises(ValueError, match=r"actions_seq must be a \[T, n_envs, n_agents, act_dim\] tensor"):
        rollout(stepper, state, actions)


# --- GPU ----------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_float32_cuda_gradients_match_float64_cpu(generator):
    agents = [AgentConfig(model=m, ctrl_mode=c, radius=RADIUS) for m in MODELS for c in CTRL_MODES]
    cpu = make_stepper(agents, integrator="rk4")
    cuda = Stepper(agents, dt=DT, device="cuda:0", world=SCENE, substeps=2, integrator="rk4", dtype="float32")
    state = scene_state(generator, n_envs=4)
    actions = interior_actions(cpu, generator, 5, 4)

    def gradient(stepper, device, dtype):
        a = actions.detach().to(device, dtype).clone().requires_grad_()
        s0 = TorchState(*(t.to(device, dtype) for t in state))
        plan_loss(*rollout(stepper, s0, a)).backward()
        return a.grad.double().cpu()

    reference = gradient(cpu, "cpu", torch.float64)
    single = gradient(cuda, "cuda:0", torch.float32)
    torch.testing.assert_close(single, reference, rtol=1e-3, atol=1e-3 * reference.abs().max().item())


@pytest.mark.gpu
def test_cuda_grad_ring_and_no_grad_path_match_fresh(generator):
    agents = [AgentConfig(model=m, radius=RADIUS) for m in MODELS] * 2
    stepper = Stepper(agents, dt=DT, device="cuda:0", world=SCENE, substeps=2)
    state = TorchState(*(t.float().cuda() for t in scene_state(generator, n_envs=8)))
    actions = interior_actions(stepper, generator, 5, 8).float().cuda().requires_grad_()
    ring = GradRing(stepper, n_envs=8, act_dim=2, capacity=5)
    final, trajectory = rollout(stepper, state, actions)
    plan_loss(final, trajectory).backward()
    fresh = actions.grad.clone()
    actions.grad = None
    plan_loss(*rollout(stepper, state, actions, ring=ring)).backward()
    # Warp accumulates adjoints with atomics on the GPU: equal up to the order of float additions.
    torch.testing.assert_close(actions.grad, fresh, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        plain, _ = rollout(stepper, state, actions)
    assert torch.equal(plain.pos, final.pos)


def cuda_problem(generator, n_steps: int, n_envs: int):
    """A float32 CUDA stepper of every model twice, a scene state and interior actions [T, E, A, 2]."""
    stepper = Stepper(
        [AgentConfig(model=m, radius=RADIUS) for m in MODELS] * 2, dt=DT, device="cuda:0", world=SCENE, substeps=2
    )
    state = TorchState(*(t.float().cuda() for t in scene_state(generator, n_envs=n_envs)))
    return stepper, state, interior_actions(stepper, generator, n_steps, n_envs).float().cuda()


@pytest.mark.gpu
def test_user_stream_gives_the_default_stream_gradients(generator):
    stepper, state, actions = cuda_problem(generator, 8, 256)

    def gradient():
        a = actions.clone().requires_grad_()
        plan_loss(*rollout(stepper, state, a)).backward()
        return a.grad

    reference = gradient()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        on_stream = gradient()
        with torch.no_grad():
            plain = rollout(stepper, state, actions)[0].pos.clone()
    torch.cuda.synchronize()
    torch.testing.assert_close(on_stream, reference, rtol=1e-5, atol=1e-6)  # atomics: summation order
    with torch.no_grad():
        assert torch.equal(plain, rollout(stepper, state, actions)[0].pos)


@pytest.mark.gpu
def test_cuda_rollout_graph_matches_rollout(generator):
    stepper, state, actions = cuda_problem(generator, 6, 64)
    reference_actions = actions.clone().requires_grad_()
    plan_loss(*rollout(stepper, state, reference_actions)).backward()
    graph = RolloutGraph(stepper, n_envs=64, n_steps=6)
    for _ in range(2):  # the second call replays both graphs
        graphed_actions = actions.clone().requires_grad_()
        final, trajectory = graph(state, graphed_actions)
        plan_loss(final, trajectory).backward()
        torch.testing.assert_close(graphed_actions.grad, reference_actions.grad, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        assert torch.equal(final.pos, rollout(stepper, state, actions)[0].pos)
