"""VMAS's contact law and the force of each shape pair as Warp functions: the twins of ``contacts.py``.

Each pair function takes the two entities' poses and sizes in the pair's canonical order (the line,
then the box, first: ``contacts.py``) and returns ``(force on the first [N], force on the second [N],
torque on the first [N m], torque on the second [N m])`` as ``contacts.pair_forces`` computes them,
torques of spheres 0 (VMAS adds none; the step adds no torque to a sphere). The law and the
thresholds follow docs/vmas_reference.md, 3.4 and 3.6, in the reference's float32 order; the
geometry is ``warp_geometry``'s. The broad phase is the step kernel's (``kernels.py``).
"""

from __future__ import annotations

import warp as wp

from swarp.physics.vmas_mode.contacts import COINCIDENT_DIST, LINE_MIN_DIST
from swarp.physics.vmas_mode.warp_geometry import (
    QUARTER_TURN_F32,
    closest_point_on_box,
    closest_point_on_segment,
    closest_points_box_segment,
    closest_points_boxes,
    closest_points_segments,
    cross,
    direction,
    exp_f32,
    inner_point_box,
    log1p_f32,
    norm,
)

#: ``LINE_MIN_DIST`` and ``COINCIDENT_DIST`` rounded to float32, as torch rounds a Python float that
#: meets a float32 tensor [m].
LINE_MIN_DIST_F32 = wp.constant(wp.float32(LINE_MIN_DIST))
COINCIDENT_DIST_F32 = wp.constant(wp.float32(COINCIDENT_DIST))


@wp.func
def softplus(x: wp.float32) -> wp.float32:
    """``log(1 + exp(x))`` in torch CPU's formula for ``logaddexp(0, x)``:
    ``max(0, x) + log1p(exp(-|0 - x|))``, its transcendentals correctly rounded (``warp_geometry``)."""
    return wp.max(wp.float32(0.0), x) + log1p_f32(exp_f32(-wp.abs(wp.float32(0.0) - x)))


@wp.func
def contact_law(
    point_a: wp.vec2, point_b: wp.vec2, threshold: wp.float32, scale: wp.float32, margin: wp.float32
) -> wp.vec2:
    """The repulsive force [N] on the body at ``point_a`` from the one at ``point_b`` [m] for the
    contact distance ``threshold`` [m]: ``F (p_a - p_b) / d * k softplus((d_min - d) / k)``, zero where
    ``d > d_min`` or ``d < 1e-6`` (``scale`` F [N], ``margin`` k [m]); the other body takes its negation."""
    delta = point_a - point_b
    distance = norm(delta)
    if distance > threshold or distance < COINCIDENT_DIST_F32:
        return wp.vec2(0.0, 0.0)
    penetration = softplus((threshold - distance) / margin) * margin
    return wp.vec2((scale * delta[0]) / distance * penetration, (scale * delta[1]) / distance * penetration)


@wp.func
def sphere_sphere(
    pos_a: wp.vec2, radius_a: wp.float32, pos_b: wp.vec2, radius_b: wp.float32, scale: wp.float32, margin: wp.float32
):
    """Two spheres: the law between the centres at the sum of the radii [m]."""
    force = contact_law(pos_a, pos_b, radius_a + radius_b, scale, margin)
    return force, -force, wp.float32(0.0), wp.float32(0.0)


@wp.func
def line_sphere(
    pos_line: wp.vec2,
    rot_line: wp.float32,
    length: wp.float32,
    pos_sphere: wp.vec2,
    radius: wp.float32,
    scale: wp.float32,
    margin: wp.float32,
):
    """A line (first) and a sphere: the law between the sphere's centre and its closest point on the
    line at ``radius + LINE_MIN_DIST``; the line turns about its centre."""
    closest = closest_point_on_segment(pos_line, direction(rot_line), length / 2.0, pos_sphere)
    on_sphere = contact_law(pos_sphere, closest, radius + LINE_MIN_DIST_F32, scale, margin)
    on_line = -on_sphere
    return on_line, on_sphere, cross(closest - pos_line, on_line), wp.float32(0.0)


