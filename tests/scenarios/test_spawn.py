"""The torch paths' ranked spawn (``arena.spawn_torch``, one Warp launch) against its specification
in torch ops (``arena.spawn_torch_twin``): the same bits, points and agent state, for every arena
scenario, both precisions, random masks and later episodes; rows outside the mask are zero."""

import pytest
import torch

import swarp
from swarp.scenarios.framework import arena

ARENA_SCENARIOS = ["spread", "formation", "discovery", "flocking", "sampling"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ARENA_SCENARIOS)
def test_the_spawn_kernel_draws_the_bits_of_its_torch_twin(name, dtype, generator):
    env = swarp.make(name, n_envs=16, device="cpu", fused=False, dtype=dtype, seed=7, env_offset=5)
    scenario = env.scenario
    n_points = scenario.n_agents + 3
    for _ in range(3):
        mask = torch.rand(16, generator=generator) < 0.5
        before = [t.clone() for t in env.state]
        points = arena.spawn_torch(scenario, mask, n_points)
        kernel_state = [t.clone() for t in env.state]
        for tensor, old in zip(env.state, before, strict=True):
            tensor.copy_(old)
        expected = arena.spawn_torch_twin(scenario, mask, n_points)
        assert points.shape == (16, n_points, 2) and torch.equal(points, expected)
        assert all(torch.equal(a, b) for a, b in zip(kernel_state, env.state, strict=True))
        assert not points[~mask].any()  # rows outside the mask are zero
        unmasked = [torch.equal(a[~mask], b[~mask]) for a, b in zip(kernel_state, before, strict=True)]
        assert all(unmasked), "the spawn wrote envs outside its mask"
        env.episode.add_(1)  # the next episode draws anew
