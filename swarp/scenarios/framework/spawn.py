"""Spawn sampling shared by scenario resets: a uniform random subset of jittered grid cells.

The arena ``[-L, L]^2`` is cut into ``G x G`` cells. A reset gives every cell a random key and
takes the k cells with the smallest keys, the i-th smallest going to agent i: a uniform random
k-subset in uniformly random order. Each point is then jittered inside its cell while keeping a
clearance from the cell's edges, so points are separated by at least twice the clearance *by
construction*: no rejection loop, one pass, any number of envs at once. Keeping the draw uniform
over subsets matters: a cheaper structured draw passes every separation test while collapsing the
reachable layouts, which shows up much later as a generalisation failure.

Ranking by keys (rather than a sequential Fisher-Yates shuffle) makes the draw parallel: the Warp
twin runs one thread per (env, cell), each counting the cells whose (key, cell index) pair sorts
before its own, so no thread waits on a chain of dependent memory accesses; the torch twin is a
stable sort of the keys. Keys have 24 bits; ties are broken by cell index.

Both twins live here side by side: Warp functions for the fused reset kernels and torch functions
for the reference. They consume the same counter-based random bits (``swarp.core.rng``), so the
same cells come out of both. A tie between two keys (probability about ``C^2 / 2^25`` per draw of
C cells) breaks by cell index, a bias far below anything a test or a policy can see.
"""

import functools
import math
from types import SimpleNamespace

import torch
import warp as wp

from swarp.core.precision import vec2_type
from swarp.core.rng import INV_2_24, uniform_u24, uniform_u24_torch


def cells_per_side(world_size: float, clearance: float, min_cells: int, requested: int | None = None) -> int:
    """Pick G for an arena of half-size ``world_size`` [m]: enough cells for ``min_cells`` points
    (at least twice as many, for variety) while every cell stays wider than ``2 * clearance`` [m].

    Raises a ValueError naming the limits when the arena is too small for the request.
    """
    max_side = int(math.floor(2.0 * world_size / (2.0 * clearance * 1.05)))
    if requested is not None:
        side = requested
    else:
        side = max(2, math.ceil(math.sqrt(2 * min_cells)))
        side = min(side, max_side) if side * side > min_cells else side
    if side * side < min_cells or side > max_side or side < 1:
        raise ValueError(
            f"cannot place {min_cells} separated points in an arena of half-size {world_size} m with clearance "
            f"{clearance} m: that needs a grid of at least {math.ceil(math.sqrt(min_cells))}^2 cells, but cells "
            f"can be at most {max_side} per side; enlarge world_size or reduce n_agents/n_obstacles"
        )
    return side


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Warp twins for one precision."""
    vec2 = vec2_type(scalar)
    inv = scalar(INV_2_24)
    half = scalar(0.5)
    one = scalar(1.0)
    two = scalar(2.0)

    @wp.func
    def uniform(key: wp.uint32, index: int) -> scalar:
        """Uniform in [0, 1) with 24 random bits."""
        return scalar(uniform_u24(key, index)) * inv

    @wp.func
    def before(key_a: int, cell_a: int, key_b: int, cell_b: int) -> bool:
        """Whether (key_a, cell_a) sorts before (key_b, cell_b)."""
        return key_a < key_b or (key_a == key_b and cell_a < cell_b)

    @wp.func
    def cell_rank(key: wp.uint32, draw_base: int, n_cells: int, cell: int) -> int:
        """How many cells have a smaller (key, index) than ``cell`` under the keys of draws
        ``draw_base + c``: ``cell``'s rank in the ranked spawn (the thread of one cell computes it)."""
        mine = uniform_u24(key, draw_base + cell)
        rank = int(0)
        for c in range(n_cells):
            if before(uniform_u24(key, draw_base + c), c, mine, cell):
                rank += 1
        return rank

    @wp.func
    def nth_key(key: wp.uint32, draw_base: int, n_cells: int, n: int) -> wp.vec2i:
        """(key, cell) of the n-th smallest cell key (0-based), or (-1, -1) when ``n < 0``.

        O(n_cells * (n + 1)): meant for small ``n`` (the obstacle count)."""
        best = wp.vec2i(-1, -1)
        for _ in range(n + 1):
            next_key = int(1 << 30)
            next_cell = int(1 << 30)
            for c in range(n_cells):
                k = uniform_u24(key, draw_base + c)
                if before(best[0], best[1], k, c) and before(k, c, next_key, next_cell):
                    next_key = k
                    next_cell = c
            best = wp.vec2i(next_key, next_cell)
        return best

    @wp.func
    def cell_point(cell: int, side: int, world_size: scalar, jitter: scalar, key: wp.uint32, draw: int) -> vec2:
        """A point in ``cell``: its centre plus a uniform offset in ``[-jitter, jitter]^2`` (draws
        ``draw`` and ``draw + 1``)."""
        width = two * world_size / scalar(side)
        cx = scalar(cell % side)
        cy = scalar(cell / side)
        ux = uniform(key, draw) * two - one
        uy = uniform(key, draw + 1) * two - one
        return vec2(-world_size + (cx + half) * width + ux * jitter, -world_size + (cy + half) * width + uy * jitter)

    return SimpleNamespace(uniform=uniform, before=before, cell_rank=cell_rank, nth_key=nth_key, cell_point=cell_point)


# --- torch twins ------------------------------------------------------------------------------


def uniform_torch(key: torch.Tensor, index: int | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Torch twin of ``uniform``: [E] (or broadcast) uniforms in [0, 1) of the given dtype."""
    return uniform_u24_torch(key, index).to(dtype) * INV_2_24


def cell_keys_torch(key: torch.Tensor, draw_base: int, n_cells: int) -> torch.Tensor:
    """[E, C] int64 random keys of every cell (``key`` is [E, 1] or [E])."""
    cells = torch.arange(n_cells, device=key.device).view(1, n_cells)
    return uniform_u24_torch(key.view(-1, 1), draw_base + cells)


def smallest_cells_torch(keys: torch.Tensor, count: int, eligible: torch.Tensor | None = None) -> torch.Tensor:
    """[E, count] int64: the cells with the smallest keys (ties by cell index), smallest first,
    among ``eligible`` [E, C] bool cells when given. Torch twin of ranking by ``before``."""
    if eligible is not None:
        keys = torch.where(eligible, keys, torch.full_like(keys, 1 << 30))
    return torch.sort(keys, dim=1, stable=True).indices[:, :count]


def cell_point_torch(
    cell: torch.Tensor,
    side: int,
    world_size: float,
    jitter: float,
    key: torch.Tensor,
    draw: torch.Tensor | int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Torch twin of ``cell_point``: cells [...] int64 -> points [..., 2]."""
    world_size_t = torch.full((), world_size, dtype=dtype, device=cell.device)
    width = 2.0 * world_size_t / torch.full((), float(side), dtype=dtype, device=cell.device)
    cx = (cell % side).to(dtype)
    cy = torch.div(cell, side, rounding_mode="floor").to(dtype)
    jitter_t = torch.full((), jitter, dtype=dtype, device=cell.device)
    ux = uniform_torch(key, draw, dtype) * 2.0 - 1.0
    uy = uniform_torch(key, draw + 1, dtype) * 2.0 - 1.0
    x = -world_size_t + (cx + 0.5) * width + ux * jitter_t
    y = -world_size_t + (cy + 0.5) * width + uy * jitter_t
    return torch.stack([x, y], dim=-1)
