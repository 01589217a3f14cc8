"""The step as a functional torch custom op, so ``torch.compile`` sees one opaque differentiable node.

``warp_step`` is a ``torch.autograd.Function`` around raw Warp launches, which Dynamo cannot trace:
it would graph-break there. This module registers the step as the custom op ``swarp::step`` with
a fake (meta) implementation and an autograd rule, and its backward as ``swarp::step_backward``:

    from swarp.physics.compile import compiled_warp_step, register_stepper

    register_stepper(stepper)
    state = compiled_warp_step(stepper, state, actions)   # same signature as warp_step

Both ops are functional: the forward allocates fresh outputs (no recycled buffers, no input
mutation, no tape), and the backward re-records a tape from the saved inputs and replays it, so
no Warp state survives between the two calls, which is what AOTAutograd expects. The price is one
extra forward per step in the backward pass.

Custom ops take tensors and plain values only, so a stepper travels as an integer id;
``register_stepper`` hands it out (``compiled_warp_step`` registers eagerly on first use, but a
stepper first seen inside a compiled region is an error: register it before compiling).
"""

from __future__ import annotations

import itertools
import weakref

import torch

from swarp.core.types import TorchState
from swarp.physics.autograd import record_step, replay_backward
from swarp.physics.step import Stepper
from swarp.physics.step_tensors import (
    check_state,
    complete_for,
    n_fields,
    stepper_cache,
    views,
    wrap_array,
    wrap_state,
)

_STEPPERS: weakref.WeakValueDictionary[int, Stepper] = weakref.WeakValueDictionary()
_IDS: weakref.WeakKeyDictionary[Stepper, int] = weakref.WeakKeyDictionary()
_NEXT_ID = itertools.count()


def register_stepper(stepper: Stepper) -> int:
    """Make ``stepper`` callable through the ``swarp::step`` op; returns its id (idempotent).

    The registry holds steppers weakly: a stepper that is garbage-collected drops out.
    """
    if not isinstance(stepper, Stepper):
        raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
    if stepper.n_bodies:
        raise ValueError(
            "the swarp::step custom op covers worlds without movable bodies; use warp_step for a stepper with bodies"
        )
    stepper_id = _IDS.get(stepper)
    if stepper_id is None:
        stepper_id = next(_NEXT_ID)
        _IDS[stepper] = stepper_id
        _STEPPERS[stepper_id] = stepper
    return stepper_id


def _stepper(stepper_id: int) -> Stepper:
    stepper = _STEPPERS.get(stepper_id)
    if stepper is None:
        raise RuntimeError(f"no live stepper is registered under id {stepper_id}; call register_stepper(stepper)")
    return stepper


def _inputs(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.detach().contiguous() for t in tensors)


@torch.library.custom_op("swarp::step", mutates_args=())
def _step(
    stepper_id: int,
    pos: torch.Tensor,
    theta: torch.Tensor,
    vel: torch.Tensor,
    speed: torch.Tensor,
    ang_vel: torch.Tensor,
    pos_z: torch.Tensor,
    vel_z: torch.Tensor,
    quat: torch.Tensor,
    omega: torch.Tensor,
    actions: torch.Tensor,
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    """One step from (state fields, actions) into fresh state fields (``TorchState`` order)."""
    stepper = _stepper(stepper_id)
    inputs = _inputs(pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega, actions)
    cache = stepper_cache(stepper)
    n = n_fields(stepper)
    state_in = wrap_state(stepper, inputs[:n])
    actions_in = wrap_array(inputs[-1], "actions", stepper.scalar)
    with cache.streams.scope():
        output = stepper.simulate_functional(state_in, actions_in, cache.invalid_flag, requires_grad=False)
    # A fleet without drones does not integrate the drone fields: they pass through (as copies:
    # an op's outputs may not alias its inputs).
    return (*views(output), *(t.clone() for t in inputs[n:-1]))


@_step.register_fake
def _step_fake(stepper_id, pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega, actions):
    fields = (pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega)
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in fields)


@torch.library.custom_op("swarp::step_backward", mutates_args=())
def _step_backward(
    stepper_id: int,
    pos: torch.Tensor,
    theta: torch.Tensor,
    vel: torch.Tensor,
    speed: torch.Tensor,
    ang_vel: torch.Tensor,
    pos_z: torch.Tensor,
    vel_z: torch.Tensor,
    quat: torch.Tensor,
    omega: torch.Tensor,
    actions: torch.Tensor,
    grad_pos: torch.Tensor,
    grad_theta: torch.Tensor,
    grad_vel: torch.Tensor,
    grad_speed: torch.Tensor,
    grad_ang_vel: torch.Tensor,
    grad_pos_z: torch.Tensor,
    grad_vel_z: torch.Tensor,
    grad_quat: torch.Tensor,
    grad_omega: torch.Tensor,
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    """Gradients of (state fields, actions): re-record the step on a tape from the inputs, seed the
    output adjoints with the incoming gradients and replay it."""
    stepper = _stepper(stepper_id)
    inputs = _inputs(pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega, actions)
    grad_outputs = _inputs(
        grad_pos, grad_theta, grad_vel, grad_speed, grad_ang_vel, grad_pos_z, grad_vel_z, grad_quat, grad_omega
    )
    cache = stepper_cache(stepper)
    n = n_fields(stepper)
    taped = (*inputs[:n], inputs[-1])
    with cache.streams.scope():
        step = record_step(stepper, taped, cache.invalid_flag)
        grads = replay_backward(step, taped, grad_outputs[:n])
    # Passed-through drone fields: the identity's gradient (fresh tensors, as the op must return).
    return (*grads[:n], *(g.clone() for g in grad_outputs[n:]), grads[n])


@_step_backward.register_fake
def _step_backward_fake(stepper_id, pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega, actions, *grad_outputs):
    inputs = (pos, theta, vel, speed, ang_vel, pos_z, vel_z, quat, omega, actions)
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in inputs)


def _setup_context(ctx, inputs, output):
    ctx.stepper_id = inputs[0]
    ctx.save_for_backward(*inputs[1:])


def _backward(ctx, *grad_outputs):
    grads = _step_backward(ctx.stepper_id, *ctx.saved_tensors, *grad_outputs)
    return (None, *grads)


_step.register_autograd(_backward, setup_context=_setup_context)


def compiled_warp_step(stepper: Stepper, state: TorchState, actions: torch.Tensor) -> TorchState:
    """``warp_step`` through the ``swarp::step`` custom op: traceable by ``torch.compile`` with no
    graph break. Same arguments and result; outputs are always fresh tensors.

    Inputs are validated when running eagerly; inside a compiled region the op's fake
    implementation stands in and checks nothing.
    """
    if torch.compiler.is_compiling():
        stepper_id = _IDS.get(stepper)
        if stepper_id is None:
            raise RuntimeError("call register_stepper(stepper) before compiling a function that steps it")
        state = complete_for(stepper, state)
    else:
        stepper_id = register_stepper(stepper)  # raises for a world with bodies
        state = complete_for(stepper, state)
        n_envs = check_state(stepper, state)
        stepper.check_actions(actions, n_envs)
    return TorchState(*torch.ops.swarp.step(stepper_id, *state, actions))


__all__ = ["compiled_warp_step", "register_stepper"]
