"""End-to-end speed of ``swarp.train`` (env-steps/s of the training loop) and one iteration's split.

    python -m swarp.benchmark.train --envs 4096 16384 --iterations 30
    python -m swarp.benchmark.train --envs 4096 --capture both        # graphs against eager, same run

Each row trains navigation (its task record, the defaults) for ``--iterations`` iterations after
``--warmup`` ones (the warm-up iterations run eagerly, compile and capture), each followed by the
health check ``swarp.train`` makes (``swarp.train.health``) and reports env-steps/s
of the timed ones (over all ``--runs`` batched runs), the wall time of one iteration, and the mean
device time of each stage (collect, advantages, update) in microseconds::

    python -m swarp.benchmark.train --envs 4096 --runs 1 8             # 8 seeds in one process
"""

from __future__ import annotations

import argparse
import time

import torch

import swarp
from swarp.benchmark.common import print_table
from swarp.train import Trainer, get_task, make_config
from swarp.train.health import HealthWatch
from swarp.train.ppo import StageClock


def bench(
    scenario: str, n_envs: int, capture: bool, iterations: int, warmup: int, device: str, runs: int = 1, **overrides
) -> dict:
    """Time ``iterations`` training iterations of ``runs`` batched runs of ``scenario`` at ``n_envs``
    envs each, after ``warmup`` iterations."""
    task = get_task(scenario)
    envs = [swarp.make(scenario, n_envs=n_envs, device=device, seed=k, **task.env_kwargs()) for k in range(runs)]
    env = envs[0]
    config = make_config({"n_envs": n_envs, "capture": capture, "run_dir": "", **overrides}, task.overrides)
    if env.torch_device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
    trainer = Trainer.build(envs, task, config, seeds=list(range(runs)))
    watch = HealthWatch(trainer)
    for i in range(warmup):
        trainer.iterate()
        watch.check(i)
    trainer.read_metrics()
    sync = torch.cuda.synchronize if env.torch_device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for i in range(iterations):
        trainer.iterate()
        if watch.check(warmup + i) is not None:  # what swarp.train reads every iteration (no stall)
            raise RuntimeError("the benchmark's training diverged")
    trainer.read_metrics()  # what a logged iteration reads (one host sync)
    sync()
    seconds = time.perf_counter() - start
    clock = StageClock(env.torch_device)
    for _ in range(3):
        trainer.iterate(clock)
    stages = clock.read()
    frames = iterations * n_envs * config.rollout_steps * runs
    for run_env in envs:
        run_env.close()
    row = {"envs": n_envs, "runs": runs, "capture": capture, "SPS": frames / seconds}
    row["iteration_ms"] = 1e3 * seconds / iterations
    row.update({f"{k}_us": v for k, v in stages.items()})
    row["capture_s"] = trainer.capture_seconds()
    return row


def profile(scenario: str, n_envs: int, runs: int, device: str, top: int = 18, **overrides) -> str:
    """The device kernels of one eager training iteration (after a warm-up one), by total time: the
    table ``torch.profiler`` prints. Eager, so each kernel is its own row."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    task = get_task(scenario)
    envs = [swarp.make(scenario, n_envs=n_envs, device=device, seed=k, **task.env_kwargs()) for k in range(runs)]
    config = make_config({"n_envs": n_envs, "capture": False, "run_dir": "", **overrides}, task.overrides)
    torch.backends.cuda.matmul.allow_tf32 = config.tf32
    trainer = Trainer.build(envs, task, config, seeds=list(range(runs)))
    trainer.iterate()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        trainer.iterate()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=top, max_name_column_width=60)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation", choices=swarp.scenario_names())
    parser.add_argument("--envs", type=int, nargs="+", default=[4096])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--capture", choices=["on", "off", "both"], default="on")
    parser.add_argument("--runs", type=int, nargs="+", default=[1], help="batched runs (seeds) per process")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast of the update's forward passes")
    parser.add_argument("--profile", action="store_true", help="also print the kernels of one iteration (CUDA)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--minibatches", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    overrides = {k: getattr(args, k) for k in ("epochs", "minibatches", "hidden") if getattr(args, k) is not None}
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.capture]
    if args.bf16:
        overrides["bf16"] = True
    rows = [bench(args.scenario, n, mode, args.iterations, args.warmup, device, k, **overrides)
            for n in args.envs for k in args.runs for mode in modes]  # fmt: skip
    keys = ["envs", "runs", "capture", "SPS", "iteration_ms", "collect_us", "advantages_us", "update_us", "capture_s"]
    print_table(keys, [[round(r[k], 3) if isinstance(r[k], float) else r[k] for k in keys] for r in rows])
    if args.profile and device.startswith("cuda"):
        for n in args.envs:
            for k in args.runs:
                print(f"\n== kernels of one eager iteration: {n} envs x {k} runs")
                print(profile(args.scenario, n, k, device, **overrides))
    return rows


if __name__ == "__main__":
    main()
