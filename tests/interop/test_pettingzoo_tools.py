"""``swarp/interop/pettingzoo.py`` with the tools around PettingZoo: its ``max_cycles_test`` and
``render_test`` (the AEC ``env(...)``, ``max_cycles``, ``render_mode="human"``), copies and pickles
of the adapter, and SuperSuit's route to Stable-Baselines3 (``concat_vec_envs_v1``, in process and in
worker processes, which pickle the env)."""

import copy
import pickle

import numpy as np
import pytest

pytest.importorskip("pettingzoo")  # the pettingzoo extra

from pettingzoo.test import max_cycles_test, parallel_api_test, render_test  # noqa: E402

import swarp  # noqa: E402
from swarp.interop import pettingzoo as swarp_pettingzoo  # noqa: E402
from swarp.interop.pettingzoo import SwarpParallelEnv, env, parallel_env  # noqa: E402

N_AGENTS = 3


@pytest.fixture
def headless(monkeypatch):
    """pygame without a display (``render_mode="human"``); the window is closed afterwards."""
    pygame = pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    yield pygame
    pygame.display.quit()


def zero_actions(par_env) -> dict:
    return {agent: np.zeros(par_env.action_space(agent).shape, np.float32) for agent in par_env.agents}


def test_max_cycles_test():
    max_cycles_test(swarp_pettingzoo)


@pytest.mark.parametrize("auto_reset", [False, True])
def test_parallel_api_test_with_max_cycles(auto_reset):
    parallel_api_test(parallel_env(max_cycles=25, n_agents=N_AGENTS, auto_reset=auto_reset), num_cycles=60)


def test_max_cycles_is_the_episode_length():
    par_env = parallel_env(n_agents=N_AGENTS, max_cycles=5)
    assert par_env.max_cycles == 5 and par_env.sim.max_steps == 5  # the env's own time limit too
    for _ in range(2):  # and again after a reset
        par_env.reset()
        for _ in range(4):
            _, _, terminations, truncations, _ = par_env.step(zero_actions(par_env))
            assert not any(truncations.values()) and not any(terminations.values())
        _, _, _, truncations, _ = par_env.step(zero_actions(par_env))
        assert all(truncations.values()) and par_env.agents == []

    # Over an env with a longer limit, max_cycles truncates first; reassigned, from the next episode on.
    sim = swarp.make("navigation", n_envs=2, device="cpu", n_agents=N_AGENTS, max_steps=50, auto_reset=True)
    par_env = SwarpParallelEnv(sim, env_index=1, max_cycles=3)
    par_env.reset(seed=1)
    for _ in range(3):
        observations, _, _, truncations, _ = par_env.step(zero_actions(par_env))
    assert all(truncations.values()) and not bool(sim.truncated[1])
    np.testing.assert_array_equal(observations["agent_0"], sim.obs[1, 0].numpy())  # no auto-reset happened
    par_env.max_cycles = None
    par_env.reset()
    for _ in range(10):
        _, _, _, truncations, _ = par_env.step(zero_actions(par_env))
    assert not any(truncations.values())

    # With both, the earlier limit ends the episode.
    par_env = parallel_env(n_agents=N_AGENTS, max_cycles=8, max_steps=2)
    assert par_env.sim.max_steps == 2
    par_env.reset()
    par_env.step(zero_actions(par_env))
    assert all(par_env.step(zero_actions(par_env))[3].values())


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_bad_max_cycles_is_refused(bad):
    with pytest.raises(ValueError, match="max_cycles must be an int >= 1 or None"):
        parallel_env(max_cycles=bad)
    par_env = parallel_env(n_agents=2, max_steps=4)
    with pytest.raises(ValueError, match="max_cycles must be an int >= 1 or None"):
        par_env.max_cycles = bad
    assert par_env.max_cycles is None


def test_aec_env():
    aec = env(n_agents=N_AGENTS, max_cycles=4, seed=2)
    assert isinstance(aec.unwrapped, SwarpParallelEnv) and aec.unwrapped.max_cycles == 4
    aec.reset(seed=2)
    assert aec.possible_agents == [f"agent_{i}" for i in range(N_AGENTS)]
    turns = 0
    for agent in aec.agent_iter():
        _, _, terminated, truncated, _ = aec.last()
        aec.step(None if terminated or truncated else aec.action_space(agent).sample())
        turns += 1
    assert turns == 5 * N_AGENTS  # 4 cycles, then every agent's last (done) turn
    aec.close()


