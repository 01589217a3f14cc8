"""Asynchronous stepping: ``send(actions)`` returns at once, ``recv()`` returns that step's outputs.

The step runs off the caller's critical path, and where it can pay, concurrently with the caller's
own work between ``send`` and ``recv``:

* CUDA, one ``Environment``: the step is queued on torch's current stream, exactly as ``step``
  queues it, and ``send`` returns before it has run. The host is then free to launch the policy
  while the GPU steps; the GPU itself runs them in order, since each needs the other's output.
  A side stream would let the step run concurrently with GPU work issued between ``send`` and
  ``recv`` (stores, an update), but in a PPO loop the step is a small share of the GPU time, so it
  can save at most that, and measured it lost more (docs/async.md, docs/benchmarks.md).
* CUDA, ``EnvPool`` groups: each group's step goes to its own side stream that first waits for
  torch's current stream (so the actions are ready); ``recv`` makes the current stream wait for
  the step's completion event. No host synchronisation. This is where GPU work really overlaps:
  one group steps while the policy runs on another. (Warp's own stream is blocking against the
  legacy default stream, which would serialise everything; the side streams are torch-created,
  and the runtime scopes Warp onto them as for any user stream.)
* CPU: the step runs inline in ``send`` or in a worker thread (Warp's CPU launches and graph
  replays, and torch's CPU kernels, release the GIL), whichever measurably makes the caller's loop
  faster: ``CpuPlacement`` times the period from one ``send`` to the next for ``PROBE_SENDS``
  sends with each placement, keeps the faster (the worker only if it is ``THREAD_MARGIN`` faster)
  for ``HOLD_SENDS`` sends, then measures again. A step only pays in the worker when the caller
  has work of its own between ``send`` and ``recv``, and even then torch's intra-op threads,
  which spin on every core after each parallel op, compete with the worker; a rule from that gap
  alone measured slower than ``step()`` in a PPO loop of many CPU envs (docs/async.md), so
  the loop itself is timed. Steps shorter than ``OVERLAP_MIN_S`` never go to the worker (the
  hand-off alone costs about half that). ``ExecutionPlan.async_cpu`` can force a placement.

Results are the very same bits as ``step`` with the same actions, wherever the step runs. Between
``send`` and ``recv`` the environment's output buffers are being rewritten: copy what you keep
before ``send`` (or use ``clone_outputs=True``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: CPU steps shorter than this [s] (running average) never go to the worker thread: about twice
#: the thread round trip (one ``submit(...).result()``, measured: docs/benchmarks.md).
OVERLAP_MIN_S = 1.2e-4
#: Send-to-send periods timed per placement when ``CpuPlacement`` measures.
PROBE_SENDS = 8
#: Sends between two measurements (the chosen placement is kept meanwhile).
HOLD_SENDS = 256
#: The worker is chosen only when its median period is at least this fraction shorter.
THREAD_MARGIN = 0.02
#: Weight of the newest step time in its running average.
AVERAGE_WEIGHT = 0.2


def _average(average: float | None, sample: float) -> float:
    return sample if average is None else average + AVERAGE_WEIGHT * (sample - average)


class CpuPlacement:
    """Where each CPU step runs, inline in ``send`` or in the worker thread, chosen by measuring.

    After ``PROBE_SENDS`` settling sends (inline), it measures: sends alternate between inline and
    the worker until ``PROBE_SENDS`` send-to-send periods of each are timed (each period is
    credited to the placement of the send that opened it); the placement with the shorter median
    period is kept for ``HOLD_SENDS`` sends (the worker only if ``THREAD_MARGIN`` shorter), then
    it measures again. Medians, so that a loop's rare long iteration (a PPO update) does not
    decide. Steps shorter than ``OVERLAP_MIN_S`` stay inline unmeasured. ``forced`` skips all of
    it: ``"inline"``, ``"thread"``, or ``"long"`` (the worker for every step not shorter than
    ``OVERLAP_MIN_S``, by the running average of step times: ``EnvPool`` groups, whose caller
    always has the other groups to act on meanwhile).

    Attributes:
        period_s: Median send-to-send period [s] of the last measurement, per placement
            (``"inline"``, ``"thread"``; None where not measured).
        threaded: The placement kept between measurements (True: the worker).
    """

    def __init__(self, forced: str | None = None):
        self.forced = forced
        self.threaded = forced == "thread"
        self.period_s: dict[str, float | None] = {"inline": None, "thread": None}
        self._periods: dict[bool, list[float]] = {False: [], True: []}
        self._hold = PROBE_SENDS  # sends left before the next measurement (0: measuring); the first
        # PROBE_SENDS sends settle (caches, allocators) inline, unmeasured
        self._last_send: float | None = None
        self._last_threaded = False

    def next(self, step_time_s: float | None) -> bool:
        """Called at each send; returns whether this step goes to the worker thread."""
        if self.forced == "long":
            self.threaded = step_time_s is None or step_time_s >= OVERLAP_MIN_S
        if self.forced is not None:
            return self.threaded
        now = time.perf_counter()
        if self._hold == 0 and self._last_send is not None:
            self._periods[self._last_threaded].append(now - self._last_send)
        self._last_send = now
        self._last_threaded = self._choose(step_time_s)
        return self._last_threaded

    def _choose(self, step_time_s: float | None) -> bool:
        if self._hold > 0:
            self._hold -= 1
            if self._hold == 0:  # measure again from the next send on
                self._periods = {False: [], True: []}
            return self.threaded
        if step_time_s is not None and step_time_s < OVERLAP_MIN_S:
            self.threaded = False  # too short for the hand-off to pay: nothing to measure
            self._hold = HOLD_SENDS
            return False
        inline, thread = self._periods[False], self._periods[True]
        if len(inline) < PROBE_SENDS or len(thread) < PROBE_SENDS:
            # Alternate, so that a drift of the machine or of the caller's loop favours neither.
            return len(inline) >= PROBE_SENDS or (len(thread) < PROBE_SENDS and not self._last_threaded)
        self.period_s = {"inline": statistics.median(inline), "thread": statistics.median(thread)}
        self.threaded = self.period_s["thread"] < (1.0 - THREAD_MARGIN) * self.period_s["inline"]
        self._hold = HOLD_SENDS
        return self.threaded


class AsyncStep:
    """The in-flight step of one ``Environment`` (created by its first ``send``, or by ``EnvPool``).

    Args:
        env: The environment whose steps it runs.
        side_stream: CUDA: run steps on a side stream ordered by events (``EnvPool`` groups) rather
            than on torch's current stream.
        cpu_placement: CPU: ``None`` (measured), ``"inline"``, ``"thread"`` or ``"long"`` (see
            ``CpuPlacement``; ``EnvPool`` groups use ``"long"``); the environment's
            ``plan.async_cpu`` other than ``"measure"`` overrides it.
    """

    def __init__(self, env: Environment, side_stream: bool = False, cpu_placement: str | None = None):
        self.env = env
        self.cuda = env.device.startswith("cuda")
        self.pending = False
        #: CUDA: whether steps go to the side stream (else to torch's current stream, as ``step``).
        self.side_stream = side_stream and self.cuda
        if self.side_stream:
            self._stream = torch.cuda.Stream(device=env.torch_device)
            self._done = torch.cuda.Event()
        elif not self.cuda:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swarp-step")
            self._future: Future | None = None
            #: Running average of the CPU step time [s] (None until a step was timed).
            self.step_time_s: float | None = None
            #: Chooses inline or worker for each CPU step.
            forced = env.plan.async_cpu
            self.placement = CpuPlacement(cpu_placement if forced == "measure" else forced)
            #: Whether the latest CPU step went to the worker thread.
            self.last_threaded = False

    def send(self, actions: torch.Tensor) -> None:
        """Start a step with ``actions`` [E, A, act_dim] and return without waiting for it."""
        env = self.env
        if self.pending:
            raise RuntimeError("send() was called twice without recv(): receive the pending step first")
        env.action_input.check(actions)
        tensors = actions.values() if isinstance(actions, Mapping) else (actions,)
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            raise RuntimeError("send()/recv() steps are not differentiable: detach the actions or use step()")
        if self.cuda and not self.side_stream:
            env.action_input.write(actions)
            env.launches.run_step()
        elif self.cuda:
            self._stream.wait_stream(torch.cuda.current_stream(env.torch_device))
            with torch.cuda.stream(self._stream):
                env.action_input.write(actions)
                env.launches.run_step()
                self._done.record(self._stream)
            # The caller may free its action tensors right away: keep their memory until the copy ran.
            for tensor in tensors:
                tensor.record_stream(self._stream)
        else:
            # Copy now, so the caller may overwrite its action tensor while the step runs.
            env.action_input.write(actions)
            env.launches.prepare_step()  # capture on this thread: never two captures at once
            self.last_threaded = self.placement.next(self.step_time_s)
            if self.last_threaded:
                self._future = self._executor.submit(self._timed_step)
            else:
                self._timed_step()
        self.pending = True

    def _timed_step(self) -> None:
        start = time.perf_counter()
        self.env.launches.run_step()
        self.step_time_s = _average(self.step_time_s, time.perf_counter() - start)

    def wait(self) -> None:
        """Order the caller after the pending step (CUDA: stream wait; CPU: join the worker)."""
        if not self.pending:
            raise RuntimeError("recv() was called without a pending send()")
        self.pending = False
        if self.side_stream:
            torch.cuda.current_stream(self.env.torch_device).wait_event(self._done)
        elif self.cuda:
            pass  # the step ran on the caller's stream: already ordered
        else:
            future, self._future = self._future, None
            if future is not None:  # None: the step ran inline in send()
                future.result()  # re-raises an exception of the step, if any

    def close(self) -> None:
        """Finish the pending step, if any, without returning it, and stop the worker thread (CPU).

        Idempotent. An exception the pending step raised is dropped with it. On CUDA the pending
        step completes on its stream (nothing to stop; no host sync).
        """
        self.pending = False
        if not self.cuda:
            self._future = None
            self._executor.shutdown(wait=True)  # joins a step still running in the worker
