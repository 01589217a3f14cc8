"""The fused step end and restarts from starts prepared ahead (``swarp/runtime/step_end.py``,
``swarp/scenarios/navigation_step_end.py``).

Each must give exactly the bits of the launches it replaces: the fused end those of the
observation, ``nav_finish`` and ``nav_swap``; the prepared starts those of the direct reset and
masked observation, through terminations, time limits, explicit resets, snapshot restores, lidar,
shared rewards, float64 and parameter randomization. They run on CUDA by default; here the plan
turns them on (Warp runs the fused end's block barriers on the CPU when CPU blocks are enabled).
"""

import pytest
import torch
import warp as wp

import swarp
from swarp.runtime import step_end
from swarp.runtime.rows import OBS_BLOCK
from tests.support import (
    DEVICES,
    assert_bit_identical,
    assert_no_steady_state_allocations,
    count_events,
    goal_policy,
    noise_sequence,
    record,
    step_and_reset_without_host_transfers,
)

DIRECT = {"reset_ahead": False, "fused_step_end": False}
AHEAD = {"reset_ahead": True}
FUSED = {"tiled_rows": True, "fused_step_end": True}
FUSED_DIRECT_STORE = {"tiled_rows": False, "fused_step_end": True}


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
        row = record(env, env.step(goal_policy(env, obs, step_noise)))
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


@pytest.fixture
def cpu_blocks(monkeypatch):
    """Warp honours CPU block widths: the tiled row store and the fused end run on the CPU."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)


AHEAD_CONFIGS = [
    dict(),
    dict(n_agents=3, obs_neighbors=2, shared_reward=True),
    dict(lidar_rays=6),
    dict(lidar_rays=4, randomize_params={"mass": (0.5, 2.0)}),  # the scan after the swap
    dict(model="diff_drive", max_steps=4, randomize_params={"radius": (0.03, 0.05)}),
    dict(dtype="float64"),
]


@pytest.mark.parametrize("use_graph", ["auto", False])
@pytest.mark.parametrize("options", AHEAD_CONFIGS, ids=lambda o: ",".join(o) or "default")
def test_prepared_starts_give_the_direct_resets_bits(options, use_graph, generator):
    direct_env = make(use_graph=use_graph, plan=DIRECT, **options)
    ahead_env = make(use_graph=use_graph, plan=AHEAD, **options)
    assert not direct_env.plan.reset_ahead and ahead_env.plan.reset_ahead
    assert ahead_env.launches.step_end.prepares_ahead and not ahead_env.plan.list_resets
    noise = noise_sequence(direct_env, 60, generator)
    direct = scripted_rollout(direct_env, noise)
    terminated, truncated = count_events(direct)
    assert truncated > 0 and (terminated > 0 or "model" in options)  # both kinds of auto-reset
    assert_bit_identical(direct, scripted_rollout(ahead_env, noise))


FUSED_CONFIGS = [
    dict(),
    dict(n_envs=45, n_agents=3, max_steps=7),  # 21 envs per block: two full blocks and a partial one
    dict(n_envs=13, n_agents=5, obs_neighbors=2, shared_reward=True),  # the mean progress per env
    dict(n_envs=9, final_reward=0.0, goal_radius=0.3),  # bonus 0 still adds (+0 turns -0 to +0)
    dict(lidar_rays=6),  # the lidar's columns swap beside it
    dict(lidar_rays=4, randomize_params={"mass": (0.5, 2.0)}),  # the scan after the swap
    dict(dtype="float64"),
]


@pytest.mark.parametrize("store", [FUSED, FUSED_DIRECT_STORE], ids=["tiled", "direct_store"])
@pytest.mark.parametrize("ahead", [True, False], ids=["ahead", "direct"])
@pytest.mark.parametrize("options", FUSED_CONFIGS, ids=lambda o: ",".join(o) or "default")
def test_fused_step_end_gives_the_split_bits(options, ahead, store, cpu_blocks, generator, launched):
    split_env = make(plan={"tiled_rows": True, "fused_step_end": False, "reset_ahead": ahead}, **options)
    fused_env = make(plan={**store, "reset_ahead": ahead}, **options)
    noise = noise_sequence(split_env, 60, generator)
    split = scripted_rollout(split_env, noise)
    terminated, truncated = count_events(split)
    assert truncated > 0
    if "goal_radius" in options:
        assert terminated > 0  # every agent on goal: the bonus path ran
    launched.clear()
    assert_bit_identical(split, scripted_rollout(fused_env, noise))
    assert any(key.endswith("step_rows") for key in launched)


def test_the_fused_step_launches_one_kernel_after_the_physics(cpu_blocks, launched):
    """With starts prepared ahead, a step's observation, finish and swap are one launch (the step's
    launch sequence, as its first call records it)."""
    env = make(max_steps=1, plan={**FUSED, **AHEAD})
    launched.clear()
    env.step(torch.zeros(env.n_envs, env.n_agents, env.act_dim))
    assert bool(env.done.all())  # every env ended and started a prepared episode
    assert not any(key.endswith(("nav_finish", "nav_swap", "observe_rows")) for key in launched), launched
    assert any(key.endswith("step_rows") for key in launched)


def test_the_swap_marks_the_envs_to_prepare(generator):
    """After a step the marks are exactly its finished envs, each asking for the episode after its
    new one; a reset marks its envs too, leaving the others' marks."""
    env = make(n_envs=8, plan=AHEAD)
    marks = env.launches.step_end.marks
    mask = torch.tensor([True, False] * 4)

    def read():
        return wp.to_torch(marks.mask).clone(), wp.to_torch(marks.episode_ahead).clone()

    seen_done = 0
    for step_noise in noise_sequence(env, 40, generator):
        env.step(goal_policy(env, env.obs, step_noise))
        marked, wanted = read()
        assert torch.equal(marked, env.done)
        assert torch.equal(wanted[env.done], env.episode[env.done] + 1)
        seen_done += int(env.done.sum())
    assert seen_done > 0
    before, _ = read()
    env.reset_at(mask)
    marked, wanted = read()
    assert torch.equal(marked, before | mask)
    assert torch.equal(wanted[mask], env.episode[mask] + 1)


