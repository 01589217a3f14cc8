"""swarp.train on agent groups: one policy and one critic per group, each reading its own observation
width and emitting its own action space (continuous and discrete groups side by side), every group's
networks trained, checkpoints and resumes by group, evaluation and the command line by group, a
short run that learns, and a scenario without groups trained to the bits it always was."""

import json
import math

import pytest
import torch

import swarp
from swarp.train import GroupedPolicy, Trainer, evaluate, get_task, load_checkpoint, make_config, resume, train
from swarp.train.__main__ import main as train_main
from swarp.train.config import load_config_file
from swarp.train.eval import main as eval_main
from swarp.train.evaluate import Evaluator, check_policy_fits, summary
from swarp.train.groups import values
from swarp.train.networks import CategoricalActor
from tests.groups_support import NARROW, GroupedNavigation, NarrowNavigation

#: A tiny CPU run of the API: 8 envs x 8 steps an iteration, 2 minibatches.
T = dict(device="cpu", n_envs=8, rollout_steps=8, minibatches=2, hidden=16, eval_envs=8, eval_every=0,
         progress=False, run_dir="", options={"n_agents": 4, "max_steps": 6})  # fmt: skip
#: Group "a" discrete (5 x 3 levels: one head of 15), "b" continuous.
MIXED = {"action_space": {"a": "discrete"}, "action_nvec": {"a": (5, 3)}}


def trainer_of(scenario, seed: int = 0, algorithm: str = "mappo", actions: dict | None = None, **overrides):
    actions = actions or {}
    env = swarp.Environment(scenario(n_agents=4), n_envs=8, device="cpu", seed=seed, auto_reset=True, max_steps=5,
                            **actions)  # fmt: skip
    config = make_config({"n_envs": 8, "rollout_steps": 6, "minibatches": 2, "hidden": 16, "run_dir": "",
                          "progress": False, "algorithm": algorithm, **actions, **overrides})  # fmt: skip
    return Trainer.build([env], get_task("navigation"), config, [seed])


@pytest.fixture
def registered():
    """A registered scenario name for ``GroupedNavigation``, removed after the test."""
    name = "grouped_navigation_test"
    swarp.register_scenario(name, GroupedNavigation)
    try:
        yield name
    finally:
        swarp.unregister_scenario(name)


CASES = [
    (GroupedNavigation, "mappo", {}),
    (NarrowNavigation, "ippo", {}),
    (GroupedNavigation, "mappo", MIXED),
    (NarrowNavigation, "mappo", {"action_space": {"b": "multidiscrete"}, "action_nvec": {"b": (3, 4)}}),
]


@pytest.mark.parametrize("scenario, algorithm, actions", CASES)
def test_each_group_trains_networks_of_its_own_widths_and_space(scenario, algorithm, actions):
    trainer = trainer_of(scenario, algorithm=algorithm, actions=actions, ent_coef=0.01)
    env = trainer.envs[0]
    assert trainer.grouped and list(trainer.actor) == ["a", "b"] and list(trainer.critic) == ["a", "b"]
    joint = sum(g.n_agents * g.obs_dim for g in env.groups)
    assert joint == 2 * env.obs_dim + 2 * env.groups[1].obs_dim
    before = {net.group.name: [p.detach().clone() for p in (*net.actor.parameters(), *net.critic.parameters())]
              for net in trainer.nets}  # fmt: skip
    for _ in range(2):
        trainer.iterate()
    for net, raw in zip(trainer.nets, trainer.buffers.raw_actions, strict=True):
        group, space = net.group, net.group.action_space
        layers = net.actor.net.layers
        assert layers[0].weight.shape == (1, group.obs_dim, 16)  # it reads its own columns only
        assert net.normalizer.mean.shape == (1, group.obs_dim)
        if space.discrete:
            assert isinstance(net.actor, CategoricalActor) and layers[-1].weight.shape[-1] == sum(space.heads)
            assert raw.dtype == torch.int64 and ((raw >= 0) & (raw < torch.tensor(space.heads))).all()
        else:
            assert layers[-1].weight.shape[-1] == space.physical_dim and net.actor.log_std.shape == (1, 2)
            assert raw.dtype == torch.float32
        assert raw.shape == (1, 6, 8, group.n_agents, space.width)
        critic_in, critic_out = net.critic.net.layers[0].weight.shape[1], net.critic.net.layers[-1].weight.shape[2]
        assert (critic_in, critic_out) == ((joint, 2) if algorithm == "mappo" else (group.obs_dim, 1))
        after = [*net.actor.parameters(), *net.critic.parameters()]
        changed = [not torch.equal(a, b) for a, b in zip(before[group.name], after, strict=True)]
        assert all(changed), (group.name, changed)
    row = trainer.read_metrics()[0]
    assert all(math.isfinite(v) for v in row.values()), row
    assert not trainer.health_flags().any()
    obs, _ = env.reset()
    greedy = trainer.policy(0)(obs)
    low, high = env.action_bounds
    for group in env.groups:
        space, acted = group.action_space, greedy[group.name]
        assert acted.shape == (8, group.n_agents, space.width)
        if space.discrete:
            assert acted.dtype == torch.int64 and ((acted >= 0) & (acted < torch.tensor(space.heads))).all()
        else:
            box = low[group.agents].unsqueeze(0), high[group.agents].unsqueeze(0)
            assert acted.dtype == torch.float32 and (acted >= box[0]).all() and (acted <= box[1]).all()
    env.step(greedy)  # the env takes the policy's actions as they are


