"""Gymnasium adapter: an ``Environment`` as a ``gymnasium.vector.VectorEnv``, and registered single envs.

Needs the ``gymnasium`` extra.

    sim = swarp.make("navigation", n_envs=64)         # auto_reset=False, swarp's default
    envs = SwarpVectorEnv(sim)                        # NEXT_STEP auto-reset; numpy in, numpy out
    obs, info = envs.reset(seed=0)                    # obs [64, A, obs_dim] float32
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Spaces keep the agent axis: each sub-env observes a ``Box(-inf, inf, (A, obs_dim))`` and acts in a
``Box(low, high, (A, act_dim))`` whose bounds are ``sim.action_bounds`` (physical units), so the
batched spaces are ``(n_envs, A, ...)``. ``flatten_agents=True`` joins the last two axes instead
(``(A * obs_dim,)`` and ``(A * act_dim,)`` per sub-env: one learner acting for every agent).
``reward`` is one number per env as Gymnasium's vector API requires: the mean over agents by default
(``reward="sum"`` for the sum), with the per-agent rewards [E, A] in ``info["agent_reward"]``.

Auto-reset (``autoreset_mode``, an ``AutoresetMode`` or its name; ``metadata["autoreset_mode"]``):

* ``NEXT_STEP``, Gymnasium's default and this adapter's for an ``Environment`` built with
  ``auto_reset=False``. A step that ends an env's episode returns its last observation; the next
  ``step`` resets that env instead of stepping it: its observation starts the new episode, its
  reward (and ``info["agent_reward"]`` row) is 0, its ``terminated`` / ``truncated`` are False, its
  action is ignored (zeroed before the step, so a NaN there raises no flag) and its info rows
  describe the reset. Built on ``Environment.reset_at``: no host sync on the torch backend; the
  numpy backend skips the reset launch when no env finished (it knows from the last step's
  outputs, already on the host). Every Gymnasium vector wrapper accepts this mode.
* ``SAME_STEP``, the default for an ``Environment`` built with ``auto_reset=True``. A finished env is
  reset inside ``step``; the returned observation starts its next episode,
  ``info["final_obs"]`` [E, A, obs_dim] holds the last observation of the finished envs (rows where
  ``info["_final_obs"]`` [E] is set; other rows are stale) and the scenario's info entries describe
  the finishing step. Gymnasium's observation wrappers (``NormalizeObservation``,
  ``FlattenObservation``, ``TransformObservation``, ``DtypeObservation``...) reject this mode.
* ``DISABLED`` (``auto_reset=False``, asked for explicitly). Reset finished envs yourself with
  ``reset(options={"reset_mask": mask})`` (mask [E] bool), or all of them with ``reset()``.
  ``NormalizeObservation`` rejects this mode.

``backend="numpy"`` (default) returns numpy arrays, copied to the host on every call: what
Gymnasium's wrappers expect. ``backend="torch"`` returns torch tensors on the simulator's device,
cloned so they survive the next step, for loops of your own (or TorchRL); both accept numpy or torch
actions. Gymnasium's stateful and vectorized wrappers run numpy code on what ``step`` returns (or
on the actions), whatever the device, so they cannot take torch tensors. Wrapping a torch-backend
env in ``RecordEpisodeStatistics``, ``NormalizeObservation``, ``NormalizeReward``,
``DictInfoToList`` or one of the ``VectorizeTransformObservation`` / ``VectorizeTransformAction`` /
``VectorizeTransformReward`` families (``FlattenObservation``, ``DtypeObservation``,
``RescaleObservation``, ``ClipAction``, ``RescaleAction``, ``ClipReward``...) raises a ``TypeError``
naming the fix, at construction or at the first ``reset``: build the env with ``backend="numpy"``,
wrap it, and put ``gymnasium.wrappers.vector.NumpyToTorch`` outermost if the learner wants tensors
(that wrapper needs the ``array-api-compat`` package). The check reads the stack frames just above
``metadata`` and ``reset`` for the wrapper calling them (every wrapper reaches one of them before
its first step, so ``step`` itself pays nothing). Wrappers that
apply your own function (``TransformObservation``, ``TransformReward``, ``TransformAction``) and
``RecordVideo`` stay allowed.

``reset(seed=s)`` restarts the simulator's counter-based reset RNG from ``s`` (an int in
[0, 2^31); one seed for the whole batch, envs still differ), so seeded resets are reproducible.

Inputs are checked here, once, from metadata alone (no host sync): actions must be real numbers of
shape [n_envs, n_agents, act_dim] (``flatten_agents``: [n_envs, n_agents * act_dim]) exactly (a
numpy array, a nested list or a torch tensor; never broadcast; any int or float dtype, converted to
the simulator's, finite values beyond its range kept finite); NaN and inf are passed on, acting as 0
and raising ``sim.invalid_actions()``. ``options`` may hold only ``"reset_mask"``, a bool mask
[n_envs] (env indices are rejected, as ``Environment.reset_at`` rejects them). ``close()`` closes
the wrapped ``Environment``. The ``Environment`` resets itself when built, so ``step`` before the
first ``reset`` is valid.

Registered envs. Importing this module registers ``"swarp/<scenario>-v0"`` with Gymnasium for
every scenario ``swarp.make`` knows (``register_envs()`` registers scenarios added later). Gymnasium
1.x loads no plugins, so something must import it: ``import swarp.interop.gymnasium`` (then
``gymnasium.register_envs(swarp.interop.gymnasium)`` keeps linters from calling the import unused),
or the id's module prefix, ``gymnasium.make("swarp.interop.gymnasium:swarp/navigation-v0")``:

    import gymnasium
    import swarp.interop.gymnasium

    env = gymnasium.make("swarp/navigation-v0")              # SwarpGymnasiumEnv: one env, agents flattened
    envs = gymnasium.make_vec("swarp/navigation-v0", num_envs=64)  # SwarpVectorEnv, NEXT_STEP

Keywords of ``make`` / ``make_vec`` go to ``swarp.make`` (scenario options such as ``n_agents``,
and ``max_steps``, ``device``, ``seed``...) or to the adapter (``reward``, and for ``make_vec``
``backend``, ``autoreset_mode``, ``flatten_agents``); ``make`` simulates on the CPU unless given a
``device`` (one env is latency-bound), ``make_vec`` on CUDA when available. Both flatten the
agents: a ``SwarpGymnasiumEnv`` observes ``Box(-inf, inf, (A * obs_dim,))`` and acts in
``Box(low, high, (A * act_dim,))``, the same single spaces ``make_vec`` batches.
``vectorization_mode="sync"`` builds Gymnasium's ``SyncVectorEnv`` of ``SwarpGymnasiumEnv``
instead (one simulator per env: slower). Episodes end as the scenario's do (``max_steps``); the
registrations set no ``max_episode_steps``. (``swarp.interop.torchrl.SwarpEnv`` is TorchRL's
adapter, a different class.)
"""

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
from swarp.env.make import make
from swarp.interop.checks import env_mask, real_tensor
from swarp.scenarios.framework.base import get_scenario, scenario_names

