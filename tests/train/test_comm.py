"""swarp.train with a communication channel: continuous message columns squashed onto [0, 1] (the
action box's message columns), the discrete message head among the categorical heads, checkpoints
that carry ``comm_dim`` (without groups in ``dims``, with groups in each group record), evaluation
with the scripted controller's commands (a missing message sent as silence or choice 0, a given
one kept), groups with a silent one, and short CPU runs on ``Talk`` end to end."""

import pytest
import torch

import swarp
from swarp.train import GroupedPolicy, Trainer, evaluate, get_task, load_checkpoint, make_config, train
from swarp.train.action_spaces import scripted_actions_of, scripted_group_actions
from swarp.train.evaluate import check_policy_fits
from swarp.train.groups import group_records, groups_from_records
from swarp.train.networks import Actor, CategoricalActor
from tests.env.test_comm import C, QuietScouts, Talk
from tests.groups_support import GroupedNavigation

#: A tiny CPU run of the API: 8 envs x 8 steps an iteration, 2 minibatches.
T = dict(device="cpu", n_envs=8, rollout_steps=8, minibatches=2, hidden=16, eval_envs=8, eval_every=0,
         progress=False, checkpoint_every=0)  # fmt: skip
TALK = "talk_comm_train_test"
SCOUTS = "quiet_scouts_comm_train_test"


@pytest.fixture
def registered():
    swarp.register_scenario(TALK, Talk)
    swarp.register_scenario(SCOUTS, QuietScouts)
    try:
        yield
    finally:
        swarp.unregister_scenario(TALK)
        swarp.unregister_scenario(SCOUTS)


def trainer_of(scenario, actions: dict | None = None, **overrides):
    actions = actions or {}
    env = swarp.Environment(scenario, n_envs=8, device="cpu", seed=0, auto_reset=True, max_steps=5, **actions)
    config = make_config({"n_envs": 8, "rollout_steps": 6, "minibatches": 2, "hidden": 16, "run_dir": "",
                          "progress": False, **actions, **overrides})  # fmt: skip
    return Trainer.build([env], get_task("navigation"), config, [0])


def test_continuous_messages_are_squashed_onto_zero_one():
    trainer = trainer_of(Talk(n_agents=2))
    actor = trainer.actor
    assert isinstance(actor, Actor) and actor.log_std.shape == (1, 2 + C)
    low, high = actor.center - actor.half_range, actor.center + actor.half_range
    assert low[0, 0].tolist() == [-1.0, -1.0, 0.0, 0.0, 0.0] and high[0, 0].tolist() == [1.0] * 5
    sent = []
    for _ in range(2):
        trainer.iterate()
        sent.append(trainer.envs[0].comm.clone())
    sent = torch.stack(sent)
    assert (sent >= 0).all() and (sent <= 1).all() and sent.std() > 0 and not trainer.envs[0].invalid_actions()
    actions = trainer.policy(0)(trainer.envs[0].obs)
    assert actions.shape == (8, 2, 2 + C) and (actions[..., 2:] >= 0).all() and (actions[..., 2:] <= 1).all()


@pytest.mark.parametrize(("kind", "heads"), [("discrete", [9 * C]), ("multidiscrete", [3, 3, C])])
def test_discrete_heads_include_the_message_head(kind, heads):
    trainer = trainer_of(Talk(n_agents=2), {"action_space": kind})
    actor = trainer.actor
    assert isinstance(actor, CategoricalActor) and actor.heads == heads and actor.space.comm_dim == C
    for _ in range(2):
        trainer.iterate()
    comm = trainer.envs[0].comm
    assert torch.equal(comm.sum(-1), torch.ones(8, 2)) and not trainer.envs[0].invalid_actions()
    indices = trainer.buffers.raw_actions[0]
    assert indices.shape[-1] == len(heads) if kind == "multidiscrete" else indices.shape[-1] == 1
    assert (indices % C if kind == "discrete" else indices[..., -1]).unique().numel() == C  # every choice sampled


