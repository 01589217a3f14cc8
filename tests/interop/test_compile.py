"""The ``swarp::step`` custom op (``swarp/interop/compile.py``): eager parity, gradcheck through
``torch.compile``, no graph breaks, and the op's registration (``torch.library.opcheck``).

CPU tests compile with the ``aot_eager`` backend: Dynamo tracing, graph breaks and AOTAutograd's
handling of the op are the same as with Inductor, minus a C++ build per test; Inductor itself is
exercised on the GPU machine.
"""

import warnings

import pytest
import torch

from swarp import AgentConfig, Obstacle, Stepper, TorchState, WorldConfig, warp_step
from swarp.core.types import complete_state
from swarp.physics.compile import compiled_warp_step, register_stepper

BACKEND = "aot_eager"
RADIUS = 0.1
WORLD = WorldConfig(
    bounds=1.0, obstacles=(Obstacle.circle((0.45, 0.0), 0.2), Obstacle.segment((-0.5, -0.3), (0.5, -0.3), 0.02))
)
FLEET = [
    AgentConfig(radius=RADIUS),
    AgentConfig(model="diff_drive", radius=RADIUS),
    AgentConfig(model="kinematic_bicycle", ctrl_mode="acceleration", radius=RADIUS),
    AgentConfig(ctrl_mode="acceleration", radius=RADIUS),
]
#: Positions [m]: agents 0 and 1 overlap, 2 touches the circle, 3 touches the segment.
START = [(0.0, 0.0), (0.15, 0.02), (0.3, 0.1), (-0.2, -0.22)]


def make_stepper(device="cpu", dtype="float64") -> Stepper:
    return Stepper(FLEET, dt=0.05, device=device, world=WORLD, substeps=2, integrator="rk4", dtype=dtype)


def make_problem(generator, n_envs=2, n_steps=3, device="cpu", dtype=torch.float64):
    n_agents = len(FLEET)

    def uniform(*shape, scale):
        return scale * (2 * torch.rand(*shape, generator=generator, dtype=torch.float64) - 1)

    pos = torch.tensor(START, dtype=torch.float64).expand(n_envs, -1, -1) + uniform(n_envs, n_agents, 2, scale=0.005)
    state = TorchState(
        pos.contiguous(),
        uniform(n_envs, n_agents, scale=2.0),
        uniform(n_envs, n_agents, 2, scale=0.3),
        uniform(n_envs, n_agents, scale=0.3),
        uniform(n_envs, n_agents, scale=1.0),
    )
    actions = uniform(n_steps, n_envs, n_agents, 2, scale=0.4)
    return TorchState(*(t.to(device, dtype) for t in complete_state(state))), actions.to(device, dtype)


def loop(step, stepper):
    """A T-step rollout through ``step`` and a scalar loss of it."""

    def run(state: TorchState, actions: torch.Tensor):
        for t in range(actions.shape[0]):
            state = step(stepper, state, actions[t])
        return state

    return run


def test_compiled_loop_matches_eager_warp_step_bit_for_bit(generator):
    stepper = make_stepper()
    register_stepper(stepper)
    state, actions = make_problem(generator)
    compiled = torch.compile(loop(compiled_warp_step, stepper), fullgraph=True, backend=BACKEND)
    eager_actions = actions.clone().requires_grad_()
    compiled_actions = actions.clone().requires_grad_()
    eager_out = loop(warp_step, stepper)(state, eager_actions)
    compiled_out = compiled(state, compiled_actions)
    for name in TorchState._fields:
        assert torch.equal(getattr(eager_out, name), getattr(compiled_out, name)), name
    weights = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in eager_out]
    sum((w * t).sum() for w, t in zip(weights, eager_out, strict=True)).backward()
    sum((w * t).sum() for w, t in zip(weights, compiled_out, strict=True)).backward()
    assert torch.equal(eager_actions.grad, compiled_actions.grad)


def test_gradcheck_through_torch_compile(generator):
    stepper = make_stepper()
    register_stepper(stepper)
    state, actions = make_problem(generator, n_envs=1, n_steps=2)
    compiled = torch.compile(loop(compiled_warp_step, stepper), fullgraph=True, backend=BACKEND)

    def fn(actions_seq, pos, vel, speed):
        return tuple(compiled(state._replace(pos=pos, vel=vel, speed=speed), actions_seq))

    inputs = [t.clone().requires_grad_() for t in (actions, state.pos, state.vel, state.speed)]
    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.slow
def test_the_compiled_loop_has_no_graph_break(generator):
    stepper = make_stepper()
    register_stepper(stepper)
    state, actions = make_problem(generator)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(loop(compiled_warp_step, stepper))(state, actions.requires_grad_())
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1
    # For contrast: the autograd.Function around raw Warp launches is opaque to Dynamo (which warns
    # about what it cannot trace in there).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch._dynamo.explain(loop(warp_step, stepper))(state, actions).graph_break_count > 0


def test_op_registration_passes_opcheck(generator):
    stepper = make_stepper()
    stepper_id = register_stepper(stepper)
    state, actions = make_problem(generator, n_envs=1)
    args = (stepper_id, *(t.clone().requires_grad_() for t in state), actions[0].clone().requires_grad_())
    results = torch.library.opcheck(torch.ops.swarp.step.default, args)
    assert set(results.values()) == {"SUCCESS"}, results


def test_register_stepper_is_idempotent_and_checks_its_argument():
    stepper = make_stepper()
    assert register_stepper(stepper) == register_stepper(stepper)
    assert register_stepper(make_stepper()) != register_stepper(stepper)
    with pytest.raises(TypeError, match="stepper must be a Stepper"):
        register_stepper("stepper")


def test_compiling_an_unregistered_stepper_is_a_clear_error(generator):
    stepper = make_stepper()
    state, actions = make_problem(generator)
    compiled = torch.compile(loop(compiled_warp_step, stepper), fullgraph=True, backend=BACKEND)
    with pytest.raises(Exception, match="call register_stepper"):
        compiled(state, actions)


def test_eager_calls_validate_their_inputs(generator):
    stepper = make_stepper()
    state, actions = make_problem(generator)
    with pytest.raises(TypeError, match="actions must have dtype torch.float64"):
        compiled_warp_step(stepper, state, actions[0].float())
    with pytest.raises(ValueError, match=r"state.pos must have shape \[2, 4, 2\]"):
        compiled_warp_step(stepper, state._replace(pos=state.pos[:, :, :1]), actions[0])


@pytest.mark.gpu
def test_inductor_on_cuda_matches_eager(generator):
    stepper = make_stepper(device="cuda:0", dtype="float32")
    register_stepper(stepper)
    state, actions = make_problem(generator, n_envs=64, n_steps=5, device="cuda:0", dtype=torch.float32)
    compiled = torch.compile(loop(compiled_warp_step, stepper), fullgraph=True)
    eager_actions = actions.clone().requires_grad_()
    compiled_actions = actions.clone().requires_grad_()
    eager_out = loop(warp_step, stepper)(state, eager_actions)
    compiled_out = compiled(state, compiled_actions)
    for name in TorchState._fields:
        assert torch.equal(getattr(eager_out, name), getattr(compiled_out, name)), name
    eager_out.pos.sum().backward()
    compiled_out.pos.sum().backward()
    torch.testing.assert_close(eager_actions.grad, compiled_actions.grad)
