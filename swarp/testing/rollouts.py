"""Recorded rollouts, the material of the contract's comparisons: ``random_actions`` (beyond the
action bounds, so clamping acts), ``record`` and ``rollout`` (every output and the whole state of
each step, under flat keys), and ``first_difference`` / ``row_difference`` (bit-exact and within
``PARITY_ATOL``)."""

from __future__ import annotations

import torch

from swarp.core.groups import join
from swarp.env.environment import Environment

#: Largest float difference between a fused twin and its torch reference [units of the value].
PARITY_ATOL = 1e-5


def random_actions(env: Environment, generator: torch.Generator, overshoot: float = 0.2):
    """[E, A, act_dim] uniform random actions of the env's dtype and device, ``overshoot`` (a share
    of the box's width) beyond the action bounds on both sides, so clamping acts. With a discrete
    ``action_space``: [E, A, act_dim] int64 indices, uniform over each column's choices (no overshoot:
    an index out of range is an invalid action). Where agent groups' spaces differ
    (``env.action_space`` is ``None``): ``{group: actions}``, each group's drawn as above."""
    if env.action_space is None:
        return {g.name: _draw(env, g.action_space, g.agents, generator, overshoot) for g in env.groups}
    return _draw(env, env.action_space, slice(None), generator, overshoot)


def _draw(env: Environment, space, agents: slice, generator: torch.Generator, overshoot: float) -> torch.Tensor:
    # Continuous actions with messages: the command's and the message's columns (their joined box).
    columns = space.physical_dim if space.discrete else space.width
    low, high = (b.cpu()[agents, :columns] for b in env.action_bounds)
    if space.discrete:
        return space.sample(env.n_envs, low.shape[0], generator).to(env.torch_device)
    u = torch.rand(env.n_envs, *low.shape, generator=generator, dtype=env.dtype)
    return (low + (high - low) * ((1 + 2 * overshoot) * u - overshoot)).to(env.torch_device)


def flat_outputs(env: Environment, outputs: tuple) -> tuple:
    """``outputs`` of a step (``(obs, reward, terminated, truncated, info)``) with a grouped env's
    mappings by group joined back into ``[E, A, obs_dim]`` / ``[E, A]`` tensors (padding columns
    zero; autograd history kept): the flat layout every scenario shares."""
    obs, reward, terminated, truncated, info = outputs
    if not isinstance(obs, dict):
        return outputs
    names, width = [group.name for group in env.groups], env.obs_dim
    if "final_obs" in info:
        info = {**info, "final_obs": join(info["final_obs"], names, width)}
    return join(obs, names, width), join(reward, names), terminated, truncated, info


def by_key(name: str, value) -> dict[str, torch.Tensor]:
    """``{name: value}``, or ``{name.group: view}`` for a mapping by agent group."""
    if isinstance(value, dict):
        return {f"{name}.{group}": tensor for group, tensor in value.items()}
    return {name: value}


def record(env: Environment, outputs: tuple) -> dict[str, torch.Tensor]:
    """Clones of what a step (or ``(obs, reward, terminated, truncated, info)``) returned, and the
    whole ``env.get_state()``, under flat keys (``obs``, ``info.<key>``, ``state.pos``...; a
    mapping by agent group under ``obs.<group>``...)."""
    obs, reward, terminated, truncated, info = outputs
    row = {**by_key("obs", obs), **by_key("reward", reward), "terminated": terminated, "truncated": truncated}
    for key, value in info.items():
        row.update(by_key(f"info.{key}", value))
    row.update(env.get_state())
    return {k: v.clone() for k, v in row.items()}


def rollout(env: Environment, actions: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Step ``env`` through pre-drawn actions, recording every step (``record``)."""
    return [record(env, env.step(a)) for a in actions]


def first_difference(first: list[dict], second: list[dict]) -> str | None:
    """``"step t: key"`` of the first entry where two recorded rollouts differ in any bit (or in
    their keys), or None."""
    for t, (a, b) in enumerate(zip(first, second, strict=True)):
        if a.keys() != b.keys():
            return f"step {t}: keys {sorted(a.keys() ^ b.keys())}"
        for key in a:
            if not torch.equal(a[key], b[key]):
                return f"step {t}: {key}"
    return None


def row_difference(first: dict, second: dict, atol: float = PARITY_ATOL) -> str | None:
    """The first key where two recorded rows (``record``) disagree, or None: flags and counts
    (non-float dtypes) must be equal, floats within ``atol`` (NaN equal to NaN)."""
    if first.keys() != second.keys():
        return f"keys {sorted(first.keys() ^ second.keys())}"
    for key, a in first.items():
        b = second[key]
        same = torch.allclose(a, b, atol=atol, rtol=0.0, equal_nan=True) if a.is_floating_point() else torch.equal(a, b)
        if not same:
            return key
    return None
