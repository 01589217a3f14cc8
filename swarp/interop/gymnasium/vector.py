"""``SwarpVectorEnv``: a swarp ``Environment`` as a ``gymnasium.vector.VectorEnv`` (the backends,
the three auto-reset modes, the refusal of numpy-only wrappers around the torch backend);
``swarp.interop.gymnasium``'s docstring describes its behaviour."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from swarp.env.environment import Environment
from swarp.interop.checks import env_mask, index_tensor, real_tensor
from swarp.interop.spaces import check_one_space, index_space, join_groups

BACKENDS = ("numpy", "torch")
REWARD_MODES = ("mean", "sum")
#: The keys ``reset(options=...)`` understands.
RESET_OPTIONS = ("reset_mask",)
#: Stack frames searched above ``metadata`` / ``reset`` for the wrapper that calls them.
WRAPPER_SEARCH_DEPTH = 4


def parse_autoreset_mode(value: Any) -> AutoresetMode:
    """``value`` (an ``AutoresetMode``, or its name or value in any case) as an ``AutoresetMode``."""
    if isinstance(value, AutoresetMode):
        return value
    known = {key: mode for mode in AutoresetMode for key in (mode.name.lower(), mode.value.lower())}
    if isinstance(value, str) and value.lower() in known:
        return known[value.lower()]
    names = [mode.name for mode in AutoresetMode]
    raise ValueError(f"autoreset_mode must be None, an AutoresetMode or one of {names} (any case), got {value!r}")


def _autoreset_mode(value: Any, auto_reset: bool) -> AutoresetMode:
    """``value`` (None, or as ``parse_autoreset_mode``) as an ``AutoresetMode`` that an ``Environment`` built
    with ``auto_reset`` can serve; None picks SAME_STEP for ``auto_reset``, else NEXT_STEP."""
    if value is None:
        return AutoresetMode.SAME_STEP if auto_reset else AutoresetMode.NEXT_STEP
    mode = parse_autoreset_mode(value)
    if mode is AutoresetMode.SAME_STEP and not auto_reset:
        raise ValueError(
            "autoreset_mode SAME_STEP resets inside the simulator's step: build the Environment with "
            "auto_reset=True (swarp.make(..., auto_reset=True)), or use NEXT_STEP"
        )
    if mode is not AutoresetMode.SAME_STEP and auto_reset:
        raise ValueError(
            f"autoreset_mode {mode.name} needs an Environment built with auto_reset=False (the simulator would "
            "reset finished envs itself): use swarp.make(..., auto_reset=False), or autoreset_mode SAME_STEP"
        )
    return mode


def sub_env_action_space(env: Environment, flatten_agents: bool) -> gymnasium.spaces.Space:
    """One sub-env's action space over ``env``'s A agents (the module docstring, "Spaces").

    Continuous: ``Box(low, high)`` of ``env.action_bounds`` [physical units], shape (A, act_dim)
    (``flatten_agents``: (A * act_dim,)), the simulator's float dtype. Discrete kinds: int64
    ``MultiDiscrete`` of ``env.action_space.heads`` for every agent, shape (A, width)
    (``flatten_agents``: (A * width,)), except one agent's one flat index when flattened:
    ``Discrete(prod(nvec))``.
    """
    space, A = env.action_space, env.n_agents
    if not space.discrete:
        np_dtype = torch.empty((), dtype=env.dtype).numpy().dtype
        low, high = (b.cpu().numpy().astype(np_dtype) for b in env.action_bounds)
        if flatten_agents:
            low, high = low.reshape(-1), high.reshape(-1)
        return gymnasium.spaces.Box(low, high, dtype=np_dtype)
    return index_space(space, A, flatten_agents)


def sim_actions(env: Environment, actions: Any, shape: tuple[int, ...], dims: str, name: str) -> torch.Tensor:
    """``actions`` of ``shape`` (an action space's) as what ``env.step`` takes: [n_envs, A, act_dim]
    of the simulator's float dtype (continuous) or [n_envs, A, width] int64 indices (discrete kinds).

    Raises:
        TypeError: not real numbers (continuous) or not integers (discrete kinds; floats refused).
        ValueError: not of ``shape``.
    """
    if env.action_space.discrete:
        tensor = index_tensor(actions, name, shape, env.torch_device, dims)
    else:
        tensor = real_tensor(actions, name, shape, env.dtype, env.torch_device, dims)
    return tensor.reshape(env.n_envs, env.n_agents, env.act_dim)


def _numpy_wrappers() -> tuple[type, ...]:
    """Gymnasium's vector wrappers that run numpy code on what the env returns, or on the actions."""
    from gymnasium.wrappers import vector

    return (
        vector.RecordEpisodeStatistics,
        vector.NormalizeObservation,
        vector.NormalizeReward,
        vector.DictInfoToList,
        vector.VectorizeTransformObservation,  # FlattenObservation, DtypeObservation, RescaleObservation...
        vector.VectorizeTransformAction,  # ClipAction, RescaleAction
        vector.VectorizeTransformReward,  # ClipReward
    )


class SwarpVectorEnv(gymnasium.vector.VectorEnv):
    """A swarp ``Environment`` as a Gymnasium vector env of ``n_envs`` sub-envs (see the module docstring).

    Args:
        env: The ``swarp.Environment`` to wrap.
        backend: ``"numpy"`` (host arrays; what Gymnasium's wrappers need) or ``"torch"`` (device
            tensors; refused by Gymnasium's numpy wrappers with a ``TypeError``).
        reward: ``"mean"`` or ``"sum"`` over agents, the env's scalar reward.
        render_mode: ``None`` or ``"rgb_array"`` (``render`` then returns one frame per sub-env).
        autoreset_mode: ``None`` (``NEXT_STEP`` if ``env`` was built with ``auto_reset=False``,
            ``SAME_STEP`` if with ``auto_reset=True``), or an ``AutoresetMode`` / its name
            (``"next_step"``, ``"same_step"``, ``"disabled"``) that ``env`` can serve.
        flatten_agents: Join the agent and feature axes: sub-env spaces ``(A * obs_dim,)`` and
            ``(A * act_dim,)`` instead of ``(A, obs_dim)`` and ``(A, act_dim)``.

    The action spaces follow ``env.action_space`` (``sub_env_action_space``): a ``Box`` for
    continuous actions, an int64 ``MultiDiscrete`` (or, one agent flattened, a ``Discrete``) for
    discrete and multi-discrete ones.

    Attributes:
        sim: The wrapped ``Environment``.
        autoreset_mode: The ``AutoresetMode`` in use (also ``metadata["autoreset_mode"]``).

    Raises:
        TypeError: ``env`` is not a ``swarp.Environment``.
        ValueError: an unknown ``backend``, ``reward``, ``render_mode`` or ``autoreset_mode``, or a
            mode ``env`` cannot serve (``SAME_STEP`` needs ``auto_reset=True``, the others
            ``auto_reset=False``); an ``env`` whose agent groups differ in observation width or
            action space (``swarp.interop.spaces.check_one_space``: use the PettingZoo adapter,
            or TorchRL's / BenchMARL's, instead).
    """

    def __init__(
        self,
        env: Environment,
        backend: str = "numpy",
        reward: str = "mean",
        render_mode: str | None = None,
        autoreset_mode: AutoresetMode | str | None = None,
        flatten_agents: bool = False,
    ):
        if not isinstance(env, Environment):
            raise TypeError(f"SwarpVectorEnv wraps a swarp.Environment, got {type(env).__name__}")
        check_one_space(env, "SwarpVectorEnv")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if not isinstance(flatten_agents, bool):
            raise TypeError(f"flatten_agents must be a bool, got {flatten_agents!r}")
        self.sim = env
        self.backend = backend
        self.reward_mode = reward
        self.render_mode = render_mode
        self.autoreset_mode = _autoreset_mode(autoreset_mode, env.auto_reset)
        self.flatten_agents = flatten_agents
        self.num_envs = env.n_envs
        self._metadata: dict[str, Any] = {
            "autoreset_mode": self.autoreset_mode,
            "render_modes": ["rgb_array"],
            "render_fps": round(1.0 / env.stepper.dt),
        }
        if backend == "torch":
            self._metadata["torch"] = True  # Gymnasium's mark of an env returning torch tensors
        np_dtype = torch.empty((), dtype=env.dtype).numpy().dtype
        obs_shape = (env.n_agents * env.obs_dim,) if flatten_agents else (env.n_agents, env.obs_dim)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs_shape, np_dtype)
        self.single_action_space = sub_env_action_space(env, flatten_agents)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        # NEXT_STEP: the envs whose episode ended on the last step, reset by the next ([E] bool on
        # the device), and (numpy backend) whether there is any, known from the host copies.
        self._pending = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
        self._any_pending = False

    @property
    def metadata(self) -> dict[str, Any]:
        """``{"autoreset_mode", "render_modes", "render_fps"}`` (and ``"torch": True`` on the torch
        backend). On the torch backend, a Gymnasium numpy wrapper reading it raises ``TypeError``."""
        self._refuse_numpy_wrapper(sys._getframe(1))
        return self._metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._metadata = value

    def _refuse_numpy_wrapper(self, frame: FrameType | None) -> None:
        """On the torch backend, raise if a Gymnasium numpy wrapper of this env is calling: the
        first ``VectorWrapper`` method among the ``WRAPPER_SEARCH_DEPTH`` frames from ``frame`` up."""
        if self.backend != "torch":
            return
        for _ in range(WRAPPER_SEARCH_DEPTH):
            if frame is None:
                return
            owner = frame.f_locals.get("self")
            if isinstance(owner, gymnasium.vector.VectorWrapper):
                if getattr(owner, "env", None) is self and isinstance(owner, _numpy_wrappers()):
                    raise TypeError(
                        f"{type(owner).__name__} runs numpy code on the env's arrays, but SwarpVectorEnv("
                        "backend='torch') returns torch tensors: use backend='numpy' with Gymnasium's wrappers "
                        "(and gymnasium.wrappers.vector.NumpyToTorch(envs, device=...), which needs array-api-compat, "
                        "outermost if the learner wants torch tensors)"
                    )
                return
            frame = frame.f_back

    # --- conversions --------------------------------------------------------------------------

    def _out(self, tensor: torch.Tensor, fresh: bool = False):
        """A copy the caller owns: a host numpy array or a device tensor (``fresh``: ``tensor`` is
        already one no buffer shares)."""
        if self.backend == "torch":
            return tensor if fresh else tensor.clone()
        return tensor.detach().to("cpu", copy=True).numpy()

    def _obs(self, obs: torch.Tensor | dict[str, torch.Tensor]) -> torch.Tensor:
        obs = join_groups(obs)  # a grouped env's groups, one after the other
        return obs.reshape(obs.shape[0], -1) if self.flatten_agents else obs

    def _info(self, info: dict[str, torch.Tensor]) -> dict[str, Any]:
        return {key: self._out(value) for key, value in info.items() if key != "final_obs"}

    # --- the VectorEnv API --------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env, or those of ``options["reset_mask"]`` ([E] bool).

        Returns:
            ``(obs [E, A, obs_dim], info)`` (``flatten_agents``: obs [E, A * obs_dim]); with a mask,
            rows of other envs are their current observation. Reset envs are no longer pending a
            NEXT_STEP reset.

        Raises:
            TypeError: ``seed`` is not an int, ``options`` not a dict, or ``reset_mask`` not a bool
                mask (integer env indices are not read as one); a Gymnasium numpy wrapper over the
                torch backend.
            ValueError: an unknown key in ``options``, a ``reset_mask`` not of shape [n_envs], or
                ``seed`` together with a ``reset_mask`` (reseeding resets every env).
        """
        self._refuse_numpy_wrapper(sys._getframe(1))
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an int (one seed for the whole batch), got {type(seed).__name__}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        unknown = sorted(str(key) for key in (options or {}) if key not in RESET_OPTIONS)
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; the options are {list(RESET_OPTIONS)}")
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            if seed is not None:
                # Reseeding restarts every env's episode sequence, which a partial reset cannot do.
                raise ValueError("reset(seed=...) resets every env; it cannot be combined with options['reset_mask']")
            mask = env_mask(mask, "options['reset_mask']", self.num_envs, self.sim.torch_device)
        super().reset(seed=seed)
        if mask is None:
            obs, info = self.sim.reset(seed=None if seed is None else int(seed))
            self._pending.zero_()
            self._any_pending = False
        else:
            obs, info = self.sim.reset_at(mask), self.sim.info
            self._pending &= ~mask
            if self.backend == "numpy":
                self._any_pending = bool(self._pending.any())
        return self._out(self._obs(obs)), self._info(info)

    def step(self, actions):
        """Step every sub-env with ``actions`` of ``action_space.shape``.

        Args:
            actions: Continuous: real numbers [E, A, act_dim] (``flatten_agents``: [E, A * act_dim]),
                physical units, of any int or float dtype (converted to the simulator's). Discrete
                kinds: integer indices [E, A, width] (``flatten_agents``: [E, A * width], or [E]
                for one agent's ``Discrete``), any int dtype (floats refused), converted to int64.
                A numpy array, a nested list or a torch tensor on any device. With NEXT_STEP, the
                rows of envs being reset are ignored.

        Returns:
            ``(obs [E, A, obs_dim], reward [E], terminated [E] bool, truncated [E] bool, info)``
            (``flatten_agents``: obs [E, A * obs_dim]); reward in the scenario's units, float of the
            simulator's dtype. ``info`` holds the scenario's entries, ``"agent_reward"`` [E, A] and,
            with SAME_STEP, ``"final_obs"`` (shaped as obs) / ``"_final_obs"`` [E] bool. With
            NEXT_STEP, envs whose episode ended on the previous step are reset instead: their obs
            starts the new episode, reward 0, flags False.

        Raises:
            TypeError: ``actions`` is None, a string, an object array, or bool or complex (or
                float, for discrete kinds).
            ValueError: ``actions`` is not of the shape above.
        """
        sim = self.sim
        if isinstance(self.single_action_space, gymnasium.spaces.Discrete):
            dims = "[n_envs]"
        elif self.flatten_agents:
            dims = "[n_envs, n_agents * act_dim]"
        else:
            dims = "[n_envs, n_agents, act_dim]"
        actions = sim_actions(sim, actions, self.action_space.shape, dims, "actions")
        if self.autoreset_mode is AutoresetMode.NEXT_STEP and (self.backend == "torch" or self._any_pending):
            return self._next_step(actions)
        obs, reward, terminated, truncated, info = sim.step(actions)
        reward = join_groups(reward)
        env_reward = reward.mean(dim=1) if self.reward_mode == "mean" else reward.sum(dim=1)
        out_info = self._info(info)
        out_info["agent_reward"] = self._out(reward)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            out_info["final_obs"] = self._out(self._obs(info["final_obs"]))
            out_info["_final_obs"] = self._out(terminated | truncated, fresh=True)
        out_obs, out_reward = self._out(self._obs(obs)), self._out(env_reward, fresh=True)
        out = (out_obs, out_reward, self._out(terminated), self._out(truncated))
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:  # none pending (numpy backend): plain step
            self._pending.copy_(terminated | truncated)
            self._any_pending = bool(out[2].any() or out[3].any())
        return (*out, out_info)

    def _next_step(self, actions: torch.Tensor):
        """A NEXT_STEP step: step every env, then reset those pending (their action zeroed, their
        step's results masked). No host sync beyond the numpy backend's copies."""
        sim, pending = self.sim, self._pending
        keep = ~pending
        sim.step(actions.masked_fill(pending.view(-1, 1, 1), 0))
        sim.reset_at(pending)  # refreshes the reset envs' obs rows and info
        reward = torch.where(keep.view(-1, 1), sim.reward, 0.0)
        terminated, truncated = sim.terminated & keep, sim.truncated & keep
        env_reward = reward.mean(dim=1) if self.reward_mode == "mean" else reward.sum(dim=1)
        out_info = self._info(sim.info)
        out_info["agent_reward"] = self._out(reward, fresh=True)
        self._pending = terminated | truncated
        out_terminated, out_truncated = self._out(terminated, fresh=True), self._out(truncated, fresh=True)
        if self.backend == "numpy":
            self._any_pending = bool(out_terminated.any() or out_truncated.any())
        obs = self._out(self._obs(sim.obs))
        return obs, self._out(env_reward, fresh=True), out_terminated, out_truncated, out_info

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One (H, W, 3) uint8 frame per sub-env with ``render_mode="rgb_array"``, else ``None``."""
        if self.render_mode != "rgb_array":
            return None
        return tuple(self.sim.render(env_index=i) for i in range(self.num_envs))

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped ``Environment`` (``close()`` calls this once)."""
        sim = getattr(self, "sim", None)  # absent when __init__ raised (Gymnasium's __del__ closes)
        if sim is not None:
            sim.close()

    def __repr__(self) -> str:
        return (
            f"SwarpVectorEnv({self.sim.scenario.name!r}, num_envs={self.num_envs}, backend={self.backend!r}, "
            f"autoreset_mode={self.autoreset_mode.name})"
        )
