"""The contract every fused scenario of the library keeps (``swarp/scenarios/base.py``), checked for
each registered scenario with its defaults and a short time limit: ``swarp.testing.check_scenario``
(the contract user scenarios are checked with: shapes, finite values, determinism, complete
snapshots, masked resets, resets writing every field, final observations, no host transfers,
fused == torch), and what only built-in
scenarios promise: identical reset draws, graph vs eager bit-identity, a single-launch capturable
reset, shard draws, plan layouts with the same bits.

Scenario-specific behaviour (layouts, reward terms, controllers, options) lives in each
scenario's own test module.
"""

import pytest
import torch
import warp as wp

import swarp
from swarp.scenarios.framework.base import get_scenario
from swarp.testing import check_scenario
from tests.support import (
    PARITY_ATOL,
    CountingLauncher,
    assert_bit_identical,
    flat_outputs,
    lidar_refused,
    make_pair,
    mixed_actions,
    parity_rollout,
    random_actions,
    rollout_actions,
)

FUSED = [name for name in swarp.scenario_names() if get_scenario(name).fused_available]
#: Scenarios whose resets round cos/sin in float32 (ring spawns of the body scenarios, see
#: tests/scenarios/test_body_scenarios.py): reset draws agree to this tolerance, not bit for bit,
#: and the rollouts' floats to it too. Every other scenario: bit-exact draws, ``PARITY_ATOL`` floats.
ROUNDED_RESETS = {"transport": 1e-4, "push_t": 1e-4, "balance": 1e-4}
#: Per-scenario options of the contract runs: a short time limit so rollouts cross auto-resets.
OPTIONS = {name: dict(max_steps=15) for name in FUSED}
N_STEPS = 40
N_ENVS = 6
#: Scenarios whose fleet size is part of the task (n_agents is fixed).
FIXED_FLEETS = {"give_way", "speaker_listener"}

SCENARIOS = pytest.mark.parametrize("name", FUSED)


def make_env(name: str, device: str = "cpu", **kwargs) -> swarp.Environment:
    options = dict(n_envs=N_ENVS, device=device, seed=0, auto_reset=True, **OPTIONS[name])
    options.update(kwargs)
    return swarp.make(name, **options)


def action_sequence(env: swarp.Environment, n_steps: int, generator: torch.Generator) -> list[torch.Tensor]:
    return [random_actions(env, generator) for _ in range(n_steps)]


@SCENARIOS
def test_the_scenario_contract_holds(name):
    """``swarp.testing.check_scenario``, the contract user scenarios are checked with: declared
    shapes and info keys, finite values, determinism per seed, complete snapshots, ``reset_at`` masks,
    resets writing every state
    field, ``final_obs``, no host transfers in step/reset_at (fused and torch paths), fused == torch."""
    report = check_scenario(name, n_envs=N_ENVS, n_steps=N_STEPS, parity_atol=ROUNDED_RESETS.get(name, PARITY_ATOL),
                            **OPTIONS[name])  # fmt: skip
    assert all(value == "ok" for value in report.values()), report


@SCENARIOS
def test_fused_matches_torch_reference_with_defaults(name, generator):
    seen = parity_rollout(name, dict(OPTIONS[name]), N_STEPS, generator, atol=ROUNDED_RESETS.get(name, PARITY_ATOL))
    assert seen["truncated"] > 0, "the rollout should cross time limits (auto-resets)"


@SCENARIOS
def test_reset_draws_are_identical_between_fused_and_reference(name):
    """Both paths draw from the same counter-based stream: the reset state agrees bit for bit."""
    fused, reference = make_pair(name, **OPTIONS[name])
    mask = torch.arange(fused.n_envs) % 3 == 0
    for seed in (0, 1, 123456):
        fused.reset(seed=seed)
        reference.reset(seed=seed)
        for _ in range(2):  # a full reset, then a masked one
            fused_tensors = {f"state.{k}": getattr(fused.state, k) for k in ("pos", "theta", "vel", "speed", "ang_vel")}
            fused_tensors.update({f"scenario.{k}": v for k, v in fused.scenario.state_tensors().items()})
            reference_tensors = {
                f"state.{k}": getattr(reference.state, k) for k in ("pos", "theta", "vel", "speed", "ang_vel")
            }
            reference_tensors.update({f"scenario.{k}": v for k, v in reference.scenario.state_tensors().items()})
            for key, value in fused_tensors.items():
                # Memory computed from the draws (prev_*) is equal to rounding; the draws themselves exactly.
                atol = ROUNDED_RESETS.get(name, PARITY_ATOL if "prev_" in key else 0.0)
                if atol == 0.0 or not value.is_floating_point():
                    assert torch.equal(value, reference_tensors[key]), f"seed {seed}: {key}"
                else:
                    torch.testing.assert_close(value, reference_tensors[key], atol=atol, rtol=0, msg=f"{key}")
            atol = ROUNDED_RESETS.get(name, PARITY_ATOL)
            torch.testing.assert_close(fused.obs, reference.obs, atol=atol, rtol=0)
            fused.reset_at(mask)
            reference.reset_at(mask)


