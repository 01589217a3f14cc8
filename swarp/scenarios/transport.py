"""Transport: agents push a heavy round package to a goal (torch reference; the Warp twin is
``body_goal_kernels.py``). Observation, reward and info: see ``body_goal.py`` (one body: obs_dim 14).

The package is a movable disc of ``package_radius`` and ``package_mass`` with linear damping (floor
friction); success when its centre is within ``goal_radius`` of the goal. ``scripted_actions`` is a
push-from-behind controller, the baseline that must beat random actions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from swarp.core.config import Body, Joint, Obstacle
from swarp.scenarios.body_goal import RING, BodyGoalConfig, BodyGoalScenario, Layout
from swarp.scenarios.framework.base import WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses

#: Colour of movable bodies in renders (RGB).
BODY_COLOR = (150, 110, 70)
#: Colour of goal markers (RGB).
GOAL_COLOR = (40, 160, 60)
#: Gap [m] between the spawn ring and the body's bounding circle, as a multiple of the agent radius.
RING_GAP_FACTOR = 1.5


@dataclass(frozen=True)
class TransportConfig(BodyGoalConfig):
    """Options of the transport scenario (SI units): those of ``BodyGoalConfig``, and

    Attributes:
        package_radius: Package radius [m].
        package_mass: Package mass [kg] (agents weigh 1 kg).
        package_damping: Linear and angular damping of the package [1/s].
        goal_radius: Success distance [m] of the package centre from the goal.
        tethered: Tie every agent to the package centre with a rod joint of the spawn ring's radius
            (``swarp.core.config.Joint``): the agents can pull as well as push.
    """

    package_radius: float = 0.15
    package_mass: float = 5.0
    package_damping: float = 2.0
    goal_radius: float = 0.1
    tethered: bool = False

    scenario = "transport"
    positive_options = ("package_radius", "package_mass", "goal_radius")
    non_negative_options = ("package_damping",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.tethered, bool):
            raise ValueError(f"transport option tethered must be a bool, got {self.tethered!r}")
        if self.package_radius + 2 * (1 + RING_GAP_FACTOR) * self.agent_radius >= 0.5 * self.world_size:
            raise ValueError("transport: package_radius and agent_radius are too large for world_size")


class TransportScenario(BodyGoalScenario):
    """Agents push a heavy round package to a goal; see the module docstring."""

    name = "transport"
    Config = TransportConfig
    angle_weight = 0.0
    angle_tolerance = math.inf
    failure_penalty = 0.0

    def make_world(self) -> WorldSpec:
        c = self.cfg
        package = Body(
            shapes=(Obstacle.circle((0.0, 0.0), c.package_radius),),
            mass=c.package_mass,
            linear_damping=c.package_damping,
            angular_damping=c.package_damping,
        )
        ring = c.package_radius + (1 + RING_GAP_FACTOR) * c.agent_radius
        self.layout = Layout(
            RING,
            body_extent=c.world_size - ring - 2 * c.agent_radius,
            goal_extent=c.world_size - c.package_radius,
            ring_radius=ring,
        )
        self.position_tolerance = c.goal_radius
        joints = tuple(Joint(body=0, agent=i, length=ring) for i in range(c.n_agents)) if c.tethered else ()
        return self.body_world((package,), joints)

    def drawables(self, env_index: torch.Tensor) -> list:
        """The package (a filled disc) and the goal (a ring of ``goal_radius`` and a cross)."""
        package = self.env.state.body_pos.index_select(0, env_index)
        goal = self.goal.index_select(0, env_index).unsqueeze(1)
        return [
            Circles(package, self.cfg.package_radius, color=BODY_COLOR),
            Circles(goal, self.cfg.goal_radius, color=GOAL_COLOR, width_px=2.0),
            Crosses(goal, 0.5 * self.cfg.goal_radius, color=GOAL_COLOR),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``scripted_actions``) for the current state."""
        return scripted_actions(self.env)


def scripted_actions(env) -> torch.Tensor:
    """[E, A, 2] velocity commands: line up behind the package (seen from the goal), then push.

    Agents on the goal side first go around the package, staying a radius clear of it. Tethered
    agents all head for the goal together (their rods pull the package along)."""
    sc: TransportScenario = env.scenario
    c = sc.cfg
    state = env.state
    package = state.body_pos[:, 0]
    to_goal = sc.goal - package
    if c.tethered:
        command = (to_goal / env.stepper.dt).unsqueeze(1).expand_as(state.pos)
        norm = command.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        return (command * (c.max_speed / norm).clamp(max=1.0)).contiguous()
    n = to_goal / to_goal.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    side = torch.stack([-n[:, 1], n[:, 0]], -1)
    A = env.n_agents
    spread = (torch.arange(A, device=package.device, dtype=env.dtype) - 0.5 * (A - 1)) / max(A - 1, 1)
    offset = spread.view(1, A, 1) * (1.2 * c.package_radius) * side.unsqueeze(1)
    reach = c.package_radius + c.agent_radius
    behind = package.unsqueeze(1) - n.unsqueeze(1) * reach + offset
    rel = state.pos - package.unsqueeze(1)
    ahead = (rel * n.unsqueeze(1)).sum(-1, keepdim=True) > -0.5 * c.package_radius
    around_sign = torch.sign((rel * side.unsqueeze(1)).sum(-1, keepdim=True) + 1e-9)
    detour = (
        package.unsqueeze(1) + side.unsqueeze(1) * around_sign * (reach + 2 * c.agent_radius) - n.unsqueeze(1) * reach
    )
    target = torch.where(ahead, detour, behind)
    command = (target - state.pos) / env.stepper.dt
    in_place = ((behind - state.pos).norm(dim=-1, keepdim=True) < 2 * c.agent_radius) & ~ahead
    command = command + in_place * n.unsqueeze(1) * c.max_speed
    norm = command.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return (command * (c.max_speed / norm).clamp(max=1.0)).contiguous()


register_scenario("transport", TransportScenario)
