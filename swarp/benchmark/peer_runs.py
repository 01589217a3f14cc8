"""The driver side of the cross-simulator benchmarks: ``run_isolated`` runs one ``BenchConfig`` in a
fresh subprocess (``peers.py`` run by path as the worker, under the interpreter given for its
simulator), and ``parse_pythons``, ``label`` and ``plot_env_steps`` turn the command line and the
results into tables and plots. ``swarp.benchmark.peers`` also answers to these names."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from swarp.benchmark.peers import DEFAULT_TIMEOUT_S, RESULT_PREFIX, SIMULATORS, BenchConfig

#: The worker script: ``peers.py`` beside this module, run by path (it imports only the standard library).
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers.py")


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_environment(sim: str, environ) -> dict[str, str]:
    """The environment variables of a worker for ``sim``: ``environ`` with this repository first on
    PYTHONPATH and, for the JAX peers, JAX's CPU backend kept available: CAMAR builds its maps on
    the CPU device at import, and a machine that restricts JAX to its GPU (``JAX_PLATFORMS=cuda``)
    would make that import fail."""
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_repo_root(), env.get("PYTHONPATH", "")) if p)
    platforms = env.get("JAX_PLATFORMS", "")
    if sim in ("jaxmarl", "camar") and platforms and "cpu" not in platforms.split(","):
        env["JAX_PLATFORMS"] = platforms + ",cpu"
    return env


def run_isolated(config: BenchConfig, python: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Run ``config`` in a fresh subprocess (interpreter ``python``, default this one); return its result.

    The result is the worker's JSON: ``status`` ``"ok"`` (timings, memory, conditions),
    ``"skipped"`` (the peer is not importable there: ``reason`` says why and how to install it) or
    ``"error"`` (the worker failed: ``reason`` holds the end of its output).
    """
    env = worker_environment(config.sim, os.environ)
    command = [python or sys.executable, WORKER_SCRIPT, "--worker", config.to_json()]
    # Every result names its config, so a run that failed still fills its row of a table.
    failed = {"sim": config.sim, "variant": config.variant, "n_envs": config.n_envs, "n_agents": config.n_agents}
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except FileNotFoundError as exc:
        return {"status": "skipped", **failed, "reason": f"no interpreter: {exc}"}
    except subprocess.TimeoutExpired:
        return {"status": "error", **failed, "reason": f"timed out ({timeout_s} s)"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return {**failed, **json.loads(line[len(RESULT_PREFIX) :])}
    tail = (proc.stdout + proc.stderr)[-2000:]
    return {"status": "error", **failed, "reason": f"exit {proc.returncode}: {tail}"}


def parse_pythons(items: list[str] | None) -> dict[str, str]:
    """``["jaxmarl=/venvs/jaxmarl/bin/python", ...]`` -> ``{"jaxmarl": "/venvs/..."}``."""
    pythons = {}
    for item in items or []:
        sim, sep, path = item.partition("=")
        if not sep or sim not in SIMULATORS or not path:
            raise ValueError(f"--python takes SIM=PATH with SIM in {SIMULATORS}, got {item!r}")
        pythons[sim] = path
    return pythons


def label(result: dict) -> str:
    """Row label of a result: the simulator, plus the variant or the peer a swarp run is matched to."""
    name = result["sim"]
    if result.get("matched_to"):
        name += f" (task of {result['matched_to']})"
    if result.get("variant", "default") != "default":
        name += f" {result['variant']}"
    return name


def plot_env_steps(results: list[dict], path: str, title: str) -> None:
    """Write a PNG of env-steps/s against n_envs (log-log), one line per simulator and n_agents."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for r in results:
        if r["status"] == "ok":
            series.setdefault((label(r), r["n_agents"]), []).append((r["n_envs"], r["env_steps_per_s"]))
    if not series:
        raise ValueError("no successful results to plot")
    fig, ax = plt.subplots(figsize=(10, 5))
    for (name, n_agents), points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{name}, {n_agents} agents")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n_envs")
    ax.set_ylabel("env-steps/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
