"""Environment: the batched RL interface over a scenario and its physics world.

Everything it returns is a persistent device tensor (or a clone of one with
``clone_outputs=True``); nothing in ``step``, ``reset`` or ``reset_at`` moves data to the host.

The class is a facade over parts a reader can take one at a time:

* ``swarp.env.options``: the constructor's arguments, checked in one place;
* ``swarp.env.core``: the plan, the physics world, the buffers and the bound scenario (the
  environment shows the core's attributes as its own: ``world``, ``buffers``, ``obs``...);
* ``swarp.env.parameters``: the agent parameter table and its randomization;
* ``swarp.env.stages``, ``swarp.env.step_end`` and ``swarp.env.launches``: the step and reset
  launch sequences (the plan's ``launch`` mode runs them as a graph, a recorded program or eager
  launches) and the strategy that ends a step;
* ``swarp.env.snapshots``: ``get_state``/``set_state`` and pickling;
* ``swarp.env.reference`` (the torch reference), ``swarp.env.grad`` (the differentiable step),
  ``swarp.env.asynchronous`` (``send``/``recv``) and ``swarp.env.shards`` (CPU shards).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import torch
import warp as wp

from swarp.core import groups as agent_groups
from swarp.core.groups import observation_widths
from swarp.core.params import ParamRandomization
from swarp.core.rng import stream_key_torch
from swarp.env import grad
from swarp.env.action_input import ActionInput
from swarp.env.core import PUBLIC, CoreField, EnvCore
from swarp.env.launches import Launches
from swarp.env.options import MAX_GLOBAL_ENVS, EnvOptions, check_seed
from swarp.env.parameters import AgentParameters, ParameterMethods
from swarp.env.shards import Shards
from swarp.env.snapshots import Snapshots, Snapshotting
from swarp.env.stages import Stages
from swarp.env.step_end import make_step_end
from swarp.runtime.plan import ExecutionPlan
from swarp.scenarios.framework.base import Scenario

__all__ = ["MAX_GLOBAL_ENVS", "Environment", "check_seed"]


class Environment(ParameterMethods, Snapshotting):
    """A batch of ``n_envs`` copies of a scenario, stepped together on one device.

    Args:
        scenario: A ``Scenario`` instance (or use ``swarp.make``).
        n_envs: Number of parallel envs E (>= 1).
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: CUDA when available).
        seed: Seed of the counter-based reset RNG (int in [0, 2^31)).
        auto_reset: Reset finished envs inside ``step``; their last observation goes to
            ``info["final_obs"]`` and the returned ``obs`` is already the new episode's.
        max_steps: Episode length limit [steps] (``truncated`` when reached); ``"default"`` takes
            the scenario's, ``None`` disables it.
        fused: ``"auto"`` uses the scenario's Warp kernels when it has them; ``True`` requires them;
            ``False`` runs the torch reference.
        use_graph: ``"auto"`` captures the whole step (auto-reset included) in one graph (CUDA, or
            Warp's CPU graph replayed in C++) when possible (the torch reference: on CUDA, where
            its step is capture-safe, ``no_graph_reason`` says why not); ``True`` demands it
            (warns once and replays recorded launches where no graph is possible; the torch
            reference on the CPU compiles its torch work instead, ``plan.compile_torch``);
            ``False`` never captures (recorded-launch replay).
        clone_outputs: Return clones instead of the persistent output buffers. By default the
            tensors returned by ``step``/``reset`` are overwritten in place by the next call.
        dtype: ``"float32"`` (default) or ``"float64"``.
        env_offset: Global index of this batch's env 0 (int >= 0, ``env_offset + n_envs <= 2^31``).
            Resets draw from the counter-based RNG keyed by (seed, global env index, episode), so
            an env built with ``n_envs=n, env_offset=k`` draws, env for env, what envs
            ``k .. k + n - 1`` of one big batch with the same seed draw: shards of a batch (one per
            process or GPU, ``swarp.distributed``) or partial batches together replay the
            unsplit batch exactly. Only the reset draws depend on it; everything else is per env.
        lidar_rays: Lidar rays per agent appended to every observation (0: no lidar). Any scenario:
            ``obs`` becomes ``[scenario observation, n_rays distances [m]]`` and the scan runs inside
            the step (see ``swarp.sensors.lidar``; ``env.lidar`` is the sensor).
        lidar_range: Lidar range [m]: the reading of a ray that hits nothing.
        per_env_params: Give every env its own agent parameters (``[E, A, P]``, for domain
            randomization); see ``agent_params``, ``set_agent_params``, ``randomize_agent_params``.
            Off by default: all envs share one table and the step pays nothing for the option.
        randomize_params: Re-draw agent parameters at the start of every episode, inside the step
            graph (auto-resets included): a ``swarp.core.params.ParamRandomization`` or a mapping
            ``{name: (low, high)}`` of SI ranges. Implies ``per_env_params``. Draws are keyed by
            (seed, env, episode) and equal ``randomize_agent_params`` at the same episode.
        plan: How the step runs (``swarp.runtime.plan.ExecutionPlan``): ``None`` chooses it from
            the device, the sizes and the scenario; a mapping fixes some fields (``{"reset_ahead":
            False}``) and lets the rules choose the rest; an ``ExecutionPlan`` fixes all. A field
            the device or the scenario cannot honour raises.
        cpu_threads: Threads a CPU step may use (default ``torch.get_num_threads()``): with two
            or more and enough envs the plan steps the envs in shards, one thread each
            (``plan.cpu_shards``, ``swarp.env.shards``), to the same bits as one thread.

    Attributes:
        plan: The ``ExecutionPlan`` in use.
        buffers: The ``EnvBuffers``: the device arrays behind ``obs``, ``reward``, ``terminated``...
        obs_dim, act_dim, n_agents, n_envs, device, graph_mode, action_bounds, state: see properties.
        env_offset: As given.
        alive: [E, A] bool device tensor, the agents that act in the next step, where the scenario
            lets agents leave or draws a per-env agent count (``WorldSpec.alive_mask``); else
            ``None``. A dead agent is frozen, unlisted, observes zeros and earns 0
            (``swarp.runtime.alive``); its per-agent done flag is ``~alive``.

    Agent parameters: ``swarp.env.parameters.ParameterMethods``. Snapshots (``get_state``,
    ``set_state``), pickling and copying: ``swarp.env.snapshots.Snapshotting``.
    """

    #: Set by ``close()``; the methods that step, reset, snapshot, re-parameterise or draw the env
    #: check it first (``_check_open``).
    closed = False
    #: The ``AsyncStep`` of ``send``/``recv`` (created by the first ``send``, or by an ``EnvPool``).
    async_step = None
    #: While a grad-mode ``step`` runs the torch reference: its differentiable state (``state``).
    grad_state: tuple | None = None
    #: While a grad-mode ``step`` runs the torch reference: its actions' messages (``messages``).
    grad_messages: torch.Tensor | None = None
    #: While the torch reference observes fresh starts (a reset): ``messages`` is then silence.
    observing_fresh = False
    #: The ``swarp.env.grad.RecomputedGrad`` built by the first grad-mode step, or ``None``.
    recomputed_grad = None

    def __init__(
        self,
        scenario: Scenario,
        n_envs: int,
        device: str | torch.device | None = None,
        seed: int = 0,
        auto_reset: bool = False,
        max_steps: int | None | str = "default",
        fused: bool | str = "auto",
        use_graph: bool | str = "auto",
        clone_outputs: bool = False,
        dtype: str | torch.dtype = "float32",
        env_offset: int = 0,
        lidar_rays: int = 0,
        lidar_range: float = 1.0,
        per_env_params: bool = False,
        randomize_params: ParamRandomization | dict | None = None,
        plan: ExecutionPlan | Mapping[str, Any] | None = None,
        cpu_threads: int | None = None,
        action_space: str = "continuous",
        action_nvec: int | tuple[int, ...] | None = None,
    ):
        options = EnvOptions.check(
            scenario, n_envs=n_envs, device=device, seed=seed, auto_reset=auto_reset, max_steps=max_steps,
            fused=fused, use_graph=use_graph, clone_outputs=clone_outputs, dtype=dtype, env_offset=env_offset,
            lidar_rays=lidar_rays, lidar_range=lidar_range, per_env_params=per_env_params,
            randomize_params=randomize_params, plan=plan, cpu_threads=cpu_threads, action_space=action_space,
            action_nvec=action_nvec,
        )  # fmt: skip
        #: The scenario as given (before ``make_world`` and ``bind``): what pickles and copies rebuild from.
        self.scenario_as_given = options.scenario_as_given
        #: The constructor's arguments, checked and resolved: what a pickle or a copy rebuilds from.
        self.rebuild_kwargs = options.rebuild_kwargs
        self.core = EnvCore(scenario, options)
        self.parameters = AgentParameters(self.core, options.per_env_params)
        self.action_input = ActionInput(self.core, options.action_space, options.action_nvec)
        self.core.bind(self)  # the scenario binds to the facade: everything above is shown
        widths = observation_widths(options.spec.groups, self.scenario_obs_dim, options.lidar_rays)
        #: The ``AgentGroup`` s: each group's agents, observation width and action space.
        self.groups = self.action_input.groups(widths)
        #: Whether the scenario declares several groups: ``step``, ``reset``... then speak dicts by group.
        self.grouped = len(self.groups) > 1
        stages = Stages(self.core, self.parameters, self.action_input)
        self.launches = Launches(self, self.core, stages, make_step_end(self.core, stages))
        self.snapshots = Snapshots(self.core, self.parameters, self.action_input.comm)
        self._action_bounds: tuple[torch.Tensor, torch.Tensor] | None = None
        self.reset(seed=options.seed)
        if self.plan.cpu_shards > 1:
            self.launches.attach_shards(Shards(self, self.build_shard))

    def build_shard(self, n_envs: int, env_offset: int, plan: ExecutionPlan) -> Environment:
        """A one-thread environment like this one over ``n_envs`` envs from global env ``env_offset``."""
        kwargs = {**self.rebuild_kwargs, "n_envs": n_envs, "env_offset": env_offset, "plan": plan, "cpu_threads": 1}
        return Environment(copy.deepcopy(self.scenario_as_given), **kwargs)

    def build_twin(self) -> Environment:
        """An environment built like this one over the same envs, on one thread: the grad step's
        recompute runs there (``swarp.env.grad``)."""
        one_thread = dataclasses.replace(self.plan, cpu_shards=1, cpu_graph_workers=False)
        return self.build_shard(self.n_envs, self.env_offset, one_thread)

    # --- properties -------------------------------------------------------------------------

    @property
    def n_agents(self) -> int:
        """Agents per env A."""
        return self.stepper.n_agents

    @property
    def act_dim(self) -> int:
        """Columns of the actions ``step`` takes: the largest action arity over the fleet
        (continuous and multidiscrete), 1 (discrete). With groups of different action spaces
        there is no one width: ``groups[i].action_space.width``."""
        space = self.action_input.space
        if space is None:
            raise AttributeError(
                "act_dim: the groups' action spaces differ, so step takes a mapping by group; see "
                "env.groups[i].action_space.width"
            )
        return space.width

    @property
    def action_space(self):
        """The ``swarp.core.spaces.ActionSpace`` of the one tensor ``step`` takes: its ``kind``,
        ``nvec`` and ``heads`` (the choices of each column). With groups: the continuous
        ``[E, A, D]`` command where every group is continuous, else ``None`` (each group's is
        ``groups[i].action_space``)."""
        return self.action_input.space

    @property
    def graph_mode(self) -> bool:
        """Whether the step runs as a captured graph (a CUDA graph, or Warp's C++-replayed CPU graph;
        the torch reference on CUDA: one torch CUDA graph, unless ``no_graph_reason`` says why not)."""
        return self.plan.launch == "graph"

    @property
    def no_graph_reason(self) -> str | None:
        """Why the torch reference's step runs without the CUDA graph ``plan`` chose (it was not
        capture-safe: swarp.env.reference), or ``None``; also warned once when found."""
        torch_step = self.launches.torch_step
        return None if torch_step is None else torch_step.reason

    @property
    def execution_mode(self) -> str:
        """``"graph"``, ``"replay"`` (recorded launches) or ``"eager"``. The torch path: ``"graph"``
        where its whole step runs as one CUDA graph, else how its physics launches run."""
        return self.plan.launch

    @property
    def state(self):
        """``TorchState`` of zero-copy views of the world state ([E, A, ...]); a ``TorchStateWithBodies``
        (agents, then [E, B, ...] bodies) in a world with movable bodies.

        While a grad-mode ``step`` runs the scenario's torch reference, this is the step's
        differentiable state instead (fresh tensors carrying the physics' autograd history).
        """
        if self.grad_state is not None:
            return self.grad_state
        return self.world.state.torch

    @property
    def comm(self) -> torch.Tensor | None:
        """[E, A, C] the messages sent with the last step's actions (sim dtype; ``WorldSpec.comm_dim``
        C wide, a silent agent's row 0; VMAS's ``agent.state.c``), or ``None`` without a channel.
        Written at the start of every step; what an observation hears is ``messages``."""
        return self.action_input.comm

    @property
    def messages(self) -> torch.Tensor | None:
        """[E, A, C] the messages a torch reference observation hears: ``comm`` in a step's
        observation (in a grad-mode step, the messages of its actions, with their autograd
        history), zeros in the observation of a fresh start (nothing has been said in a new
        episode); ``None`` without a channel. The fused twin's rule is the same: its kernels hear
        ``comm`` in ``OBSERVE_STEP`` mode only."""
        if self.grad_messages is not None:
            return self.grad_messages
        comm = self.action_input.comm
        if comm is None or not self.observing_fresh:
            return comm
        return self.action_input.silence

    @property
    def action_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(low, high)``, each [A, D] in physical units: the box the kernels clamp actions to;
        where continuous actions carry messages, [A, D + C], the message columns [0, 1] (``(0, 0)``
        for a silent agent): the box of the joined ``[E, A, D + C]`` actions.

        Built once (agent limits are static) and shared: policies may read it every step for free;
        do not modify the returned tensors in place.
        """
        if self._action_bounds is None:
            low, high = self.stepper.model.action_bounds(self.torch_device, self.dtype)
            speaking = self.action_input.continuous_speaking_rows()
            if speaking is not None:
                channel = speaking.unsqueeze(-1).expand(-1, self.action_input.comm_dim).to(self.dtype)
                low, high = torch.cat([low, torch.zeros_like(channel)], -1), torch.cat([high, channel], -1)
            self._action_bounds = (low, high)
        return self._action_bounds

    def rng_keys(self) -> torch.Tensor:
        """[E] int64 reset-RNG keys of the current episodes (torch twin of the kernels' ``episode_key``),
        keyed by global env index ``env_offset + i``."""
        envs = torch.arange(self.env_offset, self.env_offset + self.n_envs, device=self.torch_device)
        return stream_key_torch(self.seed_tensor.long(), envs, self.episode.long())

    # --- public API -------------------------------------------------------------------------

    def step(self, actions):
        """Advance every env by one step.

        Args:
            actions: [E, A, act_dim] tensor of the sim dtype on the sim device, physical units
                (see ``action_bounds``; values outside are clamped, non-finite ones act as 0 and
                raise ``invalid_actions()``). With discrete ``action_space``: [E, A, act_dim]
                integer indices (``action_space.heads`` choices per column); an out-of-range one
                acts as 0 and raises ``invalid_actions()``. With groups (``grouped``): a mapping
                ``{group: [E, A_g, width_g]}``, each in its group's ``action_space``; a tensor
                only where ``action_space`` is not ``None`` (every group continuous).

        Returns:
            ``(obs [E, A, obs_dim], reward [E, A], terminated [E] bool, truncated [E] bool, info)``.
            With ``auto_reset``, finished envs are already reset: ``obs`` starts their new episode
            and ``info["final_obs"]`` holds their last observation (rows of other envs are stale).
            With groups, ``obs``, ``reward`` and ``info["final_obs"]`` are mappings by group of
            views ``[E, A_g, obs_dim_g]`` / ``[E, A_g]`` (``by_group``).

        With grads (``actions.requires_grad`` under grad mode) ``obs`` and ``reward`` are fresh
        tensors whose autograd history reaches ``actions`` (``swarp.env.grad``).
        """
        self._check_open("step")
        self._check_no_pending_send("step")
        action_input = self.action_input  # read once: the step is the hot path
        action_input.check(actions)
        if isinstance(actions, torch.Tensor):
            if actions.requires_grad and torch.is_grad_enabled():
                return self._grad_step(actions)
            buffer = action_input.buffer
            if buffer is not None:
                buffer.copy_(actions)
            else:
                action_input.write(actions)
        else:
            if torch.is_grad_enabled() and any(t.requires_grad for t in actions.values()):
                return self._grad_step(action_input.join(actions))
            action_input.write(actions)
        self.launches.run_step()
        return self.outputs()

    def _grad_step(self, actions: torch.Tensor):
        if self.launches.shards is not None:
            self.launches.shards.mark_dirty()  # it writes the rows here, then resets through the shards
        obs, reward, terminated, truncated, info = grad.grad_step(self, actions)
        obs, reward, info = self.by_group(obs, reward, info)
        return obs, reward, terminated, truncated, info

    def send(self, actions: torch.Tensor) -> None:
        """Start a step with ``actions`` [E, A, act_dim] and return at once; ``recv()`` returns it.

        Physics then overlaps whatever the caller does next (policy forward, update): on CUDA the
        step is queued on torch's current stream, on the CPU it runs inline or in a worker thread
        (``plan.async_cpu``). Same bits as ``step``. Until ``recv`` the output buffers (``obs``,
        ``reward``, ``info``...) are being rewritten: copy what you keep before sending. See
        ``swarp.env.asynchronous``.

        Raises:
            RuntimeError: a step is already pending (``send`` twice without ``recv``), or the
                environment is closed.
        """
        self._check_open("send")
        if self.async_step is None:
            from swarp.env.asynchronous import AsyncStep

            self.async_step = AsyncStep(self)
        self.async_step.send(actions)

    def recv(self):
        """Finish the step started by ``send``; returns what ``step`` would have returned.

        Raises:
            RuntimeError: no step is pending, or the environment is closed.
        """
        self._check_open("recv")
        if self.async_step is None:
            raise RuntimeError("recv() was called without a pending send()")
        self.async_step.wait()
        return self.outputs()

    def outputs(self) -> tuple:
        """``(obs, reward, terminated, truncated, info)``: what ``step`` returns, from the output
        buffers as they are (clones with ``clone_outputs``; by group where ``grouped``)."""
        core = self.core
        obs, reward, terminated, truncated, info = core.obs, core.reward, core.terminated, core.truncated, core.info
        if core.clone_outputs:
            obs, reward, terminated, truncated = obs.clone(), reward.clone(), terminated.clone(), truncated.clone()
            info = {k: v.clone() for k, v in info.items()}
        obs, reward, info = self.by_group(obs, reward, info)
        return obs, reward, terminated, truncated, info

    def by_group(self, obs: torch.Tensor, reward: torch.Tensor | None = None, info: dict | None = None):
        """``(obs, reward, info)`` as ``step`` returns them: unchanged with one group; with several,
        ``{group: view}`` of ``obs`` [E, A, obs_dim] (``[E, A_g, obs_dim_g]``), ``reward`` [E, A]
        (``[E, A_g]``) and ``info["final_obs"]`` (no copy: views of the given tensors)."""
        if not self.grouped:
            return obs, reward, info
        groups = self.groups
        widths = [g.obs_dim for g in groups]
        obs = agent_groups.split(obs, groups, widths)
        if reward is not None:
            reward = agent_groups.split(reward, groups)
        if info is not None and "final_obs" in info:
            info = {**info, "final_obs": agent_groups.split(info["final_obs"], groups, widths)}
        return obs, reward, info

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"the Environment is closed: {what}() cannot run after close(); build a new one")

    def _check_no_pending_send(self, what: str) -> None:
        if self.async_step is not None and self.async_step.pending:
            raise RuntimeError(f"{what}() was called while a send() is pending: call recv() first")

    def reset(self, seed: int | None = None):
        """Reset every env; with ``seed``, restart the reset RNG and episode counters from it.

        Returns:
            ``(obs [E, A, obs_dim], info)`` (``obs`` by group where ``grouped``).
        """
        self._check_open("reset")
        self._check_no_pending_send("reset")
        if seed is not None:
            check_seed(seed)
            self.seed_value = int(seed)
            self.seed_tensor.fill_(int(seed))
            self.episode.fill_(-1)  # begin_episodes advances it to 0
        self.clear_flags()  # a full reset starts the flags' count over
        self.reset_mask.fill_(True)
        self.launches.run_reset()
        self.terminated.zero_()
        self.truncated.zero_()
        self.done.zero_()
        obs, info = self.obs, dict(self.info)
        if self.clone_outputs:
            obs, info = obs.clone(), {k: v.clone() for k, v in info.items()}
        obs, _, info = self.by_group(obs, None, info)
        return obs, info

    def reset_at(self, mask: torch.Tensor) -> torch.Tensor:
        """Reset the envs where ``mask`` [E] bool is set; others are untouched. No host sync.

        Returns:
            The observation buffer [E, A, obs_dim] (rows of reset envs start a new episode; by
            group where ``grouped``).
        """
        self._check_open("reset_at")
        self._check_no_pending_send("reset_at")
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
        if tuple(mask.shape) != (self.n_envs,):
            raise ValueError(f"mask must have shape [n_envs] = [{self.n_envs}], got {list(mask.shape)}")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must have dtype torch.bool, got {mask.dtype}")
        if mask.device != self.torch_device:
            raise ValueError(f"mask must be on device {self.torch_device}, got {mask.device}")
        self.reset_mask.copy_(mask)
        self.launches.run_reset()
        return self.by_group(self.obs.clone() if self.clone_outputs else self.obs)[0]

    def invalid_actions(self) -> torch.Tensor:
        """0-d bool device tensor: was a non-finite action seen since the last full ``reset`` (or
        ``clear_flags``)?"""
        return self.world.invalid_actions()

    def neighbor_overflow(self) -> torch.Tensor:
        """0-d bool device tensor: has any neighbor list been truncated since the last full
        ``reset`` (or ``clear_flags``)?"""
        return self.world.neighbor_overflow()

    def non_finite(self) -> torch.Tensor:
        """0-d bool device tensor, the state-health flag: has any env's state, observation
        (``final_obs`` included) or reward been NaN or infinite since the last full ``reset`` (or
        ``clear_flags``)? Raised inside the step's kernels (``swarp.runtime.health``); reading it is
        a device reduction, no host sync. ``non_finite_envs()`` says which envs."""
        return self.world.non_finite()

    def non_finite_envs(self) -> torch.Tensor:
        """[n] int64 local indices (``env_offset`` not added) of the envs ``non_finite()`` counts,
        ascending. One host sync: call it after ``non_finite()`` reads True."""
        return self.world.non_finite_envs()

    def clear_flags(self) -> None:
        """Lower the sticky flags: ``invalid_actions``, ``neighbor_overflow`` and ``non_finite``
        (device-side, on torch's current stream). A full ``reset`` clears them too."""
        self._check_open("clear_flags")
        self._check_no_pending_send("clear_flags")
        for flag in (self.world.invalid_action_flag, self.world.neighbors.overflow, self.world.non_finite_flags):
            wp.to_torch(flag).zero_()

    def invalidate(self) -> None:
        """Drop captured graphs and recorded launches (after changing scenario parameters in place)."""
        self.launches.invalidate()
        if self.recomputed_grad is not None:
            self.recomputed_grad.invalidate()

    def close(self) -> None:
        """Release what the environment holds beyond its buffers: the worker thread of CPU
        ``send``/``recv`` and the captured graphs or recorded launches (``invalidate``). Idempotent.

        A step pending from ``send`` is finished first (the worker joined; on CUDA it completes on
        its stream) and its outputs are never returned. Afterwards ``step``, ``send``, ``recv``,
        ``reset``, ``reset_at``, ``get_state``, ``set_state``, ``set_agent_params`` and ``render``
        raise ``RuntimeError``; tensors already returned stay readable.
        """
        if self.closed:
            return
        self.closed = True
        if self.async_step is not None:
            self.async_step.close()
        self.invalidate()
        if self.launches.shards is not None:
            self.launches.shards.close()
        if self.recomputed_grad is not None:
            self.recomputed_grad.close()

    # --- rendering ----------------------------------------------------------------------------

    def render(self, mode: str = "rgb_array", env_index: int = 0, **overlays: Any):
        """Draw one env (VMAS-compatible signature). Reads the state; never steps or writes it.

        Args:
            mode: ``"rgb_array"`` returns the image; ``"human"`` also shows it in a window (pygame,
                the ``viz`` extra).
            env_index: The env to draw, in ``[0, n_envs)``.
            **overlays: ``width``, ``height`` [px], ``extent`` ``(x_min, x_max, y_min, y_max)`` [m],
                and ``swarp.render.Overlays`` switches: ``neighbors``, ``velocity``, ``ids``,
                ``headings``, ``obstacles``, ``scenario``, ``velocity_scale`` [s].

        Returns:
            (H, W, 3) uint8 RGB image (default 480 x 480): agents with heading ticks, the scenario's
            drawables (goals), obstacles and world bounds.
        """
        from swarp import render as swarp_render

        self._check_open("render")
        if mode not in ("rgb_array", "human"):
            raise ValueError(f"render mode must be 'rgb_array' or 'human', got {mode!r}")
        frame = swarp_render.render_frame(self, env_index, **overlays)
        if mode == "human":
            from swarp.render.viewer import show_frame

            show_frame(frame, title=f"swarp {self.scenario.name}: env {env_index}")
        return frame


for name in PUBLIC:  # the core's attributes, shown as the environment's own
    setattr(Environment, name, CoreField(name))
del name
