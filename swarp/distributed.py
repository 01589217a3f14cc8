"""Sharding a batch of environments over processes and GPUs with ``torch.distributed``.

One process per device (``torchrun --nproc-per-node N``), each owning a contiguous shard of one
global batch of ``global_n_envs`` envs on its own device::

    import swarp.distributed as sd

    device = sd.init()                                  # gloo on CPU, NCCL on CUDA (cuda:LOCAL_RANK)
    env = sd.make_shard("navigation", global_n_envs=65536, device=device, seed=0, n_agents=8)
    env.env_offset, env.n_envs                          # this rank's envs: [offset, offset + n_envs)
    sd.global_n_envs(env)                               # 65536, checked: shards tile the batch

Seeds. Every rank passes the *same* global seed. Resets draw from the counter-based RNG keyed by
(seed, global env index, episode) (``swarp.core.rng``), and a shard is an ``Environment`` with
``env_offset`` set, so rank r's local env i is global env ``offset_r + i``: the shards' random
streams are distinct (disjoint env indices), reproducible, and their union is, env for env and bit
for bit, the batch one process would simulate with the same seed and the same actions. Nothing else
in a step couples envs, so this holds for every scenario whose resets key their draws as
``Scenario.reset_world`` requires. Torch's own generators (policy sampling) are per process: seed
them with ``rank_seed(seed, rank)``.

Data-parallel training. ``all_reduce_gradients`` averages gradients over ranks in one collective
(weighted by each rank's batch size when given), so every rank takes the update a single process
would take on the concatenated batch; ``broadcast_parameters`` starts every rank from rank 0's
weights; ``global_mean_std`` normalises (e.g. advantages) over the global batch.

Metrics. ``reduce_metrics`` reduces a dict of scalars and ``all_reduce`` a tensor, in one
collective each; ``all_gather_envs`` gathers a per-env tensor from every shard into the global
batch, in env order.

Every helper also works without a process group (plain ``python``): the world is then one process
and they return their input. Collectives run on the CPU under gloo and on ``cuda:LOCAL_RANK`` under
NCCL; tensors are moved there and back as needed (only the metric helpers sync with the host).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from swarp.core.rng import split_envs, stream_key_torch
from swarp.env.environment import Environment
from swarp.env.make import make

#: The environment variables ``torchrun`` sets for every process it starts.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
#: Seeds of torch generators are kept in [0, 2^31).
_SEED_RANGE = 2**31
_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "mean": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


# --- the process group ----------------------------------------------------------------------------


def is_distributed() -> bool:
    """Whether a ``torch.distributed`` process group is initialised in this process."""
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """This process's rank in the default group (0 without a process group)."""
    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    """Processes in the default group (1 without a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def local_rank() -> int:
    """This process's index on its node (``LOCAL_RANK``, set by ``torchrun``; 0 otherwise)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def launched_by_torchrun() -> bool:
    """Whether the ``torchrun`` environment variables (``LAUNCHER_VARIABLES``) are all set."""
    return all(name in os.environ for name in LAUNCHER_VARIABLES)


def default_device() -> str:
    """The device of this process: ``cuda:LOCAL_RANK`` when CUDA is available, else ``cpu``."""
    return f"cuda:{local_rank()}" if torch.cuda.is_available() else "cpu"


def init(backend: str = "auto", device: str | None = None, timeout_s: float | None = None) -> str:
    """Join the process group ``torchrun`` set up and return this process's simulation device.

    Launched by ``torchrun`` (its variables ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``
    and ``MASTER_PORT`` set), this initialises the default process group from them (``env://``),
    unless one is initialised already. Launched without it, there is no group: the world is one
    process and every helper of this module is an identity.

    Args:
        backend: ``"auto"`` (``"nccl"`` for a CUDA device, ``"gloo"`` for the CPU), ``"nccl"`` or
            ``"gloo"``.
        device: The simulation device of this process (default: ``default_device()``, i.e.
            ``cuda:LOCAL_RANK`` or ``cpu``). A CUDA device becomes torch's current device.
        timeout_s: Collective timeout [s] (default: torch's).

    Returns:
        The device string to pass to ``make_shard`` / ``swarp.make``.

    Raises:
        ValueError: unknown backend, NCCL with a CPU device, a CUDA device without CUDA, or a bad
            timeout.
    """
    if backend not in ("auto", "nccl", "gloo"):
        raise ValueError(f"backend must be 'auto', 'nccl' or 'gloo', got {backend!r}")
    device = str(device) if device is not None else default_device()
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} needs CUDA, but torch.cuda.is_available() is False")
    if backend == "auto":
        backend = "nccl" if cuda else "gloo"
    if backend == "nccl" and not cuda:
        raise ValueError(f"the nccl backend needs a CUDA device, got device={device!r}; use gloo on the CPU")
    if cuda:
        if device == "cuda":
            device = f"cuda:{local_rank()}"
        torch.cuda.set_device(torch.device(device))
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0
    ):
        raise ValueError(f"timeout_s must be a number > 0 or None, got {timeout_s!r}")
    if not is_distributed() and launched_by_torchrun():
        timeout = timedelta(seconds=timeout_s) if timeout_s is not None else None
        # NCCL binds the communicator to this rank's GPU up front (no device guessing in barrier()).
        device_id = torch.device(device) if backend == "nccl" else None
        dist.init_process_group(backend=backend, init_method="env://", timeout=timeout, device_id=device_id)
    return device


