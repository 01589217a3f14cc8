"""Movable rigid bodies and distance joints, integrated inside the substep loop.

A body is one or more CIRCLE/BOX shapes sharing a pose (``WorldConfig.bodies``); its pose and
velocity are state (``State.body_*``). With bodies, a substep runs two more launches:

1. ``contact_forces`` (contacts.py, unchanged): agent-agent, agent-obstacle, agent-wall forces.
2. ``body_contacts``, one thread per agent and one per body of every env:

   * an agent thread adds its contacts with every body shape and its joint forces to its force;
   * a body thread *gathers* the same agent contacts (recomputed, negated), the joint reactions,
     body-body contacts, static-obstacle and wall contacts, into a wrench (fx, fy, torque).

   Each agent-shape pair force and each joint force is computed at one call site of one loop that
   both thread kinds walk, from the same inputs, so the reaction on the body is the agent's force
   negated bit for bit (Newton's third law with no atomics: bodies are few, so gathering is cheap).
   Body-body pairs are likewise evaluated in a canonical order (lower body index first).
3. ``integrate`` (dynamics.py, unchanged) moves the agents with the total force.
4. ``integrate_bodies``: semi-implicit Euler with implicit damping for every body.

Contact geometry: a *probe* (a disc, or a point for radius 0) against a shape's signed distance.
Agents are probes; a body circle is one probe; a box's probes are its four corners, a capsule's
its two end discs. A pair with a circle uses the circle's probe against the other shape (exact);
box-box uses corners both ways (see docs/bodies.md for what that misses). Every force is the
spring-damper of contacts.py on the relative normal velocity at the probe.
"""

import functools
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import torch
import warp as wp

from swarp.core.config import AgentConfig, ObstacleShape, WorldConfig
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS
from swarp.physics import contacts, dynamics
from swarp.runtime import health

_CIRCLE = wp.constant(int(ObstacleShape.CIRCLE))
_BOX = wp.constant(int(ObstacleShape.BOX))
_SEGMENT = wp.constant(int(ObstacleShape.SEGMENT))
_RADIUS = wp.constant(PARAM_RADIUS)

#: Joint stiffness cap ``a = k h^2 w`` per substep, ``w`` an upper bound of the joint's inverse
#: effective mass. Semi-implicit Euler on ``x'' = -k w x - c w x'`` has the characteristic polynomial
#: ``l^2 - (2 - a - b) l + (1 - b)`` (``b = c h w``): stable for ``0 < b < 2`` and ``a < 4 - 2 b``;
#: (0.5, 0.8) converges fast (|l| = 0.45) and stays stable when ``w`` is overestimated [-].
JOINT_STIFFNESS_LIMIT = 0.5
#: Joint damping cap ``b = c h w`` per substep [-] (see ``JOINT_STIFFNESS_LIMIT``).
JOINT_DAMPING_LIMIT = 0.8

# Columns of ``BodyModel.params`` [B, BODY_N_PARAMS].
BODY_INV_MASS = 0  # [1/kg]
BODY_INV_INERTIA = 1  # [1/(kg m^2)]
BODY_LINEAR_DAMPING = 2  # [1/s]
BODY_ANGULAR_DAMPING = 3  # [1/s]
BODY_GRAVITY_X = 4  # [m/s^2]
BODY_GRAVITY_Y = 5  # [m/s^2]
BODY_N_PARAMS = 6

# Columns of ``BodyModel.joint_index`` [J, 3] and ``BodyModel.joint_params`` [J, 7].
JOINT_BODY, JOINT_AGENT, JOINT_OTHER_BODY = 0, 1, 2
JOINT_ANCHOR_X, JOINT_ANCHOR_Y, JOINT_OTHER_X, JOINT_OTHER_Y, JOINT_LENGTH, JOINT_K, JOINT_C = range(7)


class BodyArrays(NamedTuple):
    """The four [E, B] body arrays of a state (or of the spare set): where a substep reads or writes bodies."""

    pos: wp.array
    theta: wp.array
    vel: wp.array
    ang_vel: wp.array


def of_state(state) -> BodyArrays:
    """The body arrays of a ``State``."""
    return BodyArrays(state.body_pos, state.body_theta, state.body_vel, state.body_ang_vel)


