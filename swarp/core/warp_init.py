"""Warp's start-up, minus the one line it prints on every machine without a CUDA driver.

Warp's native library probes for the CUDA driver when the runtime starts (``wp.init()``, called by
the first Warp API use) and, where there is none, writes::

    Warp CUDA warning: Could not find or load the NVIDIA CUDA driver. GPU execution will not be available.

with a C ``fprintf`` to file descriptor 2. No ``warp.config`` setting controls it (``log_level``
governs only the Python-side messages, such as the start-up banner), so the only way to drop it is
to catch what the native code writes to descriptor 2 while the runtime starts. That is what
:func:`init_warp` does, and only where the message would appear: where the driver library loads
(every GPU machine) it does nothing and Warp starts lazily, as it always has.

Where there is no driver, the runtime therefore starts when swarp is imported instead of at its
first use (about 0.1 s). Every Warp setting keeps working except one read once at start-up, the
kernel cache's location: relocate it with the ``WARP_CACHE_PATH`` environment variable or
``warp.build.init_kernel_cache(path)`` rather than by assigning ``wp.config.kernel_cache_dir``.
Everything else Warp writes while starting, other warnings and errors included, is written back
to descriptor 2 unchanged, and an exception from ``wp.init()`` propagates as it would otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable

import warp as wp

NO_DRIVER_MESSAGE = (
    "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver. GPU execution will not be available."
)

# The names Warp's native library opens the driver by (warp/native/cuda_util.cpp, init_cuda_driver).
_DRIVER_LIBRARIES = {"linux": ("libcuda.so", "libcuda.so.1"), "win32": ("nvcuda.dll",)}


def cuda_driver_loadable() -> bool | None:
    """Whether the CUDA driver library loads here, tried by the names Warp itself opens it by;
    ``None`` on a platform where Warp never looks for one (macOS), so never prints the message."""
    names = _DRIVER_LIBRARIES.get(sys.platform)
    if names is None:
        return None
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def drop_no_driver_message(text: str) -> str:
    """``text`` without the lines that are exactly Warp's no-driver message; all else kept."""
    return "".join(line for line in text.splitlines(keepends=True) if line.rstrip("\r\n") != NO_DRIVER_MESSAGE)


def run_dropping_no_driver_message(start: Callable[[], object]) -> None:
    """Call ``start`` with file descriptor 2 caught, then write back what it wrote there, the
    no-driver message excepted. Where descriptor 2 cannot be caught (closed, no console at all, no
    temporary file) ``start`` runs untouched."""
    try:
        sys.stderr.flush()
        caught = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the with below)
    except (OSError, AttributeError, ValueError):
        start()
        return
    with caught:
        try:
            saved = os.dup(2)
        except OSError:
            start()
            return
        try:
            os.dup2(caught.fileno(), 2)
            try:
                start()
            finally:
                with contextlib.suppress(AttributeError, ValueError):
                    sys.stderr.flush()  # Python-side writes made while caught belong to the catch
                os.dup2(saved, 2)
                caught.seek(0)
                data = drop_no_driver_message(caught.read().decode("utf-8", errors="replace")).encode("utf-8")
                while data:
                    data = data[os.write(2, data) :]
        finally:
            os.close(saved)


def init_warp() -> None:
    """Start Warp's runtime now, without the no-driver message, where the CUDA driver is missing;
    elsewhere (a driver present, or a platform without CUDA) leave Warp to start lazily."""
    if cuda_driver_loadable() is False:
        run_dropping_no_driver_message(wp.init)
