"""Where an environment step's time goes: on CUDA host time vs GPU time, and GPU time per stage.

    python -m swarp.benchmark.profile_env --envs 4096 16384 --agents 3 16
    python -m swarp.benchmark.profile_env --scenarios flocking formation discovery --envs 4096 --agents 16

* ``wall``: median wall time per ``env.step`` with synchronisation (what throughput reports).
* ``host``: Python time per ``env.step`` call while the GPU runs behind (the host floor).
* ``gpu``: the step's launch sequence captured in one graph and timed with events (the GPU floor).
* per stage: each part of the sequence captured and timed alone.

``--kernels`` instead lists GPU time per kernel of one fused step (Warp's CUDA activity timing over
eager launches, averaged per step), the finest split short of Nsight. On the CPU (``--device cpu``,
``--kernels`` only) it lists the host time of each launch of one fused step on one thread
(``cpu_shards=1``), the step recorded and replayed ``--iters`` times, each launch timed in place
(Python's launch overhead included; a graph pays less of it):

    python -m swarp.benchmark.profile_env --device cpu --kernels --envs 512 --agents 4 --option substeps=2
"""

from __future__ import annotations

import argparse
import time

import torch
import warp as wp

import swarp
from swarp.benchmark.common import parse_option, print_table, synchronize, time_graph, time_wall
from swarp.benchmark.throughput import make_env, random_actions
from swarp.runtime.launch import EAGER, Recorder
from swarp.scenarios.framework.base import OBSERVE_STEP


def warm_env(n_envs: int, n_agents: int, scenario: str = "navigation", device: str = "cuda:0", **options):
    """``(env, actions)``: an env of ``scenario`` on ``device`` (``options`` go to
    ``throughput.make_env``: ``lidar_rays``, ``plan``, scenario keywords, and ``auto_reset``, on by
    default) after three steps of fixed random ``actions`` (compiled, graph captured)."""
    auto_reset = bool(options.pop("auto_reset", True))
    env = make_env(n_envs, n_agents, device, "auto", "auto", auto_reset, 200, scenario=scenario, **options)
    actions = random_actions(env)
    with torch.no_grad():
        for _ in range(3):
            env.step(actions)
    return env, actions


def profile(n_envs: int, n_agents: int, iters: int, scenario: str = "navigation", **options) -> list:
    """A row ``[scenario, n_envs, n_agents, wall, host, *stages]`` (us/step); ``options`` as in
    ``warm_env``."""
    env, actions = warm_env(n_envs, n_agents, scenario, **options)
    with torch.no_grad():
        wall = time_wall(lambda: env.step(actions), env.device, iters)
        synchronize(env.device)
        start = time.perf_counter()
        for _ in range(iters):
            env.step(actions)
        host = (time.perf_counter() - start) / iters
        synchronize(env.device)
        sc, world = env.scenario, env.world
        stages = {
            "step": lambda: env.launches.step(EAGER),
            "substeps": lambda: world.stepper.substep(
                world.state, world.actions_array, world.neighbors, world.forces, world.state, world.invalid_action_flag
            ),
            "list build alone": lambda: world.build_neighbors(),
            "observe+lists+finish": lambda: sc.launch_observe(EAGER, mode=OBSERVE_STEP),
            "reset path": lambda: env.launches.step_end.launch_new_episodes(EAGER),
        }
        snapshot = env.get_state()
        gpu = {name: time_graph(fn, env.device, iters) for name, fn in stages.items()}
        env.set_state(snapshot)
    return [scenario, n_envs, n_agents, wall * 1e6, host * 1e6] + [gpu[k] * 1e6 for k in stages]


def kernel_times(n_envs: int, n_agents: int, iters: int, scenario: str = "navigation", **options) -> list:
    """Rows ``[scenario, n_envs, n_agents, kernel, us/step, share]`` for one fused step, eager
    launches; ``options`` as in ``warm_env``."""
    env, _ = warm_env(n_envs, n_agents, scenario, **options)
    with torch.no_grad():
        synchronize(env.device)
        wp.timing_begin(cuda_filter=wp.TIMING_KERNEL)
        for _ in range(iters):
            env.launches.step(EAGER)
        results = wp.timing_end()
    per_kernel: dict[str, float] = {}
    for r in results:
        per_kernel[r.name] = per_kernel.get(r.name, 0.0) + r.elapsed * 1e3 / iters
    return share_rows(scenario, n_envs, n_agents, per_kernel)


