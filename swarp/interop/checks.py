"""Input checks shared by the adapters: what crosses an adapter's boundary is checked once, there.

Each check raises with a message naming the argument, what was expected and what was received,
before anything reaches the ``Environment``. They read metadata only (type, dtype, shape), never
values: no host sync, whatever the device. Values are the simulator's business: non-finite
actions act as 0 and raise ``Environment.invalid_actions()``, finite ones are clamped to the
action bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

#: numpy dtype kinds accepted as numbers: signed and unsigned integers, floats.
REAL_KINDS = "iuf"


def _received(value: Any) -> str:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return f"{type(value).__name__} of dtype {value.dtype} and shape {list(value.shape)}"
    return f"{type(value).__name__} {value!r}" if value is None or np.isscalar(value) else type(value).__name__


def _from_numpy(array: np.ndarray) -> torch.Tensor:
    # torch takes no negative strides (a reversed view): copy those; np.ascontiguousarray would also
    # turn a 0-d array into shape [1].
    return torch.as_tensor(array if array.flags.c_contiguous else array.copy())


def _as_tensor(value: Any, name: str, expected: str) -> torch.Tensor:
    """``value`` as a tensor of its own dtype, without copying a tensor; TypeError unless array-like."""
    if isinstance(value, torch.Tensor):
        return value
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"{name} must be {expected}, got {_received(value)}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nested sequences, unconvertible objects
        raise TypeError(
            f"{name} must be {expected}, got {type(value).__name__} that is not an array ({error})"
        ) from None
    if array.dtype.kind not in REAL_KINDS or array.dtype.itemsize > 8:  # > 8 bytes: float128, no torch dtype
        received = (
            _received(value) if isinstance(value, np.ndarray) else f"{_received(value)} of numpy dtype {array.dtype}"
        )
        raise TypeError(f"{name} must be {expected}, got {received}")
    return _from_numpy(array)


def _shape_text(shape: Sequence[int], dims: str | None) -> str:
    return f"shape {dims} = {list(shape)}" if dims else f"shape {list(shape)}"


def real_tensor(
    value: Any,
    name: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
    dims: str | None = None,
) -> torch.Tensor:
    """``value`` as a ``dtype`` tensor on ``device`` of exactly ``shape``; never broadcast.

    Args:
        value: A torch tensor (any device), a numpy array, a nested sequence or a number, of an
            integer or floating dtype.
        name: The argument's name, for the messages.
        shape: The shape required, e.g. ``(n_envs, n_agents, act_dim)``.
        dtype: The floating dtype to convert to (the simulator's).
        device: The device to move to (the simulator's).
        dims: The names of ``shape``'s dimensions for the message, e.g. ``"[n_envs, n_agents, act_dim]"``.

    Returns:
        A tensor [*shape] of ``dtype`` on ``device`` (``value`` itself when it already is one).
        Finite values beyond ``dtype``'s range (1e300 in float64 for a float32 simulator) become its
        largest finite value of their sign instead of inf, so they keep acting as "beyond the bound";
        inf and NaN pass unchanged.

    Raises:
        TypeError: ``value`` is None, a string, an object array, or of a bool or complex dtype.
        ValueError: its shape is not ``shape``.
    """
    expected = f"real numbers (an int or float array or tensor) of {_shape_text(shape, dims)}"
    tensor = _as_tensor(value, name, expected)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{name} must be {expected}, got {_received(tensor)}")
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name} must have {_shape_text(shape, dims)}, got {list(tensor.shape)}")
    if tensor.is_floating_point() and torch.finfo(tensor.dtype).max > torch.finfo(dtype).max:
        # A narrowing cast would turn finite values beyond the target's range into inf (which
        # acts as 0): keep them finite, as large as the target allows.
        limit = torch.finfo(dtype).max
        tensor = torch.where(torch.isfinite(tensor), tensor.clamp(-limit, limit), tensor)
    return tensor.to(device=device, dtype=dtype)


def env_mask(
    value: Any, name: str, n_envs: int, device: torch.device, shapes: Sequence[tuple[int, ...]] = ()
) -> torch.Tensor:
    """``value`` as a [n_envs] bool tensor on ``device``: the envs where it is True.

    Args:
        value: A bool torch tensor (any device), numpy array or sequence of bools, of shape
            [n_envs] or one of ``shapes`` (with ``n_envs`` elements, e.g. TorchRL's [n_envs, 1]).
        name: The argument's name, for the messages.
        n_envs: Number of envs E.
        device: The device to move to.
        shapes: Other shapes accepted (viewed as [n_envs]).

    Raises:
        TypeError: not an array of bools: integer env indices (``np.arange(E)``) or 0/1 values are
            rejected rather than read as a mask, as ``Environment.reset_at`` rejects them.
        ValueError: the shape is neither [n_envs] nor one of ``shapes``.
    """
    allowed = [(n_envs,), *(tuple(s) for s in shapes)]
    expected = f"a bool mask of shape {' or '.join(str(list(s)) for s in allowed)}"
    if isinstance(value, torch.Tensor):
        tensor = value
    else:
        if value is None or isinstance(value, (str, bytes, dict)):
            raise TypeError(f"{name} must be {expected}, got {_received(value)}")
        try:
            tensor = np.asarray(value)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"{name} must be {expected}, got {type(value).__name__} that is not an array ({error})"
            ) from None
    is_bool = tensor.dtype == torch.bool if isinstance(tensor, torch.Tensor) else tensor.dtype == np.bool_
    if not is_bool:
        raise TypeError(
            f"{name} must be {expected} (True where an env resets), got dtype {tensor.dtype}: env indices and "
            "0/1 values are not read as a mask"
        )
    if isinstance(tensor, np.ndarray):
        tensor = _from_numpy(tensor)
    if tuple(tensor.shape) not in allowed:
        raise ValueError(f"{name} must be {expected}, got shape {list(tensor.shape)}")
    return tensor.reshape(n_envs).to(device)


def group_columns(group, low: torch.Tensor, high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` of agent group ``group``'s actions (a ``swarp.core.groups.AgentGroup``), each
    [A_g, columns], cut from an env's action box ``low`` / ``high`` (``Environment.action_bounds``:
    [A, D], or [A, D + C] where continuous actions carry messages, ``D`` the widest physical
    command, ``C`` the channel): a continuous group's box over the ``D_g + C_g`` columns its
    actions have, its first ``D_g`` physical columns then the message columns after ``D``
    (``[0, 1]``; none for a silent group, or without a channel); a discrete group's physical box
    [A_g, D_g] (what its indices decode onto)."""
    space, rows = group.action_space, slice(group.start, group.stop)
    if space.discrete or not space.comm_dim:
        return low[rows, : space.physical_dim], high[rows, : space.physical_dim]
    columns = space.box_columns(low.shape[-1] - space.comm_dim)  # the channel's columns close the box
    return low[rows][:, columns], high[rows][:, columns]


def group_action_bounds(env, group) -> tuple[torch.Tensor, torch.Tensor]:
    """``group_columns`` of ``env.action_bounds`` (``env`` a ``swarp.Environment``): the box of
    ``group``'s actions, of the bounds' dtype and device."""
    return group_columns(group, *env.action_bounds)


def rescale_actions(
    action: torch.Tensor, box_low: float, box_high: float, low: torch.Tensor, high: torch.Tensor
) -> torch.Tensor:
    """Map actions [..., A, act_dim] of the normalized box ``[box_low, box_high]`` affinely onto the
    physical bounds ``low``/``high`` ([A, act_dim], the sim's dtype and device).

    Finite values are clamped to the box first, so every one lands inside the bounds (above the box:
    exactly ``high``, which the affine map of the edge may miss by an ulp); NaN and inf pass
    unchanged (the step acts on them as 0 and raises ``invalid_actions()``).
    """
    inside = action.clamp(box_low, box_high)
    physical = low + (inside - box_low) * ((high - low) / (box_high - box_low))
    physical = torch.where(action > box_high, high, physical)
    return torch.where(torch.isfinite(action), physical, action)


def index_tensor(
    value: Any, name: str, shape: Sequence[int], device: torch.device, dims: str | None = None
) -> torch.Tensor:
    """``value`` as an int64 tensor on ``device`` of exactly ``shape``: discrete action indices.

    Args:
        value: A torch tensor (any device), a numpy array, a nested sequence or a number, of an
            integer dtype (floats are refused: cast indices to an int dtype first).
        name: The argument's name, for the messages.
        shape: The shape required, e.g. ``(n_envs, n_agents, 1)``; ``()`` for one index.
        device: The device to move to (the simulator's).
        dims: The names of ``shape``'s dimensions for the message, e.g. ``"[n_envs, n_agents, 1]"``.

    Returns:
        An int64 tensor [*shape] on ``device``. Values are not read: an index out of its range
        reaches the simulator, which acts on it as a zero command and raises ``invalid_actions()``.

    Raises:
        TypeError: ``value`` is None, a string, an object array, or not of an integer dtype.
        ValueError: its shape is not ``shape``.
    """
    expected = f"integer indices (an int array or tensor) of {_shape_text(shape, dims)}"
    tensor = _as_tensor(value, name, expected)
    if tensor.dtype == torch.bool or tensor.is_complex() or tensor.is_floating_point():
        raise TypeError(f"{name} must be {expected}, got {_received(tensor)}: cast the indices to an int dtype")
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name} must have {_shape_text(shape, dims)}, got {list(tensor.shape)}")
    return tensor.to(device=device, dtype=torch.int64)