class BodyForces(NamedTuple):
    """The force scratch of one substep of a world with bodies (``Stepper.allocate_forces``).

    Fields:
        contact: [E, A] vec2 agent contact forces of ``contacts.contact_forces`` [N].
        total: [E, A] vec2 contact + body contacts + joint forces on each agent [N].
        wrench: [E, B] vec3 force (x, y) [N] and torque [N m] on each body.
        spare_pos, spare_theta, spare_vel, spare_ang_vel: [E, B] spare body state: the in-place
            (no-grad) step alternates the bodies between the state and these, so every substep
            reads the bodies from one set and writes them to the other (see ``body_route``).
    """

    contact: wp.array
    total: wp.array
    wrench: wp.array
    spare_pos: wp.array
    spare_theta: wp.array
    spare_vel: wp.array
    spare_ang_vel: wp.array

    def spare(self) -> BodyArrays:
        return BodyArrays(self.spare_pos, self.spare_theta, self.spare_vel, self.spare_ang_vel)


def _effective_inverse_mass(bodies, body: int, anchor) -> float:
    """Upper bound of the inverse mass [1/kg] an anchor on ``body`` shows a force."""
    spec = bodies[body]
    return 1.0 / spec.mass + (anchor[0] ** 2 + anchor[1] ** 2) / spec.moment_of_inertia


def _endpoints(joint) -> tuple[tuple[str, int], tuple[str, int]]:
    """The two endpoints of a joint as (kind, index) keys."""
    first = ("agent", joint.agent) if joint.agent is not None else ("body", joint.other_body)
    return first, ("body", joint.body)


