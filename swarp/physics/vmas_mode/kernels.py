"""The VMAS mode's step in Warp: the twin of ``reference.step_torch``, one thread per env.

``vmas_step`` (``step_kernel``) runs one env step, all substeps, of one env per thread, in place on
the state, in ``reference.py``'s order of stages and float32 operations:

1. **Body forces** (``body_forces``), per entity: the action force and torque of movable (rotatable)
   agents clamped to ``max_f`` then ``f_range`` (``max_t``, ``t_range``) and written back to the
   input, as VMAS overwrites ``agent.state.force`` so every later substep starts from the clamped
   value; friction from the velocity after the previous substep; gravity, the world's then the
   entity's own, on movable entities.
2. **Contacts**, over the table's pair list (``contacts.contact_pairs``: group by group in VMAS's
   order, pair by pair), each pair only where its centres are within the sum of circumscribed radii
   in this env (the per-env broad phase; VMAS's any-env rule, ``broad_phase="any_env"`` of the
   reference, is not in Warp). Walking the list in order sums every entity's contact forces in the
   reference's order, which fixes their float32 rounding.
3. **Integration** (``integrate``): drag at substep 0, ``v += F / m sub_dt``, the ``max_speed`` and
   ``v_range`` clamps, ``p += v sub_dt``, the semidims; rotation likewise without limits.

The per-entity sums live in scratch arrays ``[N, E]`` (entity-major, so that the threads of a warp,
consecutive envs, touch consecutive addresses), allocated once by ``VmasStep``; a step allocates
nothing and never synchronises with the host, so it can be captured in a CUDA graph. Kernels compile
without FMA contraction (``fuse_fp=False``) and with only the pair kinds the table has
(``step_kernel``'s key). Forward only: no adjoint is generated.

With the reference's transcendentals rounded correctly the step matches ``step_torch`` to the bit;
with torch's own they differ by an ulp now and then (``warp_geometry``'s module doc,
``tests/physics/test_vmas_mode_warp.py``). Joints are not modelled, as in the reference.
"""

from __future__ import annotations

import functools

import torch
import warp as wp

from swarp.physics.vmas_mode.contacts import (
    BOX_BOX,
    BOX_LINE,
    BOX_SPHERE,
    LINE_LINE,
    LINE_SPHERE,
    SPHERE_SPHERE,
    contact_pairs,
)
from swarp.physics.vmas_mode.entities import SPHERE, EntityState, EntityTable, VmasWorldConfig
from swarp.physics.vmas_mode.reference import step_rows
from swarp.physics.vmas_mode.warp_contacts import box_box, box_line, box_sphere, line_line, line_sphere, sphere_sphere
from swarp.physics.vmas_mode.warp_geometry import norm
from swarp.runtime.launch import Launcher

#: The per-entity limits of ``VmasModel`` (``reference.StepRows``'s names; inf: none).
LIMITS = ("max_speed", "v_range", "max_f", "f_range", "max_t", "t_range")