@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_short_runs_on_talk_checkpoint_and_evaluate(registered, tmp_path, kind):
    """End to end: ``train`` on ``Talk`` (continuous and discrete), the checkpoint carries
    ``comm_dim`` and loads the same policy, ``evaluate`` scores it beside random play and the
    scripted controller (its commands with silent messages; a discrete policy's controller on the
    continuous env of the same episodes)."""
    actions = {} if kind == "continuous" else {"action_space": "discrete"}
    options = {"n_agents": 2, "max_steps": 6}
    result = train(TALK, total_steps=3 * 64, options=options, run_dir=str(tmp_path), **T, **actions)
    loaded = load_checkpoint(result.checkpoint)
    assert loaded.dims == {"n_agents": 2, "obs_dim": Talk(n_agents=2).obs_dim, "act_dim": 2 + C if not actions else 1,
                           "comm_dim": C}  # fmt: skip
    obs = swarp.make(TALK, n_envs=5, device="cpu", n_agents=2, **actions).obs
    assert torch.equal(result.policy(obs), loaded.policy(obs))
    assert loaded.policy.space.width == (2 + C if kind == "continuous" else 1)
    score = evaluate(result.checkpoint, episodes=8, device="cpu")
    assert score["policy"]["episodes"] == score["random"]["episodes"] == score["scripted"]["episodes"] == 8
    assert score["scripted"].get("action_space") == (None if kind == "continuous" else "continuous")
    if kind == "discrete":  # a policy of 27 choices does not fit a channel-less env's 9
        plain = swarp.make("navigation", n_envs=4, device="cpu", n_agents=2, action_space="discrete")
        with pytest.raises(ValueError, match="a message head of 0 choices, not the trained 3"):
            check_policy_fits(loaded.policy, plain, "navigation", loaded.task, "the policy")


def test_groups_with_a_silent_one(registered, tmp_path):
    """A speaking continuous group's actor box ends in its message columns, the silent group's has
    none; a checkpoint's group records carry each group's ``comm_dim``; evaluation encodes the
    controller's commands into the discrete carriers' levels with message choice 0."""
    trainer = trainer_of(QuietScouts())
    boxes = {name: (actor.center - actor.half_range)[0] for name, actor in trainer.actor.items()}
    assert boxes["carriers"].tolist() == [[-0.5, -3.0, 0.0, 0.0]] and boxes["scouts"].shape == (1, 2)  # one shared box
    assert (trainer.actor["carriers"].center[0, :, 2:] == 0.5).all()
    trainer.iterate()
    assert trainer.envs[0].comm[:, 3].abs().sum() == 0 and (trainer.envs[0].comm[:, :3] > 0).any()
    actions = {"action_space": {"carriers": "discrete"}}
    result = train(SCOUTS, total_steps=2 * 64, options={"max_steps": 6}, run_dir=str(tmp_path), **T, **actions)
    loaded = load_checkpoint(result.checkpoint)
    assert isinstance(loaded.policy, GroupedPolicy)
    assert [g.action_space.heads for g in loaded.policy.groups] == [(9 * 2,), ()]
    assert [g.action_space.comm_dim for g in loaded.policy.groups] == [2, 0]
    score = evaluate(result.checkpoint, episodes=8, device="cpu")
    assert score["scripted"]["quantized_groups"] == ["carriers"]


def test_scripted_commands_and_messages():
    env = swarp.Environment(QuietScouts(), n_envs=2, device="cpu", action_space={"carriers": "discrete"})
    command = torch.zeros(2, 4, 2)
    actions = scripted_group_actions(env, command)
    assert torch.equal(actions["carriers"] % 2, torch.zeros(2, 3, 1, dtype=torch.int64))  # choice 0
    message = torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.0, 1.0], [0.0, 0.0]]).expand(2, 4, 2)
    actions = scripted_group_actions(env, torch.cat([command, message], dim=-1))
    assert actions["carriers"][0, :, 0].remainder(2).tolist() == [1, 0, 1] and actions["scouts"].shape == (2, 1, 2)
    env.step(actions)
    assert env.comm[0, :3].tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    continuous = swarp.Environment(QuietScouts(), n_envs=2, device="cpu")
    silent = scripted_group_actions(continuous, command)
    assert silent["carriers"].shape == (2, 3, 4) and silent["carriers"][..., 2:].abs().sum() == 0
    said = scripted_group_actions(continuous, torch.cat([command, message], dim=-1))
    assert torch.equal(said["carriers"][..., 2:], message[:, :3])
    talk = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu")
    padded = scripted_actions_of(talk, torch.ones(2, 2, 2))
    assert padded.shape == (2, 2, 2 + C) and padded[..., 2:].abs().sum() == 0
    full = torch.rand(2, 2, 2 + C)
    assert scripted_actions_of(talk, full) is full


def test_group_records_carry_comm_dim_and_old_ones_load():
    env = swarp.Environment(QuietScouts(), n_envs=2, device="cpu")
    records = group_records(env.groups)
    assert [r["comm_dim"] for r in records] == [2, 0]
    assert groups_from_records(records) == env.groups
    old = [{k: v for k, v in r.items() if k != "comm_dim"} for r in records]  # written before the channel
    assert [g.action_space.comm_dim for g in groups_from_records(old)] == [0, 0]
    plain = swarp.Environment(GroupedNavigation(n_agents=4), n_envs=2, device="cpu").groups
    assert all("comm_dim" not in record for record in group_records(plain))  # channel-less records unchanged
