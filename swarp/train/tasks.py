"""One task record per registered scenario: what training it needs beyond the algorithm.

A record says how long an episode is, which scenario options to build it with, what "success" means
at the end of an episode, and the hyper-parameters that differ from ``TrainConfig``'s defaults.
``swarp.train.train`` uses the record of its scenario by default; a scenario without one trains
with its own defaults and ``terminated`` as success.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from swarp.scenarios.framework.base import scenario_names


@dataclass(frozen=True)
class Task:
    """What a training run of one scenario needs beyond the algorithm's defaults.

    Attributes:
        max_steps: Episode length [steps] (``None``: the scenario's default).
        options: Scenario options passed to ``swarp.make`` (``n_agents``, ``substeps``, ...).
        success: The success test at the end of an episode: ``"terminated"`` (it ended in a
            terminal state) or ``"info:<key>"`` (the scenario's info entry ``<key>`` is true for
            every agent, or for the env when the entry is per env).
        overrides: ``TrainConfig`` fields that differ for this task (e.g. ``{"total_steps": ...}``).
    """

    max_steps: int | None = None
    options: dict = field(default_factory=dict)
    success: str = "terminated"
    overrides: dict = field(default_factory=dict)


TASKS: dict[str, Task] = {
    # 4 agents, goal radius = agent radius; success: every agent on its goal at once. A straight
    # crossing of the 2 m arena takes ~30 steps at full speed.
    "navigation": Task(max_steps=100, options={"n_agents": 4, "substeps": 1}),
    # Flocking never terminates: success is every agent in the target disc, touching nobody, at the
    # last step of the episode. lr 3e-4 x 4 epochs: at navigation's 1e-3 x 2 it reached 1.00 and
    # then drifted down to 0.45 (H200, docs/results.md).
    "flocking": Task(success="info:in_flock", overrides={"lr": 3e-4, "epochs": 4}),
    "formation": Task(),
    # The entropy bonus (here and for transport and push_t) kept IPPO's seeds exploring: without it
    # 1 of 3 (discovery), 2 of 3 (transport) and 1 of 3 (push_t) seeds stalled (docs/results.md).
    "discovery": Task(overrides={"ent_coef": 0.05}),
    # Collect at least half of the field's mass (the scenario's success_fraction) in 100 steps.
    "sampling": Task(success="info:success"),
    # Both agents home; one must wait in the bay for the other (difficulty 1, one lane). The
    # scenario's route shaping makes the bay pay; the entropy bonus keeps the yielder's actions from
    # saturating in the bay (without it, it never stepped out again: docs/results.md).
    "give_way": Task(overrides={"ent_coef": 0.05}),
    # Every landmark covered at the episode's end (MPE's 25 steps). lr 3e-4 x 4 epochs: 1e-3
    # plateaued at 0.85-0.90, 1e-3 x 4 epochs peaked at 0.91 and fell to 0.70.
    "spread": Task(success="info:covered", overrides={"lr": 3e-4, "epochs": 4}),
    # Body scenarios end an episode on success or on failure (balance: the package fell), so
    # success is their per-env info flag, not termination.
    "transport": Task(success="info:success", overrides={"ent_coef": 0.05}),
    "push_t": Task(success="info:success", overrides={"ent_coef": 0.05}),
    # No penalty for the fall beyond the episode's end: with failure_penalty 1 (the scenario's
    # default) standing still beat every early lift, which ends in a fall, and seeds stayed at 0 for
    # 200 M env-steps; without it all three seeds passed 0.99 in 6.5 s (H200, session 17). lr 3e-4 x
    # 4 epochs: 1e-3 (x 2 or 4 epochs, 4,096 or 16,384 envs) stalled at 0.35-0.55.
    "balance": Task(success="info:success", options={"failure_penalty": 0.0}, overrides={"lr": 3e-4, "epochs": 4}),
    # Navigation flown by quadrotors (rotor thrusts): the same success test.
    "drone_navigation": Task(),
}


def get_task(scenario: str) -> Task:
    """The task record of ``scenario`` (a default ``Task`` for a registered scenario without one).

    Raises:
        ValueError: ``scenario`` is not registered.
    """
    if scenario not in scenario_names():
        raise ValueError(f"unknown scenario {scenario!r}; registered: {scenario_names()}")
    return TASKS.get(scenario, Task())


def episode_success(task: Task, terminated: torch.Tensor, info: dict) -> torch.Tensor:
    """[E] bool: the task's success test on the step that just ran (meaningful where it ended an
    episode). ``terminated`` [E] bool; ``info`` the step's info dict."""
    if task.success == "terminated":
        return terminated
    if task.success.startswith("info:"):
        key = task.success[len("info:") :]
        if key not in info:
            raise ValueError(f"success metric {task.success!r}: the scenario's info has no {key!r} ({sorted(info)})")
        value = info[key].bool()
        return value if value.dim() == 1 else value.flatten(1).all(-1)
    raise ValueError(f"unknown success metric {task.success!r}: 'terminated' or 'info:<key>'")
