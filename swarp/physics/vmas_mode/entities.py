"""The VMAS mode's model and state: ``VmasWorldConfig`` (the world's constants), ``EntityTable``
(one row per entity) and ``EntityState`` (the per-env state the step advances).

**Row order.** The table's rows are VMAS's ``world.entities``: landmarks first, then agents, each
list in the order it was added. The order is part of the model: contact pairs are enumerated as
rows ``a < b`` in it and every entity's forces are summed in float32 in that pair order
(docs/vmas_reference.md, sections 3.3 and 3.9), so a table in another order steps to different bits.

**Precision.** The table's parameters are float64, as VMAS keeps them as Python floats. Derived
constants (the moment of inertia, ``1 - drag``, the circumscribed radius) are computed in double
from them and rounded to float32 once, at the point where VMAS's tensor-scalar operations round them;
the state is float32.

**Sentinels.** A limit that is not set (VMAS's ``None`` for ``max_speed``, ``v_range``, ``max_f``,
``f_range``, ``max_t``, ``t_range``) is ``inf``; a friction that does not apply is ``NaN``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import NamedTuple

import torch

#: Shape codes of ``EntityTable.shape``.
SPHERE, BOX, LINE = 0, 1, 2
SHAPE_NAMES = {SPHERE: "sphere", BOX: "box", LINE: "line"}

#: VMAS 1.5.2's world defaults (``vmas/simulator/utils.py`` constants and ``World.__init__``).
DEFAULT_DT = 0.1  # [s]
DEFAULT_DRAG = 0.25  # share of the velocity removed once per env step
DEFAULT_COLLISION_FORCE = 100.0  # [N]
DEFAULT_JOINT_FORCE = 130.0  # [N]
DEFAULT_TORQUE_CONSTRAINT_FORCE = 1.0  # [N m]
DEFAULT_CONTACT_MARGIN = 1e-3  # [m]


def _check_number(name: str, value, *, low: float = -math.inf, low_open: bool = False, high: float = math.inf) -> None:
    """Raise ``TypeError`` unless ``value`` is a real number, ``ValueError`` unless it is finite and
    lies in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise ValueError(f"{name} must be finite and in {bound}, got {value}")


@dataclass(frozen=True)
class VmasWorldConfig:
    """VMAS's world constants (``vmas.simulator.core.World``'s arguments); defaults are VMAS's.

    Attributes:
        dt: Env step [s], > 0.
        substeps: Physics substeps per env step, >= 1; each lasts ``sub_dt = dt / substeps``.
        drag: Share of velocity and angular velocity removed once per env step (at substep 0) from
            entities whose own ``drag`` is unset, in [0, 1].
        linear_friction: Friction coefficient [m/s^2] (force per kg) of entities whose own is
            unset; 0 means none. >= 0.
        angular_friction: The same for rotation [rad/s^2]; 0 means none. >= 0.
        gravity: World gravity (x, y) [m/s^2], applied to movable entities.
        x_semidim, y_semidim: Positions are clamped to ``[-x_semidim, x_semidim]`` (resp. y) after
            every substep [m], > 0; ``None``: unbounded.
        collision_force: Contact force scale [N], >= 0.
        joint_force: Joint force scale [N], >= 0 (no joints are modelled yet).
        torque_constraint_force: Joint rotation-constraint scale [N m], >= 0 (unused yet).
        contact_margin: Softness of the contact law [m], > 0 (docs/vmas_reference.md, 3.4).
    """

    dt: float = DEFAULT_DT
    substeps: int = 1
    drag: float = DEFAULT_DRAG
    linear_friction: float = 0.0
    angular_friction: float = 0.0
    gravity: tuple[float, float] = (0.0, 0.0)
    x_semidim: float | None = None
    y_semidim: float | None = None
    collision_force: float = DEFAULT_COLLISION_FORCE
    joint_force: float = DEFAULT_JOINT_FORCE
    torque_constraint_force: float = DEFAULT_TORQUE_CONSTRAINT_FORCE
    contact_margin: float = DEFAULT_CONTACT_MARGIN

    def __post_init__(self) -> None:
        _check_number("VmasWorldConfig.dt", self.dt, low=0.0, low_open=True)
        if isinstance(self.substeps, bool) or not isinstance(self.substeps, int) or self.substeps < 1:
            raise ValueError(f"VmasWorldConfig.substeps must be an int >= 1, got {self.substeps!r}")
        _check_number("VmasWorldConfig.drag", self.drag, low=0.0, high=1.0)
        for name in ("linear_friction", "angular_friction", "collision_force", "joint_force"):
            _check_number(f"VmasWorldConfig.{name}", getattr(self, name), low=0.0)
        _check_number("VmasWorldConfig.torque_constraint_force", self.torque_constraint_force, low=0.0)
        _check_number("VmasWorldConfig.contact_margin", self.contact_margin, low=0.0, low_open=True)
        if len(tuple(self.gravity)) != 2:
            raise ValueError(f"VmasWorldConfig.gravity must be a pair (x, y) [m/s^2], got {self.gravity!r}")
        for value in self.gravity:
            _check_number("VmasWorldConfig.gravity", value)
        object.__setattr__(self, "gravity", tuple(float(g) for g in self.gravity))
        for name in ("x_semidim", "y_semidim"):
            if getattr(self, name) is not None:
                _check_number(f"VmasWorldConfig.{name}", getattr(self, name), low=0.0, low_open=True)

    @property
    def sub_dt(self) -> float:
        """One substep [s]: ``dt / substeps`` in double, as VMAS computes it."""
        return self.dt / self.substeps


