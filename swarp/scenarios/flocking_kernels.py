"""Flocking, fused: the Warp twin of ``flocking.py`` (observations, rewards, info, reset).

Cached kernel factories, each keyed by what it compiles for (``observe_kernels``, ``finish_kernel``,
``reset_kernel``, and ``move_target_func`` that two of them share); ``FlockingScenario`` launches
them with its own arrays.

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled row store on CUDA):
  builds the agent's neighbor list, its observation row, the per-agent reward terms (progress,
  separation, collisions, the flock bonus) and info.
* ``flock_finish`` (one thread per env): the flock terms (cohesion, alignment), the target's move,
  the flock info, and the end of the step's bookkeeping.
* ``flock_reset`` (one thread per env and spawn cell, masked): spawns, headings, the target
  (``arena_funcs.reset_funcs().spawn_cell``; the torch twin is ``arena.spawn_torch``).

The target moves in both kernels of a step: the observe kernel advances a copy in registers (every
agent of the env computes the same move) and ``flock_finish`` stores it, so no thread reads a
target another thread of the same launch writes.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.runtime import episode, health, rows
from swarp.scenarios.framework import arena_funcs, base

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def move_target_func(scalar: type):
    """``move_target``, the target's step, shared by the observation (a copy in registers) and
    ``flock_finish`` (the store), for one precision."""
    vec2 = vec2_type(scalar)
    vec4 = wp.types.vector(4, scalar)
    two = scalar(2.0)

    @wp.func
    def move_target(target: vec2, velocity: vec2, limit: scalar, dt: scalar) -> vec4:
        """The target and its velocity one step later ``(x, y, vx, vy)``, reflected off ``[-limit, limit]^2``."""
        p = target + velocity * dt
        v = velocity
        x = p[0]
        y = p[1]
        vx = v[0]
        vy = v[1]
        if x > limit:
            x = two * limit - x
            vx = -vx
        elif x < -limit:
            x = -two * limit - x
            vx = -vx
        if y > limit:
            y = two * limit - y
            vy = -vy
        elif y < -limit:
            y = -two * limit - y
            vy = -vy
        return vec4(x, y, vx, vy)

    return move_target


@functools.cache
def observe_kernels(scalar: type, max_neighbors: int, grid: bool, k_obs: int, register_lists: bool, comm_dim: int):
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision, neighbor-list configuration, observed-neighbor count and channel width (0: none;
    else a step's row ends with the heard messages of the observed neighbors)."""
    f = arena_funcs.funcs(scalar, max_neighbors, grid, k_obs, register_lists)
    move_target = move_target_func(scalar)
    n_features = f.n_features
    n_heard = comm_dim * k_obs
    width = 8 + n_features + n_heard
    row_type = wp.types.vector(width, scalar)
    vec2 = f.vec2
    Query = f.Query
    hear_neighbors = arena_funcs.hear_func(scalar, k_obs, comm_dim)

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        target: wp.array(dtype=vec2)
        target_vel: wp.array(dtype=vec2)
        nq: Query
        comm: wp.array3d(dtype=scalar)
        obs_range: scalar
        reach: scalar
        sep_distance: scalar
        target_limit: scalar
        target_radius: scalar
        dt: scalar
        target_weight: scalar
        separation_weight: scalar
        collision_penalty: scalar
        flock_bonus: scalar
        prev_dist: wp.array2d(dtype=scalar)
        reward_out: wp.array2d(dtype=scalar)
        dist_out: wp.array2d(dtype=scalar)
        in_flock_out: wp.array2d(dtype=wp.bool)
        collisions_out: wp.array2d(dtype=wp.int32)

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> row_type:
        """Build the agent's neighbor list, write its per-agent outputs, return its observation row."""
        t = a.target[env]
        tv = a.target_vel[env]
        if mode == _OBSERVE_STEP:
            moved = move_target(t, tv, a.target_limit, a.dt)
            t = vec2(moved[0], moved[1])
            tv = vec2(moved[2], moved[3])
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        rel = t - p
        features, n_collisions, separation, seen = f.observe_neighbors(
            a.nq, a.pos, a.vel, env, agent, a.obs_range, a.reach, a.sep_distance
        )
        row = row_type()
        row[0] = p[0]
        row[1] = p[1]
        row[2] = v[0]
        row[3] = v[1]
        row[4] = rel[0]
        row[5] = rel[1]
        row[6] = tv[0]
        row[7] = tv[1]
        for i in range(wp.static(n_features)):
            row[i + wp.static(8)] = features[i]
        if wp.static(n_heard > 0):
            if mode == _OBSERVE_STEP:
                heard = hear_neighbors(a.comm, env, seen)
                for i in range(wp.static(n_heard)):
                    row[i + wp.static(8 + n_features)] = heard[i]
        dist = wp.sqrt(wp.dot(rel, rel))
        in_flock = dist < a.target_radius and n_collisions == 0
        if mode == _OBSERVE_STEP:
            a.reward_out[env, agent] = (
                a.target_weight * (a.prev_dist[env, agent] - dist)
                - a.separation_weight * separation
                - a.collision_penalty * scalar(n_collisions)
                + wp.where(in_flock, a.flock_bonus, scalar(0.0))
            )
        if mode != _OBSERVE_ONLY:
            a.dist_out[env, agent] = dist
            a.in_flock_out[env, agent] = in_flock
            a.collisions_out[env, agent] = n_collisions
        a.prev_dist[env, agent] = dist
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, width),
    )


