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

from swarp.core.types import State, TorchState
from swarp.physics.step import Stepper, StepScratch
from swarp.physics.step_tensors import (
    check_state,
    complete_for,
    invalid_actions,
    step_fields,
    stepper_cache,
    views,
    wrap_array,
    wrap_state,
)
from swarp.runtime.sequence import collector_paused


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


# --- the taped step and its backward (shared with swarp.physics.compile) ---------------------


@dataclass
class TapedStep:
    """What the backward of one taped step needs: the tape, the arrays it read and wrote."""

    tape: wp.Tape
    inputs: tuple[wp.array, ...]  # the step_fields arrays then the actions, wrapping torch tensors
    scratch: StepScratch
    output: State


def record_step(
    stepper: Stepper,
    inputs: tuple[torch.Tensor, ...],
    invalid_flag: wp.array,
    scratch: StepScratch | None = None,
    non_finite_flag: wp.array | None = None,
) -> TapedStep:
    """Run one step on a fresh tape from contiguous ``inputs`` (the ``step_fields``, then actions last).

    Every array the step writes is ``scratch`` (fresh when ``None``); the inputs are only read.
    """
    state_in = wrap_state(stepper, inputs[:-1])
    actions = wrap_array(inputs[-1], "actions", stepper.scalar)
    if scratch is None:
        scratch = stepper.allocate_scratch(state_in.n_envs, requires_grad=True)
    tape = wp.Tape()
    output = stepper.simulate_functional(
        state_in, actions, invalid_flag, scratch=scratch, tape=tape, non_finite_flag=non_finite_flag
    )
    return TapedStep(tape, (*state_in.arrays(), actions), scratch, output)


def replay_backward(
    step: TapedStep,
    inputs: tuple[torch.Tensor, ...],
    grad_outputs: tuple[torch.Tensor | None, ...],
    needs: tuple[bool, ...] | None = None,
) -> tuple[torch.Tensor | None, ...]:
    """Seed the output adjoints with ``grad_outputs``, replay the tape in reverse, and return the
    gradients of the inputs as fresh tensors (state fields, then actions); with ``needs`` (one
    bool per input), ``None`` for the inputs it marks False, whose adjoints are never formed (a
    kernel's adjoint skips an array without one)."""
    needs = needs or (True,) * len(inputs)
    grads = tuple(torch.zeros_like(t) if need else None for t, need in zip(inputs, needs, strict=True))
    for array, grad, name in zip(step.inputs, grads, (*step.output.fields, "actions"), strict=True):
        if grad is not None:
            array.grad = wrap_array(grad, name, step.output.scalar)
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
    """One step as an autograd node: inputs (stepper, ring, flags, actions, *state) -> the state
    tensors; ``flags`` is ``(invalid_flag, non_finite_flag)``."""

    @staticmethod
    def forward(ctx, stepper, ring, flags, actions, *state):
        invalid_flag, non_finite_flag = flags
        inputs = tuple(t.detach().contiguous() for t in (*state, actions))
        slot = ring._acquire(inputs[0].shape[0]) if ring is not None else None
        ctx.guards = ring._guards(slot, inputs) if ring is not None else []
        # The tape's adjoints read the alive mask when they run: they get this step's, a copy kept
        # with the node (the world's mask changes as agents leave and episodes restart).
        alive = stepper.alive
        ctx.alive = None if alive is None else wp.clone(alive)
        stepper.alive = ctx.alive
        try:
            with stepper_cache(stepper).streams.scope():
                step = record_step(
                    stepper, inputs, invalid_flag, slot.scratch if slot is not None else None, non_finite_flag
                )
        finally:
            stepper.alive = alive
        ctx.stepper = stepper
        ctx.save_for_backward(*inputs)
        ctx.step = step
        ctx.slot = slot
        if slot is not None:
            slot.owner = weakref.ref(ctx)
        return views(step.output)

    @staticmethod
    def backward(ctx, *grad_outputs):
        inputs = ctx.saved_tensors
        if any(slot.generation != generation for slot, generation in ctx.guards):
            raise RuntimeError(
                "a GradRing slot this step's tape reads was reused by a later step, so the tape is stale; "
                "with retain_graph=True, backpropagate before the next rollout on the same ring"
            )
        needs = ctx.needs_input_grad
        with stepper_cache(ctx.stepper).streams.scope():
            grads = replay_backward(ctx.step, inputs, grad_outputs, (*needs[4:], needs[3]))
        if ctx.slot is not None:
            ctx.slot.backpropagated = True
        return None, None, None, grads[-1], *grads[:-1]


