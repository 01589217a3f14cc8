"""Parity gates of swarp.benchmark.ablation: the real stages pass, injected differences fail."""

import dataclasses
import os

import pytest
import torch

from swarp.benchmark import ablation
from swarp.benchmark.ablation import STAGES, ParityError, check_parity, gate_stages, parity_record

N_ENVS, N_AGENTS, N_STEPS = 4, 3, 12


def test_real_stages_pass_their_gates():
    summaries = gate_stages(STAGES, N_ENVS, N_AGENTS, "cpu", N_STEPS)
    assert len(summaries) == len(STAGES)
    # Every stage but the torch -> Warp kernels one reproduces its predecessor bit for bit.
    assert [s for i, s in enumerate(summaries) if STAGES[i].tolerance is None] == [
        "reference",
        "exact",
        "exact",
        "exact",
    ]


def test_parity_rollout_exercises_resets():
    record = parity_record(STAGES[-1], N_ENVS, N_AGENTS, "cpu", N_STEPS)
    done = record["terminated"] | record["truncated"]
    assert done.any(), "no env finished an episode: the gate would not cover the reset path"
    # Final observations are recorded exactly for the finished envs.
    assert (record["final_obs"].abs().sum((2, 3)) > 0).eq(done).all()


def test_gate_fires_when_a_stage_changes_results():
    changed = dataclasses.replace(STAGES[4], options={"shaping_factor": 1.001})
    with pytest.raises(ParityError, match=r"'in-graph reset' differs from 'whole-step graph' in reward"):
        gate_stages((STAGES[3], changed), N_ENVS, N_AGENTS, "cpu", N_STEPS)


def test_exact_gate_rejects_float_rounding():
    # torch reference vs Warp kernels differ in the last bits: an exact gate must catch that.
    strict = dataclasses.replace(STAGES[2], tolerance=None)
    with pytest.raises(ParityError, match="bit for bit"):
        gate_stages((STAGES[1], strict), N_ENVS, N_AGENTS, "cpu", N_STEPS)


def test_tolerance_gate_still_compares_flags_exactly():
    record = parity_record(STAGES[3], N_ENVS, N_AGENTS, "cpu", N_STEPS)
    flipped = {k: v.clone() for k, v in record.items()}
    flipped["terminated"][5, 1] = ~flipped["terminated"][5, 1]
    tolerance = (ablation.FUSED_ATOL, ablation.FUSED_RTOL)
    with pytest.raises(ParityError, match=r"in terminated \(first at step 5"):
        check_parity("a", record, "b", flipped, tolerance)
    nudged = {k: v.clone() for k, v in record.items()}
    nudged["obs"] += 1e-7  # inside the tolerance
    assert check_parity("a", record, "b", nudged, tolerance).startswith("max |diff|")
    nudged["obs"][2, 0, 0, 0] += 1e-3  # outside it
    with pytest.raises(ParityError, match="in obs"):
        check_parity("a", record, "b", nudged, tolerance)


def test_launch_mode_is_restored(monkeypatch):
    monkeypatch.delenv(ablation.LAUNCH_MODE_ENV, raising=False)
    with ablation.launch_mode("eager"):
        assert os.environ[ablation.LAUNCH_MODE_ENV] == "eager"
    assert ablation.LAUNCH_MODE_ENV not in os.environ
    monkeypatch.setenv(ablation.LAUNCH_MODE_ENV, "replay")
    with ablation.launch_mode("eager"):
        assert os.environ[ablation.LAUNCH_MODE_ENV] == "eager"
    assert os.environ[ablation.LAUNCH_MODE_ENV] == "replay"


def test_main_prints_every_stage(capsys):
    argv = ["--device", "cpu", "--envs", "4", "--agents", "3", "--iters", "2", "--repeats", "1"]
    ablation.main(argv + ["--parity-envs", "4", "--parity-steps", "8"])
    out = capsys.readouterr().out
    assert "parity gates passed" in out
    for stage in STAGES:
        assert stage.name in out
    modes = [line.split()[4] for line in out.splitlines() if line.strip().startswith("4  ")]
    assert modes == ["eager", "replay", "replay", "graph", "graph"]
    assert torch.is_grad_enabled()
