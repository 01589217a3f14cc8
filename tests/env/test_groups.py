"""Agent groups (swarp.core.groups): per-group action spaces decoded by one launch, per-group
views of the output buffers (no copy), step/reset/send by dict, the flat API of a one-group
scenario unchanged, and bad input refused with the environment intact."""

import pickle

import pytest
import torch

import swarp
from swarp.core.groups import GroupSpec, group_ranges, observation_widths
from swarp.core.spaces import decode_torch
from swarp.scenarios.navigation import NavigationScenario
from tests.groups_support import NARROW, GroupedNavigation, NarrowNavigation
from tests.support import DEVICES


def grouped(n_envs=5, scenario=GroupedNavigation, **kwargs):
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("seed", 4)
    return swarp.Environment(scenario(n_agents=4), n_envs=n_envs, **kwargs)


def mixed_actions(env, generator):
    """``{a: [E, 2, 1] int64 discrete, b: [E, 2, 2] float}``."""
    a = env.groups[0].action_space.sample(env.n_envs, 2, generator)
    b = torch.rand(env.n_envs, 2, 2, generator=generator) * 2 - 1
    return {"a": a, "b": b}


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("use_graph", [True, False])
def test_mixed_groups_equal_the_decoded_continuous_env(fused, use_graph):
    """A discrete group beside a continuous one steps to the bits of a one-group continuous env
    given the decoded commands: one decode launch (or the torch decode) serves both groups."""
    kwargs = {"fused": fused, "use_graph": use_graph, "auto_reset": True, "max_steps": 7}
    env = grouped(action_space={"a": "discrete"}, action_nvec={"a": (5, 3)}, **kwargs)
    plain = swarp.Environment(NavigationScenario(n_agents=4), n_envs=5, device="cpu", seed=4, **kwargs)
    assert [g.action_space.kind for g in env.groups] == ["discrete", "continuous"]
    assert env.action_space is None and env.grouped
    low, high = plain.action_bounds
    generator = torch.Generator().manual_seed(0)
    for _ in range(12):
        actions = mixed_actions(env, generator)
        space = env.groups[0].action_space
        command, _ = decode_torch(space, actions["a"], low[:2], high[:2])
        obs, reward, terminated, truncated, info = env.step(actions)
        p_obs, p_reward, p_terminated, p_truncated, p_info = plain.step(torch.cat([command, actions["b"]], dim=1))
        assert torch.equal(torch.cat([obs["a"], obs["b"]], dim=1), p_obs)
        assert torch.equal(torch.cat([reward["a"], reward["b"]], dim=1), p_reward)
        assert torch.equal(terminated, p_terminated) and torch.equal(truncated, p_truncated)
        final = info["final_obs"]
        assert torch.equal(torch.cat([final["a"], final["b"]], dim=1), p_info["final_obs"])
    assert not bool(env.invalid_actions())


def test_group_outputs_are_views_of_their_width():
    """Each group's tensors are strided views of the one row store, cut to the group's width:
    no copy, no padding column; reset, reset_at and step speak dicts by group."""
    env = grouped(scenario=NarrowNavigation, auto_reset=True)
    assert [(g.name, g.start, g.stop, g.obs_dim) for g in env.groups] == [
        ("a", 0, 2, env.obs_dim),
        ("b", 2, 4, NARROW),
    ]
    obs, info = env.reset()
    assert obs["b"].shape == (5, 2, NARROW) and obs["a"].shape == (5, 2, env.obs_dim)
    assert obs["b"].data_ptr() == env.obs[:, 2:].data_ptr() and obs["a"].data_ptr() == env.obs.data_ptr()
    assert torch.equal(env.obs[:, 2:, NARROW:], torch.zeros_like(env.obs[:, 2:, NARROW:]))
    actions = {"a": torch.zeros(5, 2, 2), "b": torch.full((5, 2, 2), 0.3)}
    obs, reward, *_, info = env.step(actions)
    assert reward["b"].shape == (5, 2) and reward["b"].data_ptr() == env.reward[:, 2:].data_ptr()
    assert info["final_obs"]["b"].shape == (5, 2, NARROW)
    assert torch.equal(env.world.actions[:, 2:], actions["b"])
    obs = env.reset_at(torch.tensor([True, False, False, False, True]))
    assert set(obs) == {"a", "b"} and obs["b"].shape == (5, 2, NARROW)
    cloned = grouped(scenario=NarrowNavigation, clone_outputs=True)
    obs, reward, *_ = cloned.step(actions)
    assert obs["a"].data_ptr() != cloned.obs.data_ptr() and obs["b"].shape == (5, 2, NARROW)


