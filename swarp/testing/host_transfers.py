"""``forbid_host_transfers``: a block inside which whatever syncs a step with the host (or cannot be
captured in a CUDA graph) raises ``HostTransferError``, on any device. The contract's "no host
transfer" check and the tests of the hot loop use it."""

from __future__ import annotations

import contextlib
import numbers

import torch
from torch.overrides import TorchFunctionMode

from swarp.runtime import host

#: Tensor methods that copy to the host (or sync with it): none may run inside ``step``/``reset_at``.
HOST_TRANSFERS = ("item", "cpu", "numpy", "tolist", "__bool__", "__int__", "__float__")
#: torch functions that copy host data to the device when given Python values (a CUDA graph cannot
#: capture that): none may run inside ``step``/``reset_at`` either.
HOST_UPLOADS = ("tensor", "as_tensor")
#: torch functions whose output size depends on the data: the host waits for the device to size it.
DATA_SIZED = ("nonzero", "argwhere", "masked_select", "unique")
#: Indexing with a boolean mask is a ``nonzero`` inside: a host sync.
MASK_INDEXING = ("__getitem__", "__setitem__")


class HostTransferError(AssertionError):
    """A host transfer ran where none may (``forbid_host_transfers``)."""


class MaskIndexingGuard(TorchFunctionMode):
    """While active, ``MASK_INDEXING`` with a boolean mask raises ``HostTransferError``.

    A torch function mode rather than a patched ``Tensor.__getitem__``: setting and then deleting
    ``__getitem__`` on ``torch.Tensor`` leaves CPython's sequence slot filled, after which
    ``torch.tensor([t0, t1])`` of 0-d tensors fails for the rest of the process."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in MASK_INDEXING and len(args) > 1:
            index = args[1]
            parts = index if isinstance(index, tuple) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                raise HostTransferError(
                    f"host sync: Tensor.{name}() with a boolean mask (use torch.where, or integer indices made in bind)"
                )
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def forbid_host_transfers():
    """Within the block, what syncs a CUDA step with the host (or cannot be captured in a CUDA graph)
    raises ``HostTransferError``, on any device: the ``HOST_TRANSFERS`` methods of ``torch.Tensor``,
    the ``DATA_SIZED`` functions and methods, indexing with a boolean mask, and the ``HOST_UPLOADS``
    functions of ``torch`` given a Python number, list or tuple (a host-to-device copy on CUDA).
    swarp's own CPU-only host reads (``swarp.runtime.host.host_rows``) pass."""
    saved = {name: torch.Tensor.__dict__.get(name) for name in (*HOST_TRANSFERS, *DATA_SIZED)}
    saved_uploads = {name: getattr(torch, name) for name in HOST_UPLOADS}

    originals = {name: getattr(torch.Tensor, name) for name in (*HOST_TRANSFERS, *DATA_SIZED)}

    def forbidden(name):
        def method(self, *args, **kwargs):
            if host.reading():  # swarp's own CPU-only reads (swarp.runtime.host)
                return originals[name](self, *args, **kwargs)
            raise HostTransferError(f"host transfer: Tensor.{name}()")

        return method

    def forbidden_upload(name):
        original = saved_uploads[name]

        def function(data, *args, **kwargs):
            if isinstance(data, (numbers.Number, list, tuple)):
                raise HostTransferError(
                    f"host-to-device copy: torch.{name}() of a Python value (make constants once, in bind, "
                    "or with torch.full)"
                )
            return original(data, *args, **kwargs)

        return function

    def forbidden_sized(name):
        def function(*args, **kwargs):
            if host.reading():
                return saved_functions[name](*args, **kwargs)
            raise HostTransferError(f"host sync: torch.{name}() (its output size depends on the data)")

        return function

    saved_functions = {name: getattr(torch, name) for name in DATA_SIZED}
    try:
        for name in HOST_TRANSFERS:
            setattr(torch.Tensor, name, forbidden(name))
        for name in DATA_SIZED:
            setattr(torch.Tensor, name, forbidden(name))
            setattr(torch, name, forbidden_sized(name))
        for name in HOST_UPLOADS:
            setattr(torch, name, forbidden_upload(name))
        with MaskIndexingGuard():
            yield
    finally:
        for name, original in saved_functions.items():
            setattr(torch, name, original)
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)
        for name, original in saved_uploads.items():
            setattr(torch, name, original)
