"""Episode bookkeeping kernels shared by every scenario: step counters, time limits, resets."""

import functools

import warp as wp


@functools.cache
def advance_episodes(scalar: type):
    """The end-of-step bookkeeping kernel for one precision (one thread per env)."""

    @wp.kernel(enable_backward=False, module="unique")
    def advance_episodes_kernel(
        max_steps: int,
        auto_reset: int,
        terminated: wp.array(dtype=wp.bool),
        obs: wp.array3d(dtype=scalar),
        step_count: wp.array(dtype=wp.int32),
        episode: wp.array(dtype=wp.int32),
        truncated_out: wp.array(dtype=wp.bool),
        done_out: wp.array(dtype=wp.bool),
        final_obs_out: wp.array3d(dtype=scalar),
    ):
        """Count the step and flag the time limit; with ``auto_reset``, copy the last observation of
        every finished env to ``final_obs_out`` and start its next episode (``done_out`` then doubles
        as the reset mask of the scenario's reset)."""
        env = wp.tid()
        count = step_count[env] + 1
        truncated = max_steps > 0 and count >= max_steps
        done = terminated[env] or truncated
        truncated_out[env] = truncated
        done_out[env] = done
        if auto_reset != 0 and done:
            for agent in range(obs.shape[1]):
                for k in range(obs.shape[2]):
                    final_obs_out[env, agent, k] = obs[env, agent, k]
            episode[env] = episode[env] + 1
            count = 0
        step_count[env] = count

    return advance_episodes_kernel


@wp.kernel(enable_backward=False)
def begin_episodes(
    env_mask: wp.array(dtype=wp.bool), step_count: wp.array(dtype=wp.int32), episode: wp.array(dtype=wp.int32)
):
    """Start a new episode in every env where ``env_mask`` is set (before its state is re-sampled)."""
    env = wp.tid()
    if env_mask[env]:
        episode[env] = episode[env] + 1
        step_count[env] = 0
