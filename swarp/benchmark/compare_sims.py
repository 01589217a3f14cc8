"""swarp against VMAS, JaxMARL and CAMAR on matched obstacle-free tasks, one process per measurement.

    python -m swarp.benchmark.compare_sims                                   # every simulator found
    python -m swarp.benchmark.compare_sims --sims swarp jaxmarl --python jaxmarl=/venvs/jaxmarl/bin/python
    python -m swarp.benchmark.compare_sims --envs 1024 4096 16384 --agents 3 16 --plot sims.png --json sims.json

For every peer in ``--sims`` and every (n_envs, n_agents), the peer and a swarp navigation task
matched to it each run in a fresh subprocess (``swarp.benchmark.peers``), under the interpreter
given by ``--python SIM=PATH`` (a peer's own virtual environment; default: this interpreter).
A peer that is not importable there is reported as skipped, with the reason.

The matched swarp tasks (``matched_options``), obstacle-free like the peers':

* VMAS navigation: agent radius 0.1 m, 2 physics substeps, no reset in step (VMAS has none),
  arena [-1, 1]^2 (VMAS spawns there; its world is unbounded); VMAS with collisions and lidar.
* JaxMARL MPE simple_spread: radius 0.15 m, 1 physics step, every other agent observed (MPE
  observes all agents and landmarks), auto-reset with 25-step episodes (JaxMARL's ``step``
  resets finished envs; its episodes last 25 steps).
* CAMAR open map: the same arena side (``cells`` x 0.4 m), radius 0.05 m, 3 physics substeps
  (CAMAR's ``frameskip=2``), the 3 nearest agents within 0.3 m observed, no reset in step.

Each simulator's measured conditions (arena, observation, what a step includes) are printed under
its table. Timing: median over ``--repeats`` blocks of ``--steps`` steps after a warm-up (JAX
peers: one untimed compile call of the same scan).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import torch

from swarp.benchmark.common import print_table
from swarp.benchmark.peers import (
    CAMAR_CELL_M,
    MPE_AGENT_RADIUS_M,
    SIMULATORS,
    BenchConfig,
    camar_grid_cells,
    label,
    parse_pythons,
    plot_env_steps,
    run_isolated,
)

PEERS = ("vmas", "jaxmarl", "camar")
#: JaxMARL MPE episode length [steps] (its default ``max_steps``).
MPE_MAX_STEPS = 25
#: CAMAR's observation window [m] (``camar_v0(window=0.3)``) and observed neighbors (``max_obs``).
CAMAR_WINDOW_M = 0.3
CAMAR_MAX_OBS = 3


def matched_options(peer: str, n_agents: int) -> dict:
    """Navigation options (plus ``auto_reset``/``max_steps``) of the swarp task matched to ``peer``."""
    if peer == "vmas":
        return {"world_size": 1.0, "agent_radius": 0.1, "substeps": 2, "auto_reset": False}
    if peer == "jaxmarl":
        others = max(n_agents - 1, 0)
        return {
            "world_size": 1.0,
            "agent_radius": MPE_AGENT_RADIUS_M,
            "substeps": 1,
            "obs_neighbors": others,
            "max_neighbors": max(others, 1),
            # The arena's diagonal: every other agent is always in range, as in MPE.
            "obs_range": 2.0 * math.sqrt(2.0),
            "auto_reset": True,
            "max_steps": MPE_MAX_STEPS,
        }
    if peer == "camar":
        return {
            "world_size": camar_grid_cells(n_agents) * CAMAR_CELL_M / 2.0,
            "agent_radius": 0.05,
            "substeps": 3,
            "obs_neighbors": CAMAR_MAX_OBS,
            "obs_range": CAMAR_WINDOW_M,
            "auto_reset": False,
        }
    raise ValueError(f"no matched swarp task for {peer!r}; peers are {PEERS}")


def run_pair(peer_config: BenchConfig, with_swarp: bool, pythons: dict[str, str]) -> list[dict]:
    """Run a peer config and, with ``with_swarp``, the swarp task matched to it; each isolated."""
    results = [run_isolated(peer_config, pythons.get(peer_config.sim))]
    if with_swarp:
        options = matched_options(peer_config.sim, peer_config.n_agents)
        swarp_config = dataclasses.replace(peer_config, sim="swarp", variant="default", options=options)
        result = run_isolated(swarp_config, pythons.get("swarp"))
        result["matched_to"] = peer_config.sim
        results.append(result)
    for r in results:
        # The rate goes out as each run ends, so a run cut short still leaves its numbers.
        status = (
            f"ok, {r['env_steps_per_s']:,.0f} env-steps/s"
            if r["status"] == "ok"
            else f"{r['status']}: {r.get('reason', '')}"
        )
        print(f"  {label(r)} {peer_config.n_envs}x{peer_config.n_agents}: {status}", flush=True)
    return results


def memory_mib(result: dict) -> str:
    """Peak memory [MiB] of a result; on the CPU also what was added after the imports."""
    if result["status"] != "ok":
        return "n/a"
    memory = result["memory"]
    text = f"{memory['peak_bytes'] / 2**20:,.0f}"
    if "added_bytes" in memory:
        text += f" (+{memory['added_bytes'] / 2**20:,.0f})"
    return text


def env_steps_rate(result: dict) -> float:
    """env-steps/s of a result (NaN when it did not run)."""
    return result["env_steps_per_s"] if result["status"] == "ok" else math.nan


def print_pairs(peer: str, pairs: list[tuple[dict, dict | None]], memory: bool = True, rates: bool = True) -> None:
    """One table for ``peer``: its env-steps/s and peak memory beside the matched swarp run's."""
    rows = []
    for peer_result, swarp_result in pairs:
        row = [peer_result["n_envs"], peer_result["n_agents"]]
        if rates:
            row += [env_steps_rate(peer_result)]
            if swarp_result is not None:
                row += [env_steps_rate(swarp_result), env_steps_rate(swarp_result) / env_steps_rate(peer_result)]
        if memory:
            row += [memory_mib(peer_result)] + ([memory_mib(swarp_result)] if swarp_result is not None else [])
        rows.append(row)
    headers = ["n_envs", "n_agents"]
    with_swarp = pairs[0][1] is not None
    if rates:
        headers += [f"{peer} env-steps/s"] + (["swarp env-steps/s", "swarp/peer"] if with_swarp else [])
    if memory:
        headers += [f"{peer} peak MiB"] + (["swarp peak MiB"] if with_swarp else [])
    print(f"\n== {peer} vs swarp (task of {peer})" if with_swarp else f"\n== {peer}")
    print_table(headers, rows)
    print_conditions([r for pair in pairs for r in pair if r is not None])


