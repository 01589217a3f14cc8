"""``swarp/interop/gymnasium/`` with Gymnasium's own tools: NEXT_STEP auto-reset, the vector
wrappers, the torch backend's refusal of numpy wrappers, and the registered ``swarp/<scenario>-v0``."""

import warnings

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")  # the gymnasium extra; CI installs it

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from gymnasium.wrappers import vector as wrappers  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.gymnasium import SwarpGymnasiumEnv, SwarpVectorEnv, env_id, register_envs  # noqa: E402
from swarp.scenarios.framework.base import scenario_names  # noqa: E402


def make(n_envs=4, auto_reset=False, max_steps=20, **kwargs):
    return swarp.make(
        "navigation", n_envs=n_envs, device="cpu", seed=0, auto_reset=auto_reset, max_steps=max_steps, **kwargs
    )


def random_actions(envs, rng):
    return rng.uniform(-1.0, 1.0, envs.action_space.shape).astype(np.float32)


# --- the modes -----------------------------------------------------------------------------------


def test_next_step_is_the_default_without_auto_reset_and_modes_are_checked():
    assert SwarpVectorEnv(make()).metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert SwarpVectorEnv(make(auto_reset=True)).metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    for name, mode in (("next_step", "NEXT_STEP"), ("NextStep", "NEXT_STEP"), ("DISABLED", "DISABLED")):
        assert SwarpVectorEnv(make(), autoreset_mode=name).autoreset_mode is AutoresetMode[mode]
    with pytest.raises(ValueError, match="SAME_STEP resets inside the simulator's step: build the Environment with"):
        SwarpVectorEnv(make(), autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(ValueError, match="NEXT_STEP needs an Environment built with auto_reset=False"):
        SwarpVectorEnv(make(auto_reset=True), autoreset_mode="next_step")
    with pytest.raises(ValueError, match=r"autoreset_mode must be None, an AutoresetMode or one of \['NEXT_STEP'"):
        SwarpVectorEnv(make(), autoreset_mode="later")
    with pytest.raises(TypeError, match="flatten_agents must be a bool"):
        SwarpVectorEnv(make(), flatten_agents=1)


def test_next_step_returns_the_reset_observation_with_zero_reward_and_ignores_the_action():
    """Episodes of 3 steps: step 4 resets every env; it must equal a SAME_STEP env's new episode."""
    envs = SwarpVectorEnv(make(max_steps=3))
    same = SwarpVectorEnv(make(max_steps=3, auto_reset=True))
    zeros = np.zeros(envs.action_space.shape, np.float32)
    for e in (envs, same):
        e.reset(seed=7)
    for _ in range(3):
        obs, reward, terminated, truncated, info = envs.step(zeros)
        new_episode = same.step(zeros)[0]
    assert truncated.all() and not terminated.any()
    np.testing.assert_array_equal(obs, same.sim.final_obs.numpy())  # the finishing step shows the last obs
    assert "final_obs" not in info
    actions = np.full(envs.action_space.shape, np.nan, np.float32)  # ignored: neither used nor flagged
    obs, reward, terminated, truncated, info = envs.step(actions)
    np.testing.assert_array_equal(obs, new_episode)
    np.testing.assert_array_equal(reward, np.zeros(4, np.float32))
    np.testing.assert_array_equal(info["agent_reward"], np.zeros((4, 4), np.float32))
    assert not terminated.any() and not truncated.any()
    assert not bool(envs.sim.invalid_actions()), "the reset envs' actions were ignored"
    # The reset step did not move anything: one zero step on from it is one zero step on in SAME_STEP.
    np.testing.assert_array_equal(envs.step(zeros)[0], same.step(zeros)[0])


def test_next_step_resets_only_the_envs_that_finished():
    envs = SwarpVectorEnv(make(max_steps=3))
    rng = np.random.default_rng(0)
    envs.reset(seed=1)
    envs.step(random_actions(envs, rng))
    late = np.array([False, True, False, True])
    envs.reset(options={"reset_mask": late})  # envs 1 and 3 restart: they finish one step later
    flags = []
    for _ in range(5):
        obs, reward, terminated, truncated, info = envs.step(random_actions(envs, rng))
        flags.append((truncated.copy(), reward.copy()))
    truncated_at = np.array([f[0] for f in flags])  # [step, env]
    np.testing.assert_array_equal(truncated_at[:, 0], [False, True, False, False, False])
    np.testing.assert_array_equal(truncated_at[:, 1], [False, False, True, False, False])
    np.testing.assert_array_equal(truncated_at, truncated_at[:, [0, 1, 0, 1]])
    # The step after each env finished is its reset: reward 0 there, and only there.
    rewards = np.array([f[1] for f in flags])
    resetting = np.zeros_like(truncated_at)
    resetting[1:] = truncated_at[:-1]
    assert (rewards[resetting] == 0).all() and (rewards[~resetting] != 0).all()


def test_next_step_torch_backend_matches_numpy_exactly():
    """The torch backend never syncs (it resets an empty mask too); the numpy one skips that reset."""
    host, device = SwarpVectorEnv(make(max_steps=4)), SwarpVectorEnv(make(max_steps=4), backend="torch")
    rng = np.random.default_rng(2)
    for e in (host, device):
        e.reset(seed=3)
    for step in range(15):
        actions = random_actions(host, rng)
        expected, got = host.step(actions), device.step(torch.as_tensor(actions))
        for a, b in zip(expected[:4], got[:4], strict=True):
            assert isinstance(b, torch.Tensor)
            np.testing.assert_array_equal(a, b.numpy(), err_msg=f"step {step}")
        assert expected[4].keys() == got[4].keys()
        for key in expected[4]:
            np.testing.assert_array_equal(expected[4][key], got[4][key].numpy(), err_msg=key)


def test_flatten_agents_spaces_and_actions():
    sim = make()
    envs = SwarpVectorEnv(sim, flatten_agents=True, autoreset_mode="disabled")
    A, D, U = sim.n_agents, sim.obs_dim, sim.act_dim
    assert envs.single_observation_space.shape == (A * D,) and envs.single_action_space.shape == (A * U,)
    np.testing.assert_array_equal(envs.single_action_space.low, sim.action_bounds[0].numpy().reshape(-1))
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, A * D)
    actions = np.random.default_rng(0).uniform(-1, 1, (4, A * U)).astype(np.float32)
    flat = envs.step(actions)[0]
    shaped = SwarpVectorEnv(make(), autoreset_mode="disabled")
    shaped.reset(seed=0)
    np.testing.assert_array_equal(flat, shaped.step(actions.reshape(4, A, U))[0].reshape(4, -1))
    with pytest.raises(ValueError, match=r"shape \[n_envs, n_agents \* act_dim\] = \[4, 8\], got \[4, 4, 2\]"):
        envs.step(actions.reshape(4, A, U))


