"""Closest points between VMAS's shapes as Warp functions: the twins of ``geometry.py``, float32.

A segment is ``(center, along, half)``: its centre [m], the unit vector ``(cos angle, sin angle)`` of
its angle and half its length [m]. A box is ``(center, along, normal, half_length, half_width)``,
``normal`` the direction of ``angle + pi/2`` (computed with cos and sin, as VMAS does, not as a
rotated ``along``). Each function performs the float32 operations of its ``geometry.py`` twin in the
same order, so inside kernels compiled without FMA contraction (``fuse_fp=False``) it rounds as the
torch reference does, with two rules of its own that make that hold:

* **The norm** of a 2-vector is ``sqrt(fma(y, y, x * x))``: torch's CPU ``vector_norm`` over a
  contiguous last dimension accumulates ``x * x``, then ``y * y`` with a multiply-add its compiler
  fuses, and every norm of the reference is of that kind.
* **Transcendentals** (``cos``, ``sin``, ``exp``, ``log1p``) are evaluated in float64 and rounded once
  to float32, which is the correctly rounded float32 value except in cases of probability about
  2^-29 per call. torch's float32 versions are within an ulp but not correctly rounded (on the CPU,
  SLEEF's vector code, and the C library's in the scalar tail of a vector loop), and no two libraries
  agree bit for bit; the float64 route depends on no float32 library, the CPU's or CUDA's.
  ``tests/physics/test_vmas_mode_warp.py`` shows the rest of the arithmetic equal to the reference's
  to the bit by giving the reference the same correctly rounded transcendentals.

Where several candidates are equally close the earlier one wins (a strict ``<``), as in VMAS; where
none is at a finite distance the points are ``inf``.
"""

from __future__ import annotations

import warp as wp

from swarp.physics.vmas_mode.geometry import QUARTER_TURN

#: ``QUARTER_TURN`` rounded to float32, as VMAS adds it to a float32 angle [rad].
QUARTER_TURN_F32 = wp.constant(wp.float32(QUARTER_TURN))


@wp.func_native("return fmaf(a, b, c);")
def fma(a: wp.float32, b: wp.float32, c: wp.float32) -> wp.float32:
    """``a * b + c`` rounded once (the C library's ``fmaf``, a hardware instruction where there is one)."""
    ...


@wp.func
def norm(v: wp.vec2) -> wp.float32:
    """The Euclidean norm of ``v`` as torch's CPU ``vector_norm`` computes it: ``sqrt(fma(y, y, x x))``."""
    return wp.sqrt(fma(v[1], v[1], v[0] * v[0]))


@wp.func
def dot(a: wp.vec2, b: wp.vec2) -> wp.float32:
    """``a.x b.x + a.y b.y``, each product rounded (torch's ``(a * b).sum(-1)``)."""
    return a[0] * b[0] + a[1] * b[1]


@wp.func
def cross(a: wp.vec2, b: wp.vec2) -> wp.float32:
    """The scalar cross product ``a.x b.y - a.y b.x``, each product rounded."""
    return a[0] * b[1] - a[1] * b[0]


@wp.func
def sign(x: wp.float32) -> wp.float32:
    """-1, 0 or 1 as ``x`` is negative, zero or positive (``torch.sign``; ``wp.sign`` gives 1 at 0)."""
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0


@wp.func
def cos_f32(angle: wp.float32) -> wp.float32:
    """``cos(angle)`` [rad] evaluated in float64, rounded to float32 (see the module doc)."""
    return wp.float32(wp.cos(wp.float64(angle)))


@wp.func
def sin_f32(angle: wp.float32) -> wp.float32:
    """``sin(angle)`` [rad] evaluated in float64, rounded to float32."""
    return wp.float32(wp.sin(wp.float64(angle)))


@wp.func
def exp_f32(x: wp.float32) -> wp.float32:
    """``exp(x)`` evaluated in float64, rounded to float32."""
    return wp.float32(wp.exp(wp.float64(x)))


