"""``swarp/vmas/``: VMAS scripts run through ``swarp.vmas`` with VMAS 1.5.2's conventions."""

import sys

import numpy as np
import pytest
import torch

from swarp.scenarios.framework.base import get_scenario
from swarp.vmas import SCENARIOS, VMAS_OPTIONS, VmasEnvironment, make_env, translate

E = 6  # envs per test env: small, the CPU is shared


def nav(**kwargs):
    kwargs = {"num_envs": E, "device": "cpu", "seed": 0, "n_agents": 3, **kwargs}
    return make_env("navigation", **kwargs)


@pytest.fixture(scope="module")
def env():
    """One navigation env with a time limit, shared by the read-only tests (each resets it)."""
    return nav(max_steps=4)


def random_actions(env, generator):
    """Per-agent actions drawn uniformly inside ``env.action_space`` (a VMAS script's own sampler)."""
    actions = []
    for space in env.action_space:
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        u = torch.rand((env.num_envs, *space.shape), generator=generator)
        actions.append(low + u * (high - low))
    return actions


# --- the VMAS README loop -----------------------------------------------------------------------


def test_the_vmas_readme_loop_runs_through_swarp(generator):
    # VMAS's README / use_vmas_env.py loop, only the import changed.
    env = make_env(
        scenario="navigation",
        num_envs=E,
        device="cpu",
        continuous_actions=True,
        wrapper=None,
        max_steps=5,
        seed=None,
        dict_spaces=False,
        grad_enabled=False,
        terminated_truncated=False,
        n_agents=3,
    )
    assert isinstance(env, VmasEnvironment)
    assert [agent.name for agent in env.agents] == ["agent_0", "agent_1", "agent_2"]
    assert env.n_agents == 3 and env.num_envs == env.batch_dim == E and env.max_steps == 5
    assert env.device == torch.device("cpu")
    obs = env.reset()
    assert isinstance(obs, list) and len(obs) == 3
    resets = 0
    for step in range(12):
        # Odd steps sample the action space, even ones VMAS's get_random_action.
        actions = random_actions(env, generator) if step % 2 else env.get_random_actions()
        for agent, action in zip(env.agents, actions, strict=True):
            assert env.action_space[agent.index].contains(action[0].numpy())
        obs, rews, dones, info = env.step(actions)
        assert len(obs) == len(rews) == len(info) == 3
        for o, r, i in zip(obs, rews, info, strict=True):
            assert o.shape == (E, env.sim.obs_dim) and o.dtype == torch.float32
            assert r.shape == (E,) and r.dtype == torch.float32
            assert isinstance(i, dict) and all(v.shape[0] == E for v in i.values())
        assert dones.shape == (E,) and dones.dtype == torch.bool
        for index in dones.nonzero().flatten().tolist():
            obs = env.reset_at(index)
            resets += 1
            assert not env.done()[index] and env.steps[index] == 0
        assert not env.done().any()
    # Every env hits the 5-step limit at steps 5 and 10 (navigation does not finish that fast).
    assert resets == 2 * E


def test_get_random_action_stays_in_the_space_and_is_seeded():
    a, b = nav(seed=3), nav(seed=3)
    for agent in a.agents:
        action = a.get_random_action(agent)
        assert action.shape == (E, agent.action_size) and action.dtype == torch.float32
        assert ((action >= agent.action_low) & (action <= agent.action_high)).all()
        assert torch.equal(action, b.get_random_action(agent.name))
    before = torch.random.get_rng_state()
    a.get_random_actions()
    assert torch.equal(torch.random.get_rng_state(), before)  # torch's global RNG untouched


# --- return conventions ---------------------------------------------------------------------------


def test_reset_and_reset_at_compose_what_vmas_returns(env):
    obs = env.reset()
    assert isinstance(obs, list) and len(obs) == env.n_agents
    out = env.reset(return_info=True, return_dones=True)
    assert isinstance(out, list) and len(out) == 3
    obs, dones, infos = out
    assert dones.dtype == torch.bool and not dones.any()
    assert isinstance(infos, list) and isinstance(infos[0], dict)
    assert env.reset(return_observations=False) is None
    assert isinstance(env.reset(return_observations=False, return_dones=True), torch.Tensor)
    obs = env.reset_at(2)
    assert len(obs) == env.n_agents and obs[0].shape == (E, env.sim.obs_dim)
    obs, infos = env.reset_at(2, return_info=True)
    assert isinstance(infos[0], dict)


