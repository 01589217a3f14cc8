"""How a step ends on latency-bound batches: one fused kernel, and restarts from starts prepared ahead.

Optional machinery that a scenario author never needs: a fused scenario works without it, and
only a scenario whose ``FusedScenario.step_end_hooks`` returns a ``StepEndHooks`` takes part
(navigation). The environment uses it where its plan says (``ExecutionPlan.fused_step_end``,
``ExecutionPlan.reset_ahead``: small CUDA batches).

On a small CUDA batch a step is a chain of latency-bound launches, each a few microseconds of
launch and tail however little it does. Two things shorten the chain's end:

* **The fused step end** (``step_rows_kernel``): the step's observation, the end of each env's
  step (the scenario's per-env and per-agent hooks) and, with starts prepared ahead, their swap in
  one kernel, blocks of whole envs, instead of three chained launches.
* **Starts prepared ahead** (``PreparedStarts``): the reset RNG is counter-based, so an env's next
  episode is a function of (seed, env, episode), known as soon as its current one begins. The
  step after an episode begins draws the next start and observes it into buffers of the
  scenario's (and the lidar scans it), on a side stream beside that step's physics; the
  auto-reset then only swaps it in. Same bits as resetting directly.

``AheadMarks`` say which envs to prepare: an auto-reset's swap marks the envs it restarted (with
the episode to prepare), a reset marks its envs (``mark_started``), and ``set_state`` or new agent
parameters mark every env. Invariant: at a swap, the buffers of every finished env hold the start
of the episode it is entering.
"""

import functools

import warp as wp

from swarp.runtime import health
from swarp.runtime.buffers import EnvBuffers
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.rows import OBS_BLOCK, OBSERVE_STEP, block_rows_store, row_vectors
from swarp.runtime.sequence import fork, join


class StepEndHooks:
    """A fused scenario's part in the fused step end and in starts prepared ahead.

    ``FusedScenario.step_end_hooks`` returns a subclass bound to the scenario, or ``None``.

    Attributes:
        fuses_end: The scenario's step observation can end the step in one kernel
            (``step_rows_kernel`` around its hooks) where ``plan.fused_step_end``; with
            ``plan.reset_ahead`` too, that kernel also swaps the prepared starts in and sets every
            env's ahead mark (``mark_ahead``).
        prepares_ahead: This configuration implements the methods below (the environment uses
            them only over brute-force neighbor lists: prepared starts are not binned in a grid).
    """

    fuses_end: bool = False
    prepares_ahead: bool = False

    def bind(self, marks: "AheadMarks") -> None:
        """Allocate the prepared starts' buffers (once, after the scenario's ``bind``, where
        ``plan.reset_ahead``); ``marks`` are the environment's."""
        raise NotImplementedError

    def launch_prepare(self, launcher: Launcher, env_mask: wp.array, streams) -> None:
        """Prepare the next start of every env of ``env_mask`` [E] bool: what the scenario's reset
        and masked ``OBSERVE_ONLY`` observation would make, keyed by ``streams`` (a
        ``swarp.core.rng.ResetStreams`` whose episodes are the ones to prepare), into the hooks'
        own buffers. It must not write anything the step reads or writes."""
        raise NotImplementedError

    def prepared_poses(self) -> tuple:
        """``(pos, theta)``: the [E, A] arrays of the prepared starts' positions [m] and headings
        [rad] (a lidar scans them ahead too)."""
        raise NotImplementedError

    def launch_swap(self, launcher: Launcher, env_mask: wp.array, marks: "AheadMarks") -> None:
        """Where the step's end is not fused: restart the envs of ``env_mask`` (the step's ``done``)
        from their prepared starts (save each row it replaces to ``buffers.final_obs_saved``; write
        the state, rows and whatever else the reset and observation would) and call
        ``mark_ahead(marks, env, done, episode)`` for every env."""
        raise NotImplementedError


# --- the fused step end ----------------------------------------------------------------------------


