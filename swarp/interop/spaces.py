"""Gymnasium spaces of discrete action indices, shared by the Gymnasium, SB3 and PettingZoo adapters."""

from __future__ import annotations

import gymnasium
import numpy as np

from swarp.core.spaces import ActionSpace


def index_space(space: ActionSpace, n_agents: int | None = None, flatten: bool = True) -> gymnasium.spaces.Space:
    """The int64 Gymnasium space of a discrete ``space``'s indices: one agent's (``n_agents=None``),
    ``Discrete(prod(nvec))`` or ``MultiDiscrete(nvec)``; ``n_agents`` agents', a ``MultiDiscrete`` of
    every agent's ``space.heads``, shape (A, width), or (A * width,) with ``flatten`` (a ``Discrete``
    for one agent's one flat index)."""
    heads = np.asarray(space.heads, dtype=np.int64)
    if n_agents is None or (flatten and n_agents == 1 and space.kind == "discrete"):
        if space.kind == "discrete":
            return gymnasium.spaces.Discrete(int(heads[0]))
        return gymnasium.spaces.MultiDiscrete(heads)
    return gymnasium.spaces.MultiDiscrete(np.tile(heads, n_agents) if flatten else np.tile(heads, (n_agents, 1)))