def test_outputs_are_the_callers_and_match_the_batched_env(env, generator):
    env.reset()
    obs, rews, dones, infos = env.step(env.get_random_actions())
    sim = env.sim
    for i in range(env.n_agents):
        assert torch.equal(obs[i], sim.obs[:, i])
        assert torch.equal(rews[i], sim.reward[:, i])
        assert obs[i].is_contiguous()
        assert torch.equal(infos[i]["dist_to_goal"], sim.info["dist_to_goal"][:, i])  # [E, A]: split
        assert torch.equal(infos[i]["neighbor_overflow"], sim.info["neighbor_overflow"])  # [E]: whole
    kept = [o.clone() for o in obs]
    flags = sim.info["neighbor_overflow"].clone()
    obs[0].fill_(123.0)
    rews[0].fill_(-5.0)
    infos[0]["neighbor_overflow"].fill_(True)
    assert not (sim.obs == 123.0).any() and not (sim.reward == -5.0).any()
    assert torch.equal(infos[1]["neighbor_overflow"], flags) and torch.equal(sim.info["neighbor_overflow"], flags)
    env.step(env.get_random_actions())
    assert torch.equal(obs[1], kept[1])  # the next step does not rewrite what was returned


def test_dict_spaces_and_terminated_truncated():
    env = nav(max_steps=2, dict_spaces=True, terminated_truncated=True)
    names = [agent.name for agent in env.agents]
    obs = env.reset()
    assert isinstance(obs, dict) and list(obs) == names
    assert list(env.action_space.spaces) == names and list(env.observation_space.spaces) == names
    out = env.reset(return_info=True, return_dones=True)
    assert len(out) == 4  # obs, terminated, truncated, infos
    assert isinstance(out[0], dict) and isinstance(out[3], dict) and list(out[3]) == names
    actions = {agent.name: env.get_random_action(agent) for agent in env.agents}
    out = env.step(actions)
    assert isinstance(out, list) and len(out) == 5
    obs, rews, terminated, truncated, infos = out
    assert list(obs) == list(rews) == list(infos) == names
    assert terminated.dtype == truncated.dtype == torch.bool and not truncated.any()
    # Lists are accepted whatever the spaces, as in VMAS.
    obs, rews, terminated, truncated, infos = env.step(env.get_random_actions())
    assert truncated.all()
    done_terminated, done_truncated = env.done()
    assert torch.equal(done_truncated, truncated)
    env.reset_at(0)
    assert not env.done()[1][0] and env.done()[1][1:].all()


def test_without_max_steps_nothing_is_truncated():
    env = nav(terminated_truncated=True)
    assert env.max_steps is None
    for _ in range(3):
        _, _, _, truncated, _ = env.step(env.get_random_actions())
        assert not truncated.any()


def test_the_return_structure_equals_vmas_152():
    vmas = pytest.importorskip("vmas")

    def structure(x):
        if isinstance(x, torch.Tensor):
            return ("tensor", x.dtype, x.shape[:1])
        if isinstance(x, dict):  # agent-keyed dicts must match by keys; info dicts hold tensors [E, ...]
            if all(str(k).startswith("agent_") for k in x):
                return ("dict", tuple((k, structure(v)) for k, v in x.items()))
            return ("info", all(isinstance(v, torch.Tensor) and v.shape[0] == E for v in x.values()))
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, tuple(structure(v) for v in x))
        return type(x).__name__

    for dict_spaces in (False, True):
        for terminated_truncated in (False, True):
            kwargs = dict(num_envs=E, device="cpu", seed=0, max_steps=3, n_agents=3, dict_spaces=dict_spaces)
            kwargs["terminated_truncated"] = terminated_truncated
            theirs, ours = vmas.make_env("navigation", **kwargs), make_env("navigation", **kwargs)
            assert [a.name for a in theirs.agents] == [a.name for a in ours.agents]
            for call in (
                lambda e: e.reset(),
                lambda e: e.reset(return_info=True, return_dones=True),
                lambda e: e.reset(return_info=True, return_dones=True, return_observations=False),
                lambda e: e.step([torch.zeros(E, 2) for _ in e.agents]),
                lambda e: e.step({a.name: torch.zeros(E, 2) for a in e.agents}),
                lambda e: e.reset_at(1),
                lambda e: e.reset_at(1, return_dones=True),
                lambda e: e.done(),
            ):
                assert structure(call(ours)) == structure(call(theirs))
            assert type(ours.action_space).__name__ == type(theirs.action_space).__name__
            assert ours.action_space[0 if not dict_spaces else "agent_0"].shape == (2,)


# --- actions ----------------------------------------------------------------------------------------


