"""swarp: a GPU-resident, differentiable, vectorized simulator of 2D robot swarms on NVIDIA Warp."""

import warp as _wp

# Module-load chatter on every first launch drowns a training log; keep warnings and errors.
if _wp.config.log_level == _wp.LOG_INFO:
    _wp.config.log_level = _wp.LOG_WARNING

from swarp.core.config import (  # noqa: E402
    AgentConfig,
    ControlMode,
    DynamicsModel,
    Integrator,
    Obstacle,
    ObstacleShape,
    WorldConfig,
)
from swarp.core.params import ParamRandomization  # noqa: E402
from swarp.core.types import Model, State, TorchState  # noqa: E402
from swarp.env.environment import Environment, make  # noqa: E402
from swarp.interop.autograd import rollout, warp_step  # noqa: E402
from swarp.physics.step import Stepper  # noqa: E402
from swarp.physics.world import World  # noqa: E402
from swarp.scenarios import drone_navigation as _drone_navigation  # noqa: E402,F401  (registers it)
from swarp.scenarios import navigation as _navigation  # noqa: E402,F401  (registers "navigation")
from swarp.scenarios.base import FusedScenario, Scenario, WorldSpec, register_scenario, scenario_names  # noqa: E402
from swarp.sensors.lidar import LidarConfig  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AgentConfig",
    "Environment",
    "FusedScenario",
    "Scenario",
    "WorldSpec",
    "make",
    "register_scenario",
    "scenario_names",
    "ControlMode",
    "DynamicsModel",
    "Integrator",
    "LidarConfig",
    "Model",
    "Obstacle",
    "ObstacleShape",
    "ParamRandomization",
    "State",
    "Stepper",
    "TorchState",
    "World",
    "WorldConfig",
    "rollout",
    "warp_step",
]
