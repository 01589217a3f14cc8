"""``VmasAgent``, one entry of a ``VmasEnvironment``'s ``agents`` list, and its spaces as VMAS 1.5.2
builds them (``get_agent_action_space``, ``get_agent_observation_space``), one agent group at a
time: every agent takes its group's observation width and action space."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from swarp.core.groups import AgentGroup
from swarp.env.environment import Environment


def check_flag(name: str, value: Any) -> bool:
    """``value``, or ``TypeError`` naming flag ``name`` unless it is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class VmasAgent:
    """One agent of a ``VmasEnvironment``, as VMAS's ``env.agents`` lists them.

    Attributes:
        name: ``"agent_{index}"``, or ``"{group}_{i}"`` (``i``: its index in its group) in a
            grouped env, as VMAS names the agents of a heterogeneous scenario (``"adversary_0"``...):
            the key of dict actions, observations and spaces.
        index: Its index in the swarp batch (the A axis of ``env.sim``'s tensors).
        action_size: Its physical action width (its group's ``action_space.physical_dim``; VMAS's
            ``agent.action_size``, whatever the action space: ``get_agent_action_size`` is the
            width ``step`` takes).
        action_low, action_high: [action_size] float32 tensors on the env's device: its action box
            in physical units (``env.sim.action_bounds``' row).
        batch_dim: Parallel envs E.
        device: The env's ``torch.device``.
        discrete_action_nvec: Levels of each physical action column with discrete actions (its
            group's ``action_space.nvec``), a list of ``action_size`` ints; VMAS's default
            ``[3] * action_size`` (unused) with continuous ones.
        group: Its swarp ``AgentGroup`` (``env.sim.groups``; ``"agents"`` in a one-group env):
            its observation width (``group.obs_dim``) and action space (``group.action_space``).
    """

    name: str
    index: int
    action_size: int
    action_low: torch.Tensor
    action_high: torch.Tensor
    batch_dim: int
    device: torch.device
    discrete_action_nvec: list[int]
    group: AgentGroup

    def __repr__(self) -> str:
        return f"VmasAgent({self.name!r})"

    @property
    def action_width(self) -> int:
        """Columns of its actions in ``step`` (VMAS's ``get_agent_action_size``): ``action_size``
        (continuous), 1 (discrete: one flat index) or ``len(nvec)`` (multi-discrete)."""
        return self.group.action_space.width


def build_agents(sim: Environment, low: torch.Tensor, high: torch.Tensor) -> list[VmasAgent]:
    """The ``VmasAgent`` s of ``sim``, in agent order (group by group).

    Args:
        sim: The swarp ``Environment``.
        low, high: [A, D] float32 action bounds (``sim.action_bounds``); each agent keeps its row's
            first ``action_size`` columns (views).
    """
    agents = []
    for group in sim.groups:
        space = group.action_space
        width = space.physical_dim
        nvec = list(space.nvec) if space.discrete else [3] * width
        for i in range(group.n_agents):
            index = group.start + i
            name = f"{group.name}_{i}" if sim.grouped else f"agent_{index}"
            row_low, row_high = low[index, :width], high[index, :width]
            agents.append(VmasAgent(name, index, width, row_low, row_high, sim.n_envs, sim.torch_device, nvec, group))
    return agents


def gym_spaces():
    """``gymnasium.spaces`` (VMAS builds its spaces with ``gym.spaces``, which swarp does not need).

    Raises:
        ImportError: gymnasium is not installed.
    """
    try:
        from gymnasium import spaces
    except ImportError as error:  # the spaces are the one part that needs it
        raise ImportError(
            "observation_space and action_space need gymnasium (pip install gymnasium; VMAS builds them with gym); "
            "everything else of swarp.vmas works without it"
        ) from error
    return spaces


def agent_action_space(agent: VmasAgent):
    """``agent``'s action space, as VMAS 1.5.2 builds it (with ``gymnasium.spaces``): a float32
    ``Box`` [action_size] of its action box (physical units) for continuous actions,
    ``Discrete(prod(nvec))`` for discrete ones, ``MultiDiscrete(nvec)`` for multi-discrete ones."""
    spaces = gym_spaces()
    kind = agent.group.action_space.kind
    if kind == "multidiscrete":
        return spaces.MultiDiscrete(agent.discrete_action_nvec)
    if kind == "discrete":
        return spaces.Discrete(math.prod(agent.discrete_action_nvec))
    low, high = (b.detach().cpu().numpy() for b in (agent.action_low, agent.action_high))
    return spaces.Box(low=low, high=high, shape=(agent.action_size,), dtype=low.dtype)


def agent_observation_space(agent: VmasAgent):
    """``gymnasium.spaces.Box(-inf, inf, (obs_dim,), float32)``, ``obs_dim`` its group's width."""
    return gym_spaces().Box(low=-np.inf, high=np.inf, shape=(agent.group.obs_dim,), dtype=np.float32)
