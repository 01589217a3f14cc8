"""The lidar's torch reference: every (ray, target) pair, the specification; differentiable
through torch autograd."""

import math

import torch
import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.types import PARAM_RADIUS, Model
from swarp.sensors.lidar.config import LidarConfig, LidarScan
from swarp.sensors.lidar.geometry import HIT_AGENT, HIT_BODY, HIT_NONE, HIT_OBSTACLE, HIT_WALL


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1)


def _rotate_back(v: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """``v`` [..., 2] rotated by ``-angle`` [...]."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack([c * v[..., 0] + s * v[..., 1], c * v[..., 1] - s * v[..., 0]], -1)


def ray_circle_torch(o: torch.Tensor, d: torch.Tensor, center: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
    """Hit distance [m] of rays ``o + t d`` (unit ``d``, [..., 2]) with discs; 0 inside, inf on a miss."""
    oc = o - center
    b = _dot(oc, d)
    c = _dot(oc, oc) - radius * radius
    disc = b * b - c
    hit = (c > 0) & (b < 0) & (disc >= 0)
    t = -b - torch.sqrt(torch.where(hit, disc, torch.ones_like(disc)))
    t = torch.where(hit, t, torch.full_like(t, math.inf))
    return torch.where(c <= 0, torch.zeros_like(t), t)


def ray_box_local_torch(o: torch.Tensor, d: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """Hit distance [m] of rays (box frame, [..., 2]) with boxes ``|x| <= half``; 0 inside, inf on a miss."""
    parallel = d == 0
    safe = torch.where(parallel, torch.ones_like(d), d)
    t1 = (-half - o) / safe
    t2 = (half - o) / safe
    inside = o.abs() <= half
    inf = torch.full_like(t1, math.inf)
    t_min = torch.where(parallel, torch.where(inside, -inf, inf), torch.minimum(t1, t2))
    t_max = torch.where(parallel, torch.where(inside, inf, -inf), torch.maximum(t1, t2))
    t_near = t_min.amax(-1)
    t_far = t_max.amin(-1)
    hit = (t_near <= t_far) & (t_far >= 0)
    return torch.where(hit, t_near.clamp(min=0.0), torch.full_like(t_near, math.inf))


def ray_obstacles_torch(
    o: torch.Tensor, d: torch.Tensor, shape: torch.Tensor, center: torch.Tensor, angle: torch.Tensor, size: torch.Tensor
) -> torch.Tensor:
    """Hit distances [m] of rays ``o``, ``d`` [..., 2] with obstacles (``shape`` [...] ``ObstacleShape``
    codes, ``center``/``size`` [..., 2], ``angle`` [...]); inf for a miss or an empty slot."""
    o, d, center, size = torch.broadcast_tensors(o, d, center, size)
    o_local = _rotate_back(o - center, angle)
    d_local = _rotate_back(d, angle)
    zero = torch.zeros_like(size[..., 0])
    circle = ray_circle_torch(o, d, center, size[..., 0])
    box = ray_box_local_torch(o_local, d_local, size)
    cap = torch.stack([size[..., 0], zero], -1)
    capsule = torch.minimum(
        box,
        torch.minimum(
            ray_circle_torch(o_local, d_local, -cap, size[..., 1]),
            ray_circle_torch(o_local, d_local, cap, size[..., 1]),
        ),
    )
    t = torch.full_like(circle, math.inf)
    t = torch.where(shape == int(ObstacleShape.CIRCLE), circle, t)
    t = torch.where(shape == int(ObstacleShape.BOX), box, t)
    return torch.where(shape == int(ObstacleShape.SEGMENT), capsule, t)


def ray_walls_torch(o: torch.Tensor, d: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
    """Distance [m] from ``o`` along ``d`` [..., 2] to the bounds box ``[lower, upper]`` [2] (0 outside it)."""
    safe = torch.where(d == 0, torch.ones_like(d), d)
    exit = torch.where(d > 0, (upper - o) / safe, (lower - o) / safe)
    exit = torch.where(d == 0, torch.full_like(exit, math.inf), exit)
    return exit.amin(-1).clamp(min=0.0)


def lidar_reference(
    config: LidarConfig,
    pos: torch.Tensor,
    theta: torch.Tensor,
    radius: torch.Tensor,
    obstacles: dict[str, torch.Tensor] | None = None,
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
    bodies: dict[str, torch.Tensor] | None = None,
) -> LidarScan:
    """Torch reference of the scan (the specification), differentiable in every float input.

    Args:
        config: The lidar.
        pos: [E, A, 2] positions [m].
        theta: [E, A] headings [rad].
        radius: [E_p, A] agent radii [m], ``E_p`` in {1, E}.
        obstacles: ``shape`` [E_o, O] int32 ``ObstacleShape`` codes, ``center`` [E_o, O, 2],
            ``angle`` [E_o, O], ``size`` [E_o, O, 2] (``Model.obstacle_tensors()``), or ``None``.
        bounds: ``((x_min, y_min), (x_max, y_max))`` [m] of the walls, or ``None``.
        bodies: Movable body shapes in the world frame (``BodyModel.shape_poses_torch``):
            ``shape`` [S], ``center`` [E, S, 2], ``angle`` [E, S], ``size`` [S, 2], ``body`` [S]
            (what ``index`` reports), or ``None``.

    Returns:
        ``LidarScan`` (distance keeps autograd history; kind and index are int32).
    """
    n_envs, n_agents = theta.shape
    rays = torch.arange(config.n_rays, device=pos.device, dtype=pos.dtype)
    phi = theta.unsqueeze(-1) + (2.0 * math.pi) * rays / config.n_rays  # [E, A, N]
    d = torch.stack([torch.cos(phi), torch.sin(phi)], -1).unsqueeze(-2)  # [E, A, N, 1, 2]
    o = pos.view(n_envs, n_agents, 1, 1, 2)
    candidates, kinds = [], []  # kinds: (HIT_* kind, number of candidates) per group
    if config.see_agents:
        centers = pos.view(n_envs, 1, 1, n_agents, 2)
        t = ray_circle_torch(o, d, centers, radius.view(-1, 1, 1, n_agents))  # [E, A, N, A]
        self_hit = torch.eye(n_agents, dtype=torch.bool, device=pos.device).view(1, n_agents, 1, n_agents)
        candidates.append(torch.where(self_hit, torch.full_like(t, math.inf), t))
        kinds.append((HIT_AGENT, n_agents))
    if obstacles is not None and obstacles["shape"].shape[1] > 0:
        n_obs = obstacles["shape"].shape[1]
        t = ray_obstacles_torch(
            o,
            d,
            obstacles["shape"].view(-1, 1, 1, n_obs),
            obstacles["center"].view(-1, 1, 1, n_obs, 2),
            obstacles["angle"].view(-1, 1, 1, n_obs),
            obstacles["size"].view(-1, 1, 1, n_obs, 2),
        )
        candidates.append(t.expand(n_envs, n_agents, config.n_rays, n_obs))
        kinds.append((HIT_OBSTACLE, n_obs))
    body_of_shape = None
    if bodies is not None and bodies["shape"].shape[0] > 0:
        n_shapes = bodies["shape"].shape[0]
        t = ray_obstacles_torch(
            o,
            d,
            bodies["shape"].view(1, 1, 1, n_shapes),
            bodies["center"].view(-1, 1, 1, n_shapes, 2),
            bodies["angle"].view(-1, 1, 1, n_shapes),
            bodies["size"].view(1, 1, 1, n_shapes, 2),
        )
        candidates.append(t.expand(n_envs, n_agents, config.n_rays, n_shapes))
        kinds.append((HIT_BODY, n_shapes))
        body_of_shape = bodies["body"]
    if config.see_walls and bounds is not None:
        # Built from fills, not copied from the host: the step stays capturable in a CUDA graph.
        lower, upper = (torch.stack([torch.full((), v, dtype=pos.dtype, device=pos.device) for v in b]) for b in bounds)
        candidates.append(ray_walls_torch(o.squeeze(-2), d.squeeze(-2), lower, upper).unsqueeze(-1))
        kinds.append((HIT_WALL, 1))
    shape = (n_envs, n_agents, config.n_rays)
    if not candidates:
        distance = torch.full(shape, config.max_range, dtype=pos.dtype, device=pos.device)
        none = torch.full(shape, HIT_NONE, dtype=torch.int32, device=pos.device)
        return LidarScan(distance, none, none - 1)
    all_t = torch.cat(candidates, -1)
    kind_of = torch.cat([torch.full((n,), k, device=pos.device, dtype=torch.int64) for k, n in kinds])
    # What ``index`` reports per candidate: its position in its group, the owning body for shapes.
    offsets = torch.cat([body_of_shape if k == HIT_BODY else torch.arange(n, device=pos.device) for k, n in kinds])
    t, which = all_t.min(-1)
    hit = t < config.max_range
    distance = torch.where(hit, t, torch.full_like(t, config.max_range))
    kind = torch.where(hit, kind_of[which], torch.full_like(which, HIT_NONE)).to(torch.int32)
    index = torch.where(hit & (kind != HIT_WALL), offsets[which], torch.full_like(which, -1)).to(torch.int32)
    return LidarScan(distance, kind, index)


def lidar_reference_model(
    model: Model,
    config: LidarConfig,
    pos: torch.Tensor,
    theta: torch.Tensor,
    bodies: dict[str, torch.Tensor] | None = None,
) -> LidarScan:
    """``lidar_reference`` with radii, obstacles and bounds read from ``model`` (and ``bodies`` as
    there, e.g. ``BodyModel.shape_poses_torch``)."""
    radius = wp.to_torch(model.params)[..., PARAM_RADIUS]
    bounds = model.bounds_vectors() if model.world.bounds is not None else None
    return lidar_reference(config, pos, theta, radius, model.obstacle_tensors(), bounds, bodies)
