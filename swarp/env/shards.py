"""CPU shards: one ``Environment``'s envs stepped in slices, one thread each.

Warp runs a CPU kernel's threads one after another on one core. An environment whose plan has
``cpu_shards = S > 1`` (the CPU, fused kernels, enough envs: ``swarp.runtime.plan``) keeps its own
buffers as the batch's one set of tensors and builds S shard ``Environment``s beside it, shard s
holding envs ``[lo, hi)`` (built with ``env_offset = env_offset + lo``, so its resets draw what
those envs of the whole batch draw: ``swarp.core.rng``). Its step and reset launches run on the
shards: shard 0 on the caller's thread, the others on a thread pool (a graph replay releases the
GIL). Where the plan says (``plan.cpu_graph_workers``: graphs, at most four shards), the other
shards run on ``swarp.runtime.workers.GraphWorker`` threads that replay them in native code, spinning between
steps, so no thread wakes up or waits for the GIL at the hand-off (measured faster than the pool:
docs/benchmarks.md); a thread pool runs sequences without graphs.

A shard is built inside ``env_arrays.views_of``: the per-env buffers the framework allocates by
name (world state, actions, neighbor lists, ``[E]`` health flags, ``EnvBuffers``' counters, flags,
reward and rows) are the environment's own rows ``[lo, hi)``, so its kernels work in them. What the
shard holds itself (the scenario's memory and info, the parameter table, obstacles, the sticky
one-element flags, and any buffer not allocated by name) is linked by copies: each shard's step
(and reset) is one compiled sequence, a graph where the plan has one, that

1. copies its slice of those buffers in (every buffer a snapshot holds, ``Environment.get_state``,
   and ``done``, the neighbor lists, the health flags, the actions and the reset mask, where not
   viewed); the observation rows and final rows (``WRITE_ONLY``) only after the environment wrote
   them itself;
2. runs the shard's own step or reset launches;
3. copies its slice of the same buffers back (the sticky one-element flags: or-ed over the shards
   after the threads join).

Recorded inside the graph the copies cost next to nothing (as torch copies, one per buffer, they
cost as much as the shard's step), and viewing rather than copying saves more (docs/benchmarks.md).

So after every call the environment's buffers hold exactly what one unsharded environment's would,
bit for bit (the kernels are per env and the draws keyed by global env index), and everything that
reads them (``state``, ``get_state``, ``render``, a scripted controller reading the scenario's
memory) or writes them between steps (``set_state``, ``set_agent_params``, ``reset``, a write
through ``env.state``) works as without shards. How many threads and envs a shard needs to pay
is the plan's measured rule (``plan.MIN_SHARD_ENVS``, ``plan.MAX_SHARD_ENVS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.rng import split_envs
from swarp.runtime import episode
from swarp.runtime.launch import Launcher
from swarp.runtime.sequence import CompiledSequence
from swarp.runtime.workers import GraphWorker

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: Linked buffers that a step or reset only writes (every row of a step, the reset rows of a
#: reset), and the largest: copied in only after the environment wrote them itself (``mark_dirty``).
#: Copied in every step, they made the largest share of a shard's copies (docs/benchmarks.md).
WRITE_ONLY = ("env.obs", "env.final_obs")


def _linked_buffers(env: Environment) -> dict[str, torch.Tensor]:
    """The buffers of ``env`` that a shard's step or reset reads or writes, by name."""
    world = env.world
    buffers = dict(env.snapshots.tensors())
    # The parameter table as stored ([E or 1, P, A]: ``swarp.core.types.param_array``), contiguous.
    buffers["env.agent_params"] = wp.to_torch(world.model.params).permute(0, 2, 1)
    buffers["env.done"] = env.done
    buffers["env.reset_mask"] = env.reset_mask
    buffers["world.actions"] = env.world.actions_given
    action_input = env.action_input
    if action_input.indices is not None:
        buffers["world.action_indices"] = action_input.indices
    buffers["neighbors.nbr"] = wp.to_torch(world.neighbors.nbr)
    buffers["neighbors.count"] = wp.to_torch(world.neighbors.count)
    buffers["flags.non_finite"] = wp.to_torch(world.non_finite_flags)
    buffers["flags.invalid_actions"] = wp.to_torch(world.invalid_action_flag)
    buffers["flags.neighbor_overflow"] = wp.to_torch(world.neighbors.overflow)
    return buffers