@dataclass(frozen=True)
class EntitySpec:
    """One entity as VMAS's ``Landmark`` / ``Agent`` constructors describe it (Python scalars; ``None``
    is VMAS's "not set"). Defaults are a VMAS ``Landmark``'s: an immovable sphere of radius 0.05 m.
    ``EntityTable.from_specs`` resolves the unset values against a ``VmasWorldConfig``.

    Attributes:
        shape: ``SPHERE``, ``BOX`` or ``LINE``.
        size: (radius, 0) for a sphere, (length, width) for a box, (length, 0) for a line [m]; a box's
            length lies along its local x axis (the direction of ``rot``).
        hollow: A hollow box pushes only from its perimeter.
        mass: [kg], > 0.
        movable, rotatable, collide: VMAS's flags.
        is_agent: Agents take an action force and torque; landmarks do not.
        drag: Own drag in [0, 1]; ``None``: the world's.
        linear_friction, angular_friction: Own coefficients [m/s^2], [rad/s^2]; ``None``: the world's
            where it is > 0, else none.
        gravity: Own gravity (x, y) [m/s^2] added to the world's; ``None``: none.
        max_speed: Speed limit [m/s] (norm clamp after each substep); ``v_range``: per-component
            velocity limit [m/s]; ``max_f`` / ``f_range``: norm / per-component limit of the action
            force [N]; ``max_t`` / ``t_range``: the same for the action torque [N m]. ``None``: none.
    """

    shape: int = SPHERE
    size: tuple[float, float] = (0.05, 0.0)
    hollow: bool = False
    mass: float = 1.0
    movable: bool = False
    rotatable: bool = False
    collide: bool = True
    is_agent: bool = False
    drag: float | None = None
    linear_friction: float | None = None
    angular_friction: float | None = None
    gravity: tuple[float, float] | None = None
    max_speed: float | None = None
    v_range: float | None = None
    max_f: float | None = None
    f_range: float | None = None
    max_t: float | None = None
    t_range: float | None = None


#: ``EntityTable``'s limits (``inf``: none), its [N] float64 fields and its [N] bool fields.
_LIMITS = ("max_speed", "v_range", "max_f", "f_range", "max_t", "t_range")
_FLOAT_ROWS = ("mass", "drag", "linear_friction", "angular_friction", *_LIMITS)
_BOOL_ROWS = ("hollow", "movable", "rotatable", "is_agent")


