"""The environment's core: its plan, physics world, buffers and the scenario bound to them.

``EnvCore`` is what every other part of an environment reads (``swarp.env.launches``,
``swarp.env.step_end``, ``swarp.env.parameters``, ``swarp.env.snapshots``): built in two phases,
because the scenario binds to the ``Environment`` (the facade it hands to the user's scenario code)
once the facade can show the core's buffers:

1. ``EnvCore(scenario, options)``: the plan (chosen from the device, the sizes and what the
   scenario can do), the stepper and world, the parameter table's layout and the ``EnvBuffers``.
2. ``bind(env)``: the scenario's ``bind``, then what depends on its observation width (rows,
   lidar, info buffers).

Everything here is a plain attribute; the ``Environment`` shows each of ``PUBLIC`` as its own.
"""

from __future__ import annotations

import warnings
from typing import Any

import warp as wp

from swarp.core import params as param_table
from swarp.core.groups import message_columns
from swarp.env.options import EnvOptions
from swarp.physics import substep
from swarp.physics.step import Stepper
from swarp.physics.world import World
from swarp.runtime import step_end
from swarp.runtime.buffers import EnvBuffers
from swarp.runtime.plan import Capabilities, choose_neighbor_method, choose_plan
from swarp.runtime.sequence import TorchStreamScope, on_callers_stream
from swarp.runtime.step_end import StepEndHooks
from swarp.scenarios.framework.base import FusedScenario, Scenario
from swarp.sensors.lidar import Lidar

#: The core's attributes an ``Environment`` shows as its own (read and written through).
PUBLIC = (
    "scenario", "n_envs", "env_offset", "auto_reset", "max_steps", "clone_outputs", "fused", "plan",
    "randomization", "stepper", "world", "health_flags", "device", "torch_device", "dtype", "buffers",
    "seed_tensor", "episode", "step_count", "terminated", "truncated", "done", "reset_mask", "reward",
    "scenario_obs_dim", "lidar", "obs_dim", "obs", "final_obs", "info", "scenario_info_keys", "streams",
    "seed_value", "alive",
)  # fmt: skip


