"""Drone dynamics: the 6-DOF quadrotor (``DynamicsModel.DRONE``), one thread per agent.

State: position ``p = (x, y, z)`` [m], velocity ``v`` [m/s], attitude quaternion ``q`` (body to
world, x y z w) and body rates ``w`` [rad/s]. Actions: the four rotor thrusts ``f_i`` [N], clamped
to ``[0, max_thrust]``, in a "+" layout (rotor 0 on the body +x arm, 1 on +y, 2 on -x, 3 on -y,
rotors 0 and 2 spinning against 1 and 3):

* thrust ``T = f0 + f1 + f2 + f3`` along the body z axis,
* torque ``tau = (L (f1 - f3), L (f2 - f0), k (f0 - f1 + f2 - f3))`` with arm length ``L`` and
  reaction coefficient ``k`` (``yaw_moment``),
* ``v' = R(q) (0, 0, T) / m + (F_x, F_y, 0) / m - (0, 0, g) - drag v`` with the planar contact
  force ``F`` (contacts act in the ground plane, between the discs of the agents' projections),
* ``q' = q (x) (w, 0) / 2``, ``I w' = tau - w x I w`` (principal inertia ``I``).

The body-rate norm ``|w|`` is clipped to ``max_body_rate`` on entry, at RK4's stages and after
every substep: with no rotational damping, explicit integration of the gyroscopic term ``w x I w``
gains energy at every substep, and random thrusts spun drones up until ``w`` overflowed. After
each substep the quaternion is renormalised, the speed ``|v|`` is clipped to ``max_speed`` (which
keeps the contact search's sizing valid), the ground ``z >= 0`` is enforced (``z = 0``,
``v_z >= 0``), and in ``clamp`` bounds mode the planar position is clamped like any agent's. The
planar fields hold the projection: ``pos = (x, y)``, ``vel = (v_x, v_y)``, ``speed = |(v_x, v_y)|``,
``theta`` the yaw of ``q`` and ``ang_vel`` the world-frame yaw rate ``(R(q) w)_z``.

EULER is semi-implicit (rates and velocity first, then pose with the new ones), RK4 the classic
scheme on ``(p, v, q, w)`` with actions and contact force held over the substep. The planar
integration kernel (``dynamics.py``) skips drones; this kernel carries the 6-DOF fields of every
other agent unchanged, so a fleet may mix both in one world.

Why every field stays finite under any in-bounds (indeed any) thrusts, at a substep within
``swarp.core.stability``'s contact limit: thrusts are clamped to ``[0, max_thrust]`` (a non-finite
one acts as 0), so torques and the thrust are bounded; ``|w| <= max_body_rate`` bounds every rate
derivative; Euler's attitude step scales a unit ``q`` by ``sqrt(1 + (h |w| / 2)^2)`` (never 0 or
huge) and RK4's by a bounded polynomial in ``h |w|``, and Warp's ``normalize`` maps a (near-)zero
quaternion to the identity, so ``q`` is always a unit quaternion; ``|v| <= max_speed`` after every
substep, so ``z`` moves at most ``h max_speed`` per substep (and stays >= 0); the yaw is an
``atan2`` and the yaw rate at most ``|w|``.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.config import DynamicsModel, Integrator
from swarp.core.precision import vec2_type
from swarp.core.types import (
    PARAM_ARM_LENGTH,
    PARAM_DRAG,
    PARAM_INERTIA_X,
    PARAM_INERTIA_Y,
    PARAM_INERTIA_Z,
    PARAM_MASS,
    PARAM_MAX_BODY_RATE,
    PARAM_MAX_SPEED,
    PARAM_MAX_THRUST,
    PARAM_RADIUS,
    PARAM_YAW_MOMENT,
)
from swarp.physics import bounds, dynamics
from swarp.runtime import health

_DRONE = wp.constant(int(DynamicsModel.DRONE))
_RK4 = wp.constant(int(Integrator.RK4))
_P_RADIUS = wp.constant(PARAM_RADIUS)
_P_MASS = wp.constant(PARAM_MASS)
_P_MAX_SPEED = wp.constant(PARAM_MAX_SPEED)
_P_DRAG = wp.constant(PARAM_DRAG)

_P_ARM = wp.constant(PARAM_ARM_LENGTH)
_P_IX = wp.constant(PARAM_INERTIA_X)
_P_IY = wp.constant(PARAM_INERTIA_Y)
_P_IZ = wp.constant(PARAM_INERTIA_Z)
_P_YAW = wp.constant(PARAM_YAW_MOMENT)
_P_MAX_THRUST = wp.constant(PARAM_MAX_THRUST)
_P_MAX_BODY_RATE = wp.constant(PARAM_MAX_BODY_RATE)


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """The rigid-body rates of one precision (also used by tests' references through the kernel)."""
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)
    zero = scalar(0.0)
    half = scalar(0.5)

    @wp.func
    def attitude_rate(q: quat, w: vec3) -> quat:
        """``q' = q (x) (w, 0) / 2`` for body rates ``w``."""
        return (q * quat(w[0], w[1], w[2], zero)) * half

    @wp.func
    def body_acceleration(w: vec3, tau: vec3, inertia: vec3) -> vec3:
        """``w' = I^-1 (tau - w x I w)`` for the principal inertia ``inertia``."""
        iw = wp.cw_mul(inertia, w)
        return wp.cw_div(tau - wp.cross(w, iw), inertia)

    @wp.func
    def linear_acceleration(
        q: quat, v: vec3, thrust: scalar, push: vec3, mass: scalar, g: scalar, drag: scalar
    ) -> vec3:
        """``R(q) (0, 0, T) / m + push - (0, 0, g) - drag v``; ``push`` is the contact acceleration.
        ``R`` is the rotation of ``q / |q|`` (RK4's intermediate attitudes are not unit)."""
        return wp.quat_rotate(wp.normalize(q), vec3(zero, zero, thrust / mass)) + push - vec3(zero, zero, g) - v * drag

    @wp.func
    def rates(
        q: quat,
        v: vec3,
        w: vec3,
        thrust: scalar,
        push: vec3,
        mass: scalar,
        g: scalar,
        drag: scalar,
        tau: vec3,
        inertia: vec3,
    ):
        """``(v', q', w')`` of the rigid body (the position rate is ``v`` itself)."""
        return (
            linear_acceleration(q, v, thrust, push, mass, g, drag),
            attitude_rate(q, w),
            body_acceleration(w, tau, inertia),
        )

    @wp.func
    def clip_norm(v: vec3, limit: scalar) -> vec3:
        """``v`` scaled down to norm ``limit`` when longer, for every finite ``v`` (as
        ``dynamics.funcs(scalar).clip_norm``, in 3-D)."""
        n2 = wp.dot(v, v)
        if health.finite(n2):
            if n2 > limit * limit:
                return v * (limit / wp.sqrt(n2))
            return v
        largest = wp.max(wp.max(wp.abs(v[0]), wp.abs(v[1])), wp.abs(v[2]))
        unit = vec3(v[0] / largest, v[1] / largest, v[2] / largest)
        n = wp.length(unit)  # in [1, sqrt(3)]
        if largest > limit / n:
            return unit * (limit / n)
        return v

    @wp.func
    def yaw(q: quat) -> scalar:
        """Heading [rad] of the body x axis projected on the ground plane."""
        return wp.atan2(
            scalar(2.0) * (q[3] * q[2] + q[0] * q[1]), scalar(1.0) - scalar(2.0) * (q[1] * q[1] + q[2] * q[2])
        )

    return SimpleNamespace(
        attitude_rate=attitude_rate,
        body_acceleration=body_acceleration,
        linear_acceleration=linear_acceleration,
        rates=rates,
        clip_norm=clip_norm,
        yaw=yaw,
    )


