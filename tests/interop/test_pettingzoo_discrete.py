"""``swarp/interop/pettingzoo.py`` with discrete and multi-discrete actions: PettingZoo's API tests
and each agent's index reaching the step."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")  # the pettingzoo extra; CI installs it

from gymnasium.spaces import Discrete, MultiDiscrete  # noqa: E402
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.test.api_test import api_test  # noqa: E402
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402

from swarp.core.spaces import decode_torch  # noqa: E402
from swarp.interop.pettingzoo import parallel_env  # noqa: E402

KINDS = ["discrete", "multidiscrete"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test(kind, auto_reset):
    parallel_api_test(parallel_env(max_steps=30, auto_reset=auto_reset, action_space=kind, n_agents=3), num_cycles=100)


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_seed_test_and_aec_api_test(kind):
    parallel_seed_test(lambda: parallel_env(max_steps=30, action_space=kind, action_nvec=(5, 4)), num_cycles=50)
    api_test(parallel_to_aec(parallel_env(max_steps=30, action_space=kind)), num_cycles=60)


@pytest.mark.parametrize("kind", KINDS)
def test_spaces_and_indices_reach_the_step(kind):
    env = parallel_env(n_agents=3, max_steps=5, action_space=kind, action_nvec=(5, 4))
    sim = env.sim
    for agent in env.possible_agents:
        space = env.action_space(agent)
        assert space is env.action_space(agent) and space.dtype == np.int64
        if kind == "discrete":
            assert isinstance(space, Discrete) and space.n == 20 and space.shape == ()
        else:
            assert isinstance(space, MultiDiscrete) and space.nvec.tolist() == [5, 4]
    env.reset(seed=0)
    for agent in env.possible_agents:
        env.action_space(agent).seed(1)
    for _ in range(5):
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        env.step(actions)
        indices = torch.as_tensor(np.stack([actions[a] for a in env.possible_agents])).reshape(1, 3, -1)
        assert torch.equal(sim.action_input.buffer, indices)
        command, bad = decode_torch(sim.action_space, indices, *sim.action_bounds)
        assert not bad.any() and torch.equal(sim.world.actions, command)
    assert env.agents == []  # max_steps ended the episode for every agent


def test_missing_agents_take_index_0_and_bad_actions_raise():
    env = parallel_env(n_agents=2, action_space="multidiscrete")
    env.reset(seed=0)
    env.step({"agent_1": np.array([2, 1])})
    assert env.sim.action_input.buffer[0].tolist() == [[0, 0], [2, 1]]
    assert torch.equal(env.sim.world.actions[0, 0], torch.zeros(2))  # index 0 of 3 levels: "stay"
    with pytest.raises(TypeError, match=r"actions\['agent_0'\] must be integer indices"):
        env.step({"agent_0": np.array([1.0, 2.0])})
    with pytest.raises(ValueError, match=r"shape \[len\(nvec\)\] = \[2\]"):
        env.step({"agent_0": np.array([1, 2, 0])})
    single = parallel_env(n_agents=1, action_space="discrete")
    single.reset(seed=0)
    single.step({"agent_0": 8})
    assert single.sim.action_input.buffer.flatten().tolist() == [8]
    with pytest.raises(ValueError, match=r"shape \[\] = \[\]"):
        single.step({"agent_0": np.array([8])})
    single.step({"agent_0": np.int64(9)})  # out of range: a zero command and the device flag
    assert bool(single.sim.invalid_actions()) and torch.equal(single.sim.world.actions[0, 0], torch.zeros(2))