# --- Gymnasium's vector wrappers on NEXT_STEP ------------------------------------------------------

WRAPPERS = {
    "NormalizeObservation": wrappers.NormalizeObservation,
    "RecordEpisodeStatistics": wrappers.RecordEpisodeStatistics,
    "FlattenObservation": wrappers.FlattenObservation,
    "NormalizeReward": wrappers.NormalizeReward,
    "all four": lambda e: wrappers.NormalizeReward(
        wrappers.RecordEpisodeStatistics(wrappers.FlattenObservation(wrappers.NormalizeObservation(e)))
    ),
}


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_vector_wrappers_run_on_next_step(name):
    envs = WRAPPERS[name](SwarpVectorEnv(make(max_steps=20)))
    assert envs.unwrapped.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, _ = envs.reset(seed=0)
    envs.action_space.seed(0)
    episodes = []
    for _ in range(300):
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert obs.shape == envs.observation_space.shape and np.isfinite(obs).all()
        assert reward.shape == (4,) and np.isfinite(reward).all()
        if "episode" in info:
            episodes.append(info["episode"]["l"][info["_episode"]])
    if name in ("RecordEpisodeStatistics", "all four"):
        # 300 steps = 14 episodes of 20 steps and their 14 reset steps, which count for none.
        assert len(episodes) == 14 and all((lengths == 20).all() for lengths in episodes)


