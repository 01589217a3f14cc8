"""Time the bare physics step (no scenario, no observations) over a grid of batch shapes.

    python -m swarp.benchmark.physics                       # CPU and, when present, CUDA
    python -m swarp.benchmark.physics --device cuda --envs 16384 --agents 16 64

For each (n_envs, n_agents) it reports the host-driven wall time per step (recorded-launch replay,
what ``World.step`` does) and, on CUDA, the GPU time per step (the step captured in a graph and
timed with events, so launch overhead is excluded). Compile and capture happen before timing.
Agents are holonomic under velocity control at ~10% area density, moving slowly in random directions
so the density stays put while timing.
"""

from __future__ import annotations

import argparse
import math

import torch
import warp as wp

from swarp import AgentConfig, Stepper, World, WorldConfig
from swarp.benchmark.common import print_table, synchronize, time_graph, time_wall


def make_world(
    n_envs: int, n_agents: int, device: str, substeps: int, seed: int = 0, neighbor_method: str = "auto"
) -> World:
    """A world of ``n_agents`` holonomic agents per env in a box sized for ~10% area density, its
    neighbor lists built by ``neighbor_method`` (``WorldConfig.neighbor_method``)."""
    radius = 0.05
    half = max(1.0, math.sqrt(n_agents * math.pi * radius**2 / 0.1) / 2)
    stepper = Stepper(
        [AgentConfig(radius=radius)] * n_agents,
        dt=0.1,
        device=device,
        world=WorldConfig(bounds=half, neighbor_method=neighbor_method),
        substeps=substeps,
    )
    world = World(stepper, n_envs)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    pos = (torch.rand(n_envs, n_agents, 2, generator=gen) * 2 - 1) * (half - radius)
    world.set_state(pos=pos.to(stepper.torch_device))
    return world


def bench_shape(n_envs: int, n_agents: int, device: str, substeps: int, n_iters: int, method: str = "auto") -> list:
    world = make_world(n_envs, n_agents, device, substeps, neighbor_method=method)
    gen = torch.Generator(device="cpu").manual_seed(1)
    # Slow random headings keep the density near its initial value over the timed steps instead of
    # piling every agent against one wall (which would time a pathological crowd, not a swarm).
    actions = (0.05 * torch.randn(n_envs, n_agents, 2, generator=gen)).to(world.stepper.torch_device)
    world.step(actions)  # compile + record
    synchronize(device)
    wall = time_wall(world.run_step, device, n_iters)
    gpu = time_graph(world.simulate, device, n_iters) if device.startswith("cuda") else float("nan")
    per_step = gpu if device.startswith("cuda") else wall
    method = world.stepper.neighbor_method
    return [device, n_envs, n_agents, method, substeps, wall * 1e3, gpu * 1e6, n_envs * n_agents / per_step]


def breakdown(n_envs: int, n_agents: int, device: str, n_iters: int) -> list:
    """GPU time [us] of each stage of one step: neighbor build, contact forces, integration."""
    world = make_world(n_envs, n_agents, device, 1)
    world.actions.normal_(0.0, 0.05)
    world.run_step()
    st = world.stepper
    stages = {
        "neighbors": lambda: world.build_neighbors(),
        "substep": lambda: st.substep(
            world.state, world.actions_array, world.neighbors, world.forces, world.state, world.invalid_action_flag
        ),
        "step": world.simulate,
    }
    return [n_envs, n_agents] + [time_graph(fn, device, n_iters) * 1e6 for fn in stages.values()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", nargs="+", default=None, help="devices (default: cpu, plus cuda if present)")
    parser.add_argument("--envs", type=int, nargs="+", default=None, help="n_envs values")
    parser.add_argument("--agents", type=int, nargs="+", default=[4, 16, 64], help="n_agents values")
    parser.add_argument("--substeps", type=int, default=1)
    parser.add_argument("--iters", type=int, default=None, help="steps per timing repetition")
    parser.add_argument(
        "--neighbor-method", nargs="+", default=["auto"], choices=["auto", "brute", "grid"], help="one row each"
    )
    parser.add_argument("--breakdown", action="store_true", help="CUDA only: GPU time of each stage")
    args = parser.parse_args(argv)
    if args.breakdown:
        rows = [breakdown(e, a, "cuda:0", args.iters or 200) for e in (args.envs or [16384]) for a in args.agents]
        print_table(["n_envs", "n_agents", "neighbors us", "substep us", "step us"], rows)
        return
    devices = args.device or (["cpu", "cuda:0"] if wp.is_cuda_available() else ["cpu"])
    rows = []
    for device in devices:
        cuda = device.startswith("cuda")
        envs = args.envs or ([1024, 4096, 16384, 65536] if cuda else [16, 256, 1024])
        iters = args.iters or (200 if cuda else 20)
        for n_envs in envs:
            for n_agents in args.agents:
                for method in args.neighbor_method:
                    rows.append(bench_shape(n_envs, n_agents, device, args.substeps, iters, method))
                    print(f"  done {device} {n_envs}x{n_agents} {method}", flush=True)
    print()
    print_table(
        ["device", "n_envs", "n_agents", "neighbors", "substeps", "wall ms/step", "gpu us/step", "agent-steps/s"], rows
    )


if __name__ == "__main__":
    main()
