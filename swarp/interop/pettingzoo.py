"""PettingZoo adapter: one env of a swarp batch as a ``pettingzoo.ParallelEnv`` (needs the ``pettingzoo`` extra).

    par_env = parallel_env("navigation", n_agents=4, seed=0)  # a batch of one, on the CPU
    obs, infos = par_env.reset(seed=0)                        # {"agent_0": array(obs_dim), ...}
    obs, rewards, terminations, truncations, infos = par_env.step(
        {agent: par_env.action_space(agent).sample() for agent in par_env.agents})
    aec_env = env("navigation", max_cycles=100)               # the AEC form of the same

Agents are named ``"agent_0"`` .. ``"agent_{A-1}"``. Each observes a ``Box(-inf, inf, (obs_dim,))``
and acts in a ``Box`` of its own row of ``sim.action_bounds`` (physical units); ``state()`` is the
concatenation of every agent's observation, for centralized critics. Values are numpy arrays
copied to the host.

Agent groups (a scenario declaring several, ``swarp.core.groups``; ``sim.grouped``): agents are
named ``"{group}_{i}"`` (``i`` counts within the group, as VMAS names its agents: ``"a_0"``,
``"a_1"``, ``"b_0"``...), in the env's agent order, and each has its group's spaces: a
``Box(-inf, inf, (obs_dim_g,))`` of its group's observation width and its group's action space (a
``Box`` of its row of ``sim.action_bounds`` over the group's action width ``D_g``, or the int64
``Discrete`` / ``MultiDiscrete`` of a discrete group). Groups may mix kinds and widths
(``parallel_env(..., action_space={"a": "discrete"}, action_nvec={"a": (5, 3)})``); ``state()``
concatenates every agent's observation at its own width. One-group scenarios keep the names and
spaces above.

Discrete actions (``parallel_env(..., action_space="discrete" | "multidiscrete", action_nvec=...)``,
``swarp.core.spaces``): each agent acts in an int64 ``Discrete(prod(nvec))`` (one flat index, an
int of shape ()) or ``MultiDiscrete(nvec)`` (one index per physical action column, shape
(len(nvec),)); the simulator decodes them with VMAS 1.5.2's levels, and an index out of range acts
as a zero command and raises ``sim.invalid_actions()``.

Communication (a scenario with a channel, ``WorldSpec.comm_dim`` C; VMAS 1.5.2's ``dim_c``
layout): an agent that speaks has its message in its action space, as VMAS's
``get_agent_action_space`` gives it. A continuous agent's ``Box`` has ``act_dim + C`` columns,
its physical command then its message, whose bounds are [0, 1] (the simulator clamps into them);
a discrete agent's ``Discrete(prod(nvec) * C)`` counts the message's choice as the least
significant digit of the index (``index = physical_index * C + choice``) and its
``MultiDiscrete([*nvec, C])`` has one more column, the choice; the choice is sent as a one-hot
message. An agent of a ``silent`` group has no message columns or head. What was sent is
``sim.comm`` [E, A, C].

An episode ends for every agent at once (swarp's done flags are per env): ``agents`` becomes empty
after the step that terminated or truncated it, and ``reset`` starts the next. Where the scenario
keeps an alive mask (``sim.alive``: navigation's ``n_agents=(lo, hi)``, ``leave_on_goal``) agents
come and go as PettingZoo's do: ``reset`` lists only the agents present in the episode, and an
agent that leaves is terminated at the step it leaves and drops out of ``agents`` after it. ``max_cycles``
(steps, PettingZoo's name for an episode length) truncates every agent after that many steps since
``reset``; ``parallel_env(max_cycles=N)`` also sets the wrapped env's own time limit
(``max_steps``) to N unless ``max_steps`` is given (then the earlier of the two ends an episode).
Agents missing from the action dict act with zeros. When the wrapped ``Environment`` has ``auto_reset=True`` the step
that ends an episode returns its last observation (``info["final_obs"]``), as PettingZoo expects;
``reset`` then resets the batch as usual.

Wrapping a batch of more than one env steps all of them (the other envs get zero actions); this
adapter is for API compatibility and small-scale use, not throughput: use ``SwarpEnv`` (TorchRL)
or ``SwarpVectorEnv`` (Gymnasium) to train on the whole batch.

Inputs are checked here, before anything is stepped: ``actions`` must be a dict keyed by agent
names, each value real numbers of shape (act_dim,) exactly (a numpy array, a list or a tensor, any
int or float dtype; never broadcast from a scalar or a shorter array), or for discrete kinds integer
indices of the agent's space's shape (any int dtype; floats raise ``TypeError``). NaN and inf are passed on,
acting as 0 and raising ``sim.invalid_actions()``. ``reset``'s ``options`` are accepted and ignored
(none are defined; PettingZoo's API test passes arbitrary ones). ``close()`` closes the wrapped
``Environment``.

Rendering: ``render_mode="rgb_array"`` makes ``render()`` return an (H, W, 3) uint8 frame;
``render_mode="human"`` shows the env in a pygame window (the ``viz`` extra) after every ``reset``
and ``step``, ``render()`` redraws it and returns ``None``, and ``close()`` closes the window.

``env(...)`` is the AEC form (``pettingzoo.utils.conversions.parallel_to_aec`` over
``parallel_env(...)``), so this module passes PettingZoo's ``max_cycles_test`` and ``render_test``.
An adapter pickles (SuperSuit's ``concat_vec_envs_v1`` makes its copies so, with cloudpickle) and
``copy.deepcopy`` copies it as its wrapped ``Environment`` does: rebuilt from the construction
arguments and freshly reset, with no episode in progress (call ``reset`` first); ``env_index``,
``render_mode`` and ``max_cycles`` are kept.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from swarp.core.groups import AgentGroup
from swarp.env.environment import Environment
from swarp.env.make import make
from swarp.interop.checks import group_action_bounds, index_tensor, real_tensor
from swarp.interop.spaces import index_space


class SwarpParallelEnv(ParallelEnv):
    """Env ``env_index`` of a swarp ``Environment`` as a PettingZoo parallel env.

    Args:
        env: The ``swarp.Environment`` (``n_envs=1`` is the natural choice).
        env_index: The env of the batch this adapter exposes.
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (a pygame window, the ``viz`` extra).
        max_cycles: Episode length [steps]: every agent is truncated after this many steps since
            ``reset`` (an int >= 1), or ``None`` for the wrapped env's own limit only
            (``env.max_steps``; the earlier of the two ends an episode).

    Attributes:
        sim: The wrapped ``Environment``.
        max_cycles: As given; may be reassigned (checked), taking effect from the next step.
        possible_agents: ``"agent_{i}"`` for i < A, or ``"{group}_{i}"`` (i < A_g) per group of a
            grouped env, in agent order.
        observation_spaces, action_spaces: ``{agent: space}``, each agent's (its group's).
        state_space: ``Box(-inf, inf, (sum of every agent's obs width,))``.

    Raises:
        TypeError: ``env`` is not a ``swarp.Environment``.
        ValueError: a bad ``env_index``, ``render_mode`` or ``max_cycles``.
        ImportError: ``render_mode="human"`` without pygame.
    """

    metadata = {"name": "swarp_v0", "render_modes": ["human", "rgb_array"], "is_parallelizable": True}

    def __init__(
        self, env: Environment, env_index: int = 0, render_mode: str | None = None, max_cycles: int | None = None
    ):
        if not isinstance(env, Environment):
            raise TypeError(f"SwarpParallelEnv wraps a swarp.Environment, got {type(env).__name__}")
        if isinstance(env_index, bool) or not isinstance(env_index, int) or not 0 <= env_index < env.n_envs:
            raise ValueError(f"env_index must be an int in [0, {env.n_envs}), got {env_index!r}")
        if render_mode not in (None, "rgb_array", "human"):
            raise ValueError(f"render_mode must be None, 'rgb_array' or 'human', got {render_mode!r}")
        if render_mode == "human" and importlib.util.find_spec("pygame") is None:
            raise ImportError("render_mode='human' needs pygame: pip install 'swarp[viz]'")
        self.sim = env
        self.env_index = env_index
        self.render_mode = render_mode
        self.max_cycles = max_cycles
        self._cycles = 0  # steps since the last reset
        self.metadata = {**self.metadata, "name": f"swarp_{env.scenario.name}_v0"}
        self._np_dtype = torch.empty((), dtype=env.dtype).numpy().dtype
        #: ``{agent: (group, index in the group, index in the env)}``, in agent order.
        self._slots: dict[str, tuple[AgentGroup, int, int]] = {}
        for group in env.groups:
            for i in range(group.n_agents):
                name = f"{group.name}_{i}" if env.grouped else f"agent_{group.start + i}"
                self._slots[name] = (group, i, group.start + i)
        self.possible_agents = list(self._slots)
        self.agents: list[str] = []
        self._index = {agent: slot[2] for agent, slot in self._slots.items()}
        self.observation_spaces = {
            agent: gymnasium.spaces.Box(-np.inf, np.inf, (group.obs_dim,), self._np_dtype)
            for agent, (group, _, _) in self._slots.items()
        }
        self.action_spaces = {agent: self._agent_action_space(g, index) for agent, (g, _, index) in self._slots.items()}
        state_dim = sum(group.n_agents * group.obs_dim for group in env.groups)
        self.state_space = gymnasium.spaces.Box(-np.inf, np.inf, (state_dim,), self._np_dtype)
        # What ``step`` hands the env: one [E, A_g, width_g] tensor per group (int64 indices for a
        # discrete group, the sim's float dtype for a continuous one).
        self._actions = {
            group.name: torch.zeros(
                env.n_envs,
                group.n_agents,
                group.action_space.width,
                dtype=torch.int64 if group.action_space.discrete else env.dtype,
                device=env.torch_device,
            )
            for group in env.groups
        }
        self._obs = {agent: np.zeros(space.shape, self._np_dtype) for agent, space in self.observation_spaces.items()}

    def _agent_action_space(self, group: AgentGroup, index: int) -> gymnasium.spaces.Space:
        """The action space of agent ``index`` (of the env) in ``group``: a ``Box`` of its row of
        the group's bounds (``swarp.interop.checks.group_action_bounds``: physical columns, then
        message columns in [0, 1]), or an int64 ``Discrete(prod(choices))`` /
        ``MultiDiscrete(choices)`` for the group's discrete kinds (``choices``: ``nvec``, then the
        channel's width where the group speaks)."""
        space = group.action_space
        if space.discrete:
            return index_space(space)
        row = index - group.start
        low, high = (b[row].cpu().numpy().astype(self._np_dtype) for b in group_action_bounds(self.sim, group))
        return gymnasium.spaces.Box(low, high, dtype=self._np_dtype)

    @property
    def max_cycles(self) -> int | None:
        """Episode length [steps] after which every agent is truncated, or ``None`` (see the class doc)."""
        return self._max_cycles

    @max_cycles.setter
    def max_cycles(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_cycles must be an int >= 1 or None, got {value!r}")
        self._max_cycles = value

    def __reduce__(self):
        """Pickle (and deep-copy) as the wrapped ``Environment`` (rebuilt from its construction
        arguments, freshly reset) and this adapter's arguments; no episode is in progress after."""
        return (type(self), (self.sim, self.env_index, self.render_mode, self.max_cycles))

    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        """The ``Box(-inf, inf, (obs_dim,))`` of ``agent``'s observations (float32 or float64 as the
        sim; ``obs_dim``: its group's width in a grouped env)."""
        # The same object on every call (PettingZoo's API test checks it; space seeding needs it).
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        """The space of ``agent``'s actions: a ``Box`` of shape (act_dim,), its row of
        ``sim.action_bounds`` [physical units]; ``Discrete(prod(nvec))`` (one int) or
        ``MultiDiscrete(nvec)`` (shape (len(nvec),)), int64, for the discrete kinds. In a grouped
        env, its group's: kind, ``nvec`` and width (``act_dim``: the group's ``D_g``). With a
        channel, a speaking agent's message columns ([0, 1]) or head follow (module docstring)."""
        return self.action_spaces[agent]

    def _row(self, tensor: torch.Tensor) -> np.ndarray:
        """Row ``env_index`` of a device tensor, copied to the host."""
        return tensor[self.env_index].detach().to("cpu", copy=True).numpy()

    def _per_agent(self, value: torch.Tensor | Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """``{agent: its row}`` of ``value`` at env ``env_index`` (host copies): ``value`` is an
        [E, A, ...] tensor, or a grouped env's ``{group: [E, A_g, ...]}``."""
        if not isinstance(value, Mapping):
            rows = self._row(value)
            return {agent: rows[index] for agent, index in self._index.items()}
        rows = {name: self._row(tensor) for name, tensor in value.items()}
        return {agent: rows[group.name][i] for agent, (group, i, _) in self._slots.items()}

    def _infos(self, info: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
        A = self.sim.n_agents
        rows = {key: self._row(value) for key, value in info.items() if key != "final_obs"}
        shared = {key: value for key, value in rows.items() if not (value.ndim >= 1 and value.shape[0] == A)}
        return {
            agent: {**shared, **{key: value[i] for key, value in rows.items() if key not in shared}}
            for agent, i in self._index.items()
        }

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start a new episode (the whole batch is reset; with ``seed``, an int in [0, 2^31), the
        reset RNG restarts from it). ``options`` (a dict or None) is ignored."""
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        if isinstance(seed, np.integer):
            seed = int(seed)
        obs, info = self.sim.reset(seed=seed)
        self.agents = self._present(list(self.possible_agents))
        self._cycles = 0
        self._obs = self._per_agent(obs)
        if self.render_mode == "human":
            self._show()
        return {agent: row.copy() for agent, row in self._obs.items()}, self._infos(info)

    def step(self, actions: dict[str, Any]):
        """One step of every live agent.

        Args:
            actions: ``{agent: action}``, each action real numbers of shape (act_dim,) in physical
                units (a numpy array, list or tensor); agents left out act with zeros. Discrete
                kinds: integer indices of the agent's ``action_space`` shape (``Discrete``: one int,
                shape (); ``MultiDiscrete``: (len(nvec),)), any int dtype; agents left out take
                index 0 (with an odd level count, VMAS's "stay": no command). In a grouped env each
                agent's action is of its own ``action_space`` (its group's kind and width); the
                env steps with one tensor per group.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, dicts over the live
            agents: observations numpy arrays (obs_dim,) of the sim's dtype (the agent's group's
            width), rewards floats, the flags bools (one value for every agent: episodes end per
            env), infos dicts of the scenario's entries (an agent's own row of per-agent ones).

        Raises:
            RuntimeError: no live agents (before ``reset``, or after the episode ended).
            TypeError: ``actions`` is not a dict, or an action is not real numbers (discrete
                kinds: not integers; floats are refused).
            KeyError: an agent name that is not one of ``possible_agents``.
            ValueError: an action not of the agent's action space's shape.
        """
        if not self.agents:
            raise RuntimeError("step() called with no live agents: the episode is over (or never began), call reset()")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict {{agent name: action}}, got {type(actions).__name__}")
        unknown = [agent for agent in actions if agent not in self._index]
        if unknown:
            raise KeyError(f"unknown agent(s) {unknown}; agents are {self.possible_agents}")
        sim = self.sim
        rows = {name: torch.zeros(tensor.shape[1:], dtype=tensor.dtype) for name, tensor in self._actions.items()}
        for agent, action in actions.items():
            group, i, _ = self._slots[agent]
            space, name = group.action_space, f"actions[{agent!r}]"
            if space.discrete:
                shape = self.action_spaces[agent].shape
                index = index_tensor(action, name, shape, torch.device("cpu"), "[]" if not shape else "[len(nvec)]")
                rows[group.name][i] = index.reshape(space.width)
            else:
                rows[group.name][i] = real_tensor(
                    action, name, (space.width,), sim.dtype, torch.device("cpu"), "[act_dim]"
                )
        for name, tensor in self._actions.items():
            tensor.zero_()
            tensor[self.env_index] = rows[name].to(sim.torch_device)
        obs, reward, terminated, truncated, info = sim.step(
            self._actions if sim.grouped else self._actions[sim.groups[0].name]
        )
        self._cycles += 1
        term = bool(terminated[self.env_index])
        trunc = bool(truncated[self.env_index])
        if self.sim.auto_reset and (term or trunc):
            obs = info["final_obs"]
        trunc = trunc or (self.max_cycles is not None and self._cycles >= self.max_cycles)
        self._obs = self._per_agent(obs)
        reward_rows = self._per_agent(reward)
        live = list(self.agents)
        observations = {agent: self._obs[agent].copy() for agent in live}
        rewards = {agent: float(reward_rows[agent]) for agent in live}
        terminations = dict.fromkeys(live, term)
        truncations = dict.fromkeys(live, trunc)
        all_infos = self._infos(info)
        infos = {agent: all_infos[agent] for agent in live}
        if term or trunc:
            self.agents = []
        else:  # agents that left this step are terminated; the others stay
            self.agents = self._present(live)
            terminations.update(dict.fromkeys(set(live) - set(self.agents), True))
        if self.render_mode == "human":
            self._show()
        return observations, rewards, terminations, truncations, infos

    def _present(self, agents: list[str]) -> list[str]:
        """Those of ``agents`` that act in the next step (``sim.alive``; all of them without a mask)."""
        if self.sim.alive is None:
            return agents
        alive = self._row(self.sim.alive)
        return [agent for agent in agents if alive[self._index[agent]]]

    def state(self) -> np.ndarray:
        """The global state: every agent's latest observation, concatenated in agent order
        [A * obs_dim] (grouped: [sum of the groups' A_g * obs_dim_g])."""
        return np.concatenate([self._obs[agent] for agent in self.possible_agents])

    def _show(self) -> None:
        """Draw the env in the pygame window (``render_mode="human"``)."""
        self.sim.render(mode="human", env_index=self.env_index)

    def render(self) -> np.ndarray | None:
        """With ``render_mode="rgb_array"``, an (H, W, 3) uint8 frame of the env; with ``"human"``,
        redraw the window and return ``None``; without a render mode, ``None``."""
        if self.render_mode == "rgb_array":
            return self.sim.render(env_index=self.env_index)
        if self.render_mode == "human":
            self._show()
        return None

    def close(self) -> None:
        """Close the wrapped ``Environment`` (``Environment.close``) and, with ``render_mode="human"``,
        the window; idempotent."""
        pygame = sys.modules.get("pygame")
        if self.render_mode == "human" and pygame is not None and pygame.display.get_init():
            pygame.display.quit()
        self.sim.close()


def parallel_env(
    scenario: str = "navigation",
    device: str | torch.device | None = "cpu",
    seed: int = 0,
    render_mode: str | None = None,
    max_cycles: int | None = None,
    **kwargs: Any,
) -> SwarpParallelEnv:
    """A ``SwarpParallelEnv`` over a fresh batch of one env of ``scenario``.

    Args:
        scenario: A registered scenario name (``swarp.scenario_names()``).
        device: Where the env runs; the CPU by default: one env gains nothing from a GPU.
        seed: Seed of the reset RNG (an int in [0, 2^31)).
        render_mode: ``None``, ``"rgb_array"`` or ``"human"``.
        max_cycles: Episode length [steps] (an int >= 1): agents are truncated after this many
            steps. It is also the env's ``max_steps`` unless ``max_steps`` is given. ``None``: the
            scenario's episode length (or ``max_steps``).
        **kwargs: Passed to ``swarp.make``: environment keywords such as ``max_steps`` or
            ``auto_reset`` and scenario options such as ``n_agents``.

    Raises:
        ValueError, TypeError: bad arguments (from ``swarp.make`` or ``SwarpParallelEnv``).
    """
    if max_cycles is not None and (isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1):
        raise ValueError(f"max_cycles must be an int >= 1 or None, got {max_cycles!r}")
    if max_cycles is not None:
        kwargs.setdefault("max_steps", max_cycles)
    sim = make(scenario, n_envs=1, device=device, seed=seed, **kwargs)
    return SwarpParallelEnv(sim, render_mode=render_mode, max_cycles=max_cycles)


def env(
    scenario: str = "navigation",
    device: str | torch.device | None = "cpu",
    seed: int = 0,
    render_mode: str | None = None,
    max_cycles: int | None = None,
    **kwargs: Any,
) -> AECEnv:
    """The AEC form of ``parallel_env(...)`` (same arguments): ``parallel_to_aec`` over it, agents
    acting in turn (``agent_iter`` / ``last`` / ``step``) and the env stepping once all have acted.

    Returns:
        A ``pettingzoo.AECEnv`` (PettingZoo's order-enforcing wrapper over its parallel-to-AEC
        wrapper); ``env.unwrapped`` is the ``SwarpParallelEnv``.
    """
    return parallel_to_aec(
        parallel_env(scenario, device=device, seed=seed, render_mode=render_mode, max_cycles=max_cycles, **kwargs)
    )
