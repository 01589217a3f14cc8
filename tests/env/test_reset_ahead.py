"""Auto-reset from starts prepared ahead (``FusedScenario.supports_reset_ahead``, ``SWARP_RESET_AHEAD``).

The prepared path must give exactly the bits of the direct one (reset, then masked observation)
through terminations, time limits, explicit resets and snapshot restores; it runs on CUDA graphs by
default, and the CPU tests force it on.
"""

import pytest
import torch

import swarp
from swarp.env.environment import RESET_AHEAD_ENV
from tests.env.test_environment import (
    DEVICES,
    assert_bit_identical,
    assert_no_steady_state_allocations,
    count_events,
    noise_sequence,
    policy,
    record,
    step_and_reset_without_host_transfers,
)


def make(device="cpu", n_envs=6, **kwargs):
    options = dict(n_envs=n_envs, device=device, seed=5, auto_reset=True, max_steps=12, n_agents=4, world_size=0.5)
    options.update(kwargs)
    return swarp.make("navigation", **options)


def scripted_rollout(env, noise, reset_every=13, snapshot_at=20, restore_at=31):
    """``rollout`` with explicit ``reset_at`` calls and a snapshot restored mid-way (the prepared
    starts must follow both)."""
    obs = env.obs.clone()
    trajectory, snapshot = [], None
    for t, step_noise in enumerate(noise):
        row = record(env, env.step(policy(env, obs, step_noise)))
        if t % reset_every == reset_every - 1:
            mask = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
            mask[t % env.n_envs] = True
            row["reset_at"] = env.reset_at(mask).clone()
        if t == snapshot_at:
            snapshot = env.get_state()
        if t == restore_at:
            env.set_state(snapshot)
            row["restored"] = env.obs.clone()
        obs = env.obs.clone()
        trajectory.append(row)
    return trajectory


CONFIGS = [
    dict(),
    dict(n_agents=3, obs_neighbors=2, shared_reward=True),
    dict(lidar_rays=6),
    dict(lidar_rays=4, randomize_params={"mass": (0.5, 2.0)}),  # the scan after the swap
    dict(model="diff_drive", max_steps=4, randomize_params={"radius": (0.03, 0.05)}),
    dict(dtype="float64"),
]


@pytest.mark.parametrize("use_graph", ["auto", False])
@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(o) or "default")
def test_prepared_starts_give_the_direct_resets_bits(options, use_graph, monkeypatch, generator):
    monkeypatch.setenv(RESET_AHEAD_ENV, "off")
    direct_env = make(use_graph=use_graph, **options)
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    ahead_env = make(use_graph=use_graph, **options)
    assert not direct_env.reset_ahead and ahead_env.reset_ahead
    noise = noise_sequence(direct_env, 60, generator)
    direct = scripted_rollout(direct_env, noise)
    terminated, truncated = count_events(direct)
    assert truncated > 0 and (terminated > 0 or "model" in options)  # both kinds of auto-reset
    assert_bit_identical(direct, scripted_rollout(ahead_env, noise))


def test_the_swap_marks_the_envs_to_prepare(monkeypatch, generator):
    """After a step the marks are exactly its finished envs, each asking for the episode after its
    new one; a reset marks its envs too, leaving the others' marks."""
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    env = make(n_envs=8)
    mask = torch.tensor([True, False] * 4)
    marks = lambda: (env._ahead_mask.numpy().copy(), env._ahead_episode.numpy().copy())  # noqa: E731
    seen_done = 0
    for step_noise in noise_sequence(env, 40, generator):
        env.step(policy(env, env.obs, step_noise))
        marked, wanted = marks()
        assert (torch.from_numpy(marked) == env.done).all()
        assert (torch.from_numpy(wanted)[env.done] == env.episode[env.done] + 1).all()
        seen_done += int(env.done.sum())
    assert seen_done > 0
    before, _ = marks()
    env.reset_at(mask)
    marked, wanted = marks()
    assert (torch.from_numpy(marked) == (torch.from_numpy(before) | mask)).all()
    assert (torch.from_numpy(wanted)[mask] == env.episode[mask] + 1).all()


