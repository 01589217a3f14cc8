"""A/B of execution-plan fields in one process: two environments, interleaved rounds.

    python -m swarp.benchmark.plan_ab --a fused_substep=False --b fused_substep=True --device cpu --envs 1024 --agents 4
    python -m swarp.benchmark.plan_ab --a tiled_rows=False --b tiled_rows=True --envs 1024 --agents 8 --rounds 20

Per cell (scenario, n_envs x n_agents): environments A and B as ``throughput.make_env`` builds them
(realistic auto-reset, the scenario's ``--option`` values), each with its ``--a`` / ``--b`` plan
fields fixed. After a warm-up of the
same fixed random actions, their observations must be equal bit for bit (a plan field changes how a
step runs, never what it computes; ``--tolerate-bits`` skips the gate); then ``--rounds`` rounds
each time ``--iters`` steps of A and of B, the order alternating, so both see the same machine
drift. Reported: the median and minimum us/step of each and the median, minimum and maximum of the
per-round ratio A / B (above 1: B is faster).
"""

from __future__ import annotations

import argparse
import statistics

import torch
import warp as wp

import swarp
from swarp.benchmark.common import check_health, parse_option, print_table, synchronize, time_wall
from swarp.benchmark.throughput import make_env, random_actions


def run_cell(args, n_envs: int, n_agents: int, device: str) -> list:
    """``[n_envs, n_agents, A us/step, B us/step, ratio median, ratio min, ratio max]`` (medians)."""
    envs, actions = [], []
    for fields in (args.a, args.b):
        env = make_env(
            n_envs, n_agents, device, "auto", "auto", True, args.max_steps, scenario=args.scenario,
            plan=dict(fields), **dict(args.option),
        )  # fmt: skip
        envs.append(env)
        actions.append(random_actions(env))
    with torch.no_grad():
        for _ in range(args.warmup):
            for env, act in zip(envs, actions, strict=True):
                env.step(act)
        synchronize(device)
        if not args.tolerate_bits and not torch.equal(envs[0].obs, envs[1].obs):
            raise RuntimeError(f"{n_envs} x {n_agents}: A's and B's observations differ after the warm-up")
        samples = ([], [])
        for r in range(args.rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for i in order:
                env, act = envs[i], actions[i]
                samples[i].append(time_wall(lambda env=env, act=act: env.step(act), device, args.iters, 1) * 1e6)
    for env in envs:
        check_health(env, f"plan_ab at {n_envs} x {n_agents}")
    ratios = [a / b for a, b in zip(*samples, strict=True)]
    a_us, b_us = statistics.median(samples[0]), statistics.median(samples[1])
    return [
        n_envs,
        n_agents,
        a_us,
        min(samples[0]),
        b_us,
        min(samples[1]),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", action="append", type=parse_option, default=[], help="A's plan field=value (repeatable)")
    parser.add_argument("--b", action="append", type=parse_option, default=[], help="B's plan field=value (repeatable)")
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available)")
    parser.add_argument("--scenario", default="navigation", choices=swarp.scenario_names())
    parser.add_argument("--envs", type=int, nargs="+", default=[1024])
    parser.add_argument("--agents", type=int, nargs="+", default=[4])
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument(
        "--option", action="append", type=parse_option, default=[], help="scenario option key=value (repeatable)"
    )
    parser.add_argument("--warmup", type=int, default=30, help="steps of each before the bit check")
    parser.add_argument("--iters", type=int, default=None, help="steps a round (default 100 CPU, 300 CUDA)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tolerate-bits", action="store_true", help="time even where the observations differ")
    args = parser.parse_args(argv)
    if not args.a and not args.b:
        parser.error("give the plan fields of A or B (--a field=value, --b field=value)")
    if args.rounds < 1 or args.warmup < 1:
        parser.error("--rounds and --warmup must be >= 1")
    device = args.device or ("cuda:0" if wp.is_cuda_available() else "cpu")
    args.iters = args.iters or (300 if device.startswith("cuda") else 100)
    if not device.startswith("cuda"):
        torch.set_num_threads(1)  # the step's own shards decide its threads
    print(f"device={device} torch={torch.__version__} warp={wp.__version__} scenario={args.scenario} "
          f"options={dict(args.option)} A={dict(args.a)} B={dict(args.b)} rounds={args.rounds} x {args.iters} steps",
          flush=True)  # fmt: skip
    rows = []
    for n_envs in args.envs:
        for n_agents in args.agents:
            rows.append(run_cell(args, n_envs, n_agents, device))
            # Each cell as it ends, so a run cut short still leaves its numbers.
            print(f"  {n_envs} x {n_agents}: A {rows[-1][2]:.2f} us, B {rows[-1][4]:.2f} us, A/B {rows[-1][6]:.3f}",
                  flush=True)  # fmt: skip
    headers = ["n_envs", "n_agents", "A us/step", "A min", "B us/step", "B min", "A/B median", "A/B min", "A/B max"]
    print_table(headers, rows)


if __name__ == "__main__":
    main()
