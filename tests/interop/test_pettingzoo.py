"""``swarp/interop/pettingzoo.py``: the ParallelEnv adapter under PettingZoo's API tests."""

import numpy as np
import pytest
import torch

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


# --- the boundary: actions, options, close ------------------------------------------------------


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        ({"agent_0": 0.7}, ValueError, r"actions\['agent_0'\] must have shape \[act_dim\] = \[2\], got \[\]"),
        ({"agent_0": [0.7]}, ValueError, r"got \[1\]"),
        ({"agent_0": np.zeros((1, 2))}, ValueError, r"got \[1, 2\]"),
        ({"agent_0": [0.1, 0.2, 0.3]}, ValueError, r"got \[3\]"),
        ({"agent_0": None}, TypeError, r"actions\['agent_0'\] must be real numbers .* got NoneType None"),
        ({"agent_0": "left"}, TypeError, "got str"),
        ({"agent_0": np.array([True, False])}, TypeError, "dtype bool"),
        ({"agent_9": np.zeros(2)}, KeyError, r"unknown agent\(s\) \['agent_9'\]"),
        ({0: np.zeros(2)}, KeyError, r"unknown agent\(s\) \[0\]"),
        (np.zeros((4, 2)), TypeError, r"actions must be a dict \{agent name: action\}, got ndarray"),
        ([np.zeros(2)] * 4, TypeError, "got list"),
    ],
)
def test_bad_actions_raise_clear_errors_and_step_nothing(actions, error, match):
    """Issue 29 item 6: 0.7 and [0.7] were broadcast, None read as NaN, a non-dict raised
    ``unhashable type``."""
    env = parallel_env(max_steps=30)
    env.reset(seed=0)
    state = env.sim.get_state()
    with pytest.raises(error, match=match):
        env.step(actions)
    assert all(torch.equal(state[k], v) for k, v in env.sim.get_state().items())
    assert not bool(env.sim.invalid_actions())
    assert env.agents == env.possible_agents


def test_actions_of_any_real_dtype_and_huge_values():
    envs = [parallel_env(max_steps=30) for _ in range(4)]
    for env in envs:
        env.reset(seed=1)
    high = envs[0].action_space("agent_0").high
    values = (high, high.astype(np.float64).tolist(), np.full(2, 1e300), torch.tensor(high))
    obs = [env.step({"agent_0": v})[0]["agent_0"] for env, v in zip(envs, values, strict=True)]
    assert all(np.array_equal(obs[0], o) for o in obs[1:])
    assert not any(bool(env.sim.invalid_actions()) for env in envs), "1e300 is finite: it clamps"
    envs[0].step({"agent_0": np.array([np.nan, 0.0])})
    assert bool(envs[0].sim.invalid_actions()), "NaN acts as 0 and raises the flag, as documented"


def test_reset_options_and_close():
    env = parallel_env(max_steps=30)
    with pytest.raises(RuntimeError, match=r"no live agents: the episode is over \(or never began\), call reset"):
        env.step({})  # before the first reset
    with pytest.raises(TypeError, match="options must be a dict"):
        env.reset(options=[1])
    env.reset(seed=np.int64(3), options={"anything": 1})  # PettingZoo's API test passes arbitrary options
    env.close()
    env.close()  # idempotent
    with pytest.raises(RuntimeError, match="the Environment is closed"):
        env.reset()
    with pytest.raises(RuntimeError, match="the Environment is closed"):
        env.step({"agent_0": np.zeros(2)})
