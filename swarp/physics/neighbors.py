"""Neighbor lists: for every agent, the other agents of its env within ``neighbor_radius``.

Lists hold up to ``K = max_neighbors`` entries and are kept sorted by ``(squared distance, agent index)``,
so they are deterministic whatever order candidates are visited in and the two backends produce
identical lists, not just the same sets. When more than K agents are in range the K nearest are
kept, ``total`` keeps the true count and the sticky device-side ``overflow`` flag is raised:
truncation is never silent. Membership is a discrete structure, so these kernels carry no adjoint.

Backends:
    brute: one thread per agent scans every agent of its env, O(A^2) per env. Faster below ~512
        agents per env, and wherever the 3x3 cells hold a large share of the env's agents.
    grid: a sort-based uniform grid of cells of side just over ``neighbor_radius``, hashed into a fixed table
        of buckets per env: count agents per bucket, scan each env's counts in one block, scatter,
        then each agent visits the 3x3 cells around its own. O(A) per env for a fixed density; no
        allocation after set-up. ``runtime.plan.choose_neighbor_method`` chooses between them.
"""

import functools
from types import SimpleNamespace
from typing import Optional

import warp as wp

from swarp.core import env_arrays
from swarp.core.precision import vec2_type
from swarp.runtime import health
from swarp.runtime.alive import with_alive
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.plan import ExecutionPlan, choose_plan

#: Cell coordinates are clamped to this magnitude before hashing so NaN or far-away agents
#: cannot overflow int32.
_CELL_LIMIT = 1.0e6
#: Grid cells are this fraction wider than the neighbor radius, so rounding in the cell coordinates
#: and in the squared distances can never put two agents that the distance test accepts two cells
#: apart (which the 3x3 query would miss). Covers float32 coordinates up to ~10^4 radii from the origin.
_CELL_MARGIN = 1.0e-2


def bucket_count(n_agents: int) -> int:
    """Hash-table buckets per env for the grid backend: a power of two >= 2 A (and >= 64)."""
    n = 64
    while n < 2 * n_agents:
        n *= 2
    return n


def query_struct(scalar: type, masked: bool = False):
    """The Warp struct bundling everything one neighbor-list query reads and writes.

    Passing it whole lets other kernels (a scenario's observation kernel, say) build an agent's
    list in the same thread that then reads it, saving a launch and a round trip through memory.
    ``masked``: with the world's alive mask (``swarp.runtime.alive``), whose dead agents are in no
    list and have an empty one.
    """
    return query_struct_of(scalar, bool(masked))


@functools.cache
def query_struct_of(scalar: type, masked: bool):
    """``query_struct``, cached by its whole key: a call with ``masked`` left out gets the same struct."""
    if masked:
        return with_alive(query_struct_of(scalar, False))
    vec2 = vec2_type(scalar)

    @wp.struct
    class NeighborQuery:
        pos: wp.array2d(dtype=vec2)
        radius: scalar
        near_radius: scalar
        n_buckets: int
        bucket_start: wp.array(dtype=wp.int32)
        bucket_count: wp.array(dtype=wp.int32)
        agent_cell: wp.array2d(dtype=wp.vec2i)
        sorted_agents: wp.array(dtype=wp.int32)
        env_mask: wp.array(dtype=wp.bool)
        use_mask: int
        nbr: wp.array3d(dtype=wp.int32)
        count: wp.array2d(dtype=wp.int32)
        near: wp.array2d(dtype=wp.int32)
        total: wp.array2d(dtype=wp.int32)
        overflow: wp.array(dtype=wp.int32)

    return NeighborQuery


@functools.cache
def cell_funcs(scalar: type) -> SimpleNamespace:
    """The grid backend's cell functions of one precision: ``cell_of(p, inv_cell)`` (the integer
    cell of a position [m] given the inverse cell side [1/m]) and ``bucket_of(cell, n_buckets)``
    (its hash bucket, ``n_buckets`` a power of two)."""
    cell_limit = scalar(_CELL_LIMIT)
    vec2 = vec2_type(scalar)

    @wp.func
    def cell_of(p: vec2, inv_cell: scalar) -> wp.vec2i:
        cx = wp.clamp(wp.floor(p[0] * inv_cell), -cell_limit, cell_limit)
        cy = wp.clamp(wp.floor(p[1] * inv_cell), -cell_limit, cell_limit)
        # NaN survives clamp: route it to cell 0 rather than an undefined int conversion.
        if not health.finite(cx):
            cx = scalar(0.0)
        if not health.finite(cy):
            cy = scalar(0.0)
        return wp.vec2i(int(cx), int(cy))

    @wp.func
    def bucket_of(cell: wp.vec2i, n_buckets: int) -> int:
        h = (cell[0] * 73856093) ^ (cell[1] * 19349663)
        return h & (n_buckets - 1)

    return SimpleNamespace(cell_of=cell_of, bucket_of=bucket_of)


