"""The variable_navigation scenario: navigation with 2-8 agents an env and agents leaving on their
goals, by default. Its mechanics are navigation's (tests/scenarios/test_navigation_alive.py); here
its defaults, its twins on them, its scripted controller and its picture's rule (gone agents are not
drawn)."""

import numpy as np
import pytest
import torch

import swarp
from swarp.render.frame import Renderer
from tests.support import episode_success_rate, parity_rollout, scripted_policy


def test_defaults_draw_envs_of_different_sizes():
    env = swarp.make("variable_navigation", n_envs=64, device="cpu")
    cfg = env.scenario.cfg
    assert (env.n_agents, cfg.min_agents, cfg.leave_on_goal) == (8, 2, True)
    counts = env.alive.sum(dim=1)
    assert counts.min() >= 2 and counts.max() <= 8 and len(counts.unique()) >= 5
    assert torch.equal(env.obs[~env.alive], torch.zeros_like(env.obs[~env.alive]))
    fixed = swarp.make("variable_navigation", n_envs=4, device="cpu", n_agents=3)
    assert fixed.alive.all() and fixed.n_agents == 3


def test_fused_matches_torch_reference_on_its_defaults(generator):
    seen = parity_rollout("variable_navigation", {"max_steps": 40}, 60, generator)
    assert seen["terminated"] > 0 and seen["truncated"] > 0


def test_scripted_controller_solves_it(generator):
    env = swarp.make("variable_navigation", n_envs=64, device="cpu", max_steps=100)
    assert episode_success_rate(env, scripted_policy, generator) >= 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_gone_agents_are_not_drawn(seed):
    """The frame draws present agents and their goals only: the same state drawn with every agent
    marked present shows more of them."""
    env = swarp.make("variable_navigation", n_envs=4, device="cpu", seed=seed, n_agents=(2, 3))
    index = int(torch.nonzero(env.alive.sum(1) < env.n_agents)[0])
    drawn = Renderer(env).render(env_index=index)
    env.alive.fill_(True)
    every = Renderer(env).render(env_index=index)
    assert colored(drawn) < colored(every)


def colored(image: np.ndarray) -> int:
    """Pixels of a color (agents and goals; the arena, its margin and the arrows are gray)."""
    channels = image.astype(int)
    return int(((channels.max(-1) - channels.min(-1)) > 30).sum())
