"""The Environment (``swarp/env/environment.py``, ``runtime.py``, ``episode.py``): determinism across
execution modes and seeds, snapshots, auto-reset semantics, host-sync freedom, input validation,
the scenario registry, and the CUDA graph path."""

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import swarp
from swarp.core.rng import INV_2_24, uniform_u24_torch
from swarp.runtime.launch import LAUNCH_DEBUG_ENV
from swarp.scenarios.framework import base as scenario_base
from tests.support import (
    DEVICES,
    MAX_STEPS,
    N_AGENTS,
    N_ENVS,
    N_STEPS,
    PATHS,
    assert_bit_identical,
    assert_no_steady_state_allocations,
    count_events,
    goal_policy,
    make_env,
    noise_sequence,
    record,
    rollout,
    step_and_reset_without_host_transfers,
    without_stale_rows,
)

# --- determinism ---------------------------------------------------------------------------------


@PATHS
def test_replay_and_eager_are_bit_identical(fused, monkeypatch, generator):
    eager_env = make_env(fused=fused, auto_reset=True, plan={"launch": "eager"})
    assert eager_env.execution_mode == "eager"
    noise = noise_sequence(eager_env, N_STEPS, generator)
    eager = rollout(eager_env, noise)
    terminated, truncated = count_events(eager)
    assert terminated > 0 and truncated > 0, "the rollout should cross successes and time limits"

    replay_env = make_env(fused=fused, auto_reset=True, use_graph=False)
    assert replay_env.execution_mode == "replay"
    assert_bit_identical(eager, rollout(replay_env, noise))
    # The default: a graph (Warp's CPU graphs here) for the fused path, replay for the torch path.
    default_env = make_env(fused=fused, auto_reset=True)
    assert default_env.execution_mode == ("graph" if fused else "replay")
    assert_bit_identical(eager, rollout(default_env, noise))
    program = replay_env.launches.step_seq._program if fused else replay_env.world._program
    assert program is not None and program.n_launches >= 2  # at least the fused substep and a neighbor build

    # Debug mode re-traces the launch sequence before every replay: nothing recorded went stale.
    monkeypatch.setenv(LAUNCH_DEBUG_ENV, "1")
    assert_bit_identical(
        eager, rollout(make_env(fused=fused, auto_reset=True, use_graph=False), noise[:50]) + eager[50:]
    )


def test_same_seed_gives_same_bits_and_different_seeds_differ(generator):
    first = make_env(seed=5, auto_reset=True)
    noise = noise_sequence(first, 60, generator)
    initial = first.obs.clone()
    trajectory = rollout(first, noise)
    assert_bit_identical(trajectory, rollout(make_env(seed=5, auto_reset=True), noise))

    other = make_env(seed=6, auto_reset=True)
    assert not torch.equal(other.obs, initial)
    assert not torch.equal(other.scenario.goals, trajectory[0]["scenario.goals"])

    # reset(seed=s) restarts the reset stream: the very first episode comes back, whatever happened since.
    obs, _ = first.reset(seed=5)
    assert torch.equal(obs, initial)
    assert bool((first.step_count == 0).all() and (first.episode == 0).all())
    assert_bit_identical(without_stale_rows(trajectory), without_stale_rows(rollout(first, noise)))
    obs, _ = other.reset(seed=5)
    assert torch.equal(obs, initial)
    # Without a seed, reset starts the next episode: a new layout.
    obs, _ = other.reset()
    assert not torch.equal(obs, initial)
    assert bool((other.episode == 1).all())


@DEVICES
@PATHS
def test_shards_with_env_offset_replay_the_whole_batch(device, fused, generator):
    """Envs built with ``env_offset`` draw what the same global envs of one batch draw: shards
    stepped with the matching slices of the actions reproduce the whole batch bit for bit,
    through several auto-resets (swarp.distributed builds on this)."""
    whole = make_env(device, fused=fused, auto_reset=True)
    shards = [make_env(device, fused=fused, auto_reset=True, n_envs=n, env_offset=k) for k, n in ((0, 1), (1, 3))]
    misplaced = make_env(device, fused=fused, n_envs=3)  # envs 0-2, not 1-3
    assert not torch.equal(misplaced.obs, whole.obs[1:])
    for actions in noise_sequence(whole, 3 * MAX_STEPS, generator):
        (expected,) = without_stale_rows([record(whole, whole.step(actions))])
        parts = [
            without_stale_rows([record(s, s.step(actions[s.env_offset : s.env_offset + s.n_envs]))])[0] for s in shards
        ]
        for key, value in expected.items():
            if key in ("env.seed", "env.agent_params"):  # one per env batch (a shared table), not per env
                assert all(torch.equal(part[key], value) for part in parts), key
            else:
                assert torch.equal(torch.cat([part[key] for part in parts]), value), key
    assert int(whole.episode.min()) >= 2  # later episodes' draws were compared too