def test_actions_are_checked_like_vmas(env):
    env.reset()
    zeros = [torch.zeros(E, 2) for _ in env.agents]
    with pytest.raises(ValueError, match="out of the action space"):
        env.step([torch.full((E, 2), 1.5), *zeros[1:]])
    nan = torch.zeros(E, 2)
    nan[3, 1] = float("nan")
    with pytest.raises(ValueError, match="agent_1, env 3, component 1"):
        env.step([zeros[0], nan, zeros[2]])
    with pytest.raises(ValueError, match="3 agents, got 2"):
        env.step(zeros[:2])
    with pytest.raises(ValueError, match=r"shape \[num_envs, act_dim\] = \[6, 2\], got \[6, 3\]"):
        env.step([torch.zeros(E, 3), *zeros[1:]])
    with pytest.raises(ValueError, match=r"got \[6, 1\]"):  # [E] is read as [E, 1], as VMAS does
        env.step([torch.zeros(E), *zeros[1:]])
    with pytest.raises(ValueError, match="missing \\['agent_2'\\], unknown \\['agent_9'\\]"):
        env.step({"agent_0": zeros[0], "agent_1": zeros[1], "agent_9": zeros[2]})
    with pytest.raises(TypeError, match="real numbers"):
        env.step([torch.zeros(E, 2, dtype=torch.bool), *zeros[1:]])
    with pytest.raises(TypeError, match="list of 3 per-agent tensors"):
        env.step(torch.zeros(E, 3, 2))
    # Numbers that are not tensors, and integer tensors, are converted.
    env.step([np.zeros((E, 2)), [[0.5, -0.5]] * E, torch.zeros(E, 2, dtype=torch.int64)])


def test_clamp_actions_clamps_but_nan_still_raises():
    env = nav(clamp_actions=True)
    big = [torch.full((E, 2), 7.0) for _ in env.agents]
    clamped = [torch.ones(E, 2) for _ in env.agents]
    obs_big = env.step(big)[0]
    env.reset(seed=0)
    obs_clamped = env.step(clamped)[0]
    env.reset(seed=0)
    assert all(torch.equal(a, b) for a, b in zip(obs_big, obs_clamped, strict=True))
    with pytest.raises(ValueError, match="NaN"):
        env.step([torch.full((E, 2), float("nan")) for _ in env.agents])


def test_grad_enabled_keeps_the_actions_history():
    env = nav(grad_enabled=True)
    actions = [torch.zeros(E, 2, requires_grad=True) for _ in env.agents]
    obs, rews, dones, infos = env.step(actions)
    sum(r.sum() for r in rews).backward()
    assert any(a.grad is not None and a.grad.abs().sum() > 0 for a in actions)
    off = nav()  # grad_enabled=False detaches, as VMAS does
    _, rews, _, _ = off.step([torch.zeros(E, 2, requires_grad=True) for _ in off.agents])
    assert not rews[0].requires_grad


# --- reset_at, seeding, render, spaces ----------------------------------------------------------------


def test_reset_at_takes_one_index(env):
    env.reset()
    for index in (1, np.int64(2), torch.tensor(3), torch.tensor([4])):
        env.reset_at(index)
    with pytest.raises(IndexError, match=r"\[0, 6\)"):
        env.reset_at(E)
    with pytest.raises(TypeError, match="sim.reset_at"):
        env.reset_at(torch.ones(E, dtype=torch.bool))
    with pytest.raises(TypeError, match="int env index"):
        env.reset_at(True)


def test_reset_at_changes_only_its_env(env):
    before = [o.clone() for o in env.reset()]
    after = env.reset_at(4)
    for b, a in zip(before, after, strict=True):
        assert torch.equal(b[:4], a[:4]) and torch.equal(b[5:], a[5:]) and not torch.equal(b[4], a[4])


def test_seeds_reproduce_and_do_not_touch_global_rngs():
    state = torch.random.get_rng_state()
    a, b = nav(seed=5), nav(seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a.reset(), b.reset(), strict=True))
    first = a.reset(seed=9)
    a.step(a.get_random_actions())
    b.seed(9)  # VMAS's seed(), then reset(): the same start as reset(seed=9)
    assert all(torch.equal(x, y) for x, y in zip(first, b.reset(), strict=True))
    assert not torch.equal(first[0], nav(seed=6).reset()[0])
    assert torch.equal(torch.random.get_rng_state(), state)
    with pytest.raises(ValueError, match=r"\[0, 2\^31\)"):
        a.reset(seed=-1)


