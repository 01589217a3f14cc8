"""The kernels of a faster step end on latency-bound batches: one fused kernel, and restarts from
starts prepared ahead.

Optional machinery that a scenario author never needs: a fused scenario works without it, and
only a scenario whose ``FusedScenario.step_end_hooks`` returns a ``StepEndHooks`` takes part
(navigation). The environment uses it where its plan says (``ExecutionPlan.fused_step_end``,
``ExecutionPlan.reset_ahead``: small CUDA batches); its side of it is the step-end strategy
``swarp.env.step_end.AheadStepEnd``.

On a small CUDA batch a step is a chain of latency-bound launches, each a few microseconds of
launch and tail however little it does. Two things shorten the chain's end:

* **The fused step end** (``step_rows_kernel``): the step's observation, the end of each env's
  step (the scenario's per-env and per-agent hooks) and, with starts prepared ahead, their swap in
  one kernel, blocks of whole envs, instead of three chained launches.
* **Starts prepared ahead** (``swarp.env.step_end.AheadStepEnd``): the reset RNG is counter-based, so an env's next
  episode is a function of (seed, env, episode), known as soon as its current one begins. The
  step after an episode begins draws the next start and observes it into buffers of the
  scenario's (and the lidar scans it), on a side stream beside that step's physics; the
  auto-reset then only swaps it in. Same bits as resetting directly.

``AheadMarks`` say which envs to prepare: an auto-reset's swap marks the envs it restarted (with
the episode to prepare), a reset marks its envs (``mark_started``), and ``set_state`` or new agent
parameters mark every env (``AheadStepEnd.start_again``). Invariant: at a swap, the buffers of
every finished env hold the start of the episode it is entering.
"""

import functools

import warp as wp

from swarp.runtime import health
from swarp.runtime.buffers import EnvBuffers
from swarp.runtime.launch import Launcher
from swarp.runtime.rows import OBS_BLOCK, OBSERVE_STEP, block_rows_store


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


def capabilities(hooks: StepEndHooks | None, brute_lists: bool) -> dict[str, bool]:
    """What a scenario's ``hooks`` (or ``None``) let the plan turn on, as ``Capabilities`` fields:
    ``fuses_end`` and ``prepares_ahead`` (only over brute-force lists: ``brute_lists``)."""
    return {
        "fuses_end": hooks is not None and hooks.fuses_end,
        "prepares_ahead": hooks is not None and hooks.prepares_ahead and brute_lists,
    }


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