@functools.cache
def insert_funcs(scalar: type, max_neighbors: int, grid: bool) -> SimpleNamespace:
    """The sorted-list order and register insertion of ``build_func``'s lists (width K =
    ``max_neighbors``): ``before(d2, j, held_d2, held_j)`` and ``keep(best_d2, best_j, n_seen, d2, j)``."""
    max_k = max_neighbors
    dist_k = wp.types.vector(max_k, scalar)
    index_k = wp.types.vector(max_k, wp.int32)

    @wp.func
    def before(d2: scalar, j: int, held_d2: scalar, held_j: int) -> bool:
        """Whether candidate ``(d2, j)`` sorts before a held entry. The brute scan visits
        candidates in ascending index, so a tie in distance is always decided for the held
        entry and the index compare is dropped; the grid's visit order is not sorted."""
        if wp.static(grid):
            return d2 < held_d2 or (d2 == held_d2 and j < held_j)
        return d2 < held_d2

    @wp.func
    def keep(best_d2: dist_k, best_j: index_k, n_seen: int, d2: scalar, j: int):
        """The register list ``(best_d2, best_j)`` after offering it in-range candidate
        ``(d2, j)``, the ``n_seen``-th in range: inserted in its sorted place, or dropped behind
        a full list. Every entry at once: entry w takes the candidate if it sorts before entry w
        but not before entry w - 1, the entry above it if it sorts before both, else stays. The
        compares are independent (no chain through the list, unlike a carried compare-and-swap)
        and every index is a compile-time constant, so the list stays in registers. Unused
        entries hold (far, no_agent), which every in-range candidate sorts before; the entry
        pushed off the end is dropped."""
        if n_seen > max_k and not before(d2, j, best_d2[max_k - 1], best_j[max_k - 1]):
            return best_d2, best_j
        for w in range(wp.static(max_k - 1), 0, -1):
            take = before(d2, j, best_d2[w], best_j[w])
            shift = before(d2, j, best_d2[w - 1], best_j[w - 1])
            best_d2[w] = wp.where(take, wp.where(shift, best_d2[w - 1], d2), best_d2[w])
            best_j[w] = wp.where(take, wp.where(shift, best_j[w - 1], j), best_j[w])
        take_first = before(d2, j, best_d2[0], best_j[0])
        best_d2[0] = wp.where(take_first, d2, best_d2[0])
        best_j[0] = wp.where(take_first, j, best_j[0])
        return best_d2, best_j

    return SimpleNamespace(before=before, keep=keep)


