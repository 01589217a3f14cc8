"""Forward + backward time of a T-step differentiable rollout, against VMAS with grad_enabled=True.

    python -m swarp.benchmark.grad                             # CPU, plus CUDA when present
    python -m swarp.benchmark.grad --device cpu --envs 1 64 1024 --steps 30

For each (device, n_envs) it times, after a warm-up, one optimizer-style iteration: roll out T steps
from a fixed start with actions that require grad, reduce to a scalar loss, ``loss.backward()``.

* ``rollout``: ``swarp.rollout`` on the bare physics (navigation's agents and arena: 4 holonomic
  agents of radius 0.05 m, velocity control, soft walls at +-1 m, collisions), fresh taped buffers;
  loss: squared distance of the final positions to goals. Full backpropagation through time.
* ``rollout+ring``: the same with a ``GradRing`` (taped scratch allocated once).
* ``graph``: the same rollout through a ``RolloutGraph``: forward and backward each one graph launch
  (CUDA graphs on the GPU, Warp's recorded operation stream on the CPU), no per-step Python.
* ``env direct`` / ``env recompute`` / ``env compiled``: ``Environment.step`` on navigation with
  grads, T times, with ``plan.grad_step`` ``"direct"`` / ``"recompute"`` / ``"compiled"``
  (``swarp.env.grad``; the warm-up iteration compiles); loss: the sum of rewards.
  Each step's gradient reaches that step's actions (the env state entering a step is a constant).
* ``vmas``: VMAS 1.5.2 navigation (its defaults, 4 agents), ``grad_enabled=True``, T steps;
  loss: the sum of rewards. VMAS carries the gradient through its state across steps. Skipped
  with a message when vmas is not installed (``pip install vmas==1.5.2``).

The observations differ (swarp: k nearest neighbours; VMAS: 12-ray lidar), so the VMAS column
compares the two simulators' default navigation tasks, not identical arithmetic.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from collections.abc import Callable

import torch
import warp as wp

import swarp
from swarp import AgentConfig, Stepper, TorchState, WorldConfig, rollout
from swarp.benchmark.common import print_table, synchronize
from swarp.physics.autograd import GradRing, RolloutGraph

N_AGENTS = 4
#: Plan actions are drawn uniformly in +-this [m/s]: inside both simulators' action ranges.
ACTION_SCALE = 0.8


def time_iterations(
    setup: Callable[[], object], iteration: Callable[[object], None], device: str, repeats: int
) -> float:
    """Median wall time [s] of ``iteration(setup())`` over ``repeats`` runs after one warm-up;
    ``setup`` (fresh start state, zeroed grads) is not timed, and Python's cycle collector is run
    before and paused during each timed run (as ``timeit`` does): VMAS leaves cyclic garbage whose
    collection otherwise lands at random in someone's timed region."""
    wp.init()
    samples = []
    for rep in range(repeats + 1):
        context = setup()
        gc.collect()
        gc.disable()
        try:
            synchronize(device)
            start = time.perf_counter()
            iteration(context)
            synchronize(device)
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        if rep:
            samples.append(elapsed)
        del context
    return statistics.median(samples)


