"""The execution plan (``swarp/runtime/plan.py``): its rules, fixed fields, and refusals by name."""

import dataclasses

import pytest
import torch

import swarp
from swarp.runtime.plan import (
    ENV_BLOCK,
    GRAPH_WORKERS_MAX_SHARDS,
    LIDAR_RAYS_PER_THREAD,
    Capabilities,
    ExecutionPlan,
    choose_plan,
    has_triton,
    throughput_bound,
)

FUSED = Capabilities(capturable=True, fused=True, auto_reset=True, fuses_end=True, prepares_ahead=True)


def test_the_cpu_plan():
    """The CPU: one thread walks an env, lists shift, rows are stored per thread, the auto-reset
    lists its envs (a masked CPU thread is not free to skip), no fused end, nothing prepared ahead."""
    plan = choose_plan("cpu", 1024, 4, 8, can=FUSED)
    assert plan == ExecutionPlan(launch="graph", list_resets=True)
    assert plan.split(7) == (7, 1)
    assert choose_plan("cpu", 1024, 4, 8, use_graph=False, can=FUSED).launch == "replay"
    assert choose_plan("cpu", 1024, 4, 8, can=Capabilities()).launch == "replay"  # nothing capturable
    assert not choose_plan("cpu", 1024, 4, 8, can=dataclasses.replace(FUSED, auto_reset=False)).list_resets
    assert not throughput_bound("cpu", 1 << 20, 64)


def test_the_shards_hand_off_to_graph_workers_up_to_four_shards_of_graphs():
    """Graph workers for 2 to ``GRAPH_WORKERS_MAX_SHARDS`` shards of graphs; a pool past that or
    without graphs; none on one thread."""

    def plan(n_envs, threads, **kwargs):
        return choose_plan("cpu", n_envs, 4, 8, can=FUSED, cpu_threads=threads, **kwargs)

    assert plan(1024, 2).cpu_shards == 2 and plan(1024, 2).cpu_graph_workers
    assert plan(2048, 8).cpu_shards == GRAPH_WORKERS_MAX_SHARDS and plan(2048, 8).cpu_graph_workers
    assert plan(8192, 8).cpu_shards == 8 and not plan(8192, 8).cpu_graph_workers
    assert not plan(1024, 2, use_graph=False).cpu_graph_workers
    assert not plan(1024, 1).cpu_graph_workers
    assert not plan(256, 2).cpu_graph_workers  # too few envs to shard


def test_the_cpu_torch_reference_compiles_only_when_asked_for_a_graph():
    """``use_graph=True`` on the CPU torch reference compiles its torch work (the first step costs
    seconds, so not by default); fused steps and CUDA never do."""
    torch_ref = Capabilities(auto_reset=True)
    assert choose_plan("cpu", 256, 8, 8, use_graph=True, can=torch_ref).compile_torch
    assert not choose_plan("cpu", 256, 8, 8, can=torch_ref).compile_torch
    assert not choose_plan("cpu", 256, 8, 8, use_graph=False, can=torch_ref).compile_torch
    assert not choose_plan("cpu", 256, 8, 8, use_graph=True, can=FUSED).compile_torch
    assert choose_plan("cpu", 256, 8, 8, can=torch_ref, fixed={"compile_torch": True}).compile_torch


def test_the_launch_mode_escape_hatch(monkeypatch):
    """``SWARP_LAUNCH_MODE=eager`` turns replayed launches into plain ones (graphs stay graphs)."""
    monkeypatch.setenv("SWARP_LAUNCH_MODE", "eager")
    assert choose_plan("cpu", 16, 4, 8, use_graph=False, can=FUSED).launch == "eager"
    assert choose_plan("cpu", 16, 4, 8, can=FUSED).launch == "graph"
    monkeypatch.setenv("SWARP_LAUNCH_MODE", "sometimes")
    with pytest.raises(ValueError, match="SWARP_LAUNCH_MODE must be 'replay' or 'eager'"):
        choose_plan("cpu", 16, 4, 8, use_graph=False, can=FUSED)


def test_fixed_fields_stay_and_the_rules_choose_around_them():
    """Fixing ``reset_ahead`` on the CPU turns the list off (nothing would walk it)."""
    plan = choose_plan("cpu", 16, 4, 8, can=FUSED, fixed={"reset_ahead": True})
    assert plan.reset_ahead and not plan.list_resets
    whole = dataclasses.replace(plan, async_cpu="inline")
    assert choose_plan("cpu", 16, 4, 8, can=FUSED, fixed=whole) == whole


