"""``python -m swarp.train.eval CHECKPOINT [--scenario S] [--episodes N] [--device D] [--seed S]
[--option NAME=VALUE ...] [--video PATH] [--import MODULE]``

Greedy success of a checkpoint's policy (a ``checkpoint.pt`` or its run folder) with its 95% Wilson
interval, beside random play's on the same episodes; ``--video`` also writes a GIF/MP4 of the policy
(needs the ``viz`` extra). ``--scenario`` scores it in another scenario where its policy fits there;
``--import`` registers the scenarios of your own module first.
"""

from __future__ import annotations

import argparse
import json

from swarp.scenarios.framework.base import add_import_flag, import_scenario_modules
from swarp.train.cli import positive_int, scenario_name, scenario_option, seed
from swarp.train.evaluate import evaluate


def main(argv=None) -> dict:
    import_scenario_modules(argv)
    parser = argparse.ArgumentParser(prog="python -m swarp.train.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("checkpoint", help="a checkpoint.pt, or the run folder holding it")
    add_import_flag(parser)
    parser.add_argument("--scenario", type=scenario_name, default=None, help="default: the checkpoint's")
    parser.add_argument("--episodes", type=positive_int, default=4096)
    parser.add_argument("--device", default=None)
    parser.add_argument("--seed", type=seed, default=12345, help="reset seed of the episodes, in [0, 2^31)")
    parser.add_argument("--option", action="append", default=[], type=scenario_option, metavar="NAME=VALUE",
                        help="a scenario option over the checkpoint's (repeatable; VALUE a literal)")  # fmt: skip
    parser.add_argument("--video", default=None, help="write a video of the policy here (.gif or .mp4)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    options = dict(args.option) or None
    try:
        if args.video:
            from swarp.render.video import check_video_path

            check_video_path(args.video)  # before the evaluation, not after it
        result = evaluate(args.checkpoint, args.scenario, episodes=args.episodes, device=args.device, seed=args.seed,
                          options=options)  # fmt: skip
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("policy", "random"):
            r = result[name]
            print(f"{name:>6}: success {r['success']:.3f} [{r['success_low']:.3f}, {r['success_high']:.3f}] "
                  f"(95% Wilson), return {r['return']:.3f}, {r['episodes']} episodes")  # fmt: skip
    if args.video:
        from swarp.train.video import write_video

        write_video(args.checkpoint, args.video, args.scenario, device=args.device, seed=args.seed, options=options)
        print(f"video: {args.video}")
    return result


if __name__ == "__main__":
    main()