@dataclass(frozen=True, eq=False)
class EntityTable:
    """The static model of a VMAS world: one row per entity, in ``world.entities`` order (landmarks,
    then agents; the order fixes pair enumeration and summation order, see the module docstring).
    All tensors live on one device; ``[N]`` unless stated. Tables compare and hash by identity (the
    step caches its pair list per table).

    Attributes:
        shape: [N] int32, ``SPHERE`` / ``BOX`` / ``LINE``.
        size: [N, 2] float64 [m]: sphere (radius, 0), box (length, width), line (length, 0).
        hollow: [N] bool, hollow boxes (False for other shapes).
        mass: [N] float64 [kg], > 0.
        movable, rotatable: [N] bool.
        collides: [N, N] bool, symmetric, False on the diagonal: the pair may collide. Resolved on the
            host: both entities' ``collide`` flags and both collision filters accept, and not both
            entities are immovable and unrotatable (VMAS's ``World.collides`` without its broad phase).
        drag: [N] float64 in [0, 1], resolved: the entity's own, else the world's.
        linear_friction, angular_friction: [N] float64, resolved: the entity's own if set (even 0),
            else the world's if it is > 0, else ``NaN`` (no friction). [m/s^2], [rad/s^2].
        max_speed, v_range: [N] float64 [m/s], ``inf``: none.
        max_f, f_range: [N] float64 [N], ``inf``: none (agents only).
        max_t, t_range: [N] float64 [N m], ``inf``: none (agents only).
        gravity: [N, 2] float64 [m/s^2], the entity's own gravity (zeros for none).
        is_agent: [N] bool.
    """

    shape: torch.Tensor
    size: torch.Tensor
    hollow: torch.Tensor
    mass: torch.Tensor
    movable: torch.Tensor
    rotatable: torch.Tensor
    collides: torch.Tensor
    drag: torch.Tensor
    linear_friction: torch.Tensor
    angular_friction: torch.Tensor
    max_speed: torch.Tensor
    v_range: torch.Tensor
    max_f: torch.Tensor
    f_range: torch.Tensor
    max_t: torch.Tensor
    t_range: torch.Tensor
    gravity: torch.Tensor
    is_agent: torch.Tensor

    def __post_init__(self) -> None:
        for item in fields(self):
            if not isinstance(getattr(self, item.name), torch.Tensor):
                raise TypeError(f"EntityTable.{item.name} must be a torch.Tensor, got {type(getattr(self, item.name))}")
        if self.shape.dim() != 1:
            raise ValueError(f"EntityTable.shape must be [N] int32, got shape {list(self.shape.shape)}")
        n = self.shape.shape[0]
        expected = {"shape": (torch.int32, (n,)), "size": (torch.float64, (n, 2)), "gravity": (torch.float64, (n, 2))}
        expected["collides"] = (torch.bool, (n, n))
        expected.update({name: (torch.float64, (n,)) for name in _FLOAT_ROWS})
        expected.update({name: (torch.bool, (n,)) for name in _BOOL_ROWS})
        devices = {getattr(self, name).device for name in expected}
        if len(devices) > 1:
            raise ValueError(f"EntityTable's tensors must share one device, got {sorted(map(str, devices))}")
        for name, (dtype, shape) in expected.items():
            value = getattr(self, name)
            if value.dtype != dtype or tuple(value.shape) != shape:
                raise ValueError(
                    f"EntityTable.{name} must be {dtype} of shape {list(shape)} (N = {n} entities, from "
                    f"EntityTable.shape [N]), got {value.dtype} of shape {list(value.shape)}"
                )
        self._check_values()

    def _check_values(self) -> None:
        shape, size = self.shape.cpu(), self.size.cpu()
        if not bool(((shape == SPHERE) | (shape == BOX) | (shape == LINE)).all()):
            raise ValueError(f"EntityTable.shape holds codes SPHERE=0, BOX=1, LINE=2, got {shape.tolist()}")
        first_ok = torch.isfinite(size[:, 0]) & (size[:, 0] > 0)
        second_ok = torch.where(shape == BOX, torch.isfinite(size[:, 1]) & (size[:, 1] > 0), size[:, 1] == 0)
        for row in torch.nonzero(~(first_ok & second_ok)).flatten().tolist():
            wanted = "(length > 0, width > 0)" if shape[row] == BOX else "(> 0, 0)"
            raise ValueError(
                f"EntityTable.size of entity {row} ({SHAPE_NAMES[int(shape[row])]}) must be {wanted} [m], "
                f"got {size[row].tolist()}"
            )
        if bool((self.hollow.cpu() & (shape != BOX)).any()):
            raise ValueError("EntityTable.hollow may be True only for boxes")
        checks = {
            "mass": lambda v: torch.isfinite(v) & (v > 0),
            "drag": lambda v: (v >= 0) & (v <= 1),
            "linear_friction": lambda v: torch.isnan(v) | (torch.isfinite(v) & (v >= 0)),
            "angular_friction": lambda v: torch.isnan(v) | (torch.isfinite(v) & (v >= 0)),
            **{name: (lambda v: v >= 0) for name in _LIMITS},
        }
        meaning = {"mass": "finite and > 0", "drag": "in [0, 1]", **{name: ">= 0 (inf: none)" for name in _LIMITS}}
        for name, ok in checks.items():
            value = getattr(self, name).cpu()
            if not bool(ok(value).all()):
                wanted = meaning.get(name, "NaN (none) or finite and >= 0")
                raise ValueError(f"EntityTable.{name} must be {wanted}, got {value.tolist()}")
        if not bool(torch.isfinite(self.gravity).all()):
            raise ValueError(f"EntityTable.gravity must be finite, got {self.gravity.tolist()}")
        collides = self.collides.cpu()
        if bool(collides.diagonal().any()) or not bool((collides == collides.T).all()):
            raise ValueError("EntityTable.collides must be symmetric and False on the diagonal")

    @property
    def n_entities(self) -> int:
        """N, the number of rows."""
        return self.shape.shape[0]

    @property
    def device(self) -> torch.device:
        """The device of the table's tensors."""
        return self.shape.device

    @property
    def moment_of_inertia(self) -> torch.Tensor:
        """[N] float64 [kg m^2], VMAS's formulas in double: sphere ``(1/2) m r^2``, box
        ``(1/12) m (L^2 + W^2)``, line ``(1/12) m L^2`` (a line's width in ``size`` is 0)."""
        squared = self.size[:, 0] ** 2 + self.size[:, 1] ** 2
        return torch.where(
            self.shape == SPHERE, (1 / 2) * self.mass * self.size[:, 0] ** 2, (1 / 12) * self.mass * squared
        )

    @property
    def circumscribed_radius(self) -> torch.Tensor:
        """[N] float64 [m]: the sphere's radius, a box's half diagonal, half a line's length (the
        broad phase's reach)."""
        half = self.size / 2
        box = torch.sqrt(half[:, 0] ** 2 + half[:, 1] ** 2)
        return torch.where(self.shape == SPHERE, self.size[:, 0], torch.where(self.shape == BOX, box, half[:, 0]))

    @classmethod
    def from_specs(
        cls,
        specs: Sequence[EntitySpec],
        config: VmasWorldConfig,
        accepts: torch.Tensor | None = None,
        device: torch.device | str = "cpu",
    ) -> EntityTable:
        """The table of ``specs`` (in ``world.entities`` order) in ``config``'s world.

        Args:
            specs: One ``EntitySpec`` per entity, landmarks first, then agents.
            config: The world; its drag and frictions fill the entities' unset ones (the rule of the
                ``EntityTable`` docstring).
            accepts: [N, N] bool, ``accepts[a, b]``: entity a's collision filter accepts b (VMAS's
                ``collision_filter``); ``None``: every filter accepts everything.
            device: Where the table's tensors live.
        """
        n = len(specs)
        if accepts is None:
            accepts = torch.ones(n, n, dtype=torch.bool)
        accepts = torch.as_tensor(accepts, dtype=torch.bool).cpu()
        if tuple(accepts.shape) != (n, n):
            raise ValueError(f"accepts must be [N, N] bool with N = {n} specs, got shape {list(accepts.shape)}")
        collide = torch.tensor([s.collide for s in specs], dtype=torch.bool)
        static = torch.tensor([not (s.movable or s.rotatable) for s in specs], dtype=torch.bool)
        collides = collide[:, None] & collide[None, :] & accepts & accepts.T
        collides &= ~torch.eye(n, dtype=torch.bool) & ~(static[:, None] & static[None, :])

        def world_friction(own: float | None, world: float) -> float:
            if own is not None:
                return own
            return world if world > 0 else math.nan

        def row(values, dtype=torch.float64) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device).reshape(n)

        def pairs(values) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float64, device=device).reshape(n, 2)

        def limit(name: str) -> torch.Tensor:
            return row([math.inf if getattr(s, name) is None else getattr(s, name) for s in specs])

        return cls(
            shape=row([s.shape for s in specs], torch.int32),
            size=pairs([tuple(s.size) for s in specs]),
            hollow=row([s.hollow for s in specs], torch.bool),
            mass=row([s.mass for s in specs]),
            movable=row([s.movable for s in specs], torch.bool),
            rotatable=row([s.rotatable for s in specs], torch.bool),
            collides=collides.to(device),
            drag=row([config.drag if s.drag is None else s.drag for s in specs]),
            linear_friction=row([world_friction(s.linear_friction, config.linear_friction) for s in specs]),
            angular_friction=row([world_friction(s.angular_friction, config.angular_friction) for s in specs]),
            **{name: limit(name) for name in _LIMITS},
            gravity=pairs([(0.0, 0.0) if s.gravity is None else tuple(s.gravity) for s in specs]),
            is_agent=row([s.is_agent for s in specs], torch.bool),
        )


class EntityState(NamedTuple):
    """The state ``step_torch`` advances, float32, E envs by N entities (the table's rows).

    Attributes:
        pos: [E, N, 2] position [m].
        vel: [E, N, 2] velocity [m/s].
        rot: [E, N] heading [rad], never wrapped.
        ang_vel: [E, N] angular velocity [rad/s].
    """

    pos: torch.Tensor
    vel: torch.Tensor
    rot: torch.Tensor
    ang_vel: torch.Tensor
