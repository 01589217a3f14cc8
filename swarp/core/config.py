"""Configuration records and enums: what an agent is and what the world around it is.

Everything here is plain host-side data, validated when constructed, so a bad value fails
at the line that wrote it instead of deep inside a kernel.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Literal, get_args


class DynamicsModel(enum.IntEnum):
    """How an agent turns its action into motion.

    ========================  =========  ======================================================
    model                     act_dim    action (VELOCITY control / ACCELERATION control)
    ========================  =========  ======================================================
    ``HOLONOMIC``             2          world-frame velocity [m/s] / acceleration [m/s^2]
    ``DIFF_DRIVE``            2          (forward speed [m/s], yaw rate [rad/s]) /
                                         (forward accel [m/s^2], yaw accel [rad/s^2])
    ``KINEMATIC_BICYCLE``     2          (speed [m/s], steering angle [rad]) /
                                         (accel [m/s^2], steering angle [rad])
    ``DRONE``                 4          four rotor thrusts [N] (either control mode)
    ========================  =========  ======================================================

    ``DRONE`` is a 6-DOF quadrotor (``swarp/physics/drone.py``): quaternion attitude, body rates,
    gravity, linear drag; its planar fields (pos, vel, theta, speed, ang_vel) hold the projection
    onto the ground plane, where its contacts act.
    """

    HOLONOMIC = 0
    DIFF_DRIVE = 1
    KINEMATIC_BICYCLE = 2
    DRONE = 3


#: Number of action components each dynamics model consumes. ``act_dim`` of a fleet is the max.
ACTION_ARITY: dict[DynamicsModel, int] = {
    DynamicsModel.HOLONOMIC: 2,
    DynamicsModel.DIFF_DRIVE: 2,
    DynamicsModel.KINEMATIC_BICYCLE: 2,
    DynamicsModel.DRONE: 4,
}


class ControlMode(enum.IntEnum):
    """Whether actions command velocities directly or the accelerations that change them."""

    VELOCITY = 0
    ACCELERATION = 1


class Integrator(enum.IntEnum):
    """Time integration of one substep.

    ``EULER`` is semi-implicit: velocity-level quantities are updated first and the pose is
    advanced with the updated ones. ``RK4`` is the classic fourth-order Runge-Kutta scheme on the
    same ODE, with the action and the contact force held constant over the substep.
    """

    EULER = 0
    RK4 = 1


BoundsMode = Literal["soft", "clamp"]
NeighborMethod = Literal["brute", "grid", "auto"]
#: ``WorldConfig.neighbor_method``'s values.
NEIGHBOR_METHODS: tuple[str, ...] = get_args(NeighborMethod)


def coerce_enum(enum_type: type[enum.IntEnum], value: object, name: str) -> enum.IntEnum:
    """Accept an enum member, its name (any case) or its integer value; raise a clear error else."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            pass
    valid = ", ".join(m.name for m in enum_type)
    raise ValueError(f"{name} must be one of {enum_type.__name__}.{{{valid}}}, got {value!r}")


def _check_positive(name: str, value: float, *, allow_zero: bool = False, allow_inf: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    if math.isinf(value) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {value}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value}")


#: Default drone body-rate limit [rad/s]: 2000 deg/s, the rate limit of racing-quadrotor flight
#: controllers (Betaflight caps its rate profiles at 1998 deg/s).
DEFAULT_MAX_BODY_RATE = math.radians(2000.0)


