"""Variable navigation: navigation where every env draws its own number of agents at each reset and
an agent that reaches its goal leaves (issue 57's alive mask).

It is ``navigation`` (its torch reference and Warp twin, ``swarp/scenarios/navigation.py``) with
other defaults: ``n_agents=(2, 8)`` (each env draws its count in [2, 8] at every reset; the buffers
hold 8, the others absent: zero rows, zero reward, ``info["alive"]`` False) and
``leave_on_goal=True`` (an agent on its goal keeps that step's row and reward, then leaves: it stops
acting, observing and colliding while its env runs on). The episode ends when every present agent
has left, its success; an agent's ``final_reward`` is paid on its own arrival. Every navigation
option applies (``n_agents`` as an int or a pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from swarp.scenarios.framework.base import register_scenario
from swarp.scenarios.navigation import NavigationConfig, NavigationScenario

#: The default range of agents an env draws at each reset.
DEFAULT_AGENTS = (2, 8)


@dataclass(frozen=True)
class VariableNavigationConfig(NavigationConfig):
    """Navigation's options (``NavigationConfig``) with ``n_agents=(2, 8)`` and
    ``leave_on_goal=True`` by default."""

    scenario_name: ClassVar[str] = "variable_navigation"

    n_agents: int | tuple[int, int] = DEFAULT_AGENTS
    leave_on_goal: bool = True


class VariableNavigationScenario(NavigationScenario):
    """Navigation with a variable number of agents that leave on their goals (module docstring)."""

    name = "variable_navigation"
    Config = VariableNavigationConfig


register_scenario("variable_navigation", VariableNavigationScenario)