def test_new_agent_params_prepare_every_env_again():
    """A lidar's prepared scan saw the old radii: new parameters mark every env."""
    env = make(lidar_rays=4, per_env_params=True, plan=AHEAD)
    env.step(torch.zeros(env.n_envs, env.n_agents, env.act_dim))
    env.set_agent_params(radius=0.04)
    assert bool(wp.to_torch(env.launches.step_end.marks.mask).all())
    assert torch.equal(wp.to_torch(env.launches.step_end.marks.episode_ahead), env.episode + 1)


def test_which_scenarios_prepare_ahead_and_fuse_the_end():
    """The hooks say what each configuration supports; a plan asking for more is refused by name."""
    assert not make().plan.reset_ahead and not make().plan.fused_step_end  # the CPU's rules: neither
    assert make(plan=AHEAD).plan.reset_ahead
    refused = [
        dict(auto_reset=False),  # nothing to swap in
        dict(fused=False),  # the torch reference resets directly
        dict(n_obstacles=2),  # obstacles are drawn with the spawns
        dict(neighbor_method="grid"),  # the grid would bin the prepared starts
    ]
    for options in refused:
        with pytest.raises(ValueError, match="plan.reset_ahead=True is not possible"):
            make(plan=AHEAD, **options)
    for name in ("give_way", "drone_navigation"):  # their own reset, their own columns
        with pytest.raises(ValueError, match="plan.reset_ahead=True is not possible"):
            swarp.make(name, n_envs=2, device="cpu", auto_reset=True, plan=AHEAD)
    sc = swarp.scenarios.give_way.GiveWayScenario(route_shaping=False)
    hooks = sc.step_end_hooks(sc.make_world())
    assert hooks.fuses_end and not hooks.prepares_ahead
    sc = swarp.scenarios.give_way.GiveWayScenario()  # the route's progress runs between observe and finish
    assert not sc.step_end_hooks(sc.make_world()).fuses_end
    sc = swarp.scenarios.drone_navigation.DroneNavigationScenario()
    assert not sc.step_end_hooks(sc.make_world()).fuses_end
    assert swarp.scenarios.flocking.FlockingScenario().step_end_hooks(None) is None


def test_where_the_step_end_can_be_fused(cpu_blocks):
    assert make(plan=FUSED).plan.fused_step_end
    assert make(n_envs=2, n_agents=OBS_BLOCK, world_size=2.0, plan=FUSED).plan.fused_step_end
    with pytest.raises(ValueError, match=f"whole envs of at most {OBS_BLOCK} agents"):
        make(n_envs=2, n_agents=OBS_BLOCK + 1, world_size=2.0, plan=FUSED)
    assert not make(plan=FUSED_DIRECT_STORE).plan.tiled_rows  # each thread stores its own row
    with pytest.raises(ValueError, match="no fused step end"):
        swarp.make("flocking", n_envs=2, device="cpu", plan=FUSED)


