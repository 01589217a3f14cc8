"""The results table of every scenario: train, tabulate, animate.

``python -m swarp.train.results run OUT [--scenarios S ...] [--algorithms mappo ippo] [--seeds 0 1 2]
[--max-seconds 300] [--target 0.95] [--parallel 1]`` trains each (scenario, algorithm) with its task
record, the seeds batched in one process (``python -m swarp.train``), ``parallel`` processes at a
time on one device, each stopping when every seed's greedy evaluation reaches ``target`` or after
``max-seconds`` of training. Runs land in ``OUT/<scenario>/<algorithm>/``; ``--resume`` skips the
pairs already scored there, so one table can be trained over several calls.

``python -m swarp.train.results table OUT [--markdown FILE] [--figure PNG] [--threshold 0.9]``
writes the table (one row per run: greedy success on fresh episodes with its 95% interval, mean
return, the scripted controller's and random play's success on the same episodes, env-steps and
training wall-clock to ``threshold``) and one figure of every learning curve.

``python -m swarp.train.results gifs OUT --dir DIR`` writes an animated GIF of each scenario's
best run (CPU; the ``viz`` extra).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from swarp.scenarios.framework.base import import_scenario_modules, scenario_names
from swarp.train.cli import fraction, positive_float, positive_int, seed

#: The bar of "solved": greedy success on fresh episodes.
SOLVED = 0.90


@dataclass
class Run:
    """One trained run, read back from its folder.

    Attributes:
        scenario, algorithm, seed: What was trained.
        score: ``score.json`` (``policy``, ``random``, optionally ``scripted``; see ``evaluate``).
        curve: ``(env-steps, training seconds, greedy success)`` of each evaluation during training.
        frames, seconds: Env-steps and training wall-clock [s] of the whole run.
        path: The run's folder.
    """

    scenario: str
    algorithm: str
    seed: int
    score: dict
    curve: list[tuple[int, float, float]]
    frames: int
    seconds: float
    path: Path

    def to_threshold(self, threshold: float) -> tuple[int, float] | None:
        """``(env-steps, seconds)`` of the first evaluation at or above ``threshold`` (None: never)."""
        return next(((f, s) for f, s, success in self.curve if success >= threshold), None)


def _scored(folder: Path) -> int:
    """Runs under ``folder`` (one (scenario, algorithm)) that finished with a ``score.json``."""
    return len(list(folder.glob("*/score.json")))


def run_all(out: Path, scenarios, algorithms, seeds, max_seconds: float, target: float, parallel: int,
            device: str | None, extra: list[str], resume: bool = False) -> list[int]:  # fmt: skip
    """Train every (scenario, algorithm) in subprocesses, ``parallel`` at a time (with ``resume``,
    not those whose folder already holds a score per seed); returns their exit codes."""

    def one(job: tuple[str, str]) -> int:
        scenario, algorithm = job
        folder = out / scenario / algorithm
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "swarp.train", scenario, "--algorithm", algorithm,
                   "--seeds", *map(str, seeds), "--target-success", str(target), "--max-seconds", str(max_seconds),
                   "--total-steps", str(10**12), "--eval-every", "5", "--no-progress", "--run-dir", str(folder),
                   *(["--device", device] if device else []), *extra]  # fmt: skip
        with open(folder / "log", "w") as log:
            code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
        print(f"{scenario} {algorithm}: exit {code}", flush=True)
        return code

    jobs = [(s, a) for s in scenarios for a in algorithms if not (resume and _scored(out / s / a) >= len(seeds))]
    if resume:
        print(f"{len(scenarios) * len(algorithms) - len(jobs)} of {len(scenarios) * len(algorithms)} already scored",
              flush=True)  # fmt: skip
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(one, jobs))


def load_runs(out: Path) -> list[Run]:
    """Every run under ``out`` that has a ``score.json``, in scenario, algorithm, seed order."""
    runs = []
    for score_path in sorted(out.glob("*/*/*/score.json")):
        folder = score_path.parent
        config = json.loads((folder / "config.json").read_text())
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line]
        scenario, seed = folder.name.split("__")[:2]
        curve = [(r["frames"], r["train_seconds"], r["eval/success"]) for r in rows if "eval/success" in r]
        runs.append(Run(scenario, config["algorithm"], int(seed), json.loads(score_path.read_text()), curve,
                        rows[-1]["frames"], rows[-1]["train_seconds"], folder))  # fmt: skip
    return sorted(runs, key=lambda r: (r.scenario, r.algorithm, r.seed))


def _rate(entry: dict | None) -> str:
    if entry is None:
        return "none"
    return f"{entry['success']:.3f} [{entry['success_low']:.3f}, {entry['success_high']:.3f}]"


def markdown_table(runs: list[Run], threshold: float = SOLVED) -> str:
    """The table, one row per run (Markdown)."""
    lines = [
        f"| scenario | algorithm | seed | greedy success [95% CI] | return | scripted | random | "
        f"env-steps to {threshold:.2f} | wall-clock to {threshold:.2f} | trained |",
        "| --- | --- | ---: | --- | ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for run in runs:
        policy, reached = run.score["policy"], run.to_threshold(threshold)
        steps, seconds = (f"{reached[0] / 1e6:.1f} M", f"{reached[1]:.0f} s") if reached else ("not reached", "-")
        lines.append(
            f"| {run.scenario} | {run.algorithm} | {run.seed} | {_rate(policy)} | {policy['return']:.2f} | "
            f"{_rate(run.score.get('scripted'))} | {_rate(run.score['random'])} | {steps} | {seconds} | "
            f"{run.frames / 1e6:.1f} M, {run.seconds:.0f} s |"
        )
    return "\n".join(lines) + "\n"


def summary_table(runs: list[Run], threshold: float = SOLVED) -> str:
    """One row per (scenario, algorithm): seeds at or above ``threshold``, the lowest greedy success,
    the slowest seed's wall-clock to ``threshold`` (Markdown)."""
    lines = [
        f"| scenario | algorithm | seeds >= {threshold:.2f} | lowest greedy success | slowest to {threshold:.2f} | "
        "scripted | random |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.scenario, run.algorithm), []).append(run)
    for (scenario, algorithm), group in groups.items():
        rates = [r.score["policy"]["success"] for r in group]
        reached = [r.to_threshold(threshold) for r in group]
        slowest = f"{max(t[1] for t in reached):.0f} s" if all(reached) else "-"
        scripted = group[0].score.get("scripted")
        scripted = "none" if scripted is None else f"{scripted['success']:.3f}"
        lines.append(
            f"| {scenario} | {algorithm} | {sum(rate >= threshold for rate in rates)} of {len(group)} | "
            f"{min(rates):.3f} | {slowest} | {scripted} | "
            f"{group[0].score['random']['success']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot_curves(runs: list[Run], path: Path) -> None:
    """Greedy success against env-steps (per run), one panel per scenario, a line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r.scenario for r in runs})
    cols = 4
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False, sharey=True)
    colors = {"mappo": "tab:blue", "ippo": "tab:orange"}
    for ax, name in zip(axes.flat, names, strict=False):
        for run in (r for r in runs if r.scenario == name):
            if run.curve:
                frames, _, success = zip(*run.curve, strict=True)
                label = run.algorithm if run.seed == min(r.seed for r in runs if r.scenario == name) else None
                color = colors.get(run.algorithm, "gray")
                ax.plot([f / 1e6 for f in frames], success, color=color, alpha=0.8, lw=1.2, label=label)
        ax.axhline(SOLVED, color="gray", lw=0.8, ls="--")
        ax.set_title(name, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("env-steps per run [M]", fontsize=8)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    axes.flat[0].set_ylabel("greedy success")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_gifs(runs: list[Run], folder: Path, steps: int = 100) -> list[Path]:
    """One GIF per scenario of its best run (highest greedy success; MAPPO, then the lowest seed, on
    ties), simulated on the CPU."""
    from swarp.train.video import write_video

    folder.mkdir(parents=True, exist_ok=True)
    written, seen = [], set()
    for run in sorted(runs, key=lambda r: (r.scenario, -r.score["policy"]["success"], r.algorithm != "mappo", r.seed)):
        if run.scenario in seen:
            continue
        seen.add(run.scenario)
        path = folder / f"{run.scenario}.gif"
        write_video(run.path / "checkpoint.pt", path, device="cpu", n_envs=1, steps=steps, tile_size=160, fps=12)
        written.append(path)
    return written


def main(argv=None) -> None:
    import_scenario_modules(argv)  # --import MODULE: also passed on to each training process
    parser = argparse.ArgumentParser(prog="python -m swarp.train.results", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train every scenario and algorithm")
    run.add_argument("out", type=Path)
    run.add_argument("--scenarios", nargs="+", default=scenario_names(), choices=scenario_names())
    run.add_argument("--algorithms", nargs="+", default=["mappo", "ippo"], choices=["mappo", "ippo"])
    run.add_argument("--seeds", type=seed, nargs="+", default=[0, 1, 2])
    run.add_argument("--max-seconds", type=positive_float, default=300.0, help="training budget per process [s]")
    run.add_argument("--target", type=fraction, default=0.95, help="stop once every seed's evaluation reaches this")
    run.add_argument("--parallel", type=positive_int, default=1,
                     help="processes at a time on the device (GPU processes time-slice: 12 at once ran each ~10x "
                          "slower than 2 at once, docs/results.md)")  # fmt: skip
    run.add_argument("--device", default=None)
    run.add_argument("--resume", action="store_true",
                     help="skip the (scenario, algorithm) pairs already scored under OUT")  # fmt: skip
    table = sub.add_parser("table", help="the table and the learning-curve figure")
    table.add_argument("out", type=Path)
    table.add_argument("--markdown", type=Path, default=None, help="write the table here (default: print it)")
    table.add_argument("--figure", type=Path, default=None, help="write the learning curves here (PNG)")
    table.add_argument("--threshold", type=fraction, default=SOLVED)
    gifs = sub.add_parser("gifs", help="a GIF of each scenario's first run")
    gifs.add_argument("out", type=Path)
    gifs.add_argument("--dir", type=Path, required=True)
    args, extra = parser.parse_known_args(argv)
    if args.command == "run":
        codes = run_all(args.out, args.scenarios, args.algorithms, args.seeds, args.max_seconds, args.target,
                        args.parallel, args.device, extra, args.resume)  # fmt: skip
        sys.exit(max(codes, default=0))
    if extra:
        parser.error(f"unrecognized arguments: {extra}")
    runs = load_runs(args.out)
    if not runs:
        sys.exit(f"no runs with a score.json under {args.out}")
    if args.command == "table":
        text = summary_table(runs, args.threshold) + "\n" + markdown_table(runs, args.threshold)
        if args.markdown:
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(text)
        else:
            print(text)
        if args.figure:
            plot_curves(runs, args.figure)
    else:
        for path in write_gifs(runs, args.dir):
            print(path)


if __name__ == "__main__":
    main()
