"""Integration limits: the largest substep ``h = dt / substeps`` each scheme integrates stably.

Every contact (agent-agent, agent-obstacle, soft wall, body) is the spring-damper
``F = max(k * penetration - c * closing speed, 0)`` of ``physics/contacts.py``. Linearised about a
contact against an immovable partner, one substep maps the (penetration, velocity) pair of the
lightest party linearly, ``(x, v) -> M (x, v)``. ``M`` comes from the update formulas the kernels
run (``substep_map``); with ``W`` the inverse mass, ``a = h^2 k W`` and ``b = h (c W + drag)``:

=================  =============================================  ==============================
scheme             update (``F`` from the substep start)           stable iff (drag 0)
=================  =============================================  ==============================
``VELOCITY_LEVEL`` ``v = u + F W h``, ``p += v h``                 ``a <= 2`` and ``b <= 1``
``SEMI_IMPLICIT``  ``v += (F W - drag v) h``, ``p += v h``         ``a + 2 b <= 4``, ``b <= 2``
``RK4_HELD``       RK4 of ``v' = F W - drag v``, ``p' = v``        held to ``SEMI_IMPLICIT``'s
``BODY``           ``v = (v + F W h) / (1 + h d)``, ``p += v h``   ``a + 2 b <= 4`` at ``d = 0``
=================  =============================================  ==============================

* ``VELOCITY_LEVEL``: holonomic VELOCITY control and both wheeled models (in either control mode
  their contact push is a velocity correction). The command is re-applied every substep, so the
  only memory is the previous push, which the damper reads. Required: neither the spring nor the
  damper alone over-corrects (``|1 - a| <= 1``, ``b <= 1``: ``stability_radius``), so a contact
  never throws an agent out farther than it came in and the contact opens. The joint linear map
  (``a + 2 b <= 2``) is stricter, but it only describes an agent jammed with no clearance on two
  sides; at navigation's defaults a 0.5 kg agent (``a = 2, b = 0.4``) violates it and runs
  NaN-free, divergence starting only at ``a ~ 4.4``.
* ``SEMI_IMPLICIT`` (holonomic ACCELERATION control and drones under EULER) and ``BODY`` (bodies,
  with their implicit damping ``d``): the velocity carries the contact's energy from substep to
  substep, so the full linear map must be stable (spectral radius <= 1).
* ``RK4_HELD`` (the same agents under RK4) holds the force over the substep: ``det M = 1 + a/2 - b``,
  so a weakly damped contact gains energy at every ``h``; the speed clip and the contact opening
  bound that gain, and its divergence (dt 0.25-0.4 s at navigation's contacts) lies above
  semi-implicit Euler's limit (0.181 s), which RK4 contacts are held to.

A body's inverse mass is ``1/M + L^2/I`` (``contact_lever``: a push at lever ``L`` both translates
and turns it). The design case is the lightest agent (or body) against an immovable partner: a
wall, an obstacle, or a neighbour it is pressed against. Contact-free, only the drag of
second-order agents is checked (Euler ``h drag <= 2``, RK4 ``h drag <= 2.79``); velocity-level
agents are then stable at any ``h``. In the sweeps of docs/reliability.md (random in-bounds
actions, 64 envs, auto-reset) divergence started at 1.2x (drone_navigation) to 2x the dt of
these limits, never within them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from swarp.core.config import AgentConfig, Body, ControlMode, DynamicsModel, Integrator, ObstacleShape, WorldConfig

#: Spectral radius still counted as stable [-]: 1 plus rounding (an undamped semi-implicit Euler
#: contact sits exactly on the unit circle; at the boundary the eigenvalue is double, and its
#: numerical error ~ sqrt(machine epsilon)).
STABLE_RADIUS = 1.0 + 1e-6


#: Factor on the contact stiffness and damping a body must still be stable at [-] (1.12x in substep).
#: Bodies carry momentum and have no speed clip: in the sweeps they diverged from 1.05-1.1x their
#: plain limit's substep, and just inside it disc bodies were pumped to 30-60 m/s by 1 m/s agents.
BODY_MARGIN = 1.25


class Scheme(enum.Enum):
    """How a substep integrates a contact force (see the module docstring)."""

    VELOCITY_LEVEL = "velocity-level contact push"
    SEMI_IMPLICIT = "semi-implicit Euler"
    RK4_HELD = "RK4, contact force held over the substep"
    BODY = "semi-implicit Euler of a body"


def scheme_of(model: DynamicsModel, ctrl_mode: ControlMode, integrator: Integrator) -> Scheme:
    """The ``Scheme`` that integrates the contacts of an agent."""
    second_order = model == DynamicsModel.DRONE or (
        model == DynamicsModel.HOLONOMIC and ctrl_mode == ControlMode.ACCELERATION
    )
    if not second_order:
        return Scheme.VELOCITY_LEVEL
    return Scheme.RK4_HELD if integrator == Integrator.RK4 else Scheme.SEMI_IMPLICIT


def _advance(scheme: Scheme, x, v, h, stiffness, damping, drag):
    """One substep of the linear contact model ``x'' = -stiffness x - damping x' - drag x'``
    (``stiffness = k W``, ``damping = c W`` [1/s^2], [1/s]) by ``scheme``, on numpy arrays."""
    accel = -stiffness * x - damping * v  # the contact force per mass, from the substep start
    if scheme == Scheme.VELOCITY_LEVEL:
        v_new = accel * h  # the command is re-applied every substep: it drops out of the linearisation
        return x + v_new * h, v_new
    if scheme == Scheme.SEMI_IMPLICIT:
        v_new = v + (accel - drag * v) * h
        return x + v_new * h, v_new
    if scheme == Scheme.BODY:
        v_new = (v + accel * h) / (1.0 + h * drag)
        return x + v_new * h, v_new
    k1 = accel - drag * v
    v2 = v + k1 * (0.5 * h)
    k2 = accel - drag * v2
    v3 = v + k2 * (0.5 * h)
    k3 = accel - drag * v3
    v4 = v + k3 * h
    k4 = accel - drag * v4
    return x + (v + 2.0 * (v2 + v3) + v4) * (h / 6.0), v + (k1 + 2.0 * (k2 + k3) + k4) * (h / 6.0)


def substep_map(scheme: Scheme, h, stiffness, damping, drag) -> np.ndarray:
    """The linear map ``(x, v) -> (x', v')`` of one substep, [..., 2, 2] float64.

    Args:
        scheme: The integration scheme.
        h: Substep [s]; ``stiffness`` (``k W``) [1/s^2], ``damping`` (``c W``) [1/s] and ``drag``
            [1/s]: numbers or arrays broadcasting together.
    """
    h, stiffness, damping, drag = np.broadcast_arrays(
        *(np.asarray(x, np.float64) for x in (h, stiffness, damping, drag))
    )
    one, zero = np.ones_like(h), np.zeros_like(h)
    columns = [_advance(scheme, x, v, h, stiffness, damping, drag) for x, v in ((one, zero), (zero, one))]
    return np.stack([np.stack(columns[0], -1), np.stack(columns[1], -1)], -1)


def spectral_radius(scheme: Scheme, h, stiffness, damping, drag) -> np.ndarray:
    """Largest eigenvalue modulus of ``substep_map`` [...]: the growth per substep of the worst mode."""
    return np.abs(np.linalg.eigvals(substep_map(scheme, h, stiffness, damping, drag))).max(-1)


def stability_radius(scheme: Scheme, h, stiffness, damping, drag) -> np.ndarray:
    """What must stay <= ``STABLE_RADIUS`` [...]: the spectral radius of the substep map, and for
    ``VELOCITY_LEVEL`` the larger of its spring-only and damper-only maps' (see the module docstring)."""
    if scheme == Scheme.VELOCITY_LEVEL:
        spring = spectral_radius(scheme, h, stiffness, np.zeros_like(np.asarray(damping, np.float64)), drag)
        damper = spectral_radius(scheme, h, np.zeros_like(np.asarray(stiffness, np.float64)), damping, drag)
        return np.maximum(spring, damper)
    return spectral_radius(scheme, h, stiffness, damping, drag)


