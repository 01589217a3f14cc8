"""Thread scaling of a CPU step: one environment stepped in 1, 2, 4... shards (``plan.cpu_shards``).

    python -m swarp.benchmark.cpu_threads                                  # navigation x 4, 1,024 and 16,384 envs
    python -m swarp.benchmark.cpu_threads --envs 4096 --shards 1 2 4 8 16 --agents 16

Per cell: one ``Environment`` with ``plan={"cpu_shards": S}`` (auto-reset, episode length 200,
fixed random in-bounds actions), the median over ``--repeats`` of the wall time per
``env.step``, the speed-up over one shard, and whether its observations after the warm-up equal
the one-shard environment's bit for bit (they must: ``swarp.env.shards``). Torch runs on one
thread so only the shards use the cores. Shards of fewer than ``--min-envs`` envs are skipped.
"""

from __future__ import annotations

import argparse

import torch

import swarp
from swarp.benchmark.common import check_health, print_table, time_wall


def run_cell(scenario: str, n_envs: int, n_agents: int, shards: int, iters: int, repeats: int):
    """``(us per step, observations after the warm-up)`` of one cell (see the module doc)."""
    env = swarp.make(scenario, n_envs=n_envs, n_agents=n_agents, device="cpu", auto_reset=True, max_steps=200,
                     seed=1, plan={"cpu_shards": shards})  # fmt: skip
    low, high = env.action_bounds
    gen = torch.Generator().manual_seed(1)
    actions = low + (high - low) * torch.rand(n_envs, env.n_agents, env.act_dim, generator=gen, dtype=env.dtype)
    for _ in range(30):
        env.step(actions)
    obs = env.obs.clone()
    seconds = time_wall(lambda: env.step(actions), "cpu", iters, repeats)
    check_health(env)
    env.close()
    return seconds * 1e6, obs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--envs", type=int, nargs="+", default=[1024, 16384])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--min-envs", type=int, default=64, help="skip shards of fewer envs")
    parser.add_argument("--iters", type=int, default=0, help="steps per timed block (0: ~0.2 s of steps)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = measure(args)
    finally:
        torch.set_num_threads(threads)
    print(f"\n{args.scenario}, torch {torch.__version__}, warp CPU; us per env.step, median of {args.repeats}")
    print_table(["n_envs", "n_agents", "shards", "us/step", "M env-steps/s", "speed-up", "same bits"], rows)


def measure(args: argparse.Namespace) -> list[list]:
    """The table's rows: every (envs, shards) cell of ``args``."""
    rows = []
    for n_envs in args.envs:
        base = reference = None
        for shards in args.shards:
            if shards > 1 and n_envs // shards < args.min_envs:
                continue
            iters = args.iters or max(5, 200_000 // n_envs)
            us, obs = run_cell(args.scenario, n_envs, args.agents, shards, iters, args.repeats)
            if reference is None:
                base, reference = us, obs
            same = "yes" if torch.equal(obs, reference) else "NO"
            rows.append([f"{n_envs:,}", args.agents, shards, f"{us:,.1f}", f"{n_envs / us:.2f}", f"{base / us:.2f}x"])
            rows[-1].append(same)
            print(f"  done {n_envs}x{args.agents} shards {shards}", flush=True)
    return rows


if __name__ == "__main__":
    main()