def shutdown() -> None:
    """Destroy the default process group, if any (call once at the end of a ``torchrun`` script).

    Every rank must call it: a barrier first lets all ranks finish their last collective before any
    tears its process group down (without it a rank could exit while another's gloo threads still
    talk to it: measured on the 2-core CI machine as an intermittent ``terminate called without an
    active exception`` abort in the 2-rank tests).
    """
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()


def _collective_device() -> torch.device:
    """Where collectives of the default group take their tensors: the current GPU under NCCL."""
    if is_distributed() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# --- shards -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """One rank's contiguous share of a global batch of envs.

    Attributes:
        rank: The rank owning it.
        world_size: Ranks sharing the batch.
        global_n_envs: Envs in the whole batch.
        env_offset: Global index of the shard's first env.
        n_envs: Envs in the shard (``global_n_envs // world_size``, one more on the first
            ``global_n_envs % world_size`` ranks).
    """

    rank: int
    world_size: int
    global_n_envs: int
    env_offset: int
    n_envs: int

    @property
    def envs(self) -> range:
        """The shard's global env indices."""
        return range(self.env_offset, self.env_offset + self.n_envs)


def _check_count(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def shard(global_n_envs: int, rank: int | None = None, world_size: int | None = None) -> Shard:
    """The shard of ``global_n_envs`` envs that rank ``rank`` of ``world_size`` owns.

    Shards are contiguous, in rank order, and as even as possible (sizes differ by at most one).

    Args:
        global_n_envs: Envs in the whole batch (>= the number of ranks: every rank gets one).
        rank: The rank (default: this process's).
        world_size: The number of ranks (default: the process group's).
    """
    world = get_world_size() if world_size is None else world_size
    index = get_rank() if rank is None else rank
    _check_count("world_size", world, 1)
    _check_count("rank", index, 0)
    _check_count("global_n_envs", global_n_envs, 1)
    if index >= world:
        raise ValueError(f"rank must be < world_size = {world}, got {index}")
    if global_n_envs < world:
        raise ValueError(f"global_n_envs ({global_n_envs}) must be >= world_size ({world}): every rank needs an env")
    offset, n_envs = split_envs(global_n_envs, world)[index]
    return Shard(index, world, global_n_envs, offset, n_envs)


def make_shard(
    name: str, global_n_envs: int, device: str | torch.device | None = None, seed: int = 0, **kwargs: Any
) -> Environment:
    """``swarp.make`` for this rank's shard of a global batch (see the module docstring).

    Args:
        name: A registered scenario.
        global_n_envs: Envs in the whole batch, over all ranks.
        device: This rank's device (default: ``default_device()``).
        seed: The global seed, the same on every rank.
        **kwargs: Environment keywords and scenario options, as for ``swarp.make`` (not
            ``n_envs`` or ``env_offset``: the shard sets them).

    Returns:
        An ``Environment`` of ``shard(global_n_envs).n_envs`` envs with ``env_offset`` set.
    """
    for reserved in ("n_envs", "env_offset"):
        if reserved in kwargs:
            raise TypeError(f"make_shard sets {reserved} from global_n_envs and the rank; do not pass it")
    part = shard(global_n_envs)
    device = default_device() if device is None else device
    return make(name, n_envs=part.n_envs, device=device, seed=seed, env_offset=part.env_offset, **kwargs)


def global_n_envs(env: Environment) -> int:
    """Envs over all ranks' shards (a collective), checking that the shards tile ``[0, total)``.

    Raises:
        RuntimeError: the ranks' ``[env_offset, env_offset + n_envs)`` overlap or leave a gap.
    """
    if not isinstance(env, Environment):
        raise TypeError(f"env must be a swarp.Environment, got {type(env).__name__}")
    local = torch.tensor([env.env_offset, env.n_envs], dtype=torch.int64, device=_collective_device())
    spans = sorted(tuple(span) for span in _all_gather_equal(local).view(-1, 2).tolist())
    expected = 0
    for offset, count in spans:
        if offset != expected:
            raise RuntimeError(
                f"the ranks' env shards (env_offset, n_envs) = {spans} do not tile one batch: "
                f"expected a shard starting at {expected}, found one at {offset}"
            )
        expected = offset + count
    return expected


def rank_seed(seed: int, rank: int | None = None) -> int:
    """A seed in ``[0, 2^31)`` for this rank's torch generators: distinct per rank, reproducible.

    Hashes (seed, rank) with the counter-based mixer of ``swarp.core.rng``, so nearby seeds of
    nearby ranks do not collide (``seed + rank`` would give rank 1 of seed 0 rank 0's stream of seed 1).
    """
    index = get_rank() if rank is None else rank
    _check_count("rank", index, 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    key = stream_key_torch(torch.tensor(seed), torch.tensor(index), torch.tensor(0))
    return int(key) % _SEED_RANGE


# --- collectives over shards ----------------------------------------------------------------------


def _all_gather_equal(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenation along dim 0 of equally shaped ``tensor``s (on the collective device) of every rank."""
    if not is_distributed():
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


def all_gather_envs(tensor: torch.Tensor) -> torch.Tensor:
    """Gather a per-env tensor from every rank: ``[n_envs_r, ...]`` -> ``[sum_r n_envs_r, ...]``.

    Rank order is env order for ``make_shard`` shards, so the result is the global batch. Shards
    may differ in size (the trailing dims and dtype must agree). A collective; the result is on
    the input's device.
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
        raise ValueError("all_gather_envs needs a torch.Tensor with a leading env dimension")
    if not is_distributed():
        return tensor
    home, device = tensor.device, _collective_device()
    local = tensor.detach().to(device)
    sizes = _all_gather_equal(torch.tensor([local.shape[0]], dtype=torch.int64, device=device)).tolist()
    padded = local.new_zeros((max(sizes), *local.shape[1:]))
    padded[: local.shape[0]] = local
    gathered = _all_gather_equal(padded).view(len(sizes), max(sizes), *local.shape[1:])
    return torch.cat([gathered[r, :n] for r, n in enumerate(sizes)]).to(home)


def all_reduce(tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """``tensor`` reduced elementwise over ranks (a new tensor on its device; the input itself
    without a process group). One collective.

    Args:
        tensor: The same shape and dtype on every rank.
        op: ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``.
    """
    if op not in _REDUCE_OPS:
        raise ValueError(f"op must be one of {sorted(_REDUCE_OPS)}, got {op!r}")
    if not is_distributed():
        return tensor
    reduced = tensor.detach().to(_collective_device(), copy=True)
    dist.all_reduce(reduced, op=_REDUCE_OPS[op])
    if op == "mean":
        reduced /= get_world_size()
    return reduced.to(tensor.device)


def reduce_metrics(metrics: Mapping[str, float | torch.Tensor], op: str = "mean") -> dict[str, float]:
    """Reduce named scalars over ranks in one collective (for logging: syncs with the host).

    Args:
        metrics: Name -> number or one-element tensor; the same names in the same order on every rank.
        op: ``"mean"``, ``"sum"``, ``"max"`` or ``"min"`` over ranks.

    Returns:
        Name -> the reduced value (float), identical on every rank.
    """
    values = []
    for name, value in metrics.items():
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(f"metric {name!r} must be a scalar, got a tensor of shape {list(value.shape)}")
            value = value.detach().reshape(()).to("cpu", torch.float64)
        values.append(torch.as_tensor(value, dtype=torch.float64))
    if not values:
        return {}
    return dict(zip(metrics, all_reduce(torch.stack(values), op).tolist(), strict=True))


def global_mean_std(
    tensor: torch.Tensor, dim: int | tuple[int, ...] | None = None, weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and unbiased standard deviation of ``tensor`` over every rank's shard.

    With ``dim`` (an int or a tuple of ints), the statistics are over those dimensions only, kept
    with size 1 (e.g. ``dim=(1, 2)`` of a [K, n, A] tensor gives [K, 1, 1]: one per leading row);
    without it, over every element (0-d results). One collective of float64 moments; the results
    are of ``tensor``'s dtype on its device, identical on every rank (what ``torch.cat`` of all
    shards' ``.mean()`` and ``.std()`` would give, up to rounding). Without a process group:
    ``tensor.mean(dim)``, ``tensor.std(dim)``. ``weight`` (1/0, ``tensor``'s shape): the statistics of
    the entries it keeps only (the agents that acted, under an alive mask), from the same moments.
    """
    if weight is not None:
        return _weighted_mean_std(tensor, dim, weight)
    if not is_distributed():
        if dim is None:
            return tensor.mean(), tensor.std()
        return tensor.mean(dim, keepdim=True), tensor.std(dim, keepdim=True)
    values = tensor.detach().to(torch.float64)
    dims = tuple(range(values.dim())) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    total = values.sum(dims, keepdim=True)
    n = math.prod(values.shape[d] for d in dims)
    moments = torch.stack([total, values.square().sum(dims, keepdim=True), torch.full_like(total, float(n))])
    moments = moments.to(_collective_device())
    dist.all_reduce(moments)
    total, squares, count = moments.to(tensor.device).unbind(0)
    mean = total / count
    variance = (squares - count * mean * mean).clamp_min(0.0) / (count - 1.0)
    if dim is None:
        mean, variance = mean.reshape(()), variance.reshape(())
    return mean.to(tensor.dtype), variance.sqrt().to(tensor.dtype)


def _weighted_mean_std(tensor: torch.Tensor, dim, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``global_mean_std`` over the entries ``weight`` keeps: float64 moments summed over ranks."""
    values, kept = tensor.detach().to(torch.float64), weight.detach().to(torch.float64)
    dims = tuple(range(values.dim())) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    moments = torch.stack([(values * kept).sum(dims, keepdim=True), (values.square() * kept).sum(dims, keepdim=True),
                           kept.sum(dims, keepdim=True)])  # fmt: skip
    if is_distributed():
        moments = moments.to(_collective_device())
        dist.all_reduce(moments)
    total, squares, count = moments.to(tensor.device).unbind(0)
    mean = total / count.clamp_min(1.0)
    variance = (squares - count * mean * mean).clamp_min(0.0) / (count - 1.0).clamp_min(1.0)
    if dim is None:
        mean, variance = mean.reshape(()), variance.reshape(())
    return mean.to(tensor.dtype), variance.sqrt().to(tensor.dtype)


def all_reduce_gradients(parameters: Iterable[torch.nn.Parameter], batch_size: int | None = None) -> None:
    """Average the gradients of ``parameters`` over ranks, in place, in one collective per dtype.

    Each rank's gradient is that of a loss averaged over its own batch. Without ``batch_size`` the
    ranks' gradients are averaged equally: with equal batches, the update every rank then takes is
    the one a single process would take on the concatenated batch. With ``batch_size`` (this rank's
    batch size, > 0) each rank is weighted by its share of the global batch, which keeps that
    equality for unequal batches. Parameters whose ``grad`` is ``None`` are skipped: every rank must
    have the same set of parameters with gradients, in the same order (as ``DistributedDataParallel``
    requires).
    """
    if batch_size is not None:
        _check_count("batch_size", batch_size, 1)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not is_distributed() or not grads:
        return
    device = _collective_device()
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for grad in grads:
        by_dtype.setdefault(grad.dtype, []).append(grad)
    for group in by_dtype.values():
        flat = torch.cat([g.reshape(-1).to(device) for g in group])
        if batch_size is not None:
            # The last element carries the weight, so one collective also sums the global batch.
            flat = torch.cat([flat * batch_size, flat.new_tensor([float(batch_size)])])
        dist.all_reduce(flat)
        if batch_size is not None:
            flat = flat[:-1] / flat[-1]
        else:
            flat /= get_world_size()
        for grad, part in zip(group, flat.split([g.numel() for g in group]), strict=True):
            grad.copy_(part.view_as(grad))


def broadcast_parameters(module: torch.nn.Module, src: int = 0) -> None:
    """Overwrite ``module``'s parameters and buffers on every rank with rank ``src``'s, in place."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not is_distributed():
        return
    device = _collective_device()
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            data = tensor.data.to(device)
            dist.broadcast(data, src=src)
            tensor.data.copy_(data)
