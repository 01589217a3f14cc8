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
        obs: wp.array3d(dtype=scalar)
        final_obs: wp.array3d(dtype=scalar)

    return Episode


@functools.cache
def funcs(scalar: type):
    """``end_step`` and the stand-alone ``advance_episodes`` kernel for one precision."""
    Episode = episode_struct(scalar)

    @wp.func
    def end_step(ep: Episode, env: int, terminated: bool):
        """Record ``terminated``, count the step and flag the time limit; with auto-reset, copy the
        last observation of a finished env to ``final_obs`` and start its next episode (``done``
        then doubles as the reset mask of the scenario's reset)."""
        count = ep.step_count[env] + 1
        truncated = ep.max_steps > 0 and count >= ep.max_steps
        done = terminated or truncated
        ep.terminated[env] = terminated
        ep.truncated[env] = truncated
        ep.done[env] = done
        if ep.auto_reset != 0 and done:
            for agent in range(ep.obs.shape[1]):
                for k in range(ep.obs.shape[2]):
                    ep.final_obs[env, agent, k] = ep.obs[env, agent, k]
            ep.episode[env] = ep.episode[env] + 1
            count = 0
        ep.step_count[env] = count

    @wp.kernel(enable_backward=False, module="unique")
    def advance_episodes(ep: Episode):
        """``end_step`` for every env, for scenarios that do not call it themselves."""
        env = wp.tid()
        end_step(ep, env, ep.terminated[env])

    return SimpleNamespace(end_step=end_step, advance_episodes=advance_episodes)


@wp.kernel(enable_backward=False)
def begin_episodes(
    env_mask: wp.array(dtype=wp.bool), step_count: wp.array(dtype=wp.int32), episode: wp.array(dtype=wp.int32)
):
    """Start a new episode in every env where ``env_mask`` is set (before its state is re-sampled)."""
    env = wp.tid()
    if env_mask[env]:
        episode[env] = episode[env] + 1
        step_count[env] = 0
