"""Closest points between VMAS's shapes (torch, float32, batched over any leading dimensions).

Points are ``[..., 2]`` [m], angles ``[...]`` [rad], lengths ``[...]`` or broadcastable [m]. A segment
is (centre, angle, length): it runs ``length / 2`` either way from its centre along
``(cos angle, sin angle)``. A box is (centre, angle, length, width), its length along the local x
axis. Every function evaluates VMAS 1.5.2's formulas (``vmas/simulator/physics.py``) with the same
float32 operations in the same order, so the points agree to the bit; docs/vmas_reference.md, 3.5,
states them. Where several candidates tie, the earlier one wins (a strict ``<``), as in VMAS.
"""

from __future__ import annotations

import math

import torch

#: Angle between a box's length sides and its width sides [rad] (VMAS adds it in float32).
QUARTER_TURN = math.pi / 2


def direction(angle: torch.Tensor) -> torch.Tensor:
    """[..., 2] unit vector ``(cos angle, sin angle)`` of ``angle`` [...] [rad]."""
    return torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[...] scalar cross product ``a.x b.y - a.y b.x`` of [..., 2] vectors."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def norm(v: torch.Tensor) -> torch.Tensor:
    """[...] Euclidean norm of [..., 2] vectors (``torch.linalg.vector_norm``, as VMAS)."""
    return torch.linalg.vector_norm(v, dim=-1)


