"""Agent groups in the trainer: one policy per group, shared by the group's agents, and a critic per group.

A grouped env (``env.grouped``; ``swarp.core.groups``) holds consecutive agent ranges, each with its
own observation width and action space. The trainer gives each group its own networks
(``GroupNets``): a running normalizer of the group's observation columns, an actor over them that
emits the group's action space (a tanh-squashed Gaussian for a continuous group, categorical heads
for a discrete one) and a critic with one value per agent of the group. Every network reads its
group's slice of the flat, zero-padded observation buffer, ``obs[..., start:stop, :obs_dim_g]``
(``GroupNets.view``), so a narrower group never sees the padding columns.

The critics: IPPO's reads the agent's own observation. MAPPO's reads every agent's observation
(``values``): each group's rows at its own width after its own normalizer, flattened and
concatenated, and gives its group's agents' values. A group's return can hang on what only another
group observes (fleet's carriers are paid for reaching a depot that only the scout sees), which a
critic of the group's own observations could not predict; the joint input is no wider than the
single-group critic's ``A x W``.

A scenario without groups has one, ``"agents"``, every agent at full width: its networks are the
single modules the trainer always had (``Trainer.actor`` is the actor, not a mapping) and every
computation is the one it always was, bit for bit. With several groups the trainer's modules are
``nn.ModuleDict`` s by group name, so a run's ``state_dict`` keys read ``a.net.layers.0.weight``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from swarp.core.groups import AgentGroup
from swarp.core.spaces import ActionSpace
from swarp.train.action_spaces import group_box
from swarp.train.networks import Actor, CategoricalActor, Critic, Normalizer, Policy, greedy_actions


@dataclass
class GroupNets:
    """The networks of one agent group for K runs (every parameter [K, ...]).

    Attributes:
        group: The env's ``AgentGroup`` (agents ``start:stop``, ``obs_dim``, ``action_space``).
        normalizer: Running statistics of the group's observation columns [K, obs_dim_g].
        actor: Its policy: ``Actor`` (continuous) or ``CategoricalActor`` (discrete kinds).
        critic: Its values, one per agent of the group.
        whole: Whether the group is every agent at the buffer's full width (``view`` is then the identity).
    """

    group: AgentGroup
    normalizer: Normalizer
    actor: Actor | CategoricalActor
    critic: Critic
    whole: bool

    @property
    def discrete(self) -> bool:
        """Whether the group's policy is categorical (its env actions are indices)."""
        return isinstance(self.actor, CategoricalActor)

    def view(self, x: torch.Tensor) -> torch.Tensor:
        """The group's part of ``x`` [K, ..., A, W] (a flat padded observation buffer): [K, ..., A_g, obs_dim_g]."""
        return x if self.whole else x[..., self.group.start : self.group.stop, : self.group.obs_dim]

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        """The group's agents of ``x`` [K, ..., A] (per-agent values): [K, ..., A_g] (a view)."""
        return x if self.whole else x[..., self.group.start : self.group.stop]


def joint_dim(groups: Sequence[AgentGroup]) -> int:
    """Columns of a centralized critic's input: every group's agents times its observation width."""
    return sum(g.n_agents * g.obs_dim for g in groups)


def group_critic(k: int, group: AgentGroup, groups: Sequence[AgentGroup], config) -> Critic:
    """``group``'s critic for ``k`` runs (``config``: a ``TrainConfig``; MAPPO centralized over ``groups``)."""
    return Critic(k, group.obs_dim, group.n_agents, config.hidden, config.depth, config.algorithm == "mappo",
                  joint_dim(groups))  # fmt: skip


def build_networks(k: int, groups: Sequence[AgentGroup], low: torch.Tensor, high: torch.Tensor, config,
                   generators: list[torch.Generator]) -> list[GroupNets]:  # fmt: skip
    """Every group's networks for ``k`` runs, initialised from ``generators`` (run k's CPU generator):
    every actor first, then every critic, so one group draws what the single-group trainer drew.

    Args:
        groups: ``env.groups``.
        low, high: The env's action box [A, D] (physical units, CPU float32).
        config: The ``TrainConfig`` (``hidden``, ``depth``, ``init_log_std``, ``norm_obs``, ``algorithm``).
    """
    width = max(g.obs_dim for g in groups)
    nets = []
    for group in groups:
        g_low, g_high = group_box(group, low, high)
        if group.action_space.discrete:
            actor = CategoricalActor(k, group.obs_dim, group.action_space, g_low, g_high, config.hidden, config.depth)
        else:
            actor = Actor(k, group.obs_dim, g_low, g_high, config.hidden, config.depth, config.init_log_std)
        whole = len(groups) == 1 and group.obs_dim == width
        normalizer = Normalizer(k, group.obs_dim, enabled=config.norm_obs)
        nets.append(GroupNets(group, normalizer, actor, group_critic(k, group, groups, config), whole))
    for net in nets:
        net.actor.net.initialise(generators, out_gain=0.01)
    for net in nets:
        net.critic.net.initialise(generators, out_gain=1.0)
    return nets


