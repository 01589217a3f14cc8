"""swarp's main job in one command: train a navigation swarm and show what it learned.

    python -m swarp.demo                      # GPU when there is one, else CPU
    python -m swarp.demo --device cpu --total-steps 400000

It trains MAPPO (``swarp.train``) on navigation, 4 agents that must each reach their own goal
without colliding, until a greedy evaluation reaches ``--target-success`` or the budget is spent
(seconds on a GPU; a minute or two on a 2-core CPU). Then it scores the greedy policy and random
play on the same fresh episodes (95% Wilson intervals) and writes the learning curve
(``swarp_demo_curve.png``, needs matplotlib) and a GIF of the trained swarm (``swarp_demo.gif``,
needs the ``viz`` extra).
"""

from __future__ import annotations

import argparse
import time

import torch

import swarp
from swarp.train import evaluate, train
from swarp.train.run import plot_learning_curve


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--total-steps", type=int, default=None, help="budget [env-steps] (GPU 20 M, CPU 300 k)")
    parser.add_argument("--target-success", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=None, help="evaluation episodes (GPU 4096, CPU 512)")
    parser.add_argument("--curve", default="swarp_demo_curve.png", help="learning curve PNG ('' to skip)")
    parser.add_argument("--gif", default="swarp_demo.gif", help="GIF of the trained swarm ('' to skip)")
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    total = args.total_steps or (20_000_000 if cuda else 300_000)
    episodes = args.episodes or (4096 if cuda else 512)
    print(f"swarp {swarp.__version__}: training MAPPO on navigation (4 agents) on {device}, up to {total:,} env-steps")
    start = time.perf_counter()
    result = train("navigation", device=device, seeds=(args.seed,), total_steps=total,
                   target_success=args.target_success, eval_every=2 if cuda else 10, eval_envs=1024 if cuda else 256,
                   run_dir="", progress=False)  # fmt: skip
    wall = time.perf_counter() - start
    for row in result.metrics:
        if "eval/success" in row:
            frames, seconds, success = row["frames"], row["train_seconds"], row["eval/success"]
            print(f"  {frames:>11,} env-steps  {seconds:6.1f} s  greedy success {success:.3f}")
    first = result.metrics[0]["train_seconds"] if result.metrics else 0.0
    print(
        f"trained {result.frames:,} env-steps in {result.train_seconds:.1f} s of training "
        f"({result.frames / max(result.train_seconds, 1e-9):,.0f} env-steps/s; {wall:.1f} s with evaluations and "
        f"set-up). The first iteration, {first:.1f} s of it, includes loading the kernels (compiling them on "
        f"a machine's first run)."
    )
    score = evaluate(result.policy, "navigation", episodes=episodes, device=device, seed=12345)
    for name in ("policy", "random"):
        r = score[name]
        label = "greedy policy" if name == "policy" else "random play"
        print(f"  {label:>13}: success {r['success']:.3f} [{r['success_low']:.3f}, {r['success_high']:.3f}] "
              f"on {r['episodes']} fresh episodes, return {r['return']:.2f}")  # fmt: skip
    if args.curve and plot_learning_curve(result.metrics, args.curve):
        print(f"  learning curve: {args.curve}")
    if args.gif:
        try:
            from swarp.train.video import write_video

            write_video(result.policy, args.gif, "navigation", seed=args.seed)
            print(f"  GIF of the trained swarm: {args.gif}")
        except ImportError as error:
            print(f"  (no GIF: {error})")
    return score


if __name__ == "__main__":
    main()