class BodyModel:
    """Device arrays describing the bodies and joints of a world (shared by every env).

    Attributes:
        n_bodies: B.
        n_shapes: S, all bodies' shapes, body after body.
        shape_body: ``wp.array(int32)`` [S] owning body of each shape.
        shape_kind: ``wp.array(int32)`` [S] ``ObstacleShape`` code.
        shape_offset: ``wp.array(vec2)`` [S] shape centre in its body's frame [m].
        shape_angle: ``wp.array(scalar)`` [S] shape angle relative to its body [rad].
        shape_size: ``wp.array(vec2)`` [S] extents [m] (see ``Obstacle.size``).
        first_shape: ``wp.array(int32)`` [B + 1]: shapes of body b are ``first_shape[b]:first_shape[b+1]``.
        params: ``wp.array2d(scalar)`` [B, BODY_N_PARAMS] inverse mass and inertia, damping, gravity.
        joint_index: ``wp.array2d(int32)`` [J, 3] body, agent (or -1), other body (or -1).
        joint_params: ``wp.array2d(scalar)`` [J, 7] anchors [m], length [m], capped k [N/m] and c [N s/m].
        joint_stiffness, joint_damping: The capped (k, c) of each joint, host floats.
    """

    def __init__(self, world: WorldConfig, agents: tuple[AgentConfig, ...], scalar: type, device: str, h: float):
        bodies, joints = world.bodies, world.joints
        np_dtype = np.float64 if scalar is wp.float64 else np.float32
        vec2 = vec2_type(scalar)
        self.n_bodies = len(bodies)
        shapes = [(b, shape) for b, body in enumerate(bodies) for shape in body.shapes]
        self.n_shapes = len(shapes)
        first = np.zeros(self.n_bodies + 1, np.int32)
        for b, body in enumerate(bodies):
            first[b + 1] = first[b] + len(body.shapes)
        self.shape_body = wp.array(np.array([b for b, _ in shapes], np.int32), dtype=wp.int32, device=device)
        self.shape_kind = wp.array(np.array([int(s.shape) for _, s in shapes], np.int32), dtype=wp.int32, device=device)
        self.shape_offset = wp.array(np.array([s.center for _, s in shapes], np_dtype), dtype=vec2, device=device)
        self.shape_angle = wp.array(np.array([s.angle for _, s in shapes], np_dtype), dtype=scalar, device=device)
        self.shape_size = wp.array(np.array([s.size for _, s in shapes], np_dtype), dtype=vec2, device=device)
        self.first_shape = wp.array(first, dtype=wp.int32, device=device)
        table = np.zeros((self.n_bodies, BODY_N_PARAMS), np_dtype)
        for b, body in enumerate(bodies):
            table[b] = (
                1.0 / body.mass,
                1.0 / body.moment_of_inertia,
                body.linear_damping,
                body.angular_damping,
                *body.gravity,
            )
        self.params = wp.array(table, dtype=scalar, device=device)

        index = np.full((max(len(joints), 1), 3), -1, np.int32)
        values = np.zeros((max(len(joints), 1), 7), np_dtype)
        self.joint_stiffness, self.joint_damping = [], []
        # Joints sharing an endpoint add up on it: each gets its share of the cap.
        load: dict[tuple[str, int], int] = {}
        for joint in joints:
            for end in _endpoints(joint):
                load[end] = load.get(end, 0) + 1
        for j, joint in enumerate(joints):
            if joint.agent is not None and joint.agent >= len(agents):
                raise ValueError(f"WorldConfig.joints[{j}].agent={joint.agent} but there are {len(agents)} agents")
            inv_mass = _effective_inverse_mass(bodies, joint.body, joint.anchor)
            if joint.agent is not None:
                inv_mass += 1.0 / agents[joint.agent].mass
            else:
                inv_mass += _effective_inverse_mass(bodies, joint.other_body, joint.other_anchor)
            share = max(load[end] for end in _endpoints(joint))
            k = min(joint.stiffness, JOINT_STIFFNESS_LIMIT / (share * inv_mass * h * h))
            c = min(joint.damping, JOINT_DAMPING_LIMIT / (share * inv_mass * h))
            self.joint_stiffness.append(k)
            self.joint_damping.append(c)
            index[j] = (
                joint.body,
                -1 if joint.agent is None else joint.agent,
                -1 if joint.other_body is None else joint.other_body,
            )
            values[j] = (*joint.anchor, *joint.other_anchor, joint.length, k, c)
        # A world without joints still passes [1, *] arrays (Warp needs a shape); n_joints bounds the loops.
        self.n_joints = len(joints)
        self.joint_index = wp.array(index, dtype=wp.int32, device=device)
        self.joint_params = wp.array(values, dtype=scalar, device=device)

    def shape_poses_torch(self, body_pos: torch.Tensor, body_theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """The world poses of every body shape (torch twin of ``funcs(scalar).shape_pose``).

        Args:
            body_pos: [E, B, 2] body positions [m].
            body_theta: [E, B] body orientations [rad].

        Returns:
            ``shape`` [S] int32 ``ObstacleShape`` codes, ``center`` [E, S, 2] [m], ``angle`` [E, S]
            [rad], ``size`` [S, 2] [m] and ``body`` [S] int64 (the owning body of each shape);
            differentiable in ``body_pos`` and ``body_theta``.
        """
        body = wp.to_torch(self.shape_body).long()
        offset = wp.to_torch(self.shape_offset).to(body_pos.dtype)
        theta = body_theta[:, body]  # [E, S]
        c, s = torch.cos(theta), torch.sin(theta)
        rotated = torch.stack([c * offset[:, 0] - s * offset[:, 1], s * offset[:, 0] + c * offset[:, 1]], -1)
        return {
            "shape": wp.to_torch(self.shape_kind),
            "center": body_pos[:, body] + rotated,
            "angle": theta + wp.to_torch(self.shape_angle).to(body_pos.dtype),
            "size": wp.to_torch(self.shape_size).to(body_pos.dtype),
            "body": body,
        }


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Rigid-body contact and joint functions for one precision."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    vec4 = wp.types.vector(4, scalar)
    cf = contacts.funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)

    @wp.func
    def shape_pose(body_pos: vec2, body_theta: scalar, offset: vec2, angle: scalar) -> vec3:
        """World (x, y, angle) of a shape at ``offset``/``angle`` in a body's frame."""
        center = body_pos + cf.rotate(offset, body_theta)
        return vec3(center[0], center[1], body_theta + angle)

    @wp.func
    def cross(r: vec2, f: vec2) -> scalar:
        """z-component of ``r x f`` (the torque of ``f`` applied at lever ``r``)."""
        return r[0] * f[1] - r[1] * f[0]

    @wp.func
    def point_velocity(v: vec2, omega: scalar, lever: vec2) -> vec2:
        """Velocity of a body point at ``lever`` from its centre of mass."""
        return v + vec2(-omega * lever[1], omega * lever[0])

    @wp.func
    def probe_force(
        p: vec2,
        r: scalar,
        v_p: vec2,
        kind: int,
        center: vec2,
        angle: scalar,
        size: vec2,
        x_q: vec2,
        v_q: vec2,
        omega_q: scalar,
        k: scalar,
        c: scalar,
    ) -> vec2:
        """Force [N] on a probe disc (``p``, ``r``) moving at ``v_p`` from a shape of a body with centre
        of mass ``x_q``, velocity ``v_q`` and angular velocity ``omega_q``; zero without overlap."""
        hit = cf.obstacle_distance(p, kind, center, angle, size)
        if hit[0] >= r:
            return vec2(zero, zero)
        normal = vec2(hit[1], hit[2])
        v_rel = v_p - point_velocity(v_q, omega_q, p - x_q)
        return cf.spring_damper(normal, r - hit[0], wp.dot(v_rel, normal), k, c)

    @wp.func
    def probe_count(kind: int) -> int:
        """Probes of a shape: a circle's disc, a box's four corners, a capsule's two end discs."""
        if kind == _BOX:
            return 4
        if kind == _SEGMENT:
            return 2
        return 1

    @wp.func
    def probe(kind: int, center: vec2, angle: scalar, size: vec2, i: int) -> vec3:
        """Probe ``i`` of a shape as (x, y, radius) in the world frame."""
        if kind == _BOX:
            sx = wp.where((i & 1) == 0, -one, one)
            sy = wp.where((i & 2) == 0, -one, one)
            corner = center + cf.rotate(vec2(sx * size[0], sy * size[1]), angle)
            return vec3(corner[0], corner[1], zero)
        if kind == _SEGMENT:
            sx = wp.where(i == 0, -one, one)
            end = center + cf.rotate(vec2(sx * size[0], zero), angle)
            return vec3(end[0], end[1], size[1])
        return vec3(center[0], center[1], size[0])

    @wp.func
    def shape_pair(
        kind_a: int,
        center_a: vec2,
        angle_a: scalar,
        size_a: vec2,
        x_a: vec2,
        v_a: vec2,
        omega_a: scalar,
        kind_b: int,
        center_b: vec2,
        angle_b: scalar,
        size_b: vec2,
        x_b: vec2,
        v_b: vec2,
        omega_b: scalar,
        k: scalar,
        c: scalar,
    ) -> vec4:
        """Contact of shape a (of a body at ``x_a``) with shape b: (force on a [N], torque on a
        about ``x_a`` [N m], torque on b about ``x_b`` [N m]); the force on b is minus the first two.

        A circle probes the other shape (exact); otherwise each shape's probes test the other."""
        force = vec2(zero, zero)
        torque_a = zero
        torque_b = zero
        a_probes = kind_a == _CIRCLE or kind_b != _CIRCLE
        b_probes = kind_a != _CIRCLE
        if a_probes:
            for i in range(probe_count(kind_a)):
                pr = probe(kind_a, center_a, angle_a, size_a, i)
                p = vec2(pr[0], pr[1])
                fp = probe_force(
                    p,
                    pr[2],
                    point_velocity(v_a, omega_a, p - x_a),
                    kind_b,
                    center_b,
                    angle_b,
                    size_b,
                    x_b,
                    v_b,
                    omega_b,
                    k,
                    c,
                )
                force += fp
                torque_a += cross(p - x_a, fp)
                torque_b -= cross(p - x_b, fp)
        if b_probes:
            for i in range(probe_count(kind_b)):
                pr = probe(kind_b, center_b, angle_b, size_b, i)
                p = vec2(pr[0], pr[1])
                fp = probe_force(
                    p,
                    pr[2],
                    point_velocity(v_b, omega_b, p - x_b),
                    kind_a,
                    center_a,
                    angle_a,
                    size_a,
                    x_a,
                    v_a,
                    omega_a,
                    k,
                    c,
                )
                force -= fp
                torque_a -= cross(p - x_a, fp)
                torque_b += cross(p - x_b, fp)
        return vec4(force[0], force[1], torque_a, torque_b)

    @wp.func
    def joint_force(p1: vec2, v1: vec2, p2: vec2, v2: vec2, length: scalar, k: scalar, c: scalar) -> vec2:
        """Force [N] on endpoint 1 of a distance joint (endpoint 2 gets its negation)."""
        d = p2 - p1
        d2 = wp.dot(d, d)
        normal = vec2(one, zero)
        dist = zero
        if d2 > zero:
            dist = wp.sqrt(d2)
            normal = d / dist
        return normal * (k * (dist - length) + c * wp.dot(v2 - v1, normal))

    return SimpleNamespace(
        shape_pose=shape_pose,
        cross=cross,
        point_velocity=point_velocity,
        probe_force=probe_force,
        probe_count=probe_count,
        probe=probe,
        shape_pair=shape_pair,
        joint_force=joint_force,
    )


