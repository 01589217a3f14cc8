"""swarp.train: it learns, it is reproducible, its advantage is GAE, its checkpoints are safe."""

import os
import pickle

import pytest
import torch

import swarp
from swarp.train import Evaluator, TrainConfig, Trainer, get_task, load_checkpoint, make_config, train, wilson_interval
from swarp.train.evaluate import summary


def small_trainer(n_envs=8, rollout_steps=6, seed=0, **overrides) -> Trainer:
    task = get_task("navigation")
    env = swarp.make("navigation", n_envs=n_envs, device="cpu", seed=seed, auto_reset=True, max_steps=5,
                     n_agents=3, substeps=1)  # fmt: skip
    config = make_config({"n_envs": n_envs, "rollout_steps": rollout_steps, "minibatches": 2, "hidden": 16,
                          "run_dir": "", "progress": False, **overrides})  # fmt: skip
    return Trainer.build([env], task, config, [seed])


def test_a_short_navigation_run_learns_far_above_random(tmp_path):
    result = train("navigation", device="cpu", n_envs=64, total_steps=64 * 32 * 30, eval_every=0, eval_envs=256,
                   run_dir=str(tmp_path), progress=False)  # fmt: skip
    evaluator = Evaluator("navigation", get_task("navigation"), 256, "cpu", seed=777)
    greedy = summary(evaluator(result.policy))
    random = summary(evaluator(evaluator.random_actions(0)))
    assert greedy["success_low"] > random["success_high"], (greedy, random)
    assert greedy["success"] > 0.5
    assert (result.run_dir / "metrics.jsonl").exists() and result.checkpoint.exists()


def test_two_runs_with_one_seed_are_bit_identical():
    def run():
        result = train("navigation", device="cpu", n_envs=16, rollout_steps=8, total_steps=16 * 8 * 3, hidden=32,
                       eval_every=0, eval_envs=16, run_dir="", progress=False, seeds=(3,))  # fmt: skip
        return result.policy.state_dict(), result.metrics[-1]

    (a, row_a), (b, row_b) = run(), run()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert row_a["losses/policy_loss"] == row_b["losses/policy_loss"]
    assert row_a["eval/success"] == row_b["eval/success"]


def test_collect_fills_the_buffers_an_eager_step_loop_fills():
    trainer = small_trainer(seed=5)
    env, b = trainer.envs[0], trainer.buffers
    snapshot, rng = env.get_state(), torch.get_rng_state()
    trainer.collect()
    env.set_state(snapshot)
    torch.set_rng_state(rng)
    generator = torch.Generator().manual_seed(5)  # the run's own noise generator, from its seed
    with torch.no_grad():
        for t in range(trainer.config.rollout_steps):
            obs = env.obs.clone()
            x = trainer.normalizer(obs[None])
            mean = trainer.actor(x)
            u = mean + torch.exp(trainer.actor.log_std) * torch.randn(mean.shape[1:], generator=generator)
            _, reward, terminated, truncated, info = env.step(trainer.actor.squash(u)[0])
            assert torch.equal(b.obs[0, t], obs)
            assert torch.equal(b.raw_action[0, t], u[0])
            assert torch.equal(b.value[0, t], trainer.critic(x)[0])
            assert torch.equal(b.reward[0, t], reward)
            assert torch.equal(b.terminated[0, t], terminated) and torch.equal(b.truncated[0, t], truncated)
            done = terminated | truncated
            assert torch.equal(b.final_obs[0, t][done], info["final_obs"][done])
    assert b.truncated.any()  # max_steps 5 < 6 rollout steps: the bootstrap path is exercised


