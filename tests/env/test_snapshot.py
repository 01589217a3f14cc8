"""Snapshots (``Environment.get_state`` / ``set_state``, ``swarp/env/environment.py``).

A restore brings back everything that decides the next step: after ``set_state`` the env replays
100 steps bit for bit, whatever happened between the snapshot and the restore (more steps, new
agent parameters, a reseeded reset), for every scenario and optional feature. A snapshot that
``get_state`` could not have produced is rejected, naming the entry, before anything is copied.
"""

import math
import re

import pytest
import torch

import swarp
from swarp.core.params import PARAM_NAMES, ParamRandomization
from tests.support import assert_bit_identical, lidar_refused, random_actions, record

N_ENVS = 4
#: Episode length [steps]: several episodes end (and, with randomized parameters, re-draw) inside a replay.
EPISODE = 15
SEED = 3
#: Steps before the snapshot, steps recorded after it, steps that perturb the env before the restore.
WARMUP_STEPS, REPLAY_STEPS, PERTURB_STEPS = 9, 100, 7
MASS, MAX_SPEED = PARAM_NAMES.index("mass"), PARAM_NAMES.index("max_speed")

#: The optional features, each alone: agent parameters shared, per env, re-drawn every episode; lidar.
FEATURES = {
    "default": {},
    "per_env_params": {"per_env_params": True},
    "randomize_params": {
        "randomize_params": ParamRandomization({"mass": (0.5, 2.0), "max_speed": (0.5, 1.0)}, relative=True)
    },
    "lidar": {"lidar_rays": 4},
}


def scenario_options(name: str) -> dict:
    """Few agents (give_way and speaker_listener are two-agent tasks); navigation with obstacles in
    per-env slots."""
    options = {"n_agents": 2 if name in ("give_way", "speaker_listener") else 3}
    if name == "navigation":
        options["n_obstacles"] = 2
    return options


def make(name: str, **kwargs) -> swarp.Environment:
    options = dict(n_envs=N_ENVS, device="cpu", seed=SEED, auto_reset=True, max_steps=EPISODE)
    options.update(scenario_options(name))
    options.update(kwargs)
    return swarp.make(name, **options)


def in_bounds_actions(env: swarp.Environment, generator: torch.Generator, n_steps: int) -> list[torch.Tensor]:
    """Uniform random actions inside ``env.action_bounds``."""
    return [random_actions(env, generator, overshoot=0.0) for _ in range(n_steps)]


def perturb(env: swarp.Environment, generator: torch.Generator) -> None:
    """Change everything a restore must undo: more steps, a reseeded reset, new agent parameters."""
    for actions in in_bounds_actions(env, generator, PERTURB_STEPS):
        env.step(actions)
    env.reset(seed=SEED + 1)
    base = env.configured_params()
    env.set_agent_params(mass=1.5 * base[..., MASS], max_speed=0.5 * base[..., MAX_SPEED])


def check_replay(env: swarp.Environment, generator: torch.Generator) -> None:
    """Snapshot, record ``REPLAY_STEPS`` steps, perturb, restore, replay the same actions: every
    output (obs, reward, flags, info with ``final_obs``) and the whole state, bit for bit."""
    for actions in in_bounds_actions(env, generator, WARMUP_STEPS):
        env.step(actions)
    snapshot = env.get_state()
    actions = in_bounds_actions(env, generator, REPLAY_STEPS)
    expected = [record(env, env.step(a)) for a in actions]
    assert sum(int(row["truncated"].sum()) for row in expected) >= 2 * N_ENVS, "episodes must end in the replay"
    perturb(env, generator)
    assert not torch.equal(env.agent_params, snapshot["env.agent_params"])
    env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [snapshot])
    assert_bit_identical(expected, [record(env, env.step(a)) for a in actions])


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("name", swarp.scenario_names())
def test_a_restore_replays_every_scenario_bit_for_bit(name, feature, generator):
    if FEATURES[feature].get("lidar_rays") and lidar_refused(name):
        return
    check_replay(make(name, **FEATURES[feature]), generator)


