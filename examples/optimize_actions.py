"""Gradient descent on an action plan: crossing agents learn to yield to each other.

    python examples/optimize_actions.py                        # 4 agents, T=40, 150 iterations
    python examples/optimize_actions.py --n-agents 6 --plot plan.png

No policy and no learning algorithm: the plan itself, actions [T, 1, A, 2], is the parameter.
Agents start evenly spaced on a circle and each must reach the antipodal point, so the initial
straight-line plan runs them all into each other in the middle. The loss is

    sum_i |p_i(T) - goal_i|^2 + action_weight * sum a^2

and nothing in it mentions collisions: the contact forces of the simulation push colliding agents
off course, and the gradient of that detour, which reaches the plan only through the Warp adjoints
of the contact forces and the dynamics (``rollout`` chains T taped steps, ``loss.backward()``
replays them), is what teaches the agents to yield to each other. With ``--collision-weight`` > 0
an explicit term, the contact spring's energy along the trajectory with a safety margin,

    collision_weight * sum_t sum_{i<j} relu(2 r + margin - |p_i(t) - p_j(t)|)^2,

is added; crowded crossings (6 or more agents) need it.

It prints the loss curve, saves a plot of the trajectories and of the curve when matplotlib is
installed (``pip install matplotlib``), and reports whether every agent reached its goal with no
overlap at any step.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass

import torch

from swarp import AgentConfig, Stepper, TorchState, WorldConfig, rollout
from swarp.physics.autograd import GradRing


@dataclass
class Args:
    n_agents: int = 4
    """agents on the start circle; each aims at the antipodal point"""
    circle_radius: float = 1.0
    """radius of the start circle [m]"""
    radius: float = 0.1
    """agent radius [m]"""
    steps: int = 40
    """T, steps in the plan"""
    dt: float = 0.1
    """step length [s]"""
    iters: int = 150
    """optimizer iterations"""
    lr: float = 0.05
    """Adam learning rate [m/s per step]"""
    collision_weight: float = 0.0
    """weight of the explicit contact energy term [1/m^2] (0: contact gradients only)"""
    margin: float = 0.02
    """extra clearance the contact energy term asks for [m]"""
    action_weight: float = 1e-3
    """weight of the action magnitude term [s^2/m^2]"""
    goal_tolerance: float = 0.05
    """distance to goal that counts as reached [m]"""
    init_noise: float = 0.02
    """std of the initial plan's noise [m/s] (breaks the symmetry of the crossing)"""
    seed: int = 0
    """seed of the initial plan's noise"""
    device: str = "cpu"
    """simulation device"""
    log_every: int = 10
    """print the loss every this many iterations"""
    plot: str | None = "optimize_actions.png"
    """path of the saved figure (needs matplotlib); empty to skip"""


@dataclass
class Result:
    losses: list[float]
    """loss per iteration"""
    final_distance: torch.Tensor
    """[A] distance of each agent to its goal at the end of the final plan [m]"""
    min_separation: float
    """smallest centre distance between two agents over the final trajectory [m]"""
    collisions: int
    """(step, pair) overlaps in the final trajectory"""
    initial_collisions: int
    """(step, pair) overlaps in the initial plan"""
    reached: bool
    """every agent within goal_tolerance of its goal"""
    trajectory: torch.Tensor
    """[T + 1, A, 2] positions of the final plan, start included [m]"""
    seconds: float
    """wall time of the optimization [s]"""


