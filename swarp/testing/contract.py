"""``check_scenario``: the contract checks a scenario must pass (declared shapes, finite values,
snapshots, determinism, ``reset_at``, the reset's writes, ``final_obs``, the alive mask, no host
transfer, the CUDA graph, fused-torch parity), each raising ``ScenarioContractError`` naming the check and the
scenario method at fault."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from swarp.core.types import STATE_FIELDS
from swarp.env.environment import Environment
from swarp.env.make import make
from swarp.scenarios.framework.base import (
    Scenario,
    get_scenario,
    register_scenario,
    scenario_names,
    unregister_scenario,
)
from swarp.testing.host_transfers import HostTransferError, forbid_host_transfers
from swarp.testing.rollouts import PARITY_ATOL, first_difference, random_actions, record, rollout, row_difference

#: The physical state a scenario's reset must write for the envs it resets (planar agents).
RESET_STATE = ("state.pos", "state.vel", "state.theta")
#: Steps before the snapshot check takes its snapshot; it replays the rest of the actions.
SNAPSHOT_AFTER_STEPS = 5
#: Diverged entries a snapshot failure lists (the first ones in ``UPSTREAM_FIRST`` order).
DIVERGED_SHOWN = 4
#: The groups of recorded entries (``record``) in the order failures look at them: upstream first
#: (the state, then what a step computes from it), so the entry a failure names first is a cause,
#: not one of its consequences.
UPSTREAM_FIRST = ("state", "obstacles", "agent_params", "counters", "scenario", "obs", "final_obs", "reward", "done",
                  "info")  # fmt: skip
#: Recorded entries that are copies of others (``get_state``'s of the step's outputs).
COPIES = ("env.obs", "env.reward", "env.terminated", "env.truncated", "info.final_obs")
#: Recorded entries whose group is not their key's first part.
NAMED_GROUPS = {"env.agent_params": "agent_params", "env.final_obs": "final_obs", "terminated": "done",
                "truncated": "done"}  # fmt: skip


class ScenarioContractError(AssertionError):
    """A scenario broke the contract: the message names the check and the method at fault."""


def check_scenario(
    scenario: str | type[Scenario],
    *,
    n_envs: int = 6,
    n_steps: int = 40,
    seed: int = 0,
    device: str = "cpu",
    parity_atol: float = PARITY_ATOL,
    **options,
) -> dict[str, str]:
    """Run the scenario contract on a registered scenario name or a ``Scenario`` subclass.

    Checks, each on fresh environments of ``n_envs`` envs with auto-reset (``options`` are the
    scenario's options and ``swarp.make`` keywords, e.g. ``max_steps=15`` so episodes end):

    * declared shapes: observations ``[E, A, obs_dim]``, rewards ``[E, A]``, ``done`` ``[E]`` bool,
      ``info`` keys equal to ``info_buffers``' keys, each with leading dim E;
    * finite values: every float the reset and each step hand out or keep (observations, rewards,
      info, ``final_obs`` of finished envs, the world state, ``state_tensors``; all of
      ``get_state``) is finite; runs before determinism, as NaN != NaN would read as randomness;
    * determinism: the same seed and actions give the same bits; another seed other starts;
    * snapshot complete: ``set_state(get_state())`` then the same actions replay the same bits
      (memory a step reads but ``state_tensors`` leaves out diverges);
    * ``reset_at`` changes only the masked envs, and an env's new episode depends only on (seed,
      env, episode);
    * a reset writes every state field (positions, velocities, headings, ``state_tensors``) of
      the envs it resets;
    * ``final_obs`` is the observation the auto-reset overwrote;
    * the alive mask, where the scenario keeps one (``env.alive``, ``swarp.runtime.alive``): an
      agent dead when a step begins observes a zero row, earns 0 and does not move, and an agent
      dead at the step's end stays dead until its env restarts (only where there is a mask);
    * no host transfers inside ``step`` or ``reset_at``;
    * on CUDA, the step captured in a CUDA graph gives the bits of the step without one (a torch
      step that is not capture-safe is reported ``"skipped: why"``, not failed: it runs eagerly);
    * the fused twin (if any) matches the torch reference (flags exactly, floats to ``parity_atol``;
      the body scenarios round their resets' cos/sin in float32 and pass ``1e-4``).

    Torch-only scenarios run every check but the last on their torch path; fused ones run each
    on both paths.

    Returns:
        ``{check name: "ok" or "skipped: reason"}``.

    Raises:
        ScenarioContractError: the first check that fails, with the scenario method at fault.
    """
    name, registered_here = _registered_name(scenario)
    try:
        return _check(name, n_envs, n_steps, seed, device, parity_atol, options)
    finally:
        if registered_here:
            unregister_scenario(name)


def _check(name: str, n_envs: int, n_steps: int, seed: int, device: str, parity_atol: float, options: dict):
    fused_available = get_scenario(name).fused_available
    paths = (True, False) if fused_available else (False,)

    def build(fused: bool, **overrides) -> Environment:
        kwargs = dict(n_envs=n_envs, device=device, seed=seed, auto_reset=True, fused=fused)
        kwargs.update(options)
        kwargs.update(overrides)
        return make(name, **kwargs)

    generator = torch.Generator().manual_seed(seed)
    try:  # the torch path checks each method's output shape and keys as it runs (swarp.env.reference)
        probe = build(paths[-1])
    except ValueError as error:
        raise ScenarioContractError(f"{name}: declared shapes: {error}") from None
    actions = [random_actions(probe, generator) for _ in range(n_steps)]
    masked = probe.alive is not None
    probe.close()
    report: dict[str, str] = {}
    checks: list[tuple[str, Callable[[bool], str | None]]] = [
        ("declared shapes", lambda fused: _check_shapes(build(fused), actions)),
        ("finite values", lambda fused: _check_finite(build(fused), actions)),  # before determinism: NaN != NaN
        ("determinism", lambda fused: _check_determinism(build, fused, actions, seed)),
        ("snapshot complete", lambda fused: _check_snapshot(build(fused), actions)),
        ("reset_at masks", lambda fused: _check_reset_at(build, fused, actions)),
        ("reset writes every state field", lambda fused: _check_reset_writes(build, fused, actions)),
        ("final_obs", lambda fused: _check_final_obs(build, fused, actions)),
        ("no host transfers", lambda fused: _check_host_transfers(build(fused), actions)),
    ]
    if masked:
        checks.insert(-1, ("alive mask", lambda fused: _check_alive(build(fused), actions)))
    if str(device).startswith("cuda"):
        checks.append(("CUDA graph", lambda fused: _check_graph(build, fused, actions)))
    for check, run in checks:
        for fused in paths:
            label = f"{check} ({'fused' if fused else 'torch'})" if fused_available else check
            try:
                report[label] = run(fused) or "ok"
            except (ScenarioContractError, ValueError) as error:
                raise ScenarioContractError(f"{name}: {label}: {error}") from None
    if fused_available:
        try:
            report["fused == torch"] = _check_parity(build, actions, parity_atol) or "ok"
        except ScenarioContractError as error:
            raise ScenarioContractError(f"{name}: fused == torch: {error}") from None
    else:
        report["fused == torch"] = "skipped: no fused twin"
    return report


def _registered_name(scenario: str | type[Scenario]) -> tuple[str, bool]:
    """``(registry name of scenario, whether this call registered it)``: a class not registered yet
    is registered under its ``name`` for the duration of the check."""
    if isinstance(scenario, str):
        get_scenario(scenario)  # a clear error for an unknown name
        return scenario, False
    if not (isinstance(scenario, type) and issubclass(scenario, Scenario)):
        raise TypeError(f"check_scenario needs a scenario name or a Scenario subclass, got {scenario!r}")
    for name in scenario_names():
        if get_scenario(name) is scenario:
            return name, False
    if not scenario.name:
        raise ValueError(f"{scenario.__name__} has no name: set the class attribute name = '...'")
    if scenario.name in scenario_names():
        raise ValueError(f"{scenario.name!r} is registered to another class ({get_scenario(scenario.name).__name__})")
    register_scenario(scenario.name, scenario)
    return scenario.name, True


def _fail(method: str, message: str) -> None:
    raise ScenarioContractError(f"{message} (the method at fault: {method})")


def _check_shapes(env: Environment, actions: list[torch.Tensor]) -> None:
    E, A = env.n_envs, env.n_agents
    sc = env.scenario
    declared = sorted(sc.info_buffers())
    for t, step_actions in enumerate(actions[:3]):
        env.step(step_actions)
        obs, reward, terminated, info = env.obs, env.reward, env.terminated, env.info
        where = f"step {t}"
        if tuple(obs.shape) != (E, A, sc.obs_dim):
            _fail(
                "observations / obs_dim", f"{where}: observations {tuple(obs.shape)}, declared [{E}, {A}, {sc.obs_dim}]"
            )
        if tuple(reward.shape) != (E, A):
            _fail("rewards", f"{where}: rewards {tuple(reward.shape)}, expected [{E}, {A}]")
        for group in env.groups:
            padding = obs[:, group.agents, group.obs_dim :]
            if padding.numel() and bool(padding.any()):
                message = f"{where}: group {group.name!r} has nonzero columns past its obs_dim {group.obs_dim}"
                _fail("observations", message)
        if tuple(terminated.shape) != (E,) or terminated.dtype != torch.bool:
            _fail("done", f"{where}: terminated {tuple(terminated.shape)} {terminated.dtype}, expected [{E}] bool")
        if not env.fused:
            returned = sc.info()
            if sorted(returned) != declared:
                _fail("info / info_buffers", f"info() keys {sorted(returned)} != info_buffers() keys {declared}")
        for key in declared:
            if info[key].shape[:1] != (E,):
                _fail("info_buffers", f"info[{key!r}] has shape {tuple(info[key].shape)}: leading dim must be E={E}")


def _check_finite(env: Environment, actions: list[torch.Tensor]) -> None:
    """Every float of the reset's and each step's record (``record``: outputs and ``get_state``) is
    finite, or the failure names the step, the entry, the env (and agent) and the method at fault."""
    everyone = torch.ones(env.n_envs, dtype=torch.bool, device=env.torch_device)
    _check_row_finite(env, record(env, _outputs(env)), "the reset", restarted=everyone, finished=~everyone)
    for t, step_actions in enumerate(actions):
        row = record(env, env.step(step_actions))
        done = row["terminated"] | row["truncated"]  # auto-reset: these envs finished and restarted
        _check_row_finite(env, row, f"step {t}", restarted=done, finished=done)


def _group(key: str) -> str | None:
    """The ``UPSTREAM_FIRST`` group of a recorded entry, or None for a copy (``COPIES``)."""
    if key in COPIES:
        return None
    if key in NAMED_GROUPS:
        return NAMED_GROUPS[key]
    if key.startswith("env."):
        return "counters"  # the seed, episode and step counters
    return key.split(".", 1)[0]


def _upstream_first(keys) -> list[str]:
    """``keys`` of a recorded row in ``UPSTREAM_FIRST`` order (``record``'s order within a group), copies left out."""
    kept = [key for key in keys if _group(key) is not None]
    return sorted(kept, key=lambda key: UPSTREAM_FIRST.index(_group(key)))


def _check_row_finite(
    env: Environment, row: dict[str, torch.Tensor], when: str, restarted: torch.Tensor, finished: torch.Tensor
) -> None:
    """Raise naming the method at fault unless every float of ``row`` is finite.

    Args:
        restarted: [E] bool, the envs whose state a reset wrote (their faults are the reset's).
        finished: [E] bool, the envs whose ``final_obs`` row is an observation (the others are stale).
    """
    fused = env.fused
    observe = "launch_observe" if fused else "observations"
    # The method at fault per group: in the restarted envs, in the others.
    writers = {
        "state": ("launch_reset" if fused else "reset_world", "make_world (the physics of its agents and world)"),
        "obstacles": ("launch_reset" if fused else "reset_world", "make_world (its obstacles)"),
        "agent_params": ("make_world (its agents' parameters)",) * 2,
        "scenario": ("launch_reset" if fused else "reset_world", "launch_observe" if fused else "post_step / rewards"),
        "obs": (observe, observe),
        "final_obs": (observe, observe),
        "reward": ("launch_observe" if fused else "rewards",) * 2,
        "info": ("launch_observe" if fused else "info",) * 2,
    }
    for key in _upstream_first(key for key, value in row.items() if value.is_floating_point()):
        value = row[key]
        bad = ~torch.isfinite(value)
        per_env = value.shape[:1] == (env.n_envs,)
        if _group(key) == "final_obs":
            bad &= finished.view(-1, 1, 1)
        if not bool(bad.any()):
            continue
        index = bad.nonzero()[0].tolist()
        in_restarted, in_others = writers[_group(key)]
        method = in_restarted if not per_env or bool(restarted[index[0]]) else in_others
        envs = bad.flatten(1).any(1).nonzero().flatten().tolist() if per_env and value.dim() > 1 else []
        also = f" (non-finite in envs {envs})" if len(envs) > 1 else ""
        _fail(method, f"{when}: {key} is {value[tuple(index)].item()} at {_where(key, index, per_env)}{also}")


def _where(key: str, index: list[int], per_env: bool) -> str:
    """Where element ``index`` of a recorded entry is: ``env 2, agent 0, column 5`` (or ``body``,
    ``component``), ``env 2, index [1]`` in scenario memory, ``index [...]`` in a batch-wide entry."""
    if not per_env:
        return f"index {index}"
    field = key.removeprefix("state.")
    if key in ("obs", "env.final_obs"):
        names = ("env", "agent", "column")
    elif key == "reward" or (key.startswith("state.") and field in STATE_FIELDS):
        names = ("env", "agent", "component")
    elif key.startswith("state."):
        names = ("env", "body", "component")
    else:
        return f"env {index[0]}" + (f", index {index[1:]}" if len(index) > 1 else "")
    return ", ".join(f"{name} {i}" for name, i in zip(names, index, strict=False))


def _check_snapshot(env: Environment, actions: list[torch.Tensor]) -> None:
    """A few steps, ``get_state``, the rest of the actions recorded, ``set_state``, the same actions
    again: the same bits, unless the step reads memory the snapshot does not hold."""
    start = min(SNAPSHOT_AFTER_STEPS, len(actions) // 2)
    for step_actions in actions[:start]:
        env.step(step_actions)
    snapshot = env.get_state()
    first = rollout(env, actions[start:])
    env.set_state(snapshot)
    for t, (expected, replayed) in enumerate(zip(first, rollout(env, actions[start:]), strict=True)):
        diverged = [key for key in _upstream_first(expected) if not torch.equal(expected[key], replayed[key])]
        if diverged:
            shown = ", ".join(_divergence(key, expected[key], replayed[key]) for key in diverged[:DIVERGED_SHOWN])
            more = f" and {len(diverged) - DIVERGED_SHOWN} more" if len(diverged) > DIVERGED_SHOWN else ""
            _fail("state_tensors", f"the snapshot is incomplete: restored by set_state(get_state()) before step "
                                   f"{start}, the same actions diverged at step {start + t}: {shown}{more}; "
                                   "state_tensors() must return all the memory a step reads")  # fmt: skip


def _divergence(key: str, first: torch.Tensor, second: torch.Tensor) -> str:
    """``key``, with the largest difference of a float entry (``obs by up to 0.31``)."""
    if not first.is_floating_point():
        return key
    return f"{key} by up to {(first - second).abs().max().item():.3g}"


def _check_determinism(build, fused: bool, actions: list[torch.Tensor], seed: int) -> str | None:
    first, second = build(fused), build(fused)
    start = first.obs.clone()
    difference = first_difference([record(first, _outputs(first))], [record(second, _outputs(second))])
    if difference is not None:
        where = difference.split(": ", 1)[1]
        _fail("reset_world", f"two envs of the same seed start differently ({where}): draw with swarp's keyed RNG "
                             "(scenarios.framework.arena.env_draws_torch), not torch.rand")  # fmt: skip
    difference = first_difference(rollout(first, actions), rollout(second, actions))
    if difference is not None:
        _fail("reset_world / rewards / post_step", f"two envs of the same seed and actions differ at {difference}")
    if torch.equal(build(fused, seed=seed + 1).obs, start):
        return "ok (another seed gives the same first observation: the starts draw nothing)"
    return None


def _outputs(env: Environment) -> tuple:
    return env.obs, env.reward, env.terminated, env.truncated, env.info


def _check_reset_at(build, fused: bool, actions: list[torch.Tensor]) -> None:
    env = build(fused, auto_reset=False)
    for step_actions in actions[:5]:
        env.step(step_actions)
    before = env.get_state()
    mask = torch.arange(env.n_envs, device=env.torch_device) % 2 == 1
    env.reset_at(mask)
    after = env.get_state()
    for key, value in before.items():
        if value.shape[:1] != (env.n_envs,):
            continue  # batch-wide entries (the seed, shared obstacles)
        if not torch.equal(after[key][~mask], value[~mask]):
            _fail("reset_world", f"reset_at changed {key} in envs outside the mask")
    full = build(fused, auto_reset=False)
    full.reset_at(torch.ones(env.n_envs, dtype=torch.bool, device=env.torch_device))
    for key in ("state.pos", "env.obs"):
        if not torch.equal(full.get_state()[key][mask], after[key][mask]):
            message = (f"{key}: an env's new episode depends on more than (seed, env, episode): draw with swarp's "
                       "keyed RNG (scenarios.framework.arena.env_draws_torch), not torch.rand")  # fmt: skip
            _fail("reset_world", message)
    env.reset_at(torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device))
    if first_difference([env.get_state()], [after]) is not None:
        _fail("reset_world", "reset_at with an empty mask changed the state")


def _check_reset_writes(build, fused: bool, actions: list[torch.Tensor]) -> None:
    """Two twin envs step alike; the state of half of one's envs is poisoned (floats NaN, bools
    flipped, integers shifted), then both reset those envs: the reset envs must agree again."""
    env, twin = build(fused, auto_reset=False), build(fused, auto_reset=False)
    for step_actions in actions[:3]:
        env.step(step_actions)
        twin.step(step_actions)
    mask = torch.arange(env.n_envs, device=env.torch_device) % 2 == 0
    fields = {key: getattr(env.state, key.split(".", 1)[1]) for key in RESET_STATE}
    fields.update({f"scenario.{k}": v for k, v in env.scenario.state_tensors().items()})
    poisoned = []
    for key, tensor in fields.items():
        if tensor.shape[:1] != (env.n_envs,):
            continue
        if tensor.is_floating_point():
            tensor[mask] = math.nan
        elif tensor.dtype == torch.bool:
            tensor[mask] = ~tensor[mask]
        else:
            tensor[mask] += 1000
        poisoned.append(key)
    env.reset_at(mask)
    twin.reset_at(mask)
    state, expected = env.get_state(), twin.get_state()
    method = "launch_reset" if env.fused else "reset_world"
    for key in poisoned:
        if not torch.equal(state[key][mask], expected[key][mask]):
            _fail(method, f"a reset left {key} unwritten in the envs it reset")
    if not torch.equal(env.obs[mask], twin.obs[mask]):
        _fail("launch_observe" if env.fused else "observations", "observations after a reset read a stale field")


def _check_final_obs(build, fused: bool, actions: list[torch.Tensor]) -> str | None:
    auto, plain = build(fused), build(fused, auto_reset=False)
    finished = 0
    for t, step_actions in enumerate(actions):
        auto.step(step_actions)
        plain.step(step_actions)
        done = auto.terminated | auto.truncated
        if not torch.equal(done, plain.terminated | plain.truncated):
            _fail("done", f"step {t}: auto-reset and a plain env disagree on which episodes ended")
        if not torch.equal(auto.final_obs[done], plain.obs[done]):
            _fail("observations", f"step {t}: final_obs is not the observation the reset overwrote")
        plain.reset_at(done)
        if not torch.equal(auto.obs, plain.obs):
            _fail("reset_world", f"step {t}: the auto-reset's restart differs from reset_at's")
        finished += int(done.sum())
    if finished == 0:
        return "skipped: no episode ended (pass max_steps=... below n_steps)"
    return None


def _check_alive(env: Environment, actions: list[torch.Tensor]) -> None:
    """A dead agent (``~env.alive`` when the step begins) observes zeros, earns 0, keeps its state,
    and no agent comes back to life within an episode."""
    env.reset()
    if env.alive.dtype != torch.bool or tuple(env.alive.shape) != (env.n_envs, env.n_agents):
        _fail("alive mask", f"env.alive is {tuple(env.alive.shape)} {env.alive.dtype}, expected [E, A] bool")
    for t, step_actions in enumerate(actions):
        dead, pos = ~env.alive.clone(), env.state.pos.clone()
        obs, reward, terminated, truncated, _ = env.step(step_actions)
        ongoing = ~(terminated | truncated).view(-1, 1)  # auto-reset: a restarted env draws anew
        where = f"step {t}"
        if bool((obs[dead & ongoing] != 0).any()):
            _fail("observations", f"{where}: an agent dead when the step began observes a nonzero row")
        if bool((reward[dead] != 0).any()):
            _fail("rewards", f"{where}: an agent dead when the step began earns a nonzero reward")
        if not torch.equal(env.state.pos[dead & ongoing], pos[dead & ongoing]):
            _fail("alive mask", f"{where}: an agent dead when the step began moved")
        if bool((env.alive & dead & ongoing).any()):
            _fail("alive mask", f"{where}: an agent came back to life within its episode")


def _check_host_transfers(env: Environment, actions: list[torch.Tensor]) -> None:
    mask = torch.arange(env.n_envs, device=env.torch_device) % 2 == 0
    env.step(actions[0])  # the first call records launches and may compile
    env.reset_at(mask)
    try:
        with forbid_host_transfers():
            for step_actions in actions[1:6]:
                env.step(step_actions)
            env.reset_at(mask)
    except HostTransferError as error:
        _fail(_host_culprit(env), str(error))


def _check_graph(build, fused: bool, actions: list[torch.Tensor]) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reason is reported below
        graph_env = build(fused, use_graph="auto")
        graph = rollout(graph_env, actions)
    if not graph_env.graph_mode:
        return f"skipped: {graph_env.no_graph_reason or 'the step cannot be captured'}"
    difference = first_difference(graph, rollout(build(fused, use_graph=False), actions))
    if difference is not None:
        _fail("the step (captured)", f"{difference} differs from the step without a graph")
    return None


def _host_culprit(env: Environment) -> str:
    """The first torch-reference method that transfers to the host (called one by one)."""
    sc = env.scenario
    mask = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
    for method, call in (("reset_world", lambda: sc.reset_world(mask)), ("post_step", sc.post_step),
                         ("observations", sc.observations), ("rewards", sc.rewards), ("done", sc.done),
                         ("info", sc.info)):  # fmt: skip
        try:
            with forbid_host_transfers():
                call()
        except HostTransferError:
            return method
    return "step / reset_at (no single scenario method alone)"


def _check_parity(build, actions: list[torch.Tensor], atol: float) -> None:
    fused, reference = build(True), build(False)
    for t, step_actions in enumerate([None, *actions]):
        if step_actions is None:
            a, b = record(fused, _outputs(fused)), record(reference, _outputs(reference))
        else:
            a, b = record(fused, fused.step(step_actions)), record(reference, reference.step(step_actions))
        done = a["terminated"] | a["truncated"]
        for row in (a, b):  # final rows of envs that did not finish are stale on both paths
            for key in ("env.final_obs", "info.final_obs"):
                if key in row:
                    row[key] = torch.where(done.view(-1, 1, 1), row[key], torch.zeros_like(row[key]))
        key = row_difference(a, b, atol)
        if key is not None:
            _fail("launch_observe / launch_reset", f"{'reset' if t == 0 else f'step {t}'}: {key} differs from the "
                                                   "torch reference")  # fmt: skip
