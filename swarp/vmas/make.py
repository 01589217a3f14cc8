"""``make_env``: VMAS 1.5.2's ``make_env`` signature on swarp, checking each argument, translating
the scenario's options (``translate``) and wrapping ``swarp.make``'s environment in a
``VmasEnvironment``."""

from __future__ import annotations

import numbers
from typing import Any

import torch

from swarp.env.environment import check_seed
from swarp.env.make import make as swarp_make
from swarp.vmas.agent import check_flag
from swarp.vmas.environment import VmasEnvironment
from swarp.vmas.translate import translate


def make_env(
    scenario: str,
    num_envs: int = 32,
    device: str | int | torch.device = "cpu",
    continuous_actions: bool = True,
    wrapper: Any = None,
    max_steps: int | None = None,
    seed: int | None = None,
    dict_spaces: bool = False,
    multidiscrete_actions: bool = False,
    clamp_actions: bool = False,
    grad_enabled: bool = False,
    terminated_truncated: bool = False,
    wrapper_kwargs: dict | None = None,
    **scenario_kwargs: Any,
) -> VmasEnvironment:
    """``vmas.make_env`` on swarp: a ``VmasEnvironment`` over ``swarp.make(...)`` (see the module docstring).

    The parameters are VMAS 1.5.2's, in its order (positional calls mean the same).

    Args:
        scenario: A VMAS scenario name with a swarp counterpart (``SCENARIOS``: ``"navigation"``,
            ``"flocking"``, ``"discovery"``, ``"give_way"``, ``"transport"``, ``"balance"``,
            ``"sampling"``, ``"simple_spread"``; ``".py"`` may end it), or a swarp scenario name.
        num_envs: Parallel envs E (int >= 1).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a CUDA index or a ``torch.device``.
        continuous_actions: True: actions are physical commands (a ``Box`` per agent); False:
            discrete indices decoded with VMAS 1.5.2's levels (``swarp.core.spaces``), one flat
            index per agent (``Discrete(prod(nvec))``) or, with ``multidiscrete_actions``, one per
            physical action column (``MultiDiscrete(nvec)``). ``nvec`` is VMAS's default 3 levels
            per column unless the swarp option ``action_nvec`` (an int or one int per column, or
            a mapping of them by agent group) says otherwise. The kind is every group's, in a
            scenario with agent groups (each agent then has its group's width and levels).
        wrapper: Must be None (use ``swarp.interop``'s adapters on ``env.sim`` instead).
        max_steps: Episode length [steps] after which envs are done (truncated); ``None``: no limit.
        seed: Seed of swarp's reset RNG (int in [0, 2^31)); ``None`` means 0.
        dict_spaces: Observations, rewards, infos and spaces keyed by agent name instead of lists.
        multidiscrete_actions: With ``continuous_actions=False``: multi-discrete actions (True
            with ``continuous_actions=True`` is refused, as VMAS asserts).
        clamp_actions: Clamp out-of-range actions instead of raising.
        grad_enabled: Keep the actions' autograd history (a differentiable step).
        terminated_truncated: ``step`` returns terminated and truncated [E] bool instead of ``dones``.
        wrapper_kwargs: Must be None or empty.
        **scenario_kwargs: VMAS options of the scenario, swarp scenario options or ``ENV_OPTIONS``
            (``translate`` says how each is treated).

    Returns:
        A ``VmasEnvironment`` of ``num_envs`` envs, reset.

    Raises:
        TypeError: a keyword of the wrong type, or an unknown one.
        ValueError: ``multidiscrete_actions`` with continuous actions, a wrapper, an unknown
            scenario, a refused option, or a value swarp rejects (the message says which VMAS option
            it came from).
    """
    check_flag("continuous_actions", continuous_actions)
    check_flag("multidiscrete_actions", multidiscrete_actions)
    if multidiscrete_actions and continuous_actions:
        raise ValueError(
            "multidiscrete_actions=True needs continuous_actions=False (as VMAS asserts): multi-discrete actions "
            "are discrete"
        )
    kind = "continuous" if continuous_actions else "multidiscrete" if multidiscrete_actions else "discrete"
    if wrapper is not None:
        raise ValueError(
            f"wrapper={wrapper!r} is not supported: wrap env.sim (the swarp Environment) with swarp.interop's "
            f"adapters instead (gymnasium.SwarpVectorEnv, pettingzoo.SwarpParallelEnv, torchrl.SwarpEnv)"
        )
    if wrapper_kwargs:
        raise ValueError("wrapper_kwargs are not supported (there is no wrapper)")
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be None (no time limit) or an int >= 1, got {max_steps!r}")
    seed = 0 if seed is None else check_seed(seed)
    for name, flag in (
        ("dict_spaces", dict_spaces),
        ("clamp_actions", clamp_actions),
        ("grad_enabled", grad_enabled),
        ("terminated_truncated", terminated_truncated),
    ):
        check_flag(name, flag)
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"device must be a str, a CUDA index or a torch.device, got {device!r}")
    if isinstance(device, int):
        device = torch.device("cuda", device)
    t = translate(scenario, **scenario_kwargs)
    try:
        sim = swarp_make(
            t.scenario,
            n_envs=int(num_envs),
            device=device,
            seed=seed,
            auto_reset=False,
            max_steps=None if max_steps is None else int(max_steps),
            action_space=kind,
            **t.env_options,
            **t.options,
        )
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError) or not t.mapped:
            raise
        raise type(error)(f"{error} (swarp.vmas translated {t.mapped})") from error
    return VmasEnvironment(
        sim,
        dict_spaces=dict_spaces,
        clamp_actions=clamp_actions,
        grad_enabled=grad_enabled,
        terminated_truncated=terminated_truncated,
        seed=seed,
    )