def _views(part: torch.Tensor, full: torch.Tensor, lo: int, hi: int) -> bool:
    """Whether the shard's buffer ``part`` is the environment's ``full`` rows ``[lo, hi)`` itself."""
    if full.dim() == 0 or full.shape[0] < hi or part.shape != full[lo:hi].shape:
        return False
    rows = full[lo:hi]
    return part.data_ptr() == rows.data_ptr() and part.stride() == rows.stride() and part.dtype == rows.dtype


class Shards:
    """The shard environments of ``env``, built on views of its buffers, and the copies that link
    the rest (see the module doc).

    Args:
        env: The environment (fully built and reset); its ``plan.cpu_shards`` is the shard count.
        build: ``build(n_envs, env_offset, plan)`` -> a new ``Environment`` like ``env`` over those
            envs (the environment's own constructor arguments otherwise); called inside
            ``env_arrays.views_of``.

    Attributes:
        bounds: ``[(lo, hi), ...]`` the env slice of each shard.
        envs: The shard ``Environment`` objects.
        n_views: Per shard, how many linked buffers it views rather than copies.
    """

    def __init__(self, env: Environment, build: Callable[[int, int, object], Environment]):
        self.env = env
        n_shards = env.plan.cpu_shards
        self.bounds = [(lo, lo + n) for lo, n in split_envs(env.n_envs, n_shards)]
        plan = dataclasses.replace(env.plan, cpu_shards=1, cpu_graph_workers=False)
        mine = _linked_buffers(env)
        self.envs = []
        for lo, hi in self.bounds:
            with env_arrays.views_of(mine, lo, hi):  # the buffers allocated by name are views of env's
                self.envs.append(build(hi - lo, env.env_offset + lo, plan))
        self._link()
        self._dirty = False
        self._pool: ThreadPoolExecutor | None = None  # built at the first run without graph workers
        self._workers: list[GraphWorker] | None = None  # built at the first run of graphs

    def _link(self) -> None:
        """Pair every linked buffer of the environment with each shard's, and build the sequences
        that copy them around a shard's step or reset (one graph per shard and sequence)."""
        mine = _linked_buffers(self.env)
        self._flags = [(full, []) for name, full in mine.items() if name.startswith("flags.") and full.shape == (1,)]
        self._step_seqs, self._reset_seqs = [], []
        #: ``(shard's tensor, the environment's slice)`` of the ``WRITE_ONLY`` buffers.
        self._write_only: list[tuple[torch.Tensor, torch.Tensor]] = []
        #: How many of the linked buffers each shard views (``env_arrays``) instead of copying.
        self.n_views: list[int] = []
        for shard, (lo, hi) in zip(self.envs, self.bounds, strict=True):
            theirs = _linked_buffers(shard)
            copies_in, copies_out = [], []
            views = 0
            for name, full in mine.items():
                part = theirs[name]
                if _views(part, full, lo, hi):
                    views += 1  # the shard's kernels work in the environment's rows: nothing to copy
                elif name.startswith("flags.") and full.shape == (1,):
                    next(parts for f, parts in self._flags if f is full).append(part)
                    copies_in.append((wp.from_torch(part), wp.from_torch(full)))
                elif full.shape[:1] == (self.env.n_envs,) and part.shape == (hi - lo, *full.shape[1:]):
                    pair = (wp.from_torch(part), wp.from_torch(full[lo:hi]))
                    if name in WRITE_ONLY:
                        self._write_only.append((part, full[lo:hi]))
                    else:
                        copies_in.append(pair)
                    copies_out.append(pair[::-1])
                elif part.shape == full.shape:
                    copies_in.append((wp.from_torch(part), wp.from_torch(full)))
                else:
                    raise RuntimeError(
                        f"shard buffer {name!r} {list(part.shape)} is neither a slice of nor equal to "
                        f"{list(full.shape)}: the shards cannot be linked"
                    )
            # A step changes the final rows of the envs it ended only, and only with auto-reset: those
            # alone come back (without auto-reset a finished env stays done, and copying its rows back
            # every step cost a fair share of a shard's step: docs/benchmarks.md).
            final = (wp.from_torch(self.env.final_obs[lo:hi]), wp.from_torch(shard.final_obs))
            step_out = [pair for pair in copies_out if pair[0].ptr != final[0].ptr]
            if self.env.auto_reset and not _views(shard.final_obs, self.env.final_obs, lo, hi):
                step_out.append(self._final_rows_back(shard, *final))
            self.n_views.append(views)
            self._step_seqs.append(self._linked(shard, shard.launches.step, copies_in, step_out))
            self._reset_seqs.append(self._linked(shard, shard.launches.reset, copies_in, copies_out))
        self._flag_views = [(full.numpy(), [part.numpy() for part in parts]) for full, parts in self._flags]

    @staticmethod
    def _final_rows_back(shard: Environment, dst: wp.array, src: wp.array) -> Callable[[Launcher], None]:
        """The launch that copies the final rows of the envs ``shard``'s step ended from ``src`` to
        ``dst`` (the environment's slice): a whole copy back cost as much as the rows' copy in."""
        per_thread, threads = shard.plan.split(shard.n_agents)
        kernel = episode.save_final_obs_kernel(shard.stepper.scalar)
        done = shard.buffers.done

        def launch(launcher: Launcher) -> None:
            launcher.launch(kernel, dim=(shard.n_envs, threads), inputs=[done, src, per_thread], outputs=[dst],
                            device=shard.device)  # fmt: skip

        return launch

    @staticmethod
    def _linked(shard: Environment, sequence, copies_in, copies_out) -> CompiledSequence:
        """``sequence`` of ``shard`` between the copies of its slice in and out (pairs ``(dst, src)``,
        or a launch of its own), as one compiled sequence."""

        def linked(launcher: Launcher) -> None:
            for dst, src in copies_in:
                launcher.copy(dst, src)
            sequence(launcher)
            for copy_out in copies_out:
                if callable(copy_out):
                    copy_out(launcher)
                else:
                    launcher.copy(*copy_out)

        return CompiledSequence(linked, shard.plan.launch, shard.device, shard.streams)

    def step(self) -> None:
        """One step of every shard from the environment's buffers (actions included), written back."""
        self._run("step")

    def reset(self) -> None:
        """Reset the envs of the environment's ``reset_mask`` on every shard, written back."""
        self._run("reset")

    def mark_dirty(self) -> None:
        """Say the environment wrote its ``WRITE_ONLY`` buffers itself (``set_state``, a grad-mode
        step): the next step or reset first copies them to the shards."""
        self._dirty = True

    def prepare(self, what: str) -> list[CompiledSequence]:
        """The shards' ``"step"`` or ``"reset"`` sequences, each captured now where it has no graph
        yet, one at a time on this thread (two concurrent CPU captures abort Warp)."""
        if self._dirty:
            with torch.no_grad():
                for part, full in self._write_only:
                    part.copy_(full)
            self._dirty = False
        sequences = self._step_seqs if what == "step" else self._reset_seqs
        for seq in sequences:
            seq.prepare()
        return sequences

    def _run(self, what: str) -> None:
        sequences = self.prepare(what)
        if self.env.plan.cpu_graph_workers:  # graphs (the plan's check), captured by prepare
            self._run_on_workers(sequences)
        else:
            self._run_on_pool(sequences)
        # The sticky flags, or-ed through numpy views: cheaper than three torch ops a step.
        for full, parts in self._flag_views:
            for part in parts:
                if part[0] > full[0]:
                    full[0] = part[0]

    def _run_on_workers(self, sequences: list[CompiledSequence]) -> None:
        """Shard 0's sequence here, the others' graphs replayed by the graph workers."""
        if self._workers is None:
            self._workers = [GraphWorker(f"swarp-shard-{i}") for i in range(1, len(sequences))]
        started = []
        try:
            for worker, seq in zip(self._workers, sequences[1:], strict=True):
                worker.submit(seq.graph)
                started.append(worker)
            sequences[0]()
        finally:
            failure = None
            for worker in started:  # every one, so none is left running when one failed
                try:
                    worker.wait()
                except RuntimeError as error:
                    failure = failure or error
            if failure is not None:
                raise failure

    def _run_on_pool(self, sequences: list[CompiledSequence]) -> None:
        """Shard 0's sequence here, the others' on a thread pool (no graph workers in the plan)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(sequences) - 1, thread_name_prefix="swarp-shard")
        futures = [self._pool.submit(seq) for seq in sequences[1:]]
        try:
            sequences[0]()
        finally:
            for future in futures:
                future.result()

    def invalidate(self) -> None:
        """Drop every shard's captured graphs and link the buffers again (``Environment.invalidate``:
        the graphs bake the buffers' addresses, so whatever reallocates one invalidates)."""
        for shard in self.envs:
            shard.invalidate()
        self._link()

    def close(self) -> None:
        """Close the shards and stop the workers' and the pool's threads."""
        for worker in self._workers or ():
            worker.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for shard in self.envs:
            shard.close()