def envs_per_block(n_agents: int) -> int:
    """Envs in one block of ``step_rows_kernel`` (0: an env has more agents than ``OBS_BLOCK``)."""
    return OBS_BLOCK // n_agents


@functools.cache
def step_rows_kernel(
    Args,
    observe_agent,
    End,
    end_env,
    end_agent,
    start_agent,
    scalar: type,
    obs_dim: int,
    n_agents: int,
    n_values: int,
    tiled: bool = True,
):
    """``step_rows(args, end, obs_rows)``: the step's ``observe_rows`` (``OBSERVE_STEP``) that also
    ends the step of its envs, for blocks of whole envs (``envs_per_block(n_agents)`` envs,
    ``launch_step_rows``).

    Every agent of the block is observed. Then (a block barrier makes what they wrote visible to
    the block) one lane per env calls ``end_env(end, env) -> vector(n_values, scalar)``: the env's
    per-env terms (termination, the episode counters: ``episode.end_step``) and the values its
    agents need, the first nonzero where the env starts a prepared episode now. Then (another
    barrier; the values pass through shared memory) every agent calls ``end_agent(end, env, agent,
    values)`` and, with ``start_agent``, every agent of a restarting env calls ``start_agent(end,
    env, agent, row) -> row``, which keeps the row just observed as its final one and returns the
    prepared start's first row. With ``tiled`` the block's rows leave through shared memory as in
    ``observe_rows`` (coalesced: ``rows.block_rows_store``); without, each thread stores its own
    row (``plan.tiled_rows``: faster on the smallest batches).

    Per-agent work stays on the agents' lanes, so the kernel keeps the observation's registers:
    whatever a rare path holds counts against every block's occupancy."""
    row_type = wp.types.vector(obs_dim, scalar)
    values_type = wp.types.vector(n_values, scalar)
    finite_row = health.funcs(scalar, obs_dim).finite_row
    per_block = envs_per_block(n_agents)
    block_rows = per_block * n_agents
    if per_block < 1:
        raise ValueError(f"step_rows_kernel needs at most {OBS_BLOCK} agents per env, got {n_agents}")
    store_rows = block_rows_store(scalar, obs_dim)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def step_rows(args: Args, end: End, obs_rows: wp.array2d(dtype=scalar), non_finite_out: wp.array(dtype=wp.int32)):
        block, lane = wp.tid()
        n_envs = obs_rows.shape[0] / wp.static(n_agents)
        local = lane / wp.static(n_agents)
        env = block * wp.static(per_block) + local
        agent = lane - local * wp.static(n_agents)
        row = row_type()
        if env < n_envs:
            row = observe_agent(args, wp.static(OBSERVE_STEP), env, agent)
            # The observed row (a prepared start's was checked when it was prepared).
            health.flag_env(non_finite_out, env, finite_row(row))
        # One value vector per env of the block, in shared memory. Each scatter is a block barrier
        # (Warp's tile scatters synchronize the block when they return), which also makes the
        # block's global writes visible to the whole block: the first orders the observation's
        # per-agent outputs before the per-env ends, the second the ends before the agents read
        # their env's values.
        values = wp.tile_zeros(shape=wp.static(per_block), dtype=values_type, storage="shared")
        wp.tile_scatter_masked(values, 0, values_type(), False)
        end_lane = block * wp.static(per_block) + lane
        mine = values_type()
        if lane < wp.static(per_block) and end_lane < n_envs:  # noqa: SIM102 (Warp's ``and`` evaluates both)
            mine = end_env(end, end_lane)
        wp.tile_scatter_masked(values, lane, mine, lane < wp.static(per_block))
        if env < n_envs:
            env_values = wp.tile_extract(values, local)
            end_agent(end, env, agent, env_values)
            if wp.static(start_agent is not None):  # noqa: SIM102 (compiled in only with ``start_agent``)
                if env_values[0] != scalar(0.0):
                    row = start_agent(end, env, agent, row)
        if wp.static(tiled):
            store_rows(obs_rows, row, block * wp.static(block_rows), lane, wp.static(block_rows))
        else:
            if env < n_envs:
                out = env * wp.static(n_agents) + agent
                for c in range(wp.static(obs_dim)):
                    obs_rows[out, c] = row[c]

    return step_rows