def test_advantages_equal_a_plain_gae_loop_with_terminations_and_truncations():
    trainer = small_trainer(rollout_steps=7, gamma=0.9, gae_lambda=0.8)
    b, cfg = trainer.buffers, trainer.config
    g = torch.Generator().manual_seed(1)
    _, T, E, A = b.reward.shape
    b.reward.copy_(torch.randn(1, T, E, A, generator=g))
    b.value.copy_(torch.randn(1, T, E, A, generator=g))
    b.final_obs.copy_(torch.randn(b.final_obs.shape, generator=g))
    end = torch.rand(1, T, E, generator=g)
    b.terminated.copy_(end < 0.2)
    b.truncated.copy_((end >= 0.2) & (end < 0.4))
    trainer.advantages()
    with torch.no_grad():
        final_value = trainer.critic(trainer.normalizer(b.final_obs))[0]
        last_value = trainer.critic(trainer.normalizer(trainer.envs[0].obs[None]))[0]
    terminated, truncated, reward, value = b.terminated[0], b.truncated[0], b.reward[0], b.value[0]
    expected = torch.zeros(T, E, A)
    for e in range(E):
        for a in range(A):
            following = 0.0
            for t in reversed(range(T)):
                if terminated[t, e]:
                    next_value, following = 0.0, 0.0
                elif truncated[t, e]:
                    next_value, following = float(final_value[t, e, a]), 0.0
                else:
                    next_value = float(last_value[e, a]) if t == T - 1 else float(value[t + 1, e, a])
                delta = float(reward[t, e, a]) + cfg.gamma * next_value - float(value[t, e, a])
                following = delta + cfg.gamma * cfg.gae_lambda * following
                expected[t, e, a] = following
    assert b.terminated.any() and b.truncated.any()
    torch.testing.assert_close(b.advantage[0], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.returns[0], expected + value, rtol=1e-5, atol=1e-5)


def test_a_checkpoint_round_trips_and_a_tampered_one_is_refused(tmp_path):
    result = train("navigation", device="cpu", n_envs=8, rollout_steps=4, total_steps=64, hidden=16, eval_envs=8,
                   run_dir=str(tmp_path), progress=False)  # fmt: skip
    loaded = load_checkpoint(result.checkpoint)
    obs = torch.randn(5, 4, 23)
    assert torch.equal(loaded.policy(obs), result.policy(obs))
    assert loaded.scenario == "navigation" and loaded.config == result.config

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "evil.pt"
    data = torch.load(result.checkpoint, weights_only=True)
    data["extra"] = Payload()
    with open(evil, "wb") as f:
        pickle.dump(data, f)
    with pytest.raises(ValueError, match="refused"):
        load_checkpoint(evil)
    assert not marker.exists()
    with pytest.raises(ValueError, match="not a swarp.train"):
        torch.save({"format": "other"}, tmp_path / "other.pt")
        load_checkpoint(tmp_path / "other.pt")


def test_the_policy_acts_inside_the_action_bounds():
    trainer = small_trainer()
    env = trainer.envs[0]
    low, high = env.action_bounds
    with torch.no_grad():
        trainer.actor.net.layers[-1].bias.fill_(50.0)  # saturate the squash
    actions = trainer.policy(0)(torch.randn(4, 3, env.obs_dim))
    assert actions.shape == (4, 3, env.act_dim)
    assert (actions <= high).all() and (actions >= low).all()


def test_the_entropy_bonus_is_the_squashed_actions_entropy():
    """The estimate equals a Monte Carlo of tanh(N(mean, std)) entropy, falls where the mean
    saturates (the pre-squash Gaussian's does not), and its gradient pulls a saturated mean back."""
    trainer = small_trainer()
    actor, generator = trainer.actor, torch.Generator().manual_seed(0)
    noise = torch.randn(1, 200_000, 1, actor.log_std.shape[1], generator=generator)
    centred, saturated = torch.zeros_like(noise), torch.full_like(noise, 4.0)
    with torch.no_grad():
        actor.log_std.fill_(0.0)
        # h(tanh(u)) = h(u) + E[log(1 - tanh(u)^2)], here straight from the samples.
        u = centred + noise
        direct = actor.entropy() + torch.log1p(-torch.tanh(u).square()).sum(-1).mean()
        assert torch.allclose(actor.squashed_entropy(centred, noise), direct, atol=1e-3)
        assert actor.squashed_entropy(saturated, noise) < actor.squashed_entropy(centred, noise) - 1.0
    mean = torch.full((1, 64, 1, actor.log_std.shape[1]), 4.0, requires_grad=True)
    actor.squashed_entropy(mean, noise[:, :64]).sum().backward()
    assert (mean.grad < 0).all()  # ascending the bonus moves the mean towards 0


