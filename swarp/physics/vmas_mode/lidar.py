"""VMAS 1.5.2's lidar (``vmas.simulator.sensors.Lidar`` and ``World.cast_rays``) over the VMAS mode's
entity table: a capture-safe torch reference (docs/vmas_reference.md, section 5).

``lidar_angles`` gives a lidar's ray angles exactly as VMAS's constructor does (CPU float32
``torch.linspace``, the duplicate endpoint of a full circle dropped); ``lidar_seen`` resolves which
rows a lidar sees on the host (VMAS's ``entity_filter`` plus its "rays are only cast among
collidables" assertion); ``cast_rays`` measures one agent's lidar in every env without host syncs.
Each shape's hit follows VMAS's float32 operations in VMAS's order and tensor layouts, so that the
distances are VMAS's bits on CPU.
"""

from __future__ import annotations

import math

import torch

from swarp.physics.vmas_mode.entities import BOX, SPHERE, EntityState, EntityTable

#: VMAS's full-circle tolerance: ``(angle_start - angle_end) % 2 pi`` below it drops the last ray.
FULL_CIRCLE_TOLERANCE = 1e-5


def lidar_angles(
    n_rays: int,
    angle_start: float = 0.0,
    angle_end: float = 2 * math.pi,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """A lidar's ray angles relative to its agent's heading, [n_rays] ``dtype`` [rad], bit for bit
    VMAS's: torch's CPU float32 ``linspace`` from ``angle_start`` to ``angle_end``, with
    ``n_rays + 1`` points and the last dropped when the span is a full circle
    (``(angle_start - angle_end) % 2 pi < 1e-5``), else ``n_rays`` points. Host-side (built once)."""
    if isinstance(n_rays, bool) or not isinstance(n_rays, int) or n_rays < 1:
        raise ValueError(f"n_rays must be an int >= 1, got {n_rays!r}")
    full_circle = (angle_start - angle_end) % (2 * math.pi) < FULL_CIRCLE_TOLERANCE
    points = n_rays + 1 if full_circle else n_rays
    angles = torch.linspace(angle_start, angle_end, points, dtype=torch.float32, device="cpu")[:n_rays]
    return angles.to(dtype=dtype, device=device)


def lidar_seen(table: EntityTable, agent_row: int, seen: torch.Tensor) -> torch.Tensor:
    """The rows agent ``agent_row``'s lidar sees: ``seen`` ([N] bool, VMAS's ``entity_filter`` applied
    to each row) without the agent itself, [N] bool on the table's device. Host-side: raises
    ``ValueError`` where a seen row cannot collide with the agent (VMAS asserts
    ``e.collides(agent) and agent.collides(e)`` for every filtered entity)."""
    n = table.n_entities
    if not 0 <= agent_row < n or not bool(table.is_agent[agent_row]):
        raise ValueError(f"agent_row {agent_row} is not an agent's row of a table of {n} entities")
    seen = torch.as_tensor(seen, dtype=torch.bool, device=table.device).clone()
    if seen.shape != (n,):
        raise ValueError(f"seen must be a [{n}] bool mask, got shape {list(seen.shape)}")
    seen[agent_row] = False
    bad = seen & ~table.collides[agent_row]
    if bool(bad.any()):
        rows = torch.nonzero(bad).flatten().tolist()
        raise ValueError(f"rows {rows} are seen by agent row {agent_row}'s lidar but cannot collide with it")
    return seen


def rotate(vector: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """``vector`` [..., 2] rotated by ``angle`` [...] [rad], VMAS's ``TorchUtils.rotate_vector``."""
    cos, sin = torch.cos(angle), torch.sin(angle)
    x, y = vector[..., 0], vector[..., 1]
    return torch.stack([x * cos - y * sin, x * sin + y * cos], dim=-1)


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """2D cross product of [..., 2] vectors, [..., 1] (VMAS's ``TorchUtils.cross``)."""
    return (a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]).unsqueeze(-1)


def sphere_hits(centre, radius, origin, direction, max_range: float) -> torch.Tensor:
    """Distance [m] along rays to spheres, VMAS's ``_cast_rays_to_sphere``: ``centre`` and ``origin``
    [E, N, R, 2], ``radius`` and ``direction`` [E, N, R] float32; a miss is ``max_range``."""
    dir_world = torch.stack([torch.cos(direction), torch.sin(direction)], dim=-1)
    line_pos = origin + dir_world * (max_range / 2)
    line_rot = direction.unsqueeze(-1)
    rotated = torch.cat([line_rot.cos(), line_rot.sin()], dim=-1)
    dot_p = ((line_pos - centre) * rotated).sum(-1).unsqueeze(-1)
    closest = line_pos - torch.sign(dot_p) * torch.abs(dot_p) * rotated
    d_norm = torch.linalg.vector_norm(centre - closest, dim=-1)
    intersects = d_norm < radius
    a = radius**2 - d_norm**2
    m = torch.sqrt(torch.where(a > 0, a, 1e-8))
    in_front = ((centre - origin) * dir_world).sum(-1) > 0.0
    dist = torch.linalg.vector_norm(closest - origin, dim=-1) - m
    return torch.where(intersects & in_front, dist, torch.full_like(dist, max_range))


def box_hits(centre, rot, length, width, origin, direction, max_range: float) -> torch.Tensor:
    """Distance [m] along rays to boxes, VMAS's slab method ``_cast_rays_to_box``: ``centre`` and
    ``origin`` [E, N, R, 2], ``rot``, ``length``, ``width``, ``direction`` [E, N, R] float32; a miss
    (or an origin inside the box) is ``max_range``."""
    pos_aabb = rotate(origin - centre, -rot)
    dir_world = torch.stack([torch.cos(direction), torch.sin(direction)], dim=-1)
    dir_aabb = rotate(dir_world, -rot)
    tx1 = (-length / 2 - pos_aabb[..., 0]) / dir_aabb[..., 0]
    tx2 = (length / 2 - pos_aabb[..., 0]) / dir_aabb[..., 0]
    tx = torch.stack([tx1, tx2], dim=-1)
    ty1 = (-width / 2 - pos_aabb[..., 1]) / dir_aabb[..., 1]
    ty2 = (width / 2 - pos_aabb[..., 1]) / dir_aabb[..., 1]
    ty = torch.stack([ty1, ty2], dim=-1)
    tmin = torch.max(torch.stack([tx.min(dim=-1).values, ty.min(dim=-1).values], dim=-1), dim=-1).values
    tmax = torch.min(torch.stack([tx.max(dim=-1).values, ty.max(dim=-1).values], dim=-1), dim=-1).values
    intersect = rotate(tmin.unsqueeze(-1) * dir_aabb + pos_aabb, rot) + centre
    dist = torch.linalg.norm(origin - intersect, dim=-1)
    hit = (tmax >= tmin) & (tmin > 0.0)
    return torch.where(hit, dist, torch.full_like(dist, max_range))


def line_hits(centre, rot, length, origin, direction, max_range: float) -> torch.Tensor:
    """Distance [m] along rays to line segments, VMAS's ``_cast_rays_to_line``: ``centre`` and
    ``origin`` [E, N, R, 2], ``rot``, ``length``, ``direction`` [E, N, R] float32; a miss (parallel,
    past an end, behind the origin) is ``max_range``."""
    r = torch.stack([torch.cos(rot), torch.sin(rot)], dim=-1) * length.unsqueeze(-1)
    s = torch.stack([torch.cos(direction), torch.sin(direction)], dim=-1)
    rxs = cross(r, s)
    t = cross(origin - centre, s / rxs)
    u = cross(origin - centre, r / rxs)
    d = torch.linalg.norm(u * s, dim=-1)
    miss = ((rxs == 0.0) | (t > 0.5) | (t < -0.5) | (u < 0.0)).squeeze(-1)
    return torch.where(miss, torch.full_like(d, max_range), d)


def cast_rays(
    table: EntityTable,
    state: EntityState,
    agent_row: int,
    angles: torch.Tensor,
    max_range: float,
    seen: torch.Tensor,
) -> torch.Tensor:
    """Agent ``agent_row``'s lidar in every env, VMAS's ``Lidar.measure()`` (vectorised path).

    Args:
        table: The entities (N rows, VMAS order).
        state: Their float32 state, E envs.
        agent_row: The lidar's agent's row (a Python int).
        angles: [R] or [E, R] float32 ray angles relative to the agent's heading [rad]
            (``lidar_angles``); a ray's world angle is ``angles + state.rot[:, agent_row]``.
        max_range: The lidar's range [m] (a Python float).
        seen: [N] bool, the rows the rays see (``lidar_seen``: the entity filter, without the agent).

    Returns:
        [E, R] float32 distances [m]: the nearest hit over the seen rows, ``max_range`` where
        nothing is hit (or the hit is farther); a sphere around the origin can give a negative
        distance, as in VMAS. No host syncs: capturable in a CUDA graph.
    """
    n = table.n_entities
    pos, rot = state.pos, state.rot
    n_envs = pos.shape[0]
    ray_angles = angles.to(pos.dtype) + rot[:, agent_row : agent_row + 1]
    n_rays = ray_angles.shape[-1]
    size = table.size.to(torch.float32)
    shape = table.shape

    def rows(values: torch.Tensor) -> torch.Tensor:  # [E, N] -> [E, N, R]
        return values.unsqueeze(-1).expand(n_envs, n, n_rays)

    origin = pos[:, agent_row].unsqueeze(-2).unsqueeze(-2).expand(n_envs, n, n_rays, 2)
    centre = pos.unsqueeze(-2).expand(n_envs, n, n_rays, 2)
    direction = ray_angles.unsqueeze(-2).expand(n_envs, n, n_rays)
    first = rows(size[:, 0].unsqueeze(0).expand(n_envs, n))
    second = rows(size[:, 1].unsqueeze(0).expand(n_envs, n))
    rot_rows = rows(rot)
    hits = torch.where(
        (shape == SPHERE).view(1, n, 1),
        sphere_hits(centre, first, origin, direction, max_range),
        torch.where(
            (shape == BOX).view(1, n, 1),
            box_hits(centre, rot_rows, first, second, origin, direction, max_range),
            line_hits(centre, rot_rows, first, origin, direction, max_range),
        ),
    )
    hits = torch.where(seen.view(1, n, 1), hits, torch.full_like(hits, max_range))
    dists = torch.cat([torch.full_like(ray_angles, max_range).unsqueeze(-1), hits.transpose(-1, -2)], dim=-1)
    return dists.min(dim=-1).values
