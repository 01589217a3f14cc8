"""Asynchronous stepping: ``send(actions)`` returns at once, ``recv()`` returns that step's outputs.

The step runs off the caller's critical path so physics overlaps policy work:

* CUDA: the step (its graph, or its launches) is issued on a side stream that first waits for
  torch's current stream (so the actions are ready), and ``recv`` makes the current stream wait
  for the side stream's completion event. No host synchronisation anywhere. Warp's own stream is
  blocking against the legacy default stream, which would serialise everything; the side stream
  is a torch-created stream, onto which the runtime scopes Warp exactly as for any user stream.
* CPU: the step runs in one worker thread. Warp's CPU launches and graph replays are native code
  called through ctypes with the GIL released, and so are torch's CPU kernels, so the policy or
  the update runs on the caller's thread meanwhile. A step shorter than ``INLINE_BELOW_S`` (by a
  running average of the measured step times) runs inline in ``send`` instead: handing it to the
  thread and back costs ~60 us on a 2-core EPYC, more than overlapping such a step can save
  (measured: 0.87-0.93x at 1-64 envs when every step went to the thread).

Results are the very same bits as ``step`` with the same actions. Between ``send`` and ``recv``
the environment's output buffers are being rewritten: copy what you keep before ``send`` (or use
``clone_outputs=True``).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: CPU steps shorter than this [s] (running average) run inline in ``send``: below about twice the
#: thread round trip (~60 us measured on the 2-core EPYC) overlap cannot pay for the hand-off.
INLINE_BELOW_S = 1.2e-4
#: Weight of the newest step time in the running average.
STEP_TIME_WEIGHT = 0.2


class AsyncStep:
    """The in-flight step of one ``Environment`` (created on its first ``send``)."""

    def __init__(self, env: Environment):
        self.env = env
        self.cuda = env.device.startswith("cuda")
        self.pending = False
        if self.cuda:
            self._stream = torch.cuda.Stream(device=env.torch_device)
            self._done = torch.cuda.Event()
        else:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swarp-step")
            self._future: Future | None = None
            #: Running average of the CPU step time [s] (None until a step was timed).
            self.step_time_s: float | None = None

    def send(self, actions: torch.Tensor) -> None:
        """Start a step with ``actions`` [E, A, act_dim] and return without waiting for it."""
        env = self.env
        if self.pending:
            raise RuntimeError("send() was called twice without recv(): receive the pending step first")
        env.stepper.check_actions(actions, env.n_envs)
        if actions.requires_grad and torch.is_grad_enabled():
            raise RuntimeError("send()/recv() steps are not differentiable: detach the actions or use step()")
        if self.cuda:
            self._stream.wait_stream(torch.cuda.current_stream(env.torch_device))
            with torch.cuda.stream(self._stream):
                env.world.actions.copy_(actions)
                env._run_step()
                self._done.record(self._stream)
            # The caller may free its action tensor right away: keep its memory until the copy ran.
            actions.record_stream(self._stream)
        else:
            # Copy now, so the caller may overwrite its action tensor while the step runs.
            env.world.actions.copy_(actions)
            if env.fused:
                env._step_seq.prepare()  # capture on this thread: never two captures at once
            if self.runs_inline:
                self._timed_step()
            else:
                self._future = self._executor.submit(self._timed_step)
        self.pending = True

    @property
    def runs_inline(self) -> bool:
        """Whether the next CPU ``send`` steps on the caller's thread (its steps are too short to
        overlap profitably); always False on CUDA, and until a step has been timed."""
        return not self.cuda and self.step_time_s is not None and self.step_time_s < INLINE_BELOW_S

    def _timed_step(self) -> None:
        start = time.perf_counter()
        self.env._run_step()
        elapsed = time.perf_counter() - start
        average = self.step_time_s
        self.step_time_s = elapsed if average is None else average + STEP_TIME_WEIGHT * (elapsed - average)

    def wait(self) -> None:
        """Order the caller after the pending step (CUDA: stream wait; CPU: join the worker)."""
        if not self.pending:
            raise RuntimeError("recv() was called without a pending send()")
        self.pending = False
        if self.cuda:
            torch.cuda.current_stream(self.env.torch_device).wait_event(self._done)
        else:
            future, self._future = self._future, None
            if future is not None:  # None: the step ran inline in send()
                future.result()  # re-raises an exception of the step, if any

    def close(self) -> None:
        """Stop the worker thread (CPU)."""
        if not self.cuda:
            self._executor.shutdown(wait=True)