# --- snapshots -----------------------------------------------------------------------------------


@DEVICES
@PATHS
def test_set_state_restores_the_exact_trajectory(device, fused, generator):
    """Restoring in place keeps every buffer's address, so recorded launches and graphs stay valid."""
    env = make_env(device, fused=fused, auto_reset=True, seed=11)
    noise = noise_sequence(env, 120, generator)
    rollout(env, noise[:20])
    snapshot = env.get_state()
    after = rollout(env, noise[20:])
    assert count_events(after)[0] > 0
    env.set_state(snapshot)
    assert_bit_identical([env.get_state()], [snapshot])
    assert_bit_identical(after, rollout(env, noise[20:]))
    # A snapshot carries everything, the reset stream included: another env (other seed) continues identically.
    other = make_env(device, fused=fused, auto_reset=True, seed=1234)
    rollout(other, noise[:3])
    other.set_state(snapshot)
    assert_bit_identical(after, rollout(other, noise[20:]))


def test_set_state_rejects_mismatched_snapshots():
    env = make_env()
    good = env.get_state()
    before = env.get_state()

    missing = dict(good)
    del missing["state.pos"]
    with pytest.raises(ValueError, match=r"missing \['state.pos'\]"):
        env.set_state(missing)
    with pytest.raises(ValueError, match=r"unexpected \['bogus'\]"):
        env.set_state({**good, "bogus": torch.zeros(1)})

    wrong_shape = dict(good)
    wrong_shape["state.theta"] = torch.zeros(N_ENVS + 1, N_AGENTS)
    with pytest.raises(ValueError, match=r"snapshot\['state.theta'\] must be torch.float32 \[4, 4\], got .*\[5, 4\]"):
        env.set_state(wrong_shape)
    wrong_dtype = dict(good)
    wrong_dtype["env.step_count"] = good["env.step_count"].long()
    with pytest.raises(ValueError, match=r"snapshot\['env.step_count'\] must be torch.int32"):
        env.set_state(wrong_dtype)
    not_a_tensor = dict(good)
    not_a_tensor["scenario.goals"] = good["scenario.goals"].numpy()
    with pytest.raises(TypeError, match=r"snapshot\['scenario.goals'\] must be a torch.Tensor, got ndarray"):
        env.set_state(not_a_tensor)
    with pytest.raises(TypeError, match="snapshot must be a dict"):
        env.set_state([good])
    # A rejected snapshot leaves the env untouched, even when only a late entry is bad.
    late = {key: torch.full_like(value, 1) for key, value in good.items()}
    last_key = list(late)[-1]
    late[last_key] = late[last_key][:1].clone() if late[last_key].dim() else late[last_key].view(1)
    with pytest.raises(ValueError, match=last_key):
        env.set_state(late)
    assert_bit_identical([env.get_state()], [before])


# --- host transfers ------------------------------------------------------------------------------


#: Tensor methods that copy device data to the host (or block on it). None may run in the hot loop.
@DEVICES
@PATHS
def test_step_and_reset_at_make_no_host_transfers(device, fused, generator):
    env = make_env(device, fused=fused, auto_reset=True)
    mask = torch.tensor([True, False, True, False], device=device)
    episode_before = step_and_reset_without_host_transfers(env, noise_sequence(env, 30, generator), mask)
    # The work was done: time limits passed and both halves of the batch were reset.
    assert bool((env.step_count == 0).all())
    assert bool((env.episode >= episode_before + 2).all())


# --- auto-reset and episode bookkeeping ----------------------------------------------------------


