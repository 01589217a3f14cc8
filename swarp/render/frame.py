"""Frames of one env or a mosaic of many: gather on the device, copy to the host once, rasterize.

A frame is drawn in layers, bottom to top: background and world bounds, obstacles, the scenario's
drawables (``Scenario.drawables``: goals for navigation), the neighbor graph, agents (disc in the
agent's palette color with a heading tick), velocity arrows, agent ids. Everything a frame needs
is indexed on the simulation device and moved to the host in one ``.cpu()`` of one packed buffer;
nothing here runs on the step path or writes to the simulation. The frame's style, overlays and
layout are ``layout.py``'s (re-exported here).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.types import PARAM_RADIUS
from swarp.render.layout import (
    BOUNDS_MARGIN_RADII,
    CENTER_PIXEL_CLEARANCE_PX,
    MAX_SIDE_PX,
    MIN_EXTENT_M,
    PALETTE,
    UNBOUNDED_MARGIN,
    Layout,
    Overlays,
    Style,
    check_extent,
    check_size,
)
from swarp.render.raster import Canvas
from swarp.scenarios.framework.drawables import AGENT_COLOR, DRAWABLE_TYPES, Boxes, Circles, Crosses, Segments

if TYPE_CHECKING:
    from swarp.env.environment import Environment


def _to_host(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Every tensor as float32 numpy, through ONE device-to-host copy of a packed buffer.

    Integer and bool entries are small (codes, indices, flags) and exact in float32.
    """
    if not tensors:
        return {}
    flat = [t.detach().reshape(-1).to(torch.float32) for t in tensors.values()]
    packed = torch.cat(flat).cpu().numpy()
    host, start = {}, 0
    for name, tensor in tensors.items():
        count = tensor.numel()
        host[name] = packed[start : start + count].reshape(tuple(tensor.shape))
        start += count
    return host


