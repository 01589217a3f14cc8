"""Cumulative optimization ablation of the environment step, each stage gated on parity.

    python -m swarp.benchmark.ablation                          # default grid on CPU or CUDA
    python -m swarp.benchmark.ablation --envs 16384 --agents 16

Stages, each adding one optimization to the previous one (navigation, obstacle-free):

====================  =====================================================================
stage                 configuration
====================  =====================================================================
plain launches        torch reference obs/reward (``fused=False``), ``SWARP_LAUNCH_MODE=eager``,
                      resets by ``env.reset_at(env.done)`` after each step
launch replay         the same, physics launches recorded once and replayed
fused obs/reward      Warp observation/reward/bookkeeping kernels (``fused=True``), replayed
whole-step graph      the step captured as one graph (``use_graph="auto"``); reset still by
                      ``reset_at`` (a second graph launch)
in-graph reset        ``auto_reset=True``: the masked reset folded into the step's graph
====================  =====================================================================

Parity gate: before any timing, every stage rolls out the same seeded action sequence on a small
batch with short episodes (so resets happen) and records, per step, the observation (after resets),
reward, terminated, truncated, and the final observation of finished envs. Each stage must
reproduce the previous stage's record bit for bit, except the torch -> Warp kernels stage, which
must agree within ``FUSED_ATOL``/``FUSED_RTOL`` (float32 arithmetic in another order; the flags
must still match exactly). A mismatch raises ``ParityError`` and nothing is timed.

Timing: per stage and batch shape, the median wall time of one step (the ``reset_at`` call included
where the stage resets outside the step), with the realistic reset share of
``swarp.benchmark.throughput`` (episode clocks spread over ``max_steps``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses

import torch
import warp as wp

import swarp
from swarp.benchmark.common import environment_variable, print_table, time_wall
from swarp.benchmark.throughput import make_env
from swarp.runtime.launch import LAUNCH_MODE_ENV

#: Tolerance of the torch-reference -> fused-kernels stage: float32 results computed in another
#: order (observations in m and m/s, rewards in reward units).
FUSED_ATOL = 1e-5
FUSED_RTOL = 1e-5
#: Episode length of the parity rollout [steps]: short, so every stage's reset path is exercised.
PARITY_MAX_STEPS = 7
#: Names of the recorded per-step outputs.
RECORD_FIELDS = ("obs", "reward", "terminated", "truncated", "final_obs")


class ParityError(AssertionError):
    """A stage's outputs differ from the previous stage's beyond what the gate allows."""


@dataclasses.dataclass(frozen=True)
class Stage:
    """One configuration of the ablation.

    Attributes:
        name: Row label.
        launch_mode: ``SWARP_LAUNCH_MODE`` while the stage builds and runs (``"eager"``/``"replay"``).
        fused: ``Environment(fused=...)``.
        use_graph: ``Environment(use_graph=...)``.
        in_step_reset: ``auto_reset=True`` (reset inside ``step``); otherwise the harness calls
            ``env.reset_at(env.done)`` after every step.
        tolerance: ``None``: bit-identical to the previous stage; ``(atol, rtol)``: within it.
        options: Extra navigation options (tests use them to inject a difference).
    """

    name: str
    launch_mode: str
    fused: bool
    use_graph: bool | str
    in_step_reset: bool
    tolerance: tuple[float, float] | None = None
    options: dict = dataclasses.field(default_factory=dict)


STAGES = (
    Stage("plain launches", "eager", fused=False, use_graph=False, in_step_reset=False),
    Stage("launch replay", "replay", fused=False, use_graph=False, in_step_reset=False),
    Stage("fused obs/reward", "replay", True, False, False, tolerance=(FUSED_ATOL, FUSED_RTOL)),
    Stage("whole-step graph", "replay", fused=True, use_graph="auto", in_step_reset=False),
    Stage("in-graph reset", "replay", fused=True, use_graph="auto", in_step_reset=True),
)


def launch_mode(mode: str) -> contextlib.AbstractContextManager[None]:
    """Set ``SWARP_LAUNCH_MODE`` for the duration (the physics reads it at every step)."""
    return environment_variable(LAUNCH_MODE_ENV, mode)


def build(stage: Stage, n_envs: int, n_agents: int, device: str, max_steps: int) -> swarp.Environment:
    """The stage's navigation env (call inside ``launch_mode(stage.launch_mode)``)."""
    return make_env(
        n_envs, n_agents, device, stage.use_graph, stage.fused, stage.in_step_reset, max_steps, **stage.options
    )


def run_step(env: swarp.Environment, stage: Stage, actions: torch.Tensor, record: bool) -> dict | None:
    """One step of the stage (its ``reset_at`` included); with ``record``, the outputs the gate
    compares (copies on the env's device), else ``None`` (the timed path: no extra work)."""
    obs, reward, terminated, truncated, info = env.step(actions)
    if stage.in_step_reset:
        final = info["final_obs"] if record else None
    else:
        final = obs.clone() if record else None
        env.reset_at(env.done)
    if not record:
        return None
    done = env.done.view(-1, 1, 1)
    return {
        "obs": env.obs.clone(),
        "reward": reward.clone(),
        "terminated": terminated.clone(),
        "truncated": truncated.clone(),
        "final_obs": torch.where(done, final, torch.zeros_like(final)),
    }


def action_sequence(env: swarp.Environment, n_steps: int, seed: int = 3) -> torch.Tensor:
    """[n_steps, E, A, act_dim] actions drawn uniformly inside ``env.action_bounds`` (seeded)."""
    low, high = env.action_bounds
    gen = torch.Generator(device="cpu").manual_seed(seed)
    u = torch.rand(n_steps, env.n_envs, env.n_agents, env.act_dim, generator=gen, dtype=env.dtype)
    return (low + (high - low) * u.to(env.torch_device)).contiguous()


