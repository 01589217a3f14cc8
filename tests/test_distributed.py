"""``swarp/distributed.py``: shards of one batch over processes, and data-parallel gradients.

The multi-process tests start processes the way ``torchrun`` would (its environment variables,
``env://`` rendezvous), through ``torch.multiprocessing``; each rank writes what it computed to a
file and the test compares it with one process doing the whole job. They run with gloo on the CPU
at 2, 3 and 4 ranks, and with NCCL on every GPU of a host that has 2 or more (``gpu`` marker; see
docs/scaling.md).
"""

import copy

import pytest
import torch
from distributed_ranks import RUNS, rank_device, run_ranks

import swarp
import swarp.distributed as sd

SEED = 11
N_STEPS = 24
#: Short episodes in a small arena: a rollout crosses several auto-resets, so later episodes'
#: draws (keyed by episode counter and global env) are compared too.
OPTIONS = dict(n_agents=3, world_size=0.5, n_obstacles=2, max_steps=7, auto_reset=True, clone_outputs=True)
#: Rows of the gradient test's batch (divisible by 2, 3, 4, 6 and 8 ranks).
N_ROWS = 24
LEARNING_RATE = 1e-2


def global_n_envs(world: int) -> int:
    """The global batch of ``world`` ranks: uneven on purpose (rank 0 owns 3 envs, the others 2)."""
    return 2 * world + 1


def batch_rows(case: str, rank: int, world: int) -> slice:
    """Rank ``rank``'s rows of the gradient test's batch: ``"equal"`` shares, or ``"unequal"`` ones
    (rank 0 takes ``world - 1`` rows more than an equal share, every other rank one row less)."""
    base = N_ROWS // world
    sizes = [base] * world if case == "equal" else [base + world - 1] + [base - 1] * (world - 1)
    start = sum(sizes[:rank])
    return slice(start, start + sizes[rank])


# --- shards of environments -------------------------------------------------------------------------


def rollout(env: swarp.Environment, n_global: int) -> dict[str, torch.Tensor]:
    """Step ``env`` under actions drawn for the whole global batch (``n_global`` envs) and sliced
    to its envs.

    Returns per-env records [n_envs, N_STEPS, ...] (env dim first, for ``all_gather_envs``).
    """
    generator = torch.Generator().manual_seed(SEED)
    low, high = env.action_bounds
    mine = slice(env.env_offset, env.env_offset + env.n_envs)
    records: dict[str, list[torch.Tensor]] = {"reset_obs": [env.reset(seed=SEED)[0]]}
    for _ in range(N_STEPS):
        u = torch.rand(n_global, env.n_agents, env.act_dim, generator=generator).to(env.torch_device)
        obs, reward, terminated, truncated, info = env.step(low + (high - low) * (1.4 * u[mine] - 0.2))
        step = {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}
        done = (terminated | truncated).view(-1, 1, 1)  # final_obs rows of other envs are stale
        final_obs = torch.where(done, info["final_obs"], torch.zeros_like(obs))
        step.update(final_obs=final_obs, episode=env.episode.clone(), goals=env.scenario.goals.clone())
        for key, value in step.items():
            records.setdefault(key, []).append(value)
    return {key: torch.stack(values, dim=1) for key, values in records.items()}


def _shard_worker(device: str) -> dict:
    n_global = global_n_envs(sd.get_world_size())
    env = sd.make_shard("navigation", n_global, device=device, seed=SEED, **OPTIONS)
    first = rollout(env, n_global)
    second = rollout(env, n_global)  # rollout() restarts from reset(seed=SEED): the replay must match
    return {
        "span": (env.env_offset, env.n_envs),
        "global_n_envs": sd.global_n_envs(env),
        "first": first,
        "second": second,
        "gathered": {key: sd.all_gather_envs(value) for key, value in first.items()},
        "rank_seed": sd.rank_seed(SEED),
        "metrics": sd.reduce_metrics({"n_envs": env.n_envs, "rank": torch.tensor(sd.get_rank())}, "sum"),
        "mean_metrics": sd.reduce_metrics({"rank": sd.get_rank()}, "mean"),
        "max_metrics": sd.reduce_metrics({"rank": sd.get_rank()}, "max"),
        "moments": sd.global_mean_std(first["reward"]),
        "moments_per_agent": sd.global_mean_std(first["reward"], dim=0),  # over the envs of every shard
    }


@pytest.fixture(scope="module", params=RUNS, ids=lambda run: f"{run[0]}-{run[1]}")
def run(request) -> tuple[str, int]:
    """``(backend, ranks)`` of one multi-process run."""
    return request.param


