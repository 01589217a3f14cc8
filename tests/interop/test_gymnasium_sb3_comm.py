"""Gymnasium and SB3 adapters with a communication channel: the continuous ``Box`` has [0, 1]
message columns after the physical ones (and ``normalize_actions`` maps [-1, 1] onto them), the
discrete spaces count the message head (``Discrete(prod(nvec) * C)``, ``MultiDiscrete([*nvec, C])``),
SB3's PPO trains a few steps on a discrete comm task, and a layout with a silent group (spaces that
differ) is refused naming the alternatives."""

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")  # the sb3 extra

from gymnasium import spaces  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.gymnasium.registered import SwarpGymnasiumEnv  # noqa: E402
from swarp.interop.gymnasium.vector import SwarpVectorEnv  # noqa: E402
from swarp.interop.sb3 import SwarpVecEnv  # noqa: E402
from tests.env.test_comm import C, QuietScouts, Talk  # noqa: E402

LOW, HIGH = [-1.0, -1.0] + [0.0] * C, [1.0] * (2 + C)


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def talk(kind="continuous", n_envs=3, n_agents=2, auto_reset=True, **kwargs):
    options = dict(device="cpu", seed=0, action_space=kind, auto_reset=auto_reset)
    return swarp.Environment(Talk(n_agents=n_agents), n_envs=n_envs, **options, **kwargs)


@pytest.mark.parametrize("layout", ["per_agent", "per_env"])
def test_sb3_box_has_the_message_columns(layout):
    venv = SwarpVecEnv(talk(), layout=layout)
    copies = 1 if layout == "per_agent" else 2
    assert venv.action_space.low.tolist() == LOW * copies and venv.action_space.high.tolist() == HIGH * copies
    venv.reset()
    venv.step(np.stack([venv.action_space.sample() for _ in range(venv.num_envs)]))
    assert not bool(venv.sim.invalid_actions()) and (venv.sim.comm >= 0).all() and (venv.sim.comm <= 1).all()
    normalized = SwarpVecEnv(talk(), layout=layout, normalize_actions=True)
    normalized.reset()
    for value, message in ((-1.0, 0.0), (0.0, 0.5), (1.0, 1.0)):
        normalized.step(np.full((normalized.num_envs, *normalized.action_space.shape), value, np.float32))
        assert torch.equal(normalized.sim.comm, torch.full((3, 2, C), message))


@pytest.mark.parametrize(("kind", "per_agent", "per_env"), [
    ("discrete", spaces.Discrete(9 * C), spaces.MultiDiscrete([9 * C] * 2)),
    ("multidiscrete", spaces.MultiDiscrete([3, 3, C]), spaces.MultiDiscrete([3, 3, C] * 2)),
])  # fmt: skip
def test_discrete_spaces_count_the_message_head(kind, per_agent, per_env):
    assert SwarpVecEnv(talk(kind), layout="per_agent").action_space == per_agent
    assert SwarpVecEnv(talk(kind), layout="per_env").action_space == per_env
    vector = SwarpVectorEnv(talk(kind), flatten_agents=True)
    assert vector.single_action_space == per_env
    vector.reset(seed=0)
    vector.step(vector.action_space.sample())
    assert not bool(vector.sim.invalid_actions()) and torch.equal(vector.sim.comm.sum(-1), torch.ones(3, 2))
    one = SwarpGymnasiumEnv(talk(kind, n_envs=1, n_agents=1, auto_reset=False))
    assert one.action_space == (per_agent if kind == "discrete" else per_env.__class__([3, 3, C]))


def test_vector_box_and_a_flat_message_index():
    vector = SwarpVectorEnv(talk())
    assert vector.single_action_space.low.tolist() == [LOW] * 2
    vector.reset(seed=0)
    vector.step(np.tile(np.array([0.0, 0.0, 0.25, 2.0, -1.0], np.float32), (3, 2, 1)))
    assert torch.equal(vector.sim.comm, torch.tensor([0.25, 1.0, 0.0]).expand(3, 2, C))
    sb3 = SwarpVecEnv(talk("discrete"), layout="per_agent")
    sb3.reset()
    sb3.step(np.array([2, 0] * 3))  # physical index 0 (no command), messages 2 and 0
    assert sb3.sim.comm[0].tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert sb3.sim.world.actions.abs().sum() == 0


def test_ppo_trains_on_a_discrete_comm_task():
    venv = SwarpVecEnv(talk("discrete", n_envs=4, max_steps=16), layout="per_agent")
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512 and not bool(venv.sim.invalid_actions())
    assert torch.equal(venv.sim.comm.sum(-1), torch.ones(4, 2))  # every agent said one thing
    actions, _ = model.predict(venv.reset(), deterministic=True)
    assert actions.shape == (8,) and (actions >= 0).all() and (actions < 9 * C).all()


def test_a_silent_group_is_refused_naming_the_alternatives():
    sim = swarp.Environment(QuietScouts(), n_envs=2, device="cpu", auto_reset=True)
    for adapter in (lambda: SwarpVecEnv(sim), lambda: SwarpVectorEnv(sim)):
        with pytest.raises(ValueError, match="SwarpParallelEnv") as error:
            adapter()
        assert "comm_dim 2" in str(error.value) and "comm_dim 0" in str(error.value)
