"""The differentiable step: ``Environment.step`` with actions that require grad.

A grad-mode step returns ``obs`` and ``reward`` whose autograd history reaches that step's actions
(the state entering the step is a constant: ``swarp.rollout`` does backpropagation through time).
Its gradient is always the torch reference's: the scenario's ``post_step``, ``observations`` and
``rewards`` on the physics' taped state (``warp_step``), the specification every scenario has,
built-in or user-written. ``plan.grad_step`` chooses how a step gets there:

In every mode the environment itself takes its ordinary no-grad step (fused kernels, one graph;
or the torch reference where ``fused=False``), so a history that mixes grad-mode steps into
no-grad ones is the all-no-grad history bit for bit: the returned values, the state and every
buffer (the scenario's memory, auto-resets, starts prepared ahead). The torch reference never
writes the environment's buffers: it runs in a twin environment (built like ``env`` on the first
grad step) from a copy of the step's inputs (the state, the scenario's memory, parameters,
obstacles and counters), and only its gradient reaches the returned tensors. The fused kernels
and the reference agree to float rounding, not bit for bit, so the reference's values in the
buffers (the scenario's memory, a reset's start) would make every later step differ.

* ``"direct"``: the twin runs the taped physics and the torch reference in the step's forward,
  recorded by autograd (``RecomputedGrad.direct``); the backward is autograd's.
* ``"recompute"``: the step's inputs are copied into a slot; the backward copies the slot into the
  twin, recomputes the step's pre-reset observation and reward there (taped physics plus the
  torch reference), then backpropagates into the actions. On CUDA that recompute and its backward
  are captured as one torch CUDA graph (Warp's launches join it), so each step's backward is one
  graph launch (``RecomputedGrad``).
* ``"compiled"``: ``"recompute"`` with the twin's torch reference (``reference_outputs``) through
  ``torch.compile``: inductor fuses its ~100 small kernels and their adjoints into a few, which the
  captured graph then replays. The first backward compiles (seconds); where compiling fails the
  step runs as ``"recompute"`` from then on, with one warning.

``"direct"`` and ``"recompute"`` give the same values and, on the CPU, the same gradient bit for
bit (the reference's on the same taped physics); ``"compiled"``'s gradient is the reference's up
to the rounding of inductor's fused sums. On the CPU ``"direct"`` is the rule: with no graph to
replay, a recompute in the backward buys nothing over recording the reference in the forward.
"""

from __future__ import annotations

import dataclasses
import types
import warnings
import weakref
from typing import TYPE_CHECKING

import torch
import warp as wp
from torch.autograd.graph import increment_version

from swarp.env import reference
from swarp.physics.autograd import GradRing, step_fields, warp_step
from swarp.runtime.launch import Launcher
from swarp.runtime.sequence import CompiledSequence, joined_capture

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: Snapshot entries a step only writes: outputs, not inputs of the recompute.
OUTPUT_KEYS = ("env.obs", "env.reward", "env.terminated", "env.truncated", "env.final_obs")


def taped_physics(env: Environment, actions: torch.Tensor, ring: GradRing | None = None):
    """The step's physics through ``warp_step`` from a copy of ``env``'s state (a constant), its
    result written back, detached, into the persistent state and the neighbor lists rebuilt.

    Returns:
        The new state (``TorchState``: fresh tensors, or views into ``ring``) with autograd
        history reaching ``actions``.
    """
    world = env.world
    current = world.state.torch
    # The fields the step integrates, copied: the write-back below must not change what the tape
    # read. The others (a planar fleet's drone fields) pass through as the buffers themselves.
    integrated = step_fields(env.stepper)
    state_in = current._replace(**{name: getattr(current, name).clone() for name in integrated})
    state = warp_step(
        env.stepper,
        state_in,
        env.action_input.physical(actions).contiguous(),
        ring=ring,
        invalid_flag=world.invalid_action_flag,
        non_finite_flag=world.non_finite_flags,
    )
    with torch.no_grad():
        for name in integrated:
            getattr(current, name).copy_(getattr(state, name))
    with env.streams.scope():
        world.build_neighbors()
    return state


def reference_outputs(env: Environment, state) -> tuple[torch.Tensor, torch.Tensor]:
    """The scenario's ``post_step``, then its observation [E, A, obs_dim] and reward [E, A] with
    ``env.state`` reading the taped ``state`` (and ``env.messages`` what ``show_messages`` set);
    the caller clears both after (``clear_grad_inputs``)."""
    env.grad_state = state
    env.scenario.post_step()
    obs = reference.observations(env)
    reward = reference.checked(env.scenario.rewards(), env, "rewards", env.reward.shape)
    return obs, reward


