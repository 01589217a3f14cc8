"""swarp's main job in one command: simulate a batch of navigation swarms and report what happened.

    python -m swarp.demo                      # GPU when there is one, else CPU
    python -m swarp.demo --n-envs 16384 --n-agents 16 --steps 400

It steps ``n_envs`` parallel navigation worlds with auto-reset under two policies, a greedy
go-to-goal controller and uniform random actions, and prints throughput, episodes finished,
success rate and collisions for each. Everything stays on the device; the only host reads are
the final counters. Then it renders 16 envs of the greedy run mid-episode into one picture
(``--save``, default ``swarp_demo.png``; needs the ``viz`` extra for the PNG writer).
"""

from __future__ import annotations

import argparse
import time

import torch

import swarp


def greedy_actions(env: swarp.Environment, gain: float = 2.0) -> torch.Tensor:
    """Velocity command towards each agent's own goal, clipped to the action box. [E, A, 2]."""
    low, high = env.action_bounds
    rel_goal = env.obs[..., 6:8]
    return torch.clamp(gain * rel_goal, low, high)


def random_actions(env: swarp.Environment, gen: torch.Generator) -> torch.Tensor:
    low, high = env.action_bounds
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=gen, device=env.torch_device, dtype=env.dtype)
    return low + (high - low) * u


def run(policy: str, args, device: str) -> tuple[dict, swarp.Environment]:
    env = swarp.make(
        "navigation",
        n_envs=args.n_envs,
        device=device,
        seed=args.seed,
        n_agents=args.n_agents,
        n_obstacles=args.n_obstacles,
        auto_reset=True,
        max_steps=args.max_steps,
    )
    gen = torch.Generator(device=env.torch_device).manual_seed(args.seed)
    episodes = torch.zeros((), dtype=torch.int64, device=env.torch_device)
    successes = torch.zeros_like(episodes)
    collisions = torch.zeros_like(episodes)
    env.reset(seed=args.seed)
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(args.steps):
            actions = greedy_actions(env) if policy == "greedy" else random_actions(env, gen)
            _, _, terminated, truncated, info = env.step(actions)
            episodes += (terminated | truncated).sum()
            successes += terminated.sum()
            collisions += info["collisions"].sum()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    n_episodes = int(episodes)
    return env, {
        "policy": policy,
        "mode": env.execution_mode,
        "env-steps/s": round(args.n_envs * args.steps / elapsed),
        "episodes": n_episodes,
        "success rate": int(successes) / max(n_episodes, 1),
        "collisions/agent-step": int(collisions) / (args.n_envs * args.n_agents * args.steps),
    }


def save_picture(env: swarp.Environment, path: str, n_steps: int = 12) -> None:
    """Advance the greedy run a few steps and write a 4 x 4 mosaic of its first 16 envs to ``path``."""
    from swarp.render import render_mosaic

    with torch.no_grad():
        for _ in range(n_steps):
            env.step(greedy_actions(env))
    frame = render_mosaic(env, env_indices=list(range(min(16, env.n_envs))), cols=4, tile_size=192)
    try:
        import imageio.v3 as iio
    except ImportError:
        print(f"  (install the viz extra to save the picture: pip install 'swarp[viz]'; frame {frame.shape})")
        return
    iio.imwrite(path, frame)
    print(f"  picture of 16 envs: {path} ({frame.shape[1]}x{frame.shape[0]})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--n-envs", type=int, default=None, help="default 4096 on GPU, 256 on CPU")
    parser.add_argument("--n-agents", type=int, default=4)
    parser.add_argument("--n-obstacles", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default="swarp_demo.png", help="PNG of 16 envs of the greedy run ('' to skip)")
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.n_envs is None:
        args.n_envs = 4096 if device.startswith("cuda") else 256
    print(
        f"swarp {swarp.__version__}: navigation, {args.n_envs} envs x {args.n_agents} agents, "
        f"{args.n_obstacles} obstacles, {args.steps} steps on {device}"
    )
    envs = {}
    for policy in ("greedy", "random"):
        envs[policy], result = run(policy, args, device)
        print("  " + ", ".join(f"{k}: {v:,.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in result.items()))
    if args.save:
        save_picture(envs["greedy"], args.save)


if __name__ == "__main__":
    main()