def share_rows(scenario: str, n_envs: int, n_agents: int, per_kernel: dict[str, float]) -> list:
    """Rows ``[scenario, n_envs, n_agents, kernel, us/step, share]`` of ``per_kernel`` (us a step by
    kernel), the most expensive first, and a ``total`` row."""
    total = sum(per_kernel.values())
    rows = [
        [scenario, n_envs, n_agents, name, us, us / total]
        for name, us in sorted(per_kernel.items(), key=lambda x: -x[1])
    ]
    rows.append([scenario, n_envs, n_agents, "total", total, 1.0])
    return rows


def cpu_kernel_times(n_envs: int, n_agents: int, iters: int, scenario: str = "navigation", **options) -> list:
    """``kernel_times``' rows on the CPU: one fused step on one thread, recorded, then replayed whole
    ``iters`` times with each launch timed in place (host us per step, launches of one kernel
    summed), so every launch sees the state a real step gives it; the state is restored
    afterwards. ``options`` as in ``warm_env``."""
    env, _ = warm_env(n_envs, n_agents, scenario, "cpu", plan={"cpu_shards": 1}, **options)
    with torch.no_grad():
        snapshot = env.get_state()
        recorder = Recorder()
        env.launches.step(recorder)
        commands = recorder.program().commands()
        spent = [0.0] * len(commands)
        for _ in range(iters):
            for i, (_, replay) in enumerate(commands):
                start = time.perf_counter()
                replay()
                spent[i] += time.perf_counter() - start
        env.set_state(snapshot)
    per_kernel: dict[str, float] = {}
    for (what, _), seconds in zip(commands, spent, strict=True):
        name = what.rsplit("__", 1)[-1]
        per_kernel[name] = per_kernel.get(name, 0.0) + seconds / iters * 1e6
    return share_rows(scenario, n_envs, n_agents, per_kernel)


stage_names = ["gpu step", "substeps", "list build alone", "observe+lists+finish", "reset path"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    parser.add_argument("--envs", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--agents", type=int, nargs="+", default=[3, 16, 64])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--scenarios", nargs="+", default=["navigation"], help="fused scenarios to profile")
    parser.add_argument("--kernels", action="store_true", help="GPU time per kernel instead of per stage")
    parser.add_argument("--lidar-rays", type=int, default=0, help="append a lidar scan of this many rays")
    parser.add_argument(
        "--option",
        action="append",
        type=parse_option,
        default=[],
        help="scenario option key=value, e.g. max_neighbors=8",
    )
    args = parser.parse_args(argv)
    options = {"lidar_rays": args.lidar_rays, **dict(args.option)}
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and not args.kernels:
        parser.error("on the CPU only --kernels is measured (the stages time CUDA graphs)")
    if args.kernels:
        cpu = device == "cpu"
        times = cpu_kernel_times if cpu else kernel_times
        what = "CPU us per step, one thread, replayed launches" if cpu else "GPU us per step, eager launches"
        rows = [
            r
            for name in args.scenarios
            for e in args.envs
            for a in args.agents
            for r in times(e, a, args.iters, name, **options)
        ]
        print(f"swarp {swarp.__version__}, torch {torch.__version__}; {what}")
        print_table(["scenario", "n_envs", "n_agents", "kernel", "us/step", "share"], rows)
        return
    rows = [
        profile(e, a, args.iters, name, **options) for name in args.scenarios for e in args.envs for a in args.agents
    ]
    print(f"swarp {swarp.__version__}, torch {torch.__version__}; all times us/step")
    print_table(["scenario", "n_envs", "n_agents", "wall", "host", *stage_names], rows)


if __name__ == "__main__":
    main()
