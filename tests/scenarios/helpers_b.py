"""Checks shared by the tests of the sampling, give-way and spread scenarios.

Each scenario test module supplies its name, options and a scripted controller; these helpers run
the checks every fused scenario owes: fused/reference parity over random rollouts (discrete flags
exact), graph = replay = eager bit for bit, masked resets touching only masked envs, one-launch
resets, determinism per seed, no host transfers, and the controller beating random actions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import swarp
from swarp.core.launch import LAUNCH_MODE_ENV, Launcher
from tests.env.test_environment import HostTransferError, assert_bit_identical, forbid_host_transfers, record

#: Fused kernels against the torch reference, float32 [m], [m/s], [-].
PARITY_ATOL = 1e-5
N_PARITY_ENVS = 8

Controller = Callable[[swarp.Environment], torch.Tensor]


def make_pair(name: str, **options) -> tuple[swarp.Environment, swarp.Environment]:
    """The fused env and the torch reference env of one configuration (same seed, auto-reset)."""
    options = dict(dict(n_envs=N_PARITY_ENVS, device="cpu", seed=7, auto_reset=True), **options)
    return swarp.make(name, fused=True, **options), swarp.make(name, fused=False, **options)


def mixed_actions(env: swarp.Environment, controller: Controller, generator: torch.Generator) -> torch.Tensor:
    """Even envs follow ``controller``; odd envs act uniformly at random, 20% past the action bounds
    (so clamping acts). [E, A, act_dim] of the env's dtype."""
    low, high = env.action_bounds
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
    noise = low + (high - low) * (1.4 * u.to(low.device) - 0.2)
    even = (torch.arange(env.n_envs, device=low.device) % 2 == 0).view(-1, 1, 1)
    return torch.where(even, controller(env), noise).contiguous()


def is_exact(key: str, value: torch.Tensor) -> bool:
    """Integer and bool entries must match exactly; floats within ``PARITY_ATOL``."""
    return not value.is_floating_point()


def assert_rows_match(fused: dict, reference: dict, where: str) -> None:
    assert fused.keys() == reference.keys()
    for key, a in fused.items():
        b = reference[key]
        if key == "env.final_obs" or key == "info.final_obs":
            # Rows of envs that did not finish are stale by design; compare the finished ones.
            done = (fused["terminated"] | fused["truncated"]).view(-1, 1, 1)
            a, b = torch.where(done, a, 0), torch.where(done, b, 0)
        if is_exact(key, a):
            assert torch.equal(a, b), f"{where}: {key} differs: fused {a.tolist()} vs reference {b.tolist()}"
        else:
            torch.testing.assert_close(a, b, atol=PARITY_ATOL, rtol=0.0, msg=lambda m, k=key: f"{where}: {k}: {m}")


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


def rollout(env: swarp.Environment, controller: Controller, n_steps: int, seed: int = 0) -> list[dict]:
    """Record ``n_steps`` steps of the mixed controller/noise policy from the env's current state."""
    generator = torch.Generator().manual_seed(seed)
    return [record(env, env.step(mixed_actions(env, controller, generator))) for _ in range(n_steps)]


def check_graph_replay_eager(
    name: str, options: dict, controller: Controller, n_steps: int, monkeypatch, device: str = "cpu"
) -> None:
    """The fused step as a captured graph (a CUDA graph on the GPU, Warp's C++-replayed graph on the
    CPU), as recorded-launch replay and as eager launches: same bits."""
    make = dict(dict(n_envs=4, device=device, seed=3, auto_reset=True), **options)
    graph_env = swarp.make(name, **make)
    assert graph_env.fused and graph_env.execution_mode == "graph"
    graph = rollout(graph_env, controller, n_steps)
    assert sum(int(row["terminated"].sum() + row["truncated"].sum()) for row in graph) > 0, "no auto-reset seen"
    replay_env = swarp.make(name, use_graph=False, **make)
    assert replay_env.execution_mode == "replay"
    assert_bit_identical(graph, rollout(replay_env, controller, n_steps))
    monkeypatch.setenv(LAUNCH_MODE_ENV, "eager")
    eager_env = swarp.make(name, use_graph=False, **make)
    assert eager_env.execution_mode == "eager"
    assert_bit_identical(graph, rollout(eager_env, controller, n_steps))


