"""``python -m swarp.benchmark.throughput``: rows for every requested cell, scenario options passed through."""

import argparse

import pytest

from swarp.benchmark import throughput
from swarp.benchmark.common import parse_option


def test_parse_option_reads_literals_and_bare_words():
    assert parse_option("max_neighbors=8") == ("max_neighbors", 8)
    assert parse_option("obs_range=0.25") == ("obs_range", 0.25)
    assert parse_option("neighbor_method=grid") == ("neighbor_method", "grid")
    with pytest.raises(argparse.ArgumentTypeError, match="key=value"):
        parse_option("grid")


def test_a_small_cpu_grid_with_a_scenario_option(capsys):
    argv = ["--device", "cpu", "--envs", "4", "8", "--agents", "3", "--iters", "2", "--repeats", "1"]
    throughput.main(argv + ["--option", "neighbor_method=grid", "--option", "max_neighbors=4"])
    out = capsys.readouterr().out
    assert "neighbor_method='grid' max_neighbors=4" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("4 ", "8 "))]
    assert [(row[0], row[1]) for row in rows] == [("4", "3"), ("8", "3")]
    assert all(float(row[6].replace(",", "")) > 0 for row in rows)  # env-steps/s


def test_an_unknown_scenario_option_fails_clearly():
    with pytest.raises((TypeError, ValueError), match="neighbour_method"):
        throughput.main(["--device", "cpu", "--envs", "4", "--agents", "3", "--option", "neighbour_method=grid"])