@wp.func
def log1p_f32(x: wp.float32) -> wp.float32:
    """``log(1 + x)`` evaluated in float64, rounded to float32. Warp has no ``log1p``: with ``u = 1 + x``
    rounded, ``log(u) x / (u - 1)`` is accurate to a few float64 ulps for every ``x > -1`` (Goldberg's
    identity), and ``x`` itself where ``u`` rounds to 1."""
    wide = wp.float64(x)
    u = wp.float64(1.0) + wide
    if u == wp.float64(1.0):
        return x
    return wp.float32(wp.log(u) * wide / (u - wp.float64(1.0)))


@wp.func
def direction(angle: wp.float32) -> wp.vec2:
    """The unit vector ``(cos angle, sin angle)`` of ``angle`` [rad]."""
    return wp.vec2(cos_f32(angle), sin_f32(angle))


@wp.func
def closest_point_on_segment(center: wp.vec2, along: wp.vec2, half: wp.float32, point: wp.vec2) -> wp.vec2:
    """The point of the segment closest to ``point``: ``c - sign(s) min(|s|, half) u`` with
    ``s = (c - p) . u``."""
    offset = dot(center - point, along)
    reach = sign(offset) * wp.min(wp.abs(offset), half)
    return center - along * reach


@wp.func
def segment_ends(center: wp.vec2, along: wp.vec2, half: wp.float32):
    """The segment's end points ``(c + half u, c - half u)``."""
    reach = along * half
    return center + reach, center - reach


@wp.func
def segments_intersection(a_plus: wp.vec2, a_minus: wp.vec2, b_plus: wp.vec2, b_minus: wp.vec2):
    """Where segments ``a_plus``-``a_minus`` and ``b_plus``-``b_minus`` cross: ``(point, crossed)``;
    parallel segments never cross."""
    r = a_minus - a_plus
    s = b_minus - b_plus
    w = b_plus - a_plus
    r_cross_s = cross(r, s)
    u = cross(w, r) / r_cross_s
    t = cross(w, s) / r_cross_s
    crossed = r_cross_s != 0.0 and t >= 0.0 and t <= 1.0 and u >= 0.0 and u <= 1.0
    return a_plus + r * t, crossed


@wp.func
def keep_closer(best: wp.float32, best_p: wp.vec2, best_q: wp.vec2, p: wp.vec2, q: wp.vec2):
    """One step of VMAS's scan for the closest pair of points: ``(distance, p, q)`` of candidate
    ``p``, ``q`` if ``|p - q|`` is strictly below ``best`` (a NaN never is), else the best so far."""
    distance = norm(p - q)
    if distance < best:
        return distance, p, q
    return best, best_p, best_q


@wp.func
def closest_points_segments(
    center_a: wp.vec2, along_a: wp.vec2, half_a: wp.float32, center_b: wp.vec2, along_b: wp.vec2, half_b: wp.float32
):
    """The closest points ``(on a, on b)`` of two segments: their crossing point twice where they
    cross, else the closest of (A+, its closest point on b), (A-, ...), (a's closest point to B+, B+),
    (..., B-), in that order."""
    a_plus, a_minus = segment_ends(center_a, along_a, half_a)
    b_plus, b_minus = segment_ends(center_b, along_b, half_b)
    crossing, crossed = segments_intersection(a_plus, a_minus, b_plus, b_minus)
    if crossed:
        return crossing, crossing
    far = wp.vec2(wp.inf, wp.inf)
    best, on_a, on_b = keep_closer(
        wp.inf, far, far, a_plus, closest_point_on_segment(center_b, along_b, half_b, a_plus)
    )
    best, on_a, on_b = keep_closer(
        best, on_a, on_b, a_minus, closest_point_on_segment(center_b, along_b, half_b, a_minus)
    )
    best, on_a, on_b = keep_closer(
        best, on_a, on_b, closest_point_on_segment(center_a, along_a, half_a, b_plus), b_plus
    )
    best, on_a, on_b = keep_closer(
        best, on_a, on_b, closest_point_on_segment(center_a, along_a, half_a, b_minus), b_minus
    )
    return on_a, on_b


