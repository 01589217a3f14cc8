"""``python -m swarp.train SCENARIO [--seeds 0 1 2] [--config FILE] [--total-steps N] [--max-seconds S]
[--target-success X] [--device D] [--<TrainConfig field> VALUE ...]``

Trains with the scenario's task record (``swarp.train.tasks``), then scores each run's policy on
fresh episodes against random play on the same episodes (``swarp.train.evaluate``).
"""

from __future__ import annotations

import argparse

from swarp.scenarios.framework.base import scenario_names
from swarp.train.config import TrainConfig, add_fields, load_config_file
from swarp.train.evaluate import evaluate
from swarp.train.run import train


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(prog="python -m swarp.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("scenario", choices=scenario_names())
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed (default: 0)")
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    parser.add_argument("--config", default=None, help="a JSON file of TrainConfig fields")
    parser.add_argument("--eval-episodes", type=int, default=4096, help="fresh episodes of the final score")
    add_fields(parser, TrainConfig, defaults=False)
    args = vars(parser.parse_args(argv))
    scenario, seeds, device = args.pop("scenario"), args.pop("seeds"), args.pop("device")
    episodes, path = args.pop("eval_episodes"), args.pop("config")
    overrides = load_config_file(path) if path else {}
    overrides.update({k: v for k, v in args.items() if v is not None})
    results = train(scenario, device=device, seeds=seeds, **overrides)
    results = results if isinstance(results, list) else [results]
    for seed, result in zip(seeds, results, strict=True):
        score = evaluate(result.policy, scenario, episodes=episodes, device=device)
        p, r = score["policy"], score["random"]
        print(
            f"{scenario} seed {seed}: {result.frames:,} env-steps in {result.train_seconds:.1f} s "
            f"({result.frames * len(seeds) / max(result.train_seconds, 1e-9):,.0f} env-steps/s; capture "
            f"{result.capture_seconds:.1f} s); greedy success {p['success']:.3f} "
            f"[{p['success_low']:.3f}, {p['success_high']:.3f}], random {r['success']:.3f} "
            f"[{r['success_low']:.3f}, {r['success_high']:.3f}] on {p['episodes']} episodes"
            + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")
        )
    return results


if __name__ == "__main__":
    main()
