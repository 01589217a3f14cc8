"""Push-T: agents push a T-shaped compound body to a goal pose, position and angle (torch
reference; the Warp twin is ``body_goal_kernels.py``). Observation, reward and info: see
``body_goal.py`` (one body: obs_dim 14; ``angle_weight`` puts the angle error into the reward).

The T is two boxes sharing one body id (a bar of ``2 * bar_half_extents`` on a stem of
``2 * stem_half_extents``), its frame at the centre of mass. Solved when the centre of mass is within
``position_tolerance`` of the goal and the angle within ``angle_tolerance``. The substeps follow
from the contact stiffness (``body_goal.stable_substeps``). ``scripted_actions`` is a greedy
contact-point pusher, the baseline that must beat random actions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from swarp.core.config import Body, Obstacle
from swarp.scenarios.body_goal import RING, BodyGoalConfig, BodyGoalScenario, Layout, wrap_angle_torch
from swarp.scenarios.framework.base import WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Boxes, Crosses
from swarp.scenarios.transport import BODY_COLOR, GOAL_COLOR, RING_GAP_FACTOR

#: Outline width of the goal pose [px].
GOAL_OUTLINE_PX = 2.0


@dataclass(frozen=True)
class PushTConfig(BodyGoalConfig):
    """Options of the push-T scenario (SI units): those of ``BodyGoalConfig``, and

    Attributes:
        bar_half_extents: Half width and half height [m] of the T's bar.
        stem_half_extents: Half width and half height [m] of the T's stem (below the bar).
        t_mass: Mass of the T [kg].
        t_damping: Linear and angular damping of the T [1/s] (floor friction).
        position_tolerance: Success distance [m] of the centre of mass from the goal.
        angle_tolerance: Success angle error [rad].
        angle_weight: Weight [m/rad] of the angle error in the shaped error.
    """

    max_steps: int = 300
    bar_half_extents: tuple[float, float] = (0.2, 0.05)
    stem_half_extents: tuple[float, float] = (0.05, 0.15)
    t_mass: float = 2.0
    t_damping: float = 3.0
    position_tolerance: float = 0.1
    angle_tolerance: float = 0.3
    angle_weight: float = 0.2

    scenario = "push_t"
    positive_options = ("t_mass", "position_tolerance", "angle_tolerance")
    non_negative_options = ("t_damping", "angle_weight")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("bar_half_extents", "stem_half_extents"):
            value = getattr(self, name)
            if len(value) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in value):
                raise ValueError(f"push_t option {name} must be two finite numbers > 0, got {value!r}")


def t_shapes(bar: tuple[float, float], stem: tuple[float, float]) -> tuple[Obstacle, Obstacle]:
    """The bar and stem boxes of a T, offset so that the body frame sits at the centre of mass."""
    bar_area, stem_area = 4 * bar[0] * bar[1], 4 * stem[0] * stem[1]
    stem_y = -(bar[1] + stem[1])
    com_y = stem_area * stem_y / (bar_area + stem_area)
    return Obstacle.box((0.0, -com_y), bar), Obstacle.box((0.0, stem_y - com_y), stem)


class PushTScenario(BodyGoalScenario):
    """Agents push a T to a goal pose; see the module docstring."""

    name = "push_t"
    Config = PushTConfig
    failure_penalty = 0.0

    def make_world(self) -> WorldSpec:
        c = self.cfg
        self.shapes = t_shapes(c.bar_half_extents, c.stem_half_extents)
        t_body = Body(shapes=self.shapes, mass=c.t_mass, linear_damping=c.t_damping, angular_damping=c.t_damping)
        reach = self.t_reach = t_body.bounding_radius
        ring = reach + (1 + RING_GAP_FACTOR) * c.agent_radius
        if ring + 2 * c.agent_radius >= c.world_size:
            raise ValueError("push_t: the T and the agents' spawn ring do not fit into world_size")
        self.layout = Layout(
            RING,
            body_extent=c.world_size - ring - 2 * c.agent_radius,
            goal_extent=c.world_size - reach,
            ring_radius=ring,
            random_body_angle=True,
            random_goal_angle=True,
        )
        self.position_tolerance = c.position_tolerance
        self.angle_tolerance = c.angle_tolerance
        self.angle_weight = c.angle_weight
        return self.body_world((t_body,))

    def _boxes(self, pos: torch.Tensor, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Centres [N, 2, 2], half extents [N, 2, 2] and angles [N, 2] of the T's boxes at a pose."""
        offsets = torch.tensor([s.center for s in self.shapes], dtype=pos.dtype, device=pos.device)
        extents = torch.tensor([s.size for s in self.shapes], dtype=pos.dtype, device=pos.device)
        cos, sin = torch.cos(theta).view(-1, 1), torch.sin(theta).view(-1, 1)
        x = pos[:, 0:1] + cos * offsets[:, 0] - sin * offsets[:, 1]
        y = pos[:, 1:2] + sin * offsets[:, 0] + cos * offsets[:, 1]
        return torch.stack([x, y], -1), extents.expand(pos.shape[0], 2, 2), theta.view(-1, 1).expand(-1, 2)

    def drawables(self, env_index: torch.Tensor) -> list:
        """The T (filled) and its goal pose (outlined, with a cross at the goal)."""
        state = self.env.state
        t_center, extents, t_angle = self._boxes(state.body_pos[env_index, 0], state.body_theta[env_index, 0])
        goal = self.goal.index_select(0, env_index)
        g_center, _, g_angle = self._boxes(goal, self.goal_angle.index_select(0, env_index))
        return [
            Boxes(g_center, extents, g_angle, color=GOAL_COLOR, width_px=GOAL_OUTLINE_PX),
            Boxes(t_center, extents, t_angle, color=BODY_COLOR),
            Crosses(goal.unsqueeze(1), 0.5 * self.cfg.position_tolerance, color=GOAL_COLOR),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``scripted_actions``) for the current state."""
        return scripted_actions(self.env)


def _contact_points(cfg: PushTConfig, shapes) -> tuple[torch.Tensor, torch.Tensor]:
    """Body-frame pushing points on the T's outline [P, 2] and their outward normals [P, 2]."""
    (bx, by), (sx, sy) = cfg.bar_half_extents, cfg.stem_half_extents
    bar_y, stem_y = shapes[0].center[1], shapes[1].center[1]
    points = [
        (-0.7 * bx, bar_y + by, 0, 1),
        (0.7 * bx, bar_y + by, 0, 1),  # bar top
        (-0.8 * bx, bar_y - by, 0, -1),
        (0.8 * bx, bar_y - by, 0, -1),  # bar underside
        (-bx, bar_y, -1, 0),
        (bx, bar_y, 1, 0),  # bar ends
        (-sx, stem_y, -1, 0),
        (sx, stem_y, 1, 0),  # stem sides
        (0.0, stem_y - sy, 0, -1),  # stem foot
    ]
    table = torch.tensor(points, dtype=torch.float64)
    return table[:, :2], table[:, 2:]


