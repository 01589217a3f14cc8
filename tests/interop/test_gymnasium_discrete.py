"""``swarp/interop/gymnasium/`` with discrete and multi-discrete actions: the spaces Gymnasium's
conventions give them, Gymnasium's own checks, rollouts with sampled actions reaching the step as
the indices sampled."""

import math
import warnings

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")  # the gymnasium extra; CI installs it

from gymnasium.spaces import Box, Discrete, MultiDiscrete  # noqa: E402
from gymnasium.utils import env_checker, passive_env_checker  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402
from gymnasium.wrappers import vector as wrappers  # noqa: E402

import swarp  # noqa: E402
from swarp.core.spaces import decode_torch  # noqa: E402
from swarp.interop.gymnasium import SwarpVectorEnv, env_id  # noqa: E402

KINDS = ["discrete", "multidiscrete"]


def make(kind, n_envs=4, n_agents=3, auto_reset=False, max_steps=20, **kwargs):
    return swarp.make(
        "navigation", n_envs=n_envs, device="cpu", seed=0, auto_reset=auto_reset, max_steps=max_steps,
        action_space=kind, n_agents=n_agents, **kwargs,
    )  # fmt: skip


def assert_reached(sim, actions):
    """The step got ``actions`` (any layout of the space) as its [E, A, width] int64 indices and
    decoded them into the physical command."""
    indices = torch.as_tensor(np.asarray(actions)).reshape(sim.n_envs, sim.n_agents, -1)
    assert torch.equal(sim.action_input.buffer, indices)
    low, high = sim.action_bounds
    command, bad = decode_torch(sim.action_space, indices, low, high)
    assert not bad.any() and torch.equal(sim.world.actions, command)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nvec", [None, (5, 2)])
