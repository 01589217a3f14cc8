"""Kernels of the movable rigid bodies (``bodies.py`` holds the model and the launches).

Cached factories, each keyed by what it compiles for: ``probe_funcs`` and ``pair_funcs`` (the
contact geometry of probes, shape pairs and joints), ``body_args`` (the ``BodyArgs`` struct of the
body model), ``integrate_body_func`` (one body's substep), ``body_contacts_kernel`` (agents' total
forces and bodies' wrenches, optionally integrating the bodies) and ``integrate_bodies_kernel``.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS
from swarp.physics import contacts, dynamics
from swarp.runtime import health

_CIRCLE = wp.constant(int(ObstacleShape.CIRCLE))
_BOX = wp.constant(int(ObstacleShape.BOX))
_SEGMENT = wp.constant(int(ObstacleShape.SEGMENT))
_RADIUS = wp.constant(PARAM_RADIUS)


@functools.cache
def probe_funcs(scalar: type) -> SimpleNamespace:
    """Probe geometry of one precision: shape poses, levers, probes and their contact force."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
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

    return SimpleNamespace(
        shape_pose=shape_pose,
        cross=cross,
        point_velocity=point_velocity,
        probe_force=probe_force,
        probe_count=probe_count,
        probe=probe,
    )


@functools.cache
def pair_funcs(scalar: type) -> SimpleNamespace:
    """Shape-pair wrenches and joint forces of one precision (on ``probe_funcs``)."""
    vec2 = vec2_type(scalar)
    vec4 = wp.types.vector(4, scalar)
    pf = probe_funcs(scalar)
    cross, probe, probe_count, probe_force = pf.cross, pf.probe, pf.probe_count, pf.probe_force
    point_velocity = pf.point_velocity
    zero = scalar(0.0)
    one = scalar(1.0)

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

    return SimpleNamespace(shape_pair=shape_pair, joint_force=joint_force)


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Every rigid-body contact and joint function of one precision, by name (``probe_funcs`` and
    ``pair_funcs`` together)."""
    return SimpleNamespace(**vars(probe_funcs(scalar)), **vars(pair_funcs(scalar)))


@functools.cache
def body_args(scalar: type):
    """``BodyArgs``, the model inputs of ``body_contacts`` of one precision, in place of twenty-four
    arguments (``BodyModel.contact_args`` fills it): the agent ``params`` [E_p, A, P] and
    ``per_env_params``; the ``BodyModel`` shape and joint arrays, ``n_joints``, ``body_params``; the
    obstacles, ``stiffness``, ``damping``, ``lower`` and ``upper`` as in ``contacts.contact_args``;
    ``walls`` 0/1; ``slots_per_thread`` (agents and bodies per thread); ``h`` the substep [s]."""
    vec2 = vec2_type(scalar)

    @wp.struct
    class BodyArgs:
        params: wp.array3d(dtype=scalar)
        per_env_params: int
        shape_body: wp.array(dtype=wp.int32)
        shape_kind: wp.array(dtype=wp.int32)
        shape_offset: wp.array(dtype=vec2)
        shape_angle: wp.array(dtype=scalar)
        shape_size: wp.array(dtype=vec2)
        first_shape: wp.array(dtype=wp.int32)
        joint_index: wp.array2d(dtype=wp.int32)
        joint_params: wp.array2d(dtype=scalar)
        n_joints: int
        obstacle_shape: wp.array2d(dtype=wp.int32)
        obstacle_center: wp.array2d(dtype=vec2)
        obstacle_angle: wp.array2d(dtype=scalar)
        obstacle_size: wp.array2d(dtype=vec2)
        per_env_obstacles: int
        stiffness: scalar
        damping: scalar
        walls: int
        lower: vec2
        upper: vec2
        slots_per_thread: int
        body_params: wp.array2d(dtype=scalar)
        h: scalar

    return BodyArgs


@functools.cache
def integrate_body_func(scalar: type):
    """``integrate_body``: one body's semi-implicit Euler substep (see its docstring)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    wrap_angle = dynamics.funcs(scalar).wrap_angle
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

    return integrate_body