def show_messages(env: Environment, actions: torch.Tensor) -> None:
    """Make ``env.messages`` the messages of a grad step's ``actions``, with their autograd history."""
    env.grad_messages = env.action_input.messages_of(actions)


def clear_grad_inputs(env: Environment) -> None:
    """Drop the taped state and messages ``reference_outputs`` showed the scenario."""
    env.grad_state = None
    env.grad_messages = None


def _check_memory_detached(env: Environment) -> None:
    sc = env.scenario
    for name, tensor in sc.state_tensors().items():
        if tensor.requires_grad:
            raise RuntimeError(
                f"scenario {sc.name!r} stored a tensor with autograd history in its persistent memory "
                f"{name!r} during a grad-mode step; store a detached value (tensor.copy_(value.detach()))"
            )


def grad_step(env: Environment, actions: torch.Tensor):
    """``Environment.step`` with grads, by ``env.plan.grad_step``.

    With auto-reset, an env that finished this step is reset as usual: its ``obs`` rows start
    the new episode (constants, zero gradient), its ``reward`` is the finishing transition's
    (with gradient), and ``info["final_obs"]`` is a fresh tensor with grad history holding
    every env's observation before the resets (the last observation of finished envs).

    Returns:
        What ``Environment.step`` returns.
    """
    if env.recomputed_grad is None:
        env.recomputed_grad = RecomputedGrad(env)
    if env.plan.grad_step == "direct":
        obs, reward = env.recomputed_grad.direct(actions)
    else:
        obs, reward = _RecomputedStep.apply(env.recomputed_grad, actions)
    info = dict(env.info)
    if env.auto_reset:
        info["final_obs"] = obs
        # A copy of ``done``: autograd keeps the mask for the backward, and the next step rewrites it.
        obs = torch.where(env.done.view(-1, 1, 1).clone(), env.obs, obs)
    if env.clone_outputs:
        info = {k: v if k == "final_obs" else v.clone() for k, v in info.items()}
        return obs, reward, env.terminated.clone(), env.truncated.clone(), info
    return obs, reward, env.terminated, env.truncated, info