def test_a_tensor_where_every_group_is_continuous():
    """Continuous groups also take the flat [E, A, D] command; outputs are by group either way."""
    env, twin = grouped(), grouped()
    assert env.action_space.kind == "continuous" and env.act_dim == 2
    actions = torch.rand(5, 4, 2, generator=torch.Generator().manual_seed(2)) - 0.5
    obs, *_ = env.step(actions)
    obs_twin, *_ = twin.step({"a": actions[:, :2], "b": actions[:, 2:]})
    assert torch.equal(obs["a"], obs_twin["a"]) and torch.equal(obs["b"], obs_twin["b"])


def test_bad_group_input_is_refused_and_leaves_the_env_intact():
    env = grouped(action_space={"a": "multidiscrete"})
    generator = torch.Generator().manual_seed(3)
    env.step(mixed_actions(env, generator) | {"a": torch.zeros(5, 2, 2, dtype=torch.int64)})
    before = env.get_state()
    good = {"a": torch.zeros(5, 2, 2, dtype=torch.int64), "b": torch.zeros(5, 2, 2)}
    cases = [
        ({**good, "c": good["b"]}, ValueError, r"unknown group\(s\) \['c'\]; the groups are \['a', 'b'\]"),
        ({"a": good["a"]}, ValueError, r"no actions for group\(s\) \['b'\]"),
        ({**good, "a": good["a"].float()}, TypeError, r"actions\['a'\] must be integer indices"),
        ({**good, "b": good["b"].long()}, TypeError, r"actions\['b'\] must have dtype torch.float32"),
        ({**good, "b": torch.zeros(5, 3, 2)}, ValueError, r"actions\['b'\] must have shape"),
        (torch.zeros(5, 4, 2), TypeError, "mapping of tensors by group"),
        ([good["a"], good["b"]], TypeError, r"mapping of tensors by group .* \(got list\)"),
    ]
    for actions, error, match in cases:
        with pytest.raises(error, match=match):
            env.step(actions)
        with pytest.raises(error, match=match):
            env.send(actions)
    after = env.get_state()
    assert all(torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(AttributeError, match="act_dim"):
        env.act_dim
    env.step({**good, "a": torch.tensor([[[0, 3]] * 2] * 5)})  # column 1 has 3 levels: 3 is out of range
    assert bool(env.invalid_actions())
    assert torch.equal(env.world.actions[:, :2], torch.zeros(5, 2, 2))


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"action_space": {"c": "discrete"}}, ValueError, r"action_space names unknown group\(s\) \['c'\]"),
        ({"action_space": {"a": "binary"}}, ValueError, "action_space must be one of"),
        ({"action_space": {"a": "discrete"}, "action_nvec": {"a": (2, 2, 2)}}, ValueError, "group 'a': action_nvec"),
        ({"action_nvec": {"zz": 3}}, ValueError, r"action_nvec names unknown group\(s\) \['zz'\]"),
        ({"lidar_rays": 4, "scenario": NarrowNavigation}, ValueError, "lidar_rays needs groups of one observation"),
    ],
)
def test_bad_group_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        grouped(**kwargs)


def test_group_specs_are_checked():
    with pytest.raises(ValueError, match="must add up to the world's 4 agents"):
        group_ranges((GroupSpec("a", 1, 3), GroupSpec("b", 2, 3)), 4)
    with pytest.raises(ValueError, match="distinct"):
        group_ranges((GroupSpec("a", 2, 3), GroupSpec("a", 2, 3)), 4)
    with pytest.raises(ValueError, match="identifier"):
        GroupSpec("a b", 2, 3)
    with pytest.raises(ValueError, match="n_agents must be an int >= 1"):
        GroupSpec("a", 0, 3)
    with pytest.raises(ValueError, match="widest group's obs_dim"):
        observation_widths((GroupSpec("a", 2, 3), GroupSpec("b", 2, 4)), 5, 0)
    assert observation_widths((), 5, 3) == {"agents": 8}
    assert observation_widths((GroupSpec("a", 2, 5), GroupSpec("b", 2, 5)), 5, 3) == {"a": 8, "b": 8}


def test_lidar_columns_follow_each_group():
    env = grouped(lidar_rays=4)
    obs, _ = env.reset()
    assert obs["a"].shape == (5, 2, env.obs_dim) and env.groups[1].obs_dim == env.scenario_obs_dim + 4


