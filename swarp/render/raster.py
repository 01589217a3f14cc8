"""A vectorized, anti-aliased 2D rasterizer on numpy: batches of capsules and oriented boxes.

Why not a drawing library: a 256-env mosaic holds thousands of small shapes, and a per-shape call
(Pillow's ``ImageDraw``, matplotlib patches) costs microseconds of Python each, without
anti-aliasing. Here every primitive of a batch is evaluated at once: each gets a pixel stamp
covering its bounding box (all stamps of a batch share one size), the shape's signed distance
function gives an anti-aliased coverage per stamp pixel, and the covered pixels are blended into
the image with one fancy-indexed update. Discs, lines, rings and crosses are all capsules (a disc is
a zero-length capsule, a line a thin one); outlines are the band ``-width <= sdf <= 0``.

All coordinates here are pixels: x to the right, y down, pixel (col, row) covering
``[col, col + 1) x [row, row + 1)``, so its centre is ``(col + 0.5, row + 0.5)``.
"""

from __future__ import annotations

import numpy as np

#: Largest number of stamp pixels evaluated at once (bounds the scratch memory of one batch).
MAX_STAMP_PIXELS = 1 << 21
#: Largest number of primitives evaluated at once.
PRIMS_PER_CHUNK = 4096
#: Anti-aliasing margin around a shape's bounding box [px].
AA_MARGIN_PX = 1.0
#: Coverage is quantized to this many levels when choosing which primitive owns a pixel.
COVERAGE_LEVELS = 255
#: One RGB pixel as an opaque 3-byte item.
_PIXEL_ITEM = np.dtype((np.void, 3))


def _as_rows(value, n: int, width: int | None = None) -> np.ndarray:
    """Broadcast a scalar / vector / per-primitive array to float32 [n] or [n, width]."""
    array = np.asarray(value, dtype=np.float32)
    shape = (n,) if width is None else (n, width)
    return np.ascontiguousarray(np.broadcast_to(array, shape))


