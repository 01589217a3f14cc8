"""The environment's torch paths: the scenario's torch reference step and reset (``fused=False``),
and the pieces of it the differentiable step uses (``swarp.env.grad``).

The step runs the physics' Warp launches and then the scenario's torch reference (the specification),
writing the environment's persistent output buffers as the fused step does, so a fused and a
reference environment hand out the same tensors. The episode bookkeeping is the fused path's own
kernels, launched eagerly.

On CUDA the no-grad torch step runs as one CUDA graph (``CapturedTorchStep``, ``plan.launch ==
"graph"``): physics, the scenario's torch methods, the bookkeeping and the auto-reset of finished
envs, captured on the second step and replayed from then on. A step is capture-safe when it makes
no host sync (``.item()``, ``if tensor:``, boolean indexing, ``nonzero``), keeps its shapes, and
keeps all its state in tensors written in place: the graph replays the captured kernels on the
captured memory, and Python code in the scenario's methods runs only while capturing. The first
step runs eagerly and checks the last rule (no scenario attribute is rebound or resized); a step
that breaks a rule runs without a graph from then on, with a warning that says why
(``Environment.no_graph_reason``).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING

import torch
import warp as wp

from swarp.core import params as param_table
from swarp.runtime.host import host_any, host_rows
from swarp.runtime.launch import EAGER
from swarp.runtime.sequence import joined_capture, torch_capture

if TYPE_CHECKING:
    from swarp.env.environment import Environment


def checked(value, env: Environment, method: str, shape: tuple, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``value`` if it is a tensor of ``shape`` (and ``dtype``), else a ``ValueError`` naming the
    scenario method that returned it (a shape comparison on the host: no device sync)."""
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape) or (dtype and value.dtype != dtype):
        is_tensor = isinstance(value, torch.Tensor)
        got = f"a tensor {tuple(value.shape)} {value.dtype}" if is_tensor else repr(value)
        want = f"{list(shape)}" + (f" {dtype}" if dtype else "")
        raise ValueError(f"{type(env.scenario).__name__}.{method}() returned {got}; expected a tensor {want}")
    return value


def scenario_info(env: Environment) -> dict[str, torch.Tensor]:
    """The scenario's ``info()``, its keys checked against ``info_buffers()``' (the env's ``info``)."""
    info = env.scenario.info()
    if info.keys() != env.scenario_info_keys:
        raise ValueError(f"{type(env.scenario).__name__}.info() returned keys {sorted(info)}; info_buffers() "
                         f"declares {sorted(env.scenario_info_keys)}: the two must match")  # fmt: skip
    return info


def observations(env: Environment) -> torch.Tensor:
    """Torch reference observation [E, A, obs_dim] of ``env.state``: the scenario's, then the lidar's."""
    obs = checked(env.scenario.observations(), env, "observations", (env.n_envs, env.n_agents, env.scenario.obs_dim))
    if env.lidar is None:
        return obs
    return torch.cat([obs, env.lidar.reference(env.state.pos, env.state.theta).distance], dim=-1)


def torch_step(env: Environment, capturing: bool = False) -> None:
    """One no-grad step of the torch reference from the action buffer, writing the output buffers;
    ``capturing``: the physics launches go into an open capture (no recorded replay)."""
    env.action_input.decode_torch()
    if capturing:
        env.world.simulate(EAGER)
    else:
        env.world.run_step()
    env.launches.torch_calls.outputs(env)
    end_step(env, capturing)
    if env.auto_reset:
        reset_envs(env, env.done)


def scenario_outputs(env: Environment) -> None:
    """The torch work of a step after its physics: the scenario's ``post_step``, then its
    observation, reward, ``done`` and info into the output buffers, and the health check."""
    sc = env.scenario
    sc.post_step()
    env.obs.copy_(observations(env))
    env.reward.copy_(checked(sc.rewards(), env, "rewards", env.reward.shape))
    flag_non_finite(env, env.obs, env.reward)
    env.terminated.copy_(checked(sc.done(), env, "done", env.terminated.shape, torch.bool))
    for key, value in scenario_info(env).items():
        env.info[key].copy_(value)


def masked_observations(env: Environment, mask: torch.Tensor) -> None:
    """The fresh observation rows of the envs of ``mask`` [E] bool (just reset) into ``env.obs``,
    health-checked; the other rows stay."""
    env.obs.copy_(torch.where(mask.view(-1, 1, 1), observations(env), env.obs))
    flag_non_finite(env, env.obs, env_mask=mask)


