"""The VMAS mode's step in torch: VMAS 1.5.2's ``World.step`` on an ``EntityTable``.

One env step is ``config.substeps`` substeps of ``sub_dt = dt / substeps``; each substep runs VMAS's
stages in VMAS's order (docs/vmas_reference.md, section 3):

1. **Action.** Each movable agent's action force is clamped to ``max_f`` (norm), then to ``f_range``
   (per component); each rotatable agent's torque likewise to ``max_t``, ``t_range``. VMAS writes the
   clamped values back to ``agent.state.force``, so every later substep starts from them.
2. **Friction** from the velocity after the previous substep, per component
   ``-(v_i / |v|) min(mu m, |v_i| m / sub_dt)`` (angular: with the moment of inertia), then
   **gravity** ``m g`` (the world's, then the entity's own) on movable entities.
3. **Contacts** (``contacts.py``), pair by pair, with the per-env broad phase.
4. **Integration**, semi-implicit Euler: drag ``v (1 - drag)`` at substep 0 only, ``v += (F / m) sub_dt``,
   the ``max_speed`` norm clamp and the ``v_range`` component clamp, ``p += v sub_dt``, then the world's
   semidims clamp the position (the velocity is kept); rotation the same without limits.

Every entity's force is summed in VMAS's order (action, friction, gravity, contacts by group and pair)
with the same float32 operations, so a step matches VMAS's to the bit except where VMAS's
any-env broad phase acts in an env this one leaves out (``contacts.py``). Joints are not modelled:
the table has none yet.

**Capture.** ``VmasTorchStep`` builds on the host, once, everything a step needs that does not
change between steps: the float32 rows, the pair groups, and which terms apply at all (friction,
gravity). Its call then reads no tensor value on the host and uploads nothing, so a CUDA graph can
capture it (torch's ``torch.cuda.graph``, or the engine's ``CapturedTorchStep``). ``step_torch`` is
the functional form: it builds one and calls it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from swarp.physics.vmas_mode.contacts import BROAD_PHASES, add_contact_forces, contact_pairs
from swarp.physics.vmas_mode.entities import EntityState, EntityTable, VmasWorldConfig

#: Stand-in divisor for a zero speed in friction [m/s] (VMAS's).
ZERO_SPEED_DIVISOR = 1e-8


class StepRows(NamedTuple):
    """The table's per-entity constants as the step uses them: float32 [N] (rounded once from float64,
    where VMAS rounds its Python floats), masks [N] bool, on the state's device."""

    mass: torch.Tensor
    inertia: torch.Tensor
    keep: torch.Tensor  # 1 - drag
    linear_friction: torch.Tensor
    angular_friction: torch.Tensor
    max_speed: torch.Tensor
    v_range: torch.Tensor
    max_f: torch.Tensor
    f_range: torch.Tensor
    max_t: torch.Tensor
    t_range: torch.Tensor
    gravity: torch.Tensor  # [N, 2]
    pushed: torch.Tensor  # movable agents: take the action force
    turned: torch.Tensor  # rotatable agents: take the action torque
    movable: torch.Tensor
    rotatable: torch.Tensor


def step_rows(table: EntityTable, device: torch.device) -> StepRows:
    """The table's ``StepRows`` on ``device``."""

    def f32(values: torch.Tensor) -> torch.Tensor:
        return values.to(device=device, dtype=torch.float32)

    agent = table.is_agent
    return StepRows(
        mass=f32(table.mass),
        inertia=f32(table.moment_of_inertia),
        keep=f32(1 - table.drag),
        linear_friction=f32(table.linear_friction),
        angular_friction=f32(table.angular_friction),
        max_speed=f32(table.max_speed),
        v_range=f32(table.v_range),
        max_f=f32(table.max_f),
        f_range=f32(table.f_range),
        max_t=f32(table.max_t),
        t_range=f32(table.t_range),
        gravity=f32(table.gravity),
        pushed=(agent & table.movable).to(device),
        turned=(agent & table.rotatable).to(device),
        movable=table.movable.to(device),
        rotatable=table.rotatable.to(device),
    )


