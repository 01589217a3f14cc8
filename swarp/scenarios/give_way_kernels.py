"""Give way, fused: the reset kernel of ``give_way.py``.

Observations, rewards and termination are navigation's kernels (``navigation_kernels.py``);
``give_way_reset`` (one thread per env and agent, masked) draws each agent's spawn in the lane
stretch at its end of the corridor (per-env draws ``common.env_draw``), its heading (placed by
``common.spawn_agent``) and its fixed goal, exactly the draws of the torch reference
(``prev_dist`` is set by the observe pass that follows every reset).
"""

import functools

import warp as wp

from swarp.core.precision import vec2_type
from swarp.runtime.launch import Launcher
from swarp.scenarios.framework import arena as common


@functools.cache
def reset_kernel(scalar: type):
    """``give_way_reset`` for one precision."""
    vec2 = vec2_type(scalar)
    f = common.reset_funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: spawn points come out bit for bit as on the CPU and in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False})
    def give_way_reset(
        spawn: f.Spawn,
        spawn_inner: scalar,
        jitter_x: scalar,
        jitter_y: scalar,
        goal_x: scalar,
        goals_out: wp.array2d(dtype=vec2),
    ):
        env, agent = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        side = scalar(2 * agent - 1)  # agent 0 starts on the left, agent 1 on the right
        x = side * (spawn_inner + f.env_draw(key, 2 * agent) * jitter_x)
        y = (f.env_draw(key, 2 * agent + 1) * two - one) * jitter_y
        f.spawn_agent(spawn, key, env, agent, vec2(x, y))
        goals_out[env, agent] = vec2(-side * goal_x, zero)

    return give_way_reset


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch the masked ``give_way_reset`` for the scenario ``sc`` (no spawn grid: one thread per
    env and agent)."""
    env = sc.env
    s = env.stepper.scalar
    launcher.launch(
        reset_kernel(s),
        dim=(sc.n_envs, sc.n_agents),
        inputs=[
            common.spawn_args(sc, env_mask, grid=False),
            s(sc.spawn_inner),
            s(sc.spawn_jitter[0]),
            s(sc.spawn_jitter[1]),
            s(sc.goal_x),
        ],
        outputs=[sc._goals],
        device=env.device,
    )