@pytest.mark.parametrize("algorithm", ["mappo", "ippo"])
def test_a_narrow_group_never_reads_the_padding_columns(algorithm):
    """Group b of NarrowNavigation observes 6 columns: what lies beyond them in the flat buffer
    changes neither its actions nor any agent's value, and the flat buffer and the env's views by
    group give the same actions."""
    trainer = trainer_of(NarrowNavigation, algorithm=algorithm)
    trainer.iterate()
    env = trainer.envs[0]
    obs = env.obs.clone()
    noisy = obs.clone()
    noisy[:, 2:, NARROW:] = torch.randn(noisy[:, 2:, NARROW:].shape, generator=torch.Generator().manual_seed(1))
    policy = trainer.policy(0)
    plain, padded, by_group = policy(obs), policy(noisy), policy(env.by_group(obs)[0])
    for name in ("a", "b"):
        assert torch.equal(plain[name], padded[name]) and torch.equal(plain[name], by_group[name])
    with torch.no_grad():
        clean = values(trainer.nets, trainer.normalized(obs[None]))
        assert torch.equal(clean, values(trainer.nets, trainer.normalized(noisy[None])))
    assert clean.shape == (1, 8, 4)


def test_batched_seeds_each_match_the_seed_trained_alone():
    together = trainer_of(GroupedNavigation, actions=MIXED)
    env = swarp.Environment(GroupedNavigation(n_agents=4), n_envs=8, device="cpu", seed=1, auto_reset=True,
                            max_steps=5, **MIXED)  # fmt: skip
    together = Trainer.build([together.envs[0], env], together.task, together.config, [0, 1])
    alone = [trainer_of(GroupedNavigation, seed=seed, actions=MIXED) for seed in (0, 1)]
    for trainer in (together, *alone):
        for _ in range(2):
            trainer.iterate()
    for k, single in enumerate(alone):
        for (name, value), (_, expected) in zip(together.actor.state_dict().items(), single.actor.state_dict().items(),
                                                strict=True):  # fmt: skip
            torch.testing.assert_close(value[k : k + 1], expected, rtol=1e-5, atol=1e-5, msg=name)


