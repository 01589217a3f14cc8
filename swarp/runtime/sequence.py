"""Launch sequences run as a graph, a recorded program, or eagerly; and the torch stream scope.

The environment describes *what* a step (or a reset) launches as a function of a ``Launcher``;
its ``ExecutionPlan.launch`` says *how* it runs:

* ``"graph"``: the sequence is captured into one graph on first use and replayed after: a CUDA
  graph on the GPU; on the CPU, Warp's recorded operation stream, replayed in C++ (about 4x less
  overhead than replaying recorded launches from Python, measured at 16 envs x 4 agents).
* ``"replay"``: the sequence is recorded on first use (``wp.launch(..., record_cmd=True)``) and
  replayed with pre-packed arguments (CPU, or CUDA where capture is unavailable).
* ``"eager"``: plain launches every time (``SWARP_LAUNCH_MODE=eager``, for debugging).

Under an outer CUDA capture (``torch.cuda.graph`` around a rollout that calls ``env.step``), every
mode launches the sequence's kernels into that capture: a Warp graph cannot be launched into a
capturing stream, and a nested capture is a CUDA error. Warp is told of the capture
(``wp.capture_begin(..., external=True)``) so it allocates nothing outside it; the module loads
happen before the launches (or on the first call outside any capture).

Stream rules: Warp launches go to Warp's stream for the device, which is created blocking against
torch's legacy default stream, so on the default stream ordering with torch comes free and no
scope is opened (it would cost a large share of a small step). Under a user-created
``torch.cuda.Stream`` every entry point scopes onto torch's current stream. Capture itself always
happens on Warp's own stream: capturing the legacy stream is a CUDA error; replaying anywhere is fine.

Capture hygiene (what earlier code in the process may have left behind must not break a capture):
Python's garbage collector is paused during every capture this package opens or joins
(``collector_paused``): a collection mid-capture can free an object of earlier work (a torch
``CUDAGraph`` of an old trainer, whose destructor calls ``cudaGraphExecDestroy``; a Warp graph or
stream of an old environment) with a CUDA call that a global-mode capture forbids, which
invalidates the capture (torch's "operation not permitted when stream is capturing (function
reset)", then Warp CUDA error 901 at the next launch). ``torch_capture`` is the torch capture
with that pause, a clear refusal where a capture is already open, and a clean failure: the capture
ended, the caller's stream and torch's random-number bookkeeping restored.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable

import torch
import warp as wp

from swarp.runtime.launch import EAGER, Launcher, Preloader, Program, Recorder

Sequence_ = Callable[[Launcher], None]


#: Warp's wrapper of each torch stream, by raw handle, shared by every environment of the process:
#: Warp keeps one registration per raw stream and a wrapper's deletion drops it ("unknown stream"
#: in a later launch through another wrapper of the same stream). Torch never frees its streams.
_WRAPPED_STREAMS: dict[int, wp.Stream] = {}


class TorchStreamScope:
    """Cheaply answers "is torch on a user stream?" and scopes Warp onto it when it is."""

    def __init__(self, device: str):
        self.device = device
        self.cuda = device.startswith("cuda")
        self._index = wp.get_device(device).ordinal if self.cuda else -1

    def current(self) -> wp.Stream | None:
        """The Warp stream wrapping torch's current stream, or ``None`` on the legacy default stream."""
        if not self.cuda:
            return None
        raw = torch._C._cuda_getCurrentRawStream(self._index)
        if raw == 0:
            return None
        stream = _WRAPPED_STREAMS.get(raw)
        if stream is None:
            stream = wp.Stream(self.device, cuda_stream=raw)
            _WRAPPED_STREAMS[raw] = stream
        return stream

    def scope(self):
        """Context manager: a ``wp.ScopedStream`` onto torch's user stream, or a no-op."""
        stream = self.current()
        if stream is None:
            return contextlib.nullcontext()
        return wp.ScopedStream(stream, sync_enter=False, sync_exit=False)


@contextlib.contextmanager
def on_callers_stream(device: str):
    """Context for building an environment under a torch user stream: Warp's allocations and
    launches go onto that stream, after the work queued on Warp's own, and Warp's stream waits for
    them on exit. Torch's writes into the new buffers (on torch's stream) and Warp's zero-fills and
    kernels then keep their program order: Warp's own stream orders itself against torch's legacy
    default stream only. A no-op on the CPU and on the legacy default stream."""
    stream = TorchStreamScope(device).current()
    if stream is None:
        yield
        return
    with wp.ScopedStream(stream, sync_enter=True, sync_exit=True):
        yield


