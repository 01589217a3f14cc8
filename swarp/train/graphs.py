"""Replaying a piece of the training iteration as one CUDA graph.

``Graphed(fn)`` runs ``fn`` (no arguments: it reads and writes preallocated tensors) eagerly for its
first ``warmup`` calls, on a side stream as torch's capture rules ask (those calls are real work,
not a dry run), then captures it into a CUDA graph on the next call and replays the graph from then
on. On the CPU, or with ``enabled=False``, every call is eager. A rollout's ``env.step`` goes into the
same capture (``swarp.runtime.sequence``: the step's kernels launch into torch's capture).

The capture does not depend on what the process did before (``swarp.runtime.sequence.torch_capture``):
Python's garbage collector is paused during it, since a collection can free an earlier trainer's
graph or an earlier environment's Warp graph there, whose CUDA call invalidates the capture (torch's
"operation not permitted when stream is capturing (function reset)", then Warp CUDA error 901); a
capture already open in the process is refused with a ``RuntimeError`` that names it; and a failed
capture is ended and leaves torch on the caller's stream, its random numbers working.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from swarp.runtime.sequence import refuse_open_capture, torch_capture


class Graphed:
    """``fn`` replayed as a CUDA graph after ``warmup`` eager calls (see the module doc).

    Attributes:
        capture_seconds: Wall time spent capturing [s] (0 until the capture).
    """

    def __init__(self, fn: Callable[[], None], device: torch.device, enabled: bool = True, warmup: int = 1, pool=None,
                 generators: list[torch.Generator] = ()):  # fmt: skip
        self.fn = fn
        self.device = torch.device(device)
        self.enabled = enabled and self.device.type == "cuda"
        self.warmup = warmup
        self.pool = pool
        self.generators = list(generators)  # non-default CUDA generators the function draws from
        self.graph: torch.cuda.CUDAGraph | None = None
        self.calls = 0
        self.capture_seconds = 0.0

    def __call__(self) -> None:
        if not self.enabled:
            self.calls += 1
            self.fn()
            return
        if self.graph is not None:
            self.calls += 1
            self.graph.replay()
            return
        # Warm-up and capture: refused (before counting the call) under a capture left open.
        refuse_open_capture(self.device, "swarp.train.Graphed (a captured training stage)")
        self.calls += 1
        if self.calls <= self.warmup:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self.fn()
            torch.cuda.current_stream(self.device).wait_stream(side)
            return
        start = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with torch_capture(graph, self.device, pool=self.pool, generators=self.generators,
                           what="swarp.train.Graphed's capture"):  # fmt: skip
            self.fn()
        self.graph = graph
        self.capture_seconds = time.perf_counter() - start
        graph.replay()  # capturing runs nothing: this call's work