def scripted_actions(env) -> torch.Tensor:
    """[E, A, 2] velocity commands: each agent in turn takes the free pushing point whose inward push
    best matches the desired motion of the T (a P controller on position and angle), walks to a
    stand-off point outside it, then pushes through it while the push helps."""
    sc: PushTScenario = env.scenario
    c = sc.cfg
    state = env.state
    dtype, dev = env.dtype, state.pos.device
    points, normals = (t.to(dev, dtype) for t in _contact_points(c, sc.shapes))
    x, theta = state.body_pos[:, 0], state.body_theta[:, 0]
    cos, sin = torch.cos(theta).view(-1, 1), torch.sin(theta).view(-1, 1)

    def rotate(v):  # [P, 2] body frame -> [E, P, 2] world frame
        return torch.stack([cos * v[:, 0] - sin * v[:, 1], sin * v[:, 0] + cos * v[:, 1]], -1)

    lever, normal = rotate(points), rotate(normals)
    v_des = (sc.goal - x) * 1.5
    v_des = v_des * (0.3 / v_des.norm(dim=-1, keepdim=True).clamp_min(0.3))
    omega_des = (2.0 * wrap_angle_torch(sc.goal_angle - theta)).clamp(-1.5, 1.5).view(-1, 1)
    u = v_des.unsqueeze(1) + omega_des.unsqueeze(-1) * torch.stack([-lever[..., 1], lever[..., 0]], -1)
    score = -(u * normal).sum(-1)  # [E, P]: how much an inward push at the point helps
    world_points = x.unsqueeze(1) + lever
    taken = torch.zeros_like(score, dtype=torch.bool)
    commands = []
    r = c.agent_radius
    dt = env.stepper.dt
    reach = sc.t_reach
    orbit = reach + r + 0.03
    for a in range(env.n_agents):
        best = torch.where(taken, torch.full_like(score, -math.inf), score).argmax(-1, keepdim=True)
        taken.scatter_(1, best, True)
        point = world_points.gather(1, best.unsqueeze(-1).expand(-1, 1, 2)).squeeze(1)
        n = normal.gather(1, best.unsqueeze(-1).expand(-1, 1, 2)).squeeze(1)
        push = score.gather(1, best).clamp_min(0.0)
        p = state.pos[:, a]
        rel = p - point
        along = (rel * n).sum(-1, keepdim=True)
        lateral = (rel - along * n).norm(dim=-1, keepdim=True)
        # In the lane (on the point's outward normal ray): slide in and push while pushing helps.
        in_lane = (along > 0) & (lateral < 0.03)
        engaged = in_lane & (along < r + 0.08)
        contact = point + n * (r - 0.02)
        standoff = point + n * (r + 0.06)
        slide = torch.where(engaged, (contact - p) / dt * 0.3 - n * push, (standoff - p) / dt)
        # Elsewhere: head for the lane's far end, orbiting the T's bounding circle instead of crossing it.
        far = point + n * (2.0 * reach)
        radial = p - x
        dist = radial.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        radial_hat = radial / dist
        to_far = far - p
        blocked = (dist < 1.2 * orbit) & ((to_far * radial_hat).sum(-1, keepdim=True) < 0)
        tangent = torch.stack([-radial_hat[:, 1], radial_hat[:, 0]], -1)
        turn = torch.sign(radial[:, 0:1] * (far - x)[:, 1:2] - radial[:, 1:2] * (far - x)[:, 0:1] + 1e-9)
        orbit_command = tangent * turn * c.max_speed + radial_hat * (orbit - dist) / dt
        travel = torch.where(blocked, orbit_command, to_far / dt)
        commands.append(torch.where(in_lane, slide, travel))
    command = torch.stack(commands, 1)
    norm = command.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return (command * (c.max_speed / norm).clamp(max=1.0)).contiguous()


register_scenario("push_t", PushTScenario)
