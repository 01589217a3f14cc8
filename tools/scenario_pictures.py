"""Render the pictures of docs/scenarios.md (needs the viz extra; ``--scenarios`` takes any registered one).

    python tools/scenario_pictures.py                 # docs/img/<scenario>.png, 320 x 320
    python tools/scenario_pictures.py --out /tmp --size 480

Each picture is env 0 of a CPU env with the scenario's defaults and seed 0, a few steps into an
episode under its scripted controller (random actions where it has none), velocity arrows on.
"""

from __future__ import annotations

import argparse
import os

import imageio.v3 as iio
import torch

import swarp

#: Steps of the scripted controller before the picture: agents underway, not yet arrived.
STEPS = {"flocking": 25, "discovery": 30, "fleet": 14, "speaker_listener": 3}
DEFAULT_STEPS = 8
#: The scenarios pictured in docs/scenarios.md.
DOCUMENTED = ("navigation", "flocking", "formation", "discovery", "fleet", "speaker_listener", "variable_navigation")
#: Options of the pictured envs beyond the defaults (navigation shows its obstacles).
OPTIONS = {"navigation": {"n_obstacles": 3}}


def picture(name: str, size: int, seed: int = 0):
    """(size, size, 3) uint8 frame of ``name`` under its scripted controller."""
    env = swarp.make(name, n_envs=1, device="cpu", seed=seed, **OPTIONS.get(name, {}))
    generator = torch.Generator().manual_seed(seed)
    low, high = env.action_bounds
    with torch.no_grad():
        for _ in range(STEPS.get(name, DEFAULT_STEPS)):
            try:
                actions = env.scenario.scripted_actions()
            except NotImplementedError:
                actions = low + (high - low) * torch.rand(1, env.n_agents, env.act_dim, generator=generator)
            env.step(actions)
    return env.render(env_index=0, width=size, height=size, velocity=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "img"))
    parser.add_argument("--size", type=int, default=320, help="picture side [px]")
    parser.add_argument("--scenarios", nargs="+", default=None, help="default: those of docs/scenarios.md")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.scenarios or DOCUMENTED:
        path = os.path.join(args.out, f"{name}.png")
        iio.imwrite(path, picture(name, args.size))
        print(f"{path}: {os.path.getsize(path) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
