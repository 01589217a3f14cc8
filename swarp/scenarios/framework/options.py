"""Scenario options: typed, validated dataclass fields (``OptionChecker``), and the options every
arena scenario of the library shares (``ArenaConfig``; ``ArenaWorldConfig``, its world alone, for
those that observe no neighbors). An unknown or ill-typed option is an error
that names it."""

import math
from dataclasses import dataclass
from typing import ClassVar

from swarp.core.config import NEIGHBOR_METHODS, ControlMode, coerce_enum


class OptionChecker:
    """Validates the fields of a scenario's frozen config dataclass with messages naming the option.

    Args:
        cfg: The config instance (from its ``__post_init__``).
        scenario: Scenario name used in the messages.
    """

    def __init__(self, cfg, scenario: str):
        self.cfg = cfg
        self.scenario = scenario

    def fail(self, message: str) -> None:
        raise ValueError(f"{self.scenario} option {message}")

    def int(self, name: str, low: int, high: int | None = None) -> None:
        """An int in ``[low, high]`` (bools are rejected)."""
        value = getattr(self.cfg, name)
        if name == "n_agents" and isinstance(value, (tuple, list)):
            self.fail(f"n_agents=(lo, hi) (a per-env agent count drawn at reset) is navigation's; this scenario "
                      f"takes an int, got {value!r}")  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bound = f">= {low}" + (f" and <= {high}" if high is not None else "")
            self.fail(f"{name} must be an int {bound}, got {value!r}")

    def number(self, name: str, allow_zero: bool = False, optional: bool = False, high: float | None = None) -> None:
        """A finite number > 0 (or >= 0 with ``allow_zero``), <= ``high`` if given (``None`` passes
        with ``optional``)."""
        value = getattr(self.cfg, name)
        if optional and value is None:
            return
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        if not bad:
            bad = value < 0 or (value == 0 and not allow_zero) or (high is not None and value > high)
        if bad:
            bound = (">= 0" if allow_zero else "> 0") + (f" and <= {high}" if high is not None else "")
            self.fail(f"{name} must be a finite number {bound}, got {value!r}")

    def bool(self, name: str) -> None:
        value = getattr(self.cfg, name)
        if not isinstance(value, bool):
            self.fail(f"{name} must be a bool, got {value!r}")

    def ctrl_mode(self, name: str = "ctrl_mode") -> None:
        coerce_enum(ControlMode, getattr(self.cfg, name), f"{self.scenario} option {name}")

    def neighbor_method(self, name: str = "neighbor_method") -> None:
        """One of ``WorldConfig.neighbor_method``'s values."""
        value = getattr(self.cfg, name)
        if value not in NEIGHBOR_METHODS:
            self.fail(f"{name} must be one of {', '.join(NEIGHBOR_METHODS)}, got {value!r}")

    def world(self, max_agents: int) -> None:
        """The options of an arena's world (``ArenaWorldConfig``), with at most ``max_agents`` agents."""
        self.neighbor_method()
        self.int("n_agents", 1, max_agents)
        self.int("substeps", 1)
        self.int("max_steps", 1)
        self.int("max_neighbors", 1)
        for name in ("world_size", "agent_radius", "max_speed", "dt"):
            self.number(name)

    def arena(self) -> None:
        """The options every arena scenario of the library shares (see ``arena_world``);
        ``max_neighbors`` may be ``None`` where the config's ``max_neighbors_optional`` says so."""
        optional_width = getattr(self.cfg, "max_neighbors_optional", False) and self.cfg.max_neighbors is None
        self.int("n_agents", 1, self.cfg.max_agents)
        self.int("obs_neighbors", 0)
        self.int("substeps", 1)
        self.int("max_steps", 1)
        if not optional_width:
            self.int("max_neighbors", 1)
        for name in ("world_size", "agent_radius", "max_speed", "obs_range", "dt"):
            self.number(name)
        self.number("collision_penalty", allow_zero=True)
        if self.cfg.spawn_cells is not None:
            self.int("spawn_cells", 1)
        self.ctrl_mode()
        self.neighbor_method()
        if not optional_width:
            self.neighbors()

    def neighbors(self, obs_name: str = "obs_neighbors", width_name: str = "max_neighbors") -> None:
        """The neighbor-list width holds at least the observed neighbors."""
        k, width = getattr(self.cfg, obs_name), getattr(self.cfg, width_name)
        if width < k:
            self.fail(f"{width_name} ({width}) must be >= {obs_name} ({k})")


@dataclass(frozen=True)
class ArenaWorldConfig:
    """The options of an arena's world alone (SI units): what a scenario of the arena that observes
    no neighbors (spread, sampling) shares with ``ArenaConfig``; its config subclasses it, overriding
    defaults and adding its own options (such a scenario fixes ``ctrl_mode`` and ``spawn_cells``,
    which ``arena_world`` reads, as class attributes).

    Attributes:
        n_agents: Agents per env (at most ``max_agents``).
        world_size: Half-size L [m] of the square arena ``[-L, L]^2`` (soft walls).
        agent_radius: Agent radius [m].
        max_speed: Speed limit [m/s].
        dt: Step length [s].
        substeps: Physics substeps per step.
        max_steps: Episode length [steps].
        max_neighbors: Width of the world's neighbor lists (contacts only).
        neighbor_method: How the neighbor lists are found: ``brute``, ``grid`` or ``auto``
            (``swarp.runtime.plan.choose_neighbor_method``). Same lists either way.
    """

    #: Scenario name in option error messages, and its most agents per env.
    scenario_name: ClassVar[str] = "arena"
    max_agents: ClassVar[int] = 256

    n_agents: int = 4
    world_size: float = 1.0
    agent_radius: float = 0.05
    max_speed: float = 1.0
    dt: float = 0.1
    substeps: int = 1
    max_steps: int = 200
    max_neighbors: int = 8
    neighbor_method: str = "auto"

    def __post_init__(self) -> None:
        self.checker().world(self.max_agents)

    def checker(self) -> OptionChecker:
        """An ``OptionChecker`` for this config's further options."""
        return OptionChecker(self, self.scenario_name)


@dataclass(frozen=True)
class ArenaConfig(ArenaWorldConfig):
    """Options every arena scenario of the library shares (SI units); each scenario's config
    subclasses it, overriding defaults and adding its own options.

    The world's options are ``ArenaWorldConfig``'s (at most 2000 agents here), and:

    Attributes:
        max_neighbors: Neighbor-list width K (>= obs_neighbors).
        ctrl_mode: ``velocity`` or ``acceleration`` (holonomic agents).
        obs_neighbors: k, the nearest other agents in each observation.
        obs_range: Sensing range [m] for the neighbor observation.
        collision_penalty: Penalty per overlapping agent per step (>= 0).
        spawn_cells: Cells per side of the spawn grid (default: chosen from the points to place).
    """

    scenario_name: ClassVar[str] = "arena"
    max_agents: ClassVar[int] = 2000
    #: Whether ``max_neighbors`` may be ``None`` (the scenario then picks the width).
    max_neighbors_optional: ClassVar[bool] = False

    max_neighbors: int = 16
    ctrl_mode: str = "velocity"
    obs_neighbors: int = 3
    obs_range: float = 0.5
    collision_penalty: float = 1.0
    spawn_cells: int | None = None

    def __post_init__(self) -> None:
        self.checker().arena()