@DEVICES
@pytest.mark.parametrize(
    "fused, list_resets, list_rows",
    [(True, False, None), (True, True, None), (True, True, 3), (False, False, None)],
    ids=["mask", "list", "list3", "torch"],
)
def test_auto_reset_matches_manual_reset_in_lockstep(device, fused, list_resets, list_rows, generator):
    """An auto-resetting env against a plain one that calls ``reset_at(done)`` after every step.
    The auto-reset's kernels launch over the done mask, or walk a device-side list of the finished
    envs (``list3``: three rows, so a row takes every third entry); ``reset_at`` launches over its
    mask: the same bits."""
    plan = {"list_resets": list_resets, "reset_ahead": False} if fused else None
    auto = make_env(device, fused=fused, auto_reset=True, plan=plan)
    assert auto.plan.list_resets == list_resets
    auto.buffers.done_list.rows = list_rows
    manual = make_env(device, fused=fused, auto_reset=False)
    assert "final_obs" in auto.info and "final_obs" not in manual.info
    obs = auto.obs.clone()
    n_terminated = n_truncated = 0
    for t, step_noise in enumerate(noise_sequence(auto, 70, generator)):
        actions = goal_policy(auto, obs, step_noise)
        episode_before = auto.episode.clone()
        obs, reward, terminated, truncated, info = auto.step(actions)
        m_obs, m_reward, m_terminated, m_truncated, m_info = manual.step(actions)
        assert torch.equal(terminated, m_terminated) and torch.equal(truncated, m_truncated), f"step {t}"
        assert torch.equal(reward, m_reward), f"step {t}: reward"
        for key, value in m_info.items():
            assert torch.equal(info[key], value), f"step {t}: info[{key!r}]"
        done = terminated | truncated
        # The final observation is the one the episode would have had without the reset.
        assert torch.equal(info["final_obs"][done], m_obs[done]), f"step {t}: final_obs"
        # The returned obs of finished envs already starts their next episode.
        assert bool((auto.step_count[done] == 0).all() and (auto.episode[done] == episode_before[done] + 1).all())
        manual.reset_at(done)
        assert torch.equal(obs, manual.obs), f"step {t}: obs after reset"
        assert torch.equal(auto.step_count, manual.step_count) and torch.equal(auto.episode, manual.episode)
        for key, value in manual.state._asdict().items():
            assert torch.equal(getattr(auto.state, key), value), f"step {t}: state {key}"
        n_terminated += int(terminated.sum())
        n_truncated += int(truncated.sum())
    assert n_terminated > 0 and n_truncated > 0


