"""swarp: a GPU-resident, differentiable, vectorized simulator of 2D robot swarms on NVIDIA Warp."""

import warp as _wp

# Module-load chatter on every first launch drowns a training log; keep warnings and errors.
if _wp.config.log_level == _wp.LOG_INFO:
    _wp.config.log_level = _wp.LOG_WARNING

from swarp.core.warp_init import init_warp as _init_warp  # noqa: E402

# Without a CUDA driver Warp's native start-up prints a no-driver line on every run; start it here
# without that one line (swarp/core/warp_init.py says how and why). With a driver: nothing changes.
_init_warp()

from swarp.core.config import (  # noqa: E402
    AgentConfig,
    Body,
    ControlMode,
    DynamicsModel,
    Integrator,
    Joint,
    Obstacle,
    ObstacleShape,
    WorldConfig,
)
from swarp.core.groups import AgentGroup, GroupSpec  # noqa: E402
from swarp.core.params import ParamRandomization  # noqa: E402
from swarp.core.types import Model, State, TorchState, TorchStateWithBodies  # noqa: E402
from swarp.env.environment import Environment  # noqa: E402
from swarp.env.make import make  # noqa: E402
from swarp.physics.autograd import rollout, warp_step  # noqa: E402
from swarp.physics.step import Stepper  # noqa: E402
from swarp.physics.world import World  # noqa: E402
from swarp.runtime.plan import ExecutionPlan  # noqa: E402
from swarp.scenarios import balance as _balance  # noqa: E402,F401  (registers "balance")
from swarp.scenarios import discovery as _discovery  # noqa: E402,F401  (registers "discovery")
from swarp.scenarios import drone_navigation as _drone_navigation  # noqa: E402,F401  (registers it)
from swarp.scenarios import fleet as _fleet  # noqa: E402,F401  (registers "fleet")
from swarp.scenarios import flocking as _flocking  # noqa: E402,F401  (registers "flocking")
from swarp.scenarios import formation as _formation  # noqa: E402,F401  (registers "formation")
from swarp.scenarios import give_way as _give_way  # noqa: E402,F401  (registers "give_way")
from swarp.scenarios import navigation as _navigation  # noqa: E402,F401  (registers "navigation")
from swarp.scenarios import push_t as _push_t  # noqa: E402,F401  (registers "push_t")
from swarp.scenarios import sampling as _sampling  # noqa: E402,F401  (registers "sampling")
from swarp.scenarios import speaker_listener as _speaker_listener  # noqa: E402,F401  (registers it)
from swarp.scenarios import spread as _spread  # noqa: E402,F401  (registers "spread")
from swarp.scenarios import transport as _transport  # noqa: E402,F401  (registers "transport")
from swarp.scenarios import variable_navigation as _variable_navigation  # noqa: E402,F401  (registers it)
from swarp.scenarios.framework.base import (  # noqa: E402
    FusedScenario,
    Scenario,
    WorldSpec,
    register_scenario,
    scenario_names,
    unregister_scenario,
)
from swarp.sensors.lidar import LidarConfig  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AgentConfig",
    "AgentGroup",
    "GroupSpec",
    "Body",
    "Joint",
    "TorchStateWithBodies",
    "Environment",
    "ExecutionPlan",
    "FusedScenario",
    "Scenario",
    "WorldSpec",
    "make",
    "register_scenario",
    "scenario_names",
    "unregister_scenario",
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