@functools.cache
def build_func(scalar: type, max_neighbors: int, register_lists: bool, grid: bool, masked: bool = False):
    """``build_list(q, env, agent)``, the Warp function building one agent's sorted list from a
    ``query_struct(scalar)`` for one float precision, list width K, how a thread keeps its list
    (``ExecutionPlan.register_lists``) and backend (``grid``, else brute force).

    With ``register_lists`` (CUDA) the list lives in registers and a candidate is inserted into
    every entry at once (independent compares, no chain through the list), and the brute scan runs
    in two passes: mark the in-range candidates in a 64-bit mask, then walk the mask. A one-pass
    scan inserts a candidate whenever any thread of the warp keeps it, so with ~12 of 63 candidates
    in range every thread paid nearly every insertion; with the mask a warp pays for its longest
    list only. Without (the CPU: no warps, one thread walks an env), one pass with shifting
    insertion. Every layout gives the same lists. ``masked``: a ``query_struct(scalar, True)``, whose
    dead agents (``swarp.runtime.alive``) are never candidates and keep an empty list."""
    max_k = max_neighbors
    # The top-K list lives in registers while candidates stream past; only kept entries are written.
    dist_k = wp.types.vector(max_k, scalar)
    index_k = wp.types.vector(max_k, wp.int32)
    far = scalar(3.0e38)  # above any in-range squared distance (float32 max is 3.4e38)
    no_agent = wp.constant(2**31 - 1)
    sweep = register_lists
    mask_bits = 64  # candidates per mask word of the two-pass scan
    one_bit = wp.uint64(1)
    no_bits = wp.uint64(0)
    cells = cell_funcs(scalar)
    Query = query_struct(scalar, masked)
    insert = insert_funcs(scalar, max_neighbors, grid)
    before, keep = insert.before, insert.keep

    @wp.func
    def candidate(q: Query, env: int, agent: int, j: int) -> bool:
        """Whether ``j`` may be in ``agent``'s list: another agent, and with the mask alive (a dead
        owner finds no one in range: ``build_list``)."""
        if wp.static(masked):
            return j != agent and q.alive[env, j]
        return j != agent

    @wp.func
    def build_list(q: Query, env: int, agent: int):
        """Build the sorted neighbor list of one agent into ``q``'s outputs, and return it as
        held: ``(d2, index, kept, near, total)``, the squared distances [m^2] and agent indices
        of its entries (vectors of K; entries at ``kept`` and beyond unused) and the counts
        ``q``'s ``count``, ``near`` and ``total`` get. A caller in the same thread reads the
        list from these instead of loading it back (index them by compile-time constants to
        keep them in registers)."""
        r2 = q.radius * q.radius
        if wp.static(masked):
            if not q.alive[env, agent]:
                r2 = scalar(-1.0)  # no squared distance is in range: an empty list
        p = q.pos[env, agent]
        best_d2 = dist_k(far)
        best_j = index_k(no_agent)
        n_total = int(0)
        if wp.static(sweep and not grid):
            n_agents = q.pos.shape[1]
            for first in range(0, n_agents, mask_bits):
                # Pass 1: mark this word's in-range candidates (a loop every thread of a warp
                # runs in step). Distances are computed the same way in both passes, so they
                # agree bit for bit. NaN distances fail the test.
                found = no_bits
                for j in range(first, wp.min(first + mask_bits, n_agents)):
                    delta = q.pos[env, j] - p
                    d2 = wp.dot(delta, delta)
                    if d2 <= r2 and j != agent:
                        found = found | (one_bit << wp.uint64(j - first))
                # Pass 2: insert the marked candidates, lowest index first. The alive mask is read
                # here, for the few in range, not in pass 1 for every agent of the env.
                while found != no_bits:
                    lowest = found & (~found + one_bit)
                    found = found ^ lowest
                    j = first + wp.bit_count(lowest - one_bit)
                    if wp.static(masked):
                        if not q.alive[env, j]:
                            continue
                    delta = q.pos[env, j] - p
                    n_total += 1
                    best_d2, best_j = keep(best_d2, best_j, n_total, wp.dot(delta, delta), j)
        else:
            home = wp.vec2i(0, 0)
            n_ranges = 1
            if wp.static(grid):
                home = q.agent_cell[env, agent]
                n_ranges = 9
            for r in range(n_ranges):
                # Brute force: one range over the whole env. Grid: the 3x3 cells around home.
                cell = wp.vec2i(home[0] + r % 3 - 1, home[1] + r / 3 - 1)
                start = int(0)
                stop = q.pos.shape[1]
                if wp.static(grid):
                    bucket = env * q.n_buckets + cells.bucket_of(cell, q.n_buckets)
                    start = q.bucket_start[bucket]
                    stop = start + q.bucket_count[bucket]
                for s in range(start, stop):
                    j = s
                    if wp.static(grid):
                        j = q.sorted_agents[s]
                        # Buckets are hashed: an agent of another cell may share this bucket;
                        # count each candidate only from its own cell, so it is seen exactly once.
                        cj = q.agent_cell[env, j]
                        if cj[0] != cell[0] or cj[1] != cell[1]:
                            continue
                    if not candidate(q, env, agent, j):
                        continue
                    delta = q.pos[env, j] - p
                    d2 = wp.dot(delta, delta)
                    # Written so that a NaN distance (a non-finite position) is out of range too.
                    if not (d2 <= r2):
                        continue
                    n_total += 1
                    if wp.static(sweep):
                        best_d2, best_j = keep(best_d2, best_j, n_total, d2, j)
                    else:
                        # Shift the entries after the insertion point, in place: run-time
                        # indices, so the list lives in local memory (passing it through a
                        # function would copy it), but an insertion moves only what it must.
                        if n_total > max_k and not before(d2, j, best_d2[max_k - 1], best_j[max_k - 1]):
                            continue
                        slot = wp.min(n_total, max_k) - 1
                        while slot > 0 and before(d2, j, best_d2[slot - 1], best_j[slot - 1]):
                            best_d2[slot] = best_d2[slot - 1]
                            best_j[slot] = best_j[slot - 1]
                            slot -= 1
                        best_d2[slot] = d2
                        best_j[slot] = j
        # Layout [E, K, A]: consecutive agents write consecutive addresses for each k.
        n_kept = wp.min(n_total, max_k)
        near2 = q.near_radius * q.near_radius
        n_near = int(0)
        if wp.static(sweep):
            for k in range(wp.static(max_k)):
                if k < n_kept:
                    q.nbr[env, k, agent] = best_j[k]
                    if best_d2[k] <= near2:
                        n_near = k + 1
        else:
            for k in range(n_kept):
                q.nbr[env, k, agent] = best_j[k]
                if best_d2[k] <= near2:
                    n_near = k + 1
        q.count[env, agent] = n_kept
        q.near[env, agent] = n_near
        q.total[env, agent] = n_total
        if n_total > n_kept:
            q.overflow[0] = 1
        return best_d2, best_j, n_kept, n_near, n_total

    return build_list