@dataclass(frozen=True)
class AgentConfig:
    """Static description of one agent. All quantities are SI units (m, kg, s, rad).

    Attributes:
        model: Dynamics model (a ``DynamicsModel`` or its name).
        ctrl_mode: Whether actions are velocities or accelerations (``ControlMode`` or name).
        radius: Collision radius [m], > 0.
        mass: Mass [kg], > 0. Contact forces are divided by it, so the lightest agent sets the
            largest stable substep (``swarp.core.stability``; ``sqrt(2 m / k)`` for velocity-level
            agents).
        max_speed: Speed limit [m/s]; velocity commands and integrated speeds are clamped to it.
        max_accel: Linear acceleration limit [m/s^2] for ACCELERATION control.
        max_ang_vel: Yaw-rate limit [rad/s] (diff drive), >= 0.
        max_ang_accel: Yaw-acceleration limit [rad/s^2] (diff drive, ACCELERATION control).
        wheelbase: Axle-to-axle length [m] of the kinematic bicycle.
        rear_axle_ratio: Rear axle to centre of mass distance as a fraction of the wheelbase,
            in (0, 1]; sets the slip angle of the bicycle.
        max_steer: Steering-angle limit [rad] of the kinematic bicycle, in [0, pi/2).
        drag: Linear velocity damping [1/s] of holonomic agents under ACCELERATION control and
            of drones (3-D velocity); integrated explicitly, so ``h * drag <= 2`` (EULER) or
            ``<= 2.79`` (RK4) per substep ``h``, less with contacts (``swarp.core.stability``).
        arm_length: Drone: distance [m] from the centre to each rotor ("+" layout: rotors on the
            body +x, +y, -x, -y axes).
        inertia_x, inertia_y, inertia_z: Drone: principal moments of inertia [kg m^2].
        yaw_moment: Drone: reaction torque per unit thrust [m] (rotors 0 and 2 spin one way, 1 and
            3 the other: yaw torque ``yaw_moment * (f0 - f1 + f2 - f3)``).
        max_thrust: Drone: thrust limit [N] of each rotor (commands are clamped to [0, max_thrust]).
        max_body_rate: Drone: limit [rad/s] of the body-rate norm ``|w|``, applied after every
            substep (and to RK4's stages), >= 0. Default ``DEFAULT_MAX_BODY_RATE``, 2000 deg/s: the
            rate limit of a racing quadrotor's flight controller. Without it nothing bounds ``|w|``
            (no rotational damping; explicit integration of ``w x I w`` gains energy), and random
            thrusts spin a drone up until it overflows.
    """

    model: DynamicsModel = DynamicsModel.HOLONOMIC
    ctrl_mode: ControlMode = ControlMode.VELOCITY
    radius: float = 0.05
    mass: float = 1.0
    max_speed: float = 1.0
    max_accel: float = 2.0
    max_ang_vel: float = 3.0
    max_ang_accel: float = 6.0
    wheelbase: float = 0.1
    rear_axle_ratio: float = 0.5
    max_steer: float = 0.6
    drag: float = 0.0
    arm_length: float = 0.1
    inertia_x: float = 0.01
    inertia_y: float = 0.01
    inertia_z: float = 0.02
    yaw_moment: float = 0.02
    max_thrust: float = 5.0
    max_body_rate: float = DEFAULT_MAX_BODY_RATE

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", coerce_enum(DynamicsModel, self.model, "AgentConfig.model"))
        object.__setattr__(self, "ctrl_mode", coerce_enum(ControlMode, self.ctrl_mode, "AgentConfig.ctrl_mode"))
        for name in ("radius", "mass", "wheelbase", "arm_length", "inertia_x", "inertia_y", "inertia_z"):
            _check_positive(f"AgentConfig.{name}", getattr(self, name))
        for name in (
            "max_speed",
            "max_accel",
            "max_ang_vel",
            "max_ang_accel",
            "drag",
            "max_steer",
            "yaw_moment",
            "max_thrust",
            "max_body_rate",
        ):
            _check_positive(f"AgentConfig.{name}", getattr(self, name), allow_zero=True)
        if not 0.0 < self.rear_axle_ratio <= 1.0:
            raise ValueError(f"AgentConfig.rear_axle_ratio must be in (0, 1], got {self.rear_axle_ratio}")
        if self.max_steer >= math.pi / 2:
            raise ValueError(f"AgentConfig.max_steer must be < pi/2 rad, got {self.max_steer}")

    @property
    def act_dim(self) -> int:
        """Number of action components this agent consumes."""
        return ACTION_ARITY[self.model]


class ObstacleShape(enum.IntEnum):
    """Shape of a static obstacle. ``NONE`` marks an unused padding slot."""

    NONE = 0
    CIRCLE = 1
    BOX = 2
    SEGMENT = 3


