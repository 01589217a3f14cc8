"""VMAS's contacts: the pair list, the soft contact law and the force of each shape pair.

**Pairs.** Rows ``a < b`` of the table (VMAS's ``world.entities`` order) whose ``collides`` entry is
set, sorted into six groups processed in VMAS's order: sphere-sphere, line-sphere, line-line,
box-sphere, box-line, box-box. Within a group the pairs keep enumeration order, each oriented
canonically (the line, then the box, comes first). ``contact_pairs`` builds the list once per table.

**Law** (VMAS ``World._get_constraint_forces``). For points ``p_a``, ``p_b`` at distance ``d`` and a
threshold ``d_min``: ``f_a = F (p_a - p_b) / d * k log(1 + exp((d_min - d) / k))``, zero where
``d > d_min`` or ``d < 1e-6``, and ``f_b = -f_a``; ``F`` is the world's ``collision_force`` and ``k``
its ``contact_margin``. A torque is ``r x f`` with ``r`` from the entity's centre to its contact
point. docs/vmas_reference.md (3.4, 3.6) lists the points and thresholds of each pair.

**Broad phase, per env.** A pair is evaluated in an env only where its centres lie within the sum
of the circumscribed radii there. VMAS evaluates a pair in *every* env once it passes that test in
*any* env, so in the thin bands where the narrow phase reaches past the circumscribed circles
(within ``LINE_MIN_DIST`` of a line's tip or a box's corner) VMAS's force in one env depends on the
other envs. This mode decides per env, the one deliberate difference from VMAS; ``broad_phase=
"any_env"`` reproduces VMAS's coupling (for parity checks).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from swarp.physics.vmas_mode import geometry
from swarp.physics.vmas_mode.entities import BOX, LINE, SPHERE, EntityTable

#: Minimum contact distance of lines and boxes [m] (VMAS ``LINE_MIN_DIST``): their contacts act
#: from this gap, as if they had this thickness.
LINE_MIN_DIST = 4 / 6e2
#: Points closer than this [m] exert no contact force (VMAS ``min_dist``): the direction is undefined.
COINCIDENT_DIST = 1e-6
#: Stand-in divisor for a zero distance [m] (VMAS's).
ZERO_DIST_DIVISOR = 1e-8

#: Broad phases: a pair is evaluated in an env where its centres are within reach there ("per_env",
#: this mode's), or in every env once they are within reach in any env ("any_env", VMAS's).
BROAD_PHASES = ("per_env", "any_env")
#: Pair kinds, in VMAS's processing order.
SPHERE_SPHERE, LINE_SPHERE, LINE_LINE, BOX_SPHERE, BOX_LINE, BOX_BOX = range(6)
#: The kind of an unordered pair of shapes, and the shape that comes first (``None``: the pair keeps
#: enumeration order).
_KINDS = {
    frozenset({SPHERE}): (SPHERE_SPHERE, None),
    frozenset({LINE, SPHERE}): (LINE_SPHERE, LINE),
    frozenset({LINE}): (LINE_LINE, None),
    frozenset({BOX, SPHERE}): (BOX_SPHERE, BOX),
    frozenset({BOX, LINE}): (BOX_LINE, BOX),
    frozenset({BOX}): (BOX_BOX, None),
}


@dataclass(frozen=True)
class PairGroup:
    """The pairs of one kind, P of them, in VMAS's order, and the order their forces are summed in.

    A pair has two *ends*: end ``p`` is pair p's first entity, end ``P + p`` its second. Each entity
    adds the forces of its ends in pair order; ``force_rounds`` batches that over entities without
    changing any entity's order: round k adds every entity's k-th end.

    Attributes:
        kind: ``SPHERE_SPHERE`` ... ``BOX_BOX``.
        first, second: [P] int64 table rows, canonically oriented (for LINE_SPHERE the line first,
            for BOX_SPHERE and BOX_LINE the box first).
        reach: [P] float32 broad-phase distance [m]: the sum of the circumscribed radii, added in
            double and rounded once, as VMAS compares it.
        force_rounds: ``(rows [R] int64, ends [R] int64)`` per round: the movable entities and the
            end each adds (an entity appears at most once a round).
        torque_rounds: The same for the torques of rotatable entities; a sphere's end adds no torque.
    """

    kind: int
    first: torch.Tensor
    second: torch.Tensor
    reach: torch.Tensor
    force_rounds: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    torque_rounds: tuple[tuple[torch.Tensor, torch.Tensor], ...]


def summation_rounds(
    first: list[int], second: list[int], receives: list[bool], device: torch.device
) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """The rounds of ``PairGroup``: ``receives[end]`` says whether the entity of that end (ends
    ``0..P-1`` of ``first``, ``P..2P-1`` of ``second``) takes the end's contribution."""
    n_pairs = len(first)
    ends_of: dict[int, list[int]] = {}
    for p in range(n_pairs):
        for end, row in ((p, first[p]), (n_pairs + p, second[p])):
            if receives[end]:
                ends_of.setdefault(row, []).append(end)
    rounds = []
    for k in range(max((len(ends) for ends in ends_of.values()), default=0)):
        taking = [(row, ends[k]) for row, ends in ends_of.items() if len(ends) > k]
        rows, ends = zip(*taking, strict=True)
        rounds.append((torch.tensor(rows, device=device), torch.tensor(ends, device=device)))
    return tuple(rounds)


