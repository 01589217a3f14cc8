"""swarp.train on discrete and multi-discrete action spaces: categorical heads that sample and score
like torch's Categorical, runs that train with finite losses and valid greedy indices, bit-for-bit
reproducible and resumable, checkpoints that keep their heads, the scripted baseline on the
continuous env of the same episodes, and bad settings refused with the field named."""

import json
import math

import pytest
import torch

import swarp
from swarp.core.spaces import ActionSpace
from swarp.train import Evaluator, Policy, Trainer, evaluate, get_task, load_checkpoint, make_config, resume, train
from swarp.train.__main__ import main as train_main
from swarp.train.config import load_config_file
from swarp.train.evaluate import summary
from swarp.train.networks import CategoricalActor

#: A tiny CPU run: 8 envs x 8 steps an iteration, 2 minibatches.
T = dict(device="cpu", n_envs=8, rollout_steps=8, minibatches=2, hidden=16, total_steps=3 * 64, eval_envs=8,
         eval_every=0, progress=False, run_dir="")  # fmt: skip
#: (action_space, action_nvec, the heads of navigation's 2 columns)
SPACES = [("discrete", None, (9,)), ("multidiscrete", (3, 5), (3, 5)), ("discrete", 4, (16,))]


def small_trainer(kind: str, nvec, seed: int = 0, **overrides) -> Trainer:
    env = swarp.make("navigation", n_envs=8, device="cpu", seed=seed, auto_reset=True, max_steps=5, n_agents=3,
                     substeps=1, action_space=kind, action_nvec=nvec)  # fmt: skip
    config = make_config({"n_envs": 8, "rollout_steps": 6, "minibatches": 2, "hidden": 16, "run_dir": "",
                          "progress": False, "action_space": kind, "action_nvec": nvec, **overrides})  # fmt: skip
    return Trainer.build([env], get_task("navigation"), config, [seed])


def test_the_heads_score_and_sample_as_torch_categoricals():
    """log-prob and entropy are the sums over columns of torch.distributions.Categorical's; Gumbel-max
    draws follow the softmax (200,000 draws, 5-sigma bounds); greedy is each head's argmax."""
    space = ActionSpace.build("multidiscrete", (3, 5), 2)
    low, high = -torch.ones(1, 2), torch.ones(1, 2)
    actor = CategoricalActor(1, 4, space, low, high, hidden=8, depth=1)
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 200_000, 1, 8, generator=generator)
    logits[..., :3] = torch.tensor([0.0, 1.0, -1.0])  # one fixed distribution per head for the frequencies
    logits[..., 3:] = torch.tensor([2.0, 0.0, 0.0, -1.0, 0.5])
    indices = actor.sample(logits, torch.rand(logits.shape, generator=generator))
    assert indices.dtype == torch.int64 and indices.shape == (1, 200_000, 1, 2)
    for column, part in enumerate((logits[..., :3], logits[..., 3:])):
        probs = torch.softmax(part[0, 0, 0], -1)
        counts = torch.bincount(indices[..., column].flatten(), minlength=probs.numel()).double() / 200_000
        sigma = (probs * (1 - probs) / 200_000).sqrt().double()
        assert ((counts - probs.double()).abs() <= 5 * sigma + 1e-9).all(), (counts, probs)
    mixed = torch.randn(1, 7, 1, 8, generator=generator)
    chosen = torch.stack([torch.randint(0, 3, (1, 7, 1)), torch.randint(0, 5, (1, 7, 1))], dim=-1)
    first = torch.distributions.Categorical(logits=mixed[..., :3])
    second = torch.distributions.Categorical(logits=mixed[..., 3:])
    expected = first.log_prob(chosen[..., 0]) + second.log_prob(chosen[..., 1])
    torch.testing.assert_close(actor.log_prob(chosen, mixed), expected)
    torch.testing.assert_close(actor.entropy(mixed), (first.entropy() + second.entropy()).mean().reshape(1))
    greedy = actor.greedy(mixed)
    assert torch.equal(greedy[..., 0], mixed[..., :3].argmax(-1)) and torch.equal(
        greedy[..., 1], mixed[..., 3:].argmax(-1)
    )