class TorchCalls:
    """The torch reference's two torch-only parts of a step, ``outputs`` (``scenario_outputs``) and
    ``fresh`` (``masked_observations``): plain calls, or with ``plan.compile_torch`` the same
    functions through ``torch.compile`` (compiled on first use; an env of another shape or scenario
    compiles its own, and past torch's recompile limit, 8 per function, torch runs them eagerly
    with its own warning). Compiled, they compute the same values up to float rounding (fused loops
    may reorder a sum). Where compiling fails, both run plain from then on, with one warning."""

    def __init__(self, env: Environment):
        self.env = env
        self.compiled = env.plan.compile_torch
        if self.compiled:
            self._outputs = torch.compile(scenario_outputs, dynamic=False)
            self._fresh = torch.compile(masked_observations, dynamic=False)

    def outputs(self, env: Environment) -> None:
        self._call(self._outputs if self.compiled else None, scenario_outputs, env)

    def fresh(self, env: Environment, mask: torch.Tensor) -> None:
        self._call(self._fresh if self.compiled else None, masked_observations, env, mask)

    def _call(self, compiled, plain, *args) -> None:
        if compiled is None:
            plain(*args)
            return
        try:
            compiled(*args)
        except torch._dynamo.exc.TorchDynamoException as error:  # compiling failed, at the first graph: nothing ran
            self.compiled = False
            env = self.env
            env.plan = dataclasses.replace(env.plan, compile_torch=False)
            warnings.warn(f"plan.compile_torch: torch.compile failed ({first_line(error)}); running the torch step "
                          "uncompiled", stacklevel=4)  # fmt: skip
            plain(*args)


def first_line(error: Exception) -> str:
    """``error``'s type and the first line of its message: a one-line warning's reason."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def torch_step_into_capture(env: Environment, stream: wp.Stream) -> None:
    """The torch step launched into the CUDA capture torch has open on ``stream``: Warp is told of
    it (``external=True``) so its launches join the capture on the same stream as torch's ops."""
    with joined_capture(stream):
        torch_step(env, capturing=True)


class CapturedTorchStep:
    """The torch reference's no-grad step on CUDA: eager on the first call, captured into one CUDA
    graph on the second (that call's work is the graph's first replay), replayed after; eager for
    good, with a warning naming the reason, where the step is not capture-safe (module doc).

    Under a capture the caller has open (``torch.cuda.graph`` around a rollout), the step's
    launches go into that capture instead.

    Attributes:
        graph: The captured step, or ``None``.
        reason: Why the step runs without a graph, or ``None``.
    """

    def __init__(self, env: Environment):
        self.env = env
        self.graph: torch.cuda.CUDAGraph | None = None
        self.reason: str | None = None
        self._eager_steps = 0

    def __call__(self) -> None:
        env = self.env
        stream = env.streams.current()
        if stream is not None and torch.cuda.is_current_stream_capturing():
            torch_step_into_capture(env, stream)
        elif self.graph is not None:
            self.graph.replay()
        elif env.plan.launch != "graph":  # use_graph=False, or given up
            self._eager()
        elif self._eager_steps == 0:
            before = scenario_fingerprint(env.scenario)
            self._eager()
            changed = changed_attributes(before, scenario_fingerprint(env.scenario))
            if changed:
                self.give_up(
                    f"the step changes the attribute(s) {', '.join(changed)}: a graph replays the captured "
                    "kernels on the captured memory and runs no Python, so keep state in tensors written in "
                    "place (x.copy_(...), x[...] = ...)"
                )
        else:
            self._capture()

    def _eager(self) -> None:
        with self.env.streams.scope():
            torch_step(self.env)
        self._eager_steps += 1

    def _capture(self) -> None:
        env = self.env
        graph, why = capture_torch(
            env.torch_device, env.scenario, lambda: torch_step_into_capture(env, env.streams.current())
        )
        if graph is None:
            self.give_up(why)
            self._eager()  # the capture ran no work: this call's step
            return
        self.graph = graph
        graph.replay()

    def give_up(self, why: str) -> None:
        """Run every later step eagerly, warning once with ``why``."""
        env = self.env
        self.reason = f"{type(env.scenario).__name__}'s torch step runs without a CUDA graph: {why}"
        env.plan = dataclasses.replace(env.plan, launch="replay")
        warnings.warn(self.reason, stacklevel=4)

    def invalidate(self) -> None:
        """Forget the graph (after a change to anything it captured); the next step captures again."""
        self.graph = None
        self._eager_steps = 0


def capture_torch(device: torch.device, scenario, work) -> tuple[torch.cuda.CUDAGraph | None, str | None]:
    """Capture ``work()`` (torch ops and Warp launches joined to torch's capture) as one torch CUDA
    graph: ``(graph, None)``, or ``(None, why)`` where the capture failed or changed an attribute
    of ``scenario`` (a replay would then be wrong). A failed capture ran nothing; the caller's
    stream and the random-number bookkeeping are repaired (``sequence.torch_capture``)."""
    before = scenario_fingerprint(scenario)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch_capture(graph, device, what="a torch step's capture"):
            work()
    except Exception as error:  # noqa: BLE001 - any failure of the capture means "run eagerly"
        while error.__context__ is not None:  # the first failure, not the capture's end failing after it
            error = error.__context__
        return None, (
            f"capturing it failed ({first_line(error)}); swarp.testing.check_scenario on the "
            "CPU names the method that syncs with the host"
        )
    changed = changed_attributes(before, scenario_fingerprint(scenario))
    if changed:
        return None, f"the step changes the attribute(s) {', '.join(changed)} while captured"
    return graph, None