BACKENDS = ("numpy", "torch")
REWARD_MODES = ("mean", "sum")
#: The keys ``reset(options=...)`` understands.
RESET_OPTIONS = ("reset_mask",)
#: The Gymnasium namespace of the registered envs: ``"swarp/<scenario>-v0"``.
NAMESPACE = "swarp"
#: The version of every registered env id.
VERSION = 0
#: Stack frames searched above ``metadata`` / ``reset`` for the wrapper that calls them.
WRAPPER_SEARCH_DEPTH = 4


def env_id(scenario: str) -> str:
    """The Gymnasium id of ``scenario``'s registered env: ``"swarp/<scenario>-v0"``."""
    return f"{NAMESPACE}/{scenario}-v{VERSION}"


def _parse_mode(value: Any) -> AutoresetMode:
    """``value`` (an ``AutoresetMode``, or its name or value in any case) as an ``AutoresetMode``."""
    if isinstance(value, AutoresetMode):
        return value
    known = {key: mode for mode in AutoresetMode for key in (mode.name.lower(), mode.value.lower())}
    if isinstance(value, str) and value.lower() in known:
        return known[value.lower()]
    names = [mode.name for mode in AutoresetMode]
    raise ValueError(f"autoreset_mode must be None, an AutoresetMode or one of {names} (any case), got {value!r}")


