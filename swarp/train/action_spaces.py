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
"""

from __future__ import annotations

import torch

from swarp.core.spaces import ActionSpace


def check_space_fits(trained: ActionSpace, env_space: ActionSpace) -> str | None:
    """Why a policy trained in action space ``trained`` cannot act in ``env_space`` (``None``: it can)."""
    if trained.kind != env_space.kind:
        return f"{env_space.kind} actions, not the {trained.kind} actions it was trained for"
    if trained.nvec != env_space.nvec:
        return f"action levels nvec {env_space.nvec}, not the trained {trained.nvec}"
    return None


def space_of(config, physical_dim: int) -> ActionSpace:
    """The ``ActionSpace`` of a ``TrainConfig`` (``action_space``, ``action_nvec``) over commands of
    ``physical_dim`` columns.

    Raises:
        ValueError: ``action_nvec`` does not give one level count per column (``ActionSpace.build``).
    """
    try:
        return ActionSpace.build(config.action_space, config.action_nvec, physical_dim)
    except (ValueError, TypeError) as error:
        raise ValueError(f"TrainConfig.action_nvec (--action-nvec): {error}") from None


def env_action_kwargs(config) -> dict:
    """The ``swarp.make`` keywords of a ``TrainConfig``'s action space: none for continuous actions
    (the env's default), ``action_space`` and ``action_nvec`` otherwise."""
    if config.action_space == "continuous":
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
