"""Formation, fused: the Warp twin of ``formation.py`` (observations, rewards, termination, reset).

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled row store on CUDA):
  builds the agent's neighbor list, its observation row, its progress towards its slot,
  collisions and per-agent info.
* ``form_finish`` (one thread per env): termination, shared/bonus reward terms, the formation
  error, and the end of the step's bookkeeping.
* ``form_reset`` (one thread per env and spawn cell, masked): spawns, headings, center and slots.

Each comes from a cached factory keyed by what it compiles for; ``FormationScenario`` launches them
with its own arrays.
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
def observe_kernels(scalar: type, max_neighbors: int, grid: bool, k_obs: int, register_lists: bool):
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision, neighbor-list configuration and observed-neighbor count."""
    f = arena_funcs.funcs(scalar, max_neighbors, grid, k_obs, register_lists)
    n_features = f.n_features
    row_type = wp.types.vector(8 + n_features, scalar)
    vec2 = f.vec2
    Query = f.Query
    zero = scalar(0.0)

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        slots: wp.array2d(dtype=vec2)
        center: wp.array(dtype=vec2)
        nq: Query
        obs_range: scalar
        reach: scalar
        tolerance: scalar
        collision_penalty: scalar
        prev_dist: wp.array2d(dtype=scalar)
        progress_out: wp.array2d(dtype=scalar)
        reward_out: wp.array2d(dtype=scalar)
        dist_out: wp.array2d(dtype=scalar)
        on_slot_out: wp.array2d(dtype=wp.bool)
        collisions_out: wp.array2d(dtype=wp.int32)

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> row_type:
        """Build the agent's neighbor list, write its per-agent outputs, return its observation row."""
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        rel_slot = a.slots[env, agent] - p
        rel_center = a.center[env] - p
        features, n_collisions, _separation, _seen = f.observe_neighbors(
            a.nq, a.pos, a.vel, env, agent, a.obs_range, a.reach, zero
        )
        row = row_type()
        row[0] = p[0]
        row[1] = p[1]
        row[2] = v[0]
        row[3] = v[1]
        row[4] = rel_slot[0]
        row[5] = rel_slot[1]
        row[6] = rel_center[0]
        row[7] = rel_center[1]
        for i in range(wp.static(n_features)):
            row[i + wp.static(8)] = features[i]
        dist = wp.sqrt(wp.dot(rel_slot, rel_slot))
        if mode == _OBSERVE_STEP:
            a.progress_out[env, agent] = a.prev_dist[env, agent] - dist
            a.reward_out[env, agent] = -(a.collision_penalty * scalar(n_collisions))
        if mode != _OBSERVE_ONLY:
            a.dist_out[env, agent] = dist
            a.on_slot_out[env, agent] = dist < a.tolerance
            a.collisions_out[env, agent] = n_collisions
        a.prev_dist[env, agent] = dist
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, 8 + n_features),
    )


@functools.cache
def finish_kernel(scalar: type, fleet_size: int):
    """``form_finish`` (one thread per env) for one precision and fleet size."""
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    inv_fleet = scalar(1.0 / fleet_size)
    fleet_vec = wp.types.vector(fleet_size, scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def form_finish(
        progress: wp.array2d(dtype=scalar),
        dist: wp.array2d(dtype=scalar),
        on_slot: wp.array2d(dtype=wp.bool),
        shared_reward: int,
        shaping_factor: scalar,
        final_reward: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        reward_out: wp.array2d(dtype=scalar),
        error_out: wp.array(dtype=scalar),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        # Compile-time fleet size: small fleets unroll, so the loads are all in flight at once.
        complete = bool(True)
        total_dist = zero
        total_progress = zero
        prior = fleet_vec()  # loaded up front, see navigation's finish
        for a in range(wp.static(fleet_size)):
            prior[a] = reward_out[env, a]
            if not on_slot[env, a]:
                complete = False
            total_dist += dist[env, a]
            total_progress += progress[env, a]
        error_out[env] = total_dist * inv_fleet
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        mean = total_progress * inv_fleet
        bonus = zero
        if complete:
            bonus = final_reward
        finite = bool(True)
        for a in range(wp.static(fleet_size)):
            own = progress[env, a]
            if shared_reward != 0:
                own = mean
            reward = shaping_factor * own + prior[a] + bonus
            reward_out[env, a] = reward
            finite = finite and health.finite(reward)
        health.flag_env(ep.non_finite, env, finite)
        end_step(ep, env, complete)

    return form_finish


@functools.cache
def reset_kernel(scalar: type):
    """``form_reset`` (one thread per env and spawn cell, masked) for one precision."""
    f = arena_funcs.reset_funcs(scalar)
    vec2 = vec2_type(scalar)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def form_reset(
        spawn: f.Spawn,
        center_limit: scalar,
        formation_radius: scalar,
        corners: wp.array(dtype=vec2),
        center_out: wp.array(dtype=vec2),
        slots_out: wp.array2d(dtype=vec2),
    ):
        # Agent i spawns in the cell of i-th smallest key; one thread per (env, cell) on the GPU,
        # one env per thread on the CPU. Every thread derives the env's center and rotation (a few
        # hashes), the one that spawns agent i also writes its slot.
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        c = vec2((f.env_draw(key, 0) * two - one) * center_limit, (f.env_draw(key, 1) * two - one) * center_limit)
        rotation = f.cos_sin((f.env_draw(key, 2) * two - one) * pi)
        if slot == 0:
            center_out[env] = c
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            a = f.spawn_cell(spawn, key, env, cell)
            if a < spawn.pos.shape[1]:
                u = corners[a]
                slots_out[env, a] = vec2(
                    c[0] + formation_radius * (rotation[0] * u[0] - rotation[1] * u[1]),
                    c[1] + formation_radius * (rotation[1] * u[0] + rotation[0] * u[1]),
                )

    return form_reset