@contextlib.contextmanager
def collector_paused():
    """Context for a CUDA capture: Python's garbage collector does not run during it. An object
    it frees mid-capture (an old trainer's torch ``CUDAGraph``, an old environment's Warp graph or
    stream) can make a CUDA call that invalidates a global-mode capture (torch's "operation not
    permitted when stream is capturing (function reset)", Warp CUDA error 901; seen in long test
    sessions). Garbage that exists before the capture is left for a collection after it: none
    runs during it, so no collection first (one costs ~0.3 s in a process holding torch and a few
    environments; torch >= 2.5 no longer collects before its captures either). Nested uses and a
    collector the caller disabled are left as they were."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def joined_capture(stream: wp.Stream):
    """Context whose Warp launches join the CUDA capture torch has open on ``stream`` (Warp is told
    of it, ``external=True``, so it allocates nothing outside it). The garbage collector is paused
    meanwhile (``collector_paused``: the capture is the caller's, and may be global-mode)."""
    with collector_paused(), wp.ScopedStream(stream, sync_enter=False, sync_exit=False):
        wp.capture_begin(stream=stream, external=True, force_module_load=False)
        try:
            yield
        finally:
            wp.capture_end(stream=stream)


def open_capture(device) -> str | None:
    """What capture is open that a new capture on ``device`` (a torch or Warp CUDA device) would
    collide with, in words, or ``None``: torch's current stream capturing (a ``capture_begin``
    without its ``capture_end``, or a call from inside someone's ``torch.cuda.graph``), or a Warp
    capture still registered on the device (``wp.capture_begin`` without ``wp.capture_end``).
    ``None`` on the CPU. One CUDA query."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    index = torch.cuda.current_device() if device.index is None else device.index
    # Warp's first: querying torch's legacy default stream while a blocking stream (Warp's) captures is an error.
    captures = _warp_captures(index)
    if captures:
        return f"Warp has {len(captures)} graph capture(s) open on cuda:{index} (wp.capture_begin without capture_end?)"
    with torch.cuda.device(index):
        try:
            if torch.cuda.is_current_stream_capturing():
                return f"torch's current stream on cuda:{index} is capturing a CUDA graph"
        except RuntimeError as error:  # cudaErrorStreamCaptureImplicit: the legacy stream, a blocking stream captures
            return f"a CUDA graph capture is open on a stream of cuda:{index} ({str(error).splitlines()[0]})"
    return None


def _warp_captures(index: int) -> dict | None:
    """Warp's open captures on CUDA device ``index`` (stream -> graph), or ``None`` where Warp is not
    initialised (then it has none, and initialising it here could run inside someone's capture)."""
    try:
        from warp._src import context
    except ImportError:  # another Warp layout: ask the device (initialises Warp where it is not)
        context = None
    if context is not None and getattr(context, "runtime", None) is None:
        return None
    return getattr(wp.get_device(f"cuda:{index}"), "captures", None)


def refuse_open_capture(device, what: str) -> None:
    """Raise a ``RuntimeError`` naming the open capture (``open_capture``) that ``what`` cannot start under."""
    found = open_capture(device)
    if found is not None:
        raise RuntimeError(
            f"{what} cannot start: {found}. A CUDA capture left open by earlier code (or an outer "
            "capture around this call) must be ended first (capture_end / the end of its `with` block)"
        )


def end_failed_torch_capture(device, capture_stream: torch.cuda.Stream | None = None, graph=None,
                             generators: list[torch.Generator] = ()) -> None:  # fmt: skip
    """Repair what a failed ``torch.cuda.graph`` capture leaves behind on ``device``: the capture
    itself where it is still open on ``capture_stream`` (ended, its graph dropped), and the
    random-number bookkeeping of torch's default CUDA generator and of ``generators`` (those the
    failed graph had registered), which torch ends only when a capture succeeds (until then every
    draw from them raises "Offset increment outside graph capture"): a capture of one fill ends it.
    A failed capture ran nothing, so nothing else is left queued."""
    device = torch.device(device)
    if capture_stream is not None and graph is not None:
        with torch.cuda.stream(capture_stream):
            if torch.cuda.is_current_stream_capturing():
                with contextlib.suppress(RuntimeError):
                    graph.capture_end()  # ends the stream's capture (reports the failure again)
    torch.cuda.synchronize(device)
    with torch.cuda.device(device):
        repair = torch.cuda.CUDAGraph()
        for generator in generators:
            repair.register_generator_state(generator)
        with torch.cuda.graph(repair):
            torch.zeros(1, device=device)
    torch.cuda.synchronize(device)


@contextlib.contextmanager
def torch_capture(graph: torch.cuda.CUDAGraph, device, pool=None, generators: list[torch.Generator] = (),
                  what: str = "a CUDA graph capture"):  # fmt: skip
    """``torch.cuda.graph(graph, pool=pool)``, with ``generators`` (non-default CUDA generators the
    captured work draws from) registered to ``graph``, made robust to the process's history (module doc):

    * refuses (``RuntimeError``, nothing changed) where a capture is already open (``open_capture``);
    * Python's garbage collector is paused during the capture (``collector_paused``);
    * on failure the capture is ended, torch's current stream is the caller's again (torch leaves
      its capture's side stream current when a capture fails) and the generators' random-number
      bookkeeping works again (``end_failed_torch_capture``); the capture's error propagates.
    """
    refuse_open_capture(device, what)
    device = torch.device(device)
    generators = list(generators)
    for generator in generators:
        graph.register_generator_state(generator)  # their offsets advance with every replay
    caller_stream = torch.cuda.current_stream(device)
    scope = torch.cuda.graph(graph, pool=pool)
    try:
        with collector_paused(), scope:
            yield
    except BaseException as error:
        try:
            end_failed_torch_capture(device, scope.capture_stream, graph, generators)
        except Exception as repair_error:  # noqa: BLE001 - the capture's own error is the one to report
            note = getattr(error, "add_note", None)  # Python 3.11+
            if note is not None:
                note(f"(repairing torch's state after the failed capture failed too: {repair_error})")
        finally:
            torch.cuda.set_stream(caller_stream)
        raise


def fork(side: wp.Stream | None, device: str):
    """Context for launches forked onto the CUDA stream ``side`` after the work queued so far on
    the current stream (live or under graph capture: a branch of the graph); ``join`` it back.
    ``None``: the launches stay inline."""
    if side is None:
        return contextlib.nullcontext()
    side.wait_stream(wp.get_stream(device))
    return wp.ScopedStream(side, sync_enter=False, sync_exit=False)


def join(side: wp.Stream | None, device: str) -> None:
    """Make the current stream wait for the work ``fork`` put on ``side`` (``None``: nothing)."""
    if side is not None:
        wp.get_stream(device).wait_stream(side)


class CompiledSequence:
    """One launch sequence (e.g. "a step") bound to an execution mode, built lazily on first run."""

    def __init__(self, sequence: Sequence_, mode: str, device: str, streams: TorchStreamScope):
        self.sequence = sequence
        self.mode = mode
        self.device = device
        self.streams = streams
        self._graph = None
        self._program: Program | None = None
        self._loaded = False  # the kernels' modules are loaded (the sequence ran once outside a capture)

    def __call__(self) -> None:
        stream = self.streams.current()
        if stream is not None and torch.cuda.is_current_stream_capturing():
            self._launch_into_capture(stream)
            return
        if self.mode == "graph":
            if self._graph is None:
                self._capture()
            wp.capture_launch(self._graph, stream=stream)
            self._loaded = True
            return
        self._loaded = True
        with self.streams.scope() if stream is not None else contextlib.nullcontext():
            if self.mode == "replay":
                if self._program is None:
                    recorder = Recorder()
                    self.sequence(recorder)
                    self._program = recorder.program(source=self.sequence)
                else:
                    self._program()
            else:
                self.sequence(EAGER)

    @property
    def graph(self):
        """The captured Warp graph (``mode == "graph"``, after the first run or ``prepare``), or ``None``."""
        return self._graph

    def _launch_into_capture(self, stream: wp.Stream) -> None:
        """Launch the sequence into the capture torch has open on ``stream`` (see the module doc)."""
        if not self._loaded:
            self.sequence(Preloader())  # module loads inside a capture need a CUDA 12.3+ driver
            self._loaded = True
        with joined_capture(stream):
            self.sequence(EAGER)

    def _capture(self) -> None:
        self.sequence(Preloader())
        # Work already queued by torch on the default stream (e.g. buffer initialisation) must land
        # before the captured work is first replayed; capture itself never runs anything.
        paused = collector_paused() if self.device.startswith("cuda") else contextlib.nullcontext()
        with paused, wp.ScopedCapture(device=self.device, force_module_load=False) as capture:
            self.sequence(EAGER)
        self._graph = capture.graph

    def prepare(self) -> None:
        """Capture the graph now if this sequence runs as one and has none yet (runs nothing).

        Graph capture is a per-device state, so two sequences must never capture at once; callers
        that run sequences from worker threads (async stepping) prepare them on their own thread first.
        """
        if self.mode == "graph" and self._graph is None:
            with self.streams.scope():
                self._capture()

    def invalidate(self) -> None:
        """Forget the graph/program (after a change to anything they baked in)."""
        self._graph = None
        self._program = None
