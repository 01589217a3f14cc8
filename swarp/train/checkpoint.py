"""Checkpoints: ``state_dict``s and plain values, written with ``torch.save`` and read back with
``weights_only=True``, so a checkpoint cannot run code when it is loaded (a tampered file is refused)."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch

from swarp.train.config import TrainConfig
from swarp.train.networks import Actor, Critic, Normalizer, Policy, take_run
from swarp.train.tasks import Task

FORMAT = "swarp.train/1"


def save_checkpoint(path: str | Path, trainer, k: int, scenario: str, extra: dict | None = None) -> Path:
    """Write run ``k`` of ``trainer`` (its networks, config, task and seed) to ``path``; returns the path."""
    env = trainer.envs[k]
    low, high = env.action_bounds
    seed = trainer.seeds[k]
    data = {
        "format": FORMAT,
        "scenario": scenario,
        "seed": seed,
        "config": dataclasses.asdict(trainer.config),
        "task": dataclasses.asdict(trainer.task),
        "dims": {"n_agents": env.n_agents, "obs_dim": env.obs_dim, "act_dim": env.act_dim},
        "action_low": low.detach().float().cpu(),
        "action_high": high.detach().float().cpu(),
        "normalizer": _cpu(take_run(trainer.normalizer, k)),
        "actor": _cpu(take_run(trainer.actor, k)),
        "critic": _cpu(take_run(trainer.critic, k)),
        "extra": extra or {},
    }
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)  # a reader never sees half a file
    return path


def _cpu(module: torch.nn.Module) -> dict:
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items()}


@dataclass
class Checkpoint:
    """A loaded checkpoint: the greedy ``policy`` and ``critic`` on ``device``, and what built them."""

    scenario: str
    seed: int
    config: TrainConfig
    task: Task
    policy: Policy
    critic: Critic
    extra: dict


def load_checkpoint(path: str | Path, device="cpu") -> Checkpoint:
    """Read a checkpoint written by ``save_checkpoint``.

    Raises:
        ValueError: the file is not a swarp.train checkpoint, or it holds anything but tensors and
            plain values (``weights_only`` refused it: nothing in it was run).
    """
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(f"{path}: refused, it holds objects other than tensors and plain values ({error})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} checkpoint")
    config = TrainConfig(**data["config"])
    task = Task(**data["task"])
    dims = data["dims"]
    normalizer = Normalizer(1, dims["obs_dim"], enabled=config.norm_obs)
    normalizer.load_state_dict(data["normalizer"])
    actor = Actor(1, dims["obs_dim"], data["action_low"], data["action_high"], config.hidden, config.depth, 0.0)
    actor.load_state_dict(data["actor"])
    critic = Critic(1, dims["obs_dim"], dims["n_agents"], config.hidden, config.depth, config.algorithm == "mappo")
    critic.load_state_dict(data["critic"])
    policy = Policy(normalizer, actor).to(device)
    return Checkpoint(data["scenario"], data["seed"], config, task, policy, critic.to(device), data["extra"])


def resolve_policy(policy, scenario: str | None, device, caller: str) -> tuple[Policy, str, Task | None]:
    """``(policy, scenario, task)`` from a ``Policy`` and its scenario, or from a checkpoint path (its
    scenario unless ``scenario`` is given, its task record). ``task`` is ``None`` for a policy object.

    Raises:
        ValueError: a policy object without a scenario name (``caller`` names the function).
    """
    task = None
    if not isinstance(policy, torch.nn.Module):
        loaded = load_checkpoint(policy, device=device)
        policy, scenario, task = loaded.policy, scenario or loaded.scenario, loaded.task
    if scenario is None:
        raise ValueError(f"{caller}() needs the scenario name with a policy object")
    return policy, scenario, task
