"""Discrete actions of the TorchRL adapter (``swarp.interop.torchrl.SwarpEnv``): their specs and their
conversion to the indices ``Environment.step`` takes.

An ``Environment`` made with ``action_space="discrete"`` or ``"multidiscrete"``
(``swarp.core.spaces``) steps on int64 indices [E, A, width]. ``SwarpEnv`` shows them as TorchRL's
``VmasEnv`` shows a VMAS env made with ``continuous_actions=False``, in one of two encodings chosen by
``categorical_actions``. Per agent (the spec's shape is ``[n_envs, n_agents, *per_agent]``):

=================  ==================================  ==========================================
action space       ``categorical_actions=True``        ``categorical_actions=False`` (one-hot)
=================  ==================================  ==========================================
``discrete``       ``Categorical(prod(nvec))``,        ``OneHot(prod(nvec))``, per agent
                   per agent ``[]`` (action [E, A])    ``[prod(nvec)]``
``multidiscrete``  ``MultiCategorical(nvec)``,         ``MultiOneHot(nvec)``, per agent
                   per agent ``[D]``                   ``[sum(nvec)]``
=================  ==================================  ==========================================

With a communication channel (``WorldSpec.comm_dim`` C, a group that is not ``silent``), the
message's choice is one more head of C choices, as in VMAS 1.5.2 (``swarp.core.spaces``): in the
table read ``choices`` (``nvec`` then C) for ``nvec``: ``Categorical(prod(nvec) * C)`` (the choice
the least significant digit of the flat index), ``MultiCategorical([*nvec, C])`` per agent
``[D + 1]``, ``OneHot(prod(nvec) * C)``, ``MultiOneHot([*nvec, C])`` per agent ``[sum(nvec) + C]``.

Every spec has dtype int64, as VmasEnv's. A categorical action must have an integer dtype
(``swarp.core.spaces.INDEX_DTYPES``; a float or bool one is a TypeError); a one-hot action may be
bool, integer or floating (a sampled one-hot distribution is float), holding exactly one 1 per head
and 0 elsewhere. Values are never read on the host: an out-of-range index, or a one-hot row that is
not exactly one 1 among 0s (NaN included), becomes an out-of-range index, which the step acts on as
a zero command and reports through ``Environment.invalid_actions()``.

``GroupActions`` holds one agent group's side of this (``Environment.groups``; an ``Environment``
without groups has one, ``"agents"``): its spec, continuous or discrete, and the conversion of its
action entry into the tensor ``Environment.step`` takes for the group. A continuous group's spec is
a ``Bounded`` box [n_envs, A_g, D_g + C_g] of the simulator's dtype: the group's physical bounds
then, with a channel, ``[0, 1]`` on its ``C_g`` message columns (VMAS's continuous layout; a silent
group has none), or a normalized box mapped affinely onto them, message columns included
(``swarp.interop.checks.rescale_actions``: ``action_low`` maps to a message of 0, ``action_high``
to 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchrl.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot, TensorSpec

from swarp.core.spaces import INDEX_DTYPES, ActionSpace, decode_torch
from swarp.interop.checks import real_tensor, rescale_actions

#: The shape of a continuous action, in words (the error messages).
CONTINUOUS_DIMS = "[n_envs, n_agents, act_dim]"


def per_agent_shape(space: ActionSpace, categorical: bool) -> tuple[int, ...]:
    """The trailing shape of one agent's action in the chosen encoding (module docstring table):
    ``()`` or ``(len(choices),)`` when categorical, ``(prod(choices),)`` or ``(sum(choices),)``
    when one-hot (``choices``: ``nvec``, and ``comm_dim`` with a channel)."""
    if categorical:
        return () if space.kind == "discrete" else (space.width,)
    return (sum(space.heads),)


def shape_text(space: ActionSpace, categorical: bool) -> str:
    """The action's shape in words, for error messages (``"[n_envs, n_agents, prod(choices)]"``)."""
    if categorical:
        last = "" if space.kind == "discrete" else ", len(choices)"
    else:
        last = ", prod(choices)" if space.kind == "discrete" else ", sum(choices)"
    return f"[n_envs, n_agents{last}]"


