"""Lidar geometry: what a ray hits, as Warp functions of one precision.

Each intersection returns the hit distance along a unit direction ``d`` from ``o`` [m]: 0 when
``o`` is inside the shape, a huge value (``1e30``) on a miss. The discrete search (which surface is
nearest) uses branch-free selects and, in float32 on CUDA, the hardware's approximate square root;
readings recompute the distance to the one surface found exactly (``kernels.hit_distance``).
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.precision import vec2_type
from swarp.physics import contacts

#: ``kind`` codes of what a ray hit.
HIT_NONE = 0
HIT_AGENT = 1
HIT_OBSTACLE = 2
HIT_WALL = 3
HIT_BODY = 4

_CIRCLE = wp.constant(int(ObstacleShape.CIRCLE))
_BOX = wp.constant(int(ObstacleShape.BOX))
_SEGMENT = wp.constant(int(ObstacleShape.SEGMENT))


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    float root;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(root) : "f"(x));
    return root;
#else
    return sqrtf(x);
#endif
"""
)
def search_sqrt_f32(x: wp.float32) -> wp.float32:
    """Square root for the discrete search, ``x >= 0``: the hardware's approximate one on CUDA
    (relative error ~2^-22; one instruction instead of the IEEE-rounded one's ~12), IEEE on the
    CPU. Only ever decides *which* surface is nearest; readings recompute the distance exactly."""
    ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    // -b|b| - c: b^2 - c where b < 0 (the same fused multiply-add as b * b - c), negative (so a
    // NaN root) where b >= 0, since c > 0; the sign test costs nothing (operand modifiers).
    float root;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(root) : "f"(-b * fabsf(b) - c));
    return root;
#else
    return sqrtf(b < 0.f ? wp::sub(wp::mul(b, b), c) : -1.f);
#endif
"""
)
def ahead_root_f32(b: wp.float32, c: wp.float32) -> wp.float32:
    """``search_sqrt(b^2 - c)`` where ``b < 0`` (a disc ahead of the ray), NaN where ``b >= 0``, for
    ``c > 0`` (outside the disc): the disc test's square root and its sign test in one, with no
    comparison on CUDA. Search only, like ``search_sqrt_f32``."""
    ...


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Ray-shape intersection functions for one precision. Each returns the hit distance along a
    unit direction ``d`` from ``o`` [m]: 0 when ``o`` is inside the shape, a huge value on a miss."""
    vec2 = vec2_type(scalar)
    rotate = contacts.funcs(scalar).rotate
    zero = scalar(0.0)
    one = scalar(1.0)
    far = scalar(1.0e30)

    @wp.func
    def ray_circle(o: vec2, d: vec2, center: vec2, radius: scalar) -> scalar:
        oc = o - center
        b = wp.dot(oc, d)
        c = wp.dot(oc, oc) - radius * radius
        if c <= zero:
            return zero
        if b >= zero:
            return far  # outside and heading away
        disc = b * b - c
        if disc < zero:
            return far
        return -b - wp.sqrt(disc)

    # The hardware's approximate root in float32 (the search only picks the nearest surface), IEEE in
    # float64, where gradient checks run.
    approx = scalar is wp.float32
    search_sqrt = search_sqrt_f32 if approx else wp.sqrt

    @wp.func
    def ahead_root_generic(b: scalar, c: scalar) -> scalar:
        """``ahead_root_f32`` for float64."""
        return search_sqrt(wp.where(b < zero, b * b - c, -one))

    ahead_root = ahead_root_f32 if approx else ahead_root_generic

    @wp.func
    def ray_disc_select(oc: vec2, c: scalar, d: vec2) -> scalar:
        """``ray_circle_select`` from the ray's side of the disc: ``oc`` = origin - centre [m] and
        ``c`` = |oc|^2 - radius^2 [m^2]."""
        b = wp.dot(oc, d)
        disc = b * b - c
        t = -b - search_sqrt(wp.max(disc, zero))
        t = wp.where(disc >= zero, t, far)
        t = wp.where(b < zero, t, far)
        return wp.where(c <= zero, zero, t)

    @wp.func
    def ray_circle_select(o: vec2, d: vec2, center: vec2, radius: scalar) -> scalar:
        """``ray_circle`` without branches, for the discrete search only (selects compile to
        conditional moves: a ray misses most discs at random, which a branch predictor cannot
        learn; its square root of a clamped value has no usable adjoint, hence search only)."""
        oc = o - center
        return ray_disc_select(oc, wp.dot(oc, oc) - radius * radius, d)

    @wp.func
    def slab(o: scalar, d: scalar, half: scalar) -> vec2:
        """Entry and exit parameters of the ray through ``|x| <= half`` along one axis."""
        if d == zero:
            if wp.abs(o) <= half:
                return vec2(-far, far)
            return vec2(far, -far)
        inv = one / d
        t1 = (-half - o) * inv
        t2 = (half - o) * inv
        return vec2(wp.min(t1, t2), wp.max(t1, t2))

    @wp.func
    def ray_box_local(o: vec2, d: vec2, half: vec2) -> scalar:
        """Ray against the axis-aligned box ``|x| <= half[0], |y| <= half[1]`` (its own frame)."""
        sx = slab(o[0], d[0], half[0])
        sy = slab(o[1], d[1], half[1])
        t_near = wp.max(sx[0], sy[0])
        t_far = wp.min(sx[1], sy[1])
        if t_near > t_far or t_far < zero:
            return far
        if t_near <= zero:
            return zero
        return t_near

    @wp.func
    def ray_obstacle(o: vec2, d: vec2, shape: int, center: vec2, angle: scalar, size: vec2) -> scalar:
        if shape == _CIRCLE:
            return ray_circle(o, d, center, size[0])
        o_local = rotate(o - center, -angle)
        d_local = rotate(d, -angle)
        if shape == _BOX:
            return ray_box_local(o_local, d_local, size)
        if shape == _SEGMENT:
            t = ray_box_local(o_local, d_local, size)
            t = wp.min(t, ray_circle(o_local, d_local, vec2(-size[0], zero), size[1]))
            return wp.min(t, ray_circle(o_local, d_local, vec2(size[0], zero), size[1]))
        return far

    @wp.func
    def ray_walls(o: vec2, d: vec2, lower: vec2, upper: vec2) -> scalar:
        """Distance to the bounds box ``[lower, upper]`` from inside it (0 from outside). One
        division per axis and no branches (rays of a warp point every way: branches on the sign of
        ``d`` ran both divisions), dividing by 1 where ``d`` is 0 so no adjoint sees 0 / 0."""
        t = far
        for axis in range(2):
            step = d[axis]
            bound = wp.where(step > zero, upper[axis], lower[axis])
            exit = (bound - o[axis]) / wp.where(step == zero, one, step)
            t = wp.min(t, wp.where(step == zero, far, exit))
        return wp.max(t, zero)

    return SimpleNamespace(
        ray_circle=ray_circle,
        ray_circle_select=ray_circle_select,
        ray_disc_select=ray_disc_select,
        search_sqrt=search_sqrt,
        ahead_root=ahead_root,
        slab=slab,
        ray_box_local=ray_box_local,
        ray_obstacle=ray_obstacle,
        ray_walls=ray_walls,
    )
