"""The VMAS mode's Warp step against VMAS's own ``World.step``, on one scenario world.

    python -m swarp.benchmark.vmas_mode --device cuda:0 --envs 4096 --scenario navigation
    python -m swarp.benchmark.vmas_mode --device cpu --envs 64 --steps 20 --scenario give_way --option box_agents=True

Builds the scenario's world in VMAS (``vmas.make_env`` with its defaults and the ``--option``s), takes
one env step of random actions so that every agent has an action force, copies the world into
``VmasStep`` (``swarp.testing.vmas_parity``: table, state, agent forces) and then times ``--steps`` steps
of each, after ``--warmup`` untimed ones:

* the Warp step: on CUDA one CUDA graph (``wp.ScopedCapture`` of ``VmasStep.step``) replayed per step,
  on the CPU plain launches;
* VMAS's ``world.step()``: the physics alone (no action processing, rewards or observations), from the
  same state and forces.

Both run ``world.step``'s substeps. It prints the us/step of each, VMAS / Warp, and, as a check, the
largest state difference after one step from the same state (the per-env broad phase and the
transcendentals' rounding make it differ from 0 at times: docs/architecture.md, "The VMAS physics mode").
VMAS is not a swarp dependency: ``pip install vmas==1.5.2``.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings
from collections.abc import Callable

import torch
import warp as wp

from swarp.benchmark.common import parse_option
from swarp.physics.vmas_mode.kernels import VmasStep
from swarp.testing.vmas_parity import (
    VMAS_REQUIREMENT,
    agent_forces,
    entity_state,
    entity_table,
    max_difference,
    record_world_steps,
)


def seconds_per_step(step: Callable[[], None], steps: int, synchronize: Callable[[], None]) -> float:
    """Wall-clock seconds per call of ``step`` over ``steps`` calls, the device idle before and after."""
    synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    return (time.perf_counter() - start) / steps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="navigation", help="a VMAS scenario without joints")
    parser.add_argument("--envs", type=int, default=4096, help="envs stepped at once")
    parser.add_argument("--steps", type=int, default=100, help="timed env steps of each simulator")
    parser.add_argument("--warmup", type=int, default=10, help="untimed env steps of each before timing")
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--option", type=parse_option, action="append", default=[], help="scenario key=value")
    args = parser.parse_args(argv)
    if min(args.envs, args.steps) < 1 or args.warmup < 0:
        parser.error("--envs and --steps must be >= 1, --warmup >= 0")
    try:
        import vmas
    except ImportError as error:
        raise SystemExit(f"swarp.benchmark.vmas_mode needs VMAS: pip install {VMAS_REQUIREMENT}") from error

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VMAS warns about unused scenario keywords
        env = vmas.make_env(args.scenario, num_envs=args.envs, device=args.device, seed=args.seed, **dict(args.option))
    env.step(env.get_random_actions())  # every agent's action force set
    world = env.world
    try:
        table, config = entity_table(world)
    except ValueError as error:  # joints, or a shape or parameter the mode does not model
        raise SystemExit(f"{args.scenario}: {error}") from error
    stepper = VmasStep(table, config, args.envs, device=args.device)
    cuda = stepper.device.is_cuda

    def synchronize() -> None:
        wp.synchronize_device(stepper.device)
        if cuda:
            torch.cuda.synchronize(args.device)

    with record_world_steps(world) as records:
        world.step()
    check = records[0]
    difference = max_difference(stepper.step_tensors(check.before, check.force, check.torque), check.after)

    state, (force, torque) = entity_state(world), agent_forces(world)
    arrays = [
        wp.from_torch(t.clone().contiguous(), dtype=wp.vec2 if t.dim() == 3 else wp.float32)
        for t in (*state, force, torque)
    ]

    warp_step = functools.partial(stepper.step, *arrays)
    if cuda:
        synchronize()  # the copies above run on torch's stream, the capture on Warp's
        with wp.ScopedCapture(device=stepper.device, force_module_load=False) as capture:
            warp_step()
        warp_step = functools.partial(wp.capture_launch, capture.graph)

    seconds_per_step(warp_step, args.warmup, synchronize)
    warp_s = seconds_per_step(warp_step, args.steps, synchronize)
    seconds_per_step(world.step, args.warmup, synchronize)
    vmas_s = seconds_per_step(world.step, args.steps, synchronize)
    options = f" {dict(args.option)}" if args.option else ""
    print(
        f"{args.scenario}{options} on {args.device}: {args.envs} envs, {table.n_entities} entities, "
        f"{config.substeps} substeps; one step from the same state differs by {difference:.2e}"
    )
    print(f"warp ({'CUDA graph' if cuda else 'launches'}): {warp_s * 1e6:,.1f} us/step")
    print(f"vmas world.step():   {vmas_s * 1e6:,.1f} us/step")
    print(f"vmas / warp:         {vmas_s / warp_s:.2f}x")


if __name__ == "__main__":
    main()