def test_a_grouped_checkpoint_loads_evaluates_and_resumes_bit_for_bit(registered, tmp_path):
    common = {**T, **MIXED, "checkpoint_every": 0}
    straight = train(registered, **{**common, "total_steps": 4 * 64, "run_dir": str(tmp_path / "a")})
    first = train(registered, **{**common, "total_steps": 2 * 64, "run_dir": str(tmp_path / "b")})
    loaded = load_checkpoint(first.checkpoint)
    assert isinstance(loaded.policy, GroupedPolicy) and loaded.config.action_space == {"a": "discrete"}
    assert [g.action_space.heads for g in loaded.policy.groups] == [(15,), ()]
    assert set(loaded.critic) == {"a", "b"}
    obs = swarp.make(registered, n_envs=5, device="cpu", n_agents=4, **MIXED).obs
    expected, got = first.policy(obs), loaded.policy(obs)
    assert all(torch.equal(expected[name], got[name]) for name in ("a", "b"))
    resumed = resume(first.run_dir, total_steps=4 * 64)
    assert resumed.frames == straight.frames == 4 * 64
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    saved = json.loads((first.run_dir / "config.json").read_text())
    assert saved["action_space"] == {"a": "discrete"} and saved["action_nvec"] == {"a": [5, 3]}
    score = evaluate(first.checkpoint, episodes=8, device="cpu")
    assert score["policy"]["episodes"] == score["random"]["episodes"] == 8
    policy = score["policy"]
    assert policy["return"] == pytest.approx((policy["return/a"] + policy["return/b"]) / 2, rel=1e-5)
    assert score["scripted"]["quantized_groups"] == ["a"]  # the controller's command encoded into a's levels


def test_policies_and_run_states_refuse_other_groups(registered):
    grouped = trainer_of(GroupedNavigation, actions=MIXED)
    task = get_task("navigation")
    single_env = swarp.make("navigation", n_envs=4, device="cpu", n_agents=4)
    with pytest.raises(ValueError, match=r"agent groups \['agents'\], not the groups \['a', 'b'\]"):
        check_policy_fits(grouped.policy(0), single_env, "navigation", task, "the policy")
    continuous = swarp.make(registered, n_envs=4, device="cpu", n_agents=4)
    with pytest.raises(ValueError, match="group 'a': continuous actions, not the discrete actions"):
        check_policy_fits(grouped.policy(0), continuous, registered, task, "the policy")
    plain = trainer_of(GroupedNavigation)
    with pytest.raises(ValueError, match="trained with actions by group a: discrete"):
        plain.load_run_states([grouped.run_state(0)])
    env = swarp.Environment(GroupedNavigation(n_agents=4), n_envs=8, device="cpu", auto_reset=True, **MIXED)
    with pytest.raises(ValueError, match="group 'a' of the envs takes discrete actions"):
        Trainer.build([env], task, make_config({"n_envs": 8}), [0])
    with pytest.raises(ValueError, match="give the levels by group too"):
        make_config({"n_envs": 8, "action_space": {"a": "discrete"}, "action_nvec": 3})