@SCENARIOS
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_a_shard_draws_what_its_envs_of_the_whole_batch_draw(name, fused):
    """``env_offset``: resets are keyed by global env index, so a shard replays its slice of the batch."""
    whole = make_env(name, fused=fused)
    shard = make_env(name, fused=fused, n_envs=3, env_offset=2)
    for key in ("pos", "theta"):
        assert torch.equal(getattr(shard.state, key), getattr(whole.state, key)[2:5]), key
    assert torch.equal(shard.obs, whole.obs[2:5])


@SCENARIOS
def test_reset_is_one_capturable_launch(name):
    env = make_env(name)
    scenario = env.scenario
    assert scenario.supports_graph_reset()
    launcher = CountingLauncher()
    scenario.launch_reset(launcher, env.buffers.reset_mask)
    assert len(launcher.kernels) == 1
    # The whole step, auto-reset included, is one graph (Warp's CPU graph here).
    assert env.execution_mode == "graph"


@SCENARIOS
def test_eager_replay_and_graph_are_bit_identical(name, generator):
    eager_env = make_env(name, plan={"launch": "eager"})
    assert eager_env.execution_mode == "eager"
    actions = action_sequence(eager_env, N_STEPS, generator)
    eager = rollout_actions(eager_env, actions)
    assert sum(int(row["truncated"].sum()) for row in eager) > 0
    replay_env = make_env(name, use_graph=False)
    assert replay_env.execution_mode == "replay"
    assert_bit_identical(eager, rollout_actions(replay_env, actions))
    graph_env = make_env(name)
    assert graph_env.execution_mode == "graph"
    assert_bit_identical(eager, rollout_actions(graph_env, actions))


@SCENARIOS
@pytest.mark.parametrize("lidar_rays, list_resets", [(0, False), (3, False), (3, True)])
def test_final_obs_is_the_row_the_reset_overwrote(name, lidar_rays, list_resets, generator):
    """With auto-reset, ``info["final_obs"]`` of a finished env is bit for bit the observation
    (lidar columns included) a twin without auto-reset returns on that step, whether the
    environment saves the rows or the scenario's masked observation does (``saves_final_obs``),
    and the restarted envs match the twin's ``reset_at``, whether the auto-reset's launches walk a
    list of the finished envs (``plan.list_resets``) or their mask."""
    if lidar_rays and lidar_refused(name):
        return
    auto = make_env(name, lidar_rays=lidar_rays, plan={"list_resets": list_resets})
    plain = make_env(name, lidar_rays=lidar_rays, auto_reset=False)
    n_done = 0
    for t, actions in enumerate(action_sequence(auto, N_STEPS, generator)):
        _, _, terminated, truncated, info = flat_outputs(auto, auto.step(actions))
        p_obs, _, p_terminated, p_truncated, _ = flat_outputs(plain, plain.step(actions))
        done = terminated | truncated
        assert torch.equal(done, p_terminated | p_truncated), f"step {t}"
        assert torch.equal(info["final_obs"][done], p_obs[done]), f"step {t}: final_obs"
        plain.reset_at(done)
        assert torch.equal(auto.obs, plain.obs), f"step {t}: obs after the reset"
        for key, value in plain.state._asdict().items():
            assert torch.equal(getattr(auto.state, key), value), f"step {t}: state {key}"
        n_done += int(done.sum())
    assert n_done > 0, "no episode ended: the test saw no final_obs"


@SCENARIOS
@pytest.mark.parametrize("lidar_rays", [0, 4])
def test_tiled_observation_rows_equal_the_per_thread_store(name, lidar_rays, monkeypatch, generator, launched):
    """The CUDA step stores observation rows through a tile (``swarp/scenarios/rows.py``: shared
    memory, one coalesced store per block of rows; navigation's kernel that ends the step,
    ``step_rows``, stores them so too); Warp runs those kernels on the CPU when CPU blocks are
    enabled. Same bits as the per-thread store, with a partial last block (7 x 5 = 35 rows;
    7 x 2 for the two-agent give_way), and with lidar columns after the scenario's (the tile writes
    only the scenario's columns)."""
    if lidar_rays and lidar_refused(name):
        return
    options = dict(n_envs=7, lidar_rays=lidar_rays, **({} if name in FIXED_FLEETS else {"n_agents": 5}))
    actions = action_sequence(make_env(name, **options), 30, generator)
    per_thread = rollout_actions(make_env(name, **options), actions)
    uses_rows = any(key.startswith("observe_kernels__locals__") for key in launched)
    tiled = ("observe_rows", "step_rows")
    assert not any(key.endswith(tiled) for key in launched)
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    assert_bit_identical(per_thread, rollout_actions(make_env(name, **options, plan={"tiled_rows": True}), actions))
    assert any(key.endswith(tiled) for key in launched) == uses_rows


