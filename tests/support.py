"""Helpers shared by the whole test suite, in one module: ``from tests.support import ...``.

* Navigation envs, action sequences, recorded rollouts and bit-identity (``make_env``,
  ``noise_sequence``, ``goal_policy``, ``record``, ``rollout``, ``assert_bit_identical``).
* The hot loop's invariants: no host transfer (``forbid_host_transfers``, from ``swarp.testing``), no steady-state
  allocation on CUDA (``assert_no_steady_state_allocations``).
* A fused scenario against its torch reference (``make_pair``, ``parity_rollout``,
  ``check_parity``; floats within ``PARITY_ATOL``, flags and counts exact) and success rates of a
  policy (``episode_success_rate``, ``success_rate``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator

import pytest
import torch
import warp as wp

import swarp
from swarp.testing import (  # noqa: F401 (re-exported: the contract's pieces are the package's)
    HOST_TRANSFERS,
    PARITY_ATOL,
    HostTransferError,
    first_difference,
    flat_outputs,
    forbid_host_transfers,
    random_actions,
    record,
    row_difference,
)
from swarp.testing import rollout as rollout_actions  # noqa: F401 (pre-drawn actions, every step recorded)

#: The CPU everywhere; CUDA (where the fused path runs as one captured graph) on GPU machines.
DEVICES = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
PATHS = pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])

# --- navigation envs, rollouts, bit identity ---------------------------------------------------------

N_ENVS = 4
N_AGENTS = 4
#: Episode length [steps]: short, so a rollout crosses several auto-resets.
MAX_STEPS = 20
N_STEPS = 200
#: A small arena: agents driving at their goals reach them well within ``MAX_STEPS``.
OPTIONS = dict(n_agents=N_AGENTS, world_size=0.5, n_obstacles=2, max_steps=MAX_STEPS)


def make_env(device: str = "cpu", **kwargs) -> swarp.Environment:
    options = dict(n_envs=N_ENVS, device=device, seed=0, **OPTIONS)
    options.update(kwargs)
    return swarp.make("navigation", **options)


def noise_sequence(env: swarp.Environment, n_steps: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Uniform random actions, 20% beyond the action bounds (so clamping acts), on the env's device."""
    low, high = (b.cpu() for b in env.action_bounds)
    sequence = []
    for _ in range(n_steps):
        u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator)
        sequence.append((low + (high - low) * (1.4 * u - 0.2)).to(env.torch_device))
    return sequence


