"""Helper of the multi-process tests: run a function on 2 local gloo ranks, as ``torchrun`` would.

Each rank gets torchrun's environment variables and joins through ``swarp.distributed.init``
(``env://`` rendezvous), so the code under test takes the same path as under ``torchrun``. A
worker must be a module-level function (the ranks are spawned processes that import it); what it
returns is saved by its rank and handed back to the test.
"""

import os
import socket
from pathlib import Path

import torch
import torch.multiprocessing as mp

import swarp.distributed as sd

WORLD = 2
#: Collective timeout [s]: a hung rank fails the test instead of stalling CI.
TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, worker, out_dir: str, port: int) -> None:
    """One rank: the variables torchrun sets, ``sd.init``, the worker, its result saved to a file."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(WORLD),
        LOCAL_WORLD_SIZE=str(WORLD),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)  # two processes on a small CI machine
    device = sd.init(backend="gloo", device="cpu", timeout_s=TIMEOUT_S)
    try:
        result = worker(device)
    finally:
        sd.shutdown()
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def run_ranks(worker, out_dir: Path) -> list:
    """Run ``worker(device)`` on ``WORLD`` gloo ranks; their return values, in rank order."""
    mp.start_processes(_rank_main, args=(worker, str(out_dir), _free_port()), nprocs=WORLD, start_method="spawn")
    return [torch.load(Path(out_dir) / f"rank{rank}.pt", weights_only=False) for rank in range(WORLD)]