@pytest.mark.parametrize("kind, nvec, heads", SPACES)
def test_a_short_run_trains_with_finite_losses_and_valid_greedy_indices(kind, nvec, heads):
    trainer = small_trainer(kind, nvec, ent_coef=0.01)
    assert isinstance(trainer.actor, CategoricalActor) and trainer.actor.heads == list(heads)
    before = [p.detach().clone() for p in trainer.parameters()]
    for _ in range(2):
        trainer.iterate()
    rows = trainer.read_metrics()
    assert all(math.isfinite(v) for v in rows[0].values()), rows
    assert "charts/log_std" not in rows[0]
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.parameters(), strict=True))
    taken = trainer.buffers.raw_action
    assert taken.dtype == torch.int64 and taken.shape[-1] == len(heads)
    assert ((taken >= 0) & (taken < torch.tensor(heads))).all()
    assert len(taken.unique()) > 1  # sampled, not greedy
    assert not trainer.health_flags().any()  # no invalid index reached the env, nothing non-finite
    obs = torch.randn(5, 3, trainer.envs[0].obs_dim)
    greedy = trainer.policy(0)(obs)
    assert greedy.dtype == torch.int64 and greedy.shape == (5, 3, len(heads))
    assert ((greedy >= 0) & (greedy < torch.tensor(heads))).all()
    assert torch.equal(greedy, trainer.policy(0)(obs))  # greedy: no noise


@pytest.mark.parametrize("kind, nvec", [("discrete", None), ("multidiscrete", (3, 5))])
def test_runs_with_one_seed_are_bit_identical_and_seeds_differ(kind, nvec):
    def run(seed):
        result = train("navigation", **{**T, "seeds": (seed,), "eval_every": 2, "action_space": kind,
                                        "action_nvec": nvec})  # fmt: skip
        return result.policy.state_dict(), [{k: v for k, v in row.items() if k.startswith(("losses", "eval"))}
                                             for row in result.metrics]  # fmt: skip

    (a, rows_a), (b, rows_b), (c, _) = run(3), run(3), run(4)
    assert a.keys() == b.keys() and "actor.nvec" in a and "actor.log_std" not in a
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert rows_a == rows_b and "eval/success" in rows_a[-1]
    assert not torch.equal(a["actor.net.layers.0.weight"], c["actor.net.layers.0.weight"])


def test_batched_seeds_each_match_the_seed_trained_alone():
    common = {**T, "action_space": "multidiscrete"}
    together = train("navigation", seeds=(0, 1), **common)
    for seed, batched in zip((0, 1), together, strict=True):
        alone = train("navigation", seeds=(seed,), **common).policy.state_dict()
        for key, value in batched.policy.state_dict().items():
            torch.testing.assert_close(value, alone[key], rtol=1e-5, atol=1e-5, msg=key)


def test_a_checkpoint_keeps_the_heads_and_a_resumed_run_continues_bit_for_bit(tmp_path):
    common = {**T, "action_space": "multidiscrete", "action_nvec": (3, 4), "checkpoint_every": 0}
    straight = train("navigation", **{**common, "total_steps": 5 * 64, "run_dir": str(tmp_path / "a")})
    first = train("navigation", **{**common, "total_steps": 2 * 64, "run_dir": str(tmp_path / "b")})
    loaded = load_checkpoint(first.checkpoint)
    assert loaded.config.action_space == "multidiscrete" and loaded.config.action_nvec == (3, 4)
    assert loaded.policy.space == ActionSpace("multidiscrete", 2, (3, 4))
    obs = torch.randn(6, 4, 23)
    assert torch.equal(loaded.policy(obs), first.policy(obs))
    resumed = resume(first.run_dir, total_steps=5 * 64)
    assert resumed.frames == straight.frames == 5 * 64
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    saved = json.loads((first.run_dir / "config.json").read_text())
    assert saved["action_space"] == "multidiscrete" and saved["action_nvec"] == [3, 4]


