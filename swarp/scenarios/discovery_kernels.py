"""Discovery, fused: the Warp twin of ``discovery.py`` (observations, rewards, termination, reset).

Three cached kernel factories, each keyed by what it compiles for (``observe_kernels``,
``finish_kernel``, ``reset_kernel``); ``DiscoveryScenario`` launches them with its own arrays.

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled row store on
  CUDA): builds the agent's neighbor list, its observation row (targets as found at the start of
  the step), which targets it covers (a bit mask), its time and collision penalties and collisions.
* ``disc_finish`` (one thread per env): counts the covering agents of each target still to find,
  marks new finds (zeroing their rows in every agent's observation, which the observe kernel wrote
  before the find), the shared reward, the covered fraction, termination and the end of the step.
* ``disc_reset`` (one thread per env and spawn cell, masked): agents, headings and targets.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.runtime import episode, health, rows
from swarp.scenarios.framework import arena_funcs, base

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)
#: Where the per-target block of an observation starts.
_TARGETS_AT = wp.constant(4)


@functools.cache
def observe_kernels(scalar: type, max_neighbors: int, grid: bool, k_obs: int, register_lists: bool, n_targets: int):
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision, neighbor-list configuration, observed-neighbor count and target count."""
    f = arena_funcs.funcs(scalar, max_neighbors, grid, k_obs, register_lists)
    n_features = f.n_features
    header = 4 + 3 * n_targets
    row_type = wp.types.vector(header + n_features, scalar)
    vec2 = f.vec2
    Query = f.Query
    zero = scalar(0.0)
    one = scalar(1.0)

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        targets: wp.array2d(dtype=vec2)
        found: wp.array2d(dtype=wp.bool)
        nq: Query
        obs_range: scalar
        reach: scalar
        covering_range: scalar
        time_penalty: scalar
        collision_penalty: scalar
        cover_bits_out: wp.array2d(dtype=wp.int32)
        reward_out: wp.array2d(dtype=scalar)
        collisions_out: wp.array2d(dtype=wp.int32)

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> row_type:
        """Build the agent's neighbor list, write its per-agent outputs, return its observation row."""
        cover2 = a.covering_range * a.covering_range
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        row = row_type()
        row[0] = p[0]
        row[1] = p[1]
        row[2] = v[0]
        row[3] = v[1]
        bits = int(0)
        for t in range(wp.static(n_targets)):
            # Found targets keep their zeros (a fresh row is all zeros).
            if not a.found[env, t]:
                rel = a.targets[env, t] - p
                row[wp.static(4) + 3 * t] = rel[0]
                row[wp.static(4) + 3 * t + 1] = rel[1]
                row[wp.static(4) + 3 * t + 2] = one
                if wp.dot(rel, rel) <= cover2:
                    bits = bits | (1 << t)
        features, n_collisions, _separation, _seen = f.observe_neighbors(
            a.nq, a.pos, a.vel, env, agent, a.obs_range, a.reach, zero
        )
        for i in range(wp.static(n_features)):
            row[i + wp.static(header)] = features[i]
        if mode == _OBSERVE_STEP:
            a.cover_bits_out[env, agent] = bits
            a.reward_out[env, agent] = -a.time_penalty - a.collision_penalty * scalar(n_collisions)
        if mode != _OBSERVE_ONLY:
            a.collisions_out[env, agent] = n_collisions
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, header + n_features),
    )


@functools.cache
def finish_kernel(scalar: type, fleet_size: int, n_targets: int):
    """``disc_finish`` (one thread per env) for one precision, fleet size and target count."""
    counts_type = wp.types.vector(n_targets, wp.int32)
    fleet_vec = wp.types.vector(fleet_size, scalar)
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    n_targets_s = scalar(n_targets)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def disc_finish(
        cover_bits: wp.array2d(dtype=wp.int32),
        agents_per_target: int,
        covering_reward: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        found: wp.array2d(dtype=wp.bool),
        obs_out: wp.array3d(dtype=scalar),
        reward_out: wp.array2d(dtype=scalar),
        newly_found_out: wp.array(dtype=wp.int32),
        covered_out: wp.array(dtype=scalar),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        # Covering agents per target, summed from every agent's bit mask once (in registers).
        counts = counts_type()
        if mode == _OBSERVE_STEP:
            # Plain constant ranges: they unroll up to Warp's max_unroll (a wp.static inside would
            # force the fleet loop to unroll whatever its size).
            for a in range(fleet_size):
                bits = cover_bits[env, a]
                for t in range(n_targets):
                    counts[t] += (bits >> t) & 1
        n_found = int(0)
        n_new = int(0)
        for t in range(wp.static(n_targets)):
            is_found = found[env, t]
            if mode == _OBSERVE_STEP and not is_found and counts[t] >= agents_per_target:
                is_found = True
                found[env, t] = True
                n_new += 1
                # The observe kernel wrote this target as still to find: clear its rows.
                base = _TARGETS_AT + 3 * t
                for a in range(wp.static(fleet_size)):
                    obs_out[env, a, base + 0] = zero
                    obs_out[env, a, base + 1] = zero
                    obs_out[env, a, base + 2] = zero
            if is_found:
                n_found += 1
        covered_out[env] = scalar(n_found) / n_targets_s
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        newly_found_out[env] = n_new
        bonus = covering_reward * scalar(n_new)
        prior = fleet_vec()  # loaded up front, see navigation's finish
        for a in range(wp.static(fleet_size)):
            prior[a] = reward_out[env, a]
        finite = bool(True)
        for a in range(wp.static(fleet_size)):
            reward = prior[a] + bonus
            reward_out[env, a] = reward
            finite = finite and health.finite(reward)
        health.flag_env(ep.non_finite, env, finite)
        end_step(ep, env, n_found == wp.static(n_targets))

    return disc_finish


@functools.cache
def reset_kernel(scalar: type, n_targets: int):
    """``disc_reset`` (one thread per env and spawn cell, masked) for one precision and target count."""
    vec2 = vec2_type(scalar)
    f = arena_funcs.reset_funcs(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def disc_reset(
        spawn: f.Spawn,
        targets_out: wp.array2d(dtype=vec2),
        found_out: wp.array2d(dtype=wp.bool),
    ):
        # Agent i takes the cell of i-th smallest key, target t the cell of (A + t)-th smallest;
        # one thread per (env, cell) on the GPU, one env per thread on the CPU.
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        n_cells = spawn.side * spawn.side
        n_agents = spawn.pos.shape[1]
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            rank = f.cell_rank(key, n_cells, cell)
            if rank < n_agents + wp.static(n_targets):
                point = f.spawn_point(spawn, key, cell, rank)
                if rank < n_agents:
                    f.spawn_agent(spawn, key, env, rank, point)
                else:
                    targets_out[env, rank - n_agents] = point
                    found_out[env, rank - n_agents] = False

    return disc_reset