@pytest.mark.parametrize("auto_reset", [False, True])
def test_truncation_happens_exactly_at_max_steps(auto_reset):
    max_steps = 7
    env = make_env(auto_reset=auto_reset, max_steps=max_steps)
    zeros = torch.zeros(N_ENVS, N_AGENTS, env.act_dim)
    for step in range(1, 3 * max_steps + 1):
        _, _, terminated, truncated, _ = env.step(zeros)
        assert not bool(terminated.any())
        if auto_reset:
            expected = step % max_steps == 0
            assert bool((env.step_count == step % max_steps).all())
            assert bool((env.episode == step // max_steps).all())
        else:
            expected = step >= max_steps
            assert bool((env.step_count == step).all())
        assert bool((truncated == expected).all()), f"step {step}: truncated {truncated.tolist()}"


def test_no_time_limit_with_max_steps_none():
    env = make_env(max_steps=None, auto_reset=True)
    zeros = torch.zeros(N_ENVS, N_AGENTS, env.act_dim)
    for _ in range(3 * MAX_STEPS):
        _, _, _, truncated, _ = env.step(zeros)
        assert not bool(truncated.any())
    assert bool((env.step_count == 3 * MAX_STEPS).all())


@DEVICES
@PATHS
def test_reset_at_changes_only_masked_envs(device, fused, generator):
    env = make_env(device, fused=fused)
    for step_noise in noise_sequence(env, 5, generator):
        env.step(step_noise)
    before = env.get_state()
    mask = torch.tensor([False, True, False, True], device=device)
    obs = env.reset_at(mask)
    after = env.get_state()
    assert obs is env.obs
    for key, value in before.items():
        if value.shape[:1] != (N_ENVS,):
            assert torch.equal(after[key], value), key  # batch-wide entries (the seed)
            continue
        assert torch.equal(after[key][~mask], value[~mask]), f"{key} changed in an env outside the mask"
    assert not torch.equal(after["state.pos"][mask], before["state.pos"][mask])
    assert bool((after["env.step_count"][mask] == 0).all())
    assert torch.equal(after["env.episode"][mask], before["env.episode"][mask] + 1)
    # Counter-based resets: env i's new layout depends on (seed, i, episode) only, not on which
    # other envs were reset with it.
    full = make_env(device, fused=fused)
    full.reset_at(torch.ones(N_ENVS, dtype=torch.bool, device=device))
    assert torch.equal(full.state.pos[mask], env.state.pos[mask])
    assert torch.equal(full.obs[mask], env.obs[mask])
    # An empty mask is a no-op.
    env.reset_at(torch.zeros(N_ENVS, dtype=torch.bool, device=device))
    assert_bit_identical([env.get_state()], [after])


def test_clone_outputs_survive_the_next_step(generator):
    noise = noise_sequence(make_env(), 2, generator)

    shared = make_env()
    obs, reward, _, _, info = shared.step(noise[0])
    kept = obs.clone(), reward.clone(), info["dist_to_goal"].clone()
    shared.step(noise[1])
    # By default the returned tensors are the persistent buffers, overwritten in place.
    assert obs.data_ptr() == shared.obs.data_ptr()
    assert not torch.equal(obs, kept[0]) and not torch.equal(reward, kept[1])
    assert not torch.equal(info["dist_to_goal"], kept[2])

    cloned = make_env(clone_outputs=True)
    obs, reward, _, _, info = cloned.step(noise[0])
    kept = obs.clone(), reward.clone(), info["dist_to_goal"].clone()
    cloned.step(noise[1])
    assert torch.equal(obs, kept[0]) and torch.equal(reward, kept[1])
    assert torch.equal(info["dist_to_goal"], kept[2])
    assert obs.data_ptr() != cloned.obs.data_ptr()
    reset_obs, _ = cloned.reset()
    assert reset_obs.data_ptr() != cloned.obs.data_ptr()
    assert cloned.reset_at(torch.ones(N_ENVS, dtype=torch.bool)).data_ptr() != cloned.obs.data_ptr()


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (torch.zeros(N_ENVS, N_AGENTS, 3), ValueError, r"actions must have shape .* = \[4, 4, 2\], got \[4, 4, 3\]"),
        (torch.zeros(N_ENVS, N_AGENTS), ValueError, r"= \[4, 4, 2\], got \[4, 4\]"),
        (torch.zeros(N_ENVS + 1, N_AGENTS, 2), ValueError, r"got \[5, 4, 2\]"),
        (torch.zeros(N_ENVS, N_AGENTS, 2, dtype=torch.float64), TypeError, "must have dtype torch.float32, got "),
        (torch.zeros(N_ENVS, N_AGENTS, 2, dtype=torch.int64), TypeError, "must have dtype torch.float32"),
        (torch.zeros(N_ENVS, N_AGENTS, 2, device="meta"), ValueError, "must be on device cpu, got meta"),
        (np.zeros((N_ENVS, N_AGENTS, 2), np.float32), TypeError, "actions must be a torch.Tensor, got ndarray"),
        ([[[0.0, 0.0]] * N_AGENTS] * N_ENVS, TypeError, "actions must be a torch.Tensor, got list"),
        (None, TypeError, "actions must be a torch.Tensor, got NoneType"),
    ],
    ids=["width", "rank", "envs", "float64", "int64", "device", "numpy", "list", "none"],
)
def test_bad_actions_are_rejected(actions, error, match):
    env = make_env()
    before = env.get_state()
    with pytest.raises(error, match=match):
        env.step(actions)
    assert_bit_identical([env.get_state()], [before])