@SCENARIOS
def test_cuda_layouts_give_the_cpu_layout_bits(name, generator):
    """CUDA's layouts forced on the CPU through the plan: one item (agent, spawn cell, pair) per
    thread instead of one env per thread, and neighbor lists kept in registers (filled by the
    two-pass brute scan) instead of shifted in local memory, for every K here. Every scenario's
    trajectory keeps its bits."""
    actions = action_sequence(make_env(name), 25, generator)
    reference = rollout_actions(make_env(name), actions)
    cuda_like = make_env(name, plan={"one_thread_per_env": False, "register_lists": True})
    assert_bit_identical(reference, rollout_actions(cuda_like, actions))


@SCENARIOS
def test_grad_steps_reach_the_actions_and_leave_the_env_where_no_grad_steps_do(name, generator):
    """A grad-mode step runs the torch reference (``post_step`` included) on the taped physics: the
    loss reaches the actions, and the env ends up bit for bit where the same no-grad steps leave it."""
    plain_env, grad_env = make_env(name, fused=False), make_env(name, fused=False)
    for t, actions in enumerate(action_sequence(plain_env, 20, generator)):
        with torch.no_grad():
            plain_env.step(actions)
        actions = actions.clone().requires_grad_()
        obs, reward, terminated, truncated, info = flat_outputs(grad_env, grad_env.step(actions))
        (obs.sum() + reward.sum()).backward()
        assert torch.isfinite(actions.grad).all(), f"step {t}"
        # Where every env was reset, obs are constants and rewards may be discrete (discovery).
        if not bool((terminated | truncated).all()):
            assert actions.grad.abs().sum() > 0, f"step {t}"
        assert_bit_identical([plain_env.get_state()], [grad_env.get_state()])
    assert int(grad_env.episode.sum()) > 0, "the rollout should cross an auto-reset"


@SCENARIOS
def test_scripted_controller_stays_in_the_action_box(name, generator):
    env = make_env(name)
    low, high = env.action_bounds
    for _ in range(10):
        actions = mixed_actions(env, generator)
        assert actions.shape == (N_ENVS, env.n_agents, env.act_dim) and actions.dtype == env.dtype
        env.step(actions)
    try:
        scripted = env.scenario.scripted_actions()
    except NotImplementedError:
        pytest.skip(f"{name} has no scripted controller")
    assert bool(((scripted >= low) & (scripted <= high)).all())


# --- CUDA -------------------------------------------------------------------------------------------


@pytest.mark.gpu
@SCENARIOS
def test_graph_and_replay_are_bit_identical_on_cuda(name, generator):
    graph_env = make_env(name, device="cuda:0", n_envs=64)
    assert graph_env.graph_mode
    actions = [a.to("cuda:0") for a in action_sequence(make_env(name, n_envs=64), N_STEPS, generator)]
    graph = rollout_actions(graph_env, actions)
    assert_bit_identical(graph, rollout_actions(make_env(name, device="cuda:0", n_envs=64, use_graph=False), actions))


@pytest.mark.gpu
@SCENARIOS
def test_cuda_resets_match_the_cpu(name):
    """The same kernels on the GPU draw the same resets as on the CPU (to float32 rounding: the CUDA
    compiler may fuse a multiply-add the CPU build rounds twice)."""
    cpu, gpu = make_env(name), make_env(name, device="cuda:0")
    for key in ("pos", "theta"):
        torch.testing.assert_close(getattr(gpu.state, key).cpu(), getattr(cpu.state, key), atol=1e-6, rtol=0)
    torch.testing.assert_close(gpu.obs.cpu(), cpu.obs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["navigation", "formation", "discovery", "flocking", "sampling", "spread"])
def test_arena_scenarios_take_the_neighbor_method(name):
    # The grid where asked (at 4 agents "auto" picks brute force), and a named error for a bad value.
    assert swarp.make(name, n_envs=1, device="cpu").stepper.neighbor_method == "brute"
    assert swarp.make(name, n_envs=1, device="cpu", neighbor_method="grid").stepper.neighbor_method == "grid"
    with pytest.raises(ValueError, match=rf"{name} option neighbor_method must be one of brute, grid, auto, got 'kd'"):
        swarp.make(name, n_envs=1, device="cpu", neighbor_method="kd")
