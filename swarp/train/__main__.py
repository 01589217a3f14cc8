"""``python -m swarp.train SCENARIO [--seeds 0 1 2] [--config FILE] [--total-steps N] [--max-seconds S]
[--target-success X] [--device D] [--option NAME=VALUE ...] [--import MODULE] [--<TrainConfig field> VALUE ...]``
``python -m swarp.train --resume RUN_DIR [RUN_DIR ...] [--total-steps N] [--max-seconds S] ...``

Trains with the scenario's task record (``swarp.train.tasks``: with nothing else, its budget and
target solve the task on a GPU), then scores each run's policy on fresh episodes against random
play and the scripted controller on the same episodes (``swarp.train.evaluate``), into
``score.json`` of each run's folder. Ctrl-C finishes the iteration in flight, writes each run's
checkpoint and prints the ``--resume`` command that continues it.
"""

from __future__ import annotations

import argparse
import json

from swarp.scenarios.framework.base import add_import_flag, import_scenario_modules
from swarp.train.cli import positive_int, scenario_name, scenario_option, seed
from swarp.train.config import TrainConfig, add_fields, load_config_file
from swarp.train.evaluate import evaluate
from swarp.train.health import TrainingDiverged
from swarp.train.run import RESUMABLE_FIELDS, resume, train


def main(argv=None) -> list:
    import_scenario_modules(argv)
    parser = argparse.ArgumentParser(prog="python -m swarp.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("scenario", type=scenario_name, nargs="?", help="a registered scenario (not with --resume)")
    add_import_flag(parser)
    parser.add_argument("--resume", nargs="+", default=None, metavar="RUN_DIR",
                        help="continue these runs (trained together) from their checkpoints; only "
                        + ", ".join("--" + f.replace("_", "-") for f in RESUMABLE_FIELDS) + " may change")  # fmt: skip
    parser.add_argument("--seeds", type=seed, nargs="+", default=None, help="one run per seed (default: 0)")
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    parser.add_argument("--config", default=None, help="a JSON file of TrainConfig fields")
    parser.add_argument("--eval-episodes", type=positive_int, default=4096, help="fresh episodes of the final score")
    parser.add_argument("--option", action="append", default=[], type=scenario_option, metavar="NAME=VALUE",
                        help="a scenario option over the task record's (repeatable; VALUE a literal; "
                             "max_steps=N sets the episode length)")  # fmt: skip
    add_fields(parser, TrainConfig, defaults=False)
    args = vars(parser.parse_args(argv))
    args.pop("modules")
    scenario, seeds, device, runs = args.pop("scenario"), args.pop("seeds"), args.pop("device"), args.pop("resume")
    episodes, path, options = args.pop("eval_episodes"), args.pop("config"), dict(args.pop("option"))
    overrides = {k: v for k, v in args.items() if v is not None}
    try:
        if runs is not None:
            if scenario is not None or seeds is not None or options or path:
                parser.error("--resume continues runs as they were: no SCENARIO, --seeds, --option or --config")
            results = resume(*runs, device=device, **overrides)
        else:
            if scenario is None:
                parser.error("a SCENARIO is required (or --resume RUN_DIR)")
            overrides = {**(load_config_file(path) if path else {}), **overrides}
            results = train(scenario, device=device, seeds=seeds or [0], options=options, **overrides)
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    except TrainingDiverged as error:
        parser.exit(1, f"{parser.prog}: {error}\n")
    except KeyboardInterrupt as error:
        parser.exit(130, f"\n{parser.prog}: {error or 'interrupted'}\n")
    results = results if isinstance(results, list) else [results]
    scenario = scenario or _scenario_of(runs[0])
    successes = []
    for result in results:
        # A checkpoint holds the run's task, options included; a run without a folder has only its policy.
        source, run_options = (result.checkpoint, None) if result.checkpoint else (result.policy, options)
        score = evaluate(source, scenario, episodes=episodes, device=device, options=run_options)
        if result.run_dir is not None:
            (result.run_dir / "score.json").write_text(json.dumps({"episodes": episodes, **score}, indent=1))
        p, r = score["policy"], score["random"]
        quantized = score.get("scripted", {}).get("quantized_groups")  # discrete groups given the controller's levels
        successes.append(p["success"])
        print(
            f"{scenario} seed {result.seed}: {result.frames:,} env-steps in {result.train_seconds:.1f} s "
            f"({result.frames * len(results) / max(result.train_seconds, 1e-9):,.0f} env-steps/s; capture "
            f"{result.capture_seconds:.1f} s)"
            + (f", target reached at {result.reached[1]:,} env-steps" if result.reached else "")
            + f"; greedy success {p['success']:.3f} [{p['success_low']:.3f}, {p['success_high']:.3f}], random "
            f"{r['success']:.3f} [{r['success_low']:.3f}, {r['success_high']:.3f}]"
            + (f", scripted {score['scripted']['success']:.3f}" if "scripted" in score else "")
            + (" (continuous actions)" if score.get("scripted", {}).get("action_space") else "")
            + (f" (quantized: {', '.join(quantized)})" if quantized else "")
            + f" on {p['episodes']} episodes"
            + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")
        )
    if len(results) > 1:
        mean = sum(successes) / len(successes)
        print(f"{scenario}, {len(results)} seeds: greedy success mean {mean:.3f}, min {min(successes):.3f}, "
              f"max {max(successes):.3f}; {sum(s >= 0.9 for s in successes)} of {len(results)} >= 0.90")  # fmt: skip
    return results


def _scenario_of(run_dir: str) -> str:
    from swarp.train.checkpoint import load_checkpoint

    return load_checkpoint(run_dir).scenario


if __name__ == "__main__":
    main()
