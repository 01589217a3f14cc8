"""Episode bookkeeping kernels shared by every scenario: step counters, time limits, resets."""

import functools

import warp as wp


@wp.kernel(enable_backward=False)
def advance_episodes(
    max_steps: int,
    auto_reset: int,
    terminated: wp.array(dtype=wp.bool),
    step_count: wp.array(dtype=wp.int32),
    episode: wp.array(dtype=wp.int32),
    truncated_out: wp.array(dtype=wp.bool),
    done_out: wp.array(dtype=wp.bool),
):
    """After a step: count it, flag the time limit, and with ``auto_reset`` start the next episode
    of every finished env (``done_out`` then doubles as the reset mask)."""
    env = wp.tid()
    count = step_count[env] + 1
    truncated = max_steps > 0 and count >= max_steps
    done = terminated[env] or truncated
    truncated_out[env] = truncated
    done_out[env] = done
    if auto_reset != 0 and done:
        episode[env] = episode[env] + 1
        count = 0
    step_count[env] = count


@wp.kernel(enable_backward=False)
def begin_episodes(
    env_mask: wp.array(dtype=wp.bool), step_count: wp.array(dtype=wp.int32), episode: wp.array(dtype=wp.int32)
):
    """Start a new episode in every env where ``env_mask`` is set (before its state is re-sampled)."""
    env = wp.tid()
    if env_mask[env]:
        episode[env] = episode[env] + 1
        step_count[env] = 0


@functools.cache
def save_final_obs(scalar: type):
    """Kernel copying the observation rows of finished envs into ``final_obs`` (one thread per env)."""

    @wp.kernel(enable_backward=False, module="unique")
    def save_final_obs_kernel(
        done: wp.array(dtype=wp.bool), obs: wp.array3d(dtype=scalar), final_obs_out: wp.array3d(dtype=scalar)
    ):
        # Most envs are not done and leave at once.
        env = wp.tid()
        if done[env]:
            for agent in range(obs.shape[1]):
                for k in range(obs.shape[2]):
                    final_obs_out[env, agent, k] = obs[env, agent, k]

    return save_final_obs_kernel
