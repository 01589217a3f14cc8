"""Host reads that wait for no device: the CPU torch path's shortcut to the envs a mask selects.

On CUDA the torch path never reads a device value on the host (a sync, and a CUDA graph cannot
capture it), so it works on every env under masks. On the CPU a host read is only a read: the
torch path reads which envs a mask selects (``host_rows``) and works on those rows alone, or skips
the work when there are none. ``swarp.testing.forbid_host_transfers``, which refuses host reads on
any device to emulate a GPU step on the CPU, lets the reads made here through (``reading``).
"""

from __future__ import annotations

import contextlib
import threading

import torch

_state = threading.local()


def reading() -> bool:
    """Whether the current thread is inside ``host_rows`` (a sanctioned CPU host read)."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def _sanctioned():
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def host_rows(mask: torch.Tensor) -> torch.Tensor | None:
    """The [k] int64 indices of the set entries of ``mask`` [E] bool on the CPU (ascending); ``None``
    on any other device (callers then work on every row, masked, without a sync)."""
    if mask.device.type != "cpu":
        return None
    with _sanctioned():
        return torch.nonzero(mask).flatten()


def host_any(mask: torch.Tensor) -> bool:
    """Whether any entry of ``mask`` [E] bool is set, read on the host: on the CPU only (a sync
    elsewhere; there ``True``, and callers work under the mask)."""
    if mask.device.type != "cpu":
        return True
    with _sanctioned():
        return bool(mask.any())
