"""Gymnasium adapter: an ``Environment`` as a ``gymnasium.vector.VectorEnv`` (needs the ``gymnasium`` extra).

    sim = swarp.make("navigation", n_envs=64, auto_reset=True)
    envs = SwarpVectorEnv(sim)                        # numpy in, numpy out
    obs, info = envs.reset(seed=0)                    # obs [64, A, obs_dim] float32
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Spaces keep the agent axis: each sub-env observes a ``Box(-inf, inf, (A, obs_dim))`` and acts in a
``Box(low, high, (A, act_dim))`` whose bounds are ``sim.action_bounds`` (physical units), so the
batched spaces are ``(n_envs, A, ...)``; a single-agent learner flattens the last two axes.
``reward`` is one number per env as Gymnasium's vector API requires: the mean over agents by default
(``reward="sum"`` for the sum), with the per-agent rewards [E, A] in ``info["agent_reward"]``.

``backend="numpy"`` (default) returns numpy arrays, copied to the host on every call (what
Gymnasium's own tooling expects); ``backend="torch"`` returns torch tensors on the simulator's
device, cloned so they survive the next step, and accepts actions as tensors on that device. Both
accept numpy or torch actions.

Auto-reset follows the wrapped ``Environment``:

* ``auto_reset=True``: ``metadata["autoreset_mode"] = AutoresetMode.SAME_STEP``. A finished env is
  reset inside ``step``; the returned observation starts its next episode,
  ``info["final_obs"]`` [E, A, obs_dim] holds the last observation of the finished envs (rows where
  ``info["_final_obs"]`` [E] is set; other rows are stale) and the scenario's info entries describe
  the finishing step.
* ``auto_reset=False``: ``AutoresetMode.DISABLED``. Reset finished envs yourself with
  ``reset(options={"reset_mask": mask})`` (mask [E] bool), or all of them with ``reset()``.

``reset(seed=s)`` restarts the simulator's counter-based reset RNG from ``s`` (an int in
[0, 2^31); one seed for the whole batch, envs still differ), so seeded resets are reproducible.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from swarp.env.environment import Environment

BACKENDS = ("numpy", "torch")
REWARD_MODES = ("mean", "sum")


class SwarpVectorEnv(gymnasium.vector.VectorEnv):
    """A swarp ``Environment`` as a Gymnasium vector env of ``n_envs`` sub-envs (see the module docstring).

    Args:
        env: The ``swarp.Environment`` to wrap.
        backend: ``"numpy"`` (host arrays) or ``"torch"`` (device tensors).
        reward: ``"mean"`` or ``"sum"`` over agents, the env's scalar reward.
        render_mode: ``None`` or ``"rgb_array"`` (``render`` then returns one frame per sub-env).

    Attributes:
        sim: The wrapped ``Environment``.
    """

    def __init__(self, env: Environment, backend: str = "numpy", reward: str = "mean", render_mode: str | None = None):
        if not isinstance(env, Environment):
            raise TypeError(f"SwarpVectorEnv wraps a swarp.Environment, got {type(env).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.sim = env
        self.backend = backend
        self.reward_mode = reward
        self.render_mode = render_mode
        self.num_envs = env.n_envs
        self.metadata = {
            "autoreset_mode": AutoresetMode.SAME_STEP if env.auto_reset else AutoresetMode.DISABLED,
            "render_modes": ["rgb_array"],
            "render_fps": round(1.0 / env.stepper.dt),
        }
        np_dtype = torch.empty((), dtype=env.dtype).numpy().dtype
        low, high = (b.cpu().numpy().astype(np_dtype) for b in env.action_bounds)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (env.n_agents, env.obs_dim), np_dtype)
        self.single_action_space = gymnasium.spaces.Box(low, high, dtype=np_dtype)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    # --- conversions --------------------------------------------------------------------------

    def _out(self, tensor: torch.Tensor):
        """A copy the caller owns: a host numpy array or a device tensor."""
        if self.backend == "torch":
            return tensor.clone()
        return tensor.detach().to("cpu", copy=True).numpy()

    def _info(self, info: dict[str, torch.Tensor]) -> dict[str, Any]:
        return {key: self._out(value) for key, value in info.items() if key != "final_obs"}

    def _to_sim(self, value, name: str, dtype: torch.dtype) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.to(device=self.sim.torch_device, dtype=dtype)
        try:
            array = np.asarray(value)
        except Exception as error:
            raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(value).__name__}") from error
        return torch.as_tensor(array, dtype=dtype, device=self.sim.torch_device)

    # --- the VectorEnv API --------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env, or those of ``options["reset_mask"]`` ([E] bool).

        Returns:
            ``(obs [E, A, obs_dim], info)``; with a mask, rows of other envs are their current
            observation.

        Raises:
            ValueError: ``seed`` together with a ``reset_mask`` (reseeding resets every env).
        """
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int (one seed for the whole batch), got {type(seed).__name__}")
        super().reset(seed=seed)
        mask = (options or {}).get("reset_mask")
        if mask is None:
            obs, info = self.sim.reset(seed=None if seed is None else int(seed))
        else:
            if seed is not None:
                # Reseeding restarts every env's episode sequence, which a partial reset cannot do.
                raise ValueError("reset(seed=...) resets every env; it cannot be combined with options['reset_mask']")
            mask = self._to_sim(mask, "reset_mask", torch.bool)
            obs, info = self.sim.reset_at(mask), self.sim.info
        return self._out(obs), self._info(info)

    def step(self, actions):
        """Step every sub-env with ``actions`` [E, A, act_dim] (physical units).

        Returns:
            ``(obs [E, A, obs_dim], reward [E], terminated [E] bool, truncated [E] bool, info)``;
            ``info`` holds the scenario's entries, ``"agent_reward"`` [E, A] and, with auto-reset,
            ``"final_obs"`` / ``"_final_obs"``.
        """
        actions = self._to_sim(actions, "actions", self.sim.dtype)
        obs, reward, terminated, truncated, info = self.sim.step(actions)
        env_reward = reward.mean(dim=1) if self.reward_mode == "mean" else reward.sum(dim=1)
        out_info = self._info(info)
        out_info["agent_reward"] = self._out(reward)
        if self.sim.auto_reset:
            out_info["final_obs"] = self._out(info["final_obs"])
            out_info["_final_obs"] = self._out(terminated | truncated)
        return self._out(obs), self._out(env_reward), self._out(terminated), self._out(truncated), out_info

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One (H, W, 3) uint8 frame per sub-env with ``render_mode="rgb_array"``, else ``None``."""
        if self.render_mode != "rgb_array":
            return None
        return tuple(self.sim.render(env_index=i) for i in range(self.num_envs))

    def __repr__(self) -> str:
        return f"SwarpVectorEnv({self.sim.scenario.name!r}, num_envs={self.num_envs}, backend={self.backend!r})"