@functools.lru_cache(maxsize=16)
def contact_pairs(table: EntityTable) -> tuple[PairGroup, ...]:
    """The table's non-empty pair groups in processing order (cached per table)."""
    shapes, movable, rotatable = table.shape.tolist(), table.movable.tolist(), table.rotatable.tolist()
    collides = table.collides.cpu()
    radius = table.circumscribed_radius.cpu().tolist()
    found: dict[int, list[tuple[int, int]]] = {}
    for a in range(table.n_entities):
        for b in range(a + 1, table.n_entities):
            if not collides[a, b]:
                continue
            kind, leader = _KINDS[frozenset((shapes[a], shapes[b]))]
            pair = (b, a) if leader is not None and shapes[a] != leader else (a, b)
            found.setdefault(kind, []).append(pair)
    groups = []
    for kind in sorted(found):
        first, second = (list(rows) for rows in zip(*found[kind], strict=True))
        ends = first + second
        turns = [rotatable[row] and shapes[row] != SPHERE for row in ends]
        groups.append(
            PairGroup(
                kind=kind,
                first=torch.tensor(first, dtype=torch.int64, device=table.device),
                second=torch.tensor(second, dtype=torch.int64, device=table.device),
                reach=torch.tensor([radius[a] + radius[b] for a, b in found[kind]], dtype=torch.float64).to(
                    device=table.device, dtype=torch.float32
                ),
                force_rounds=summation_rounds(first, second, [movable[row] for row in ends], table.device),
                torque_rounds=summation_rounds(first, second, turns, table.device),
            )
        )
    return tuple(groups)


def contact_law(
    point_a: torch.Tensor, point_b: torch.Tensor, threshold: torch.Tensor | float, scale: float, margin: float
) -> torch.Tensor:
    """[..., 2] repulsive force [N] on the body at ``point_a`` from the one at ``point_b`` (each
    [..., 2] [m]) for the contact distance ``threshold`` (``d_min``: [...] float32 or a Python float
    [m]), ``scale`` [N] and ``margin`` [m]; the force on the other body is its negation."""
    delta = point_a - point_b
    distance = geometry.norm(delta)
    zero = delta.new_zeros(())  # made on the device: no host-to-device copy (capture-safe)
    penetration = torch.logaddexp(zero, (threshold - distance) / margin) * margin
    divisor = torch.where(distance > 0, distance, ZERO_DIST_DIVISOR).unsqueeze(-1)
    force = scale * delta / divisor * penetration.unsqueeze(-1)
    force = torch.where((distance < COINCIDENT_DIST).unsqueeze(-1), 0.0, force)
    return torch.where((distance > threshold).unsqueeze(-1), 0.0, force)


@dataclass(frozen=True)
class PairForces:
    """Forces and torques of one group's pairs, on E envs by P pairs.

    Attributes:
        first_force, second_force: [E, P, 2] [N] on the pair's first and second entity.
        first_torque, second_torque: [E, P] [N m], or ``None`` for a sphere (VMAS adds none).
    """

    first_force: torch.Tensor
    second_force: torch.Tensor
    first_torque: torch.Tensor | None
    second_torque: torch.Tensor | None


