"""Warp functions of the arena scenarios' kernels, each the twin of a torch function in ``arena``:
the ranked spawn and per-env draws of the library's resets (``spawn_struct``, ``reset_funcs``,
``spawn_points_kernel``) and the neighbor features, collisions and separation of an observation
(``funcs``). The draw layout of one episode's random stream is here, beside its readers.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key
from swarp.physics import neighbors
from swarp.scenarios.framework import spawn

#: Draw-index layout of one episode's random stream (``swarp.core.rng``) in the library's resets
#: (the arena scenarios, spread, sampling and give_way), in blocks of ``DRAW_BLOCK`` draws:
#:
#: * ``DRAW_CELLS + c``: the key of spawn cell c (``cell_rank``; at most ``DRAW_BLOCK`` cells);
#: * ``DRAW_JITTER + 2 p``, ``+ 2 p + 1``: the jitter of spawn point p in its cell (``spawn_point``);
#: * ``DRAW_HEADING + a``: agent a's heading (``spawn_agent``);
#: * ``DRAW_ENV + i``: the scenario's own per-env draws (``env_draw``, ``env_draws_torch``), open-ended:
#:   flocking's target (3), formation's center and rotation (3), spread's landmarks (2 per landmark:
#:   x, y), sampling's Gaussians (4 per Gaussian: mu_x, mu_y, sigma, amplitude), give_way's spawns
#:   (2 per agent: along and across the lane).
DRAW_BLOCK = 1 << 12
DRAW_CELLS = 0
DRAW_JITTER = 1 * DRAW_BLOCK
DRAW_HEADING = 2 * DRAW_BLOCK
DRAW_ENV = 3 * DRAW_BLOCK

_DRAW_CELLS = wp.constant(DRAW_CELLS)
_DRAW_JITTER = wp.constant(DRAW_JITTER)
_DRAW_HEADING = wp.constant(DRAW_HEADING)
_DRAW_ENV = wp.constant(DRAW_ENV)


# --- Warp twins ----------------------------------------------------------------------------------


@functools.cache
def spawn_struct(scalar: type):
    """The Warp struct of what the library's resets read and write (``spawn_args`` fills it): the
    masked envs and their random streams, the spawn grid (``side`` cells per side over
    ``[-world_size, world_size]^2``, ``jitter`` [m]), the launch's slots (spawn cells unless it says
    otherwise) per thread, and the agent state."""
    vec2 = vec2_type(scalar)

    @wp.struct
    class Spawn:
        env_mask: wp.array(dtype=wp.bool)
        streams: ResetStreams
        side: int
        world_size: scalar
        jitter: scalar
        slots_per_thread: int
        pos: wp.array2d(dtype=vec2)
        theta: wp.array2d(dtype=scalar)
        vel: wp.array2d(dtype=vec2)
        speed: wp.array2d(dtype=scalar)
        ang_vel: wp.array2d(dtype=scalar)

    return Spawn


@functools.cache
def reset_funcs(scalar: type) -> SimpleNamespace:
    """Warp functions of the library's resets for one precision (also in ``funcs``): the ranked
    spawn (``cell_rank``, ``spawn_point``, ``spawn_agent``, ``spawn_cell``), the launch's slots
    (``spawn_cells``, ``spawn_slots``), the per-env draws (``env_draw``) and ``cos_sin`` of drawn
    angles; the draw layout is at ``DRAW_BLOCK``."""
    vec2 = vec2_type(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)
    sp = spawn.funcs(scalar)
    Spawn = spawn_struct(scalar)

    @wp.func
    def cell_rank(key: wp.uint32, n_cells: int, cell: int) -> int:
        """``cell``'s rank in the library's ranked spawn (``spawn.funcs(...).cell_rank``)."""
        return sp.cell_rank(key, _DRAW_CELLS, n_cells, cell)

    @wp.func
    def spawn_key(spawn: Spawn, env: int) -> wp.uint32:
        """The random-stream key of ``env``'s new episode (keyed by its global index)."""
        return episode_key(spawn.streams, env)

    @wp.func
    def spawn_slots(spawn: Spawn, thread: int, n_slots: int) -> wp.vec2i:
        """``[first, stop)`` slots of ``thread`` of a reset launched by ``launch_reset`` over ``n_slots``
        slots per env."""
        first = thread * spawn.slots_per_thread
        return wp.vec2i(first, wp.min(first + spawn.slots_per_thread, n_slots))

    @wp.func
    def spawn_cells(spawn: Spawn, thread: int) -> wp.vec2i:
        """``[first, stop)`` cells of ``thread`` of a reset launched by ``launch_reset`` over the spawn cells."""
        return spawn_slots(spawn, thread, spawn.side * spawn.side)

    @wp.func
    def spawn_point(spawn: Spawn, key: wp.uint32, cell: int, point: int) -> vec2:
        """Where spawn point ``point`` (the rank of ``cell``) lies in ``cell``."""
        return sp.cell_point(cell, spawn.side, spawn.world_size, spawn.jitter, key, _DRAW_JITTER + 2 * point)

    @wp.func
    def spawn_agent(spawn: Spawn, key: wp.uint32, env: int, agent: int, point: vec2):
        """Place ``agent`` at ``point`` [m], at rest, with a random heading in [-pi, pi) (Warp twin of
        ``spawn_agents_torch``)."""
        spawn.pos[env, agent] = point
        spawn.theta[env, agent] = (sp.uniform(key, _DRAW_HEADING + agent) * two - one) * pi
        spawn.vel[env, agent] = vec2(zero, zero)
        spawn.speed[env, agent] = zero
        spawn.ang_vel[env, agent] = zero

    @wp.func
    def spawn_cell(spawn: Spawn, key: wp.uint32, env: int, cell: int) -> int:
        """Place the agent whose rank is ``cell``'s in its point of the cell, if there is one; return
        the rank (>= the agent count: no agent spawns here)."""
        rank = cell_rank(key, spawn.side * spawn.side, cell)
        if rank < spawn.pos.shape[1]:
            spawn_agent(spawn, key, env, rank, spawn_point(spawn, key, cell, rank))
        return rank

    @wp.func
    def env_draw(key: wp.uint32, index: int) -> scalar:
        """Per-env uniform ``index`` in [0, 1) (Warp twin of ``env_draws_torch``)."""
        return sp.uniform(key, _DRAW_ENV + index)

    @wp.func
    def cos_sin(angle: scalar) -> vec2:
        """``(cos, sin)`` of ``angle`` evaluated in float64 and rounded (see ``arena``'s module docstring)."""
        wide = wp.float64(angle)
        return vec2(scalar(wp.cos(wide)), scalar(wp.sin(wide)))

    return SimpleNamespace(
        Spawn=Spawn,
        cell_rank=cell_rank,
        spawn_key=spawn_key,
        spawn_slots=spawn_slots,
        spawn_cells=spawn_cells,
        spawn_point=spawn_point,
        spawn_agent=spawn_agent,
        spawn_cell=spawn_cell,
        env_draw=env_draw,
        cos_sin=cos_sin,
    )