def print_conditions(results: list[dict]) -> None:
    """Print each simulator's measured conditions and version once."""
    seen = set()
    for r in results:
        if r["status"] != "ok":
            print(f"  {label(r)}: {r['status']}: {r.get('reason', '')}")
            continue
        key = (label(r), r["n_agents"])
        if key in seen:
            continue
        seen.add(key)
        c = r["conditions"]
        print(
            f"  {label(r)}, {r['n_agents']} agents [{r['version']}; memory: {r['memory']['source']}]: "
            f"arena {c['arena']}; agent radius {c['agent_radius_m']:g} m; obs: {c['observation']}; "
            f"step: {c['step']}"
        )


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Grid, timing, output and interpreter options shared with ``compare_vmas``."""
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    parser.add_argument("--envs", type=int, nargs="+", default=None)
    parser.add_argument("--agents", type=int, nargs="+", default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (the median is reported)")
    parser.add_argument(
        "--min-block-s", type=float, default=0.5, help="a timed block repeats --steps until at least this long [s]"
    )
    parser.add_argument(
        "--cpu-threads", type=int, default=0, help="pin each worker to this many cores (0: framework defaults)"
    )
    parser.add_argument("--python", nargs="+", default=None, metavar="SIM=PATH", help="interpreter per simulator")
    parser.add_argument("--plot", default=None, help="write a PNG of env-steps/s vs n_envs here")
    parser.add_argument("--json", default=None, help="write every raw result here")


def resolve_grid(args) -> tuple[str, list[int], list[int], int]:
    """``(device, envs, agents, steps)`` from the arguments and the device's defaults."""
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device == "cuda"
    envs = args.envs or ([1024, 4096, 16384] if cuda else [64, 256, 1024])
    agents = args.agents or [3, 16]
    steps = args.steps or (100 if cuda else 10)
    return device, envs, agents, steps


def write_outputs(results: list[dict], args, title: str) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"raw results: {args.json}")
    if args.plot:
        plot_env_steps(results, args.plot, title)
        print(f"plot: {args.plot}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", nargs="+", choices=SIMULATORS, default=list(SIMULATORS))
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    device, envs, agents, steps = resolve_grid(args)
    if args.sims == ["swarp"]:
        parser.error("--sims swarp alone compares nothing: add vmas, jaxmarl and/or camar")
    pythons = parse_pythons(args.python)
    with_swarp = "swarp" in args.sims
    results = []
    print(f"device={device} steps={steps} repeats={args.repeats} cpu_threads={args.cpu_threads}", flush=True)
    for peer in [s for s in args.sims if s != "swarp"]:
        pairs = []
        for n_agents in agents:
            for n_envs in envs:
                config = BenchConfig(
                    peer,
                    n_envs,
                    n_agents,
                    device,
                    steps,
                    args.repeats,
                    min_block_s=args.min_block_s,
                    cpu_threads=args.cpu_threads,
                )
                pair = run_pair(config, with_swarp, pythons)
                results += pair
                pairs.append((pair[0], pair[1] if with_swarp else None))
        print_pairs(peer, pairs)
    write_outputs(results, args, f"env-steps/s, {device}, matched obstacle-free tasks")


if __name__ == "__main__":
    main()
