"""Precision and device plumbing shared by every layer: one place maps names to Warp/torch types."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import warp as wp

_BY_NAME = {
    "float32": (wp.float32, torch.float32),
    "float64": (wp.float64, torch.float64),
}


def resolve_dtype(dtype: Any) -> tuple[type, torch.dtype]:
    """Map a precision given as a string, torch, numpy or Warp dtype to ``(warp_scalar, torch_dtype)``.

    Only float32 and float64 are supported: float64 exists so gradients can be checked strictly.
    """
    if isinstance(dtype, str):
        key = dtype
    elif dtype in (torch.float32, np.float32, wp.float32):
        key = "float32"
    elif dtype in (torch.float64, np.float64, wp.float64):
        key = "float64"
    else:
        key = str(dtype)
    if key not in _BY_NAME:
        raise ValueError(f"dtype must be float32 or float64 (str, torch, numpy or warp), got {dtype!r}")
    return _BY_NAME[key]


def resolve_device(device: Any) -> str:
    """Normalise a device spec (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``torch.device``) to a Warp alias.

    Raises a clear error when CUDA is asked for but Warp sees no CUDA device.
    """
    if device is None:
        return "cuda:0" if wp.is_cuda_available() else "cpu"
    name = str(device)
    if name == "cuda":
        name = "cuda:0"
    if name.startswith("cuda"):
        if not wp.is_cuda_available():
            raise RuntimeError(f"device={device!r} was requested but Warp finds no CUDA device; use device='cpu'")
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= wp.get_cuda_device_count():
            raise ValueError(f"device={device!r}: only {wp.get_cuda_device_count()} CUDA device(s) are visible")
    elif name != "cpu":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return name


def vec2_type(scalar: type) -> type:
    """The Warp 2-vector type over ``scalar`` (``wp.vec2f`` or ``wp.vec2d``)."""
    return wp.types.vector(2, scalar)
