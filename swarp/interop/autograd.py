"""Differentiable physics: torch autograd over Warp's adjoint tape.

Three pieces (see docs/differentiability.md):

* ``TorchState``: the NamedTuple of world-state tensors (``swarp.core.types``), re-exported here.
* ``warp_step(stepper, state, actions)``: one differentiable step, a ``torch.autograd.Function``.
  The forward wraps the input tensors as Warp arrays (zero-copy), records every substep launch on a
  ``wp.Tape`` (the neighbor build is not recorded: membership is discrete) and returns zero-copy
  views of freshly allocated outputs. The backward seeds the output adjoints with the incoming
  gradients, replays the tape in reverse and returns the gradients of the state and the actions.
* ``rollout(stepper, state0, actions_seq)``: T chained steps for backpropagation through time.

With grad mode off, or when no input requires grad, no tape is recorded and the step writes into
two recycled buffers per batch size (no steady-state allocation): same kernels, same bits.

The invariant everything here rests on: an array recorded on a live tape is never overwritten.
Warp's adjoint of an in-place write is silently wrong, so a taped step writes only fresh arrays
or a ``StepScratch`` that a ``GradRing`` hands to exactly one live step at a time.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import warp as wp

from swarp.core.types import (
    FIELD_WIDTH,
    PLANAR_FIELDS,
    STATE_FIELDS,
    State,
    TorchState,
    complete_state,
    field_dtype,
)
from swarp.env.runtime import TorchStreamScope
from swarp.physics.neighbors import NeighborBuffers
from swarp.physics.step import Stepper, StepScratch


def n_fields(stepper: Stepper) -> int:
    """How many state tensors a step of ``stepper`` reads and writes: all nine ``TorchState``
    fields when the fleet has drones, else the five planar ones (drone fields pass through)."""
    return len(STATE_FIELDS) if stepper.model.has_drones else len(PLANAR_FIELDS)


# --- buffers --------------------------------------------------------------------------------


@dataclass
class _NoGradBuffers:
    """The recycled buffers of no-grad steps of one batch size: two states used in turn, so a
    step's input (often the previous step's output) is never its own output."""

    states: tuple[State, State]
    neighbors: NeighborBuffers
    forces: wp.array


class _StepperCache:
    """Per-stepper state of this module: the invalid-action flag, the no-grad buffers, and the
    scope that puts Warp's launches on torch's current stream when that is a user stream."""

    def __init__(self, stepper: Stepper):
        self.invalid_flag = wp.zeros(1, dtype=wp.int32, device=stepper.device)
        self.no_grad: dict[int, _NoGradBuffers] = {}
        self.streams = TorchStreamScope(stepper.device)

    def no_grad_buffers(self, stepper: Stepper, n_envs: int) -> _NoGradBuffers:
        buffers = self.no_grad.get(n_envs)
        if buffers is None:
            buffers = _NoGradBuffers(
                states=tuple(stepper.allocate_state(n_envs, drones=stepper.model.has_drones) for _ in range(2)),
                neighbors=stepper.allocate_neighbors(n_envs),
                forces=stepper.allocate_forces(n_envs),
            )
            self.no_grad[n_envs] = buffers
        return buffers


_CACHES: weakref.WeakKeyDictionary[Stepper, _StepperCache] = weakref.WeakKeyDictionary()


def _cache(stepper: Stepper) -> _StepperCache:
    cache = _CACHES.get(stepper)
    if cache is None:
        cache = _CACHES[stepper] = _StepperCache(stepper)
    return cache


def invalid_actions(stepper: Stepper) -> torch.Tensor:
    """0-d bool device tensor: has a step of ``stepper`` without an explicit ``invalid_flag`` seen a
    non-finite action (which then acted as 0)? No host sync."""
    return wp.to_torch(_cache(stepper).invalid_flag)[0] != 0


class _RingSlot:
    """One step's scratch in a ``GradRing`` and who is using it."""

    def __init__(self, scratch: StepScratch):
        self.scratch = scratch
        self.generation = 0  # bumped on every hand-out, so a stale backward can tell
        self.owner: weakref.ref | None = None  # the autograd context of the step now using it
        self.backpropagated = True


