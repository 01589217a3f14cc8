"""``translate``: a VMAS scenario name and its options in swarp's terms (a ``Translation``), or a
refusal that names swarp's equivalent; the table it reads is ``option_table.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swarp.scenarios.framework.base import get_scenario, scenario_names
from swarp.vmas.option_table import ENV_OPTIONS, NO_COUNTERPART, SCENARIOS, VMAS_OPTIONS, check_number


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
            put(options, rule.target, -check_number(key, value), key)
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