@pytest.mark.parametrize(
    "fixed, can, match",
    [
        ({"warp_speed": True}, FUSED, r"unknown plan field\(s\) \['warp_speed'\]"),
        ({"launch": "graph"}, Capabilities(), "plan.launch='graph' is not possible here: this step cannot be captured"),
        ({"launch": "fast"}, FUSED, "plan.launch must be one of"),
        ({"tiled_rows": True}, FUSED, "needs wp.config.enable_cpu_blocks"),
        ({"fused_step_end": True}, FUSED, "block barriers need wp.config.enable_cpu_blocks"),
        ({"reset_ahead": True}, dataclasses.replace(FUSED, prepares_ahead=False), "plan.reset_ahead=True"),
        ({"reset_ahead": True, "list_resets": True}, FUSED, "list_resets must be False"),
        ({"list_resets": True}, dataclasses.replace(FUSED, auto_reset=False), "only the fused auto-reset"),
        ({"lidar_side_stream": True}, FUSED, "side streams are CUDA streams"),
        ({"lidar_rays_per_thread": -1}, FUSED, "lidar_rays_per_thread must be an int >= 0"),
        ({"env_block": 0}, FUSED, "env_block must be None or an int >= 1"),
        ({"register_lists": 1}, FUSED, "register_lists must be a bool"),
        ({"async_cpu": "often"}, FUSED, "plan.async_cpu must be one of"),
        ({"compile_torch": True}, FUSED, "plan.compile_torch=True is not possible here: .* fused=False"),
        ({"compile_torch": "yes"}, Capabilities(), "plan.compile_torch must be a bool"),
        ({"cpu_graph_workers": True}, FUSED, "plan.cpu_graph_workers=True is not possible here: .* cpu_shards >= 2"),
        (
            {"cpu_graph_workers": True, "cpu_shards": 2, "launch": "replay"},
            FUSED,
            "plan.cpu_graph_workers=True is not possible here: .* launch='graph'",
        ),
    ],
)
def test_impossible_or_malformed_plans_are_refused_by_name(fixed, can, match):
    with pytest.raises((ValueError, TypeError), match=match):
        choose_plan("cpu", 16, 4, 8, can=can, fixed=fixed)


def test_an_environment_shows_its_plan_and_takes_fixed_fields():
    env = swarp.make("navigation", n_envs=4, device="cpu", auto_reset=True)
    assert isinstance(env.plan, ExecutionPlan) and env.plan.launch == "graph" and env.graph_mode
    assert env.stepper.plan is env.plan and env.lidar is None
    assert swarp.make("navigation", n_envs=4, device="cpu", auto_reset=True, use_graph=False).plan.launch == "replay"
    env = swarp.make("navigation", n_envs=4, device="cpu", auto_reset=True, plan={"list_resets": False})
    assert not env.plan.list_resets
    with pytest.raises(TypeError, match="plan must be an ExecutionPlan, a mapping"):
        swarp.make("navigation", n_envs=4, device="cpu", plan="fast")
    with pytest.raises(ValueError, match="plan.launch='graph' is not possible"):
        swarp.make("navigation", n_envs=4, device="cpu", fused=False, plan={"launch": "graph"})


def test_the_thread_layout_of_the_plan_reaches_every_kernel(generator):
    """One agent per thread and register lists forced on the CPU (CUDA's layout) give the CPU
    layout's bits: the plan decides the layout of every launch, physics and scenario alike."""
    options = dict(n_envs=6, device="cpu", seed=2, auto_reset=True, max_steps=9, n_agents=5, world_size=0.5)
    cpu = swarp.make("navigation", **options)
    gpu_like = swarp.make("navigation", **options, plan={"one_thread_per_env": False, "register_lists": True})
    assert gpu_like.plan.split(5) == (1, 5)
    low, high = cpu.action_bounds
    for _ in range(25):
        actions = low + (high - low) * torch.rand(6, 5, 2, generator=generator)
        a, b = cpu.step(actions), gpu_like.step(actions)
        assert all(x.equal(y) for x, y in zip(a[:4], b[:4], strict=True))


@pytest.mark.gpu
def test_the_cuda_plan_of_small_and_large_batches():
    """A latency-bound CUDA batch: one agent per thread, register lists, tiled rows, the fused end
    and starts prepared ahead, no list; from two GPU-fulls of agent threads the split end and the list."""
    small = choose_plan("cuda:0", 4096, 16, 8, can=dataclasses.replace(FUSED, lidar=True))
    assert small == ExecutionPlan(
        launch="graph",
        one_thread_per_env=False,
        env_block=ENV_BLOCK,
        register_lists=True,
        tiled_rows=True,
        fused_step_end=True,
        reset_ahead=True,
        lidar_rays_per_thread=LIDAR_RAYS_PER_THREAD,
        grad_step="compiled" if has_triton() else "recompute",
    )
    big = choose_plan("cuda:0", 262144, 16, 8, can=FUSED)
    assert throughput_bound("cuda:0", 262144, 16) and not throughput_bound("cuda:0", 16384, 16)
    assert not big.fused_step_end and not big.reset_ahead and big.list_resets
    assert not choose_plan("cuda:0", 4096, 16, 32, can=FUSED).register_lists  # wider than 16
    # The fused end of a batch of at most DIRECT_ROWS_MAX_THREADS agent threads stores rows per thread.
    tiny = choose_plan("cuda:0", 1024, 8, 8, can=FUSED)
    assert tiny.fused_step_end and not tiny.tiled_rows
    assert choose_plan("cuda:0", 1024, 16, 8, can=FUSED).tiled_rows
    assert choose_plan("cuda:0", 1024, 8, 8, can=dataclasses.replace(FUSED, fuses_end=False)).tiled_rows
    side = choose_plan("cuda:0", 4096, 16, 8, can=dataclasses.replace(FUSED, lidar=True, prepares_ahead=False))
    assert side.lidar_side_stream and not side.reset_ahead
    with pytest.raises(ValueError, match="captured as one CUDA graph instead"):
        choose_plan("cuda:0", 64, 4, 8, can=Capabilities(capturable=True), fixed={"compile_torch": True})