@functools.cache
def finish_kernel(scalar: type, fleet_size: int):
    """``flock_finish`` (one thread per env) for one precision and fleet size."""
    move_target = move_target_func(scalar)
    vec2 = vec2_type(scalar)
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    inv_fleet = scalar(1.0 / fleet_size)
    fleet_vec = wp.types.vector(fleet_size, scalar)
    fleet_vec2 = wp.types.vector(2 * fleet_size, scalar)
    align_eps = scalar(1e-6)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def flock_finish(
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        nbr_count: wp.array2d(dtype=wp.int32),
        nbr_total: wp.array2d(dtype=wp.int32),
        target_limit: scalar,
        dt: scalar,
        cohesion_weight: scalar,
        alignment_weight: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        target: wp.array(dtype=vec2),
        target_vel: wp.array(dtype=vec2),
        reward_out: wp.array2d(dtype=scalar),
        cohesion_out: wp.array(dtype=scalar),
        alignment_out: wp.array(dtype=scalar),
        overflow_out: wp.array(dtype=wp.bool),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        # Compile-time fleet size: small fleets unroll, so the loads are all in flight at once.
        sum_pos = vec2(zero, zero)
        sum_vel = vec2(zero, zero)
        sum_speed = zero
        overflow = bool(False)
        # Positions, velocities and the reward terms so far, loaded once up front (see navigation's
        # finish: the stores below would otherwise serialise reloads behind them).
        prior = fleet_vec()
        ps = fleet_vec2()
        vs = fleet_vec2()
        for a in range(wp.static(fleet_size)):
            prior[a] = reward_out[env, a]
            p_a = pos[env, a]
            v = vel[env, a]
            ps[2 * a] = p_a[0]
            ps[2 * a + 1] = p_a[1]
            vs[2 * a] = v[0]
            vs[2 * a + 1] = v[1]
            sum_pos += p_a
            sum_vel += v
            sum_speed += wp.sqrt(wp.dot(v, v))
            if nbr_total[env, a] > nbr_count[env, a]:
                overflow = True
        centroid = sum_pos * inv_fleet
        mean_vel = sum_vel * inv_fleet
        spread = zero
        finite = bool(True)
        for a in range(wp.static(fleet_size)):
            offset = vec2(ps[2 * a], ps[2 * a + 1]) - centroid
            mismatch = vec2(vs[2 * a], vs[2 * a + 1]) - mean_vel
            cohesion = wp.sqrt(wp.dot(offset, offset))
            alignment = wp.sqrt(wp.dot(mismatch, mismatch))
            spread += cohesion
            if mode == _OBSERVE_STEP:
                reward = prior[a] - cohesion_weight * cohesion - alignment_weight * alignment
                reward_out[env, a] = reward
                finite = finite and health.finite(reward)
        cohesion_out[env] = spread * inv_fleet
        alignment_out[env] = wp.sqrt(wp.dot(mean_vel, mean_vel)) / (sum_speed * inv_fleet + align_eps)
        overflow_out[env] = overflow
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        moved = move_target(target[env], target_vel[env], target_limit, dt)
        target[env] = vec2(moved[0], moved[1])
        target_vel[env] = vec2(moved[2], moved[3])
        health.flag_env(ep.non_finite, env, finite)
        end_step(ep, env, False)

    return flock_finish


@functools.cache
def reset_kernel(scalar: type):
    """``flock_reset`` (one thread per env and spawn cell, masked) for one precision."""
    f = arena_funcs.reset_funcs(scalar)
    vec2 = vec2_type(scalar)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def flock_reset(
        spawn: f.Spawn,
        target_limit: scalar,
        target_speed: scalar,
        target_out: wp.array(dtype=vec2),
        target_vel_out: wp.array(dtype=vec2),
    ):
        # Agent i spawns in the cell of i-th smallest key; the first thread of an env draws the target.
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        if slot == 0:
            target_out[env] = vec2(
                (f.env_draw(key, 0) * two - one) * target_limit, (f.env_draw(key, 1) * two - one) * target_limit
            )
            target_vel_out[env] = f.cos_sin((f.env_draw(key, 2) * two - one) * pi) * target_speed
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            f.spawn_cell(spawn, key, env, cell)

    return flock_reset