@pytest.fixture(scope="module")
def backend(run) -> str:
    return run[0]


@pytest.fixture(scope="module")
def world(run) -> int:
    return run[1]


def _worker(device: str) -> dict:
    """Everything the ranks check, in one launch (starting processes costs more than the checks)."""
    return {"shards": _shard_worker(device), "gradients": _gradient_worker(device)}


@pytest.fixture(scope="module")
def rank_results(backend, world, tmp_path_factory) -> list[dict]:
    return run_ranks(_worker, tmp_path_factory.mktemp("ranks"), backend, world)


@pytest.fixture(scope="module")
def shard_results(rank_results) -> list[dict]:
    return [result["shards"] for result in rank_results]


@pytest.fixture(scope="module")
def single_process(backend, world):
    """The whole batch in one process (on rank 0's device), same seed and actions."""
    n_global = global_n_envs(world)
    env = swarp.make("navigation", n_envs=n_global, device=rank_device(backend, 0), seed=SEED, **OPTIONS)
    return {key: value.cpu() for key, value in rollout(env, n_global).items()}


def test_shards_are_disjoint_and_tile_the_global_batch(shard_results, world):
    assert len(shard_results) == world
    assert [r["span"] for r in shard_results] == [(0, 3)] + [(3 + 2 * i, 2) for i in range(world - 1)]
    assert [r["global_n_envs"] for r in shard_results] == [global_n_envs(world)] * world
    # Distinct reset streams: the shards' first envs (global 0, 3, 5, ...) start differently.
    firsts = [r["first"]["reset_obs"][0, 0] for r in shard_results]
    assert all(not torch.equal(a, b) for i, a in enumerate(firsts) for b in firsts[i + 1 :])
    seeds = [r["rank_seed"] for r in shard_results]
    assert seeds == [sd.rank_seed(SEED, rank) for rank in range(world)] and len(set(seeds)) == world


def test_shards_are_deterministic(shard_results):
    for result in shard_results:
        for key, value in result["first"].items():
            assert torch.equal(value, result["second"][key]), key


def test_union_of_shards_is_the_single_process_batch_bit_for_bit(shard_results, single_process):
    # Episodes advance several times in the rollout: every later episode's draws agree too.
    assert int(single_process["episode"][:, -1].min()) >= 2
    for key, expected in single_process.items():
        joined = torch.cat([r["first"][key] for r in shard_results])
        assert torch.equal(joined, expected), key
        for result in shard_results:
            assert torch.equal(result["gathered"][key], expected), key