@functools.cache
def thrust_func(scalar: type):
    """``thrust_command``: rotor ``k``'s thrust command [N] of ``agent`` in ``env``, clamped to
    ``[0, limit]``; a non-finite one acts as 0 and raises ``invalid_out``."""
    zero = scalar(0.0)

    @wp.func
    def thrust_command(
        actions: wp.array3d(dtype=scalar),
        env: int,
        agent: int,
        k: int,
        limit: scalar,
        invalid_out: wp.array(dtype=wp.int32),
    ) -> scalar:
        u = actions[env, agent, k]
        if not health.finite(u):
            invalid_out[0] = 1
            return zero
        return wp.clamp(u, zero, limit)

    return thrust_command


@functools.cache
def integrate_drone_kernel(scalar: type, per_agent: bool = False):
    """``integrate_drone``, the drone integration kernel for one precision, over the model in a
    ``dynamics.integrate_args(scalar)``; ``per_agent`` as in ``dynamics.integrate_kernel`` (one
    agent per thread: the loop over a thread's agents compiles away, fewer registers; see
    docs/benchmarks.md)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)
    f = funcs(scalar)
    planar = dynamics.funcs(scalar)
    b = bounds.funcs(scalar)
    zero = scalar(0.0)
    half = scalar(0.5)
    two = scalar(2.0)
    sixth = scalar(1.0 / 6.0)
    Args = dynamics.integrate_args(scalar)
    thrust_command = thrust_func(scalar)

    @wp.kernel(module="unique", grid_stride=False)
    def integrate_drone(
        m: Args,
        # inputs
        actions: wp.array3d(dtype=scalar),
        forces: wp.array2d(dtype=vec2),
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        vel: wp.array2d(dtype=vec2),
        speed: wp.array2d(dtype=scalar),
        ang_vel: wp.array2d(dtype=scalar),
        pos_z: wp.array2d(dtype=scalar),
        vel_z: wp.array2d(dtype=scalar),
        attitude: wp.array2d(dtype=quat),
        omega: wp.array2d(dtype=vec3),
        # outputs (may alias the inputs on the no-grad path: each thread touches only its agent)
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        pos_z_out: wp.array2d(dtype=scalar),
        vel_z_out: wp.array2d(dtype=scalar),
        attitude_out: wp.array2d(dtype=quat),
        omega_out: wp.array2d(dtype=vec3),
        invalid_out: wp.array(dtype=wp.int32),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        env, slot = wp.tid()
        first = slot * m.agents_per_thread
        stop = wp.min(first + m.agents_per_thread, pos.shape[1])
        if wp.static(per_agent):
            stop = first + 1
        finite = bool(True)
        for agent in range(first, stop):
            if m.kinds[agent] != _DRONE:
                # Planar agents: dynamics.py integrates them; their 6-DOF fields are carried. (An
                # if/else, not ``continue``: Warp's adjoint of a loop body that continues drops it.)
                pos_z_out[env, agent] = pos_z[env, agent]
                vel_z_out[env, agent] = vel_z[env, agent]
                attitude_out[env, agent] = attitude[env, agent]
                omega_out[env, agent] = omega[env, agent]
            else:
                params = m.params
                h = m.h
                gravity = m.gravity
                pe = env * m.per_env_params
                mass = params[pe, agent, _P_MASS]
                arm = params[pe, agent, _P_ARM]
                limit = params[pe, agent, _P_MAX_THRUST]
                f0 = thrust_command(actions, env, agent, 0, limit, invalid_out)
                f1 = thrust_command(actions, env, agent, 1, limit, invalid_out)
                f2 = thrust_command(actions, env, agent, 2, limit, invalid_out)
                f3 = thrust_command(actions, env, agent, 3, limit, invalid_out)
                thrust = f0 + f1 + f2 + f3
                tau = vec3(arm * (f1 - f3), arm * (f2 - f0), params[pe, agent, _P_YAW] * (f0 - f1 + f2 - f3))
                inertia = vec3(params[pe, agent, _P_IX], params[pe, agent, _P_IY], params[pe, agent, _P_IZ])
                drag = params[pe, agent, _P_DRAG]
                fc = forces[env, agent]
                push = vec3(fc[0] / mass, fc[1] / mass, zero)
                p2 = pos[env, agent]
                v2 = vel[env, agent]
                p = vec3(p2[0], p2[1], pos_z[env, agent])
                v = vec3(v2[0], v2[1], vel_z[env, agent])
                q = attitude[env, agent]
                # The rate limit holds on entry (a state set above it, a lowered per-env limit), after
                # every substep and at RK4's stages, so every rate derivative is bounded by
                # |tau| / I + |w x I w| / I at |w| <= max_body_rate, whatever h.
                max_rate = params[pe, agent, _P_MAX_BODY_RATE]
                w = f.clip_norm(omega[env, agent], max_rate)
                if m.integrator == _RK4:
                    hh = h * half
                    k1v, k1q, k1w = f.rates(q, v, w, thrust, push, mass, gravity, drag, tau, inertia)
                    v2s = v + k1v * hh
                    w2s = f.clip_norm(w + k1w * hh, max_rate)
                    k2v, k2q, k2w = f.rates(q + k1q * hh, v2s, w2s, thrust, push, mass, gravity, drag, tau, inertia)
                    v3s = v + k2v * hh
                    w3s = f.clip_norm(w + k2w * hh, max_rate)
                    k3v, k3q, k3w = f.rates(q + k2q * hh, v3s, w3s, thrust, push, mass, gravity, drag, tau, inertia)
                    v4s = v + k3v * h
                    w4s = f.clip_norm(w + k3w * h, max_rate)
                    k4v, k4q, k4w = f.rates(q + k3q * h, v4s, w4s, thrust, push, mass, gravity, drag, tau, inertia)
                    p = p + (v + (v2s + v3s) * two + v4s) * (h * sixth)
                    v = v + (k1v + (k2v + k3v) * two + k4v) * (h * sixth)
                    q = q + (k1q + (k2q + k3q) * two + k4q) * (h * sixth)
                    w = f.clip_norm(w + (k1w + (k2w + k3w) * two + k4w) * (h * sixth), max_rate)
                else:
                    w = f.clip_norm(w + f.body_acceleration(w, tau, inertia) * h, max_rate)
                    v = v + f.linear_acceleration(q, v, thrust, push, mass, gravity, drag) * h
                    p = p + v * h
                    q = q + f.attitude_rate(q, w) * h
                q = wp.normalize(q)  # Warp's normalize maps a (near-)zero quaternion to the identity
                v = f.clip_norm(v, params[pe, agent, _P_MAX_SPEED])
                z = p[2]
                vz = v[2]
                if z < zero:
                    z = zero
                    vz = wp.max(vz, zero)
                p2 = vec2(p[0], p[1])
                v2 = vec2(v[0], v[1])
                if m.clamp_bounds != 0:
                    clamped = b.clamp_to_bounds(p2, v2, params[pe, agent, _P_RADIUS], m.lower, m.upper)
                    p2 = vec2(clamped[0, 0], clamped[0, 1])
                    v2 = vec2(clamped[1, 0], clamped[1, 1])
                pos_out[env, agent] = p2
                vel_out[env, agent] = v2
                speed_out[env, agent] = planar.safe_norm(v2)
                theta_out[env, agent] = planar.wrap_angle(f.yaw(q))
                ang_vel_out[env, agent] = wp.quat_rotate(q, w)[2]
                pos_z_out[env, agent] = z
                vel_z_out[env, agent] = vz
                attitude_out[env, agent] = q
                omega_out[env, agent] = w
                # The planar projections (speed, yaw, yaw rate) are finite when these are.
                finite = finite and health.finite(p2) and health.finite(v2) and health.finite(z) and health.finite(vz)
                finite = finite and health.finite(q) and health.finite(w)
        health.flag_env(non_finite_out, env, finite)

    return integrate_drone