#: The torch reference, parameters shared, per env and re-drawn, on planar agents, bodies and drones.
#: Its lidar (the torch scan, 8 s here) only fills observation columns, which every case compares.
TORCH_CASES = [("navigation", "per_env_params")] + [
    (name, feature)
    for name in ("navigation", "transport", "drone_navigation")
    for feature in ("default", "randomize_params")
]


@pytest.mark.parametrize("name, feature", TORCH_CASES)
def test_a_restore_replays_the_torch_reference_bit_for_bit(name, feature, generator):
    env = make(name, fused=False, **FEATURES[feature])
    assert not env.fused
    check_replay(env, generator)


@pytest.mark.parametrize("feature", list(FEATURES))
def test_a_restore_replays_starts_prepared_ahead_bit_for_bit(feature, generator):
    """Starts prepared ahead are re-prepared at the first step after a restore: the same bits as
    the ones the snapshot's episode counters had prepared."""
    env = make("navigation", n_obstacles=0, plan={"reset_ahead": True}, **FEATURES[feature])
    assert env.launches.step_end.prepares_ahead
    check_replay(env, generator)


def test_the_scenarios_cover_bodies_and_drones():
    """The replay of every scenario covers movable bodies and drones (their state fields)."""
    fields = {name: make(name).world.state.fields for name in ("balance", "push_t", "transport", "drone_navigation")}
    assert all("body_pos" in fields[name] for name in ("balance", "push_t", "transport"))
    assert make("drone_navigation").stepper.model.has_drones and "quat" in fields["drone_navigation"]


def test_a_restore_brings_back_the_envs_awaiting_a_reset(generator):
    """Without auto-reset, finished envs wait for the caller's ``reset_at(env.done)``: ``done``
    comes back with the snapshot (rebuilt from its flags), so the caller restarts the same envs."""
    env = make("navigation", auto_reset=False, max_steps=4)
    actions = in_bounds_actions(env, generator, 4)
    for a in actions[:2]:
        env.step(a)
    env.reset_at(torch.tensor([True, False, True, False]))
    for a in actions[2:]:
        env.step(a)
    snapshot = env.get_state()
    assert env.done.tolist() == [False, True, False, True]
    expected = env.reset_at(env.done).clone()
    env.reset()
    assert not bool(env.done.any())
    env.set_state(snapshot)
    assert torch.equal(env.done, snapshot["env.terminated"] | snapshot["env.truncated"])
    assert torch.equal(env.reset_at(env.done), expected)


def test_a_restore_leaves_the_sticky_flags_raised(generator):
    """Diagnostic flags are no part of a snapshot (they decide nothing): they keep what they saw."""
    env = make("navigation")
    snapshot = env.get_state()
    actions = in_bounds_actions(env, generator, 1)[0]
    actions[1, 0, 0] = math.nan
    env.step(actions)
    assert bool(env.invalid_actions())
    env.set_state(snapshot)
    assert bool(env.invalid_actions())
    assert_bit_identical([env.get_state()], [snapshot])


# --- rejected snapshots ----------------------------------------------------------------------------


def validation_env() -> swarp.Environment:
    """Navigation with obstacles in per-env slots and auto-reset (every kind of entry)."""
    return make("navigation", n_agents=4)


@pytest.mark.parametrize(
    "key, index, bad",
    [
        ("state.pos", (2, 1, 0), math.nan),
        ("state.quat", (0, 3, 2), math.inf),
        ("env.agent_params", (0, 3, MASS), math.inf),
        ("obstacles.center", (1, 0, 1), -math.inf),
        ("env.obs", (3, 2, 5), math.nan),
        ("env.final_obs", (0, 0, 0), math.nan),
        ("env.reward", (1, 2), math.nan),
        ("scenario.goals", (2, 3, 1), math.inf),
        ("info.dist_to_goal", (0, 1), math.nan),
    ],
)
def test_set_state_rejects_non_finite_values_naming_the_first(key, index, bad):
    env = validation_env()
    before = env.get_state()
    snapshot = env.get_state()
    snapshot[key][index] = bad
    snapshot[key][(-1,) * len(index)] = bad  # a later one: the message names the first
    message = f"snapshot['{key}'] must be finite, got {bad} at index {list(index)}"
    with pytest.raises(ValueError, match=re.escape(message)):
        env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [before])


