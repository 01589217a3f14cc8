"""Replaying a piece of the training iteration as one CUDA graph.

``Graphed(fn)`` runs ``fn`` (no arguments: it reads and writes preallocated tensors) eagerly for its
first ``warmup`` calls, on a side stream as torch's capture rules ask (those calls are real work,
not a dry run), then captures it into a CUDA graph on the next call and replays the graph from then
on. On the CPU, or with ``enabled=False``, every call is eager. A rollout's ``env.step`` goes into the
same capture (``swarp.runtime.sequence``: the step's kernels launch into torch's capture).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


class Graphed:
    """``fn`` replayed as a CUDA graph after ``warmup`` eager calls (see the module doc).

    Attributes:
        capture_seconds: Wall time spent capturing [s] (0 until the capture).
    """

    def __init__(self, fn: Callable[[], None], device: torch.device, enabled: bool = True, warmup: int = 1, pool=None,
                 generators: list[torch.Generator] = ()):  # fmt: skip
        self.fn = fn
        self.enabled = enabled and device.type == "cuda"
        self.warmup = warmup
        self.pool = pool
        self.generators = list(generators)  # non-default CUDA generators the function draws from
        self.graph: torch.cuda.CUDAGraph | None = None
        self.calls = 0
        self.capture_seconds = 0.0

    def __call__(self) -> None:
        self.calls += 1
        if not self.enabled:
            self.fn()
        elif self.graph is not None:
            self.graph.replay()
        elif self.calls <= self.warmup:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.fn()
            torch.cuda.current_stream().wait_stream(side)
        else:
            start = time.perf_counter()
            graph = torch.cuda.CUDAGraph()
            for generator in self.generators:
                graph.register_generator_state(generator)  # their offsets advance with every replay
            with torch.cuda.graph(graph, pool=self.pool):
                self.fn()
            self.graph = graph
            self.capture_seconds = time.perf_counter() - start
            graph.replay()  # capturing runs nothing: this call's work
