"""What a frame looks like and where it puts things: ``Style`` (colors, sizes), ``Overlays`` (which
optional layers to draw), ``Layout`` (tiles of a frame or mosaic and the world-to-pixel map), the
palette, and the checks of a frame's size and world extent. ``frame.py`` draws with them."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from swarp.scenarios.framework.drawables import Color

#: Matplotlib's "tab10" without its gray (too close to obstacles): one color per agent, cycled.
PALETTE: tuple[Color, ...] = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (188, 189, 34),
    (23, 190, 207),
)
#: Largest frame side [px] (a guard against accidental multi-gigabyte mosaics).
MAX_SIDE_PX = 16384
#: Margin around the content of an unbounded world, as a fraction of its extent.
UNBOUNDED_MARGIN = 0.1
#: Smallest extent [m] of an unbounded world's view.
MIN_EXTENT_M = 1.0
#: Distance [px] from an agent's centre the heading tick keeps clear: a pixel centre's offset (0.71)
#: plus the anti-aliasing half-width (0.5), rounded up.
CENTER_PIXEL_CLEARANCE_PX = 1.25
#: The default view extends the world bounds by this many (largest) agent radii on every side.
BOUNDS_MARGIN_RADII = 2.0


@dataclass(frozen=True)
class Style:
    """Colors (RGB, 0-255) and minimum sizes [px] of a frame.

    Attributes:
        background: Inside the world bounds (everywhere for an unbounded world).
        outside: Beyond the world bounds.
        gap: Between mosaic tiles.
        bounds: The world-bounds outline.
        obstacle: Obstacle fill.
        heading: Heading tick on each agent.
        neighbor: Neighbor-graph edges.
        velocity: Velocity arrows.
        lidar: Lidar rays.
        text: Agent ids.
        palette: Agent colors, agent i takes ``palette[i % len(palette)]``.
        min_agent_radius_px: Agents are drawn at least this large [px].
        heading_min_radius_px: Heading ticks are drawn on agents at least this large [px].
        bounds_width_px: Width of the bounds outline [px].
    """

    background: Color = (255, 255, 255)
    outside: Color = (222, 222, 222)
    gap: Color = (48, 48, 48)
    bounds: Color = (70, 70, 70)
    obstacle: Color = (105, 105, 105)
    heading: Color = (25, 25, 25)
    neighbor: Color = (160, 160, 160)
    velocity: Color = (25, 25, 25)
    lidar: Color = (230, 120, 40)
    text: Color = (0, 0, 0)
    palette: tuple[Color, ...] = PALETTE
    min_agent_radius_px: float = 1.5
    heading_min_radius_px: float = 3.0
    bounds_width_px: float = 1.0


@dataclass(frozen=True)
class Overlays:
    """What a frame shows; ``render(..., name=value)`` keywords override these defaults.

    Attributes:
        obstacles: Obstacles of every shape.
        scenario: The scenario's drawables (``Scenario.drawables``; goals for navigation).
        headings: A tick from each agent's centre along its heading.
        neighbors: The neighbor graph (``env.world.neighbor_lists()``), one line per list entry.
        velocity: Velocity arrows of length ``velocity_scale * |v|``.
        ids: Agent indices as text (needs Pillow, the ``viz`` extra).
        lidar: Each lidar ray from its agent's centre to what it hit (or to its range); needs an
            environment built with ``lidar_rays``. The scan is taken from the current state.
        velocity_scale: Arrow length per speed [s] (an arrow shows where the agent is that much later).
    """

    obstacles: bool = True
    scenario: bool = True
    headings: bool = True
    neighbors: bool = False
    velocity: bool = False
    ids: bool = False
    lidar: bool = False
    velocity_scale: float = 0.25

    @classmethod
    def from_kwargs(cls, **overlays: Any) -> Overlays:
        """Validated ``Overlays`` from keywords; an unknown keyword or a wrong type is an error."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overlays) - set(names))
        if unknown:
            raise TypeError(f"unknown render option(s) {unknown}; valid overlays: {names}")
        for name, value in overlays.items():
            if name == "velocity_scale":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                    raise ValueError(f"velocity_scale must be a number > 0 [s], got {value!r}")
            elif not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"render option {name} must be a bool, got {type(value).__name__} ({value!r})")
        return cls(**overlays)