@functools.cache
def body_wrench_func(scalar: type):
    """``body_wrench``: the wrench (fx, fy, torque) [N, N m] on ``body`` of ``env``: ``force`` and
    ``torque`` (its agent contacts and joint reactions) plus its body-body contacts, static
    obstacles and walls, summed in that order."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    f = funcs(scalar)
    cf = contacts.funcs(scalar)
    shape_pose = f.shape_pose
    Args = body_args(scalar)
    zero = scalar(0.0)

    @wp.func
    def body_wrench(
        m: Args,
        env: int,
        body: int,
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        body_ang_vel: wp.array2d(dtype=scalar),
        force_in: vec2,
        torque_in: scalar,
    ) -> vec3:
        force = force_in
        torque = torque_in
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
                for s_lo in range(m.first_shape[lo], m.first_shape[lo + 1]):
                    pose_lo = shape_pose(x_lo, th_lo, m.shape_offset[s_lo], m.shape_angle[s_lo])
                    for s_hi in range(m.first_shape[hi], m.first_shape[hi + 1]):
                        pose_hi = shape_pose(x_hi, th_hi, m.shape_offset[s_hi], m.shape_angle[s_hi])
                        w = f.shape_pair(
                            m.shape_kind[s_lo],
                            vec2(pose_lo[0], pose_lo[1]),
                            pose_lo[2],
                            m.shape_size[s_lo],
                            x_lo,
                            body_vel[env, lo],
                            body_ang_vel[env, lo],
                            m.shape_kind[s_hi],
                            vec2(pose_hi[0], pose_hi[1]),
                            pose_hi[2],
                            m.shape_size[s_hi],
                            x_hi,
                            body_vel[env, hi],
                            body_ang_vel[env, hi],
                            m.stiffness,
                            m.damping,
                        )
                        if body == lo:
                            force += vec2(w[0], w[1])
                            torque += w[2]
                        else:
                            force -= vec2(w[0], w[1])
                            torque += w[3]

        # Static obstacles and walls.
        oe = env * m.per_env_obstacles
        for s in range(m.first_shape[body], m.first_shape[body + 1]):
            pose = shape_pose(x, th, m.shape_offset[s], m.shape_angle[s])
            center = vec2(pose[0], pose[1])
            kind = m.shape_kind[s]
            for o in range(m.obstacle_shape.shape[1]):
                ob_kind = m.obstacle_shape[oe, o]
                if ob_kind != 0:
                    ob_center = m.obstacle_center[oe, o]
                    w = f.shape_pair(
                        kind,
                        center,
                        pose[2],
                        m.shape_size[s],
                        x,
                        v,
                        om,
                        ob_kind,
                        ob_center,
                        m.obstacle_angle[oe, o],
                        m.obstacle_size[oe, o],
                        ob_center,
                        vec2(zero, zero),
                        zero,
                        m.stiffness,
                        m.damping,
                    )
                    force += vec2(w[0], w[1])
                    torque += w[2]
            if m.walls != 0:
                for i in range(f.probe_count(kind)):
                    pr = f.probe(kind, center, pose[2], m.shape_size[s], i)
                    p = vec2(pr[0], pr[1])
                    fw = cf.wall_force(
                        p, f.point_velocity(v, om, p - x), pr[2], m.lower, m.upper, m.stiffness, m.damping
                    )
                    force += fw
                    torque += f.cross(p - x, fw)
        return vec3(force[0], force[1], torque)

    return body_wrench


@functools.cache
def body_contacts_kernel(scalar: type, integrate: bool):
    """``body_contacts`` of one precision, over (E, threads) with a ``body_args(scalar)``: every
    agent's total force and every body's wrench. With ``integrate`` it also integrates the bodies
    (into arrays other than the ones it reads: see ``bodies.body_route``), one launch less per substep."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    f = funcs(scalar)
    cf = contacts.funcs(scalar)
    shape_pose = f.shape_pose
    integrate_body = integrate_body_func(scalar)
    body_wrench = body_wrench_func(scalar)
    Args = body_args(scalar)
    zero = scalar(0.0)

    # The fused variant (integrate=True) runs on the no-grad paths only: Warp's adjoint of it (array
    # stores inside a dynamic loop through a function) came out wrong, so the tape uses the pair.
    @wp.kernel(enable_backward=not integrate, module="unique", grid_stride=False)
    def body_contacts(
        m: Args,
        # state
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        body_pos: wp.array2d(dtype=vec2),
        body_theta: wp.array2d(dtype=scalar),
        body_vel: wp.array2d(dtype=vec2),
        body_ang_vel: wp.array2d(dtype=scalar),
        contact: wp.array2d(dtype=vec2),
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
        first_slot = thread * m.slots_per_thread
        for slot in range(first_slot, wp.min(first_slot + m.slots_per_thread, n_agents + body_pos.shape[1])):
            is_agent = slot < n_agents
            agent = slot
            body = slot - n_agents
            pe = env * m.per_env_params
            force = vec2(zero, zero)
            torque = zero

            # Agent-shape contacts: an agent walks every shape, a body walks every (agent, own shape).
            first = int(0)
            count = m.shape_kind.shape[0]
            n_pairs = count
            if not is_agent:
                first = m.first_shape[body]
                count = m.first_shape[body + 1] - first
                n_pairs = n_agents * count
            for q in range(n_pairs):
                a = agent
                s = q
                if not is_agent:
                    a = q / count
                    s = first + q % count
                sb = m.shape_body[s]
                x_b = body_pos[env, sb]
                pose = shape_pose(x_b, body_theta[env, sb], m.shape_offset[s], m.shape_angle[s])
                p = pos[env, a]
                fa = f.probe_force(
                    p,
                    m.params[pe, a, _RADIUS],
                    vel[env, a],
                    m.shape_kind[s],
                    vec2(pose[0], pose[1]),
                    pose[2],
                    m.shape_size[s],
                    x_b,
                    body_vel[env, sb],
                    body_ang_vel[env, sb],
                    m.stiffness,
                    m.damping,
                )
                if is_agent:
                    force += fa
                else:
                    force -= fa
                    torque -= f.cross(p - x_b, fa)

            # Joints: the force on endpoint 1, at one call site for the agent and both bodies.
            for j in range(m.n_joints):
                body2 = m.joint_index[j, 0]
                joint_agent = m.joint_index[j, 1]
                body1 = m.joint_index[j, 2]
                involved = is_agent and joint_agent == agent
                if not is_agent:
                    involved = body2 == body or body1 == body
                if involved:
                    x2 = body_pos[env, body2]
                    lever2 = cf.rotate(vec2(m.joint_params[j, 0], m.joint_params[j, 1]), body_theta[env, body2])
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
                        lever1 = cf.rotate(vec2(m.joint_params[j, 2], m.joint_params[j, 3]), body_theta[env, body1])
                        p1 = x1 + lever1
                        v1 = f.point_velocity(body_vel[env, body1], body_ang_vel[env, body1], lever1)
                    f1 = f.joint_force(p1, v1, p2, v2, m.joint_params[j, 4], m.joint_params[j, 5], m.joint_params[j, 6])
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
                wrench = body_wrench(m, env, body, body_pos, body_theta, body_vel, body_ang_vel, force, torque)
                wrench_out[env, body] = wrench
                if wp.static(integrate):
                    integrate_body(
                        m.body_params,
                        m.h,
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

    return body_contacts


@functools.cache
def integrate_bodies_kernel(scalar: type):
    """``integrate_bodies``: every body's substep under its wrench, over (E, B)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    integrate_body = integrate_body_func(scalar)

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

    return integrate_bodies