@wp.struct
class VmasModel:
    """The table and the world as the step kernel reads them: float32 as ``reference.StepRows``
    rounds them, ``[N]`` per entity (table rows), ``[P]`` per contact pair (processing order).

    Attributes:
        size: [N] (radius, 0), (length, width) or (length, 0) [m].
        solid: [N] not hollow (read for boxes).
        mass: [N] [kg]; inertia: [N] moment of inertia [kg m^2]; keep: [N] ``1 - drag``.
        linear_friction, angular_friction: [N] [m/s^2], [rad/s^2]; NaN: none.
        max_speed, v_range: [N] [m/s]; max_f, f_range: [N] [N]; max_t, t_range: [N] [N m]; inf: none.
        gravity: [N] the entity's own gravity [m/s^2].
        pushed, turned: [N] movable (rotatable) agents, which take the action force (torque).
        movable, rotatable: [N] VMAS's flags; turned_by_contacts: [N] rotatable and not a sphere.
        pair_first, pair_second, pair_kind: [P] rows (canonical order) and ``contacts`` kind codes.
        pair_reach: [P] broad-phase reach [m], the sum of circumscribed radii rounded once.
        n_entities, n_pairs, substeps: N, P and the substeps of a step.
        sub_dt: [s]; collision_force: [N]; contact_margin: [m]; world_gravity: [m/s^2].
        x_semidim, y_semidim: position bounds [m], inf: none.
    """

    size: wp.array(dtype=wp.vec2)
    solid: wp.array(dtype=wp.bool)
    mass: wp.array(dtype=wp.float32)
    inertia: wp.array(dtype=wp.float32)
    keep: wp.array(dtype=wp.float32)
    linear_friction: wp.array(dtype=wp.float32)
    angular_friction: wp.array(dtype=wp.float32)
    max_speed: wp.array(dtype=wp.float32)
    v_range: wp.array(dtype=wp.float32)
    max_f: wp.array(dtype=wp.float32)
    f_range: wp.array(dtype=wp.float32)
    max_t: wp.array(dtype=wp.float32)
    t_range: wp.array(dtype=wp.float32)
    gravity: wp.array(dtype=wp.vec2)
    pushed: wp.array(dtype=wp.bool)
    turned: wp.array(dtype=wp.bool)
    movable: wp.array(dtype=wp.bool)
    rotatable: wp.array(dtype=wp.bool)
    turned_by_contacts: wp.array(dtype=wp.bool)
    pair_first: wp.array(dtype=wp.int32)
    pair_second: wp.array(dtype=wp.int32)
    pair_kind: wp.array(dtype=wp.int32)
    pair_reach: wp.array(dtype=wp.float32)
    n_entities: int
    n_pairs: int
    substeps: int
    sub_dt: wp.float32
    collision_force: wp.float32
    contact_margin: wp.float32
    world_gravity: wp.vec2
    x_semidim: wp.float32
    y_semidim: wp.float32


def vmas_model(table: EntityTable, config: VmasWorldConfig, device) -> VmasModel:
    """The ``VmasModel`` of ``table`` in ``config``'s world, its arrays on ``device`` (built once: the
    per-entity constants are ``reference.step_rows``'s float32 values, the pairs ``contact_pairs``')."""
    rows = step_rows(table, torch.device("cpu"))
    groups = contact_pairs(table)
    shape = table.shape.cpu()
    model = VmasModel()

    def entity_array(values: torch.Tensor, dtype=wp.float32):
        return wp.array(values.detach().cpu().contiguous().numpy(), dtype=dtype, device=device)

    def pair_array(values: list[torch.Tensor], dtype):
        joined = torch.cat([v.cpu() for v in values]) if values else torch.zeros(0)
        return wp.array(joined.numpy().astype(wp.dtype_to_numpy(dtype)), dtype=dtype, device=device)

    model.size = entity_array(table.size.cpu().to(torch.float32), wp.vec2)
    model.solid = entity_array(~table.hollow.cpu(), wp.bool)
    for name in ("mass", "inertia", "keep", "linear_friction", "angular_friction", *LIMITS):
        setattr(model, name, entity_array(getattr(rows, name)))
    model.gravity = entity_array(rows.gravity, wp.vec2)
    for name in ("pushed", "turned", "movable", "rotatable"):
        setattr(model, name, entity_array(getattr(rows, name), wp.bool))
    model.turned_by_contacts = entity_array(rows.rotatable & (shape != SPHERE), wp.bool)
    model.pair_first = pair_array([g.first for g in groups], wp.int32)
    model.pair_second = pair_array([g.second for g in groups], wp.int32)
    model.pair_kind = pair_array([torch.full_like(g.first, g.kind) for g in groups], wp.int32)
    model.pair_reach = pair_array([g.reach for g in groups], wp.float32)
    model.n_entities = table.n_entities
    model.n_pairs = sum(len(g.first) for g in groups)
    model.substeps = config.substeps
    model.sub_dt = config.sub_dt
    model.collision_force = config.collision_force
    model.contact_margin = config.contact_margin
    model.world_gravity = wp.vec2(*config.gravity)
    model.x_semidim = wp.inf if config.x_semidim is None else config.x_semidim
    model.y_semidim = wp.inf if config.y_semidim is None else config.y_semidim
    return model


