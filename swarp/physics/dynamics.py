"""Dynamics: turn actions and contact forces into the next state of every agent.

One thread per agent integrates one substep of length ``h``. Actions are physical and clamped
in-kernel to the agent's limits, for every finite value: a holonomic command is scaled to the norm
limit along its direction (``clip_norm`` divides by its largest component first when ``|u|^2``
overflows, so ``1e30`` or the float max move exactly as the bound does), wheeled components are
boxed by ``wp.clamp``. A non-finite action component is treated as 0 and raises the device-side
``invalid_action`` flag (checking on the host would cost a sync every step).

Models (contact acceleration ``a_c = F / m``):

* HOLONOMIC, VELOCITY: ``v = clip(u, max_speed) + a_c h``, ``p += v h``. Contacts act as a
  velocity correction within the substep, so commanded motion is exact when nothing touches.
* HOLONOMIC, ACCELERATION: ``v' = clip(u, max_accel) + a_c - drag v``, ``p' = v``; speed clipped.
* DIFF_DRIVE and KINEMATIC_BICYCLE share a unicycle core: ``p' = s (cos, sin)(theta + beta) + a_c h``,
  ``theta' = omega``. Diff drive has ``beta = 0`` and integrates its own ``omega``; the bicycle
  uses the slip angle ``beta = atan(l_r / L tan delta)`` and ``omega = s cos(beta) tan(delta) / L``.
  Under ACCELERATION control ``s`` (and the diff drive's ``omega``) are integrated from the action.

EULER is semi-implicit (velocity-level first, then the pose with the new velocities); RK4 is the
classic scheme on the same ODE with action and contact force held over the substep.

Guarantee: every state stays finite under any actions as long as the substep is within the limits
of ``swarp.core.stability``, which ``Stepper`` enforces (``h <= sqrt(2 m / k)`` for the
velocity-level models, HOLONOMIC VELOCITY and both wheeled ones; semi-implicit Euler's contact limit
for HOLONOMIC ACCELERATION). Speeds are clipped to ``max_speed`` and headings wrapped after every
substep; beyond the limits contacts over-correct and, confined by walls, diverge.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ControlMode, DynamicsModel, Integrator
from swarp.core.precision import vec2_type
from swarp.core.types import (
    PARAM_DRAG,
    PARAM_MASS,
    PARAM_MAX_ACCEL,
    PARAM_MAX_ANG_ACCEL,
    PARAM_MAX_ANG_VEL,
    PARAM_MAX_SPEED,
    PARAM_MAX_STEER,
    PARAM_RADIUS,
    PARAM_REAR_RATIO,
    PARAM_WHEELBASE,
)
from swarp.physics import bounds
from swarp.runtime import health
from swarp.runtime.alive import with_alive

_HOLONOMIC = wp.constant(int(DynamicsModel.HOLONOMIC))
_DIFF_DRIVE = wp.constant(int(DynamicsModel.DIFF_DRIVE))
_BICYCLE = wp.constant(int(DynamicsModel.KINEMATIC_BICYCLE))
_DRONE = wp.constant(int(DynamicsModel.DRONE))
_VELOCITY = wp.constant(int(ControlMode.VELOCITY))
_RK4 = wp.constant(int(Integrator.RK4))
_P_RADIUS = wp.constant(PARAM_RADIUS)
_P_MASS = wp.constant(PARAM_MASS)
_P_MAX_SPEED = wp.constant(PARAM_MAX_SPEED)
_P_MAX_ACCEL = wp.constant(PARAM_MAX_ACCEL)
_P_MAX_ANG_VEL = wp.constant(PARAM_MAX_ANG_VEL)
_P_MAX_ANG_ACCEL = wp.constant(PARAM_MAX_ANG_ACCEL)
_P_WHEELBASE = wp.constant(PARAM_WHEELBASE)
_P_REAR_RATIO = wp.constant(PARAM_REAR_RATIO)
_P_MAX_STEER = wp.constant(PARAM_MAX_STEER)
_P_DRAG = wp.constant(PARAM_DRAG)


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    zero = scalar(0.0)
    pi = scalar(math.pi)
    two_pi = scalar(2.0 * math.pi)

    @wp.func
    def clip_norm(v: vec2, limit: scalar) -> vec2:
        """``v`` scaled down to norm ``limit`` [same unit] when longer, for every finite ``v``."""
        n2 = wp.dot(v, v)
        if health.finite(n2):
            if n2 > limit * limit:
                return v * (limit / wp.sqrt(n2))
            return v
        # |v|^2 overflowed (components beyond ~1e19 in float32, ~1e154 in float64): divide by the
        # largest component first, so the direction survives. Scalar divisions, as their adjoint
        # (``ret / b``) stays finite where the vector one (``a . adj / b^2``) would overflow.
        largest = wp.max(wp.abs(v[0]), wp.abs(v[1]))
        unit = vec2(v[0] / largest, v[1] / largest)
        n = wp.length(unit)  # in [1, sqrt(2)]
        if largest > limit / n:
            return unit * (limit / n)
        return v

    @wp.func
    def safe_norm(v: vec2) -> scalar:
        n2 = wp.dot(v, v)
        if n2 > zero:
            return wp.sqrt(n2)
        return zero

    @wp.func
    def wrap_angle(theta: scalar) -> scalar:
        wrapped = theta - two_pi * wp.floor((theta + pi) / two_pi)
        # The quotient can round up to the next integer just below pi (and its odd multiples),
        # landing one ulp below -pi: fold such values back into [-pi, pi).
        if wrapped < -pi:
            wrapped = wrapped + two_pi
        elif wrapped >= pi:
            wrapped = wrapped - two_pi
        return wrapped

    @wp.func
    def heading(theta: scalar) -> vec2:
        return vec2(wp.cos(theta), wp.sin(theta))

    @wp.func
    def unicycle_rates(
        theta: scalar, s: scalar, omega: scalar, beta: scalar, kappa: scalar, bicycle: bool, push: vec2
    ) -> vec3:
        """(x', y', theta') of the unicycle core; the bicycle's yaw rate is ``s * kappa``."""
        d = heading(theta + beta) * s + push
        yaw = omega
        if bicycle:
            yaw = s * kappa
        return vec3(d[0], d[1], yaw)

    return SimpleNamespace(
        clip_norm=clip_norm, safe_norm=safe_norm, wrap_angle=wrap_angle, heading=heading, unicycle_rates=unicycle_rates
    )


#: Every planar model, control mode and integrator: the kernel that handles any fleet.
ALL_MODELS = frozenset((DynamicsModel.HOLONOMIC, DynamicsModel.DIFF_DRIVE, DynamicsModel.KINEMATIC_BICYCLE))
ALL_CTRL_MODES = frozenset(ControlMode)
ALL_INTEGRATORS = frozenset(Integrator)


def integrate_args(scalar: type, masked: bool = False):
    """``IntegrateArgs``, the model inputs of one integration substep of one precision (one struct in
    place of ten arguments, shared by the planar, drone and fused kernels; ``Stepper.integrate_args``
    fills it once and again only when the model's parameter table is replaced).

    Fields: ``params`` [E_p, A, P] agent parameters (``PARAM_*`` columns), ``per_env_params`` 1
    when E_p = E (else row 0 is shared); ``kinds`` and ``ctrl_modes`` [A] int32 ``DynamicsModel``
    and ``ControlMode`` codes; ``h`` the substep [s]; ``integrator`` the ``Integrator`` code;
    ``agents_per_thread`` of the launch layout; ``clamp_bounds`` 0/1 and the world's corners
    ``lower``, ``upper`` [m]; ``gravity`` [m/s^2] (drones only); ``masked``: and ``alive``, the
    world's alive mask (``swarp.runtime.alive``).
    """
    return integrate_args_of(scalar, bool(masked))


@functools.cache
def integrate_args_of(scalar: type, masked: bool):
    """``integrate_args``, cached by its whole key: a call with ``masked`` left out gets the same struct."""
    if masked:
        return with_alive(integrate_args_of(scalar, False))
    vec2 = vec2_type(scalar)

    @wp.struct
    class IntegrateArgs:
        params: wp.array3d(dtype=scalar)
        per_env_params: int
        kinds: wp.array(dtype=wp.int32)
        ctrl_modes: wp.array(dtype=wp.int32)
        h: scalar
        integrator: int
        agents_per_thread: int
        clamp_bounds: int
        lower: vec2
        upper: vec2
        gravity: scalar

    return IntegrateArgs


@functools.cache
def wheeled_func(scalar: type, models: frozenset, ctrl_modes: frozenset, integrators: frozenset):
    """``wheeled_step``, one substep of a wheeled agent (the unicycle core of DIFF_DRIVE and
    KINEMATIC_BICYCLE, see the module docstring) for ``integrate_agent_func``'s arguments: from the
    finite commands ``u0``, ``u1``, the contact acceleration ``accel_c`` [m/s^2] and the pose and
    rates on entry to ``(pos, theta, vel, speed, ang_vel)`` after ``h`` [s]."""
    bicycles = DynamicsModel.KINEMATIC_BICYCLE in models
    unicycles = DynamicsModel.DIFF_DRIVE in models
    velocity = ControlMode.VELOCITY in ctrl_modes
    acceleration = ControlMode.ACCELERATION in ctrl_modes
    euler = Integrator.EULER in integrators
    rk4_any = Integrator.RK4 in integrators
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    zero = scalar(0.0)
    half = scalar(0.5)
    two = scalar(2.0)
    sixth = scalar(1.0 / 6.0)

    @wp.func
    def wheeled_step(
        params: wp.array3d(dtype=scalar),
        pe: int,
        agent: int,
        kind: int,
        velocity_ctrl: bool,
        rk4: bool,
        u0: scalar,
        u1: scalar,
        max_speed: scalar,
        accel_c: vec2,
        h: scalar,
        p_in: vec2,
        th_in: scalar,
        s_in: scalar,
        om_in: scalar,
    ):
        p = p_in
        th = th_in
        s = s_in
        om = om_in
        bicycle = bool(False)
        if wp.static(bicycles and unicycles):
            bicycle = kind == _BICYCLE
        elif wp.static(bicycles):
            bicycle = True
        push = accel_c * h
        max_ang_vel = params[pe, agent, _P_MAX_ANG_VEL]
        beta = zero
        kappa = zero
        a_lin = zero
        a_ang = zero
        if bicycle:
            wheelbase = params[pe, agent, _P_WHEELBASE]
            max_steer = params[pe, agent, _P_MAX_STEER]
            delta = wp.clamp(u1, -max_steer, max_steer)
            tan_delta = wp.tan(delta)
            beta = wp.atan(params[pe, agent, _P_REAR_RATIO] * tan_delta)
            kappa = wp.cos(beta) * tan_delta / wheelbase
        if wp.static(velocity) and velocity_ctrl:
            s = wp.clamp(u0, -max_speed, max_speed)
            if not bicycle:
                om = wp.clamp(u1, -max_ang_vel, max_ang_vel)
        elif wp.static(acceleration):
            max_accel = params[pe, agent, _P_MAX_ACCEL]
            a_lin = wp.clamp(u0, -max_accel, max_accel)
            if not bicycle:
                max_ang_accel = params[pe, agent, _P_MAX_ANG_ACCEL]
                a_ang = wp.clamp(u1, -max_ang_accel, max_ang_accel)
        if wp.static(rk4_any) and rk4:
            # State (x, y, theta, s, omega); s and omega are linear in time within the substep.
            s2 = s + a_lin * (h * half)
            om2 = om + a_ang * (h * half)
            s4 = s + a_lin * h
            om4 = om + a_ang * h
            k1 = f.unicycle_rates(th, s, om, beta, kappa, bicycle, push)
            k2 = f.unicycle_rates(th + k1[2] * (h * half), s2, om2, beta, kappa, bicycle, push)
            k3 = f.unicycle_rates(th + k2[2] * (h * half), s2, om2, beta, kappa, bicycle, push)
            k4 = f.unicycle_rates(th + k3[2] * h, s4, om4, beta, kappa, bicycle, push)
            rate = (k1 + (k2 + k3) * two + k4) * sixth
            p = p + vec2(rate[0], rate[1]) * h
            th = th + rate[2] * h
            s = s4
            om = om4
        elif wp.static(euler):
            s = s + a_lin * h
            om = om + a_ang * h
            s = wp.clamp(s, -max_speed, max_speed)
            if not bicycle:
                om = wp.clamp(om, -max_ang_vel, max_ang_vel)
            rate = f.unicycle_rates(th, s, om, beta, kappa, bicycle, push)
            p = p + vec2(rate[0], rate[1]) * h
            th = th + rate[2] * h
        s = wp.clamp(s, -max_speed, max_speed)
        if bicycle:
            om = s * kappa
        else:
            om = wp.clamp(om, -max_ang_vel, max_ang_vel)
        th = f.wrap_angle(th)
        v = f.heading(th + beta) * s + push
        return p, th, v, s, om

    return wheeled_step


@functools.cache
def integrate_agent_func(
    scalar: type,
    models: frozenset = ALL_MODELS,
    ctrl_modes: frozenset = ALL_CTRL_MODES,
    integrators: frozenset = ALL_INTEGRATORS,
    masked: bool = False,
):
    """``integrate_agent``, the Warp function integrating one planar agent over one substep, for one
    precision, compiled for the planar ``models``, ``ctrl_modes`` and ``integrators`` a fleet uses
    (``Stepper`` passes its own; the defaults handle anything). Agents still pick their branch at
    run time from ``kinds`` / ``ctrl_modes``; the sets only drop the branches no agent can take
    (fewer registers: see docs/benchmarks.md). The integration kernel and the fused substep
    (``swarp.physics.substep``) both run it, so they compute the same bits. ``masked``: an
    ``integrate_args(scalar, True)``, whose dead agents keep their state (copied to the outputs) and
    whose actions are ignored."""
    holonomic = DynamicsModel.HOLONOMIC in models
    wheeled = DynamicsModel.DIFF_DRIVE in models or DynamicsModel.KINEMATIC_BICYCLE in models
    velocity = ControlMode.VELOCITY in ctrl_modes
    acceleration = ControlMode.ACCELERATION in ctrl_modes
    euler = Integrator.EULER in integrators
    rk4_any = Integrator.RK4 in integrators
    vec2 = vec2_type(scalar)
    Args = integrate_args(scalar, masked)
    wheeled_step = wheeled_func(scalar, models, ctrl_modes, integrators)
    f = funcs(scalar)
    b = bounds.funcs(scalar)
    zero = scalar(0.0)
    half = scalar(0.5)
    two = scalar(2.0)
    sixth = scalar(1.0 / 6.0)

    @wp.func
    def integrate_agent(
        m: Args,
        actions: wp.array3d(dtype=scalar),
        force: vec2,
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        vel: wp.array2d(dtype=vec2),
        speed: wp.array2d(dtype=scalar),
        ang_vel: wp.array2d(dtype=scalar),
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        invalid_out: wp.array(dtype=wp.int32),
        env: int,
        agent: int,
    ) -> bool:
        """One substep of length ``h`` [s] for ``agent`` of ``env`` under the contact ``force`` [N]
        (a planar agent; a drone is left to physics/drone.py): its state from the input arrays into
        the output ones. Returns whether the new state is finite."""
        params = m.params
        h = m.h
        pe = env * m.per_env_params
        # Every load first, before any branch or store: the compiler cannot tell the flag store
        # below from these loads apart, so a load after it would wait for it, and one after the
        # drone branch for the kind's load: rounds of memory latency one after another.
        kind = m.kinds[agent]
        velocity_ctrl = m.ctrl_modes[agent] == _VELOCITY
        raw0 = actions[env, agent, 0]
        raw1 = actions[env, agent, 1]
        max_speed = params[pe, agent, _P_MAX_SPEED]
        accel_c = force / params[pe, agent, _P_MASS]
        p = pos[env, agent]
        th = theta[env, agent]
        v = vel[env, agent]
        s = speed[env, agent]
        om = ang_vel[env, agent]
        if kind == _DRONE:
            return True  # 6-DOF: physics/drone.py integrates it
        if wp.static(masked):
            if not m.alive[env, agent]:
                # Frozen: the same state out (a no-op in place, a copy on the taped path).
                pos_out[env, agent] = p
                theta_out[env, agent] = th
                vel_out[env, agent] = v
                speed_out[env, agent] = s
                ang_vel_out[env, agent] = om
                return True
        # Non-finite commands act as 0 and raise the invalid-action flag.
        finite0 = health.finite(raw0)
        finite1 = health.finite(raw1)
        if not (finite0 and finite1):
            invalid_out[0] = 1
        u0 = wp.where(finite0, raw0, zero)
        u1 = wp.where(finite1, raw1, zero)
        rk4 = m.integrator == _RK4

        if wp.static(holonomic) and kind == _HOLONOMIC:
            u = vec2(u0, u1)
            if wp.static(velocity) and velocity_ctrl:
                v = f.clip_norm(u, max_speed) + accel_c * h
                p = p + v * h
            elif wp.static(acceleration):
                a_cmd = f.clip_norm(u, params[pe, agent, _P_MAX_ACCEL]) + accel_c
                drag = params[pe, agent, _P_DRAG]
                if wp.static(rk4_any) and rk4:
                    k1v = a_cmd - v * drag
                    v2 = v + k1v * (h * half)
                    k2v = a_cmd - v2 * drag
                    v3 = v + k2v * (h * half)
                    k3v = a_cmd - v3 * drag
                    v4 = v + k3v * h
                    k4v = a_cmd - v4 * drag
                    p = p + (v + (v2 + v3) * two + v4) * (h * sixth)
                    v = v + (k1v + (k2v + k3v) * two + k4v) * (h * sixth)
                elif wp.static(euler):
                    v = f.clip_norm(v + (a_cmd - v * drag) * h, max_speed)
                    p = p + v * h
                v = f.clip_norm(v, max_speed)
            s = f.safe_norm(v)
            om = zero
        elif wp.static(wheeled):
            p, th, v, s, om = wheeled_step(
                params, pe, agent, kind, velocity_ctrl, rk4, u0, u1, max_speed, accel_c, h, p, th, s, om
            )

        if m.clamp_bounds != 0:
            clamped = b.clamp_to_bounds(p, v, params[pe, agent, _P_RADIUS], m.lower, m.upper)
            p = vec2(clamped[0, 0], clamped[0, 1])
            v = vec2(clamped[1, 0], clamped[1, 1])
        pos_out[env, agent] = p
        theta_out[env, agent] = th
        vel_out[env, agent] = v
        speed_out[env, agent] = s
        ang_vel_out[env, agent] = om
        finite = health.finite(p) and health.finite(th) and health.finite(v)
        return finite and health.finite(s) and health.finite(om)

    return integrate_agent


@functools.cache
def integrate_kernel(
    scalar: type,
    models: frozenset = ALL_MODELS,
    ctrl_modes: frozenset = ALL_CTRL_MODES,
    integrators: frozenset = ALL_INTEGRATORS,
    per_agent: bool = False,
    masked: bool = False,
):
    """``integrate``, the planar integration kernel (``integrate_agent_func``'s arguments), launched
    over (E, threads per env) with the model in an ``integrate_args(scalar)``.

    With ``per_agent`` the kernel is launched with one agent per thread (``agents_per_thread`` 1,
    ``plan.one_thread_per_env`` off) and the loop over a thread's agents compiles away: a run-time
    trip count kept every value of the loop body live across it (more registers; see
    docs/benchmarks.md). ``masked``: for a world with an alive mask (``integrate_agent_func``).
    """
    vec2 = vec2_type(scalar)
    Args = integrate_args(scalar, masked)
    integrate_agent = integrate_agent_func(scalar, models, ctrl_modes, integrators, masked)

    @wp.kernel(module="unique", grid_stride=False)
    def integrate(
        m: Args,
        # inputs
        actions: wp.array3d(dtype=scalar),
        forces: wp.array2d(dtype=vec2),
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        vel: wp.array2d(dtype=vec2),
        speed: wp.array2d(dtype=scalar),
        ang_vel: wp.array2d(dtype=scalar),
        # outputs (may alias the inputs on the no-grad path: each thread touches only its agent)
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        invalid_out: wp.array(dtype=wp.int32),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        env, slot = wp.tid()
        # One agent per thread on the GPU; on the CPU, where each thread costs a call, one env per thread.
        first = slot * m.agents_per_thread
        stop = wp.min(first + m.agents_per_thread, pos.shape[1])
        if wp.static(per_agent):
            stop = first + 1
        finite = bool(True)
        for agent in range(first, stop):
            agent_finite = integrate_agent(
                m,
                actions,
                forces[env, agent],
                pos,
                theta,
                vel,
                speed,
                ang_vel,
                pos_out,
                theta_out,
                vel_out,
                speed_out,
                ang_vel_out,
                invalid_out,
                env,
                agent,
            )
            finite = finite and agent_finite
        health.flag_env(non_finite_out, env, finite)

    return integrate
