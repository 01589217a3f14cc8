"""World bounds: the hard clamp applied after integration (soft walls are a contact force).

``"soft"`` bounds live in ``contacts.wall_force``: they push back with the contact spring and an
agent may penetrate slightly. ``"clamp"`` bounds project the position inside ``[lower + r,
upper - r]`` after every substep and zero the velocity component that points out of the arena.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    vec2 = vec2_type(scalar)
    pair = wp.types.vector(2, scalar)
    mat22 = wp.types.matrix((2, 2), scalar)
    zero = scalar(0.0)

    @wp.func
    def clamp_axis(x: scalar, v: scalar, lo: scalar, hi: scalar) -> pair:
        """Clamp coordinate ``x`` into [lo, hi]; zero velocity ``v`` if it points outward there."""
        if x < lo:
            x = lo
            if v < zero:
                v = zero
        elif x > hi:
            x = hi
            if v > zero:
                v = zero
        return pair(x, v)

    @wp.func
    def clamp_to_bounds(p: vec2, v: vec2, r: scalar, lower: vec2, upper: vec2) -> mat22:
        """Project a disc of radius ``r`` inside the bounds; returns rows (position, velocity)."""
        cx = clamp_axis(p[0], v[0], lower[0] + r, upper[0] - r)
        cy = clamp_axis(p[1], v[1], lower[1] + r, upper[1] - r)
        return mat22(cx[0], cy[0], cx[1], cy[1])

    return SimpleNamespace(clamp_axis=clamp_axis, clamp_to_bounds=clamp_to_bounds)
