"""The CI-sized soak of every scenario (``swarp.benchmark.soak``; the long runs are by hand, see
docs/reliability.md)."""

import pytest

import swarp
from swarp.benchmark import soak

#: CI-sized: a few episodes of every env, auto-resets included.
STEPS, ENVS = 1000, 16


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_random_in_bounds_actions_keep_every_scenario_finite_and_in_bounds(name):
    result = soak.soak(name, STEPS, ENVS, check_every=250)
    assert result.failure is None, result.failure
    assert result.steps == STEPS and result.episodes > 0


def test_a_soak_reports_the_window_a_failure_happened_in(monkeypatch):
    real = soak._bounds
    monkeypatch.setattr(soak, "_bounds", lambda env, spec: (*real(env, spec)[:2], -10.0))  # any centre "outside"
    result = soak.soak("navigation", 30, 4, check_every=10)
    assert result.failure is not None and result.failure.startswith("steps 1-10:")
    assert result.steps == 10


def test_the_command_line_fails_on_a_failed_soak(monkeypatch, capsys):
    real = soak._bounds
    monkeypatch.setattr(soak, "_bounds", lambda env, spec: (*real(env, spec)[:2], -10.0))
    with pytest.raises(SystemExit):
        soak.main(["--device", "cpu", "--scenarios", "navigation", "--steps", "5", "--envs", "2", "--check-every", "5"])
    assert "outside the bounds" in capsys.readouterr().out
