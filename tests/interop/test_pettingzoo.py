"""``swarp/interop/pettingzoo.py``: the ParallelEnv adapter under PettingZoo's API tests."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")  # the pettingzoo extra; CI installs it

from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.test.api_test import api_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.pettingzoo import SwarpParallelEnv, parallel_env  # noqa: E402


@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test(auto_reset):
    parallel_api_test(parallel_env(max_steps=30, auto_reset=auto_reset), num_cycles=100)


def test_parallel_seed_test():
    parallel_seed_test(lambda: parallel_env(max_steps=30), num_cycles=50)


def test_aec_conversion_passes_api_test():
    api_test(parallel_to_aec(parallel_env(max_steps=30)), num_cycles=60)


def test_agents_spaces_and_episode_end():
    env = parallel_env(n_agents=3, max_steps=5)
    sim = env.sim
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    low, high = sim.action_bounds
    for i, agent in enumerate(env.possible_agents):
        assert env.observation_space(agent).shape == (sim.obs_dim,)
        np.testing.assert_array_equal(env.action_space(agent).low, low[i].numpy())
        np.testing.assert_array_equal(env.action_space(agent).high, high[i].numpy())
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(env.agents) == set(env.possible_agents)
    np.testing.assert_array_equal(env.state(), np.concatenate([obs[a] for a in env.possible_agents]))
    assert set(infos["agent_0"]) >= {"dist_to_goal", "on_goal", "collisions", "neighbor_overflow"}
    for _ in range(5):
        assert env.agents == env.possible_agents
        obs, rewards, terminations, truncations, infos = env.step({a: np.zeros(2, np.float32) for a in env.agents})
        assert isinstance(rewards["agent_0"], float)
    assert all(truncations.values()) and not any(terminations.values()) and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_one_env_of_a_batch():
    sim = swarp.make("navigation", n_envs=3, device="cpu", seed=2, max_steps=10)
    env = SwarpParallelEnv(sim, env_index=1, render_mode="rgb_array")
    obs, _ = env.reset(seed=4)
    np.testing.assert_array_equal(obs["agent_2"], sim.obs[1, 2].numpy())
    actions = {a: env.action_space(a).sample() for a in env.agents}
    obs, *_ = env.step(actions)
    np.testing.assert_array_equal(obs["agent_0"], sim.obs[1, 0].numpy())
    assert env.render().shape[2] == 3
    with pytest.raises(ValueError, match="env_index"):
        SwarpParallelEnv(sim, env_index=3)