@wp.func
def line_line(
    pos_a: wp.vec2,
    rot_a: wp.float32,
    length_a: wp.float32,
    pos_b: wp.vec2,
    rot_b: wp.float32,
    length_b: wp.float32,
    scale: wp.float32,
    margin: wp.float32,
):
    """Two lines: the law between their closest points at ``LINE_MIN_DIST``."""
    on_a, on_b = closest_points_segments(
        pos_a, direction(rot_a), length_a / 2.0, pos_b, direction(rot_b), length_b / 2.0
    )
    force_a = contact_law(on_a, on_b, LINE_MIN_DIST_F32, scale, margin)
    force_b = -force_a
    return force_a, force_b, cross(on_a - pos_a, force_a), cross(on_b - pos_b, force_b)


@wp.func
def box_sphere(
    pos_box: wp.vec2,
    rot_box: wp.float32,
    size_box: wp.vec2,
    solid: bool,
    pos_sphere: wp.vec2,
    radius: wp.float32,
    scale: wp.float32,
    margin: wp.float32,
):
    """A box (first) and a sphere: the law between the sphere's centre and the box's closest perimeter
    point (a solid box: the inner point, the threshold deepened by its depth); the box's torque acts
    at the perimeter point."""
    closest = closest_point_on_box(
        pos_box,
        direction(rot_box),
        direction(rot_box + QUARTER_TURN_F32),
        size_box[0] / 2.0,
        size_box[1] / 2.0,
        pos_sphere,
    )
    point = closest
    depth = wp.float32(0.0)
    if solid:
        point, depth = inner_point_box(pos_sphere, closest, pos_box)
    on_sphere = contact_law(pos_sphere, point, radius + LINE_MIN_DIST_F32 + depth, scale, margin)
    on_box = -on_sphere
    return on_box, on_sphere, cross(closest - pos_box, on_box), wp.float32(0.0)


@wp.func
def box_line(
    pos_box: wp.vec2,
    rot_box: wp.float32,
    size_box: wp.vec2,
    solid: bool,
    pos_line: wp.vec2,
    rot_line: wp.float32,
    length: wp.float32,
    scale: wp.float32,
    margin: wp.float32,
):
    """A box (first) and a line: the law between their closest points (a solid box: its inner point,
    the threshold deepened by its depth); torques at the closest points."""
    on_box, on_line = closest_points_box_segment(
        pos_box,
        direction(rot_box),
        direction(rot_box + QUARTER_TURN_F32),
        size_box[0] / 2.0,
        size_box[1] / 2.0,
        pos_line,
        direction(rot_line),
        length / 2.0,
    )
    point = on_box
    depth = wp.float32(0.0)
    if solid:
        point, depth = inner_point_box(on_line, on_box, pos_box)
    force_box = contact_law(point, on_line, LINE_MIN_DIST_F32 + depth, scale, margin)
    force_line = -force_box
    return force_box, force_line, cross(on_box - pos_box, force_box), cross(on_line - pos_line, force_line)


@wp.func
def box_box(
    pos_a: wp.vec2,
    rot_a: wp.float32,
    size_a: wp.vec2,
    solid_a: bool,
    pos_b: wp.vec2,
    rot_b: wp.float32,
    size_b: wp.vec2,
    solid_b: bool,
    scale: wp.float32,
    margin: wp.float32,
):
    """Two boxes: the law between their closest perimeter points (each solid box's replaced by its
    inner point, the threshold deepened by both depths); torques at the perimeter points."""
    on_a, on_b = closest_points_boxes(
        pos_a,
        direction(rot_a),
        direction(rot_a + QUARTER_TURN_F32),
        size_a[0] / 2.0,
        size_a[1] / 2.0,
        pos_b,
        direction(rot_b),
        direction(rot_b + QUARTER_TURN_F32),
        size_b[0] / 2.0,
        size_b[1] / 2.0,
    )
    point_a = on_a
    depth_a = wp.float32(0.0)
    if solid_a:
        point_a, depth_a = inner_point_box(on_b, on_a, pos_a)
    point_b = on_b
    depth_b = wp.float32(0.0)
    if solid_b:
        point_b, depth_b = inner_point_box(on_a, on_b, pos_b)
    force_a = contact_law(point_a, point_b, depth_a + depth_b + LINE_MIN_DIST_F32, scale, margin)
    force_b = -force_a
    return force_a, force_b, cross(on_a - pos_a, force_a), cross(on_b - pos_b, force_b)