def largest_stable_substep(scheme: Scheme, stiffness: float, damping: float, drag: float) -> float:
    """The largest ``h`` [s] with ``stability_radius <= STABLE_RADIUS`` (``math.inf`` if every ``h``
    is, 0 if none is). Stable substeps form an interval ``[0, h_max]`` for these schemes."""

    def stable(h: float) -> bool:
        return bool(stability_radius(scheme, h, stiffness, damping, drag) <= STABLE_RADIUS)

    high = 1e-6
    while stable(high):
        high *= 2.0
        if high > 1e12:
            return math.inf
    low = 0.0
    for _ in range(80):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if stable(mid) else (low, mid)
    return low


def contacts_possible(world: WorldConfig) -> bool:
    """Whether any contact force can act in ``world``: agent collisions, soft walls, obstacles or bodies."""
    soft_walls = world.bounds is not None and world.bounds_mode == "soft"
    return world.collisions or soft_walls or bool(world.obstacles) or bool(world.bodies)


@dataclass(frozen=True)
class Term:
    """One stiff term a substep must integrate stably.

    Attributes:
        what: Who (``"agent 3"``, ``"body 0"``), for the error message.
        detail: What kind of agent or body it is, in words.
        scheme: The scheme integrating it.
        inverse_mass: ``W`` [1/kg].
        drag: Velocity damping [1/s] integrated with it.
        contact: Whether the contact spring-damper acts (otherwise only ``drag``).
        margin: Factor on the contact stiffness and damping the term must still be stable at [-].
    """

    what: str
    detail: str
    scheme: Scheme
    inverse_mass: float
    drag: float
    contact: bool
    margin: float = 1.0

    @property
    def checked_scheme(self) -> Scheme:
        """The scheme whose stability is required: an RK4 contact is held to semi-implicit Euler's
        (its own map gains energy at every h without enough damping; see the module docstring)."""
        return Scheme.SEMI_IMPLICIT if self.scheme == Scheme.RK4_HELD and self.contact else self.scheme

    def coefficients(self, world: WorldConfig) -> tuple[float, float, float]:
        """``(k W, c W, drag)`` of the linear contact model [1/s^2, 1/s, 1/s]."""
        k, c = (world.collision_k, world.collision_damping) if self.contact else (0.0, 0.0)
        w = self.inverse_mass * self.margin
        return k * w, c * w, self.drag

    def limit(self, world: WorldConfig) -> float:
        """The largest substep [s] that integrates the term stably (by ``checked_scheme``)."""
        return largest_stable_substep(self.checked_scheme, *self.coefficients(world))

    def describe(self, world: WorldConfig) -> str:
        """``"<kind>", "<who> (<scheme>) for <values>"`` for the error message."""
        scheme = "RK4" if self.scheme == Scheme.RK4_HELD and not self.contact else self.scheme.value
        who = f"{self.what} ({self.detail}; {scheme})"
        if not self.contact:
            return "drag", f"{who} for drag={self.drag:.4g} 1/s"
        drag_name = "implicit damping" if self.scheme == Scheme.BODY else "drag"
        drag = f", {drag_name}={self.drag:.4g} 1/s" if self.drag else ""
        mass = "an effective mass of" if self.scheme == Scheme.BODY else "a mass of"
        margin = f" (held to {self.margin:g}x the stiffness)" if self.margin != 1.0 else ""
        return "contact", (
            f"{who} for collision_k={world.collision_k:.4g} N/m, collision_damping="
            f"{world.collision_damping:.4g} N s/m{drag} on {mass} {1.0 / self.inverse_mass:.4g} kg{margin}"
        )


