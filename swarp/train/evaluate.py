"""Greedy evaluation on fresh episodes, with random play on the same episodes as the baseline:
``evaluate`` (Python) and ``main`` (the command line ``python -m swarp.train.eval``, whose module
only forwards here).

A policy trained with discrete or multi-discrete actions is scored in an env of its action space;
random play there draws uniform indices of every head. The scenario's scripted controller emits
continuous commands, so its baseline beside a discrete policy is scored on the continuous env of the
same task and the same episodes (the same reset seed gives the same starts in every action space),
and its entry says so (``"action_space": "continuous"``): the controller at full resolution, not a
quantized one.

A policy trained on agent groups (``GroupedPolicy``) acts by group in an env of the same groups;
random play draws each group's actions from its own space, and the scripted controller's command
is handed to each group as its space takes it: a continuous group's rows as they are, a discrete
group's encoded into its nearest levels (``swarp.core.spaces.encode_torch``), that entry then naming
those groups (``"quantized_groups"``).
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
from collections.abc import Callable

import torch

import swarp.distributed as sd
from swarp.render.video import check_video_path, random_action_fn
from swarp.scenarios.framework.base import Scenario, add_import_flag, import_scenario_modules
from swarp.train.action_spaces import (
    flat_reward,
    random_group_actions_fn,
    random_indices_fn,
    scripted_actions_of,
    scripted_group_actions,
    step_actions,
)
from swarp.train.cli import positive_int, scenario_name, scenario_option, seed
from swarp.train.groups import GroupedPolicy
from swarp.train.networks import Policy
from swarp.train.tasks import Task, episode_success, policy_task

#: Evaluation cap [steps] for scenarios without a time limit.
MAX_EVAL_STEPS = 1000


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% for z = 1.96) of a success rate from ``successes`` of ``n``
    (well-behaved at 0 and 1, unlike the normal approximation; ``(0, 1)`` for ``n = 0``)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact ends: no round-off past 0 or 1
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


class Evaluator:
    """Plays one episode in each of ``episodes`` envs from a full reset with seed ``seed`` (the same
    starts every call) and reports the task's success and the return.

    Args:
        scenario: A registered scenario name.
        task: Its task record (episode length, options, success test).
        episodes: Envs, one episode each.
        device: Where the env runs.
        seed: The reset seed of the episodes.
        actions: The env's action space as ``swarp.make`` keywords (``action_space``,
            ``action_nvec``; ``Policy.env_kwargs()``; default: continuous).
    """

    def __init__(self, scenario: str, task: Task, episodes: int, device, seed: int, actions: dict | None = None):
        # Under torch.distributed each rank plays its shard of the episodes (the results are gathered).
        self.env = sd.make_shard(scenario, global_n_envs=episodes, device=device, seed=seed, **task.env_kwargs(),
                                 **(actions or {}))  # fmt: skip
        self.task, self.seed = task, seed
        self.steps = self.env.max_steps or MAX_EVAL_STEPS

    @torch.no_grad()
    def __call__(self, act: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run ``act`` (observations [E, A, O] -> physical actions [E, A, U], or int64 indices
        [E, A, width] in an env of discrete actions; with agent groups ``{group: obs}`` ->
        ``{group: actions}``); returns
        ``{"success": [E] bool, "return": [E] float (mean over agents)}`` of each env's first episode
        (every rank's envs, in global order, under ``torch.distributed``); with agent groups also
        ``"return/<group>"``: [E] float, the mean over the group's agents."""
        env = self.env
        obs, _ = env.reset(seed=self.seed)
        alive = torch.ones(env.n_envs, dtype=torch.bool, device=env.torch_device)
        success = torch.zeros_like(alive)
        groups = env.groups if env.grouped else ()
        episode_return = torch.zeros(1 + len(groups), env.n_envs, device=env.torch_device)  # all agents, each group
        for step in range(self.steps):
            obs, reward, terminated, truncated, info = env.step(step_actions(env, act(obs)))
            done = terminated | truncated
            reward = flat_reward(reward)
            episode_return[0] += alive * reward.mean(-1)
            for i, group in enumerate(groups, start=1):
                episode_return[i] += alive * reward[:, group.agents].mean(-1)
            success |= alive & done & episode_success(self.task, terminated, info)
            alive &= ~done
            if step % 20 == 19 and not sd.all_reduce(alive.any().int()).item():  # a host sync: every 20 steps
                break
        result = {"success": sd.all_gather_envs(success), "return": sd.all_gather_envs(episode_return[0])}
        for i, group in enumerate(groups, start=1):
            result[f"return/{group.name}"] = sd.all_gather_envs(episode_return[i])
        return result

    def random_actions(self, seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """A policy of uniform random actions inside the action bounds (its own generator, seeded
        ``seed``: ``swarp.render.random_action_fn``); in an env of discrete actions, uniform int64
        indices [E, A, width] of every head (``action_spaces.random_indices_fn``); with agent groups,
        each group's from its own space (``action_spaces.random_group_actions_fn``)."""
        if self.env.grouped:
            return random_group_actions_fn(self.env, seed)
        space = self.env.action_space
        act = random_indices_fn(space, seed) if space.discrete else random_action_fn(seed)
        return lambda obs: act(self.env, obs)

    def scripted_actions(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The scenario's scripted controller (``Scenario.scripted_actions``, which may read the
        whole state) as a policy of physical actions [E, A, U], or ``None`` where the scenario has none.
        With agent groups ``{group: actions}``: a discrete group's command encoded into its levels
        (``action_spaces.scripted_group_actions``).

        Raises:
            ValueError: this env (without groups) takes discrete actions: the controller's continuous
                commands do not fit it (``evaluate`` scores the controller on the continuous env of
                the same episodes).
        """
        if not self.env.grouped and self.env.action_space.discrete:
            kind = self.env.action_space.kind
            raise ValueError(f"the scripted controller emits continuous commands; this env takes {kind} actions: "
                             "score it with an Evaluator of the continuous env (actions=None)")  # fmt: skip
        scenario = self.env.scenario
        if type(scenario).scripted_actions is Scenario.scripted_actions:
            return None
        try:  # an inherited controller may not drive this scenario's agents (drones)
            self.env.reset(seed=self.seed)
            scenario.scripted_actions()
        except NotImplementedError:
            return None
        if self.env.grouped:
            return lambda obs: scripted_group_actions(self.env, scenario.scripted_actions())
        return lambda obs: scripted_actions_of(self.env, scenario.scripted_actions())


def check_evaluation(episodes, seed) -> None:
    """Raise ``ValueError`` unless ``episodes`` is an int >= 1 and ``seed`` an int in [0, 2^31)."""
    for name, value, low, high in (("episodes", episodes, 1, None), ("seed", seed, 0, 2**31 - 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low or (high and value > high):
            span = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise ValueError(f"{name} must be an int {span}, got {value!r}")


def check_policy_fits(policy, env, scenario: str, task: Task, origin: str) -> None:
    """Raise ``ValueError`` unless ``policy`` (a ``swarp.train.Policy`` or ``GroupedPolicy``) can act in
    ``env``: the same agent groups, observation and action widths and action boxes, an agent count it
    acts for. Other callables pass."""
    if not isinstance(policy, (Policy, GroupedPolicy)):
        return
    low, high = env.action_bounds
    try:
        if isinstance(policy, GroupedPolicy) != env.grouped:
            trained = [g.name for g in policy.groups] if isinstance(policy, GroupedPolicy) else ["agents"]
            raise ValueError(f"agent groups {[g.name for g in env.groups]}, not the groups {trained} it was "
                             "trained on")  # fmt: skip
        if isinstance(policy, GroupedPolicy):
            policy.check_groups(env.groups, low, high)
        else:
            policy.check_fits(env.n_agents, env.obs_dim, env.act_dim, low, high, env.action_space)
    except ValueError as error:
        raise ValueError(f"{origin} cannot act in {scenario} with options {task.options} (max_steps "
                         f"{task.max_steps}): that env has {error}") from None  # fmt: skip


def summary(result: dict[str, torch.Tensor]) -> dict[str, float]:
    """Success rate, its 95% Wilson interval and the mean return of an ``Evaluator`` result (and of
    each agent group's agents, ``return/<group>``, where it has groups)."""
    n, k = result["success"].numel(), int(result["success"].sum())
    low, high = wilson_interval(k, n)
    by_group = {key: float(value.mean()) for key, value in result.items() if key.startswith("return/")}
    return {"success": k / n, "success_low": low, "success_high": high, "return": float(result["return"].mean()),
            "episodes": n, **by_group}  # fmt: skip


def evaluate(policy, scenario: str | None = None, *, episodes: int = 4096, device=None, seed: int = 12345,
             options: dict | None = None) -> dict:  # fmt: skip
    """Greedy success of a policy, and random play's and the scripted controller's on the same episodes.

    Args:
        policy: A ``swarp.train.Policy`` (observations [E, A, O] -> actions [E, A, U]) or
            ``GroupedPolicy`` (by agent group), or the path of a checkpoint written by
            ``swarp.train.train`` (or of its run folder).
        scenario: The scenario (default: the checkpoint's; another scenario runs under its own task
            record, where the checkpoint's policy fits it).
        episodes: Fresh episodes (one per env) to score, >= 1.
        device: Where to run (default: CUDA when available).
        seed: The episodes' reset seed in [0, 2^31) (the training runs' own seeds are 0, 1, ...:
            keep it apart).
        options: Scenario options over the task's (a checkpoint's task, else the scenario's record
            for the policy's action space); ``max_steps`` sets the episode length.

    Returns:
        ``{"policy": {...}, "random": {...}, "scripted": {...}}`` (``"scripted"`` only where the
        scenario has a scripted controller), each with ``success``, ``success_low``, ``success_high``
        (95% Wilson interval), ``return`` (mean over agents and episodes), ``episodes``. For a
        policy of discrete actions, random play draws uniform indices and ``"scripted"`` is the
        controller on the continuous env of the same episodes, marked ``"action_space": "continuous"``;
        for a policy of agent groups with discrete groups, the controller's command encoded into their
        levels, marked ``"quantized_groups": [...]`` (the module docstring).

    Raises:
        ValueError: a bad argument, a damaged checkpoint, or a policy that cannot act in the
            scenario (the observation or action width, the agent count or the action box differs:
            the message names both sides).
    """
    from swarp.train.checkpoint import resolve_policy

    check_evaluation(episodes, seed)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    policy, scenario, task, origin = resolve_policy(policy, scenario, device, "evaluate")
    actions = policy.env_kwargs() if isinstance(policy, (Policy, GroupedPolicy)) else {}
    task = policy_task(task, scenario, actions, options)
    evaluator = Evaluator(scenario, task, episodes, device, seed, actions)
    check_policy_fits(policy, evaluator.env, scenario, task, origin)
    policy = policy.to(evaluator.env.torch_device)
    result = {"policy": summary(evaluator(policy)), "random": summary(evaluator(evaluator.random_actions(seed)))}
    if actions and not evaluator.env.grouped:  # the controller's commands, on the continuous env of the same episodes
        continuous = Evaluator(scenario, task, episodes, device, seed)
        scripted = continuous.scripted_actions()
        if scripted is not None:
            result["scripted"] = {**summary(continuous(scripted)), "action_space": "continuous"}
        continuous.env.close()
        return result
    scripted = evaluator.scripted_actions()
    if scripted is not None:
        result["scripted"] = summary(evaluator(scripted))
        quantized = [g.name for g in evaluator.env.groups if g.action_space.discrete]
        if evaluator.env.grouped and quantized:  # a grouped env's discrete groups take the command encoded
            result["scripted"]["quantized_groups"] = quantized
    return result


#: The command's ``--help`` text: what ``main`` runs.
COMMAND_DESCRIPTION = """Greedy success of a checkpoint's policy (a checkpoint.pt or its run folder) with its 95%
Wilson interval, beside random play's on the same episodes; --video also writes a GIF/MP4 of the policy
(needs the viz extra). --scenario scores it in another scenario where its policy fits there; --import
registers the scenarios of your own module first."""


def main(argv: list[str] | None = None) -> dict:
    """Run ``python -m swarp.train.eval`` on ``argv`` (default: ``sys.argv[1:]``; ``COMMAND_DESCRIPTION``
    says what it does) and print the scores; returns ``evaluate``'s result. A bad argument or
    checkpoint exits with status 2 and its message."""
    import_scenario_modules(argv)
    parser = argparse.ArgumentParser(prog="python -m swarp.train.eval", description=COMMAND_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("checkpoint", help="a checkpoint.pt, or the run folder holding it")
    add_import_flag(parser)
    parser.add_argument("--scenario", type=scenario_name, default=None, help="default: the checkpoint's")
    parser.add_argument("--episodes", type=positive_int, default=4096)
    parser.add_argument("--device", default=None)
    parser.add_argument("--seed", type=seed, default=12345, help="reset seed of the episodes, in [0, 2^31)")
    parser.add_argument("--option", action="append", default=[], type=scenario_option, metavar="NAME=VALUE",
                        help="a scenario option over the checkpoint's (repeatable; VALUE a literal)")  # fmt: skip
    parser.add_argument("--video", default=None, help="write a video of the policy here (.gif or .mp4)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    options = dict(args.option) or None
    try:
        if args.video:
            check_video_path(args.video)  # before the evaluation, not after it
        result = evaluate(args.checkpoint, args.scenario, episodes=args.episodes, device=args.device, seed=args.seed,
                          options=options)  # fmt: skip
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("policy", "random"):
            r = result[name]
            print(f"{name:>6}: success {r['success']:.3f} [{r['success_low']:.3f}, {r['success_high']:.3f}] "
                  f"(95% Wilson), return {r['return']:.3f}, {r['episodes']} episodes")  # fmt: skip
    if args.video:
        from swarp.train.video import write_video

        write_video(args.checkpoint, args.video, args.scenario, device=args.device, seed=args.seed, options=options)
        print(f"video: {args.video}")
    return result
