"""argparse types the command lines of ``swarp.train`` share: each refuses a bad value with a message
naming what it accepts (argparse prefixes the flag)."""

from __future__ import annotations

import argparse
import ast
import math

from swarp.scenarios.framework.base import scenario_names


def scenario_option(text: str) -> tuple[str, object]:
    """``"NAME=VALUE"`` -> ``(NAME, VALUE)``, VALUE read as a Python literal (else kept as a string)."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def scenario_name(text: str) -> str:
    """A registered scenario's name; the error lists them and names ``--import`` for one of your own."""
    if text not in scenario_names():
        raise argparse.ArgumentTypeError(
            f"unknown scenario {text!r}; registered: {', '.join(scenario_names())} (a scenario of your own: "
            "--import the module that registers it)"
        )
    return text


def _parsed(text: str, kind, accepts, words: str):
    """``text`` as ``kind`` where ``accepts(value)``, else argparse's error saying it must be ``words``."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not accepts(value):
        raise argparse.ArgumentTypeError(f"must be {words}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1."""
    return _parsed(text, int, lambda v: v >= 1, "an int >= 1")


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _parsed(text, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def fraction(text: str) -> float:
    """A number in [0, 1]."""
    return _parsed(text, float, lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")


def seed(text: str) -> int:
    """An int in [0, 2^31)."""
    return _parsed(text, int, lambda v: 0 <= v < 2**31, "an int in [0, 2^31)")