def test_the_fused_end_on_the_cpu_needs_cpu_blocks():
    with pytest.raises(ValueError, match="block barriers need wp.config.enable_cpu_blocks"):
        make(plan=FUSED_DIRECT_STORE)


def test_the_step_rows_kernel_needs_whole_envs_in_a_block():
    with pytest.raises(ValueError, match=f"at most {OBS_BLOCK} agents per env"):
        step_end.step_rows_kernel(None, None, None, None, None, None, float, 8, OBS_BLOCK + 1, 4)


@DEVICES
def test_prepared_resets_make_no_host_transfers(device, generator):
    """Steps with auto-resets from prepared starts, resets and their marks: no host read."""
    env = make(device, lidar_rays=4, plan=AHEAD)
    mask = torch.zeros(env.n_envs, dtype=torch.bool, device=device)
    mask[::2] = True
    episode_before = step_and_reset_without_host_transfers(env, noise_sequence(env, 30, generator), mask)
    assert bool((env.episode >= episode_before + 2).all())  # time limits passed: swaps happened


@pytest.mark.gpu
@pytest.mark.parametrize("user_stream", [False, True])
def test_cuda_graph_prepares_ahead_with_the_direct_bits(user_stream, generator):
    """On CUDA the graph prepares starts on a side stream by default: same bits as the direct
    reset, on torch's default stream and under a user stream."""
    ahead_env = make("cuda:0", n_envs=256, n_agents=5)
    direct_env = make("cuda:0", n_envs=256, n_agents=5, plan={"reset_ahead": False})
    assert ahead_env.graph_mode and ahead_env.plan.reset_ahead and ahead_env.plan.fused_step_end
    noise = noise_sequence(direct_env, 200, generator)
    direct = scripted_rollout(direct_env, noise)
    stream = torch.cuda.Stream() if user_stream else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ahead = scripted_rollout(ahead_env, noise)
    torch.cuda.current_stream().wait_stream(stream)
    assert sum(count_events(direct)) > 0
    assert_bit_identical(direct, ahead)


@pytest.mark.gpu
def test_an_env_built_under_a_user_stream_gives_the_default_streams_bits(generator):
    """Construction queues zero-fills and kernels on Warp's stream; a user stream waits for them
    before the first reset writes the same buffers (the race showed only on a loaded GPU)."""
    default_env = make("cuda:0", n_envs=256, n_agents=5)
    noise = noise_sequence(default_env, 50, generator)
    expected = scripted_rollout(default_env, noise)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    warp_stream = torch.cuda.ExternalStream(wp.get_stream("cuda:0").cuda_stream)
    with torch.cuda.stream(warp_stream):
        torch.cuda._sleep(200_000_000)  # Warp's stream runs construction's work late, as under load
    with torch.cuda.stream(stream):
        rows = scripted_rollout(make("cuda:0", n_envs=256, n_agents=5), noise)
    torch.cuda.current_stream().wait_stream(stream)
    assert_bit_identical(expected, rows)


@pytest.mark.gpu
@pytest.mark.parametrize("tiled", [False, True], ids=["direct_store", "tiled"])
@pytest.mark.parametrize("n_agents", [3, 16])
def test_cuda_fused_step_end_gives_the_split_bits(n_agents, tiled, generator):
    """On CUDA (graph, starts prepared ahead by default): 200 steps with auto-resets, the fused
    step end (its rows stored per thread, as the plan chooses at this size, or tiled) against the
    split launches, bit for bit."""
    split_env = make("cuda:0", n_envs=300, n_agents=n_agents, max_steps=30, plan={"fused_step_end": False})
    fused_env = make("cuda:0", n_envs=300, n_agents=n_agents, max_steps=30, plan={"tiled_rows": tiled})
    assert fused_env.graph_mode and fused_env.plan.fused_step_end and fused_env.plan.reset_ahead
    assert split_env.plan.tiled_rows and make("cuda:0", n_envs=300, n_agents=n_agents).plan.tiled_rows is False
    noise = noise_sequence(split_env, 200, generator)
    split = scripted_rollout(split_env, noise)
    assert sum(count_events(split)) > 0
    assert_bit_identical(split, scripted_rollout(fused_env, noise))


@pytest.mark.gpu
def test_prepared_resets_allocate_nothing_in_steady_state_on_cuda():
    env = make("cuda:0", n_envs=256, lidar_rays=4)
    assert env.graph_mode and env.plan.reset_ahead
    episode_before = env.episode.clone()
    assert_no_steady_state_allocations(env)
    assert bool((env.episode > episode_before).all())  # every env went through auto-resets