@dataclass(frozen=True)
class Layout:
    """Where each drawn env lands in the image: tiles in a grid, all with the same world extent.

    Attributes:
        width: Image width W [px].
        height: Image height H [px].
        cols: Tiles per row.
        rows: Tile rows.
        tile_width: Tile width [px].
        tile_height: Tile height [px].
        gap: Gap between tiles [px].
        extent: ``(x_min, x_max, y_min, y_max)`` [m] of the world shown in every tile.
        scale: Pixels per meter [px/m] (the same along x and y).
        origin: [N, 2] float64 pixel position (x right, y down) of the world point ``(x_min, y_max)``
            in each tile.
        clip: [N, 4] int64 pixel rectangle ``(x0, y0, x1, y1)`` of each tile.
    """

    width: int
    height: int
    cols: int
    rows: int
    tile_width: int
    tile_height: int
    gap: int
    extent: tuple[float, float, float, float]
    scale: float
    origin: np.ndarray
    clip: np.ndarray

    @classmethod
    def grid(cls, n_tiles: int, cols: int, tile_width: int, tile_height: int, gap: int, extent) -> Layout:
        """A ``cols``-wide grid of ``n_tiles`` tiles showing ``extent`` [m] each, letterboxed."""
        rows = -(-n_tiles // cols)
        x_min, x_max, y_min, y_max = extent
        scale = min(tile_width / (x_max - x_min), tile_height / (y_max - y_min))
        tile = np.arange(n_tiles)
        left = (tile % cols) * (tile_width + gap)
        top = (tile // cols) * (tile_height + gap)
        origin = np.stack(
            [left + 0.5 * (tile_width - scale * (x_max - x_min)), top + 0.5 * (tile_height - scale * (y_max - y_min))],
            axis=1,
        )
        clip = np.stack([left, top, left + tile_width, top + tile_height], axis=1).astype(np.int64)
        width = cols * tile_width + (cols - 1) * gap
        height = rows * tile_height + (rows - 1) * gap
        return cls(width, height, cols, rows, tile_width, tile_height, gap, tuple(extent), scale, origin, clip)

    def world_to_pixel(self, xy, tile: int = 0) -> np.ndarray:
        """Pixel coordinates ``[..., 2]`` float64 (x right, y down; pixel (c, r) spans [c, c+1) x [r, r+1))
        of world points ``xy`` [..., 2] [m] in tile ``tile`` (or per-point tiles, broadcast)."""
        xy = np.asarray(xy, dtype=np.float64)
        origin = self.origin[np.asarray(tile)]
        x_min, _, _, y_max = self.extent
        offset = np.stack([xy[..., 0] - x_min, y_max - xy[..., 1]], axis=-1)
        return origin + offset * self.scale

    def pixel_to_world(self, pixel, tile: int = 0) -> np.ndarray:
        """World points [..., 2] [m] under pixel coordinates ``pixel`` [..., 2] of tile ``tile``."""
        offset = (np.asarray(pixel, dtype=np.float64) - self.origin[np.asarray(tile)]) / self.scale
        x_min, _, _, y_max = self.extent
        return np.stack([x_min + offset[..., 0], y_max - offset[..., 1]], axis=-1)


def check_extent(extent) -> tuple[float, float, float, float]:
    """``extent`` as 4 floats ``(x_min, x_max, y_min, y_max)`` [m]; ``TypeError`` / ``ValueError`` unless they
    are 4 finite numbers with ``x_min < x_max`` and ``y_min < y_max``."""
    try:
        values = tuple(float(v) for v in extent)
    except TypeError:
        raise TypeError(f"extent must be (x_min, x_max, y_min, y_max) [m], got {extent!r}") from None
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"extent must be 4 finite numbers (x_min, x_max, y_min, y_max) [m], got {extent!r}")
    if not (values[0] < values[1] and values[2] < values[3]):
        raise ValueError(f"extent must satisfy x_min < x_max and y_min < y_max, got {values}")
    return values


def check_size(name: str, value, low: int = 8) -> int:
    """``value`` as an int side length in [``low``, ``MAX_SIDE_PX``] [px]; ``ValueError`` naming ``name`` else."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= MAX_SIDE_PX:
        raise ValueError(f"{name} must be an int in [{low}, {MAX_SIDE_PX}] [px], got {value!r}")
    return int(value)