@functools.cache
def kernels(scalar: type, integrate: bool) -> SimpleNamespace:
    """The body kernels for one precision. With ``integrate``, ``body_contacts`` also integrates the
    bodies (into arrays other than the ones it reads: see ``body_route``), one launch less per substep."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    f = funcs(scalar)
    cf = contacts.funcs(scalar)
    shape_pose = f.shape_pose
    wrap_angle = dynamics.funcs(scalar).wrap_angle
    zero = scalar(0.0)
    one = scalar(1.0)

    @wp.func
    def integrate_body(
        body_params: wp.array2d(dtype=scalar),
        h: scalar,
        env: int,
        body: int,
        w: vec3,
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        body_ang_vel: wp.array2d(dtype=scalar),
        body_pos_out: wp.array2d(dtype=vec2),
        body_theta_out: wp.array2d(dtype=scalar),
        body_vel_out: wp.array2d(dtype=vec2),
        body_ang_vel_out: wp.array2d(dtype=scalar),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        """One semi-implicit Euler substep of a body under the wrench ``w`` (fx, fy, torque), with
        gravity and implicit damping; a non-finite result raises the env's health flag."""
        accel = vec2(w[0], w[1]) * body_params[body, 0] + vec2(body_params[body, 4], body_params[body, 5])
        v = (body_vel[env, body] + accel * h) / (one + h * body_params[body, 2])
        om = (body_ang_vel[env, body] + w[2] * body_params[body, 1] * h) / (one + h * body_params[body, 3])
        p = body_pos[env, body] + v * h
        th = wrap_angle(body_theta[env, body] + om * h)
        body_pos_out[env, body] = p
        body_theta_out[env, body] = th
        body_vel_out[env, body] = v
        body_ang_vel_out[env, body] = om
        finite = health.finite(p) and health.finite(th) and health.finite(v) and health.finite(om)
        health.flag_env(non_finite_out, env, finite)

    # The fused variant (integrate=True) runs on the no-grad paths only: Warp's adjoint of it (array
    # stores inside a dynamic loop through a function) came out wrong, so the tape uses the pair.
    @wp.kernel(enable_backward=not integrate, module="unique", grid_stride=False)
    def body_contacts(
        # model
        params: wp.array3d(dtype=scalar),
        per_env_params: int,
        shape_body: wp.array(dtype=wp.int32),
        shape_kind: wp.array(dtype=wp.int32),
        shape_offset: wp.array(dtype=vec2),
        shape_angle: wp.array(dtype=scalar),
        shape_size: wp.array(dtype=vec2),
        first_shape: wp.array(dtype=wp.int32),
        joint_index: wp.array2d(dtype=wp.int32),
        joint_params: wp.array2d(dtype=scalar),
        n_joints: int,
        obstacle_shape: wp.array2d(dtype=wp.int32),
        obstacle_center: wp.array2d(dtype=vec2),
        obstacle_angle: wp.array2d(dtype=scalar),
        obstacle_size: wp.array2d(dtype=vec2),
        per_env_obstacles: int,
        stiffness: scalar,
        damping: scalar,
        walls: int,
        lower: vec2,
        upper: vec2,
        # state
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        body_ang_vel: wp.array2d(dtype=scalar),
        contact: wp.array2d(dtype=vec2),
        slots_per_thread: int,
        body_params: wp.array2d(dtype=scalar),
        h: scalar,
        # outputs
        total_out: wp.array2d(dtype=vec2),
        wrench_out: wp.array2d(dtype=vec3),
        # written with ``integrate`` only (never the arrays read above)
        body_pos_out: wp.array2d(dtype=vec2),
        body_theta_out: wp.array2d(dtype=scalar),
        body_vel_out: wp.array2d(dtype=vec2),
        body_ang_vel_out: wp.array2d(dtype=scalar),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        env, thread = wp.tid()
        n_agents = pos.shape[1]
        # One agent or body per thread on the GPU; on the CPU, where each thread costs a call, one env per thread.
        first_slot = thread * slots_per_thread
        for slot in range(first_slot, wp.min(first_slot + slots_per_thread, n_agents + body_pos.shape[1])):
            is_agent = slot < n_agents
            agent = slot
            body = slot - n_agents
            pe = env * per_env_params
            force = vec2(zero, zero)
            torque = zero

            # Agent-shape contacts: an agent walks every shape, a body walks every (agent, own shape).
            first = int(0)
            count = shape_kind.shape[0]
            n_pairs = count
            if not is_agent:
                first = first_shape[body]
                count = first_shape[body + 1] - first
                n_pairs = n_agents * count
            for q in range(n_pairs):
                a = agent
                s = q
                if not is_agent:
                    a = q / count
                    s = first + q % count
                sb = shape_body[s]
                x_b = body_pos[env, sb]
                pose = shape_pose(x_b, body_theta[env, sb], shape_offset[s], shape_angle[s])
                p = pos[env, a]
                fa = f.probe_force(
                    p,
                    params[pe, a, _RADIUS],
                    vel[env, a],
                    shape_kind[s],
                    vec2(pose[0], pose[1]),
                    pose[2],
                    shape_size[s],
                    x_b,
                    body_vel[env, sb],
                    body_ang_vel[env, sb],
                    stiffness,
                    damping,
                )
                if is_agent:
                    force += fa
                else:
                    force -= fa
                    torque -= f.cross(p - x_b, fa)

            # Joints: the force on endpoint 1, at one call site for the agent and both bodies.
            for j in range(n_joints):
                body2 = joint_index[j, 0]
                joint_agent = joint_index[j, 1]
                body1 = joint_index[j, 2]
                involved = is_agent and joint_agent == agent
                if not is_agent:
                    involved = body2 == body or body1 == body
                if involved:
                    x2 = body_pos[env, body2]
                    lever2 = cf.rotate(vec2(joint_params[j, 0], joint_params[j, 1]), body_theta[env, body2])
                    p2 = x2 + lever2
                    v2 = f.point_velocity(body_vel[env, body2], body_ang_vel[env, body2], lever2)
                    x1 = x2
                    p1 = x2
                    v1 = v2
                    if joint_agent >= 0:
                        p1 = pos[env, joint_agent]
                        x1 = p1
                        v1 = vel[env, joint_agent]
                    else:
                        x1 = body_pos[env, body1]
                        lever1 = cf.rotate(vec2(joint_params[j, 2], joint_params[j, 3]), body_theta[env, body1])
                        p1 = x1 + lever1
                        v1 = f.point_velocity(body_vel[env, body1], body_ang_vel[env, body1], lever1)
                    f1 = f.joint_force(p1, v1, p2, v2, joint_params[j, 4], joint_params[j, 5], joint_params[j, 6])
                    if is_agent:
                        force += f1
                    else:
                        if body2 == body:
                            force -= f1
                            torque -= f.cross(p2 - x2, f1)
                        if body1 == body:
                            force += f1
                            torque += f.cross(p1 - x1, f1)

            if is_agent:
                total_out[env, agent] = contact[env, agent] + force
            else:
                x = body_pos[env, body]
                th = body_theta[env, body]
                v = body_vel[env, body]
                om = body_ang_vel[env, body]
                n_bodies = body_pos.shape[1]
                # Body-body contacts, each pair evaluated as (lower index, higher index) by both bodies.
                for other in range(n_bodies):
                    if other != body:
                        lo = wp.min(body, other)
                        hi = wp.max(body, other)
                        x_lo = body_pos[env, lo]
                        x_hi = body_pos[env, hi]
                        th_lo = body_theta[env, lo]
                        th_hi = body_theta[env, hi]
                        for s_lo in range(first_shape[lo], first_shape[lo + 1]):
                            pose_lo = shape_pose(x_lo, th_lo, shape_offset[s_lo], shape_angle[s_lo])
                            for s_hi in range(first_shape[hi], first_shape[hi + 1]):
                                pose_hi = shape_pose(x_hi, th_hi, shape_offset[s_hi], shape_angle[s_hi])
                                w = f.shape_pair(
                                    shape_kind[s_lo],
                                    vec2(pose_lo[0], pose_lo[1]),
                                    pose_lo[2],
                                    shape_size[s_lo],
                                    x_lo,
                                    body_vel[env, lo],
                                    body_ang_vel[env, lo],
                                    shape_kind[s_hi],
                                    vec2(pose_hi[0], pose_hi[1]),
                                    pose_hi[2],
                                    shape_size[s_hi],
                                    x_hi,
                                    body_vel[env, hi],
                                    body_ang_vel[env, hi],
                                    stiffness,
                                    damping,
                                )
                                if body == lo:
                                    force += vec2(w[0], w[1])
                                    torque += w[2]
                                else:
                                    force -= vec2(w[0], w[1])
                                    torque += w[3]

                # Static obstacles and walls.
                oe = env * per_env_obstacles
                for s in range(first_shape[body], first_shape[body + 1]):
                    pose = shape_pose(x, th, shape_offset[s], shape_angle[s])
                    center = vec2(pose[0], pose[1])
                    kind = shape_kind[s]
                    for o in range(obstacle_shape.shape[1]):
                        ob_kind = obstacle_shape[oe, o]
                        if ob_kind != 0:
                            ob_center = obstacle_center[oe, o]
                            w = f.shape_pair(
                                kind,
                                center,
                                pose[2],
                                shape_size[s],
                                x,
                                v,
                                om,
                                ob_kind,
                                ob_center,
                                obstacle_angle[oe, o],
                                obstacle_size[oe, o],
                                ob_center,
                                vec2(zero, zero),
                                zero,
                                stiffness,
                                damping,
                            )
                            force += vec2(w[0], w[1])
                            torque += w[2]
                    if walls != 0:
                        for i in range(f.probe_count(kind)):
                            pr = f.probe(kind, center, pose[2], shape_size[s], i)
                            p = vec2(pr[0], pr[1])
                            fw = cf.wall_force(
                                p, f.point_velocity(v, om, p - x), pr[2], lower, upper, stiffness, damping
                            )
                            force += fw
                            torque += f.cross(p - x, fw)
                wrench = vec3(force[0], force[1], torque)
                wrench_out[env, body] = wrench
                if wp.static(integrate):
                    integrate_body(
                        body_params,
                        h,
                        env,
                        body,
                        wrench,
                        body_pos,
                        body_theta,
                        body_vel,
                        body_ang_vel,
                        body_pos_out,
                        body_theta_out,
                        body_vel_out,
                        body_ang_vel_out,
                        non_finite_out,
                    )

    @wp.kernel(module="unique", grid_stride=False)
    def integrate_bodies(
        body_params: wp.array2d(dtype=scalar),
        h: scalar,
        wrench: wp.array2d(dtype=vec3),
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        body_ang_vel: wp.array2d(dtype=scalar),
        # outputs (may alias the inputs on the no-grad path: each thread touches only its body)
        body_pos_out: wp.array2d(dtype=vec2),
        body_theta_out: wp.array2d(dtype=scalar),
        body_vel_out: wp.array2d(dtype=vec2),
        body_ang_vel_out: wp.array2d(dtype=scalar),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        env, body = wp.tid()
        integrate_body(
            body_params,
            h,
            env,
            body,
            wrench[env, body],
            body_pos,
            body_theta,
            body_vel,
            body_ang_vel,
            body_pos_out,
            body_theta_out,
            body_vel_out,
            body_ang_vel_out,
            non_finite_out,
        )

    return SimpleNamespace(body_contacts=body_contacts, integrate_bodies=integrate_bodies)


def allocate_forces(
    n_envs: int, n_agents: int, n_bodies: int, scalar: type, device: str, requires_grad: bool
) -> BodyForces:
    """Zeroed ``BodyForces`` for ``n_envs`` envs."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)

    def zeros(count, dtype):
        return wp.zeros((n_envs, count), dtype=dtype, device=device, requires_grad=requires_grad)

    return BodyForces(
        zeros(n_agents, vec2),
        zeros(n_agents, vec2),
        zeros(n_bodies, vec3),
        zeros(n_bodies, vec2),
        zeros(n_bodies, scalar),
        zeros(n_bodies, vec2),
        zeros(n_bodies, scalar),
    )


def body_route(state, forces: BodyForces, substep: int, n_substeps: int) -> tuple[BodyArrays, BodyArrays]:
    """``(read, write)`` body arrays of ``substep`` of ``n_substeps`` run in place on ``state``.

    The bodies go state -> spare -> state -> ...: every substep but an odd count's last reads one
    set and writes the other, so ``body_contacts`` can integrate the bodies in the same launch (no
    thread reads what another writes). An odd count's last substep runs in place (read = write)
    and the integration is a separate launch after the contacts.
    """
    own, spare = of_state(state), forces.spare()
    if substep % 2 == 1:
        return spare, own
    if substep == n_substeps - 1:
        return own, own
    return own, spare


def launch_substep(
    stepper,
    state_in,
    bodies_in: BodyArrays,
    forces: BodyForces,
    bodies_out: BodyArrays,
    launcher,
    fuse: bool,
    non_finite_flag: wp.array,
) -> None:
    """Launch the body part of a substep: agents' total forces (into ``forces.total``) and bodies'
    wrenches from ``state_in``'s agents and ``bodies_in``, and the bodies' next state into
    ``bodies_out``: in the same launch with ``fuse`` (no-grad only) when the two sets differ, else
    by ``integrate_bodies``. Both ways compute the same bits. A body state gone non-finite raises
    its env's ``non_finite_flag`` ([E] or [1] int32, ``swarp.runtime.health``)."""
    m, bm, s = stepper.model, stepper.bodies, stepper.scalar
    contact, _ = stepper.model_args()
    lower, upper = contact.lower, contact.upper
    ob = m.obstacles
    n_envs, n_agents = state_in.pos.shape
    per_thread, threads = stepper.plan.split(n_agents + bm.n_bodies)
    h = s(stepper.dt / stepper.substeps)
    fused = fuse and bodies_in.pos.ptr != bodies_out.pos.ptr
    launcher.launch(
        kernels(s, fused).body_contacts,
        dim=(n_envs, threads),
        inputs=[
            m.params,
            int(m.params.shape[0] > 1),
            bm.shape_body,
            bm.shape_kind,
            bm.shape_offset,
            bm.shape_angle,
            bm.shape_size,
            bm.first_shape,
            bm.joint_index,
            bm.joint_params,
            bm.n_joints,
            ob.shape,
            ob.center,
            ob.angle,
            ob.size,
            int(ob.per_env),
            s(stepper.world.collision_k),
            s(stepper.world.collision_damping),
            int(stepper.world.bounds is not None),
            lower,
            upper,
            state_in.pos,
            state_in.vel,
            *bodies_in,
            forces.contact,
            per_thread,
            bm.params,
            h,
        ],
        outputs=[forces.total, forces.wrench, *bodies_out, non_finite_flag],
        device=stepper.device,
    )
    if not fused:
        launcher.launch(
            kernels(s, False).integrate_bodies,
            dim=(n_envs, bm.n_bodies),
            inputs=[bm.params, h, forces.wrench, *bodies_in],
            outputs=[*bodies_out, non_finite_flag],
            device=stepper.device,
        )


__all__ = [
    "BodyArrays",
    "BodyForces",
    "BodyModel",
    "allocate_forces",
    "body_route",
    "funcs",
    "kernels",
    "launch_substep",
    "of_state",
]
