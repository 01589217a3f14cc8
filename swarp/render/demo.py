"""Watch a scenario under a scripted policy: save a video, or open the interactive viewer.

    python -m swarp.render.demo --save nav.mp4                 # navigation, env 0, 200 steps
    python -m swarp.render.demo --save grid.gif --mosaic 16    # 16 envs in one frame
    python -m swarp.render.demo --scenario navigation          # a window (needs a display)
    python -m swarp.render.demo --import my_scenario --scenario my_scenario --save mine.gif   # your own
    SDL_VIDEODRIVER=dummy python -m swarp.render.demo --frames 10   # the window, headless

The policy is the scenario's scripted controller (``Scenario.scripted_actions``: in navigation every
agent drives at its own goal); scenarios without one get uniform random actions. Needs the ``viz``
extra (``pip install 'swarp[viz]'``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

import torch

import swarp
from swarp.render.video import ActionFn, random_action_fn, save_video
from swarp.scenarios.framework.base import add_import_flag, import_scenario_modules

if TYPE_CHECKING:
    from swarp.env.environment import Environment


def scripted_action_fn(env: Environment, seed: int = 0) -> ActionFn:
    """The demo's policy for ``env``'s scenario: its scripted controller, else random actions.

    Returns:
        ``action_fn(env, obs) -> actions`` [E, A, act_dim] on the env's device, physical units.
    """
    try:
        env.scenario.scripted_actions()
    except NotImplementedError:
        return random_action_fn(seed)
    return lambda env, obs: env.scenario.scripted_actions()


def main(argv: list[str] | None = None) -> None:
    """Command line entry point (see the module docstring)."""
    import_scenario_modules(argv)  # --import MODULE registers its scenarios before the choices are listed
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation", choices=swarp.scenario_names())
    add_import_flag(parser)
    parser.add_argument("--save", default=None, help="write a video (.mp4 or .gif) instead of opening a window")
    parser.add_argument("--steps", type=int, default=200, help="steps to record (video only)")
    parser.add_argument("--frames", type=int, default=None, help="close the window after this many frames")
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--n-agents", type=int, default=6)
    parser.add_argument("--mosaic", type=int, default=0, help="draw this many envs per frame (video only)")
    parser.add_argument("--size", type=int, default=480, help="frame side [px]")
    parser.add_argument("--fps", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--neighbors", action="store_true", help="draw the neighbor graph")
    parser.add_argument("--velocity", action="store_true", help="draw velocity arrows")
    args = parser.parse_args(argv)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    options = {"n_agents": args.n_agents}
    if args.scenario == "navigation":
        options["n_obstacles"] = 3
    env = swarp.make(
        args.scenario,
        n_envs=max(args.n_envs, args.mosaic),
        device=device,
        seed=args.seed,
        auto_reset=True,
        **options,
    )
    policy = scripted_action_fn(env, args.seed)
    overlays = {"neighbors": args.neighbors, "velocity": args.velocity}
    if args.save is None:
        from swarp.render.viewer import Viewer

        headless = sys.platform.startswith("linux") and not any(
            os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")
        )
        if headless:  # SDL would fall back to an invisible offscreen window
            raise SystemExit("no display found (DISPLAY is not set); pass --save out.mp4 to write a video")

        try:
            Viewer(env, policy, width=args.size, height=args.size, fps=args.fps, **overlays).run(max_frames=args.frames)
        except Exception as error:  # pygame.error without a display
            raise SystemExit(f"could not open a window ({error}); pass --save out.mp4 to write a video") from error
        return
    with torch.no_grad():
        if args.mosaic:
            path = save_video(
                env,
                args.save,
                args.steps,
                policy,
                fps=args.fps,
                env_indices=list(range(args.mosaic)),
                tile_size=max(64, args.size // int(args.mosaic**0.5 + 0.999)),
                **overlays,
            )
        else:
            path = save_video(
                env, args.save, args.steps, policy, fps=args.fps, width=args.size, height=args.size, **overlays
            )
    print(f"wrote {path}: {args.steps + 1} frames of {args.scenario} ({env.n_envs} envs)")


if __name__ == "__main__":
    main()
