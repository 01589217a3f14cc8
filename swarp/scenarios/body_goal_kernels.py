"""Body scenarios, fused: the Warp twin of ``body_goal.py`` (observations, rewards, termination, reset).

Two kernels, one thread per env (fleets here are a handful of agents; the body and goal terms are
per env): ``body_goal_observe`` writes every agent's observation row, the shared reward, the info
and ends the step (``episode.end_step``); ``body_goal_reset`` re-samples the masked envs with the
draws of the torch reference. Layout, body count and flags are compile-time (the arguments of the
cached factories ``observe_kernel`` and ``reset_kernel``); ``BodyGoalScenario`` launches them with
its own arrays.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core import trig
from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key
from swarp.physics import dynamics
from swarp.runtime import episode, health
from swarp.scenarios.framework import base, spawn

RING = 0
BALANCE = 1

# Draw indices of one episode's stream (see swarp.core.rng), shared with the torch reference.
DRAW_BODY_X = 0
DRAW_BODY_Y = 1
DRAW_BODY_ANGLE = 2
DRAW_GOAL_X = 3
DRAW_GOAL_Y = 4
DRAW_GOAL_ANGLE = 5
DRAW_PHASE = 6
DRAW_PACKAGE = 7
N_DRAWS = 8

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def observe_kernel(scalar: type, n_agents: int, n_bodies: int, target: int, checks_drop: bool):
    """``Task`` (the goal, its reward memory and info, and the task's constants) and
    ``body_goal_observe`` (one thread per env) for one precision, fleet size, body count, target
    body and failure rule."""
    vec2 = vec2_type(scalar)
    cos_sin = trig.cos_sin(scalar)
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    wrap_angle = dynamics.funcs(scalar).wrap_angle

    @wp.struct
    class Task:
        goal: wp.array(dtype=vec2)
        goal_angle: wp.array(dtype=scalar)
        prev_err: wp.array(dtype=scalar)
        dist: wp.array(dtype=scalar)
        angle_error: wp.array(dtype=scalar)
        success: wp.array(dtype=wp.bool)
        failure: wp.array(dtype=wp.bool)
        angle_weight: scalar
        position_tolerance: scalar
        angle_tolerance: scalar
        shaping_factor: scalar
        final_reward: scalar
        failure_penalty: scalar

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def body_goal_observe(
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        task: Task,
        ep: Episode,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        obs_out: wp.array3d(dtype=scalar),
        reward_out: wp.array2d(dtype=scalar),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        goal = task.goal[env]
        goal_angle = task.goal_angle[env]
        x_t = body_pos[env, wp.static(target)]
        th_t = body_theta[env, wp.static(target)]
        to_goal = goal - x_t
        delta = goal_angle - th_t
        cos_delta = wp.cos(delta)
        sin_delta = wp.sin(delta)
        finite = health.finite(to_goal) and health.finite(cos_delta) and health.finite(sin_delta)
        for a in range(wp.static(n_agents)):
            p = pos[env, a]
            v = vel[env, a]
            finite = finite and health.finite(p) and health.finite(v)
            obs_out[env, a, 0] = p[0]
            obs_out[env, a, 1] = p[1]
            obs_out[env, a, 2] = v[0]
            obs_out[env, a, 3] = v[1]
            for b in range(wp.static(n_bodies)):
                rel = body_pos[env, b] - p
                bv = body_vel[env, b]
                th = body_theta[env, b]
                o = 4 + 6 * b
                obs_out[env, a, o + 0] = rel[0]
                obs_out[env, a, o + 1] = rel[1]
                obs_out[env, a, o + 2] = bv[0]
                obs_out[env, a, o + 3] = bv[1]
                heading = cos_sin(th)
                obs_out[env, a, o + 4] = heading[0]
                obs_out[env, a, o + 5] = heading[1]
                finite = finite and health.finite(rel) and health.finite(bv) and health.finite(th)
            o = 4 + 6 * wp.static(n_bodies)
            obs_out[env, a, o + 0] = to_goal[0]
            obs_out[env, a, o + 1] = to_goal[1]
            obs_out[env, a, o + 2] = cos_delta
            obs_out[env, a, o + 3] = sin_delta
        dist = wp.sqrt(wp.dot(to_goal, to_goal))
        angle = wp.abs(wrap_angle(delta))
        err = dist + task.angle_weight * angle
        success = dist < task.position_tolerance and angle < task.angle_tolerance
        failure = bool(False)
        if wp.static(checks_drop):
            failure = x_t[1] < body_pos[env, 0][1]
        if mode == _OBSERVE_STEP:
            reward = task.shaping_factor * (task.prev_err[env] - err)
            if success:
                reward = reward + task.final_reward
            if failure:
                reward = reward - task.failure_penalty
            for a in range(wp.static(n_agents)):
                reward_out[env, a] = reward
            finite = finite and health.finite(reward)
        health.flag_env(ep.non_finite, env, finite)
        if mode != _OBSERVE_ONLY:
            task.dist[env] = dist
            task.angle_error[env] = angle
            task.success[env] = success
            task.failure[env] = failure
        task.prev_err[env] = err
        if mode == _OBSERVE_STEP:
            end_step(ep, env, success or failure)

    return SimpleNamespace(Task=Task, body_goal_observe=body_goal_observe)


@functools.cache
def reset_kernel(scalar: type, layout: int, n_agents: int, n_bodies: int):
    """``Layout`` (where bodies, agents and goals go) and ``body_goal_reset`` (one thread per env,
    masked) for one precision, reset layout, fleet size and body count."""
    vec2 = vec2_type(scalar)
    sp = spawn.funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    half = scalar(0.5)
    pi = scalar(math.pi)
    two_pi = scalar(2.0 * math.pi)

    @wp.struct
    class Layout:
        body_extent: scalar
        goal_extent: scalar
        ring_radius: scalar
        random_body_angle: int
        random_goal_angle: int
        line_y: scalar
        line_half_length: scalar
        line_half_thickness: scalar
        package_radius: scalar
        agent_radius: scalar
        goal_y: scalar

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def body_goal_reset(
        env_mask: wp.array(dtype=wp.bool),
        streams: ResetStreams,
        lay: Layout,
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        body_pos_out: wp.array2d(dtype=vec2),
        body_theta_out: wp.array2d(dtype=scalar),
        body_vel_out: wp.array2d(dtype=vec2),
        body_ang_vel_out: wp.array2d(dtype=scalar),
        goal_out: wp.array(dtype=vec2),
        goal_angle_out: wp.array(dtype=scalar),
    ):
        env = wp.tid()
        if not env_mask[env]:
            return
        key = episode_key(streams, env)
        n = scalar(wp.static(n_agents))
        for a in range(wp.static(n_agents)):
            theta_out[env, a] = zero
            vel_out[env, a] = vec2(zero, zero)
            speed_out[env, a] = zero
            ang_vel_out[env, a] = zero
        for b in range(wp.static(n_bodies)):
            body_vel_out[env, b] = vec2(zero, zero)
            body_ang_vel_out[env, b] = zero
        if wp.static(layout == RING):
            center = (
                vec2(sp.uniform(key, DRAW_BODY_X) * two - one, sp.uniform(key, DRAW_BODY_Y) * two - one)
                * lay.body_extent
            )
            theta = zero
            if lay.random_body_angle != 0:
                theta = (sp.uniform(key, DRAW_BODY_ANGLE) * two - one) * pi
            body_pos_out[env, 0] = center
            body_theta_out[env, 0] = theta
            u_phase = sp.uniform(key, DRAW_PHASE)
            for a in range(pos_out.shape[1]):
                phase = (u_phase + scalar(a) / n) * two_pi
                pos_out[env, a] = center + vec2(wp.cos(phase), wp.sin(phase)) * lay.ring_radius
            goal_out[env] = (
                vec2(sp.uniform(key, DRAW_GOAL_X) * two - one, sp.uniform(key, DRAW_GOAL_Y) * two - one)
                * lay.goal_extent
            )
            goal_angle = zero
            if lay.random_goal_angle != 0:
                goal_angle = (sp.uniform(key, DRAW_GOAL_ANGLE) * two - one) * pi
            goal_angle_out[env] = goal_angle
        else:
            line_x = (sp.uniform(key, DRAW_BODY_X) * two - one) * lay.body_extent
            package_x = line_x + (sp.uniform(key, DRAW_PACKAGE) * two - one) * (half * lay.line_half_length)
            body_pos_out[env, 0] = vec2(line_x, lay.line_y)
            body_pos_out[env, 1] = vec2(package_x, lay.line_y + lay.line_half_thickness + lay.package_radius)
            body_theta_out[env, 0] = zero
            body_theta_out[env, 1] = zero
            agent_y = lay.line_y - lay.line_half_thickness - lay.agent_radius
            for a in range(pos_out.shape[1]):
                spread = ((scalar(a) + half) / n * two - one) * (scalar(0.8) * lay.line_half_length)
                pos_out[env, a] = vec2(line_x + spread, agent_y)
            goal_out[env] = vec2((sp.uniform(key, DRAW_GOAL_X) * two - one) * lay.goal_extent, lay.goal_y)
            goal_angle_out[env] = zero

    return SimpleNamespace(Layout=Layout, body_goal_reset=body_goal_reset)
