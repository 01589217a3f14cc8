"""Helpers shared by the scenario tests: paired fused/reference envs, mixed scripted/random actions,
row recording and comparison, and success rates of a policy.

Comparison rule (every scenario): bool and integer tensors (flags, counts, counters) must match
exactly; float tensors within ``PARITY_ATOL`` (float32 rounding of sums taken in another order).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import swarp

#: Fused kernels against the torch reference, float32 [m], [m/s], [-] (obs, reward, distances, state).
PARITY_ATOL = 1e-5
PARITY_RTOL = 0.0
N_PARITY_ENVS = 16

Policy = Callable[[swarp.Environment, torch.Generator], torch.Tensor]


def make_pair(name: str, **options) -> tuple[swarp.Environment, swarp.Environment]:
    """The fused env and the torch reference env of one configuration (same seed, auto-reset, CPU)."""
    options = dict(dict(n_envs=N_PARITY_ENVS, device="cpu", seed=7, auto_reset=True), **options)
    return swarp.make(name, fused=True, **options), swarp.make(name, fused=False, **options)


def random_actions(env: swarp.Environment, generator: torch.Generator, overshoot: float = 0.2) -> torch.Tensor:
    """Uniform random actions, ``overshoot`` beyond the action bounds on both sides (so clamping acts)."""
    low, high = (b.cpu() for b in env.action_bounds)
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
    return (low + (high - low) * ((1 + 2 * overshoot) * u - overshoot)).to(env.torch_device)


def mixed_actions(env: swarp.Environment, generator: torch.Generator) -> torch.Tensor:
    """Even envs follow the scenario's scripted controller (so episodes succeed), odd envs act at
    random (so time limits and collisions happen)."""
    noise = random_actions(env, generator)
    try:
        scripted = env.scenario.scripted_actions()
    except NotImplementedError:
        return noise
    even = (torch.arange(env.n_envs, device=noise.device) % 2 == 0).view(-1, 1, 1)
    return torch.where(even, scripted, noise).contiguous()


def record(env: swarp.Environment, outputs: tuple) -> dict[str, torch.Tensor]:
    """Clones of everything a step returns plus the whole env state (``get_state``)."""
    obs, reward, terminated, truncated, info = outputs
    row = {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}
    row.update({f"info.{k}": v for k, v in info.items()})
    row.update(env.get_state())
    return {k: v.clone() for k, v in row.items()}


def is_exact(tensor: torch.Tensor) -> bool:
    """Flags and counts (bool, integer dtypes) must match exactly between the twins."""
    return not tensor.is_floating_point()


def assert_rows_match(fused: dict, reference: dict, where: str, atol: float = PARITY_ATOL) -> None:
    assert fused.keys() == reference.keys()
    for key in fused:
        a, b = fused[key], reference[key]
        if is_exact(a):
            assert torch.equal(a, b), f"{where}: {key} differs: fused {a.tolist()} vs reference {b.tolist()}"
        else:
            torch.testing.assert_close(a, b, atol=atol, rtol=PARITY_RTOL, msg=lambda m, k=key: f"{where}: {k}: {m}")


def assert_bit_identical(first: list[dict], second: list[dict]) -> None:
    assert len(first) == len(second)
    for t, (a, b) in enumerate(zip(first, second, strict=True)):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), f"step {t}: {key} differs"


def parity_rollout(
    name: str, options: dict, n_steps: int, generator: torch.Generator, excuse=None, atol: float = PARITY_ATOL
) -> dict[str, int]:
    """Step a fused env and its torch reference with the same mixed actions, comparing every row.

    Args:
        excuse: Optional ``excuse(fused_row, reference_row)`` that may patch the fused row where a
            documented approximation applies (e.g. truncated neighbor lists) before comparison.

    Returns:
        How many nonzero entries each exact (flag or count) key had over the rollout, to let the
        caller check that the comparison covered the interesting branches.
    """
    fused, reference = make_pair(name, **options)
    assert fused.fused and not reference.fused
    fused.reset()
    reference.reset()
    assert_rows_match(record(fused, _outputs(fused)), record(reference, _outputs(reference)), f"{name}: reset")
    seen: dict[str, int] = {}
    for t in range(n_steps):
        actions = mixed_actions(fused, generator)
        fused_row = record(fused, fused.step(actions))
        reference_row = record(reference, reference.step(actions))
        if excuse is not None:
            excuse(fused_row, reference_row)
        assert_rows_match(fused_row, reference_row, f"{name} step {t}", atol)
        for key, value in fused_row.items():
            if is_exact(value):
                seen[key] = seen.get(key, 0) + int(value.count_nonzero())
    return seen


def _outputs(env: swarp.Environment) -> tuple:
    return env.obs, env.reward, env.terminated, env.truncated, env.info


def rollout(env: swarp.Environment, actions: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Step ``env`` through pre-drawn actions, recording every step."""
    return [record(env, env.step(a)) for a in actions]


def episode_success_rate(env: swarp.Environment, policy: Policy, generator: torch.Generator) -> float:
    """Share of envs whose first episode ends in success (``Scenario.success`` at the step the
    episode terminates or hits the time limit). ``env`` must not auto-reset."""
    assert not env.auto_reset and env.max_steps is not None
    env.reset()
    finished = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
    success = torch.zeros_like(finished)
    with torch.no_grad():
        for _ in range(env.max_steps):
            _, _, terminated, truncated, _ = env.step(policy(env, generator))
            ended = (terminated | truncated) & ~finished
            success |= ended & env.scenario.success()
            finished |= ended
    assert bool(finished.all())
    return float(success.float().mean())


def scripted_policy(env: swarp.Environment, generator: torch.Generator) -> torch.Tensor:
    return env.scenario.scripted_actions()


class CountingLauncher:
    """A ``Launcher`` that counts launches instead of running them."""

    def __init__(self):
        self.kernels: list = []

    def launch(self, kernel, dim, inputs, outputs=(), device=None, block_dim=None) -> None:
        self.kernels.append(kernel)

    def zero(self, array) -> None:
        self.kernels.append("zero")

    def copy(self, dst, src) -> None:
        self.kernels.append("copy")
