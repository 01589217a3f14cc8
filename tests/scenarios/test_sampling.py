"""The sampling scenario (``swarp/scenarios/sampling.py`` and its Warp twin ``sampling_kernels.py``)."""

import pytest
import torch

import swarp
from swarp.scenarios.sampling import greedy_actions
from tests.support import check_parity, controlled_actions, random_policy, success_rate

NAME = "sampling"
PARITY_CASES = {
    "default": dict(max_steps=12),
    # Few, large cells and many agents: agents share cells, so the lowest-index rule decides.
    "shared_cells": dict(n_agents=6, grid_cells=4, world_size=0.5, shared_reward=False, max_steps=12),
    "no_patch": dict(patch_radius=0, grid_cells=7, max_steps=12),
    "wide_patch_float64": dict(patch_radius=2, n_gaussians=5, dtype="float64", max_steps=12),
    # The grid neighbor search inside the observation kernel.
    "grid_neighbors": dict(n_agents=130, world_size=2.0, grid_cells=24, n_envs=2, max_steps=12, neighbor_method="grid"),
}


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    seen = check_parity(NAME, PARITY_CASES[case], greedy_actions, generator, n_steps=30)
    assert seen["truncated"] > 0


def agent_cells(env: swarp.Environment) -> torch.Tensor:
    """[E, A] field cell of every agent, computed here from positions (independent of the scenario)."""
    cfg = env.scenario.cfg
    width = 2 * cfg.world_size / cfg.grid_cells
    ij = torch.floor((env.state.pos.double() + cfg.world_size) / width).long().clamp(0, cfg.grid_cells - 1)
    return ij[..., 1] * cfg.grid_cells + ij[..., 0]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_each_cell_is_collected_once_by_one_agent(fused, generator):
    """Own rewards add up to exactly what left the field, cells under agents are empty after every
    step, values never grow, and agents that share a cell are not paid twice for it."""
    env = swarp.make(
        NAME,
        n_envs=6,
        device="cpu",
        seed=4,
        fused=fused,
        n_agents=6,
        grid_cells=4,
        world_size=0.5,
        shared_reward=False,
        max_steps=1000,
    )
    cells = agent_cells(env)
    assert bool((env.scenario.field.gather(1, cells) == 0).all()), "spawn cells are consumed at the reset"
    shared = 0
    for _ in range(25):
        before = env.scenario.field.clone()
        _, reward, _, _, info = env.step(controlled_actions(env, greedy_actions, generator))
        after = env.scenario.field
        cells = agent_cells(env)
        assert bool((after.gather(1, cells) == 0).all())
        assert bool((after <= before).all()) and bool(((after == before) | (after == 0)).all())
        torch.testing.assert_close(reward.double().sum(1), (before - after).double().sum(1), atol=1e-5, rtol=0)
        shared += int((cells.unsqueeze(1) == cells.unsqueeze(2)).sum() - cells.numel())
        mass = env.scenario.row_mass.double().sum(1)
        torch.testing.assert_close(info["collected_fraction"].double(), env.scenario.collected.double() / mass)
        assert torch.equal(info["success"], info["collected_fraction"] >= env.scenario.cfg.success_fraction)
    assert shared > 0, "the test needs agents sharing cells"


def test_observation_shows_what_is_left_around_the_agent():
    env = swarp.make(NAME, n_envs=3, device="cpu", seed=1, n_agents=4, grid_cells=10, patch_radius=2)
    assert env.obs_dim == 4 + 25
    generator = torch.Generator().manual_seed(0)
    for _ in range(6):
        obs, *_ = env.step(controlled_actions(env, greedy_actions, generator))
        torch.testing.assert_close(obs[..., 0:2], env.state.pos)
        torch.testing.assert_close(obs[..., 2:4], env.state.vel)
        G = 10
        cells = agent_cells(env)
        field = torch.nn.functional.pad(env.scenario.field.view(3, G, G), (2, 2, 2, 2))  # zeros past the edge
        for e in range(3):
            for a in range(4):
                iy, ix = int(cells[e, a]) // G, int(cells[e, a]) % G
                patch = field[e, iy : iy + 5, ix : ix + 5].flatten()  # rows dy = -2..2, columns dx = -2..2
                assert torch.equal(obs[e, a, 4:], patch), (e, a)
                assert float(obs[e, a, 4 + 12]) == 0.0  # the agent's own cell is taken


def test_standing_still_collects_nothing_more():
    env = swarp.make(NAME, n_envs=4, device="cpu", seed=2, n_agents=4)
    zeros = torch.zeros(4, 4, 2)
    for _ in range(3):
        _, reward, *_ = env.step(zeros)
        assert bool((reward == 0).all())
    assert bool((env.scenario.collected == 0).all())


def test_greedy_controller_beats_random():
    env = swarp.make(NAME, n_envs=32, device="cpu", seed=0)
    n_steps = env.max_steps
    greedy = success_rate(env, greedy_actions, n_steps)
    greedy_fraction = float(env.info["collected_fraction"].mean())
    random = success_rate(env, random_policy(), n_steps)
    random_fraction = float(env.info["collected_fraction"].mean())
    assert greedy >= 0.8 and random <= 0.2, (greedy, random)
    assert greedy_fraction > 2 * random_fraction, (greedy_fraction, random_fraction)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "sampling option n_agents must be an int >= 1"),
        (dict(grid_cells=0), "grid_cells must be an int >= 1"),
        (dict(n_gaussians=True), "n_gaussians must be an int"),
        (dict(patch_radius=3), r"patch_radius must be an int >= 0 and <= 2"),
        (dict(sigma_min=0.0), "sigma_min must be a finite number > 0"),
        (dict(sigma_min=0.5, sigma_max=0.2), r"sigma_max \(0.2\) must be >= sigma_min \(0.5\)"),
        (dict(success_fraction=1.5), r"success_fraction must be a finite number > 0 and <= 1.0"),
        (dict(shared_reward=1), "shared_reward must be a bool"),
        (dict(field="gauss"), "unknown keyword"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make(NAME, n_envs=1, device="cpu", **options)