def test_render_test(headless):
    render_test(env)


def test_human_mode_draws_into_a_window(headless):
    par_env = parallel_env(n_agents=N_AGENTS, render_mode="human", max_cycles=3)
    assert par_env.metadata["render_modes"] == ["human", "rgb_array"]
    par_env.reset()
    assert headless.display.get_surface().get_size() == (480, 480)  # drawn by reset
    par_env.step(zero_actions(par_env))
    assert par_env.render() is None
    par_env.close()
    assert not headless.display.get_init()
    with pytest.raises(ValueError, match="render_mode must be None, 'rgb_array' or 'human'"):
        parallel_env(render_mode="ansi")


# --- copies and pickles of the adapter ----------------------------------------------------------


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))], ids=["deepcopy", "pickle"])
def test_copies_rebuild_the_adapter(copier):
    sim = swarp.make("navigation", n_envs=3, device="cpu", seed=6, n_agents=N_AGENTS, max_steps=20)
    par_env = SwarpParallelEnv(sim, env_index=1, render_mode="rgb_array", max_cycles=7)
    par_env.reset(seed=3)
    par_env.step(zero_actions(par_env))
    twin = copier(par_env)
    assert isinstance(twin, SwarpParallelEnv) and twin.sim is not sim and twin.agents == []  # call reset first
    assert (twin.env_index, twin.render_mode, twin.max_cycles) == (1, "rgb_array", 7)
    assert twin.sim.n_envs == 3 and twin.sim.max_steps == 20 and twin.possible_agents == par_env.possible_agents
    runs = []
    for adapter in (par_env, twin):
        rng = np.random.default_rng(0)
        obs, _ = adapter.reset(seed=9)
        trajectory = [obs]
        for _ in range(7):  # the whole episode (max_cycles)
            actions = {a: rng.uniform(-1, 1, 2).astype(np.float32) for a in adapter.possible_agents}
            trajectory.append(adapter.step(actions)[:2])
        assert adapter.agents == []
        runs.append(trajectory)
    for got, expected in zip(*runs, strict=True):
        np.testing.assert_equal(got, expected)
    assert twin.render().shape == (480, 480, 3)


def test_deepcopy_of_the_aec_env():
    aec = env(n_agents=2, max_cycles=3)
    twin = copy.deepcopy(aec)
    assert twin.unwrapped is not aec.unwrapped and twin.unwrapped.sim is not aec.unwrapped.sim
    twin.reset(seed=0)
    aec.reset(seed=0)
    np.testing.assert_array_equal(twin.observe("agent_1"), aec.observe("agent_1"))


# --- SuperSuit: PettingZoo -> Stable-Baselines3 --------------------------------------------------


@pytest.mark.parametrize("num_cpus", [0, 1, 2], ids=["in_process", "one_cpu", "worker_processes"])
def test_supersuit_concat_vec_envs_for_stable_baselines3(num_cpus):
    supersuit = pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    max_cycles = 6
    vec_env = supersuit.pettingzoo_env_to_vec_env_v1(parallel_env(n_agents=N_AGENTS, max_cycles=max_cycles))
    venv = supersuit.concat_vec_envs_v1(vec_env, 2, num_cpus=num_cpus, base_class="stable_baselines3")
    try:
        assert venv.num_envs == 2 * N_AGENTS
        obs = venv.reset()
        assert obs.shape == (2 * N_AGENTS, vec_env.par_env.sim.obs_dim) and obs.dtype == np.float32
        # Both copies are rebuilt with the construction seed: the same start, until actions differ.
        np.testing.assert_array_equal(obs[:N_AGENTS], obs[N_AGENTS:])
        rng = np.random.default_rng(1)
        for step in range(1, max_cycles + 3):
            actions = rng.uniform(-0.5, 0.5, (venv.num_envs, 2)).astype(np.float32)
            obs, rewards, dones, infos = venv.step(actions)
            assert obs.shape == (2 * N_AGENTS, vec_env.par_env.sim.obs_dim) and rewards.shape == (2 * N_AGENTS,)
            assert np.isfinite(obs).all() and np.isfinite(rewards).all()
            assert dones.all() if step == max_cycles else not dones.any()  # then the copy is reset
            assert ("terminal_observation" in infos[0]) == (step == max_cycles)
    finally:
        venv.close()
