"""``swarp/interop/sb3.py`` with discrete and multi-discrete actions: SB3's spaces, PPO (and DQN,
which takes ``Discrete`` only) training on them, every action reaching the step as its indices."""

import math

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")  # the sb3 extra

from gymnasium import spaces  # noqa: E402
from stable_baselines3 import DQN, PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402

from swarp.core.spaces import decode_torch  # noqa: E402
from swarp.interop.sb3 import make_vec_env  # noqa: E402

KINDS = ["discrete", "multidiscrete"]


def venv_of(kind, layout="per_agent", n_envs=3, n_agents=2, **kwargs):
    return make_vec_env(
        "navigation", n_envs=n_envs, layout=layout, device="cpu", seed=0, action_space=kind, n_agents=n_agents,
        max_steps=16, **kwargs,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def one_torch_thread():
    """SB3's small networks on one thread: on a shared CPU more threads only contend (10x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class IndicesReachTheStep(BaseCallback):
    """After every env step of a rollout: the step's index buffer holds the actions the policy
    took (as the layout lays them out) and the physical command is their decode."""

    def __init__(self, sim):
        super().__init__()
        self.sim = sim
        self.checked = 0

    def _on_step(self) -> bool:
        sim = self.sim
        stepped = self.locals.get("clipped_actions", self.locals["actions"])  # PPO's name, DQN's
        actions = torch.as_tensor(np.asarray(stepped))
        indices = actions.reshape(sim.n_envs, sim.n_agents, -1)
        assert indices.dtype == torch.int64 and torch.equal(sim.action_input.buffer, indices)
        command, bad = decode_torch(sim.action_space, indices, *sim.action_bounds)
        assert not bad.any() and torch.equal(sim.world.actions, command)
        self.checked += 1
        return True


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["per_agent", "per_env"])
@pytest.mark.parametrize("n_agents", [1, 3])
def test_spaces(kind, layout, n_agents):
    venv = venv_of(kind, layout, n_agents=n_agents, action_nvec=(5, 2))
    heads = [10] if kind == "discrete" else [5, 2]
    space = venv.action_space
    if kind == "discrete" and (layout == "per_agent" or n_agents == 1):
        assert isinstance(space, spaces.Discrete) and space.n == 10
    else:
        copies = 1 if layout == "per_agent" else n_agents
        assert isinstance(space, spaces.MultiDiscrete) and space.nvec.tolist() == heads * copies
    assert space.dtype == np.int64
    assert venv.num_envs == 3 * (n_agents if layout == "per_agent" else 1)


@pytest.mark.parametrize(("kind", "layout"), [("discrete", "per_agent"), ("multidiscrete", "per_env")])
def test_ppo_trains_and_actions_reach_the_env_as_indices(kind, layout):
    venv = venv_of(kind, layout, n_envs=4)
    callback = IndicesReachTheStep(venv.sim)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=2048, callback=callback)
    assert model.num_timesteps >= 2048
    assert callback.checked == math.ceil(2048 / (64 * venv.num_envs)) * 64
    assert not bool(venv.sim.invalid_actions())
    obs = venv.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (venv.num_envs, *venv.action_space.shape)
    venv.step(actions)
    expected = torch.as_tensor(actions).reshape(venv.sim.n_envs, venv.sim.n_agents, -1)
    assert torch.equal(venv.sim.action_input.buffer, expected)


def test_dqn_takes_the_per_agent_discrete_space():
    venv = venv_of("discrete", n_envs=2)
    callback = IndicesReachTheStep(venv.sim)
    model = DQN("MlpPolicy", venv, learning_starts=64, train_freq=4, buffer_size=1000, seed=0, device="cpu")
    model.learn(total_timesteps=512, callback=callback)
    assert callback.checked >= 512 // venv.num_envs
    assert not bool(venv.sim.invalid_actions())


def test_bad_discrete_actions_and_options_raise():
    venv = venv_of("multidiscrete")
    with pytest.raises(TypeError, match="integer indices"):
        venv.step(np.zeros((6, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"shape \[num_envs, act_dim\] = \[6, 2\]"):
        venv.step(np.zeros((6,), dtype=np.int64))
    venv.close()
    venv = venv_of("discrete")
    with pytest.raises(ValueError, match=r"shape \[num_envs\] = \[6\]"):
        venv.step(np.zeros((6, 1), dtype=np.int64))
    venv.step(np.arange(6) % 9)
    assert venv.sim.action_input.buffer.flatten().tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="normalize_actions applies to continuous"):
        venv_of("discrete", normalize_actions=True)
