"""Environment: the batched RL interface over a scenario and its physics world.

Everything it returns is a persistent device tensor (or a clone of one with
``clone_outputs=True``); nothing in ``step``, ``reset`` or ``reset_at`` moves data to the host.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import TYPE_CHECKING, Any

import torch
import warp as wp

from swarp.core import params as param_table
from swarp.core.launch import EAGER, Launcher, agents_per_thread, env_choice, per_env_block
from swarp.core.params import ParamRandomization
from swarp.core.rng import ResetStreams, stream_key_torch
from swarp.env import episode
from swarp.env.runtime import CompiledSequence, TorchStreamScope, choose_mode
from swarp.env.selection import EnvList, EnvListArgs, list_pays
from swarp.interop.autograd import warp_step
from swarp.physics.step import Stepper
from swarp.physics.world import World
from swarp.scenarios import rows
from swarp.scenarios.base import OBSERVE_ONLY, OBSERVE_RESET, OBSERVE_STEP, FusedScenario, Scenario, get_scenario
from swarp.sensors.lidar import Lidar, LidarConfig, scan_stream

if TYPE_CHECKING:
    from swarp.env.pool import EnvPool

#: ``SWARP_RESET_AHEAD=auto|on|off``: whether the auto-reset swaps in starts prepared ahead
#: (``FusedScenario.supports_reset_ahead``). ``auto``: CUDA graphs where the reset is not listed
#: (``selection.list_pays``); ``on`` wherever the scenario supports it (the CPU tests use it).
RESET_AHEAD_ENV = "SWARP_RESET_AHEAD"


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
            Warp's CPU graph replayed in C++) when
            possible; ``True`` demands persistent execution (warns once and replays recorded launches
            where no graph is possible); ``False`` never captures (recorded-launch replay).
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

    Attributes:
        obs_dim, act_dim, n_agents, n_envs, device, graph_mode, action_bounds, state: see properties.
        env_offset: As given.
    """

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
    ):
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenario must be a Scenario instance, got {type(scenario).__name__}")
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        _check_seed(seed)
        if isinstance(env_offset, bool) or not isinstance(env_offset, int) or env_offset < 0:
            raise ValueError(f"env_offset must be an int >= 0, got {env_offset!r}")
        if env_offset + n_envs > _MAX_GLOBAL_ENVS:
            raise ValueError(
                f"env_offset + n_envs must be <= 2^31 (global env indices are int32), got "
                f"{env_offset} + {n_envs} = {env_offset + n_envs}"
            )
        if isinstance(lidar_rays, bool) or not isinstance(lidar_rays, int) or lidar_rays < 0:
            raise ValueError(f"lidar_rays must be an int >= 0, got {lidar_rays!r}")
        if not isinstance(per_env_params, bool):
            raise TypeError(f"per_env_params must be a bool, got {per_env_params!r}")
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
        # The differentiable state the scenario reads during a grad-mode step (see ``state``).
        self._grad_state: tuple | None = None  # a TorchState (or TorchStateWithBodies)
        self._async = None  # AsyncStep, created by the first send()
        self._action_bounds: tuple[torch.Tensor, torch.Tensor] | None = None
        self._per_env_params = per_env_params
        self._base_params: torch.Tensor | None = None
        self.randomization = randomize_params
        self.stepper = Stepper(spec.agents, spec.dt, device, spec.world, spec.substeps, spec.integrator, dtype)
        self.world = World(self.stepper, n_envs)
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
        self.fused = scenario.fused_available if fused == "auto" else bool(fused)
        self._allocate_buffers()
        scenario.bind(self)
        self.scenario_obs_dim = scenario.obs_dim
        self.lidar = Lidar(self.world, lidar_config) if lidar_config else None
        capturable = self.fused and scenario.supports_graph_reset()
        self._mode, warning = choose_mode(self.device, use_graph, capturable)
        if warning:
            warnings.warn(warning, stacklevel=2)
        self._setup_reset_ahead()
        # Without starts prepared ahead, the auto-reset's scan forks onto this stream, beside the
        # neighbor refresh and observation.
        lidar_side = self.lidar is not None and self.auto_reset and not self.reset_ahead
        self._lidar_stream = scan_stream(self.device) if lidar_side else None
        self.obs_dim = self.scenario_obs_dim + lidar_rays
        self._allocate_outputs()
        self.info = dict(scenario.info_buffers())
        if self.auto_reset:
            self.info["final_obs"] = self.final_obs
        self.streams = TorchStreamScope(self.device)
        if self.fused:
            self._step_seq = CompiledSequence(self._fused_step, self._mode, self.device, self.streams)
            self._reset_seq = CompiledSequence(self._fused_reset, self._mode, self.device, self.streams)
        self.seed_value = int(seed)
        self.reset(seed=seed)

    # --- buffers ----------------------------------------------------------------------------

    def _allocate_buffers(self) -> None:
        E, dev = self.n_envs, self.device
        self._seed = wp.zeros(1, dtype=wp.int32, device=dev)
        self._episode = wp.zeros(E, dtype=wp.int32, device=dev)
        self._step_count = wp.zeros(E, dtype=wp.int32, device=dev)
        self._terminated = wp.zeros(E, dtype=wp.bool, device=dev)
        self._truncated = wp.zeros(E, dtype=wp.bool, device=dev)
        self._done = wp.zeros(E, dtype=wp.bool, device=dev)
        self._reset_mask = wp.zeros(E, dtype=wp.bool, device=dev)
        # The envs an auto-reset restarts, listed on the device for the reset's launches.
        self._done_list = EnvList(E, dev)
        self._list_resets = list_pays(dev, E, self.n_agents)
        self.seed_tensor = wp.to_torch(self._seed)
        self.episode = wp.to_torch(self._episode)
        self.step_count = wp.to_torch(self._step_count)
        self.terminated = wp.to_torch(self._terminated)
        self.truncated = wp.to_torch(self._truncated)
        self.done = wp.to_torch(self._done)
        self.reset_mask = wp.to_torch(self._reset_mask)
        # What a scenario's reset kernel needs to key its draws (``swarp.core.rng.episode_key``).
        self.reset_streams = self._reset_streams(self._episode)
        self._reward = wp.zeros((E, self.n_agents), dtype=self.stepper.scalar, device=dev)
        self.reward = wp.to_torch(self._reward)

    def _allocate_outputs(self) -> None:
        shape = (self.n_envs, self.n_agents, self.obs_dim)
        self._obs = wp.zeros(shape, dtype=self.stepper.scalar, device=self.device)
        self._final_obs = wp.zeros(shape, dtype=self.stepper.scalar, device=self.device)
        self.obs = wp.to_torch(self._obs)
        self.final_obs = wp.to_torch(self._final_obs)
        # The columns a scenario's masked observation saves to final_obs on an auto-reset
        # (``saves_final_obs``): all, or the scenario's own where a lidar's scan keeps its columns.
        lidar_view = (slice(None), slice(None), slice(0, self.scenario_obs_dim))
        self._final_obs_saved = self._final_obs if self.lidar is None else self._final_obs[lidar_view]
        # Everything the per-env end-of-step bookkeeping touches, as one struct for kernels.
        ep = episode.episode_struct(self.stepper.scalar)()
        ep.max_steps = self.max_steps or 0
        ep.auto_reset = int(self.auto_reset)
        ep.step_count = self._step_count
        ep.episode = self._episode
        ep.terminated = self._terminated
        ep.truncated = self._truncated
        ep.done = self._done
        self.episode_args = ep

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
        """Whether the step runs as a captured graph (a CUDA graph, or Warp's C++-replayed CPU graph)."""
        return self._mode == "graph"

    @property
    def execution_mode(self) -> str:
        """``"graph"``, ``"replay"`` (recorded launches) or ``"eager"``; the torch path reports how
        its physics launches run."""
        return self._mode

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
        return wp.to_torch(self.world.model.params)

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
        """
        self._check_no_pending_send("set_agent_params")
        param_table.write_params(self.world.model, values, env_mask, **columns)
        self._mark_all_ahead()  # a lidar's prepared scans saw the old radii

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
        base = self._configured_params()
        table = param_table.sample_agent_params(base, ranges, self.rng_keys(), relative=relative, per_agent=per_agent)
        self.set_agent_params(table, env_mask=env_mask)

    def _configured_params(self) -> torch.Tensor:
        """[1, A, P] the parameters the ``AgentConfig``s give (the shared table's values)."""
        if self._base_params is None:
            agents = self.stepper.model.agents
            rows = [[float(getattr(cfg, name)) for name in param_table.PARAM_NAMES] for cfg in agents]
            self._base_params = torch.tensor([rows], dtype=self.dtype, device=self.torch_device)
        return self._base_params

    def _setup_reset_ahead(self) -> None:
        """Decide whether the auto-reset swaps in starts prepared ahead (``reset_ahead``) and, if so,
        allocate their marks and the scenario's buffers.

        Where it pays: the auto-reset's reset and masked observation are a chain of latency-bound
        launches over a few envs at the end of every step; prepared ahead, they run beside the
        next step's physics on a side stream and the step ends with one short swap. A masked
        launch over all envs is not free, so not where the reset walks a list of its envs
        (``selection.list_pays``), nor without a graph (each launch is host time there)."""
        sc = self.scenario
        choice = env_choice(RESET_AHEAD_ENV, ("auto", "on", "off"))
        possible = self.fused and self.auto_reset and sc.supports_reset_ahead()
        if choice == "auto":
            cuda = self.device.startswith("cuda")
            possible = possible and cuda and self._mode == "graph" and not self._list_resets
        #: Whether the auto-reset swaps in starts prepared ahead (``FusedScenario.supports_reset_ahead``).
        self.reset_ahead = possible and choice != "off"
        self._ahead_stream = None
        self._lidar_ahead = None
        self._ahead_forked = None
        if not self.reset_ahead:
            return
        E, dev = self.n_envs, self.device
        self._ahead_mask = wp.zeros(E, dtype=wp.bool, device=dev)
        self._ahead_episode = wp.zeros(E, dtype=wp.int32, device=dev)
        marks = episode.AheadMarks()
        marks.mask, marks.episode_ahead, marks.episode = self._ahead_mask, self._ahead_episode, self._episode
        self._ahead_marks = marks
        self.ahead_streams = self._reset_streams(self._ahead_episode)
        if self.device.startswith("cuda"):
            self._ahead_stream = wp.Stream(self.device)
        sc.bind_reset_ahead(marks)
        # A lidar scans the prepared starts too, unless their radii are re-drawn at the reset.
        self._lidar_ahead = None
        if self.lidar is not None and self.randomization is None:
            shape = (E, self.n_agents, self.lidar.n_rays)
            self._lidar_ahead = wp.zeros(shape, dtype=self.stepper.scalar, device=dev)

    def _reset_streams(self, episode_counters: wp.array) -> ResetStreams:
        """The ``ResetStreams`` of this env's seed and ``env_offset`` over ``episode_counters`` [E]
        int32 (the episodes a reset kernel draws: the current ones, or those prepared ahead)."""
        streams = ResetStreams()
        streams.seed = self._seed
        streams.episode = episode_counters
        streams.env_offset = self.env_offset
        return streams

    def _beside(self, side: wp.Stream | None):
        """Context for launches forked onto ``side`` after the work queued so far on the current
        stream (CUDA, live or under capture; the caller joins it back). ``None``: inline."""
        if side is None:
            return contextlib.nullcontext()
        side.wait_stream(wp.get_stream(self.device))
        return wp.ScopedStream(side, sync_enter=False, sync_exit=False)

    def _join(self, side: wp.Stream | None) -> None:
        """Make the current stream wait for the work forked onto ``side`` (``_beside``; ``None``: nothing)."""
        if side is not None:
            wp.get_stream(self.device).wait_stream(side)

    def _launch_prepare_ahead(self, launcher: Launcher) -> None:
        """Prepare the next starts of the envs marked by the last reset or swap: on the side stream
        where there is one (CUDA, live or under capture), joined by ``_launch_restart``."""
        side = self._ahead_stream if launcher is EAGER else None
        with self._beside(side):
            self._launch_prepare(launcher)
        self._ahead_forked = side

    def _launch_prepare(self, launcher: Launcher) -> None:
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        sc.launch_prepare_ahead(launcher, self._ahead_mask, self.ahead_streams)
        if self._lidar_ahead is not None:
            self.lidar.launch(launcher, self._lidar_ahead, 0, self._ahead_mask, poses=sc.prepared_poses())

    def _join_prepared(self) -> None:
        """Make the current stream wait for the preparation forked by ``_launch_prepare_ahead``."""
        side, self._ahead_forked = self._ahead_forked, None
        self._join(side)

    def _launch_swap_ahead(self, launcher: Launcher) -> None:
        """The auto-reset from prepared starts (after joining their preparation): the scenario's
        swap (unless its step did it, ``swaps_in_step``) and, beside it on the side stream, the
        lidar columns' (or, when the lidar could not scan ahead, the scan after the swap)."""
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        in_step = sc.swaps_in_step()
        # Where the step's kernel swapped the scenario's rows, the lidar's swap has nothing to run
        # beside: it goes on the current stream.
        side = None if in_step else self._ahead_forked
        self._join_prepared()
        if self._lidar_ahead is None:
            if not in_step:
                sc.launch_swap_ahead(launcher, self._done, self._ahead_marks)
            self._launch_lidar(launcher, self._done, self._final_obs if sc.saves_final_obs else None)
            return
        rays, first = self.lidar.n_rays, self.scenario_obs_dim
        columns = (
            rows.row_vectors(self._lidar_ahead, rays),
            rows.row_vectors(self._obs, rays, first),
            rows.row_vectors(self._final_obs, rays, first),
        )
        swap = episode.swap_rows_kernel(self.stepper.scalar, rays)
        with self._beside(side):
            launcher.launch(swap, dim=(self.n_envs, self.n_agents), inputs=[self._done, *columns], device=self.device)
        if not in_step:
            sc.launch_swap_ahead(launcher, self._done, self._ahead_marks)
        self._join(side)

    def _mark_all_ahead(self) -> None:
        """Prepare every env's next start again at the next step (after anything they depend on
        changed outside the step: a restored snapshot, new agent parameters)."""
        if self.reset_ahead:
            with self.streams.scope():
                wp.to_torch(self._ahead_mask).fill_(True)
                wp.to_torch(self._ahead_episode).copy_(self.episode + 1)

    def rng_keys(self) -> torch.Tensor:
        """[E] int64 reset-RNG keys of the current episodes (torch twin of the kernels' ``episode_key``),
        keyed by global env index ``env_offset + i``."""
        envs = torch.arange(self.env_offset, self.env_offset + self.n_envs, device=self.torch_device)
        return stream_key_torch(self.seed_tensor.long(), envs, self.episode.long())

    # --- the launch sequences ---------------------------------------------------------------

    def _fused_step(self, launcher: Launcher) -> None:
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        if self.reset_ahead:
            self._launch_prepare_ahead(launcher)
        self.world.simulate(launcher, rebuild_neighbors=not sc.builds_neighbors)
        # The lidar columns go first, so rows are whole when finished envs save them to final_obs.
        self._launch_lidar(launcher)
        if self.reset_ahead and sc.swaps_in_step():
            self._join_prepared()  # the kernel that ends the step swaps prepared starts in
        sc.launch_observe(launcher, mode=OBSERVE_STEP)
        if not sc.ends_steps:
            self._launch_advance(launcher)
        if self.auto_reset:
            # Finished envs keep their last rows in final_obs: saved here, or by the scenario's
            # masked observation (OBSERVE_ONLY) and the lidar's masked scan, each just before it
            # overwrites its columns.
            if not sc.saves_final_obs:
                self._launch_save_final_obs(launcher)
            # Kernels with a listed twin (``list_envs``) walk a list of these envs instead of
            # launching over all envs to skip most (see ``swarp.env.selection``).
            if self._list_resets:
                self._done_list.launch_compact(launcher, self._done)
            try:
                self._launch_restart(launcher)
            finally:
                self._done_list.mask = None  # the next step rewrites the mask

    def _launch_restart(self, launcher: Launcher) -> None:
        """The auto-reset's launches after the step: new episodes for the envs in ``_done`` (their
        parameters, state, neighbor lists, observation rows and lidar columns), swapped in from
        starts prepared ahead where ``reset_ahead``."""
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        self._launch_randomize(launcher, self._done)
        if self.reset_ahead:
            self._launch_swap_ahead(launcher)
            return
        sc.launch_reset(launcher, self._done)
        # The new episodes' scan needs only their poses, and keeps the lidar columns of their final
        # observation itself where the scenario's masked observation saves the rest (its own
        # columns, ``_final_obs_saved``): so with a scan stream (CUDA, live or under graph capture;
        # recorded launches replay on one stream) it runs beside the neighbor refresh and the
        # observation, all three latency-bound launches over a few envs.
        keep = self._final_obs if sc.saves_final_obs else None
        side = self._lidar_stream if launcher is EAGER else None
        with self._beside(side):
            self._launch_lidar(launcher, self._done, keep)
        self._refresh_neighbors(launcher, self._done)
        sc.launch_observe(launcher, env_mask=self._done, mode=OBSERVE_ONLY)
        self._join(side)

    def list_envs(self, env_mask: wp.array | None, threads_per_env: int) -> tuple[EnvListArgs, int] | None:
        """How a kernel with a listed twin (``swarp.env.selection``) runs over the envs of
        ``env_mask`` [E] bool: ``(EnvListArgs, rows)`` for the twin, launched ``dim=(rows,
        threads_per_env)``, during an auto-reset where listing pays (``selection.list_pays``: large
        CUDA batches, the CPU);
        ``None``: launch the masked kernel."""
        return self._done_list.select(env_mask, threads_per_env)

    def _setup_randomization(self, randomization: ParamRandomization) -> None:
        """Validate every value the ranges can produce (once, here) and stage the kernel's arrays."""
        base = self._configured_params()
        for table in randomization.extreme_tables(base):
            param_table.check_param_table(self.world.model, table, name="randomize_params")
        ranges = list(randomization.ranges.items())
        dev, scalar = self.device, self.stepper.scalar
        self._random_columns = wp.array([param_table.param_column(n) for n, _ in ranges], dtype=wp.int32, device=dev)
        self._random_low = wp.array([float(b[0]) for _, b in ranges], dtype=scalar, device=dev)
        self._random_high = wp.array([float(b[1]) for _, b in ranges], dtype=scalar, device=dev)
        self._random_base = wp.from_torch(base.contiguous(), dtype=scalar)

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
                self.reset_streams,
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
            self.lidar.launch(launcher, self._obs, self.scenario_obs_dim, env_mask, final_out)

    def _launch_begin_episodes(self, launcher: Launcher) -> None:
        """Advance the episode counter and zero the step counter of every env in ``reset_mask``."""
        launcher.launch(
            episode.begin_episodes,
            dim=self.n_envs,
            inputs=[self._reset_mask],
            outputs=[self._step_count, self._episode],
            device=self.device,
            block_dim=per_env_block(self.device),
        )

    def _fused_reset(self, launcher: Launcher) -> None:
        sc: FusedScenario = self.scenario  # type: ignore[assignment]
        self._launch_begin_episodes(launcher)
        self._launch_randomize(launcher, self._reset_mask)
        sc.launch_reset(launcher, self._reset_mask)
        self._refresh_neighbors(launcher, self._reset_mask)
        self._launch_lidar(launcher, self._reset_mask)
        sc.launch_observe(launcher, env_mask=self._reset_mask, mode=OBSERVE_RESET)
        if self.reset_ahead:
            launcher.launch(
                episode.mark_started, dim=self.n_envs, inputs=[self._reset_mask, self._ahead_marks], device=self.device
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
        per_thread, threads = agents_per_thread(self.device, self.n_agents)
        launcher.launch(
            episode.save_final_obs_kernel(self.stepper.scalar),
            dim=(self.n_envs, threads),
            inputs=[self._done, self._obs, per_thread],
            outputs=[self._final_obs],
            device=self.device,
        )

    def _launch_advance(self, launcher: Launcher) -> None:
        """Count the step, flag time limits, and with auto-reset start the next episode of finished
        envs (one thread per env)."""
        launcher.launch(
            episode.funcs(self.stepper.scalar).advance_episodes,
            dim=self.n_envs,
            inputs=[self.episode_args],
            device=self.device,
            block_dim=per_env_block(self.device),
        )

    def _torch_step(self) -> None:
        sc = self.scenario
        self.world.run_step()
        sc.post_step()
        self.obs.copy_(self._observations())
        self.reward.copy_(sc.rewards())
        self.terminated.copy_(sc.done())
        for key, value in sc.info().items():
            self.info[key].copy_(value)
        with self.streams.scope():
            self._launch_advance(EAGER)
            self._launch_save_final_obs(EAGER)
        if self.auto_reset:
            self._torch_reset_envs(self.done, self._done)

    def _torch_reset(self) -> None:
        with self.streams.scope():
            self._launch_begin_episodes(EAGER)
        self._torch_reset_envs(self.reset_mask, self._reset_mask)
        # An explicit reset refreshes the info of the reset envs (an auto-reset keeps the step's).
        for key, value in self.scenario.info().items():
            mask = self.reset_mask.view(-1, *([1] * (value.dim() - 1)))
            self.info[key].copy_(torch.where(mask, value, self.info[key]))

    def _torch_reset_envs(self, mask: torch.Tensor, mask_wp: wp.array) -> None:
        r = self.randomization
        if r is not None:
            base = self._configured_params()
            table = param_table.sample_agent_params(base, r.ranges, self.rng_keys(), r.relative, r.per_agent)
            self.agent_params.copy_(torch.where(mask.view(-1, 1, 1), table, self.agent_params))
        self.scenario.reset_world(mask)
        with self.streams.scope():
            self.world.build_neighbors(mask_wp)
        self.obs.copy_(torch.where(mask.view(-1, 1, 1), self._observations(), self.obs))

    def _observations(self) -> torch.Tensor:
        """Torch reference observation [E, A, obs_dim] of ``state``: the scenario's, then the lidar's."""
        obs = self.scenario.observations()
        if self.lidar is None:
            return obs
        return torch.cat([obs, self.lidar.reference(self.state.pos, self.state.theta).distance], dim=-1)

    def _grad_step(self, actions: torch.Tensor):
        """The differentiable step: physics through ``warp_step``, then the scenario's torch
        reference on the new state, so ``loss.backward()`` reaches ``actions`` (the fused kernels
        are no-grad only).

        The physics starts from a copy of the persistent state, a constant: gradients reach this
        step's actions, not earlier ones through the state (``swarp.rollout`` does backpropagation
        through time). The new state is written back, detached, into the persistent buffers, and
        every persistent output buffer is updated as on the no-grad path, so the env stays
        consistent; the returned ``obs`` and ``reward`` are fresh tensors with grad history.

        With auto-reset, an env that finished this step is reset as usual: its ``obs`` rows start
        the new episode (constants, zero gradient), its ``reward`` is the finishing transition's
        (with gradient), and ``info["final_obs"]`` is a fresh tensor with grad history holding
        every env's observation before the resets (the last observation of finished envs).
        """
        sc = self.scenario
        current = self.world.state.torch
        state_in = type(current)(*(t.clone() for t in current))
        state = warp_step(self.stepper, state_in, actions, invalid_flag=self.world.invalid_action_flag)
        with torch.no_grad():
            for dst, src in zip(self.world.state.torch, state, strict=True):
                dst.copy_(src)
        with self.streams.scope():
            self.world.build_neighbors()
        self._grad_state = state
        try:
            sc.post_step()
            obs = self._observations()
            reward = sc.rewards()
            terminated = sc.done()
            step_info = sc.info()
        finally:
            self._grad_state = None
        for name, tensor in sc.state_tensors().items():
            if tensor.requires_grad:
                raise RuntimeError(
                    f"scenario {sc.name!r} stored a tensor with autograd history in its persistent memory "
                    f"{name!r} during a grad-mode step; store a detached value (tensor.copy_(value.detach()))"
                )
        with torch.no_grad():
            self.obs.copy_(obs)
            self.reward.copy_(reward)
            self.terminated.copy_(terminated)
            for key, value in step_info.items():
                self.info[key].copy_(value)
        with self.streams.scope():
            self._launch_advance(EAGER)
            self._launch_save_final_obs(EAGER)
        info = dict(self.info)
        if self.auto_reset:
            self._torch_reset_envs(self.done, self._done)
            info["final_obs"] = obs
            obs = torch.where(self.done.view(-1, 1, 1), self.obs, obs)
        if self.clone_outputs:
            info = {k: v if k == "final_obs" else v.clone() for k, v in info.items()}
            return obs, reward, self.terminated.clone(), self.truncated.clone(), info
        return obs, reward, self.terminated, self.truncated, info

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
        tensors whose autograd history reaches ``actions``; see ``_grad_step``.
        """
        self._check_no_pending_send("step")
        self.stepper.check_actions(actions, self.n_envs)
        if actions.requires_grad and torch.is_grad_enabled():
            return self._grad_step(actions)
        self.world.actions.copy_(actions)
        self._run_step()
        return self._outputs(self.obs, self.reward, self.terminated, self.truncated)

    def _run_step(self) -> None:
        """One no-grad step from the action buffer, writing the output buffers."""
        if self.fused:
            self._step_seq()
        else:
            self._torch_step()

    def send(self, actions: torch.Tensor) -> None:
        """Start a step with ``actions`` [E, A, act_dim] and return at once; ``recv()`` returns it.

        Physics then overlaps whatever the caller does next (policy forward, update): on CUDA the
        step runs on a side stream ordered by events, on the CPU in a worker thread. Same bits as
        ``step``. Until ``recv`` the output buffers (``obs``, ``reward``, ``info``...) are being
        rewritten: copy what you keep before sending. See ``swarp.env.asynchronous``.

        Raises:
            RuntimeError: a step is already pending (``send`` twice without ``recv``).
        """
        if self._async is None:
            from swarp.env.asynchronous import AsyncStep

            self._async = AsyncStep(self)
        self._async.send(actions)

    def recv(self):
        """Finish the step started by ``send``; returns what ``step`` would have returned.

        Raises:
            RuntimeError: no step is pending.
        """
        if self._async is None:
            raise RuntimeError("recv() was called without a pending send()")
        self._async.wait()
        return self._outputs(self.obs, self.reward, self.terminated, self.truncated)

    def _check_no_pending_send(self, what: str) -> None:
        if self._async is not None and self._async.pending:
            raise RuntimeError(f"{what}() was called while a send() is pending: call recv() first")

    def reset(self, seed: int | None = None):
        """Reset every env; with ``seed``, restart the reset RNG and episode counters from it.

        Returns:
            ``(obs [E, A, obs_dim], info)``.
        """
        self._check_no_pending_send("reset")
        if seed is not None:
            _check_seed(seed)
            self.seed_value = int(seed)
            self.seed_tensor.fill_(int(seed))
            self.episode.fill_(-1)  # begin_episodes advances it to 0
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
        if self.fused:
            self._reset_seq()
        else:
            self._torch_reset()

    def _outputs(self, *tensors):
        if self.clone_outputs:
            return (*(t.clone() for t in tensors), {k: v.clone() for k, v in self.info.items()})
        return (*tensors, self.info)

    def invalid_actions(self) -> torch.Tensor:
        """0-d bool device tensor: was a non-finite action seen since construction (or last clear)?"""
        return self.world.invalid_actions()

    def neighbor_overflow(self) -> torch.Tensor:
        """0-d bool device tensor: has any neighbor list been truncated since the last clear?"""
        return self.world.neighbor_overflow()

    def invalidate(self) -> None:
        """Drop captured graphs and recorded launches (after changing scenario parameters in place)."""
        self.world.invalidate()
        if self.fused:
            self._step_seq.invalidate()
            self._reset_seq.invalidate()

    # --- snapshots ----------------------------------------------------------------------------

    def _snapshot_tensors(self) -> dict[str, torch.Tensor]:
        tensors = {f"state.{name}": getattr(self.state, name) for name in self.world.state.fields}
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
            }
        )
        tensors.update({f"obstacles.{k}": v for k, v in self.world.model.obstacle_tensors().items()})
        tensors.update({f"scenario.{k}": v for k, v in self.scenario.state_tensors().items()})
        tensors.update({f"info.{k}": v for k, v in self.info.items() if k != "final_obs"})
        return tensors

    def get_state(self) -> dict[str, torch.Tensor]:
        """An exact snapshot of the whole batch (device tensors, cloned)."""
        return {k: v.clone() for k, v in self._snapshot_tensors().items()}

    def set_state(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Restore a ``get_state`` snapshot in place (buffers keep their addresses: graphs stay valid)."""
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
        for key, dst in tensors.items():
            dst.copy_(snapshot[key])
        self.seed_value = None
        with self.streams.scope():
            self.world.build_neighbors()
        self._mark_all_ahead()  # prepared starts follow the episode counters

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

        if mode not in ("rgb_array", "human"):
            raise ValueError(f"render mode must be 'rgb_array' or 'human', got {mode!r}")
        frame = swarp_render.render_frame(self, env_index, **overlays)
        if mode == "human":
            from swarp.render.viewer import show_frame

            show_frame(frame, title=f"swarp {self.scenario.name}: env {env_index}")
        return frame


#: Global env indices enter the reset RNG as int32.
_MAX_GLOBAL_ENVS = 2**31


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an int in [0, 2^31), got {seed!r}")


_ENV_KWARGS = [p for p in inspect.signature(Environment.__init__).parameters if p not in ("self", "scenario")]


def make(
    name: str,
    n_envs: int = 1,
    device: str | torch.device | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    **kwargs: Any,
) -> Environment | EnvPool:
    """Build an ``Environment`` for a registered scenario.

    Keywords that ``Environment`` takes (``auto_reset``, ``max_steps``, ``fused``, ``use_graph``,
    ``clone_outputs``, ``dtype``, ``env_offset``) configure the environment; every other keyword is
    a scenario option. An unknown keyword is an error that lists the valid ones.

    With ``batch_size`` (an int that divides ``n_envs``), the result is an ``EnvPool``
    (``swarp.env.pool``): ``n_envs // batch_size`` groups of ``batch_size`` envs stepped
    asynchronously with EnvPool-style ``send`` / ``recv`` (partial batches), together drawing
    exactly what one ``Environment`` of ``n_envs`` envs draws.
    """
    cls = get_scenario(name)
    env_kwargs = {k: v for k, v in kwargs.items() if k in _ENV_KWARGS}
    scenario_kwargs = {k: v for k, v in kwargs.items() if k not in _ENV_KWARGS}
    unknown = sorted(set(scenario_kwargs) - set(cls.option_names()))
    if unknown:
        raise TypeError(
            f"unknown keyword(s) {unknown} for swarp.make({name!r}); environment keywords: "
            f"{sorted([*_ENV_KWARGS, 'batch_size'])}; scenario options: {cls.option_names()}"
        )
    if batch_size is None:
        return Environment(cls(**scenario_kwargs), n_envs=n_envs, device=device, seed=seed, **env_kwargs)
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or isinstance(n_envs, bool)
        or not isinstance(n_envs, int)
        or not 1 <= batch_size <= n_envs
        or n_envs % batch_size
    ):
        raise ValueError(f"batch_size must be an int that divides n_envs ({n_envs!r}), got {batch_size!r}")
    if "env_offset" in env_kwargs:
        raise ValueError("a pool sets each group's env_offset itself: pass batch_size or env_offset, not both")
    from swarp.env.pool import EnvPool

    return EnvPool(
        [
            Environment(
                cls(**scenario_kwargs),
                n_envs=batch_size,
                device=device,
                seed=seed,
                env_offset=group * batch_size,
                **env_kwargs,
            )
            for group in range(n_envs // batch_size)
        ]
    )