@dataclass(frozen=True)
class Obstacle:
    """A static obstacle, described by its centre, orientation and size.

    Attributes:
        shape: ``ObstacleShape`` (or its name).
        center: (x, y) centre [m].
        angle: Orientation [rad] of the box or segment axis.
        size: Shape extents [m]: CIRCLE ``(radius, 0)``; BOX ``(half_width, half_height)``;
            SEGMENT ``(half_length, thickness)`` where the thickness is the capsule radius (may be 0).
    """

    shape: ObstacleShape
    center: tuple[float, float]
    size: tuple[float, float]
    angle: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", coerce_enum(ObstacleShape, self.shape, "Obstacle.shape"))
        if self.shape == ObstacleShape.NONE:
            raise ValueError("Obstacle.shape must be CIRCLE, BOX or SEGMENT, got NONE")
        if len(self.center) != 2 or len(self.size) != 2:
            raise ValueError(f"Obstacle.center and Obstacle.size must be pairs, got {self.center}, {self.size}")
        for v in (*self.center, self.angle):
            if not math.isfinite(v):
                raise ValueError(f"Obstacle center/angle must be finite, got {self.center}, {self.angle}")
        _check_positive("Obstacle.size[0]", self.size[0])
        _check_positive("Obstacle.size[1]", self.size[1], allow_zero=self.shape != ObstacleShape.BOX)

    @classmethod
    def circle(cls, center: tuple[float, float], radius: float) -> Obstacle:
        """A disc of ``radius`` [m] at ``center`` [m]."""
        return cls(ObstacleShape.CIRCLE, center, (radius, 0.0))

    @classmethod
    def box(cls, center: tuple[float, float], half_extents: tuple[float, float], angle: float = 0.0) -> Obstacle:
        """An oriented rectangle with half extents [m] along its own axes, rotated by ``angle`` [rad]."""
        return cls(ObstacleShape.BOX, center, tuple(half_extents), angle)

    @classmethod
    def segment(cls, start: tuple[float, float], end: tuple[float, float], thickness: float = 0.0) -> Obstacle:
        """A capsule around the segment ``start``-``end`` [m] with radius ``thickness`` [m]."""
        dx, dy = end[0] - start[0], end[1] - start[1]
        half = 0.5 * math.hypot(dx, dy)
        center = (0.5 * (start[0] + end[0]), 0.5 * (start[1] + end[1]))
        return cls(ObstacleShape.SEGMENT, center, (half, thickness), math.atan2(dy, dx))


@dataclass(frozen=True)
class WorldConfig:
    """The world the agents share. SI units throughout.

    Attributes:
        bounds: Arena ``(x_min, x_max, y_min, y_max)`` [m], a half-size ``s`` meaning
            ``(-s, s, -s, s)``, or ``None`` for an unbounded plane.
        bounds_mode: ``"soft"``: walls push back with the contact spring (agents may penetrate
            slightly); ``"clamp"``: positions are projected inside and the outward velocity is
            zeroed after every substep. Ignored when ``bounds`` is ``None``.
        collision_k: Contact stiffness [N/m] for agent-agent, agent-obstacle and agent-wall contact.
            It sets the largest stable substep ``h = dt / substeps`` with the lightest mass ``m``:
            ``h <= sqrt(2 m / k)`` for velocity-level agents, ``h^2 k / m + 2 h c / m <= 4`` for
            second-order ones and bodies (``swarp.core.stability``; ``Stepper`` checks it).
        collision_damping: Contact damping [N s/m] along the contact normal (``h c / m <= 1``).
        collisions: Whether agents collide with each other (obstacles and walls always act).
        max_neighbors: Width K of the padded neighbor list; lists with more agents in range keep
            the K nearest and raise the device-side overflow flag.
        neighbor_radius: Radius [m] of the neighbor lists. ``None`` picks twice the largest agent
            radius plus a 50% skin, enough for contacts within one step at moderate speeds.
        neighbor_method: ``"brute"`` (all pairs of an env), ``"grid"`` (sort-based uniform grid,
            for hundreds or thousands of agents per env) or ``"auto"`` (the execution plan's
            measured rule, ``swarp.runtime.plan.choose_neighbor_method``).
        grid_threshold: Agents per env from which ``"auto"`` may use the grid (``None``: the
            device's measured threshold, ``swarp.runtime.plan.GRID_RULE``).
        obstacles: Static obstacles shared by every env (scenarios may install per-env ones).
        bodies: Movable rigid bodies (``Body``) present in every env; their poses live in the state.
        joints: Distance/rod joints (``Joint``) between an agent and a body or two bodies.
        gravity: Gravitational acceleration [m/s^2] pulling drones down (-z); planar agents ignore it.
    """

    bounds: tuple[float, float, float, float] | float | None = None
    bounds_mode: BoundsMode = "soft"
    collision_k: float = 100.0
    collision_damping: float = 2.0
    collisions: bool = True
    max_neighbors: int = 16
    neighbor_radius: float | None = None
    neighbor_method: NeighborMethod = "auto"
    grid_threshold: int | None = None
    obstacles: tuple[Obstacle, ...] = field(default_factory=tuple)
    bodies: tuple[Body, ...] = field(default_factory=tuple)
    joints: tuple[Joint, ...] = field(default_factory=tuple)
    gravity: float = 9.81

    def __post_init__(self) -> None:
        if self.bounds is not None:
            bounds = self.bounds
            if isinstance(bounds, (int, float)) and not isinstance(bounds, bool):
                _check_positive("WorldConfig.bounds", float(bounds))
                bounds = (-float(bounds), float(bounds), -float(bounds), float(bounds))
            if len(bounds) != 4 or not all(math.isfinite(float(b)) for b in bounds):
                raise ValueError(f"WorldConfig.bounds must be (x_min, x_max, y_min, y_max), got {self.bounds!r}")
            bounds = tuple(float(b) for b in bounds)
            if not (bounds[0] < bounds[1] and bounds[2] < bounds[3]):
                raise ValueError(f"WorldConfig.bounds must satisfy x_min < x_max and y_min < y_max, got {bounds}")
            object.__setattr__(self, "bounds", bounds)
        if self.bounds_mode not in ("soft", "clamp"):
            raise ValueError(f"WorldConfig.bounds_mode must be 'soft' or 'clamp', got {self.bounds_mode!r}")
        if not isinstance(self.collisions, bool):
            raise TypeError(f"WorldConfig.collisions must be a bool, got {self.collisions!r}")
        _check_positive("WorldConfig.collision_k", self.collision_k, allow_zero=True)
        _check_positive("WorldConfig.collision_damping", self.collision_damping, allow_zero=True)
        _check_positive("WorldConfig.gravity", self.gravity, allow_zero=True)
        if isinstance(self.max_neighbors, bool) or not isinstance(self.max_neighbors, int) or self.max_neighbors < 1:
            raise ValueError(f"WorldConfig.max_neighbors must be an int >= 1, got {self.max_neighbors!r}")
        if self.neighbor_radius is not None:
            _check_positive("WorldConfig.neighbor_radius", self.neighbor_radius)
        if self.neighbor_method not in NEIGHBOR_METHODS:
            raise ValueError(
                f"WorldConfig.neighbor_method must be 'brute', 'grid' or 'auto', got {self.neighbor_method!r}"
            )
        threshold = self.grid_threshold
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1):
            raise ValueError(f"WorldConfig.grid_threshold must be None or an int >= 1, got {threshold!r}")
        obstacles = tuple(self.obstacles)
        for i, ob in enumerate(obstacles):
            if not isinstance(ob, Obstacle):
                raise TypeError(f"WorldConfig.obstacles[{i}] must be an Obstacle, got {type(ob).__name__}")
        object.__setattr__(self, "obstacles", obstacles)
        _check_bodies_and_joints(self)


