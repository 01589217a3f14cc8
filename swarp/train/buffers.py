"""The storage and the clock of a training iteration: ``Buffers`` (one iteration's transitions of K
runs, preallocated on the device, so a captured rollout and update write into the same memory every
replay) and ``StageClock`` (the device time of each stage)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch


@dataclass
class Buffers:
    """One iteration's data, [K, T, E, A, ...] (K runs, T rollout steps, E envs, A agents), on the device."""

    obs: torch.Tensor  # [K, T, E, A, O] observation the action was chosen from (O: the widest group's)
    raw_actions: list[torch.Tensor]  # per group [K, T, E, A_g, U_g]: pre-squash Gaussian samples or int64 indices
    log_prob: torch.Tensor  # [K, T, E, A]
    value: torch.Tensor  # [K, T, E, A]
    reward: torch.Tensor  # [K, T, E, A]
    terminated: torch.Tensor  # [K, T, E] bool
    truncated: torch.Tensor  # [K, T, E] bool
    final_obs: torch.Tensor  # [K, T, E, A, O] last observation of the episodes that ended at t (else stale)
    advantage: torch.Tensor  # [K, T, E, A]
    returns: torch.Tensor  # [K, T, E, A] value targets
    # With the env's alive mask (``env.alive``, swarp.runtime.alive), else None:
    acting: torch.Tensor | None = None  # [K, T, E, A] bool, the agent acted at t (alive when t began)
    left: torch.Tensor | None = None  # [K, T, E, A] bool, the agent left at t in an episode going on

    @classmethod
    def allocate(cls, K: int, T: int, E: int, A: int, obs_dim: int, actions: list[tuple[int, int, torch.dtype]],
                 device: torch.device, masked: bool = False) -> Buffers:  # fmt: skip
        """Zeroed buffers; ``actions`` gives each group's ``(A_g, U_g, dtype)`` of its ``raw_actions``
        (float32 pre-squash samples, or int64 for the indices of discrete actions); ``masked``: with
        ``acting`` and ``left`` (envs with an alive mask)."""

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(
            obs=zeros(K, T, E, A, obs_dim),
            raw_actions=[zeros(K, T, E, n, width, dtype=dtype) for n, width, dtype in actions],
            log_prob=zeros(K, T, E, A),
            value=zeros(K, T, E, A),
            reward=zeros(K, T, E, A),
            terminated=zeros(K, T, E, dtype=torch.bool),
            truncated=zeros(K, T, E, dtype=torch.bool),
            final_obs=zeros(K, T, E, A, obs_dim),
            advantage=zeros(K, T, E, A),
            returns=zeros(K, T, E, A),
            acting=zeros(K, T, E, A, dtype=torch.bool) if masked else None,
            left=zeros(K, T, E, A, dtype=torch.bool) if masked else None,
        )

    @property
    def raw_action(self) -> torch.Tensor:
        """The one group's ``raw_actions`` [K, T, E, A, U] (a scenario without groups)."""
        if len(self.raw_actions) != 1:
            raise AttributeError("raw_action: the agents act in groups; see raw_actions (one tensor per group)")
        return self.raw_actions[0]


class StageClock:
    """Per-stage device time of iterations: CUDA events (no sync until ``read``), or the host clock
    on the CPU. ``mark(name)`` starts stage ``name`` (and ends the previous one)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str, object]] = []

    def mark(self, name: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((name, event))
        else:
            self.marks.append((name, time.perf_counter()))

    def read(self) -> dict[str, float]:
        """Mean microseconds per stage over the marked iterations; clears the marks."""
        if self.cuda and self.marks:
            self.marks[-1][1].synchronize()
        totals: dict[str, list[float]] = {}
        for (name, start), (_, end) in zip(self.marks, self.marks[1:], strict=False):
            if name == "end":
                continue
            seconds = start.elapsed_time(end) / 1e3 if self.cuda else end - start
            totals.setdefault(name, []).append(seconds * 1e6)
        self.marks.clear()
        return {name: sum(v) / len(v) for name, v in totals.items()}