def goal_policy(env: swarp.Environment, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Even envs drive at their goals (so episodes terminate), odd envs act on ``noise``."""
    seek = obs[..., 6:8] / env.stepper.dt
    even = (torch.arange(env.n_envs, device=obs.device) % 2 == 0).view(-1, 1, 1)
    return torch.where(even, seek, noise)


def rollout(env: swarp.Environment, noise: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Step ``env`` from its current state with the goal-seeking/noise policy; record every step."""
    obs = env.obs.clone()
    trajectory = []
    for step_noise in noise:
        row = record(env, env.step(goal_policy(env, obs, step_noise)))
        obs = row["obs"]
        trajectory.append(row)
    return trajectory


def assert_bit_identical(first: list[dict], second: list[dict]) -> None:
    assert len(first) == len(second)
    difference = first_difference(first, second)
    assert difference is None, f"{difference} differs"


def without_stale_rows(trajectory: list[dict]) -> list[dict]:
    """Drop what a step leaves stale by design: ``final_obs`` rows of envs that did not finish."""
    cleaned = []
    for row in trajectory:
        row = dict(row)
        done = (row["terminated"] | row["truncated"]).view(-1, 1, 1)
        row["info.final_obs"] = torch.where(done, row["info.final_obs"], torch.zeros_like(row["info.final_obs"]))
        del row["env.final_obs"]
        cleaned.append(row)
    return cleaned


def count_events(trajectory: list[dict]) -> tuple[int, int]:
    """(terminations, truncations) over a trajectory."""
    terminated = sum(int(row["terminated"].sum()) for row in trajectory)
    truncated = sum(int(row["truncated"].sum()) for row in trajectory)
    return terminated, truncated


# --- the hot loop's invariants -------------------------------------------------------------------------


def step_and_reset_without_host_transfers(env, noise: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Step ``env`` through ``noise`` (the first step outside, to record or capture), then reset the
    envs of ``mask`` and of ``~mask``, with every host read patched to raise. Returns the episode
    counters from before the checked part."""
    env.step(noise[0])  # the first call records the launches (and may compile)
    env.reset_at(mask)
    episode_before = env.episode.clone()
    with forbid_host_transfers():
        with pytest.raises(HostTransferError):
            bool(torch.ones(1))  # the patch has teeth
        obs = env.obs
        for step_noise in noise[1:]:
            obs, *_ = env.step(goal_policy(env, obs, step_noise))
        env.reset_at(mask)
        env.reset_at(~mask)
    return episode_before


def assert_no_steady_state_allocations(env: swarp.Environment, n_steps: int = 1000, reset: bool = True) -> None:
    """Step a CUDA ``env`` ``n_steps`` times on random actions (and, with ``reset``, ``reset_at``
    its finished envs): neither torch's allocator nor Warp's mempool may grow, even transiently."""
    actions = torch.zeros(env.n_envs, env.n_agents, env.act_dim, device=env.torch_device)
    for _ in range(10):
        env.step(actions)
    env.reset_at(env.done)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch_before = torch.cuda.memory_allocated()
    warp_before = wp.get_mempool_used_mem_current(env.device)
    for _ in range(n_steps):
        actions.uniform_(-1.0, 1.0)
        env.step(actions)
    if reset:
        env.reset_at(env.done)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == torch_before
    assert torch.cuda.max_memory_allocated() == torch_before, "transient torch allocations in the step"
    assert wp.get_mempool_used_mem_current(env.device) == warp_before


# --- fused scenarios against their torch reference ----------------------------------------------------

#: Fused kernels against the torch reference, float32 [m], [m/s], [-] (obs, reward, distances, state).
PARITY_RTOL = 0.0
N_PARITY_ENVS = 16

Policy = Callable[[swarp.Environment, torch.Generator], torch.Tensor]


def make_pair(name: str, **options) -> tuple[swarp.Environment, swarp.Environment]:
    """The fused env and the torch reference env of one configuration (same seed, auto-reset, CPU)."""
    options = dict(dict(n_envs=N_PARITY_ENVS, device="cpu", seed=7, auto_reset=True), **options)
    return swarp.make(name, fused=True, **options), swarp.make(name, fused=False, **options)


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


def is_exact(tensor: torch.Tensor) -> bool:
    """Flags and counts (bool, integer dtypes) must match exactly between the twins."""
    return not tensor.is_floating_point()


def assert_rows_match(fused: dict, reference: dict, where: str, atol: float = PARITY_ATOL) -> None:
    key = row_difference(fused, reference, atol)
    assert key is None, f"{where}: {key} differs: fused {fused.get(key)} vs reference {reference.get(key)}"


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


Controller = Callable[[swarp.Environment], torch.Tensor]


def controlled_actions(env: swarp.Environment, controller: Controller, generator: torch.Generator) -> torch.Tensor:
    """Even envs follow ``controller``; odd envs act uniformly at random, 20% past the action bounds
    (so clamping acts). [E, A, act_dim] of the env's dtype."""
    low, high = env.action_bounds
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
    noise = low + (high - low) * (1.4 * u.to(low.device) - 0.2)
    even = (torch.arange(env.n_envs, device=low.device) % 2 == 0).view(-1, 1, 1)
    return torch.where(even, controller(env), noise).contiguous()


def assert_finished_rows_match(fused: dict, reference: dict, where: str) -> None:
    """``assert_rows_match``, with ``final_obs`` compared only in the rows of envs that finished
    this step (the other rows are stale by design)."""
    fused, reference = dict(fused), dict(reference)
    done = (fused["terminated"] | fused["truncated"]).view(-1, 1, 1)
    for key in ("env.final_obs", "info.final_obs"):
        if key in fused:
            fused[key], reference[key] = torch.where(done, fused[key], 0), torch.where(done, reference[key], 0)
    assert_rows_match(fused, reference, where)


def check_parity(name: str, options: dict, controller: Controller, generator: torch.Generator, n_steps: int) -> dict:
    """Step the fused env and the reference side by side; every row must match.

    Returns:
        How many nonzero entries each bool/int output had over the rollout (so a test can assert
        that the comparison covered its interesting branches).
    """
    fused, reference = make_pair(name, **options)
    assert fused.fused and not reference.fused
    assert_finished_rows_match(
        record(fused, (fused.obs, fused.reward, fused.terminated, fused.truncated, fused.info)),
        record(reference, (reference.obs, reference.reward, reference.terminated, reference.truncated, reference.info)),
        "reset",
    )
    seen: dict[str, int] = {}
    for t in range(n_steps):
        actions = controlled_actions(fused, controller, generator)
        fused_row = record(fused, fused.step(actions))
        assert_finished_rows_match(fused_row, record(reference, reference.step(actions)), f"{name} step {t}")
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


def template_scenario(name: str, folder) -> Iterator[type]:
    """Generator for a module fixture: the scenario class ``python -m swarp.scenario new NAME``
    writes into ``folder`` (torch only), imported as a module (``sys.modules``, as an import does:
    ``torch.compile`` reads its globals) and registered; unregistered after."""
    from swarp.scenarios.authoring.template import write_scenario
    from swarp.scenarios.framework.base import get_scenario

    path, _ = write_scenario(name, folder)
    spec = importlib.util.spec_from_file_location(f"_swarp_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        yield get_scenario(name)
    finally:
        swarp.unregister_scenario(name)
        del sys.modules[spec.name]


def lidar_refused(name: str) -> bool:
    """Whether ``swarp.make(name, lidar_rays=...)`` is refused because the scenario's agent groups
    have different observation widths (a lidar's columns cannot follow them); checks the refusal."""
    from swarp.scenarios.framework.base import get_scenario

    spec = get_scenario(name)().make_world()
    if len({group.obs_dim for group in spec.groups}) <= 1:
        return False
    with pytest.raises(ValueError, match="lidar_rays needs groups of one observation width"):
        swarp.make(name, n_envs=1, device="cpu", lidar_rays=2)
    return True
