"""Flocking, fused: the Warp twin of ``flocking.py`` (observations, rewards, info, reset).

* ``flock_observe`` (one thread per agent): builds the agent's neighbor list, writes its
  observation, and the per-agent reward terms (progress, separation, collisions) and info.
* ``flock_finish`` (one thread per env): the flock terms (cohesion, alignment), the target's move,
  the flock info, and the end of the step's bookkeeping.
* ``flock_reset`` (one thread per env and spawn cell, masked): spawns, headings, the target.

The target moves in both kernels of a step: ``flock_observe`` advances a copy in registers (every
agent of the env computes the same move) and ``flock_finish`` stores it, so no thread reads a
target another thread of the same launch writes.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.launch import Launcher, agents_per_thread
from swarp.core.rng import stream_key
from swarp.env import episode
from swarp.scenarios import base, common

# Draw-index blocks of one episode's random stream, shared with the torch reference.
DRAW_BLOCK = 1 << 12
DRAW_CELLS = 0
DRAW_JITTER = 1 * DRAW_BLOCK
DRAW_HEADING = 2 * DRAW_BLOCK
DRAW_TARGET = 3 * DRAW_BLOCK

_DRAW_CELLS = wp.constant(DRAW_CELLS)
_DRAW_JITTER = wp.constant(DRAW_JITTER)
_DRAW_HEADING = wp.constant(DRAW_HEADING)
_DRAW_TARGET = wp.constant(DRAW_TARGET)
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
        env_mask: wp.array(dtype=wp.bool),
        seed: wp.array(dtype=wp.int32),
        episode_index: wp.array(dtype=wp.int32),
        side: int,
        world_size: scalar,
        jitter: scalar,
        target_limit: scalar,
        target_speed: scalar,
        cells_per_thread: int,
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        target_out: wp.array(dtype=vec2),
        target_vel_out: wp.array(dtype=vec2),
    ):
        # Agent i spawns in the cell of i-th smallest key; one thread per (env, cell) on the GPU,
        # one env per thread on the CPU. The first thread of an env also draws the target.
        env, slot = wp.tid()
        if not env_mask[env]:
            return
        key = stream_key(seed[0], env, episode_index[env])
        n_cells = side * side
        if slot == 0:
            target_out[env] = vec2(
                (f.uniform(key, _DRAW_TARGET) * two - one) * target_limit,
                (f.uniform(key, _DRAW_TARGET + 1) * two - one) * target_limit,
            )
            direction = f.cos_sin((f.uniform(key, _DRAW_TARGET + 2) * two - one) * pi)
            target_vel_out[env] = direction * target_speed
        first = slot * cells_per_thread
        for cell in range(first, wp.min(first + cells_per_thread, n_cells)):
            a = f.cell_rank(key, _DRAW_CELLS, n_cells, cell)
            if a < pos_out.shape[1]:
                pos_out[env, a] = f.cell_point(cell, side, world_size, jitter, key, _DRAW_JITTER + 2 * a)
                theta_out[env, a] = (f.uniform(key, _DRAW_HEADING + a) * two - one) * pi
                vel_out[env, a] = vec2(zero, zero)
                speed_out[env, a] = zero
                ang_vel_out[env, a] = zero

    return SimpleNamespace(flock_observe=flock_observe, flock_finish=flock_finish, flock_reset=flock_reset)


def _kernels_for(sc):
    stepper = sc.env.stepper
    return kernels(
        stepper.scalar,
        stepper.world.max_neighbors,
        stepper.neighbor_method == "grid",
        sc.n_agents,
        sc.cfg.obs_neighbors,
    )


def launch_observe(sc, launcher: Launcher, env_mask, mode: int) -> None:
    """Launch ``flock_observe`` (and, for a step or a reset, ``flock_finish``) for the scenario ``sc``."""
    k = _kernels_for(sc)
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    state, nb = world.state, world.neighbors
    mask = env_mask if env_mask is not None else nb.no_mask
    use_mask = int(env_mask is not None)
    per_thread, threads = agents_per_thread(env.device, sc.n_agents)
    launcher.launch(
        k.flock_observe,
        dim=(sc.n_envs, threads),
        inputs=[
            state.pos,
            state.vel,
            sc._target,
            sc._target_vel,
            world.neighbor_query(),
            s(c.obs_range),
            s(2.0 * c.agent_radius),
            s(c.separation_distance),
            s(sc.target_limit),
            s(c.target_radius),
            s(env.stepper.dt),
            s(c.target_weight),
            s(c.separation_weight),
            s(c.collision_penalty),
            mask,
            use_mask,
            int(mode),
            per_thread,
        ],
        outputs=[common.obs_chunks(sc), sc._prev_dist, env._reward, sc._dist, sc._in_flock, sc._collisions],
        device=env.device,
    )
    if mode != base.OBSERVE_ONLY:
        launcher.launch(
            k.flock_finish,
            dim=sc.n_envs,
            inputs=[
                state.pos,
                state.vel,
                nb.count,
                nb.total,
                s(sc.target_limit),
                s(env.stepper.dt),
                s(c.cohesion_weight),
                s(c.alignment_weight),
                env.episode_args,
                int(mode),
                mask,
                use_mask,
            ],
            outputs=[sc._target, sc._target_vel, env._reward, sc._cohesion, sc._alignment, sc._overflow],
            device=env.device,
        )


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch the masked ``flock_reset`` for the scenario ``sc``."""
    k = _kernels_for(sc)
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    state = world.state
    per_thread, threads = agents_per_thread(env.device, sc.side * sc.side)
    launcher.launch(
        k.flock_reset,
        dim=(sc.n_envs, threads),
        inputs=[
            env_mask,
            env._seed,
            env._episode,
            sc.side,
            s(c.world_size),
            s(sc.jitter),
            s(sc.target_limit),
            s(c.target_speed),
            per_thread,
        ],
        outputs=[state.pos, state.theta, state.vel, state.speed, state.ang_vel, sc._target, sc._target_vel],
        device=env.device,
    )