@wp.func
def clamp_norm(x: wp.vec2, limit: wp.float32) -> wp.vec2:
    """``x`` scaled to norm ``limit`` where its norm exceeds it (VMAS's ``clamp_with_norm``)."""
    length = norm(x)
    if length > limit:
        return wp.vec2((x[0] / length) * limit, (x[1] / length) * limit)
    return x


@wp.func
def clamp_magnitude(x: wp.float32, limit: wp.float32) -> wp.float32:
    """``clamp_norm`` of a 1-vector: torch's norm of ``[x]``, ``sqrt(x x)`` (``|x|`` but where ``x x``
    under- or overflows)."""
    length = wp.sqrt(x * x)
    if length > limit:
        return (x / length) * limit
    return x


@wp.func
def clamp_symmetric(x: wp.float32, limit: wp.float32) -> wp.float32:
    """``x`` clamped to ``[-limit, limit]`` (``torch.clamp``: the lower bound first)."""
    return wp.min(wp.max(x, -limit), limit)


@wp.func
def clamp_components(x: wp.vec2, limit: wp.float32) -> wp.vec2:
    """Each component of ``x`` clamped to ``[-limit, limit]``."""
    return wp.vec2(clamp_symmetric(x[0], limit), clamp_symmetric(x[1], limit))


@wp.func
def friction_force(velocity: wp.vec2, coefficient: wp.float32, mass: wp.float32, sub_dt: wp.float32) -> wp.vec2:
    """VMAS's friction [N]: ``-(v_i / |v|) min(mu m, |v_i| m / sub_dt)`` per component, 0 at rest."""
    speed = norm(velocity)
    if speed == 0.0:
        return wp.vec2(0.0, 0.0)
    limit = coefficient * mass
    return wp.vec2(
        -(velocity[0] / speed) * wp.min(limit, (wp.abs(velocity[0]) / sub_dt) * mass),
        -(velocity[1] / speed) * wp.min(limit, (wp.abs(velocity[1]) / sub_dt) * mass),
    )


@wp.func
def friction_torque(omega: wp.float32, coefficient: wp.float32, inertia: wp.float32, sub_dt: wp.float32) -> wp.float32:
    """The angular friction [N m] of angular velocity ``omega`` [rad/s], ``friction_force``'s formula."""
    speed = wp.sqrt(omega * omega)
    if speed == 0.0:
        return wp.float32(0.0)
    return -(omega / speed) * wp.min(coefficient * inertia, (wp.abs(omega) / sub_dt) * inertia)


@wp.func
def body_forces(
    model: VmasModel,
    env: int,
    entity: int,
    vel: wp.array2d(dtype=wp.vec2),
    ang_vel: wp.array2d(dtype=wp.float32),
    force: wp.array2d(dtype=wp.vec2),
    torque: wp.array2d(dtype=wp.float32),
    force_sum: wp.array2d(dtype=wp.vec2),
    torque_sum: wp.array2d(dtype=wp.float32),
):
    """Stage 1: start ``entity``'s sums with its clamped action (written back to ``force`` and
    ``torque``), friction and gravity, each added to a zero as the reference adds them."""
    total_force = wp.vec2(0.0, 0.0)
    total_torque = wp.float32(0.0)
    if model.pushed[entity]:
        action = clamp_norm(force[env, entity], model.max_f[entity])
        action = clamp_components(action, model.f_range[entity])
        force[env, entity] = action
        total_force = total_force + action
    if model.turned[entity]:
        action_torque = clamp_magnitude(torque[env, entity], model.max_t[entity])
        action_torque = clamp_symmetric(action_torque, model.t_range[entity])
        torque[env, entity] = action_torque
        total_torque = total_torque + action_torque
    mass = model.mass[entity]
    linear = model.linear_friction[entity]
    if not wp.isnan(linear):
        total_force = total_force + friction_force(vel[env, entity], linear, mass, model.sub_dt)
    angular = model.angular_friction[entity]
    if not wp.isnan(angular):
        total_torque = total_torque + friction_torque(
            ang_vel[env, entity], angular, model.inertia[entity], model.sub_dt
        )
    if model.movable[entity]:
        # Adding a zero gravity changes no bits: a sum started from +0.0 is never -0.0.
        total_force = total_force + model.world_gravity * mass
        total_force = total_force + model.gravity[entity] * mass
    force_sum[entity, env] = total_force
    torque_sum[entity, env] = total_torque


