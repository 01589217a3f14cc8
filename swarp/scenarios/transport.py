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

from swarp.core.config import AgentConfig, Body, Obstacle, WorldConfig
from swarp.render.drawables import Circles, Crosses
from swarp.scenarios.base import WorldSpec, register_scenario
from swarp.scenarios.body_goal import RING, BodyGoalScenario, Layout, check_options, stable_substeps

#: Colour of movable bodies in renders (RGB).
BODY_COLOR = (150, 110, 70)
#: Colour of goal markers (RGB).
GOAL_COLOR = (40, 160, 60)
#: Gap [m] between the spawn ring and the body's bounding circle, as a multiple of the agent radius.
RING_GAP_FACTOR = 1.5


@dataclass(frozen=True)
class TransportConfig:
    """Options of the transport scenario (SI units).

    Attributes:
        n_agents: Agents per env.
        world_size: Half-size L [m] of the arena ``[-L, L]^2`` (soft walls).
        agent_radius: Agent radius [m].
        max_speed: Agent speed limit [m/s].
        package_radius: Package radius [m].
        package_mass: Package mass [kg] (agents weigh 1 kg).
        package_damping: Linear and angular damping of the package [1/s].
        goal_radius: Success distance [m] of the package centre from the goal.
        contact_stiffness: Contact spring constant [N/m]; the substeps follow from it.
        shaping_factor: Weight of the progress term [1/m].
        final_reward: Bonus on the step of success.
        dt: Step length [s].
        substeps: Physics substeps (default: ``stable_substeps(dt, contact_stiffness, 1 kg)``).
        max_steps: Default episode length [steps].
    """

    n_agents: int = 4
    world_size: float = 1.0
    agent_radius: float = 0.05
    max_speed: float = 0.5
    package_radius: float = 0.15
    package_mass: float = 5.0
    package_damping: float = 2.0
    goal_radius: float = 0.1
    contact_stiffness: float = 400.0
    shaping_factor: float = 1.0
    final_reward: float = 1.0
    dt: float = 0.1
    substeps: int | None = None
    max_steps: int = 200

    def __post_init__(self) -> None:
        ints = {"n_agents": 1, "max_steps": 1} | ({"substeps": 1} if self.substeps is not None else {})
        positive = ("world_size", "agent_radius", "max_speed", "package_radius", "package_mass", "goal_radius")
        positive += ("contact_stiffness", "dt")
        check_options(self, "transport", ints, positive, ("package_damping", "shaping_factor", "final_reward"))
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
        agent = AgentConfig(radius=c.agent_radius, max_speed=c.max_speed)
        world = WorldConfig(bounds=c.world_size, collision_k=c.contact_stiffness, bodies=(package,))
        substeps = c.substeps or stable_substeps(c.dt, c.contact_stiffness, agent.mass)
        return WorldSpec(agents=(agent,) * c.n_agents, world=world, dt=c.dt, substeps=substeps, max_steps=c.max_steps)

    def drawables(self, env_index: torch.Tensor) -> list:
        """The package (a filled disc) and the goal (a ring of ``goal_radius`` and a cross)."""
        package = self.env.state.body_pos.index_select(0, env_index)
        goal = self.goal.index_select(0, env_index).unsqueeze(1)
        return [
            Circles(package, self.cfg.package_radius, color=BODY_COLOR),
            Circles(goal, self.cfg.goal_radius, color=GOAL_COLOR, width_px=2.0),
            Crosses(goal, 0.5 * self.cfg.goal_radius, color=GOAL_COLOR),
        ]


def scripted_actions(env) -> torch.Tensor:
    """[E, A, 2] velocity commands: line up behind the package (seen from the goal), then push.

    Agents on the goal side first go around the package, staying a radius clear of it."""
    sc: TransportScenario = env.scenario
    c = sc.cfg
    state = env.state
    package = state.body_pos[:, 0]
    to_goal = sc.goal - package
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
