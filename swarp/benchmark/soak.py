"""Soak: long runs of every scenario under random in-bounds actions, checking that nothing drifts.

Not a timing. Each scenario runs ``--steps`` steps at ``--envs`` envs with auto-reset, actions drawn
uniformly inside ``env.action_bounds`` every step (seeded), and the run fails if, at any step:

* any state field (agents, bodies, drones), observation, saved final observation or reward is
  NaN or infinite;
* an agent or body centre leaves the world's bounds by more than the margin: the largest agent
  radius or body reach, one step of travel at the largest speed, and twice the soft wall spring's
  stopping distance at that speed (soft walls let a body in, not through);
* a drone is below the ground (``z < 0``);
* the environment's own state-health flag (``env.non_finite()``) is raised.

The checks accumulate on the device (no host sync per step) and are read every ``--check-every``
steps, so a failure names the window it happened in. ``--full-check-every n`` runs the direct checks
(the first three) every n-th step only, for long GPU runs where their launches would outnumber the
step's; the health flag still sees every step, and a non-finite state persists until its env's
episode ends::

    python -m swarp.benchmark.soak --steps 100000 --envs 64            # every scenario, CPU
    python -m swarp.benchmark.soak --device cuda --steps 1000000 --envs 4096 --full-check-every 10 \
        --scenarios navigation drone_navigation
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import torch
import warp as wp

import swarp
from swarp import testing
from swarp.benchmark.common import print_table


@dataclasses.dataclass
class SoakResult:
    """What a soak of one scenario saw.

    Attributes:
        scenario: The scenario's name.
        steps: Steps run (batch steps; env-steps are ``steps * n_envs``).
        n_envs: Envs of the batch.
        episodes: Episodes finished.
        seconds: Wall time of the run [s].
        failure: ``None``, or what went wrong first and in which window of steps.
        worst_excess: The largest distance [m] any centre went past the bounds (negative: never
            reached them), over the run.
    """

    scenario: str
    steps: int
    n_envs: int
    episodes: int
    seconds: float
    failure: str | None
    worst_excess: float


#: Steps whose actions are drawn in one launch (a long GPU run is otherwise bound by the draws).
ACTION_CHUNK = 128


def _finite(*tensors: torch.Tensor) -> torch.Tensor:
    """0-d bool: every entry of every tensor is finite."""
    return torch.stack([torch.isfinite(t).all() for t in tensors]).all()


def soak(
    name: str,
    n_steps: int,
    n_envs: int = 64,
    device: str = "cpu",
    seed: int = 0,
    check_every: int = 1000,
    full_check_every: int = 1,
    **options,
) -> SoakResult:
    """Run scenario ``name`` for ``n_steps`` steps at ``n_envs`` envs under uniform random in-bounds
    actions with auto-reset; see the module docstring for what is checked (the direct checks every
    ``full_check_every`` steps, the health flag's every step). ``options`` go to ``swarp.make``
    (scenario options, ``dtype``, ``lidar_rays``...)."""
    env = swarp.make(name, n_envs=n_envs, device=device, seed=seed, auto_reset=True, **options)
    low, high = env.action_bounds
    generator = torch.Generator(device=env.torch_device).manual_seed(seed)
    shape = (env.n_envs, env.n_agents, env.act_dim)
    spec = env.scenario.make_world()
    lower, upper, margin = _bounds(env, spec)
    dev = env.torch_device
    ok = torch.ones((), dtype=torch.bool, device=dev)
    excess = torch.full((), -float("inf"), dtype=env.dtype, device=dev)
    episodes_before = env.episode.long().sum()
    failure = None
    start = time.perf_counter()
    with torch.no_grad():
        for step in range(1, n_steps + 1):
            if (step - 1) % ACTION_CHUNK == 0:
                u = torch.rand((ACTION_CHUNK, *shape), generator=generator, device=dev, dtype=env.dtype)
                chunk = low + (high - low) * u
            outputs = env.step(chunk[(step - 1) % ACTION_CHUNK])
            obs, reward, terminated, truncated, info = testing.flat_outputs(env, outputs)
            if step % full_check_every and step % check_every and step != n_steps:
                continue
            done = terminated | truncated
            state = env.state
            final = torch.where(done.view(-1, 1, 1), info["final_obs"], 0.0)  # rows of other envs are stale
            ok &= _finite(*state, obs, reward, final)
            centres = [state.pos] + ([state.body_pos] if hasattr(state, "body_pos") else [])
            for points in centres:
                over = torch.maximum(lower - points, points - upper).amax()
                excess = torch.maximum(excess, over)
            if hasattr(state, "pos_z"):
                ok &= (state.pos_z >= 0).all()
            if step % check_every == 0 or step == n_steps:
                reasons = []
                if not bool(ok):
                    reasons.append("a non-finite state, observation, reward or drone below ground")
                if float(excess) > margin:
                    reasons.append(f"a centre {float(excess):.3g} m outside the bounds (margin {margin:.3g} m)")
                if bool(env.non_finite()):
                    reasons.append(f"the health flag raised in envs {env.non_finite_envs().tolist()[:8]}")
                if reasons:
                    failure = f"steps {max(1, step - check_every + 1)}-{step}: " + "; ".join(reasons)
                    n_steps = step
                    break
    episodes = int(env.episode.long().sum() - episodes_before)  # every auto-reset began one
    return SoakResult(name, n_steps, n_envs, episodes, time.perf_counter() - start, failure, float(excess))


def _bounds(env: swarp.Environment, spec) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(lower [2], upper [2], margin [m])`` of the world (infinite bounds in an unbounded one)."""
    bounds = spec.world.bounds
    dev, dtype = env.torch_device, env.dtype
    if bounds is None:
        inf = torch.full((2,), float("inf"), dtype=dtype, device=dev)
        return -inf, inf, float("inf")
    lower = torch.tensor([bounds[0], bounds[2]], dtype=dtype, device=dev)
    upper = torch.tensor([bounds[1], bounds[3]], dtype=dtype, device=dev)
    reach = max([a.radius for a in spec.agents] + [b.bounding_radius for b in spec.world.bodies])
    speed = max(a.max_speed for a in spec.agents)
    mass = max([a.mass for a in spec.agents] + [b.mass for b in spec.world.bodies])
    k, h = spec.world.collision_k, spec.dt / spec.substeps
    # How deep a soft wall lets a centre in: a step's travel before it reacts, then the spring's
    # stopping distance (an inertial body's sqrt(m / k) v, a velocity-commanded agent's m v / (k h)),
    # twice over for a neighbour pressing from behind. Deeper pile-ups press deeper still: this
    # check is for escapes and blow-ups, not for the spring's depth.
    stop = speed * max(math.sqrt(mass / k), mass / (k * h)) if k > 0 else float("inf")
    return lower, upper, reach + speed * spec.dt + 2.0 * stop


def main(argv=None) -> list[SoakResult]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available)")
    parser.add_argument("--scenarios", nargs="+", default=None, choices=swarp.scenario_names())
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=int, default=1000)
    parser.add_argument("--full-check-every", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args(argv)
    device = args.device or ("cuda:0" if wp.is_cuda_available() else "cpu")
    print(
        f"device={device} steps={args.steps} envs={args.envs} seed={args.seed} dtype={args.dtype} "
        f"full checks every {args.full_check_every} steps",
        flush=True,
    )
    results = []
    for name in args.scenarios or swarp.scenario_names():
        result = soak(
            name, args.steps, args.envs, device, args.seed, args.check_every, args.full_check_every, dtype=args.dtype
        )
        results.append(result)
        print(f"  {name}: {'ok' if result.failure is None else result.failure}", flush=True)
    rows = [
        [r.scenario, r.steps, r.steps * r.n_envs, r.episodes, round(r.worst_excess, 4), round(r.seconds, 1),
         r.failure or "ok"]
        for r in results
    ]  # fmt: skip
    print_table(["scenario", "steps", "env-steps", "episodes", "max excess [m]", "seconds", "result"], rows)
    if any(r.failure for r in results):
        raise SystemExit(1)
    return results


if __name__ == "__main__":
    main()