@wp.func
def integrate(
    model: VmasModel,
    env: int,
    entity: int,
    substep: int,
    pos: wp.array2d(dtype=wp.vec2),
    vel: wp.array2d(dtype=wp.vec2),
    rot: wp.array2d(dtype=wp.float32),
    ang_vel: wp.array2d(dtype=wp.float32),
    force_sum: wp.array2d(dtype=wp.vec2),
    torque_sum: wp.array2d(dtype=wp.float32),
):
    """Stage 3: ``entity``'s semi-implicit Euler substep under its sums, in place."""
    keep = model.keep[entity]
    sub_dt = model.sub_dt
    if model.movable[entity]:
        velocity = vel[env, entity]
        if substep == 0:
            velocity = velocity * keep
        mass = model.mass[entity]
        total = force_sum[entity, env]
        velocity = velocity + wp.vec2((total[0] / mass) * sub_dt, (total[1] / mass) * sub_dt)
        velocity = clamp_components(clamp_norm(velocity, model.max_speed[entity]), model.v_range[entity])
        position = pos[env, entity] + velocity * sub_dt
        pos[env, entity] = wp.vec2(
            clamp_symmetric(position[0], model.x_semidim), clamp_symmetric(position[1], model.y_semidim)
        )
        vel[env, entity] = velocity
    if model.rotatable[entity]:
        omega = ang_vel[env, entity]
        if substep == 0:
            omega = omega * keep
        omega = omega + (torque_sum[entity, env] / model.inertia[entity]) * sub_dt
        rot[env, entity] = rot[env, entity] + omega * sub_dt
        ang_vel[env, entity] = omega


@functools.cache
def pair_forces_func(kinds: frozenset[int]):
    """``pair_forces(model, pair, pos_a, rot_a, pos_b, rot_b) -> (f_a, f_b, t_a, t_b)``: the contact
    of list entry ``pair`` (rows a, b), compiled for the pair ``kinds`` a table has."""

    @wp.func
    def pair_forces(model: VmasModel, pair: int, pos_a: wp.vec2, rot_a: float, pos_b: wp.vec2, rot_b: float):
        kind = model.pair_kind[pair]
        a = model.pair_first[pair]
        b = model.pair_second[pair]
        size_a = model.size[a]
        size_b = model.size[b]
        scale = model.collision_force
        margin = model.contact_margin
        force_a = wp.vec2(0.0, 0.0)
        force_b = wp.vec2(0.0, 0.0)
        torque_a = wp.float32(0.0)
        torque_b = wp.float32(0.0)
        if wp.static(SPHERE_SPHERE in kinds):
            if kind == SPHERE_SPHERE:
                force_a, force_b, torque_a, torque_b = sphere_sphere(pos_a, size_a[0], pos_b, size_b[0], scale, margin)
        if wp.static(LINE_SPHERE in kinds):
            if kind == LINE_SPHERE:
                force_a, force_b, torque_a, torque_b = line_sphere(
                    pos_a, rot_a, size_a[0], pos_b, size_b[0], scale, margin
                )
        if wp.static(LINE_LINE in kinds):
            if kind == LINE_LINE:
                force_a, force_b, torque_a, torque_b = line_line(
                    pos_a, rot_a, size_a[0], pos_b, rot_b, size_b[0], scale, margin
                )
        if wp.static(BOX_SPHERE in kinds):
            if kind == BOX_SPHERE:
                force_a, force_b, torque_a, torque_b = box_sphere(
                    pos_a, rot_a, size_a, model.solid[a], pos_b, size_b[0], scale, margin
                )
        if wp.static(BOX_LINE in kinds):
            if kind == BOX_LINE:
                force_a, force_b, torque_a, torque_b = box_line(
                    pos_a, rot_a, size_a, model.solid[a], pos_b, rot_b, size_b[0], scale, margin
                )
        if wp.static(BOX_BOX in kinds):
            if kind == BOX_BOX:
                force_a, force_b, torque_a, torque_b = box_box(
                    pos_a, rot_a, size_a, model.solid[a], pos_b, rot_b, size_b, model.solid[b], scale, margin
                )
        return force_a, force_b, torque_a, torque_b

    return pair_forces