def test_record_episode_statistics_returns_are_the_episodes_rewards():
    envs = wrappers.RecordEpisodeStatistics(SwarpVectorEnv(make(max_steps=5)))
    envs.reset(seed=0)
    rng = np.random.default_rng(1)
    rewards, returns = [], []
    for _ in range(12):  # two episodes of 5 steps, each followed by its reset step
        _, reward, _, _, info = envs.step(random_actions(envs, rng))
        rewards.append(reward)
        if "episode" in info:
            returns.append(info["episode"]["r"])
    rewards = np.array(rewards)
    assert len(returns) == 2 and (rewards[[5, 11]] == 0).all()
    np.testing.assert_allclose(returns[0], rewards[0:5].sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(returns[1], rewards[6:11].sum(axis=0), rtol=1e-5)


def test_observation_wrappers_reject_same_step_as_gymnasium_does():
    rejected = (ValueError, AssertionError)  # Gymnasium 1.1 asserts, later versions raise ValueError
    with pytest.raises(rejected):
        wrappers.NormalizeObservation(SwarpVectorEnv(make(auto_reset=True)))
    with pytest.raises(rejected):
        wrappers.NormalizeObservation(SwarpVectorEnv(make(), autoreset_mode="disabled"))
    wrappers.FlattenObservation(SwarpVectorEnv(make(), autoreset_mode="disabled"))  # DISABLED is accepted


# --- the torch backend -----------------------------------------------------------------------------

NUMPY_WRAPPERS = {
    "RecordEpisodeStatistics": wrappers.RecordEpisodeStatistics,
    "NormalizeObservation": wrappers.NormalizeObservation,
    "NormalizeReward": wrappers.NormalizeReward,
    "FlattenObservation": wrappers.FlattenObservation,
    "DtypeObservation": lambda e: wrappers.DtypeObservation(e, np.float64),
    "DictInfoToList": wrappers.DictInfoToList,
    "ClipAction": wrappers.ClipAction,
    "ClipReward": lambda e: wrappers.ClipReward(e, -1.0, 1.0),
}


@pytest.mark.parametrize("name", list(NUMPY_WRAPPERS))
def test_torch_backend_refuses_numpy_wrappers_naming_the_fix(name):
    envs = SwarpVectorEnv(make(), backend="torch")
    with pytest.raises(TypeError, match=f"{name} runs numpy code .* use backend='numpy' with Gymnasium's wrappers"):
        wrapped = NUMPY_WRAPPERS[name](envs)  # most read metadata here; the others reach reset
        wrapped.reset(seed=0)


def test_torch_backend_takes_function_wrappers_and_user_code():
    sim = make(max_steps=3)
    envs = SwarpVectorEnv(sim, backend="torch")
    assert envs.metadata["torch"] is True and envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    wrapped = wrappers.TransformReward(wrappers.TransformObservation(envs, lambda obs: 2 * obs), lambda r: r - 1)
    obs, _ = wrapped.reset(seed=0)
    torch.testing.assert_close(obs, 2 * sim.obs)
    for _ in range(4):
        obs, reward, terminated, truncated, _ = wrapped.step(torch.zeros(envs.action_space.shape))
    assert isinstance(obs, torch.Tensor) and isinstance(reward, torch.Tensor)
    torch.testing.assert_close(reward, torch.full((4,), -1.0))  # the NEXT_STEP reset step: 0 - 1


def test_numpy_backend_under_wrappers_is_the_torch_route():
    """What the error recommends, minus NumpyToTorch (its array-api-compat dependency is optional)."""
    envs = wrappers.NormalizeReward(wrappers.NormalizeObservation(SwarpVectorEnv(make())))
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray)


# --- the registered envs ---------------------------------------------------------------------------


def test_every_scenario_is_registered_and_registering_again_adds_nothing():
    ids = {env_id(name) for name in scenario_names()}
    assert ids <= set(gymnasium.registry) and "swarp/navigation-v0" in ids
    assert register_envs() == []
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        register_envs(["nope"])


