"""Environment throughput over a grid of (n_envs, n_agents): env-steps/s and agent-steps/s.

    python -m swarp.benchmark.throughput                     # the default grid on CPU or CUDA
    python -m swarp.benchmark.throughput --envs 16384 --agents 16 --use-graph auto false
    python -m swarp.benchmark.throughput --reset-cost        # auto_reset off / realistic / worst case
    python -m swarp.benchmark.throughput --scenario push_t --envs 4096 --agents 4   # a body scenario
    python -m swarp.benchmark.throughput --envs 4096 --agents 16 --lidar-rays 0 32       # lidar cost
    python -m swarp.benchmark.throughput --envs 4096 --agents 16 --scenario drone_navigation  # 6-DOF drones
    python -m swarp.benchmark.throughput --envs 4096 --agents 16 --per-env-params off on random  # per-env params
    python -m swarp.benchmark.throughput --envs 4096 --agents 16 --option action_space=discrete  # discrete actions

Each cell times ``env.step(actions)`` on a scenario (default navigation, with neighbor observations) with the given
flags, after a warm-up that compiles kernels and records or captures the step; the figure is the
median over repetitions. With ``--auto-reset`` (default) episode clocks start desynchronised so a
realistic share of envs (about 1/max_steps) resets each step; ``--reset-cost`` also runs the worst
case where every env resets every step. ``--plan field=value`` fixes fields of the environment's
``ExecutionPlan`` (the A/B of a layout decision); ``SWARP_LAUNCH_MODE=eager`` gives plain launches.
"""

from __future__ import annotations

import argparse
import os

import torch
import warp as wp

import swarp
from swarp import testing
from swarp.benchmark.common import check_health, parse_option, print_table, synchronize, time_wall
from swarp.scenarios.framework.base import add_import_flag, get_scenario, import_scenario_modules

#: Parameter ranges of the per-env parameter cases (SI units; within navigation's defaults).
RANDOM_PARAMS = {"mass": (0.5, 2.0), "max_speed": (0.5, 1.0)}


def _flag(value: str):
    return {"auto": "auto", "true": True, "false": False}[value.lower()]


def make_env(
    n_envs: int,
    n_agents: int,
    device: str,
    use_graph,
    fused,
    auto_reset: bool,
    max_steps: int,
    seed: int = 0,
    env_offset: int = 0,
    scenario: str = "navigation",
    lidar_rays: int = 0,
    per_env_params: str = "off",
    **options,
) -> swarp.Environment:
    """An env of ``scenario`` (``options``: further scenario options) whose episode clocks are
    spread over [0, max_steps) (realistic reset share).

    ``env_offset`` makes it a shard of a larger batch (``swarp.benchmark.distributed``).
    ``lidar_rays`` appends a lidar scan to the observations. ``per_env_params``: ``"off"`` (one
    shared table), ``"on"`` (a randomized table per env, drawn once), ``"random"`` (re-drawn at every
    episode start inside the step graph)."""
    env = swarp.make(
        scenario,
        n_envs=n_envs,
        device=device,
        seed=seed,
        env_offset=env_offset,
        **({} if n_agents is None else {"n_agents": n_agents}),
        auto_reset=auto_reset,
        max_steps=max_steps,
        use_graph=use_graph,
        fused=fused,
        lidar_rays=lidar_rays,
        per_env_params=per_env_params != "off",
        randomize_params=RANDOM_PARAMS if per_env_params == "random" else None,
        **options,
    )
    if per_env_params == "on":
        env.randomize_agent_params(RANDOM_PARAMS)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    env.step_count.copy_(torch.randint(0, max_steps, (n_envs,), generator=gen, dtype=torch.int32))
    return env


def random_actions(env: swarp.Environment, seed: int = 1) -> torch.Tensor:
    """Fixed random actions inside ``env.action_bounds``: [E, A, act_dim], the env's dtype and device
    (with a discrete ``action_space``: [E, A, act_dim] int64 indices, each column uniform over its choices;
    where agent groups' spaces differ: ``swarp.testing.random_actions``' mapping by group)."""
    low, high = env.action_bounds
    if env.action_space is None:
        return testing.random_actions(env, torch.Generator().manual_seed(seed), overshoot=0.0)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    if env.action_space.discrete:
        return env.action_space.sample(env.n_envs, env.n_agents, gen).to(env.torch_device)
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=gen, dtype=env.dtype).to(env.torch_device)
    return (low + (high - low) * u).contiguous()


