"""swarp.benchmark.plan_ab: an interleaved A/B of plan fields, gated on equal observations."""

import pytest

from swarp.benchmark import plan_ab

ARGS = ["--device", "cpu", "--envs", "8", "--agents", "3", "--rounds", "2", "--iters", "2", "--warmup", "3"]


def test_it_times_both_plans_after_their_observations_agree(capsys):
    plan_ab.main(["--a", "fused_substep=False", "--b", "fused_substep=True", *ARGS])
    out = capsys.readouterr().out
    assert "A={'fused_substep': False} B={'fused_substep': True}" in out
    row = out.strip().splitlines()[-1].split()
    assert row[:2] == ["8", "3"] and float(row[2]) > 0 and float(row[4]) > 0


def test_the_gate_refuses_to_time_envs_that_compute_different_things(monkeypatch):
    original, seeds = plan_ab.make_env, iter((0, 1))

    def make_env(*args, **kwargs):  # B's env gets another seed: other observations
        return original(*args, **kwargs, seed=next(seeds))

    monkeypatch.setattr(plan_ab, "make_env", make_env)
    with pytest.raises(RuntimeError, match="8 x 3: A's and B's observations differ after the warm-up"):
        plan_ab.main(["--b", "fused_substep=True", *ARGS])


def test_it_needs_plan_fields():
    with pytest.raises(SystemExit):
        plan_ab.main(ARGS)
