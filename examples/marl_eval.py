"""Score a MAPPO checkpoint of ``examples/marl_train.py`` against a random policy on the same seeds.

    python examples/marl_eval.py --checkpoint runs/navigation__0__1700000000/checkpoint.pt
    python examples/marl_eval.py --checkpoint ... --episodes 4096 --video nav.mp4 --video-envs 16

Both policies play the same episodes: the simulator's resets are a pure function of (seed, env,
episode), so with the same ``--seed`` every wave of ``--n-envs`` episodes starts from the same
spawns and goals for both. The trained policy acts greedily (the tanh of its Gaussian mean); the
baseline draws uniform actions in the normalized box from its own seeded generator. Success is the
task's metric (``Task.success`` in ``marl_train.py``), reported with a 95% Wilson score interval.

``--video`` renders the greedy policy for one episode length to an mp4 or gif through
``swarp.render.save_video`` (the ``viz`` extra), one env or a mosaic of ``--video-envs``.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the training script's task records and networks
import marl_train  # noqa: E402

from swarp.train.evaluate import wilson_interval  # noqa: E402

#: Two-sided 95% normal quantile.
Z_95 = 1.959963984540054


@dataclass
class Args:
    checkpoint: str = "checkpoint.pt"
    """checkpoint.pt written by marl_train.py"""
    episodes: int = 1000
    """episodes per policy (rounded up to whole waves of n_envs)"""
    n_envs: int = 1000
    """parallel envs per wave"""
    seed: int = 12345
    """evaluation seed (the same for both policies; keep it apart from the training seeds)"""
    device: str | None = None
    """cpu or cuda (default: cuda when available)"""
    video: str = ""
    """write a rollout of the greedy policy to this .mp4 or .gif (empty: no video)"""
    video_envs: int = 1
    """envs in the video (more than 1: a mosaic)"""
    output: str = ""
    """write the results as JSON to this path (empty: print only)"""


def random_policy(env, seed: int):
    """Uniform actions in the normalized action box, from a seeded generator on the env's device."""
    generator = torch.Generator(device=env.device).manual_seed(seed)
    sim = env.sim

    def act(td: TensorDict) -> TensorDict:
        u = torch.rand(sim.n_envs, sim.n_agents, sim.act_dim, generator=generator, device=env.device, dtype=sim.dtype)
        td.set(marl_train.ACTION_KEY, env.action_low + (env.action_high - env.action_low) * u)
        return td

    return act


def load(checkpoint: str | Path, n_envs: int, device: str, seed: int):
    """``(env, actor, task, saved)``: the checkpoint's task on a fresh batch, its actor loaded."""
    saved = torch.load(checkpoint, map_location=device, weights_only=True)
    task = marl_train.Task(**saved["task"])
    args = saved["args"]
    env = marl_train.make_env(args["scenario"], task, n_envs, device, seed)
    actor = marl_train.make_actor(env, args["hidden"], args["depth"])
    actor.load_state_dict(saved["actor"])
    actor.eval()
    return env, actor, task, saved


def score(result: dict[str, torch.Tensor]) -> dict:
    successes, n = int(result["success"].sum()), result["success"].numel()
    low, high = wilson_interval(successes, n)
    return {
        "episodes": n,
        "success_rate": successes / n,
        "success_ci95": [low, high],
        "mean_return": float(result["return"].mean()),
    }


def save_rollout_video(env, actor, path: str, n_steps: int, n_video_envs: int):
    """Render the greedy policy on ``env`` (reset first) through ``swarp.render.save_video``."""
    from swarp.render import save_video

    policy = marl_train.greedy(actor)
    env.reset()

    def action_fn(sim, obs):
        td = TensorDict({marl_train.OBS_KEY: obs}, batch_size=[sim.n_envs])
        with torch.no_grad():
            return env.to_physical(policy(td)[marl_train.ACTION_KEY])

    layout = {"env_indices": list(range(n_video_envs))} if n_video_envs > 1 else {"env_index": 0}
    return save_video(env.sim, path, n_steps=n_steps, action_fn=action_fn, **layout)


def evaluate_checkpoint(args: Args) -> dict:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    env, actor, task, saved = load(args.checkpoint, args.n_envs, device, args.seed)
    waves = max(1, math.ceil(args.episodes / args.n_envs))
    results = {
        "scenario": saved["args"]["scenario"],
        "checkpoint": str(args.checkpoint),
        "trained_frames": saved["frames"],
        "trained_seconds": saved["seconds"],
        "seed": args.seed,
        "success_metric": task.success,
        "greedy": score(marl_train.evaluate(env, marl_train.greedy(actor), task, waves=waves, seed=args.seed)),
        "random": score(marl_train.evaluate(env, random_policy(env, args.seed), task, waves=waves, seed=args.seed)),
    }
    if args.video:
        video_env = marl_train.make_env(saved["args"]["scenario"], task, max(1, args.video_envs), device, args.seed)
        n_steps = marl_train.episode_length(video_env)
        results["video"] = str(save_rollout_video(video_env, actor, args.video, n_steps, args.video_envs))
    return results


def main(argv=None) -> dict:
    args = marl_train.parse_args(argv, cls=Args, description=__doc__)
    results = evaluate_checkpoint(args)
    print(
        f"{results['scenario']}: checkpoint after {results['trained_frames']:,} env-steps "
        f"({results['trained_seconds']:.0f} s), seed {results['seed']}, success = {results['success_metric']}"
    )
    for name in ("greedy", "random"):
        r = results[name]
        low, high = r["success_ci95"]
        print(
            f"  {name:>6}: success {r['success_rate']:.3f} (95% CI {low:.3f}-{high:.3f}) over {r['episodes']} "
            f"episodes, mean return {r['mean_return']:.3f}"
        )
    if "video" in results:
        print(f"  video: {results['video']}")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
