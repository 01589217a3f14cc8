"""``swarp/interop/sb3.py``: the Stable-Baselines3 VecEnv adapter under SB3's own wrappers and PPO."""

import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")  # the sb3 extra

from gymnasium import spaces  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.utils import check_for_correct_spaces  # noqa: E402
from stable_baselines3.common.vec_env import VecCheckNan, VecEnv, VecMonitor, VecNormalize  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.sb3 import SwarpVecEnv, make_vec_env  # noqa: E402

LAYOUTS = ["per_agent", "per_env"]
MAX_STEPS = 6


def make_sim(n_envs=3, max_steps=MAX_STEPS, **kwargs):
    return swarp.make("navigation", n_envs=n_envs, device="cpu", seed=0, auto_reset=True, max_steps=max_steps, **kwargs)


def sample(venv, rng):
    """Actions of every SB3 env, uniform in its Box: [num_envs, *action_shape]."""
    space = venv.action_space
    return rng.uniform(space.low, space.high, (venv.num_envs, *space.shape)).astype(space.dtype)


def sb3_view(venv, tensor):
    """A simulator tensor [E, A, d] as the adapter lays it out: [num_envs, *shape]."""
    return tensor.numpy().reshape(venv.num_envs, -1)


def put_on_goals(sim, env, steps_taken=None):
    """Move env ``env``'s agents onto their goals (it terminates at the next step); with
    ``steps_taken``, also set its step counter (it truncates when that is max_steps - 1)."""
    state = sim.get_state()
    state["state.pos"][env] = state["scenario.goals"][env]
    state["state.vel"][env] = 0.0
    if steps_taken is not None:
        state["env.step_count"][env] = steps_taken
    sim.set_state(state)


# --- SB3's wrappers and checks ------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sb3_wrappers_and_checks(layout, rng):
    venv = SwarpVecEnv(make_sim(), layout=layout)
    assert isinstance(venv, VecEnv)
    check_for_correct_spaces(venv, venv.observation_space, venv.action_space)
    wrapped = VecNormalize(VecMonitor(VecCheckNan(venv, raise_exception=True, warn_once=False)), gamma=0.9)
    obs = wrapped.reset()
    assert obs.shape == (venv.num_envs, *venv.observation_space.shape)
    episodes = 0
    for _ in range(2 * MAX_STEPS):
        obs, rewards, dones, infos = wrapped.step(sample(venv, rng))
        assert obs.shape == (venv.num_envs, *venv.observation_space.shape) and np.isfinite(obs).all()
        assert rewards.shape == dones.shape == (venv.num_envs,) and len(infos) == venv.num_envs
        assert dones.dtype == np.bool_
        episodes += sum("episode" in info for info in infos)
        for info, done in zip(infos, dones, strict=True):
            assert ("terminal_observation" in info) == done
            assert isinstance(info["TimeLimit.truncated"], bool)
    assert episodes == 2 * venv.num_envs  # every env truncated twice
    assert wrapped.venv.episode_count == episodes  # VecMonitor saw them too
    wrapped.close()
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_spaces(layout):
    sim = make_sim()
    venv = SwarpVecEnv(sim, layout=layout)
    E, A, d_obs, d_act = sim.n_envs, sim.n_agents, sim.obs_dim, sim.act_dim
    low, high = (b.numpy() for b in sim.action_bounds)
    assert venv.observation_space == spaces.Box(-np.inf, np.inf, (d_obs if layout == "per_agent" else A * d_obs,))
    if layout == "per_agent":
        assert venv.num_envs == E * A and venv.action_space.shape == (d_act,)
        np.testing.assert_array_equal(venv.action_space.low, low.min(0))
        np.testing.assert_array_equal(venv.action_space.high, high.max(0))
    else:
        assert venv.num_envs == E and venv.action_space.shape == (A * d_act,)
        np.testing.assert_array_equal(venv.action_space.low, low.reshape(-1))
        np.testing.assert_array_equal(venv.action_space.high, high.reshape(-1))
    assert venv.observation_space.dtype == venv.action_space.dtype == np.float32
    f64 = SwarpVecEnv(make_sim(dtype="float64"), layout=layout)
    assert f64.observation_space.dtype == f64.action_space.dtype == np.float64
    assert f64.reset().dtype == np.float64


