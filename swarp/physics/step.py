"""The step pipeline: neighbors -> substeps of (contact forces -> integrate -> bounds).

``Stepper`` knows the one sequence of launches and the two ways of running it:

* no-grad (``simulate``): persistent buffers, integration in place, zero steady-state
  allocations. This is what every RL rollout runs, eagerly, as a recorded program or as a graph.
  ``simulate_into`` is the same from one state into another (the no-grad ``warp_step``).
* functional (``simulate_functional``): every array written during the step is freshly
  allocated (or a ``StepScratch`` the caller owns exclusively), so the launches can be recorded
  on a ``wp.Tape`` without overwriting anything the adjoint pass will read.

The Stepper is batch-size agnostic; ``World`` (physics/world.py) binds it to a batch. It refuses
a substep ``dt / substeps`` beyond the integration limits of ``swarp.core.stability`` (the world's
stiffest contact on its lightest agent or body, second-order agents' drag), with an error that
names the limit and the fix; within them the physics stays finite under any actions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import warp as wp

from swarp.core import stability
from swarp.core.config import AgentConfig, DynamicsModel, Integrator, WorldConfig, coerce_enum
from swarp.core.precision import resolve_device, resolve_dtype, vec2_type
from swarp.core.types import Model, State
from swarp.physics import bodies, contacts, drone, dynamics, substep
from swarp.physics.neighbors import NeighborBuffers, build_neighbors
from swarp.runtime.actions import Decode, decode_args, decode_kernel
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.plan import (
    Capabilities,
    ExecutionPlan,
    choose_neighbor_method,
    choose_plan,
    fused_substep_problem,
)


@dataclass
class StepScratch:
    """Every array one functional step writes, allocated together (``Stepper.allocate_scratch``).

    A taped step must write only arrays no other launch on a live tape reads or writes: fresh ones
    (the default), or a ``StepScratch`` owned by exactly one live step (``GradRing`` hands them out).

    Attributes:
        neighbors: Neighbor lists built from the step's input positions (never taped).
        forces: Per substep, the [E, A] vec2 contact forces [N] (a ``bodies.BodyForces`` in a world
            with bodies).
        states: Per substep, the ``State`` after it; the last one is the step's output.
    """

    neighbors: NeighborBuffers
    forces: tuple[wp.array, ...]
    states: tuple[State, ...]

    def zero_grads(self, output: bool = True) -> None:
        """Zero the adjoint of every float array (before seeding and replaying a tape over them);
        with ``output=False`` all but the output state's (``states[-1]``, seeded by the caller)."""
        for forces in self.forces:
            for array in forces if isinstance(forces, bodies.BodyForces) else (forces,):
                array.grad.zero_()
        for state in self.states if output else self.states[:-1]:
            for array in state.arrays():
                array.grad.zero_()


