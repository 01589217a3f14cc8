"""swarp.train on envs with an alive mask (``swarp/runtime/alive.py``: navigation's
``n_agents=(lo, hi)`` and ``leave_on_goal``): the agents that did not act are left out of the
advantages and of every loss exactly, and a masked run trains with finite losses."""

import math

import torch

import swarp
from swarp.train import Trainer, get_task, make_config
from swarp.train.networks import Normalizer
from swarp.train.ppo import agent_mean

OPTIONS = dict(n_agents=(1, 4), leave_on_goal=True, goal_radius=0.3, world_size=0.5, max_steps=8)


def masked_trainer(seed: int = 0, **overrides) -> Trainer:
    env = swarp.make("navigation", n_envs=8, device="cpu", seed=seed, auto_reset=True, **OPTIONS)
    config = make_config({"n_envs": 8, "rollout_steps": 8, "minibatches": 2, "hidden": 16, "run_dir": "",
                          "progress": False, "ent_coef": 0.01, **overrides})  # fmt: skip
    return Trainer.build([env], get_task("navigation"), config, [seed])


def test_the_buffers_record_who_acted_and_who_left():
    trainer = masked_trainer()
    trainer.collect()
    b = trainer.buffers
    assert b.acting is not None and bool((~b.acting).any()) and bool(b.left.any())
    assert not bool((b.left & ~b.acting).any())  # only an agent that acted can leave
    assert bool((b.reward[~b.acting] == 0).all())
    unmasked = Trainer.build(
        [swarp.make("navigation", n_envs=8, device="cpu", auto_reset=True, n_agents=3)],
        get_task("navigation"), trainer.config, [0],
    )  # fmt: skip
    assert unmasked.buffers.acting is None and unmasked.buffers.left is None


def test_agents_that_did_not_act_do_not_reach_the_advantages_of_those_that_did():
    trainer = masked_trainer()
    trainer.collect()
    b = trainer.buffers
    trainer.advantages()
    kept = b.advantage[b.acting].clone()
    idle = ~b.acting
    b.value.masked_fill_(idle, 123.0)
    b.reward.masked_fill_(idle, -45.0)
    trainer.advantages()
    assert torch.equal(b.advantage[b.acting], kept)


def test_the_losses_are_means_over_the_agents_that_acted():
    values = torch.tensor([[[1.0, 2.0], [3.0, 100.0]]])
    weight = torch.tensor([[[1.0, 1.0], [1.0, 0.0]]])
    assert agent_mean(values, weight).item() == 2.0
    assert agent_mean(values, None).item() == values.mean().item()
    assert agent_mean(values, torch.zeros_like(weight)).item() == 0.0
    # IPPO: each value reads its agent's own row (MAPPO's joint critic reads the dead agents' rows,
    # which the env keeps zero, as inputs of the others' values).
    trainer = masked_trainer(algorithm="ippo")
    trainer.collect()
    trainer.advantages()
    b = trainer.buffers
    K, n, A = 1, 8 * 8, b.acting.shape[-1]
    weight = b.acting.view(K, n, A).float()
    args = (b.obs.view(K, n, A, -1), [raw.view(K, n, A, -1) for raw in b.raw_actions], b.log_prob.view(K, n, A),
            b.advantage.view(K, n, A), b.returns.view(K, n, A))  # fmt: skip
    grads, start = [], [p.detach().clone() for p in trainer.parameters()]
    for poison in (False, True):
        for p, value in zip(trainer.parameters(), start, strict=True):
            p.data.copy_(value)
        obs = args[0].clone()
        if poison:  # whatever a dead agent's row holds, the gradient is the same
            obs[~b.acting.view(K, n, A)] = 7.0
        for g in trainer.generators:
            g.manual_seed(1)
        trainer.minibatch_step(obs, *args[1:], weight)  # the gradient stays in .grad after the step
        grads.append(torch.cat([p.grad.detach().flatten() for p in trainer.parameters()]))
    assert torch.isfinite(grads[0]).all() and bool(grads[0].abs().sum() > 0)
    assert torch.equal(grads[0], grads[1])


def test_a_masked_run_trains():
    trainer = masked_trainer()
    for _ in range(3):
        trainer.iterate()
    metrics = trainer.read_metrics()[0]
    assert all(math.isfinite(value) for value in metrics.values() if isinstance(value, float))
    assert not bool(trainer.health_flags().any())


def test_the_observation_statistics_count_only_the_agents_that_acted():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 4, 3, generator=gen, dtype=torch.float64).float()  # [K, T, A, O]
    mask = torch.rand(2, 5, 4, generator=gen) < 0.6
    mask[1] = False  # run 1 saw no agent act: its statistics stay as they were
    norm = Normalizer(2, 3)
    norm.update(x, mask)
    kept = x[0][mask[0]].double()
    assert torch.allclose(norm.mean[0].double(), kept.mean(0), atol=1e-6)
    assert torch.allclose(norm.var[0].double(), kept.var(0, unbiased=False), atol=1e-5)
    assert torch.equal(norm.mean[1], torch.zeros(3)) and torch.equal(norm.var[1], torch.ones(3))
    assert norm.count[0].item() == mask[0].sum().item() and norm.count[1].item() == 0.0
    poisoned = x.clone()
    poisoned[~mask] = 1e6  # a dead agent's row never reaches the statistics
    other = Normalizer(2, 3)
    other.update(poisoned, mask)
    assert torch.equal(other.mean, norm.mean) and torch.equal(other.var, norm.var)
    # The trainer folds in its rollout's rows with the buffers' record of who acted.
    trainer = masked_trainer()
    trainer.collect()
    b = trainer.buffers
    before = trainer.nets[0].normalizer.count.clone()
    trainer.update_normalizers(b.obs, b.acting)
    assert trainer.nets[0].normalizer.count.item() - before.item() == b.acting.sum().item()