def test_make_builds_one_flattened_env_with_swarp_keywords():
    env = gymnasium.make("swarp/navigation-v0", n_agents=2, max_steps=7)
    inner = env.unwrapped
    assert isinstance(inner, SwarpGymnasiumEnv) and inner.sim.n_envs == 1 and inner.sim.n_agents == 2
    assert env.observation_space.shape == (2 * inner.sim.obs_dim,) and env.action_space.shape == (4,)
    obs, info = env.reset(seed=4)
    assert obs.shape == env.observation_space.shape and obs.dtype == np.float32
    assert info["dist_to_goal"].shape == (2,)
    env.action_space.seed(0)
    for _ in range(7):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert isinstance(reward, float) and isinstance(truncated, bool) and isinstance(terminated, bool)
        assert info["agent_reward"].shape == (2,)
        assert reward == pytest.approx(float(info["agent_reward"].mean()))
    assert truncated, "episodes end at max_steps"
    env.close()
    by_module = gymnasium.make("swarp.interop.gymnasium:swarp/spread-v0")  # imports the module, then makes
    assert isinstance(by_module.unwrapped, SwarpGymnasiumEnv)


def test_make_rejects_batch_keywords_and_bad_actions():
    with pytest.raises(TypeError, match="sets 'n_envs' itself; pass num_envs"):
        gymnasium.make("swarp/navigation-v0", n_envs=4)
    with pytest.raises(TypeError, match="sets 'auto_reset' itself; pass autoreset_mode"):
        gymnasium.make_vec("swarp/navigation-v0", num_envs=2, auto_reset=True)
    with pytest.raises(TypeError, match="unknown keyword"):
        gymnasium.make("swarp/navigation-v0", n_agent=2)
    env = SwarpGymnasiumEnv("navigation")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \[n_agents \* act_dim\] = \[8\], got \[4, 2\]"):
        env.step(np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match="action must be real numbers"):
        env.step(None)
    with pytest.raises(ValueError, match="takes no options"):
        env.reset(options={"reset_mask": np.ones(1, bool)})
    with pytest.raises(ValueError, match="one env built with auto_reset=False"):
        SwarpGymnasiumEnv(make(n_envs=2))
    wrapped = SwarpGymnasiumEnv(make(n_envs=1))
    assert wrapped.observation_space.shape == (4 * wrapped.sim.obs_dim,)


def test_make_vec_builds_a_next_step_swarp_vector_env_with_the_single_spaces():
    single = gymnasium.make("swarp/navigation-v0")
    envs = gymnasium.make_vec("swarp/navigation-v0", num_envs=3, device="cpu", max_steps=5)
    assert isinstance(envs, SwarpVectorEnv) and envs.num_envs == 3
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert envs.single_observation_space == single.observation_space
    assert envs.single_action_space == single.action_space
    assert envs.spec.id == "swarp/navigation-v0"
    wrapped = wrappers.RecordEpisodeStatistics(wrappers.NormalizeObservation(envs))
    wrapped.reset(seed=0)
    wrapped.action_space.seed(0)
    lengths = []
    for _ in range(12):
        info = wrapped.step(wrapped.action_space.sample())[4]
        if "episode" in info:
            lengths.append(info["episode"]["l"].tolist())
    assert lengths == [[5, 5, 5], [5, 5, 5]]
    same = gymnasium.make_vec("swarp/navigation-v0", num_envs=2, device="cpu", autoreset_mode="same_step")
    assert same.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP and same.sim.auto_reset
    tensors = gymnasium.make_vec("swarp/spread-v0", num_envs=2, device="cpu", backend="torch", flatten_agents=False)
    assert isinstance(tensors.reset(seed=0)[0], torch.Tensor) and tensors.single_observation_space.shape == (3, 14)
    synced = gymnasium.make_vec("swarp/spread-v0", num_envs=2, vectorization_mode="sync")
    obs, _ = synced.reset(seed=0)
    assert obs.shape == (2, 3 * 14) and synced.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


# Gymnasium warns about every unbounded observation box, and about action boxes beyond [-1, 1].
ALLOWED = ("infinity", "symmetric and normalized space")


@pytest.mark.parametrize("scenario", ["navigation", "drone_navigation"])
def test_check_env_passes_on_the_registered_env(scenario):
    env = gymnasium.make(env_id(scenario))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # with a spec: also the rgb_array render mode and a double close
    messages = [str(w.message) for w in caught]
    assert all(any(a in m for a in ALLOWED) for m in messages), messages
    frame = gymnasium.make(env_id(scenario), render_mode="rgb_array")
    frame.reset(seed=0)
    image = frame.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
