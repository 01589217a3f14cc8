"""How a fused step ends: one strategy object per environment (``make_step_end``).

The step's sequence (``swarp.env.launches.Launches.step``) runs the physics and the lidar, then
hands the rest to its ``StepEnd``, which must, in order:

1. ``begin_step(launcher)``: before the physics, launch anything that may run beside it (nothing
   by default);
2. ``observe(launcher)``: the scenario's step observation and the end of every env's step (step
   counters, time limits, ``done``: the scenario's ``ends_steps`` kernel, or ``Stages.advance``);
3. ``restart(launcher)`` (with ``auto_reset`` only): keep the finished envs' last rows in
   ``final_obs`` and start their next episodes (parameters, state, neighbor lists, rows, lidar);

and, outside the step, ``after_reset(launcher, env_mask)`` ends a reset's sequence and
``start_again()`` follows any change made outside the step (a restored snapshot, new parameters).

``StepEnd`` is the generic split end every fused scenario gets (where ``plan.fused_step_end``, the
scenario's step observation is itself the one kernel that ends every env's step: its business,
through its ``StepEndHooks``). ``AheadStepEnd`` is an optimisation for small, latency-bound CUDA
batches (``plan.reset_ahead``): each env's next start is drawn and observed the step before it is
needed, beside the physics, and the auto-reset swaps it in (same bits; the kernels and the
scenario's part are ``swarp.runtime.step_end``). Nothing else in the environment refers to
prepared starts: removing them is removing ``AheadStepEnd``, the plan field and those kernels.
A new optimisation of the step's end is a subclass here, chosen in ``make_step_end``.
"""

from __future__ import annotations

import warp as wp

from swarp.env.core import EnvCore
from swarp.env.stages import Stages
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.rows import OBSERVE_ONLY, OBSERVE_STEP, row_vectors
from swarp.runtime.sequence import fork, join
from swarp.runtime.step_end import AheadMarks, StepEndHooks, mark_started, swap_rows_kernel


class StepEnd:
    """The generic end of a fused step: observe, then restart the finished envs directly.

    Args:
        core: The environment's core.
        stages: Its single launches.
    """

    #: Whether the auto-reset swaps in starts prepared ahead (``AheadStepEnd``).
    prepares_ahead = False

    def __init__(self, core: EnvCore, stages: Stages):
        self.core = core
        self.stages = stages

    def begin_step(self, launcher: Launcher) -> None:
        """Before the physics: nothing to launch beside it."""

    def observe(self, launcher: Launcher) -> None:
        """The scenario's step observation and, unless that kernel ends the step itself, the
        episode bookkeeping (``Stages.advance``)."""
        sc = self.core.scenario
        sc.launch_observe(launcher, mode=OBSERVE_STEP)
        if not sc.ends_steps:
            self.stages.advance(launcher)

    def restart(self, launcher: Launcher) -> None:
        """The auto-reset: finished envs keep their last rows in ``final_obs`` (saved here, or by
        the scenario's masked observation and the lidar's masked scan, each just before it
        overwrites them), then start their next episodes."""
        core = self.core
        b = core.buffers
        if not core.scenario.saves_final_obs:
            self.stages.save_final_obs(launcher)
        if core.plan.list_resets:
            b.done_list.launch_compact(launcher, b.done)
        try:
            self.launch_new_episodes(launcher)
        finally:
            b.done_list.mask = None  # the next step rewrites the mask

    def launch_new_episodes(self, launcher: Launcher) -> None:
        """New episodes for the envs in ``done``: their parameters, state, neighbor lists,
        observation rows and lidar columns."""
        core, stages = self.core, self.stages
        sc, done = core.scenario, core.buffers.done
        stages.randomize(launcher, done)
        sc.launch_reset(launcher, done)
        # The new episodes' scan needs only their poses, and keeps the lidar columns of their final
        # observation itself where the scenario's masked observation saves the rest: so with a
        # side stream (CUDA, live or under graph capture; recorded launches replay on one stream)
        # it runs beside the neighbor refresh and the observation, three latency-bound launches.
        keep = core.buffers.final_obs if sc.saves_final_obs else None
        side = core.lidar_stream if launcher is EAGER else None
        with fork(side, core.device):
            stages.lidar(launcher, done, keep)
        stages.refresh_neighbors(launcher, done)
        sc.launch_observe(launcher, env_mask=done, mode=OBSERVE_ONLY)
        join(side, core.device)

    def after_reset(self, launcher: Launcher, env_mask: wp.array) -> None:
        """The end of a reset of the envs of ``env_mask``: nothing more."""

    def start_again(self) -> None:
        """After a change outside the step (a restored snapshot, new agent parameters): nothing to redo."""


