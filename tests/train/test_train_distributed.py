"""swarp.train data-parallel over 2 ranks (gloo on the CPU; NCCL where 2 GPUs exist)."""

import pytest
import torch
from distributed_ranks import BACKENDS, WORLD, run_ranks

from swarp.train import train

N_ENVS, STEPS, ITERATIONS = 16, 4, 3


def _train_worker(device: str) -> dict:
    budget = N_ENVS * STEPS * ITERATIONS
    result = train("navigation", device=device, n_envs=N_ENVS, rollout_steps=STEPS, total_steps=budget, hidden=16,
                   minibatches=2, eval_every=0, eval_envs=N_ENVS, run_dir="", progress=False, distributed=True,
                   seeds=(0, 1))  # fmt: skip
    return {
        "state": [r.policy.state_dict() for r in result],
        "frames": result[0].frames,
        "eval_episodes": result[0].final["eval/episodes"],
        "episodes": result[0].final.get("charts/episodes", 0),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_parallel_replicas_stay_identical(tmp_path, backend):
    ranks = run_ranks(_train_worker, tmp_path, backend)
    assert len(ranks) == WORLD
    first, second = ranks
    for run_a, run_b in zip(first["state"], second["state"], strict=True):
        for key in run_a:
            assert torch.equal(run_a[key], run_b[key]), key  # gradients and statistics were averaged
    assert not torch.equal(first["state"][0]["actor.log_std"], first["state"][1]["actor.log_std"])
    assert first["frames"] == N_ENVS * STEPS * ITERATIONS  # global env-steps
    assert first["eval_episodes"] == second["eval_episodes"] == N_ENVS  # every rank's shard, gathered
    assert first["episodes"] == second["episodes"]  # the episode counts are summed over ranks


def test_distributed_without_torchrun_is_a_clear_error():
    with pytest.raises(RuntimeError, match="torchrun"):
        train("navigation", device="cpu", n_envs=8, total_steps=8, distributed=True, run_dir="", progress=False)
