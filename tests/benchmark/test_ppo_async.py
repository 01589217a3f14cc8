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
    table = table_rows(out)
    assert [row[0] for row in table] == ["4", "8"]
    assert (tmp_path / "rates.png").stat().st_size > 1000
    written = json.loads((tmp_path / "rates.json").read_text())
    raw = written["rates"]
    assert set(raw) == {"4", "8"}
    assert set(raw["8"]) == {"env", "env send/recv", "step", "send/recv", "pool"}
    for rates in raw.values():
        assert all(len(reps) == 2 and min(reps) > 0 for reps in rates.values())
    # The checks are on the unrounded rows (the JSON's), recomputed from the repetitions: a loaded
    # machine moves the timings, never these definitions. The printed table must show those rows,
    # a small but nonzero ratio (the env share of a tiny env under a whole PPO loop) included.
    assert [row[0] for row in written["rows"]] == [4, 8]
    for row, shown in zip(written["rows"], table, strict=True):
        assert len(row) == len(shown) == 12  # n, step +-, send/recv +- x, pool +- x, share, ceiling, cost
        rates = raw[str(row[0])]
        mean = {mode: ppo_async.summarise(reps)[0] for mode, reps in rates.items()}
        assert row[1] == pytest.approx(mean["step"], rel=1e-12)
        for column, mode in ((3, "send/recv"), (6, "pool")):
            if mode in rates:
                assert row[column] == pytest.approx(mean[mode], rel=1e-12)
                speedup = ppo_async.paired_speedup(rates[mode], rates["step"])
                assert row[column + 2] == pytest.approx(speedup, rel=1e-12)
            else:
                assert all(v != v for v in row[column : column + 3])
        assert all(v > 0 for v in row[1:9] if v == v)
        share, ceiling, cost = row[-3:]
        # Timing ratios of a few microsecond steps: only their definitions are checked (a noisy
        # machine can time the env alone slower than the loop).
        assert share == pytest.approx(mean["step"] / mean["env"], rel=1e-12) and share > 0
        assert ceiling == pytest.approx(1 / max(share, 1 - share), rel=1e-12)
        assert cost == pytest.approx(mean["env"] / mean["env send/recv"], rel=1e-12) and cost > 0
        for column, (value, cell) in enumerate(zip(row, shown, strict=True)):
            displayed = float(cell.replace(",", ""))
            if value != value:
                assert displayed != displayed
                continue
            assert displayed == pytest.approx(value, abs=0.5 if abs(value) >= 1000 else 0.005)
            if column >= 9:  # the ratios keep their significant digits: a positive share never reads 0
                assert displayed > 0 and displayed == pytest.approx(value, rel=0.05)


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
