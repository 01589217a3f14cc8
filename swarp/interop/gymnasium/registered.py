"""The registered Gymnasium envs ``"swarp/<scenario>-v0"``: ``register_envs``, the single env
``SwarpGymnasiumEnv`` (``gymnasium.make``) and ``make_vector_env`` (``gymnasium.make_vec``)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from swarp.env.environment import Environment
from swarp.env.make import make
from swarp.interop.gymnasium.vector import (
    REWARD_MODES,
    SwarpVectorEnv,
    parse_autoreset_mode,
    sim_actions,
    sub_env_action_space,
)
from swarp.interop.spaces import check_one_space, join_groups
from swarp.scenarios.framework.base import get_scenario, scenario_names

#: The Gymnasium namespace of the registered envs: ``"swarp/<scenario>-v0"``.
NAMESPACE = "swarp"
#: The version of every registered env id.
VERSION = 0
#: The module the registrations' entry points name (it re-exports both entry points).
PUBLIC_MODULE = "swarp.interop.gymnasium"


def env_id(scenario: str) -> str:
    """The Gymnasium id of ``scenario``'s registered env: ``"swarp/<scenario>-v0"``."""
    return f"{NAMESPACE}/{scenario}-v{VERSION}"


#: Keywords the registered envs set themselves (``make`` / ``make_vec`` reject them, naming theirs).
_OWN_KEYWORDS = {
    "n_envs": "num_envs (make_vec)",
    "auto_reset": "autoreset_mode (make_vec)",
    "batch_size": "nothing: the registered envs are one Environment",
}


def _check_keywords(kwargs: dict[str, Any], where: str) -> None:
    for key, instead in _OWN_KEYWORDS.items():
        if key in kwargs:
            raise TypeError(f"{where} sets {key!r} itself; pass {instead} instead")


def make_vector_env(
    num_envs: int,
    scenario: str,
    device: str | torch.device | None = None,
    seed: int = 0,
    backend: str = "numpy",
    reward: str = "mean",
    render_mode: str | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    flatten_agents: bool = True,
    **kwargs: Any,
) -> SwarpVectorEnv:
    """The vector entry point of ``"swarp/<scenario>-v0"``: ``gymnasium.make_vec(id, num_envs=N, ...)``.

    Args:
        num_envs: Number of envs E (>= 1), one ``Environment`` batch.
        scenario: A registered scenario name (``swarp.scenarios.framework.base.scenario_names()``).
        device: The simulator's device (``None``: CUDA when available, as ``swarp.make``).
        seed: Seed of the reset RNG, an int in [0, 2^31).
        backend, reward, render_mode, flatten_agents: As ``SwarpVectorEnv`` (flattened by default,
            matching the single env's spaces).
        autoreset_mode: ``NEXT_STEP`` (default), ``SAME_STEP`` (the simulator then resets in its
            step) or ``DISABLED``; an ``AutoresetMode`` or its name.
        **kwargs: ``swarp.make`` keywords: scenario options (``n_agents``...) and environment ones
            (``max_steps`` [steps], ``dtype``, ``lidar_rays``...).

    Returns:
        A ``SwarpVectorEnv`` over ``swarp.make(scenario, n_envs=num_envs, ...)``.

    Raises:
        TypeError: ``n_envs``, ``auto_reset`` or ``batch_size`` among ``kwargs`` (set here), or an
            unknown keyword (``swarp.make`` lists the valid ones).
        ValueError: an unknown scenario, mode or argument value, or a scenario whose agent groups
            differ in observation width or action space (the environment is closed again).
    """
    _check_keywords(kwargs, "gymnasium.make_vec of a swarp env")
    mode = parse_autoreset_mode(autoreset_mode)
    sim = make(
        scenario, n_envs=num_envs, device=device, seed=seed, auto_reset=mode is AutoresetMode.SAME_STEP, **kwargs
    )
    try:
        return SwarpVectorEnv(sim, backend, reward, render_mode, autoreset_mode=mode, flatten_agents=flatten_agents)
    except Exception:  # the adapter refused the env (check_one_space): close what was built for it
        sim.close()
        raise