def check_masked_reset(name: str, options: dict, controller: Controller, fused: bool, device: str = "cpu") -> None:
    """``reset_at(mask)`` changes only masked envs, and their new episodes do not depend on which
    other envs were reset with them."""
    make = dict(dict(n_envs=4, device=device, seed=1, fused=fused), **options)
    env = swarp.make(name, **make)
    rollout(env, controller, 5)
    before = env.get_state()
    mask = torch.tensor([False, True, False, True], device=device)
    assert env.reset_at(mask) is env.obs
    after = env.get_state()
    for key, value in before.items():
        if value.shape[:1] != (env.n_envs,):
            assert torch.equal(after[key], value), key  # batch-wide entries (the seed)
            continue
        assert torch.equal(after[key][~mask], value[~mask]), f"{key} changed in an env outside the mask"
    assert not torch.equal(after["state.pos"][mask], before["state.pos"][mask])
    assert bool((after["env.step_count"][mask] == 0).all())
    assert torch.equal(after["env.episode"][mask], before["env.episode"][mask] + 1)
    full = swarp.make(name, **make)
    full.reset_at(torch.ones(env.n_envs, dtype=torch.bool, device=device))
    assert torch.equal(full.obs[mask], env.obs[mask])
    for key, value in full.scenario.state_tensors().items():
        assert torch.equal(value[mask], env.scenario.state_tensors()[key][mask]), key


def check_reset_draws_identical(name: str, options: dict) -> None:
    """Full and masked resets: the fused state (agents and scenario tensors) equals the torch
    reference's bit for bit (the kernels compile without FMA contraction and evaluate drawn
    quantities the way the reference does)."""
    fused, reference = make_pair(name, **options)
    mask = torch.arange(fused.n_envs) % 3 == 0
    for seed in (0, 1, 123456):
        fused.reset(seed=seed)
        reference.reset(seed=seed)
        for _ in range(2):  # a full reset, then a masked one
            for key in ("pos", "theta", "vel", "speed", "ang_vel"):
                assert torch.equal(getattr(fused.state, key), getattr(reference.state, key)), f"seed {seed}: {key}"
            expected = reference.scenario.state_tensors()
            for key, value in fused.scenario.state_tensors().items():
                if key == "prev_dist":  # computed from the draws by the observe kernels
                    torch.testing.assert_close(value, expected[key], atol=PARITY_ATOL, rtol=0)
                else:
                    assert torch.equal(value, expected[key]), f"seed {seed}: scenario.{key}"
            fused.reset_at(mask)
            reference.reset_at(mask)


class CountingLauncher(Launcher):
    """Eager launches, counted by kernel key."""

    def __init__(self) -> None:
        self.kernels: list[str] = []

    def launch(self, kernel, dim, inputs, outputs=(), device=None) -> None:
        self.kernels.append(kernel.key)
        super().launch(kernel, dim, inputs, outputs, device)


def check_reset_is_one_launch(name: str, options: dict) -> None:
    """The scenario's reset is a single masked launch, and it is capture-safe."""
    env = swarp.make(name, n_envs=4, device="cpu", seed=0, **options)
    assert env.scenario.supports_graph_reset()
    launcher = CountingLauncher()
    env.reset_mask.copy_(torch.tensor([True, False, False, True]))
    env.scenario.launch_reset(launcher, env._reset_mask)
    assert len(launcher.kernels) == 1, launcher.kernels


def check_determinism(name: str, options: dict, controller: Controller) -> None:
    """Same seed, same bits; another seed, other layouts."""
    make = dict(dict(n_envs=4, device="cpu", auto_reset=True), **options)
    first = rollout(swarp.make(name, seed=5, **make), controller, 30)
    assert_bit_identical(first, rollout(swarp.make(name, seed=5, **make), controller, 30))
    other = swarp.make(name, seed=6, **make)
    assert not torch.equal(other.get_state()["state.pos"], swarp.make(name, seed=5, **make).get_state()["state.pos"])


def check_no_host_transfers(
    name: str, options: dict, fused: bool, generator: torch.Generator, device: str = "cpu"
) -> None:
    """Steps and masked resets run without a device-to-host transfer."""
    env = swarp.make(name, n_envs=4, device=device, seed=0, fused=fused, auto_reset=True, **options)
    low, high = env.action_bounds
    shape = (4, env.n_agents, env.act_dim)
    noise = [low + (high - low) * torch.rand(shape, generator=generator).to(device) for _ in range(12)]
    mask = torch.tensor([True, False, True, False], device=device)
    env.step(noise[0])  # the first call records the launches (and may compile)
    env.reset_at(mask)
    with forbid_host_transfers():
        try:
            bool(torch.ones(1))
            raise AssertionError("the host-transfer patch has no teeth")
        except HostTransferError:
            pass
        for actions in noise[1:]:
            env.step(actions)
        env.reset_at(mask)


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
