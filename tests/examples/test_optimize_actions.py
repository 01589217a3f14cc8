"""``examples/optimize_actions.py`` on a small instance: crossing agents reach their goals with no
collision, having learned to yield from the contact gradients alone."""

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "optimize_actions.py"


def load_example():
    spec = importlib.util.spec_from_file_location("optimize_actions", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_crossing_agents_reach_their_goals_without_collisions():
    example = load_example()
    args = example.Args(n_agents=4, steps=25, iters=60, log_every=0, plot="")
    result = example.optimize(args)
    assert result.initial_collisions > 0, "the straight-line plan must run the agents into each other"
    assert result.reached, f"distance to goal {result.final_distance.tolist()} m"
    assert result.collisions == 0, f"min separation {result.min_separation:.3f} m"
    assert result.losses[-1] < 0.1 * result.losses[0]


def test_main_prints_the_loss_curve_and_the_verdict(capsys):
    result = load_example().main(["--n-agents", "2", "--steps", "10", "--iters", "3", "--log-every", "1", "--plot", ""])
    out = capsys.readouterr().out
    assert out.count("loss") >= 3 and "reached goals:" in out
    assert len(result.losses) == 3
