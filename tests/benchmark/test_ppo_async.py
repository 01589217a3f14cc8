"""The PPO-loop benchmark runs every driver and reports the overlap ceiling it is judged against."""

import json
import re

import pytest

from swarp.benchmark import ppo_async


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if re.match(r"^\s+\d[\d,]*\s", line)]


def test_small_cpu_run_reports_every_mode_and_a_ceiling(capsys, tmp_path):
    ppo_async.main(
        ["--device", "cpu", "--envs", "4", "8", "--groups", "4", "--reps", "2", "--bench-steps", "6"]
        + ["--json", str(tmp_path / "rates.json"), "--plot", str(tmp_path / "rates.png")]
        + ["--warmup", "4", "--num-steps", "4", "--epochs", "1", "--minibatches", "2"]
    )
    out = capsys.readouterr().out
    assert "4 groups" in out and "env share" in out
    rows = table_rows(out)
    assert [row[0] for row in rows] == ["4", "8"]
    assert (tmp_path / "rates.png").stat().st_size > 1000
    raw = json.loads((tmp_path / "rates.json").read_text())["rates"]
    assert set(raw) == {"4", "8"}
    assert set(raw["8"]) == {"env", "env send/recv", "step", "send/recv", "pool"}
    assert all(len(rates) == 2 and min(rates) > 0 for rates in raw["8"].values())
    for row in rows:
        values = [float(v.replace(",", "")) for v in row]
        assert len(values) == 12  # n, step +-, send/recv +- x, pool +- x, share, ceiling, cost
        assert all(v > 0 for v in values[1:9:1] if v == v)
        share, ceiling, cost = values[-3:]
        # Timing ratios of a few microsecond steps: only their definitions are checked (a noisy
        # machine can time the env alone slower than the loop).
        assert share > 0 and cost > 0
        assert ceiling == pytest.approx(1 / max(share, 1 - share), abs=0.02)


def test_pool_loop_fills_every_slot_of_the_rollout():
    """Partial batches store each group's transitions in its own rows: one rollout of a 4-group
    pool fills every env and agent of every slot but the first (the fresh reset round has no
    transition to store)."""
    cfg = ppo_async.Config(num_steps=4, epochs=1, minibatches=1, warmup=0, bench_steps=1, reps=1, hidden=16)
    run = ppo_async.Run("pool", 8, "cpu", cfg, n_agents=2, groups=4)  # warmup 0: nothing ran yet
    loop = run.loop
    ppo_async.run_pool(loop, 4, 0)  # slots 0..3, the update after slot 3
    run.close()
    assert (loop.obs[0] == 0).all() and (loop.act[0] == 0).all()
    assert (loop.obs[1:].abs().sum(-1) > 0).all()
    assert (loop.act[1:].abs().sum(-1) > 0).all()
    assert (loop.rew[1:] != 0).all()


@pytest.mark.gpu
def test_cpu_simulator_feeding_a_cuda_policy(capsys):
    ppo_async.main(
        ["--device", "cpu", "--policy-device", "cuda:0", "--envs", "8", "--reps", "2", "--bench-steps", "6"]
        + ["--warmup", "4", "--num-steps", "4", "--epochs", "1", "--minibatches", "2", "--plot", ""]
    )
    out = capsys.readouterr().out
    assert "simulator=cpu policy=cuda:0" in out
    assert [row[0] for row in table_rows(out)] == ["8"]
