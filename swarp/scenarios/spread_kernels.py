"""Spread, fused: the Warp twin of ``spread.py`` (observations, rewards, termination, reset).

* fleets of at most ``ROWS_MAX_AGENTS``: ``observe_agent`` in ``rows.observe_kernels`` (one thread
  per agent: the agent's terms, ``agent_terms``, and its observation row, stored through a shared
  tile on CUDA);
* larger fleets: ``spread_observe`` (one thread per agent and observation pair on the GPU) writes
  the rows, ``spread_agents`` (one thread per agent) the agent's terms: its neighbor list for the
  next step's contacts, its collisions and the distance of landmark ``agent`` to its nearest agent
  (landmarks and agents are equally many, so that covers every landmark once, with no atomics).
* ``spread_finish`` (one thread per env): the shared coverage term and the episode bookkeeping.
* ``spread_reset`` (one thread per env and spawn cell, masked): spawns and headings
  (``spawn_cell``) and landmarks (``env_draw``, both ``arena_funcs.reset_funcs``) from the counter-based RNG, exactly
  the draws of the torch reference.

Each kernel comes from a cached factory keyed by what it compiles for; ``SpreadScenario`` launches
them with its own arrays.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.physics import neighbors
from swarp.runtime import episode, health, rows
from swarp.scenarios.framework import arena_funcs, base

#: Fleets up to this size observe through the row kernels (``rows.observe_kernels``: one thread per
#: agent builds its 4 A + 2 row in registers, stored through a [64, 4 A + 2] shared tile, 25 KB at
#: 24 agents); larger ones through the pair-parallel ``spread_observe`` plus ``spread_agents``.
ROWS_MAX_AGENTS = 24

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def pair_observe_kernel(scalar: type):
    """``spread_observe`` (one thread per agent and observation pair on the GPU), the observation
    rows of fleets larger than ``ROWS_MAX_AGENTS``, for one precision."""
    vec2 = vec2_type(scalar)

    @wp.func
    def obs_pair(
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        landmarks: wp.array2d(dtype=vec2),
        env: int,
        agent: int,
        pair: int,
    ) -> vec2:
        """Observation entries ``2 pair`` and ``2 pair + 1`` of ``agent`` (see the layout in spread.py)."""
        n_agents = pos.shape[1]
        p = pos[env, agent]
        if pair == 0:
            return vel[env, agent]
        if pair == 1:
            return p
        if pair < 2 + n_agents:
            return landmarks[env, pair - 2] - p
        j = pair - 2 - n_agents  # the other agents in index order, skipping this one
        if j >= agent:
            j += 1
        return pos[env, j] - p

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def spread_observe(
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        landmarks: wp.array2d(dtype=vec2),
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        agents_per_thread: int,
        pairs_per_thread: int,
        obs_out: wp.array3d(dtype=scalar),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        # On the GPU one thread per (agent, observation pair): consecutive threads write consecutive
        # entries of the (wide, 4 A + 2) rows, so stores coalesce. On the CPU one thread walks a
        # whole env.
        env, slot, block = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        n_pairs = obs_out.shape[2] / 2
        first = slot * agents_per_thread
        first_pair = block * pairs_per_thread
        finite = bool(True)
        for agent in range(first, wp.min(first + agents_per_thread, pos.shape[1])):
            for pair in range(first_pair, wp.min(first_pair + pairs_per_thread, n_pairs)):
                value = obs_pair(pos, vel, landmarks, env, agent, pair)
                obs_out[env, agent, 2 * pair] = value[0]
                obs_out[env, agent, 2 * pair + 1] = value[1]
                finite = finite and health.finite(value)
        health.flag_env(non_finite_out, env, finite)

    return spread_observe


@functools.cache
def agent_kernels(scalar: type, max_neighbors: int, grid: bool, register_lists: bool):
    """``AgentArgs``, ``agent_terms`` (an agent's own work) and ``spread_agents`` (one thread per
    agent, beside ``spread_observe``) for one precision, neighbor-list width, backend and layout
    (``ExecutionPlan.register_lists``)."""
    vec2 = vec2_type(scalar)
    nbk = neighbors.kernels(scalar, max_neighbors, register_lists)
    build_list = nbk.build_grid if grid else nbk.build_brute
    Query = neighbors.query_struct(scalar)
    big = scalar(1.0e30)

    @wp.struct
    class AgentArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        landmarks: wp.array2d(dtype=vec2)
        nq: Query
        reach: scalar
        cover_radius: scalar
        collision_penalty: scalar
        reward_out: wp.array2d(dtype=scalar)
        landmark_dist_out: wp.array2d(dtype=scalar)
        covered_out: wp.array2d(dtype=wp.bool)
        collisions_out: wp.array2d(dtype=wp.int32)

    @wp.func
    def agent_terms(a: AgentArgs, mode: int, env: int, agent: int):
        """The agent's own work: its neighbor list for the next step's contacts, its collisions, and
        the distance of landmark ``agent`` to its nearest agent (landmarks and agents are equally
        many, so that covers every landmark once, with no atomics)."""
        build_list(a.nq, env, agent)
        p = a.pos[env, agent]
        own_landmark = a.landmarks[env, agent]
        nearest = big
        n_collisions = int(0)
        for j in range(a.pos.shape[1]):
            q = a.pos[env, j]
            to_landmark = own_landmark - q
            nearest = wp.min(nearest, wp.sqrt(wp.dot(to_landmark, to_landmark)))
            delta = q - p
            if j != agent and wp.dot(delta, delta) < a.reach * a.reach:
                n_collisions += 1
        if mode == _OBSERVE_STEP:
            a.reward_out[env, agent] = -(a.collision_penalty * scalar(n_collisions))
        if mode != _OBSERVE_ONLY:
            a.landmark_dist_out[env, agent] = nearest
            a.covered_out[env, agent] = nearest < a.cover_radius
            a.collisions_out[env, agent] = n_collisions

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def spread_agents(
        args: AgentArgs,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        agents_per_thread: int,
    ):
        # One thread per agent, next to the pair-parallel observation of large fleets (inside it,
        # the agent's work made one thread of every warp run long while the others idled).
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, args.pos.shape[1])):
            agent_terms(args, mode, env, agent)

    return SimpleNamespace(AgentArgs=AgentArgs, agent_terms=agent_terms, spread_agents=spread_agents)


@functools.cache
def row_observe_kernels(scalar: type, max_neighbors: int, grid: bool, register_lists: bool, fleet_size: int):
    """``observe_agent`` (an agent's work and its row) in ``rows.observe_kernels``, the observation
    of fleets of at most ``ROWS_MAX_AGENTS``, for ``agent_kernels``' configuration and a fleet size."""
    agents = agent_kernels(scalar, max_neighbors, grid, register_lists)
    AgentArgs, agent_terms = agents.AgentArgs, agents.agent_terms
    obs_dim = 4 * fleet_size + 2
    row_type = wp.types.vector(obs_dim, scalar)

    @wp.func
    def observe_agent(a: AgentArgs, mode: int, env: int, agent: int) -> row_type:
        """The agent's work and its observation row (the layout of ``obs_pair``), for the row
        kernels of small fleets (``ROWS_MAX_AGENTS``): every row index is a compile-time constant."""
        agent_terms(a, mode, env, agent)
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        row = row_type()
        row[0] = v[0]
        row[1] = v[1]
        row[2] = p[0]
        row[3] = p[1]
        for m in range(wp.static(fleet_size)):
            to_landmark = a.landmarks[env, m] - p
            row[4 + 2 * m] = to_landmark[0]
            row[5 + 2 * m] = to_landmark[1]
        for other in range(wp.static(fleet_size - 1)):
            j = other
            if other >= agent:
                j = other + 1  # the other agents in index order, skipping this one
            delta = a.pos[env, j] - p
            row[4 + 2 * fleet_size + 2 * other] = delta[0]
            row[5 + 2 * fleet_size + 2 * other] = delta[1]
        return row

    return rows.observe_kernels(AgentArgs, observe_agent, scalar, obs_dim)


@functools.cache
def finish_kernel(scalar: type, fleet_size: int):
    """``spread_finish`` (one thread per env) for one precision and fleet size."""
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    fleet_vec = wp.types.vector(fleet_size, scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def spread_finish(
        landmark_dist: wp.array2d(dtype=scalar),
        ep: Episode,
        reward_out: wp.array2d(dtype=scalar),
    ):
        env = wp.tid()
        total = zero
        prior = fleet_vec()  # loaded up front, see navigation's finish
        for m in range(wp.static(fleet_size)):
            total += landmark_dist[env, m]
            prior[m] = reward_out[env, m]
        finite = bool(True)
        for a in range(wp.static(fleet_size)):
            reward = -total + prior[a]
            reward_out[env, a] = reward
            finite = finite and health.finite(reward)
        health.flag_env(ep.non_finite, env, finite)
        end_step(ep, env, False)

    return spread_finish


@functools.cache
def reset_kernel(scalar: type):
    """``spread_reset`` (one thread per env and spawn cell, masked) for one precision."""
    vec2 = vec2_type(scalar)
    f = arena_funcs.reset_funcs(scalar)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: spawn points come out bit for bit as on the CPU and in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def spread_reset(spawn: f.Spawn, landmark_extent: scalar, landmarks_out: wp.array2d(dtype=vec2)):
        # Agent i spawns in the cell of i-th smallest spawn key; the thread of cell m also draws
        # landmark m (per-env draws 2 m, 2 m + 1; there are at least as many cells as landmarks).
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            if cell < landmarks_out.shape[1]:
                landmarks_out[env, cell] = vec2(
                    (f.env_draw(key, 2 * cell) * two - one) * landmark_extent,
                    (f.env_draw(key, 2 * cell + 1) * two - one) * landmark_extent,
                )
            f.spawn_cell(spawn, key, env, cell)

    return spread_reset
