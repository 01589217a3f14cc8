"""``swarp.make``: an ``Environment`` (or an ``EnvPool`` of partial batches) of a registered scenario."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from swarp.env.environment import Environment
from swarp.env.pool import EnvPool
from swarp.scenarios.framework.base import get_scenario

ENV_KWARGS = [p for p in inspect.signature(Environment.__init__).parameters if p not in ("self", "scenario")]


def make(
    name: str,
    n_envs: int = 1,
    device: str | torch.device | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    **kwargs: Any,
) -> Environment | EnvPool:
    """Build an ``Environment`` for a registered scenario.

    Keywords that ``Environment`` takes (``auto_reset``, ``max_steps``, ``fused``, ``use_graph``,
    ``clone_outputs``, ``dtype``, ``env_offset``, ``lidar_rays``, ``plan``, ...) configure the
    environment; every other keyword is a scenario option. An unknown keyword is an error that lists
    the valid ones.

    With ``batch_size`` (an int that divides ``n_envs``), the result is an ``EnvPool``
    (``swarp.env.pool``): ``n_envs // batch_size`` groups of ``batch_size`` envs stepped
    asynchronously with EnvPool-style ``send`` / ``recv`` (partial batches), together drawing
    exactly what one ``Environment`` of ``n_envs`` envs draws.

    The result pickles (and ``copy.deepcopy`` copies it) as these arguments: unpickling makes the
    same environment again, freshly reset with ``seed``; its state travels only in a ``get_state``
    snapshot (see ``Environment``).
    """
    cls = get_scenario(name)
    env_kwargs = {k: v for k, v in kwargs.items() if k in ENV_KWARGS}
    scenario_kwargs = {k: v for k, v in kwargs.items() if k not in ENV_KWARGS}
    unknown = sorted(set(scenario_kwargs) - set(cls.option_names()))
    if unknown:
        raise TypeError(
            f"unknown keyword(s) {unknown} for swarp.make({name!r}); environment keywords: "
            f"{sorted([*ENV_KWARGS, 'batch_size'])}; scenario options: {cls.option_names()}"
        )
    if batch_size is None:
        return Environment(cls(**scenario_kwargs), n_envs=n_envs, device=device, seed=seed, **env_kwargs)
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or isinstance(n_envs, bool)
        or not isinstance(n_envs, int)
        or not 1 <= batch_size <= n_envs
        or n_envs % batch_size
    ):
        raise ValueError(f"batch_size must be an int that divides n_envs ({n_envs!r}), got {batch_size!r}")
    if "env_offset" in env_kwargs:
        raise ValueError("a pool sets each group's env_offset itself: pass batch_size or env_offset, not both")
    groups = [
        Environment(
            cls(**scenario_kwargs), n_envs=batch_size, device=device, seed=seed, env_offset=g * batch_size, **env_kwargs
        )
        for g in range(n_envs // batch_size)
    ]
    return EnvPool(groups)