def launch_step_rows(buffers: EnvBuffers, launcher: Launcher, kernel, args, end) -> None:
    """Launch ``kernel`` (a ``step_rows_kernel``) over every env, writing the scenario's columns of
    ``buffers.obs``."""
    per_block = envs_per_block(buffers.n_agents)
    block_rows = per_block * buffers.n_agents
    launcher.launch(
        kernel,
        dim=(-(-buffers.n_envs // per_block), block_rows),
        inputs=[args, end],
        outputs=[buffers.obs_rows(), buffers.non_finite],
        device=buffers.device,
        block_dim=block_rows,
    )


# --- starts prepared ahead ---------------------------------------------------------------------------


@wp.struct
class AheadMarks:
    """Which envs' next episode to prepare ahead.

    ``mask[env]`` is set for the step after env ``env`` starts an episode (a reset, or an
    auto-reset's swap); the next step prepares episode ``episode_ahead[env]`` (the current one plus
    one) for it, off the step's critical path.
    """

    mask: wp.array(dtype=wp.bool)  # [E]
    episode_ahead: wp.array(dtype=wp.int32)  # [E] the episode to prepare
    episode: wp.array(dtype=wp.int32)  # [E] the environment's episode counters


@wp.func
def mark_ahead(marks: AheadMarks, env: int, started: bool, episode: int):
    """After an auto-reset's swap (every env; ``started``: env ``env`` just began episode
    ``episode``): ask the next step to prepare the episode after it, or nothing."""
    marks.mask[env] = started
    if started:
        marks.episode_ahead[env] = episode + 1


@wp.kernel(enable_backward=False, grid_stride=False)
def mark_started(env_mask: wp.array(dtype=wp.bool), marks: AheadMarks):
    """After a reset of the envs in ``env_mask``: ask the next step to prepare their next episode
    (marks of other envs stay as they are)."""
    env = wp.tid()
    if env_mask[env]:
        marks.mask[env] = True
        marks.episode_ahead[env] = marks.episode[env] + 1


@functools.cache
def swap_rows_kernel(scalar: type, width: int):
    """``swap_rows(done [E] bool, fresh, obs, final_obs)`` over ``dim=(E, A)``, all three [E, A]
    arrays of ``vector(width, scalar)`` (``rows.row_vectors`` views of columns): in every env of
    ``done`` each agent's row of ``obs`` goes to ``final_obs`` and its row of ``fresh`` takes its
    place (an auto-reset of prepared columns, e.g. a lidar's)."""
    vec = wp.types.vector(width, scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def swap_rows(
        done: wp.array(dtype=wp.bool),
        fresh: wp.array2d(dtype=vec),
        obs: wp.array2d(dtype=vec),
        final_obs: wp.array2d(dtype=vec),
    ):
        env, agent = wp.tid()
        if not done[env]:
            return
        old = obs[env, agent]
        new = fresh[env, agent]
        final_obs[env, agent] = old
        obs[env, agent] = new

    return swap_rows


class PreparedStarts:
    """The environment's side of starts prepared ahead (``plan.reset_ahead``).

    Args:
        buffers: The environment's ``EnvBuffers``.
        hooks: The scenario's ``StepEndHooks`` (``prepares_ahead``); bound here.
        lidar: The environment's lidar (``swarp.sensors.lidar.Lidar``) or ``None``.
        scan_ahead: Whether the lidar scans the prepared starts too (not where the agents' radii
            are re-drawn at the reset: the scan would see the old ones).
        saves_final_obs: Whether the scenario's masked observation saves its own final rows (then
            a lidar scanning after the swap keeps its columns' readings itself).

    Attributes:
        marks: The ``AheadMarks``.
    """

    def __init__(self, buffers: EnvBuffers, hooks: StepEndHooks, lidar, scan_ahead: bool, saves_final_obs: bool):
        b = buffers
        E, dev = b.n_envs, b.device
        self.buffers, self.hooks, self.lidar = b, hooks, lidar
        self.saves_final_obs = saves_final_obs
        self._mask = wp.zeros(E, dtype=wp.bool, device=dev)
        self._episode_ahead = wp.zeros(E, dtype=wp.int32, device=dev)
        marks = AheadMarks()
        marks.mask, marks.episode_ahead, marks.episode = self._mask, self._episode_ahead, b.episode
        self.marks = marks
        self.streams = b.streams_over(self._episode_ahead)
        self._side = wp.Stream(dev) if str(dev).startswith("cuda") else None
        self._forked = None
        hooks.bind(marks)
        self._lidar_rows = None
        if lidar is not None and scan_ahead:
            self._lidar_rows = wp.zeros((E, b.n_agents, lidar.n_rays), dtype=b.scalar, device=dev)

    def launch_prepare(self, launcher: Launcher) -> None:
        """Prepare the next starts of the envs marked by the last reset or swap: on the side stream
        where there is one (CUDA, live or under capture), joined by ``join`` or ``launch_swap``."""
        side = self._side if launcher is EAGER else None
        with fork(side, self.buffers.device):
            self.hooks.launch_prepare(launcher, self._mask, self.streams)
            if self._lidar_rows is not None:
                poses = self.hooks.prepared_poses()
                self.lidar.launch(launcher, self._lidar_rows, 0, self._mask, poses=poses)
        self._forked = side

    def join(self) -> None:
        """Make the current stream wait for the preparation ``launch_prepare`` forked."""
        side, self._forked = self._forked, None
        join(side, self.buffers.device)

    def launch_swap(self, launcher: Launcher, swapped_in_step: bool) -> None:
        """The auto-reset of the step's ``done`` envs from their prepared starts (after joining
        their preparation): the scenario's swap, unless the step's fused end did it
        (``swapped_in_step``), and, beside it on the side stream, the lidar columns' (or, where the
        lidar could not scan ahead, its scan after the swap)."""
        b = self.buffers
        side = None if swapped_in_step else self._forked  # a lone lidar swap has nothing to run beside
        self.join()
        if self._lidar_rows is None:
            if not swapped_in_step:
                self.hooks.launch_swap(launcher, b.done, self.marks)
            if self.lidar is not None:
                keep = b.final_obs if self.saves_final_obs else None
                self.lidar.launch(launcher, b.obs, b.scenario_obs_dim, b.done, keep)
            return
        rays, first = self.lidar.n_rays, b.scenario_obs_dim
        columns = (
            row_vectors(self._lidar_rows, rays),
            row_vectors(b.obs, rays, first),
            row_vectors(b.final_obs, rays, first),
        )
        with fork(side, b.device):
            launcher.launch(
                swap_rows_kernel(b.scalar, rays), dim=(b.n_envs, b.n_agents), inputs=[b.done, *columns], device=b.device
            )
        if not swapped_in_step:
            self.hooks.launch_swap(launcher, b.done, self.marks)
        join(side, b.device)

    def launch_mark_started(self, launcher: Launcher, env_mask: wp.array) -> None:
        """After a reset of the envs of ``env_mask``: prepare their next starts at the next step."""
        launcher.launch(
            mark_started, dim=self.buffers.n_envs, inputs=[env_mask, self.marks], device=self.buffers.device
        )

    def mark_all(self) -> None:
        """Prepare every env's next start again at the next step (after anything it depends on
        changed outside the step: a restored snapshot, new agent parameters). Eager; on torch's
        current stream."""
        wp.to_torch(self._mask).fill_(True)
        wp.to_torch(self._episode_ahead).copy_(wp.to_torch(self.buffers.episode) + 1)
