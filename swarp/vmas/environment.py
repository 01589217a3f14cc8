"""``VmasEnvironment``: a swarp ``Environment`` behind VMAS 1.5.2's ``Environment`` API (lists or
dicts of per-agent tensors, ``reset_at``, spaces, ``render``); its agents are ``swarp.vmas.agent``'s
``VmasAgent`` s. ``swarp.vmas``'s docstring lists what follows VMAS exactly and what differs."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from swarp.core.groups import AgentGroup
from swarp.env.environment import Environment, check_seed
from swarp.interop.checks import group_action_bounds
from swarp.vmas.agent import (
    Channel,
    VmasAgent,
    VmasWorld,
    agent_action_space,
    agent_observation_space,
    build_agents,
    check_flag,
    gym_spaces,
)
from swarp.vmas.option_table import NOT_PER_AGENT


class VmasEnvironment:
    """A swarp ``Environment`` with VMAS 1.5.2's ``Environment`` API (see the module docstring).

    Args:
        sim: The swarp ``Environment`` (built with ``auto_reset=False``: VMAS resets nothing itself).
        dict_spaces: Outputs and spaces keyed by agent name.
        clamp_actions: Clamp out-of-range actions instead of raising.
        grad_enabled: Keep the actions' autograd history.
        terminated_truncated: ``step`` returns terminated and truncated instead of ``dones``.
        seed: Seed of ``get_random_action``'s generator (int in [0, 2^31)).

    Raises:
        TypeError: ``sim`` is not a ``swarp.Environment``, or a flag is not a bool.
        ValueError: ``sim`` was built with ``auto_reset=True``, or its agent groups mix action
            kinds (VMAS has one for the env).

    Attributes:
        sim: The swarp ``Environment``: batched [E, A, ...] tensors.
        agents: ``VmasAgent`` s, in index order (``"agent_{i}"``; ``"{group}_{i}"`` in a grouped
            env, each with its group's observation width and action space).
        n_agents, num_envs, batch_dim, device, max_steps: as in VMAS.
        continuous_actions: Whether ``sim`` takes continuous actions (``sim.action_space.kind``).
        multidiscrete_actions: Whether it takes multi-discrete ones (one index per physical column).
        dict_spaces, clamp_action, grad_enabled, terminated_truncated: as given.
    """

    metadata = {"render.modes": ["human", "rgb_array"], "runtime.vectorized": True}

    def __init__(
        self,
        sim: Environment,
        dict_spaces: bool = False,
        clamp_actions: bool = False,
        grad_enabled: bool = False,
        terminated_truncated: bool = False,
        seed: int = 0,
    ):
        if not isinstance(sim, Environment):
            raise TypeError(f"VmasEnvironment wraps a swarp.Environment, got {type(sim).__name__}")
        if sim.auto_reset:
            raise ValueError(
                "VmasEnvironment needs a swarp Environment built with auto_reset=False: VMAS's step never resets "
                "an env (call reset_at)"
            )
        self.sim = sim
        self.dict_spaces = check_flag("dict_spaces", dict_spaces)
        self.clamp_action = check_flag("clamp_actions", clamp_actions)
        self.grad_enabled = check_flag("grad_enabled", grad_enabled)
        self.terminated_truncated = check_flag("terminated_truncated", terminated_truncated)
        self.device = sim.torch_device
        self.num_envs = sim.n_envs
        self.n_agents = sim.n_agents
        self.scenario_name = sim.scenario.name
        kinds = {group.action_space.kind for group in sim.groups}
        if len(kinds) > 1:
            raise ValueError(
                f"VmasEnvironment needs one action kind for every agent (VMAS's continuous_actions and "
                f"multidiscrete_actions are one for the env), but this Environment's groups mix {sorted(kinds)}: "
                "use swarp.interop.pettingzoo.SwarpParallelEnv (each agent its own space), or one kind"
            )
        (kind,) = kinds
        self.continuous_actions = kind == "continuous"
        self.multidiscrete_actions = kind == "multidiscrete"
        # Each group's action box, float32: physical columns, then a speaking group's message columns.
        self._boxes = {g.name: tuple(b.to(torch.float32) for b in group_action_bounds(sim, g)) for g in sim.groups}
        self.channel = Channel(sim)
        self.agents = build_agents(sim, self._boxes, self.channel)
        self._by_name = {agent.name: agent for agent in self.agents}
        # Done flags as VMAS reports them: a reset_at clears its env's (the swarp buffers keep them
        # until the next step).
        self._terminated = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._truncated = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._mask = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(check_seed(seed))
        self._pending_seed: int | None = None
        self._action_space = self._observation_space = None
        per_agent_skip = NOT_PER_AGENT.get(self.scenario_name, ())
        self._per_agent_info = {
            key for key, value in sim.info.items() if value.dim() >= 2 and value.shape[1] == self.n_agents
        } - set(per_agent_skip)

    # --- VMAS attributes ----------------------------------------------------------------------

    @property
    def batch_dim(self) -> int:
        """Parallel envs E (VMAS's name for ``num_envs``)."""
        return self.num_envs

    @property
    def max_steps(self) -> int | None:
        """Episode length [steps] after which envs are done (truncated); ``None``: no limit."""
        return self.sim.max_steps

    @property
    def world(self) -> VmasWorld:
        """What VMAS users read of ``env.world``: ``dim_c`` (the channel's width,
        ``WorldSpec.comm_dim``; 0 without one), ``dim_p`` (2), ``agents``, ``batch_dim``, ``device``."""
        return VmasWorld(self.sim.action_input.comm_dim, 2, self.agents, self.num_envs, self.device)

    @property
    def steps(self) -> torch.Tensor:
        """[E] float32 (a copy): steps since each env's last reset, as VMAS's ``env.steps``."""
        return self.sim.step_count.to(torch.float32)

    @property
    def action_space(self):
        """``gymnasium.spaces.Tuple`` (``Dict`` by agent name with ``dict_spaces``) of per-agent
        spaces (``get_agent_action_space``): float32 ``Box(action_low, action_high, (action_size,))``
        in physical units, ``Discrete(prod(nvec))`` or ``MultiDiscrete(nvec)``.

        Raises:
            ImportError: gymnasium is not installed.
        """
        if self._action_space is None:
            self._action_space = self._collect(self.get_agent_action_space)
        return self._action_space

    @property
    def observation_space(self):
        """``gymnasium.spaces.Tuple`` (``Dict`` with ``dict_spaces``) of per-agent float32
        ``Box(-inf, inf, (obs_dim,))``.

        Raises:
            ImportError: gymnasium is not installed.
        """
        if self._observation_space is None:
            self._observation_space = self._collect(self.get_agent_observation_space)
        return self._observation_space

    def _collect(self, per_agent: Callable[[VmasAgent], Any]):
        spaces = gym_spaces()
        if self.dict_spaces:
            return spaces.Dict({agent.name: per_agent(agent) for agent in self.agents})
        return spaces.Tuple([per_agent(agent) for agent in self.agents])

    def _agent(self, agent: VmasAgent | str) -> VmasAgent:
        if isinstance(agent, str):
            if agent not in self._by_name:
                raise KeyError(f"no agent named {agent!r}; agents: {list(self._by_name)}")
            return self._by_name[agent]
        if not isinstance(agent, VmasAgent) or self._by_name.get(agent.name) is not agent:
            raise TypeError(f"agent must be one of env.agents or its name, got {agent!r}")
        return agent

    def get_agent_action_size(self, agent: VmasAgent | str) -> int:
        """The width of ``agent``'s actions in ``step`` (an element of ``agents`` or its name), as
        VMAS: ``action_size`` (continuous), 1 (discrete: one flat index), ``len(nvec)``
        (multi-discrete), plus ``dim_c`` (continuous) or 1 (multi-discrete) for an agent that speaks."""
        return self._agent(agent).action_width

    def get_agent_action_space(self, agent: VmasAgent | str):
        """The agent's action space, as VMAS 1.5.2 builds it (with ``gymnasium.spaces``): a float32
        ``Box`` [action_size] of its action box (physical units) for continuous actions,
        ``Discrete(prod(nvec))`` for discrete ones, ``MultiDiscrete(nvec)`` for multi-discrete ones
        (``action_size`` and ``nvec``: its group's, in a grouped env); an agent that speaks adds
        its message: ``dim_c`` columns in [0, 1], ``Discrete(prod(nvec) * dim_c)`` or
        ``MultiDiscrete([*nvec, dim_c])`` (``swarp.vmas.agent.agent_action_space``)."""
        return agent_action_space(self._agent(agent))

    def get_agent_observation_space(self, agent: VmasAgent | str, obs: Any = None):
        """``gymnasium.spaces.Box(-inf, inf, (obs_dim,), float32)``, ``obs_dim`` the agent's group's
        width (``obs`` is accepted and ignored, as VMAS's signature has it: every swarp observation
        is one flat vector)."""
        return agent_observation_space(self._agent(agent))

    def get_random_action(self, agent: VmasAgent | str) -> torch.Tensor:
        """A random action of ``agent`` on the env's device, from the env's own generator (seeded
        with the env's seed; torch's global RNG is not touched), shaped as VMAS's: [E, action_size]
        float32 uniform in the agent's action box (continuous), [E] int64 uniform in
        [0, prod(nvec)) (discrete), [E, len(nvec)] int64, column d uniform in [0, nvec[d])
        (multi-discrete)."""
        agent = self._agent(agent)
        if not self.continuous_actions:
            indices = agent.group.action_space.sample(self.num_envs, 1, self._generator)[:, 0]  # [E, width]
            return indices if self.multidiscrete_actions else indices[:, 0]
        width = agent.action_width  # the command, then the message of an agent that speaks
        u = torch.rand((self.num_envs, width), generator=self._generator, device=self.device, dtype=torch.float32)
        return agent.space_low + u * (agent.space_high - agent.space_low)

    def get_random_actions(self) -> list[torch.Tensor]:
        """``get_random_action`` of every agent (``n_agents`` tensors shaped as it says), a list to
        pass to ``step``."""
        return [self.get_random_action(agent) for agent in self.agents]

    # --- reset, step --------------------------------------------------------------------------

    def seed(self, seed: int | None = None) -> list[int]:
        """Seed the next ``reset()`` (which restarts swarp's reset RNG from it) and reseed
        ``get_random_action``'s generator now. ``None`` means 0. Returns ``[seed]`` as VMAS does.

        Unlike VMAS, nothing is drawn from it before that ``reset()``: a ``reset_at`` in between
        draws from the current seed's counter-based stream.
        """
        seed = 0 if seed is None else check_seed(seed)
        self._pending_seed = seed
        self._generator.manual_seed(seed)
        return [seed]

    def reset(
        self,
        seed: int | None = None,
        return_observations: bool = True,
        return_info: bool = False,
        return_dones: bool = False,
    ):
        """Reset every env; with ``seed`` (int in [0, 2^31)) restart swarp's reset RNG from it.

        Returns:
            Per-agent observations [E, obs_dim] float32 (a list, or a dict with ``dict_spaces``);
            with ``return_info`` / ``return_dones`` a list ``[obs, dones, infos]`` (``[obs,
            terminated, truncated, infos]`` with ``terminated_truncated``) of the parts asked for;
            ``None`` when none is.
        """
        if seed is None:
            seed, self._pending_seed = self._pending_seed, None
        else:
            seed = check_seed(seed)
            self._pending_seed = None
        if seed is not None:
            self._generator.manual_seed(seed)
        self.sim.reset(seed=seed)
        self.channel.on_reset()
        self._terminated.zero_()
        self._truncated.zero_()
        return self._result(return_observations, False, return_info, return_dones)

    def _index(self, index: Any) -> int:
        if isinstance(index, torch.Tensor):
            if index.numel() != 1 or index.dtype == torch.bool or index.is_floating_point() or index.is_complex():
                raise TypeError(
                    f"index must be one integer env index, got a {index.dtype} tensor of shape {list(index.shape)}; "
                    f"reset many envs at once with env.sim.reset_at(mask [num_envs] bool)"
                )
            index = int(index.item())
        elif isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an int env index, got {index!r}")
        index = int(index)
        if not 0 <= index < self.num_envs:
            raise IndexError(f"index must be in [0, {self.num_envs}), got {index}")
        return index

    def reset_at(
        self,
        index: int,
        return_observations: bool = True,
        return_info: bool = False,
        return_dones: bool = False,
    ):
        """Reset env ``index`` (an int, or an integer tensor of one element) and no other.

        Returns:
            As ``reset``: the observations of every env (the reset one's start its new episode).

        Raises:
            TypeError: ``index`` is not one integer. IndexError: it is not in [0, num_envs).
        """
        index = self._index(index)
        self._mask.zero_()
        self._mask[index] = True
        self.sim.reset_at(self._mask)
        self.channel.on_reset(self._mask)
        self._terminated[index] = False
        self._truncated[index] = False
        return self._result(return_observations, False, return_info, return_dones)

    def _actions(self, actions: Sequence | Mapping) -> torch.Tensor | dict[str, torch.Tensor]:
        """Per-agent actions -> what ``sim.step`` takes, checked like VMAS's: [E, A, act_dim] of the
        simulator's dtype (continuous) or [E, A, width] int64 indices (discrete kinds); in a grouped
        env ``{group: [E, A_g, width_g]}``, each group's agents stacked at its own width."""
        if isinstance(actions, Mapping):
            names = [agent.name for agent in self.agents]
            missing = [name for name in names if name not in actions]
            extra = sorted(str(key) for key in actions if key not in self._by_name)
            if missing or extra:
                raise ValueError(
                    f"actions dict must hold one entry per agent {names}: missing {missing}, unknown {extra}"
                )
            actions = [actions[name] for name in names]
        elif isinstance(actions, torch.Tensor) or not isinstance(actions, Sequence) or isinstance(actions, str):
            raise TypeError(
                f"actions must be a list of {self.n_agents} per-agent tensors [num_envs, act_dim] or a dict by agent "
                f"name, got {type(actions).__name__} (env.sim.step takes one [num_envs, n_agents, act_dim] tensor)"
            )
        if len(actions) != self.n_agents:
            raise ValueError(f"expected actions for {self.n_agents} agents, got {len(actions)}")
        rows = [self._agent_action(agent, action) for agent, action in zip(self.agents, actions, strict=True)]
        by_group = {}
        for group in self.sim.groups:
            stacked = torch.stack(rows[group.start : group.stop], dim=1)
            by_group[group.name] = self._in_box(stacked, group) if self.continuous_actions else stacked
        return by_group if self.sim.grouped else by_group[self.sim.groups[0].name]

    def _agent_action(self, agent: VmasAgent, action: Any) -> torch.Tensor:
        """One agent's action -> [E, width] float32 (continuous, not yet checked against its box)
        or int64 indices (discrete kinds, checked), on the env's device."""
        width_name = agent.group.action_space.width_name
        if not isinstance(action, torch.Tensor):
            try:
                action = torch.as_tensor(action, device=self.device)
            except (TypeError, ValueError, RuntimeError) as error:
                raise TypeError(f"action of {agent.name} must be numbers [num_envs, {width_name}]: {error}") from None
        if action.dtype == torch.bool or action.is_complex():
            raise TypeError(f"action of {agent.name} must be real numbers, got dtype {action.dtype}")
        if action.dim() == 1:
            action = action.unsqueeze(-1)  # VMAS reads [num_envs] as [num_envs, 1]
        width = agent.action_width
        if tuple(action.shape) != (self.num_envs, width):
            raise ValueError(
                f"action of {agent.name} must have shape [num_envs, {width_name}] = [{self.num_envs}, "
                f"{width}], got {list(action.shape)}"
            )
        if not self.grad_enabled or not self.continuous_actions:
            action = action.detach()
        if self.continuous_actions:
            return action.to(device=self.device, dtype=torch.float32)
        return self._indices(agent, action.to(self.device))

    def _in_box(self, stacked: torch.Tensor, group: AgentGroup) -> torch.Tensor:
        """``group``'s continuous actions [E, A_g, D_g + C_g] float32 checked against (or, with
        ``clamp_actions``, clamped into) its agents' boxes (messages: [0, 1], as VMAS's clamp and
        assert), as the simulator's dtype."""
        low, high = self._boxes[group.name]
        if self.clamp_action:
            if bool(torch.isnan(stacked).any()):
                raise ValueError(f"actions contain NaN: {self._first_bad(torch.isnan(stacked), group)}")
            stacked = torch.clamp(stacked, low, high)
        else:
            outside = ~((stacked >= low) & (stacked <= high))  # NaN compares False: outside too
            if bool(outside.any()):
                raise ValueError(
                    f"actions out of the action space (NaN, or outside [low, high]; clamp_actions=True clamps them): "
                    f"{self._first_bad(outside, group, stacked)}"
                )
        return stacked.to(self.sim.dtype)

    def _indices(self, agent: VmasAgent, action: torch.Tensor) -> torch.Tensor:
        """One agent's discrete action [E, width] (any real dtype) -> int64 indices, checked as VMAS
        checks them (in range, whatever ``clamp_actions``); floats must hold whole numbers."""
        heads = torch.tensor(agent.group.action_space.heads, device=action.device)
        if action.is_floating_point():
            fractional = action != torch.round(action)  # NaN and inf too
            if bool(fractional.any()):
                env, column = (int(i) for i in fractional.nonzero()[0])
                raise ValueError(
                    f"discrete action of {agent.name} must hold integer indices (an int tensor, or floats of whole "
                    f"numbers as VMAS takes them): env {env}, column {column} holds {action[env, column].item()!r}"
                )
        outside = (action < 0) | (action >= heads)
        if bool(outside.any()):
            env, column = (int(i) for i in outside.nonzero()[0])
            raise ValueError(
                f"discrete action of {agent.name} out of bounds: env {env}, column {column} holds "
                f"{action[env, column].item()!r}, allowed int range [0, {int(heads[column])}) (clamp_actions does not "
                f"apply to discrete actions, as in VMAS)"
            )
        return action.to(torch.int64)

    def _first_bad(self, bad: torch.Tensor, group: AgentGroup, values: torch.Tensor | None = None) -> str:
        """Where ``bad`` [E, A_g, columns] (``group``'s agents) is first set, and the value there."""
        env, member, column = (int(i) for i in bad.nonzero()[0])
        agent = group.start + member
        text = f"agent {self.agents[agent].name}, env {env}, component {column}"
        if values is not None:
            low, high = self._boxes[group.name]
            text += (
                f": {values[env, member, column].item()!r} not in [{low[member, column].item()!r}, "
                f"{high[member, column].item()!r}]"
            )
        return text

    def step(self, actions: Sequence | Mapping):
        """Step every env with per-agent actions.

        Args:
            actions: ``n_agents`` tensors (a list in agent order, or a dict by agent name) of
                ``get_agent_action_size`` columns: [E, act_dim] physical units within
                ``action_space`` (continuous; see ``clamp_actions``), [E, 1] flat indices in
                [0, prod(nvec)) (discrete) or [E, len(nvec)] indices, column d in [0, nvec[d])
                (multi-discrete). Indices may be of any integer dtype or, as VMAS takes them, floats
                of whole numbers; they become int64. Numbers that are not tensors are converted to
                tensors, and [E] is read as [E, 1].

        Returns:
            ``[obs, rews, dones, infos]``: ``n_agents`` observations [E, obs_dim] float32 (in a
            grouped env each agent's at its group's width), rewards
            [E] float32 and info dicts (lists, or dicts by agent name with ``dict_spaces``), and
            ``dones`` [E] bool (terminated or truncated); ``[obs, rews, terminated, truncated,
            infos]`` with ``terminated_truncated``.

        Raises:
            TypeError: ``actions`` is not a list or dict of numbers. ValueError: wrong count,
            names or shapes, NaN, values out of range without ``clamp_actions`` (continuous), or
            indices out of range or not whole numbers (discrete kinds, whatever ``clamp_actions``).
        """
        stacked = self._actions(actions)
        obs, reward, terminated, truncated, info = self.sim.step(stacked)
        self.channel.on_step()
        self._terminated.copy_(terminated)
        self._truncated.copy_(truncated)
        return self._compose(obs, reward, info, True, True, True, True, None)

    def done(self):
        """[E] bool: terminated or truncated; ``(terminated, truncated)`` with ``terminated_truncated``.
        An env reset by ``reset_at`` is not done."""
        if self.terminated_truncated:
            return self._terminated.clone(), self._truncated.clone()
        return self._terminated | self._truncated

    def get_from_scenario(
        self,
        get_observations: bool,
        get_rewards: bool,
        get_infos: bool,
        get_dones: bool,
        dict_agent_names: bool | None = None,
    ):
        """The current observations, the last step's rewards, the infos and the done flags, composed
        as VMAS does: a list of the parts asked for, in the order obs, rews, dones (or terminated,
        truncated), infos; ``None`` when none is. ``dict_agent_names`` overrides ``dict_spaces``.

        Rewards are swarp's reward buffer, [E] float32 per agent: the last step's (zeros before the
        first step; resets leave it as it was). VMAS recomputes them from the scenario instead.
        """
        sim = self.sim
        obs, reward, _ = sim.by_group(sim.obs, sim.reward)  # a grouped env's: each group at its width
        return self._compose(
            obs, reward, sim.info, get_observations, get_rewards, get_infos, get_dones, dict_agent_names
        )

    def _result(self, observations: bool, rewards: bool, infos: bool, dones: bool):
        result = self.get_from_scenario(observations, rewards, infos, dones)
        return result[0] if result and len(result) == 1 else result

    def _compose(self, obs, reward, info, get_obs, get_rews, get_infos, get_dones, dict_agent_names):
        if not (get_obs or get_rews or get_infos or get_dones):
            return None
        by_name = self.dict_spaces if dict_agent_names is None else dict_agent_names
        names = [agent.name for agent in self.agents]

        def arrange(values: list):
            return dict(zip(names, values, strict=True)) if by_name else list(values)

        result = []
        if get_obs:
            result.append(arrange(_split(obs)))
        if get_rews:
            result.append(arrange(_split(reward)))
        if get_dones:
            if self.terminated_truncated:
                result += [self._terminated.clone(), self._truncated.clone()]
            else:
                result.append(self._terminated | self._truncated)
        if get_infos:
            result.append(arrange(self._infos(info)))
        return result

    def _infos(self, info: Mapping[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        """Per-agent info dicts: entries [E, A, ...] split by agent, the others ([E], [E, k]) copied whole."""
        split = {key: _split(value) for key, value in info.items() if key in self._per_agent_info}
        return [
            {key: split[key][i] if key in split else value.clone() for key, value in info.items()}
            for i in range(self.n_agents)
        ]

    # --- rendering, the rest ------------------------------------------------------------------

    def render(
        self,
        mode: str = "rgb_array",
        env_index: int = 0,
        agent_index_focus: int | None = None,
        visualize_when_rgb: bool = False,
        **overlays: Any,
    ):
        """Draw env ``env_index`` (swarp's renderer: agents, the scenario's goals, obstacles, walls).

        Args:
            mode: ``"rgb_array"`` (the default here; VMAS's is ``"human"``) or ``"human"`` (also
                shows it in a window: pygame, the ``viz`` extra).
            env_index: The env, in [0, num_envs).
            agent_index_focus: Must be None: swarp's view frames the arena, it follows no agent.
            visualize_when_rgb: With ``"rgb_array"``, also show the frame in a window.
            **overlays: swarp's ``Environment.render`` options (``width``, ``height`` [px], ...).

        Returns:
            (H, W, 3) uint8 RGB image (480 x 480 by default).

        Raises:
            ValueError: an unknown mode, or ``agent_index_focus``. TypeError / IndexError:
            ``env_index`` is not an int in [0, num_envs).
        """
        if mode not in self.metadata["render.modes"]:
            raise ValueError(f"render mode must be one of {self.metadata['render.modes']}, got {mode!r}")
        if agent_index_focus is not None:
            raise ValueError("agent_index_focus is not supported: swarp's renderer frames the arena, not an agent")
        index = self._index(env_index)
        show = mode == "human" or check_flag("visualize_when_rgb", visualize_when_rgb)
        return self.sim.render(mode="human" if show else "rgb_array", env_index=index, **overlays)

    def to(self, device: Any) -> None:
        """Not supported: a swarp environment's buffers live on the device it was built on."""
        raise NotImplementedError(
            f"swarp environments cannot move devices: build a new one with make_env(device={device!r})"
        )

    def close(self) -> None:
        """Close the swarp environment (``Environment.close``); further steps raise."""
        self.sim.close()

    def __repr__(self) -> str:
        return f"VmasEnvironment({self.scenario_name!r}, num_envs={self.num_envs}, n_agents={self.n_agents})"


def _split(value: torch.Tensor | Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """[E, A, ...] -> A tensors [E, ...]: one copy, each contiguous, none a view of ``value``; a
    grouped env's ``{group: [E, A_g, ...]}`` -> the groups' agents in order, each at its group's
    width."""
    if isinstance(value, Mapping):
        return [row for tensor in value.values() for row in _split(tensor)]
    return list(value.transpose(0, 1).clone(memory_format=torch.contiguous_format).unbind(0))
