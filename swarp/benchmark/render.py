"""Rendering cost: a single-env frame and a many-env mosaic frame, on the host (issue 9).

    python -m swarp.benchmark.render                         # 256-env mosaic on the CPU
    python -m swarp.benchmark.render --envs 64 256 1024 --agents 4 16

Navigation with obstacles, a few greedy steps in (so agents and goals are spread), then the median
wall time per frame of ``render_mosaic`` (default tiles: 64 px for 256 envs, a 1039 x 1039 image)
and of ``env.render()`` (480 x 480). The time covers the device gather, the single device-to-host
copy and the rasterization. Issue 9 asks for < 50 ms per 256-env mosaic frame on the CPU.
"""

from __future__ import annotations

import argparse

import torch

import swarp
from swarp.benchmark.common import print_table, time_wall
from swarp.render import render_frame, render_mosaic
from swarp.scenarios.navigation import scripted_actions

#: Greedy steps taken before timing, so the frame shows a typical mid-episode state.
WARMUP_STEPS = 10


def measure(n_envs: int, n_agents: int, n_obstacles: int, device: str, repeats: int, overlays: dict) -> list:
    """One table row: ``[n_envs, n_agents, overlays, mosaic ms, frame ms, mosaic H x W]``."""
    env = swarp.make("navigation", n_envs=n_envs, device=device, seed=0, n_agents=n_agents, n_obstacles=n_obstacles)
    with torch.no_grad():
        for _ in range(WARMUP_STEPS):
            env.step(scripted_actions(env))
    image = render_mosaic(env, **overlays)  # warm-up: scratch buffers, caches
    render_frame(env, **overlays)
    mosaic_s = time_wall(lambda: render_mosaic(env, **overlays), device, n_iters=5, repeats=repeats)
    frame_s = time_wall(lambda: render_frame(env, **overlays), device, n_iters=10, repeats=repeats)
    label = "+".join(name for name, on in overlays.items() if on) or "default"
    return [n_envs, n_agents, label, mosaic_s * 1e3, frame_s * 1e3, f"{image.shape[0]} x {image.shape[1]}"]


def main(argv: list[str] | None = None) -> None:
    """Command line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[256])
    parser.add_argument("--agents", type=int, nargs="+", default=[4])
    parser.add_argument("--obstacles", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"render frames on {args.device}: navigation, {args.obstacles} obstacles/env (median wall ms per frame)")
    rows = []
    for n_envs in args.envs:
        for n_agents in args.agents:
            for overlays in ({}, {"neighbors": True, "velocity": True}):
                rows.append(measure(n_envs, n_agents, args.obstacles, args.device, args.repeats, overlays))
    print_table(["n_envs", "n_agents", "overlays", "mosaic ms", "env.render ms", "mosaic px"], rows)


if __name__ == "__main__":
    main()