class Stepper:
    """One simulation step for a fleet of agents, for any number of parallel envs.

    Args:
        agents: One ``AgentConfig`` per agent (models may be mixed).
        dt: Step length [s], > 0. ``dt / substeps`` must be within ``swarp.core.stability``'s limits
            (at the default contacts, 0.1414 s for 1 kg velocity-level agents).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (default: CUDA when available).
        world: ``WorldConfig`` (default: unbounded, collisions on).
        substeps: Substeps per step (>= 1); each substep is ``dt / substeps`` long.
        integrator: ``Integrator.EULER`` (semi-implicit) or ``Integrator.RK4`` (or their names).
        dtype: ``"float32"`` (default) or ``"float64"`` (for strict gradient checks).
        plan: The ``ExecutionPlan`` whose thread and list layout the launches follow
            (``one_thread_per_env``, ``register_lists``, ``launch`` for ``World``'s replay); default:
            ``choose_plan`` for the device and the list width. An ``Environment`` passes its own.

    Raises:
        ValueError: ``dt / substeps`` exceeds a stability limit (the message names it, the values
            and the substeps or dt that fix it).
    """

    def __init__(
        self,
        agents: Sequence[AgentConfig],
        dt: float = 0.1,
        device: str | torch.device | None = None,
        world: WorldConfig | None = None,
        substeps: int = 1,
        integrator: Integrator | str = Integrator.EULER,
        dtype: str | torch.dtype = "float32",
        plan: ExecutionPlan | None = None,
    ):
        agents = list(agents)
        if not agents:
            raise ValueError("agents must hold at least one AgentConfig")
        for i, cfg in enumerate(agents):
            if not isinstance(cfg, AgentConfig):
                raise TypeError(f"agents[{i}] must be an AgentConfig, got {type(cfg).__name__}")
        world = world if world is not None else WorldConfig()
        if not isinstance(world, WorldConfig):
            raise TypeError(f"world must be a WorldConfig, got {type(world).__name__}")
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0 or dt == float("inf"):
            raise ValueError(f"dt must be a finite number > 0 [s], got {dt!r}")
        if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
            raise ValueError(f"substeps must be an int >= 1, got {substeps!r}")
        self.integrator = coerce_enum(Integrator, integrator, "integrator")
        self.scalar, self.torch_dtype = resolve_dtype(dtype)
        self.device = resolve_device(device)
        self.torch_device = torch.device(wp.device_to_torch(self.device))
        self.dt = float(dt)
        self.substeps = substeps
        self.model = Model(
            agents, world, self.scalar, self.device, dt=self.dt, substeps=substeps, integrator=self.integrator
        )
        self._fleet_models = (
            frozenset(cfg.model for cfg in self.model.agents if cfg.model != DynamicsModel.DRONE),
            frozenset(cfg.ctrl_mode for cfg in self.model.agents),
        )
        self.world = world
        if plan is not None and not isinstance(plan, ExecutionPlan):
            raise TypeError(f"plan must be an ExecutionPlan, got {type(plan).__name__}")
        if plan is None:
            can = Capabilities(fuses_substep=substep.can_fuse(agents, world))
            plan = choose_plan(self.device, n_agents=len(agents), max_neighbors=world.max_neighbors, can=can)
        else:
            why = fused_substep_problem(plan, self.device, len(agents), substep.can_fuse(agents, world))
            if why:
                raise ValueError(f"plan.fused_substep=True is not possible here: {why}")
        self.plan = plan
        self.neighbor_method = choose_neighbor_method(world, len(agents), self.device)
        # Movable bodies are a structural flag: without them no body launch or argument exists.
        self.bodies = None
        if world.bodies:
            self.bodies = bodies.BodyModel(world, tuple(agents), self.scalar, self.device, self.dt / substeps)
        # The substep must integrate the world's stiffest term stably (swarp/core/stability.py).
        terms = stability.agent_terms(agents, world, self.integrator) + stability.body_terms(world)
        stability.check_substep(terms, world, self.dt, substeps)
        #: [1] int32 health flag of steps given no per-env flags (``swarp.runtime.health``): raised
        #: when any env's state went non-finite in such a step.
        self.non_finite_any = wp.zeros(1, dtype=wp.int32, device=self.device)
        #: The fused substep's ``DecodeArgs`` where it decodes nothing.
        self.no_decode = decode_args(self.scalar)()
        # (what they were filled from, ContactArgs, IntegrateArgs): the substep's model structs
        # (``model_args``).
        self._model_args: tuple | None = None
        #: The alive mask [E, A] bool of the one batch this stepper runs (``World``'s, set by
        #: ``set_alive``), or ``None``: no kernel reads one (``swarp.runtime.alive``).
        self.alive: wp.array | None = None

    def set_alive(self, alive: wp.array) -> None:
        """Run the masked variants of the substep's kernels over ``alive`` [E, A] bool from now on
        (dead agents frozen, pushing no one): then every batch this stepper runs has its shape.

        Raises:
            ValueError: The fleet has drones or the world has bodies (their kernels have no mask).
        """
        if self.model.has_drones or self.bodies is not None:
            raise ValueError("an alive mask (agents that leave or arrive) needs planar agents and no bodies")
        self.alive = alive

    @property
    def _fleet_variant(self) -> tuple[frozenset, frozenset, frozenset]:
        """(planar models, control modes, integrators) in use: the integration kernel compiles
        only their branches (fewer registers, higher occupancy). The fleet's sets are made once."""
        return (*self._fleet_models, frozenset((self.integrator,)))

    @property
    def n_bodies(self) -> int:
        """Number of movable rigid bodies B per env (0 without ``WorldConfig.bodies``)."""
        return 0 if self.bodies is None else self.bodies.n_bodies

    @property
    def n_agents(self) -> int:
        """Number of agents A."""
        return self.model.n_agents

    @property
    def act_dim(self) -> int:
        """Action width: the largest action arity over the fleet."""
        return self.model.act_dim

    # --- allocation -----------------------------------------------------------------------

    def allocate_state(
        self, n_envs: int, requires_grad: bool = False, drones: bool = True, name: str | None = None
    ) -> State:
        """A zeroed ``State`` for ``n_envs`` envs on this stepper's device and precision.

        ``drones=False`` leaves out the 6-DOF drone fields: the step's scratch does so for fleets
        without drones, which never integrate them (less to allocate and tape per step). ``name``:
        the arrays' names for ``swarp.core.env_arrays`` (``State``).
        """
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        return State(
            n_envs,
            self.n_agents,
            self.scalar,
            self.device,
            requires_grad=requires_grad,
            drones=drones,
            n_bodies=self.n_bodies,
            name=name,
        )

    def allocate_neighbors(self, n_envs: int, name: str | None = None) -> NeighborBuffers:
        """Neighbor-list buffers for ``n_envs`` envs (``name``: as ``NeighborBuffers``'), honouring
        the alive mask where the stepper has one of that batch (``set_alive``)."""
        lists = NeighborBuffers(
            n_envs,
            self.n_agents,
            self.world.max_neighbors,
            self.scalar,
            self.device,
            grid=self.neighbor_method == "grid",
            name=name,
        )
        if self.alive is not None and self.alive.shape[0] == n_envs:
            lists.alive = self.alive
        return lists

    def allocate_forces(self, n_envs: int, requires_grad: bool = False) -> wp.array | bodies.BodyForces:
        """Contact-force scratch [E, A] vec2 [N]; with bodies, a ``bodies.BodyForces``."""
        if self.bodies is not None:
            return bodies.allocate_forces(n_envs, self.n_agents, self.n_bodies, self.scalar, self.device, requires_grad)
        return wp.zeros(
            (n_envs, self.n_agents), dtype=vec2_type(self.scalar), device=self.device, requires_grad=requires_grad
        )

    def allocate_scratch(self, n_envs: int, requires_grad: bool = True) -> StepScratch:
        """Fresh arrays for everything one functional step of ``n_envs`` envs writes."""
        return StepScratch(
            neighbors=self.allocate_neighbors(n_envs),
            forces=tuple(self.allocate_forces(n_envs, requires_grad) for _ in range(self.substeps)),
            states=tuple(
                self.allocate_state(n_envs, requires_grad, drones=self.model.has_drones) for _ in range(self.substeps)
            ),
        )

    # --- validation -----------------------------------------------------------------------

    def check_actions(self, actions: torch.Tensor, n_envs: int, name: str = "actions") -> None:
        """Raise a clear error unless ``actions`` is a [n_envs, A, act_dim] tensor of the sim dtype/device."""
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(actions).__name__}")
        expected = (n_envs, self.n_agents, self.act_dim)
        if tuple(actions.shape) != expected:
            raise ValueError(
                f"{name} must have shape [n_envs, n_agents, act_dim] = {list(expected)}, got {list(actions.shape)}"
            )
        if actions.dtype != self.torch_dtype:
            raise TypeError(f"{name} must have dtype {self.torch_dtype}, got {actions.dtype}")
        if actions.device != self.torch_device:
            raise ValueError(f"{name} must be on device {self.torch_device}, got {actions.device}")

    # --- launches -------------------------------------------------------------------------

    def model_args(self) -> tuple:
        """The substep's model inputs as ``(contacts.contact_args(scalar), dynamics.integrate_args(scalar))``
        instances: parameters, obstacles, contact constants, bounds, substep and launch layout.

        Filled once and reused by every substep (no per-step host work); filled anew, as new
        instances, only when what they are filled from has changed: the model's arrays replaced
        (per-env parameters, obstacle slots; their callers already invalidate recorded launches and
        graphs, which hold the arrays they were made with), or ``dt``, ``substeps``,
        ``integrator``, ``world`` or ``plan`` reassigned. The state arrays, which the taped path
        allocates afresh every step, are never in them.
        """
        m = self.model
        # What the structs are filled from: arrays and configs by identity, numbers by value.
        key = (m.params, m.obstacles, m.kinds, m.ctrl_modes, m.world, self.world, self.plan)
        key += (self.dt, self.substeps, self.integrator, self.alive)
        cached = self._model_args
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        s = self.scalar
        vec2 = vec2_type(s)
        lower, upper = (vec2(*corner) for corner in m.bounds_vectors())
        has_bounds = self.world.bounds is not None
        per_thread, _ = self.plan.split(self.n_agents)
        ob = m.obstacles
        masked = self.alive is not None
        c = contacts.contact_args(s, masked)()
        c.params = m.params
        c.per_env_params = int(m.params.shape[0] > 1)
        c.obstacle_shape, c.obstacle_center, c.obstacle_angle, c.obstacle_size = ob.shape, ob.center, ob.angle, ob.size
        c.per_env_obstacles = int(ob.per_env)
        c.stiffness = s(self.world.collision_k)
        c.damping = s(self.world.collision_damping)
        c.agent_collisions = int(self.world.collisions)
        c.soft_walls = int(has_bounds and self.world.bounds_mode == "soft")
        c.lower, c.upper = lower, upper
        c.agents_per_thread = per_thread
        i = dynamics.integrate_args(s, masked)()
        if masked:
            c.alive = i.alive = self.alive
        i.params = m.params
        i.per_env_params = c.per_env_params
        i.kinds, i.ctrl_modes = m.kinds, m.ctrl_modes
        i.h = s(self.dt / self.substeps)
        i.integrator = int(self.integrator)
        i.agents_per_thread = per_thread
        i.clamp_bounds = int(has_bounds and self.world.bounds_mode == "clamp")
        i.lower, i.upper = lower, upper
        i.gravity = s(self.world.gravity)
        self._model_args = (key, c, i)
        return c, i

    def build_neighbors(
        self, pos: wp.array, out: NeighborBuffers, env_mask: wp.array | None = None, launcher: Launcher = EAGER
    ) -> None:
        """Rebuild neighbor lists from ``pos`` [E, A] (see ``physics.neighbors.build_neighbors``)."""
        build_neighbors(
            pos,
            self.model.neighbor_radius,
            self.model.near_radius,
            self.neighbor_method,
            out,
            env_mask,
            launcher,
            self.plan,
        )

    def substep(
        self,
        state_in: State,
        actions: wp.array,
        neighbors: NeighborBuffers,
        forces: wp.array,
        state_out: State,
        invalid_flag: wp.array,
        launcher: Launcher = EAGER,
        body_route: tuple | None = None,
        non_finite_flag: wp.array | None = None,
        taped: bool = False,
        decode: Decode | None = None,
    ) -> None:
        """Launch one substep: contact forces into ``forces``, then integrate into ``state_out``
        (planar models, then, when the fleet has drones, the 6-DOF kernel). Where
        ``plan.fused_substep`` and not ``taped`` (a launch a tape records needs an adjoint), both
        are one kernel (``swarp.physics.substep``): the same bits.

        ``state_out`` may be ``state_in`` (in-place, no-grad) or a fresh state (taped). With bodies,
        ``forces`` is a ``bodies.BodyForces``: the body contacts, joints and the bodies' integration
        run between the agent contacts and the agents' integration; ``body_route`` is the
        ``(read, write)`` pair of body arrays of the no-grad in-place paths, which alternate the
        bodies with spare arrays and integrate them in the body-contact launch (see
        ``bodies.body_route``); by default (the taped path) ``state_in``'s and ``state_out``'s, with
        a separate, differentiable body integration launch. Same bits either way.

        A state component integrated to NaN or infinity raises its env's flag in
        ``non_finite_flag`` ([E] int32, or [1] for any env; default ``non_finite_any``).

        ``decode`` (a step's first substep, discrete actions or messages): the fused kernel decodes
        them into ``actions`` itself; otherwise the decode's own launch runs first.
        """
        flags = non_finite_flag if non_finite_flag is not None else self.non_finite_any
        m = self.model
        s = self.scalar
        n_envs, n_agents = state_in.pos.shape
        for what, rows in (("parameter", m.params.shape[0]), ("obstacle", m.obstacles.shape.shape[0])):
            if rows not in (1, n_envs):
                raise ValueError(f"per-env {what} rows ({rows}) must be 1 (shared) or n_envs ({n_envs})")
        contact, integrate = self.model_args()
        _, threads = self.plan.split(n_agents)
        obstacles = m.obstacles.shape.shape[1] > 0
        per_agent = not self.plan.one_thread_per_env
        masked = self.alive is not None
        fused = self.plan.fused_substep and not taped
        if decode is not None and not fused:
            launcher.launch(
                decode_kernel(s, decode.comm),
                dim=(n_envs, n_agents),
                inputs=[decode.args, actions, invalid_flag],
                device=self.device,
            )
        # Stage 1+2 fused: contact forces and integration in one kernel (no drones, no bodies).
        if fused:
            blocks, per_block, threads = substep.layout(n_envs, n_agents, self.plan.one_thread_per_env)
            variant = substep.NO_DECODE if decode is None else substep.DECODE_COMM if decode.comm else substep.DECODE
            comm = decode.comm if decode is not None else 0
            launcher.launch(
                substep.kernel(s, obstacles, *self._fleet_variant, per_agent, variant, masked, comm),
                dim=(blocks, per_block * threads),
                inputs=[
                    contact,
                    integrate,
                    self.no_decode if decode is None else decode.args,
                    per_block,
                    threads,
                    actions,
                    neighbors.nbr,
                    neighbors.near,
                    *state_in.planar_arrays(),
                ],
                outputs=[forces, *state_out.planar_arrays(), invalid_flag, flags],
                device=self.device,
                block_dim=per_block * threads,
            )
            return
        # Stage 1: agent contact forces (agents, obstacles, walls).
        body_forces = forces if self.bodies is not None else None
        if body_forces is not None:
            forces = body_forces.contact
        launcher.launch(
            contacts.kernels(s, obstacles, masked).contact_forces,
            dim=(n_envs, threads),
            inputs=[contact, state_in.pos, state_in.vel, neighbors.nbr, neighbors.near],
            outputs=[forces],
            device=self.device,
        )
        # Stage 1b: bodies' contacts and joints, and the bodies' integration.
        if body_forces is not None:
            read, write = body_route or (bodies.of_state(state_in), bodies.of_state(state_out))
            bodies.launch_substep(self, state_in, read, body_forces, write, launcher, body_route is not None, flags)
            forces = body_forces.total
        # Stage 2: integration. The planar kernel skips drones; the 6-DOF kernel integrates them.
        launcher.launch(
            dynamics.integrate_kernel(s, *self._fleet_variant, per_agent=per_agent, masked=masked),
            dim=(n_envs, threads),
            inputs=[integrate, actions, forces, *state_in.planar_arrays()],
            outputs=[*state_out.planar_arrays(), invalid_flag, flags],
            device=self.device,
        )
        if m.has_drones:
            launcher.launch(
                drone.integrate_drone_kernel(s, per_agent=per_agent),
                dim=(n_envs, threads),
                inputs=[integrate, actions, forces, *state_in.agent_arrays()],
                outputs=[*state_out.agent_arrays(), invalid_flag, flags],
                device=self.device,
            )

    def simulate(
        self,
        state: State,
        actions: wp.array,
        neighbors: NeighborBuffers,
        forces: wp.array,
        invalid_flag: wp.array,
        launcher: Launcher = EAGER,
        neighbors_valid: bool = False,
        non_finite_flag: wp.array | None = None,
        decode: Decode | None = None,
    ) -> None:
        """No-grad step in place: [neighbor build] then ``substeps`` x (forces -> integrate).

        Args:
            state: Updated in place.
            actions: ``wp.array3d(scalar)`` [E, A, act_dim] physical actions.
            neighbors: Persistent lists; rebuilt first unless ``neighbors_valid`` says they already
                match ``state.pos`` (the World keeps them current after every step).
            forces: [E, A] vec2 scratch.
            invalid_flag: [1] int32, raised when an action component is not finite.
            launcher: Eager, recording, or under the caller's graph capture.
            neighbors_valid: Skip the initial rebuild.
            non_finite_flag: [E] (or [1]) int32 health flags (see ``substep``).
            decode: Discrete actions or messages to decode into ``actions`` first (``substep``).
        """
        if not neighbors_valid:
            self.build_neighbors(state.pos, neighbors, launcher=launcher)
        for k in range(self.substeps):
            route = self._in_place_route(state, forces, k, self.substeps)
            first = decode if k == 0 else None
            self.substep(
                state, actions, neighbors, forces, state, invalid_flag, launcher, route, non_finite_flag, decode=first
            )

    def _in_place_route(self, state: State, forces, substep: int, n_substeps: int) -> tuple | None:
        """Where substep ``substep`` of ``n_substeps`` in place on ``state`` reads and writes bodies."""
        return None if self.bodies is None else bodies.body_route(state, forces, substep, n_substeps)

    def simulate_into(
        self,
        state_in: State,
        actions: wp.array,
        neighbors: NeighborBuffers,
        forces: wp.array,
        state_out: State,
        invalid_flag: wp.array,
        launcher: Launcher = EAGER,
        non_finite_flag: wp.array | None = None,
    ) -> None:
        """No-grad step from ``state_in`` into ``state_out``, leaving ``state_in`` untouched.

        The lists are built from ``state_in``; the first substep integrates into ``state_out`` and
        the others run in place there, so no copy is needed. Same launches and bits as
        ``simulate_functional``; ``state_out`` may also be ``state_in`` (then this is ``simulate``).
        """
        self.build_neighbors(state_in.pos, neighbors, launcher=launcher)
        if state_out is state_in:
            self.simulate(state_in, actions, neighbors, forces, invalid_flag, launcher, True, non_finite_flag)
            return
        self.substep(state_in, actions, neighbors, forces, state_out, invalid_flag, launcher, None, non_finite_flag)
        for k in range(self.substeps - 1):
            route = self._in_place_route(state_out, forces, k, self.substeps - 1)
            self.substep(
                state_out, actions, neighbors, forces, state_out, invalid_flag, launcher, route, non_finite_flag
            )

    def simulate_functional(
        self,
        state_in: State,
        actions: wp.array,
        invalid_flag: wp.array,
        requires_grad: bool = True,
        scratch: StepScratch | None = None,
        tape: wp.Tape | None = None,
        non_finite_flag: wp.array | None = None,
    ) -> State:
        """Tape-safe step: every array written is freshly allocated (or ``scratch``); returns the new ``State``.

        Neighbor lists are rebuilt from ``state_in`` outside any tape (membership is not
        differentiable, and the list kernels carry no adjoint).

        Args:
            state_in: Input state; only read.
            actions: [E, A, act_dim] physical actions; only read.
            invalid_flag: [1] int32, raised when an action component is not finite.
            requires_grad: Allocate adjoint buffers with the fresh arrays.
            scratch: Arrays to write instead of fresh ones; the caller guarantees no live tape
                still reads them.
            tape: Record the substep launches (contact forces, integration) on this tape.
            non_finite_flag: [E] (or [1]) int32 health flags (see ``substep``).
        """
        n_envs = state_in.pos.shape[0]
        if scratch is None:
            scratch = self.allocate_scratch(n_envs, requires_grad)
        self.build_neighbors(state_in.pos, scratch.neighbors)
        state = state_in
        with tape if tape is not None else contextlib.nullcontext():
            for forces, out in zip(scratch.forces, scratch.states, strict=True):
                self.substep(
                    state,
                    actions,
                    scratch.neighbors,
                    forces,
                    out,
                    invalid_flag,
                    non_finite_flag=non_finite_flag,
                    taped=True,
                )
                state = out
        return state
