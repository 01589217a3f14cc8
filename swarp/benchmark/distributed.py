"""Weak scaling of the environment step over processes: a fixed shard of envs per rank, env-steps/s.

    python -m swarp.benchmark.distributed --envs-per-rank 256 1024                                   # 1 process
    torchrun --standalone --nproc-per-node 2 -m swarp.benchmark.distributed --envs-per-rank 256 1024  # 2 processes
    torchrun --standalone --nproc-per-node 8 -m swarp.benchmark.distributed --envs-per-rank 65536 --agents 8

Every rank builds its shard of one global batch of ``envs_per_rank x world_size`` navigation envs
(``swarp.distributed``: CPU under gloo, ``cuda:LOCAL_RANK`` under NCCL) with auto-reset and episode
clocks spread as in ``swarp.benchmark.throughput``, warms up (compilation, capture), waits for the
other ranks, and times its step loop. The global rate counts the slowest rank:
``global env-steps/s = global_n_envs / max over ranks of (seconds per step)``. Weak-scaling
efficiency at N ranks is that rate over N times the 1-process rate at the same ``--envs-per-rank``.
The step itself never communicates; the numbers measure how well the ranks share the machine.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

import swarp.distributed as sd
from swarp.benchmark.common import print_table, synchronize, time_wall
from swarp.benchmark.throughput import make_env


def main(argv=None) -> list[list]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda:LOCAL_RANK if available)")
    parser.add_argument("--envs-per-rank", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--iters", type=int, default=None, help="steps per timing (default: 500 on CUDA, 50 on CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    device = sd.init(device=args.device)
    world = sd.get_world_size()
    iters = args.iters or (500 if device.startswith("cuda") else 50)
    rows = []
    for envs_per_rank in args.envs_per_rank:
        part = sd.shard(envs_per_rank * world)
        env = make_env(
            part.n_envs, args.agents, device, "auto", "auto", True, args.max_steps, env_offset=part.env_offset
        )
        low, high = env.action_bounds
        generator = torch.Generator().manual_seed(sd.rank_seed(1))
        u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
        actions = low + (high - low) * u.to(env.torch_device)
        with torch.no_grad():
            env.step(actions)
            env.step(actions)
            synchronize(env.device)
            if sd.is_distributed():
                dist.barrier()
            seconds = time_wall(lambda env=env, actions=actions: env.step(actions), env.device, iters, args.repeats)
        slowest = sd.reduce_metrics({"seconds": seconds}, "max")["seconds"]
        total = sd.reduce_metrics({"rate": part.n_envs / seconds}, "sum")["rate"]
        rows.append(
            [
                world,
                envs_per_rank,
                part.global_n_envs,
                env.execution_mode,
                slowest * 1e6,
                total,
                part.global_n_envs / slowest,
            ]
        )
        del env
    if sd.get_rank() == 0:
        threads = torch.get_num_threads()
        print(f"device={device} (rank 0) world_size={world} agents={args.agents} torch threads/rank={threads}")
        print_table(
            [
                "ranks",
                "envs/rank",
                "global envs",
                "mode",
                "us/step (slowest)",
                "sum of rank env-steps/s",
                "global env-steps/s",
            ],
            rows,
        )
    sd.shutdown()
    return rows


if __name__ == "__main__":
    main()
