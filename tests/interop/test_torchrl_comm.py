"""``SwarpEnv`` over an ``Environment`` with a communication channel (``WorldSpec.comm_dim``): each
group's continuous box is its physical columns then its message columns in [0, 1], its discrete
specs count the message head (VMAS 1.5.2's layout); TorchRL's spec check on one continuous group,
one discrete group and two groups with a silent one; what the env sends is what was asked."""

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict import TensorDict  # noqa: E402
from torchrl.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from tests.env.test_comm import C, QuietScouts, Talk  # noqa: E402

N_ENVS = 3
#: One group of ``Talk`` (2 agents, 2 physical columns, a 3-wide channel), by case:
#: (action_space, categorical_actions, spec class, per-agent shape, VMAS's choices per head).
ONE_GROUP = {
    "continuous": ("continuous", True, Bounded, (2 + C,), None),
    "discrete": ("discrete", True, Categorical, (), [9 * C]),
    "discrete-one-hot": ("discrete", False, OneHot, (9 * C,), [9 * C]),
    "multidiscrete": ("multidiscrete", True, MultiCategorical, (3,), [3, 3, C]),
    "multidiscrete-one-hot": ("multidiscrete", False, MultiOneHot, (6 + C,), [3, 3, C]),
}


def talk(kind, **kwargs):
    return swarp.Environment(Talk(n_agents=2), n_envs=N_ENVS, device="cpu", seed=1, action_space=kind, **kwargs)


@pytest.mark.parametrize("layout", ["flat", "agents"])
@pytest.mark.parametrize("case", list(ONE_GROUP))
def test_one_group_specs_count_the_channel(case, layout):
    kind, categorical, cls, per_agent, heads = ONE_GROUP[case]
    env = SwarpEnv(talk(kind, max_steps=5), layout=layout, categorical_actions=categorical)
    key = "action" if layout == "flat" else ("agents", "action")
    spec = env.full_action_spec_unbatched[key]
    assert isinstance(spec, cls) and spec.shape == (2, *per_agent)
    if cls is Bounded:
        assert spec.space.low[0].tolist() == [-1.0, -1.0, 0.0, 0.0, 0.0]
        assert spec.space.high[0].tolist() == [1.0] * 5
    elif cls is Categorical or cls is OneHot:
        assert spec.space.n == heads[0]
    elif cls is MultiCategorical:
        assert spec.nvec[0].tolist() == heads
    else:
        assert list(spec.nvec) == heads
    check_env_specs(env, seed=0)
    data = env.rollout(8, break_when_any_done=False)
    reward = ("next", "reward") if layout == "flat" else ("next", "agents", "reward")
    assert torch.isfinite(data[reward]).all()
    assert not bool(env.sim.invalid_actions())  # every sample of the spec is a valid action, message included


def test_continuous_messages_arrive_as_sent():
    """Physical actions: the message columns are sent as they are ([0, 1] entries kept); the
    commands are those of the same actions stepped straight into a twin ``Environment``."""
    env, raw = SwarpEnv(talk("continuous")), talk("continuous")
    env.reset()
    raw.reset()
    action = torch.rand(N_ENVS, 2, 2 + C, generator=torch.Generator().manual_seed(0))
    out = env.step(TensorDict({"action": action}, batch_size=[N_ENVS]))["next"]
    obs, *_ = raw.step(action)
    assert torch.equal(out["observation"], obs)
    assert torch.equal(env.sim.comm, action[..., 2:]) and torch.equal(env.sim.comm, raw.comm)


def test_normalized_box_maps_message_columns_onto_zero_one():
    """``action_low`` / ``action_high`` map onto every column of the box: a physical column onto
    its bounds, a message column onto [0, 1] (the box's middle is a message of 0.5)."""
    env = SwarpEnv(talk("continuous"), action_low=-1.0, action_high=1.0)
    spec = env.full_action_spec_unbatched["action"]
    assert (spec.space.low == -1).all() and (spec.space.high == 1).all() and spec.shape == (2, 2 + C)
    for value, message in ((-1.0, 0.0), (0.0, 0.5), (1.0, 1.0), (7.0, 1.0)):
        action = torch.full((N_ENVS, 2, 2 + C), value)
        physical = env.to_physical(action)
        assert physical.shape == (N_ENVS, 2, 2 + C)
        assert torch.equal(physical[..., 2:], torch.full((N_ENVS, 2, C), message))
        env.step(TensorDict({"action": action}, batch_size=[N_ENVS]))
        assert torch.equal(env.sim.comm, torch.full((N_ENVS, 2, C), message))


@pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "one-hot"])
def test_discrete_message_is_the_last_digit(categorical):
    env = SwarpEnv(talk("discrete"), categorical_actions=categorical)
    index = torch.tensor([[2, 4 * C + 1]] * N_ENVS)  # physical indices 0 (stay) and 4; messages 2 and 1
    action = index if categorical else torch.nn.functional.one_hot(index, 9 * C)
    env.step(TensorDict({"action": action}, batch_size=[N_ENVS]))
    assert env.sim.comm[0].tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    assert env.to_physical(action)[0].tolist() == [[0.0, 0.0], [-1.0, -1.0]]  # the command only
    assert torch.equal(env.to_physical(action), env.sim.world.actions)
    assert torch.equal(env.to_indices(action), index.unsqueeze(-1))


#: Two groups, the scouts silent: (Environment keywords, {group: (spec class, per-agent shape)}).
GROUPED = {
    "carriers-discrete": (
        {"action_space": {"carriers": "discrete"}},
        {"carriers": (Categorical, ()), "scouts": (Bounded, (2,))},
    ),
    "scouts-discrete": (
        {"action_space": {"scouts": "multidiscrete"}},
        {"carriers": (Bounded, (4,)), "scouts": (MultiCategorical, (2,))},
    ),
    "continuous": ({}, {"carriers": (Bounded, (4,)), "scouts": (Bounded, (2,))}),
}


@pytest.mark.parametrize("normalized", [False, True], ids=["physical", "normalized"])
@pytest.mark.parametrize("case", list(GROUPED))
def test_two_groups_with_a_silent_one(case, normalized):
    options, specs = GROUPED[case]
    box = {"action_low": -1.0, "action_high": 1.0} if normalized else {}
    sim = swarp.Environment(QuietScouts(), n_envs=N_ENVS, device="cpu", seed=2, max_steps=5, **options)
    env = SwarpEnv(sim, **box)
    unbatched = env.full_action_spec_unbatched
    for name, (cls, per_agent) in specs.items():
        spec = unbatched[name, "action"]
        n_agents = 3 if name == "carriers" else 1
        assert isinstance(spec, cls) and spec.shape == (n_agents, *per_agent), name
    carriers = unbatched["carriers", "action"]
    if isinstance(carriers, Bounded) and not normalized:
        assert carriers.space.low[0].tolist() == [-0.5, -3.0, 0.0, 0.0]
        assert carriers.space.high[0].tolist() == [0.5, 3.0, 1.0, 1.0]
    elif isinstance(carriers, Categorical):
        assert carriers.space.n == 9 * 2
    check_env_specs(env, seed=0)
    env.rollout(8, break_when_any_done=False)
    assert not bool(sim.invalid_actions())
    assert sim.comm[:, 3].abs().sum() == 0  # the silent scout says nothing
    if isinstance(carriers, Bounded) and normalized:
        env.step(env.full_action_spec.rand().update({("carriers", "action"): torch.ones(N_ENVS, 3, 4)}))
        assert torch.equal(sim.comm[:, :3], torch.ones(N_ENVS, 3, 2))
        torch.testing.assert_close(
            env.to_physical(-torch.ones(N_ENVS, 3, 4), group="carriers")[0, 0], torch.tensor([-0.5, -3.0, 0.0, 0.0])
        )


@pytest.mark.parametrize(("continuous", "categorical"), [(True, True), (False, True), (False, False)])
def test_specs_match_vmas_env_on_speaker_listener(continuous, categorical):
    """TorchRL's own ``VmasEnv`` over VMAS's ``simple_speaker_listener`` (a speaker on a 3-wide
    channel, a silent listener) and ``SwarpEnv`` over a swarp scenario of that layout give each
    group the same action spec: class, shape, choices, bounds."""
    pytest.importorskip("vmas")
    from torchrl.envs.libs.vmas import VmasEnv

    from tests.test_vmas_comm import SpeakerListener

    groups = {"speaker": ["speaker_0"], "listener": ["listener_0"]}
    theirs = VmasEnv(
        "simple_speaker_listener", num_envs=N_ENVS, device="cpu", continuous_actions=continuous,
        categorical_actions=categorical, group_map=groups,
    )  # fmt: skip
    kind = "continuous" if continuous else "discrete"
    sim = swarp.Environment(SpeakerListener(n_agents=2), n_envs=N_ENVS, device="cpu", action_space=kind)
    ours = SwarpEnv(sim, categorical_actions=categorical)
    assert ours.group_map == groups
    for group in groups:
        mine, their = (env.full_action_spec_unbatched[group, "action"] for env in (ours, theirs))
        assert type(mine) is type(their) and mine.shape == their.shape and mine.dtype == their.dtype, group
        if continuous:
            assert torch.equal(mine.space.low, their.space.low) and torch.equal(mine.space.high, their.space.high)
        else:
            assert mine.space.n == their.space.n, group