@wp.func
def box_side(
    center: wp.vec2, along: wp.vec2, normal: wp.vec2, half_length: wp.float32, half_width: wp.float32, side: int
):
    """Side ``side`` (0-3) of a box as a segment ``(center, along, half)``, in VMAS's order: the width
    sides at ``c + (L/2) u`` and ``c - (L/2) u`` (along ``normal``), then the length sides at
    ``c + (W/2) n`` and ``c - (W/2) n`` (along ``along``)."""
    if side == 0:
        return center + along * half_length, normal, half_width
    if side == 1:
        return center - along * half_length, normal, half_width
    if side == 2:
        return center + normal * half_width, along, half_length
    return center - normal * half_width, along, half_length


@wp.func
def closest_point_on_box(
    center: wp.vec2, along: wp.vec2, normal: wp.vec2, half_length: wp.float32, half_width: wp.float32, point: wp.vec2
) -> wp.vec2:
    """The point of the box's perimeter closest to ``point`` (also for a point inside)."""
    far = wp.vec2(wp.inf, wp.inf)
    best = wp.float32(wp.inf)
    on_box = far
    unused = far
    for side in range(4):
        side_center, side_along, side_half = box_side(center, along, normal, half_length, half_width, side)
        on_side = closest_point_on_segment(side_center, side_along, side_half, point)
        best, on_box, unused = keep_closer(best, on_box, unused, on_side, point)
    return on_box


@wp.func
def closest_points_box_segment(
    center: wp.vec2,
    along: wp.vec2,
    normal: wp.vec2,
    half_length: wp.float32,
    half_width: wp.float32,
    segment_center: wp.vec2,
    segment_along: wp.vec2,
    segment_half: wp.float32,
):
    """The closest points ``(on the box's perimeter, on the segment)``: the closest over the box's
    sides, in ``box_side`` order, of each side's closest points to the segment."""
    far = wp.vec2(wp.inf, wp.inf)
    best = wp.float32(wp.inf)
    on_box = far
    on_segment = far
    for side in range(4):
        side_center, side_along, side_half = box_side(center, along, normal, half_length, half_width, side)
        on_side, on_other = closest_points_segments(
            side_center, side_along, side_half, segment_center, segment_along, segment_half
        )
        best, on_box, on_segment = keep_closer(best, on_box, on_segment, on_side, on_other)
    return on_box, on_segment


@wp.func
def closest_points_boxes(
    center_a: wp.vec2,
    along_a: wp.vec2,
    normal_a: wp.vec2,
    half_length_a: wp.float32,
    half_width_a: wp.float32,
    center_b: wp.vec2,
    along_b: wp.vec2,
    normal_b: wp.vec2,
    half_length_b: wp.float32,
    half_width_b: wp.float32,
):
    """The closest points ``(on a's perimeter, on b's perimeter)`` of two boxes: the closest of 8
    candidates, a's sides against box b, then b's sides against box a."""
    far = wp.vec2(wp.inf, wp.inf)
    best = wp.float32(wp.inf)
    on_a = far
    on_b = far
    for side in range(4):
        side_center, side_along, side_half = box_side(center_a, along_a, normal_a, half_length_a, half_width_a, side)
        on_box, on_side = closest_points_box_segment(
            center_b, along_b, normal_b, half_length_b, half_width_b, side_center, side_along, side_half
        )
        best, on_a, on_b = keep_closer(best, on_a, on_b, on_side, on_box)
    for side in range(4):
        side_center, side_along, side_half = box_side(center_b, along_b, normal_b, half_length_b, half_width_b, side)
        on_box, on_side = closest_points_box_segment(
            center_a, along_a, normal_a, half_length_a, half_width_a, side_center, side_along, side_half
        )
        best, on_a, on_b = keep_closer(best, on_a, on_b, on_box, on_side)
    return on_a, on_b


@wp.func
def inner_point_box(outside: wp.vec2, surface: wp.vec2, center: wp.vec2):
    """VMAS's contact point inside a solid box and its depth [m]: the foot of the perpendicular from
    the box's ``center`` onto the line from ``outside`` through ``surface``, and its distance from
    ``surface``. VMAS's quirk kept: where ``outside == surface`` the point is ``2 surface``, depth 0."""
    v = surface - outside
    u = center - surface
    v_norm = norm(v)
    if v_norm == 0.0:
        return surface + surface, wp.float32(0.0)
    along = dot(v, u) / v_norm
    step = wp.vec2(v[0] / v_norm, v[1] / v_norm) * along
    return surface + step, wp.abs(along)
