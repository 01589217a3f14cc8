"""Episode bookkeeping kernels shared by every scenario: step counters, time limits, resets."""

import functools
from types import SimpleNamespace

import warp as wp


@functools.cache
def episode_struct(scalar: type):
    """The Warp struct of the environment's episode bookkeeping arrays, for one precision.

    Scenario kernels that finish a step per env take it whole and call ``funcs(scalar).end_step``
    at the end, which folds the bookkeeping into their launch.
    """

    @wp.struct
    class Episode:
        max_steps: int  # 0: no time limit
        auto_reset: int
        step_count: wp.array(dtype=wp.int32)
        episode: wp.array(dtype=wp.int32)
        terminated: wp.array(dtype=wp.bool)
        truncated: wp.array(dtype=wp.bool)
        done: wp.array(dtype=wp.bool)
        non_finite: wp.array(dtype=wp.int32)  # health flags (swarp.runtime.health)

    return Episode


@functools.cache
def funcs(scalar: type):
    """``end_step`` and the stand-alone ``advance_episodes`` kernel for one precision."""
    Episode = episode_struct(scalar)

    @wp.func
    def end_step(ep: Episode, env: int, terminated: bool) -> bool:
        """Record ``terminated``, count the step and flag the time limit; with auto-reset, start the
        next episode of a finished env (``done`` then doubles as the reset mask of the scenario's
        reset, and ``save_final_obs`` keeps its last observation). Returns ``done``."""
        # Both loads before the stores (the compiler cannot tell the arrays apart).
        count = ep.step_count[env] + 1
        current = ep.episode[env]
        truncated = ep.max_steps > 0 and count >= ep.max_steps
        done = terminated or truncated
        ep.terminated[env] = terminated
        ep.truncated[env] = truncated
        ep.done[env] = done
        if ep.auto_reset != 0 and done:
            ep.episode[env] = current + 1
            count = 0
        ep.step_count[env] = count
        return done

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def advance_episodes(ep: Episode):
        """``end_step`` for every env, for scenarios that do not call it themselves."""
        env = wp.tid()
        end_step(ep, env, ep.terminated[env])

    return SimpleNamespace(end_step=end_step, advance_episodes=advance_episodes)


#: Columns ``copy_columns`` copies per chunk: a chunk's loads are unrolled, so all are in flight at once.
FINAL_OBS_CHUNK = 32


@functools.cache
def copy_columns_func(scalar: type):
    """``copy_columns(src, dst, env, agent, start, stop)``: copy columns ``[start, stop)`` of one row
    of ``src`` [E, A, W] to the same place in ``dst``, ``FINAL_OBS_CHUNK`` columns at a time with
    every load of a chunk issued before its stores (the compiler cannot rule out that the arrays
    alias, so interleaved copies would chain one memory round trip per column)."""
    chunk = wp.types.vector(FINAL_OBS_CHUNK, scalar)

    @wp.func
    def copy_columns(
        src: wp.array3d(dtype=scalar), dst: wp.array3d(dtype=scalar), env: int, agent: int, start: int, stop: int
    ):
        for first in range(start, stop, wp.static(FINAL_OBS_CHUNK)):
            values = chunk()
            for i in range(wp.static(FINAL_OBS_CHUNK)):
                if first + i < stop:
                    values[i] = src[env, agent, first + i]
            for i in range(wp.static(FINAL_OBS_CHUNK)):
                if first + i < stop:
                    dst[env, agent, first + i] = values[i]

    return copy_columns


@functools.cache
def save_row_func(scalar: type):
    """``save_row(obs, final_obs, env, agent)``: copy the first ``final_obs.shape[2]`` columns of
    one observation row of ``obs`` [E, A, W] to ``final_obs`` (the whole row, or only the
    scenario's columns where ``final_obs`` is a view of them: the lidar keeps its own columns,
    ``swarp.sensors.lidar``)."""
    copy_columns = copy_columns_func(scalar)

    @wp.func
    def save_row(obs: wp.array3d(dtype=scalar), final_obs: wp.array3d(dtype=scalar), env: int, agent: int):
        copy_columns(obs, final_obs, env, agent, 0, final_obs.shape[2])

    return save_row


@functools.cache
def save_final_obs_kernel(scalar: type):
    """``save_final_obs(done [E] bool, obs [E, A, W], agents_per_thread, final_obs [E, A, W])``:
    copy the observation rows of the envs in ``done`` to ``final_obs``, one row per thread on CUDA
    (launch ``dim=(E, threads)`` from ``agents_per_thread``).

    A single thread copying a whole env serially (as ``end_step`` once did) was exposed latency on
    every step (docs/benchmarks.md, "Other measured choices in the code"). Scenarios whose masked
    observation kernel saves rows itself (``FusedScenario.saves_final_obs``) need no launch of this
    one."""

    save_row = save_row_func(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def save_final_obs(
        done: wp.array(dtype=wp.bool),
        obs: wp.array3d(dtype=scalar),
        agents_per_thread: int,
        final_obs: wp.array3d(dtype=scalar),
    ):
        env, slot = wp.tid()
        if not done[env]:
            return
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, obs.shape[1])):
            save_row(obs, final_obs, env, agent)

    return save_final_obs


@wp.kernel(enable_backward=False, grid_stride=False)
def begin_episodes(
    env_mask: wp.array(dtype=wp.bool), step_count: wp.array(dtype=wp.int32), episode: wp.array(dtype=wp.int32)
):
    """Start a new episode in every env where ``env_mask`` is set (before its state is re-sampled)."""
    env = wp.tid()
    if env_mask[env]:
        episode[env] = episode[env] + 1
        step_count[env] = 0
