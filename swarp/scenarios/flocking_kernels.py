"""Flocking, fused: the Warp twin of ``flocking.py`` (observations, rewards, info, reset).

* ``flock_observe`` (one thread per agent): builds the agent's neighbor list, writes its
  observation, and the per-agent reward terms (progress, separation, collisions) and info.
* ``flock_finish`` (one thread per env): the flock terms (cohesion, alignment), the target's move,
  the flock info, and the end of the step's bookkeeping.
* ``flock_reset`` (one thread per env and spawn cell, masked): spawns, headings, the target
  (``common.spawn_agent``; the torch twin is ``common.spawn_torch``).

The target moves in both kernels of a step: ``flock_observe`` advances a copy in registers (every
agent of the env computes the same move) and ``flock_finish`` stores it, so no thread reads a
target another thread of the same launch writes.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.launch import Launcher
from swarp.env import episode
from swarp.scenarios import base, common

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def kernels(scalar: type, max_neighbors: int, grid: bool, fleet_size: int, k_obs: int):
    """Kernels for one precision, neighbor-list configuration, agent count and observed neighbors."""
    f = common.funcs(scalar, max_neighbors, grid, k_obs)
    n_features = f.n_features
    rf = common.row_funcs(scalar, 8 + n_features)
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

    @wp.kernel(enable_backward=False, module="unique")
    def flock_observe(
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        target: wp.array(dtype=vec2),
        target_vel: wp.array(dtype=vec2),
        nq: Query,
        obs_range: scalar,
        reach: scalar,
        sep_distance: scalar,
        target_limit: scalar,
        target_radius: scalar,
        dt: scalar,
        target_weight: scalar,
        separation_weight: scalar,
        collision_penalty: scalar,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        agents_per_thread: int,
        obs_out: wp.array3d(dtype=rf.chunk_type),
        prev_dist: wp.array2d(dtype=scalar),
        reward_out: wp.array2d(dtype=scalar),
        dist_out: wp.array2d(dtype=scalar),
        in_flock_out: wp.array2d(dtype=wp.bool),
        collisions_out: wp.array2d(dtype=wp.int32),
    ):
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        t = target[env]
        tv = target_vel[env]
        if mode == _OBSERVE_STEP:
            moved = move_target(t, tv, target_limit, dt)
            t = vec2(moved[0], moved[1])
            tv = vec2(moved[2], moved[3])
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, pos.shape[1])):
            p = pos[env, agent]
            v = vel[env, agent]
            rel = t - p
            features, n_collisions, separation = f.observe_neighbors(
                nq, pos, vel, env, agent, obs_range, reach, sep_distance
            )
            row = rf.row_type()
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
            rf.store_row(obs_out, env, agent, row)
            dist = wp.sqrt(wp.dot(rel, rel))
            if mode == _OBSERVE_STEP:
                reward_out[env, agent] = (
                    target_weight * (prev_dist[env, agent] - dist)
                    - separation_weight * separation
                    - collision_penalty * scalar(n_collisions)
                )
            if mode != _OBSERVE_ONLY:
                dist_out[env, agent] = dist
                in_flock_out[env, agent] = dist < target_radius and n_collisions == 0
                collisions_out[env, agent] = n_collisions
            prev_dist[env, agent] = dist

    @wp.kernel(enable_backward=False, module="unique")
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
        for a in range(wp.static(fleet_size)):
            v = vel[env, a]
            sum_pos += pos[env, a]
            sum_vel += v
            sum_speed += wp.sqrt(wp.dot(v, v))
            if nbr_total[env, a] > nbr_count[env, a]:
                overflow = True
        centroid = sum_pos * inv_fleet
        mean_vel = sum_vel * inv_fleet
        spread = zero
        for a in range(wp.static(fleet_size)):
            offset = pos[env, a] - centroid
            mismatch = vel[env, a] - mean_vel
            cohesion = wp.sqrt(wp.dot(offset, offset))
            alignment = wp.sqrt(wp.dot(mismatch, mismatch))
            spread += cohesion
            if mode == _OBSERVE_STEP:
                reward_out[env, a] = reward_out[env, a] - cohesion_weight * cohesion - alignment_weight * alignment
        cohesion_out[env] = spread * inv_fleet
        alignment_out[env] = wp.sqrt(wp.dot(mean_vel, mean_vel)) / (sum_speed * inv_fleet + align_eps)
        overflow_out[env] = overflow
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        moved = move_target(target[env], target_vel[env], target_limit, dt)
        target[env] = vec2(moved[0], moved[1])
        target_vel[env] = vec2(moved[2], moved[3])
        end_step(ep, env, False)

    @wp.kernel(enable_backward=False, module="unique")
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
        n_cells = spawn.side * spawn.side
        if slot == 0:
            target_out[env] = vec2(
                (f.env_draw(key, 0) * two - one) * target_limit, (f.env_draw(key, 1) * two - one) * target_limit
            )
            target_vel_out[env] = f.cos_sin((f.env_draw(key, 2) * two - one) * pi) * target_speed
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            a = f.cell_rank(key, n_cells, cell)
            if a < spawn.pos.shape[1]:
                point = f.spawn_point(spawn, key, cell, a)
                f.spawn_agent(spawn, key, env, a, point)

    return SimpleNamespace(flock_observe=flock_observe, flock_finish=flock_finish, flock_reset=flock_reset)


def _kernels_for(sc):
    return kernels(*common.kernel_key(sc))


def launch_observe(sc, launcher: Launcher, env_mask, mode: int) -> None:
    """Launch ``flock_observe`` (and, for a step or a reset, ``flock_finish``) for the scenario ``sc``."""
    k = _kernels_for(sc)
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    state, nb = world.state, world.neighbors
    limit, dt = s(sc.target_limit), s(env.stepper.dt)
    observe_inputs = [state.pos, state.vel, sc._target, sc._target_vel, world.neighbor_query(), s(c.obs_range)]
    observe_inputs += [s(2.0 * c.agent_radius), s(c.separation_distance), limit, s(c.target_radius), dt]
    observe_inputs += [s(c.target_weight), s(c.separation_weight), s(c.collision_penalty)]
    observe_outputs = [common.obs_chunks(sc), sc._prev_dist, env._reward, sc._dist, sc._in_flock, sc._collisions]
    finish_inputs = [state.pos, state.vel, nb.count, nb.total, limit, dt, s(c.cohesion_weight), s(c.alignment_weight)]
    finish_outputs = [sc._target, sc._target_vel, env._reward, sc._cohesion, sc._alignment, sc._overflow]
    common.launch_observe(
        sc, launcher, env_mask, mode, k.flock_observe, (observe_inputs, observe_outputs), k.flock_finish,
        (finish_inputs, finish_outputs),
    )  # fmt: skip


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch the masked ``flock_reset`` for the scenario ``sc``."""
    s = sc.env.stepper.scalar
    inputs = [s(sc.target_limit), s(sc.cfg.target_speed)]
    common.launch_reset(sc, launcher, _kernels_for(sc).flock_reset, env_mask, inputs, [sc._target, sc._target_vel])