def test_action_settings_by_group(tmp_path):
    """The config takes a kind for every group or a mapping by group (levels likewise), a JSON file
    holds them, and a task's discrete options apply where any group is discrete."""
    config = make_config({"n_envs": 8, "action_space": {"a": "multidiscrete"}, "action_nvec": {"a": [5, 3]}})
    assert config.action_nvec == {"a": (5, 3)} and config.kind_of("a") == "multidiscrete"
    assert config.kind_of("b") == "continuous"
    path = tmp_path / "c.json"
    path.write_text('{"action_space": {"b": "discrete"}, "action_nvec": {"b": 4}}')
    assert load_config_file(str(path)) == {"action_space": {"b": "discrete"}, "action_nvec": {"b": 4}}
    for bad, match in [
        ({"action_space": {"a": "binary"}}, r"action_space \(--action-space\) group 'a': must be one of"),
        ({"action_space": {}}, "must name at least one group"),
        ({"action_nvec": {"a": 3}}, r"gives levels to group\(s\) \['a'\], whose action_space"),
        ({"action_space": {"a": "discrete"}, "action_nvec": {"a": 1}}, "group 'a': must be an int >= 2"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_config({"n_envs": 8, **bad})
    navigation = get_task("navigation")
    assert navigation.for_actions({"a": "discrete"}).options["ctrl_mode"] == "acceleration"
    assert navigation.for_actions({"a": "continuous"}) == navigation


def test_the_command_lines_take_action_spaces_by_group(registered, tmp_path, capsys):
    (result,) = train_main([registered, "--device", "cpu", "--n-envs", "8", "--rollout-steps", "4", "--total-steps",
                            "64", "--hidden", "16", "--eval-envs", "8", "--eval-episodes", "8", "--run-dir",
                            str(tmp_path), "--no-progress", "--option", "n_agents=4", "--option", "max_steps=10",
                            "--action-space", "a=discrete", "--action-nvec", "a=5,3"])  # fmt: skip
    assert result.config.action_space == {"a": "discrete"} and result.config.action_nvec == {"a": (5, 3)}
    assert "greedy success" in capsys.readouterr().out
    score = json.loads((result.run_dir / "score.json").read_text())
    assert score["scripted"]["quantized_groups"] == ["a"]
    video = tmp_path / "policy.gif"
    scored = eval_main([str(result.checkpoint), "--episodes", "8", "--device", "cpu", "--video", str(video)])
    assert scored["policy"]["episodes"] == 8 and video.exists()
    with pytest.raises(SystemExit):
        train_main([registered, "--action-space", "a=discrete", "multidiscrete"])


def test_a_scenario_without_groups_trains_to_the_bits_it_always_did():
    """Two iterations of navigation, continuous MAPPO and multi-discrete IPPO (entropy bonus on):
    the parameters' sum and sum of squares and the losses, as the trainer before agent groups
    computed them on the CPU (bit for bit there; the tolerance only absorbs other CPUs' rounding)."""
    recorded = {
        ("continuous", None, "mappo"): [
            21.663822642352898,
            131.3175365437616,
            -0.001088745892047882,
            0.13928436674177647,
        ],  # fmt: skip
        ("multidiscrete", (3, 5), "ippo"): [
            12.257898426993052,
            128.96780031469063,
            -0.0010111499577760696,
            0.1228256169706583,
        ],  # fmt: skip
    }
    for (kind, nvec, algorithm), expected in recorded.items():
        actions = {} if kind == "continuous" else {"action_space": kind, "action_nvec": nvec}
        env = swarp.make("navigation", n_envs=8, device="cpu", seed=2, auto_reset=True, max_steps=5, n_agents=3,
                         substeps=1, **actions)  # fmt: skip
        config = make_config({"n_envs": 8, "rollout_steps": 6, "minibatches": 2, "hidden": 16, "run_dir": "",
                              "progress": False, "ent_coef": 0.01, "algorithm": algorithm, **actions})  # fmt: skip
        trainer = Trainer.build([env], get_task("navigation"), config, [2])
        assert not trainer.grouped and isinstance(trainer.buffers.raw_action, torch.Tensor)
        for _ in range(2):
            trainer.iterate()
        row = trainer.read_metrics()[0]
        params = [p.detach().double() for p in trainer.parameters()]
        got = [float(sum(p.sum() for p in params)), float(sum(p.square().sum() for p in params)),
               row["losses/policy_loss"], row["losses/value_loss"]]  # fmt: skip
        assert got == pytest.approx(expected, rel=1e-4), (kind, got)


@pytest.mark.parametrize(
    "settings",
    [{}, {**MIXED, "action_nvec": None, "ctrl_mode": "acceleration"}],
    ids=["continuous+continuous", "discrete+continuous"],
)
def test_a_short_grouped_run_learns_far_above_random(registered, settings):
    """GroupedNavigation, 61,440 env-steps (30 iterations of 64 envs x 32 steps, ~7 s on a quiet
    2-core CPU): greedy success on 256 fresh episodes far above random play's (0.79 and 0.70 there,
    random 0.00). Group a discrete (3 levels a column) is acceleration-controlled, as navigation's
    discrete runs are."""
    settings = dict(settings)
    options = {"n_agents": 4, "substeps": 1, "max_steps": 100}
    if settings.pop("ctrl_mode", None):
        options["ctrl_mode"] = "acceleration"
    actions = {k: v for k, v in settings.items() if v is not None}
    result = train(registered, device="cpu", n_envs=64, total_steps=64 * 32 * 30, eval_every=0, eval_envs=64,
                   run_dir="", progress=False, options=options, **actions)  # fmt: skip
    evaluator = Evaluator(registered, get_task(registered).with_options(options), 256, "cpu", seed=777, actions=actions)
    greedy = summary(evaluator(result.policy))
    random = summary(evaluator(evaluator.random_actions(0)))
    assert greedy["success_low"] > random["success_high"] and greedy["success"] > 0.5, (greedy, random)
    assert greedy["return"] > random["return"] + 1.0
