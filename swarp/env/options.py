"""The environment's constructor arguments, checked in one place (``EnvOptions.check``).

Every argument ``Environment`` takes is validated here, before anything is allocated, and resolved
(``max_steps="default"``, ``fused="auto"``, the device, the thread count): the parts the environment
is built from (``swarp.env.core``, ``swarp.env.parameters``...) read the result and check nothing
again. ``EnvOptions.rebuild_kwargs`` are the arguments a pickle or a copy rebuilds the environment from.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

import torch

from swarp.core.params import ParamRandomization
from swarp.core.precision import resolve_device
from swarp.core.spaces import ACTION_SPACES
from swarp.runtime.plan import ExecutionPlan
from swarp.scenarios.framework.base import Scenario, WorldSpec
from swarp.sensors.lidar import LidarConfig

#: Global env indices enter the reset RNG as int32.
MAX_GLOBAL_ENVS = 2**31


def check_seed(seed: Any) -> int:
    """``seed`` as an int, checked: the reset RNG takes integers (numpy's too) in [0, 2^31)
    (``ValueError`` otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an int in [0, 2^31), got {seed!r}")
    return int(seed)


def _is_int(value: Any, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def _check_counts(k: dict[str, Any]) -> int:
    """Check the integer arguments of ``k`` (sizes, seed, offset, rays, flags); returns the threads
    a CPU step may use."""
    n_envs, env_offset, lidar_rays, cpu_threads = k["n_envs"], k["env_offset"], k["lidar_rays"], k["cpu_threads"]
    if not _is_int(n_envs, 1):
        raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
    check_seed(k["seed"])
    if not _is_int(env_offset, 0):
        raise ValueError(f"env_offset must be an int >= 0, got {env_offset!r}")
    if env_offset + n_envs > MAX_GLOBAL_ENVS:
        raise ValueError(
            f"env_offset + n_envs must be <= 2^31 (global env indices are int32), got "
            f"{env_offset} + {n_envs} = {env_offset + n_envs}"
        )
    if not _is_int(lidar_rays, 0):
        raise ValueError(f"lidar_rays must be an int >= 0, got {lidar_rays!r}")
    if not isinstance(k["per_env_params"], bool):
        raise TypeError(f"per_env_params must be a bool, got {k['per_env_params']!r}")
    threads = torch.get_num_threads() if cpu_threads is None else cpu_threads
    if not _is_int(threads, 1):
        raise ValueError(f"cpu_threads must be None or an int >= 1, got {cpu_threads!r}")
    return threads


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """The ``Environment`` arguments, checked and resolved (see ``Environment`` for each).

    Attributes:
        spec: The scenario's ``WorldSpec`` (``scenario.make_world()``, called once here).
        fused: Resolved: whether the scenario's Warp kernels run the step.
        max_steps: Resolved: the episode length limit [steps] or ``None``.
        device: Resolved device string (``"cpu"``, ``"cuda:0"``...).
        threads: Threads a CPU step may use (``cpu_threads`` or torch's count).
        lidar: The ``LidarConfig``, or ``None`` without lidar.
        randomization: The ``ParamRandomization``, or ``None``.
        per_env_params: Resolved (``randomize_params`` implies it).
        action_space, action_nvec: As given, once or as a mapping by agent group
            (``swarp.env.action_input`` checks the group names and the levels against each group's
            action width).
        rebuild_kwargs: The constructor's keyword arguments, checked and resolved: what a pickle or
            a copy rebuilds the environment from.
        scenario_as_given: A shallow copy of the scenario as given, before ``make_world`` and
            ``bind`` touch it: what a pickle or a copy rebuilds the environment from.
    """

    spec: WorldSpec
    n_envs: int
    seed: int
    env_offset: int
    auto_reset: bool
    max_steps: int | None
    fused: bool
    use_graph: bool | str
    clone_outputs: bool
    dtype: str | torch.dtype
    device: str
    threads: int
    lidar: LidarConfig | None
    lidar_rays: int
    randomization: ParamRandomization | None
    per_env_params: bool
    action_space: str | Mapping[str, str]
    action_nvec: Any
    plan: ExecutionPlan | Mapping[str, Any] | None
    rebuild_kwargs: dict[str, Any]
    scenario_as_given: Scenario

    @classmethod
    def check(cls, scenario: Scenario, **kwargs: Any) -> EnvOptions:
        """Check the arguments of ``Environment(scenario, **kwargs)`` (all of them, by name) and
        resolve them; calls ``scenario.make_world()`` once.

        Raises:
            TypeError, ValueError: an argument out of its domain (the message names it).
        """
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenario must be a Scenario instance, got {type(scenario).__name__}")
        # Before ``make_world`` (and later ``bind``) touch it: pickles and copies rebuild from it.
        as_given = copy.copy(scenario)
        k = kwargs
        n_envs, env_offset, lidar_rays = k["n_envs"], k["env_offset"], k["lidar_rays"]
        threads = _check_counts(k)
        plan, fused = k["plan"], k["fused"]
        if plan is not None and not isinstance(plan, (ExecutionPlan, Mapping)):
            raise TypeError(
                f"plan must be an ExecutionPlan, a mapping of its fields or None, got {type(plan).__name__}"
            )
        randomization = k["randomize_params"]
        if randomization is not None and not isinstance(randomization, ParamRandomization):
            randomization = ParamRandomization(randomization)
        per_env_params = k["per_env_params"] or randomization is not None
        kinds = k["action_space"].values() if isinstance(k["action_space"], Mapping) else (k["action_space"],)
        for kind in kinds:
            if kind not in ACTION_SPACES:
                raise ValueError(f"action_space must be one of {', '.join(ACTION_SPACES)}, got {kind!r}")
        if fused not in (True, False, "auto"):
            raise ValueError(f"fused must be True, False or 'auto', got {fused!r}")
        if fused is True and not scenario.fused_available:
            raise ValueError(f"fused=True but scenario {scenario.name!r} has no fused kernels")
        spec = scenario.make_world()
        max_steps = spec.max_steps if k["max_steps"] == "default" else k["max_steps"]
        if max_steps is not None and not _is_int(max_steps, 1):
            raise ValueError(f"max_steps must be an int >= 1, None or 'default', got {max_steps!r}")
        device = resolve_device(k["device"])
        auto_reset, clone_outputs = bool(k["auto_reset"]), bool(k["clone_outputs"])
        rebuild = {
            **k,
            "device": device,
            "seed": int(k["seed"]),
            "auto_reset": auto_reset,
            "max_steps": max_steps,
            "clone_outputs": clone_outputs,
            "per_env_params": per_env_params,
            "randomize_params": randomization,
        }
        return cls(
            spec=spec,
            n_envs=n_envs,
            seed=int(k["seed"]),
            env_offset=env_offset,
            auto_reset=auto_reset,
            max_steps=max_steps,
            fused=scenario.fused_available if fused == "auto" else bool(fused),
            use_graph=k["use_graph"],
            clone_outputs=clone_outputs,
            dtype=k["dtype"],
            device=device,
            threads=threads,
            lidar=LidarConfig(lidar_rays, k["lidar_range"]) if lidar_rays else None,
            lidar_rays=lidar_rays,
            randomization=randomization,
            per_env_params=per_env_params,
            action_space=k["action_space"],
            action_nvec=k["action_nvec"],
            plan=plan,
            rebuild_kwargs=rebuild,
            scenario_as_given=as_given,
        )