def parity_record(stage: Stage, n_envs: int, n_agents: int, device: str, n_steps: int) -> dict[str, torch.Tensor]:
    """Roll the stage out for ``n_steps`` steps; each field stacked over steps, on the CPU."""
    with launch_mode(stage.launch_mode), torch.no_grad():
        env = build(stage, n_envs, n_agents, device, PARITY_MAX_STEPS)
        steps = [run_step(env, stage, a, record=True) for a in action_sequence(env, n_steps)]
        steps = [{k: v.cpu() for k, v in s.items()} for s in steps]
    return {k: torch.stack([s[k] for s in steps]) for k in RECORD_FIELDS}


def check_parity(previous: str, ref: dict, name: str, record: dict, tolerance: tuple[float, float] | None) -> str:
    """Gate ``record`` (stage ``name``) against ``ref`` (stage ``previous``); return a summary.

    Raises:
        ParityError: a field differs (bit for bit, or beyond ``tolerance`` for floating fields;
            boolean fields must always match exactly), naming the field, step and largest difference.
    """
    worst = 0.0
    for field in RECORD_FIELDS:
        a, b = ref[field], record[field]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ParityError(
                f"{name} vs {previous}: {field} is {b.dtype}{list(b.shape)}, expected {a.dtype}{list(a.shape)}"
            )
        if tolerance is None or not a.is_floating_point():
            bad = a != b
        else:
            atol, rtol = tolerance
            bad = ~torch.isclose(b, a, rtol=rtol, atol=atol)
        if bad.any():
            step = int(bad.flatten(1).any(1).nonzero()[0])
            diff = (b.double() - a.double()).abs().max().item() if a.is_floating_point() else int(bad.sum())
            rule = "bit for bit" if tolerance is None else f"within atol={tolerance[0]:g}, rtol={tolerance[1]:g}"
            raise ParityError(
                f"parity gate failed: stage {name!r} differs from {previous!r} in {field} (first at step {step}, "
                f"{int(bad.sum())} elements, largest difference {diff}); required: {rule}"
            )
        if a.is_floating_point():
            worst = max(worst, (b.double() - a.double()).abs().max().item())
    return "exact" if worst == 0.0 else f"max |diff| {worst:.1e}"


def gate_stages(
    stages: tuple[Stage, ...] | list[Stage], n_envs: int, n_agents: int, device: str, n_steps: int
) -> list[str]:
    """Run the parity gate through ``stages`` in order; return one summary per stage.

    Raises:
        ParityError: at the first stage that breaks parity with its predecessor.
    """
    summaries = ["reference"]
    ref = parity_record(stages[0], n_envs, n_agents, device, n_steps)
    for prev, stage in zip(stages[:-1], stages[1:], strict=True):
        record = parity_record(stage, n_envs, n_agents, device, n_steps)
        summaries.append(check_parity(prev.name, ref, stage.name, record, stage.tolerance))
        ref = record
    return summaries


def time_stage(stage: Stage, n_envs: int, n_agents: int, device: str, iters: int, repeats: int) -> tuple[float, str]:
    """``(seconds per step, execution mode)`` of the stage, median of ``repeats``."""
    with launch_mode(stage.launch_mode), torch.no_grad():
        env = build(stage, n_envs, n_agents, device, max_steps=200)
        actions = action_sequence(env, 1)[0]
        for _ in range(3):
            run_step(env, stage, actions, record=False)
        seconds = time_wall(lambda: run_step(env, stage, actions, record=False), env.device, iters, repeats)
        return seconds, env.execution_mode


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available)")
    parser.add_argument("--envs", type=int, nargs="+", default=None)
    parser.add_argument("--agents", type=int, nargs="+", default=None)
    parser.add_argument("--iters", type=int, default=None, help="steps per timed repetition")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parity-envs", type=int, default=64, help="batch of the parity rollout")
    parser.add_argument("--parity-steps", type=int, default=30, help="steps of the parity rollout")
    args = parser.parse_args(argv)
    device = args.device or ("cuda:0" if wp.is_cuda_available() else "cpu")
    cuda = device.startswith("cuda")
    envs = args.envs or ([1024, 4096, 16384] if cuda else [64, 1024])
    agents = args.agents or [3, 16]
    iters = args.iters or (200 if cuda else 20)
    print(f"device={device} swarp={swarp.__version__} torch={torch.__version__} warp={wp.__version__}", flush=True)
    gates = {
        n_agents: gate_stages(STAGES, args.parity_envs, n_agents, device, args.parity_steps) for n_agents in agents
    }
    print(f"parity gates passed ({args.parity_envs} envs x {args.parity_steps} steps per agent count)", flush=True)
    rows = []
    for n_envs in envs:
        for n_agents in agents:
            base = prev = None
            for stage, gate in zip(STAGES, gates[n_agents], strict=True):
                sec, mode = time_stage(stage, n_envs, n_agents, device, iters, args.repeats)
                base = base or sec
                rows.append(
                    [n_envs, n_agents, stage.name, mode, sec * 1e6, n_envs / sec, (prev or sec) / sec, base / sec, gate]
                )
                prev = sec
            print(f"  done {n_envs}x{n_agents}", flush=True)
    print()
    headers = ["n_envs", "n_agents", "stage", "mode", "us/step", "env-steps/s", "vs prev", "vs plain", "parity"]
    print_table(headers, rows)


if __name__ == "__main__":
    main()
