"""Navigation's fused step end (``rows.step_rows_kernel``, ``SWARP_STEP_END``): one kernel that
observes every agent, ends each env's step (``nav_finish``'s work) and, with starts prepared ahead,
swaps them in (``nav_swap``'s work) must give the bits of the three launches it replaces.

It runs on CUDA; Warp runs its block barriers on the CPU when CPU blocks are enabled, which is how
these tests run it here."""

import pytest
import torch
import warp as wp

from swarp.env import selection
from swarp.env.environment import RESET_AHEAD_ENV
from swarp.scenarios import navigation_kernels, rows
from tests.env.test_environment import assert_bit_identical, count_events, noise_sequence
from tests.env.test_reset_ahead import make, scripted_rollout

STEP_END_ENV = navigation_kernels.STEP_END_ENV


def fused_and_split(monkeypatch, noise=None, generator=None, n_steps=60, **options):
    """``scripted_rollout`` of a CPU-blocks env with the fused step end and of its split twin."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    monkeypatch.setenv(STEP_END_ENV, "split")
    split_env = make(**options)
    monkeypatch.setenv(STEP_END_ENV, "fused")
    fused_env = make(**options)
    assert fused_env.scenario.step_end_fused
    assert not split_env.scenario.step_end_fused
    noise = noise if noise is not None else noise_sequence(split_env, n_steps, generator)
    return scripted_rollout(split_env, noise), scripted_rollout(fused_env, noise), fused_env


CONFIGS = [
    dict(),
    dict(n_envs=45, n_agents=3, max_steps=7),  # 21 envs per block: two full blocks and a partial one
    dict(n_envs=13, n_agents=5, obs_neighbors=2, shared_reward=True),  # the mean progress per env
    dict(n_envs=9, final_reward=0.0, goal_radius=0.3),  # bonus 0 still adds (+0 turns -0 to +0)
    dict(lidar_rays=6),  # the lidar's columns swap beside it
    dict(lidar_rays=4, randomize_params={"mass": (0.5, 2.0)}),  # the scan after the swap
    dict(dtype="float64"),
]


@pytest.mark.parametrize("ahead", ["on", "off"])
@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(o) or "default")
def test_fused_step_end_gives_the_split_bits(options, ahead, monkeypatch, generator, launched):
    monkeypatch.setenv(RESET_AHEAD_ENV, ahead)
    split, fused, env = fused_and_split(monkeypatch, generator=generator, **options)
    terminated, truncated = count_events(split)
    assert truncated > 0
    if "goal_radius" in options:
        assert terminated > 0  # every agent on goal: the bonus path ran
    assert_bit_identical(split, fused)
    assert env.reset_ahead == (ahead == "on")
    assert env.scenario.swaps_in_step() == (ahead == "on")
    assert any(key.endswith("step_rows") for key in launched)


def test_the_fused_step_launches_one_kernel_after_the_physics(monkeypatch, launched):
    """With starts prepared ahead, a step's observation, finish and swap are one launch (the step's
    launch sequence, as its first call records it)."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    env = make(max_steps=1)
    launched.clear()
    env.step(torch.zeros(env.n_envs, env.n_agents, env.act_dim))
    assert bool(env.done.all())  # every env ended and started a prepared episode
    assert not any(key.endswith(("nav_finish", "nav_swap", "observe_rows")) for key in launched), launched
    assert any(key.endswith("step_rows") for key in launched)


def test_where_the_step_end_is_fused(monkeypatch):
    monkeypatch.delenv(STEP_END_ENV, raising=False)
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    assert not rows.tiled_rows("cpu")
    env = make()
    assert not env.scenario.step_end_fused  # the CPU's per-thread rows
    assert not env.scenario.swaps_in_step()
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    assert make().scenario.step_end_fused
    assert make(n_envs=2, n_agents=rows.OBS_BLOCK, world_size=2.0).scenario.step_end_fused
    # An env wider than a block: the split launches.
    assert not make(n_envs=2, n_agents=rows.OBS_BLOCK + 1, world_size=2.0).scenario.step_end_fused
    # Throughput-bound batches: the split launches (measured faster there).
    monkeypatch.setattr(selection, "throughput_bound", lambda device, n_envs, n_agents: True)
    env = make()
    assert not env.scenario.step_end_fused
    assert env.reset_ahead and not env.scenario.swaps_in_step()
    monkeypatch.undo()
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    monkeypatch.setenv(STEP_END_ENV, "split")
    assert not make().scenario.step_end_fused
    monkeypatch.setenv(STEP_END_ENV, "always")
    with pytest.raises(ValueError, match="SWARP_STEP_END must be 'fused' or 'split'"):
        make()


def test_throughput_bound_is_the_reset_lists_size_on_cuda():
    assert not selection.throughput_bound("cpu", 1 << 20, 64)  # the CPU: never
    assert selection.list_pays("cpu", 4, 4)  # the CPU always lists


def test_the_step_rows_kernel_needs_whole_envs_in_a_block():
    with pytest.raises(ValueError, match=f"at most {rows.OBS_BLOCK} agents per env"):
        rows.step_rows_kernel(None, None, None, None, None, None, float, 8, rows.OBS_BLOCK + 1, 4)


@pytest.mark.gpu
@pytest.mark.parametrize("n_agents", [3, 16])
def test_cuda_fused_step_end_gives_the_split_bits(n_agents, monkeypatch, generator):
    """On CUDA (graph, starts prepared ahead by default): 200 steps with auto-resets, the fused
    step end against the split launches, bit for bit."""
    monkeypatch.delenv(RESET_AHEAD_ENV, raising=False)
    monkeypatch.setenv(STEP_END_ENV, "split")
    split_env = make("cuda:0", n_envs=300, n_agents=n_agents, max_steps=30)
    monkeypatch.setenv(STEP_END_ENV, "fused")
    fused_env = make("cuda:0", n_envs=300, n_agents=n_agents, max_steps=30)
    assert fused_env.graph_mode and fused_env.scenario.swaps_in_step()
    assert not split_env.scenario.step_end_fused
    noise = noise_sequence(split_env, 200, generator)
    split = scripted_rollout(split_env, noise)
    assert sum(count_events(split)) > 0
    assert_bit_identical(split, scripted_rollout(fused_env, noise))
