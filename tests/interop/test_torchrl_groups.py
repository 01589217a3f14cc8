"""``SwarpEnv`` over an ``Environment`` with agent groups: one TorchRL group per agent group (VmasEnv's
``group_map`` layout), each with its own observation width and action space; TorchRL's spec check
and rollouts on every kind of group pair; the same bits as the raw ``Environment``; resets and
auto-reset; bad input refused."""

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torchrl.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from swarp.scenarios.navigation import NavigationScenario  # noqa: E402
from swarp.testing import forbid_host_transfers  # noqa: E402
from tests.groups_support import NARROW, GroupedNavigation, NarrowNavigation  # noqa: E402
from tests.support import DEVICES  # noqa: E402

N_ENVS = 3
GROUPS = ("a", "b")
#: Group action options of the environment, by case: (swarp.Environment keywords, categorical_actions).
CASES = {
    "continuous": ({}, True),
    "discrete+continuous": ({"action_space": {"a": "discrete"}, "action_nvec": {"a": (5, 3)}}, True),
    "multidiscrete": ({"action_space": "multidiscrete", "action_nvec": {"b": (2, 4)}}, True),
    "one-hot": ({"action_space": {"a": "multidiscrete", "b": "discrete"}}, False),
}
#: Each case's action spec per group: (class, per-agent shape).
SPECS = {
    "continuous": {"a": (Bounded, (2,)), "b": (Bounded, (2,))},
    "discrete+continuous": {"a": (Categorical, ()), "b": (Bounded, (2,))},
    "multidiscrete": {"a": (MultiCategorical, (2,)), "b": (MultiCategorical, (2,))},
    "one-hot": {"a": (MultiOneHot, (6,)), "b": (OneHot, (9,))},
}


def grouped(scenario=GroupedNavigation, seed=1, device="cpu", model="holonomic", **kwargs):
    kwargs.setdefault("max_steps", 6)
    return swarp.Environment(scenario(n_agents=4, model=model), n_envs=N_ENVS, device=device, seed=seed, **kwargs)


def make_case(case, scenario=GroupedNavigation, **kwargs):
    options, categorical = CASES[case]
    return SwarpEnv(grouped(scenario, **options, **kwargs), categorical_actions=categorical)


def random_inputs(sim, generator):
    """``{group: [E, A_g, width_g]}``: what ``Environment.step`` takes, random and valid."""
    inputs = {}
    for g in sim.groups:
        space = g.action_space
        if space.discrete:
            inputs[g.name] = space.sample(sim.n_envs, g.n_agents, generator)
        else:
            shape = (sim.n_envs, g.n_agents, space.width)
            inputs[g.name] = torch.rand(shape, generator=generator, device=generator.device) * 2 - 1
    return inputs


def encode(env: SwarpEnv, inputs) -> TensorDict:
    """``inputs`` by group in ``env``'s action encoding, as the tensordict its step reads."""
    groups = {}
    for g in env.sim.groups:
        space, action = g.action_space, inputs[g.name]
        if space.discrete and env.categorical_actions:
            action = action[..., 0] if space.kind == "discrete" else action
        elif space.discrete:
            rows = [torch.nn.functional.one_hot(action[..., c], n) for c, n in enumerate(space.heads)]
            action = torch.cat(rows, dim=-1)
        groups[g.name] = TensorDict({"action": action}, batch_size=[env.num_envs, g.n_agents])
    return TensorDict(groups, batch_size=env.batch_size)


@pytest.mark.parametrize("auto_reset", [False, True], ids=["reset", "auto_reset"])
@pytest.mark.parametrize("case", list(CASES))
def test_specs_per_group_pass_check_env_specs(case, auto_reset):
    scenario = NarrowNavigation if case == "continuous" else GroupedNavigation
    env = make_case(case, scenario, auto_reset=auto_reset)
    sim = env.sim
    assert env.layout == "agents"  # the default for a grouped Environment
    assert env.group_map == {"a": ["a_0", "a_1"], "b": ["b_0", "b_1"]}
    assert env.agent_names == ["a_0", "a_1", "b_0", "b_1"]
    assert env.agent_names_to_indices_map == {"a_0": 0, "a_1": 1, "b_0": 2, "b_1": 3}
    assert env.het_specs is False and env.het_specs_map == {"a": False, "b": False}
    assert env.continuous_actions is (case == "continuous")
    assert env.action_keys == [("a", "action"), ("b", "action")]
    assert env.reward_keys == [("a", "reward"), ("b", "reward")]
    assert env.done_keys == ["done", "terminated", "truncated"]  # at the root only, as VmasEnv's
    widths = {"a": sim.obs_dim, "b": NARROW if scenario is NarrowNavigation else sim.obs_dim}
    unbatched_obs, unbatched_action = env.full_observation_spec_unbatched, env.full_action_spec_unbatched
    for name in GROUPS:
        assert unbatched_obs[name, "observation"].shape == (2, widths[name])
        cls, per_agent = SPECS[case][name]
        spec = unbatched_action[name, "action"]
        assert isinstance(spec, cls) and spec.shape == (2, *per_agent), name
        assert spec.dtype == (torch.float32 if cls is Bounded else torch.int64)
        assert env.full_reward_spec_unbatched[name, "reward"].shape == (2, 1)
        assert unbatched_obs[name, "info", "dist_to_goal"].shape == (2, 1)
    assert unbatched_obs["info", "neighbor_overflow"].shape == (1,)
    with pytest.raises(KeyError, match="one observation per group"):
        env.observation_key
    check_env_specs(env, seed=0)
    data = env.rollout(14, break_when_any_done=False)  # two resets of every env (max_steps 6)
    assert data["next", "done"].sum() == 2 * N_ENVS
    for name in GROUPS:
        assert data["next", name, "observation"].shape == (N_ENVS, 14, 2, widths[name])
        assert data["next", name, "reward"].shape == (N_ENVS, 14, 2, 1)
        assert torch.isfinite(data["next", name, "observation"]).all()
    assert not bool(sim.invalid_actions())  # every sample of the specs is a valid action


