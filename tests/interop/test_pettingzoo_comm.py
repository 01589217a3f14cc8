"""``swarp/interop/pettingzoo.py`` with a communication channel: each speaking agent's space has its
message columns ([0, 1]) or head, as VMAS's ``get_agent_action_space``; a silent group's none;
PettingZoo's API test on a comm layout with a silent group; every message reaching ``sim.comm``."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")  # the pettingzoo extra; CI installs it

from gymnasium.spaces import Box, Discrete, MultiDiscrete  # noqa: E402
from pettingzoo.test import parallel_api_test  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.pettingzoo import SwarpParallelEnv  # noqa: E402
from tests.env.test_comm import C, QuietScouts, Talk  # noqa: E402

CARRIERS = ["carriers_0", "carriers_1", "carriers_2"]


def wrap(scenario, **kwargs):
    kwargs.setdefault("max_steps", 20)
    return SwarpParallelEnv(swarp.Environment(scenario, n_envs=1, device="cpu", seed=3, **kwargs))


@pytest.mark.parametrize(
    "kinds",
    [
        {},
        {"action_space": {"carriers": "discrete"}},
        {"action_space": {"carriers": "multidiscrete", "scouts": "discrete"}},
    ],
    ids=["continuous", "carriers-discrete", "multidiscrete+discrete"],
)
@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test_with_a_silent_group(kinds, auto_reset):
    env = wrap(QuietScouts(), auto_reset=auto_reset, **kinds)
    parallel_api_test(env, num_cycles=50)
    assert not bool(env.sim.invalid_actions())  # every sample of every space is valid, messages included


def test_spaces_follow_vmas_layout():
    spaces = {k: wrap(QuietScouts(), action_space=k).action_spaces for k in ("continuous", "discrete", "multidiscrete")}
    box = spaces["continuous"]["carriers_0"]
    assert isinstance(box, Box) and box.shape == (4,)
    assert box.low.tolist() == [-0.5, -3.0, 0.0, 0.0] and box.high.tolist() == [0.5, 3.0, 1.0, 1.0]
    scout = spaces["continuous"]["scouts_0"]
    assert scout.shape == (2,) and scout.low.tolist() == [-1.0, -1.0] and scout.high.tolist() == [1.0, 1.0]
    assert spaces["discrete"]["carriers_0"] == Discrete(9 * 2) and spaces["discrete"]["scouts_0"] == Discrete(9)
    assert spaces["multidiscrete"]["carriers_0"] == MultiDiscrete([3, 3, 2])
    assert spaces["multidiscrete"]["scouts_0"] == MultiDiscrete([3, 3])
    talk = wrap(Talk(n_agents=2), action_space="discrete").action_spaces
    assert talk == {"agent_0": Discrete(9 * C), "agent_1": Discrete(9 * C)}


def test_messages_reach_the_channel():
    env = wrap(QuietScouts(), action_space={"carriers": "discrete"})
    env.reset(seed=0)
    actions = {name: np.int64(3 * 2 + c) for c, name in zip((0, 1, 1), CARRIERS, strict=True)}
    env.step({**actions, "scouts_0": np.zeros(2, np.float32)})
    assert env.sim.comm[0].tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 0.0]]
    continuous = wrap(Talk(n_agents=2))
    continuous.reset(seed=0)
    sent = np.array([0.1, -0.2, 0.25, 1.5, -3.0], np.float32)
    continuous.step({"agent_0": sent, "agent_1": sent})
    assert torch.equal(continuous.sim.comm[0], torch.tensor([[0.25, 1.0, 0.0]] * 2))
    with pytest.raises(ValueError, match="shape"):
        continuous.step({"agent_0": sent[:2]})