def discrete_action_spec(
    space: ActionSpace, categorical: bool, n_envs: int, n_agents: int, device: torch.device
) -> TensorSpec:
    """The batched action spec of a discrete ``space``: shape ``[n_envs, n_agents, *per_agent]``,
    dtype int64, on ``device`` (module docstring table).

    Raises:
        ValueError: ``space`` is continuous.
    """
    if not space.discrete:
        raise ValueError("discrete_action_spec needs a discrete or multidiscrete ActionSpace, got 'continuous'")
    shape = (n_envs, n_agents, *per_agent_shape(space, categorical))
    if space.kind == "discrete":
        (n,) = space.heads
        cls = Categorical if categorical else OneHot
        return cls(n=n, shape=shape, dtype=torch.int64, device=device)
    cls = MultiCategorical if categorical else MultiOneHot
    return cls(nvec=list(space.heads), shape=shape, dtype=torch.int64, device=device)


def one_hot_index(one_hot: torch.Tensor) -> torch.Tensor:
    """The index [...] int64 of each one-hot row of ``one_hot`` [..., n] (any real or bool dtype), or
    -1 (out of range) where the row is not exactly one 1 among 0s. No host sync."""
    ones = one_hot == 1
    valid = (ones | (one_hot == 0)).all(dim=-1) & (ones.sum(dim=-1) == 1)
    index = ones.to(torch.int64).argmax(dim=-1)
    return torch.where(valid, index, torch.full_like(index, -1))


def to_indices(
    space: ActionSpace,
    categorical: bool,
    action: torch.Tensor,
    name: str,
    leading: Sequence[int],
    n_agents: int,
    device: torch.device,
) -> torch.Tensor:
    """``action`` in the spec's encoding as the indices ``Environment.step`` takes.

    Args:
        space: The environment's discrete ``ActionSpace``.
        categorical: The encoding: indices (True) or one-hot (False).
        action: [*leading, n_agents, *per_agent] (``per_agent_shape``), any device.
        name: The argument's name, for the messages.
        leading: The leading dimensions required, e.g. ``(n_envs,)``.
        n_agents: Agents per env A.
        device: The simulator's device (the result lives there).

    Returns:
        [*leading, n_agents, width] indices on ``device``: the categorical action's own integer
        dtype (a view where no move is needed), int64 from one-hot (-1 for an invalid row).

    Raises:
        TypeError: not a tensor; a categorical action of a non-integer dtype; a one-hot action of a
            complex dtype.
        ValueError: the shape is not ``[*leading, n_agents, *per_agent]`` (never broadcast).
    """
    if not isinstance(action, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(action).__name__}")
    shape = (*leading, n_agents, *per_agent_shape(space, categorical))
    encoding = "categorical" if categorical else "one-hot"
    if tuple(action.shape) != shape:
        raise ValueError(
            f"{name} must have shape {shape_text(space, categorical)} = {list(shape)} for {space.kind} actions "
            f"({encoding}), got {list(action.shape)}"
        )
    if categorical:
        if action.dtype not in INDEX_DTYPES:
            raise TypeError(
                f"{name} must be integer indices (torch.int64 or another integer dtype) for {space.kind} actions "
                f"(categorical_actions=True), got {action.dtype}"
            )
        action = action.to(device)
        return action.unsqueeze(-1) if space.kind == "discrete" else action
    if action.is_complex():
        raise TypeError(f"{name} must be a one-hot tensor of 0s and 1s (bool, int or float), got {action.dtype}")
    action = action.to(device)
    if space.kind == "discrete":
        return one_hot_index(action).unsqueeze(-1)
    rows = torch.split(action, list(space.heads), dim=-1)
    return torch.stack([one_hot_index(row) for row in rows], dim=-1)


