"""Helper of the multi-process tests: run a function on local ranks, as ``torchrun`` would.

Each rank gets torchrun's environment variables and joins through ``swarp.distributed.init``
(``env://`` rendezvous), so the code under test takes the same path as under ``torchrun``. A
worker must be a module-level function (the ranks are spawned processes that import it); what it
returns is saved by its rank (moved to the CPU) and handed back to the test.

``BACKENDS`` parametrizes a test over gloo (2 CPU processes, runs everywhere) and NCCL (one GPU per
rank; needs 2 GPUs and is skipped elsewhere). ``RUNS`` parametrizes over ``(backend, ranks)``: gloo
at 2, 3 and 4 processes (3: an odd world, uneven shards), and NCCL on every GPU of the host (the largest
multi-GPU machine a run gets).
"""

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from torch.utils._pytree import tree_map

import swarp.distributed as sd

WORLD = 2
BACKENDS = [
    "gloo",
    pytest.param(
        "nccl",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(torch.cuda.device_count() < WORLD, reason=f"NCCL needs {WORLD} CUDA devices"),
        ],
    ),
]
#: NCCL's world in ``RUNS``: one rank per GPU of the host.
CUDA_WORLD = torch.cuda.device_count()
RUNS = [
    ("gloo", WORLD),
    ("gloo", 3),
    ("gloo", 4),
    pytest.param(
        ("nccl", CUDA_WORLD),
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(CUDA_WORLD < 2, reason="NCCL needs 2 CUDA devices"),
        ],
    ),
]
#: Collective timeout [s]: a hung rank fails the test instead of stalling CI.
TIMEOUT_S = 120
#: Rendezvous ports tried before giving up.
PORT_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_device(backend: str, rank: int) -> str:
    """The device of ``rank``: the CPU under gloo, GPU ``rank`` under NCCL."""
    return f"cuda:{rank}" if backend == "nccl" else "cpu"


def _to_cpu(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _rank_main(rank: int, worker, out_dir: str, port: int, backend: str, world: int) -> None:
    """One rank: the variables torchrun sets, ``sd.init``, the worker, its result saved to a file."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)  # several processes on a small CI machine
    device = sd.init(backend=backend, device=rank_device(backend, rank), timeout_s=TIMEOUT_S)
    try:
        result = worker(device)
    finally:
        sd.shutdown()
    torch.save(tree_map(_to_cpu, result), Path(out_dir) / f"rank{rank}.pt")


def run_ranks(worker, out_dir: Path, backend: str = "gloo", world: int = WORLD) -> list:
    """Run ``worker(device)`` on ``world`` ranks of ``backend``; their return values, in rank order
    (tensors, numbers, strings and containers of them: the files are loaded with ``weights_only``)."""
    for attempt in range(PORT_ATTEMPTS):
        try:
            args = (worker, str(out_dir), _free_port(), backend, world)
            mp.start_processes(_rank_main, args=args, nprocs=world, start_method="spawn")
            break
        except mp.ProcessRaisedException as error:
            # Another process may take the free port before rank 0 listens on it: pick another.
            if "EADDRINUSE" not in str(error) or attempt == PORT_ATTEMPTS - 1:
                raise
        except mp.ProcessExitedException as error:
            # Rarely (about 1 run in 30 on the 2-core CI machine, before swarp.distributed.shutdown
            # gained its barrier 1 in 3) a rank aborts in gloo's teardown with "terminate called
            # without an active exception". Try again; a deterministic crash fails every attempt.
            if error.signal_name != "SIGABRT" or attempt == PORT_ATTEMPTS - 1:
                raise
    return [torch.load(Path(out_dir) / f"rank{rank}.pt", weights_only=True) for rank in range(world)]