@functools.cache
def step_kernel(kinds: frozenset[int]):
    """``vmas_step`` (one thread per env: ``dim = n_envs``) for the pair ``kinds`` (``contacts`` codes)
    a table has; the others' code is not compiled."""
    pair_forces = pair_forces_func(kinds)

    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False})
    def vmas_step(
        model: VmasModel,
        pos: wp.array2d(dtype=wp.vec2),
        vel: wp.array2d(dtype=wp.vec2),
        rot: wp.array2d(dtype=wp.float32),
        ang_vel: wp.array2d(dtype=wp.float32),
        force: wp.array2d(dtype=wp.vec2),
        torque: wp.array2d(dtype=wp.float32),
        force_sum: wp.array2d(dtype=wp.vec2),
        torque_sum: wp.array2d(dtype=wp.float32),
    ):
        env = wp.tid()
        for substep in range(model.substeps):
            for entity in range(model.n_entities):
                body_forces(model, env, entity, vel, ang_vel, force, torque, force_sum, torque_sum)
            for pair in range(model.n_pairs):
                a = model.pair_first[pair]
                b = model.pair_second[pair]
                pos_a = pos[env, a]
                pos_b = pos[env, b]
                if norm(pos_a - pos_b) <= model.pair_reach[pair]:
                    force_a, force_b, torque_a, torque_b = pair_forces(
                        model, pair, pos_a, rot[env, a], pos_b, rot[env, b]
                    )
                    if model.movable[a]:
                        force_sum[a, env] = force_sum[a, env] + force_a
                    if model.turned_by_contacts[a]:
                        torque_sum[a, env] = torque_sum[a, env] + torque_a
                    if model.movable[b]:
                        force_sum[b, env] = force_sum[b, env] + force_b
                    if model.turned_by_contacts[b]:
                        torque_sum[b, env] = torque_sum[b, env] + torque_b
            for entity in range(model.n_entities):
                integrate(model, env, entity, substep, pos, vel, rot, ang_vel, force_sum, torque_sum)

    return vmas_step