# --- movable rigid bodies and joints (swarp/physics/bodies.py simulates them) ----------------------


@dataclass(frozen=True)
class Body:
    """A movable rigid body: one or more shapes sharing one pose, pushed by agents and other bodies.

    The body frame's origin is the body's centre of mass; its pose (position, angle) and velocity
    are state (``State.body_*``), set by scenarios at reset.

    Attributes:
        shapes: ``Obstacle`` records in the body frame: ``center`` is the offset [m] of the shape
            from the centre of mass, ``angle`` its orientation [rad] relative to the body. CIRCLE and
            BOX shapes only (a compound body such as a T is several boxes).
        mass: Mass [kg], > 0.
        inertia: Moment of inertia about the centre of mass [kg m^2]; ``None`` computes it for a
            uniform density over the shapes' areas (overlaps counted twice).
        linear_damping: Velocity damping [1/s], >= 0 (implicit: ``v /= 1 + h * damping``).
        angular_damping: Angular-velocity damping [1/s], >= 0.
        gravity: Constant acceleration [m/s^2] applied to the body (e.g. ``(0, -g)`` for balance).
    """

    shapes: tuple[Obstacle, ...]
    mass: float = 1.0
    inertia: float | None = None
    linear_damping: float = 0.0
    angular_damping: float = 0.0
    gravity: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        shapes = tuple(self.shapes)
        if not shapes:
            raise ValueError("Body.shapes must hold at least one Obstacle")
        for i, shape in enumerate(shapes):
            if not isinstance(shape, Obstacle):
                raise TypeError(f"Body.shapes[{i}] must be an Obstacle, got {type(shape).__name__}")
            if shape.shape not in (ObstacleShape.CIRCLE, ObstacleShape.BOX):
                raise ValueError(f"Body.shapes[{i}] must be a CIRCLE or BOX, got {shape.shape.name}")
        object.__setattr__(self, "shapes", shapes)
        _check_positive("Body.mass", self.mass)
        if self.inertia is not None:
            _check_positive("Body.inertia", self.inertia)
        _check_positive("Body.linear_damping", self.linear_damping, allow_zero=True)
        _check_positive("Body.angular_damping", self.angular_damping, allow_zero=True)
        if len(self.gravity) != 2 or not all(math.isfinite(g) for g in self.gravity):
            raise ValueError(f"Body.gravity must be a finite (gx, gy) pair, got {self.gravity!r}")
        object.__setattr__(self, "gravity", (float(self.gravity[0]), float(self.gravity[1])))

    @property
    def moment_of_inertia(self) -> float:
        """``inertia``, or the uniform-density value over the shapes [kg m^2]."""
        if self.inertia is not None:
            return float(self.inertia)
        areas, own = [], []
        for shape in self.shapes:
            a, b = shape.size
            if shape.shape == ObstacleShape.CIRCLE:
                areas.append(math.pi * a * a)
                own.append(0.5 * a * a)
            else:
                areas.append(4.0 * a * b)
                own.append((a * a + b * b) / 3.0)
        total = sum(areas)
        return sum(
            self.mass * area / total * (per_mass + shape.center[0] ** 2 + shape.center[1] ** 2)
            for area, per_mass, shape in zip(areas, own, self.shapes, strict=True)
        )

    @property
    def bounding_radius(self) -> float:
        """Radius [m] of a disc about the centre of mass that holds every shape."""
        reach = []
        for shape in self.shapes:
            (cx, cy), (a, b) = shape.center, shape.size
            if shape.shape == ObstacleShape.CIRCLE:
                reach.append(math.hypot(cx, cy) + a)
                continue
            cos, sin = math.cos(shape.angle), math.sin(shape.angle)
            for sx, sy in ((-a, -b), (-a, b), (a, -b), (a, b)):
                reach.append(math.hypot(cx + cos * sx - sin * sy, cy + sin * sx + cos * sy))
        return max(reach)