def _no_grad_step(
    stepper: Stepper,
    state: TorchState,
    actions: torch.Tensor,
    invalid_flag: wp.array,
    non_finite_flag: wp.array | None = None,
) -> tuple[torch.Tensor, ...]:
    """The tape-free step into recycled buffers (no allocation once warm for this batch size); the
    result is the buffer's views of the ``step_fields``."""
    n_envs = state.pos.shape[0]
    cache = stepper_cache(stepper)
    buffers = cache.no_grad_buffers(stepper, n_envs)
    first, second = buffers.states
    # Write into whichever buffer the input is not (the previous output is the usual input).
    out = second if state.pos.data_ptr() == first.torch.pos.data_ptr() else first
    if any(getattr(state, name).data_ptr() == getattr(out.torch, name).data_ptr() for name in out.fields):
        out = second if out is first else first
    state_in = wrap_state(stepper, tuple(getattr(state, name).contiguous() for name in step_fields(stepper)))
    actions_in = wrap_array(actions.contiguous(), "actions", stepper.scalar)
    with cache.streams.scope():
        stepper.simulate_into(
            state_in, actions_in, buffers.neighbors, buffers.forces, out, invalid_flag, non_finite_flag=non_finite_flag
        )
    return tuple(getattr(out.torch, name) for name in out.fields)


def _pass_through(stepper: Stepper, out: tuple[torch.Tensor, ...], state: TorchState) -> TorchState:
    """The step's result in ``state``'s type: ``out`` holds the ``step_fields``; the rest (the drone
    fields of a fleet without drones) are the input's own tensors, unchanged: nothing integrates them."""
    return state._replace(**dict(zip(step_fields(stepper), out, strict=True)))


