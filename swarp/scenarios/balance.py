"""Balance (after VMAS's): agents carry a rod with a package on top to a goal without dropping it
(torch reference; the Warp twin is ``body_goal_kernels.py``). Observation, reward and info: see
``body_goal.py`` (two bodies, the rod then the package: obs_dim 20).

Gravity ``(0, -gravity)`` pulls the rod and the package (not the agents) towards the floor, the
soft wall at ``y = -world_size``. Nothing holds the package but contact (there is no friction): a
tilted rod lets it slide, so the agents steer it by tilting. Failure (``failure_penalty``) when the
package's centre drops below the rod's; success when it is within ``goal_radius`` of the goal.

Reset: the rod lies level just above the floor at a uniform x in ``[-rod_extent, rod_extent]``
(``rod_extent = world_size - rod_half_length - agent_radius``), the package on it at a uniform
offset within half the rod's half length, the agents spaced evenly under the rod, touching it; the
goal at a uniform x in ``[-goal_extent, goal_extent]`` at height ``goal_height``.
``scripted_actions`` lifts and tilts towards the goal, the baseline that must beat random actions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from swarp.core.config import Body, Obstacle
from swarp.scenarios.body_goal import BALANCE, BodyGoalConfig, BodyGoalScenario, Layout
from swarp.scenarios.framework.base import WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Boxes, Circles, Crosses
from swarp.scenarios.transport import BODY_COLOR, GOAL_COLOR

#: Gap [m] between the agents and the floor at reset.
FLOOR_GAP = 0.005
#: Colour of the package in renders (RGB).
PACKAGE_COLOR = (200, 150, 40)


@dataclass(frozen=True)
class BalanceConfig(BodyGoalConfig):
    """Options of the balance scenario (SI units): those of ``BodyGoalConfig`` (three agents by
    default, under the rod; the floor is ``y = -world_size``), and

    Attributes:
        rod_half_length: Half length [m] of the rod.
        rod_half_thickness: Half thickness [m] of the rod.
        rod_mass: Mass of the rod [kg].
        package_radius: Radius [m] of the package.
        package_mass: Mass of the package [kg].
        gravity: Downward acceleration [m/s^2] of the rod and the package.
        body_damping: Linear and angular damping of the rod and the package [1/s] (air drag).
        goal_extent: Half width [m] of the band of goal x positions.
        goal_height: Height [m] of the goal (y, from the arena centre).
        goal_radius: Success distance [m] of the package centre from the goal.
        failure_penalty: Penalty on the step the package drops below the rod.
    """

    n_agents: int = 3
    rod_half_length: float = 0.4
    rod_half_thickness: float = 0.015
    rod_mass: float = 1.0
    package_radius: float = 0.06
    package_mass: float = 1.0
    gravity: float = 0.5
    body_damping: float = 0.5
    goal_extent: float = 0.4
    goal_height: float = 0.3
    goal_radius: float = 0.15
    failure_penalty: float = 1.0

    scenario = "balance"
    positive_options = ("rod_half_length", "rod_half_thickness", "rod_mass", "package_radius", "package_mass")
    positive_options += ("goal_radius",)
    non_negative_options = ("gravity", "body_damping", "goal_extent", "failure_penalty")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rod_half_length + self.agent_radius >= self.world_size or self.goal_extent >= self.world_size:
            raise ValueError("balance: rod_half_length + agent_radius and goal_extent must be < world_size")
        if not -self.world_size < self.goal_height < self.world_size:
            raise ValueError(f"balance option goal_height must be inside the arena, got {self.goal_height!r}")


class BalanceScenario(BodyGoalScenario):
    """Agents lift a rod carrying a package to a goal; see the module docstring."""

    name = "balance"
    Config = BalanceConfig
    target_body = 1
    checks_drop = True
    angle_weight = 0.0
    angle_tolerance = math.inf

    def make_world(self) -> WorldSpec:
        c = self.cfg
        gravity = (0.0, -c.gravity)
        rod = Body(
            shapes=(Obstacle.box((0.0, 0.0), (c.rod_half_length, c.rod_half_thickness)),),
            mass=c.rod_mass,
            linear_damping=c.body_damping,
            angular_damping=c.body_damping,
            gravity=gravity,
        )
        package = Body(
            shapes=(Obstacle.circle((0.0, 0.0), c.package_radius),),
            mass=c.package_mass,
            linear_damping=c.body_damping,
            angular_damping=c.body_damping,
            gravity=gravity,
        )
        line_y = -c.world_size + FLOOR_GAP + 2 * c.agent_radius + c.rod_half_thickness
        self.layout = Layout(
            BALANCE,
            body_extent=c.world_size - c.rod_half_length - c.agent_radius,
            goal_extent=c.goal_extent,
            line_y=line_y,
            line_half_length=c.rod_half_length,
            line_half_thickness=c.rod_half_thickness,
            package_radius=c.package_radius,
            agent_radius=c.agent_radius,
            goal_y=c.goal_height,
        )
        self.position_tolerance = c.goal_radius
        self.failure_penalty = c.failure_penalty
        return self.body_world((rod, package))

    def drawables(self, env_index: torch.Tensor) -> list:
        """The rod (a filled box), the package (a filled disc) and the goal (a ring and a cross)."""
        c, state = self.cfg, self.env.state
        rod = state.body_pos[env_index, 0:1]
        goal = self.goal.index_select(0, env_index).unsqueeze(1)
        return [
            Circles(goal, c.goal_radius, color=GOAL_COLOR, width_px=2.0),
            Crosses(goal, 0.5 * c.goal_radius, color=GOAL_COLOR),
            Boxes(rod, (c.rod_half_length, c.rod_half_thickness), state.body_theta[env_index, 0:1], color=BODY_COLOR),
            Circles(state.body_pos[env_index, 1:2], c.package_radius, color=PACKAGE_COLOR),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``scripted_actions``) for the current state."""
        return scripted_actions(self.env)


def scripted_actions(env) -> torch.Tensor:
    """[E, A, 2] velocity commands: keep formation under the rod, lift towards the goal height, and
    tilt the rod so the package rolls towards the goal's x (with damping on its x velocity)."""
    sc: BalanceScenario = env.scenario
    c, state = sc.cfg, env.state
    A, dt = env.n_agents, env.stepper.dt
    rod, rod_theta = state.body_pos[:, 0], state.body_theta[:, 0:1]
    package, package_vel = state.body_pos[:, 1], state.body_vel[:, 1]
    agents = torch.arange(A, device=rod.device, dtype=env.dtype).view(1, A)
    spread = ((agents + 0.5) / A * 2.0 - 1.0) * (0.8 * c.rod_half_length)
    target_theta = -(1.0 * (sc.goal[:, 0:1] - package[:, 0:1]) - 0.8 * package_vel[:, 0:1]).clamp(-0.12, 0.12)
    lift = (1.0 * (sc.goal[:, 1:2] - package[:, 1:2])).clamp(-0.2, 0.2)
    offset = state.pos[..., 0] - rod[:, 0:1]
    vy = lift + 2.0 * (target_theta - rod_theta) * offset
    vx = (rod[:, 0:1] + spread - state.pos[..., 0]) / dt * 0.5 + state.body_vel[:, 0, 0:1]
    command = torch.stack([vx, vy], -1)
    norm = command.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return (command * (c.max_speed / norm).clamp(max=1.0)).contiguous()


register_scenario("balance", BalanceScenario)
