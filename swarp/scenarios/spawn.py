"""Spawn sampling shared by scenario resets: a uniform random subset of jittered grid cells.

The arena ``[-L, L]^2`` is cut into ``G x G`` cells. A reset draws distinct cells with a partial
Fisher-Yates shuffle of a per-env scratch permutation (a uniform random k-subset, in random
order), then jitters each point inside its cell while keeping a clearance from the cell's edges.
Points drawn this way are separated by at least twice the clearance *by construction*: no
rejection loop, one pass, any number of envs at once. Keeping the draw uniform over subsets
matters: a cheaper structured draw passes every separation test while collapsing the reachable
layouts, which shows up much later as a generalisation failure.

Both twins live here side by side: Warp functions for the fused reset kernels and torch functions
for the reference. They consume the same counter-based random bits (``swarp.core.rng``), so the
same cells come out of both. The index mapping ``j = i + (u24 * (n - i)) >> 24`` has a bias of at
most ``n / 2^24`` per draw, far below anything a test or a policy can see.
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
    def init_permutation(perm: wp.array2d(dtype=wp.int32), env: int, n_cells: int):
        for c in range(n_cells):
            perm[env, c] = c

    @wp.func
    def draw_distinct(
        perm: wp.array2d(dtype=wp.int32), env: int, first: int, count: int, pool: int, key: wp.uint32, draw_base: int
    ):
        """Partial Fisher-Yates: make ``perm[env, first:first+count]`` a uniform random ordered subset of
        ``perm[env, first:pool]``, using draws ``draw_base + i``."""
        for i in range(first, first + count):
            n = pool - i
            j = i + int((wp.int64(uniform_u24(key, draw_base + i)) * wp.int64(n)) >> wp.int64(24))
            tmp = perm[env, i]
            perm[env, i] = perm[env, j]
            perm[env, j] = tmp

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

    return SimpleNamespace(
        uniform=uniform, init_permutation=init_permutation, draw_distinct=draw_distinct, cell_point=cell_point
    )


# --- torch twins ------------------------------------------------------------------------------


def uniform_torch(key: torch.Tensor, index: int | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Torch twin of ``uniform``: [E] (or broadcast) uniforms in [0, 1) of the given dtype."""
    return uniform_u24_torch(key, index).to(dtype) * INV_2_24


def init_permutation_torch(n_envs: int, n_cells: int, device) -> torch.Tensor:
    """[E, C] int64 identity permutations."""
    return torch.arange(n_cells, device=device).expand(n_envs, n_cells).clone()


def draw_distinct_torch(
    perm: torch.Tensor, first: int, count: int, pool: int, key: torch.Tensor, draw_base: int
) -> None:
    """Torch twin of ``draw_distinct`` on [E, C] ``perm`` in place; ``key`` is [E] int64."""
    rows = torch.arange(perm.shape[0], device=perm.device)
    for i in range(first, first + count):
        j = i + ((uniform_u24_torch(key, draw_base + i) * (pool - i)) >> 24)
        a, b = perm[:, i].clone(), perm[rows, j].clone()
        perm[:, i] = b
        perm[rows, j] = a


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
    world_size_t = torch.tensor(world_size, dtype=dtype, device=cell.device)
    width = 2.0 * world_size_t / torch.tensor(float(side), dtype=dtype, device=cell.device)
    cx = (cell % side).to(dtype)
    cy = torch.div(cell, side, rounding_mode="floor").to(dtype)
    jitter_t = torch.tensor(jitter, dtype=dtype, device=cell.device)
    ux = uniform_torch(key, draw, dtype) * 2.0 - 1.0
    uy = uniform_torch(key, draw + 1, dtype) * 2.0 - 1.0
    x = -world_size_t + (cx + 0.5) * width + ux * jitter_t
    y = -world_size_t + (cy + 0.5) * width + uy * jitter_t
    return torch.stack([x, y], dim=-1)