class Canvas:
    """An RGB image being drawn on, with batched anti-aliased primitives.

    Within one batch a pixel takes the color of the primitive covering it most (ties: the later
    one), blended over what was there by that coverage; batches drawn later go on top.

    Args:
        height: Image height H [px].
        width: Image width W [px].
        background: RGB fill color, or an (H, W, 3) uint8 image to start from (copied).
        scratch: Optional reusable [H * W] int64 buffer filled with -1 (left so after each batch);
            saves allocating and filling one per canvas.
    """

    def __init__(self, height: int, width: int, background=(255, 255, 255), scratch: np.ndarray | None = None):
        self.height, self.width = int(height), int(width)
        background = np.asarray(background, dtype=np.uint8)
        if background.ndim == 3:
            if background.shape != (self.height, self.width, 3):
                raise ValueError(f"background image must be ({height}, {width}, 3), got {background.shape}")
            self.pixels = np.array(background.reshape(-1, 3))
        else:
            self.pixels = np.empty((self.height * self.width, 3), dtype=np.uint8)
            self.pixels[:] = background
        # Per-pixel "best coverage so far" keys of the batch being composited; -1 everywhere between
        # batches (only the touched entries are reset, so a batch costs O(its pixels), not O(H W)).
        if scratch is None:
            scratch = np.full(self.height * self.width, -1, dtype=np.int64)
        elif scratch.shape != (self.height * self.width,) or scratch.dtype != np.int64:
            raise ValueError(f"scratch must be int64 [{self.height * self.width}], got {scratch.dtype} {scratch.shape}")
        self._owner = scratch
        self._pixel_items = self.pixels.view(_PIXEL_ITEM).reshape(-1)

    @property
    def image(self) -> np.ndarray:
        """The (H, W, 3) uint8 image (a view of the canvas buffer)."""
        return self.pixels.reshape(self.height, self.width, 3)

    # --- primitives -----------------------------------------------------------------------------

    def capsules(self, start, end, radius, color, width=0.0, clip=None) -> None:
        """Draw N capsules (discs when ``start == end``; lines when thin).

        Args:
            start: [N, 2] float first axis end points [px].
            end: [N, 2] float second axis end points [px].
            radius: [N] or scalar capsule radius [px].
            color: [N, 3] or [3] RGB in [0, 255].
            width: [N] or scalar outline width [px]; 0 fills the shape.
            clip: Optional [N, 4] int (x0, y0, x1, y1) pixel rectangle each primitive stays inside.
        """
        start = np.asarray(start, dtype=np.float32).reshape(-1, 2)
        n = start.shape[0]
        if n == 0:
            return
        end = np.asarray(end, dtype=np.float32).reshape(n, 2)
        radius = _as_rows(radius, n)
        width = _as_rows(width, n)
        lo = np.minimum(start, end) - radius[:, None]
        hi = np.maximum(start, end) + radius[:, None]
        params = np.concatenate([start, end - start, radius[:, None], width[:, None]], axis=1)
        self._draw(_capsule_sdf, params, lo, hi, color, clip)

    def boxes(self, center, half_extents, angle, color, width=0.0, clip=None) -> None:
        """Draw N oriented rectangles.

        Args:
            center: [N, 2] float centres [px].
            half_extents: [N, 2] or [2] half sizes along the box axes [px].
            angle: [N] or scalar rotation [rad], clockwise on screen (y points down).
            color: [N, 3] or [3] RGB in [0, 255].
            width: [N] or scalar outline width [px]; 0 fills the shape.
            clip: Optional [N, 4] int (x0, y0, x1, y1) pixel rectangle each primitive stays inside.
        """
        center = np.asarray(center, dtype=np.float32).reshape(-1, 2)
        n = center.shape[0]
        if n == 0:
            return
        half = _as_rows(half_extents, n, 2)
        angle = _as_rows(angle, n)
        cos, sin = np.cos(angle), np.sin(angle)
        reach = np.stack(
            [np.abs(half[:, 0] * cos) + np.abs(half[:, 1] * sin), np.abs(half[:, 0] * sin) + np.abs(half[:, 1] * cos)],
            axis=1,
        )
        params = np.concatenate([center, half, cos[:, None], sin[:, None], _as_rows(width, n)[:, None]], axis=1)
        self._draw(_box_sdf, params, center - reach, center + reach, color, clip)

    # --- the batch pipeline ---------------------------------------------------------------------

    def _draw(self, sdf, params: np.ndarray, lo: np.ndarray, hi: np.ndarray, color, clip) -> None:
        n = params.shape[0]
        colors = _as_rows(color, n, 3)
        finite = np.isfinite(params).all(axis=1) & np.isfinite(lo).all(axis=1) & np.isfinite(hi).all(axis=1)
        lo, hi = np.where(finite[:, None], lo, 0.0), np.where(finite[:, None], hi, 0.0)
        x0 = np.floor(lo[:, 0] - AA_MARGIN_PX).astype(np.int64)
        y0 = np.floor(lo[:, 1] - AA_MARGIN_PX).astype(np.int64)
        x1 = np.ceil(hi[:, 0] + AA_MARGIN_PX).astype(np.int64)
        y1 = np.ceil(hi[:, 1] + AA_MARGIN_PX).astype(np.int64)
        if clip is None:
            clip = np.array([0, 0, self.width, self.height], dtype=np.int64)
        clip = np.broadcast_to(np.asarray(clip, dtype=np.int64), (n, 4))
        x0, y0 = np.maximum(x0, np.maximum(clip[:, 0], 0)), np.maximum(y0, np.maximum(clip[:, 1], 0))
        x1 = np.minimum(x1, np.minimum(clip[:, 2], self.width))
        y1 = np.minimum(y1, np.minimum(clip[:, 3], self.height))
        keep = np.nonzero((x1 > x0) & (y1 > y0) & finite)[0]
        if keep.size == 0:
            return
        span_w, span_h = x1 - x0, y1 - y0
        area = (span_w * span_h)[keep]
        if area.max() > 2 * area.min():
            # Mixed sizes (long and short lines): chunks of similar size waste less of their stamps.
            keep = keep[np.argsort(area, kind="stable")]
        first = 0
        while first < keep.size:
            count = min(keep.size - first, PRIMS_PER_CHUNK)
            while True:  # shrink the chunk until its stamps fit the scratch budget
                part = keep[first : first + count]
                stamp_w, stamp_h = int(span_w[part].max()), int(span_h[part].max())
                if count == 1 or count * stamp_w * stamp_h <= MAX_STAMP_PIXELS:
                    break
                count = max(1, MAX_STAMP_PIXELS // (stamp_w * stamp_h))
            xs = x0[part, None] + np.arange(stamp_w)  # [n, w] pixel columns
            ys = y0[part, None] + np.arange(stamp_h)  # [n, h] pixel rows
            inside = (xs < x1[part, None])[:, None, :] & (ys < y1[part, None])[:, :, None]
            px = (xs + 0.5).astype(np.float32)[:, None, :]
            py = (ys + 0.5).astype(np.float32)[:, :, None]
            distance = sdf(params[part], px, py)  # [n, h, w] signed distance [px]
            coverage = np.clip(0.5 - distance, 0.0, 1.0)
            covered = inside & (coverage > 0.0)
            local, row, col = np.nonzero(covered)
            flat = ys[local, row] * self.width + xs[local, col]
            self._composite(flat, coverage[covered], part[local], colors[part[local]])
            first += count

    def _composite(self, flat: np.ndarray, alpha: np.ndarray, prim: np.ndarray, color: np.ndarray) -> None:
        """Blend ``color`` [n, 3] at pixels ``flat`` [n] with coverage ``alpha`` [n]: one owner per pixel
        (the entry of highest coverage, ties to the higher primitive index ``prim``)."""
        key = (np.rint(alpha * COVERAGE_LEVELS).astype(np.int64) << 32) | prim
        np.maximum.at(self._owner, flat, key)
        owns = self._owner[flat] == key
        self._owner[flat] = -1
        flat, alpha = flat[owns], alpha[owns, None]
        old = np.take(self.pixels, flat, axis=0).astype(np.float32)  # np.take: faster than pixels[flat]
        blended = (old + (color[owns] - old) * alpha + 0.5).astype(np.uint8)
        # Scatter whole pixels as 3-byte items: a 1-D fancy assignment beats 2-D rows (docs/benchmarks.md).
        self._pixel_items[flat] = blended.view(_PIXEL_ITEM).reshape(-1)


def _outline(distance: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Turn a filled shape's distance into that of its inner band of ``width`` (0: unchanged)."""
    band = np.abs(distance + 0.5 * width) - 0.5 * width
    return np.where(width > 0.0, band, distance)


def _capsule_sdf(params: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Signed distance [px] to capsules ``(ax, ay, dx, dy, radius, width)`` rows of ``params``."""
    p = params[:, :, None, None]
    ax, ay, dx, dy, radius, width = p[:, 0], p[:, 1], p[:, 2], p[:, 3], p[:, 4], p[:, 5]
    rel_x, rel_y = px - ax, py - ay
    length2 = np.maximum(dx * dx + dy * dy, np.float32(1e-12))
    t = np.clip((rel_x * dx + rel_y * dy) / length2, 0.0, 1.0)
    off_x, off_y = rel_x - t * dx, rel_y - t * dy
    return _outline(np.sqrt(off_x * off_x + off_y * off_y) - radius, width)


def _box_sdf(params: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Signed distance [px] to boxes ``(cx, cy, hx, hy, cos, sin, width)`` rows of ``params``."""
    p = params[:, :, None, None]
    cx, cy, hx, hy, cos, sin, width = p[:, 0], p[:, 1], p[:, 2], p[:, 3], p[:, 4], p[:, 5], p[:, 6]
    rel_x, rel_y = px - cx, py - cy
    # Into the box frame (rotate by -angle).
    qx = np.abs(rel_x * cos + rel_y * sin) - hx
    qy = np.abs(-rel_x * sin + rel_y * cos) - hy
    outside = np.sqrt(np.maximum(qx, 0.0) ** 2 + np.maximum(qy, 0.0) ** 2)
    return _outline(outside + np.minimum(np.maximum(qx, qy), 0.0), width)


__all__ = ["Canvas"]
