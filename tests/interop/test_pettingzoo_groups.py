"""``swarp/interop/pettingzoo.py`` on environments with agent groups: each agent named
``"{group}_{i}"`` with its group's observation width and action space, PettingZoo's API tests on
mixed kinds and on different widths, and every agent's action reaching its group's slot."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")  # the pettingzoo extra; CI installs it

from gymnasium.spaces import Box, Discrete, MultiDiscrete  # noqa: E402
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.test.api_test import api_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.pettingzoo import SwarpParallelEnv, parallel_env  # noqa: E402
from tests.groups_support import NARROW, GroupedNavigation, NarrowNavigation  # noqa: E402

AGENTS = ["a_0", "a_1", "b_0", "b_1"]
#: Group "a" discrete (5 x 3 levels: one flat index of 15), group "b" continuous.
MIXED = {"action_space": {"a": "discrete"}, "action_nvec": {"a": (5, 3)}}


def wrap(scenario=GroupedNavigation, n_envs=1, env_index=0, **kwargs):
    kwargs.setdefault("max_steps", 20)
    sim = swarp.Environment(scenario(n_agents=4), n_envs=n_envs, device="cpu", seed=3, **kwargs)
    return SwarpParallelEnv(sim, env_index=env_index)


@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test_mixed_kinds(auto_reset):
    parallel_api_test(wrap(auto_reset=auto_reset, **MIXED), num_cycles=50)


@pytest.mark.parametrize("kinds", [{}, {"action_space": {"b": "multidiscrete"}}])
def test_parallel_api_test_different_widths(kinds):
    parallel_api_test(wrap(NarrowNavigation, **kinds), num_cycles=50)


def test_seed_and_aec_api_tests():
    parallel_seed_test(lambda: wrap(**MIXED), num_cycles=30)
    api_test(parallel_to_aec(wrap(NarrowNavigation, **MIXED)), num_cycles=30)


def test_each_agent_has_its_groups_spaces():
    env = wrap(NarrowNavigation, **MIXED)
    sim = env.sim
    assert env.possible_agents == AGENTS
    low, high = sim.action_bounds
    for agent in AGENTS:
        obs_space, act_space = env.observation_space(agent), env.action_space(agent)
        assert obs_space is env.observation_space(agent) and act_space is env.action_space(agent)
        assert isinstance(obs_space, Box) and obs_space.dtype == np.float32
        if agent.startswith("a"):
            assert obs_space.shape == (sim.obs_dim,)
            assert isinstance(act_space, Discrete) and act_space.n == 15 and act_space.dtype == np.int64
        else:
            index = 2 + int(agent[-1])
            assert obs_space.shape == (NARROW,)
            assert isinstance(act_space, Box) and act_space.shape == (2,)
            np.testing.assert_array_equal(act_space.low, low[index].numpy())
            np.testing.assert_array_equal(act_space.high, high[index].numpy())
    assert env.state_space.shape == (2 * sim.obs_dim + 2 * NARROW,)


def test_actions_reach_their_groups_and_outputs_are_the_groups_rows():
    """Env 1 of a batch of 3: the discrete agents' indices land in the index buffer, the continuous
    agents' commands in the world's action buffer; observations and rewards are each agent's row
    at its group's width; the other envs step with zeros."""
    env = wrap(NarrowNavigation, n_envs=3, env_index=1, **MIXED)
    sim = env.sim
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["b_1"], sim.obs[1, 3, :NARROW].numpy())
    actions = {"a_0": 14, "a_1": np.int32(7), "b_0": np.array([0.5, -0.25]), "b_1": [0.1, 0.2]}
    obs, rewards, terminations, truncations, _ = env.step(actions)
    assert sim.action_input.indices[1, :2, 0].tolist() == [14, 7]
    assert torch.equal(sim.action_input.indices[[0, 2]], torch.zeros(2, 4, 1, dtype=torch.int64))
    assert torch.allclose(sim.world.actions[1, 2:], torch.tensor([[0.5, -0.25], [0.1, 0.2]]))
    for agent, index in zip(AGENTS, range(4), strict=True):
        width = sim.obs_dim if agent.startswith("a") else NARROW
        assert obs[agent].shape == (width,) and obs[agent].dtype == np.float32
        np.testing.assert_array_equal(obs[agent], sim.obs[1, index, :width].numpy())
        assert rewards[agent] == float(sim.reward[1, index])
    np.testing.assert_array_equal(env.state(), np.concatenate([obs[agent] for agent in AGENTS]))
    assert set(terminations) == set(truncations) == set(AGENTS)
    env.step({"b_0": np.zeros(2)})  # agents left out: index 0 (a's middle level: no command), zeros
    assert not bool(sim.invalid_actions())
    assert torch.equal(sim.world.actions[1], torch.zeros(4, 2))


def test_bad_actions_name_the_agents_space():
    env = wrap(NarrowNavigation, **MIXED)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"actions\['a_0'\] must be integer indices"):
        env.step({"a_0": 1.0})
    with pytest.raises(ValueError, match=r"actions\['a_1'\] must have shape \[\] = \[\]"):
        env.step({"a_1": np.array([1, 2])})
    with pytest.raises(ValueError, match=r"actions\['b_0'\] must have shape \[act_dim\] = \[2\]"):
        env.step({"b_0": np.zeros(3)})
    with pytest.raises(KeyError, match=r"unknown agent\(s\) \['agent_0'\]"):
        env.step({"agent_0": np.zeros(2)})


def test_parallel_env_of_a_registered_grouped_scenario():
    swarp.register_scenario("grouped_navigation_pz", GroupedNavigation)
    try:
        env = parallel_env("grouped_navigation_pz", n_agents=4, max_cycles=10, action_space={"b": "multidiscrete"})
        assert isinstance(env.action_space("b_1"), MultiDiscrete) and isinstance(env.action_space("a_0"), Box)
        parallel_api_test(env, num_cycles=20)
    finally:
        swarp.unregister_scenario("grouped_navigation_pz")