def test_render_returns_an_rgb_frame(env):
    frame = env.render(mode="rgb_array", env_index=1, width=64, height=48)
    assert isinstance(frame, np.ndarray) and frame.shape == (48, 64, 3) and frame.dtype == np.uint8
    with pytest.raises(IndexError):
        env.render(env_index=E)
    with pytest.raises(ValueError, match="agent_index_focus"):
        env.render(agent_index_focus=0)
    with pytest.raises(ValueError, match="render mode"):
        env.render(mode="ansi")


def test_spaces_are_vmas_shaped_boxes(env):
    gymnasium = pytest.importorskip("gymnasium")
    assert isinstance(env.action_space, gymnasium.spaces.Tuple) and len(env.action_space) == env.n_agents
    low, high = env.sim.action_bounds
    for i, space in enumerate(env.action_space):
        assert space.dtype == np.float32 and space.shape == (env.sim.act_dim,)
        assert np.array_equal(space.low, low[i].numpy()) and np.array_equal(space.high, high[i].numpy())
    for space in env.observation_space:
        assert space.shape == (env.sim.obs_dim,) and space.dtype == np.float32 and np.isinf(space.low).all()


def test_spaces_say_what_is_missing_without_gymnasium(monkeypatch):
    env = nav()
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(ImportError, match="need gymnasium"):
        env.action_space
    env.step(env.get_random_actions())  # everything else works


# --- scenarios and options --------------------------------------------------------------------------


@pytest.mark.parametrize("vmas_name", sorted(SCENARIOS))
def test_every_mapped_vmas_scenario_runs(vmas_name):
    env = make_env(vmas_name, num_envs=2, device="cpu", seed=1, max_steps=3)
    assert env.sim.scenario.name == SCENARIOS[vmas_name]
    obs = env.reset()
    assert len(obs) == env.n_agents == env.sim.n_agents
    for _ in range(3):
        obs, rews, dones, infos = env.step(env.get_random_actions())
    assert all(o.shape == (2, env.sim.obs_dim) for o in obs) and all(r.shape == (2,) for r in rews)
    assert dones.all()  # the 3-step limit
    for info in infos:
        assert all(v.shape[0] == 2 for v in info.values())
    if vmas_name == "simple_spread":  # per-landmark entries are not split by agent
        assert infos[0]["landmark_dist"].shape == (2, env.n_agents)


def test_swarp_names_work_too():
    env = make_env("formation.py", num_envs=2, n_agents=4, formation_radius=0.3)
    assert env.sim.scenario.name == "formation" and env.n_agents == 4
    assert env.sim.scenario.cfg.formation_radius == 0.3


def test_vmas_navigation_options_are_translated():
    t = translate(
        "navigation",
        n_agents=5,
        shared_rew=True,
        pos_shaping_factor=2.0,
        final_reward=0.01,
        agent_collision_penalty=-1.5,
        agent_radius=0.1,
        world_spawning_x=1.5,
        world_spawning_y=1.5,
        enforce_bounds=True,
        collisions=True,
        agents_with_same_goal=1,
        comms_range=0,
        n_lidar_rays=12,
        lidar_range=0.35,
        obs_neighbors=2,  # a swarp option, passed as is
    )
    assert t.scenario == "navigation"
    assert t.options == {
        "n_agents": 5,
        "shared_reward": True,
        "shaping_factor": 2.0,
        "final_reward": 0.01,
        "collision_penalty": 1.5,
        "agent_radius": 0.1,
        "world_size": 1.5,
        "obs_neighbors": 2,
    }
    assert t.env_options == {"lidar_rays": 12, "lidar_range": 0.35}
    assert t.mapped["agent_collision_penalty"] == "collision_penalty=1.5"


def test_translated_options_reach_the_scenario():
    env = nav(agent_collision_penalty=-2.5, shared_rew=True, n_lidar_rays=4, lidar_range=0.5)
    cfg = env.sim.scenario.cfg
    assert cfg.collision_penalty == 2.5 and cfg.shared_reward is True and cfg.n_agents == 3
    assert env.sim.obs_dim == env.sim.scenario_obs_dim + 4
    # A value swarp rejects names the VMAS option it came from.
    with pytest.raises(ValueError, match="collision_penalty.*agent_collision_penalty"):
        nav(agent_collision_penalty=1.0)