@pytest.mark.parametrize("n_agents", [1, 3])
@pytest.mark.parametrize("flatten", [False, True])
def test_spaces(kind, nvec, n_agents, flatten):
    sim = make(kind, n_agents=n_agents, action_nvec=nvec)
    envs = SwarpVectorEnv(sim, flatten_agents=flatten)
    levels = (3, 3) if nvec is None else nvec
    heads = [math.prod(levels)] if kind == "discrete" else list(levels)
    single = envs.single_action_space
    if flatten and kind == "discrete" and n_agents == 1:
        assert isinstance(single, Discrete) and single.n == heads[0] and single.start == 0
    elif flatten:
        assert isinstance(single, MultiDiscrete) and single.nvec.tolist() == heads * n_agents
    else:
        assert isinstance(single, MultiDiscrete) and single.nvec.tolist() == [heads] * n_agents
    assert single.dtype == np.int64
    # The batched space is Gymnasium's own batch of the single one.
    assert envs.action_space == batch_space(single, sim.n_envs)
    assert envs.action_space.shape == (sim.n_envs, *single.shape)
    assert isinstance(envs.single_observation_space, Box)  # observations are as with continuous actions


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("auto_reset", "mode"), [(True, None), (False, None), (False, AutoresetMode.DISABLED)])
def test_gymnasium_checks(kind, auto_reset, mode):
    # Gymnasium has no checker for vector envs: the parts of check_env that apply to one (a batch of one).
    envs = SwarpVectorEnv(make(kind, n_envs=1, auto_reset=auto_reset), autoreset_mode=mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        passive_env_checker.check_action_space(envs.single_action_space)
        passive_env_checker.check_action_space(envs.action_space)
        env_checker.check_reset_return_type(envs)
        env_checker.check_reset_seed_determinism(envs)
        env_checker.check_reset_options(envs)
        env_checker.check_returned_data_not_reused(envs)
        env_checker.check_space_limit(envs.single_action_space, "action")
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize(("kind", "n_agents"), [("discrete", 1), ("discrete", 2), ("multidiscrete", 2)])
def test_check_env_passes_on_the_registered_env(kind, n_agents):
    env = gymnasium.make(env_id("navigation"), action_space=kind, n_agents=n_agents, max_steps=10)
    expected = Discrete if (kind, n_agents) == ("discrete", 1) else MultiDiscrete
    assert isinstance(env.action_space, expected)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert all("infinity" in str(w.message) for w in caught), [str(w.message) for w in caught]
    env.reset(seed=0)
    env.action_space.seed(3)
    action = env.action_space.sample()
    env.step(action)
    assert_reached(env.unwrapped.sim, action)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("flatten", [False, True])
def test_rollout_with_sampled_actions(kind, backend, flatten):
    """NEXT_STEP through several episode ends: every sampled action reaches the step as it was
    sampled (envs being reset aside: their rows are zeroed, as with continuous actions)."""
    sim = make(kind, n_agents=1 if flatten else 3, max_steps=4)
    envs = SwarpVectorEnv(sim, backend=backend, flatten_agents=flatten)
    envs.reset(seed=0)
    envs.action_space.seed(1)
    pending = np.zeros(sim.n_envs, dtype=bool)
    for step in range(13):
        actions = envs.action_space.sample()
        given = torch.as_tensor(actions) if backend == "torch" and step % 2 else actions
        obs, reward, terminated, truncated, info = envs.step(given)
        expected = torch.as_tensor(actions).reshape(sim.n_envs, sim.n_agents, -1).clone()
        expected[torch.as_tensor(pending)] = 0
        assert_reached(sim, expected)
        pending = np.asarray(terminated | truncated)
        assert reward.shape == (sim.n_envs,)
    assert not bool(sim.invalid_actions())


def test_same_step_and_wrappers_with_discrete_actions():
    envs = wrappers.RecordEpisodeStatistics(SwarpVectorEnv(make("multidiscrete", auto_reset=True, max_steps=3)))
    envs.reset(seed=0)
    for _ in range(3):
        *_, info = envs.step(envs.action_space.sample())
    assert info["_episode"].all() and (info["episode"]["l"] == 3).all()


def test_out_of_range_indices_act_as_zero_and_raise_the_flag():
    sim = make("multidiscrete", n_agents=2)
    envs = SwarpVectorEnv(sim, autoreset_mode="disabled")
    actions = np.full((4, 2, 2), 2, dtype=np.int64)
    actions[1, 0, 1] = 3
    envs.step(actions)
    assert bool(sim.invalid_actions())
    assert torch.equal(sim.world.actions[1, 0], torch.zeros(2)) and torch.equal(sim.world.actions[0, 0], torch.ones(2))


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (np.zeros((4, 3, 1), dtype=np.float32), TypeError, "integer indices.*cast the indices"),
        (np.zeros((4, 3, 1), dtype=bool), TypeError, "integer indices"),
        (np.zeros((4, 3), dtype=np.int64), ValueError, r"shape \[n_envs, n_agents, act_dim\] = \[4, 3, 1\]"),
        (None, TypeError, "integer indices"),
    ],
)
def test_bad_actions_raise_and_step_nothing(actions, error, match):
    sim = make("discrete")
    envs = SwarpVectorEnv(sim)
    before = sim.state.pos.clone()
    with pytest.raises(error, match=match):
        envs.step(actions)
    assert torch.equal(sim.state.pos, before)


def test_single_agent_discrete_takes_one_index_per_env():
    sim = make("discrete", n_agents=1)
    envs = SwarpVectorEnv(sim, flatten_agents=True)
    envs.step(np.arange(4, dtype=np.int32))
    assert sim.action_input.buffer.flatten().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"shape \[n_envs\] = \[4\]"):
        envs.step(np.zeros((4, 1), dtype=np.int64))
    single = gymnasium.make(env_id("navigation"), action_space="discrete", n_agents=1)
    single.reset(seed=0)
    single.step(7)  # a plain int, as Discrete.sample() gives an np.int64
    assert single.unwrapped.sim.action_input.buffer.flatten().tolist() == [7]
    with pytest.raises(TypeError, match="integer indices"):
        single.unwrapped.step(7.0)
