"""Checkpoints: ``state_dict``s and plain values, written with ``torch.save`` and read back with
``weights_only=True``, so a checkpoint cannot run code when it is loaded (a tampered file is refused).

A checkpoint holds one run: its scenario, seed, config, task (options included) and dimensions; the
networks of its result (the policy that reached the target, else the last one); and, unless the run
was data-parallel, ``resume``: everything that decides the run's next iteration (``Trainer.run_state``),
from which ``swarp.train.resume`` continues it. Every file that is not such a checkpoint, damaged,
truncated, foreign or holding non-finite weights, is refused with a ``ValueError`` naming it.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from swarp.core.groups import DEFAULT_GROUP
from swarp.core.spaces import ActionSpace
from swarp.train.action_spaces import space_of
from swarp.train.config import TrainConfig
from swarp.train.groups import GroupedPolicy, TrainedPolicy, group_critic, group_records, groups_from_records
from swarp.train.networks import Critic, Policy
from swarp.train.tasks import Task

FORMAT = "swarp.train/2"
#: Formats read: /1 had no resume state.
READABLE = ("swarp.train/1", FORMAT)


def save_checkpoint(path: str | Path, trainer, k: int, scenario: str, extra: dict | None = None, *,
                    networks: dict | None = None, resume: bool = True) -> Path:  # fmt: skip
    """Write run ``k`` of ``trainer`` to ``path`` atomically (a reader never sees half a file); returns the path.

    Args:
        networks: The result's networks (``Trainer.run_networks``; default: run k's current ones).
        resume: Also write the run's state (``Trainer.run_state``) for ``swarp.train.resume``.
        extra: Plain values kept beside them (``iteration``, ``frames``, ``train_seconds``...).
    """
    env = trainer.envs[k]
    low, high = env.action_bounds
    act_dim = low.shape[-1] if trainer.grouped else env.act_dim  # groups: the action box's columns
    comm_dim = 0 if trainer.grouped else env.action_space.comm_dim  # groups: in each group record
    channel = {"comm_dim": comm_dim} if comm_dim else {}
    data = {
        "format": FORMAT,
        "scenario": scenario,
        "seed": trainer.seeds[k],
        "config": dataclasses.asdict(trainer.config),
        "task": dataclasses.asdict(trainer.task),
        "dims": {"n_agents": env.n_agents, "obs_dim": env.obs_dim, "act_dim": act_dim, **channel},
        "action_low": low.detach().float().cpu(),
        "action_high": high.detach().float().cpu(),
        **(networks or trainer.run_networks(k)),
        "extra": extra or {},
        "resume": trainer.run_state(k) if resume else None,
    }
    if trainer.grouped:
        data["groups"] = group_records(env.groups)
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)
    return path


@dataclass
class Checkpoint:
    """A loaded checkpoint: the greedy ``policy`` and ``critic`` on ``device``, and what built them.

    Attributes:
        policy: A ``Policy``, or a ``GroupedPolicy`` for a run on agent groups.
        critic: A ``Critic``, or an ``nn.ModuleDict`` of each group's.
        path: The file read.
        dims: ``n_agents``, ``obs_dim``, ``act_dim`` of the env it was trained on (with groups:
            the widest observation and the physical command's columns).
        resume: The run's state for ``swarp.train.resume`` (``None`` where none was written).
    """

    scenario: str
    seed: int
    config: TrainConfig
    task: Task
    policy: TrainedPolicy
    critic: Critic | nn.ModuleDict
    extra: dict
    path: Path | None = None
    dims: dict | None = None
    resume: dict | None = None

    def networks(self) -> dict[str, dict[str, torch.Tensor]]:
        """The result's networks as ``state_dict``s, as ``Trainer.run_networks`` gives them."""
        return {"normalizer": self.policy.normalizer.state_dict(), "actor": self.policy.actor.state_dict(),
                "critic": self.critic.state_dict()}  # fmt: skip


def checkpoint_path(path: str | Path) -> Path:
    """``path``, or ``path/checkpoint.pt`` for a run folder."""
    path = Path(path)
    return path / "checkpoint.pt" if path.is_dir() else path


def load_checkpoint(path: str | Path, device="cpu") -> Checkpoint:
    """Read a checkpoint written by ``save_checkpoint`` (a file, or a run folder holding ``checkpoint.pt``).

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: the file is not a readable swarp.train checkpoint (truncated, empty, foreign, an
            entry missing or of the wrong kind, weights that do not fit its dimensions or are not
            finite), or it holds anything but tensors and plain values (``weights_only`` refused
            it: nothing in it was run). The message names the file.
    """
    path = checkpoint_path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(f"{path}: refused, it holds objects other than tensors and plain values ({error})") from None
    except Exception as error:  # truncated, empty, a text file...: torch.load raises what its reader met
        raise ValueError(f"{path}: not a readable swarp.train checkpoint ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict) or data.get("format") not in READABLE:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: not a {FORMAT} checkpoint (found {found!r})")
    try:
        return _read(data, path, device)
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        detail = f"no entry {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{path}: a damaged checkpoint: {detail}") from None