@pytest.mark.parametrize(
    "key, index, bad, expected",
    [
        ("env.seed", (0,), -1, "in [0, 2^31)"),
        ("env.episode", (3,), -1, ">= 0"),
        ("env.step_count", (1,), -5, ">= 0"),
        ("obstacles.shape", (2, 1), 9, "a shape code in [0, 3]"),
        ("obstacles.size", (0, 1, 0), -0.5, ">= 0 [m]"),
    ],
)
def test_set_state_rejects_counters_and_codes_get_state_cannot_produce(key, index, bad, expected):
    env = validation_env()
    before = env.get_state()
    snapshot = env.get_state()
    snapshot[key][index] = bad
    with pytest.raises(ValueError, match=re.escape(f"snapshot['{key}'] must be {expected}, got {bad} at index")):
        env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [before])


@pytest.mark.parametrize(
    "column, value, match",
    [("mass", 0.0, "mass must be > 0"), ("radius", 1.0, "radius max 1.0 exceeds"), ("max_steer", 2.0, "max_steer")],
)
@pytest.mark.parametrize("per_env_params", [False, True], ids=["shared", "per_env"])
def test_set_state_checks_parameters_as_set_agent_params_does(per_env_params, column, value, match):
    env = make("navigation", per_env_params=per_env_params)
    with pytest.raises(ValueError, match=match):
        env.set_agent_params(**{column: value})
    before = env.get_state()
    snapshot = env.get_state()
    snapshot["env.agent_params"][-1, 0, PARAM_NAMES.index(column)] = value
    with pytest.raises(ValueError, match=re.escape("snapshot['env.agent_params']: ") + match):
        env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [before])


def test_snapshots_wait_for_a_pending_send(generator):
    """A pending ``send`` is rewriting the buffers: neither a snapshot nor a restore may run."""
    env = make("navigation")
    snapshot = env.get_state()
    env.send(in_bounds_actions(env, generator, 1)[0])
    with pytest.raises(RuntimeError, match=r"get_state\(\) was called while a send\(\) is pending"):
        env.get_state()
    with pytest.raises(RuntimeError, match=r"set_state\(\) was called while a send\(\) is pending"):
        env.set_state(snapshot)
    env.recv()
    env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [snapshot])


def test_set_state_copies_values_without_their_autograd_history():
    """Entries that require grad (a snapshot edited by a differentiable computation) restore their
    values only: the env's buffers stay plain tensors."""
    env = make("navigation")
    snapshot = {k: v.clone().requires_grad_() if v.is_floating_point() else v for k, v in env.get_state().items()}
    env.set_state(snapshot)
    assert not any(t.requires_grad for t in env.snapshots.tensors().values())
    assert_bit_identical([env.get_state()], [{k: v.detach() for k, v in snapshot.items()}])


@pytest.mark.gpu
def test_a_snapshot_restores_across_devices(generator):
    """A snapshot's tensors may live on another device: a CUDA env's snapshot restores a CPU env
    and the other way round, value for value."""
    cpu, cuda = make("navigation"), make("navigation", device="cuda:0", seed=SEED + 1)
    for env in (cpu, cuda):
        for actions in in_bounds_actions(env, generator, 5):
            env.step(actions.to(env.torch_device))
    for source, target in ((cuda, cpu), (cpu, cuda)):
        snapshot = source.get_state()
        target.set_state(snapshot)
        restored = target.get_state()
        assert all(value.device == target.torch_device for value in restored.values())
        assert_bit_identical([{k: v.cpu() for k, v in restored.items()}], [{k: v.cpu() for k, v in snapshot.items()}])