@dataclass(frozen=True)
class Joint:
    """A distance (rod) joint: keeps two anchor points ``length`` apart with a stiff spring-damper.

    Endpoint 1 is an agent's centre (``agent``) or an anchor on another body (``other_body``,
    ``other_anchor``); endpoint 2 is ``anchor`` on ``body``. Exactly one of ``agent`` and
    ``other_body`` is set. The force is ``k (|d| - length) n + c (dv . n) n`` along the anchor
    separation ``d``; ``k`` and ``c`` are capped at the substep's stability limit (see
    docs/bodies.md), so a joint is stable at any dt.

    Attributes:
        body: Index of the body of endpoint 2.
        anchor: Endpoint 2 in ``body``'s frame [m].
        agent: Agent index of endpoint 1, or ``None``.
        other_body: Body index of endpoint 1, or ``None``.
        other_anchor: Endpoint 1 in ``other_body``'s frame [m] (ignored for an agent).
        length: Rest length [m], >= 0 (0 pins the two points together).
        stiffness: Spring constant [N/m], > 0 (before the stability cap).
        damping: Damping [N s/m] along the joint, >= 0 (before the stability cap).
    """

    body: int
    anchor: tuple[float, float] = (0.0, 0.0)
    agent: int | None = None
    other_body: int | None = None
    other_anchor: tuple[float, float] = (0.0, 0.0)
    length: float = 0.0
    stiffness: float = 1.0e4
    damping: float = 1.0e2

    def __post_init__(self) -> None:
        if (self.agent is None) == (self.other_body is None):
            raise ValueError("Joint needs exactly one of agent= and other_body=")
        for name in ("body", "agent", "other_body"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"Joint.{name} must be an int >= 0, got {value!r}")
        if self.other_body is not None and self.other_body == self.body:
            raise ValueError(f"Joint joins body {self.body} to itself")
        for name in ("anchor", "other_anchor"):
            value = getattr(self, name)
            if len(value) != 2 or not all(math.isfinite(v) for v in value):
                raise ValueError(f"Joint.{name} must be a finite (x, y) pair, got {value!r}")
        _check_positive("Joint.length", self.length, allow_zero=True)
        _check_positive("Joint.stiffness", self.stiffness)
        _check_positive("Joint.damping", self.damping, allow_zero=True)


def _check_bodies_and_joints(world: WorldConfig) -> None:
    bodies = tuple(world.bodies)
    joints = tuple(world.joints)
    for i, body in enumerate(bodies):
        if not isinstance(body, Body):
            raise TypeError(f"WorldConfig.bodies[{i}] must be a Body, got {type(body).__name__}")
    for i, joint in enumerate(joints):
        if not isinstance(joint, Joint):
            raise TypeError(f"WorldConfig.joints[{i}] must be a Joint, got {type(joint).__name__}")
        for name in ("body", "other_body"):
            index = getattr(joint, name)
            if index is not None and index >= len(bodies):
                raise ValueError(f"WorldConfig.joints[{i}].{name}={index} but there are {len(bodies)} bodies")
    object.__setattr__(world, "bodies", bodies)
    object.__setattr__(world, "joints", joints)