def test_non_contiguous_actions_act_like_contiguous_ones(generator):
    noise = noise_sequence(make_env(), 1, generator)[0]
    strided = noise.transpose(1, 2).contiguous().transpose(1, 2)
    assert not strided.is_contiguous()
    first, second = make_env(), make_env()
    assert torch.equal(first.step(noise)[0], second.step(strided)[0])


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        (torch.ones(N_ENVS + 1, dtype=torch.bool), ValueError, r"mask must have shape \[n_envs\] = \[4\], got \[5\]"),
        (torch.ones(N_ENVS, 1, dtype=torch.bool), ValueError, r"got \[4, 1\]"),
        (torch.ones(N_ENVS, dtype=torch.uint8), TypeError, "mask must have dtype torch.bool, got torch.uint8"),
        (torch.ones(N_ENVS, dtype=torch.int32), TypeError, "got torch.int32"),
        (torch.ones(N_ENVS, dtype=torch.bool, device="meta"), ValueError, "mask must be on device cpu, got meta"),
        ([True] * N_ENVS, TypeError, "mask must be a torch.Tensor, got list"),
    ],
    ids=["length", "rank", "uint8", "int32", "device", "list"],
)
def test_bad_reset_masks_are_rejected(mask, error, match):
    env = make_env()
    before = env.get_state()
    with pytest.raises(error, match=match):
        env.reset_at(mask)
    assert_bit_identical([env.get_state()], [before])


def test_unknown_scenario_and_keywords_are_rejected():
    with pytest.raises(ValueError, match=r"unknown scenario 'navigaton'; registered scenarios: \[.*'navigation'"):
        swarp.make("navigaton")
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) \['n_agent'\]") as excinfo:
        swarp.make("navigation", n_agent=3)
    message = str(excinfo.value)
    for valid in ("n_agents", "n_obstacles", "obs_range", "auto_reset", "max_steps", "use_graph", "clone_outputs"):
        assert valid in message


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(n_envs=0), ValueError, "n_envs must be an int >= 1, got 0"),
        (dict(n_envs=2.0), ValueError, "n_envs must be an int >= 1"),
        (dict(max_steps=0), ValueError, "max_steps must be an int >= 1, None or 'default', got 0"),
        (dict(fused="yes"), ValueError, "fused must be True, False or 'auto', got 'yes'"),
        (dict(use_graph="maybe"), ValueError, "use_graph must be True, False or 'auto', got 'maybe'"),
        (dict(dtype="float16"), (ValueError, TypeError), "dtype"),
        (dict(device="tpu"), ValueError, "device must be 'cpu', 'cuda' or 'cuda:N'"),
        (dict(env_offset=-1), ValueError, "env_offset must be an int >= 0, got -1"),
        (dict(env_offset=1.0), ValueError, "env_offset must be an int >= 0"),
        (dict(env_offset=2**31 - 2), ValueError, r"env_offset \+ n_envs must be <= 2\^31"),
    ],
)
def test_bad_environment_arguments_are_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_env(**kwargs)


@pytest.mark.parametrize("seed", [-1, 2**31, 1.5, True, "0", None])
def test_invalid_seeds_are_rejected(seed):
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\^31\), got "):
        make_env(seed=seed)
    env = make_env(seed=3)
    before = env.get_state()
    if seed is not None:  # reset(seed=None) means "keep the current stream"
        with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\^31\)"):
            env.reset(seed=seed)
        assert_bit_identical([env.get_state()], [before])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@PATHS
def test_non_finite_actions_act_as_zero_and_raise_the_flag(fused, bad, generator):
    noise = noise_sequence(make_env(), 1, generator)[0]
    poisoned = noise.clone()
    poisoned[1, 2, 0] = bad
    poisoned[3, 0, 1] = bad
    zeroed = noise.clone()
    zeroed[1, 2, 0] = 0.0
    zeroed[3, 0, 1] = 0.0
    env, reference = make_env(fused=fused), make_env(fused=fused)
    assert not bool(env.invalid_actions())
    for _ in range(3):
        obs, reward, *_ = env.step(poisoned)
        reference.step(zeroed)
    assert bool(env.invalid_actions())
    assert not bool(reference.invalid_actions())
    assert torch.equal(obs, reference.obs) and torch.equal(reward, reference.reward)
    for key, value in env.state._asdict().items():
        assert bool(torch.isfinite(value).all()), key
        assert torch.equal(value, getattr(reference.state, key)), key


# --- scenarios without a fused twin, and the registry --------------------------------------------


@dataclass(frozen=True)
class DriftConfig:
    n_agents: int = 2