@pytest.mark.parametrize("case", list(CASES))
def test_same_bits_as_the_raw_environment(case):
    """Actions stepped through ``SwarpEnv`` and straight into a twin ``Environment`` (by group) give
    the same observations, rewards, per-agent info and commands; the outputs are copies."""
    options, categorical = CASES[case]
    env = SwarpEnv(grouped(seed=7, **options), categorical_actions=categorical)
    raw = grouped(seed=7, **options)
    env.reset()
    raw.reset()
    generator = torch.Generator().manual_seed(3)
    for _ in range(8):
        inputs = random_inputs(raw, generator)
        out = env.step(encode(env, inputs))["next"]
        obs, reward, terminated, truncated, info = raw.step(inputs)
        assert torch.equal(env.sim.world.actions, raw.world.actions)
        for g in raw.groups:
            assert torch.equal(out[g.name, "observation"], obs[g.name])
            storage = out[g.name, "observation"].untyped_storage().data_ptr()
            assert storage != env.sim.obs.untyped_storage().data_ptr()  # a copy, not the buffer's view
            assert torch.equal(out[g.name, "reward"], reward[g.name].unsqueeze(-1))
            expected = info["dist_to_goal"][:, g.start : g.stop].unsqueeze(-1)
            assert torch.equal(out[g.name, "info", "dist_to_goal"], expected)
            action = encode(env, inputs)[g.name, "action"]
            assert torch.equal(env.to_physical(action, group=g.name), raw.world.actions[:, g.start : g.stop])
        assert torch.equal(out["terminated"].squeeze(-1), terminated)
        assert torch.equal(out["truncated"].squeeze(-1), truncated)
        if bool((terminated | truncated).any()):
            mask = (terminated | truncated).unsqueeze(-1)
            env.reset(TensorDict({"_reset": mask}, batch_size=env.batch_size))
            raw.reset_at(mask.squeeze(-1))
    assert not bool(env.sim.invalid_actions()) and not bool(raw.invalid_actions())


def fixed_policy(env: SwarpEnv) -> TensorDictSequential:
    """A deterministic policy per group: a command from the observation (continuous) or an index
    (discrete), so that two envs of the same seed follow the same trajectories."""
    modules = []
    for g in env.sim.groups:
        space = g.action_space

        def act(obs, space=space):
            if space.discrete:
                index = (obs[..., 0] > 0).long()
                return index if space.kind == "discrete" else index.unsqueeze(-1).expand(*index.shape, space.width)
            return torch.clamp(2.0 * obs[..., 6:8], -1.0, 1.0)

        modules.append(TensorDictModule(act, in_keys=[(g.name, "observation")], out_keys=[(g.name, "action")]))
    return TensorDictSequential(*modules)


def test_auto_reset_gives_the_same_trajectories():
    """With ``auto_reset=True`` the step hands out each group's final observation and the reset
    the already-started episode: the same trajectories as without auto-reset."""
    options = CASES["discrete+continuous"][0]
    plain = SwarpEnv(grouped(seed=5, **options))
    auto = SwarpEnv(grouped(seed=5, auto_reset=True, **options))
    a = plain.rollout(15, fixed_policy(plain), break_when_any_done=False)
    b = auto.rollout(15, fixed_policy(auto), break_when_any_done=False)
    assert a["next", "done"].any()
    for key in a["next"].keys(include_nested=True, leaves_only=True):
        assert torch.equal(a["next", key], b["next", key]), key
    for name in GROUPS:  # the reset's info rows differ (module docstring): the rest is the same
        for key in ("observation", "action"):
            assert torch.equal(a[name, key], b[name, key]), (name, key)