class GroupActions:
    """One agent group's actions in ``SwarpEnv``: their spec and their way to ``Environment.step``.

    Args:
        name: The group's name (its key in the mapping a grouped ``Environment.step`` takes).
        n_agents: Agents in the group, A_g.
        space: The group's ``ActionSpace`` (``AgentGroup.action_space``).
        categorical: The encoding of discrete actions: indices (True) or one-hot (False).
        low, high: The group's action bounds, of the simulator's dtype and device: [A_g, D_g + C_g]
            for a continuous group (its physical columns, then its message columns' ``[0, 1]``:
            ``swarp.interop.checks.group_action_bounds``), [A_g, D_g] for a discrete one (``D_g``:
            ``space.physical_dim``, ``C_g``: ``space.comm_dim``, 0 for a silent group).
        box: ``(box_low, box_high)``: a continuous group's normalized box, mapped onto ``low`` /
            ``high``; ``None``: physical actions. Ignored by a discrete group.

    Attributes:
        name, n_agents, space, categorical, low, high: As given.
        box: As given for a continuous group; ``None`` for a discrete one.
    """

    def __init__(
        self,
        name: str,
        n_agents: int,
        space: ActionSpace,
        categorical: bool,
        low: torch.Tensor,
        high: torch.Tensor,
        box: tuple[float, float] | None,
    ):
        self.name, self.n_agents, self.space, self.categorical = name, n_agents, space, categorical
        self.low, self.high = low, high
        self.box = None if space.discrete else box

    @property
    def dims(self) -> str:
        """The batched action's shape in words, for messages."""
        return shape_text(self.space, self.categorical) if self.space.discrete else CONTINUOUS_DIMS

    def spec(self, n_envs: int) -> TensorSpec:
        """The batched action spec: ``discrete_action_spec``, or a ``Bounded`` [n_envs, A_g, D_g + C_g]
        of the bounds' dtype (the normalized box, or the bounds: physical, then ``[0, 1]`` on the
        message columns)."""
        space, low, device = self.space, self.low, self.low.device
        if space.discrete:
            return discrete_action_spec(space, self.categorical, n_envs, self.n_agents, device)
        shape = (n_envs, self.n_agents, space.width)
        if self.box is not None:
            spec_low = torch.full(shape, self.box[0], dtype=low.dtype, device=device)
            spec_high = torch.full_like(spec_low, self.box[1])
        else:
            spec_low, spec_high = low.expand(shape), self.high.expand(shape)
        return Bounded(low=spec_low, high=spec_high, shape=shape, dtype=low.dtype, device=device)

    def step_input(self, action, name: str, n_envs: int) -> torch.Tensor:
        """``action`` (the tensordict's entry, ``name`` in the messages) as the group's input to
        ``Environment.step``: [n_envs, A_g, width] indices (``to_indices``), or the physical command
        and message [n_envs, A_g, D_g + C_g] (``real_tensor``, then ``rescale`` with a normalized
        box)."""
        space, device = self.space, self.low.device
        if space.discrete:
            return to_indices(space, self.categorical, action, name, (n_envs,), self.n_agents, device)
        shape = (n_envs, self.n_agents, space.width)
        return self.rescale(real_tensor(action, name, shape, self.low.dtype, device, CONTINUOUS_DIMS))

    def rescale(self, action: torch.Tensor) -> torch.Tensor:
        """A checked continuous action of the spec's box in physical units (the identity without a
        normalized box)."""
        if self.box is None:
            return action
        return rescale_actions(action, self.box[0], self.box[1], self.low, self.high)

    def indices(self, action: torch.Tensor) -> torch.Tensor:
        """A discrete action [..., A_g, *per_agent] of any leading dimensions as indices
        [..., A_g, width] (``to_indices``).

        Raises:
            ValueError: the group's actions are continuous, or the shape is not the spec's.
            TypeError: as ``to_indices``.
        """
        space = self.space
        if not space.discrete:
            raise ValueError("to_indices applies to discrete actions; this Environment's actions are continuous")
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor, got {type(action).__name__}")
        trailing = 1 + (0 if self.categorical and space.kind == "discrete" else 1)
        leading = tuple(action.shape[: max(action.dim() - trailing, 0)])
        return to_indices(space, self.categorical, action, "action", leading, self.n_agents, self.low.device)

    def physical(self, action: torch.Tensor) -> torch.Tensor:
        """An action [..., A_g, *per_agent] of any leading dimensions as what the step acts on
        (``SwarpEnv.to_physical``): a continuous group's physical command and message
        [..., A_g, D_g + C_g] (the normalized box mapped onto ``low`` / ``high``), a discrete
        group's physical command [..., A_g, D_g] (its message: ``swarp.core.spaces.decode_message_torch``)."""
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor, got {type(action).__name__}")
        space = self.space
        if space.discrete:
            return decode_torch(space, self.indices(action), self.low, self.high)[0]
        shape = (*action.shape[:-2], self.n_agents, space.width)
        low = self.low
        return self.rescale(real_tensor(action, "action", shape, low.dtype, low.device, "[..., n_agents, act_dim]"))

    def describe(self) -> str:
        """The actions in words (``SwarpEnv``'s repr): ``"physical"``, ``"normalized"`` or
        ``"discrete[3, 3], categorical"``."""
        space = self.space
        channel = f", comm_dim {space.comm_dim}" if space.comm_dim else ""
        if space.discrete:
            return f"{space.kind}{list(space.nvec)}{channel}, {'categorical' if self.categorical else 'one-hot'}"
        return ("physical" if self.box is None else "normalized") + channel


__all__ = [
    "CONTINUOUS_DIMS",
    "GroupActions",
    "discrete_action_spec",
    "one_hot_index",
    "per_agent_shape",
    "shape_text",
    "to_indices",
]