def test_a_continuous_run_does_not_load_as_a_discrete_one(tmp_path):
    continuous = train("navigation", **{**T, "total_steps": 64, "run_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="a resumed run keeps its settings.*action_space"):
        resume(continuous.run_dir, action_space="discrete")
    states = [load_checkpoint(continuous.checkpoint).resume]
    trainer = small_trainer("discrete", None)
    with pytest.raises(ValueError, match="trained with continuous actions.*this trainer has discrete actions"):
        trainer.load_run_states(states)
    saved = torch.load(continuous.checkpoint, weights_only=True)
    space = ActionSpace.build("discrete", None, 2)
    low, high = saved["action_low"], saved["action_high"]
    with pytest.raises(ValueError, match="continuous run's Gaussian, not the discrete policy"):
        Policy.from_networks(saved, 23, low, high, 16, 2, True, space)
    saved["config"] = {**saved["config"], "action_space": "discrete"}  # a continuous run relabelled
    torch.save(saved, tmp_path / "relabelled.pt")
    with pytest.raises(ValueError, match="relabelled.pt: a damaged checkpoint"):
        load_checkpoint(tmp_path / "relabelled.pt")


def test_the_scripted_baseline_of_a_discrete_policy_is_the_continuous_controller_on_the_same_episodes():
    result = train("navigation", **{**T, "total_steps": 64, "action_space": "discrete"})
    score = evaluate(result.policy, "navigation", episodes=16, device="cpu", seed=5)
    assert score["scripted"]["action_space"] == "continuous"
    task = get_task("navigation").for_actions("discrete")  # the record's options for discrete runs
    continuous = Evaluator("navigation", task, 16, "cpu", seed=5)
    expected = summary(continuous(continuous.scripted_actions()))
    assert {k: v for k, v in score["scripted"].items() if k != "action_space"} == expected
    assert expected["success"] > 0.5  # the controller solves navigation: a real baseline
    discrete = Evaluator("navigation", task, 16, "cpu", seed=5, actions=result.policy.env_kwargs())
    with pytest.raises(ValueError, match="scripted controller emits continuous commands"):
        discrete.scripted_actions()
    random = discrete.random_actions(0)(discrete.env.obs)
    assert random.dtype == torch.int64 and random.shape == (16, 4, 1) and ((random >= 0) & (random < 9)).all()
    assert len(random.unique()) > 3
    assert score["random"]["success"] == summary(discrete(discrete.random_actions(5)))["success"]


def test_the_command_line_trains_a_multidiscrete_policy_and_scores_it(tmp_path, capsys):
    (result,) = train_main(["navigation", "--device", "cpu", "--n-envs", "8", "--rollout-steps", "4", "--total-steps",
                            "64", "--hidden", "16", "--eval-envs", "8", "--eval-episodes", "8", "--run-dir",
                            str(tmp_path), "--no-progress", "--action-space", "multidiscrete", "--action-nvec", "3",
                            "5"])  # fmt: skip
    assert result.config.action_space == "multidiscrete" and result.config.action_nvec == (3, 5)
    out = capsys.readouterr().out
    assert "(continuous actions)" in out and "greedy success" in out
    score = json.loads((result.run_dir / "score.json").read_text())
    assert score["scripted"]["action_space"] == "continuous" and "action_space" not in score["policy"]
    (one,) = train_main(["navigation", "--device", "cpu", "--n-envs", "8", "--rollout-steps", "4", "--total-steps",
                         "32", "--hidden", "8", "--eval-envs", "8", "--eval-episodes", "8", "--run-dir", "",
                         "--no-progress", "--action-space", "discrete", "--action-nvec", "5"])  # fmt: skip
    assert one.config.action_nvec == 5 and one.policy.space.heads == (25,)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"action_space": "categorical"}, r"action_space \(--action-space\) must be one of 'continuous'"),
        ({"action_nvec": 3}, "action_nvec .* applies to discrete action spaces"),
        ({"action_space": "discrete", "action_nvec": 1}, r"action_nvec \(--action-nvec\) must be an int >= 2"),
        ({"action_space": "discrete", "action_nvec": (3, "a")}, "must be an int >= 2 or a sequence"),
        ({"action_space": "discrete", "action_nvec": True}, "must be an int >= 2 or a sequence"),
    ],
)
def test_bad_action_settings_are_refused_with_the_field_named(overrides, match):
    with pytest.raises(ValueError, match=match):
        make_config({"n_envs": 8, **overrides})


