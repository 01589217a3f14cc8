"""Threads that replay Warp CPU graphs without Python: the CPU shards' hand-off.

A CPU step in shards (``ExecutionPlan.cpu_shards``) runs shard 0 on the caller's thread and the
others on threads of their own. Handing a shard to a Python thread costs what the shard's work
costs at 1,024 x 4: the thread sleeps in the kernel, waking it takes tens of microseconds on a
virtual machine, and both threads then queue for the GIL at every Python line between the graph
replays (docs/benchmarks.md, "Other measured choices in the code").

A ``GraphWorker`` is a thread that spends its idle time, and runs its work, inside one native call:
a Warp CPU kernel whose native snippet spins on a flag (a pause instruction a turn, then a
``sched_yield`` a turn, so a busy machine's other threads get the core) and, when the caller raises
it, replays the Warp CPU graph the caller named through Warp's own C replay function, then raises a
done flag that the caller spins on natively. No Python runs on the worker between steps, so neither
side waits for the GIL or for a wake-up. After ``spin_s`` without work it leaves the native call
and sleeps on an event (the next ``submit`` wakes it the slow way), so an idle process does not hold
a core. A caller whose worker has not started its work (not scheduled) takes it back and replays it
itself.

It needs Warp's CPU graph internals (``Graph.apic_state`` and the C function that replays it);
``native_replay`` says whether this Warp has them, and the shards fall back to a thread pool where
it does not.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
import time
import weakref
from types import SimpleNamespace

import warp as wp

#: Idle spin of a worker before it sleeps [s]: a step's gap (the caller's Python, a small policy)
#: is well inside it; a longer pause costs a thread wake-up at the next step.
SPIN_S = 2e-4
#: The caller's spin between checks that the worker is alive [s].
WAIT_CHUNK_S = 5e-3

# Flag words, a cache line apart: the caller writes GO (1: work, 2: stop), the worker DONE (1: the
# replay succeeded, 2: it failed).
_GO = 0
_DONE = 16
_WORDS = 32

#: Turns a spinning thread only pauses before it also yields its core at every turn (``sched_yield``,
#: where the C library has it), so a spin on an oversubscribed machine gives way to runnable threads.
HOT_TURNS = 64

_PAUSE = r"""
if (yield_fn != 0 && turns > HOT) {
    ((void (*)(void))yield_fn)();  // sched_yield's int result is not read
} else {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}
""".replace("HOT", str(HOT_TURNS))

_SERVE = (
    r"""