def clamp_norm(x: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """``x`` [..., k] scaled to norm ``limit`` [...] where its norm exceeds it (VMAS's
    ``clamp_with_norm``); an ``inf`` limit leaves ``x`` as it is."""
    length = torch.linalg.vector_norm(x, dim=-1).unsqueeze(-1)
    return torch.where(length > limit.unsqueeze(-1), (x / length) * limit.unsqueeze(-1), x)


def friction(velocity: torch.Tensor, coefficient: torch.Tensor, mass: torch.Tensor, sub_dt: float) -> torch.Tensor:
    """[E, N, k] friction force of velocity ``velocity`` [E, N, k] (k = 2: [N] from [m/s]; k = 1:
    [N m] from [rad/s]) for coefficients ``coefficient`` [N] and masses (or moments of inertia)
    ``mass`` [N], float32: ``-(v_i / |v|) min(mu m, |v_i| m / sub_dt)`` per component, 0 at rest."""
    speed = torch.linalg.vector_norm(velocity, dim=-1)
    resting = speed == 0
    limit = (coefficient * mass).unsqueeze(-1)
    heading = velocity / torch.where(resting, ZERO_SPEED_DIVISOR, speed).unsqueeze(-1)
    force = -heading * torch.minimum(limit, (velocity.abs() / sub_dt) * mass.unsqueeze(-1))
    return torch.where(resting.unsqueeze(-1), 0.0, force)


class ForceTerms(NamedTuple):
    """Which of stage 2's terms a table has at all, decided on the host once (so a step need not
    read the table's values to skip a term, a host sync on CUDA).

    Attributes:
        linear_friction: Some entity has a linear friction (a non-``NaN`` coefficient).
        angular_friction: Some entity has an angular friction.
        world_gravity: [2] float32 world gravity [m/s^2] on the table's device, ``None`` where it is 0.
        own_gravity: Some entity has its own gravity.
    """

    linear_friction: bool
    angular_friction: bool
    world_gravity: torch.Tensor | None
    own_gravity: bool


def force_terms(table: EntityTable, config: VmasWorldConfig) -> ForceTerms:
    """The ``ForceTerms`` of ``table`` in ``config``'s world (reads the table on the host)."""
    world = None
    if any(g != 0 for g in config.gravity):
        world = torch.tensor(config.gravity, dtype=torch.float32, device=table.device)
    return ForceTerms(
        linear_friction=bool((~torch.isnan(table.linear_friction)).any()),
        angular_friction=bool((~torch.isnan(table.angular_friction)).any()),
        world_gravity=world,
        own_gravity=bool((table.gravity != 0).any()),
    )


def body_forces(
    rows: StepRows,
    terms: ForceTerms,
    sub_dt: float,
    state: EntityState,
    force: torch.Tensor,
    torque: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 2 and the action's part of stage 1: the sums ``(F [E, N, 2] [N], T [E, N] [N m])`` of the
    (already clamped) action, friction and gravity, in VMAS's order; ``terms`` says which apply,
    ``sub_dt`` [s] is the substep."""
    total_force = torch.zeros_like(state.pos) + torch.where(rows.pushed.unsqueeze(-1), force, 0.0)
    total_torque = torch.zeros_like(state.rot) + torch.where(rows.turned, torque, 0.0)
    if terms.linear_friction:
        linear = friction(state.vel, rows.linear_friction, rows.mass, sub_dt)
        has_linear = ~torch.isnan(rows.linear_friction)
        total_force = total_force + torch.where(has_linear.unsqueeze(-1), linear, 0.0)
    if terms.angular_friction:
        angular = friction(state.ang_vel.unsqueeze(-1), rows.angular_friction, rows.inertia, sub_dt)
        has_angular = ~torch.isnan(rows.angular_friction)
        total_torque = total_torque + torch.where(has_angular, angular.squeeze(-1), 0.0)
    movable = rows.movable.unsqueeze(-1)
    if terms.world_gravity is not None:
        total_force = total_force + torch.where(movable, rows.mass.unsqueeze(-1) * terms.world_gravity, 0.0)
    if terms.own_gravity:
        total_force = total_force + torch.where(movable, rows.mass.unsqueeze(-1) * rows.gravity, 0.0)
    return total_force, total_torque


def integrate(
    rows: StepRows,
    config: VmasWorldConfig,
    state: EntityState,
    total_force: torch.Tensor,
    total_torque: torch.Tensor,
    substep: int,
) -> EntityState:
    """Stage 4: the state after one substep under ``total_force`` [E, N, 2] [N] and ``total_torque``
    [E, N] [N m]; immovable entities keep position and velocity, unrotatable ones heading and
    angular velocity."""
    sub_dt = config.sub_dt
    vel = state.vel * rows.keep.unsqueeze(-1) if substep == 0 else state.vel
    vel = vel + (total_force / rows.mass.unsqueeze(-1)) * sub_dt
    vel = clamp_norm(vel, rows.max_speed)
    vel = torch.clamp(vel, -rows.v_range.unsqueeze(-1), rows.v_range.unsqueeze(-1))
    pos = state.pos + vel * sub_dt
    x, y = pos[..., 0], pos[..., 1]
    if config.x_semidim is not None:
        x = x.clamp(-config.x_semidim, config.x_semidim)
    if config.y_semidim is not None:
        y = y.clamp(-config.y_semidim, config.y_semidim)
    pos = torch.stack([x, y], dim=-1)
    ang_vel = state.ang_vel * rows.keep if substep == 0 else state.ang_vel
    ang_vel = ang_vel + (total_torque / rows.inertia) * sub_dt
    rot = state.rot + ang_vel * sub_dt
    movable = rows.movable.unsqueeze(-1)
    return EntityState(
        pos=torch.where(movable, pos, state.pos),
        vel=torch.where(movable, vel, state.vel),
        rot=torch.where(rows.rotatable, rot, state.rot),
        ang_vel=torch.where(rows.rotatable, ang_vel, state.ang_vel),
    )


def check_inputs(table: EntityTable, state: EntityState, force: torch.Tensor, torque: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the argument unless the state and actions are float32 on the table's
    device with ``[E, N, 2]`` / ``[E, N]`` shapes for its N entities."""
    if not isinstance(state, EntityState):
        raise TypeError(f"state must be an EntityState, got {type(state).__name__}")
    n_envs = state.pos.shape[0] if state.pos.dim() == 3 else -1
    n = table.n_entities
    expected = {
        "state.pos": (state.pos, (n_envs, n, 2)),
        "state.vel": (state.vel, (n_envs, n, 2)),
        "state.rot": (state.rot, (n_envs, n)),
        "state.ang_vel": (state.ang_vel, (n_envs, n)),
        "force": (force, (n_envs, n, 2)),
        "torque": (torque, (n_envs, n)),
    }
    for name, (value, shape) in expected.items():
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or tuple(value.shape) != shape:
            got = f"{value.dtype} of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value)
            raise ValueError(f"{name} must be float32 of shape {list(shape)} (E envs, N = {n} entities), got {got}")
        if value.device != table.device:
            raise ValueError(f"{name} is on {value.device}, the table on {table.device}: use one device")


class VmasTorchStep:
    """One VMAS env step (all substeps) of E envs, VMAS 1.5.2's ``World.step``, ready to be captured.

    Construction reads the table on the host once: its float32 rows (``step_rows``), its pair groups
    in VMAS's order (``contacts.contact_pairs``) and which force terms apply (``force_terms``). A call
    then only launches torch operations on the state's device: no host read of a tensor value, no
    host-to-device copy, no Python branch on a tensor's value, so it runs inside a CUDA graph capture
    (its temporaries and outputs come from the capture's memory pool; a caller that keeps its state in
    fixed tensors copies the returned state into them). The step is differentiable in torch.

        step = VmasTorchStep(table, config)
        state = step(state, force, torque)     # == step_torch(table, config, state, force, torque)

    Args:
        table: The entities (N rows, VMAS's ``world.entities`` order), on the device the states will be.
        config: The world's constants.
        broad_phase: ``"per_env"`` (a pair is evaluated in an env where its centres are within the
            sum of circumscribed radii there) or ``"any_env"`` (VMAS's: in every env once that holds
            in any env, which couples the envs; for parity checks). ``contacts.py`` explains.
    """

    def __init__(self, table: EntityTable, config: VmasWorldConfig, broad_phase: str = "per_env") -> None:
        if broad_phase not in BROAD_PHASES:
            raise ValueError(f"broad_phase must be one of {BROAD_PHASES}, got {broad_phase!r}")
        self.table = table
        self.config = config
        self.broad_phase = broad_phase
        self.rows = step_rows(table, table.device)
        self.pairs = contact_pairs(table)
        self.terms = force_terms(table, config)

    def __call__(self, state: EntityState, force: torch.Tensor, torque: torch.Tensor) -> EntityState:
        """The state after one env step.

        Args:
            state: The state before the step: float32 ``pos`` [E, N, 2] [m], ``vel`` [E, N, 2] [m/s],
                ``rot`` [E, N] [rad], ``ang_vel`` [E, N] [rad/s], on the table's device.
            force: [E, N, 2] float32 action force [N] of each agent, VMAS's ``agent.state.force`` after
                the action processing (``actions.VmasActions``), before the world's clamps. Rows of
                landmarks, and of agents that are not movable, are ignored.
            torque: [E, N] float32 action torque [N m] (``agent.state.torque``); used for rotatable
                agents.

        Returns:
            The state after the step (new tensors; the inputs are not modified). VMAS also leaves the
            clamped action force in ``agent.state.force``; that is not returned.
        """
        check_inputs(self.table, state, force, torque)
        rows, config = self.rows, self.config
        for substep in range(config.substeps):
            force = clamp_norm(force, rows.max_f)
            force = torch.clamp(force, -rows.f_range.unsqueeze(-1), rows.f_range.unsqueeze(-1))
            torque = clamp_norm(torque.unsqueeze(-1), rows.max_t).squeeze(-1)
            torque = torch.clamp(torque, -rows.t_range, rows.t_range)
            total_force, total_torque = body_forces(rows, self.terms, config.sub_dt, state, force, torque)
            add_contact_forces(
                self.table,
                state.pos,
                state.rot,
                total_force,
                total_torque,
                config.collision_force,
                config.contact_margin,
                self.broad_phase,
                groups=self.pairs,
            )
            state = integrate(rows, config, state, total_force, total_torque, substep)
        return state


def step_torch(
    table: EntityTable,
    config: VmasWorldConfig,
    state: EntityState,
    force: torch.Tensor,
    torque: torch.Tensor,
    broad_phase: str = "per_env",
) -> EntityState:
    """One VMAS env step (all substeps) of E envs, VMAS 1.5.2's ``World.step``: ``VmasTorchStep(table,
    config, broad_phase)(state, force, torque)``, built for this one call (it reads the table on the
    host: a caller that steps every step, or captures the step, builds a ``VmasTorchStep`` once).

    Args:
        table: The entities (N rows, VMAS's ``world.entities`` order).
        config: The world's constants.
        state: The state before the step: float32 ``pos`` [E, N, 2] [m], ``vel`` [E, N, 2] [m/s], ``rot``
            [E, N] [rad], ``ang_vel`` [E, N] [rad/s].
        force: [E, N, 2] float32 action force [N] of each agent, VMAS's ``agent.state.force`` after the
            action processing (the dynamics' ``process_action``), before the world's clamps. Rows of
            landmarks, and of agents that are not movable, are ignored.
        torque: [E, N] float32 action torque [N m] (``agent.state.torque``); used for rotatable agents.
        broad_phase: ``"per_env"`` or ``"any_env"`` (``VmasTorchStep``).

    Returns:
        The state after the step (new tensors; the inputs are not modified). VMAS also leaves the
        clamped action force in ``agent.state.force``; that is not returned.
    """
    return VmasTorchStep(table, config, broad_phase)(state, force, torque)
