"""The step pipeline and its execution modes (``swarp/physics/step.py``, ``swarp/physics/world.py``,
``swarp/core/launch.py``)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import warp as wp

from swarp import AgentConfig, Obstacle, Stepper, World, WorldConfig
from swarp.runtime.launch import LAUNCH_DEBUG_ENV, LAUNCH_MODE_ENV, Recorder
from swarp.runtime.plan import ExecutionPlan

#: float32 against float64 over ``N_STEPS`` steps of a world with contacts [m] / [rad].
PRECISION_TOL = 2e-4
N_STEPS = 50

FLEET = [
    AgentConfig(radius=0.08),
    AgentConfig(model="diff_drive", radius=0.06),
    AgentConfig(model="kinematic_bicycle", radius=0.07, wheelbase=0.15),
    AgentConfig(ctrl_mode="acceleration", radius=0.05, drag=0.3),
    AgentConfig(model="diff_drive", ctrl_mode="acceleration", radius=0.08),
    AgentConfig(model="kinematic_bicycle", ctrl_mode="acceleration", radius=0.06),
] * 3
ARENA = WorldConfig(
    bounds=1.0,
    obstacles=(Obstacle.circle((0.3, 0.3), 0.15), Obstacle.box((-0.4, 0.1), (0.1, 0.3), 0.4)),
    collision_k=200.0,
    max_neighbors=6,
)


def make_world(*, dtype="float32", n_envs=4, world=ARENA, integrator="rk4", substeps=2, plan=None) -> World:
    stepper = Stepper(
        FLEET, dt=0.05, device="cpu", world=world, substeps=substeps, integrator=integrator, dtype=dtype, plan=plan
    )
    return World(stepper, n_envs)


def initial_state(rng, n_envs: int) -> dict[str, np.ndarray]:
    """A crowded start: agents packed in the middle of the arena, some touching."""
    n_agents = len(FLEET)
    return {
        "pos": rng.uniform(-0.6, 0.6, (n_envs, n_agents, 2)),
        "theta": rng.uniform(-math.pi, math.pi, (n_envs, n_agents)),
        "speed": rng.uniform(-0.3, 0.3, (n_envs, n_agents)),
    }


def action_sequence(rng, n_envs: int, n_steps: int = N_STEPS) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, (n_steps, n_envs, len(FLEET), 2))


def run(world: World, start: dict, actions: np.ndarray) -> list[dict[str, torch.Tensor]]:
    """Roll out ``actions`` [T, E, A, 2] from ``start``; return the state after every step."""
    dtype = world.stepper.torch_dtype
    world.set_state(**{name: torch.as_tensor(value, dtype=dtype) for name, value in start.items()})
    trajectory = []
    for step_actions in actions:
        world.step(torch.as_tensor(step_actions, dtype=dtype))
        snapshot = {name: value.clone() for name, value in world.state.torch._asdict().items()}
        snapshot["forces"] = wp.to_torch(world.forces).clone()
        snapshot["nbr"] = world.neighbor_lists()[0].clone()
        trajectory.append(snapshot)
    return trajectory


def assert_bit_identical(first: list[dict], second: list[dict]) -> None:
    assert len(first) == len(second)
    for t, (a, b) in enumerate(zip(first, second, strict=True)):
        for name in a:
            assert torch.equal(a[name], b[name]), f"step {t}: {name} differs"


@pytest.mark.parametrize("neighbor_method", ["brute", "grid"])
def test_same_inputs_give_bit_identical_trajectories(rng, neighbor_method):
    n_envs = 4
    world_config = dataclasses.replace(ARENA, neighbor_method=neighbor_method)
    start, actions = initial_state(rng, n_envs), action_sequence(rng, n_envs, 20)
    first = run(make_world(world=world_config, n_envs=n_envs), start, actions)
    second = run(make_world(world=world_config, n_envs=n_envs), start, actions)
    assert_bit_identical(first, second)
    # The world really is busy: agents touch each other, obstacles or walls.
    assert any(bool((snapshot["forces"] != 0).any()) for snapshot in first)


def test_replay_and_eager_are_bit_identical(rng, monkeypatch):
    n_envs = 3
    start, actions = initial_state(rng, n_envs), action_sequence(rng, n_envs, 20)
    eager_world = make_world(n_envs=n_envs, plan=ExecutionPlan(launch="eager"))
    eager = run(eager_world, start, actions)
    assert eager_world._program is None
    replay_world = make_world(n_envs=n_envs)
    assert replay_world.stepper.plan.launch == "replay"
    replayed = run(replay_world, start, actions)
    assert replay_world.stepper.plan.fused_substep  # the neighbor build, then two substeps of one launch
    assert replay_world._program is not None and replay_world._program.n_launches == 3
    assert_bit_identical(eager, replayed)
    # Debug mode validates the recorded arguments before every replay; nothing is stale here.
    monkeypatch.setenv(LAUNCH_DEBUG_ENV, "1")
    debug_world = make_world(n_envs=n_envs)
    assert_bit_identical(eager, run(debug_world, start, actions))


def test_the_launch_mode_escape_hatch_is_read_once_and_checked(monkeypatch):
    monkeypatch.setenv(LAUNCH_MODE_ENV, "eager")
    world = make_world(n_envs=1)
    monkeypatch.delenv(LAUNCH_MODE_ENV)
    world.step(torch.zeros(1, len(FLEET), 2))
    assert world.stepper.plan.launch == "eager" and world._program is None  # decided when built
    monkeypatch.setenv(LAUNCH_MODE_ENV, "graph")
    with pytest.raises(ValueError, match="SWARP_LAUNCH_MODE must be 'replay' or 'eager'"):
        make_world(n_envs=1)


def test_functional_step_matches_in_place_step(rng):
    """The tape-safe path (fresh arrays every substep) computes the very same bits as the in-place one."""
    n_envs = 3
    world = make_world(n_envs=n_envs)
    stepper = world.stepper
    start = initial_state(rng, n_envs)
    world.set_state(**{name: torch.as_tensor(value, dtype=torch.float32) for name, value in start.items()})
    for step_actions in action_sequence(rng, n_envs, 5):
        before = stepper.allocate_state(n_envs)
        before.assign(world.state)
        actions = torch.as_tensor(step_actions, dtype=torch.float32)
        flag = wp.zeros(1, dtype=wp.int32, device="cpu")
        after = stepper.simulate_functional(before, wp.from_torch(actions), flag, requires_grad=False)
        world.step(actions)
        # The functional step writes the fields the fleet integrates (no drone fields here).
        for name in after.fields:
            assert torch.equal(getattr(after.torch, name), getattr(world.state.torch, name)), name
        assert not torch.equal(before.torch.pos, world.state.torch.pos)


def test_float32_agrees_with_float64(rng):
    n_envs = 3
    start, actions = initial_state(rng, n_envs), action_sequence(rng, n_envs)
    single = run(make_world(dtype="float32", n_envs=n_envs), start, actions)
    double = run(make_world(dtype="float64", n_envs=n_envs), start, actions)
    assert any(bool((snapshot["forces"] != 0).any()) for snapshot in double)
    for name in ("pos", "vel", "speed", "ang_vel"):
        torch.testing.assert_close(
            single[-1][name].double(), double[-1][name], atol=PRECISION_TOL, rtol=0, msg=lambda m, n=name: f"{n}: {m}"
        )
    dtheta = torch.remainder(single[-1]["theta"].double() - double[-1]["theta"] + math.pi, 2 * math.pi) - math.pi
    assert dtheta.abs().max() < PRECISION_TOL


# --- input validation ---------------------------------------------------------------------------


def test_step_rejects_bad_actions():
    world = make_world(n_envs=2)
    n_agents = len(FLEET)
    with pytest.raises(ValueError, match=rf"shape \[n_envs, n_agents, act_dim\] = \[2, {n_agents}, 2\], got \[2, 2\]"):
        world.step(torch.zeros(2, 2))
    with pytest.raises(ValueError, match=rf"= \[2, {n_agents}, 2\], got \[1, {n_agents}, 2\]"):
        world.step(torch.zeros(1, n_agents, 2))
    with pytest.raises(TypeError, match="actions must have dtype torch.float32, got torch.float64"):
        world.step(torch.zeros(2, n_agents, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="actions must be a torch.Tensor, got ndarray"):
        world.step(np.zeros((2, n_agents, 2), np.float32))
    with pytest.raises(TypeError, match="actions must be a torch.Tensor, got list"):
        world.step([[0.0, 0.0]] * n_agents)
    assert torch.all(world.state.torch.pos == 0), "a rejected step must not move anything"


def test_set_state_rejects_wrong_shapes():
    world = make_world(n_envs=2)
    with pytest.raises(ValueError, match=rf"pos must have shape \[2, {len(FLEET)}, 2\]"):
        world.set_state(pos=torch.zeros(2, len(FLEET)))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"agents": []}, ValueError, "agents must hold at least one AgentConfig"),
        ({"agents": ["holonomic"]}, TypeError, r"agents\[0\] must be an AgentConfig"),
        ({"dt": 0.0}, ValueError, r"dt must be a finite number > 0"),
        ({"dt": float("nan")}, ValueError, r"dt must be a finite number > 0"),
        ({"dt": float("inf")}, ValueError, r"dt must be a finite number > 0"),
        ({"substeps": 0}, ValueError, "substeps must be an int >= 1"),
        ({"substeps": 2.0}, ValueError, "substeps must be an int >= 1"),
        ({"dtype": "float16"}, ValueError, "dtype must be float32 or float64"),
        ({"device": "tpu"}, ValueError, "device must be 'cpu', 'cuda' or 'cuda:N'"),
        ({"world": {"bounds": 1.0}}, TypeError, "world must be a WorldConfig"),
    ],
)
def test_stepper_rejects_bad_arguments(kwargs, error, message):
    arguments = {"agents": [AgentConfig()], "device": "cpu", **kwargs}
    with pytest.raises(error, match=message):
        Stepper(**arguments)


def test_world_rejects_bad_batch_size():
    with pytest.raises(ValueError, match="n_envs must be an int >= 1"):
        World(Stepper([AgentConfig()], device="cpu"), 0)


# --- recorded programs ------------------------------------------------------------------------


def test_program_validation_detects_replaced_arrays(monkeypatch):
    world = make_world(n_envs=2)
    actions = torch.zeros(2, len(FLEET), 2)
    world.step(actions)
    program = world._program
    assert program is not None
    program.validate()  # freshly recorded: valid
    world.step(actions)
    assert world._program is program, "later steps replay the same program"
    # Reallocating the obstacle arrays without invalidating leaves the program pointing at the old ones.
    world.model.set_obstacles([[Obstacle.circle((0.0, 0.0), 0.5)]])
    with pytest.raises(RuntimeError, match="stale recorded launch"):
        program.validate()
    monkeypatch.setenv(LAUNCH_DEBUG_ENV, "1")
    with pytest.raises(RuntimeError, match="stale recorded"):
        world.step(actions)
    # After invalidation the next step records against the new arrays.
    world.invalidate()
    world.step(actions)
    assert world._program is not program
    world._program.validate()
    world.step(actions)


def test_program_validation_detects_changed_values():
    """Scalars are baked into a recording too: a different stepper time step makes it stale."""
    world = make_world(n_envs=1)
    world.step(torch.zeros(1, len(FLEET), 2))
    world.stepper.dt = 0.01
    with pytest.raises(RuntimeError, match="stale recorded launch"):
        world._program.validate()


def test_program_without_source_cannot_validate(monkeypatch):
    monkeypatch.delenv(LAUNCH_DEBUG_ENV, raising=False)
    recorder = Recorder()
    flag = wp.full(1, 7, dtype=wp.int32, device="cpu")
    recorder.zero(flag)
    program = recorder.program()
    flag.fill_(7)
    program()
    assert flag.numpy()[0] == 0, "the replay re-runs the recorded command"
    with pytest.raises(RuntimeError, match="recorded without a source"):
        program.validate()
    # Debug replays validate first, so they refuse a program that cannot be checked.
    monkeypatch.setenv(LAUNCH_DEBUG_ENV, "1")
    with pytest.raises(RuntimeError, match="recorded without a source"):
        program()


@pytest.mark.parametrize("substeps", [1, 2, 4])
@pytest.mark.parametrize("ctrl_mode", ["velocity", "acceleration"])
def test_default_neighbor_radius_misses_no_contact(substeps, ctrl_mode):
    # Lists sized by Model.contact_radius must see every contact that all-pairs lists see: fast
    # agents crossing a crowded box at full speed, compared bit for bit with a huge list radius.
    n_envs, n_agents = 4, 24
    agents = [AgentConfig(ctrl_mode=ctrl_mode, radius=0.05, max_speed=2.0, max_accel=20.0)] * n_agents

    def run(all_pairs: bool):
        world = WorldConfig(bounds=0.6, neighbor_radius=10.0 if all_pairs else None, max_neighbors=n_agents)
        stepper = Stepper(agents, dt=0.1, device="cpu", world=world, substeps=substeps, dtype="float64")
        if all_pairs:
            stepper.model.near_radius = 10.0  # contacts scan every agent of the env
        w = World(stepper, n_envs)
        gen = torch.Generator().manual_seed(5)
        w.set_state(pos=(torch.rand(n_envs, n_agents, 2, generator=gen, dtype=torch.float64) - 0.5))
        trajectory = []
        for _ in range(40):
            # Everyone heads for the centre at full speed, then scatters: many head-on contacts.
            target = -w.state.torch.pos if len(trajectory) % 10 < 5 else w.state.torch.pos
            w.step((target * 100.0).contiguous())
            trajectory.append(w.state.torch.pos.clone())
        return torch.stack(trajectory), w

    default, world = run(False)
    everyone, reference = run(True)
    assert world.model.near_radius < 0.6 and reference.model.near_radius > 1.7  # really different scans
    gaps = torch.cdist(default, default) + torch.eye(n_agents, dtype=default.dtype) * 1e9  # [T, E, A, A]
    assert (gaps < 0.1).sum() > 100  # plenty of contacts happened
    assert torch.equal(default, everyone)


def test_one_agent_per_thread_and_one_env_per_thread_agree():
    # The CPU walks a whole env per thread; CUDA launches one thread per agent (the plan's
    # ``one_thread_per_env``). Same results.
    agents = [AgentConfig(model=m) for m in ("holonomic", "diff_drive", "kinematic_bicycle")] * 4
    world_cfg = WorldConfig(bounds=0.5, obstacles=(Obstacle.circle((0.1, 0.1), 0.1),))

    def run(plan=None):
        w = World(Stepper(agents, device="cpu", world=world_cfg, substeps=2, plan=plan), 6)
        gen = torch.Generator().manual_seed(2)
        w.set_state(pos=torch.rand(6, len(agents), 2, generator=gen) - 0.5)
        for _ in range(20):
            w.step(torch.rand(6, len(agents), 2, generator=gen) * 2 - 1)
        return w.state.torch.pos.clone(), w.neighbor_lists()[0].clone()

    grouped = run()
    spread = run(ExecutionPlan(one_thread_per_env=False))
    assert torch.equal(grouped[0], spread[0]) and torch.equal(grouped[1], spread[1])