def test_partial_reset_resets_only_the_masked_envs():
    env = make_case("discrete+continuous", max_steps=50)
    sim = env.sim
    td = env.reset()
    for _ in range(4):
        td = env.rand_step(td)["next"].clone()
    before = {name: td[name, "observation"].clone() for name in GROUPS}
    episodes = sim.episode.clone()
    mask = torch.tensor([True, False, True])
    td.set("_reset", mask.unsqueeze(-1))
    out = env.reset(td)
    assert torch.equal(sim.episode, episodes + mask.int())
    for name in GROUPS:
        assert torch.equal(out[name, "observation"][~mask], before[name][~mask])
        assert not torch.equal(out[name, "observation"][mask], before[name][mask])


def test_normalized_box_applies_to_the_continuous_groups():
    options = CASES["discrete+continuous"][0]
    env = SwarpEnv(grouped(model="diff_drive", **options), action_low=-1.0, action_high=1.0)
    spec = env.full_action_spec_unbatched
    assert isinstance(spec["a", "action"], Categorical)
    assert (spec["b", "action"].space.low == -1).all() and (spec["b", "action"].space.high == 1).all()
    low, high = env.sim.action_bounds
    ones = torch.ones(N_ENVS, 2, 2)
    torch.testing.assert_close(env.to_physical(ones, group="b"), high[2:].expand(N_ENVS, 2, 2))
    torch.testing.assert_close(env.to_physical(-ones, group="b"), low[2:].expand(N_ENVS, 2, 2))
    raw = grouped(model="diff_drive", **options)
    env.reset()
    raw.reset()
    inputs = random_inputs(raw, torch.Generator().manual_seed(0))
    out = env.step(encode(env, inputs))["next"]
    obs, *_ = raw.step({"a": inputs["a"], "b": env.to_physical(inputs["b"], group="b")})
    assert torch.equal(out["b", "observation"], obs["b"])


def test_grouped_errors_are_clear():
    sim = grouped(action_space={"a": "discrete"})
    with pytest.raises(ValueError, match=r"layout='flat'.*groups \['a', 'b'\].*use layout='agents'"):
        SwarpEnv(sim, layout="flat")
    all_discrete = grouped(action_space="discrete")
    with pytest.raises(ValueError, match="continuous actions only; this Environment has discrete actions"):
        SwarpEnv(all_discrete, action_low=-1.0, action_high=1.0)
    env = SwarpEnv(sim)
    env.reset()
    inputs = random_inputs(sim, torch.Generator().manual_seed(0))
    td = encode(env, inputs)
    steps = sim.step_count.clone()
    del td["b", "action"]
    with pytest.raises(KeyError, match=r"needs the action at \(\W+b\W+action\W+\) \(\[n_envs, n_agents, act_dim\]\)"):
        env.step(td)
    td = encode(env, inputs)
    td["a", "action"] = td["a", "action"].float()
    with pytest.raises(TypeError, match=r"tensordict\[\('a', 'action'\)\] must be integer indices"):
        env.step(td)
    assert torch.equal(sim.step_count, steps), "a rejected action must not step"
    with pytest.raises(ValueError, match=r"groups \['a', 'b'\]: name one"):
        env.to_physical(inputs["b"])
    with pytest.raises(KeyError, match="no group 'c'"):
        env.to_indices(inputs["a"][..., 0], group="c")
    with pytest.raises(ValueError, match="continuous"):
        env.to_indices(inputs["b"], group="b")
    assert torch.equal(env.to_indices(inputs["a"][..., 0], group="a"), inputs["a"])


@DEVICES
def test_grouped_step_reads_no_values_on_the_host(device):
    options, categorical = CASES["one-hot"]
    env = SwarpEnv(grouped(device=device, **options), categorical_actions=categorical)
    env.reset()
    generator = torch.Generator(device=device).manual_seed(0)
    td = encode(env, random_inputs(env.sim, generator))
    with forbid_host_transfers():
        out = env.step(td)
    assert out["next", "a", "observation"].device == env.sim.torch_device


class CopiedBytes(TorchDispatchMode):
    """Counts the bytes written by the copying torch ops run under it."""

    COPIES = ("copy_", "clone", "_to_copy", "where")

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in self.COPIES:
            self.bytes += out.numel() * out.element_size()
        return out


@pytest.mark.parametrize("options", [{}, {"auto_reset": True}, {"action_space": "discrete"}], ids=str)
def test_a_grouped_step_copies_no_more_than_one_group(options):
    """The step of a grouped env copies the bytes the same scenario without groups copies (each
    group's outputs are copies of their views, nothing else): the same per-step cost."""
    copied = []
    for scenario in (NavigationScenario, GroupedNavigation):
        sim = swarp.Environment(scenario(n_agents=4), n_envs=N_ENVS, device="cpu", seed=0, **options)
        env = SwarpEnv(sim, layout="agents")
        td = env.rand_step(env.reset())
        action = td.select(*env.action_keys).clone()
        env.step(action)
        with CopiedBytes() as counter:
            env.step(action)
        copied.append(counter.bytes)
    assert copied[0] == copied[1] > 0
