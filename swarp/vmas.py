"""VMAS drop-in: ``make_env`` builds a swarp environment behind VMAS's ``Environment`` API.

    from swarp.vmas import make_env                      # instead of ``from vmas import make_env``

    env = make_env("navigation", num_envs=32, device="cpu", seed=0, max_steps=100, n_agents=4)
    obs = env.reset()                                    # list of n_agents tensors [32, obs_dim]
    for _ in range(200):
        actions = [env.get_random_action(agent) for agent in env.agents]    # [32, act_dim] each
        obs, rews, dones, info = env.step(actions)      # rews: n_agents x [32]; dones: [32] bool
        for index in dones.nonzero().flatten().tolist():
            obs = env.reset_at(index)

What follows VMAS 1.5.2 (``vmas/simulator/environment/environment.py``) exactly:

* ``reset(seed=None, return_observations=True, return_info=False, return_dones=False)`` and
  ``reset_at(index, ...)`` return what VMAS's do: the observations alone, or a list of the requested
  parts in the order observations, dones (or terminated, truncated), infos; ``None`` when nothing is
  requested. ``reset_at`` resets one env and returns the observations of every env.
* ``step(actions)`` takes a list of per-agent tensors ``[num_envs, act_dim]`` or a dict keyed by
  agent name, and returns the list ``[obs, rews, dones, infos]``, or ``[obs, rews, terminated,
  truncated, infos]`` with ``terminated_truncated=True``. ``obs`` and ``rews`` are lists of per-agent
  tensors (``[num_envs, obs_dim]`` float32 and ``[num_envs]`` float32), or dicts by agent name with
  ``dict_spaces=True``; ``dones`` is ``[num_envs]`` bool; ``infos`` a list (dict) of per-agent dicts
  of tensors with leading dimension ``num_envs``. Every returned tensor is the caller's (a copy, never
  a view of the simulator's buffers).
* Actions out of ``action_space`` (or NaN) raise ``ValueError`` unless ``clamp_actions=True``, which
  clamps them into it (NaN still raises); actions are detached unless ``grad_enabled=True``, when the
  step is differentiable (swarp's grad-mode step) and the outputs carry autograd history.
* ``max_steps=None`` is an infinite horizon (no truncation); with ``max_steps`` an env is done from
  the step where its step count reaches it until it is reset.
* ``env.agents`` (objects with ``.name`` ``"agent_0"``..., ``.action_size``, ``.batch_dim``,
  ``.device``), ``n_agents``, ``num_envs`` (= ``batch_dim``), ``device`` (a ``torch.device``),
  ``max_steps``, ``steps`` ([num_envs] float32 step counters), ``get_random_action(agent)``,
  ``get_random_actions()``, ``get_agent_action_size(agent)``, ``done()``, ``get_from_scenario``,
  ``observation_space`` / ``action_space`` (``Tuple``, or ``Dict`` by agent name with
  ``dict_spaces=True``, of float32 ``Box`` es; built with ``gymnasium.spaces``, where VMAS uses
  ``gym.spaces``), and ``render(mode="rgb_array", env_index=0)`` -> (H, W, 3) uint8.

What differs, by design (docs/vmas.md has the migration table and the scenario comparison):

* The scenarios are swarp's (``SCENARIOS`` maps VMAS names to them; swarp's own names work too):
  observations, rewards, termination and defaults differ from VMAS's; VMAS option names are
  translated where a swarp option means the same thing (``translate``; ``VMAS_OPTIONS`` is the
  table) and refused with a message naming swarp's equivalent, or saying none exists, otherwise.
  Options are passed only where given: swarp's defaults apply to the rest.
* Only continuous actions exist (``continuous_actions=False`` and ``multidiscrete_actions=True``
  raise); no ``wrapper`` (swarp has its own Gymnasium, PettingZoo and TorchRL adapters in
  ``swarp.interop``).
* Randomness is swarp's counter-based reset RNG keyed by (seed, env, episode), not torch's global
  RNG: ``seed=None`` means seed 0, ``reset(seed=s)`` restarts it from ``s``, and ``seed(s)`` makes
  the next ``reset()`` do so. ``get_random_action`` draws from a generator of its own, seeded alike.
  Neither touches torch's, numpy's or Python's global RNG.
* The batched swarp ``Environment`` is ``env.sim``: ``[num_envs, n_agents, ...]`` tensors, no
  per-agent copies, resets of many envs in one ``sim.reset_at(mask)``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from swarp.env.environment import Environment, check_seed
from swarp.env.make import make as swarp_make
from swarp.scenarios.framework.base import get_scenario, scenario_names

__all__ = [
    "ENV_OPTIONS",
    "SCENARIOS",
    "VMAS_OPTIONS",
    "Translation",
    "VmasAgent",
    "VmasEnvironment",
    "VmasOption",
    "make_env",
    "translate",
]

#: VMAS scenario name -> the swarp scenario that corresponds to it. Other VMAS scenarios are refused.
SCENARIOS = {
    "navigation": "navigation",
    "flocking": "flocking",
    "discovery": "discovery",
    "give_way": "give_way",
    "transport": "transport",
    "balance": "balance",
    "sampling": "sampling",
    "simple_spread": "spread",
}

#: Pointers for VMAS scenarios without a swarp counterpart (the refusal quotes them).
NO_COUNTERPART = {
    "dispersion": "swarp has no dispersion (agents leaving the origin to eat food); the closest task is "
    "'discovery' with agents_per_target=1",
    "multi_give_way": "swarp's 'give_way' is the two-agent corridor only",
    "wind_flocking": "swarp's 'flocking' has no wind",
    "reverse_transport": "swarp's 'transport' has agents push the package from outside only",
    "waterfall": "swarp has no waterfall scenario",
}

#: swarp ``Environment`` options that ``make_env`` passes through (they add a lidar to any scenario's
#: observation); every other keyword is a VMAS option of the scenario or a swarp scenario option.
ENV_OPTIONS = ("lidar_rays", "lidar_range")

#: Largest seed swarp's reset RNG takes, plus one.


@dataclass(frozen=True)
class VmasOption:
    """How ``make_env`` treats one VMAS scenario option.

    Attributes:
        kind: ``"rename"``: the swarp scenario option ``target`` takes the value; ``"negate"``:
            ``target`` takes minus the value (VMAS adds a negative penalty, swarp subtracts a
            positive one); ``"env"``: the swarp ``Environment`` option ``target``; ``"only"``:
            accepted only when equal to ``value`` (what swarp does; nothing to set), refused
            otherwise; ``"refuse"``: no swarp equivalent, always refused; ``"convert"``:
            ``convert(value, options)`` returns swarp options (``options``: those translated so far).
        target: The swarp option (``rename``, ``negate``, ``env``).
        value: The one accepted value (``only``).
        note: What differs, or swarp's nearest equivalent: quoted in refusals.
        convert: The conversion (``convert``).
    """

    kind: str
    target: str | None = None
    value: Any = None
    note: str = ""
    convert: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None


def _rename(target: str, note: str = "") -> VmasOption:
    return VmasOption("rename", target=target, note=note)


def _negate(target: str, note: str) -> VmasOption:
    return VmasOption("negate", target=target, note=note)


def _env(target: str, note: str) -> VmasOption:
    return VmasOption("env", target=target, note=note)


def _only(value: Any, note: str) -> VmasOption:
    return VmasOption("only", value=value, note=note)


def _refuse(note: str) -> VmasOption:
    return VmasOption("refuse", note=note)


def _config_default(scenario: str, option: str) -> Any:
    """The default of a swarp scenario option (its config dataclass field)."""
    for f in dataclasses.fields(get_scenario(scenario).Config):
        if f.name == option:
            return f.default
    raise KeyError(f"swarp scenario {scenario!r} has no option {option!r}")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"VMAS option {name} must be a finite number, got {value!r}")
    return float(value)


def _grid_spacing(value: Any, options: dict[str, Any]) -> dict[str, Any]:
    """VMAS sampling's cell width [m] -> swarp's cells per side over the arena [-L, L]."""
    spacing = _number("grid_spacing", value)
    half = options.get("world_size", _config_default("sampling", "world_size"))
    cells = 2.0 * half / spacing if spacing > 0 else math.nan
    if not (cells >= 1 and abs(cells - round(cells)) < 1e-6):
        raise ValueError(
            f"VMAS sampling option grid_spacing={value!r} must divide the arena width 2 * {half} m into a whole "
            f"number of cells (swarp's grid_cells)"
        )
    return {"grid_cells": round(cells)}


def _cov(value: Any, options: dict[str, Any]) -> dict[str, Any]:
    """VMAS sampling's Gaussian variance [m^2] -> swarp's width range [m], collapsed to one width."""
    if isinstance(value, (list, tuple)):
        raise ValueError(
            "VMAS sampling option cov as one variance per Gaussian has no swarp equivalent: swarp draws every "
            "width uniformly in [sigma_min, sigma_max]; pass one variance, or sigma_min and sigma_max"
        )
    variance = _number("cov", value)
    if variance <= 0:
        raise ValueError(f"VMAS sampling option cov must be > 0 [m^2], got {value!r}")
    sigma = math.sqrt(variance)
    return {"sigma_min": sigma, "sigma_max": sigma}


_SPAWN = "swarp spawns in distinct jittered cells of a grid (swarp option spawn_cells); there is no minimum distance"
_COMMS = "VMAS uses it only to draw communication lines; swarp draws none"
_LIDAR = (
    "swarp's lidar (an Environment option for any scenario) reads the distance [m] to the first agent, obstacle, "
    "body or wall, lidar_range when nothing is hit, with ray 0 along the agent's heading"
)

#: VMAS scenario name -> {VMAS option: how make_env treats it} (VMAS 1.5.2's ``kwargs.pop`` names).
VMAS_OPTIONS: dict[str, dict[str, VmasOption]] = {
    "navigation": {
        "n_agents": _rename("n_agents"),
        "collisions": _only(
            True, "swarp agents always collide; agent_collision_penalty=0 drops the penalty, lidar_rays adds a lidar"
        ),
        "world_spawning_x": _rename("world_size", "the half-size of swarp's square walled arena"),
        "world_spawning_y": _rename("world_size", "the half-size of swarp's square walled arena"),
        "enforce_bounds": _only(True, "swarp's arena always has soft walls at +-world_size"),
        "agents_with_same_goal": _only(1, "every swarp navigation agent has its own goal"),
        "split_goals": _only(False, "every swarp navigation agent has its own goal"),
        "observe_all_goals": _only(False, "swarp observes the agent's own goal only"),
        "lidar_range": _env("lidar_range", _LIDAR + "; VMAS navigation's reads lidar_range - distance to agents"),
        "agent_radius": _rename("agent_radius"),
        "n_lidar_rays": _env("lidar_rays", _LIDAR),
        "comms_range": _only(0, _COMMS),
        "shared_rew": _rename("shared_reward", "swarp shares the mean progress of all agents, VMAS the sum"),
        "pos_shaping_factor": _rename("shaping_factor"),
        "final_reward": _rename("final_reward"),
        "agent_collision_penalty": _negate(
            "collision_penalty", "VMAS adds the penalty (< 0), swarp subtracts collision_penalty >= 0"
        ),
    },
    "flocking": {
        "n_agents": _rename("n_agents"),
        "n_obstacles": _only(0, "swarp flocking has no obstacles"),
        "min_dist_between_entities": _refuse(_SPAWN),
        "n_lidar_rays": _env("lidar_rays", _LIDAR + "; VMAS flocking's (0.2 m) sees the obstacles only"),
        "collision_reward": _negate(
            "collision_penalty", "VMAS adds the reward (< 0), swarp subtracts collision_penalty >= 0"
        ),
        "dist_shaping_factor": _refuse(
            "swarp flocking does not shape the spacing to a desired distance; its reward weights are "
            "target_weight, cohesion_weight, alignment_weight and separation_weight"
        ),
    },
    "discovery": {
        "n_agents": _rename("n_agents"),
        "n_targets": _rename("n_targets"),
        "x_semidim": _rename("world_size", "the half-size of swarp's square walled arena"),
        "y_semidim": _rename("world_size", "the half-size of swarp's square walled arena"),
        "min_dist_between_entities": _refuse(_SPAWN),
        "lidar_range": _refuse(
            "swarp discovery observes every target's relative position, not by lidar; the range of its neighbor "
            "block is obs_range"
        ),
        "covering_range": _rename("covering_range"),
        "use_agent_lidar": _only(
            False, "swarp observes the nearest agents in its neighbor block (obs_neighbors); lidar_rays adds a lidar"
        ),
        "n_lidar_rays_entities": _refuse(
            "swarp observes each target's relative position and a still-to-find flag (3 columns per target)"
        ),
        "n_lidar_rays_agents": _refuse(
            "swarp observes the nearest agents in its neighbor block (obs_neighbors); lidar_rays adds a lidar"
        ),
        "agents_per_target": _rename("agents_per_target"),
        "targets_respawn": _only(
            False, "found swarp targets stay found and the episode terminates when every target is found"
        ),
        "shared_reward": _refuse(
            "swarp gives covering_reward to every agent per target found on the step (shared); neither of VMAS's "
            "variants (per agent, or the halved sum) exists"
        ),
        "agent_collision_penalty": _negate(
            "collision_penalty", "VMAS adds the penalty (< 0), swarp subtracts collision_penalty >= 0"
        ),
        "covering_rew_coeff": _rename("covering_reward"),
        "time_penalty": _negate("time_penalty", "VMAS adds time_penalty (< 0), swarp subtracts time_penalty >= 0"),
    },
    "give_way": {
        "v_range": _rename("max_speed", "swarp agents take the commanded velocity, its norm clamped to max_speed"),
        "a_range": _refuse("swarp give_way agents are velocity-controlled, with no force limit"),
        "obs_noise": _only(0, "swarp observations are noise-free"),
        "box_agents": _only(False, "swarp agents are discs"),
        "linear_friction": _refuse("swarp give_way agents are velocity-controlled, with no friction option"),
        "mirror_passage": _only(False, "swarp's corridor has one bay"),
        "done_on_completion": _only(True, "swarp give_way terminates when both agents are on goal"),
        "observe_rel_pos": _only(True, "swarp always observes the other agent (columns 8:13)"),
        "pos_shaping_factor": _rename(
            "shaping_factor", "swarp rewards each agent's own progress, VMAS both agents' summed progress"
        ),
        "final_reward": _rename("final_reward"),
        "energy_rew_coeff": _only(0, "swarp has no energy term"),
        "agent_collision_penalty": _negate(
            "collision_penalty", "VMAS adds the penalty (< 0), swarp subtracts collision_penalty >= 0"
        ),
        "passage_collision_penalty": _only(0, "swarp has no wall-collision term"),
        "obstacle_collision_penalty": _only(0, "swarp has no wall-collision term"),
        "use_velocity_controller": _only(True, "swarp give_way actions are velocities [m/s]"),
        "min_input_norm": _only(0, "swarp does not zero small velocity commands"),
        "dt_delay": _only(0, "swarp applies actions on the step they are given"),
    },
    "transport": {
        "n_agents": _rename("n_agents"),
        "n_packages": _only(1, "swarp transport moves one package"),
        "package_width": _refuse("swarp's package is a disc: package_radius [m]"),
        "package_length": _refuse("swarp's package is a disc: package_radius [m]"),
        "package_mass": _rename("package_mass"),
    },
    "balance": {
        "n_agents": _rename("n_agents"),
        "package_mass": _rename("package_mass"),
        "random_package_pos_on_line": _only(
            True, "swarp draws the package's place on the rod uniformly within half the rod's half length"
        ),
    },
    "sampling": {
        "n_agents": _rename("n_agents"),
        "shared_rew": _rename("shared_reward"),
        "comms_range": _only(0, _COMMS),
        "lidar_range": _env("lidar_range", _LIDAR + "; swarp sampling has none unless lidar_rays > 0"),
        "agent_radius": _rename("agent_radius"),
        "xdim": _rename("world_size", "the half-size of swarp's square walled arena"),
        "ydim": _rename("world_size", "the half-size of swarp's square walled arena"),
        "grid_spacing": VmasOption(
            "convert", note="swarp's grid_cells = 2 world_size / grid_spacing", convert=_grid_spacing
        ),
        "n_gaussians": _rename("n_gaussians"),
        "cov": VmasOption("convert", note="swarp's sigma_min = sigma_max = sqrt(cov)", convert=_cov),
        "collisions": _only(True, "swarp agents always collide"),
        "spawn_same_pos": _only(False, "swarp agents spawn in distinct cells"),
        "norm": _refuse(
            "swarp's field is not normalised by its maximum: its Gaussians have amplitudes uniform in [0.5, 1]"
        ),
    },
    "simple_spread": {
        "n_agents": _rename("n_agents"),
        "obs_agents": _only(True, "swarp spread always observes the other agents' relative positions"),
    },
}

#: Info entries of shape [E, A] whose second axis is not the agents (spread: one per landmark); every
#: agent's info gets them whole.
NOT_PER_AGENT = {"spread": ("landmark_dist", "covered")}


@dataclass(frozen=True)
class Translation:
    """What ``translate`` makes of a VMAS scenario name and its options.

    Attributes:
        scenario: The swarp scenario name.
        options: swarp scenario options (keywords of ``swarp.make``).
        env_options: swarp ``Environment`` options (``ENV_OPTIONS``).
        mapped: ``{VMAS option: what it became}`` for messages, e.g. ``{"agent_collision_penalty":
            "collision_penalty=1.0"}``.
    """

    scenario: str
    options: dict[str, Any]
    env_options: dict[str, Any]
    mapped: dict[str, str]


def _scenario_name(scenario: Any) -> tuple[str, str | None]:
    """``(swarp scenario, VMAS scenario or None)`` of a VMAS or swarp scenario name."""
    if not isinstance(scenario, str):
        raise TypeError(
            f"swarp.vmas takes a scenario name (a str), got {type(scenario).__name__}: VMAS BaseScenario classes "
            f"cannot run on swarp (write a swarp Scenario and register it); swarp scenarios: {scenario_names()}"
        )
    name = scenario[: -len(".py")] if scenario.endswith(".py") else scenario
    if name in SCENARIOS:
        return SCENARIOS[name], name
    if name in scenario_names():
        return name, None
    hint = f" ({NO_COUNTERPART[name]})" if name in NO_COUNTERPART else ""
    raise ValueError(
        f"scenario {scenario!r} has no swarp counterpart{hint}; VMAS names swarp maps: {sorted(SCENARIOS)}; "
        f"swarp scenarios: {scenario_names()}"
    )


def translate(scenario: str, **kwargs: Any) -> Translation:
    """Translate a VMAS scenario name and its options into swarp's, or refuse them.

    Each keyword is, in this order: a VMAS option of the scenario (``VMAS_OPTIONS``: renamed,
    negated, converted, accepted at the one value swarp implements, or refused), a swarp scenario
    option (passed as is), or a swarp ``Environment`` option of ``ENV_OPTIONS``. Two keywords that
    set one swarp option to different values (``xdim=1, ydim=2``: swarp's arena is square) are an
    error. Values are checked by swarp when the scenario is built (``make_env``).

    Args:
        scenario: A VMAS scenario name (``SCENARIOS``; ``".py"`` may end it) or a swarp one.
        **kwargs: VMAS or swarp options.

    Returns:
        A ``Translation``.

    Raises:
        TypeError: ``scenario`` is not a str (VMAS scenario classes cannot run on swarp), or an
            unknown keyword (the message lists the valid ones).
        ValueError: an unknown scenario (the message lists swarp's), a refused option or value (the
            message names swarp's equivalent or says there is none), or conflicting keywords.
    """
    swarp_name, vmas_name = _scenario_name(scenario)
    table = VMAS_OPTIONS.get(vmas_name, {}) if vmas_name else {}
    swarp_options = get_scenario(swarp_name).option_names()
    options: dict[str, Any] = {}
    env_options: dict[str, Any] = {}
    mapped: dict[str, str] = {}
    source: dict[str, str] = {}  # swarp option -> the keyword that set it
    label = f"VMAS {vmas_name} option" if vmas_name else "option"

    def put(into: dict[str, Any], target: str, value: Any, key: str) -> None:
        if target in into and into[target] != value:
            raise ValueError(
                f"{source[target]} and {key} both set swarp's {target} and disagree ({into[target]!r} vs {value!r})"
                + (": swarp's arena is square" if target == "world_size" else "")
            )
        into[target] = value
        source[target] = key
        if key != target:
            mapped[key] = ", ".join(filter(None, [mapped.get(key), f"{target}={value!r}"]))

    deferred = []
    for key, value in kwargs.items():
        rule = table.get(key)
        if rule is None:
            if key in swarp_options:
                put(options, key, value, key)
            elif key in ENV_OPTIONS:
                put(env_options, key, value, key)
            else:
                vmas_part = f"VMAS {vmas_name} options {sorted(table)}; " if vmas_name else ""
                raise TypeError(
                    f"unknown option {key!r} for scenario {scenario!r}: {vmas_part}swarp {swarp_name} options "
                    f"{swarp_options}; swarp environment options {list(ENV_OPTIONS)}"
                )
        elif rule.kind == "rename":
            put(options, rule.target, value, key)
        elif rule.kind == "negate":
            put(options, rule.target, -_number(key, value), key)
        elif rule.kind == "env":
            put(env_options, rule.target, value, key)
        elif rule.kind == "only":
            if value != rule.value or isinstance(value, bool) != isinstance(rule.value, bool):
                raise ValueError(
                    f"{label} {key}={value!r} is not supported: swarp implements {key}={rule.value!r} only "
                    f"({rule.note})"
                )
            mapped[key] = "accepted (swarp's behaviour)"
        elif rule.kind == "refuse":
            raise ValueError(f"{label} {key} is not supported (no direct swarp equivalent): {rule.note}")
        else:
            deferred.append((key, value, rule))
    for key, value, rule in deferred:  # conversions that read other options (sampling's world_size)
        for target, converted in rule.convert(value, options).items():
            put(options, target, converted, key)
    if "lidar_range" in env_options and not env_options.get("lidar_rays"):
        raise ValueError(
            f"lidar_range={env_options['lidar_range']!r} needs a lidar: swarp's {swarp_name} observation has none "
            f"unless lidar_rays > 0 (VMAS's n_lidar_rays)"
        )
    return Translation(swarp_name, options, env_options, mapped)


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def make_env(
    scenario: str,
    num_envs: int = 32,
    device: str | int | torch.device = "cpu",
    continuous_actions: bool = True,
    wrapper: Any = None,
    max_steps: int | None = None,
    seed: int | None = None,
    dict_spaces: bool = False,
    multidiscrete_actions: bool = False,
    clamp_actions: bool = False,
    grad_enabled: bool = False,
    terminated_truncated: bool = False,
    wrapper_kwargs: dict | None = None,
    **scenario_kwargs: Any,
) -> VmasEnvironment:
    """``vmas.make_env`` on swarp: a ``VmasEnvironment`` over ``swarp.make(...)`` (see the module docstring).

    The parameters are VMAS 1.5.2's, in its order (positional calls mean the same).

    Args:
        scenario: A VMAS scenario name with a swarp counterpart (``SCENARIOS``: ``"navigation"``,
            ``"flocking"``, ``"discovery"``, ``"give_way"``, ``"transport"``, ``"balance"``,
            ``"sampling"``, ``"simple_spread"``; ``".py"`` may end it), or a swarp scenario name.
        num_envs: Parallel envs E (int >= 1).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a CUDA index or a ``torch.device``.
        continuous_actions: Must be True: swarp has continuous actions only.
        wrapper: Must be None (use ``swarp.interop``'s adapters on ``env.sim`` instead).
        max_steps: Episode length [steps] after which envs are done (truncated); ``None``: no limit.
        seed: Seed of swarp's reset RNG (int in [0, 2^31)); ``None`` means 0.
        dict_spaces: Observations, rewards, infos and spaces keyed by agent name instead of lists.
        multidiscrete_actions: Must be False.
        clamp_actions: Clamp out-of-range actions instead of raising.
        grad_enabled: Keep the actions' autograd history (a differentiable step).
        terminated_truncated: ``step`` returns terminated and truncated [E] bool instead of ``dones``.
        wrapper_kwargs: Must be None or empty.
        **scenario_kwargs: VMAS options of the scenario, swarp scenario options or ``ENV_OPTIONS``
            (``translate`` says how each is treated).

    Returns:
        A ``VmasEnvironment`` of ``num_envs`` envs, reset.

    Raises:
        TypeError: a keyword of the wrong type, or an unknown one.
        ValueError: discrete actions, a wrapper, an unknown scenario, a refused option, or a value
            swarp rejects (the message says which VMAS option it came from).
    """
    if continuous_actions is not True:
        raise ValueError(
            "continuous_actions=False is not supported: swarp scenarios have continuous actions only (physical "
            "units, in env.action_space); discretise in your policy"
        )
    if multidiscrete_actions:
        raise ValueError("multidiscrete_actions=True is not supported: swarp scenarios have continuous actions only")
    if wrapper is not None:
        raise ValueError(
            f"wrapper={wrapper!r} is not supported: wrap env.sim (the swarp Environment) with swarp.interop's "
            f"adapters instead (gymnasium.SwarpVectorEnv, pettingzoo.SwarpParallelEnv, torchrl.SwarpEnv)"
        )
    if wrapper_kwargs:
        raise ValueError("wrapper_kwargs are not supported (there is no wrapper)")
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be None (no time limit) or an int >= 1, got {max_steps!r}")
    seed = 0 if seed is None else check_seed(seed)
    for name, flag in (
        ("dict_spaces", dict_spaces),
        ("clamp_actions", clamp_actions),
        ("grad_enabled", grad_enabled),
        ("terminated_truncated", terminated_truncated),
    ):
        _check_flag(name, flag)
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"device must be a str, a CUDA index or a torch.device, got {device!r}")
    if isinstance(device, int):
        device = torch.device("cuda", device)
    t = translate(scenario, **scenario_kwargs)
    try:
        sim = swarp_make(
            t.scenario,
            n_envs=int(num_envs),
            device=device,
            seed=seed,
            auto_reset=False,
            max_steps=None if max_steps is None else int(max_steps),
            **t.env_options,
            **t.options,
        )
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError) or not t.mapped:
            raise
        raise type(error)(f"{error} (swarp.vmas translated {t.mapped})") from error
    return VmasEnvironment(
        sim,
        dict_spaces=dict_spaces,
        clamp_actions=clamp_actions,
        grad_enabled=grad_enabled,
        terminated_truncated=terminated_truncated,
        seed=seed,
    )


@dataclass(frozen=True, eq=False)
class VmasAgent:
    """One agent of a ``VmasEnvironment``, as VMAS's ``env.agents`` lists them.

    Attributes:
        name: ``"agent_{index}"`` (the key of dict actions, observations and spaces).
        index: Its index in the swarp batch (the A axis of ``env.sim``'s tensors).
        action_size: Its action width (the swarp env's ``act_dim``).
        action_low, action_high: [action_size] float32 tensors on the env's device: its action box
            in physical units (``env.sim.action_bounds``' row).
        batch_dim: Parallel envs E.
        device: The env's ``torch.device``.
    """

    name: str
    index: int
    action_size: int
    action_low: torch.Tensor
    action_high: torch.Tensor
    batch_dim: int
    device: torch.device

    def __repr__(self) -> str:
        return f"VmasAgent({self.name!r})"


def _spaces():
    try:
        from gymnasium import spaces
    except ImportError as error:  # the spaces are the one part that needs it
        raise ImportError(
            "observation_space and action_space need gymnasium (pip install gymnasium; VMAS builds them with gym); "
            "everything else of swarp.vmas works without it"
        ) from error
    return spaces


class VmasEnvironment:
    """A swarp ``Environment`` with VMAS 1.5.2's ``Environment`` API (see the module docstring).

    Args:
        sim: The swarp ``Environment`` (built with ``auto_reset=False``: VMAS resets nothing itself).
        dict_spaces: Outputs and spaces keyed by agent name.
        clamp_actions: Clamp out-of-range actions instead of raising.
        grad_enabled: Keep the actions' autograd history.
        terminated_truncated: ``step`` returns terminated and truncated instead of ``dones``.
        seed: Seed of ``get_random_action``'s generator (int in [0, 2^31)).

    Attributes:
        sim: The swarp ``Environment``: batched [E, A, ...] tensors.
        agents: ``VmasAgent`` s, in index order.
        n_agents, num_envs, batch_dim, device, max_steps: as in VMAS.
        continuous_actions: True. multidiscrete_actions: False.
        dict_spaces, clamp_action, grad_enabled, terminated_truncated: as given.
    """

    metadata = {"render.modes": ["human", "rgb_array"], "runtime.vectorized": True}
    continuous_actions = True
    multidiscrete_actions = False

    def __init__(
        self,
        sim: Environment,
        dict_spaces: bool = False,
        clamp_actions: bool = False,
        grad_enabled: bool = False,
        terminated_truncated: bool = False,
        seed: int = 0,
    ):
        if not isinstance(sim, Environment):
            raise TypeError(f"VmasEnvironment wraps a swarp.Environment, got {type(sim).__name__}")
        if sim.auto_reset:
            raise ValueError(
                "VmasEnvironment needs a swarp Environment built with auto_reset=False: VMAS's step never resets "
                "an env (call reset_at)"
            )
        self.sim = sim
        self.dict_spaces = _check_flag("dict_spaces", dict_spaces)
        self.clamp_action = _check_flag("clamp_actions", clamp_actions)
        self.grad_enabled = _check_flag("grad_enabled", grad_enabled)
        self.terminated_truncated = _check_flag("terminated_truncated", terminated_truncated)
        self.device = sim.torch_device
        self.num_envs = sim.n_envs
        self.n_agents = sim.n_agents
        self.scenario_name = sim.scenario.name
        low, high = sim.action_bounds
        self._low = low.to(torch.float32)
        self._high = high.to(torch.float32)
        self.agents = [
            VmasAgent(f"agent_{i}", i, sim.act_dim, self._low[i], self._high[i], sim.n_envs, self.device)
            for i in range(sim.n_agents)
        ]
        self._by_name = {agent.name: agent for agent in self.agents}
        # Done flags as VMAS reports them: a reset_at clears its env's (the swarp buffers keep them
        # until the next step).
        self._terminated = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._truncated = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._mask = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(check_seed(seed))
        self._pending_seed: int | None = None
        self._action_space = self._observation_space = None
        per_agent_skip = NOT_PER_AGENT.get(self.scenario_name, ())
        self._per_agent_info = {
            key for key, value in sim.info.items() if value.dim() >= 2 and value.shape[1] == self.n_agents
        } - set(per_agent_skip)

    # --- VMAS attributes ----------------------------------------------------------------------

    @property
    def batch_dim(self) -> int:
        """Parallel envs E (VMAS's name for ``num_envs``)."""
        return self.num_envs

    @property
    def max_steps(self) -> int | None:
        """Episode length [steps] after which envs are done (truncated); ``None``: no limit."""
        return self.sim.max_steps

    @property
    def steps(self) -> torch.Tensor:
        """[E] float32 (a copy): steps since each env's last reset, as VMAS's ``env.steps``."""
        return self.sim.step_count.to(torch.float32)

    @property
    def action_space(self):
        """``gymnasium.spaces.Tuple`` (``Dict`` by agent name with ``dict_spaces``) of per-agent
        float32 ``Box(action_low, action_high, (action_size,))``, physical units.

        Raises:
            ImportError: gymnasium is not installed.
        """
        if self._action_space is None:
            self._action_space = self._collect(self.get_agent_action_space)
        return self._action_space

    @property
    def observation_space(self):
        """``gymnasium.spaces.Tuple`` (``Dict`` with ``dict_spaces``) of per-agent float32
        ``Box(-inf, inf, (obs_dim,))``.

        Raises:
            ImportError: gymnasium is not installed.
        """
        if self._observation_space is None:
            self._observation_space = self._collect(self.get_agent_observation_space)
        return self._observation_space

    def _collect(self, per_agent: Callable[[VmasAgent], Any]):
        spaces = _spaces()
        if self.dict_spaces:
            return spaces.Dict({agent.name: per_agent(agent) for agent in self.agents})
        return spaces.Tuple([per_agent(agent) for agent in self.agents])

    def _agent(self, agent: VmasAgent | str) -> VmasAgent:
        if isinstance(agent, str):
            if agent not in self._by_name:
                raise KeyError(f"no agent named {agent!r}; agents: {list(self._by_name)}")
            return self._by_name[agent]
        if not isinstance(agent, VmasAgent) or self._by_name.get(agent.name) is not agent:
            raise TypeError(f"agent must be one of env.agents or its name, got {agent!r}")
        return agent

    def get_agent_action_size(self, agent: VmasAgent | str) -> int:
        """The action width of ``agent`` (an element of ``agents`` or its name)."""
        return self._agent(agent).action_size

    def get_agent_action_space(self, agent: VmasAgent | str):
        """``gymnasium.spaces.Box`` float32 [action_size]: the agent's action box (physical units)."""
        agent = self._agent(agent)
        spaces = _spaces()
        low, high = (b.detach().cpu().numpy() for b in (agent.action_low, agent.action_high))
        return spaces.Box(low=low, high=high, shape=(agent.action_size,), dtype=low.dtype)

    def get_agent_observation_space(self, agent: VmasAgent | str, obs: Any = None):
        """``gymnasium.spaces.Box(-inf, inf, (obs_dim,), float32)`` (``obs`` is accepted and ignored,
        as VMAS's signature has it: every swarp observation is one flat vector)."""
        self._agent(agent)
        return _spaces().Box(low=-np.inf, high=np.inf, shape=(self.sim.obs_dim,), dtype=np.float32)

    def get_random_action(self, agent: VmasAgent | str) -> torch.Tensor:
        """[E, action_size] float32 on the env's device: uniform in the agent's action box, from the
        env's own generator (seeded with the env's seed; torch's global RNG is not touched)."""
        agent = self._agent(agent)
        u = torch.rand(
            (self.num_envs, agent.action_size), generator=self._generator, device=self.device, dtype=torch.float32
        )
        return agent.action_low + u * (agent.action_high - agent.action_low)

    def get_random_actions(self) -> list[torch.Tensor]:
        """``get_random_action`` of every agent: ``n_agents`` float32 tensors [E, action_size], a list
        to pass to ``step``."""
        return [self.get_random_action(agent) for agent in self.agents]

    # --- reset, step --------------------------------------------------------------------------

    def seed(self, seed: int | None = None) -> list[int]:
        """Seed the next ``reset()`` (which restarts swarp's reset RNG from it) and reseed
        ``get_random_action``'s generator now. ``None`` means 0. Returns ``[seed]`` as VMAS does.

        Unlike VMAS, nothing is drawn from it before that ``reset()``: a ``reset_at`` in between
        draws from the current seed's counter-based stream.
        """
        seed = 0 if seed is None else check_seed(seed)
        self._pending_seed = seed
        self._generator.manual_seed(seed)
        return [seed]

    def reset(
        self,
        seed: int | None = None,
        return_observations: bool = True,
        return_info: bool = False,
        return_dones: bool = False,
    ):
        """Reset every env; with ``seed`` (int in [0, 2^31)) restart swarp's reset RNG from it.

        Returns:
            Per-agent observations [E, obs_dim] float32 (a list, or a dict with ``dict_spaces``);
            with ``return_info`` / ``return_dones`` a list ``[obs, dones, infos]`` (``[obs,
            terminated, truncated, infos]`` with ``terminated_truncated``) of the parts asked for;
            ``None`` when none is.
        """
        if seed is None:
            seed, self._pending_seed = self._pending_seed, None
        else:
            seed = check_seed(seed)
            self._pending_seed = None
        if seed is not None:
            self._generator.manual_seed(seed)
        self.sim.reset(seed=seed)
        self._terminated.zero_()
        self._truncated.zero_()
        return self._result(return_observations, False, return_info, return_dones)

    def _index(self, index: Any) -> int:
        if isinstance(index, torch.Tensor):
            if index.numel() != 1 or index.dtype == torch.bool or index.is_floating_point() or index.is_complex():
                raise TypeError(
                    f"index must be one integer env index, got a {index.dtype} tensor of shape {list(index.shape)}; "
                    f"reset many envs at once with env.sim.reset_at(mask [num_envs] bool)"
                )
            index = int(index.item())
        elif isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an int env index, got {index!r}")
        index = int(index)
        if not 0 <= index < self.num_envs:
            raise IndexError(f"index must be in [0, {self.num_envs}), got {index}")
        return index

    def reset_at(
        self,
        index: int,
        return_observations: bool = True,
        return_info: bool = False,
        return_dones: bool = False,
    ):
        """Reset env ``index`` (an int, or an integer tensor of one element) and no other.

        Returns:
            As ``reset``: the observations of every env (the reset one's start its new episode).

        Raises:
            TypeError: ``index`` is not one integer. IndexError: it is not in [0, num_envs).
        """
        index = self._index(index)
        self._mask.zero_()
        self._mask[index] = True
        self.sim.reset_at(self._mask)
        self._terminated[index] = False
        self._truncated[index] = False
        return self._result(return_observations, False, return_info, return_dones)

    def _actions(self, actions: Sequence | Mapping) -> torch.Tensor:
        """Per-agent actions -> the swarp action tensor [E, A, act_dim], checked like VMAS's."""
        if isinstance(actions, Mapping):
            names = [agent.name for agent in self.agents]
            missing = [name for name in names if name not in actions]
            extra = sorted(str(key) for key in actions if key not in self._by_name)
            if missing or extra:
                raise ValueError(
                    f"actions dict must hold one entry per agent {names}: missing {missing}, unknown {extra}"
                )
            actions = [actions[name] for name in names]
        elif isinstance(actions, torch.Tensor) or not isinstance(actions, Sequence) or isinstance(actions, str):
            raise TypeError(
                f"actions must be a list of {self.n_agents} per-agent tensors [num_envs, act_dim] or a dict by agent "
                f"name, got {type(actions).__name__} (env.sim.step takes one [num_envs, n_agents, act_dim] tensor)"
            )
        if len(actions) != self.n_agents:
            raise ValueError(f"expected actions for {self.n_agents} agents, got {len(actions)}")
        rows = []
        for agent, action in zip(self.agents, actions, strict=True):
            if not isinstance(action, torch.Tensor):
                try:
                    action = torch.as_tensor(action, device=self.device)
                except (TypeError, ValueError, RuntimeError) as error:
                    raise TypeError(f"action of {agent.name} must be numbers [num_envs, act_dim]: {error}") from None
            if action.dtype == torch.bool or action.is_complex():
                raise TypeError(f"action of {agent.name} must be real numbers, got dtype {action.dtype}")
            if action.dim() == 1:
                action = action.unsqueeze(-1)  # VMAS reads [num_envs] as [num_envs, 1]
            if tuple(action.shape) != (self.num_envs, agent.action_size):
                raise ValueError(
                    f"action of {agent.name} must have shape [num_envs, act_dim] = [{self.num_envs}, "
                    f"{agent.action_size}], got {list(action.shape)}"
                )
            if not self.grad_enabled:
                action = action.detach()
            rows.append(action.to(device=self.device, dtype=torch.float32))
        stacked = torch.stack(rows, dim=1)
        low, high = self._low, self._high
        if self.clamp_action:
            if bool(torch.isnan(stacked).any()):
                raise ValueError(f"actions contain NaN: {self._first_bad(torch.isnan(stacked))}")
            stacked = torch.clamp(stacked, low, high)
        else:
            outside = ~((stacked >= low) & (stacked <= high))  # NaN compares False: outside too
            if bool(outside.any()):
                raise ValueError(
                    f"actions out of the action space (NaN, or outside [low, high]; clamp_actions=True clamps them): "
                    f"{self._first_bad(outside, stacked)}"
                )
        return stacked.to(self.sim.dtype)

    def _first_bad(self, bad: torch.Tensor, values: torch.Tensor | None = None) -> str:
        env, agent, column = (int(i) for i in bad.nonzero()[0])
        text = f"agent {self.agents[agent].name}, env {env}, component {column}"
        if values is not None:
            text += (
                f": {values[env, agent, column].item()!r} not in [{self._low[agent, column].item()!r}, "
                f"{self._high[agent, column].item()!r}]"
            )
        return text

    def step(self, actions: Sequence | Mapping):
        """Step every env with per-agent actions.

        Args:
            actions: ``n_agents`` tensors [E, act_dim] (a list in agent order, or a dict by agent
                name), physical units within ``action_space`` (see ``clamp_actions``); numbers that
                are not tensors are converted to float32 tensors, and [E] is read as [E, 1].

        Returns:
            ``[obs, rews, dones, infos]``: ``n_agents`` observations [E, obs_dim] float32, rewards
            [E] float32 and info dicts (lists, or dicts by agent name with ``dict_spaces``), and
            ``dones`` [E] bool (terminated or truncated); ``[obs, rews, terminated, truncated,
            infos]`` with ``terminated_truncated``.

        Raises:
            TypeError: ``actions`` is not a list or dict of numbers. ValueError: wrong count,
            names or shapes, NaN, or values out of range without ``clamp_actions``.
        """
        stacked = self._actions(actions)
        obs, reward, terminated, truncated, info = self.sim.step(stacked)
        self._terminated.copy_(terminated)
        self._truncated.copy_(truncated)
        return self._compose(obs, reward, info, True, True, True, True, None)

    def done(self):
        """[E] bool: terminated or truncated; ``(terminated, truncated)`` with ``terminated_truncated``.
        An env reset by ``reset_at`` is not done."""
        if self.terminated_truncated:
            return self._terminated.clone(), self._truncated.clone()
        return self._terminated | self._truncated

    def get_from_scenario(
        self,
        get_observations: bool,
        get_rewards: bool,
        get_infos: bool,
        get_dones: bool,
        dict_agent_names: bool | None = None,
    ):
        """The current observations, the last step's rewards, the infos and the done flags, composed
        as VMAS does: a list of the parts asked for, in the order obs, rews, dones (or terminated,
        truncated), infos; ``None`` when none is. ``dict_agent_names`` overrides ``dict_spaces``.

        Rewards are swarp's reward buffer, [E] float32 per agent: the last step's (zeros before the
        first step; resets leave it as it was). VMAS recomputes them from the scenario instead.
        """
        sim = self.sim
        return self._compose(
            sim.obs, sim.reward, sim.info, get_observations, get_rewards, get_infos, get_dones, dict_agent_names
        )

    def _result(self, observations: bool, rewards: bool, infos: bool, dones: bool):
        result = self.get_from_scenario(observations, rewards, infos, dones)
        return result[0] if result and len(result) == 1 else result

    def _compose(self, obs, reward, info, get_obs, get_rews, get_infos, get_dones, dict_agent_names):
        if not (get_obs or get_rews or get_infos or get_dones):
            return None
        by_name = self.dict_spaces if dict_agent_names is None else dict_agent_names
        names = [agent.name for agent in self.agents]

        def arrange(values: list):
            return dict(zip(names, values, strict=True)) if by_name else list(values)

        result = []
        if get_obs:
            result.append(arrange(_split(obs)))
        if get_rews:
            result.append(arrange(_split(reward)))
        if get_dones:
            if self.terminated_truncated:
                result += [self._terminated.clone(), self._truncated.clone()]
            else:
                result.append(self._terminated | self._truncated)
        if get_infos:
            result.append(arrange(self._infos(info)))
        return result

    def _infos(self, info: Mapping[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        """Per-agent info dicts: entries [E, A, ...] split by agent, the others ([E], [E, k]) copied whole."""
        split = {key: _split(value) for key, value in info.items() if key in self._per_agent_info}
        return [
            {key: split[key][i] if key in split else value.clone() for key, value in info.items()}
            for i in range(self.n_agents)
        ]

    # --- rendering, the rest ------------------------------------------------------------------

    def render(
        self,
        mode: str = "rgb_array",
        env_index: int = 0,
        agent_index_focus: int | None = None,
        visualize_when_rgb: bool = False,
        **overlays: Any,
    ):
        """Draw env ``env_index`` (swarp's renderer: agents, the scenario's goals, obstacles, walls).

        Args:
            mode: ``"rgb_array"`` (the default here; VMAS's is ``"human"``) or ``"human"`` (also
                shows it in a window: pygame, the ``viz`` extra).
            env_index: The env, in [0, num_envs).
            agent_index_focus: Must be None: swarp's view frames the arena, it follows no agent.
            visualize_when_rgb: With ``"rgb_array"``, also show the frame in a window.
            **overlays: swarp's ``Environment.render`` options (``width``, ``height`` [px], ...).

        Returns:
            (H, W, 3) uint8 RGB image (480 x 480 by default).

        Raises:
            ValueError: an unknown mode, or ``agent_index_focus``. TypeError / IndexError:
            ``env_index`` is not an int in [0, num_envs).
        """
        if mode not in self.metadata["render.modes"]:
            raise ValueError(f"render mode must be one of {self.metadata['render.modes']}, got {mode!r}")
        if agent_index_focus is not None:
            raise ValueError("agent_index_focus is not supported: swarp's renderer frames the arena, not an agent")
        index = self._index(env_index)
        show = mode == "human" or _check_flag("visualize_when_rgb", visualize_when_rgb)
        return self.sim.render(mode="human" if show else "rgb_array", env_index=index, **overlays)

    def to(self, device: Any) -> None:
        """Not supported: a swarp environment's buffers live on the device it was built on."""
        raise NotImplementedError(
            f"swarp environments cannot move devices: build a new one with make_env(device={device!r})"
        )

    def close(self) -> None:
        """Close the swarp environment (``Environment.close``); further steps raise."""
        self.sim.close()

    def __repr__(self) -> str:
        return f"VmasEnvironment({self.scenario_name!r}, num_envs={self.num_envs}, n_agents={self.n_agents})"


def _split(tensor: torch.Tensor) -> list[torch.Tensor]:
    """[E, A, ...] -> A tensors [E, ...]: one copy, each contiguous, none a view of ``tensor``."""
    return list(tensor.transpose(0, 1).clone(memory_format=torch.contiguous_format).unbind(0))