@functools.cache
def query_kernel(scalar: type, max_neighbors: int, register_lists: bool, grid: bool, masked: bool = False):
    """The list-building kernel (``build_func``'s arguments), launched over (E, threads per env)
    with a ``query_struct(scalar, masked)`` and the agents per thread."""
    Query = query_struct(scalar, masked)
    build_list = build_func(scalar, max_neighbors, register_lists, grid, masked)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def query(q: Query, agents_per_thread: int):
        env, slot = wp.tid()
        if q.use_mask != 0 and not q.env_mask[env]:
            return
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, q.pos.shape[1])):
            build_list(q, env, agent)

    return query


@functools.cache
def grid_count_kernel(scalar: type):
    """``grid_count``: every agent's cell and its slot in its bucket (counts by atomic add)."""
    vec2 = vec2_type(scalar)
    cells = cell_funcs(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def grid_count(
        pos: wp.array2d(dtype=vec2),
        inv_cell: scalar,
        n_buckets: int,
        bucket_count: wp.array(dtype=wp.int32),
        agent_cell_out: wp.array2d(dtype=wp.vec2i),
        agent_slot_out: wp.array2d(dtype=wp.int32),
    ):
        env, agent = wp.tid()
        cell = cells.cell_of(pos[env, agent], inv_cell)
        bucket = env * n_buckets + cells.bucket_of(cell, n_buckets)
        agent_cell_out[env, agent] = cell
        agent_slot_out[env, agent] = wp.atomic_add(bucket_count, bucket, 1)

    return grid_count


@functools.cache
def grid_scatter_kernel(scalar: type):
    """``grid_scatter``: every agent's index into its bucket's range of the sorted-agent array."""
    cells = cell_funcs(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def grid_scatter(
        n_buckets: int,
        bucket_start: wp.array(dtype=wp.int32),
        agent_cell: wp.array2d(dtype=wp.vec2i),
        agent_slot: wp.array2d(dtype=wp.int32),
        sorted_out: wp.array(dtype=wp.int32),
    ):
        env, agent = wp.tid()
        bucket = env * n_buckets + cells.bucket_of(agent_cell[env, agent], n_buckets)
        sorted_out[bucket_start[bucket] + agent_slot[env, agent]] = agent

    return grid_scatter


def kernels(scalar: type, max_neighbors: int, register_lists: bool = False, masked: bool = False) -> SimpleNamespace:
    """The neighbor kernels and list functions of one configuration, by name: ``build_brute`` and
    ``build_grid`` (``build_func``), ``brute_neighbors`` and ``grid_neighbors`` (``query_kernel``),
    ``grid_count`` and ``grid_scatter`` (each from its cached factory); ``masked``: the variants
    for a world with an alive mask."""
    return SimpleNamespace(
        build_brute=build_func(scalar, max_neighbors, register_lists, False, masked),
        build_grid=build_func(scalar, max_neighbors, register_lists, True, masked),
        brute_neighbors=query_kernel(scalar, max_neighbors, register_lists, False, masked),
        grid_neighbors=query_kernel(scalar, max_neighbors, register_lists, True, masked),
        grid_count=grid_count_kernel(scalar),
        grid_scatter=grid_scatter_kernel(scalar),
    )


#: Threads of the block that scans one env's bucket counts on CUDA (on the CPU a block is one thread).
SCAN_BLOCK = 128


@functools.cache
def bucket_scan(n_buckets: int):
    """The kernel writing each bucket's start in the flat sorted-agent array, one block per env.

    Launched over ``(E, lanes)`` with ``block_dim=lanes`` (``SCAN_BLOCK`` on CUDA, 1 on the CPU,
    where every thread of a launch is a block of its own): the block loads env e's ``n_buckets``
    counts as a tile, scans them together and stores ``e * A`` plus the exclusive prefix sums (env
    e's agents occupy ``[e A, (e + 1) A)``)."""

    @wp.kernel(enable_backward=False, module="unique")
    def scan(counts: wp.array(dtype=wp.int32), agents_per_env: int, start_out: wp.array(dtype=wp.int32)):
        env, _lane = wp.tid()
        offset = env * wp.static(n_buckets)
        running = wp.tile_scan_exclusive(wp.tile_load(counts, shape=wp.static(n_buckets), offset=offset))
        first = wp.tile_full(wp.static(n_buckets), env * agents_per_env, dtype=wp.int32)
        wp.tile_store(start_out, running + first, offset=offset)

    return scan


class NeighborBuffers:
    """Output and scratch arrays of one neighbor build for a batch of ``n_envs`` worlds.

    Attributes:
        nbr: ``wp.array3d(int32)`` [E, K, A] neighbor agent indices (within the env), nearest
            first; entries at ``k >= count`` are stale. Stored K-major so that the k-th neighbors
            of consecutive agents are adjacent in memory (coalesced writes and reads on the GPU).
        count: ``wp.array2d(int32)`` [E, A] entries kept (<= K).
        near: ``wp.array2d(int32)`` [E, A] length of the list prefix within the near (contact) radius.
        total: ``wp.array2d(int32)`` [E, A] agents actually in range (> count means truncated).
        overflow: ``wp.array(int32)`` [1] sticky flag, 1 once any list was truncated.
        alive: The world's alive mask [E, A] bool (``swarp.runtime.alive``) the lists honour, or
            ``None`` (set by ``World``; queries are then of ``query_struct(scalar, True)``).

    ``name`` names ``nbr`` and ``count`` ``"{name}.nbr"`` / ``"{name}.count"`` for
    ``swarp.core.env_arrays`` (a world's lists: a CPU shard's then view its environment's).
    """

    def __init__(
        self,
        n_envs: int,
        n_agents: int,
        max_neighbors: int,
        scalar: type,
        device: str,
        grid: bool,
        name: str | None = None,
    ):
        shape = (n_envs, n_agents)
        self.n_envs, self.n_agents = n_envs, n_agents
        self.max_neighbors = max_neighbors
        nbr_name, count_name = (None, None) if name is None else (f"{name}.nbr", f"{name}.count")
        self.nbr = env_arrays.full(nbr_name, (n_envs, max_neighbors, n_agents), -1, wp.int32, device)
        self.count = env_arrays.zeros(count_name, shape, wp.int32, device)
        self.near = wp.zeros(shape, dtype=wp.int32, device=device)
        self.total = wp.zeros(shape, dtype=wp.int32, device=device)
        self.overflow = wp.zeros(1, dtype=wp.int32, device=device)
        self.n_buckets = bucket_count(n_agents)
        # The brute-force kernel ignores the grid arrays; it gets one-element placeholders.
        n_grid = self.n_buckets * n_envs if grid else 1
        grid_shape = shape if grid else (1, 1)
        self.bucket_count = wp.zeros(n_grid, dtype=wp.int32, device=device)
        self.bucket_start = wp.zeros(n_grid, dtype=wp.int32, device=device)
        self.agent_cell = wp.zeros(grid_shape, dtype=wp.vec2i, device=device)
        self.agent_slot = wp.zeros(grid_shape, dtype=wp.int32, device=device)
        self.sorted_agents = wp.zeros(n_envs * n_agents if grid else 1, dtype=wp.int32, device=device)
        #: Zero-copy torch views of ``nbr``, ``count``, ``near`` and ``total``, made once (torch code
        #: reads them every step; ``torch.compile`` cannot trace a conversion).
        self.torch = SimpleNamespace(
            **{name: wp.to_torch(getattr(self, name)) for name in ("nbr", "count", "near", "total")}
        )
        # A one-element placeholder for kernels launched without an env mask.
        self.no_mask = wp.zeros(1, dtype=wp.bool, device=device)
        self.scalar = scalar
        self.alive: wp.array | None = None
        self._queries: dict = {}

    def query(self, pos: wp.array, radius: float, near_radius: float, env_mask: Optional[wp.array] = None):
        """The ``NeighborQuery`` struct over these buffers (cached: one instance per set of inputs)."""
        alive = self.alive
        key = (pos.ptr, radius, near_radius, None if env_mask is None else env_mask.ptr, alive)
        q = self._queries.get(key)
        if q is None:
            q = query_struct(self.scalar, alive is not None)()
            if alive is not None:
                q.alive = alive
            q.pos = pos
            q.radius = self.scalar(radius)
            q.near_radius = self.scalar(near_radius)
            q.n_buckets = self.n_buckets
            q.bucket_start = self.bucket_start
            q.bucket_count = self.bucket_count
            q.agent_cell = self.agent_cell
            q.sorted_agents = self.sorted_agents
            q.env_mask = env_mask if env_mask is not None else self.no_mask
            q.use_mask = 0 if env_mask is None else 1
            q.nbr = self.nbr
            q.count = self.count
            q.near = self.near
            q.total = self.total
            q.overflow = self.overflow
            self._queries[key] = q
        return q


def build_neighbors(
    pos: wp.array,
    radius: float,
    near_radius: float,
    method: str,
    out: NeighborBuffers,
    env_mask: Optional[wp.array] = None,
    launcher: Launcher = EAGER,
    plan: ExecutionPlan | None = None,
) -> None:
    """Launch the neighbor build for every env (or only those where ``env_mask`` [E] bool is set).

    Args:
        pos: ``wp.array2d(vec2)`` [E, A] positions [m].
        radius: Neighbor radius [m].
        near_radius: Radius [m] of the contact-candidate prefix counted in ``out.near``.
        method: ``"brute"`` or ``"grid"`` (``"auto"`` is resolved by the caller).
        out: Buffers written in place; ``out.overflow`` is only ever raised, never cleared.
        env_mask: Optional [E] bool device array; unmasked envs keep their previous lists. The grid
            backend still bins every env (binning is cheap) but only queries masked ones.
        launcher: Where the launches go (eager, recorded, or captured by the caller).
        plan: The thread layout and list layout (``ExecutionPlan.split``, ``register_lists``);
            default: ``choose_plan`` for the device and the list width.
    """
    if method not in ("brute", "grid"):
        raise ValueError(f"neighbor method must be 'brute' or 'grid', got {method!r}")
    query = out.query(pos, radius, near_radius, env_mask)
    if method == "grid":
        bin_agents(pos, radius, out, launcher)
    if plan is None:
        plan = choose_plan(pos.device, max_neighbors=out.max_neighbors)
    scalar, grid = pos.dtype._wp_scalar_type_, method == "grid"
    kernel = query_kernel(scalar, out.max_neighbors, plan.register_lists, grid, out.alive is not None)
    per_thread, threads = plan.split(pos.shape[1])
    launcher.launch(
        kernel,
        dim=(pos.shape[0], threads),
        inputs=[query, per_thread],
        device=pos.device,
    )


def bin_agents(pos: wp.array, radius: float, out: NeighborBuffers, launcher: Launcher = EAGER) -> None:
    """Grid backend only: bin every agent into its hashed cell (count, per-env scan, scatter).

    After this, ``build_grid`` (or the ``grid_neighbors`` kernel) can query any agent.
    """
    scalar = pos.dtype._wp_scalar_type_
    n_envs, n_agents = pos.shape
    nb = out.n_buckets
    launcher.zero(out.bucket_count)
    launcher.launch(
        grid_count_kernel(scalar),
        dim=(n_envs, n_agents),
        inputs=[pos, scalar(1.0 / (radius * (1.0 + _CELL_MARGIN))), nb, out.bucket_count],
        outputs=[out.agent_cell, out.agent_slot],
        device=pos.device,
    )
    lanes = SCAN_BLOCK if pos.device.is_cuda else 1
    launcher.launch(
        bucket_scan(nb),
        dim=(n_envs, lanes),
        inputs=[out.bucket_count, n_agents],
        outputs=[out.bucket_start],
        device=pos.device,
        block_dim=lanes,
    )
    launcher.launch(
        grid_scatter_kernel(scalar),
        dim=(n_envs, n_agents),
        inputs=[nb, out.bucket_start, out.agent_cell, out.agent_slot],
        outputs=[out.sorted_agents],
        device=pos.device,
    )
