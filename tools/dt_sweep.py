"""Where integration diverges: sweep ``dt`` with the Stepper's stability check switched off.

For each ``dt`` (substeps as given, 1 by default) a scenario runs ``--steps`` steps at ``--envs``
envs under uniform random actions inside ``env.action_bounds``, with auto-reset, and reports the
first step (checked every 10) at which a state, observation or reward is not finite. This measures
the empirical onset that ``swarp/core/stability.py``'s limits are compared with in
docs/reliability.md; the check itself (which would reject the unstable ``dt``) is replaced by a
no-op for the run, and with ``--bypass-give-way`` give_way's own stricter option check too.

    python tools/dt_sweep.py navigation --dts 0.14,0.2,0.21,0.22 --seed 0
    python tools/dt_sweep.py navigation ctrl_mode=acceleration --integrator rk4 --dts 0.3,0.32
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import time

import torch

import swarp
import swarp.core.stability as stability
from swarp.core.config import Integrator
from swarp.scenarios.framework.base import get_scenario


def parse_option(text: str) -> tuple[str, object]:
    """``key=value`` with the value read as a Python literal where it is one."""
    key, _, value = text.partition("=")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def first_non_finite(env: swarp.Environment, n_steps: int, seed: int) -> int | None:
    """The first step (to 10 steps) with a non-finite state, observation or reward, or ``None``."""
    low, high = env.action_bounds
    generator = torch.Generator().manual_seed(seed)
    for t in range(n_steps):
        u = torch.rand((env.n_envs, *low.shape), generator=generator, dtype=low.dtype)
        obs, reward, *_ = env.step((low + (high - low) * u).contiguous())
        if t % 10 == 9 or t == n_steps - 1:
            fields = [x for x in env.state if x is not None]
            if not all(bool(torch.isfinite(x).all()) for x in (obs, reward, *fields)):
                return t
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario")
    parser.add_argument("options", nargs="*", type=parse_option, help="scenario option key=value")
    parser.add_argument("--dts", required=True, help="comma-separated dt values [s]")
    parser.add_argument("--substeps", type=int, default=1)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--integrator", choices=["euler", "rk4"], default=None)
    parser.add_argument("--bypass-give-way", action="store_true", help="skip give_way's own k h^2 < 1 check")
    args = parser.parse_args()
    stability.check_substep = lambda *_, **__: None  # measure past the limit
    if args.bypass_give_way:
        from swarp.scenarios import give_way

        check = give_way.GiveWayConfig.__post_init__

        def unchecked(self):
            stiffness = self.collision_k
            object.__setattr__(self, "collision_k", 1e-9)
            check(self)
            object.__setattr__(self, "collision_k", stiffness)

        give_way.GiveWayConfig.__post_init__ = unchecked
    if args.integrator:
        cls = get_scenario(args.scenario)
        make_world = cls.make_world
        integrator = Integrator[args.integrator.upper()]
        cls.make_world = lambda self: dataclasses.replace(make_world(self), integrator=integrator)
    options = dict(args.options)
    for dt in (float(x) for x in args.dts.split(",")):
        start = time.perf_counter()
        env = swarp.make(
            args.scenario, n_envs=args.envs, device="cpu", seed=args.seed, auto_reset=True,
            dt=dt, substeps=args.substeps, **options,
        )  # fmt: skip
        first = first_non_finite(env, args.steps, args.seed)
        verdict = "finite" if first is None else f"non-finite by step {first}"
        print(f"{args.scenario} {options} dt={dt}: {verdict} ({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