def test_an_entropy_bonus_trains_and_keeps_runs_reproducible():
    first, second = small_trainer(ent_coef=0.01), small_trainer(ent_coef=0.01)
    for trainer in (first, second):
        for _ in range(2):
            trainer.iterate()
    assert torch.equal(first.actor.log_std, second.actor.log_std)
    assert torch.isfinite(first.actor.log_std).all()


def test_ippo_has_a_per_agent_critic_and_trains():
    trainer = small_trainer(algorithm="ippo")
    assert not trainer.critic.centralized
    for _ in range(2):
        trainer.iterate()
    assert torch.isfinite(trainer.buffers.advantage).all()


def test_normalizer_matches_the_batch_statistics():
    trainer = small_trainer()
    norm = trainer.normalizer
    norm.mean.zero_(), norm.var.fill_(1.0), norm.count.zero_()
    x = torch.randn(3, 50, 23) * 4 + 2
    norm.update(x[0:1]), norm.update(x[1:2]), norm.update(x[2:3])
    rows = x.reshape(-1, 23)
    torch.testing.assert_close(norm.mean[0], rows.mean(0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm.var[0], rows.var(0, unbiased=False), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"algorithm": "qmix"}, "algorithm"),
        ({"n_envs": 10, "rollout_steps": 3, "minibatches": 4}, "multiple of minibatches"),
        ({"gamma": 1.5, "n_envs": 8}, "gamma"),
        ({"n_envs": 8, "learning_rate": 1.0}, "unknown TrainConfig fields"),
    ],
)
def test_bad_configs_are_refused_with_the_field_named(overrides, match):
    with pytest.raises(ValueError, match=match):
        make_config(overrides)


def test_unknown_scenario_is_refused():
    with pytest.raises(ValueError, match="unknown scenario"):
        train("no_such_scenario", device="cpu")


def test_wilson_interval():
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-3) and high == pytest.approx(0.5962, abs=1e-3)
    assert wilson_interval(0, 100)[0] == 0.0 and wilson_interval(100, 100)[1] == 1.0


def test_config_defaults_are_a_dataclass():
    assert TrainConfig().algorithm == "mappo"


def test_batched_runs_each_match_the_run_trained_alone():
    """Three seeds trained at once against each seed trained alone: the same environment steps, the
    same noise and minibatch orders, so the parameters agree to float rounding of the batched
    matmuls (tolerance 1e-5; on this CPU they are bit-identical)."""
    common = dict(device="cpu", n_envs=8, rollout_steps=6, total_steps=8 * 6 * 3, hidden=16, minibatches=2,
                  eval_every=0, eval_envs=8, run_dir="", progress=False)  # fmt: skip
    together = train("navigation", seeds=(0, 1, 2), **common)
    for seed, batched in zip((0, 1, 2), together, strict=True):
        alone = train("navigation", seeds=(seed,), **common)
        assert batched.seed == seed
        a, b = batched.policy.state_dict(), alone.policy.state_dict()
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-5, msg=key)
        assert batched.metrics[-1]["eval/success"] == alone.metrics[-1]["eval/success"]
    assert not torch.equal(together[0].policy.state_dict()["actor.net.layers.0.weight"],
                           together[1].policy.state_dict()["actor.net.layers.0.weight"])  # fmt: skip
