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

Inputs are checked here, once, from metadata alone (no host sync): actions must be real numbers of
shape [n_envs, n_agents, act_dim] exactly (a numpy array, a nested list or a torch tensor; never
broadcast; any int or float dtype, converted to the simulator's, finite values beyond its range
kept finite); NaN and inf are passed on, acting as 0 and raising ``sim.invalid_actions()``.
``options`` may hold only ``"reset_mask"``, a bool mask [n_envs] (env indices are rejected, as
``Environment.reset_at`` rejects them). ``close()`` closes the wrapped ``Environment``. The
``Environment`` resets itself when built, so ``step`` before the first ``reset`` is valid.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from swarp.env.environment import Environment
from swarp.interop.checks import env_mask, real_tensor

BACKENDS = ("numpy", "torch")
REWARD_MODES = ("mean", "sum")
#: The keys ``reset(options=...)`` understands.
RESET_OPTIONS = ("reset_mask",)


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

    # --- the VectorEnv API --------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env, or those of ``options["reset_mask"]`` ([E] bool).

        Returns:
            ``(obs [E, A, obs_dim], info)``; with a mask, rows of other envs are their current
            observation.

        Raises:
            TypeError: ``seed`` is not an int, ``options`` not a dict, or ``reset_mask`` not a bool
                mask (integer env indices are not read as one).
            ValueError: an unknown key in ``options``, a ``reset_mask`` not of shape [n_envs], or
                ``seed`` together with a ``reset_mask`` (reseeding resets every env).
        """
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
        else:
            obs, info = self.sim.reset_at(mask), self.sim.info
        return self._out(obs), self._info(info)

    def step(self, actions):
        """Step every sub-env with ``actions`` [E, A, act_dim] (physical units).

        Args:
            actions: Real numbers [E, A, act_dim]: a numpy array, a nested list or a torch tensor,
                of any int or float dtype and device (converted to the simulator's).

        Returns:
            ``(obs [E, A, obs_dim], reward [E], terminated [E] bool, truncated [E] bool, info)``;
            ``info`` holds the scenario's entries, ``"agent_reward"`` [E, A] and, with auto-reset,
            ``"final_obs"`` / ``"_final_obs"``.

        Raises:
            TypeError: ``actions`` is None, a string, an object array, or bool or complex.
            ValueError: ``actions`` is not of shape [E, A, act_dim].
        """
        sim = self.sim
        shape = (sim.n_envs, sim.n_agents, sim.act_dim)
        actions = real_tensor(actions, "actions", shape, sim.dtype, sim.torch_device, "[n_envs, n_agents, act_dim]")
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

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped ``Environment`` (``close()`` calls this once)."""
        self.sim.close()

    def __repr__(self) -> str:
        return f"SwarpVectorEnv({self.sim.scenario.name!r}, num_envs={self.num_envs}, backend={self.backend!r})"
