"""Contact forces: agent-agent spring-dampers, static obstacles, soft world walls.

Every contact is a linear spring along the contact normal with damping on the normal closing
speed, clamped so it only ever pushes: ``f = max(k * penetration - c * v_n, 0) * n``. Forces are
gathered, not scattered: each agent sums over its own neighbor list, so there are no atomics and
the sum order is fixed (the list is sorted by distance). The pair force is computed from the
same floating-point differences with their signs flipped, so the forces of a pair are equal and
opposite bit for bit.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS
from swarp.runtime.alive import with_alive

_CIRCLE = wp.constant(int(ObstacleShape.CIRCLE))
_BOX = wp.constant(int(ObstacleShape.BOX))
_SEGMENT = wp.constant(int(ObstacleShape.SEGMENT))
_RADIUS = wp.constant(PARAM_RADIUS)


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Contact-geometry functions for one precision (shared by the force kernel and sensors)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    far = scalar(1.0e30)

    @wp.func
    def rotate(v: vec2, angle: scalar) -> vec2:
        c = wp.cos(angle)
        s = wp.sin(angle)
        return vec2(c * v[0] - s * v[1], s * v[0] + c * v[1])

    @wp.func
    def spring_damper(normal: vec2, penetration: scalar, separating: scalar, k: scalar, c: scalar) -> vec2:
        """Repulsive force along ``normal``; ``separating`` is the relative velocity along it."""
        magnitude = k * penetration - c * separating
        if magnitude < zero:
            magnitude = zero
        return normal * magnitude

    @wp.func
    def pair_force(
        p_i: vec2, v_i: vec2, r_i: scalar, p_j: vec2, v_j: vec2, r_j: scalar, i_first: bool, k: scalar, c: scalar
    ) -> vec2:
        """Force on agent i from agent j [N]; zero unless the discs overlap."""
        delta = p_i - p_j
        d2 = wp.dot(delta, delta)
        reach = r_i + r_j
        if d2 >= reach * reach:
            return vec2(zero, zero)
        d = zero
        normal = vec2(one, zero)
        if d2 > zero:
            d = wp.sqrt(d2)
            normal = delta / d
        elif not i_first:
            # Coincident centres: split along x by index so the pair still pushes apart symmetrically.
            normal = vec2(-one, zero)
        return spring_damper(normal, reach - d, wp.dot(v_i - v_j, normal), k, c)

    @wp.func
    def obstacle_distance(p: vec2, shape: int, center: vec2, angle: scalar, size: vec2) -> vec3:
        """Signed distance [m] from ``p`` to an obstacle and the outward unit normal, as (d, nx, ny).

        Inside a box the distance is negative and the normal points to the nearest face, so a
        penetrating agent is pushed out the shortest way.
        """
        local = rotate(p - center, -angle)
        d = far
        n_local = vec2(one, zero)
        if shape == _CIRCLE:
            dist = wp.length(local)
            d = dist - size[0]
            if dist > zero:
                n_local = local / dist
        elif shape == _BOX:
            qx = wp.abs(local[0]) - size[0]
            qy = wp.abs(local[1]) - size[1]
            sx = wp.where(local[0] < zero, -one, one)
            sy = wp.where(local[1] < zero, -one, one)
            if qx > zero or qy > zero:
                ox = wp.max(qx, zero)
                oy = wp.max(qy, zero)
                d = wp.sqrt(ox * ox + oy * oy)
                n_local = vec2(sx * ox / d, sy * oy / d)
            elif qx > qy:
                d = qx
                n_local = vec2(sx, zero)
            else:
                d = qy
                n_local = vec2(zero, sy)
        elif shape == _SEGMENT:
            t = wp.clamp(local[0], -size[0], size[0])
            delta = vec2(local[0] - t, local[1])
            dist = wp.length(delta)
            d = dist - size[1]
            if dist > zero:
                n_local = delta / dist
            else:
                n_local = vec2(zero, one)
        n = rotate(n_local, angle)
        return vec3(d, n[0], n[1])

    @wp.func
    def wall_force(p: vec2, v: vec2, r: scalar, lo: vec2, hi: vec2, k: scalar, c: scalar) -> vec2:
        """Soft-wall force [N] pushing a disc of radius ``r`` back inside ``[lo, hi]``."""
        f = vec2(zero, zero)
        if p[0] - r < lo[0]:
            f += spring_damper(vec2(one, zero), lo[0] - (p[0] - r), v[0], k, c)
        if p[0] + r > hi[0]:
            f += spring_damper(vec2(-one, zero), p[0] + r - hi[0], -v[0], k, c)
        if p[1] - r < lo[1]:
            f += spring_damper(vec2(zero, one), lo[1] - (p[1] - r), v[1], k, c)
        if p[1] + r > hi[1]:
            f += spring_damper(vec2(zero, -one), p[1] + r - hi[1], -v[1], k, c)
        return f

    return SimpleNamespace(
        rotate=rotate,
        spring_damper=spring_damper,
        pair_force=pair_force,
        obstacle_distance=obstacle_distance,
        wall_force=wall_force,
    )


def contact_args(scalar: type, masked: bool = False):
    """``ContactArgs``, the model inputs of the contact force of one precision (one struct in place
    of fourteen arguments; ``Stepper.contact_args`` fills it once and again only when the model's
    parameter or obstacle arrays are replaced).

    Fields: ``params`` [E_p, A, P] agent parameters (``PARAM_*`` columns), ``per_env_params`` 1
    when E_p = E (else row 0 is shared); ``obstacle_shape`` [E_o, O] int32 ``ObstacleShape`` codes
    (0: empty slot), ``obstacle_center`` [E_o, O] vec2 [m], ``obstacle_angle`` [E_o, O] [rad],
    ``obstacle_size`` [E_o, O] vec2 [m], ``per_env_obstacles`` 1 when E_o = E; ``stiffness`` [N/m]
    and ``damping`` [N s/m] of every contact; ``agent_collisions`` and ``soft_walls`` 0/1 switches;
    ``lower`` and ``upper`` the world's corners [m]; ``agents_per_thread`` of the launch layout;
    ``masked``: and ``alive``, the world's alive mask (``swarp.runtime.alive``).
    """
    return contact_args_of(scalar, bool(masked))


@functools.cache
def contact_args_of(scalar: type, masked: bool):
    """``contact_args``, cached by its whole key: a call with ``masked`` left out gets the same struct."""
    if masked:
        return with_alive(contact_args_of(scalar, False))
    vec2 = vec2_type(scalar)

    @wp.struct
    class ContactArgs:
        params: wp.array3d(dtype=scalar)
        per_env_params: int
        obstacle_shape: wp.array2d(dtype=wp.int32)
        obstacle_center: wp.array2d(dtype=vec2)
        obstacle_angle: wp.array2d(dtype=scalar)
        obstacle_size: wp.array2d(dtype=vec2)
        per_env_obstacles: int
        stiffness: scalar
        damping: scalar
        agent_collisions: int
        soft_walls: int
        lower: vec2
        upper: vec2
        agents_per_thread: int

    return ContactArgs


@functools.cache
def kernels(scalar: type, obstacles: bool = True, masked: bool = False) -> SimpleNamespace:
    """The contact-force kernel for one precision and ``agent_force``, the Warp function it runs
    for one agent (the fused substep calls it too: ``swarp.physics.substep``); without
    ``obstacles`` (a world with no obstacle slots) the obstacle loop and its shape code are not
    compiled (fewer registers). Both read the model through ``contact_args(scalar, masked)``; with
    ``masked`` a dead neighbor pushes no one (its own force is never integrated: ``dynamics``)."""
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    zero = scalar(0.0)
    Args = contact_args(scalar, masked)

    @wp.func
    def agent_force(
        c: Args,
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        nbr: wp.array3d(dtype=wp.int32),
        nbr_near: wp.array2d(dtype=wp.int32),
        env: int,
        agent: int,
    ) -> vec2:
        """The contact force [N] on ``agent`` of ``env``: its listed neighbors, obstacles and walls."""
        params = c.params
        stiffness = c.stiffness
        damping = c.damping
        pe = env * c.per_env_params
        p = pos[env, agent]
        v = vel[env, agent]
        r = params[pe, agent, _RADIUS]
        force = vec2(zero, zero)
        if c.agent_collisions != 0:
            for k in range(nbr_near[env, agent]):
                j = nbr[env, k, agent]
                if wp.static(masked):
                    if not c.alive[env, j]:
                        continue  # left this step: still in the list built before it left
                force += f.pair_force(
                    p, v, r, pos[env, j], vel[env, j], params[pe, j, _RADIUS], agent < j, stiffness, damping
                )
        if wp.static(obstacles):
            oe = env * c.per_env_obstacles
            for o in range(c.obstacle_shape.shape[1]):
                shape = c.obstacle_shape[oe, o]
                if shape != 0:
                    hit = f.obstacle_distance(
                        p, shape, c.obstacle_center[oe, o], c.obstacle_angle[oe, o], c.obstacle_size[oe, o]
                    )
                    if hit[0] < r:
                        normal = vec2(hit[1], hit[2])
                        force += f.spring_damper(normal, r - hit[0], wp.dot(v, normal), stiffness, damping)
        if c.soft_walls != 0:
            force += f.wall_force(p, v, r, c.lower, c.upper, stiffness, damping)
        return force

    @wp.kernel(module="unique", grid_stride=False)
    def contact_forces(
        c: Args,
        # state
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        nbr: wp.array3d(dtype=wp.int32),
        nbr_near: wp.array2d(dtype=wp.int32),
        # output
        forces_out: wp.array2d(dtype=vec2),
    ):
        env, slot = wp.tid()
        # One agent per thread on the GPU; on the CPU, where each thread costs a call, one env per thread.
        first = slot * c.agents_per_thread
        for agent in range(first, wp.min(first + c.agents_per_thread, pos.shape[1])):
            forces_out[env, agent] = agent_force(c, pos, vel, nbr, nbr_near, env, agent)

    return SimpleNamespace(contact_forces=contact_forces, agent_force=agent_force)