def pre_reset_outputs(env: Environment) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of the step's observation before its auto-reset [E, A, obs_dim] (the finished envs'
    rows from ``final_obs``) and of its reward [E, A], just after a no-grad step of ``env``."""
    pre_reset = torch.where(env.done.view(-1, 1, 1), env.final_obs, env.obs) if env.auto_reset else env.obs.clone()
    return pre_reset, env.reward.clone()


class _WithReferenceGradient(torch.autograd.Function):
    """(env, reference_obs, reference_reward) -> the pre-reset obs and the reward of ``env``'s
    no-grad step just taken (``pre_reset_outputs``: fresh tensors, bit for bit what the step
    without grads gives), differentiated as the torch reference's outputs of the same step (equal
    to them to float rounding): the gradient passes through to those."""

    @staticmethod
    def forward(ctx, env: Environment, reference_obs: torch.Tensor, reference_reward: torch.Tensor):
        return pre_reset_outputs(env)

    @staticmethod
    def backward(ctx, grad_obs, grad_reward):
        return None, grad_obs, grad_reward


class RecomputedGrad:
    """The grad step of one environment: its twin, and for ``"recompute"`` its slots (module doc).

    The twin is an environment built like ``env``. ``"direct"`` copies the step's inputs into it
    and records the torch reference there in the step's forward (``direct``). For ``"recompute"``,
    a slot holds copies of what a step reads (``inputs``) and the step's actions, from the step's
    forward until its autograd node is gone; slots are reused after that, so a loop of T steps and
    one backward keeps about T slots. Each backward copies a slot into the twin and runs
    ``_recompute`` there: eagerly on the first backward (it warms every kernel and checks the
    step), then captured as one CUDA graph on CUDA. A step that cannot be captured (a torch
    reference that syncs with the host) keeps running eagerly, with one warning. With
    ``plan.grad_step="compiled"`` the twin's torch reference runs through ``torch.compile``.

    Args:
        env: The environment (built and reset).
    """

    def __init__(self, env: Environment):
        self.env = env
        self.twin = twin = env.build_twin()
        device = env.torch_device
        self._actions = torch.zeros(env.n_envs, env.n_agents, env.act_dim, dtype=env.dtype, device=device)
        self._actions.requires_grad_()
        self._seed_obs = torch.zeros_like(env.obs)
        self._seed_reward = torch.zeros_like(env.reward)
        self._grad = torch.zeros_like(self._actions, requires_grad=False)
        self._ring = GradRing(twin.stepper, env.n_envs, env.stepper.act_dim, 1)
        self._twin_inputs = [*self.inputs(twin)[:-1], self._actions.detach()]
        self._inputs = self.inputs(env)
        self._to_twin: CompiledSequence | None = None  # "direct": the step's inputs into the twin's
        self._free: list[_Slot] = []
        self._graph: torch.cuda.CUDAGraph | None = None
        self._eager_runs = 0
        #: A CUDA environment whose plan runs graphs: the recompute is captured after its first run.
        self._captures = env.device.startswith("cuda") and env.plan.launch == "graph"
        #: The twin's torch reference: plain, or compiled (``plan.grad_step="compiled"``).
        self._outputs = reference_outputs
        if env.plan.grad_step == "compiled":
            # Over a code object of its own: torch keeps compiled graphs per code object, at most 8
            # (one per scenario type and shape), and runs the function eagerly past that.
            code = reference_outputs.__code__.replace()
            self._outputs = torch.compile(types.FunctionType(code, globals(), "reference_outputs"), dynamic=False)
        #: Why the backward runs eagerly on CUDA, or ``None``.
        self.no_graph_reason: str | None = None

    @staticmethod
    def inputs(env: Environment) -> list[torch.Tensor]:
        """The buffers of ``env`` a step reads (its snapshot without the step's outputs, then the
        action buffer), in key order."""
        tensors = env.snapshots.tensors()
        keys = [key for key in sorted(tensors) if key not in OUTPUT_KEYS and not key.startswith("info.")]
        return [*(tensors[key] for key in keys), env.world.actions_given]

    def write_actions(self, actions: torch.Tensor) -> None:
        """Write a grad step's ``actions`` into the environment's action buffer (detached)."""
        with torch.no_grad():
            self.env.action_input.write_joined(actions)

    def invalidate(self) -> None:
        """Read the environment's buffers afresh and drop every graph (``Environment.invalidate``)."""
        self._inputs = self.inputs(self.env)
        self._to_twin = None
        self._free = []
        self._graph = None
        self._eager_runs = 0

    def direct(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``"direct"`` grad step: the environment's no-grad step, and the twin's taped physics
        and torch reference from the same inputs, recorded by autograd. Returns the pre-reset
        ``obs`` [E, A, obs_dim] and the ``reward`` [E, A]: the no-grad step's values, with the
        reference's autograd history reaching ``actions``."""
        env, twin = self.env, self.twin
        if self._to_twin is None:
            pairs = zip(map(_dense, self._twin_inputs[:-1]), map(_dense, self._inputs[:-1]), strict=True)
            self._to_twin = CompiledSequence(_copies(list(pairs)), env.plan.launch, env.device, env.streams)
        self._to_twin()  # before the step rewrites them
        # Warp's copies bump no version counter: an earlier step's graph that saved one of these
        # buffers then raises at its backward (torch's in-place error) instead of reading new values.
        increment_version(self._twin_inputs[:-1])
        self.write_actions(actions)
        with torch.no_grad():
            env.launches.run_step()
        state = taped_physics(twin, actions)
        show_messages(twin, actions)
        try:
            reference_obs, reference_reward = reference_outputs(twin, state)
        finally:
            clear_grad_inputs(twin)
        _check_memory_detached(twin)
        return _WithReferenceGradient.apply(env, reference_obs, reference_reward)

    def save(self) -> _Slot:
        """A slot holding the step's inputs now (the action buffer written): one compiled copy."""
        slot = self._free.pop() if self._free else _Slot(self, [torch.empty_like(t) for t in self._inputs])
        slot.save()
        return slot

    def release(self, slot: _Slot) -> None:
        """Give ``slot`` back (its step's autograd node is gone)."""
        if slot.sources is self._inputs:
            self._free.append(slot)

    def vjp(self, slot: _Slot, grad_obs: torch.Tensor | None, grad_reward: torch.Tensor | None):
        """d(<grad_obs, pre-reset obs> + <grad_reward, reward>) / d(actions) [E, A, act_dim] of the
        step saved in ``slot``: a fresh tensor."""
        slot.load()
        for seed, grad in ((self._seed_obs, grad_obs), (self._seed_reward, grad_reward)):
            if grad is None:
                seed.zero_()
            else:
                seed.copy_(grad)
        if self._graph is not None:
            self._graph.replay()
        elif self._captures and self.no_graph_reason is None and self._eager_runs > 0:
            self._capture()
        else:
            failure = None
            try:
                self._recompute()
            except torch._dynamo.exc.TorchDynamoException as error:  # compiling failed: the plain reference
                failure = reference.first_line(error)  # (the traceback would keep the failed step's tape alive)
            if failure is not None:
                self._stop_compiling(failure)
                slot.load()  # what ran before the failure (the physics, a graph before a break) ran on the slot
                self._recompute()
            self._eager_runs += 1
        return self._grad.clone()

    def _stop_compiling(self, failure: str) -> None:
        self._outputs = reference_outputs
        env = self.env
        env.plan = dataclasses.replace(env.plan, grad_step="recompute")
        warnings.warn(
            f"plan.grad_step='compiled': torch.compile failed ({failure}); the grad step runs as 'recompute'",
            stacklevel=6,
        )

    def _recompute(self) -> None:
        """In the twin, from the slot copied in: the step's taped physics and torch reference, then
        the backward of the seeded outputs into ``_grad``."""
        twin = self.twin
        with torch.enable_grad():
            state = taped_physics(twin, self._actions, self._ring)
            show_messages(twin, self._actions)
            try:
                obs, reward = self._outputs(twin, state)
            finally:
                clear_grad_inputs(twin)
            _check_memory_detached(twin)
            # An output with no path to the actions (a reward of discrete events, say) adds nothing.
            seeded = ((obs, self._seed_obs), (reward, self._seed_reward))
            pairs = [(out, seed) for out, seed in seeded if out.requires_grad]
            grad = None
            if pairs:
                outputs, seeds = zip(*pairs, strict=True)
                (grad,) = torch.autograd.grad(outputs, self._actions, seeds, allow_unused=True)
        if grad is None:
            self._grad.zero_()
        else:
            self._grad.copy_(grad)

    def _capture(self) -> None:
        twin = self.twin

        def recompute_in_capture() -> None:
            with joined_capture(twin.streams.current()):
                self._recompute()

        graph, why = reference.capture_torch(twin.torch_device, twin.scenario, recompute_in_capture)
        if graph is None:
            name = type(twin.scenario).__name__
            self.no_graph_reason = f"{name}'s grad-mode backward runs without a CUDA graph: {why}"
            warnings.warn(self.no_graph_reason, stacklevel=5)
            self._recompute()  # the capture ran no work: this call's recompute
            return
        self._graph = graph
        graph.replay()

    def close(self) -> None:
        """Release the twin and the graph."""
        self._graph = None
        self.twin.close()


class _Slot:
    """One step's saved inputs (``tensors``) and the two compiled copies around them: ``save``
    (the environment's buffers in) and ``load`` (out into the twin's): compiled, since as torch
    copies of the ~25 buffers they cost host time on every step (docs/benchmarks.md)."""

    def __init__(self, owner: RecomputedGrad, tensors: list[torch.Tensor]):
        self.sources = owner._inputs
        self.tensors = tensors  # the slot's memory, which the copies address
        env = owner.env
        mode = env.plan.launch
        saved = [_dense(t) for t in tensors]
        pairs_in = list(zip(saved, map(_dense, self.sources), strict=True))
        pairs_out = list(zip(map(_dense, owner._twin_inputs), saved, strict=True))
        self.save = CompiledSequence(_copies(pairs_in), mode, env.device, env.streams)
        self.load = CompiledSequence(_copies(pairs_out), mode, env.device, env.streams)


def _dense(tensor: torch.Tensor) -> wp.array:
    """``tensor`` as a contiguous Warp array over its memory: a permuted view (the parameter table's
    [E, A, P] over its stored [E, P, A]) in its stored order, which a CPU graph can copy."""
    order = sorted(range(tensor.dim()), key=lambda i: -tensor.stride(i))
    dense = tensor.permute(order)
    if not dense.is_contiguous():
        raise RuntimeError(f"a buffer of strides {tensor.stride()} is no permutation of a dense one")
    return wp.from_torch(dense)


def _copies(pairs: list[tuple[wp.array, wp.array]]):
    """A launch sequence of the copies ``(dst, src)``."""

    def sequence(launcher: Launcher) -> None:
        for dst, src in pairs:
            launcher.copy(dst, src)

    return sequence


class _RecomputedStep(torch.autograd.Function):
    """The ``"recompute"`` step as an autograd node: (grad, actions) -> (pre-reset obs, reward)."""

    @staticmethod
    def forward(ctx, grad: RecomputedGrad, actions: torch.Tensor):
        env = grad.env
        ctx.grad = grad
        grad.write_actions(actions)
        ctx.slot = grad.save()
        weakref.finalize(ctx, grad.release, ctx.slot)
        env.launches.run_step()
        return pre_reset_outputs(env)

    @staticmethod
    def backward(ctx, grad_obs, grad_reward):
        return None, ctx.grad.vjp(ctx.slot, grad_obs, grad_reward)
