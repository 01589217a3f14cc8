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

Every spec has dtype int64, as VmasEnv's. A categorical action must have an integer dtype
(``swarp.core.spaces.INDEX_DTYPES``; a float or bool one is a TypeError); a one-hot action may be
bool, integer or floating (a sampled one-hot distribution is float), holding exactly one 1 per head
and 0 elsewhere. Values are never read on the host: an out-of-range index, or a one-hot row that is
not exactly one 1 among 0s (NaN included), becomes an out-of-range index, which the step acts on as
a zero command and reports through ``Environment.invalid_actions()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchrl.data import Categorical, MultiCategorical, MultiOneHot, OneHot, TensorSpec

from swarp.core.spaces import INDEX_DTYPES, ActionSpace


def per_agent_shape(space: ActionSpace, categorical: bool) -> tuple[int, ...]:
    """The trailing shape of one agent's action in the chosen encoding (module docstring table):
    ``()`` or ``(D,)`` when categorical, ``(prod(nvec),)`` or ``(sum(nvec),)`` when one-hot."""
    if categorical:
        return () if space.kind == "discrete" else (space.physical_dim,)
    return (sum(space.heads),)


def shape_text(space: ActionSpace, categorical: bool) -> str:
    """The action's shape in words, for error messages (``"[n_envs, n_agents, prod(nvec)]"``)."""
    if categorical:
        last = "" if space.kind == "discrete" else ", len(nvec)"
    else:
        last = ", prod(nvec)" if space.kind == "discrete" else ", sum(nvec)"
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
    return cls(nvec=list(space.nvec), shape=shape, dtype=torch.int64, device=device)


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
    rows = torch.split(action, list(space.nvec), dim=-1)
    return torch.stack([one_hot_index(row) for row in rows], dim=-1)


__all__ = ["discrete_action_spec", "one_hot_index", "per_agent_shape", "shape_text", "to_indices"]
