"""Stable-Baselines3 adapter: an ``Environment`` as an SB3 ``VecEnv`` (needs ``stable-baselines3``).

    venv = make_vec_env("navigation", n_envs=16, layout="per_agent", device="cpu")
    model = PPO("MlpPolicy", venv, n_steps=128).learn(100_000)

    sim = swarp.make("navigation", n_envs=16, auto_reset=True)
    venv = SwarpVecEnv(sim, layout="per_env")            # the same, built from an Environment

Two layouts map the [E, A] batch of a swarp ``Environment`` (E envs of A agents) onto SB3's flat
list of envs:

===================  ============================================  ==========================================
layout               ``"per_agent"`` (default)                     ``"per_env"``
===================  ============================================  ==========================================
one SB3 env is       one agent of one swarp env                    one whole swarp env
``num_envs``         E * A (SB3 env ``e * A + a`` is agent a of e)  E
observation          ``Box(-inf, inf, (obs_dim,))``                ``Box(-inf, inf, (A * obs_dim,))``
action               ``Box(low, high, (act_dim,))``                ``Box(low, high, (A * act_dim,))``
reward               the agent's own reward                        mean (or ``reward="sum"``) over agents
done                 its swarp env's ``terminated | truncated``    ``terminated | truncated``
===================  ============================================  ==========================================

``"per_agent"`` is the parameter-sharing route: one SB3 policy acts for every agent from its own
observation (independent learners sharing weights), and all A agents of a swarp env finish together.
``"per_env"`` is the centralised route: one policy sees the whole env (obs flattened agent-major,
``[agent 0 obs, agent 1 obs, ...]``) and emits every agent's action (same order).

Discrete action spaces (``swarp.make(..., action_space="discrete" | "multidiscrete")``,
``swarp.core.spaces``): ``"per_agent"`` gives each SB3 env ``Discrete(prod(nvec))`` (one flat
index; SB3's DQN takes it too) or ``MultiDiscrete(nvec)``; ``"per_env"`` gives ``MultiDiscrete`` of
every agent's choices in agent order (``Discrete`` for one agent's one flat index). Actions are
then integer indices, int64 on their way to the simulator, which decodes them with VMAS 1.5.2's
levels (an index out of range acts as a zero command and raises ``sim.invalid_actions()``); floats
raise ``TypeError`` and ``normalize_actions=True`` a ``ValueError``. Every agent of a one-group
env shares one ``ActionSpace``, so both layouts always have these spaces.

Communication (``WorldSpec.comm_dim`` C, VMAS 1.5.2's ``dim_c`` layout): a continuous agent's
``act_dim`` is ``D + C``, its physical command then its message, bounded [0, 1] in
``sim.action_bounds`` and so in the ``Box`` (``normalize_actions`` maps [-1, 1] onto [0, 1] there);
discrete agents act in ``Discrete(prod(nvec) * C)`` (the message's choice the flat index's least
significant digit) or ``MultiDiscrete([*nvec, C])``; ``sim.comm`` [E, A, C] holds what was sent
(a choice one-hot). A ``silent`` group gives agents different spaces: refused as below.

Agent groups (a scenario declaring several, ``sim.grouped``): both layouts give every agent one
observation width and one action space, so an env whose groups differ in either is refused at
construction (``ValueError`` naming the alternatives: ``swarp.interop.pettingzoo`` gives each agent
its group's spaces, ``swarp.interop.torchrl`` / ``swarp.interop.benchmarl`` one spec per group;
``swarp.interop.spaces.check_one_space``). Groups that differ in name only (every group continuous
with one ``ActionSpace`` and one ``obs_dim``) are served as one group of A agents, in group order:
the by-group observations, rewards and final observations are joined along the agent axis.

Actions are physical (the box is ``sim.action_bounds``, the box the kernels clamp to). In the
``"per_agent"`` layout all SB3 envs share one box, so a fleet whose agents have different bounds
gets their elementwise union (the kernels still clamp each agent to its own); with
``normalize_actions=True`` the box is ``[-1, 1]`` instead and each action is mapped affinely onto its
agent's bounds (finite values outside are clamped to ``[-1, 1]`` first), as SB3 recommends.
Actions may be any real numpy array or torch tensor of shape ``(num_envs, *action_space.shape)``;
they are converted to the simulator's dtype and device. NaN and inf are passed on: they act as 0
and raise ``sim.invalid_actions()``.

The contract is SB3's own (``DummyVecEnv``'s): finished envs are reset inside ``step``; the
returned observation starts the next episode and ``infos[i]["terminal_observation"]`` holds the
last one (from ``info["final_obs"]``); every info has ``"TimeLimit.truncated"`` (``truncated and not
terminated``), so SB3 bootstraps truncated episodes; with ``episode_stats`` (default) a finished
env's info has ``"episode": {"r": return, "l": length [steps], "t": wall time [s]}``, what
``VecMonitor`` adds (wrap in ``VecMonitor`` for its CSV log: it overwrites these). ``info_keys``
copies scenario info entries (``sim.info``) into every info dict, e.g. for
``VecMonitor(venv, info_keywords=("on_goal",))``. Observations are of the simulator's dtype,
rewards float32, dones bool; every array returned is a host copy the caller owns.

``step_async`` starts the step with ``sim.send`` (it overlaps whatever the caller does before
``step_wait``); ``step_wait`` finishes it. ``seed(s)`` takes effect at the next ``reset()``, which
restarts the simulator's counter-based reset RNG from ``s % 2^31`` (one seed for the batch: envs
still draw differently, keyed by their index). ``get_attr``, ``set_attr`` and ``env_method`` reach the
wrapped ``Environment``, shared by every SB3 env. ``close()`` closes it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, tile_images

from swarp.env.environment import Environment
from swarp.env.make import make
from swarp.interop.checks import index_tensor, real_tensor, rescale_actions
from swarp.interop.spaces import check_one_space, index_space, join_groups

LAYOUTS = ("per_agent", "per_env")
REWARD_MODES = ("mean", "sum")
RENDER_MODES = (None, "rgb_array")
#: Seeds handed to the simulator are reduced into its range [0, 2^31).
SEED_MODULUS = 2**31


class SwarpVecEnv(VecEnv):
    """A swarp ``Environment`` as a Stable-Baselines3 ``VecEnv`` (see the module docstring).

    Args:
        env: The ``swarp.Environment`` to wrap, built with ``auto_reset=True``.
        layout: ``"per_agent"`` (one SB3 env per agent: ``num_envs = E * A``, obs [obs_dim], action
            [act_dim]) or ``"per_env"`` (one SB3 env per swarp env: ``num_envs = E``, obs
            [A * obs_dim], action [A * act_dim]).
        reward: ``"per_env"`` only: ``"mean"`` (default) or ``"sum"`` of the agents' rewards.
        normalize_actions: Declare the action box ``[-1, 1]`` and map it affinely onto each agent's
            physical bounds (``env.action_bounds``); default: the physical box itself.
        episode_stats: Add ``"episode": {"r", "l", "t"}`` to the info of every env that finishes.
        info_keys: Names of scenario info entries (``env.info``) to copy into every info dict: an
            [E, A, ...] entry gives each SB3 env its agent's value (``"per_agent"``) or its env's
            row [A, ...] (``"per_env"``); an [E, ...] entry its env's value.
        render_mode: ``None`` or ``"rgb_array"`` (``render()`` then tiles one frame per swarp env).

    Attributes:
        sim: The wrapped ``Environment``.
        layout: As given.
        n_agents: A, the agents per swarp env.
        observation_space: ``Box`` of the simulator's dtype: one SB3 env's observation.
        action_space: ``Box`` of the simulator's dtype: one SB3 env's action (discrete kinds: an
            int64 ``Discrete`` or ``MultiDiscrete``, see the module docstring).

    Raises:
        TypeError: ``env`` is not an ``Environment`` (an ``EnvPool`` is not supported), or an
            argument has the wrong type.
        ValueError: ``env`` was built without ``auto_reset``, an argument has an unknown value,
            ``normalize_actions`` with discrete actions, or ``env``'s agent groups differ in
            observation width or action space (``swarp.interop.spaces.check_one_space``: use the
            PettingZoo adapter, or TorchRL's / BenchMARL's, instead).
    """

    def __init__(
        self,
        env: Environment,
        layout: str = "per_agent",
        reward: str | None = None,
        normalize_actions: bool = False,
        episode_stats: bool = True,
        info_keys: Sequence[str] = (),
        render_mode: str | None = None,
    ):
        if not isinstance(env, Environment):
            raise TypeError(f"SwarpVecEnv wraps a swarp.Environment, got {type(env).__name__}")
        check_one_space(env, "SwarpVecEnv")
        if not env.auto_reset:
            raise ValueError(
                "SwarpVecEnv needs an Environment built with auto_reset=True: SB3 VecEnvs reset finished "
                "envs inside step (swarp.make(..., auto_reset=True))"
            )
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if reward is not None and layout != "per_env":
            raise ValueError(
                f"reward={reward!r} applies to layout='per_env' only: in the 'per_agent' layout each SB3 env "
                "receives its own agent's reward"
            )
        reward = "mean" if reward is None else reward
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        for name, flag in (("normalize_actions", normalize_actions), ("episode_stats", episode_stats)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        if isinstance(info_keys, (str, bytes)) or not isinstance(info_keys, Iterable):
            raise TypeError(f"info_keys must be a sequence of names (not a string), got {info_keys!r}")
        info_keys = tuple(info_keys)
        available = sorted(k for k in env.info if k != "final_obs")
        unknown = [k for k in info_keys if k not in available]
        if unknown:
            raise ValueError(f"unknown info_keys {unknown}; this scenario's info entries are {available}")
        if render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES}, got {render_mode!r}")

        self.sim = env
        self.layout = layout
        self.reward_mode = reward
        self.normalize_actions = normalize_actions
        self.episode_stats = episode_stats
        self.info_keys = info_keys
        self.render_mode = render_mode
        E, A = env.n_envs, env.n_agents
        self.n_agents = A
        self._per_agent = layout == "per_agent"
        self._copies = A if self._per_agent else 1  # SB3 envs per swarp env
        num_envs = E * self._copies

        np_dtype = torch.empty((), dtype=env.dtype).numpy().dtype
        if normalize_actions and env.action_space.discrete:
            raise ValueError(
                f"normalize_actions applies to continuous (Box) actions; this Environment takes "
                f"{env.action_space.kind} indices (nothing to rescale): leave normalize_actions=False, or "
                f"build it with action_space='continuous'"
            )
        action_space = self._action_space(env, normalize_actions, np_dtype)
        obs_shape = (env.obs_dim,) if self._per_agent else (A * env.obs_dim,)
        observation_space = spaces.Box(-np.inf, np.inf, obs_shape, np_dtype)

        self._pending = False
        self._seed: int | None = None  # applied at the next reset
        super().__init__(num_envs, observation_space, action_space)
        self.metadata = {
            "render_modes": ["rgb_array", "human"] if render_mode == "rgb_array" else [],
            "render_fps": round(1.0 / env.stepper.dt),
        }
        self._t_start = time.time()
        self._episode_return = np.zeros(num_envs, dtype=np.float64)
        self._episode_length = np.zeros(num_envs, dtype=np.int64)

    def _action_space(self, env: Environment, normalize_actions: bool, np_dtype: np.dtype) -> spaces.Space:
        """One SB3 env's action space (see the module docstring); keeps the physical bounds
        [A, act_dim] for the rescaling of ``normalize_actions``."""
        A = env.n_agents
        low, high = (b.to(env.torch_device, env.dtype) for b in env.action_bounds)  # [A, physical dim]
        self._low, self._high = low, high
        space = env.action_space
        if space.discrete:
            return index_space(space, None if self._per_agent else A)
        if normalize_actions:
            shape = (env.act_dim,) if self._per_agent else (A * env.act_dim,)
            return spaces.Box(-1.0, 1.0, shape, np_dtype)
        if self._per_agent:
            # One box for every agent: the union of theirs (the kernels clamp each to its own).
            box_low, box_high = low.amin(dim=0), high.amax(dim=0)
            return spaces.Box(box_low.cpu().numpy(), box_high.cpu().numpy(), dtype=np_dtype)
        return spaces.Box(low.reshape(-1).cpu().numpy(), high.reshape(-1).cpu().numpy(), dtype=np_dtype)

    # --- conversions --------------------------------------------------------------------------

    def _host_obs(self, obs: torch.Tensor | dict[str, torch.Tensor]) -> np.ndarray:
        """[E, A, obs_dim] device tensor (or a grouped env's by-group views of it) -> host copy
        [num_envs, *observation_space.shape]."""
        host = join_groups(obs).detach().to("cpu", copy=True).numpy()
        return host.reshape(self.num_envs, *self.observation_space.shape)

    def _actions(self, actions: Any) -> torch.Tensor:
        """SB3 actions [num_envs, *action_space.shape] -> [E, A, act_dim] simulator tensor (of the
        simulator's dtype, or int64 indices for discrete kinds)."""
        sim = self.sim
        shape = (self.num_envs, *self.action_space.shape)
        if isinstance(self.action_space, spaces.Discrete):
            dims = "[num_envs]"
        else:
            dims = "[num_envs, act_dim]" if self._per_agent else "[num_envs, n_agents * act_dim]"
        if sim.action_space.discrete:
            return index_tensor(actions, "actions", shape, sim.torch_device, dims).reshape(sim.n_envs, sim.n_agents, -1)
        tensor = real_tensor(actions, "actions", shape, sim.dtype, sim.torch_device, dims)
        tensor = tensor.reshape(sim.n_envs, sim.n_agents, sim.act_dim)
        if self.normalize_actions:
            tensor = rescale_actions(tensor, -1.0, 1.0, self._low, self._high)
        return tensor

    def _rows(self, env_index: np.ndarray) -> np.ndarray:
        """The SB3 env indices of the swarp envs ``env_index`` [n] (ascending when it is)."""
        if not self._per_agent:
            return env_index
        return (env_index[:, None] * self.n_agents + np.arange(self.n_agents)).reshape(-1)

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        """``indices`` (None: all, an int, or an iterable of ints) as a checked list."""
        if indices is None:
            return list(range(self.num_envs))
        items = [indices] if isinstance(indices, (int, np.integer)) else indices
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(f"indices must be None, an int or an iterable of ints, got {indices!r}")
        out = []
        for i in items:
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise TypeError(f"indices must be ints, got {i!r}")
            if not -self.num_envs <= i < self.num_envs:
                raise IndexError(f"env index {i} out of range for num_envs={self.num_envs}")
            out.append(int(i) % self.num_envs)
        return out

    # --- the VecEnv API -----------------------------------------------------------------------

    def reset(self) -> np.ndarray:
        """Reset every env (a pending ``step_async`` is finished and dropped); with a seed from
        ``seed()``, restart the reset RNG from it first.

        Returns:
            obs [num_envs, *observation_space.shape] of the simulator's dtype (host copy).

        Raises:
            ValueError: options were set with ``set_options`` (swarp resets take none).
        """
        if any(self._options):
            raise ValueError(f"swarp envs take no reset options, got {self._options[0]!r} from set_options()")
        if self._pending:
            self.sim.recv()
            self._pending = False
        obs, _ = self.sim.reset(seed=self._seed)
        self._seed = None
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._episode_return[:] = 0.0
        self._episode_length[:] = 0
        return self._host_obs(obs)

    def step_async(self, actions: np.ndarray | torch.Tensor) -> None:
        """Check and convert ``actions``, and start the step (``sim.send``).

        Args:
            actions: [num_envs, act_dim] (``"per_agent"``) or [num_envs, A * act_dim] (``"per_env"``)
                real numbers in ``action_space`` (physical units, or ``[-1, 1]`` with
                ``normalize_actions``); numpy or torch, any int or float dtype and device. Discrete
                kinds: integer indices of shape ``(num_envs, *action_space.shape)`` (a ``Discrete``
                space: [num_envs]), any int dtype (floats refused); an index out of range acts as a
                zero command and raises ``sim.invalid_actions()``.

        Raises:
            TypeError: ``actions`` is not an array of real numbers (discrete kinds: of integers).
            ValueError: ``actions`` has the wrong shape.
            RuntimeError: a step is already pending (``step_async`` twice without ``step_wait``).
        """
        if self._pending:
            raise RuntimeError("step_async() was called twice without step_wait(): wait for the pending step first")
        self.sim.send(self._actions(actions))
        self._pending = True

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Finish the step started by ``step_async``.

        Returns:
            ``(obs [num_envs, *obs_shape] sim dtype, rewards [num_envs] float32, dones [num_envs]
            bool, infos)``: ``infos`` is a list of ``num_envs`` dicts, each with
            ``"TimeLimit.truncated"``; those of finished envs also have ``"terminal_observation"``
            [*obs_shape] and (``episode_stats``) ``"episode"``.

        Raises:
            RuntimeError: no step is pending.
        """
        if not self._pending:
            raise RuntimeError("step_wait() was called without a pending step_async()")
        obs, reward, terminated, truncated, info = self.sim.recv()
        reward = join_groups(reward)  # a grouped env's groups, one after the other: [E, A]
        self._pending = False
        A = self.n_agents
        terminated = terminated.to("cpu").numpy()
        truncated = truncated.to("cpu").numpy()
        done_envs = terminated | truncated  # [E], fresh arrays (the device buffers are untouched)
        if self._per_agent:
            rewards = reward.detach().to("cpu", torch.float32, copy=True).numpy().reshape(-1)
            dones = np.repeat(done_envs, A)
            time_limit = np.repeat(truncated & ~terminated, A)
        else:
            per_env = reward.mean(dim=1) if self.reward_mode == "mean" else reward.sum(dim=1)
            rewards = per_env.detach().to("cpu", torch.float32).numpy()
            dones = done_envs
            time_limit = truncated & ~terminated
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": flag} for flag in time_limit.tolist()]
        for key in self.info_keys:
            self._add_info(infos, key, info[key])

        self._episode_return += rewards
        self._episode_length += 1
        finished = np.flatnonzero(done_envs)
        if finished.size:
            rows = self._rows(finished)
            index = torch.as_tensor(finished, device=self.sim.torch_device)
            final = self._host_obs_rows(join_groups(info["final_obs"]).index_select(0, index))
            elapsed = round(time.time() - self._t_start, 6)
            returns, lengths = self._episode_return[rows].tolist(), self._episode_length[rows].tolist()
            for j, i in enumerate(rows.tolist()):
                infos[i]["terminal_observation"] = final[j]
                if self.episode_stats:
                    infos[i]["episode"] = {"r": returns[j], "l": lengths[j], "t": elapsed}
            self._episode_return[rows] = 0.0
            self._episode_length[rows] = 0
        return self._host_obs(obs), rewards, dones, infos

    def _host_obs_rows(self, rows: torch.Tensor) -> np.ndarray:
        """[n, A, obs_dim] final observations -> host [n * copies, *observation_space.shape]."""
        return rows.detach().to("cpu", copy=True).numpy().reshape(-1, *self.observation_space.shape)

    def _add_info(self, infos: list[dict[str, Any]], key: str, value: torch.Tensor) -> None:
        """Put each SB3 env's part of the scenario info entry ``value`` ([E, A, ...] or [E, ...])."""
        host = value.detach().to("cpu", copy=True).numpy()
        if self._per_agent:
            if host.ndim >= 2 and host.shape[1] == self.n_agents:
                host = host.reshape(self.num_envs, *host.shape[2:])
            else:
                host = np.repeat(host, self.n_agents, axis=0)
        for entry, part in zip(infos, host.tolist() if host.ndim == 1 else list(host), strict=True):
            entry[key] = part

    def seed(self, seed: int | None = None) -> list[int]:
        """Seed the next ``reset()``: it restarts the simulator's reset RNG from ``seed % 2^31``.

        Args:
            seed: An int, or None for a random one (as SB3 draws it).

        Returns:
            ``[seed % 2^31] * num_envs``: every SB3 env shares the batch's one seed (their draws
            still differ, keyed by env index).

        Raises:
            TypeError: ``seed`` is not an int or None.
        """
        if seed is None:
            seed = int(np.random.randint(0, SEED_MODULUS, dtype=np.int64))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
        self._seed = int(seed) % SEED_MODULUS
        self._seeds = [self._seed] * self.num_envs
        return list(self._seeds)

    def close(self) -> None:
        """Close the wrapped ``Environment`` (a pending step is finished first). Idempotent."""
        self._pending = False
        self.sim.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The wrapped ``Environment``'s attribute ``attr_name`` (``render_mode``: this adapter's),
        once per index: every SB3 env lives in the same ``Environment``.

        Raises:
            AttributeError: the ``Environment`` has no such attribute.
        """
        count = len(self._indices(indices))
        if attr_name == "render_mode":
            return [self.render_mode] * count
        if not hasattr(self.sim, attr_name):
            raise AttributeError(f"the swarp Environment has no attribute {attr_name!r}")
        return [getattr(self.sim, attr_name)] * count

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the wrapped ``Environment``, which every SB3 env shares.

        Raises:
            ValueError: ``indices`` is not every env (one env's attribute cannot differ), or
                ``attr_name`` is ``render_mode`` (fixed at construction).
        """
        if sorted(set(self._indices(indices))) != list(range(self.num_envs)):
            raise ValueError(
                "set_attr sets an attribute of the one swarp Environment every SB3 env shares: indices must "
                f"cover all {self.num_envs} envs (or be None)"
            )
        if attr_name == "render_mode":
            raise ValueError("render_mode is fixed at construction: build a new SwarpVecEnv(render_mode=...)")
        setattr(self.sim, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        """Call ``method_name`` of the wrapped ``Environment`` once (whatever ``indices``: every SB3
        env lives in it, so a call acts on all of them) and return its result once per index.

        Raises:
            AttributeError: the ``Environment`` has no such method.
        """
        count = len(self._indices(indices))
        method = getattr(self.sim, method_name, None)
        if not callable(method):
            raise AttributeError(f"the swarp Environment has no method {method_name!r}")
        return [method(*method_args, **method_kwargs)] * count

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """``[False] * len(indices)``: swarp envs are not gymnasium envs, so none is wrapped."""
        return [False] * len(self._indices(indices))

    # --- rendering ----------------------------------------------------------------------------

    def _frames(self) -> list[np.ndarray]:
        """One (H, W, 3) uint8 frame per swarp env."""
        return [self.sim.render(mode="rgb_array", env_index=e) for e in range(self.sim.n_envs)]

    def get_images(self) -> list[np.ndarray | None]:
        """One (H, W, 3) uint8 frame per SB3 env (each swarp env drawn once; its agents' SB3 envs
        share the frame), or ``None`` each without ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            warnings.warn("get_images() needs render_mode='rgb_array'", stacklevel=2)
            return [None] * self.num_envs
        return [frame for frame in self._frames() for _ in range(self._copies)]

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The frames of every swarp env tiled into one (H', W', 3) uint8 image.

        Args:
            mode: ``None`` or ``"rgb_array"``: return it; ``"human"``: also show it in a window
                (pygame, the ``viz`` extra). Needs ``render_mode="rgb_array"`` (else warns and returns
                ``None``, as SB3's ``VecEnv.render``).

        Raises:
            ValueError: ``mode`` is not one of those.
        """
        if mode not in (None, "rgb_array", "human"):
            raise ValueError(f"render mode must be None, 'rgb_array' or 'human', got {mode!r}")
        if self.render_mode != "rgb_array":
            warnings.warn("render() needs a SwarpVecEnv built with render_mode='rgb_array'", stacklevel=2)
            return None
        image = tile_images(self._frames())
        if mode == "human":
            from swarp.render.viewer import show_frame

            show_frame(image, title=f"swarp {self.sim.scenario.name}")
        return image

    def __repr__(self) -> str:
        return f"SwarpVecEnv({self.sim.scenario.name!r}, layout={self.layout!r}, num_envs={self.num_envs})"


def make_vec_env(
    scenario: str,
    n_envs: int = 1,
    layout: str = "per_agent",
    device: str | torch.device | None = None,
    seed: int = 0,
    *,
    reward: str | None = None,
    normalize_actions: bool = False,
    episode_stats: bool = True,
    info_keys: Sequence[str] = (),
    render_mode: str | None = None,
    **scenario_kwargs: Any,
) -> SwarpVecEnv:
    """Build a ``SwarpVecEnv`` over ``swarp.make(scenario, n_envs, device, seed, auto_reset=True)``.

    Args:
        scenario: A registered scenario's name (``"navigation"``, ...).
        n_envs: Swarp envs E (>= 1). The ``VecEnv`` has ``E * A`` SB3 envs in the ``"per_agent"``
            layout (A agents per env), ``E`` in ``"per_env"``.
        layout: ``"per_agent"`` or ``"per_env"`` (see ``SwarpVecEnv``).
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: CUDA when available).
        seed: Seed of the simulator's reset RNG (int in [0, 2^31)).
        reward, normalize_actions, episode_stats, info_keys, render_mode: As ``SwarpVecEnv``'s.
        **scenario_kwargs: Scenario options and ``Environment`` keywords (``max_steps``,
            ``lidar_rays``, ``dtype``, ...), as ``swarp.make`` takes them.

    Raises:
        ValueError: ``auto_reset=False`` or ``batch_size`` (an ``EnvPool``) among the keywords.
        TypeError: an unknown keyword (``swarp.make`` lists the valid ones).
    """
    if scenario_kwargs.pop("auto_reset", True) is not True:
        raise ValueError("make_vec_env always builds with auto_reset=True: SB3 VecEnvs reset finished envs in step")
    if "batch_size" in scenario_kwargs:
        raise ValueError("make_vec_env wraps one Environment: batch_size (an EnvPool) is not supported")
    sim = make(scenario, n_envs=n_envs, device=device, seed=seed, auto_reset=True, **scenario_kwargs)
    try:
        return SwarpVecEnv(
            sim,
            layout=layout,
            reward=reward,
            normalize_actions=normalize_actions,
            episode_stats=episode_stats,
            info_keys=info_keys,
            render_mode=render_mode,
        )
    except Exception:
        sim.close()
        raise