def random_plan(n_steps: int, n_envs: int, device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    u = torch.rand(n_steps, n_envs, N_AGENTS, 2, generator=gen)
    return (ACTION_SCALE * (2.0 * u - 1.0)).to(device).requires_grad_()


def physics_problem(n_envs: int, device: str, n_steps: int, seed: int = 0):
    """A stepper with navigation's agents and arena, a start state, goals and a plan [T, E, A, 2]."""
    stepper = Stepper(
        [AgentConfig(radius=0.05, max_speed=1.0)] * N_AGENTS,
        dt=0.1,
        device=device,
        world=WorldConfig(bounds=1.0, bounds_mode="soft"),
    )
    gen = torch.Generator().manual_seed(seed)
    pos = (torch.rand(n_envs, N_AGENTS, 2, generator=gen) * 1.8 - 0.9).to(stepper.torch_device)
    goals = (torch.rand(n_envs, N_AGENTS, 2, generator=gen) * 1.8 - 0.9).to(stepper.torch_device)
    zeros = torch.zeros(n_envs, N_AGENTS, device=stepper.torch_device)
    state0 = TorchState(pos, zeros, torch.zeros_like(pos), zeros, zeros)
    return stepper, state0, goals, random_plan(n_steps, n_envs, stepper.torch_device)


def time_rollout(n_envs: int, device: str, n_steps: int, mode: str, repeats: int) -> float:
    """``mode``: ``"fresh"`` (``rollout``), ``"ring"`` (``rollout`` with a ``GradRing``) or
    ``"graph"`` (a ``RolloutGraph``)."""
    stepper, state0, goals, plan = physics_problem(n_envs, device, n_steps)
    if mode == "graph":
        run = RolloutGraph(stepper, n_envs, n_steps)
    else:
        ring = GradRing(stepper, n_envs, stepper.act_dim, n_steps) if mode == "ring" else None

        def run(state, actions):
            return rollout(stepper, state, actions, ring=ring)

    def setup():
        plan.grad = None

    def iteration(_):
        final, _ = run(state0, plan)
        (final.pos - goals).square().sum().backward()

    return time_iterations(setup, iteration, device, repeats)


def time_env(n_envs: int, device: str, n_steps: int, repeats: int, grad_step: str) -> float:
    env = swarp.make(
        "navigation", n_envs=n_envs, device=device, seed=0, n_agents=N_AGENTS, plan={"grad_step": grad_step}
    )
    plan = random_plan(n_steps, n_envs, env.torch_device)
    start = env.get_state()

    def setup():
        plan.grad = None
        env.set_state(start)

    def iteration(_):
        loss = 0.0
        for t in range(n_steps):
            loss = loss + env.step(plan[t])[1].sum()
        loss.backward()

    return time_iterations(setup, iteration, device, repeats)


def time_vmas(n_envs: int, device: str, n_steps: int, repeats: int) -> float:
    import vmas

    plan = random_plan(n_steps, n_envs, device)

    def setup():
        # A fresh env per iteration: VMAS's reset leaves tensors of the previous graph in its state.
        plan.grad = None
        env = vmas.make_env(
            "navigation",
            num_envs=n_envs,
            device=device,
            continuous_actions=True,
            n_agents=N_AGENTS,
            seed=0,
            grad_enabled=True,
        )
        env.reset()
        return env

    def iteration(env):
        loss = 0.0
        for t in range(n_steps):
            _, rewards, _, _ = env.step([plan[t, :, i] for i in range(N_AGENTS)])
            loss = loss + sum(r.sum() for r in rewards)
        loss.backward()

    return time_iterations(setup, iteration, device, repeats)


def vmas_available() -> bool:
    try:
        import vmas  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", nargs="+", default=None, help="devices (default: cpu, plus cuda:0 if present)")
    parser.add_argument("--envs", type=int, nargs="+", default=None, help="n_envs values")
    parser.add_argument("--steps", type=int, default=30, help="T, steps per rollout")
    parser.add_argument("--repeats", type=int, default=5, help="timed iterations (the median is reported)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--no-vmas", action="store_true", help="skip VMAS even when installed")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu", "cuda:0"] if wp.is_cuda_available() else ["cpu"])
    with_vmas = not args.no_vmas and vmas_available()
    if not args.no_vmas and not with_vmas:
        print("vmas is not installed: the VMAS column is skipped (pip install vmas==1.5.2)")
    rows = []
    for device in devices:
        cuda = device.startswith("cuda")
        for n_envs in args.envs or ([1024, 4096, 16384] if cuda else [1, 64, 1024]):
            fresh = time_rollout(n_envs, device, args.steps, "fresh", args.repeats)
            ring = time_rollout(n_envs, device, args.steps, "ring", args.repeats)
            graphed = time_rollout(n_envs, device, args.steps, "graph", args.repeats)
            direct = time_env(n_envs, device, args.steps, args.repeats, "direct")
            recompute = time_env(n_envs, device, args.steps, args.repeats, "recompute")
            compiled = time_env(n_envs, device, args.steps, args.repeats, "compiled")
            vmas_seconds = time_vmas(n_envs, device, args.steps, args.repeats) if with_vmas else math.nan
            synchronize(device)
            rows.append(
                [
                    device,
                    n_envs,
                    N_AGENTS,
                    args.steps,
                    fresh * 1e3,
                    ring * 1e3,
                    graphed * 1e3,
                    direct * 1e3,
                    recompute * 1e3,
                    compiled * 1e3,
                    vmas_seconds * 1e3,
                    vmas_seconds / direct,
                    vmas_seconds / recompute,
                    vmas_seconds / compiled,
                    vmas_seconds / ring,
                    vmas_seconds / graphed,
                ]
            )
            print(f"  done {device} {n_envs}x{N_AGENTS}", flush=True)
    print()
    print_table(
        [
            "device",
            "n_envs",
            "n_agents",
            "T",
            "rollout ms",
            "rollout+ring ms",
            "graph ms",
            "env direct ms",
            "env recompute ms",
            "env compiled ms",
            "vmas ms",
            "vmas/direct",
            "vmas/recompute",
            "vmas/compiled",
            "vmas/ring",
            "vmas/graph",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
