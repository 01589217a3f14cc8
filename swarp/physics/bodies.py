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

The kernels and their functions live in ``body_kernels.py``; this module holds the body model, its
arrays and the launches.
"""

from typing import NamedTuple

import numpy as np
import torch
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.core.precision import vec2_type
from swarp.physics import body_kernels

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
        # (ContactArgs, IntegrateArgs, BodyArgs): the launch's model struct and the stepper's
        # structs it was filled with (``contact_args``).
        self._args: tuple | None = None

    def contact_args(self, stepper):
        """The ``body_kernels.body_args`` instance of ``stepper`` (a ``Stepper`` of this world):
        filled once, and anew only when ``stepper.model_args`` fills new structs (what they are
        filled from changed)."""
        contact, integrate = stepper.model_args()
        cached = self._args
        # The stepper fills new structs whenever what they hold changes: theirs identify ours.
        if cached is not None and cached[0] is contact and cached[1] is integrate:
            return cached[2]
        m, s = stepper.model, stepper.scalar
        ob = m.obstacles
        b = body_kernels.body_args(s)()
        b.params, b.per_env_params = m.params, contact.per_env_params
        b.shape_body, b.shape_kind, b.shape_offset = self.shape_body, self.shape_kind, self.shape_offset
        b.shape_angle, b.shape_size, b.first_shape = self.shape_angle, self.shape_size, self.first_shape
        b.joint_index, b.joint_params, b.n_joints = self.joint_index, self.joint_params, self.n_joints
        b.obstacle_shape, b.obstacle_center, b.obstacle_angle, b.obstacle_size = ob.shape, ob.center, ob.angle, ob.size
        b.per_env_obstacles = contact.per_env_obstacles
        b.stiffness, b.damping = contact.stiffness, contact.damping
        b.walls = int(stepper.world.bounds is not None)
        b.lower, b.upper = contact.lower, contact.upper
        b.slots_per_thread, _ = stepper.plan.split(stepper.n_agents + self.n_bodies)
        b.body_params, b.h = self.params, integrate.h
        self._args = (contact, integrate, b)
        return b

    def shape_poses_torch(self, body_pos: torch.Tensor, body_theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """The world poses of every body shape (torch twin of ``body_kernels.probe_funcs(scalar).shape_pose``).

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
    bm, s = stepper.bodies, stepper.scalar
    args = bm.contact_args(stepper)
    n_envs, n_agents = state_in.pos.shape
    _, threads = stepper.plan.split(n_agents + bm.n_bodies)
    fused = fuse and bodies_in.pos.ptr != bodies_out.pos.ptr
    launcher.launch(
        body_kernels.body_contacts_kernel(s, fused),
        dim=(n_envs, threads),
        inputs=[args, state_in.pos, state_in.vel, *bodies_in, forces.contact],
        outputs=[forces.total, forces.wrench, *bodies_out, non_finite_flag],
        device=stepper.device,
    )
    if not fused:
        launcher.launch(
            body_kernels.integrate_bodies_kernel(s),
            dim=(n_envs, bm.n_bodies),
            inputs=[bm.params, args.h, forces.wrench, *bodies_in],
            outputs=[*bodies_out, non_finite_flag],
            device=stepper.device,
        )


__all__ = [
    "BodyArrays",
    "BodyForces",
    "BodyModel",
    "allocate_forces",
    "body_route",
    "launch_substep",
    "of_state",
]