class AheadStepEnd(StepEnd):
    """The step end with starts prepared ahead (``plan.reset_ahead``; see the module docstring).

    The reset RNG is counter-based, so an env's next episode is a function of (seed, env, episode),
    known as soon as its current one begins. The step after an episode begins draws the next start
    and observes it into the hooks' buffers (and the lidar scans it), on a side stream beside the
    step's physics; the auto-reset then only swaps it in, in the kernel that ends the step where
    ``plan.fused_step_end``. ``AheadMarks`` say which envs to prepare: a swap marks the envs it
    restarted, a reset its envs (``after_reset``), ``start_again`` every env. Invariant: at a
    swap, the buffers of every finished env hold the start of the episode it is entering.

    Args:
        core, stages: As ``StepEnd``.
        hooks: The scenario's ``StepEndHooks`` (``prepares_ahead``); bound here.
    """

    prepares_ahead = True

    def __init__(self, core: EnvCore, stages: Stages, hooks: StepEndHooks):
        super().__init__(core, stages)
        b, dev = core.buffers, core.device
        self.hooks = hooks
        self.mask = wp.zeros(core.n_envs, dtype=wp.bool, device=dev)
        self.episode_ahead = wp.zeros(core.n_envs, dtype=wp.int32, device=dev)
        marks = self.marks = AheadMarks()
        marks.mask, marks.episode_ahead, marks.episode = self.mask, self.episode_ahead, b.episode
        self.streams = b.streams_over(self.episode_ahead)
        self.side = wp.Stream(dev) if str(dev).startswith("cuda") else None
        self.forked = None  # the side stream the preparation of this step runs on, until joined
        hooks.bind(marks)
        # Re-drawn radii: the lidar scans after the swap instead (ahead, it would see the old ones).
        self.lidar_rows = None  # the prepared starts' lidar columns [E, A, n_rays]
        if core.lidar is not None and core.randomization is None:
            self.lidar_rows = wp.zeros((core.n_envs, core.n_agents, core.lidar.n_rays), dtype=b.scalar, device=dev)

    def begin_step(self, launcher: Launcher) -> None:
        """Prepare the next starts of the envs marked by the last reset or swap: on the side stream
        where there is one (CUDA, live or under capture), joined before the swap."""
        side = self.side if launcher is EAGER else None
        with fork(side, self.core.device):
            self.hooks.launch_prepare(launcher, self.mask, self.streams)
            if self.lidar_rows is not None:
                poses = self.hooks.prepared_poses()
                self.core.lidar.launch(launcher, self.lidar_rows, 0, self.mask, poses=poses)
        self.forked = side

    def join(self) -> None:
        """Make the current stream wait for the preparation ``begin_step`` forked."""
        side, self.forked = self.forked, None
        join(side, self.core.device)

    def observe(self, launcher: Launcher) -> None:
        """As ``StepEnd.observe``; where the kernel that ends the step swaps the prepared starts in
        (``plan.fused_step_end``), after joining their preparation."""
        if self.core.plan.fused_step_end:
            self.join()
        super().observe(launcher)

    def launch_new_episodes(self, launcher: Launcher) -> None:
        """The auto-reset from the prepared starts (after joining their preparation): re-drawn
        parameters, the scenario's swap unless the step's fused end did it, and, beside it on the
        side stream, the lidar columns' (or, where the lidar could not scan ahead, its scan after
        the swap)."""
        core = self.core
        b = core.buffers
        swapped_in_step = core.plan.fused_step_end
        self.stages.randomize(launcher, b.done)
        side = None if swapped_in_step else self.forked  # a lone lidar swap has nothing to run beside
        self.join()
        if self.lidar_rows is None:
            if not swapped_in_step:
                self.hooks.launch_swap(launcher, b.done, self.marks)
            if core.lidar is not None:
                keep = b.final_obs if core.scenario.saves_final_obs else None
                core.lidar.launch(launcher, b.obs, b.scenario_obs_dim, b.done, keep)
            return
        rays, first = core.lidar.n_rays, b.scenario_obs_dim
        columns = (
            row_vectors(self.lidar_rows, rays),
            row_vectors(b.obs, rays, first),
            row_vectors(b.final_obs, rays, first),
        )
        with fork(side, b.device):
            kernel = swap_rows_kernel(b.scalar, rays)
            launcher.launch(kernel, dim=(b.n_envs, b.n_agents), inputs=[b.done, *columns], device=b.device)
        if not swapped_in_step:
            self.hooks.launch_swap(launcher, b.done, self.marks)
        join(side, b.device)

    def after_reset(self, launcher: Launcher, env_mask: wp.array) -> None:
        """After a reset of the envs of ``env_mask``: prepare their next starts at the next step."""
        b = self.core.buffers
        launcher.launch(mark_started, dim=b.n_envs, inputs=[env_mask, self.marks], device=b.device)

    def start_again(self) -> None:
        """Prepare every env's next start again at the next step (eager; on torch's current stream)."""
        wp.to_torch(self.mask).fill_(True)
        wp.to_torch(self.episode_ahead).copy_(wp.to_torch(self.core.buffers.episode) + 1)


def make_step_end(core: EnvCore, stages: Stages) -> StepEnd | None:
    """The step end of a fused environment (``AheadStepEnd`` where ``plan.reset_ahead``), or
    ``None`` on the torch reference (its step ends in ``swarp.env.reference``)."""
    if not core.fused:
        return None
    if core.plan.reset_ahead:
        return AheadStepEnd(core, stages, core.step_end_hooks)
    return StepEnd(core, stages)
