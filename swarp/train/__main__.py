"""``python -m swarp.train SCENARIO [--seeds 0 1 2] [--config FILE] [--total-steps N] [--max-seconds S]
[--target-success X] [--device D] [--option NAME=VALUE ...] [--<TrainConfig field> VALUE ...]``

Trains with the scenario's task record (``swarp.train.tasks``), then scores each run's policy on
fresh episodes against random play and the scripted controller on the same episodes
(``swarp.train.evaluate``), into ``score.json`` of each run's folder.
"""

from __future__ import annotations

import argparse
import ast
import json

from swarp.scenarios.framework.base import add_import_flag, import_scenario_modules, scenario_names
from swarp.train.config import TrainConfig, add_fields, load_config_file
from swarp.train.evaluate import evaluate
from swarp.train.run import train


def scenario_option(text: str) -> tuple[str, object]:
    """``"NAME=VALUE"`` -> ``(NAME, VALUE)``, VALUE read as a Python literal (else kept as a string)."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main(argv=None) -> list:
    import_scenario_modules(argv)
    parser = argparse.ArgumentParser(prog="python -m swarp.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("scenario", choices=scenario_names())
    add_import_flag(parser)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed (default: 0)")
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    parser.add_argument("--config", default=None, help="a JSON file of TrainConfig fields")
    parser.add_argument("--eval-episodes", type=int, default=4096, help="fresh episodes of the final score")
    parser.add_argument("--option", action="append", default=[], type=scenario_option, metavar="NAME=VALUE",
                        help="a scenario option over the task record's (repeatable; VALUE a literal)")  # fmt: skip
    add_fields(parser, TrainConfig, defaults=False)
    args = vars(parser.parse_args(argv))
    args.pop("modules")
    scenario, seeds, device = args.pop("scenario"), args.pop("seeds"), args.pop("device")
    episodes, path, options = args.pop("eval_episodes"), args.pop("config"), dict(args.pop("option"))
    overrides = load_config_file(path) if path else {}
    overrides.update({k: v for k, v in args.items() if v is not None})
    results = train(scenario, device=device, seeds=seeds, options=options, **overrides)
    results = results if isinstance(results, list) else [results]
    for seed, result in zip(seeds, results, strict=True):
        score = evaluate(result.policy, scenario, episodes=episodes, device=device, options=options)
        if result.run_dir is not None:
            (result.run_dir / "score.json").write_text(json.dumps({"episodes": episodes, **score}, indent=1))
        p, r = score["policy"], score["random"]
        print(
            f"{scenario} seed {seed}: {result.frames:,} env-steps in {result.train_seconds:.1f} s "
            f"({result.frames * len(seeds) / max(result.train_seconds, 1e-9):,.0f} env-steps/s; capture "
            f"{result.capture_seconds:.1f} s); greedy success {p['success']:.3f} "
            f"[{p['success_low']:.3f}, {p['success_high']:.3f}], random {r['success']:.3f} "
            f"[{r['success_low']:.3f}, {r['success_high']:.3f}]"
            + (f", scripted {score['scripted']['success']:.3f}" if "scripted" in score else "")
            + f" on {p['episodes']} episodes"
            + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")
        )
    return results


if __name__ == "__main__":
    main()