def agent_terms(
    agents: Sequence[AgentConfig],
    world: WorldConfig,
    integrator: Integrator,
    masses: Sequence[Sequence[float]] | None = None,
    drags: Sequence[Sequence[float]] | None = None,
) -> list[Term]:
    """The terms of each agent: its contact against an immovable partner (when contacts are
    possible), or its drag alone (second-order agents with drag).

    Args:
        agents: The fleet.
        world: The world (its contact constants, whether contacts can act).
        integrator: The stepper's integrator.
        masses, drags: Per agent, the candidate values [kg], [1/s] (a per-env table's extremes);
            default: the configured ones. Every (mass, drag) pair is checked, so a table's corners
            bound every row.
    """
    contact = contacts_possible(world)
    terms = {}  # one term per distinct (scheme, W, drag): fleets are mostly copies of a few agents
    for i, cfg in enumerate(agents):
        scheme = scheme_of(cfg.model, cfg.ctrl_mode, integrator)
        second_order = scheme != Scheme.VELOCITY_LEVEL
        if not contact and not second_order:
            continue  # nothing stiff: velocity-level agents without contacts are stable at any h
        mode = "" if cfg.model == DynamicsModel.DRONE else f", {cfg.ctrl_mode.name.lower()} control"
        detail = f"{cfg.model.name.lower()}{mode}"
        for mass in masses[i] if masses is not None else (cfg.mass,):
            for drag in drags[i] if drags is not None else (cfg.drag,):
                drag = float(drag) if second_order else 0.0
                if contact or drag > 0.0:
                    term = Term(f"agent {i}", detail, scheme, 1.0 / float(mass), drag, contact)
                    terms.setdefault((scheme, term.inverse_mass, drag), term)
    return list(terms.values())


