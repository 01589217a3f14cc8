"""The compare_vmas and compare_sims entry points end to end, on tiny CPU configs."""

import json
import os

import pytest

from swarp.benchmark import compare_sims, compare_vmas
from swarp.benchmark.compare_sims import matched_options
from swarp.benchmark.peers import CAMAR_CELL_M, camar_grid_cells

TINY = ["--device", "cpu", "--envs", "4", "--agents", "2", "--steps", "2", "--repeats", "1", "--min-block-s", "0"]


@pytest.mark.slow
def test_compare_vmas_runs_three_isolated_simulators(tmp_path, capsys):
    pytest.importorskip("vmas", reason="vmas is not installed: pip install vmas==1.5.2")
    raw, plot = tmp_path / "raw.json", tmp_path / "plot.png"
    compare_vmas.main(TINY + ["--metric", "both", "--json", str(raw), "--plot", str(plot)])
    results = json.loads(raw.read_text())
    assert [(r["sim"], r["variant"], r["status"]) for r in results] == [
        ("vmas", "default", "ok"),
        ("vmas", "lower_bound", "ok"),
        ("swarp", "default", "ok"),
    ]
    assert results[2]["matched_to"] == "vmas" and results[2]["conditions"]["agent_radius_m"] == 0.1
    out = capsys.readouterr().out
    assert "swarp/vmas" in out and "peak memory" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_compare_vmas_rounds_run_the_three_in_turn_and_report_the_ratios_range(tmp_path, capsys):
    pytest.importorskip("vmas", reason="vmas is not installed: pip install vmas==1.5.2")
    raw = tmp_path / "raw.json"
    compare_vmas.main(TINY + ["--metric", "throughput", "--rounds", "2", "--json", str(raw)])
    results = json.loads(raw.read_text())
    assert [(r["sim"], r["variant"]) for r in results] == [
        ("vmas", "default"),
        ("vmas", "lower_bound"),
        ("swarp", "default"),
    ] * 2
    out = capsys.readouterr().out
    assert "median of 2 rounds" in out and "swarp/vmas range" in out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["4", "2"])
    rates = [r["env_steps_per_s"] for r in results]
    ratios = sorted(rates[2 + 3 * i] / rates[3 * i] for i in range(2))
    assert f"{ratios[0]:.2f}-{ratios[1]:.2f}" in row


def test_compare_vmas_refuses_zero_rounds():
    with pytest.raises(SystemExit):
        compare_vmas.main(TINY + ["--rounds", "0"])


@pytest.mark.slow
def test_compare_sims_pairs_each_peer_with_a_matched_swarp_run(tmp_path, capsys):
    pytest.importorskip("vmas", reason="vmas is not installed: pip install vmas==1.5.2")
    raw = tmp_path / "raw.json"
    compare_sims.main(TINY + ["--sims", "swarp", "vmas", "--json", str(raw)])
    results = json.loads(raw.read_text())
    assert [(r["sim"], r["status"], r.get("matched_to")) for r in results] == [
        ("vmas", "ok", None),
        ("swarp", "ok", "vmas"),
    ]
    assert "== vmas vs swarp (task of vmas)" in capsys.readouterr().out


def test_compare_sims_needs_a_peer():
    with pytest.raises(SystemExit):
        compare_sims.main(TINY + ["--sims", "swarp"])


def test_matched_tasks_follow_the_peers():
    # CAMAR: same arena side, 3 substeps (frameskip 2), 3 observed neighbors within its 0.3 m window.
    camar16 = matched_options("camar", 16)
    assert camar16["world_size"] == pytest.approx(camar_grid_cells(16) * CAMAR_CELL_M / 2) == pytest.approx(1.2)
    assert (camar16["substeps"], camar16["obs_neighbors"], camar16["auto_reset"]) == (3, 3, False)
    # JaxMARL MPE: every other agent observed, 25-step episodes reset in the step.
    mpe16 = matched_options("jaxmarl", 16)
    assert (mpe16["obs_neighbors"], mpe16["max_steps"], mpe16["auto_reset"]) == (15, 25, True)
    assert matched_options("vmas", 4)["substeps"] == 2
    with pytest.raises(ValueError, match="no matched swarp task"):
        matched_options("brax", 4)


@pytest.mark.slow
def test_a_peer_that_fails_keeps_its_row_and_the_table_prints(tmp_path, capsys):
    """A worker that dies (here: an interpreter that exits at once) is reported as an error with
    its config, and the comparison still prints every table instead of stopping."""
    raw = tmp_path / "raw.json"
    compare_sims.main(TINY + ["--sims", "swarp", "jaxmarl", "--python", "jaxmarl=/bin/false", "--json", str(raw)])
    results = json.loads(raw.read_text())
    peer = [r for r in results if r["sim"] == "jaxmarl"]
    assert peer and all(r["status"] == "error" and "n_envs" in r and "n_agents" in r for r in peer)
    out = capsys.readouterr().out
    assert "== jaxmarl vs swarp (task of jaxmarl)" in out


def test_jax_peers_keep_the_cpu_backend_where_jax_is_restricted_to_the_gpu():
    from swarp.benchmark.peers import worker_environment

    assert worker_environment("camar", {"JAX_PLATFORMS": "cuda"})["JAX_PLATFORMS"] == "cuda,cpu"
    assert worker_environment("jaxmarl", {"JAX_PLATFORMS": "cuda,cpu"})["JAX_PLATFORMS"] == "cuda,cpu"
    assert "JAX_PLATFORMS" not in worker_environment("camar", {})  # unset: JAX offers every backend
    assert worker_environment("vmas", {"JAX_PLATFORMS": "cuda"})["JAX_PLATFORMS"] == "cuda"
    assert worker_environment("swarp", {"PYTHONPATH": "/x"})["PYTHONPATH"].endswith(os.pathsep + "/x")


@pytest.mark.parametrize("device, platforms", [("cuda", "cuda,cpu"), ("cpu", "cpu")])
def test_a_jax_worker_pins_jax_to_its_device_and_keeps_the_cpu_backend(monkeypatch, device, platforms):
    """Inside a JAX peer's worker: a GPU run keeps the CPU backend beside CUDA (CAMAR builds its
    maps on ``jax.devices("cpu")`` at import; the H200 run failed there with ``cuda`` alone)."""
    from swarp.benchmark import peers

    def no_such_module(name):
        raise ImportError(f"no {name} here")

    monkeypatch.setenv("JAX_PLATFORMS", "unset-by-test")
    monkeypatch.setattr("importlib.import_module", no_such_module)
    with pytest.raises(peers.PeerUnavailable, match="camar"):
        peers._import_jax_peer(peers.BenchConfig("camar", n_envs=1, n_agents=2, device=device), "camar")
    assert os.environ["JAX_PLATFORMS"] == platforms