class VmasStep:
    """VMAS's ``World.step`` on E envs in Warp: the twin of ``step_torch`` with the per-env broad phase.

    Built once per (table, world, E, device): the model's arrays, the kernel for the table's pair kinds
    and the scratch sums (``[N, E]``), so ``step`` allocates nothing and launches one kernel.

    Args:
        table: The entities (N rows, VMAS's ``world.entities`` order).
        config: The world's constants.
        n_envs: E, the envs every ``step`` advances.
        device: A Warp device (``"cpu"``, ``"cuda:0"``; ``None``: Warp's default).
    """

    def __init__(self, table: EntityTable, config: VmasWorldConfig, n_envs: int, device=None) -> None:
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        self.table, self.config, self.n_envs = table, config, n_envs
        self.device = wp.get_device(device)
        self.model = vmas_model(table, config, self.device)
        self.kernel = step_kernel(frozenset(group.kind for group in contact_pairs(table)))
        shape = (table.n_entities, n_envs)
        self.force_sum = wp.zeros(shape, dtype=wp.vec2, device=self.device)
        self.torque_sum = wp.zeros(shape, dtype=wp.float32, device=self.device)

    @property
    def torch_device(self) -> torch.device:
        """The torch device of ``device``."""
        return torch.device(wp.device_to_torch(self.device))

    def check(self, **arrays: wp.array) -> None:
        """Raise ``TypeError`` unless each array is a Warp array, ``ValueError`` unless it is [E, N] of
        its dtype (``pos``, ``vel``, ``force``: ``wp.vec2``; ``rot``, ``ang_vel``, ``torque``:
        ``wp.float32``) on the step's device."""
        shape = (self.n_envs, self.table.n_entities)
        for name, value in arrays.items():
            dtype = wp.vec2 if name in ("pos", "vel", "force") else wp.float32
            if not isinstance(value, wp.array):
                raise TypeError(f"{name} must be a Warp array, got {type(value).__name__}")
            if value.dtype != dtype or value.shape != shape:
                raise ValueError(
                    f"{name} must be {dtype.__name__} of shape {list(shape)} (E = {self.n_envs} envs, "
                    f"N = {shape[1]} entities), got {value.dtype.__name__} of shape {list(value.shape)}"
                )
            if value.device != self.device:
                raise ValueError(f"{name} is on {value.device}, the step on {self.device}: use one device")

    def step(
        self,
        pos: wp.array,
        vel: wp.array,
        rot: wp.array,
        ang_vel: wp.array,
        force: wp.array,
        torque: wp.array,
        launcher: Launcher | None = None,
    ) -> None:
        """One env step (all substeps) of every env, in place.

        Args:
            pos: [E, N] ``wp.vec2`` positions [m]; vel: [E, N] ``wp.vec2`` velocities [m/s].
            rot: [E, N] ``wp.float32`` headings [rad]; ang_vel: [E, N] ``wp.float32`` [rad/s].
            force: [E, N] ``wp.vec2`` action force [N] of each agent (``step_torch``'s ``force``); the
                rows of movable agents are overwritten with the clamped force, as VMAS overwrites
                ``agent.state.force``.
            torque: [E, N] ``wp.float32`` action torque [N m]; rotatable agents' rows are overwritten
                with the clamped torque.
            launcher: How to launch (``swarp.runtime.launch``); ``None``: eagerly.

        Any of them may be a zero-copy view of a torch tensor (``wp.from_torch``); on CUDA the kernel
        runs on Warp's current stream.
        """
        self.check(pos=pos, vel=vel, rot=rot, ang_vel=ang_vel, force=force, torque=torque)
        (launcher or Launcher()).launch(
            self.kernel,
            dim=self.n_envs,
            inputs=[self.model, pos, vel, rot, ang_vel, force, torque, self.force_sum, self.torque_sum],
            device=self.device,
        )

    def step_tensors(self, state: EntityState, force: torch.Tensor, torque: torch.Tensor) -> EntityState:
        """``step`` on torch tensors, as ``step_torch`` takes them: float32 ``state`` (``pos``, ``vel``
        [E, N, 2], ``rot``, ``ang_vel`` [E, N]), ``force`` [E, N, 2] [N] and ``torque`` [E, N] [N m] on
        the step's device. The inputs are left unchanged: the step runs in place on contiguous copies,
        viewed zero-copy by Warp, and returns the state after it (the clamped force is not returned)."""
        expected = {
            "state.pos": (state.pos, 3),
            "state.vel": (state.vel, 3),
            "state.rot": (state.rot, 2),
            "state.ang_vel": (state.ang_vel, 2),
            "force": (force, 3),
            "torque": (torque, 2),
        }
        shape = (self.n_envs, self.table.n_entities, 2)
        copies = []
        for name, (value, dims) in expected.items():
            if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or value.shape != shape[:dims]:
                got = f"{value.dtype} of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value)
                raise ValueError(f"{name} must be float32 of shape {list(shape[:dims])}, got {got}")
            if value.device != self.torch_device:
                raise ValueError(f"{name} is on {value.device}, the step on {self.device}: use one device")
            copies.append(value.detach().clone().contiguous())
        views = [wp.from_torch(c, dtype=wp.vec2 if c.dim() == 3 else wp.float32) for c in copies]
        if self.device.is_cuda:
            with wp.ScopedStream(wp.stream_from_torch(self.torch_device)):
                self.step(*views)
        else:
            self.step(*views)
        return EntityState(*copies[:4])
