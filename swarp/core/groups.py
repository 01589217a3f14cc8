"""Agent groups: named runs of consecutive agents, each with its observation width and action space.

A scenario declares its groups in ``WorldSpec.groups`` (``GroupSpec``: a name, a count and an
observation width); the environment resolves them into ``AgentGroup`` records (agent range and
``ActionSpace``), shown as ``env.groups``. A scenario that declares none has one group,
``"agents"``, holding every agent: the single-group API of ``[E, A, ...]`` tensors.

The buffers stay one row store: observations ``[E, A, W]`` (``W``: the widest group's width), the
physical command ``[E, A, D]``. A group's tensors are strided views of them (``obs[:, lo:hi, :W_g]``,
``reward[:, lo:hi]``): no copy, and no padding column in what a group is handed. A scenario writes
each agent's row in its group's first ``W_g`` columns and zeros after them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F

from swarp.core.spaces import ActionSpace

#: The name of the one group of a scenario that declares none.
DEFAULT_GROUP = "agents"


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """One group as a scenario declares it (``WorldSpec.groups``, in agent order).

    Attributes:
        name: The group's key in every per-group mapping (a Python identifier).
        n_agents: Its agents: the next ``n_agents`` of ``WorldSpec.agents`` (>= 1).
        obs_dim: Width of its agents' observations (<= the scenario's ``obs_dim``, the widest).
        silent: Whether its agents send no message on the world's channel (``WorldSpec.comm_dim``):
            their actions have no message columns and their rows of ``env.comm`` stay 0.
    """

    name: str
    n_agents: int
    obs_dim: int
    silent: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a group's name must be a Python identifier, got {self.name!r}")
        for field in ("n_agents", "obs_dim"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"group {self.name!r}: {field} must be an int >= 1, got {value!r}")


@dataclasses.dataclass(frozen=True)
class AgentGroup:
    """One group of an environment (``env.groups``).

    Attributes:
        name: Its key.
        start, stop: Its agents are ``start .. stop - 1`` of the env's ``A``.
        obs_dim: Columns of its observation view (lidar columns included where a lidar runs).
        action_space: Its ``ActionSpace`` (``physical_dim``: the widest action arity of its agents).
    """

    name: str
    start: int
    stop: int
    obs_dim: int
    action_space: ActionSpace

    @property
    def n_agents(self) -> int:
        """Agents in the group."""
        return self.stop - self.start

    @property
    def agents(self) -> slice:
        """The group's agents as a slice of the agent dimension."""
        return slice(self.start, self.stop)


def group_ranges(specs: Sequence[GroupSpec], n_agents: int) -> dict[str, tuple[int, int]]:
    """``{group: (start, stop)}``: the agents of each of a scenario's groups, in order.

    Args:
        specs: ``WorldSpec.groups`` (empty: one group ``"agents"`` of every agent).
        n_agents: Agents of the world (``len(WorldSpec.agents)``).

    Raises:
        TypeError: an entry that is not a ``GroupSpec``.
        ValueError: counts that do not add up to ``n_agents``, or repeated names.
    """
    if not specs:
        return {DEFAULT_GROUP: (0, n_agents)}
    if not all(isinstance(spec, GroupSpec) for spec in specs):
        raise TypeError("WorldSpec.groups must hold GroupSpec records")
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"group names must be distinct, got {names}")
    if sum(spec.n_agents for spec in specs) != n_agents:
        counts = " + ".join(str(spec.n_agents) for spec in specs)
        raise ValueError(f"the groups' agents ({counts}) must add up to the world's {n_agents} agents")
    ranges, start = {}, 0
    for spec in specs:
        ranges[spec.name] = (start, start + spec.n_agents)
        start += spec.n_agents
    return ranges


def observation_widths(specs: Sequence[GroupSpec], obs_dim: int, lidar_rays: int) -> dict[str, int]:
    """``{group: width}`` of each group's observation view.

    Args:
        specs: ``WorldSpec.groups`` (empty: one group ``"agents"``).
        obs_dim: The scenario's ``obs_dim``, the widest group's width.
        lidar_rays: Lidar columns after the scenario's (0 without a lidar).

    Raises:
        ValueError: no group as wide as ``obs_dim`` or one wider; groups of different widths with
            a lidar (its columns follow the widest row, so a narrower group's view would not be
            one slice).
    """
    if not specs:
        return {DEFAULT_GROUP: obs_dim + lidar_rays}
    widths = {spec.name: spec.obs_dim for spec in specs}
    if max(widths.values()) != obs_dim:
        raise ValueError(
            f"the widest group's obs_dim ({max(widths.values())}) must be the scenario's obs_dim ({obs_dim})"
        )
    if lidar_rays and min(widths.values()) != obs_dim:
        raise ValueError(
            f"lidar_rays needs groups of one observation width; this scenario's are {widths} (a lidar's columns "
            "follow the widest row)"
        )
    return {name: width + lidar_rays for name, width in widths.items()}


def per_group(value, names: Sequence[str], what: str, default) -> dict:
    """``{group: value}`` of an option given once for every group or as a mapping by group name
    (groups it leaves out take ``default``).

    Raises:
        ValueError: a mapping with a key that names no group.
    """
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"{what} names unknown group(s) {unknown}; the groups are {list(names)}")
        return {name: value.get(name, default) for name in names}
    return dict.fromkeys(names, value)


def message_columns(specs: Sequence[GroupSpec], comm_dim: int, kinds) -> int:
    """The message columns continuous actions carry: ``comm_dim`` where some group that is not
    silent has continuous actions (``kinds``: the environment's ``action_space``, one kind or a
    mapping by group; groups it leaves out are continuous), else 0."""
    names = [spec.name for spec in specs] or [DEFAULT_GROUP]
    silent = {spec.name: spec.silent for spec in specs}
    kind = per_group(kinds, names, "action_space", "continuous")
    speaks = any(kind[name] == "continuous" and not silent.get(name, False) for name in names)
    return comm_dim if speaks else 0


def split(tensor: torch.Tensor, groups: Sequence[AgentGroup], widths: Sequence[int] | None = None) -> dict:
    """``{group: view}`` of ``tensor`` [E, A, ...] by agent range (no copy), each cut to its width
    in ``widths`` along the last dim when given."""
    if widths is None:
        return {g.name: tensor[:, g.start : g.stop] for g in groups}
    return {g.name: tensor[:, g.start : g.stop, :w] for g, w in zip(groups, widths, strict=True)}


def join(values: Mapping[str, torch.Tensor], names: Sequence[str], width: int | None = None) -> torch.Tensor:
    """``split``'s inverse: [E, A, ...] of ``{group: [E, A_g, ...]}``, the groups' tensors in the
    order of ``names`` (agent order), each padded with zero columns to ``width`` along the last dim
    when given, concatenated along the agent dim (a new tensor, keeping autograd history)."""
    parts = [values[name] for name in names]
    if width is not None:
        parts = [F.pad(part, (0, width - part.shape[-1])) for part in parts]
    return torch.cat(parts, dim=1)


__all__ = [
    "DEFAULT_GROUP",
    "AgentGroup",
    "GroupSpec",
    "group_ranges",
    "join",
    "message_columns",
    "observation_widths",
    "per_group",
    "split",
]