def test_new_agent_params_prepare_every_env_again(monkeypatch):
    """A lidar's prepared scan saw the old radii: new parameters mark every env."""
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    env = make(lidar_rays=4, per_env_params=True)
    env.step(torch.zeros(env.n_envs, env.n_agents, env.act_dim))
    env.set_agent_params(radius=0.04)
    assert env._ahead_mask.numpy().all()
    assert (torch.from_numpy(env._ahead_episode.numpy()) == env.episode + 1).all()


def test_where_starts_are_prepared_ahead(monkeypatch):
    monkeypatch.delenv(RESET_AHEAD_ENV, raising=False)
    assert not make().reset_ahead  # auto: CUDA graphs only
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    assert make().reset_ahead
    assert not make(auto_reset=False).reset_ahead  # nothing to swap in
    assert not make(fused=False).reset_ahead  # the torch reference resets directly
    assert not make(n_obstacles=2).reset_ahead  # obstacles are drawn with the spawns
    assert not make(neighbor_method="grid").reset_ahead  # the grid would bin the prepared starts
    assert not swarp.make("give_way", n_envs=2, device="cpu", auto_reset=True).reset_ahead  # its own reset
    assert not swarp.make("drone_navigation", n_envs=2, device="cpu", auto_reset=True).reset_ahead


def test_bad_switch_value_names_the_valid_ones(monkeypatch):
    monkeypatch.setenv(RESET_AHEAD_ENV, "sometimes")
    with pytest.raises(ValueError, match="SWARP_RESET_AHEAD must be 'auto', 'on' or 'off'"):
        make()


@pytest.mark.gpu
@pytest.mark.parametrize("user_stream", [False, True])
def test_cuda_graph_prepares_ahead_with_the_direct_bits(user_stream, monkeypatch, generator):
    """On CUDA the graph prepares starts on a side stream by default: same bits as the direct
    reset, on torch's default stream and under a user stream."""
    monkeypatch.delenv(RESET_AHEAD_ENV, raising=False)
    ahead_env = make("cuda:0", n_envs=256, n_agents=5)
    monkeypatch.setenv(RESET_AHEAD_ENV, "off")
    direct_env = make("cuda:0", n_envs=256, n_agents=5)
    assert ahead_env.graph_mode and ahead_env.reset_ahead and not direct_env.reset_ahead
    noise = noise_sequence(direct_env, 200, generator)
    direct = scripted_rollout(direct_env, noise)
    stream = torch.cuda.Stream() if user_stream else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ahead = scripted_rollout(ahead_env, noise)
    torch.cuda.current_stream().wait_stream(stream)
    assert sum(count_events(direct)) > 0
    assert_bit_identical(direct, ahead)


@DEVICES
def test_prepared_resets_make_no_host_transfers(device, monkeypatch, generator):
    """Steps with auto-resets from prepared starts, resets and their marks: no host read."""
    monkeypatch.setenv(RESET_AHEAD_ENV, "on")
    env = make(device, lidar_rays=4)
    mask = torch.zeros(env.n_envs, dtype=torch.bool, device=device)
    mask[::2] = True
    episode_before = step_and_reset_without_host_transfers(env, noise_sequence(env, 30, generator), mask)
    assert env.reset_ahead
    assert bool((env.episode >= episode_before + 2).all())  # time limits passed: swaps happened


@pytest.mark.gpu
def test_prepared_resets_allocate_nothing_in_steady_state_on_cuda(monkeypatch):
    monkeypatch.delenv(RESET_AHEAD_ENV, raising=False)
    env = make("cuda:0", n_envs=256, lidar_rays=4)
    assert env.graph_mode and env.reset_ahead
    episode_before = env.episode.clone()
    assert_no_steady_state_allocations(env)
    assert bool((env.episode > episode_before).all())  # every env went through auto-resets