# --- the step contract --------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_step_matches_the_simulator(layout, rng):
    """Obs, rewards and dones are the simulator's, laid out per agent or per env; the actions are
    the simulator's actions, reshaped."""
    venv = SwarpVecEnv(make_sim(), layout=layout)
    twin = make_sim()
    E, A = twin.n_envs, twin.n_agents
    np.testing.assert_array_equal(venv.reset(), sb3_view(venv, twin.reset()[0]))
    for _ in range(MAX_STEPS + 2):
        actions = sample(venv, rng)
        obs, rewards, dones, infos = venv.step(actions)
        t_obs, t_reward, t_term, t_trunc, _ = twin.step(torch.as_tensor(actions).reshape(E, A, -1))
        np.testing.assert_array_equal(obs, sb3_view(venv, t_obs))
        done = (t_term | t_trunc).numpy()
        if layout == "per_agent":
            np.testing.assert_array_equal(rewards, t_reward.numpy().reshape(-1))
            np.testing.assert_array_equal(dones, np.repeat(done, A))
        else:
            np.testing.assert_allclose(rewards, t_reward.mean(dim=1).numpy(), rtol=1e-6)
            np.testing.assert_array_equal(dones, done)
        assert rewards.dtype == np.float32
    summed = SwarpVecEnv(make_sim(), layout="per_env", reward="sum")
    summed.reset()
    _, rewards, _, _ = summed.step(np.zeros((summed.num_envs, *summed.action_space.shape), np.float32))
    np.testing.assert_allclose(rewards, summed.sim.reward.sum(dim=1).numpy(), rtol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_terminal_observation_and_time_limit(layout):
    """Env 0 terminates on its last allowed step (terminated and truncated: not a time limit), env 1
    truncates, env 2 goes on."""
    sim = make_sim(max_steps=50)
    venv = SwarpVecEnv(sim, layout=layout)
    venv.reset()
    put_on_goals(sim, 0, steps_taken=49)
    state = sim.get_state()
    state["env.step_count"][1] = 49
    sim.set_state(state)
    zeros = np.zeros((venv.num_envs, *venv.action_space.shape), np.float32)
    obs, _, dones, infos = venv.step(zeros)
    assert sim.terminated.tolist() == [True, False, False] and sim.truncated.tolist() == [True, True, False]
    copies = sim.n_agents if layout == "per_agent" else 1
    by_env = [infos[e * copies : (e + 1) * copies] for e in range(sim.n_envs)]
    final = sb3_view(venv, sim.final_obs).reshape(sim.n_envs, copies, -1)
    for e, (expect_done, expect_limit) in enumerate([(True, False), (True, True), (False, False)]):
        assert dones[e * copies : (e + 1) * copies].tolist() == [expect_done] * copies
        for k, info in enumerate(by_env[e]):
            assert info["TimeLimit.truncated"] is expect_limit
            if expect_done:
                np.testing.assert_array_equal(info["terminal_observation"], final[e, k])
                assert info["episode"]["l"] == 1  # the steps the adapter saw (step_count was set)
                # The returned observation already starts the next episode.
                assert not np.array_equal(obs[e * copies + k], final[e, k])
            else:
                assert "terminal_observation" not in info and "episode" not in info
    assert sim.step_count.tolist()[:2] == [0, 0]


def test_terminated_episodes_and_stats():
    sim = make_sim(max_steps=50)
    venv = SwarpVecEnv(sim, layout="per_agent")
    venv.reset()
    zeros = np.zeros((venv.num_envs, 2), np.float32)
    returns = np.zeros(venv.num_envs)
    for _ in range(3):
        _, rewards, dones, _ = venv.step(zeros)
        returns += rewards
        assert not dones.any()
    put_on_goals(sim, 2)
    _, rewards, dones, infos = venv.step(zeros)
    returns += rewards
    A = sim.n_agents
    assert dones.tolist() == [False] * 2 * A + [True] * A
    for i in range(2 * A, 3 * A):
        assert infos[i]["TimeLimit.truncated"] is False
        assert infos[i]["episode"]["l"] == 4
        assert infos[i]["episode"]["r"] == pytest.approx(returns[i], rel=1e-5)
    # Stats restart with the episode; without episode_stats there are none.
    quiet = SwarpVecEnv(make_sim(max_steps=2), episode_stats=False)
    quiet.reset()
    for _ in range(2):
        _, _, dones, infos = quiet.step(np.zeros((quiet.num_envs, 2), np.float32))
    assert dones.all() and not any("episode" in info for info in infos)


def test_info_keys():
    sim = make_sim()
    A = sim.n_agents
    for layout in LAYOUTS:
        venv = SwarpVecEnv(sim, layout=layout, info_keys=("on_goal", "dist_to_goal", "neighbor_overflow"))
        venv.reset()
        _, _, _, infos = venv.step(np.zeros((venv.num_envs, *venv.action_space.shape), np.float32))
        dist, overflow = sim.info["dist_to_goal"].numpy(), sim.info["neighbor_overflow"].numpy()
        if layout == "per_agent":
            assert [info["dist_to_goal"] for info in infos] == pytest.approx(dist.reshape(-1).tolist())
            assert [info["neighbor_overflow"] for info in infos] == np.repeat(overflow, A).tolist()
            assert all(isinstance(info["on_goal"], bool) for info in infos)
        else:
            for e, info in enumerate(infos):
                np.testing.assert_array_equal(info["dist_to_goal"], dist[e])
                assert info["on_goal"].shape == (A,) and info["neighbor_overflow"] == overflow[e]


# --- actions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_action_conversion(layout, rng):
    sim = make_sim()
    venv = SwarpVecEnv(sim, layout=layout)
    venv.reset()
    shape = (venv.num_envs, *venv.action_space.shape)
    E, A, d = sim.n_envs, sim.n_agents, sim.act_dim
    actions = rng.uniform(-1, 1, shape)
    for given in (actions, torch.as_tensor(actions), actions.tolist(), actions.astype(np.float32)):
        venv.step_async(given)
        np.testing.assert_array_equal(sim.world.actions.numpy(), actions.astype(np.float32).reshape(E, A, d))
        venv.step_wait()
    venv.step(np.ones(shape, dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        venv.step_async(np.zeros((venv.num_envs + 1, *venv.action_space.shape)))
    with pytest.raises(ValueError, match="shape"):
        venv.step_async(np.zeros((E, A, d)))
    with pytest.raises(TypeError, match="real numbers"):
        venv.step_async(np.zeros(shape, dtype=bool))
    with pytest.raises(TypeError, match="real numbers"):
        venv.step_async("left")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_normalized_actions(layout, rng):
    sim = make_sim(max_speed=0.5)
    venv = SwarpVecEnv(sim, layout=layout, normalize_actions=True)
    assert venv.action_space == spaces.Box(-1.0, 1.0, venv.action_space.shape)
    shape = (venv.num_envs, *venv.action_space.shape)
    unit = rng.uniform(-1.5, 1.5, shape).astype(np.float32)
    venv.step_async(unit)
    low, high = sim.action_bounds
    expected = low + (torch.as_tensor(unit).reshape(sim.n_envs, sim.n_agents, -1).clamp(-1, 1) + 1) * 0.5 * (high - low)
    np.testing.assert_allclose(sim.world.actions.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    venv.step_wait()
    venv.step(np.full(shape, np.nan, np.float32))  # passed on: acts as 0 and raises the flag
    assert bool(sim.invalid_actions())


def test_step_async_protocol():
    venv = SwarpVecEnv(make_sim())
    venv.reset()
    zeros = np.zeros((venv.num_envs, 2), np.float32)
    with pytest.raises(RuntimeError, match="without a pending step_async"):
        venv.step_wait()
    venv.step_async(zeros)
    with pytest.raises(RuntimeError, match="twice"):
        venv.step_async(zeros)
    venv.reset()  # drops the pending step
    with pytest.raises(RuntimeError, match="without a pending step_async"):
        venv.step_wait()
    venv.step_async(zeros)
    venv.close()  # finishes it
    venv.close()


# --- seeding, attributes, rendering -------------------------------------------------------------


def test_seed_takes_effect_at_reset():
    venv = SwarpVecEnv(make_sim(), layout="per_env")
    assert venv.seed(3) == [3] * venv.num_envs
    first = venv.reset()
    venv.step(np.zeros((venv.num_envs, *venv.action_space.shape), np.float32))
    venv.seed(3)
    np.testing.assert_array_equal(venv.reset(), first)
    assert venv.sim.seed_value == 3
    assert venv.seed(2**31 + 3) == [3] * venv.num_envs
    venv.seed(4)
    assert not np.array_equal(venv.reset(), first)
    assert venv.reset().shape == first.shape  # no seed pending: the RNG goes on
    drawn = venv.seed()
    assert 0 <= drawn[0] < 2**31 and len(set(drawn)) == 1
    with pytest.raises(TypeError, match="seed"):
        venv.seed(1.5)
    venv.set_options({"reset_mask": None})
    with pytest.raises(ValueError, match="no reset options"):
        venv.reset()


def test_attributes_and_methods():
    sim = make_sim()
    venv = SwarpVecEnv(sim)
    n = venv.num_envs
    assert venv.get_attr("n_agents") == [sim.n_agents] * n
    assert venv.get_attr("max_steps", indices=[0, 2]) == [MAX_STEPS] * 2
    assert venv.get_attr("render_mode", indices=1) == [None]
    assert venv.has_attr("obs_dim") and not venv.has_attr("no_such_thing")
    with pytest.raises(AttributeError, match="no_such_thing"):
        venv.get_attr("no_such_thing")
    with pytest.raises(IndexError, match="out of range"):
        venv.get_attr("n_agents", indices=[n])
    with pytest.raises(TypeError, match="ints"):
        venv.get_attr("n_agents", indices=["0"])
    venv.set_attr("clone_outputs", True)
    assert sim.clone_outputs is True
    with pytest.raises(ValueError, match="cover all"):
        venv.set_attr("clone_outputs", False, indices=[0])
    flags = venv.env_method("invalid_actions", indices=[0, 1])
    assert len(flags) == 2 and not bool(flags[0])
    with pytest.raises(AttributeError, match="no method"):
        venv.env_method("no_such_method")
    assert venv.env_is_wrapped(Monitor) == [False] * n
    assert venv.env_is_wrapped(Monitor, indices=[1, 2]) == [False, False]


def test_render():
    venv = SwarpVecEnv(make_sim(n_envs=2), layout="per_agent", render_mode="rgb_array")
    venv.reset()
    assert venv.get_attr("render_mode") == ["rgb_array"] * venv.num_envs
    frame = venv.sim.render(mode="rgb_array")
    image = venv.render()
    assert image.dtype == np.uint8 and image.shape == (2 * frame.shape[0], frame.shape[1], 3)  # 2 envs: 2 x 1
    np.testing.assert_array_equal(image[: frame.shape[0]], frame)
    images = venv.get_images()
    assert len(images) == venv.num_envs and images[0] is images[venv.n_agents - 1]
    plain = SwarpVecEnv(make_sim(n_envs=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert plain.render() is None
    assert any("render_mode" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="render mode"):
        venv.render(mode="video")


# --- construction errors ------------------------------------------------------------------------


def test_bad_construction():
    sim = make_sim()
    with pytest.raises(TypeError, match="swarp.Environment"):
        SwarpVecEnv("navigation")
    with pytest.raises(ValueError, match="auto_reset=True"):
        SwarpVecEnv(swarp.make("navigation", n_envs=2, device="cpu"))
    with pytest.raises(ValueError, match="layout"):
        SwarpVecEnv(sim, layout="agents")
    with pytest.raises(ValueError, match="per_env"):
        SwarpVecEnv(sim, reward="sum")
    with pytest.raises(ValueError, match="reward"):
        SwarpVecEnv(sim, layout="per_env", reward="max")
    with pytest.raises(ValueError, match="unknown info_keys"):
        SwarpVecEnv(sim, info_keys=("final_obs",))
    with pytest.raises(TypeError, match="info_keys"):
        SwarpVecEnv(sim, info_keys="on_goal")
    with pytest.raises(TypeError, match="normalize_actions"):
        SwarpVecEnv(sim, normalize_actions=1)
    with pytest.raises(ValueError, match="render_mode"):
        SwarpVecEnv(sim, render_mode="human")
    with pytest.raises(ValueError, match="auto_reset"):
        make_vec_env("navigation", 2, device="cpu", auto_reset=False)
    with pytest.raises(ValueError, match="batch_size"):
        make_vec_env("navigation", 2, device="cpu", batch_size=1)
    with pytest.raises(TypeError, match="unknown keyword"):
        make_vec_env("navigation", 2, device="cpu", n_agent=3)


def test_make_vec_env():
    venv = make_vec_env("navigation", 2, layout="per_env", device="cpu", seed=5, n_agents=3, max_steps=7)
    assert venv.num_envs == 2 and venv.n_agents == 3 and venv.sim.max_steps == 7
    assert venv.sim.auto_reset and venv.sim.seed_value == 5
    assert venv.observation_space.shape == (3 * venv.sim.obs_dim,)
    assert make_vec_env("navigation", 2, device="cpu", n_agents=3).num_envs == 6


# --- learning -----------------------------------------------------------------------------------


@pytest.fixture
def one_torch_thread():
    # A small MLP on two busy cores: torch's intra-op threads cost 30x more than they save.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ppo_learns_on_navigation(layout, one_torch_thread):
    # Two rollouts and updates through VecNormalize: SB3 drives the adapter end to end.
    venv = make_vec_env("navigation", 4, layout=layout, device="cpu", seed=0, max_steps=32)
    n_steps = 64 if layout == "per_agent" else 128
    model = PPO(
        "MlpPolicy", VecNormalize(venv), n_steps=n_steps, batch_size=256, n_epochs=2, seed=0, device="cpu", verbose=0
    )
    model.learn(total_timesteps=2 * n_steps * venv.num_envs)
    assert model.num_timesteps == 2 * n_steps * venv.num_envs
    assert len(model.ep_info_buffer) > 0  # the adapter's episode stats reached SB3's logger
    assert all(1 <= info["l"] <= 32 for info in model.ep_info_buffer)
    actions, _ = model.predict(model.get_env().reset(), deterministic=True)
    assert actions.shape == (venv.num_envs, *venv.action_space.shape)
    model.get_env().close()
