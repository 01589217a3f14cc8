"""Gymnasium spaces of discrete action indices, and what agent groups mean for a single-space
adapter; shared by the Gymnasium, SB3 and PettingZoo adapters."""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium
import numpy as np
import torch

from swarp.core.spaces import ActionSpace
from swarp.env.environment import Environment

#: Where a grouped environment whose groups differ goes instead of a single-space adapter.
GROUPED_ALTERNATIVES = (
    "swarp.interop.pettingzoo.SwarpParallelEnv (each agent its own observation and action space), or "
    "swarp.interop.torchrl.SwarpEnv / swarp.interop.benchmarl (one spec per group)"
)


def index_space(space: ActionSpace, n_agents: int | None = None, flatten: bool = True) -> gymnasium.spaces.Space:
    """The int64 Gymnasium space of a discrete ``space``'s indices: one agent's (``n_agents=None``),
    ``Discrete(prod(choices))`` or ``MultiDiscrete(choices)`` (``choices``: ``nvec``, then the
    channel's width C where the agent speaks: VMAS's ``Discrete(prod(nvec) * C)``); ``n_agents``
    agents', a ``MultiDiscrete`` of every agent's ``space.heads``, shape (A, width), or (A * width,)
    with ``flatten`` (a ``Discrete`` for one agent's one flat index)."""
    heads = np.asarray(space.heads, dtype=np.int64)
    if n_agents is None or (flatten and n_agents == 1 and space.kind == "discrete"):
        if space.kind == "discrete":
            return gymnasium.spaces.Discrete(int(heads[0]))
        return gymnasium.spaces.MultiDiscrete(heads)
    return gymnasium.spaces.MultiDiscrete(np.tile(heads, n_agents) if flatten else np.tile(heads, (n_agents, 1)))


def check_one_space(env: Environment, adapter: str) -> None:
    """Raise unless every agent of ``env`` has one observation width and one action space, as an
    adapter of one space for the whole fleet (Gymnasium's, SB3's) needs.

    A one-group environment always passes. A grouped one passes where its groups differ in name
    only: every group continuous with one ``ActionSpace`` (``env.action_space`` then takes the flat
    ``[E, A, D]`` command) and one ``obs_dim``; its by-group outputs are then joined along the agent
    axis (``join_groups``) into the ``[E, A, ...]`` tensors of a one-group environment.

    Raises:
        ValueError: the groups' observation widths or action spaces differ (or are discrete), naming
            the adapters that serve such an environment.
    """
    if not env.grouped:
        return
    groups = env.groups
    spaces = {g.action_space for g in groups}
    widths = {g.obs_dim for g in groups}
    if len(widths) == 1 and len(spaces) == 1 and not groups[0].action_space.discrete:
        return
    channel = any(g.action_space.comm_dim for g in groups)  # a silent group: "comm_dim 0"
    described = ", ".join(
        f"{g.name!r}: {g.n_agents} agents, obs_dim {g.obs_dim}, {g.action_space.kind} actions of width "
        f"{g.action_space.width}"
        + (f" (nvec {list(g.action_space.nvec)})" if g.action_space.discrete else "")
        + (f", comm_dim {g.action_space.comm_dim}" if channel else "")
        for g in groups
    )
    raise ValueError(
        f"{adapter} gives every agent one observation space and one action space, but this environment's agent "
        f"groups differ ({described}); it serves grouped environments only where every group is continuous with "
        f"one action space and one obs_dim. Use {GROUPED_ALTERNATIVES}"
    )


def join_groups(value: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``value`` as one tensor over every agent: a by-group mapping (``[E, A_g, ...]`` per group, in
    group order, all of one trailing shape) concatenated along the agent axis to ``[E, A, ...]`` (a
    new tensor); a tensor is returned as it is."""
    if isinstance(value, Mapping):
        return torch.cat(list(value.values()), dim=1)
    return value
