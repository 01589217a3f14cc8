"""Per-env arrays that a CPU shard takes as views of its environment's own.

A CPU shard (``swarp.env.shards``) is an ``Environment`` over envs ``[lo, hi)`` of a larger one.
While it is built inside ``views_of(arrays, lo, hi)``, an array allocated through ``zeros`` or
``full`` under a name that ``arrays`` holds, with the same dtype and the same shape past the env
axis, is rows ``[lo, hi)`` of that array rather than new memory: the shard's kernels then read and
write the environment's buffer, and nothing is copied for it. Such a view keeps the environment's
values (the shard's own reset writes the same bits there). Everything else a shard allocates is its
own, and ``Shards`` copies it in and out around each step, telling the two apart by address: an
owner that allocates a buffer some other way costs a copy, never a race.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import warp as wp

#: ``(arrays, lo, hi)`` of the shard being built on this thread, or ``None``.
_building: contextvars.ContextVar[tuple[Mapping[str, torch.Tensor], int, int] | None] = contextvars.ContextVar(
    "swarp_env_arrays", default=None
)


@contextlib.contextmanager
def views_of(arrays: Mapping[str, torch.Tensor], lo: int, hi: int) -> Iterator[None]:
    """While the block runs, ``zeros`` and ``full`` of a name in ``arrays`` (an environment's
    buffers by name, each [E, ...] contiguous) return rows ``[lo, hi)`` of that buffer."""
    token = _building.set((arrays, lo, hi))
    try:
        yield
    finally:
        _building.reset(token)


def _borrowed(name: str | None, shape: tuple[int, ...], dtype: Any, device: str) -> wp.array | None:
    """Rows ``[lo, hi)`` of the environment's buffer ``name`` if a shard is being built and that
    buffer fits ``shape`` and ``dtype`` on ``device``; else ``None``."""
    building = _building.get()
    if building is None or name is None:
        return None
    arrays, lo, hi = building
    full = arrays.get(name)
    if full is None or not full.is_contiguous() or shape[0] != hi - lo:
        return None
    rows = full[lo:hi]
    if wp.device_from_torch(rows.device) != wp.get_device(device):
        return None
    try:
        view = wp.from_torch(rows, dtype=dtype)
    except (RuntimeError, TypeError, ValueError):  # another dtype or trailing width: not this buffer
        return None
    return view if tuple(view.shape) == tuple(shape) and view.dtype == dtype else None


def zeros(name: str | None, shape: tuple[int, ...], dtype: Any, device: str, requires_grad: bool = False) -> wp.array:
    """``wp.zeros(shape, dtype, device)`` ([E, ...]); while a shard is built (``views_of``), the
    environment's rows of buffer ``name`` where it has a fitting one (its values kept; never with
    ``requires_grad``)."""
    view = None if requires_grad else _borrowed(name, tuple(shape), dtype, device)
    return view if view is not None else wp.zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full(
    name: str | None, shape: tuple[int, ...], value: Any, dtype: Any, device: str, requires_grad: bool = False
) -> wp.array:
    """``wp.full(shape, value, dtype, device)`` ([E, ...]); while a shard is built (``views_of``),
    the environment's rows of buffer ``name`` where it has a fitting one (its values kept; never
    with ``requires_grad``)."""
    view = None if requires_grad else _borrowed(name, tuple(shape), dtype, device)
    if view is not None:
        return view
    return wp.full(shape, value=value, dtype=dtype, device=device, requires_grad=requires_grad)