class Renderer:
    """Draws frames of an ``Environment``; keeps scratch buffers between frames.

    Use ``render`` for one env and ``mosaic`` for many. ``layout`` describes the last frame (for
    mapping world points to pixels); ``host`` holds the host copies of what it drew.

    Args:
        env: The environment (any device; it is only read).
        style: Colors and minimum sizes.
    """

    def __init__(self, env: Environment, style: Style | None = None):
        self.env = env
        self.style = style or Style()
        self.layout: Layout | None = None
        self.host: dict[str, np.ndarray] = {}
        self._scratch: dict[int, np.ndarray] = {}
        self._background_cache: tuple[tuple, np.ndarray] | None = None

    # --- public ---------------------------------------------------------------------------------

    def render(
        self, env_index: int = 0, width: int = 480, height: int = 480, extent=None, **overlays: Any
    ) -> np.ndarray:
        """One env as an (H, W, 3) uint8 RGB image.

        Args:
            env_index: Which env, in ``[0, n_envs)``.
            width: Image width W [px].
            height: Image height H [px].
            extent: ``(x_min, x_max, y_min, y_max)`` [m] to show; default: the world bounds plus two
                agent radii, or the agents' and obstacles' bounding box (plus a margin) in an unbounded
                world.
            **overlays: ``Overlays`` fields (``neighbors=True``, ``velocity=True``, ``ids=True``...).
        """
        index = self.check_env_index(env_index)
        width, height = check_size("width", width), check_size("height", height)
        return self._frame([index], 1, width, height, 0, extent, Overlays.from_kwargs(**overlays))

    def mosaic(
        self,
        env_indices=None,
        cols: int | None = None,
        tile_size: int | tuple[int, int] | None = None,
        gap: int = 1,
        extent=None,
        **overlays: Any,
    ) -> np.ndarray:
        """Many envs tiled in a grid, as one (H, W, 3) uint8 RGB image.

        Args:
            env_indices: Envs to draw, in tile order (row-major): a sequence or 1-D integer tensor;
                default every env.
            cols: Tiles per row (default ``ceil(sqrt(N))``).
            tile_size: Tile side [px], or ``(width, height)``; default ``clip(1024 // cols, 32, 256)``.
            gap: Pixels between tiles (>= 0).
            extent: As in ``render``; shared by all tiles.
            **overlays: ``Overlays`` fields.

        Returns:
            Image of height ``rows * tile_h + (rows - 1) * gap`` and width ``cols * tile_w + (cols - 1) * gap``.
        """
        indices = self._check_env_indices(env_indices)
        n = len(indices)
        if cols is None:
            cols = math.ceil(math.sqrt(n))
        if isinstance(cols, bool) or not isinstance(cols, (int, np.integer)) or cols < 1:
            raise ValueError(f"cols must be an int >= 1, got {cols!r}")
        cols = min(int(cols), n)
        if tile_size is None:
            tile_size = int(np.clip(1024 // cols, 32, 256))
        tile_w, tile_h = (tile_size, tile_size) if not isinstance(tile_size, (tuple, list)) else tile_size
        tile_w, tile_h = check_size("tile width", tile_w), check_size("tile height", tile_h)
        if isinstance(gap, bool) or not isinstance(gap, (int, np.integer)) or not 0 <= gap <= 64:
            raise ValueError(f"gap must be an int in [0, 64] [px], got {gap!r}")
        rows = -(-n // cols)
        for name, side in (("width", cols * (tile_w + gap)), ("height", rows * (tile_h + gap))):
            if side > MAX_SIDE_PX:
                raise ValueError(
                    f"mosaic {name} would be {side} px (> {MAX_SIDE_PX}); draw fewer envs or pass a smaller "
                    f"tile_size / different cols"
                )
        return self._frame(indices, cols, tile_w, tile_h, int(gap), extent, Overlays.from_kwargs(**overlays))

    # --- validation ---------------------------------------------------------------------------

    def check_env_index(self, env_index) -> int:
        """``env_index`` as an int in [0, n_envs); ``TypeError``/``IndexError`` naming it else."""
        if isinstance(env_index, bool):
            raise TypeError("env_index must be an int, got bool")
        try:
            index = operator.index(env_index)
        except TypeError:
            raise TypeError(f"env_index must be an int, got {type(env_index).__name__} ({env_index!r})") from None
        if not 0 <= index < self.env.n_envs:
            raise IndexError(f"env_index must be in [0, n_envs) = [0, {self.env.n_envs}), got {index}")
        return index

    def _check_env_indices(self, env_indices) -> list[int]:
        if env_indices is None:
            return list(range(self.env.n_envs))
        if isinstance(env_indices, torch.Tensor):
            if env_indices.dim() != 1 or env_indices.dtype.is_floating_point or env_indices.dtype == torch.bool:
                raise TypeError(
                    f"env_indices must be a 1-D integer tensor, got {env_indices.dtype} {list(env_indices.shape)}"
                )
            env_indices = env_indices.tolist()
        if isinstance(env_indices, (int, np.integer)) or not hasattr(env_indices, "__iter__"):
            raise TypeError(f"env_indices must be a sequence of ints or None, got {env_indices!r}")
        indices = [self.check_env_index(i) for i in env_indices]
        if not indices:
            raise ValueError("env_indices must name at least one env")
        return indices

    # --- the frame ------------------------------------------------------------------------------

    def _frame(self, indices, cols, tile_w, tile_h, gap, extent, overlays: Overlays) -> np.ndarray:
        host, drawables = self._gather(indices, overlays)
        if extent is None:
            extent = self._default_extent(host)
        layout = Layout.grid(len(indices), cols, tile_w, tile_h, gap, check_extent(extent))
        canvas = Canvas(layout.height, layout.width, self._background(layout), scratch=self._scratch_for(layout))
        if overlays.obstacles and "obstacle.shape" in host:
            self._draw_obstacles(canvas, layout, host)
        for drawable in drawables:
            self._draw_drawable(canvas, layout, drawable)
        if overlays.neighbors:
            self._draw_neighbors(canvas, layout, host)
        if overlays.lidar:
            self._draw_lidar(canvas, layout, host)
        self._draw_agents(canvas, layout, host, overlays.headings)
        if overlays.velocity:
            self._draw_velocity(canvas, layout, host, overlays.velocity_scale)
        image = canvas.image
        if overlays.ids:
            image = self._draw_ids(image, layout, host)
        self.layout, self.host = layout, host
        return image

    def _gather(self, indices: list[int], overlays: Overlays):
        """Index everything the frame needs on the device; one copy to the host."""
        env = self.env
        index = torch.tensor(indices, dtype=torch.long).to(env.torch_device)
        state = env.state
        # index_select, not tensor[index]: on a small CPU the latter runs a parallel region whose
        # thread wake-up alone costs more than the frame (docs/benchmarks.md, "Rendering").
        tensors = {"pos": state.pos.index_select(0, index), "theta": state.theta.index_select(0, index)}
        # Radii [N, A] from the parameter table: per env when the environment randomizes them.
        radius = env.agent_params[..., PARAM_RADIUS]
        tensors["radius"] = radius.index_select(0, index if radius.shape[0] > 1 else torch.zeros_like(index))
        if env.alive is not None:  # agents absent or gone are not drawn
            tensors["alive"] = env.alive.index_select(0, index)
        if overlays.velocity:
            tensors["vel"] = state.vel.index_select(0, index)
        if overlays.obstacles:
            obstacles = env.world.model.obstacle_tensors()
            if obstacles["shape"].shape[1]:
                rows = index if obstacles["shape"].shape[0] > 1 else torch.zeros_like(index)
                tensors.update({f"obstacle.{name}": value.index_select(0, rows) for name, value in obstacles.items()})
        if overlays.neighbors:
            # The rows of ``env.world.neighbor_lists()`` for the drawn envs only: the raw K-major
            # lists and counts; entries past each count are masked on the host (``_draw_neighbors``).
            neighbors = env.world.neighbors
            tensors["neighbors.nbr"] = wp.to_torch(neighbors.nbr).index_select(0, index)
            tensors["neighbors.count"] = wp.to_torch(neighbors.count).index_select(0, index)
        if overlays.lidar:
            if env.lidar is None:
                raise ValueError("the lidar overlay needs an environment built with lidar_rays > 0")
            with env.streams.scope():
                tensors["lidar"] = env.lidar.scan().distance.index_select(0, index)
        drawables = list(env.scenario.drawables(index)) if overlays.scenario else []
        for i, drawable in enumerate(drawables):
            if not isinstance(drawable, DRAWABLE_TYPES):
                raise TypeError(
                    f"{type(env.scenario).__name__}.drawables() returned a {type(drawable).__name__}; expected "
                    f"one of {[t.__name__ for t in DRAWABLE_TYPES]} (swarp.scenarios.framework.drawables)"
                )
            for field in dataclasses.fields(drawable):
                value = getattr(drawable, field.name)
                if isinstance(value, torch.Tensor):
                    tensors[f"drawable{i}.{field.name}"] = value
        host = _to_host(tensors)
        drawables = [
            dataclasses.replace(
                d,
                **{
                    f.name: host[f"drawable{i}.{f.name}"]
                    for f in dataclasses.fields(d)
                    if f"drawable{i}.{f.name}" in host
                },
            )
            for i, d in enumerate(drawables)
        ]
        return host, drawables

    def _default_extent(self, host) -> tuple[float, float, float, float]:
        bounds = self.env.world.model.world.bounds
        reach = float(host["radius"].max())
        if bounds is not None:  # with a margin: agents pressing into soft walls stay in view
            margin = BOUNDS_MARGIN_RADII * reach
            return (bounds[0] - margin, bounds[1] + margin, bounds[2] - margin, bounds[3] + margin)
        points = [host["pos"].reshape(-1, 2)]
        if "obstacle.center" in host:
            live = host["obstacle.shape"].reshape(-1) != int(ObstacleShape.NONE)
            points.append(host["obstacle.center"].reshape(-1, 2)[live])
            reach = max(reach, float(np.abs(host["obstacle.size"]).max(initial=0.0)))
        points = np.concatenate(points)
        points = points[np.isfinite(points).all(axis=1)]
        if not len(points):
            points = np.zeros((1, 2))
        low, high = points.min(axis=0) - reach, points.max(axis=0) + reach
        center, half = 0.5 * (low + high), 0.5 * max(float((high - low).max()) * (1 + UNBOUNDED_MARGIN), MIN_EXTENT_M)
        return (center[0] - half, center[0] + half, center[1] - half, center[1] + half)

    def _scratch_for(self, layout: Layout) -> np.ndarray:
        size = layout.width * layout.height
        if size not in self._scratch:
            self._scratch.clear()
            self._scratch[size] = np.full(size, -1, dtype=np.int64)
        return self._scratch[size]

    def _background(self, layout: Layout) -> np.ndarray:
        """The image before any shape: one tile (bounds, outside) drawn once and copied to every tile.

        Cached for the last layout (the viewer and videos draw the same layout frame after frame).
        """
        key = (
            layout.width,
            layout.height,
            layout.cols,
            layout.tile_width,
            layout.tile_height,
            layout.gap,
            len(layout.origin),
            layout.extent,
        )
        if self._background_cache is not None and self._background_cache[0] == key:
            return self._background_cache[1]
        style = self.style
        bounds = self.env.world.model.world.bounds
        tile = Canvas(layout.tile_height, layout.tile_width, style.outside if bounds else style.background)
        if bounds is not None:
            x_min, x_max, y_min, y_max = bounds
            corners = layout.world_to_pixel([[x_min, y_max], [x_max, y_max], [x_max, y_min], [x_min, y_min]])
            corners = (corners - layout.clip[0, :2]).astype(np.float32)
            left, top = np.clip(np.rint(corners[0]), 0, [layout.tile_width, layout.tile_height]).astype(int)
            right, bottom = np.clip(np.rint(corners[2]), 0, [layout.tile_width, layout.tile_height]).astype(int)
            tile.image[top:bottom, left:right] = style.background
            half_width = 0.5 * style.bounds_width_px
            tile.capsules(corners, np.roll(corners, -1, axis=0), half_width, style.bounds)
        pitch_w, pitch_h = layout.tile_width + layout.gap, layout.tile_height + layout.gap
        padded = np.empty((layout.rows * pitch_h, layout.cols * pitch_w, 3), dtype=np.uint8)
        padded[:] = style.gap
        grid = padded.reshape(layout.rows, pitch_h, layout.cols, pitch_w, 3)
        grid[:, : layout.tile_height, :, : layout.tile_width] = tile.image[None, :, None]
        n_tiles = layout.origin.shape[0]
        for empty in range(n_tiles, layout.rows * layout.cols):  # unused cells of the last row
            grid[empty // layout.cols, :, empty % layout.cols] = style.gap
        background = np.ascontiguousarray(padded[: layout.height, : layout.width])
        self._background_cache = (key, background)
        return background

    # --- layers ---------------------------------------------------------------------------------

    def _pixels(self, layout: Layout, xy: np.ndarray) -> np.ndarray:
        """[N, M, 2] world points of tile n -> pixels, float32."""
        tiles = np.arange(xy.shape[0]).reshape(-1, *([1] * (xy.ndim - 2)))
        return layout.world_to_pixel(xy, tiles).astype(np.float32)

    @staticmethod
    def _per_item(layout: Layout, n_items: int) -> np.ndarray:
        """Clip rectangles [N * M, 4] of items laid out [N, M]."""
        return np.repeat(layout.clip, n_items, axis=0)

    def _colors(self, color, n_tiles: int, n_items: int) -> np.ndarray:
        if isinstance(color, str):
            if color != AGENT_COLOR:
                raise ValueError(f"a drawable color must be an RGB triple or {AGENT_COLOR!r}, got {color!r}")
            palette = np.asarray(self.style.palette, dtype=np.float32)
            per_item = palette[np.arange(n_items) % len(palette)]
        else:
            rgb = np.asarray(color, dtype=np.float32)
            if rgb.shape != (3,):
                raise ValueError(f"a drawable color must be an RGB triple or {AGENT_COLOR!r}, got {color!r}")
            per_item = np.broadcast_to(rgb, (n_items, 3))
        return np.broadcast_to(per_item, (n_tiles, n_items, 3)).reshape(-1, 3)

    def _draw_obstacles(self, canvas: Canvas, layout: Layout, host) -> None:
        shape = host["obstacle.shape"].astype(np.int64)
        n_slots = shape.shape[1]
        clip = self._per_item(layout, n_slots)
        center = self._pixels(layout, host["obstacle.center"]).reshape(-1, 2)
        size = host["obstacle.size"].reshape(-1, 2) * layout.scale
        angle = host["obstacle.angle"].reshape(-1)
        shape = shape.reshape(-1)
        color = self.style.obstacle
        circle = shape == ObstacleShape.CIRCLE
        canvas.capsules(center[circle], center[circle], size[circle, 0], color, clip=clip[circle])
        box = shape == ObstacleShape.BOX
        # World angles are counter-clockwise with y up; on screen y points down.
        canvas.boxes(center[box], size[box], -angle[box], color, clip=clip[box])
        segment = shape == ObstacleShape.SEGMENT
        axis = np.stack([np.cos(angle[segment]), -np.sin(angle[segment])], axis=1) * size[segment, :1]
        thickness = np.maximum(size[segment, 1], 0.5)
        canvas.capsules(center[segment] - axis, center[segment] + axis, thickness, color, clip=clip[segment])

    def _draw_drawable(self, canvas: Canvas, layout: Layout, drawable) -> None:
        first = drawable.center if hasattr(drawable, "center") else drawable.start
        first = np.asarray(first, dtype=np.float32)
        n_tiles = len(layout.origin)
        if first.ndim != 3 or first.shape[0] != n_tiles or first.shape[2] != 2:
            raise ValueError(
                f"{type(self.env.scenario).__name__}.drawables(): {type(drawable).__name__} points must be "
                f"[N, M, 2] with N = {n_tiles} (one row per drawn env), got {list(first.shape)}"
            )
        n_items = first.shape[1]
        clip = self._per_item(layout, n_items)
        color = self._colors(drawable.color, n_tiles, n_items)
        keep = np.ones(n_tiles * n_items, dtype=bool)
        if drawable.mask is not None:
            keep = np.broadcast_to(np.asarray(drawable.mask) > 0.5, (n_tiles, n_items)).reshape(-1)

        def per_item(value) -> np.ndarray:  # number or [N, M] -> [N * M]
            return np.broadcast_to(np.asarray(value, dtype=np.float32), (n_tiles, n_items)).reshape(-1)

        points = self._pixels(layout, first).reshape(-1, 2)
        if isinstance(drawable, Circles):
            radius = per_item(drawable.radius) * layout.scale
            canvas.capsules(
                points[keep], points[keep], radius[keep], color[keep], width=drawable.width_px, clip=clip[keep]
            )
        elif isinstance(drawable, Segments):
            end = self._pixels(layout, np.asarray(drawable.end, dtype=np.float32)).reshape(-1, 2)
            half_width = 0.5 * drawable.width_px
            canvas.capsules(points[keep], end[keep], half_width, color[keep], clip=clip[keep])
        elif isinstance(drawable, Crosses):
            arm = per_item(drawable.size)[keep, None] * layout.scale
            directions = ((1.0, 1.0), (1.0, -1.0)) if drawable.diagonal else ((1.0, 0.0), (0.0, 1.0))
            for direction in directions:
                offset = arm * (np.asarray(direction, np.float32) / np.linalg.norm(direction))
                canvas.capsules(
                    points[keep] - offset, points[keep] + offset, 0.5 * drawable.width_px, color[keep], clip=clip[keep]
                )
        elif isinstance(drawable, Boxes):
            half = np.broadcast_to(np.asarray(drawable.half_extents, np.float32), (n_tiles, n_items, 2))
            angle = -per_item(drawable.angle)
            canvas.boxes(
                points[keep],
                half.reshape(-1, 2)[keep] * layout.scale,
                angle[keep],
                color[keep],
                width=drawable.width_px,
                clip=clip[keep],
            )

    def _draw_neighbors(self, canvas: Canvas, layout: Layout, host) -> None:
        raw = host["neighbors.nbr"].astype(np.int64).transpose(0, 2, 1)  # [N, K, A] storage -> [N, A, K]
        count = host["neighbors.count"].astype(np.int64)  # [N, A]
        neighbors = np.where(np.arange(raw.shape[2]) < count[..., None], raw, -1)  # as world.neighbor_lists()
        pixels = self._pixels(layout, host["pos"])  # [N, A, 2]
        tile, agent, slot = np.nonzero(neighbors >= 0)
        other = neighbors[tile, agent, slot]
        # Draw each pair once: i -> j with i < j, or i -> j with i > j when j's list lacks i (truncated).
        reverse_listed = (neighbors[tile, other] == agent[:, None]).any(axis=1)
        once = (agent < other) | ~reverse_listed
        tile, agent, other = tile[once], agent[once], other[once]
        canvas.capsules(pixels[tile, agent], pixels[tile, other], 0.75, self.style.neighbor, clip=layout.clip[tile])

    def _draw_lidar(self, canvas: Canvas, layout: Layout, host) -> None:
        distance = host["lidar"]  # [N, A, R] [m]
        n_rays = distance.shape[2]
        angle = host["theta"][..., None] + 2.0 * np.pi * np.arange(n_rays) / n_rays  # as the kernel's rays
        ends = host["pos"][:, :, None, :] + distance[..., None] * np.stack([np.cos(angle), np.sin(angle)], -1)
        starts = np.broadcast_to(self._pixels(layout, host["pos"])[:, :, None, :], ends.shape)
        clip = self._per_item(layout, distance.shape[1] * n_rays)
        canvas.capsules(
            starts.reshape(-1, 2), self._pixels(layout, ends).reshape(-1, 2), 0.75, self.style.lidar, clip=clip
        )

    def _agent_radius_px(self, layout: Layout, host) -> np.ndarray:
        """[N, A] drawn agent radii [px]."""
        return np.maximum(host["radius"] * layout.scale, self.style.min_agent_radius_px)

    def _draw_agents(self, canvas: Canvas, layout: Layout, host, headings: bool) -> None:
        n_tiles, n_agents = host["pos"].shape[:2]
        keep = host["alive"].reshape(-1).astype(bool) if "alive" in host else slice(None)
        centers = self._pixels(layout, host["pos"]).reshape(-1, 2)[keep]
        radius = self._agent_radius_px(layout, host).reshape(-1)[keep]
        clip = self._per_item(layout, n_agents)[keep]
        colors = self._colors(AGENT_COLOR, n_tiles, n_agents)[keep]
        canvas.capsules(centers, centers, radius, colors, clip=clip)
        if not headings:
            return
        big = radius >= self.style.heading_min_radius_px
        theta = host["theta"].reshape(-1)[keep][big]
        direction = np.stack([np.cos(theta), -np.sin(theta)], axis=1) * radius[big, None]
        # The tick starts far enough out that the pixel holding the centre (whose own centre is at
        # most 0.71 px away) gets none of its anti-aliased edge: that pixel shows the agent's color.
        half_width = np.maximum(0.12 * radius[big], 0.6)
        start = np.maximum(0.35 * radius[big], half_width + CENTER_PIXEL_CLEARANCE_PX)
        unit = direction / radius[big, None]
        canvas.capsules(
            centers[big] + start[:, None] * unit,
            centers[big] + 0.85 * direction,
            half_width,
            self.style.heading,
            clip=clip[big],
        )

    def _draw_velocity(self, canvas: Canvas, layout: Layout, host, velocity_scale: float) -> None:
        start = self._pixels(layout, host["pos"]).reshape(-1, 2)
        shaft = host["vel"].reshape(-1, 2) * np.float32(velocity_scale * layout.scale) * np.float32([1.0, -1.0])
        length = np.linalg.norm(shaft, axis=1)
        show = length > 1.0  # arrows shorter than a pixel are noise
        start, shaft, length = start[show], shaft[show], length[show, None]
        clip = np.repeat(layout.clip, host["pos"].shape[1], axis=0)[show]
        tip = start + shaft
        back = -shaft / length * np.minimum(0.35 * length, 8.0)
        heads = []
        for angle in (0.45, -0.45):  # arrowhead half-angle [rad]
            c, s = math.cos(angle), math.sin(angle)
            heads.append(tip + np.stack([c * back[:, 0] - s * back[:, 1], s * back[:, 0] + c * back[:, 1]], axis=1))
        starts = np.concatenate([start, tip, tip])
        ends = np.concatenate([tip, *heads])
        canvas.capsules(starts, ends, 0.75, self.style.velocity, clip=np.concatenate([clip, clip, clip]))

    def _draw_ids(self, image: np.ndarray, layout: Layout, host) -> np.ndarray:
        try:
            from PIL import Image, ImageDraw, ImageFont
        except ImportError:
            raise ImportError("render option ids=True needs Pillow: pip install 'swarp[viz]'") from None
        picture = Image.fromarray(image)
        draw = ImageDraw.Draw(picture)
        font_px = int(np.clip(layout.tile_height / 40, 8, 16))
        try:
            font = ImageFont.load_default(size=font_px)
        except TypeError:  # Pillow < 10.1 has no sized default font
            font = ImageFont.load_default()
        n_tiles, n_agents = host["pos"].shape[:2]
        centers = self._pixels(layout, host["pos"])
        radius = self._agent_radius_px(layout, host)
        for tile in range(n_tiles):
            x0, y0, x1, y1 = layout.clip[tile]
            for agent in range(n_agents):
                x, y = centers[tile, agent] + radius[tile, agent] * 0.75
                if x0 <= x < x1 and y0 <= y < y1:
                    draw.text((float(x), float(y)), str(agent), fill=self.style.text, font=font)
        return np.array(picture)


_RENDERERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def renderer_for(env: Environment) -> Renderer:
    """The cached default ``Renderer`` of ``env`` (created on first use, dropped with the env)."""
    renderer = _RENDERERS.get(env)
    if renderer is None:
        renderer = _RENDERERS[env] = Renderer(env)
    return renderer


def render_frame(
    env: Environment, env_index: int = 0, width: int = 480, height: int = 480, extent=None, **overlays: Any
) -> np.ndarray:
    """One env of ``env`` as an (H, W, 3) uint8 RGB image; see ``Renderer.render``."""
    return renderer_for(env).render(env_index, width=width, height=height, extent=extent, **overlays)


def render_mosaic(
    env: Environment,
    env_indices=None,
    cols: int | None = None,
    tile_size: int | tuple[int, int] | None = None,
    gap: int = 1,
    extent=None,
    **overlays: Any,
) -> np.ndarray:
    """Many envs of ``env`` tiled in one (H, W, 3) uint8 RGB image; see ``Renderer.mosaic``."""
    return renderer_for(env).mosaic(env_indices, cols=cols, tile_size=tile_size, gap=gap, extent=extent, **overlays)


__all__ = [
    "Layout",
    "Overlays",
    "PALETTE",
    "Renderer",
    "Style",
    "check_size",
    "render_frame",
    "render_mosaic",
    "renderer_for",
]