def _read(data: dict, path: Path, device) -> Checkpoint:
    config = TrainConfig(**data["config"])
    task = Task(**data["task"])
    dims = data["dims"]
    for name in ("n_agents", "obs_dim", "act_dim"):
        if isinstance(dims[name], bool) or not isinstance(dims[name], int) or dims[name] < 1:
            raise ValueError(f"dims[{name!r}] must be an int >= 1, got {dims[name]!r}")
    low, high = data["action_low"], data["action_high"]
    if not (isinstance(low, torch.Tensor) and isinstance(high, torch.Tensor) and low.dim() == 2):
        raise ValueError("action bounds must be tensors [n_agents, physical action columns]")
    for name in ("normalizer", "actor", "critic"):
        for key, tensor in data[name].items():
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"{name}.{key} is not a tensor")
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"{name}.{key} holds non-finite values (the weights of a diverged run)")
    if "groups" in data:
        policy, critic = _grouped_networks(data, config, dims, low, high)
    else:
        space = _space(config, dims, low)
        columns = space.physical_dim + (0 if space.discrete else space.comm_dim)
        if not (low.shape == high.shape == (dims["n_agents"], columns) and space.width == dims["act_dim"]):
            raise ValueError(f"action bounds must be tensors [{dims['n_agents']}, {dims['act_dim']}] for "
                             f"{space.kind} actions of width {dims['act_dim']}")  # fmt: skip
        policy = Policy.from_networks(data, dims["obs_dim"], low, high, config.hidden, config.depth, config.norm_obs,
                                      space)  # fmt: skip
        critic = Critic(1, dims["obs_dim"], dims["n_agents"], config.hidden, config.depth,
                        config.algorithm == "mappo")  # fmt: skip
        critic.load_state_dict(data["critic"])
    seed, extra = data["seed"], data["extra"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not isinstance(extra, dict):
        raise TypeError("seed must be an int and extra a dict")
    if not isinstance(data["scenario"], str):
        raise TypeError("scenario must be a string")
    resume = data.get("resume")
    if resume is not None and not isinstance(resume, dict):
        raise TypeError("resume must be a dict")
    return Checkpoint(data["scenario"], seed, config, task, policy.to(device), critic.to(device), extra, path,
                      dict(dims), resume)  # fmt: skip


def _space(config: TrainConfig, dims: dict, low: torch.Tensor) -> ActionSpace:
    """The action space of a checkpoint without groups: the config's kind over the box's physical
    columns (``low`` [A, D], or [A, D + C] for continuous actions with messages) and the channel
    of ``dims["comm_dim"]`` (0 where absent: no channel, or a checkpoint written before it)."""
    comm_dim = dims.get("comm_dim", 0)
    if isinstance(comm_dim, bool) or not isinstance(comm_dim, int) or comm_dim < 0:
        raise ValueError(f"dims['comm_dim'] must be an int >= 0, got {comm_dim!r}")
    discrete = config.kind_of(DEFAULT_GROUP) != "continuous"
    return space_of(config, low.shape[-1] - (0 if discrete else comm_dim), DEFAULT_GROUP, comm_dim)


def _grouped_networks(data: dict, config: TrainConfig, dims: dict, low: torch.Tensor, high: torch.Tensor):
    """``(GroupedPolicy, ModuleDict of critics)`` of a checkpoint of a run on agent groups."""
    groups = groups_from_records(data["groups"])
    if groups[-1].stop != dims["n_agents"] or max(g.obs_dim for g in groups) != dims["obs_dim"]:
        raise ValueError(f"the groups {data['groups']} do not cover the {dims['n_agents']} agents of "
                         f"{dims['obs_dim']} observation columns")  # fmt: skip
    if not (low.shape == high.shape == (dims["n_agents"], dims["act_dim"])
            and all(g.action_space.physical_dim <= dims["act_dim"] for g in groups)):  # fmt: skip
        raise ValueError(f"action bounds must be tensors [{dims['n_agents']}, {dims['act_dim']}] covering every "
                         "group's action columns")  # fmt: skip
    for group in groups:
        space = group.action_space
        if space_of(config, space.physical_dim, group.name, space.comm_dim) != space:
            raise ValueError(f"group {group.name!r} acts in {group.action_space}, not in what the config gives it "
                             f"(action_space {config.action_space}, action_nvec {config.action_nvec})")  # fmt: skip
    policy = GroupedPolicy.from_networks(data, groups, low, high, config.hidden, config.depth, config.norm_obs)
    critic = nn.ModuleDict({g.name: group_critic(1, g, groups, config) for g in groups})
    critic.load_state_dict(data["critic"])
    return policy, critic


def resolve_policy(policy, scenario: str | None, device, caller: str) -> tuple[TrainedPolicy, str, Task | None, str]:
    """``(policy, scenario, task, origin)`` from a ``Policy`` and its scenario, or from a checkpoint
    path. ``task`` is the checkpoint's task record where the scenario is the checkpoint's own (its
    options, its episode length), ``None`` otherwise (a policy object, or a checkpoint asked to act
    in another scenario: that scenario's record applies). ``origin`` describes where the policy
    came from, for messages.

    Raises:
        ValueError: a policy object without a scenario name (``caller`` names the function), or a
            path that is no checkpoint.
    """
    task, origin = None, "the policy"
    if isinstance(policy, (str, Path)):
        loaded = load_checkpoint(policy, device=device)
        origin = (f"checkpoint {loaded.path} (trained on {loaded.scenario} with options {loaded.task.options}, "
                  f"max_steps {loaded.task.max_steps})")  # fmt: skip
        if scenario is None or scenario == loaded.scenario:
            task = loaded.task
        policy, scenario = loaded.policy, scenario or loaded.scenario
    if scenario is None:
        raise ValueError(f"{caller}() needs the scenario name with a policy object")
    return policy, scenario, task, origin
