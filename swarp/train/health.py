"""Divergence stops a run: the trainer's health flags, read once an iteration without stalling the device.

``Trainer.health_flags()`` is a [K, C] bool device tensor (``ppo.HEALTH_CHECKS``: a non-finite loss,
gradient norm or parameter, raised inside the captured update, and the env's own ``non_finite()``
and ``invalid_actions()`` flags). ``HealthWatch.check`` copies it to pinned host memory after each
iteration and, on CUDA, reads the copy of the iteration before, which finished while the current
one was queued: the host never waits for the device it has just fed, and a divergence is known
one iteration late at most (at once where the caller has synced anyway). On the CPU it reads at once.
"""

from __future__ import annotations

import torch

from swarp.train.ppo import HEALTH_CHECKS


class TrainingDiverged(RuntimeError):
    """Training stopped because a run went non-finite.

    Attributes:
        iteration: The first iteration after which a check failed.
        runs: The runs (indices into the seeds) that failed.
        checks: Per failed run, the names of the checks that failed (``ppo.HEALTH_CHECKS``).
    """

    def __init__(self, message: str, iteration: int, runs: list[int], checks: list[list[str]]):
        super().__init__(message)
        self.iteration, self.runs, self.checks = iteration, runs, checks


class HealthWatch:
    """Reads ``trainer.health_flags()`` once an iteration (see the module doc)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.cuda = trainer.health.device.type == "cuda"
        self.pending: list[tuple[int, int]] = []  # (iteration, slot) copied but not yet read
        if self.cuda:
            shape = (2, trainer.n_runs, len(HEALTH_CHECKS))
            self.host = torch.zeros(shape, dtype=torch.bool, pin_memory=True)
            self.events = [torch.cuda.Event(), torch.cuda.Event()]

    def check(self, iteration: int, now: bool = False) -> tuple[int, torch.Tensor] | None:
        """Record the flags after ``iteration`` and read what is ready: on the CPU, or with ``now``
        (a sync), this iteration's; otherwise the previous one's. Returns ``(iteration, flags [K, C])``
        of the first failed read, else ``None``."""
        flags = self.trainer.health_flags()
        if not self.cuda:
            return (iteration, flags.clone()) if bool(flags.any()) else None
        slot = iteration % 2
        self.host[slot].copy_(flags, non_blocking=True)
        self.events[slot].record()
        self.pending.append((iteration, slot))
        ready, self.pending = (self.pending, []) if now else (self.pending[:-1], self.pending[-1:])
        for done, done_slot in ready:
            self.events[done_slot].synchronize()
            if bool(self.host[done_slot].any()):
                return done, self.host[done_slot].clone()
        return None


def diverged(iteration: int, flags: torch.Tensor, seeds: list[int], frames: int, config,
             kept: dict[int, str]) -> TrainingDiverged:  # fmt: skip
    """The error for the failed ``flags`` [K, C] after ``iteration``: which runs, which checks, what
    was kept (``kept``: run -> the last finite checkpoint's description) and what to try."""
    runs = [k for k in range(flags.shape[0]) if bool(flags[k].any())]
    checks = [[name for name, bad in zip(HEALTH_CHECKS, flags[k].tolist(), strict=True) if bad] for k in runs]
    lines = [f"training diverged at iteration {iteration} ({frames:,} env-steps per run):"]
    for k, names in zip(runs, checks, strict=True):
        lines.append(f"  seed {seeds[k]}: non-finite {', '.join(names)}; " + kept.get(k, "no checkpoint was written"))
    env_only = all(set(names) <= set(HEALTH_CHECKS[3:]) for names in checks)
    if env_only:
        lines.append("The environment went non-finite under finite actions: a scenario's state, observation "
                     "or reward (env.non_finite_envs() lists the envs; swarp.testing.check_scenario tests a "
                     "scenario).")  # fmt: skip
    else:
        lines.append(f"Try a lower lr (now {config.lr:g}) or max_grad_norm (now {config.max_grad_norm:g}), or "
                     "norm_returns=True for large rewards.")  # fmt: skip
    lines.append("No checkpoint of non-finite weights was written.")
    return TrainingDiverged("\n".join(lines), iteration, runs, checks)
