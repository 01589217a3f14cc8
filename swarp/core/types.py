"""Model (static parameters and geometry) and State (per-step dynamic arrays).

Shapes use ``E`` = n_envs, ``A`` = n_agents, ``P`` = number of agent parameters, ``O`` = obstacle
slots. Every array lives on the simulation device; torch views of the state are created once, at
allocation, and never copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.config import AgentConfig, ControlMode, DynamicsModel, Integrator, ObstacleShape, WorldConfig
from swarp.core.precision import vec2_type

# Columns of the per-agent parameter table ``Model.params`` [E_p, A, P]. Kernels read them by name.
PARAM_RADIUS = 0  # [m]
PARAM_MASS = 1  # [kg]
PARAM_MAX_SPEED = 2  # [m/s]
PARAM_MAX_ACCEL = 3  # [m/s^2]
PARAM_MAX_ANG_VEL = 4  # [rad/s]
PARAM_MAX_ANG_ACCEL = 5  # [rad/s^2]
PARAM_WHEELBASE = 6  # [m]
PARAM_REAR_RATIO = 7  # [-]
PARAM_MAX_STEER = 8  # [rad]
PARAM_DRAG = 9  # [1/s]
PARAM_ARM_LENGTH = 10  # [m] (drone)
PARAM_INERTIA_X = 11  # [kg m^2] (drone; y and z follow)
PARAM_INERTIA_Y = 12
PARAM_INERTIA_Z = 13
PARAM_YAW_MOMENT = 14  # [m] (drone)
PARAM_MAX_THRUST = 15  # [N] (drone, per rotor)
PARAM_MAX_BODY_RATE = 16  # [rad/s] (drone)

#: Relative margin on the contact distance ``2 * max_radius`` when sizing neighbor lists [-].
CONTACT_MARGIN = 0.25

#: The parameter table's column names, in column order.
PARAM_FIELDS = (
    "radius",
    "mass",
    "max_speed",
    "max_accel",
    "max_ang_vel",
    "max_ang_accel",
    "wheelbase",
    "rear_axle_ratio",
    "max_steer",
    "drag",
    "arm_length",
    "inertia_x",
    "inertia_y",
    "inertia_z",
    "yaw_moment",
    "max_thrust",
    "max_body_rate",
)
#: P, the number of columns (``tests/core/test_params.py`` checks each ``PARAM_*`` names its column).
N_PARAMS = len(PARAM_FIELDS)


class TorchState(NamedTuple):
    """Zero-copy torch views of a batch of world states.

    Fields (``E`` envs, ``A`` agents, the simulation dtype, SI units):
        pos: [E, A, 2] position [m].
        theta: [E, A] heading [rad], wrapped to [-pi, pi).
        vel: [E, A, 2] world-frame velocity [m/s].
        speed: [E, A] signed forward speed [m/s] (diff drive, bicycle); |vel| for holonomic agents
            and drones.
        ang_vel: [E, A] yaw rate [rad/s].

    The four 6-DOF drone fields (``DynamicsModel.DRONE``; planar agents neither read nor write
    them) default to ``None``, which ``complete_state`` fills with zeros and the identity attitude:
        pos_z: [E, A] altitude [m].
        vel_z: [E, A] vertical velocity [m/s].
        quat: [E, A, 4] attitude quaternion (x, y, z, w) rotating body to world.
        omega: [E, A, 3] body angular rates [rad/s].
    """

    pos: torch.Tensor
    theta: torch.Tensor
    vel: torch.Tensor
    speed: torch.Tensor
    ang_vel: torch.Tensor
    pos_z: torch.Tensor | None = None
    vel_z: torch.Tensor | None = None
    quat: torch.Tensor | None = None
    omega: torch.Tensor | None = None


STATE_FIELDS = TorchState._fields
#: The fields every dynamics model integrates (the first five).
PLANAR_FIELDS = STATE_FIELDS[:5]
#: The 6-DOF fields only drones integrate (present in a step's state when the fleet has drones).
DRONE_FIELDS = STATE_FIELDS[5:]


class TorchStateWithBodies(NamedTuple):
    """``TorchState`` plus the movable rigid bodies (worlds with ``WorldConfig.bodies``).

    Fields: the nine fields of ``TorchState`` (the drone ones may be ``None``, as there), then
    (``B`` bodies, SI units):
        body_pos: [E, B, 2] centre-of-mass position [m].
        body_theta: [E, B] orientation [rad], wrapped to [-pi, pi).
        body_vel: [E, B, 2] centre-of-mass velocity [m/s].
        body_ang_vel: [E, B] angular velocity [rad/s].

    The body fields default to ``None`` only because they follow defaulted fields (a NamedTuple
    rule); a step of a world with bodies requires all four (build it with keywords).
    """

    pos: torch.Tensor
    theta: torch.Tensor
    vel: torch.Tensor
    speed: torch.Tensor
    ang_vel: torch.Tensor
    pos_z: torch.Tensor | None = None
    vel_z: torch.Tensor | None = None
    quat: torch.Tensor | None = None
    omega: torch.Tensor | None = None
    body_pos: torch.Tensor | None = None
    body_theta: torch.Tensor | None = None
    body_vel: torch.Tensor | None = None
    body_ang_vel: torch.Tensor | None = None


BODY_FIELDS = TorchStateWithBodies._fields[len(STATE_FIELDS) :]
#: Trailing torch dimension of each state field (none for scalars).
FIELD_WIDTH = {"pos": 2, "vel": 2, "quat": 4, "omega": 3, "body_pos": 2, "body_vel": 2}


def state_fields(drones: bool, bodies: bool) -> tuple[str, ...]:
    """The fields a ``State`` holds, in ``TorchStateWithBodies`` order: the planar five, the drone
    four with ``drones``, the body four with ``bodies``."""
    return PLANAR_FIELDS + (DRONE_FIELDS if drones else ()) + (BODY_FIELDS if bodies else ())


def field_dtype(name: str, scalar: type):
    """Warp dtype of the state field ``name`` at precision ``scalar``."""
    width = FIELD_WIDTH.get(name)
    if name == "quat":
        return wp.types.quaternion(scalar)
    return scalar if width is None else wp.types.vector(width, scalar)


def complete_state(state: TorchState | TorchStateWithBodies) -> TorchState | TorchStateWithBodies:
    """``state`` with missing drone fields filled: zero altitude, vertical velocity and body rates,
    identity attitude (fresh tensors shaped, typed and placed like ``state.theta``)."""
    if all(getattr(state, name) is not None for name in DRONE_FIELDS):
        return state
    theta = state.theta
    if not isinstance(theta, torch.Tensor):
        raise TypeError(f"state.theta must be a torch.Tensor, got {type(theta).__name__}")
    fill = {}
    for name in DRONE_FIELDS:
        if getattr(state, name) is None:
            width = FIELD_WIDTH.get(name)
            value = theta.new_zeros(*theta.shape, *((width,) if width else ()))
            if name == "quat":
                value[..., 3] = 1.0
            fill[name] = value
    return state._replace(**fill)


class State:
    """Dynamic per-agent (and per-body) state of ``n_envs`` worlds as structure-of-arrays Warp arrays.

    Attributes:
        pos: ``wp.array2d(vec2)`` [E, A] position [m].
        theta: ``wp.array2d(scalar)`` [E, A] heading [rad].
        vel: ``wp.array2d(vec2)`` [E, A] world-frame velocity [m/s].
        speed: ``wp.array2d(scalar)`` [E, A] forward speed [m/s].
        ang_vel: ``wp.array2d(scalar)`` [E, A] yaw rate [rad/s].
        pos_z, vel_z: ``wp.array2d(scalar)`` [E, A] altitude [m] and vertical velocity [m/s] (drones).
        quat: ``wp.array2d(quat)`` [E, A] attitude (x, y, z, w), identity at allocation (drones).
        omega: ``wp.array2d(vec3)`` [E, A] body rates [rad/s] (drones).
        body_pos, body_theta, body_vel, body_ang_vel: with ``n_bodies > 0`` only, the [E, B] body
            arrays of ``TorchStateWithBodies`` (vec2 for positions and velocities).
        fields: The fields this state holds (``state_fields``): the drone four only with
            ``drones`` (a fleet without drones never integrates them, so its step scratch does not
            carry them), the body four only with ``n_bodies > 0``. Absent fields' attributes and
            ``torch`` views are ``None``.
        torch: ``TorchState`` (``TorchStateWithBodies`` with bodies) of zero-copy views of the
            arrays, built once.

    ``name`` names the arrays ``"{name}.{field}"`` for ``swarp.core.env_arrays`` (a world's live
    state: a CPU shard's then views its environment's).
    """

    def __init__(
        self,
        n_envs: int,
        n_agents: int,
        scalar: type,
        device: str,
        requires_grad: bool = False,
        drones: bool = True,
        n_bodies: int = 0,
        name: str | None = None,
    ):
        self.n_envs, self.n_agents, self.scalar, self.device = n_envs, n_agents, scalar, device
        self.n_bodies = n_bodies
        self.fields = state_fields(drones, n_bodies > 0)
        kind = TorchStateWithBodies if n_bodies else TorchState
        for field in kind._fields:
            array = None
            if field in self.fields:
                shape = (n_envs, n_bodies if field in BODY_FIELDS else n_agents)
                dtype = field_dtype(field, scalar)
                key = None if name is None else f"{name}.{field}"
                if field == "quat":  # the identity attitude
                    array = env_arrays.full(key, shape, dtype(0.0, 0.0, 0.0, 1.0), dtype, device, requires_grad)
                else:
                    array = env_arrays.zeros(key, shape, dtype, device, requires_grad)
            setattr(self, field, array)
        self.torch = kind(*(self._view(field) for field in kind._fields))

    def _view(self, name: str) -> torch.Tensor | None:
        array = getattr(self, name)
        return None if array is None else wp.to_torch(array, requires_grad=False)

    @classmethod
    def from_torch(cls, state: TorchState | TorchStateWithBodies, scalar: type, drones: bool = True) -> State:
        """Wrap the tensors of ``state`` as Warp arrays without copying (they must be contiguous).

        With ``drones`` missing drone fields are filled by ``complete_state`` (which allocates);
        without, the drone fields are left out. A ``TorchStateWithBodies`` gives a state with bodies.
        """
        self = cls.__new__(cls)
        bodies = isinstance(state, TorchStateWithBodies)
        self.fields = state_fields(drones, bodies)
        state = complete_state(state) if drones else state._replace(**dict.fromkeys(DRONE_FIELDS))
        self.n_envs, self.n_agents = state.pos.shape[:2]
        self.n_bodies = state.body_pos.shape[1] if bodies else 0
        self.scalar, self.device = scalar, str(wp.device_from_torch(state.pos.device))
        for name in state._fields:
            tensor = getattr(state, name)
            array = None
            if name in self.fields:
                array = wp.from_torch(tensor, dtype=field_dtype(name, scalar), requires_grad=tensor.requires_grad)
            setattr(self, name, array)
        self.torch = state
        return self

    def arrays(self) -> tuple[wp.array, ...]:
        """The arrays of ``fields``, in order (planar, drone, body)."""
        return tuple(getattr(self, name) for name in self.fields)

    def planar_arrays(self) -> tuple[wp.array, ...]:
        """The five arrays every model integrates (pos, theta, vel, speed, ang_vel)."""
        return tuple(getattr(self, name) for name in PLANAR_FIELDS)

    def agent_arrays(self) -> tuple[wp.array, ...]:
        """The planar then drone arrays (the drone kernel's nine; requires the drone fields)."""
        return tuple(getattr(self, name) for name in STATE_FIELDS)

    def assign(self, other: State) -> None:
        """Copy every field of ``other`` into this state's own arrays (device-side, no sync)."""
        for dst, src in zip(self.arrays(), other.arrays(), strict=True):
            wp.copy(dst, src)


@dataclass
class ObstacleArrays:
    """Obstacle geometry, shared by every env (leading dim 1) or per env (leading dim E).

    Attributes:
        shape: ``wp.array2d(int32)`` [E_o, O] ``ObstacleShape`` codes; ``NONE`` pads unused slots.
        center: ``wp.array2d(vec2)`` [E_o, O] centre [m].
        angle: ``wp.array2d(scalar)`` [E_o, O] orientation [rad].
        size: ``wp.array2d(vec2)`` [E_o, O] extents [m] (see ``Obstacle.size``).
    """

    shape: wp.array
    center: wp.array
    angle: wp.array
    size: wp.array

    @property
    def per_env(self) -> bool:
        return self.shape.shape[0] > 1

    @property
    def n_slots(self) -> int:
        return self.shape.shape[1]


def allocate_obstacles(n_env_rows: int, n_slots: int, scalar: type, device: str) -> ObstacleArrays:
    """Zeroed obstacle arrays [n_env_rows, n_slots] (all slots ``NONE``)."""
    vec2 = vec2_type(scalar)
    shape = (n_env_rows, n_slots)
    return ObstacleArrays(
        shape=wp.zeros(shape, dtype=wp.int32, device=device),
        center=wp.zeros(shape, dtype=vec2, device=device),
        angle=wp.zeros(shape, dtype=scalar, device=device),
        size=wp.zeros(shape, dtype=vec2, device=device),
    )


def param_array(table: np.ndarray, scalar: type, device: str) -> wp.array:
    """An agent-parameter table [E_p, A, P] as a Warp array of that shape stored column-major per
    env (``[E_p, P, A]`` in memory, a strided view): a kernel reading one parameter of consecutive
    agents then reads consecutive words. In row-major ``[E_p, A, P]`` each such read fetched a whole
    P-float row per agent, which made per-env tables (``E_p = E``) cost a measurable share of the
    navigation step (docs/benchmarks.md, "Other measured choices in the code"). Indexing
    (``params[e, a, p]``, ``agent_params[..., p]``) is unchanged.
    """
    storage = wp.array(np.ascontiguousarray(np.asarray(table).transpose(0, 2, 1)), dtype=scalar, device=device)
    return storage.transpose((0, 2, 1))


class Model:
    """Static description of the simulated world: agent parameters, obstacles, world constants.

    Attributes:
        agents: The ``AgentConfig`` of each of the A agents.
        world: The ``WorldConfig``.
        n_agents: A.
        act_dim: Width of the action vector: the largest action arity over the fleet.
        scalar: Warp scalar type of every float array (``wp.float32`` or ``wp.float64``).
        params: ``wp.array3d(scalar)`` [1, A, P] agent parameters, columns ``PARAM_*``.
        kinds: ``wp.array(int32)`` [A] ``DynamicsModel`` code per agent.
        ctrl_modes: ``wp.array(int32)`` [A] ``ControlMode`` code per agent.
        obstacles: ``ObstacleArrays`` of the world's static obstacles (leading dim 1).
        contact_radius: Centre distance [m] within which a pair can touch at the start of any
            substep of a step: ``2 * max_radius * (1 + CONTACT_MARGIN) + 2 * max_speed * dt * (S - 1) / S``
            for S substeps. Contact forces are evaluated at substep starts from lists built at the
            step start, so with one substep only pairs already overlapping matter; the margin
            covers contact pushes beyond ``max_speed`` and rounding.
        neighbor_radius: Radius [m] of the neighbor lists (default: ``contact_radius``).
        near_radius: The prefix of each (distance-sorted) list within this radius [m] is what the
            contact kernel scans: ``min(contact_radius, neighbor_radius)``.
        max_radius: Largest agent radius [m].
        dt, substeps, integrator: The step [s], its substeps and the ``Integrator`` the model is
            stepped with (``swarp.core.stability`` checks parameter tables against them).
    """

    def __init__(
        self,
        agents: list[AgentConfig],
        world: WorldConfig,
        scalar: type,
        device: str,
        dt: float = 0.1,
        substeps: int = 1,
        integrator: Integrator = Integrator.EULER,
    ):
        self.agents = tuple(agents)
        self.world = world
        self.dt, self.substeps, self.integrator = dt, substeps, integrator
        self.n_agents = len(agents)
        self.act_dim = max(cfg.act_dim for cfg in agents)
        self.scalar, self.device = scalar, device
        np_dtype = np.float64 if scalar is wp.float64 else np.float32
        table = np.array([[float(getattr(cfg, f)) for f in PARAM_FIELDS] for cfg in agents], dtype=np_dtype)
        self.params = param_array(table[None], scalar, device)
        self.kinds = wp.array(np.array([int(cfg.model) for cfg in agents], np.int32), dtype=wp.int32, device=device)
        self.ctrl_modes = wp.array(
            np.array([int(cfg.ctrl_mode) for cfg in agents], np.int32), dtype=wp.int32, device=device
        )
        self.has_drones = any(cfg.model == DynamicsModel.DRONE for cfg in agents)
        self.max_radius = max(cfg.radius for cfg in agents)
        max_speed = max(cfg.max_speed for cfg in agents)
        closing = 2.0 * max_speed * dt * (substeps - 1) / substeps
        self.contact_radius = 2.0 * self.max_radius * (1.0 + CONTACT_MARGIN) + closing
        if world.neighbor_radius is None:
            self.neighbor_radius = self.contact_radius
        else:
            self.neighbor_radius = float(world.neighbor_radius)
            if world.collisions and self.neighbor_radius < 2.0 * self.max_radius:
                raise ValueError(
                    f"WorldConfig.neighbor_radius={self.neighbor_radius} is smaller than twice the largest "
                    f"agent radius ({2.0 * self.max_radius}); contacts would be missed"
                )
        self.near_radius = min(self.contact_radius, self.neighbor_radius)
        self.first_free_obstacle = len(world.obstacles)
        self.obstacles = allocate_obstacles(1, len(world.obstacles), scalar, device)
        if world.obstacles:
            self.set_obstacles([list(world.obstacles)])

    def set_obstacles(self, per_env: list[list]) -> None:
        """Install obstacles: one list of ``Obstacle`` per env row (one row = shared by all envs).

        Reallocates the obstacle arrays when the row or slot count changes; anything that recorded
        launches or captured a graph against the old arrays must be invalidated by the caller.
        """
        n_rows = len(per_env)
        n_slots = max((len(row) for row in per_env), default=0)
        np_dtype = np.float64 if self.scalar is wp.float64 else np.float32
        shape = np.zeros((n_rows, n_slots), np.int32)
        center = np.zeros((n_rows, n_slots, 2), np_dtype)
        angle = np.zeros((n_rows, n_slots), np_dtype)
        size = np.zeros((n_rows, n_slots, 2), np_dtype)
        for r, row in enumerate(per_env):
            for s, ob in enumerate(row):
                shape[r, s] = int(ob.shape)
                center[r, s] = ob.center
                angle[r, s] = ob.angle
                size[r, s] = ob.size
        vec2 = vec2_type(self.scalar)
        self.obstacles = ObstacleArrays(
            shape=wp.array(shape, dtype=wp.int32, device=self.device),
            center=wp.array(center, dtype=vec2, device=self.device),
            angle=wp.array(angle, dtype=self.scalar, device=self.device),
            size=wp.array(size, dtype=vec2, device=self.device),
        )

    def set_obstacle_slots(self, n_envs: int, n_slots: int) -> None:
        """Give every env its own ``n_slots`` obstacle slots (all empty), after the shared ones.

        Scenarios that sample obstacles at reset write into these rows. Callers must invalidate
        recorded launches and graphs made against the previous arrays.
        """
        shared = list(self.world.obstacles)
        rows = allocate_obstacles(n_envs, len(shared) + n_slots, self.scalar, self.device)
        if shared:
            self.set_obstacles([shared])
            for name in ("shape", "center", "angle", "size"):
                src = wp.to_torch(getattr(self.obstacles, name))
                wp.to_torch(getattr(rows, name))[:, : len(shared)] = src
        self.obstacles = rows
        self.first_free_obstacle = len(shared)

    def obstacle_tensors(self) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of the obstacle arrays: shape [E_o, O] int32, center [E_o, O, 2],
        angle [E_o, O], size [E_o, O, 2]."""
        return {name: wp.to_torch(getattr(self.obstacles, name)) for name in ("shape", "center", "angle", "size")}

    def action_bounds(self, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(low, high)`` [A, act_dim]: the physical box each agent's actions are clamped to.

        Velocity-controlled holonomic agents clamp the *norm* of their command to max_speed (the
        box is its bounding box); drones clamp each rotor thrust to [0, max_thrust]; components an
        agent does not use have bounds (0, 0).
        """
        high = torch.zeros(self.n_agents, self.act_dim, dtype=dtype)
        low = torch.zeros(self.n_agents, self.act_dim, dtype=dtype)
        for i, cfg in enumerate(self.agents):
            velocity = cfg.ctrl_mode == ControlMode.VELOCITY
            if cfg.model == DynamicsModel.DRONE:
                high[i, :4] = cfg.max_thrust
                continue
            if cfg.model == DynamicsModel.HOLONOMIC:
                limits = [cfg.max_speed if velocity else cfg.max_accel] * 2
            elif cfg.model == DynamicsModel.DIFF_DRIVE:
                limits = [cfg.max_speed, cfg.max_ang_vel] if velocity else [cfg.max_accel, cfg.max_ang_accel]
            else:
                limits = [cfg.max_speed if velocity else cfg.max_accel, cfg.max_steer]
            high[i, : len(limits)] = torch.tensor(limits, dtype=dtype)
            low[i, : len(limits)] = -high[i, : len(limits)]
        return low.to(device), high.to(device)

    def bounds_vectors(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """World bounds as ``(lower, upper)`` corners [m]; infinite when unbounded."""
        b = self.world.bounds
        if b is None:
            return (-np.inf, -np.inf), (np.inf, np.inf)
        return (b[0], b[2]), (b[1], b[3])


__all__ = [
    "Model",
    "State",
    "TorchState",
    "TorchStateWithBodies",
    "ObstacleArrays",
    "ObstacleShape",
    "allocate_obstacles",
]