def scenario_fingerprint(scenario) -> dict[str, tuple]:
    """What a captured step must not change in ``scenario``'s attributes: the value of each number
    or string, the identity of other objects, and the storage, shape and dtype of each tensor (of
    tensors in a dict, list or tuple attribute too)."""

    def of(value) -> tuple:
        if value is None or isinstance(value, (bool, int, float, str)):
            return ("value", value)
        if isinstance(value, torch.Tensor):
            return ("tensor", value.data_ptr(), tuple(value.shape), value.dtype)
        if isinstance(value, dict):
            return ("dict", id(value), tuple((k, of(v)) for k, v in value.items()))
        if isinstance(value, (list, tuple)):
            return ("seq", id(value), tuple(of(v) for v in value))
        return ("object", id(value))

    return {name: of(value) for name, value in vars(scenario).items()}


def changed_attributes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """The attribute names whose fingerprints differ (added and removed ones included), sorted."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def torch_reset(env: Environment) -> None:
    """A reset of the envs in ``env.reset_mask`` by the torch reference."""
    with env.streams.scope():
        env.launches.stages.begin_episodes(EAGER)
    reset_envs(env, env.reset_mask)
    # An explicit reset refreshes the info of the reset envs (an auto-reset keeps the step's).
    for key, value in scenario_info(env).items():
        mask = env.reset_mask.view(-1, *([1] * (value.dim() - 1)))
        env.info[key].copy_(torch.where(mask, value, env.info[key]))


def reset_envs(env: Environment, mask: torch.Tensor) -> None:
    """Start new episodes in the envs of ``mask`` [E] bool (one of the environment's own mask
    buffers, ``done`` or ``reset_mask``): parameters, state, neighbor lists, observation rows.
    On the CPU nothing runs when ``mask`` is empty (``swarp.runtime.host``)."""
    compiled = env.launches.torch_calls.compiled
    rows = None if compiled else host_rows(mask)
    if (rows is not None and rows.numel() == 0) or (compiled and not host_any(mask)):
        return
    r = env.randomization
    if r is not None:
        base = env.configured_params()
        table = param_table.sample_agent_params(base, r.ranges, env.rng_keys(), r.relative, r.per_agent)
        env.agent_params.copy_(torch.where(mask.view(-1, 1, 1), table, env.agent_params))
    env.scenario.reset_world(mask)
    mask_wp = env.buffers.done if mask is env.done else env.buffers.reset_mask
    with env.streams.scope():
        env.world.build_neighbors(mask_wp)
    env.observing_fresh = True  # nothing has been said in a new episode (``Environment.messages``)
    try:
        if rows is None:  # CUDA, or compiled (a fixed shape: one compile)
            env.launches.torch_calls.fresh(env, mask)
            return
        fresh = observations(env)[rows]
    finally:
        env.observing_fresh = False
    env.obs[rows] = fresh
    flag_non_finite(env, fresh, rows=rows)


def flag_non_finite(
    env: Environment,
    obs: torch.Tensor,
    reward: torch.Tensor | None = None,
    env_mask: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> None:
    """Raise the health flag (``env.non_finite()``) of every env, or every env of ``env_mask`` [E]
    bool, whose ``obs`` [E, A, W] rows or ``reward`` [E, A] hold a NaN or infinity (device-side,
    no host sync); with ``rows`` ([k] int64 env indices), ``obs`` is those envs' [k, A, W] rows.
    ``x * 0`` is 0 for a finite ``x`` and NaN otherwise, so one multiply and one sum per env find
    them, with no false alarm from large finite values, faster on the CPU than the fused path's
    check kernel or torch's isfinite passes (docs/benchmarks.md). The saved final
    rows need no check of their own: they are rows this check saw."""
    if torch.compiler.is_compiling():  # inductor folds x * 0 to 0; fused, the plain test costs little
        bad = ~torch.isfinite(obs).flatten(1).all(dim=1)
        if reward is not None:
            bad |= ~torch.isfinite(reward).all(dim=1)
    else:
        bad = (obs * 0).sum(dim=(1, 2))
        if reward is not None:
            bad = bad + (reward * 0).sum(dim=1)
        bad = bad.isnan()
    if env_mask is not None:
        bad &= env_mask
    flags = env.health_flags
    if rows is not None:
        flags[rows] |= bad.to(flags.dtype)
        return
    flags.bitwise_or_(bad.to(flags.dtype))


def end_step(env: Environment, capturing: bool = False) -> None:
    """The fused path's bookkeeping: count the step, flag time limits, and with auto-reset save the
    finished envs' rows to ``final_obs`` and start their next episode (recorded launches; plain
    ones in an open capture, which they join)."""
    if capturing:
        env.launches.torch_end(EAGER)
    else:
        env.launches.run_torch_end()