def pair_forces(
    group: PairGroup,
    table: EntityTable,
    pos: torch.Tensor,
    rot: torch.Tensor,
    scale: float,
    margin: float,
) -> PairForces:
    """The contact forces of ``group`` in every env, before the broad phase.

    Args:
        group: One group of ``contact_pairs(table)``.
        table: The entity table.
        pos: [E, N, 2] float32 positions [m]; rot: [E, N] float32 headings [rad].
        scale: The world's ``collision_force`` [N]; margin: its ``contact_margin`` [m].
    """
    size = table.size.to(device=pos.device, dtype=torch.float32)
    a, b = group.first, group.second
    pos_a, pos_b, rot_a, rot_b = pos[:, a], pos[:, b], rot[:, a], rot[:, b]
    solid_a = ~table.hollow[a].to(pos.device)
    solid_b = ~table.hollow[b].to(pos.device)
    first, second = size[a], size[b]  # [P, 2]: (radius or length, width)

    def law(point_a, point_b, threshold):
        force = contact_law(point_a, point_b, threshold, scale, margin)
        return force, -force

    def inner(outside, surface, center, solid):
        point, depth = geometry.inner_point_box(outside, surface, center)
        return torch.where(solid.unsqueeze(-1), point, surface), torch.where(solid, depth, torch.zeros_like(depth))

    if group.kind == SPHERE_SPHERE:
        force_a, force_b = law(pos_a, pos_b, first[:, 0] + second[:, 0])
        return PairForces(force_a, force_b, None, None)
    if group.kind == LINE_SPHERE:
        closest = geometry.closest_point_on_segment(pos_a, rot_a, first[:, 0], pos_b)
        force_sphere, force_line = law(pos_b, closest, second[:, 0] + LINE_MIN_DIST)
        return PairForces(force_line, force_sphere, geometry.cross(closest - pos_a, force_line), None)
    if group.kind == LINE_LINE:
        on_a, on_b = geometry.closest_points_segments(pos_a, rot_a, first[:, 0], pos_b, rot_b, second[:, 0])
        force_a, force_b = law(on_a, on_b, LINE_MIN_DIST)
        return PairForces(
            force_a, force_b, geometry.cross(on_a - pos_a, force_a), geometry.cross(on_b - pos_b, force_b)
        )
    if group.kind == BOX_SPHERE:
        closest = geometry.closest_point_on_box(pos_a, rot_a, first[:, 0], first[:, 1], pos_b)
        point, depth = inner(pos_b, closest, pos_a, solid_a)
        force_sphere, force_box = law(pos_b, point, second[:, 0] + LINE_MIN_DIST + depth)
        return PairForces(force_box, force_sphere, geometry.cross(closest - pos_a, force_box), None)
    if group.kind == BOX_LINE:
        on_box, on_line = geometry.closest_points_box_segment(
            pos_a, rot_a, first[:, 0], first[:, 1], pos_b, rot_b, second[:, 0]
        )
        point, depth = inner(on_line, on_box, pos_a, solid_a)
        force_box, force_line = law(point, on_line, LINE_MIN_DIST + depth)
        torques = geometry.cross(on_box - pos_a, force_box), geometry.cross(on_line - pos_b, force_line)
        return PairForces(force_box, force_line, *torques)
    on_a, on_b = geometry.closest_points_boxes(
        pos_a, rot_a, first[:, 0], first[:, 1], pos_b, rot_b, second[:, 0], second[:, 1]
    )
    point_a, depth_a = inner(on_b, on_a, pos_a, solid_a)
    point_b, depth_b = inner(on_a, on_b, pos_b, solid_b)
    force_a, force_b = law(point_a, point_b, depth_a + depth_b + LINE_MIN_DIST)
    return PairForces(force_a, force_b, geometry.cross(on_a - pos_a, force_a), geometry.cross(on_b - pos_b, force_b))


def add_contact_forces(
    table: EntityTable,
    pos: torch.Tensor,
    rot: torch.Tensor,
    force: torch.Tensor,
    torque: torch.Tensor,
    scale: float,
    margin: float,
    broad_phase: str = "per_env",
    groups: tuple[PairGroup, ...] | None = None,
) -> None:
    """Add every pair's contact force and torque to ``force`` [E, N, 2] [N] and ``torque`` [E, N]
    [N m] in place, in VMAS's order (group by group, pair by pair), only to movable (for forces) and
    rotatable (for torques) entities, and only in envs where the pair passes the broad phase.

    Args:
        table: The entity table.
        pos: [E, N, 2] float32 positions [m]; rot: [E, N] float32 headings [rad].
        force, torque: The sums so far (float32), updated in place.
        scale: The world's ``collision_force`` [N]; margin: its ``contact_margin`` [m].
        broad_phase: One of ``BROAD_PHASES``.
        groups: ``contact_pairs(table)``, held by a caller that steps many times (``None``: looked up
            in the cache, which rebuilds an evicted table's groups on the host).
    """
    if broad_phase not in BROAD_PHASES:
        raise ValueError(f"broad_phase must be one of {BROAD_PHASES}, got {broad_phase!r}")
    for group in contact_pairs(table) if groups is None else groups:
        forces = pair_forces(group, table, pos, rot, scale, margin)
        near = geometry.norm(pos[:, group.first] - pos[:, group.second]) <= group.reach.to(pos.device)
        if broad_phase == "any_env":
            near = near.any(dim=0, keepdim=True).expand_as(near)
        near = torch.cat([near, near], dim=1)  # [E, 2P]: per end
        end_forces = torch.cat([forces.first_force, forces.second_force], dim=1)
        end_forces = torch.where(near.unsqueeze(-1), end_forces, 0.0)
        for rows, ends in group.force_rounds:
            force[:, rows] += end_forces[:, ends]
        if group.torque_rounds:
            none = torch.zeros_like(forces.first_force[..., 0])  # a sphere's end: never summed
            torques = (forces.first_torque, forces.second_torque)
            end_torques = torch.cat([none if t is None else t for t in torques], dim=1)
            end_torques = torch.where(near, end_torques, 0.0)
            for rows, ends in group.torque_rounds:
                torque[:, rows] += end_torques[:, ends]
