"""The torch side of a step: wrapping state tensors as Warp arrays and back, validating them, and
the per-stepper flag and recycled buffers of the no-grad path (shared by ``autograd.py`` and
``compile.py``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import warp as wp

from swarp.core.types import (
    BODY_FIELDS,
    FIELD_WIDTH,
    STATE_FIELDS,
    State,
    TorchState,
    TorchStateWithBodies,
    complete_state,
    field_dtype,
    state_fields,
)
from swarp.physics.neighbors import NeighborBuffers
from swarp.physics.step import Stepper
from swarp.runtime.sequence import TorchStreamScope


def step_fields(stepper: Stepper) -> tuple[str, ...]:
    """The state fields a step of ``stepper`` reads and writes, in order: the five planar ones,
    the four drone ones when the fleet has drones (otherwise they pass through untouched), the
    four body ones when the world has bodies."""
    return state_fields(stepper.model.has_drones, stepper.n_bodies > 0)


def n_fields(stepper: Stepper) -> int:
    """How many state tensors a step of ``stepper`` reads and writes (``len(step_fields)``)."""
    return len(step_fields(stepper))


# --- buffers --------------------------------------------------------------------------------


@dataclass
class NoGradBuffers:
    """The recycled buffers of no-grad steps of one batch size: two states used in turn, so a
    step's input (often the previous step's output) is never its own output."""

    states: tuple[State, State]
    neighbors: NeighborBuffers
    forces: wp.array


class StepperCache:
    """Per-stepper state of this module: the invalid-action flag, the no-grad buffers, and the
    scope that puts Warp's launches on torch's current stream when that is a user stream."""

    def __init__(self, stepper: Stepper):
        self.invalid_flag = wp.zeros(1, dtype=wp.int32, device=stepper.device)
        self.no_grad: dict[int, NoGradBuffers] = {}
        self.streams = TorchStreamScope(stepper.device)

    def no_grad_buffers(self, stepper: Stepper, n_envs: int) -> NoGradBuffers:
        """The ``NoGradBuffers`` of batch size ``n_envs`` (allocated on first use)."""
        buffers = self.no_grad.get(n_envs)
        if buffers is None:
            buffers = NoGradBuffers(
                states=tuple(stepper.allocate_state(n_envs, drones=stepper.model.has_drones) for _ in range(2)),
                neighbors=stepper.allocate_neighbors(n_envs),
                forces=stepper.allocate_forces(n_envs),
            )
            self.no_grad[n_envs] = buffers
        return buffers


_CACHES: weakref.WeakKeyDictionary[Stepper, StepperCache] = weakref.WeakKeyDictionary()


def stepper_cache(stepper: Stepper) -> StepperCache:
    """The ``StepperCache`` of ``stepper`` (made on first use, dropped with the stepper)."""
    cache = _CACHES.get(stepper)
    if cache is None:
        cache = _CACHES[stepper] = StepperCache(stepper)
    return cache


def invalid_actions(stepper: Stepper) -> torch.Tensor:
    """0-d bool device tensor: has a step of ``stepper`` without an explicit ``invalid_flag`` seen a
    non-finite action (which then acted as 0)? No host sync."""
    return wp.to_torch(stepper_cache(stepper).invalid_flag)[0] != 0


def wrap_array(tensor: torch.Tensor, name: str, scalar: type) -> wp.array:
    """A zero-copy Warp array over ``tensor``: the dtype of state field ``name`` (a vec2 array for
    ``pos``, say) or, for any other name (the actions), ``scalar``."""
    dtype = field_dtype(name, scalar) if name in TorchStateWithBodies._fields else scalar
    return wp.from_torch(tensor, dtype=dtype, requires_grad=False)


def wrap_state(stepper: Stepper, tensors: tuple[torch.Tensor, ...]) -> State:
    """A ``State`` over ``tensors``, the ``step_fields(stepper)`` in order."""
    names = step_fields(stepper)
    if len(tensors) != len(names):
        raise ValueError(f"expected the {len(names)} state tensors {list(names)}, got {len(tensors)}")
    kind = TorchStateWithBodies if stepper.n_bodies else TorchState
    state = kind(**dict(zip(names, tensors, strict=True)))
    return State.from_torch(state, stepper.scalar, drones=stepper.model.has_drones)


def complete_for(stepper: Stepper, state, name: str = "state") -> TorchState | TorchStateWithBodies:
    """``state`` as the stepper's state type (``TorchStateWithBodies`` for a world with bodies,
    else ``TorchState``, which a plain tuple of its 5 to 9 leading fields also gives), missing
    drone fields filled (``complete_state``)."""
    kind = TorchStateWithBodies if stepper.n_bodies else TorchState
    if isinstance(state, TorchStateWithBodies) != bool(stepper.n_bodies):
        raise TypeError(
            f"{name} must be a {kind.__name__} (the stepper has {stepper.n_bodies} bodies), got {type(state).__name__}"
        )
    if not isinstance(state, TorchStateWithBodies):
        if not isinstance(state, tuple) or not 5 <= len(state) <= len(STATE_FIELDS):
            raise TypeError(f"{name} must be a TorchState with fields {list(STATE_FIELDS)}, got {type(state).__name__}")
        state = TorchState(*state)
    return complete_state(state)


def check_state(stepper: Stepper, state: TorchState, name: str = "state") -> int:
    """Validate ``state`` (completed by ``complete_for``) against ``stepper``; return its batch size E."""
    pos = state.pos
    if not isinstance(pos, torch.Tensor) or pos.dim() != 3:
        raise ValueError(f"{name}.pos must be a [n_envs, n_agents, 2] tensor")
    n_envs = pos.shape[0]
    for field, tensor in zip(state._fields, state, strict=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}.{field} must be a torch.Tensor, got {type(tensor).__name__}")
        count = stepper.n_bodies if field in BODY_FIELDS else stepper.n_agents
        width = FIELD_WIDTH.get(field)
        expected = (n_envs, count, *((width,) if width else ()))
        if tuple(tensor.shape) != expected:
            raise ValueError(f"{name}.{field} must have shape {list(expected)}, got {list(tensor.shape)}")
        if tensor.dtype != stepper.torch_dtype:
            raise TypeError(f"{name}.{field} must have dtype {stepper.torch_dtype}, got {tensor.dtype}")
        if tensor.device != stepper.torch_device:
            raise ValueError(f"{name}.{field} must be on device {stepper.torch_device}, got {tensor.device}")
    return n_envs


def views(state: State) -> tuple[torch.Tensor, ...]:
    """New zero-copy torch views of ``state``'s arrays (its ``fields``, in order): new tensor
    objects every call, so autograd never re-targets a tensor handed out before (ring slots are
    reused)."""
    return tuple(wp.to_torch(array, requires_grad=False) for array in state.arrays())