def contact_lever(body: Body) -> float:
    """Largest lever arm [m] about a body's centre of mass of a contact normal on it: a circle's
    normals pass through its centre (lever <= its offset), a box's farthest point is a corner."""
    levers = []
    for shape in body.shapes:
        (cx, cy), (a, b) = shape.center, shape.size
        if shape.shape == ObstacleShape.CIRCLE:
            levers.append(math.hypot(cx, cy))
        else:
            cos, sin = math.cos(shape.angle), math.sin(shape.angle)
            levers.extend(
                math.hypot(cx + cos * sx - sin * sy, cy + sin * sx + cos * sy) for sx in (-a, a) for sy in (-b, b)
            )
    return max(levers)


def body_terms(world: WorldConfig) -> list[Term]:
    """Each body's contacts against an immovable partner, at its largest inverse effective mass
    ``1/M + L^2/I`` (``L`` = ``contact_lever``: a push there both translates and turns it), with the
    smaller of its two implicit dampings, held to ``BODY_MARGIN`` times the contact stiffness."""
    terms = []
    for b, body in enumerate(world.bodies):
        lever = contact_lever(body)
        inverse_mass = 1.0 / body.mass + lever**2 / body.moment_of_inertia
        damping = min(body.linear_damping, body.angular_damping)
        detail = f"mass {body.mass:.4g} kg, inertia {body.moment_of_inertia:.4g} kg m^2, lever {lever:.4g} m"
        terms.append(Term(f"body {b}", detail, Scheme.BODY, inverse_mass, damping, True, BODY_MARGIN))
    return terms


def check_substep(
    terms: Sequence[Term],
    world: WorldConfig,
    dt: float,
    substeps: int,
    name: str = "Stepper",
    remedy: str | None = None,
) -> None:
    """Raise a ``ValueError`` naming the limit, the values and the fix unless the substep
    ``dt / substeps`` [s] integrates every term stably (spectral radius <= ``STABLE_RADIUS``).

    Args:
        terms: What to check (``agent_terms`` + ``body_terms``).
        world: Their world (contact constants).
        dt, substeps: The step [s] and its substeps.
        name: What is being checked, first in the message.
        remedy: The fix to suggest besides more substeps (default: more substeps or a smaller dt).
    """
    h = dt / substeps
    worst, worst_radius = None, STABLE_RADIUS
    for scheme in Scheme:
        group = [term for term in terms if term.checked_scheme == scheme]
        if not group:
            continue
        stiffness, damping, drag = np.array([term.coefficients(world) for term in group]).T
        radii = stability_radius(scheme, h, stiffness, damping, drag)  # batched eigen solves
        index = int(np.argmax(radii))
        if radii[index] > worst_radius:
            worst, worst_radius = group[index], float(radii[index])
    if worst is None:
        return
    limit = worst.limit(world)
    kind, where = worst.describe(world)
    digits = 4  # enough to tell the substep from the limit, rounded down so the suggestion is stable
    while digits < 12 and _round_down(limit, digits) >= float(f"{h:.{digits}g}"):
        digits += 1
    stated = f"{name}: the substep dt/substeps = {dt:.4g}/{substeps} = {h:.{digits}g} s"
    fix = f"use substeps >= {math.ceil(dt / limit)} or dt <= {_round_down(limit * substeps, digits):.{digits}g} s"
    if remedy is not None:
        fix = f"{remedy}, or build the world with substeps >= {math.ceil(dt / limit)}"
    limit_text = f"{_round_down(limit, digits):.{digits}g}"
    raise ValueError(f"{stated} exceeds the {kind} stability limit {limit_text} s of {where}: {fix}")


def _round_down(value: float, digits: int) -> float:
    """``value`` > 0 rounded down to ``digits`` significant digits."""
    unit = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.floor(value / unit) * unit


__all__ = [
    "BODY_MARGIN",
    "STABLE_RADIUS",
    "Scheme",
    "Term",
    "agent_terms",
    "body_terms",
    "check_substep",
    "contacts_possible",
    "largest_stable_substep",
    "scheme_of",
    "spectral_radius",
    "stability_radius",
    "substep_map",
]
