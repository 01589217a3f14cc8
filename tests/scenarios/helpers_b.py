"""Checks shared by the tests of the sampling, give-way and spread scenarios: fused/reference
parity under each scenario's scripted controller mixed with out-of-bounds noise (the reference
re-synced every step, discrete flags exact), and the controller's success against random actions.
What every fused scenario owes (graph = replay = eager, masked resets, one-launch resets,
determinism, no host transfers) is checked for all of them in ``test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import swarp
from tests.env.test_environment import record
from tests.scenarios.helpers import assert_rows_match as assert_exact_or_close
from tests.scenarios.helpers import make_pair

Controller = Callable[[swarp.Environment], torch.Tensor]


def mixed_actions(env: swarp.Environment, controller: Controller, generator: torch.Generator) -> torch.Tensor:
    """Even envs follow ``controller``; odd envs act uniformly at random, 20% past the action bounds
    (so clamping acts). [E, A, act_dim] of the env's dtype."""
    low, high = env.action_bounds
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
    noise = low + (high - low) * (1.4 * u.to(low.device) - 0.2)
    even = (torch.arange(env.n_envs, device=low.device) % 2 == 0).view(-1, 1, 1)
    return torch.where(even, controller(env), noise).contiguous()


def assert_rows_match(fused: dict, reference: dict, where: str) -> None:
    """``helpers.assert_rows_match``, with ``final_obs`` compared only in the rows of envs that
    finished this step (the other rows are stale by design)."""
    fused, reference = dict(fused), dict(reference)
    done = (fused["terminated"] | fused["truncated"]).view(-1, 1, 1)
    for key in ("env.final_obs", "info.final_obs"):
        if key in fused:
            fused[key], reference[key] = torch.where(done, fused[key], 0), torch.where(done, reference[key], 0)
    assert_exact_or_close(fused, reference, where)


def check_parity(name: str, options: dict, controller: Controller, generator: torch.Generator, n_steps: int) -> dict:
    """Step the fused env and the reference side by side; every row must match.

    Returns:
        How many nonzero entries each bool/int output had over the rollout (so a test can assert
        that the comparison covered its interesting branches).
    """
    fused, reference = make_pair(name, **options)
    assert fused.fused and not reference.fused
    assert_rows_match(
        record(fused, (fused.obs, fused.reward, fused.terminated, fused.truncated, fused.info)),
        record(reference, (reference.obs, reference.reward, reference.terminated, reference.truncated, reference.info)),
        "reset",
    )
    seen: dict[str, int] = {}
    for t in range(n_steps):
        actions = mixed_actions(fused, controller, generator)
        fused_row = record(fused, fused.step(actions))
        assert_rows_match(fused_row, record(reference, reference.step(actions)), f"{name} step {t}")
        for key, value in fused_row.items():
            if key.startswith(("info.", "terminated", "truncated")) and not value.is_floating_point():
                seen[key] = seen.get(key, 0) + int(value.count_nonzero())
        # Re-sync the reference to the fused state: float rounding must not compound over a rollout.
        reference.set_state(fused.get_state())
    return seen


def success_rate(env: swarp.Environment, policy: Controller, n_steps: int) -> float:
    """Share of envs whose ``scenario.success()`` holds after ``n_steps`` steps of ``policy`` from a
    fresh reset (no auto-reset, the scenario's episode length or longer)."""
    env.reset(seed=0)
    with torch.no_grad():
        for _ in range(n_steps):
            env.step(policy(env))
    return float(env.scenario.success().double().mean())


def random_policy(seed: int = 0) -> Controller:
    """Uniform random actions within the bounds, from a seeded generator."""
    generator = torch.Generator().manual_seed(seed)

    def act(env: swarp.Environment) -> torch.Tensor:
        low, high = env.action_bounds
        u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
        return low + (high - low) * u

    return act