class CoreField:
    """An ``Environment`` attribute held by its ``EnvCore`` (read and written through)."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, env: Any, owner: type | None = None) -> Any:
        return self if env is None else getattr(env.core, self.name)

    def __set__(self, env: Any, value: Any) -> None:
        setattr(env.core, self.name, value)


def choose_env_plan(scenario: Scenario, options: EnvOptions, hooks: StepEndHooks | None):
    """The ``ExecutionPlan`` of an environment of ``scenario`` built with ``options`` (``hooks``:
    the scenario's ``step_end_hooks``, or ``None``); warns where ``use_graph=True`` cannot be honoured.

    Raises:
        ValueError: the plan asks for more CPU shards than envs, or a field the device or the
            scenario cannot honour (``choose_plan``).
    """
    spec, cuda = options.spec, options.device.startswith("cuda")
    brute_lists = choose_neighbor_method(spec.world, len(spec.agents), options.device) == "brute"
    can = Capabilities(
        # The torch reference is captured whole by torch on CUDA (swarp.env.reference).
        capturable=scenario.supports_graph_reset() if options.fused else cuda,
        fused=options.fused,
        auto_reset=options.auto_reset,
        lidar=options.lidar is not None,
        **step_end.capabilities(hooks, brute_lists),
        fuses_substep=substep.can_fuse(spec.agents, spec.world),
    )
    n_agents, max_neighbors = len(spec.agents), spec.world.max_neighbors
    plan = choose_plan(
        options.device, options.n_envs, n_agents, max_neighbors, options.use_graph, can, options.plan,
        cpu_threads=options.threads,
    )  # fmt: skip
    if plan.cpu_shards > options.n_envs:
        raise ValueError(f"plan.cpu_shards={plan.cpu_shards} is more shards than envs ({options.n_envs})")
    if options.use_graph is True and plan.launch != "graph" and not plan.compile_torch:
        warnings.warn(
            f"use_graph=True but the step is not capturable: running it without a graph ({plan.launch})",
            stacklevel=4,
        )
    return plan


class EnvCore:
    """The plan, world, buffers and bound scenario of one environment (see the module docstring).

    Args:
        scenario: The scenario (bound to the environment in ``bind``).
        options: The checked arguments (``EnvOptions.check``).

    Attributes:
        step_end_hooks: The scenario's ``StepEndHooks`` (fused scenarios that have them), or ``None``.
        lidar_stream: The stream the auto-reset's lidar scan forks onto (``plan.lidar_side_stream``).
        The others: see ``Environment``.
    """

    def __init__(self, scenario: Scenario, options: EnvOptions):
        o = self.options = options
        spec = o.spec
        self.scenario = scenario
        self.n_envs, self.env_offset, self.max_steps = o.n_envs, o.env_offset, o.max_steps
        self.auto_reset, self.clone_outputs, self.fused = o.auto_reset, o.clone_outputs, o.fused
        self.randomization = o.randomization
        fused_scenario = o.fused and isinstance(scenario, FusedScenario)
        self.step_end_hooks = scenario.step_end_hooks(spec) if fused_scenario else None
        # The plan first: it decides the layout of everything allocated below.
        self.plan = choose_env_plan(scenario, o, self.step_end_hooks)
        self.seed_value: int | None = o.seed
        self.lidar: Lidar | None = None
        # Torch's writes into new buffers (on its current stream) and Warp's fills: one stream for both.
        with on_callers_stream(o.device):
            self.stepper = stepper = Stepper(
                spec.agents, spec.dt, o.device, spec.world, spec.substeps, spec.integrator, o.dtype, plan=self.plan
            )
            columns = message_columns(spec.groups, spec.comm_dim, o.action_space)
            self.world = world = World(stepper, o.n_envs, message_columns=columns, alive_mask=spec.alive_mask)
            #: [E, A] bool torch view of the world's alive mask, or ``None`` (``WorldSpec.alive_mask``).
            self.alive = None if world.alive is None else wp.to_torch(world.alive)
            #: [E] int32 torch view of the world's sticky health flags (``non_finite``).
            self.health_flags = wp.to_torch(world.non_finite_flags)
            if o.per_env_params:
                param_table.enable_per_env_params(world.model, o.n_envs)
                world.invalidate()
            if spec.n_obstacle_slots:
                world.model.set_obstacle_slots(o.n_envs, spec.n_obstacle_slots)
                world.invalidate()
            self.device, self.torch_device, self.dtype = stepper.device, stepper.torch_device, stepper.torch_dtype
            b = self.buffers = EnvBuffers(
                self.plan, o.n_envs, stepper.n_agents, stepper.scalar, self.device, o.max_steps, o.auto_reset,
                o.env_offset, world.non_finite_flags,
            )  # fmt: skip
            self.seed_tensor = wp.to_torch(b.seed)
            self.episode = wp.to_torch(b.episode)
            self.step_count = wp.to_torch(b.step_count)
            self.terminated = wp.to_torch(b.terminated)
            self.truncated = wp.to_torch(b.truncated)
            self.done = wp.to_torch(b.done)
            self.reset_mask = wp.to_torch(b.reset_mask)
            self.reward = wp.to_torch(b.reward)

    def bind(self, env) -> None:
        """Bind the scenario to ``env`` (the ``Environment`` showing this core) and allocate what
        depends on its observation width: the observation rows, the lidar and the info buffers."""
        o, b, scenario = self.options, self.buffers, self.scenario
        with on_callers_stream(self.device):
            scenario.bind(env)
            self.scenario_obs_dim = scenario.obs_dim
            self.lidar = Lidar(self.world, o.lidar) if o.lidar else None
            self.obs_dim = self.scenario_obs_dim + o.lidar_rays
            b.allocate_rows(self.obs_dim, self.scenario_obs_dim)
            self.obs = wp.to_torch(b.obs)
            self.final_obs = wp.to_torch(b.final_obs)
            # The auto-reset's lidar scan forks onto this stream, beside the neighbor refresh and observation.
            self.lidar_stream = wp.Stream(self.device) if self.plan.lidar_side_stream else None
            self.info = dict(scenario.info_buffers())
            #: The keys the torch reference's ``info()`` must return (``info_buffers``' keys).
            self.scenario_info_keys = self.info.keys() - {"final_obs"}
            if self.auto_reset:
                self.info["final_obs"] = self.final_obs
            self.streams = TorchStreamScope(self.device)

    @property
    def n_agents(self) -> int:
        """Agents per env A."""
        return self.stepper.n_agents
