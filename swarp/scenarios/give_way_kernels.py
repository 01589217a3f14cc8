"""Give way, fused: the reset kernel of ``give_way.py``.

Observations, rewards and termination are navigation's kernels (``navigation_kernels.py``);
``give_way_reset`` (one thread per env and agent, masked) draws each agent's spawn in the lane
stretch at its end of the corridor, its heading and its fixed goal, exactly the draws of the
torch reference (``prev_dist`` is set by the observe pass that follows every reset).
"""

import functools

import warp as wp

from swarp.core.launch import Launcher
from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key
from swarp.scenarios import fleet, spawn

# Agent a draws 2 a and 2 a + 1 from here for its spawn (its heading: ``fleet.py``'s draw).
DRAW_SPAWN = wp.constant(fleet.FIRST_FREE_DRAW)


@functools.cache
def reset_kernel(scalar: type):
    """``give_way_reset`` for one precision."""
    vec2 = vec2_type(scalar)
    sp = spawn.funcs(scalar)
    fl = fleet.funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: spawn points come out bit for bit as on the CPU and in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False})
    def give_way_reset(
        env_mask: wp.array(dtype=wp.bool),
        streams: ResetStreams,
        spawn_inner: scalar,
        jitter_x: scalar,
        jitter_y: scalar,
        goal_x: scalar,
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        goals_out: wp.array2d(dtype=vec2),
    ):
        env, agent = wp.tid()
        if not env_mask[env]:
            return
        key = episode_key(streams, env)
        side = scalar(2 * agent - 1)  # agent 0 starts on the left, agent 1 on the right
        draw = DRAW_SPAWN + 2 * agent
        x = side * (spawn_inner + sp.uniform(key, draw) * jitter_x)
        y = (sp.uniform(key, draw + 1) * two - one) * jitter_y
        fl.place_agent(key, env, agent, vec2(x, y), pos_out, theta_out, vel_out, speed_out, ang_vel_out)
        goals_out[env, agent] = vec2(-side * goal_x, zero)

    return give_way_reset


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch the masked ``give_way_reset`` for the scenario ``sc``."""
    env, state = sc.env, sc.world.state
    s = env.stepper.scalar
    launcher.launch(
        reset_kernel(s),
        dim=(sc.n_envs, sc.n_agents),
        inputs=[
            env_mask,
            env.reset_streams,
            s(sc.spawn_inner),
            s(sc.spawn_jitter[0]),
            s(sc.spawn_jitter[1]),
            s(sc.goal_x),
        ],
        outputs=[state.pos, state.theta, state.vel, state.speed, state.ang_vel, sc._goals],
        device=env.device,
    )
