"""Environment: the batched RL interface over a scenario and its physics world.

Everything it returns is a persistent device tensor (or a clone of one with
``clone_outputs=True``); nothing in ``step``, ``reset`` or ``reset_at`` moves data to the host.

A step is one launch sequence (``_fused_step``) that the plan's ``launch`` mode runs as a graph, a
recorded program or eager launches; the torch reference and the differentiable step are in
``swarp.env.reference``.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
import pickle
import warnings
from collections.abc import Mapping
from typing import Any

import torch
import warp as wp

from swarp.core import params as param_table
from swarp.core.config import ObstacleShape
from swarp.core.params import ParamRandomization
from swarp.core.precision import resolve_device
from swarp.core.rng import stream_key_torch
from swarp.env import grad, reference
from swarp.env.shards import Shards
from swarp.physics import substep
from swarp.physics.step import Stepper
from swarp.physics.world import World
from swarp.runtime import episode, health
from swarp.runtime.buffers import EnvBuffers
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.plan import Capabilities, ExecutionPlan, choose_neighbor_method, choose_plan
from swarp.runtime.rows import OBSERVE_ONLY, OBSERVE_RESET, OBSERVE_STEP
from swarp.runtime.sequence import CompiledSequence, TorchStreamScope, fork, join, on_callers_stream
from swarp.runtime.step_end import PreparedStarts
from swarp.scenarios.framework.base import FusedScenario, Scenario
from swarp.sensors.lidar import Lidar, LidarConfig

#: Global env indices enter the reset RNG as int32.
MAX_GLOBAL_ENVS = 2**31


class Environment:
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

    Pickling and copying: an environment pickles (``pickle``, ``cloudpickle``, ``torch.save``,
    multiprocessing) as what it was built from, never as its buffers: the scenario as it was given
    (its class and options, ``scenario.cfg``, before the environment bound buffers to it) and the
    constructor's arguments (``n_envs``, the resolved ``device``, ``seed``, ``auto_reset``,
    ``max_steps``, ``fused``, ``use_graph``, ``clone_outputs``, ``dtype``, ``env_offset``, the lidar,
    parameter and plan options), which is everything ``swarp.make`` passes. Unpickling builds a new
    environment from them, freshly reset with the seed it was built with: the state is not carried
    (episodes, counters, a later ``reset(seed=...)``, parameters written by ``set_agent_params``,
    a ``close()``). To carry it, pickle a snapshot beside it and restore it:
    ``env2, snap = pickle.loads(pickle.dumps((env, env.get_state()))); env2.set_state(snap)``.
    An unpickled env steps exactly like a fresh one made with the same arguments. ``copy.copy`` and
    ``copy.deepcopy`` give such a rebuilt environment too (two envs never share buffers). An
    environment built from a ``Scenario`` instance of your own pickles when that scenario does
    (module-level class, picklable options); otherwise pickling raises ``TypeError`` naming what
    does not pickle.
    """

    #: Set by ``close()``; the methods that step, reset, snapshot, re-parameterise or draw the env
    #: check it first (``_check_open``).
    _closed = False
    #: The ``Shards`` that run the step and reset launches where ``plan.cpu_shards > 1``, else ``None``.
    _shards: Shards | None = None

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
    ):
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenario must be a Scenario instance, got {type(scenario).__name__}")
        # The scenario as given, before ``make_world`` and ``bind`` touch it: pickles and copies
        # rebuild the environment from it (``__reduce__``).
        self._scenario_as_given = copy.copy(scenario)
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        check_seed(seed)
        if isinstance(env_offset, bool) or not isinstance(env_offset, int) or env_offset < 0:
            raise ValueError(f"env_offset must be an int >= 0, got {env_offset!r}")
        if env_offset + n_envs > MAX_GLOBAL_ENVS:
            raise ValueError(
                f"env_offset + n_envs must be <= 2^31 (global env indices are int32), got "
                f"{env_offset} + {n_envs} = {env_offset + n_envs}"
            )
        if isinstance(lidar_rays, bool) or not isinstance(lidar_rays, int) or lidar_rays < 0:
            raise ValueError(f"lidar_rays must be an int >= 0, got {lidar_rays!r}")
        if not isinstance(per_env_params, bool):
            raise TypeError(f"per_env_params must be a bool, got {per_env_params!r}")
        threads = torch.get_num_threads() if cpu_threads is None else cpu_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"cpu_threads must be None or an int >= 1, got {cpu_threads!r}")
        if plan is not None and not isinstance(plan, (ExecutionPlan, Mapping)):
            raise TypeError(
                f"plan must be an ExecutionPlan, a mapping of its fields or None, got {type(plan).__name__}"
            )
        lidar_config = LidarConfig(lidar_rays, lidar_range) if lidar_rays else None
        if randomize_params is not None and not isinstance(randomize_params, ParamRandomization):
            randomize_params = ParamRandomization(randomize_params)
        per_env_params = per_env_params or randomize_params is not None
        if fused not in (True, False, "auto"):
            raise ValueError(f"fused must be True, False or 'auto', got {fused!r}")
        if fused is True and not scenario.fused_available:
            raise ValueError(f"fused=True but scenario {scenario.name!r} has no fused kernels")
        spec = scenario.make_world()
        if max_steps == "default":
            max_steps = spec.max_steps
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be an int >= 1, None or 'default', got {max_steps!r}")
        self.scenario = scenario
        self.n_envs = n_envs
        self.env_offset = env_offset
        self.auto_reset = bool(auto_reset)
        self.max_steps = max_steps
        self.clone_outputs = bool(clone_outputs)
        self.fused = scenario.fused_available if fused == "auto" else bool(fused)
        self._grad_state: tuple | None = None  # the differentiable state of a grad-mode step (``state``)
        self._recomputed_grad = None  # swarp.env.grad.RecomputedGrad, built by the first grad-mode step
        self._async = None  # AsyncStep, created by the first send()
        self._action_bounds: tuple[torch.Tensor, torch.Tensor] | None = None
        self._per_env_params = per_env_params
        self._base_params: torch.Tensor | None = None
        self.randomization = randomize_params

        # The plan first: it decides the layout of everything allocated below.
        hooks = scenario.step_end_hooks(spec) if self.fused and isinstance(scenario, FusedScenario) else None
        device = resolve_device(device)
        cuda = device.startswith("cuda")
        brute_lists = choose_neighbor_method(spec.world, len(spec.agents), device) == "brute"
        can = Capabilities(
            # The torch reference is captured whole by torch on CUDA (swarp.env.reference).
            capturable=scenario.supports_graph_reset() if self.fused else cuda,
            fused=self.fused,
            auto_reset=self.auto_reset,
            lidar=lidar_config is not None,
            fuses_end=hooks is not None and hooks.fuses_end,
            prepares_ahead=hooks is not None and hooks.prepares_ahead and brute_lists,
            fuses_substep=substep.can_fuse(spec.agents, spec.world),
        )
        #: The constructor's arguments, checked and resolved: what a pickle or a copy rebuilds from.
        self._rebuild_kwargs = dict(
            n_envs=n_envs,
            device=device,
            seed=int(seed),
            auto_reset=self.auto_reset,
            max_steps=max_steps,
            fused=fused,
            use_graph=use_graph,
            clone_outputs=self.clone_outputs,
            dtype=dtype,
            env_offset=env_offset,
            lidar_rays=lidar_rays,
            lidar_range=lidar_range,
            per_env_params=per_env_params,
            randomize_params=randomize_params,
            plan=plan,
            cpu_threads=cpu_threads,
        )
        self.plan = choose_plan(
            device, n_envs, len(spec.agents), spec.world.max_neighbors, use_graph, can, plan, cpu_threads=threads
        )
        if self.plan.cpu_shards > n_envs:
            raise ValueError(f"plan.cpu_shards={self.plan.cpu_shards} is more shards than envs ({n_envs})")
        if use_graph is True and self.plan.launch != "graph" and not self.plan.compile_torch:
            warnings.warn(
                f"use_graph=True but the step is not capturable: running it without a graph ({self.plan.launch})",
                stacklevel=2,
            )
        # Torch's writes into new buffers (on its current stream) and Warp's fills: one stream for both.
        with on_callers_stream(device):
            self.stepper = Stepper(
                spec.agents, spec.dt, device, spec.world, spec.substeps, spec.integrator, dtype, plan=self.plan
            )
            self.world = World(self.stepper, n_envs)
            self._params_view = None  # (parameter table, its torch view): agent_params
            #: [E] int32 torch view of the world's sticky health flags (``non_finite``).
            self.health_flags = wp.to_torch(self.world.non_finite_flags)
            if per_env_params:
                param_table.enable_per_env_params(self.world.model, n_envs)
                self.world.invalidate()
            if spec.n_obstacle_slots:
                self.world.model.set_obstacle_slots(n_envs, spec.n_obstacle_slots)
                self.world.invalidate()
            self.device = self.stepper.device
            self.torch_device = self.stepper.torch_device
            self.dtype = self.stepper.torch_dtype
            if randomize_params is not None:
                self._setup_randomization(randomize_params)

            b = self.buffers = EnvBuffers(
                self.plan,
                n_envs,
                self.n_agents,
                self.stepper.scalar,
                self.device,
                max_steps,
                self.auto_reset,
                env_offset,
                self.world.non_finite_flags,
            )
            self.seed_tensor = wp.to_torch(b.seed)
            self.episode = wp.to_torch(b.episode)
            self.step_count = wp.to_torch(b.step_count)
            self.terminated = wp.to_torch(b.terminated)
            self.truncated = wp.to_torch(b.truncated)
            self.done = wp.to_torch(b.done)
            self.reset_mask = wp.to_torch(b.reset_mask)
            self.reward = wp.to_torch(b.reward)
            scenario.bind(self)
            self.scenario_obs_dim = scenario.obs_dim
            self.lidar = Lidar(self.world, lidar_config) if lidar_config else None
            self.obs_dim = self.scenario_obs_dim + lidar_rays
            b.allocate_rows(self.obs_dim, self.scenario_obs_dim)
            self.obs = wp.to_torch(b.obs)
            self.final_obs = wp.to_torch(b.final_obs)
            #: Starts prepared ahead (``plan.reset_ahead``), or ``None``.
            self.prepared = None
            if self.plan.reset_ahead:
                scan_ahead = randomize_params is None  # re-drawn radii: scan after the swap instead
                self.prepared = PreparedStarts(b, hooks, self.lidar, scan_ahead, scenario.saves_final_obs)
            # The auto-reset's lidar scan forks onto this stream, beside the neighbor refresh and observation.
            self._lidar_stream = wp.Stream(self.device) if self.plan.lidar_side_stream else None
            self.info = dict(scenario.info_buffers())
            #: The keys the torch reference's ``info()`` must return (``info_buffers``' keys).
            self.scenario_info_keys = self.info.keys() - {"final_obs"}
            if self.auto_reset:
                self.info["final_obs"] = self.final_obs
            self.streams = TorchStreamScope(self.device)
            if self.fused:
                self._step_seq = CompiledSequence(self._fused_step, self.plan.launch, self.device, self.streams)
                self._reset_seq = CompiledSequence(self._fused_reset, self.plan.launch, self.device, self.streams)
            #: The torch reference's step on CUDA: captured, or launched into the caller's capture.
            self._torch_step = reference.CapturedTorchStep(self) if cuda and not self.fused else None
            #: The torch reference's torch work, compiled where ``plan.compile_torch``.
            self._torch_calls = reference.TorchCalls(self)
            #: The torch paths' end-of-step launches, recorded on first use (plain under ``"eager"``).
            end_mode = "eager" if self.plan.launch == "eager" else "graph" if self.plan.compile_torch else "replay"
            self._torch_end_seq = CompiledSequence(self._torch_end_step, end_mode, self.device, self.streams)
            self.seed_value = int(seed)
            self.reset(seed=seed)
            if self.plan.cpu_shards > 1:
                self._shards = Shards(self, self._build_shard)

    def _build_shard(self, n_envs: int, env_offset: int, plan: ExecutionPlan) -> Environment:
        """A one-thread environment like this one over ``n_envs`` envs from global env ``env_offset``."""
        kwargs = {**self._rebuild_kwargs, "n_envs": n_envs, "env_offset": env_offset, "plan": plan, "cpu_threads": 1}
        return Environment(copy.deepcopy(self._scenario_as_given), **kwargs)

    def _build_twin(self) -> Environment:
        """An environment built like this one over the same envs, on one thread: the grad step's
        recompute runs there (``swarp.env.grad``)."""
        one_thread = dataclasses.replace(self.plan, cpu_shards=1, cpu_graph_workers=False)
        return self._build_shard(self.n_envs, self.env_offset, one_thread)

    # --- properties -------------------------------------------------------------------------

    @property
    def n_agents(self) -> int:
        """Agents per env A."""
        return self.stepper.n_agents

    @property
    def act_dim(self) -> int:
        """Action width: the largest action arity over the fleet."""
        return self.stepper.act_dim

    @property
    def graph_mode(self) -> bool:
        """Whether the step runs as a captured graph (a CUDA graph, or Warp's C++-replayed CPU graph;
        the torch reference on CUDA: one torch CUDA graph, unless ``no_graph_reason`` says why not)."""
        return self.plan.launch == "graph"

    @property
    def no_graph_reason(self) -> str | None:
        """Why the torch reference's step runs without the CUDA graph ``plan`` chose (it was not
        capture-safe: swarp.env.reference), or ``None``; also warned once when found."""
        return None if self._torch_step is None else self._torch_step.reason

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
        if self._grad_state is not None:
            return self._grad_state
        return self.world.state.torch

    @property
    def action_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(low, high)``, each [A, act_dim] in physical units: the box the kernels clamp actions to.

        Built once (agent limits are static) and shared: policies may read it every step for free;
        do not modify the returned tensors in place.
        """
        if self._action_bounds is None:
            self._action_bounds = self.stepper.model.action_bounds(self.torch_device, self.dtype)
        return self._action_bounds

    @property
    def per_env_params(self) -> bool:
        """Whether every env has its own agent parameters (``agent_params`` is [E, A, P])."""
        return self._per_env_params

    @property
    def agent_params(self) -> torch.Tensor:
        """Zero-copy view of the agent parameter table: [E, A, P] with ``per_env_params``, else
        [1, A, P] shared by every env; columns ``swarp.core.params.PARAM_NAMES`` (SI units).

        The step reads it in place: ``set_agent_params`` writes it with validation, and a change
        takes effect on the next step without recapturing anything. ``action_bounds`` keeps the
        configured limits; the kernels clamp each env's actions to its own.
        """
        params = self.world.model.params
        if self._params_view is None or self._params_view[0] is not params:  # one view per table:
            self._params_view = (params, wp.to_torch(params))  # compiled code reads it too
        return self._params_view[1]

    # --- agent parameters ---------------------------------------------------------------------

    def set_agent_params(
        self, values: torch.Tensor | None = None, env_mask: torch.Tensor | None = None, **columns: Any
    ) -> None:
        """Write agent parameters in place, validated (one host sync); next step uses them.

        Args:
            values: A whole table broadcastable to ``agent_params``' shape.
            env_mask: Optional [E] bool: only these envs change (needs ``per_env_params``).
            **columns: Parameters by name, e.g. ``mass=torch.full((E, A), 2.0)`` or ``max_speed=0.5``;
                each broadcastable to [E_p, A]. radius and max_speed may not exceed the configured
                fleet maxima (they size the contact search).

        Raises:
            TypeError: ``values`` is not a tensor, or a column is neither a number nor a tensor.
            ValueError: a shape that does not broadcast (named with the shape it must broadcast to,
                the table's columns and the shape given), an ``env_mask`` that is not [E] bool, or
                invalid values; the table is left as it was.
        """
        self._check_open("set_agent_params")
        self._check_no_pending_send("set_agent_params")
        param_table.write_params(self.world.model, values, env_mask, **columns)
        self._prepare_all_again()  # a lidar's prepared scans saw the old radii

    def randomize_agent_params(
        self,
        ranges: dict[str, tuple[float, float]],
        env_mask: torch.Tensor | None = None,
        relative: bool = False,
        per_agent: bool = True,
    ) -> None:
        """Domain randomization: draw parameters uniformly in ``ranges`` for every env (or those in
        ``env_mask``), in place. Draws come from the reset RNG keyed by (seed, env, episode), so
        calling this after each reset gives every episode its own, reproducible parameters.

        Args:
            ranges: ``{name: (low, high)}`` in SI units, or factors of the configured values with
                ``relative=True`` (e.g. ``{"mass": (0.8, 1.2)}``).
            env_mask: Optional [E] bool.
            relative: Scale the configured (``AgentConfig``) values instead of replacing them.
            per_agent: Each agent draws its own value; otherwise all agents of an env share one.
        """
        if not self.per_env_params:
            raise RuntimeError("randomize_agent_params needs an environment built with per_env_params=True")
        base = self.configured_params()
        table = param_table.sample_agent_params(base, ranges, self.rng_keys(), relative=relative, per_agent=per_agent)
        self.set_agent_params(table, env_mask=env_mask)

    def configured_params(self) -> torch.Tensor:
        """[1, A, P] the parameters the ``AgentConfig``s give (the shared table's values)."""
        if self._base_params is None:
            agents = self.stepper.model.agents
            rows = [[float(getattr(cfg, name)) for name in param_table.PARAM_NAMES] for cfg in agents]
            self._base_params = torch.tensor([rows], dtype=self.dtype, device=self.torch_device)
        return self._base_params

    def _setup_randomization(self, randomization: ParamRandomization) -> None:
        """Validate every value the ranges can produce (once, here) and stage the kernel's arrays."""
        base = self.configured_params()
        for table in randomization.extreme_tables(base):
            param_table.check_param_table(self.world.model, table, name="randomize_params")
        ranges = list(randomization.ranges.items())
        dev, scalar = self.device, self.stepper.scalar
        self._random_columns = wp.array([param_table.param_column(n) for n, _ in ranges], dtype=wp.int32, device=dev)
        self._random_low = wp.array([float(b[0]) for _, b in ranges], dtype=scalar, device=dev)
        self._random_high = wp.array([float(b[1]) for _, b in ranges], dtype=scalar, device=dev)
        self._random_base = wp.from_torch(base.contiguous(), dtype=scalar)

    def rng_keys(self) -> torch.Tensor:
        """[E] int64 reset-RNG keys of the current episodes (torch twin of the kernels' ``episode_key``),
        keyed by global env index ``env_offset + i``."""
        envs = torch.arange(self.env_offset, self.env_offset + self.n_envs, device=self.torch_device)
        return stream_key_torch(self.seed_tensor.long(), envs, self.episode.long())

    def _prepare_all_again(self) -> None:
        """Prepare every env's next start again (after anything it depends on changed outside the
        step: a restored snapshot, new agent parameters)."""
        if self.prepared is not None:
            self.prepared.mark_all()

    # --- the launch sequences ---------------------------------------------------------------

    def _fused_step(self, launcher: Launcher) -> None:
        """The launches of one step: physics, lidar, the scenario's observation (which ends the
        step) and, with ``auto_reset``, the restart of the envs that finished."""
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        b, plan = self.buffers, self.plan
        if self.prepared is not None:
            self.prepared.launch_prepare(launcher)
        self.world.simulate(launcher, rebuild_neighbors=not sc.builds_neighbors)
        # The lidar columns go first, so rows are whole when finished envs save them to final_obs.
        self._launch_lidar(launcher)
        swapped_in_step = self.prepared is not None and plan.fused_step_end
        if swapped_in_step:
            self.prepared.join()  # the kernel that ends the step swaps prepared starts in
        sc.launch_observe(launcher, mode=OBSERVE_STEP)
        if not sc.ends_steps:
            self._launch_advance(launcher)
        if self.auto_reset:
            # Finished envs keep their last rows in final_obs: saved here, or by the scenario's masked
            # observation (OBSERVE_ONLY) and the lidar's masked scan, each just before it overwrites them.
            if not sc.saves_final_obs:
                self._launch_save_final_obs(launcher)
            if plan.list_resets:
                b.done_list.launch_compact(launcher, b.done)
            try:
                self._launch_restart(launcher, swapped_in_step)
            finally:
                b.done_list.mask = None  # the next step rewrites the mask
        if not sc.checks_finite:
            self._launch_check_outputs(launcher, None)

    def _launch_restart(self, launcher: Launcher, swapped_in_step: bool = False) -> None:
        """The auto-reset's launches after the step: new episodes for the envs in ``done`` (their
        parameters, state, neighbor lists, observation rows and lidar columns), swapped in from
        starts prepared ahead where ``plan.reset_ahead``."""
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        done = self.buffers.done
        self._launch_randomize(launcher, done)
        if self.prepared is not None:
            self.prepared.launch_swap(launcher, swapped_in_step)
            return
        sc.launch_reset(launcher, done)
        # The new episodes' scan needs only their poses, and keeps the lidar columns of their final
        # observation itself where the scenario's masked observation saves the rest: so with a
        # side stream (CUDA, live or under graph capture; recorded launches replay on one stream)
        # it runs beside the neighbor refresh and the observation, three latency-bound launches.
        keep = self.buffers.final_obs if sc.saves_final_obs else None
        side = self._lidar_stream if launcher is EAGER else None
        with fork(side, self.device):
            self._launch_lidar(launcher, done, keep)
        self._refresh_neighbors(launcher, done)
        sc.launch_observe(launcher, env_mask=done, mode=OBSERVE_ONLY)
        join(side, self.device)

    def _fused_reset(self, launcher: Launcher) -> None:
        """The launches of a reset of the envs in ``reset_mask``."""
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        mask = self.buffers.reset_mask
        self._launch_begin_episodes(launcher)
        self._launch_randomize(launcher, mask)
        sc.launch_reset(launcher, mask)
        self._refresh_neighbors(launcher, mask)
        self._launch_lidar(launcher, mask)
        sc.launch_observe(launcher, env_mask=mask, mode=OBSERVE_RESET)
        if self.prepared is not None:
            self.prepared.launch_mark_started(launcher, mask)
        if not sc.checks_finite:
            self._launch_check_outputs(launcher, mask)

    def _launch_check_outputs(self, launcher: Launcher, env_mask: wp.array | None) -> None:
        """Raise the health flag of envs with non-finite outputs by reading them back: after a
        step (``env_mask=None``: every env's rows and rewards, and the final rows of finished envs),
        or a reset of the envs of ``env_mask`` (their rows). Only for a scenario that does not check
        its own (``FusedScenario.checks_finite``)."""
        b = self.buffers
        step = env_mask is None
        launcher.launch(
            health.check_outputs_kernel(self.stepper.scalar),
            dim=(self.n_envs, self.n_agents),
            inputs=[
                b.no_mask if step else env_mask,
                int(not step),
                b.obs,
                b.reward,
                int(step),
                b.final_obs,
                b.done,
                int(step and self.auto_reset),
            ],
            outputs=[b.non_finite],
            device=self.device,
        )

    def _launch_randomize(self, launcher: Launcher, env_mask: wp.array) -> None:
        """Re-draw the parameters of the envs in ``env_mask`` (no-op without ``randomize_params``)."""
        r = self.randomization
        if r is None:
            return
        launcher.launch(
            param_table.kernels(self.stepper.scalar).resample_params,
            dim=(self.n_envs, self.n_agents),
            inputs=[
                env_mask,
                self.buffers.reset_streams,
                self._random_columns,
                self._random_low,
                self._random_high,
                int(r.relative),
                int(r.per_agent),
                self._random_base,
            ],
            outputs=[self.world.model.params],
            device=self.device,
        )

    def _launch_lidar(
        self, launcher: Launcher, env_mask: wp.array | None = None, final_out: wp.array | None = None
    ) -> None:
        """The lidar scan into the observation columns after the scenario's (no-op without lidar),
        copying the readings it replaces to ``final_out`` if given."""
        if self.lidar is not None:
            self.lidar.launch(launcher, self.buffers.obs, self.scenario_obs_dim, env_mask, final_out)

    def _launch_begin_episodes(self, launcher: Launcher) -> None:
        """Advance the episode counter and zero the step counter of every env in ``reset_mask``."""
        b = self.buffers
        launcher.launch(
            episode.begin_episodes,
            dim=self.n_envs,
            inputs=[b.reset_mask],
            outputs=[b.step_count, b.episode],
            device=self.device,
            block_dim=self.plan.env_block,
        )

    def _refresh_neighbors(self, launcher: Launcher, mask: wp.array) -> None:
        """Neighbor lists of the envs in ``mask`` after their reset: rebuilt here, or only binned
        when the scenario's observe kernel builds them."""
        if self.scenario.builds_neighbors:
            self.world.prepare_neighbors(launcher)
        else:
            self.world.build_neighbors(mask, launcher)

    def _launch_save_final_obs(self, launcher: Launcher) -> None:
        """With auto-reset, copy the observation rows of the envs that finished this step
        (``done``) to ``final_obs``, before their reset overwrites them."""
        if not self.auto_reset:
            return
        b = self.buffers
        per_thread, threads = self.plan.split(self.n_agents)
        launcher.launch(
            episode.save_final_obs_kernel(self.stepper.scalar),
            dim=(self.n_envs, threads),
            inputs=[b.done, b.obs, per_thread],
            outputs=[b.final_obs],
            device=self.device,
        )

    def _torch_end_step(self, launcher: Launcher) -> None:
        """The torch paths' end of a step: the fused path's bookkeeping (``_launch_advance``) and the
        save of finished envs' rows (``_launch_save_final_obs``)."""
        self._launch_advance(launcher)
        self._launch_save_final_obs(launcher)

    def _launch_advance(self, launcher: Launcher) -> None:
        """Count the step, flag time limits, and with auto-reset start the next episode of finished
        envs (one thread per env)."""
        launcher.launch(
            episode.funcs(self.stepper.scalar).advance_episodes,
            dim=self.n_envs,
            inputs=[self.buffers.episode_args],
            device=self.device,
            block_dim=self.plan.env_block,
        )

    # --- public API -------------------------------------------------------------------------

    def step(self, actions: torch.Tensor):
        """Advance every env by one step.

        Args:
            actions: [E, A, act_dim] tensor of the sim dtype on the sim device, physical units
                (see ``action_bounds``; values outside are clamped, non-finite ones act as 0 and
                raise ``invalid_actions()``).

        Returns:
            ``(obs [E, A, obs_dim], reward [E, A], terminated [E] bool, truncated [E] bool, info)``.
            With ``auto_reset``, finished envs are already reset: ``obs`` starts their new episode
            and ``info["final_obs"]`` holds their last observation (rows of other envs are stale).

        With grads (``actions.requires_grad`` under grad mode) ``obs`` and ``reward`` are fresh
        tensors whose autograd history reaches ``actions`` (``swarp.env.grad``).
        """
        self._check_open("step")
        self._check_no_pending_send("step")
        self.stepper.check_actions(actions, self.n_envs)
        if actions.requires_grad and torch.is_grad_enabled():
            if self._shards is not None:
                self._shards.mark_dirty()  # it writes the rows here, then resets through the shards
            return grad.grad_step(self, actions)
        self.world.actions.copy_(actions)
        self._run_step()
        return self._outputs(self.obs, self.reward, self.terminated, self.truncated)

    def _run_step(self) -> None:
        """One no-grad step from the action buffer, writing the output buffers."""
        if self._shards is not None:
            self._shards.step()
        elif self.fused:
            self._step_seq()
        elif self._torch_step is not None:
            self._torch_step()
        else:
            reference.torch_step(self)

    def _prepare_step(self) -> None:
        """Capture the step's graphs now where they are missing (its shards' with ``cpu_shards``);
        runs nothing. For a caller that runs the step on a worker thread (``send``)."""
        if self._shards is not None:
            self._shards.prepare("step")
        elif self.fused:
            self._step_seq.prepare()

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
        if self._async is None:
            from swarp.env.asynchronous import AsyncStep

            self._async = AsyncStep(self)
        self._async.send(actions)

    def recv(self):
        """Finish the step started by ``send``; returns what ``step`` would have returned.

        Raises:
            RuntimeError: no step is pending, or the environment is closed.
        """
        self._check_open("recv")
        if self._async is None:
            raise RuntimeError("recv() was called without a pending send()")
        self._async.wait()
        return self._outputs(self.obs, self.reward, self.terminated, self.truncated)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"the Environment is closed: {what}() cannot run after close(); build a new one")

    def _check_no_pending_send(self, what: str) -> None:
        if self._async is not None and self._async.pending:
            raise RuntimeError(f"{what}() was called while a send() is pending: call recv() first")

    def reset(self, seed: int | None = None):
        """Reset every env; with ``seed``, restart the reset RNG and episode counters from it.

        Returns:
            ``(obs [E, A, obs_dim], info)``.
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
        self._run_reset()
        self.terminated.zero_()
        self.truncated.zero_()
        self.done.zero_()
        info = dict(self.info)
        if self.clone_outputs:
            return self.obs.clone(), {k: v.clone() for k, v in info.items()}
        return self.obs, info

    def reset_at(self, mask: torch.Tensor) -> torch.Tensor:
        """Reset the envs where ``mask`` [E] bool is set; others are untouched. No host sync.

        Returns:
            The observation buffer [E, A, obs_dim] (rows of reset envs start a new episode).
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
        self._run_reset()
        return self.obs.clone() if self.clone_outputs else self.obs

    def _run_reset(self) -> None:
        if self._shards is not None:
            self._shards.reset()
        elif self.fused:
            self._reset_seq()
        else:
            reference.torch_reset(self)

    def _outputs(self, *tensors):
        if self.clone_outputs:
            return (*(t.clone() for t in tensors), {k: v.clone() for k, v in self.info.items()})
        return (*tensors, self.info)

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
        self.world.invalidate()
        if self.fused:
            self._step_seq.invalidate()
            self._reset_seq.invalidate()
        if self._torch_step is not None:
            self._torch_step.invalidate()
        self._torch_end_seq.invalidate()
        if self._shards is not None:
            self._shards.invalidate()
        if self._recomputed_grad is not None:
            self._recomputed_grad.invalidate()

    def close(self) -> None:
        """Release what the environment holds beyond its buffers: the worker thread of CPU
        ``send``/``recv`` and the captured graphs or recorded launches (``invalidate``). Idempotent.

        A step pending from ``send`` is finished first (the worker joined; on CUDA it completes on
        its stream) and its outputs are never returned. Afterwards ``step``, ``send``, ``recv``,
        ``reset``, ``reset_at``, ``get_state``, ``set_state``, ``set_agent_params`` and ``render``
        raise ``RuntimeError``; tensors already returned stay readable.
        """
        if self._closed:
            return
        self._closed = True
        if self._async is not None:
            self._async.close()
        self.invalidate()
        if self._shards is not None:
            self._shards.close()
        if self._recomputed_grad is not None:
            self._recomputed_grad.close()

    # --- pickling and copying -------------------------------------------------------------------

    def __reduce__(self):
        """Pickle as ``(class, scenario as given, constructor arguments)``: unpickling rebuilds a fresh,
        reset environment (the state is not carried; see the class docstring).

        Raises:
            TypeError: the scenario or an argument does not pickle (named in the message).
        """
        recipe = (type(self), self._scenario_as_given, dict(self._rebuild_kwargs))
        _check_picklable(recipe)
        return (_rebuild_environment, recipe)

    def __copy__(self) -> Environment:
        """A rebuilt environment (as ``copy.deepcopy``): a shallow copy would share device buffers."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo: dict) -> Environment:
        """A fresh environment rebuilt from copies of the scenario as given and of the arguments
        (the state is not carried: ``set_state(env.get_state())`` on the copy carries it)."""
        scenario, kwargs = copy.deepcopy((self._scenario_as_given, self._rebuild_kwargs), memo)
        rebuilt = _rebuild_environment(type(self), scenario, kwargs)
        memo[id(self)] = rebuilt
        return rebuilt

    # --- snapshots ----------------------------------------------------------------------------

    def _snapshot_tensors(self) -> dict[str, torch.Tensor]:
        """The live buffers a snapshot copies, by key (see ``get_state``)."""
        state = self.world.state.torch
        tensors = {f"state.{name}": getattr(state, name) for name in self.world.state.fields}
        tensors.update(
            {
                "env.seed": self.seed_tensor,
                "env.episode": self.episode,
                "env.step_count": self.step_count,
                "env.obs": self.obs,
                "env.reward": self.reward,
                "env.terminated": self.terminated,
                "env.truncated": self.truncated,
                "env.final_obs": self.final_obs,
                "env.agent_params": self.agent_params,
            }
        )
        tensors.update({f"obstacles.{k}": v for k, v in self.world.model.obstacle_tensors().items()})
        tensors.update({f"scenario.{k}": v for k, v in self.scenario.state_tensors().items()})
        tensors.update({f"info.{k}": v for k, v in self.info.items() if k != "final_obs"})
        return tensors

    def get_state(self) -> dict[str, torch.Tensor]:
        """An exact snapshot of the whole batch: clones of every buffer that decides the next step.

        ``set_state`` restores it, after which the env steps, resets and auto-resets to the same
        bits as after the ``get_state`` (same seed, same actions, same bits). Keys:

        * ``state.*``: the world state [E, A, ...] (``self.state``'s fields: agents, the drone
          fields, bodies [E, B, ...] in a world with bodies).
        * ``env.seed`` [1] int32, ``env.episode`` and ``env.step_count`` [E] int32: the reset RNG's
          seed and counters (they key every reset draw, prepared starts' and re-drawn parameters'
          included) and the episode clocks.
        * ``env.obs``, ``env.final_obs`` [E, A, obs_dim], ``env.reward`` [E, A], ``env.terminated``
          and ``env.truncated`` [E] bool: the last outputs (``done``, the envs a caller's
          ``reset_at(env.done)`` would restart, is their ``or`` and is rebuilt from them).
        * ``env.agent_params``: the agent parameter table (``agent_params``: [E, A, P] per env, or
          the shared [1, A, P]), as drawn by ``randomize_params`` or written by ``set_agent_params``.
        * ``obstacles.*``: the obstacle arrays (``Model.obstacle_tensors``; per-env slots a scenario
          samples at reset included).
        * ``scenario.*``: the scenario's memory (``Scenario.state_tensors``: goals, targets, the
          previous distances of progress rewards...).
        * ``info.*``: the scenario's info buffers (``final_obs`` is ``env.final_obs``).

        Left out on purpose, as nothing the next step computes reads them: the sticky diagnostic
        flags (``invalid_actions``, ``neighbor_overflow``, ``non_finite``: they keep counting across
        a restore), per-step scratch that a step writes before it reads it (contact forces, the
        action buffer, the reset mask, the auto-reset's env list, a scenario's per-step terms;
        navigation's tallies are zero between steps), the lidar's ``last`` scan (``Lidar.scan``),
        and what is static after construction (plan, configured parameters, the ranges of
        ``randomize_params``). Derived buffers are rebuilt by ``set_state`` instead:
        neighbor lists (from ``state.pos``), ``done``, and the starts prepared ahead
        (``plan.reset_ahead``: prepared again from the restored counters at the next step).

        Returns:
            ``{key: tensor}`` of device tensors, each a clone (later steps do not change it).

        Raises:
            RuntimeError: a ``send()`` is pending (its step is rewriting the buffers).
        """
        self._check_open("get_state")
        self._check_no_pending_send("get_state")
        return {k: v.clone() for k, v in self._snapshot_tensors().items()}

    def set_state(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Restore a ``get_state`` snapshot in place (buffers keep their addresses: graphs stay valid).

        The snapshot is checked whole before anything is copied, so a rejected one leaves the env
        as it was: the same keys as ``get_state`` gives, each a tensor of its shape and dtype, and
        values ``get_state`` could have produced: finite floats, a seed in [0, 2^31), episode and
        step counters >= 0, a valid parameter table (``swarp.core.params.check_param_table``, as
        ``set_agent_params`` checks it) and valid obstacle codes and sizes. Tensors may be on
        another device (a snapshot of a CUDA env restored on the CPU, or one loaded with
        ``torch.load(map_location=...)``): they are copied across, bit for bit. One host sync.

        Args:
            snapshot: ``{key: tensor}`` from ``get_state`` (of this env or one built alike).

        Raises:
            TypeError: ``snapshot`` is not a dict, or an entry is not a tensor.
            ValueError: missing or unexpected keys, or an entry of the wrong shape, dtype or value
                (the message names the key, and for a non-finite value its first index).
            RuntimeError: a ``send()`` is pending.
        """
        self._check_open("set_state")
        self._check_no_pending_send("set_state")
        if not isinstance(snapshot, dict):
            raise TypeError(f"snapshot must be a dict from get_state(), got {type(snapshot).__name__}")
        tensors = self._snapshot_tensors()
        missing = sorted(set(tensors) - set(snapshot))
        extra = sorted(set(snapshot) - set(tensors))
        if missing or extra:
            raise ValueError(f"snapshot does not match this environment: missing {missing}, unexpected {extra}")
        # Validate every entry before copying any, so a rejected snapshot leaves the env untouched.
        for key, dst in tensors.items():
            src = snapshot[key]
            if not isinstance(src, torch.Tensor):
                raise TypeError(f"snapshot[{key!r}] must be a torch.Tensor, got {type(src).__name__}")
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(
                    f"snapshot[{key!r}] must be {dst.dtype} {list(dst.shape)}, got {src.dtype} {list(src.shape)}"
                )
        self._check_snapshot_values(snapshot)
        with torch.no_grad():  # a snapshot entry with autograd history must not attach it to the buffers
            for key, dst in tensors.items():
                dst.copy_(snapshot[key])
            torch.logical_or(self.terminated, self.truncated, out=self.done)
        self.seed_value = None
        if self._shards is not None:
            self._shards.mark_dirty()
        with self.streams.scope():
            self.world.build_neighbors()
        self._prepare_all_again()  # prepared starts follow the episode counters

    def _check_snapshot_values(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Raise ``ValueError`` unless every value of ``snapshot`` (keys, shapes and dtypes already
        checked) is one ``get_state`` could have produced (see ``set_state``)."""
        low, high = int(min(ObstacleShape)), int(max(ObstacleShape))
        rules = [(key, torch.isfinite, "finite") for key, value in snapshot.items() if value.is_floating_point()]
        rules += [
            ("env.seed", lambda seed: seed >= 0, "in [0, 2^31)"),  # int32: < 2^31 by its dtype
            ("env.episode", lambda count: count >= 0, ">= 0"),  # reset's -1 is advanced to 0 before it returns
            ("env.step_count", lambda count: count >= 0, ">= 0"),
            ("obstacles.shape", lambda code: (code >= low) & (code <= high), f"a shape code in [{low}, {high}]"),
            ("obstacles.size", lambda size: size >= 0, ">= 0 [m]"),
        ]
        for key, valid, expected in rules:
            value = snapshot[key]
            ok = valid(value)
            if not bool(ok.all()):
                index = (~ok).nonzero()[0].tolist()
                raise ValueError(
                    f"snapshot[{key!r}] must be {expected}, got {value[tuple(index)].item()} at index {index}"
                )
        params = snapshot["env.agent_params"]
        param_table.check_param_table(self.world.model, params, name="snapshot['env.agent_params']")

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


def _rebuild_environment(cls: type[Environment], scenario: Scenario, kwargs: dict[str, Any]) -> Environment:
    """Unpickling and copying: a new environment of ``cls`` from an unbound ``scenario`` and the
    constructor's keyword arguments (``Environment.__reduce__``)."""
    return cls(scenario, **kwargs)


def _check_picklable(recipe: tuple[type, Scenario, dict[str, Any]]) -> None:
    """Raise a ``TypeError`` that names the culprit when the recipe an environment pickles as
    (``(class, scenario as given, constructor arguments)``) does not pickle with ``pickle``.

    The check is ``pickle``'s whatever the pickler at work (``cloudpickle`` pickles more, such as
    classes defined in a function): an environment that pickles at all pickles everywhere.
    """
    try:
        pickle.dumps(recipe, protocol=pickle.HIGHEST_PROTOCOL)
        return
    except Exception as error:  # pickling raises TypeError, AttributeError, PicklingError...
        failure = error
    cls, scenario, kwargs = recipe
    parts = [(f"the environment class {cls.__qualname__}", cls)]
    parts += [(f"its scenario (the {type(scenario).__qualname__} instance as given)", scenario)]
    parts += [(f"the argument {name}={value!r}", value) for name, value in kwargs.items()]
    culprit = "its scenario or an argument"
    for what, value in parts:
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            culprit = what
            break
    raise TypeError(
        f"cannot pickle this {cls.__name__}: it pickles as the scenario it was built from and its "
        f"arguments, and {culprit} does not pickle ({type(failure).__name__}: {failure}); define the "
        "scenario class at module level, with options and attributes that pickle"
    ) from failure


def check_seed(seed: Any) -> int:
    """``seed`` as an int, checked: the reset RNG takes integers (numpy's too) in [0, 2^31)
    (``ValueError`` otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an int in [0, 2^31), got {seed!r}")
    return int(seed)