def crossing(n_agents: int, circle_radius: float, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Starts evenly spaced on a circle and antipodal goals, each [A, 2] [m]."""
    angle = 2.0 * math.pi * torch.arange(n_agents, dtype=torch.float64) / n_agents
    start = circle_radius * torch.stack([torch.cos(angle), torch.sin(angle)], -1)
    return start.to(dtype), (-start).to(dtype)


def pair_distances(pos: torch.Tensor) -> torch.Tensor:
    """[..., P] centre distances of every unordered pair of agents of ``pos`` [..., A, 2] [m]."""
    i, j = torch.triu_indices(pos.shape[-2], pos.shape[-2], offset=1, device=pos.device)
    return (pos[..., i, :] - pos[..., j, :]).norm(dim=-1)


def optimize(args: Args) -> Result:
    cfg = AgentConfig(radius=args.radius, max_speed=1.0)
    stepper = Stepper([cfg] * args.n_agents, dt=args.dt, device=args.device, world=WorldConfig(collision_k=50.0))
    device, dtype = stepper.torch_device, stepper.torch_dtype
    start, goals = (x.to(device) for x in crossing(args.n_agents, args.circle_radius, dtype))
    zeros = torch.zeros(1, args.n_agents, device=device, dtype=dtype)
    state0 = TorchState(start.unsqueeze(0), zeros, torch.zeros_like(start).unsqueeze(0), zeros, zeros)

    # The straight-line plan at constant speed, plus a little noise to break the symmetry.
    generator = torch.Generator().manual_seed(args.seed)
    straight = (goals - start) / (args.steps * args.dt)
    noise = args.init_noise * torch.randn(args.steps, 1, args.n_agents, 2, generator=generator, dtype=dtype)
    actions = (straight.expand(args.steps, 1, -1, -1) + noise.to(device)).clone().requires_grad_()
    optimizer = torch.optim.Adam([actions], lr=args.lr)
    ring = GradRing(stepper, n_envs=1, act_dim=stepper.act_dim, capacity=args.steps)
    clearance = 2.0 * args.radius + args.margin

    losses = []
    initial_collisions = None
    began = time.perf_counter()
    for it in range(args.iters):
        optimizer.zero_grad()
        final, trajectory = rollout(stepper, state0, actions, ring=ring)  # BPTT through the Warp adjoints
        goal_term = (final.pos[0] - goals).square().sum()
        contact_term = torch.relu(clearance - pair_distances(trajectory.pos)).square().sum()
        loss = goal_term + args.collision_weight * contact_term + args.action_weight * actions.square().sum()
        loss.backward()
        if initial_collisions is None:
            initial_collisions = int((pair_distances(trajectory.pos.detach()) < 2.0 * args.radius).sum().item())
        optimizer.step()
        losses.append(loss.item())
        if args.log_every and (it % args.log_every == 0 or it == args.iters - 1):
            print(
                f"iter {it:4d}  loss {losses[-1]:.5f}  goal {goal_term.item():.5f}  overlap {contact_term.item():.2e}"
            )
    seconds = time.perf_counter() - began

    with torch.no_grad():
        final, trajectory = rollout(stepper, state0, actions)
        final_distance = (final.pos[0] - goals).norm(dim=-1)
        separation = pair_distances(trajectory.pos[:, 0])
        path = torch.cat([start.unsqueeze(0), trajectory.pos[:, 0]]).cpu()
    return Result(
        losses=losses,
        final_distance=final_distance.cpu(),
        min_separation=separation.min().item(),
        collisions=int((separation < 2.0 * args.radius).sum().item()),
        initial_collisions=initial_collisions,
        reached=bool((final_distance < args.goal_tolerance).all().item()),
        trajectory=path,
        seconds=seconds,
    )


def plot(result: Result, args: Args, path: str) -> bool:
    """Save the trajectories and the loss curve to ``path``; ``False`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_paths, ax_loss) = plt.subplots(1, 2, figsize=(10, 4.5))
    traj = result.trajectory.numpy()
    for i in range(traj.shape[1]):
        (line,) = ax_paths.plot(traj[:, i, 0], traj[:, i, 1], lw=1.5)
        ax_paths.add_patch(plt.Circle(traj[0, i], args.radius, fill=False, color=line.get_color()))
        ax_paths.add_patch(plt.Circle(traj[-1, i], args.radius, color=line.get_color(), alpha=0.5))
    ax_paths.set_aspect("equal")
    ax_paths.set_title("optimized plan (start: ring, end: disc)")
    ax_loss.semilogy(result.losses)
    ax_loss.set_xlabel("iteration")
    ax_loss.set_ylabel("loss")
    ax_loss.set_title("loss")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def parse_args(argv=None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(Args):
        kind = str if f.name == "plot" else type(f.default)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    return Args(**vars(parser.parse_args(argv)))


def main(argv=None) -> Result:
    args = parse_args(argv)
    result = optimize(args)
    print(
        f"\n{args.iters} iterations in {result.seconds:.1f} s; distance to goal (max) "
        f"{result.final_distance.max().item():.3f} m; min separation {result.min_separation:.3f} m "
        f"(contact below {2 * args.radius:.3f} m)"
    )
    print(
        f"reached goals: {result.reached}; collisions: {result.collisions} (initial plan: {result.initial_collisions})"
    )
    if args.plot:
        if plot(result, args, args.plot):
            print(f"saved {args.plot}")
        else:
            print("matplotlib is not installed: no plot (pip install matplotlib)")
    return result


if __name__ == "__main__":
    main()
