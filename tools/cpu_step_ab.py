"""The CPU step of two swarp trees, interleaved: process time per step, each run in its own process.

    mkdir -p .ab/base && git archive <commit> swarp | tar -x -C .ab/base
    python tools/cpu_step_ab.py --base .ab/base --new . --rounds 8

Each run builds navigation with compare_vmas' options (1 m arena, 0.1 m agents, 2 substeps, no
auto-reset) on one thread, steps 20 times, then times 7 blocks of steps and keeps the best block's
process time per step (CPU time: time another tenant takes from this VM is not counted). Rounds
alternate which tree goes first; the table gives each cell's per-round ratios and their median.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys

WORKER = """
import sys, time, torch, swarp
n_envs, n_agents, steps = (int(x) for x in sys.argv[1:4])
torch.set_num_threads(1)
env = swarp.make("navigation", n_envs=n_envs, n_agents=n_agents, device="cpu", seed=0, cpu_threads=1,
                 world_size=1.0, agent_radius=0.1, substeps=2, auto_reset=False)
env.reset()
low, high = env.action_bounds
actions = low + (high - low) * torch.rand((n_envs, n_agents, env.act_dim), generator=torch.Generator().manual_seed(0))
for _ in range(20):
    env.step(actions)
best = float("inf")
for _ in range(7):
    start = time.process_time()
    for _ in range(steps):
        env.step(actions)
    best = min(best, (time.process_time() - start) / steps)
print(f"RESULT {best * 1e6:.3f}")
"""

#: (n_envs, n_agents, steps a block): blocks of ~40-150 ms.
SHAPES = [(64, 3, 1000), (1024, 4, 150), (256, 16, 100)]


def run(root: pathlib.Path, n_envs: int, n_agents: int, steps: int) -> float:
    """Process time per step [us] of the tree at ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root.resolve()), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(n_envs), str(n_agents), str(steps)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        check=True,
    ).stdout
    return float(out.split("RESULT")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=pathlib.Path, required=True, help="a folder holding a swarp package")
    parser.add_argument("--new", type=pathlib.Path, required=True)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    trees = [("base", args.base), ("new", args.new)]
    times: dict[tuple, dict[str, list[float]]] = {}
    for round_ in range(args.rounds):
        for n_envs, n_agents, steps in SHAPES:
            cell = times.setdefault((n_envs, n_agents), {"base": [], "new": []})
            for name, root in trees if round_ % 2 == 0 else trees[::-1]:
                cell[name].append(run(root, n_envs, n_agents, steps))
            print(
                f"round {round_} {n_envs} x {n_agents}: base {cell['base'][-1]:.1f} us, new {cell['new'][-1]:.1f} us",
                flush=True,
            )
    print("\n| shape | base us/step (median) | new | new / base per round | median |")
    for (n_envs, n_agents), cell in times.items():
        ratios = [new / base for base, new in zip(cell["base"], cell["new"], strict=True)]
        base, new = statistics.median(cell["base"]), statistics.median(cell["new"])
        per_round = " / ".join(f"{r:.3f}" for r in ratios)
        print(f"| {n_envs:,} x {n_agents} | {base:.1f} | {new:.1f} | {per_round} | {statistics.median(ratios):.3f} |")


if __name__ == "__main__":
    main()