def _autoreset_mode(value: Any, auto_reset: bool) -> AutoresetMode:
    """``value`` (None, or as ``_parse_mode``) as an ``AutoresetMode`` that an ``Environment`` built
    with ``auto_reset`` can serve; None picks SAME_STEP for ``auto_reset``, else NEXT_STEP."""
    if value is None:
        return AutoresetMode.SAME_STEP if auto_reset else AutoresetMode.NEXT_STEP
    mode = _parse_mode(value)
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

    Attributes:
        sim: The wrapped ``Environment``.
        autoreset_mode: The ``AutoresetMode`` in use (also ``metadata["autoreset_mode"]``).

    Raises:
        TypeError: ``env`` is not a ``swarp.Environment``.
        ValueError: an unknown ``backend``, ``reward``, ``render_mode`` or ``autoreset_mode``, or a
            mode ``env`` cannot serve (``SAME_STEP`` needs ``auto_reset=True``, the others
            ``auto_reset=False``).
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
        low, high = (b.cpu().numpy().astype(np_dtype) for b in env.action_bounds)
        obs_shape = (env.n_agents, env.obs_dim)
        if flatten_agents:
            obs_shape, low, high = (env.n_agents * env.obs_dim,), low.reshape(-1), high.reshape(-1)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs_shape, np_dtype)
        self.single_action_space = gymnasium.spaces.Box(low, high, dtype=np_dtype)
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

    def _obs(self, obs: torch.Tensor) -> torch.Tensor:
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
        """Step every sub-env with ``actions`` [E, A, act_dim] (physical units).

        Args:
            actions: Real numbers [E, A, act_dim] (``flatten_agents``: [E, A * act_dim]): a numpy
                array, a nested list or a torch tensor, of any int or float dtype and device
                (converted to the simulator's). With NEXT_STEP, the rows of envs being reset are
                ignored.

        Returns:
            ``(obs [E, A, obs_dim], reward [E], terminated [E] bool, truncated [E] bool, info)``
            (``flatten_agents``: obs [E, A * obs_dim]); reward in the scenario's units, float of the
            simulator's dtype. ``info`` holds the scenario's entries, ``"agent_reward"`` [E, A] and,
            with SAME_STEP, ``"final_obs"`` (shaped as obs) / ``"_final_obs"`` [E] bool. With
            NEXT_STEP, envs whose episode ended on the previous step are reset instead: their obs
            starts the new episode, reward 0, flags False.

        Raises:
            TypeError: ``actions`` is None, a string, an object array, or bool or complex.
            ValueError: ``actions`` is not of the shape above.
        """
        sim = self.sim
        if self.flatten_agents:
            shape, dims = (sim.n_envs, sim.n_agents * sim.act_dim), "[n_envs, n_agents * act_dim]"
        else:
            shape, dims = (sim.n_envs, sim.n_agents, sim.act_dim), "[n_envs, n_agents, act_dim]"
        actions = real_tensor(actions, "actions", shape, sim.dtype, sim.torch_device, dims)
        actions = actions.reshape(sim.n_envs, sim.n_agents, sim.act_dim)
        if self.autoreset_mode is AutoresetMode.NEXT_STEP and (self.backend == "torch" or self._any_pending):
            return self._next_step(actions)
        obs, reward, terminated, truncated, info = sim.step(actions)
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
        sim.step(actions.masked_fill(pending.view(-1, 1, 1), 0.0))
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


# --- the registered envs ------------------------------------------------------------------------

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
        ValueError: an unknown scenario, mode or argument value.
    """
    _check_keywords(kwargs, "gymnasium.make_vec of a swarp env")
    mode = _parse_mode(autoreset_mode)
    sim = make(
        scenario, n_envs=num_envs, device=device, seed=seed, auto_reset=mode is AutoresetMode.SAME_STEP, **kwargs
    )
    return SwarpVectorEnv(
        sim, backend=backend, reward=reward, render_mode=render_mode, autoreset_mode=mode, flatten_agents=flatten_agents
    )


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

    Attributes:
        sim: The wrapped ``Environment``.

    Raises:
        TypeError: ``n_envs``, ``auto_reset`` or ``batch_size`` among ``kwargs``, an unknown
            keyword, or ``scenario`` neither a name nor an ``Environment``.
        ValueError: an unknown scenario, ``reward`` or ``render_mode``, or an ``Environment`` of
            more than one env or built with ``auto_reset=True``.
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
        self.sim = sim
        self.reward_mode = reward
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": round(1.0 / sim.stepper.dt)}
        np_dtype = torch.empty((), dtype=sim.dtype).numpy().dtype
        low, high = (b.cpu().numpy().astype(np_dtype).reshape(-1) for b in sim.action_bounds)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (sim.n_agents * sim.obs_dim,), np_dtype)
        self.action_space = gymnasium.spaces.Box(low, high, dtype=np_dtype)

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
        return obs[0].reshape(-1).to("cpu", copy=True).numpy(), self._info(info)

    def step(self, action):
        """Step the env with ``action`` [A * act_dim] (physical units, agent-major).

        Args:
            action: Real numbers [A * act_dim]: a numpy array, a nested list or a torch tensor of
                any int or float dtype (values beyond the bounds are clamped; NaN and inf act as 0
                and raise ``sim.invalid_actions()``).

        Returns:
            ``(obs [A * obs_dim], reward float, terminated bool, truncated bool, info)``: reward the
            mean (or sum) over agents; ``info`` holds the scenario's entries and ``"agent_reward"``
            [A], the one env's rows.

        Raises:
            TypeError: ``action`` is None, a string, an object array, or bool or complex.
            ValueError: ``action`` is not of shape [A * act_dim].
        """
        sim = self.sim
        shape = (sim.n_agents * sim.act_dim,)
        action = real_tensor(action, "action", shape, sim.dtype, sim.torch_device, "[n_agents * act_dim]")
        obs, reward, terminated, truncated, info = sim.step(action.reshape(1, sim.n_agents, sim.act_dim))
        info = self._info(info)
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
            entry_point=f"{__name__}:SwarpGymnasiumEnv",
            vector_entry_point=f"{__name__}:make_vector_env",
            kwargs={"scenario": name},
            disable_env_checker=False,
        )
        added.append(gym_id)
    return added


register_envs()
