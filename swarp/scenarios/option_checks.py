"""Validation helpers for scenario option dataclasses: one clear ``ValueError`` per bad option.

Each helper reads ``getattr(config, name)`` and names the scenario, the option, the expected range
and the value received, so ``swarp.make("spread", n_agents=0)`` fails with a message a user can act
on. Call them from a config dataclass's ``__post_init__``.
"""

from __future__ import annotations

import math
from typing import Any


def check_int(scenario: str, config: Any, name: str, low: int, high: int | None = None) -> None:
    """``config.name`` must be an int (not a bool) in ``[low, high]`` (``high=None``: unbounded)."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f">= {low}" + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"{scenario} option {name} must be an int {bound}, got {value!r}")


def check_number(scenario: str, config: Any, name: str, allow_zero: bool = False, high: float | None = None) -> None:
    """``config.name`` must be a finite real number > 0 (>= 0 with ``allow_zero``), <= ``high`` if given."""
    value = getattr(config, name)
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    if not bad:
        bad = value < 0 or (value == 0 and not allow_zero) or (high is not None and value > high)
    if bad:
        bound = (">= 0" if allow_zero else "> 0") + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"{scenario} option {name} must be a finite number {bound}, got {value!r}")


def check_bool(scenario: str, config: Any, name: str) -> None:
    """``config.name`` must be a bool."""
    value = getattr(config, name)
    if not isinstance(value, bool):
        raise ValueError(f"{scenario} option {name} must be a bool, got {value!r}")
