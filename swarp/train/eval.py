"""``python -m swarp.train.eval CHECKPOINT [--episodes N] [--device D] [--seed S] [--video PATH]``

Greedy success of a checkpoint's policy with its 95% Wilson interval, beside random play's on the
same episodes; ``--video`` also writes a GIF/MP4 of the policy (needs the ``viz`` extra).
"""

from __future__ import annotations

import argparse
import json

from swarp.train.evaluate import evaluate


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m swarp.train.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("checkpoint")
    parser.add_argument("--episodes", type=int, default=4096)
    parser.add_argument("--device", default=None)
    parser.add_argument("--seed", type=int, default=12345, help="reset seed of the episodes")
    parser.add_argument("--video", default=None, help="write a video of the policy here (.gif or .mp4)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = evaluate(args.checkpoint, episodes=args.episodes, device=args.device, seed=args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("policy", "random"):
            r = result[name]
            print(f"{name:>6}: success {r['success']:.3f} [{r['success_low']:.3f}, {r['success_high']:.3f}] "
                  f"(95% Wilson), return {r['return']:.3f}, {r['episodes']} episodes")  # fmt: skip
    if args.video:
        from swarp.train.video import write_video

        write_video(args.checkpoint, args.video, device=args.device, seed=args.seed)
        print(f"video: {args.video}")
    return result


if __name__ == "__main__":
    main()
