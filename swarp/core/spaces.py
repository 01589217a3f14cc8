"""Action spaces: what ``Environment.step`` takes and how it becomes the physical command.

Every scenario's physics consumes a physical command ``[E, A, D]`` (``D``: the fleet's widest
action arity, ``swarp.core.config``). An ``ActionSpace`` says what a policy hands ``step`` instead:

* ``continuous``: the physical command itself, ``[E, A, D]`` floats (clamped by the kernels);
* ``discrete``: one index per agent, ``[E, A, 1]`` int64 in ``[0, prod(nvec))``, the flat index
  of the multi-discrete choice (the first column most significant);
* ``multidiscrete``: one index per physical column, ``[E, A, D]`` int64, column ``d`` in
  ``[0, nvec[d])``.

A space with a communication channel (``comm_dim`` C > 0; VMAS 1.5.2's ``dim_c``, its layout) adds
the agent's message: ``C`` more columns in ``[0, 1]`` after the command (continuous; clamped, a
non-finite entry acts as 0 and raises the flag), one more head of ``C`` choices (discrete: the
least significant digit of the flat index, ``index = physical_index * C + choice``;
multidiscrete: one more column), whose choice is sent as a one-hot message.

Discrete levels follow VMAS 1.5.2 (``Environment._set_action``): column ``d`` with ``n`` levels
maps level ``l`` to ``low + l / (n - 1) * (high - low)`` over the agent's physical box
(``Model.action_bounds``); for odd ``n`` index 0 is the middle level (no command on a symmetric
box, VMAS's "stay") and indices ``1 .. n // 2`` are levels ``0 .. n // 2 - 1``. On VMAS's
symmetric boxes ``[-u, u]`` this is VMAS's ``l / (n - 1) * 2u - u`` to the bit. Columns an agent
does not use have the box ``(0, 0)`` and decode to 0. An index out of range makes the agent's
whole command 0 and raises the environment's ``invalid_actions()`` flag, as a non-finite
continuous action does.

``decode_torch`` is the torch reference of the decode; ``swarp.runtime.actions`` is its Warp twin.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

#: The kinds of action space, by name.
ACTION_SPACES = ("continuous", "discrete", "multidiscrete")
#: The integer dtypes ``step`` takes for discrete kinds (copied into an int64 buffer, exactly).
INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)


@dataclasses.dataclass(frozen=True)
class ActionSpace:
    """An environment's action space (see the module docstring).

    Attributes:
        kind: ``"continuous"``, ``"discrete"`` or ``"multidiscrete"``.
        physical_dim: D, the width of the physical command the kernels read.
        nvec: Levels of each physical column (discrete kinds; ``()`` when continuous).
        comm_dim: C, the width of the agent's message (0: silent).
    """

    kind: str
    physical_dim: int
    nvec: tuple[int, ...] = ()
    comm_dim: int = 0

    @classmethod
    def build(cls, kind: str, nvec: int | Sequence[int] | None, physical_dim: int, comm_dim: int = 0) -> ActionSpace:
        """The space of ``kind`` over a ``physical_dim``-wide command and a ``comm_dim``-wide
        message; ``nvec``: levels per column, an int for every column (``None``: 3, VMAS's default)
        or one int >= 2 per column.

        Raises:
            ValueError: an unknown kind, or ``nvec`` of the wrong length or with a level count < 2.
            TypeError: ``nvec`` is neither an int nor a sequence of ints.
        """
        if kind not in ACTION_SPACES:
            raise ValueError(f"action_space must be one of {', '.join(ACTION_SPACES)}, got {kind!r}")
        if kind == "continuous":
            if nvec is not None:
                raise ValueError("action_nvec applies to discrete action spaces; action_space is 'continuous'")
            return cls(kind, physical_dim, (), comm_dim)
        levels = 3 if nvec is None else nvec
        if _is_int(levels):
            levels = (levels,) * physical_dim
        if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
            raise TypeError(f"action_nvec must be an int or a sequence of ints, got {nvec!r}")
        levels = tuple(levels)
        if len(levels) != physical_dim or not all(_is_int(n) and n >= 2 for n in levels):
            raise ValueError(
                f"action_nvec must give {physical_dim} level counts (one per action column), each an int "
                f">= 2, got {nvec!r}"
            )
        return cls(kind, physical_dim, tuple(int(n) for n in levels), comm_dim)

    @property
    def choices(self) -> tuple[int, ...]:
        """Choices of each digit of a discrete action: ``nvec``, then ``comm_dim`` with a channel."""
        return self.nvec + ((self.comm_dim,) if self.comm_dim else ())

    @property
    def strides(self) -> tuple[int, ...]:
        """What each digit's index counts for in a flat index (``choices``' order, the first most
        significant; the message's choice, where there is one, counts 1)."""
        choices = self.choices
        return tuple(math.prod(choices[d + 1 :]) for d in range(len(choices)))

    def box_columns(self, command_dim: int) -> list[int]:
        """The columns of an environment's action box (``Environment.action_bounds``: a
        ``command_dim``-wide command, then the channel's columns) that a continuous action of this
        space fills, in its order: its command's columns, then its message's."""
        return [*range(self.physical_dim), *range(command_dim, command_dim + self.comm_dim)]

    @property
    def discrete(self) -> bool:
        """Whether ``step`` takes indices (``discrete`` or ``multidiscrete``)."""
        return self.kind != "continuous"

    @property
    def width(self) -> int:
        """Columns of the actions ``step`` takes: D + C (continuous), 1 (``discrete``) or D, plus 1
        with a channel (``multidiscrete``)."""
        if self.kind == "discrete":
            return 1
        if self.kind == "multidiscrete":
            return len(self.choices)
        return self.physical_dim + self.comm_dim

    @property
    def width_name(self) -> str:
        """``width`` in words, for messages: ``"act_dim"``, ``"1"`` or ``"len(nvec)"``."""
        return {"continuous": "act_dim", "discrete": "1", "multidiscrete": "len(nvec)"}[self.kind]

    @property
    def heads(self) -> tuple[int, ...]:
        """Choices of each column ``step`` takes: ``(prod(choices),)`` (``discrete``), ``choices``
        (``multidiscrete``), ``()`` when continuous."""
        if self.kind == "discrete":
            return (math.prod(self.choices),)
        if self.kind == "multidiscrete":
            return self.choices
        return ()

    def sample(self, n_envs: int, n_agents: int, generator: torch.Generator) -> torch.Tensor:
        """[n_envs, n_agents, width] int64 indices on ``generator``'s device, each column uniform over
        its choices (discrete kinds only)."""
        if not self.discrete:
            raise ValueError("sample() draws indices of a discrete action space; this one is continuous")
        device = generator.device
        columns = [torch.randint(0, n, (n_envs, n_agents), generator=generator, device=device) for n in self.heads]
        return torch.stack(columns, dim=-1)

    def check(self, actions: torch.Tensor, n_envs: int, n_agents: int, device: torch.device, float_dtype, name: str):
        """Raise a clear error unless ``actions`` is a ``[n_envs, n_agents, width]`` tensor on
        ``device`` of ``float_dtype`` (continuous) or an integer dtype (discrete kinds). Values are
        not read here (no host sync): out-of-range indices raise the device-side flag."""
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(actions).__name__}")
        expected = (n_envs, n_agents, self.width)
        if tuple(actions.shape) != expected:
            kind = "" if self.kind == "continuous" else f" for {self.kind} actions"
            raise ValueError(
                f"{name} must have shape [n_envs, n_agents, {self.width_name}] = {list(expected)}{kind}, got "
                f"{list(actions.shape)}"
            )
        if self.discrete:
            if actions.dtype not in INDEX_DTYPES:
                raise TypeError(
                    f"{name} must be integer indices (torch.int64 or another integer dtype) for {self.kind} "
                    f"actions, got {actions.dtype}"
                )
        elif actions.dtype != float_dtype:
            raise TypeError(f"{name} must have dtype {float_dtype}, got {actions.dtype}")
        if actions.device != device:
            raise ValueError(f"{name} must be on device {device}, got {actions.device}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def column_indices(space: ActionSpace, indices: torch.Tensor) -> torch.Tensor:
    """Per-digit indices [E, A, len(choices)] int64 of ``indices`` [E, A, width] (a flat discrete
    index split into its digits, the first most significant; out-of-range flat indices split as
    they fall). The last digit is the message's choice where the space has a channel."""
    if space.kind == "multidiscrete":
        return indices.long()
    flat = indices[..., 0].long()
    columns = []
    for stride in space.strides:
        columns.append(torch.div(flat, stride, rounding_mode="floor"))
        flat = flat - columns[-1] * stride
    return torch.stack(columns, dim=-1)


def decode_torch(
    space: ActionSpace,
    indices: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    choices: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The torch reference of the decode (module docstring).

    Args:
        space: A discrete ``ActionSpace``.
        indices: [E, A, width] integer indices.
        low, high: [A, D] the physical box (``Model.action_bounds``), in the sim dtype.
        choices: int64 ``space.choices`` on the indices' device, made once by a caller that
            decodes every step (the default builds it: a host-to-device copy on CUDA, which a
            captured step cannot hold).

    Returns:
        ``(command [E, A, D] in low's dtype, bad [E, A] bool)``: the physical command (0 for an
        agent with an out-of-range index) and which agents had one. The message of a space with a
        channel: ``decode_message_torch``.
    """
    if choices is None:
        choices = torch.tensor(space.choices, device=indices.device)
    digits = column_indices(space, indices)
    if space.kind == "discrete":
        flat = indices[..., 0].long()
        bad = (flat < 0) | (flat >= math.prod(space.choices))
    else:
        bad = ((digits < 0) | (digits >= choices)).any(dim=-1)
    columns = len(space.nvec)
    index, nvec = digits[..., :columns], choices[:columns]
    half = nvec // 2
    odd = nvec % 2 == 1
    level = torch.where(odd & (index == 0), half, torch.where(odd & (index <= half), index - 1, index))
    fraction = level.to(low.dtype) / (nvec - 1).to(low.dtype)
    command = low + fraction * (high - low)
    return torch.where(bad.unsqueeze(-1), torch.zeros_like(command), command), bad


def decode_message_torch(space: ActionSpace, indices: torch.Tensor, bad: torch.Tensor, dtype) -> torch.Tensor:
    """[E, A, C] the one-hot messages of discrete ``indices`` [E, A, width] of a space with a
    channel (their last digit), 0 for the agents of ``bad`` [E, A] (``decode_torch``'s), in ``dtype``."""
    choice = column_indices(space, indices)[..., len(space.nvec)].clamp(0, space.comm_dim - 1)
    return F.one_hot(choice, space.comm_dim).to(dtype) * (~bad).unsqueeze(-1).to(dtype)


def continuous_message(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The message of continuous message columns ``raw`` [E, A, C]: each entry clamped to
    ``[0, 1]``, a non-finite one 0. Returns ``(message [E, A, C], bad [E, A] bool)``; differentiable
    (the gradient of a clamped entry is 0)."""
    finite = torch.isfinite(raw)
    message = torch.where(finite, raw, torch.zeros_like(raw)).clamp(0.0, 1.0)
    return message, ~finite.all(dim=-1)


def encode_torch(
    space: ActionSpace,
    command: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    choice: torch.Tensor | None = None,
) -> torch.Tensor:
    """The indices whose levels are nearest a physical command: ``decode_torch``'s inverse on the
    levels (a scripted controller's commands in a discrete environment).

    Args:
        space: A discrete ``ActionSpace``.
        command: [E, A, D] physical commands (clamped to the box first).
        low, high: [A, D] the physical box (``Model.action_bounds``).
        choice: [E, A] int64 message choices, for a space with a channel (default 0).

    Returns:
        [E, A, width] int64 indices; ``decode_torch`` of them is the nearest level of each column
        (a column with an empty box, ``low == high``, takes its "stay" index).
    """
    nvec = torch.tensor(space.nvec, device=command.device)
    span = high - low
    fraction = torch.where(span > 0, (command.clamp(low, high) - low) / torch.where(span > 0, span, 1), 0.5)
    level = torch.round(fraction * (nvec - 1)).long().clamp(min=torch.zeros_like(nvec), max=nvec - 1)
    half = nvec // 2
    odd = nvec % 2 == 1
    index = torch.where(odd & (level == half), 0, torch.where(odd & (level < half), level + 1, level))
    if space.comm_dim:
        choice = torch.zeros_like(index[..., 0]) if choice is None else choice.long()
        index = torch.cat([index, choice.unsqueeze(-1)], dim=-1)
    if space.kind == "multidiscrete":
        return index
    strides = torch.tensor(space.strides, device=command.device)
    return (index * strides).sum(dim=-1, keepdim=True)


__all__ = [
    "ACTION_SPACES",
    "INDEX_DTYPES",
    "ActionSpace",
    "column_indices",
    "continuous_message",
    "decode_message_torch",
    "decode_torch",
    "encode_torch",
]