def keep_closest(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Of K candidate point pairs ``p``, ``q`` [K, ..., 2], the pair with the smallest ``|p - q|``, per
    batch element: ``(p [..., 2], q [..., 2])``. VMAS scans the candidates in order keeping a strictly
    smaller distance, so the first minimum wins ties, a NaN distance never wins, and where no
    distance is finite the result is ``inf``."""
    distance = norm(p - q)
    distance = torch.where(torch.isnan(distance), math.inf, distance)
    shortest, index = distance.min(dim=0, keepdim=True)  # the first minimum on ties
    found = (shortest < math.inf).squeeze(0).unsqueeze(-1)
    index = index.unsqueeze(-1).expand(1, *p.shape[1:])
    best_p, best_q = p.gather(0, index).squeeze(0), q.gather(0, index).squeeze(0)
    return torch.where(found, best_p, math.inf), torch.where(found, best_q, math.inf)


def closest_point_on_segment(
    center: torch.Tensor, angle: torch.Tensor, length: torch.Tensor, point: torch.Tensor
) -> torch.Tensor:
    """[..., 2] point of the segment (centre [..., 2], angle [...], length [...]) closest to ``point``
    [..., 2]: ``c - sign(s) min(|s|, L/2) u`` with ``u`` the direction, ``s = (c - p) . u``."""
    along = direction(angle)
    offset = ((center - point) * along).sum(-1, keepdim=True)
    half = (length / 2).expand(offset.shape[:-1]).unsqueeze(-1)
    return center - torch.sign(offset) * torch.minimum(torch.abs(offset), half) * along


def segment_ends(center: torch.Tensor, angle: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The segment's end points ``(c + (L/2) u, c - (L/2) u)``, each [..., 2]."""
    half = (length / 2).expand(angle.shape)
    reach = torch.stack([half * torch.cos(angle), half * torch.sin(angle)], dim=-1)
    return center + reach, center - reach


def segments_intersection(
    a_plus: torch.Tensor, a_minus: torch.Tensor, b_plus: torch.Tensor, b_minus: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Where segments ``a_plus``-``a_minus`` and ``b_plus``-``b_minus`` (ends [..., 2]) cross:
    ``(point [..., 2], crossed [...] bool)``; the point is ``inf`` where they do not (parallel
    segments never cross)."""
    r, s, w = a_minus - a_plus, b_minus - b_plus, b_plus - a_plus
    r_cross_s = cross(r, s)
    u = cross(w, r) / r_cross_s
    t = cross(w, s) / r_cross_s
    crossed = (r_cross_s != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
    point = torch.where(crossed.unsqueeze(-1), a_plus + t.unsqueeze(-1) * r, math.inf)
    return point, crossed


def closest_points_segments(
    center_a: torch.Tensor,
    angle_a: torch.Tensor,
    length_a: torch.Tensor,
    center_b: torch.Tensor,
    angle_b: torch.Tensor,
    length_b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The closest points ``(on a, on b)`` [..., 2] of two segments. Crossing segments give their
    crossing point twice; otherwise the closest of (a's ends, their closest points on b), then
    (b's ends' closest points on a, b's ends), in the order A+, A-, B+, B-."""
    a_plus, a_minus = segment_ends(center_a, angle_a, length_a)
    b_plus, b_minus = segment_ends(center_b, angle_b, length_b)
    crossing, crossed = segments_intersection(a_plus, a_minus, b_plus, b_minus)
    shape = a_plus.shape[:-1]
    # The four end-to-segment queries in one batch: A+ and A- on b, B+ and B- on a.
    on_other = closest_point_on_segment(
        torch.stack([center_b, center_b, center_a, center_a]),
        torch.stack([angle_b, angle_b, angle_a, angle_a]),
        torch.stack([length_b.expand(shape), length_b.expand(shape), length_a.expand(shape), length_a.expand(shape)]),
        torch.stack([a_plus, a_minus, b_plus, b_minus]),
    )
    on_a, on_b = keep_closest(
        torch.stack([a_plus, a_minus, on_other[2], on_other[3]]),
        torch.stack([on_other[0], on_other[1], b_plus, b_minus]),
    )
    crossed = crossed.unsqueeze(-1)
    return torch.where(crossed, crossing, on_a), torch.where(crossed, crossing, on_b)


def box_sides(
    center: torch.Tensor, angle: torch.Tensor, length: torch.Tensor, width: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The box's four sides as segments, stacked on a new leading axis: ``(centres [4, ..., 2],
    angles [4, ...], lengths [4, ...])``, in VMAS's order: the two width sides at ``c + (L/2) u`` and
    ``c - (L/2) u``, then the two length sides at ``c + (W/2) n`` and ``c - (W/2) n``, with ``n`` the
    direction of ``angle + pi/2``."""
    along = direction(angle)
    turned = angle + QUARTER_TURN
    normal = direction(turned)
    half_length = (length / 2).expand(angle.shape).unsqueeze(-1)
    half_width = (width / 2).expand(angle.shape).unsqueeze(-1)
    length, width = length.expand(angle.shape), width.expand(angle.shape)
    centers = torch.stack(
        [
            center + along * half_length,
            center - along * half_length,
            center + normal * half_width,
            center - normal * half_width,
        ]
    )
    return centers, torch.stack([turned, turned, angle, angle]), torch.stack([width, width, length, length])


def closest_point_on_box(
    center: torch.Tensor, angle: torch.Tensor, length: torch.Tensor, width: torch.Tensor, point: torch.Tensor
) -> torch.Tensor:
    """[..., 2] point of the box's perimeter closest to ``point`` [..., 2] (also for a point inside)."""
    centers, angles, lengths = box_sides(center, angle, length, width)
    on_sides = closest_point_on_segment(centers, angles, lengths, point.expand(centers.shape))
    return keep_closest(on_sides, point.expand(on_sides.shape))[0]


def closest_points_box_segment(
    center: torch.Tensor,
    angle: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    segment_center: torch.Tensor,
    segment_angle: torch.Tensor,
    segment_length: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The closest points ``(on the box's perimeter, on the segment)`` [..., 2]: the closest over the
    box's sides (in ``box_sides`` order) of each side's closest points to the segment."""
    centers, angles, lengths = box_sides(center, angle, length, width)
    on_sides, on_segment = closest_points_segments(
        centers,
        angles,
        lengths,
        segment_center.expand(centers.shape),
        segment_angle.expand(angles.shape),
        segment_length.expand(angles.shape),
    )
    return keep_closest(on_sides, on_segment)


def closest_points_boxes(
    center_a: torch.Tensor,
    angle_a: torch.Tensor,
    length_a: torch.Tensor,
    width_a: torch.Tensor,
    center_b: torch.Tensor,
    angle_b: torch.Tensor,
    length_b: torch.Tensor,
    width_b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The closest points ``(on a's perimeter, on b's perimeter)`` [..., 2] of two boxes: the closest
    of 8 candidates, a's sides against box b, then b's sides against box a (one batch of 8 queries)."""
    sides_a, sides_b = box_sides(center_a, angle_a, length_a, width_a), box_sides(center_b, angle_b, length_b, width_b)
    shape = sides_a[1].shape  # [4, ...]

    def both(of_b: torch.Tensor, of_a: torch.Tensor, tail: tuple[int, ...] = ()) -> torch.Tensor:
        return torch.stack([of_b.expand(*shape, *tail), of_a.expand(*shape, *tail)])  # [2, 4, ...]

    on_box, on_side = closest_points_box_segment(
        both(center_b, center_a, (2,)),
        both(angle_b, angle_a),
        both(length_b, length_a),
        both(width_b, width_a),
        *(torch.stack([side_a, side_b]) for side_a, side_b in zip(sides_a, sides_b, strict=True)),
    )
    return keep_closest(torch.cat([on_side[0], on_box[1]]), torch.cat([on_box[0], on_side[1]]))


def inner_point_box(
    outside: torch.Tensor, surface: torch.Tensor, center: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """VMAS's contact point inside a solid box: the foot of the perpendicular from the box's
    ``center`` onto the line from ``outside`` through the ``surface`` point (each [..., 2]), and its
    distance from ``surface`` [...] [m]. VMAS's quirk kept: where ``outside == surface`` the point
    is ``2 * surface`` and the distance 0."""
    v = surface - outside
    u = center - surface
    v_norm = norm(v).unsqueeze(-1)
    along = (v * u).sum(-1).unsqueeze(-1) / v_norm
    step = (v / v_norm) * along
    degenerate = v_norm == 0
    step = torch.where(degenerate, surface, step)
    along = torch.where(degenerate, 0, along)
    return surface + step, torch.abs(along.squeeze(-1))
