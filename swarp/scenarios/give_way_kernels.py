"""Give way, fused: the reset and route-progress kernels of ``give_way.py``.

Observations, rewards and termination are navigation's kernels (``navigation_kernels.py``);
``give_way_reset`` (one thread per env and agent, masked) draws each agent's spawn in the lane
stretch at its end of the corridor (per-env draws ``env_draw``), its heading (placed by
``spawn_agent``, both ``arena_funcs.reset_funcs``) and its fixed goal, exactly the draws of the torch reference
(``prev_dist`` is set by the observe pass that follows every reset). ``give_way_route`` (one thread
per env, with ``route_shaping``) runs after navigation's observation and before its finish: it
replaces each agent's progress by its progress along the route (``give_way.route_lengths_torch``)
and stores the route lengths for the next step, in every observe mode. ``GiveWayScenario`` launches
both with its own arrays.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.runtime import health
from swarp.scenarios.framework import arena_funcs, base

_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def reset_kernel(scalar: type):
    """``give_way_reset`` for one precision."""
    vec2 = vec2_type(scalar)
    f = arena_funcs.reset_funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: spawn points come out bit for bit as on the CPU and in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
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


@functools.cache
def route_kernel(scalar: type):
    """``RouteArgs`` (the route, the reward options and the arrays) and ``give_way_route`` for one
    precision."""
    vec2 = vec2_type(scalar)
    zero = scalar(0.0)

    @wp.struct
    class RouteArgs:
        pos: wp.array2d(dtype=vec2)
        goals: wp.array2d(dtype=vec2)
        bay: vec2
        mouth: vec2
        wait0_x: scalar
        wait1_x: scalar
        lane_half_width: scalar
        pass_gap: scalar
        shared_reward: int
        shaping_factor: scalar
        collision_penalty: scalar
        collisions: wp.array2d(dtype=wp.int32)
        prev_route: wp.array2d(dtype=scalar)
        progress_out: wp.array2d(dtype=scalar)
        reward_out: wp.array2d(dtype=scalar)
        non_finite_out: wp.array(dtype=wp.int32)

    # No FMA contraction: route lengths come out bit for bit as in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def give_way_route(a: RouteArgs, mode: int, env_mask: wp.array(dtype=wp.bool), use_mask: int):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        p0, p1 = a.pos[env, 0], a.pos[env, 1]
        g0, g1 = a.goals[env, 0], a.goals[env, 1]
        out0, out1 = p0[1] > a.lane_half_width, p1[1] > a.lane_half_width
        from_mouth0, from_mouth1 = wp.length(a.mouth - g0), wp.length(a.mouth - g1)
        route0, route1 = wp.length(g0 - p0), wp.length(g1 - p1)
        if out0:
            route0 = wp.length(p0 - a.mouth) + from_mouth0
        if out1:
            route1 = wp.length(p1 - a.mouth) + from_mouth1
        if not (p0[0] - p1[0] > a.pass_gap):
            drop = wp.length(a.bay - a.mouth)
            via0 = wp.length(p0 - a.bay) + drop + from_mouth0
            via1 = wp.length(p1 - a.bay) + drop + from_mouth1
            wait0_at = vec2(a.wait0_x, zero)
            wait1_at = vec2(a.wait1_x, zero)
            wait0 = route0
            if not (p0[0] <= wait0_at[0] or out1):
                wait0 = wp.length(wait0_at - p0) + wp.length(g0 - wait0_at)
            wait1 = route1
            if not (p1[0] >= wait1_at[0] or out0):
                wait1 = wp.length(wait1_at - p1) + wp.length(g1 - wait1_at)
            if via1 + wait0 <= via0 + wait1:
                route0, route1 = wait0, via1
            else:
                route0, route1 = via0, wait1
        if mode == _OBSERVE_STEP:
            finite = bool(True)
            for agent in range(2):
                route = route0
                if agent == 1:
                    route = route1
                progress = a.prev_route[env, agent] - route
                a.progress_out[env, agent] = progress
                if a.shared_reward == 0:
                    # observe_agent's own-progress reward, with the route's progress.
                    collision = -(a.collision_penalty * scalar(a.collisions[env, agent]))
                    reward = a.shaping_factor * progress + collision + zero
                    a.reward_out[env, agent] = reward
                    finite = finite and health.finite(reward)
            health.flag_env(a.non_finite_out, env, finite)
        a.prev_route[env, 0] = route0
        a.prev_route[env, 1] = route1

    return SimpleNamespace(RouteArgs=RouteArgs, give_way_route=give_way_route)