typedef bool (*replay_t)(void*);
replay_t replay = (replay_t)fn;
int turns = 0;
while (true) {
    int go = __atomic_load_n(&flags.data[0], __ATOMIC_ACQUIRE);
    if (go == 1) {
        int expected = 1;  // claimed here unless the caller took the work back first
        if (__atomic_compare_exchange_n(&flags.data[0], &expected, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            bool ok = replay((void*)graph.data[0]);
            __atomic_store_n(&flags.data[16], ok ? 1 : 2, __ATOMIC_RELEASE);
        }
        turns = 0;
        continue;
    }
    if (go == 2) return 2;
    if (++turns >= limit) return 0;
"""
    + _PAUSE
    + "}\n"
)

_WAIT = (
    r"""
int turns = 0;
int v = __atomic_load_n(&flags.data[slot], __ATOMIC_ACQUIRE);
while (v == 0 && turns < limit) {
"""
    + _PAUSE
    + r"""
    ++turns;
    v = __atomic_load_n(&flags.data[slot], __ATOMIC_ACQUIRE);
}
if (v != 0) __atomic_store_n(&flags.data[slot], 0, __ATOMIC_RELAXED);
return v;
"""
)

_POST = "__atomic_store_n(&flags.data[slot], value, __ATOMIC_RELEASE);"

_CLAIM = r"""
int expected = 1;
return __atomic_compare_exchange_n(&flags.data[0], &expected, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 1 : 0;
"""


@wp.func_native(_SERVE)
def _serve(
    flags: wp.array(dtype=wp.int32), graph: wp.array(dtype=wp.uint64), fn: wp.uint64, yield_fn: wp.uint64, limit: int
) -> int: ...


@wp.func_native(_WAIT)
def _wait(flags: wp.array(dtype=wp.int32), slot: int, yield_fn: wp.uint64, limit: int) -> int: ...


@wp.func_native(_POST)
def _post(flags: wp.array(dtype=wp.int32), slot: int, value: int): ...


@wp.func_native(_CLAIM)
def _claim(flags: wp.array(dtype=wp.int32)) -> int: ...


@wp.kernel(enable_backward=False, grid_stride=False)
def serve_kernel(
    flags: wp.array(dtype=wp.int32),
    graph: wp.array(dtype=wp.uint64),
    fn: wp.uint64,
    yield_fn: wp.uint64,
    limit: int,
    out: wp.array(dtype=wp.int32),
):
    """One thread: replay ``graph[0]`` (an ``APICState*``) through ``fn`` each time ``flags[0]``
    turns 1, raising ``flags[16]``; ``out[0]``: 2 once ``flags[0]`` turns 2, 0 after ``limit``
    idle turns (``yield_fn``: the address of ``sched_yield``, or 0)."""
    out[0] = _serve(flags, graph, fn, yield_fn, limit)


@wp.kernel(enable_backward=False, grid_stride=False)
def wait_kernel(
    flags: wp.array(dtype=wp.int32), slot: int, yield_fn: wp.uint64, limit: int, out: wp.array(dtype=wp.int32)
):
    """One thread: spin up to ``limit`` turns until ``flags[slot]`` is nonzero; ``out[0]``: its value
    (0: none came), and the flag is cleared."""
    out[0] = _wait(flags, slot, yield_fn, limit)


@wp.kernel(enable_backward=False, grid_stride=False)
def claim_kernel(flags: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.int32)):
    """One thread: take back work the worker has not started (``flags[0]`` 1 -> 0); ``out[0]``: 1 if so."""
    out[0] = _claim(flags)


@wp.kernel(enable_backward=False, grid_stride=False)
def post_kernel(flags: wp.array(dtype=wp.int32), slot: int, value: int):
    """One thread: ``flags[slot] = value``, a release store."""
    _post(flags, slot, value)


@functools.cache
def yield_address() -> int:
    """The address of the C library's ``sched_yield`` (0 where there is none: the spins only pause)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        return ctypes.cast(libc.sched_yield, ctypes.c_void_p).value or 0
    except (OSError, AttributeError, TypeError):
        return 0


@functools.cache
def _replay_address() -> int | None:
    """The address of Warp's C replay of a CPU graph (``wp_apic_cpu_replay_state``), or ``None``."""
    try:
        from warp._src import context  # the internals this module depends on
    except ImportError:
        return None
    replay = getattr(getattr(getattr(context, "runtime", None), "core", None), "wp_apic_cpu_replay_state", None)
    return None if replay is None else ctypes.cast(replay, ctypes.c_void_p).value


def available() -> bool:
    """Whether this Warp has the C replay a ``GraphWorker`` calls (``plan.cpu_graph_workers``)."""
    return _replay_address() is not None


def native_replay(graph) -> tuple[int, int] | None:
    """``(address of Warp's C replay function, the graph's APICState*)`` of a Warp CPU ``graph``,
    or ``None`` where this Warp has no such internals (then a Python thread must replay it)."""
    replay = _replay_address()
    state = getattr(graph, "apic_state", None)
    if replay is None or state is None or getattr(graph, "_native_graph", None) is not None:
        return None
    address = state.value if isinstance(state, ctypes.c_void_p) else int(state)
    return (replay, address) if address else None


class GraphWorker:
    """A thread that replays Warp CPU graphs handed to it by ``submit``, in native code (module doc).

    One caller at a time: ``submit(graph)``, then ``wait()`` before the next ``submit``. The thread
    stops at ``close()``, when the worker is garbage-collected, or at interpreter exit.

    Args:
        name: The thread's name.
        spin_s: Idle spin before the thread sleeps [s].

    Attributes:
        taken_back: How many submitted replays ``wait`` ran on the caller's thread because the worker
            had not started them.
    """

    def __init__(self, name: str = "swarp-graph-worker", spin_s: float = SPIN_S):
        # What the thread uses lives in ``shared``: the thread must not keep the worker alive.
        shared = self._shared = SimpleNamespace(
            flags=wp.zeros(_WORDS, dtype=wp.int32, device="cpu"),
            out=wp.zeros(1, dtype=wp.int32, device="cpu"),
            lock=threading.Lock(),
            wake=threading.Event(),
            ready=threading.Event(),
            sleeping=False,
            sleeps=0,
            serve=None,  # the recorded serve launch, made at the first submit (it needs fn)
            closed=False,
        )
        flags = shared.flags
        self._graph = wp.zeros(1, dtype=wp.uint64, device="cpu")
        self._graph_np = self._graph.numpy()  # a view: the caller names the graph here
        self._out = wp.zeros(1, dtype=wp.int32, device="cpu")
        self._out_np = self._out.numpy()
        self._yield = wp.uint64(yield_address())
        turns_per_s = _calibrate(flags, self._yield, self._out)
        self._idle_turns = max(1, int(spin_s * turns_per_s))

        def record(kernel, inputs):
            return wp.launch(kernel, dim=1, inputs=inputs, device="cpu", record_cmd=True)

        self._post_go = record(post_kernel, [flags, _GO, 1])
        self._claim = record(claim_kernel, [flags, self._out])
        self._wait_done = record(wait_kernel, [flags, _DONE, self._yield, max(1, int(WAIT_CHUNK_S * turns_per_s)),
                                               self._out])  # fmt: skip
        shared.post_stop = record(post_kernel, [flags, _GO, 2])
        flags.zero_()  # the recording launches ran: clear what they wrote
        self.taken_back = 0
        self._submitted = None
        self._pending = False
        self._thread = threading.Thread(target=_serve_loop, args=(shared,), name=name, daemon=True)
        self._thread.start()
        self._stop = weakref.finalize(self, _stop, shared, self._thread)

    @property
    def sleeps(self) -> int:
        """How many times the thread left its spin to sleep (each costs the next submit a wake-up)."""
        return self._shared.sleeps

    def submit(self, graph) -> None:
        """Start replaying the Warp CPU ``graph`` on the worker (``native_replay(graph)`` must not be
        ``None``). The caller's writes before this call are visible to the replay."""
        shared = self._shared
        if shared.closed:
            raise RuntimeError("the GraphWorker is closed")
        if self._pending:
            raise RuntimeError("GraphWorker.submit() called twice without wait()")
        target = native_replay(graph)
        if target is None:
            raise ValueError("this graph has no native replay (see GraphWorker's module doc)")
        fn, state = target
        if shared.serve is None:
            inputs = [shared.flags, self._graph, wp.uint64(fn), self._yield, self._idle_turns, shared.out]
            shared.serve = wp.launch(serve_kernel, dim=1, inputs=inputs, device="cpu", record_cmd=True)
            shared.ready.set()  # (no work raised yet: that launch returned after its idle turns)
        self._graph_np[0] = state
        self._submitted = graph
        self._pending = True
        self._post_go.launch()  # a release store: the writes above happen before the worker's replay
        with shared.lock:
            if shared.sleeping:
                shared.wake.set()

    def wait(self) -> None:
        """Finish the submitted replay: run it here if the worker has not started it, else wait for
        it (spinning natively).

        Raises:
            RuntimeError: the replay failed, or the worker's thread died.
        """
        if not self._pending:
            return
        self._claim.launch()
        if int(self._out_np[0]):
            # The worker has not started (a busy machine did not run its thread): replay it here
            # rather than spin for a thread that may not get a core for milliseconds.
            self._pending = False
            self.taken_back += 1
            wp.capture_launch(self._submitted)
            return
        while True:
            self._wait_done.launch()
            result = int(self._out_np[0])
            if result:
                break
            if not self._thread.is_alive():
                self._pending = False
                raise RuntimeError("the GraphWorker's thread died with a replay pending")
        self._pending = False
        if result != 1:
            raise RuntimeError("a Warp CPU graph replay on a GraphWorker failed")

    def close(self) -> None:
        """Stop the thread (after the pending replay). Idempotent."""
        if self._shared.closed:
            return
        try:
            self.wait()
        finally:
            self._stop()


def _serve_loop(shared: SimpleNamespace) -> None:
    """A worker thread: the native serve loop, and a sleep on ``shared.wake`` after each idle spell."""
    shared.ready.wait()
    while not shared.closed:
        shared.serve.launch()  # returns 2 (stop) or 0 (idle for spin_s)
        if int(shared.out.numpy()[0]) == 2 or shared.closed:
            return
        with shared.lock:
            shared.sleeping = True
            shared.sleeps += 1
        # The lock orders this read after a submit's GO store that it missed under the lock.
        if int(shared.flags.numpy()[_GO]) == 0:
            shared.wake.wait()
        with shared.lock:
            shared.sleeping = False
            shared.wake.clear()


def _stop(shared: SimpleNamespace, thread: threading.Thread) -> None:
    """Stop a worker's thread: ``close``, garbage collection or interpreter exit (``weakref.finalize``)."""
    shared.closed = True
    shared.post_stop.launch()
    shared.ready.set()
    with shared.lock:
        shared.wake.set()
    if thread is not threading.current_thread():
        thread.join()


def _calibrate(flags: wp.array, yield_fn, out: wp.array) -> float:
    """Spin turns per second of ``wait_kernel`` on this machine (a pause takes ~10 to ~140 cycles by
    CPU, a yield a system call): 2,000 turns on a flag nobody raises, timed."""
    turns = 2000
    wp.launch(wait_kernel, dim=1, inputs=[flags, _WORDS - 1, yield_fn, 1, out], device="cpu")  # compile, load
    start = time.perf_counter()
    wp.launch(wait_kernel, dim=1, inputs=[flags, _WORDS - 1, yield_fn, turns, out], device="cpu")
    return turns / max(time.perf_counter() - start, 1e-6)
