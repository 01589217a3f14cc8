"""Shared helpers of the benchmark entry points: timing and table printing."""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator

import torch
import warp as wp

from swarp.env.pool import EnvPool
from swarp.runtime.sequence import collector_paused


@contextlib.contextmanager
def environment_variable(name: str, value: str | None) -> Iterator[None]:
    """Set the environment variable ``name`` to ``value`` for the duration (``None``: leave it)."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def synchronize(device: str) -> None:
    """Wait for all work on ``device`` (Warp and torch) to finish."""
    wp.synchronize_device(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def check_health(env, what: str = "the benchmark") -> None:
    """Raise ``RuntimeError`` if ``env`` (an ``Environment``, an ``EnvPool`` or a ``World``) raised its
    state-health flag (``non_finite()``): a number measured on NaN states is no number. One host
    sync: call it after timing, never inside the timed loop."""
    pooled = isinstance(env, EnvPool)
    for index, part in enumerate(env.groups if pooled else [env]):
        if bool(part.non_finite()):
            envs = part.non_finite_envs().tolist()
            where = f" (group {index})" if pooled else ""
            raise RuntimeError(
                f"{what}: a state, observation or reward went non-finite in envs {envs[:16]}{where}"
                f"{' ...' if len(envs) > 16 else ''}; its timings measure a diverged simulation"
            )


def time_wall(fn: Callable[[], None], device: str, n_iters: int, repeats: int = 3) -> float:
    """Median over ``repeats`` of the wall time [s] per call of ``fn``, synchronized at both ends."""
    samples = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(n_iters):
            fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) / n_iters)
    return statistics.median(samples)


def time_graph(fn: Callable[[], None], device: str, n_iters: int, repeats: int = 3) -> float:
    """GPU time [s] per call of ``fn``: ``n_iters`` calls captured in one CUDA graph, timed by events.

    Host launch overhead is excluded, so this is the device-side cost of the work itself.
    """
    with wp.ScopedDevice(device):
        with collector_paused(), wp.ScopedCapture() as capture:
            for _ in range(n_iters):
                fn()
        graph = capture.graph
        wp.capture_launch(graph)
        samples = []
        for _ in range(repeats):
            start, end = wp.Event(enable_timing=True), wp.Event(enable_timing=True)
            wp.record_event(start)
            wp.capture_launch(graph)
            wp.record_event(end)
            wp.synchronize_device(device)
            samples.append(wp.get_event_elapsed_time(start, end) / 1000.0 / n_iters)
    return statistics.median(samples)


def print_table(headers: list[str], rows: list[list], file=None) -> str:
    """Print ``rows`` as an aligned text table (numbers with thousands separators); return it."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:,.2f}" if abs(v) < 1000 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    text = "\n".join(lines)
    print(text, file=file, flush=True)
    return text


def parse_option(text: str) -> tuple[str, object]:
    """``"key=value"`` with a Python literal value (``3``, ``0.5``, ``'box'``; bare words are strings)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"option must be key=value, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value
