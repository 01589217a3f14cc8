"""Flocking, fused: the Warp twin of ``flocking.py`` (observations, rewards, info, reset).

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled row store on CUDA):
  builds the agent's neighbor list, its observation row, the per-agent reward terms (progress,
  separation, collisions, the flock bonus) and info.
* ``flock_finish`` (one thread per env): the flock terms (cohesion, alignment), the target's move,
  the flock info, and the end of the step's bookkeeping.
* ``flock_reset`` (one thread per env and spawn cell, masked): spawns, headings, the target
  (``arena.spawn_cell``; the torch twin is ``arena.spawn_torch``).

The target moves in both kernels of a step: the observe kernel advances a copy in registers (every
agent of the env computes the same move) and ``flock_finish`` stores it, so no thread reads a
target another thread of the same launch writes.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.runtime import episode, health, rows
from swarp.runtime.launch import Launcher
from swarp.scenarios.framework import arena, base

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def kernels(scalar: type, max_neighbors: int, grid: bool, fleet_size: int, k_obs: int, sweep: bool):
    """Kernels for one precision, neighbor-list configuration, agent count and observed neighbors."""
    f = arena.funcs(scalar, max_neighbors, grid, k_obs, sweep)
    n_features = f.n_features
    row_type = wp.types.vector(8 + n_features, scalar)
    vec2 = f.vec2
    vec4 = wp.types.vector(4, scalar)
    Query = f.Query
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)
    inv_fleet = scalar(1.0 / fleet_size)
    fleet_vec = wp.types.vector(fleet_size, scalar)
    fleet_vec2 = wp.types.vector(2 * fleet_size, scalar)
    align_eps = scalar(1e-6)

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

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        target: wp.array(dtype=vec2)
        target_vel: wp.array(dtype=vec2)
        nq: Query
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
        features, n_collisions, separation = f.observe_neighbors(
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

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, 8 + n_features),
        flock_finish=flock_finish,
        flock_reset=flock_reset,
    )


def _kernels_for(sc):
    return kernels(*arena.kernel_key(sc))


def launch_observe(sc, launcher: Launcher, env_mask, mode: int) -> None:
    """Launch the observe kernel (and, for a step or a reset, ``flock_finish``) for the scenario ``sc``."""
    k = _kernels_for(sc)
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    state, nb = world.state, world.neighbors
    limit, dt = s(sc.target_limit), s(env.stepper.dt)
    args = arena.fill(
        k.ObserveArgs(),
        pos=state.pos, vel=state.vel, target=sc._target, target_vel=sc._target_vel, nq=world.neighbor_query(),
        obs_range=s(c.obs_range), reach=s(2.0 * c.agent_radius), sep_distance=s(c.separation_distance),
        target_limit=limit, target_radius=s(c.target_radius), dt=dt, target_weight=s(c.target_weight),
        separation_weight=s(c.separation_weight), collision_penalty=s(c.collision_penalty),
        flock_bonus=s(c.flock_bonus), prev_dist=sc._prev_dist, reward_out=sc.buffers.reward, dist_out=sc._dist,
        in_flock_out=sc._in_flock, collisions_out=sc._collisions,
    )  # fmt: skip
    finish_inputs = [state.pos, state.vel, nb.count, nb.total, limit, dt, s(c.cohesion_weight), s(c.alignment_weight)]
    finish_outputs = [sc._target, sc._target_vel, sc.buffers.reward, sc._cohesion, sc._alignment, sc._overflow]
    arena.launch_observe(sc, launcher, env_mask, mode, k.observe, args, k.flock_finish, (finish_inputs, finish_outputs))


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch the masked ``flock_reset`` for the scenario ``sc``."""
    s = sc.env.stepper.scalar
    inputs = [s(sc.target_limit), s(sc.cfg.target_speed)]
    arena.launch_reset(sc, launcher, _kernels_for(sc).flock_reset, env_mask, inputs, [sc._target, sc._target_vel])