def modules(nets: Sequence[GroupNets], name: str) -> nn.Module:
    """The trainer's module ``name`` (``"normalizer"``, ``"actor"``, ``"critic"``): the one group's
    own module, or an ``nn.ModuleDict`` of every group's by group name."""
    if len(nets) == 1:
        return getattr(nets[0], name)
    return nn.ModuleDict({net.group.name: getattr(net, name) for net in nets})


def values(nets: Sequence[GroupNets], xs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Every agent's value [K, ..., A] from each group's normalized observations ``xs``
    ([K, ..., A_g, obs_dim_g] each, in group order): centralized critics read them all, joined."""
    if len(nets) == 1:
        return nets[0].critic(xs[0])
    if nets[0].critic.centralized:
        joint = torch.cat([x.flatten(-2) for x in xs], dim=-1)
        parts = [net.critic.of_joint(joint) for net in nets]
    else:
        parts = [net.critic(x) for net, x in zip(nets, xs, strict=True)]
    return torch.cat(parts, dim=-1)


def group_records(groups: Sequence[AgentGroup]) -> list[dict]:
    """Plain values of ``groups`` (a checkpoint's ``groups`` entry): name, agent range, observation
    width and action space (kind, physical columns, levels, and the message's width ``comm_dim``
    where the groups have a channel)."""
    channel = any(g.action_space.comm_dim for g in groups)
    return [{"name": g.name, "start": g.start, "stop": g.stop, "obs_dim": g.obs_dim, "kind": g.action_space.kind,
             "physical_dim": g.action_space.physical_dim, "nvec": list(g.action_space.nvec),
             **({"comm_dim": g.action_space.comm_dim} if channel else {})}
            for g in groups]  # fmt: skip


def groups_from_records(records) -> tuple[AgentGroup, ...]:
    """The ``AgentGroup`` s of ``group_records``' values.

    Raises:
        ValueError: not a list of such records, or agent ranges that are not consecutive from 0.
    """
    if not isinstance(records, list) or len(records) < 2:
        raise ValueError(f"groups must be a list of two or more group records, got {records!r}")
    groups, start = [], 0
    for record in records:
        fields = ("name", "start", "stop", "obs_dim", "kind", "physical_dim", "nvec")
        if not isinstance(record, dict) or set(record) - {"comm_dim"} != set(fields):
            raise ValueError(f"a group record holds {list(fields)} (and comm_dim), got {record!r}")
        comm_dim = record.get("comm_dim", 0)  # records written before the channel have none
        ints = [record[f] for f in ("start", "stop", "obs_dim", "physical_dim")] + [comm_dim]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in ints) or not isinstance(record["name"], str):
            raise ValueError(f"a group record's name is a string and its sizes ints, got {record!r}")
        if record["start"] != start or record["stop"] <= start or min(ints[2:4]) < 1 or comm_dim < 0:
            raise ValueError(f"group {record['name']!r}: agents {record['start']}:{record['stop']} after {start}")
        nvec = record["nvec"] or None
        space = ActionSpace.build(record["kind"], nvec, record["physical_dim"], comm_dim)
        groups.append(AgentGroup(record["name"], record["start"], record["stop"], record["obs_dim"], space))
        start = record["stop"]
    return tuple(groups)


def _entries(state: Mapping[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    """Group ``name``'s entries of an ``nn.ModuleDict``'s ``state_dict``, the prefix dropped."""
    prefix = name + "."
    return {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}


class GroupedPolicy(nn.Module):
    """The trained policy of one run on a grouped env: each group's greedy actions from its agents'
    observations, by its own networks.

    ``forward`` takes what a grouped env's ``step`` returns, ``{group: obs [E, A_g, obs_dim_g]}``,
    or the flat padded buffer ``env.obs`` [E, A, W], and returns ``{group: actions}`` as ``step``
    takes them: physical actions [E, A_g, D_g] in the observations' dtype (continuous groups) or
    int64 indices [E, A_g, width_g] (discrete groups).

    Attributes:
        normalizer, actor: ``nn.ModuleDict`` s of each group's ``Normalizer`` and actor ([1, ...] each).
        groups: The env's ``AgentGroup`` s it was trained on.
    """

    def __init__(self, normalizer: nn.ModuleDict, actor: nn.ModuleDict, groups: Sequence[AgentGroup]):
        super().__init__()
        self.normalizer, self.actor, self.groups = normalizer, actor, tuple(groups)

    @classmethod
    def from_networks(cls, networks: dict, groups: Sequence[AgentGroup], low: torch.Tensor, high: torch.Tensor,
                      hidden: int, depth: int, norm_obs: bool) -> GroupedPolicy:  # fmt: skip
        """A policy from one run's ``state_dict`` s (``networks["normalizer"]`` and ``["actor"]``, of
        ``nn.ModuleDict`` s by group, as ``Trainer.run_networks`` gives them), for ``groups``, with the
        env's action box ``low``, ``high`` [A, D] (CPU).

        Raises:
            KeyError, ValueError, RuntimeError: as ``Policy.from_networks`` for a group's entries.
        """
        parts = {}
        for group in groups:
            entries = {name: _entries(networks[name], group.name) for name in ("normalizer", "actor")}
            g_low, g_high = group_box(group, low, high)
            parts[group.name] = Policy.from_networks(entries, group.obs_dim, g_low, g_high, hidden, depth, norm_obs,
                                                     group.action_space)  # fmt: skip
        normalizer = nn.ModuleDict({name: part.normalizer for name, part in parts.items()})
        return cls(normalizer, nn.ModuleDict({name: part.actor for name, part in parts.items()}), groups)

    def member(self, name: str) -> Policy:
        """Group ``name``'s policy (a ``Policy`` over the same modules: no copy)."""
        return Policy(self.normalizer[name], self.actor[name])

    def env_kwargs(self) -> dict:
        """The ``swarp.make`` keywords of an env it acts in: the discrete groups' ``action_space`` and
        ``action_nvec`` by group (none where every group is continuous)."""
        discrete = [g.action_space for g in self.groups if g.action_space.discrete]
        if not discrete:
            return {}
        names = [g.name for g in self.groups if g.action_space.discrete]
        return {"action_space": {n: s.kind for n, s in zip(names, discrete, strict=True)},
                "action_nvec": {n: s.nvec for n, s in zip(names, discrete, strict=True)}}  # fmt: skip

    def check_groups(self, groups: Sequence[AgentGroup], low: torch.Tensor, high: torch.Tensor) -> None:
        """Raise ``ValueError`` naming the mismatch unless this policy can act in an env of ``groups``
        (the same names, agent ranges, observation widths and action spaces) and action box ``low``,
        ``high`` [A, D] (physical units)."""
        mine = [(g.name, g.start, g.stop) for g in self.groups]
        theirs = [(g.name, g.start, g.stop) for g in groups]
        if mine != theirs:
            raise ValueError(f"agent groups (name, start, stop) {theirs}, not the trained {mine}")
        for group in groups:
            g_low, g_high = group_box(group, low, high)
            try:
                self.member(group.name).check_fits(group.n_agents, group.obs_dim, group.action_space.width, g_low,
                                                   g_high, group.action_space)  # fmt: skip
            except ValueError as error:
                raise ValueError(f"group {group.name!r}: {error}") from None

    @torch.no_grad()
    def forward(self, obs) -> dict[str, torch.Tensor]:
        if not isinstance(obs, Mapping):
            if not isinstance(obs, torch.Tensor) or obs.dim() != 3 or obs.shape[1] != self.groups[-1].stop:
                shape = list(obs.shape) if isinstance(obs, torch.Tensor) else type(obs).__name__
                raise ValueError(f"the policy takes {{group: obs [E, A_g, obs_dim_g]}} or the flat observations "
                                 f"[E, {self.groups[-1].stop}, W], got {shape}")  # fmt: skip
            obs = {g.name: obs[:, g.start : g.stop, : g.obs_dim] for g in self.groups}
        missing = [g.name for g in self.groups if g.name not in obs]
        if missing:
            names = [g.name for g in self.groups]
            raise ValueError(f"the policy acts for groups {names}; no observations of {missing}")
        actions = {}
        for group in self.groups:
            self.member(group.name).check_obs(obs[group.name])
            actions[group.name] = greedy_actions(self.normalizer[group.name], self.actor[group.name], obs[group.name])
        return actions


#: A trained run's greedy policy: one network for every agent, or one per agent group.
TrainedPolicy = Policy | GroupedPolicy


def actions_text(record: dict) -> str:
    """A run state's ``action_space`` record in words, for messages: ``"discrete actions (nvec (3, 3))"``,
    or ``"actions by group a: discrete (nvec (5, 3)), b: continuous (nvec ())"``."""
    if "groups" in record:
        groups = [g for g in record["groups"] if isinstance(g, dict)] if isinstance(record["groups"], list) else []
        return "actions by group " + ", ".join(f"{g.get('name')}: {g.get('kind')} (nvec {tuple(g.get('nvec', ()))})"
                                               for g in groups)  # fmt: skip
    return f"{record.get('kind')} actions (nvec {tuple(record.get('nvec', ()))})"


def action_shape(net: GroupNets) -> tuple[int, int, torch.dtype]:
    """``(A_g, U_g, dtype)`` of a group's stored actions: pre-squash samples, or int64 indices."""
    space = net.group.action_space
    return net.group.n_agents, space.width, torch.int64 if space.discrete else torch.float32