def test_send_recv_shards_and_pickle_match_step():
    """send/recv, CPU shards and a pickled copy step groups to the bits of one thread's step."""
    kwargs = {"action_space": {"a": "discrete"}, "auto_reset": True, "max_steps": 5}
    env, sharded = grouped(n_envs=8, **kwargs), grouped(n_envs=8, plan={"cpu_shards": 2}, cpu_threads=2, **kwargs)
    copy = pickle.loads(pickle.dumps(env))
    generator = torch.Generator().manual_seed(5)
    for _ in range(8):
        actions = mixed_actions(env, generator)
        expected, *_ = env.step(actions)
        sharded.send(actions)
        got, *_ = sharded.recv()
        again, *_ = copy.step(actions)
        for name in ("a", "b"):
            assert torch.equal(got[name], expected[name]) and torch.equal(again[name], expected[name])


@pytest.mark.parametrize("fused", [True, False])
def test_grad_step_by_group(fused):
    """A grad-mode step with continuous groups' actions reaches each group's actions."""
    env = grouped(fused=fused)
    actions = {name: torch.full((5, 2, 2), 0.2, requires_grad=True) for name in ("a", "b")}
    obs, reward, *_ = env.step(actions)
    (reward["a"].sum() + reward["b"].sum() + obs["b"].sum()).backward()
    assert all(actions[name].grad is not None and actions[name].grad.abs().sum() > 0 for name in ("a", "b"))


def test_one_group_scenarios_keep_the_flat_api():
    env = swarp.make("navigation", n_envs=3, device="cpu")
    assert not env.grouped and [g.name for g in env.groups] == ["agents"]
    assert env.groups[0].action_space is env.action_space and env.groups[0].obs_dim == env.obs_dim
    obs, reward, *_ = env.step(torch.zeros(3, env.n_agents, env.act_dim))
    assert obs is env.obs and reward is env.reward


@DEVICES
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_groups_on_the_device_agree_with_the_cpu_and_make_no_host_transfer(device, fused):
    """Mixed groups on the device: the CPU's outputs within float tolerance, the same flags, and a
    dict step (captured) that reads no value on the host."""
    from swarp.testing import forbid_host_transfers

    kwargs = {"action_space": {"a": "discrete"}, "auto_reset": True, "max_steps": 6, "fused": fused}
    cpu, dev = grouped(**kwargs), grouped(device=device, **kwargs)
    generator = torch.Generator().manual_seed(6)
    for step in range(10):
        actions = mixed_actions(cpu, generator)
        if step == 4:
            actions["a"][0, 0, 0] = 99  # out of range: a zero command and the flag, on both
        expected, reward, *_ = cpu.step(actions)
        on_device = {name: tensor.to(dev.torch_device) for name, tensor in actions.items()}
        if step < 5:
            got, got_reward, *_ = dev.step(on_device)
        else:
            with forbid_host_transfers():
                got, got_reward, *_ = dev.step(on_device)
        for name in ("a", "b"):
            torch.testing.assert_close(got[name].cpu(), expected[name], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(got_reward[name].cpu(), reward[name], atol=1e-4, rtol=1e-4)
    assert bool(cpu.invalid_actions()) and bool(dev.invalid_actions())


def test_an_env_pool_of_grouped_envs():
    """Partial batches of a grouped env: recv returns dicts by agent group, send takes them."""
    from swarp.env.pool import EnvPool

    pool = EnvPool([grouped(n_envs=2, action_space={"a": "discrete"}, env_offset=i * 2) for i in range(2)])
    generator = torch.Generator().manual_seed(9)
    pool.async_reset()
    for _ in range(4):
        obs, reward, terminated, truncated, info = pool.recv()
        assert set(obs) == {"a", "b"} and reward["b"].shape == (2, 2)
        pool.send(mixed_actions(pool.groups[0], generator), info["env_id"])


def test_the_scenario_contract_takes_groups():
    """swarp.testing.check_scenario on a grouped scenario with a discrete and a continuous group."""
    from swarp.testing import check_scenario

    class Registered(GroupedNavigation):
        name = "grouped_navigation_contract"

    swarp.register_scenario(Registered.name, Registered)
    try:
        report = check_scenario(
            Registered.name, n_envs=4, n_steps=16, n_agents=4, max_steps=6, action_space={"a": "discrete"}
        )
    finally:
        swarp.unregister_scenario(Registered.name)
    assert all(result == "ok" for result in report.values()), report


def test_join_is_split_inverted_with_zero_padding():
    env = grouped(scenario=NarrowNavigation)
    obs, _ = env.reset()
    widths = [g.obs_dim for g in env.groups]
    from swarp.core.groups import join, split

    flat = join(obs, [g.name for g in env.groups], env.obs_dim)
    assert torch.equal(flat, env.obs) and flat.data_ptr() != env.obs.data_ptr()
    again = split(flat, env.groups, widths)
    assert all(torch.equal(again[name], obs[name]) for name in obs)