class DriftScenario(swarp.Scenario):
    """A torch-only scenario: agents spawn at random and are rewarded for staying near the origin."""

    name = "drift"
    Config = DriftConfig

    def make_world(self) -> swarp.WorldSpec:
        return swarp.WorldSpec(agents=(swarp.AgentConfig(),) * self.cfg.n_agents, world=swarp.WorldConfig(bounds=1.0))

    @property
    def obs_dim(self) -> int:
        return 2

    def reset_world(self, env_mask: torch.Tensor) -> None:
        keys = self.env.rng_keys().view(-1, 1, 1)
        draws = torch.arange(2 * self.n_agents).view(1, self.n_agents, 2)
        spawn = (uniform_u24_torch(keys, draws).to(self.dtype) * INV_2_24 - 0.5).to(self.dtype)
        pos = self.env.state.pos
        pos.copy_(torch.where(env_mask.view(-1, 1, 1), spawn, pos))
        self.env.state.vel.masked_fill_(env_mask.view(-1, 1, 1), 0.0)

    def observations(self) -> torch.Tensor:
        return self.env.state.pos.clone()

    def rewards(self) -> torch.Tensor:
        return -self.env.state.pos.norm(dim=-1)

    def done(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.env.torch_device)


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the scenario registry, so registrations here do not leak into other tests."""
    monkeypatch.setattr(scenario_base, "_REGISTRY", dict(scenario_base._REGISTRY))
    return scenario_base._REGISTRY


def test_registry_lists_navigation_and_rejects_non_scenarios(registry):
    assert "navigation" in swarp.scenario_names()
    assert swarp.scenario_names() == sorted(swarp.scenario_names())
    with pytest.raises(TypeError, match="needs a Scenario subclass"):
        swarp.register_scenario("bogus", dict)
    with pytest.raises(TypeError, match="needs a Scenario subclass"):
        swarp.register_scenario("bogus", DriftScenario())  # an instance, not the class
    with pytest.raises(ValueError, match="scenario name must be a non-empty string"):
        swarp.register_scenario("", DriftScenario)
    assert "bogus" not in swarp.scenario_names()


def test_torch_only_scenario_runs_without_kernels(registry, generator):
    swarp.register_scenario("drift", DriftScenario)
    assert "drift" in swarp.scenario_names()
    with pytest.raises(ValueError, match="fused=True but scenario 'drift' has no fused kernels"):
        swarp.make("drift", n_envs=2, device="cpu", fused=True)
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) \['n_obstacles'\].*scenario options: \['n_agents'\]"):
        swarp.make("drift", n_envs=2, device="cpu", n_obstacles=1)
    env = swarp.make("drift", n_envs=3, device="cpu", auto_reset=True, max_steps=4, n_agents=3)
    assert not env.fused and env.execution_mode == "replay" and env.obs_dim == 2
    start = env.obs.clone()
    assert bool((start.abs() <= 0.5).all()) and start.unique().numel() == start.numel()
    zeros = torch.zeros(3, 3, 2)
    for step in range(1, 9):
        last = env.obs.clone()
        obs, reward, terminated, truncated, info = env.step(zeros)
        assert bool((truncated == (step % 4 == 0)).all())
        # The reward is the finished transition's: for reset envs it scores the final observation.
        last_obs = torch.where(truncated.view(-1, 1, 1), info["final_obs"], obs)
        torch.testing.assert_close(reward, -last_obs.norm(dim=-1))
    # The last step's final observation is kept; obs starts episode 2 at a new random layout.
    assert bool((env.episode == 2).all() and (env.step_count == 0).all())
    assert not torch.equal(info["final_obs"], obs)
    assert not torch.equal(obs, start) and not torch.equal(obs, last)
    # The torch path's resets use the same counter-based keys: reset(seed=0) gives the start back.
    assert torch.equal(env.reset(seed=0)[0], start)


# --- execution modes and CUDA ---------------------------------------------------------------------


def test_use_graph_true_without_a_capturable_step_warns_once_and_replays():
    # The torch reference on the CPU cannot be captured; asked for a graph it compiles its torch
    # work instead (plan.compile_torch), silently. With compiling turned off: one warning, replay.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = make_env(use_graph=True, fused=False, plan={"compile_torch": False})
        env.step(torch.zeros(N_ENVS, N_AGENTS, 2))
        env.step(torch.zeros(N_ENVS, N_AGENTS, 2))
        env.reset()
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    assert "use_graph=True but the step is not capturable" in messages[0] and "(replay)" in messages[0]
    assert env.execution_mode == "replay" and not env.graph_mode
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = make_env(use_graph=True, fused=False)
    assert compiled.plan.compile_torch and not [w for w in caught if "not capturable" in str(w.message)]


def test_cpu_steps_run_as_a_graph_by_default_and_match_replay():
    # Warp captures CPU launch sequences too (replayed in C++): the default on CPU is a graph.
    graph, replay = make_env(auto_reset=True), make_env(auto_reset=True, use_graph=False)
    assert graph.execution_mode == "graph" and graph.graph_mode
    assert replay.execution_mode == "replay" and not replay.graph_mode
    generator = torch.Generator().manual_seed(3)
    for _ in range(60):
        actions = torch.rand(N_ENVS, N_AGENTS, 2, generator=generator) * 2 - 1
        a, b = graph.step(actions), replay.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)
    graph.reset_at(torch.arange(N_ENVS) % 2 == 0)
    replay.reset_at(torch.arange(N_ENVS) % 2 == 0)
    assert torch.equal(graph.obs, replay.obs)


CUDA_ENVS = 256
CUDA_AGENTS = 8


def make_cuda_env(**kwargs) -> swarp.Environment:
    return make_env(device="cuda:0", n_envs=CUDA_ENVS, n_agents=CUDA_AGENTS, auto_reset=True, **kwargs)


@pytest.mark.gpu
def test_graph_mode_is_the_default_on_cuda():
    env = make_cuda_env()
    assert env.graph_mode and env.execution_mode == "graph"
    assert make_cuda_env(use_graph=False).execution_mode == "replay"
    assert make_cuda_env(fused=False).execution_mode == "graph"  # the torch step, captured by torch
    assert make_cuda_env(fused=False, use_graph=False).execution_mode == "replay"


@pytest.mark.gpu
def test_graph_and_replay_are_bit_identical_on_cuda(generator):
    graph_env = make_cuda_env()
    noise = noise_sequence(graph_env, N_STEPS, generator)
    graph = rollout(graph_env, noise)
    assert graph_env.graph_mode and graph_env.launches.step_seq._graph is not None
    assert count_events(graph)[0] > 0 and count_events(graph)[1] > 0
    assert_bit_identical(graph, rollout(make_cuda_env(use_graph=False), noise))


@pytest.mark.gpu
@pytest.mark.parametrize("use_graph", ["auto", False])
def test_no_steady_state_allocations_on_cuda(use_graph):
    assert_no_steady_state_allocations(make_cuda_env(use_graph=use_graph))


@pytest.mark.gpu
@pytest.mark.parametrize("use_graph", ["auto", False])
def test_user_stream_gives_the_default_stream_results(use_graph, generator):
    """Under a user-created torch stream, torch work on the outputs interleaved with steps sees every
    step's writes, and no step overwrites outputs torch is still reading."""
    n_steps = 100
    reference_env = make_cuda_env(use_graph=use_graph)
    noise = noise_sequence(reference_env, n_steps, generator)
    reference = rollout(reference_env, noise)

    env = make_cuda_env(use_graph=use_graph)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    outputs = []
    with torch.cuda.stream(stream):
        obs = env.obs.clone()
        total_reward = torch.zeros((), device="cuda:0")
        for step_noise in noise:
            actions = goal_policy(env, obs, step_noise)
            obs, reward, terminated, truncated, info = env.step(actions)
            total_reward += reward.sum()  # torch reads the outputs on the user stream
            obs = obs.clone()
            outputs.append((obs, reward.clone(), terminated.clone(), truncated.clone(), info["final_obs"].clone()))
    stream.synchronize()
    for t, (row, (obs, reward, terminated, truncated, final_obs)) in enumerate(zip(reference, outputs, strict=True)):
        assert torch.equal(obs, row["obs"]), f"step {t}: obs"
        assert torch.equal(reward, row["reward"]), f"step {t}: reward"
        assert torch.equal(terminated, row["terminated"]) and torch.equal(truncated, row["truncated"]), f"step {t}"
        assert torch.equal(final_obs, row["info.final_obs"]), f"step {t}: final_obs"
    expected_total = torch.stack([row["reward"].sum() for row in reference]).sum()
    torch.testing.assert_close(total_reward, expected_total)