@functools.cache
def spawn_points_kernel(scalar: type):
    """The torch paths' ranked spawn (``spawn_torch``): over (env, thread), the masked envs' spawn
    points ``points_out`` [E, n_points] (ranks below n_points) and their first ``n_agents`` agents'
    state. No FMA contraction: the bits of ``spawn_torch_twin``."""
    vec2 = vec2_type(scalar)
    f = reset_funcs(scalar)
    Spawn = spawn_struct(scalar)

    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def spawn_points(spawn: Spawn, n_agents: int, points_out: wp.array2d(dtype=vec2)):
        env, thread = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        cells = f.spawn_cells(spawn, thread)
        for cell in range(cells[0], cells[1]):
            rank = f.cell_rank(key, spawn.side * spawn.side, cell)
            if rank < points_out.shape[1]:
                point = f.spawn_point(spawn, key, cell, rank)
                points_out[env, rank] = point
                if rank < n_agents:
                    f.spawn_agent(spawn, key, env, rank, point)

    return spawn_points


@functools.cache
def funcs(scalar: type, max_neighbors: int, grid: bool, k_obs: int, register_lists: bool = False) -> SimpleNamespace:
    """Warp functions for one precision, neighbor-list configuration (width K, backend, layout:
    ``ExecutionPlan.register_lists``) and count k of observed neighbors (a compile-time constant: the
    feature loop unrolls into registers)."""
    vec2 = vec2_type(scalar)
    Query = neighbors.query_struct(scalar)
    nbk = neighbors.kernels(scalar, max_neighbors, register_lists)
    build_list = nbk.build_grid if grid else nbk.build_brute
    zero = scalar(0.0)
    one = scalar(1.0)
    n_features = 5 * k_obs
    features_type = wp.types.vector(max(n_features, 1), scalar)
    seen_type = wp.types.vector(max(k_obs, 1), wp.int32)

    @wp.func
    def observe_neighbors(
        nq: Query,
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        env: int,
        agent: int,
        obs_range: scalar,
        reach: scalar,
        sep_distance: scalar,
    ) -> tuple[features_type, int, scalar, seen_type]:
        """Build ``agent``'s neighbor list; return its k neighbor features, its collisions, its
        separation penalty (``sep_distance`` 0: none) and the index of each observed neighbor (-1
        past the last: what ``hear_func`` reads messages from).

        The list is sorted nearest first, so the observed neighbors are its first k entries that
        lie within ``obs_range``, and contacts (the near prefix) and separation pairs are prefixes
        too. The first k entries are read unconditionally (their loads overlap); later ones only
        while they can still be contacts or separation pairs.
        """
        build_list(nq, env, agent)
        p = pos[env, agent]
        v = vel[env, agent]
        count = nq.count[env, agent]
        n_near = nq.near[env, agent]
        range2 = obs_range * obs_range
        reach2 = reach * reach
        sep2 = sep_distance * sep_distance
        features = features_type()
        seen = seen_type()
        n_collisions = int(0)
        penalty = zero
        for w in range(wp.static(k_obs)):
            # Entries past ``count`` are stale (or -1): read this agent instead and discard.
            j = wp.where(w < count, nq.nbr[env, w, agent], agent)
            delta = pos[env, j] - p
            d2 = wp.dot(delta, delta)
            seen[w] = -1
            if w < count:
                if d2 <= range2:
                    seen[w] = j
                    dv = vel[env, j] - v
                    features[5 * w + 0] = delta[0]
                    features[5 * w + 1] = delta[1]
                    features[5 * w + 2] = dv[0]
                    features[5 * w + 3] = dv[1]
                    features[5 * w + 4] = one
                if d2 < reach2:
                    n_collisions += 1
                if d2 < sep2:
                    penalty += one - wp.sqrt(d2) / sep_distance
        for s in range(wp.min(k_obs, count), count):
            j = nq.nbr[env, s, agent]
            delta = pos[env, j] - p
            d2 = wp.dot(delta, delta)
            if s >= n_near and not (d2 < sep2):
                break
            if d2 < reach2:
                n_collisions += 1
            if d2 < sep2:
                penalty += one - wp.sqrt(d2) / sep_distance
        return features, n_collisions, penalty, seen

    return SimpleNamespace(
        vec2=vec2,
        Query=Query,
        n_features=n_features,
        features_type=features_type,
        seen_type=seen_type,
        observe_neighbors=observe_neighbors,
        **vars(reset_funcs(scalar)),
    )


@functools.cache
def hear_func(scalar: type, k_obs: int, comm_dim: int):
    """``hear_neighbors(comm, env, seen) -> vector(C k)``: the messages ``comm[env, j]`` [E, A, C]
    of the observed neighbors ``seen`` (``funcs(...).observe_neighbors``' last output: k indices,
    -1 past the last), zeros past the last (``arena.heard_messages``' twin; in a step's
    observation: a fresh start hears silence)."""
    heard_type = wp.types.vector(max(comm_dim * k_obs, 1), scalar)
    seen_type = wp.types.vector(max(k_obs, 1), wp.int32)

    @wp.func
    def hear_neighbors(comm: wp.array3d(dtype=scalar), env: int, seen: seen_type) -> heard_type:
        heard = heard_type()
        for w in range(wp.static(k_obs)):
            j = seen[w]
            if j >= 0:
                for c in range(wp.static(comm_dim)):
                    heard[w * wp.static(comm_dim) + c] = comm[env, j, c]
        return heard

    return hear_neighbors