def test_action_settings_that_do_not_fit_the_env_are_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="action_nvec must give 2 level counts"):
        train("navigation", **{**T, "action_space": "multidiscrete", "action_nvec": (3, 3, 3)})
    with pytest.raises(ValueError, match="may not set 'action_space'.*--action-space"):
        train("navigation", **T, options={"action_space": "discrete"})
    env = swarp.make("navigation", n_envs=8, device="cpu", seed=0, auto_reset=True, n_agents=2)
    config = make_config({"n_envs": 8, "minibatches": 2, "run_dir": "", "action_space": "discrete"})
    with pytest.raises(ValueError, match="envs take continuous actions.*config asks for discrete"):
        Trainer.build([env], get_task("navigation"), config, [0])
    with pytest.raises(SystemExit) as exit_:
        train_main(["navigation", "--device", "cpu", "--action-space", "discrete", "--action-nvec", "3", "x"])
    assert exit_.value.code == 2 and "--action-nvec takes N [N ...] or GROUP=N[,N...]" in capsys.readouterr().err
    path = tmp_path / "c.json"
    path.write_text('{"action_space": "multidiscrete", "action_nvec": [4, 3]}')
    assert load_config_file(str(path)) == {"action_space": "multidiscrete", "action_nvec": (4, 3)}


def test_navigation_with_discrete_actions_learns_on_the_cpu():
    """30 iterations of 64 envs x 32 steps (the defaults; ~10 s on a 2-core CPU): the greedy policy
    of 9 choices an agent, acceleration-controlled as navigation's record says for discrete runs,
    succeeds in most episodes where random play of them never does (0.82-0.85 on seeds 0-2 by the
    command line's evaluation; velocity control stayed under 0.10)."""
    result = train("navigation", device="cpu", n_envs=64, total_steps=64 * 32 * 30, eval_every=0, eval_envs=256,
                   run_dir="", progress=False, action_space="discrete")  # fmt: skip
    task = get_task("navigation").for_actions("discrete")  # acceleration-controlled: the record's discrete options
    evaluator = Evaluator("navigation", task, 256, "cpu", seed=777, actions=result.policy.env_kwargs())
    greedy = summary(evaluator(result.policy))
    random = summary(evaluator(evaluator.random_actions(0)))
    assert greedy["success_low"] > 0.6 and random["success_high"] < 0.05, (greedy, random)
    assert greedy["return"] > random["return"] + 1.0, (greedy, random)


def test_task_records_discrete_options_apply_to_discrete_runs_only():
    """navigation's record makes discrete runs acceleration-controlled; a continuous run keeps its
    options, and the run's own options still override the record's."""
    task = get_task("navigation")
    assert task.for_actions("continuous").options == task.options
    assert task.for_actions("discrete").options["ctrl_mode"] == "acceleration"
    assert task.for_actions("multidiscrete").with_options({"ctrl_mode": "velocity"}).options["ctrl_mode"] == "velocity"
    with pytest.raises(ValueError, match="discrete_options"):
        type(task)(discrete_options={"seed": 1})