def bench(env: swarp.Environment, n_iters: int, repeats: int) -> float:
    """Seconds per ``env.step`` (median of ``repeats``), after two warm-up steps."""
    actions = random_actions(env)
    with torch.no_grad():
        env.step(actions)
        env.step(actions)
        synchronize(env.device)
        seconds = time_wall(lambda: env.step(actions), env.device, n_iters, repeats)
    check_health(env, f"throughput of {env.scenario.name} at {env.n_envs} x {env.n_agents}")
    return seconds


def main(argv=None) -> None:
    import_scenario_modules(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available)")
    parser.add_argument("--scenario", default="navigation", choices=swarp.scenario_names())
    add_import_flag(parser)
    parser.add_argument("--envs", type=int, nargs="+", default=None)
    parser.add_argument("--agents", type=int, nargs="+", default=None)
    parser.add_argument("--use-graph", type=_flag, nargs="+", default=["auto"], help="auto/true/false values")
    parser.add_argument("--fused", type=_flag, default="auto")
    parser.add_argument("--no-auto-reset", action="store_true", help="time without auto_reset")
    parser.add_argument("--reset-cost", action="store_true", help="auto_reset off vs realistic vs worst case")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--lidar-rays", type=int, nargs="+", default=[0], help="lidar rays per agent (0: none)")
    parser.add_argument(
        "--per-env-params",
        choices=["off", "on", "random"],
        nargs="+",
        default=["off"],
        help="shared params / a per-env table / re-drawn at every episode start",
    )
    parser.add_argument(
        "--option", action="append", type=parse_option, default=[], help="scenario option key=value (repeatable)"
    )
    parser.add_argument(
        "--plan", action="append", type=parse_option, default=[], help="ExecutionPlan field=value (repeatable)"
    )
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    options = dict(args.option)
    if args.plan:
        options["plan"] = dict(args.plan)
    device = args.device or ("cuda:0" if wp.is_cuda_available() else "cpu")
    cuda = device.startswith("cuda")
    envs = args.envs or ([1024, 4096, 16384, 65536, 262144] if cuda else [64, 256, 1024, 4096])
    # A scenario without an n_agents option (fleet: its groups' counts) runs with its own.
    has_count = "n_agents" in get_scenario(args.scenario).option_names()
    agents = args.agents or ([3, 4, 16, 64] if has_count else [None])
    iters = args.iters or (500 if cuda else 50)
    print(
        f"device={device} launch_mode={os.environ.get('SWARP_LAUNCH_MODE', 'replay')} torch={torch.__version__} "
        f"warp={wp.__version__} scenario={args.scenario}" + "".join(f" {k}={v!r}" for k, v in options.items()),
        flush=True,
    )
    rows = []
    for n_envs in envs:
        for n_agents in agents:
            if n_agents is not None and n_envs * n_agents > 2**24:
                continue
            if args.reset_cost:
                cases = [("off", False, args.max_steps), ("realistic", True, args.max_steps), ("worst", True, 1)]
                base = None
                for label, auto, max_steps in cases:
                    env = make_env(
                        n_envs, n_agents, device, args.use_graph[0], args.fused, auto, max_steps,
                        scenario=args.scenario, **options,
                    )  # fmt: skip
                    sec = bench(env, iters, args.repeats)
                    base = base or sec
                    rows.append([n_envs, env.n_agents, label, env.execution_mode, sec * 1e6, n_envs / sec, sec / base])
                    del env
                continue
            for use_graph in args.use_graph:
                for rays in args.lidar_rays:
                    for params in args.per_env_params:
                        env = make_env(
                            n_envs, n_agents, device, use_graph, args.fused, not args.no_auto_reset, args.max_steps,
                            scenario=args.scenario, lidar_rays=rays, per_env_params=params, **options,
                        )  # fmt: skip
                        sec = bench(env, iters, args.repeats)
                        per_agent = n_envs * env.n_agents / sec
                        rows.append(
                            [n_envs, env.n_agents, rays, params, env.execution_mode, sec * 1e6, n_envs / sec, per_agent]
                        )
                        del env
            print(f"  done {n_envs}x{n_agents}", flush=True)
    print()
    if args.reset_cost:
        print_table(["n_envs", "n_agents", "auto_reset", "mode", "us/step", "env-steps/s", "vs off"], rows)
    else:
        headers = ["n_envs", "n_agents", "lidar", "params", "mode", "us/step", "env-steps/s", "agent-steps/s"]
        print_table(headers, rows)


if __name__ == "__main__":
    main()
