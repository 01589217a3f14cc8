"""What the trainer needs of the env's action space beyond the networks: the space a ``TrainConfig``
asks for, the ``swarp.make`` keywords that build it, whether a trained policy fits an env's space,
and random play's indices for evaluation. The categorical heads are ``networks.CategoricalActor``:

``swarp.core.spaces.ActionSpace.heads`` says how many choices each column of the actions ``step``
takes has: one head of ``prod(nvec)`` choices for a ``discrete`` space (the flat index of every
combination of levels), one head of ``nvec[d]`` choices per physical column for ``multidiscrete``.
The actor's MLP outputs the concatenated logits of every head, ``[K, ..., A, sum(heads)]``; the
columns are independent categoricals, so a joint action's log-probability and the policy's entropy
are sums over columns. Sampling is the Gumbel-max trick on uniform draws from each run's own
generator (``argmax(logits + Gumbel noise)``), so it stays on the device with no host sync and goes
into a captured CUDA graph as the Gaussian's noise does; the greedy action is the argmax.

A communication channel (``WorldSpec.comm_dim`` C; ``swarp.core.spaces``) needs nothing more: a
speaking discrete agent's message choice is one more head (``heads`` counts it: one head of
``prod(nvec) * C`` choices, or ``[*nvec, C]``), sampled and scored as the others; a continuous
agent's C message columns follow its command in ``Environment.action_bounds`` with the bounds
[0, 1], so the Gaussian's tanh squash maps them onto [0, 1] as it maps the command onto its box.
A scripted controller (``Scenario.scripted_actions``) emits the command [E, A, D] and, where the
scenario has something to say, its message after it ([E, A, D + C], the continuous layout):
``scripted_actions_of`` hands that to the env's space, a missing message as 0 (silence, on a
continuous channel) or choice 0 (a discrete one: VMAS's first word), a given one as it is
(continuous) or its largest column's choice (discrete).

With agent groups (``env.groups``, ``swarp.core.groups``) each group has its own space: a
``TrainConfig`` gives one kind for every group or a mapping by group (``group_space``), ``step``
takes a mapping ``{group: actions}`` (``step_actions``), and the evaluation's baselines act by group
(``random_group_actions_fn``, ``scripted_group_actions``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from swarp.core.groups import DEFAULT_GROUP, AgentGroup
from swarp.core.spaces import ActionSpace, encode_torch
from swarp.interop.checks import group_columns


def check_space_fits(trained: ActionSpace, env_space: ActionSpace) -> str | None:
    """Why a policy trained in action space ``trained`` cannot act in ``env_space`` (``None``: it can)."""
    if trained.kind != env_space.kind:
        return f"{env_space.kind} actions, not the {trained.kind} actions it was trained for"
    if trained.nvec != env_space.nvec:
        return f"action levels nvec {env_space.nvec}, not the trained {trained.nvec}"
    if trained.discrete and trained.comm_dim != env_space.comm_dim:  # continuous: the width says it
        return f"a message head of {env_space.comm_dim} choices, not the trained {trained.comm_dim}"
    return None


def space_of(config, physical_dim: int, group: str = DEFAULT_GROUP, comm_dim: int = 0) -> ActionSpace:
    """The ``ActionSpace`` a ``TrainConfig`` (``action_space``, ``action_nvec``, each one for every
    group or a mapping by group) gives agent group ``group`` over commands of ``physical_dim`` columns
    and messages of ``comm_dim`` (the scenario's channel; 0 for a silent group).

    Raises:
        ValueError: ``action_nvec`` does not give one level count per column (``ActionSpace.build``).
    """
    nvec = config.action_nvec.get(group) if isinstance(config.action_nvec, dict) else config.action_nvec
    try:
        return ActionSpace.build(config.kind_of(group), nvec, physical_dim, comm_dim)
    except (ValueError, TypeError) as error:
        where = "" if group == DEFAULT_GROUP else f" (group {group!r})"
        raise ValueError(f"TrainConfig.action_nvec (--action-nvec){where}: {error}") from None


def any_discrete(action_space) -> bool:
    """Whether an ``action_space`` setting (a kind, or a mapping of kinds by group) makes any group discrete."""
    kinds = action_space.values() if isinstance(action_space, Mapping) else (action_space,)
    return any(kind != "continuous" for kind in kinds)


def env_action_kwargs(config) -> dict:
    """The ``swarp.make`` keywords of a ``TrainConfig``'s action space: none for continuous actions
    (the env's default), ``action_space`` and ``action_nvec`` otherwise."""
    if not any_discrete(config.action_space):
        return {}
    return {"action_space": config.action_space, "action_nvec": config.action_nvec}


def random_indices_fn(space: ActionSpace, seed: int):
    """Random play of a discrete ``space``: ``act(env, obs) -> [E, A, width]`` int64 indices, each
    column uniform over its ``space.heads`` choices, from a generator of its own seeded ``seed``
    (reproducible; on the env's device)."""
    generators: dict[str, torch.Generator] = {}

    def act(env, obs: torch.Tensor) -> torch.Tensor:
        device = env.torch_device
        if str(device) not in generators:
            generators[str(device)] = torch.Generator(device=device).manual_seed(seed)
        return space.sample(env.n_envs, env.n_agents, generators[str(device)])

    return act


def step_actions(env, actions):
    """``actions`` as ``env.step`` takes them: a continuous tensor in the env's dtype, indices as
    they are; a mapping by group (a grouped env) entry by entry, each by its group's space."""
    if isinstance(actions, Mapping):
        spaces = {g.name: g.action_space for g in env.groups}
        return {name: a if spaces[name].discrete else a.to(env.dtype) for name, a in actions.items()}
    discrete = env.action_space is not None and env.action_space.discrete
    return actions if discrete else actions.to(env.dtype)


def flat_reward(reward) -> torch.Tensor:
    """[E, A] float: ``step``'s reward, joined from a mapping of ``[E, A_g]`` views by group (the
    groups are consecutive agent ranges in order), or as it is."""
    return torch.cat(list(reward.values()), dim=1) if isinstance(reward, Mapping) else reward


def group_box(group: AgentGroup, low: torch.Tensor, high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` of ``group``'s agents: its rows of the env's action box [A, D] (physical units;
    [A, D + C] where continuous actions carry messages), its space's physical columns [A_g, D_g],
    then a continuous group's message columns ([0, 1]) where it speaks
    (``swarp.interop.checks.group_columns``)."""
    return group_columns(group, low, high)


def physical_width(env) -> int:
    """D, the columns of the physical command of ``env`` (its widest group's)."""
    return max(group.action_space.physical_dim for group in env.groups)


def message_choice(space: ActionSpace, message: torch.Tensor | None) -> torch.Tensor | None:
    """The choice [E, A_g] int64 of a discrete ``space``'s message head for scripted messages
    ``message`` [E, A_g, C] (the largest column's; the first of ties), ``None`` where there is no
    message (``encode_torch`` then chooses 0)."""
    if message is None or not space.comm_dim:
        return None
    return message.argmax(-1)


def scripted_actions_of(env, command: torch.Tensor) -> torch.Tensor:
    """A scripted controller's output ``command`` ([E, A, D] the physical command, or [E, A, D + C]
    with the messages after it) as the actions of ``env`` (without groups) of a continuous space:
    with a channel and no messages given, zero message columns appended (silence); otherwise as it
    is. The controller of a discrete env goes through ``encode_torch`` (``scripted_group_actions``
    does both, by group)."""
    space = env.action_space
    if space.discrete or not space.comm_dim or command.shape[-1] != space.physical_dim:
        return command
    return torch.cat([command, command.new_zeros((*command.shape[:-1], space.comm_dim))], dim=-1)


def random_group_actions_fn(env, seed: int):
    """Random play of a grouped ``env``: ``act(obs) -> {group: actions}``, each group's uniform over
    its space (indices of every head [E, A_g, width_g] int64, or physical commands [E, A_g, D_g] in
    its box, the env's dtype), from a generator of its own seeded ``seed`` on the env's device."""
    generator = torch.Generator(device=env.torch_device).manual_seed(seed)
    low, high = env.action_bounds

    def act(obs) -> dict[str, torch.Tensor]:
        actions = {}
        for group in env.groups:
            space = group.action_space
            if space.discrete:
                actions[group.name] = space.sample(env.n_envs, group.n_agents, generator)
                continue
            g_low, g_high = group_box(group, low, high)
            u = torch.rand((env.n_envs, *g_low.shape), generator=generator, device=env.torch_device, dtype=env.dtype)
            actions[group.name] = g_low + (g_high - g_low) * u
        return actions

    return act


def scripted_group_actions(env, command: torch.Tensor) -> dict[str, torch.Tensor]:
    """A scripted controller's output ``command`` ([E, A, D] the physical command, or [E, A, D + C]
    with every agent's message after it) as ``{group: actions}`` of a grouped ``env``: a continuous
    group's rows and columns as they are, its message columns after them where it speaks (zeros
    where no message is given); a discrete group's encoded into the indices of its levels nearest
    the command (``swarp.core.spaces.encode_torch``), its message's choice the given message's
    largest column (choice 0 where none is given)."""
    low, high = env.action_bounds
    width = physical_width(env)
    given = command.shape[-1] > width  # the controller gave messages after the commands
    actions = {}
    for group in env.groups:
        space, rows = group.action_space, command[:, group.agents]
        part = rows[..., : space.physical_dim]
        message = rows[..., width:] if given and space.comm_dim else None
        if space.discrete:
            box = group_box(group, low, high)
            actions[group.name] = encode_torch(space, part, *box, message_choice(space, message))
        elif space.comm_dim:
            message = part.new_zeros((*part.shape[:-1], space.comm_dim)) if message is None else message
            actions[group.name] = torch.cat([part, message], dim=-1)
        else:
            actions[group.name] = part
    return actions