def _needs_grad(state: TorchState, actions: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (actions.requires_grad or any(t.requires_grad for t in state))


def warp_step(
    stepper: Stepper,
    state: TorchState,
    actions: torch.Tensor,
    *,
    ring: GradRing | None = None,
    invalid_flag: wp.array | None = None,
    non_finite_flag: wp.array | None = None,
) -> TorchState:
    """One differentiable simulation step.

    Args:
        stepper: The step pipeline (dynamics, contacts, substeps, precision, device).
        state: ``TorchState`` of [E, A(, 2|3|4)] tensors of the stepper's dtype and device; a
            ``TorchStateWithBodies`` (those, then [E, B(, 2)] bodies) when the stepper has bodies.
            Any field may require grad; missing drone fields (``None``) start at rest
            (``complete_state``); a fleet without drones passes them through unchanged.
        actions: [E, A, act_dim] physical actions (clamped in-kernel: saturated components get zero
            gradient; non-finite ones act as 0, get zero gradient and raise the invalid flag).
        ring: Optional ``GradRing`` whose next slot holds the taped scratch (no allocation of
            intermediates); the outputs are then views into the ring. Unused without grads.
        invalid_flag: [1] int32 Warp array raised on non-finite actions (default: one per stepper,
            read with ``invalid_actions(stepper)``).
        non_finite_flag: [E] int32 Warp array whose entry ``e`` is raised when env ``e``'s state goes
            non-finite (``swarp.runtime.health``; default: the stepper's [1] ``non_finite_any``).

    Returns:
        The next state, of ``state``'s type. With grads (grad mode on and some input requiring grad): fresh
        tensors carrying the step's autograd node. Without: views of one of two buffers recycled
        per batch size, overwritten by the next-but-one no-grad step of that size (clone to keep).
    """
    if not isinstance(stepper, Stepper):
        raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
    state = complete_for(stepper, state)
    n_envs = check_state(stepper, state)
    stepper.check_actions(actions, n_envs)
    if ring is not None and ring.stepper is not stepper:
        raise ValueError("ring was built for a different stepper")
    if invalid_flag is None:
        invalid_flag = stepper_cache(stepper).invalid_flag
    if not _needs_grad(state, actions):
        return _pass_through(stepper, _no_grad_step(stepper, state, actions, invalid_flag, non_finite_flag), state)
    taped = (getattr(state, name) for name in step_fields(stepper))
    flags = (invalid_flag, non_finite_flag)
    return _pass_through(stepper, _WarpStep.apply(stepper, ring, flags, actions, *taped), state)


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
        state0: Initial state, as ``warp_step``'s ``state`` (``TorchStateWithBodies`` with bodies).
        actions_seq: [T, E, A, act_dim] actions, step t uses ``actions_seq[t]``.
        ring: Optional ``GradRing`` with ``capacity >= T``: the taped scratch of the T steps comes
            from it (rewound first) instead of fresh allocations.
        invalid_flag: As for ``warp_step``.

    Returns:
        ``(final_state, trajectory)``: ``trajectory`` is a state of ``state0``'s type of [T, E, ...]
        tensors, the state after each step; ``final_state`` is its last entry. Both are fresh tensors (with
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
    state = complete_for(stepper, state0, "state0")
    kind = type(state)
    steps = []
    if _needs_grad(state, actions_seq):
        for t in range(n_steps):
            state = warp_step(stepper, state, actions_seq[t], ring=ring, invalid_flag=invalid_flag)
            steps.append(state)
        trajectory = kind(*(torch.stack(fields) for fields in zip(*steps, strict=True)))
    else:
        # One allocation per rollout for the trajectory; the steps themselves recycle buffers.
        trajectory = None
        for t in range(n_steps):
            state = warp_step(stepper, state, actions_seq[t], ring=ring, invalid_flag=invalid_flag)
            if trajectory is None:
                trajectory = kind(*(t_.new_empty((n_steps, *t_.shape)) for t_ in state))
            for dst, src in zip(trajectory, state, strict=True):
                dst[t].copy_(src)
    final = kind(*(field[-1] for field in trajectory))
    return final, trajectory


# --- a whole rollout as two graphs ------------------------------------------------------------


class RolloutGraph:
    """A fixed-shape T-step BPTT rollout whose forward and backward are each one graph launch.

    ``rollout`` drives Warp step by step from Python: per step it wraps tensors, launches the
    neighbor build and the substeps, and in the backward replays that step's tape, so at small and
    medium batches its time is host overhead. A ``RolloutGraph`` owns every buffer of the rollout
    (input copies, the taped scratch of all T steps, the trajectory and all adjoints), records the
    T steps on one tape once, and captures two graphs: the forward (T x (neighbor build +
    substeps)) and the backward (zero the adjoints, replay the tape in reverse). A call copies the
    inputs in, launches the forward graph and returns the trajectory; ``backward()`` copies the
    incoming gradients onto the trajectory's adjoints and launches the backward graph. Same
    kernels as ``rollout``: the forward is bit-identical to it; gradients agree up to the order of
    float additions (a step output's incoming gradient and the next step's adjoint are summed by
    Warp here, by torch there; on CUDA, Warp's atomic adjoint accumulation adds its own order).

    Graphs are CUDA graphs on the GPU and Warp's recorded operation stream on the CPU. Outputs are
    fresh tensors (copies), so nothing returned aliases the graph's buffers; a backward through the
    results of an earlier call, after a later call overwrote the buffers, raises.

    Args:
        stepper: The step pipeline.
        n_envs: Batch size E of every call.
        n_steps: Rollout length T of every call [steps].

    Call: ``graph(state0, actions_seq) -> (final_state, trajectory)`` exactly as
    ``rollout(stepper, state0, actions_seq)``: ``state0`` as ``warp_step``'s ``state`` (drones and
    bodies included), ``actions_seq`` [T, E, A, act_dim], both of the stepper's dtype and device
    (either may require grad); ``trajectory`` a state of ``state0``'s type of [T, E, ...] tensors,
    ``final_state`` its last entry. The graph integrates the ``step_fields``; a fleet without drones
    passes ``state0``'s drone fields through (repeated T times in the trajectory, as ``rollout``).
    """

    def __init__(self, stepper: Stepper, n_envs: int, n_steps: int):
        if not isinstance(stepper, Stepper):
            raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
        for name, value in (("n_envs", n_envs), ("n_steps", n_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.stepper, self.n_envs, self.n_steps = stepper, n_envs, n_steps
        self.invalid_flag = stepper_cache(stepper).invalid_flag
        self._streams = stepper_cache(stepper).streams
        self._start = stepper.allocate_state(n_envs, requires_grad=True, drones=stepper.model.has_drones)
        self._actions = wp.zeros(
            (n_steps, n_envs, stepper.n_agents, stepper.act_dim),
            dtype=stepper.scalar,
            device=stepper.device,
            requires_grad=True,
        )
        self._scratch = [stepper.allocate_scratch(n_envs, requires_grad=True) for _ in range(n_steps)]
        self._tape = wp.Tape()
        self._forward_graph = self._backward_graph = None
        self._generation = 0
        # Torch views of every step output's adjoint, [field][t], made once: wrapping them afresh
        # at every backward cost a Python object per (field, step), most of a small batch's time.
        self._output_adjoints = [
            [wp.to_torch(out.arrays()[index].grad, requires_grad=False) for out in self._outputs]
            for index in range(len(self._start.fields))
        ]

    @property
    def _outputs(self) -> list[State]:
        return [scratch.states[-1] for scratch in self._scratch]

    def _forward(self, tape: wp.Tape | None) -> None:
        state = self._start
        for t, scratch in enumerate(self._scratch):
            state = self.stepper.simulate_functional(
                state, self._actions[t], self.invalid_flag, scratch=scratch, tape=tape
            )

    def _backward(self) -> None:
        # Every adjoint but the trajectory's (seeded by the caller just before) starts from zero;
        # the adjoint kernels accumulate into inputs and clear what they consume.
        self._actions.grad.zero_()
        for array in self._start.arrays():
            array.grad.zero_()
        for scratch in self._scratch:
            scratch.zero_grads(output=False)
        self._tape.backward()

    def _capture(self) -> None:
        device = self.stepper.device
        self._forward(None)  # loads (compiles) every module the rollout uses, outside the capture
        with collector_paused(), wp.ScopedCapture(device=device, force_module_load=False) as forward:
            self._forward(self._tape)
        with collector_paused(), wp.ScopedCapture(device=device, force_module_load=False) as backward:
            self._backward()
        self._forward_graph, self._backward_graph = forward.graph, backward.graph

    def __call__(self, state0: TorchState, actions_seq: torch.Tensor) -> tuple[TorchState, TorchState]:
        state0 = complete_for(self.stepper, state0, "state0")
        n_envs = check_state(self.stepper, state0, "state0")
        if n_envs != self.n_envs:
            raise ValueError(f"this RolloutGraph serves n_envs={self.n_envs}, got a batch of {n_envs}")
        expected = (self.n_steps, self.n_envs, self.stepper.n_agents, self.stepper.act_dim)
        if not isinstance(actions_seq, torch.Tensor) or tuple(actions_seq.shape) != expected:
            shape = list(actions_seq.shape) if isinstance(actions_seq, torch.Tensor) else type(actions_seq).__name__
            raise ValueError(
                f"actions_seq must be a [T, n_envs, n_agents, act_dim] = {list(expected)} tensor, got {shape}"
            )
        self.stepper.check_actions(actions_seq[0], n_envs, "actions_seq[t]")
        names = self._start.fields
        fields = _RolloutGraphFunction.apply(self, actions_seq, *(getattr(state0, name) for name in names))
        trajectory = {name: torch.stack([getattr(state0, name)] * self.n_steps) for name in state0._fields}
        trajectory.update(zip(names, fields, strict=True))
        final = state0._replace(**{name: field[-1] for name, field in trajectory.items()})
        return final, state0._replace(**trajectory)

    def _launch(self, graph) -> None:
        wp.capture_launch(graph, stream=self._streams.current())

    def run_forward(self, state0: tuple[torch.Tensor, ...], actions_seq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Copy the inputs in, launch the forward graph; return the trajectory fields as fresh tensors."""
        for name, src in zip(self._start.fields, state0, strict=True):
            getattr(self._start.torch, name).copy_(src.detach())
        wp.to_torch(self._actions, requires_grad=False).copy_(actions_seq.detach())
        if self._forward_graph is None:
            with self._streams.scope():
                self._capture()
        self._launch(self._forward_graph)
        self._generation += 1
        return tuple(torch.stack([getattr(out.torch, name) for out in self._outputs]) for name in self._start.fields)

    def run_backward(self, generation: int, grad_fields: tuple[torch.Tensor | None, ...]) -> tuple[torch.Tensor, ...]:
        """Seed the trajectory adjoints, launch the backward graph; return (d actions, *d state0)."""
        if generation != self._generation:
            raise RuntimeError(
                "this RolloutGraph ran again since the forward being backpropagated; its buffers hold the "
                "later rollout. Backpropagate each call before the next (or use one RolloutGraph per live graph)"
            )
        # One fused multi-tensor copy (or zero) per field seeds its T step adjoints.
        for adjoints, grad in zip(self._output_adjoints, grad_fields, strict=True):
            if grad is None:
                torch._foreach_zero_(adjoints)
            else:
                torch._foreach_copy_(adjoints, list(grad.unbind(0)))
        self._launch(self._backward_graph)
        actions_grad = wp.to_torch(self._actions.grad, requires_grad=False).clone()
        return (actions_grad, *(wp.to_torch(a.grad, requires_grad=False).clone() for a in self._start.arrays()))


class _RolloutGraphFunction(torch.autograd.Function):
    """The rollout as one autograd node: (graph, actions_seq, *state0) -> trajectory fields."""

    @staticmethod
    def forward(ctx, graph, actions_seq, *state0):
        ctx.graph = graph
        outputs = graph.run_forward(state0, actions_seq)
        ctx.generation = graph._generation
        return outputs

    @staticmethod
    def backward(ctx, *grad_fields):
        grads = ctx.graph.run_backward(ctx.generation, grad_fields)
        needs = ctx.needs_input_grad
        return None, *(g if needs[1 + i] else None for i, g in enumerate(grads))


__all__ = [
    "GradRing",
    "RolloutGraph",
    "TapedStep",
    "TorchState",
    "invalid_actions",
    "record_step",
    "replay_backward",
    "rollout",
    "step_fields",
    "warp_step",
]