def test_other_scenarios_translate():
    assert translate("simple_spread", n_agents=4, obs_agents=True).options == {"n_agents": 4}
    assert translate("simple_spread").scenario == "spread"
    t = translate("sampling", xdim=2.0, ydim=2.0, grid_spacing=0.1, cov=0.04, shared_rew=False)
    assert t.options == {
        "world_size": 2.0,
        "grid_cells": 40,
        "sigma_min": pytest.approx(0.2),
        "sigma_max": pytest.approx(0.2),
        "shared_reward": False,
    }
    t = translate("discovery", time_penalty=-0.01, covering_rew_coeff=2.0, targets_respawn=False, x_semidim=1.2)
    assert t.options == {"time_penalty": 0.01, "covering_reward": 2.0, "world_size": 1.2}
    assert translate("give_way", v_range=0.5, done_on_completion=True).options == {"max_speed": 0.5}
    assert translate("flocking", collision_reward=-0.1).options == {"collision_penalty": 0.1}
    assert translate("transport", package_mass=50).options == {"package_mass": 50}


@pytest.mark.parametrize(
    "scenario, option, message",
    [
        ("navigation", {"collisions": False}, "swarp implements collisions=True only"),
        ("navigation", {"agents_with_same_goal": 2}, "own goal"),
        ("navigation", {"enforce_bounds": False}, "soft walls"),
        ("navigation", {"world_spawning_x": 1.0, "world_spawning_y": 2.0}, "arena is square"),
        ("navigation", {"lidar_range": 0.3}, "lidar_rays > 0"),
        ("flocking", {"dist_shaping_factor": 1.0}, "no direct swarp equivalent.*cohesion_weight"),
        ("flocking", {"n_obstacles": 5}, "no obstacles"),
        ("discovery", {"targets_respawn": True}, "stay found"),
        ("discovery", {"shared_reward": True}, "no direct swarp equivalent"),
        ("give_way", {"done_on_completion": False}, "both agents are on goal"),
        ("give_way", {"linear_friction": 0.1}, "no direct swarp equivalent"),
        ("transport", {"package_width": 0.2}, "package_radius"),
        ("sampling", {"norm": True}, "not normalised"),
        ("sampling", {"grid_spacing": 0.3}, "whole number of cells"),
        ("sampling", {"cov": [0.05, 0.1, 0.2]}, "sigma_min and sigma_max"),
        ("simple_spread", {"obs_agents": False}, "obs_agents=True only"),
    ],
)
def test_options_without_a_swarp_equivalent_are_refused(scenario, option, message):
    with pytest.raises(ValueError, match=message):
        translate(scenario, **option)


def test_unknown_options_list_the_valid_ones():
    with pytest.raises(TypeError, match="VMAS navigation options.*swarp navigation options.*lidar_rays"):
        translate("navigation", no_such_option=1)
    with pytest.raises(TypeError, match="swarp formation options"):
        translate("formation", shared_rew=True)  # VMAS names apply to VMAS scenarios only


def test_every_rename_targets_a_real_swarp_option():
    for vmas_name, table in VMAS_OPTIONS.items():
        valid = get_scenario(SCENARIOS[vmas_name]).option_names()
        for option, rule in table.items():
            if rule.kind in ("rename", "negate"):
                assert rule.target in valid, (vmas_name, option, rule.target)
            assert rule.note or rule.kind in ("rename",), (vmas_name, option)


def test_unknown_scenarios_are_refused_with_swarps_names():
    with pytest.raises(ValueError, match=r"no swarp counterpart.*discovery' with agents_per_target=1.*formation"):
        translate("dispersion")
    with pytest.raises(ValueError, match="swarp scenarios"):
        translate("football")

    class BaseScenario:  # what a VMAS user may pass instead of a name
        pass

    with pytest.raises(TypeError, match="scenario name"):
        translate(BaseScenario)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"multidiscrete_actions": True}, ValueError, "needs continuous_actions=False"),
        ({"continuous_actions": 0}, TypeError, "continuous_actions"),
        ({"wrapper": "gymnasium"}, ValueError, "swarp.interop"),
        ({"wrapper_kwargs": {"a": 1}}, ValueError, "wrapper_kwargs"),
        ({"num_envs": 0}, ValueError, "num_envs"),
        ({"max_steps": 0}, ValueError, "max_steps"),
        ({"seed": 2**31}, ValueError, "seed"),
        ({"dict_spaces": 1}, TypeError, "dict_spaces"),
        ({"device": 1.5}, TypeError, "device"),
    ],
)
def test_make_env_refuses_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        make_env("navigation", **kwargs)


def test_vmas_positional_order():
    # vmas.make_env(scenario, num_envs, device, continuous_actions, wrapper, max_steps, seed, dict_spaces)
    env = make_env("navigation", 2, "cpu", True, None, 7, 4, True)
    assert env.num_envs == 2 and env.max_steps == 7 and env.dict_spaces and env.sim.seed_value == 4