def test_metric_reductions(shard_results, single_process, world):
    rank_sum = world * (world - 1) / 2
    for result in shard_results:
        assert result["metrics"] == {"n_envs": global_n_envs(world), "rank": rank_sum}
        assert result["mean_metrics"] == {"rank": rank_sum / world}
        assert result["max_metrics"] == {"rank": float(world - 1)}
        mean, std = result["moments"]
        reward = single_process["reward"]
        torch.testing.assert_close(mean, reward.mean(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(std, reward.std(), rtol=1e-6, atol=1e-6)
        mean, std = result["moments_per_agent"]
        torch.testing.assert_close(mean, reward.mean(0, keepdim=True), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(std, reward.std(0, keepdim=True), rtol=1e-6, atol=1e-6)


def test_shard_layout_is_balanced_and_validated():
    for total in (2, 5, 8, 1001):
        for world in (1, 2, 3):
            if total < world:
                continue
            shards = [sd.shard(total, rank, world) for rank in range(world)]
            assert [s.env_offset for s in shards] == [sum(s.n_envs for s in shards[:r]) for r in range(world)]
            assert sum(s.n_envs for s in shards) == total
            assert max(s.n_envs for s in shards) - min(s.n_envs for s in shards) <= 1
            assert sorted(i for s in shards for i in s.envs) == list(range(total))
    with pytest.raises(ValueError, match="global_n_envs .* must be >= world_size"):
        sd.shard(1, 0, 2)
    with pytest.raises(ValueError, match="rank must be < world_size"):
        sd.shard(4, 2, 2)
    with pytest.raises(ValueError, match="global_n_envs must be an int >= 1"):
        sd.shard(0, 0, 1)
    with pytest.raises(TypeError, match="make_shard sets n_envs"):
        sd.make_shard("navigation", 4, device="cpu", n_envs=2)


def test_without_a_process_group_the_world_is_one_process():
    assert not sd.is_distributed() and sd.get_rank() == 0 and sd.get_world_size() == 1
    env = sd.make_shard("navigation", 3, device="cpu", seed=SEED, n_agents=2)
    assert (env.env_offset, env.n_envs) == (0, 3) and sd.global_n_envs(env) == 3
    assert sd.all_gather_envs(env.obs) is env.obs
    assert sd.reduce_metrics({"a": 2, "b": torch.tensor(3.5)}) == {"a": 2.0, "b": 3.5}
    mean, std = sd.global_mean_std(env.obs)
    assert torch.equal(mean, env.obs.mean()) and torch.equal(std, env.obs.std())
    mean, std = sd.global_mean_std(env.obs, dim=(0, 1))
    assert torch.equal(mean, env.obs.mean((0, 1), keepdim=True)) and torch.equal(std, env.obs.std((0, 1), keepdim=True))
    with pytest.raises(ValueError, match="op must be one of"):
        sd.reduce_metrics({"a": 1.0}, "median")
    with pytest.raises(ValueError, match="must be a scalar"):
        sd.reduce_metrics({"a": torch.zeros(2)})
    assert sd.init(device="cpu") == "cpu" and not sd.is_distributed()  # not launched by torchrun
    with pytest.raises(ValueError, match="backend must be"):
        sd.init(backend="mpi")
    with pytest.raises(ValueError, match="timeout_s must be a number > 0"):
        sd.init(device="cpu", timeout_s=0)
    with pytest.raises(ValueError, match="nccl backend needs a CUDA device"):
        sd.init(backend="nccl", device="cpu")


# --- data-parallel gradients ------------------------------------------------------------------------


def _model_and_batch(device: str = "cpu") -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """A small tanh MLP (the same weights on every rank) and a fixed regression batch of ``N_ROWS``."""
    generator = torch.Generator().manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    x, y = torch.randn(N_ROWS, 5, generator=generator), torch.randn(N_ROWS, 3, generator=generator)
    return model.to(device), x.to(device), y.to(device)


def adam_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, sync=None) -> dict[str, list[torch.Tensor]]:
    """One Adam step on the mean squared error over (x, y); ``sync`` runs between backward and step."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    torch.nn.functional.mse_loss(model(x), y).backward()
    if sync is not None:
        sync(model)
    optimizer.step()
    return {
        "grads": [p.grad.clone() for p in model.parameters()],
        "params": [p.detach().clone() for p in model.parameters()],
    }


def _gradient_worker(device: str) -> dict:
    model, x, y = _model_and_batch(device)
    rank, world = sd.get_rank(), sd.get_world_size()
    equal, unequal = batch_rows("equal", rank, world), batch_rows("unequal", rank, world)
    n_unequal = unequal.stop - unequal.start
    results = {
        "equal": adam_step(model, x[equal], y[equal], lambda m: sd.all_reduce_gradients(m.parameters())),
        "unequal": adam_step(
            model, x[unequal], y[unequal], lambda m: sd.all_reduce_gradients(m.parameters(), batch_size=n_unequal)
        ),
    }
    # Replicas that drifted apart are made equal to rank 0's.
    drifted = copy.deepcopy(model)
    with torch.no_grad():
        for p in drifted.parameters():
            p.add_(float(rank))
    sd.broadcast_parameters(drifted)
    results["broadcast"] = [p.detach().clone() for p in drifted.parameters()]
    return results


@pytest.fixture(scope="module")
def gradient_results(rank_results) -> list[dict]:
    return [result["gradients"] for result in rank_results]


@pytest.mark.parametrize("case", ["equal", "unequal"])
def test_all_reduced_gradients_give_the_single_process_update(backend, world, gradient_results, case):
    model, x, y = _model_and_batch(rank_device(backend, 0))
    expected = adam_step(model, x, y)  # one process, the concatenated batch
    for result in gradient_results:
        for key in ("grads", "params"):
            for got, want in zip(result[case][key], expected[key], strict=True):
                torch.testing.assert_close(got, want.cpu(), rtol=1e-5, atol=1e-6)
    # The check can fail: one shard's own update is a different one.
    rows = batch_rows(case, 0, world)
    alone = adam_step(model, x[rows], y[rows])
    assert max((a - b).abs().max() for a, b in zip(alone["grads"], expected["grads"], strict=True)) > 1e-3


def test_broadcast_makes_replicas_identical(gradient_results):
    model, _, _ = _model_and_batch()
    for result in gradient_results:
        for got, want in zip(result["broadcast"], model.parameters(), strict=True):
            assert torch.equal(got, want)
    for other in gradient_results[1:]:
        for a, b in zip(gradient_results[0]["equal"]["params"], other["equal"]["params"], strict=True):
            assert torch.equal(a, b)  # after the all-reduced step too
