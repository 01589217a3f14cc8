"""swarp against VMAS on navigation: throughput and peak memory, each measurement in its own process.

    python -m swarp.benchmark.compare_vmas --metric both                 # default grid
    python -m swarp.benchmark.compare_vmas --envs 16384 --agents 16 --metric throughput
    python -m swarp.benchmark.compare_vmas --device cpu --envs 1024 --agents 4 --plot vmas_cpu.png

Per (n_envs, n_agents), three runs, each in a fresh subprocess (``swarp.benchmark.peers``), and
with ``--rounds N`` the three N times in turn: the table gives each simulator's median rate and
the median (and range) of the rounds' swarp / VMAS ratios, so a ratio compares runs made next to
each other on a machine whose speed drifts:

* ``vmas``: VMAS 1.5.2 navigation with its defaults (agent-agent collisions, 12-ray lidar,
  2 physics substeps);
* ``vmas lower_bound``: the same with ``collisions=False``, which also removes the lidar: a lower
  bound on VMAS's cost for this task;
* ``swarp``: navigation matched to VMAS's (agent radius 0.1 m, 2 substeps, arena [-1, 1]^2, no
  reset in the step, as VMAS's ``step`` has none), contacts always on, k = 3 nearest neighbors
  observed; the default execution mode (one graph per step).

``--metric throughput`` prints env-steps/s and the speed-ups, ``memory`` the peak memory of each
process (on CUDA: torch's ``max_memory_allocated``, plus Warp's mempool high-water mark for
swarp; on the CPU: peak RSS), ``both`` both. ``--metric memory`` alone runs short timing blocks.
VMAS is not a swarp dependency: ``pip install vmas==1.5.2`` (or ``--python vmas=PATH``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from swarp.benchmark.common import print_table
from swarp.benchmark.compare_sims import (
    add_common_arguments,
    env_steps_rate,
    memory_mib,
    print_conditions,
    resolve_grid,
    run_pair,
    write_outputs,
)
from swarp.benchmark.peers import BenchConfig, parse_pythons

#: Steps per block and blocks when only memory is asked for (the timing is then incidental).
MEMORY_ONLY_STEPS = 5
MEMORY_ONLY_REPEATS = 1


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metric", choices=["throughput", "memory", "both"], default="both")
    add_common_arguments(parser)
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the three simulators this many times in turn; ratios per round"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    device, envs, agents, steps = resolve_grid(args)
    repeats, min_block_s = args.repeats, args.min_block_s
    if args.metric == "memory":
        steps, repeats, min_block_s = MEMORY_ONLY_STEPS, MEMORY_ONLY_REPEATS, 0.0
    pythons = parse_pythons(args.python)
    print(
        f"device={device} metric={args.metric} steps={steps} repeats={repeats} cpu_threads={args.cpu_threads}",
        flush=True,
    )
    results, rate_rows, memory_rows = [], [], []
    for n_agents in agents:
        for n_envs in envs:
            config = BenchConfig(
                "vmas", n_envs, n_agents, device, steps, repeats, min_block_s=min_block_s, cpu_threads=args.cpu_threads
            )
            rounds = []  # (swarp, vmas, vmas lower_bound) env-steps/s of each round
            for _ in range(args.rounds):
                vmas_default, swarp_result = run_pair(config, True, pythons)
                [vmas_lower] = run_pair(dataclasses.replace(config, variant="lower_bound"), False, pythons)
                results += [vmas_default, vmas_lower, swarp_result]
                rounds.append([env_steps_rate(r) for r in (swarp_result, vmas_default, vmas_lower)])
            swarp_rate, default_rate, lower_rate = (statistics.median(column) for column in zip(*rounds, strict=True))
            ratios = [swarp / vmas for swarp, vmas, _ in rounds]
            row = [n_envs, n_agents, swarp_rate, default_rate, lower_rate, statistics.median(ratios)]
            if args.rounds > 1:
                row.append(f"{min(ratios):.2f}-{max(ratios):.2f}")
            rate_rows.append(row + [statistics.median(swarp / lower for swarp, _, lower in rounds)])
            memory_rows.append([n_envs, n_agents] + [memory_mib(r) for r in (swarp_result, vmas_default, vmas_lower)])
    if args.metric in ("throughput", "both"):
        rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
        print(f"\n== env-steps/s (median of repeats{rounds})")
        headers = ["n_envs", "n_agents", "swarp", "vmas", "vmas lower_bound", "swarp/vmas"]
        headers += ["swarp/vmas range"] if args.rounds > 1 else []
        headers += ["swarp/lower_bound"]
        print_table(headers, rate_rows)
    if args.metric in ("memory", "both"):
        print("\n== peak memory [MiB], each simulator in its own process (CPU: peak RSS, +added after imports)")
        print_table(["n_envs", "n_agents", "swarp", "vmas", "vmas lower_bound"], memory_rows)
    print_conditions(results)
    write_outputs(results, args, f"swarp vs VMAS navigation, {device}")


if __name__ == "__main__":
    main()
