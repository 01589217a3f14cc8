"""``VmasAgent``, one entry of a ``VmasEnvironment``'s ``agents`` list, and its spaces as VMAS 1.5.2
builds them (``get_agent_action_space``, ``get_agent_observation_space``), one agent group at a
time: every agent takes its group's observation width and action space.

The communication channel (``WorldSpec.comm_dim``, VMAS's ``world.dim_c``) is read as VMAS's agents
hold it: ``agent.silent``, ``agent.action.u`` / ``agent.action.c`` (the last step's command and
message, ``None`` before the first step; ``c`` ``None`` for a silent agent) and ``agent.state.c``
(the message the agent's state holds: the last step's, zeros in an env reset since; ``None`` for a
silent agent), each a copy read from the swarp ``Environment`` when asked (``Channel``)."""

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


class Channel:
    """What a ``VmasEnvironment``'s agents read their ``action`` and ``state`` from: the swarp
    ``Environment`` and which envs have stepped since their last reset.

    Attributes:
        sim: The swarp ``Environment``.
        stepped: Whether any step has run (VMAS's ``agent.action`` fields are ``None`` before).
        fresh: [E, 1] bool on the env's device: envs reset since their last step, whose
            ``state.c`` is zeros (VMAS zeros an agent's state at reset).
    """

    def __init__(self, sim: Environment):
        self.sim = sim
        self.stepped = False
        self.fresh = torch.ones(sim.n_envs, 1, dtype=torch.bool, device=sim.torch_device)

    def on_step(self) -> None:
        """A step ran: every env's state holds its message."""
        self.stepped = True
        self.fresh.zero_()

    def on_reset(self, mask: torch.Tensor | None = None) -> None:
        """Envs of ``mask`` [E] bool (every env with ``None``) were reset: their states are silent."""
        if mask is None:
            self.fresh.fill_(True)
        else:
            self.fresh.logical_or_(mask.view(-1, 1))


@dataclass(frozen=True)
class AgentAction:
    """VMAS's ``agent.action`` as read after a step: ``u`` [E, action_size] float32, the physical
    command (a discrete action's decode); ``c`` [E, dim_c] float32, the message sent (``None`` for
    a silent agent). Both ``None`` before the first step."""

    u: torch.Tensor | None
    c: torch.Tensor | None


@dataclass(frozen=True)
class AgentState:
    """VMAS's ``agent.state``, its channel only: ``c`` [E, dim_c] float32, the message the agent's
    state holds (the last step's; zeros in an env reset since), ``None`` for a silent agent."""

    c: torch.Tensor | None


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
        space_low, space_high: [get_agent_action_size] float32 (continuous actions): its action
            space's bounds, ``action_low`` / ``action_high`` then [0, 1] for each message column
            (VMAS's ``get_agent_action_space``); the physical box alone for discrete actions.
        channel: Where ``action`` and ``state`` are read (``Channel``).
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
    space_low: torch.Tensor
    space_high: torch.Tensor
    channel: Channel

    def __repr__(self) -> str:
        return f"VmasAgent({self.name!r})"

    @property
    def silent(self) -> bool:
        """Whether it sends no message (VMAS's ``agent.silent``): its group is ``silent``, or the
        world has no channel (``dim_c`` 0)."""
        return self.group.action_space.comm_dim == 0

    @property
    def action(self) -> AgentAction:
        """The last step's command and message (``AgentAction``; copies)."""
        channel = self.channel
        if not channel.stepped:
            return AgentAction(None, None)
        sim = self.channel.sim
        u = sim.world.actions[:, self.index, : self.action_size].to(torch.float32, copy=True)
        c = None if self.silent else sim.comm[:, self.index].to(torch.float32, copy=True)
        return AgentAction(u, c)

    @property
    def state(self) -> AgentState:
        """The message its state holds (``AgentState``; a copy)."""
        if self.silent:
            return AgentState(None)
        channel = self.channel
        heard = channel.sim.comm[:, self.index].to(torch.float32, copy=True)
        return AgentState(heard.masked_fill_(channel.fresh, 0.0))

    @property
    def action_width(self) -> int:
        """Columns of its actions in ``step`` (VMAS's ``get_agent_action_size``): ``action_size``
        (continuous), 1 (discrete: one flat index) or ``len(nvec)`` (multi-discrete)."""
        return self.group.action_space.width


@dataclass(frozen=True, eq=False)
class VmasWorld:
    """What VMAS users read of ``env.world`` (a snapshot; swarp has no VMAS ``World``): ``dim_c``,
    the channel's width (0: none), ``dim_p`` (2), ``agents`` (``env.agents``), ``batch_dim`` and
    ``device``."""

    dim_c: int
    dim_p: int
    agents: list[VmasAgent]
    batch_dim: int
    device: torch.device


def build_agents(
    sim: Environment, boxes: dict[str, tuple[torch.Tensor, torch.Tensor]], channel: Channel
) -> list[VmasAgent]:
    """The ``VmasAgent`` s of ``sim``, in agent order (group by group).

    Args:
        sim: The swarp ``Environment``.
        boxes: ``{group: (low, high)}``, each [A_g, columns] float32: the group's action bounds
            (``swarp.interop.checks.group_action_bounds``: the physical columns, then the message
            columns of a continuous group that speaks); each agent keeps its row (views).
        channel: The env's ``Channel``.
    """
    agents = []
    for group in sim.groups:
        space = group.action_space
        width = space.physical_dim
        nvec = list(space.nvec) if space.discrete else [3] * width
        low, high = boxes[group.name]
        for i in range(group.n_agents):
            index = group.start + i
            name = f"{group.name}_{i}" if sim.grouped else f"agent_{index}"
            physical = low[i, :width], high[i, :width]
            agents.append(
                VmasAgent(
                    name, index, width, *physical, sim.n_envs, sim.torch_device, nvec, group, low[i], high[i], channel
                )
            )
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
    ``Box`` [action_size + dim_c] of its action box (physical units, then [0, 1] per message
    column) for continuous actions, ``Discrete(prod(nvec) * dim_c)`` for discrete ones,
    ``MultiDiscrete([*nvec, dim_c])`` for multi-discrete ones (``dim_c`` left out for a silent
    agent)."""
    spaces = gym_spaces()
    space = agent.group.action_space
    if space.kind == "multidiscrete":
        return spaces.MultiDiscrete(list(space.heads))
    if space.kind == "discrete":
        return spaces.Discrete(math.prod(space.heads))
    low, high = (b.detach().cpu().numpy() for b in (agent.space_low, agent.space_high))
    return spaces.Box(low=low, high=high, shape=(space.width,), dtype=low.dtype)


def agent_observation_space(agent: VmasAgent):
    """``gymnasium.spaces.Box(-inf, inf, (obs_dim,), float32)``, ``obs_dim`` its group's width."""
    return gym_spaces().Box(low=-np.inf, high=np.inf, shape=(agent.group.obs_dim,), dtype=np.float32)