class GradRing:
    """Pre-allocated taped scratch for ``capacity`` steps, reused across optimizer iterations.

    A T-step rollout needs T distinct sets of taped buffers (they must not alias while the tapes
    are live); the ring allocates them once. Slots are handed out in order and rewound by every
    ``rollout``; a slot is only reused once the step that last used it has been backpropagated
    (or its graph is gone), otherwise the hand-out raises instead of corrupting live gradients.

    Tensors returned by ``warp_step(..., ring=ring)`` are views into the ring and are overwritten
    when their slot is reused; ``rollout`` returns copies (its trajectory), so nothing it returns
    aliases the ring.

    Args:
        stepper: The stepper whose steps use the ring.
        n_envs: Batch size E of those steps.
        act_dim: Action width (must be ``stepper.act_dim``; stated for readability at call sites).
        capacity: Number of slots: the longest rollout it serves [steps].
    """

    def __init__(self, stepper: Stepper, n_envs: int, act_dim: int, capacity: int):
        if not isinstance(stepper, Stepper):
            raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
        for name, value in (("n_envs", n_envs), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if act_dim != stepper.act_dim:
            raise ValueError(f"act_dim must be the stepper's act_dim ({stepper.act_dim}), got {act_dim!r}")
        self.stepper = stepper
        self.n_envs = n_envs
        self.act_dim = act_dim
        self.capacity = capacity
        self._slots = [_RingSlot(stepper.allocate_scratch(n_envs, requires_grad=True)) for _ in range(capacity)]
        # Which slot's output each output array is, by address: a step's input may be one.
        self._output_owner = {array.ptr: slot for slot in self._slots for array in slot.scratch.states[-1].arrays()}
        self._cursor = 0

    def rewind(self) -> None:
        """Start handing out slots from the first again (``rollout`` calls this)."""
        self._cursor = 0

    def _acquire(self, n_envs: int) -> _RingSlot:
        if n_envs != self.n_envs:
            raise ValueError(f"this GradRing serves n_envs={self.n_envs}, got a batch of {n_envs}")
        slot = self._slots[self._cursor]
        owner = slot.owner() if slot.owner is not None else None
        if owner is not None and not slot.backpropagated:
            raise RuntimeError(
                f"GradRing slot {self._cursor} is still used by a step whose graph is alive and not yet "
                f"backpropagated; call backward() (or drop that graph) first, or use a ring with more than "
                f"{self.capacity} slots"
            )
        self._cursor = (self._cursor + 1) % self.capacity
        slot.generation += 1
        slot.backpropagated = False
        return slot

    def _guards(self, slot: _RingSlot, inputs: tuple[torch.Tensor, ...]) -> list[tuple[_RingSlot, int]]:
        """``(slot, generation)`` pairs a step's backward must find unchanged: its own slot and the
        slots whose outputs are its inputs (the tape reads both)."""
        owners = {self._output_owner.get(t.data_ptr()) for t in inputs} - {None}
        if slot in owners:
            raise RuntimeError(
                "this step would write the GradRing slot its own input lives in; use a ring with more slots "
                "than the chain of steps that are backpropagated together"
            )
        return [(s, s.generation) for s in (slot, *owners)]


# --- wrapping -------------------------------------------------------------------------------


def _wrap(tensor: torch.Tensor, name: str, scalar: type) -> wp.array:
    dtype = field_dtype(name, scalar) if name in STATE_FIELDS else scalar
    return wp.from_torch(tensor, dtype=dtype, requires_grad=False)


def _wrap_state(tensors: tuple[torch.Tensor, ...], scalar: type) -> State:
    """A ``State`` over the planar fields, or all nine when ``tensors`` holds the drone fields."""
    return State.from_torch(TorchState(*tensors), scalar, drones=len(tensors) == len(STATE_FIELDS))


def _check_state(stepper: Stepper, state: TorchState, name: str = "state") -> int:
    """Validate ``state`` (drone fields completed) against ``stepper``; return its batch size E."""
    if not isinstance(state, tuple) or len(state) != len(STATE_FIELDS):
        raise TypeError(f"{name} must be a TorchState with fields {list(STATE_FIELDS)}, got {type(state).__name__}")
    pos = state[0]
    if not isinstance(pos, torch.Tensor) or pos.dim() != 3:
        raise ValueError(f"{name}.pos must be a [n_envs, n_agents, 2] tensor")
    n_envs = pos.shape[0]
    for field, tensor in zip(STATE_FIELDS, state, strict=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}.{field} must be a torch.Tensor, got {type(tensor).__name__}")
        width = FIELD_WIDTH.get(field)
        expected = (n_envs, stepper.n_agents, *((width,) if width else ()))
        if tuple(tensor.shape) != expected:
            raise ValueError(f"{name}.{field} must have shape {list(expected)}, got {list(tensor.shape)}")
        if tensor.dtype != stepper.torch_dtype:
            raise TypeError(f"{name}.{field} must have dtype {stepper.torch_dtype}, got {tensor.dtype}")
        if tensor.device != stepper.torch_device:
            raise ValueError(f"{name}.{field} must be on device {stepper.torch_device}, got {tensor.device}")
    return n_envs


def _views(state: State) -> tuple[torch.Tensor, ...]:
    """New zero-copy torch views of ``state``'s arrays (its ``fields``, in order): new tensor
    objects every call, so autograd never re-targets a tensor handed out before (ring slots are
    reused)."""
    return tuple(wp.to_torch(array, requires_grad=False) for array in state.arrays())


# --- the taped step and its backward (shared with swarp.interop.compile) ---------------------


@dataclass
class TapedStep:
    """What the backward of one taped step needs: the tape, the arrays it read and wrote."""

    tape: wp.Tape
    inputs: tuple[wp.array, ...]  # the state arrays then the actions, wrapping torch tensors
    scratch: StepScratch
    output: State


def record_step(
    stepper: Stepper,
    inputs: tuple[torch.Tensor, ...],
    invalid_flag: wp.array,
    scratch: StepScratch | None = None,
) -> TapedStep:
    """Run one step on a fresh tape from contiguous ``inputs`` (state fields, then actions).

    Every array the step writes is ``scratch`` (fresh when ``None``); the inputs are only read.
    """
    scalar = stepper.scalar
    n = len(inputs) - 1
    state_in = _wrap_state(inputs[:n], scalar)
    actions = _wrap(inputs[n], "actions", scalar)
    if scratch is None:
        scratch = stepper.allocate_scratch(state_in.n_envs, requires_grad=True)
    tape = wp.Tape()
    output = stepper.simulate_functional(state_in, actions, invalid_flag, scratch=scratch, tape=tape)
    return TapedStep(tape, (*state_in.arrays(), actions), scratch, output)


def replay_backward(
    step: TapedStep, inputs: tuple[torch.Tensor, ...], grad_outputs: tuple[torch.Tensor | None, ...]
) -> tuple[torch.Tensor, ...]:
    """Seed the output adjoints with ``grad_outputs``, replay the tape in reverse, and return the
    gradients of the inputs as fresh tensors (state fields, then actions)."""
    grads = tuple(torch.zeros_like(t) for t in inputs)
    names = (*STATE_FIELDS[: len(step.inputs) - 1], "actions")
    for array, grad, name in zip(step.inputs, grads, names, strict=True):
        array.grad = _wrap(grad, name, step.output.scalar)
    # Zeroed every time: a ring slot holds the last iteration's adjoints, and a retained graph
    # may be backpropagated twice.
    step.scratch.zero_grads()
    for array, grad_out in zip(step.output.arrays(), grad_outputs, strict=True):
        if grad_out is not None:
            wp.to_torch(array.grad, requires_grad=False).copy_(grad_out)
    step.tape.backward()
    for array in step.inputs:
        array.grad = None
    return grads


# --- warp_step --------------------------------------------------------------------------------


class _WarpStep(torch.autograd.Function):
    """One step as an autograd node: inputs (stepper, ring, flag, actions, *state) -> the state tensors."""

    @staticmethod
    def forward(ctx, stepper, ring, invalid_flag, actions, *state):
        inputs = tuple(t.detach().contiguous() for t in (*state, actions))
        slot = ring._acquire(inputs[0].shape[0]) if ring is not None else None
        ctx.guards = ring._guards(slot, inputs) if ring is not None else []
        with _cache(stepper).streams.scope():
            step = record_step(stepper, inputs, invalid_flag, slot.scratch if slot is not None else None)
        ctx.stepper = stepper
        ctx.save_for_backward(*inputs)
        ctx.step = step
        ctx.slot = slot
        if slot is not None:
            slot.owner = weakref.ref(ctx)
        return _views(step.output)

    @staticmethod
    def backward(ctx, *grad_outputs):
        inputs = ctx.saved_tensors
        if any(slot.generation != generation for slot, generation in ctx.guards):
            raise RuntimeError(
                "a GradRing slot this step's tape reads was reused by a later step, so the tape is stale; "
                "with retain_graph=True, backpropagate before the next rollout on the same ring"
            )
        with _cache(ctx.stepper).streams.scope():
            grads = replay_backward(ctx.step, inputs, grad_outputs)
        if ctx.slot is not None:
            ctx.slot.backpropagated = True
        needs = ctx.needs_input_grad
        n = len(grads) - 1
        state_grads = tuple(g if needs[4 + i] else None for i, g in enumerate(grads[:n]))
        return None, None, None, grads[n] if needs[3] else None, *state_grads


def _no_grad_step(stepper: Stepper, state: TorchState, actions: torch.Tensor, invalid_flag: wp.array) -> TorchState:
    """The tape-free step into recycled buffers (no allocation once warm for this batch size)."""
    n_envs = state.pos.shape[0]
    cache = _cache(stepper)
    buffers = cache.no_grad_buffers(stepper, n_envs)
    first, second = buffers.states
    # Write into whichever buffer the input is not (the previous output is the usual input).
    out = second if state.pos.data_ptr() == first.torch.pos.data_ptr() else first
    if any(getattr(state, name).data_ptr() == getattr(out.torch, name).data_ptr() for name in out.fields):
        out = second if out is first else first
    scalar = stepper.scalar
    state_in = _wrap_state(tuple(t.contiguous() for t in state[: n_fields(stepper)]), scalar)
    actions_in = _wrap(actions.contiguous(), "actions", scalar)
    with cache.streams.scope():
        stepper.simulate_into(state_in, actions_in, buffers.neighbors, buffers.forces, out, invalid_flag)
    return out.torch


def _complete(state) -> TorchState:
    """A ``TorchState`` from any tuple of its leading fields, missing drone fields filled."""
    if not isinstance(state, tuple) or not len(PLANAR_FIELDS) <= len(state) <= len(STATE_FIELDS):
        raise TypeError(f"state must be a TorchState with fields {list(STATE_FIELDS)}, got {type(state).__name__}")
    return complete_state(TorchState(*state))


def _pass_through(stepper: Stepper, out, state: TorchState) -> TorchState:
    """The step's result as a ``TorchState``: without drones in the fleet, the drone fields are
    the input's own tensors, unchanged: nothing integrates them."""
    n = n_fields(stepper)
    return TorchState(*tuple(out)[:n], *state[n:])


def _needs_grad(state: TorchState, actions: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (actions.requires_grad or any(t.requires_grad for t in state))


def warp_step(
    stepper: Stepper,
    state: TorchState,
    actions: torch.Tensor,
    *,
    ring: GradRing | None = None,
    invalid_flag: wp.array | None = None,
) -> TorchState:
    """One differentiable simulation step.

    Args:
        stepper: The step pipeline (dynamics, contacts, substeps, precision, device).
        state: ``TorchState`` of [E, A(, 2|3|4)] tensors of the stepper's dtype and device. Any field
            may require grad; missing drone fields (``None``) start at rest (``complete_state``).
        actions: [E, A, act_dim] physical actions (clamped in-kernel: saturated components get zero
            gradient; non-finite ones act as 0, get zero gradient and raise the invalid flag).
        ring: Optional ``GradRing`` whose next slot holds the taped scratch (no allocation of
            intermediates); the outputs are then views into the ring. Unused without grads.
        invalid_flag: [1] int32 Warp array raised on non-finite actions (default: one per stepper,
            read with ``invalid_actions(stepper)``).

    Returns:
        The next ``TorchState``. With grads (grad mode on and some input requiring grad): fresh
        tensors carrying the step's autograd node. Without: views of one of two buffers recycled
        per batch size, overwritten by the next-but-one no-grad step of that size (clone to keep).
    """
    if not isinstance(stepper, Stepper):
        raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
    state = _complete(state)
    n_envs = _check_state(stepper, state)
    stepper.check_actions(actions, n_envs)
    if ring is not None and ring.stepper is not stepper:
        raise ValueError("ring was built for a different stepper")
    if invalid_flag is None:
        invalid_flag = _cache(stepper).invalid_flag
    if not _needs_grad(state, actions):
        return _pass_through(stepper, _no_grad_step(stepper, state, actions, invalid_flag), state)
    n = n_fields(stepper)
    return _pass_through(stepper, _WarpStep.apply(stepper, ring, invalid_flag, actions, *state[:n]), state)


def rollout(
    stepper: Stepper,
    state0: TorchState,
    actions_seq: torch.Tensor,
    ring: GradRing | None = None,
    *,
    invalid_flag: wp.array | None = None,
) -> tuple[TorchState, TorchState]:
    """Chain T steps for backpropagation through time.

    Args:
        stepper: The step pipeline.
        state0: Initial ``TorchState`` [E, A(, 2)].
        actions_seq: [T, E, A, act_dim] actions, step t uses ``actions_seq[t]``.
        ring: Optional ``GradRing`` with ``capacity >= T``: the taped scratch of the T steps comes
            from it (rewound first) instead of fresh allocations.
        invalid_flag: As for ``warp_step``.

    Returns:
        ``(final_state, trajectory)``: ``trajectory`` is a ``TorchState`` of [T, E, A(, 2)] tensors,
        the state after each step; ``final_state`` is its last entry. Both are fresh tensors (with
        grad history when grads flow), never views of recycled or ring buffers.
    """
    if not isinstance(actions_seq, torch.Tensor) or actions_seq.dim() != 4:
        raise ValueError("actions_seq must be a [T, n_envs, n_agents, act_dim] tensor")
    n_steps = actions_seq.shape[0]
    if n_steps < 1:
        raise ValueError("actions_seq must hold at least one step (T >= 1)")
    if ring is not None:
        if n_steps > ring.capacity:
            raise ValueError(f"a rollout of T={n_steps} steps needs a GradRing of capacity >= T, got {ring.capacity}")
        ring.rewind()
    state = _complete(state0)
    steps = []
    if _needs_grad(state, actions_seq):
        for t in range(n_steps):
            state = warp_step(stepper, state, actions_seq[t], ring=ring, invalid_flag=invalid_flag)
            steps.append(state)
        trajectory = TorchState(*(torch.stack(fields) for fields in zip(*steps, strict=True)))
    else:
        # One allocation per rollout for the trajectory; the steps themselves recycle buffers.
        trajectory = None
        for t in range(n_steps):
            state = warp_step(stepper, state, actions_seq[t], ring=ring, invalid_flag=invalid_flag)
            if trajectory is None:
                trajectory = TorchState(*(t_.new_empty((n_steps, *t_.shape)) for t_ in state))
            for dst, src in zip(trajectory, state, strict=True):
                dst[t].copy_(src)
    final = TorchState(*(field[-1] for field in trajectory))
    return final, trajectory


__all__ = [
    "GradRing",
    "TapedStep",
    "TorchState",
    "invalid_actions",
    "record_step",
    "replay_backward",
    "rollout",
    "warp_step",
]
