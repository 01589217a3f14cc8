"""The VMAS name table of ``swarp.vmas``: which VMAS scenario is which swarp scenario, and how each
VMAS 1.5.2 option of a scenario becomes swarp's (renamed, negated, converted, accepted at the one
value swarp implements, or refused with a note). ``translate`` reads it; docs/vmas.md shows it."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swarp.scenarios.framework.base import get_scenario

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

#: swarp ``Environment`` options that ``make_env`` passes through (a lidar added to any scenario's
#: observation; ``action_nvec``, the levels of discrete actions, where VMAS scenarios set
#: ``agent.discrete_action_nvec``); every other keyword is a VMAS option of the scenario or a swarp
#: scenario option.
ENV_OPTIONS = ("lidar_rays", "lidar_range", "action_nvec")


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


def check_number(name: str, value: Any) -> float:
    """``value`` as a float, or ``ValueError`` naming VMAS option ``name`` unless it is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"VMAS option {name} must be a finite number, got {value!r}")
    return float(value)


def _grid_spacing(value: Any, options: dict[str, Any]) -> dict[str, Any]:
    """VMAS sampling's cell width [m] -> swarp's cells per side over the arena [-L, L]."""
    spacing = check_number("grid_spacing", value)
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
    variance = check_number("cov", value)
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
