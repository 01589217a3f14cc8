"""Simulator adapters of swarp.benchmark.peers, each run for real in its own subprocess (tiny configs).

JaxMARL and CAMAR are not swarp dependencies: their tests run under the interpreter named by
``SWARP_PEER_PYTHON`` (a virtual environment with them installed, see docs/benchmarks.md), or this
one, and skip with the reason when the peer is not importable there.
"""

import json
import os
import subprocess
import sys

import pytest

from swarp.benchmark.compare_sims import matched_options
from swarp.benchmark.peers import BenchConfig, parse_pythons, plot_env_steps, run_isolated

TINY = {"n_envs": 4, "steps": 2, "repeats": 2, "warmup": 1}
PEER_PYTHON = os.environ.get("SWARP_PEER_PYTHON", sys.executable)


def check_ok(result: dict, sim: str, n_agents: int) -> None:
    assert result["status"] == "ok", result
    assert result["sim"] == sim and result["n_agents"] == n_agents and result["n_envs"] == TINY["n_envs"]
    assert len(result["samples"]) == TINY["repeats"] and all(s > 0 for s in result["samples"])
    assert all(n >= TINY["steps"] and n % TINY["steps"] == 0 for n in result["timed_steps"])
    assert min(result["samples"]) <= result["seconds_per_step"] <= max(result["samples"])
    assert result["env_steps_per_s"] == pytest.approx(TINY["n_envs"] / result["seconds_per_step"])
    assert result["agent_steps_per_s"] == pytest.approx(result["env_steps_per_s"] * n_agents)
    assert result["memory"]["peak_bytes"] > 0 and result["memory"]["source"]
    assert set(result["conditions"]) == {"arena", "agent_radius_m", "observation", "step"}


def peer_importable(module: str) -> bool:
    probe = subprocess.run([PEER_PYTHON, "-c", f"import {module}"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.slow
def test_swarp_adapter_runs_the_matched_task():
    options = matched_options("camar", 3)
    result = run_isolated(BenchConfig("swarp", n_agents=3, options=options, **TINY))
    check_ok(result, "swarp", 3)
    assert result["conditions"]["agent_radius_m"] == 0.05
    assert result["conditions"]["arena"].startswith("[-1, 1]^2")  # 5 CAMAR cells of 0.4 m
    assert result["conditions"]["step"].startswith("3 physics substep")
    assert "no reset" in result["conditions"]["step"]
    assert result["memory"]["source"] == "peak RSS" and result["memory"]["added_bytes"] >= 0


@pytest.mark.parametrize("variant", ["default", "lower_bound"])
def test_vmas_adapter_runs(variant):
    pytest.importorskip("vmas", reason="vmas is not installed: pip install vmas==1.5.2")
    result = run_isolated(BenchConfig("vmas", n_agents=2, variant=variant, **TINY))
    check_ok(result, "vmas", 2)
    assert result["variant"] == variant
    assert ("lidar (" in result["conditions"]["observation"]) == (variant == "default")
    assert result["version"].startswith("vmas 1.5.2")


@pytest.mark.parametrize("sim", ["jaxmarl", "camar"])
def test_jax_peer_adapter_runs(sim):
    if not peer_importable(sim):
        pytest.skip(f"{sim} is not importable by {PEER_PYTHON}; set SWARP_PEER_PYTHON to a venv that has it")
    result = run_isolated(BenchConfig(sim, n_agents=3, **TINY), python=PEER_PYTHON)
    check_ok(result, sim, 3)
    assert result["version"].startswith(f"{sim} ") and ", jax " in result["version"]


def test_missing_peer_is_skipped_with_the_install_command(tmp_path, monkeypatch):
    # A ``jax`` package that refuses to import, ahead of any real one on the worker's path.
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("raise ImportError('jax hidden by the test')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for sim in ("jaxmarl", "camar"):
        result = run_isolated(BenchConfig(sim, n_agents=3, **TINY))
        assert result["status"] == "skipped", result
        assert "jax hidden by the test" in result["reason"] and "pip install" in result["reason"]


def test_missing_interpreter_is_skipped():
    result = run_isolated(BenchConfig("camar", n_agents=3, **TINY), python="/nonexistent/venv/bin/python")
    assert result["status"] == "skipped" and "no interpreter" in result["reason"]


@pytest.mark.slow
def test_failing_worker_is_reported_as_an_error():
    result = run_isolated(BenchConfig("swarp", n_agents=3, options={"agent_radius": -1.0}, **TINY))
    assert result["status"] == "error"
    assert "agent_radius" in result["reason"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sim": "mujoco"},
        {"n_envs": 0},
        {"n_agents": 1.5},
        {"device": "tpu"},
        {"variant": "fast"},
        {"warmup": -1},
    ],
)
def test_bench_config_rejects_bad_input(kwargs):
    args = {"sim": "swarp", "n_envs": 4, "n_agents": 3} | kwargs
    with pytest.raises(ValueError):
        BenchConfig(**args)


def test_bench_config_round_trips_through_json():
    config = BenchConfig("swarp", 8, 3, options={"substeps": 2})
    assert BenchConfig(**json.loads(config.to_json())) == config


def test_parse_pythons():
    assert parse_pythons(["jaxmarl=/v/j/bin/python", "camar=/v/c/bin/python"]) == {
        "jaxmarl": "/v/j/bin/python",
        "camar": "/v/c/bin/python",
    }
    for bad in (["jaxmarl"], ["brax=/x"], ["camar="]):
        with pytest.raises(ValueError, match="SIM=PATH"):
            parse_pythons(bad)


def test_plot_writes_a_png(tmp_path):
    results = [
        {"status": "ok", "sim": sim, "variant": "default", "n_envs": n, "n_agents": 3, "env_steps_per_s": rate * n}
        for sim, rate in (("swarp", 100.0), ("vmas", 1.0))
        for n in (64, 256)
    ] + [{"status": "skipped", "sim": "camar", "variant": "default", "reason": "not installed"}]
    path = tmp_path / "plot.png"
    plot_env_steps(results, str(path), "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no successful results"):
        plot_env_steps(results[-1:], str(tmp_path / "empty.png"), "test")


@pytest.mark.slow
def test_worker_pinned_to_one_core_reports_it():
    result = run_isolated(BenchConfig("swarp", n_agents=2, cpu_threads=1, min_block_s=0.05, **TINY))
    check_ok(result, "swarp", 2)
    assert result["cpu_threads"] == 1
    # Each timed block repeated its 2 steps until 0.05 s had passed.
    for seconds, steps in zip(result["samples"], result["timed_steps"], strict=True):
        assert steps % 2 == 0 and seconds * steps >= 0.05