class SwarpGymnasiumEnv(gymnasium.Env):
    """One swarp env as a single Gymnasium env, the agents' observations and actions flattened.

    The entry point of ``gymnasium.make("swarp/<scenario>-v0")``: a 1-env ``Environment``
    (``auto_reset=False``) whose A agents one learner drives. ``reset`` and ``step`` return host
    numpy arrays; call ``reset`` after an episode ends, as with any Gymnasium env.

    Args:
        scenario: A registered scenario name, or a ``swarp.Environment`` of one env built with
            ``auto_reset=False`` (then ``device``, ``seed`` and ``kwargs`` must be left out).
        render_mode: ``None`` or ``"rgb_array"``.
        reward: ``"mean"`` or ``"sum"`` over agents, the scalar reward.
        device: The simulator's device; ``"cpu"`` by default (one env is bound by launch latency and
            the host copies, where the CPU is faster than a GPU).
        seed: Seed of the reset RNG, an int in [0, 2^31); ``reset(seed=...)`` reseeds it.
        **kwargs: ``swarp.make`` keywords: scenario options (``n_agents``...) and environment ones
            (``max_steps`` [steps], ``dtype``...).

    Spaces: ``observation_space = Box(-inf, inf, (A * obs_dim,))`` and ``action_space =
    Box(low, high, (A * act_dim,))``, bounds from ``sim.action_bounds`` (physical units), agent
    ``i``'s block at ``[i * dim, (i + 1) * dim)``; dtype the simulator's (float32 by default).
    With ``action_space="discrete"`` or ``"multidiscrete"`` (a ``swarp.make`` keyword) the action
    space is an int64 ``MultiDiscrete`` of every agent's ``sim.action_space.heads``, shape
    (A * width,), or ``Discrete(prod(nvec))`` for one agent's one flat index (``prod(nvec) * C``
    with a channel of width C, whose message columns a continuous ``Box`` bounds to [0, 1]).

    Attributes:
        sim: The wrapped ``Environment``.

    Raises:
        TypeError: ``n_envs``, ``auto_reset`` or ``batch_size`` among ``kwargs``, an unknown
            keyword, or ``scenario`` neither a name nor an ``Environment``.
        ValueError: an unknown scenario, ``reward`` or ``render_mode``, an ``Environment`` of
            more than one env or built with ``auto_reset=True``, or one whose agent groups differ in
            observation width or action space (``swarp.interop.spaces.check_one_space``).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": None}

    def __init__(
        self,
        scenario: str | Environment,
        render_mode: str | None = None,
        reward: str = "mean",
        device: str | torch.device | None = "cpu",
        seed: int = 0,
        **kwargs: Any,
    ):
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if isinstance(scenario, Environment):
            if kwargs or device != "cpu" or seed != 0:
                raise TypeError(
                    "SwarpGymnasiumEnv(environment) takes no device, seed or swarp.make keywords: it has them"
                )
            if scenario.n_envs != 1 or scenario.auto_reset:
                raise ValueError(
                    "SwarpGymnasiumEnv wraps an Environment of one env built with auto_reset=False, got "
                    f"n_envs={scenario.n_envs}, auto_reset={scenario.auto_reset}"
                )
            sim = scenario
        elif isinstance(scenario, str):
            _check_keywords(kwargs, "SwarpGymnasiumEnv (gymnasium.make of a swarp env)")
            sim = make(scenario, n_envs=1, device=device, seed=seed, auto_reset=False, **kwargs)
        else:
            raise TypeError(f"scenario must be a scenario name or a swarp.Environment, got {type(scenario).__name__}")
        try:
            check_one_space(sim, "SwarpGymnasiumEnv")
        except ValueError:
            if sim is not scenario:
                sim.close()
            raise
        self.sim = sim
        self.reward_mode = reward
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": round(1.0 / sim.stepper.dt)}
        np_dtype = torch.empty((), dtype=sim.dtype).numpy().dtype
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (sim.n_agents * sim.obs_dim,), np_dtype)
        self.action_space = sub_env_action_space(sim, flatten_agents=True)

    def _info(self, info: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        return {key: value[0].detach().to("cpu", copy=True).numpy() for key, value in info.items()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start a new episode; ``seed`` restarts the reset RNG from it.

        Args:
            seed: An int in [0, 2^31), or ``None`` to draw the next episode of the current stream.
            options: ``None`` or an empty dict (there are no reset options).

        Returns:
            ``(obs [A * obs_dim] float, info)``: ``info`` holds the scenario's entries, each its
            [A, ...] row of the one env.

        Raises:
            TypeError: ``seed`` is not an int or ``options`` not a dict.
            ValueError: ``seed`` out of range, or a key in ``options``.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        if options:
            raise ValueError(f"SwarpGymnasiumEnv.reset takes no options, got {sorted(str(k) for k in options)}")
        super().reset(seed=seed)
        obs, info = self.sim.reset(seed=None if seed is None else int(seed))
        return join_groups(obs)[0].reshape(-1).to("cpu", copy=True).numpy(), self._info(info)

    def step(self, action):
        """Step the env with ``action`` of ``action_space.shape`` (agent-major).

        Args:
            action: Continuous: real numbers [A * act_dim] in physical units, of any int or float
                dtype (values beyond the bounds are clamped; NaN and inf act as 0 and raise
                ``sim.invalid_actions()``). Discrete kinds: integer indices [A * width] (a
                ``Discrete`` space: one int, shape ()), any int dtype (an index out of range acts
                as a zero command and raises ``sim.invalid_actions()``). A numpy array or scalar, a
                nested list or a torch tensor.

        Returns:
            ``(obs [A * obs_dim], reward float, terminated bool, truncated bool, info)``: reward the
            mean (or sum) over agents; ``info`` holds the scenario's entries and ``"agent_reward"``
            [A], the one env's rows.

        Raises:
            TypeError: ``action`` is None, a string, an object array, or bool or complex (or
                float, for discrete kinds).
            ValueError: ``action`` is not of ``action_space.shape``.
        """
        sim = self.sim
        dims = "[]" if isinstance(self.action_space, gymnasium.spaces.Discrete) else "[n_agents * act_dim]"
        action = sim_actions(sim, action, self.action_space.shape, dims, "action")
        obs, reward, terminated, truncated, info = sim.step(action)
        info = self._info(info)
        obs, reward = join_groups(obs), join_groups(reward)  # a grouped env's groups, one after the other
        info["agent_reward"] = reward[0].to("cpu", copy=True).numpy()
        env_reward = info["agent_reward"].mean() if self.reward_mode == "mean" else info["agent_reward"].sum()
        flags = torch.stack((terminated[0], truncated[0])).cpu().numpy()
        return obs[0].reshape(-1).to("cpu", copy=True).numpy(), float(env_reward), bool(flags[0]), bool(flags[1]), info

    def render(self) -> np.ndarray | None:
        """An (H, W, 3) uint8 frame with ``render_mode="rgb_array"``, else ``None``."""
        if self.render_mode != "rgb_array":
            return None
        return self.sim.render(env_index=0)

    def close(self) -> None:
        """Close the wrapped ``Environment``; idempotent."""
        self.sim.close()

    def __repr__(self) -> str:
        return f"SwarpGymnasiumEnv({self.sim.scenario.name!r})"


def register_envs(scenarios: list[str] | None = None) -> list[str]:
    """Register ``"swarp/<scenario>-v0"`` with Gymnasium for ``scenarios`` (default: every scenario
    ``swarp.make`` knows). Ids already registered are left as they are. Runs on import.

    Args:
        scenarios: Registered scenario names, or ``None`` for all of them.

    Returns:
        The ids newly registered.

    Raises:
        ValueError: an unknown scenario name.
    """
    names = scenario_names() if scenarios is None else list(scenarios)
    added = []
    for name in names:
        get_scenario(name)  # a clear error for an unknown name
        gym_id = env_id(name)
        if gym_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=gym_id,
            entry_point=f"{PUBLIC_MODULE}:SwarpGymnasiumEnv",
            vector_entry_point=f"{PUBLIC_MODULE}:make_vector_env",
            kwargs={"scenario": name},
            disable_env_checker=False,
        )
        added.append(gym_id)
    return added
