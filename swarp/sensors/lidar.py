"""Lidar: ``n_rays`` range readings per agent, against other agents, obstacles and world walls.

Ray ``k`` of agent ``i`` starts at the agent's centre and points along ``theta_i + 2 pi k / n_rays``
(the body frame: ray 0 looks straight ahead, rays go counter-clockwise). Its reading is the
distance [m] from the centre to the first surface it meets, or ``max_range`` when nothing is closer.
A ray whose origin is inside a shape reads 0. It sees:

* the other agents of the same env (discs of their radius; never the agent itself, never an agent
  of another env),
* every obstacle slot of the env, each shape solved analytically: CIRCLE (ray-disc), BOX (slabs in
  the box frame), SEGMENT (a capsule: the slabs of its core rectangle and the discs of its caps;
  a thickness of 0 is a bare segment),
* every shape of every movable body of the env (``WorldConfig.bodies``: CIRCLE, BOX or SEGMENT at
  its pose in the body's frame, moved with the body),
* the world bounds, when the world has them (``see_walls``).

Three forms that agree (tests pin them together):

* ``lidar_reference``: plain torch over all (ray, target) pairs, the specification; differentiable
  through torch autograd.
* the Warp scan kernels (``RAY_GROUP`` rays of an agent per thread on CUDA, ``group_kernel``; one env
  per thread on the CPU, ``env_kernel``), used by ``Lidar`` to write readings straight into an
  observation buffer inside the step's graph.
* ``lidar_warp``: the kernel as a ``torch.autograd.Function`` (a ``wp.Tape`` backward), gradients
  with respect to positions and headings.

The kernel finds *which* surface a ray hits in a first, discrete pass and then computes the
distance to that one surface again, so the adjoint differentiates exactly one closed-form hit
distance (the same function the torch ``min`` differentiates).
"""

import contextlib
import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import NamedTuple

import torch
import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.launch import EAGER, Launcher, agents_per_thread, env_choice
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS, Model
from swarp.env import episode
from swarp.env.runtime import TorchStreamScope
from swarp.physics import bodies as body_physics
from swarp.physics import contacts

#: ``kind`` codes of what a ray hit.
HIT_NONE = 0
HIT_AGENT = 1
HIT_OBSTACLE = 2
HIT_WALL = 3
HIT_BODY = 4

_HIT_BODY = wp.constant(HIT_BODY)
_HIT_AGENT = wp.constant(HIT_AGENT)
_HIT_OBSTACLE = wp.constant(HIT_OBSTACLE)
_HIT_WALL = wp.constant(HIT_WALL)
_HIT_NONE = wp.constant(HIT_NONE)
_CIRCLE = wp.constant(int(ObstacleShape.CIRCLE))
_BOX = wp.constant(int(ObstacleShape.BOX))
_SEGMENT = wp.constant(int(ObstacleShape.SEGMENT))
_RADIUS = wp.constant(PARAM_RADIUS)
#: Rays per thread of the CUDA scan (``group_kernel``), and its A/B switch.
RAY_GROUP = 4
RAY_GROUP_ENV = "SWARP_LIDAR_GROUP"
#: Largest fleet the CPU's per-env scan (``env_kernel``, its loops over the fleet unrolled) serves;
#: larger fleets scan with ``lidar_scan``.
ENV_KERNEL_MAX_FLEET = 64


@dataclass(frozen=True)
class LidarConfig:
    """What a lidar measures.

    Attributes:
        n_rays: Rays per agent (>= 1), evenly spaced over the full circle from the heading.
        max_range: Reading [m] when nothing is hit within it (> 0, finite).
        see_agents: Whether rays hit the other agents of the env.
        see_walls: Whether rays hit the world bounds (ignored in an unbounded world).
    """

    n_rays: int
    max_range: float = 1.0
    see_agents: bool = True
    see_walls: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.n_rays, bool) or not isinstance(self.n_rays, int) or self.n_rays < 1:
            raise ValueError(f"lidar n_rays must be an int >= 1, got {self.n_rays!r}")
        r = self.max_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0:
            raise ValueError(f"lidar max_range must be a finite number > 0 [m], got {r!r}")
        for name in ("see_agents", "see_walls"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"lidar {name} must be a bool, got {getattr(self, name)!r}")


class LidarScan(NamedTuple):
    """Readings of every ray of every agent.

    Fields:
        distance: [E, A, n_rays] distance [m] to the first hit, ``max_range`` where none.
        kind: [E, A, n_rays] int32 ``HIT_*`` code of what was hit.
        index: [E, A, n_rays] int32 agent index (``HIT_AGENT``), obstacle slot (``HIT_OBSTACLE``)
            or body index (``HIT_BODY``) hit; -1 otherwise.
    """

    distance: torch.Tensor
    kind: torch.Tensor
    index: torch.Tensor


# --- Warp ---------------------------------------------------------------------------------------


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    float root;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(root) : "f"(x));
    return root;
#else
    return sqrtf(x);
#endif
"""
)
def search_sqrt_f32(x: wp.float32) -> wp.float32:
    """Square root for the discrete search, ``x >= 0``: the hardware's approximate one on CUDA
    (relative error ~2^-22; one instruction instead of the IEEE-rounded one's ~12), IEEE on the
    CPU. Only ever decides *which* surface is nearest; readings recompute the distance exactly."""
    ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    // -b|b| - c: b^2 - c where b < 0 (the same fused multiply-add as b * b - c), negative (so a
    // NaN root) where b >= 0, since c > 0; the sign test costs nothing (operand modifiers).
    float root;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(root) : "f"(-b * fabsf(b) - c));
    return root;
#else
    return sqrtf(b < 0.f ? wp::sub(wp::mul(b, b), c) : -1.f);
#endif
"""
)
def ahead_root_f32(b: wp.float32, c: wp.float32) -> wp.float32:
    """``search_sqrt(b^2 - c)`` where ``b < 0`` (a disc ahead of the ray), NaN where ``b >= 0``, for
    ``c > 0`` (outside the disc): the disc test's square root and its sign test in one, with no
    comparison on CUDA. Search only, like ``search_sqrt_f32``."""
    ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    float s, c;
    sincosf(phi, &s, &c);
    return wp::vec2f(c, s);
#else
    return wp::vec2f(cosf(phi), sinf(phi));
#endif
"""
)
def cos_sin_f32(phi: wp.float32) -> wp.vec2f:
    """``(cos phi, sin phi)``, one argument reduction for both on CUDA (``sincosf``: the same bits
    as ``cosf`` and ``sinf``, pinned by a GPU test against the per-ray scan). No adjoint."""
    ...


#: ``SWARP_LIDAR_SQRT=approx|ieee``: the A/B switch of the search's square root on CUDA.
SEARCH_SQRT_ENV = "SWARP_LIDAR_SQRT"


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Ray-shape intersection functions for one precision. Each returns the hit distance along a
    unit direction ``d`` from ``o`` [m]: 0 when ``o`` is inside the shape, a huge value on a miss."""
    vec2 = vec2_type(scalar)
    rotate = contacts.funcs(scalar).rotate
    zero = scalar(0.0)
    one = scalar(1.0)
    far = scalar(1.0e30)

    @wp.func
    def ray_circle(o: vec2, d: vec2, center: vec2, radius: scalar) -> scalar:
        oc = o - center
        b = wp.dot(oc, d)
        c = wp.dot(oc, oc) - radius * radius
        if c <= zero:
            return zero
        if b >= zero:
            return far  # outside and heading away
        disc = b * b - c
        if disc < zero:
            return far
        return -b - wp.sqrt(disc)

    approx = scalar is wp.float32 and env_choice(SEARCH_SQRT_ENV, ("approx", "ieee")) == "approx"
    search_sqrt = search_sqrt_f32 if approx else wp.sqrt  # float64 and the A/B switch: IEEE

    @wp.func
    def ahead_root_generic(b: scalar, c: scalar) -> scalar:
        """``ahead_root_f32`` for float64 and the IEEE A/B switch."""
        return search_sqrt(wp.where(b < zero, b * b - c, -one))

    ahead_root = ahead_root_f32 if approx else ahead_root_generic

    @wp.func
    def ray_disc_select(oc: vec2, c: scalar, d: vec2) -> scalar:
        """``ray_circle_select`` from the ray's side of the disc: ``oc`` = origin - centre [m] and
        ``c`` = |oc|^2 - radius^2 [m^2]."""
        b = wp.dot(oc, d)
        disc = b * b - c
        t = -b - search_sqrt(wp.max(disc, zero))
        t = wp.where(disc >= zero, t, far)
        t = wp.where(b < zero, t, far)
        return wp.where(c <= zero, zero, t)

    @wp.func
    def ray_circle_select(o: vec2, d: vec2, center: vec2, radius: scalar) -> scalar:
        """``ray_circle`` without branches, for the discrete search only (selects compile to
        conditional moves: a ray misses most discs at random, which a branch predictor cannot
        learn; its square root of a clamped value has no usable adjoint, hence search only)."""
        oc = o - center
        return ray_disc_select(oc, wp.dot(oc, oc) - radius * radius, d)

    @wp.func
    def slab(o: scalar, d: scalar, half: scalar) -> vec2:
        """Entry and exit parameters of the ray through ``|x| <= half`` along one axis."""
        if d == zero:
            if wp.abs(o) <= half:
                return vec2(-far, far)
            return vec2(far, -far)
        inv = one / d
        t1 = (-half - o) * inv
        t2 = (half - o) * inv
        return vec2(wp.min(t1, t2), wp.max(t1, t2))

    @wp.func
    def ray_box_local(o: vec2, d: vec2, half: vec2) -> scalar:
        """Ray against the axis-aligned box ``|x| <= half[0], |y| <= half[1]`` (its own frame)."""
        sx = slab(o[0], d[0], half[0])
        sy = slab(o[1], d[1], half[1])
        t_near = wp.max(sx[0], sy[0])
        t_far = wp.min(sx[1], sy[1])
        if t_near > t_far or t_far < zero:
            return far
        if t_near <= zero:
            return zero
        return t_near

    @wp.func
    def ray_obstacle(o: vec2, d: vec2, shape: int, center: vec2, angle: scalar, size: vec2) -> scalar:
        if shape == _CIRCLE:
            return ray_circle(o, d, center, size[0])
        o_local = rotate(o - center, -angle)
        d_local = rotate(d, -angle)
        if shape == _BOX:
            return ray_box_local(o_local, d_local, size)
        if shape == _SEGMENT:
            t = ray_box_local(o_local, d_local, size)
            t = wp.min(t, ray_circle(o_local, d_local, vec2(-size[0], zero), size[1]))
            return wp.min(t, ray_circle(o_local, d_local, vec2(size[0], zero), size[1]))
        return far

    @wp.func
    def ray_walls(o: vec2, d: vec2, lower: vec2, upper: vec2) -> scalar:
        """Distance to the bounds box ``[lower, upper]`` from inside it (0 from outside). One
        division per axis and no branches (rays of a warp point every way: branches on the sign of
        ``d`` ran both divisions), dividing by 1 where ``d`` is 0 so no adjoint sees 0 / 0."""
        t = far
        for axis in range(2):
            step = d[axis]
            bound = wp.where(step > zero, upper[axis], lower[axis])
            exit = (bound - o[axis]) / wp.where(step == zero, one, step)
            t = wp.min(t, wp.where(step == zero, far, exit))
        return wp.max(t, zero)

    return SimpleNamespace(
        ray_circle=ray_circle,
        ray_circle_select=ray_circle_select,
        ray_disc_select=ray_disc_select,
        search_sqrt=search_sqrt,
        ahead_root=ahead_root,
        slab=slab,
        ray_box_local=ray_box_local,
        ray_obstacle=ray_obstacle,
        ray_walls=ray_walls,
    )


@functools.cache
def scene_struct(scalar: type):
    """The Warp struct of what rays can hit besides agent positions, for one precision."""
    vec2 = vec2_type(scalar)

    @wp.struct
    class LidarScene:
        params: wp.array3d(dtype=scalar)  # [E_p, A, P] agent parameters (radius column)
        per_env_params: int  # 1 when params has a row per env
        obstacle_shape: wp.array2d(dtype=wp.int32)  # [E_o, O] ObstacleShape codes
        obstacle_center: wp.array2d(dtype=vec2)
        obstacle_angle: wp.array2d(dtype=scalar)
        obstacle_size: wp.array2d(dtype=vec2)
        per_env_obstacles: int  # 1 when obstacles have a row per env
        see_agents: int
        see_walls: int
        lower: vec2  # wall corners [m]
        upper: vec2
        n_rays: int
        max_range: scalar  # [m]
        # Movable bodies (read only by kernels compiled with ``bodies``): poses [E, B] and, per
        # shape [S], its body, ObstacleShape code, pose in the body frame and extents.
        body_pos: wp.array2d(dtype=vec2)
        body_theta: wp.array2d(dtype=scalar)
        shape_body: wp.array(dtype=wp.int32)
        shape_kind: wp.array(dtype=wp.int32)
        shape_offset: wp.array(dtype=vec2)
        shape_angle: wp.array(dtype=scalar)
        shape_size: wp.array(dtype=vec2)

    return LidarScene


@functools.cache
def kernels(
    scalar: type, with_hits: bool, obstacles: bool = True, bodies: bool = False, keeps: bool = False
) -> SimpleNamespace:
    """The scan kernel for one precision; ``with_hits`` also writes what each ray hit; without
    ``obstacles`` (no obstacle slots) the obstacle tests are not compiled (fewer registers), with
    ``bodies`` the rays also test every shape of the movable bodies, with ``keeps`` each ray first
    copies the reading it replaces to ``final_out`` (``launch_scan``'s ``final_out``; compiled in
    only where asked, since even a branch never taken costs a kernel registers)."""
    vec2 = vec2_type(scalar)
    shape_pose = body_physics.funcs(scalar).shape_pose
    f = funcs(scalar)
    Scene = scene_struct(scalar)
    two_pi = scalar(2.0 * math.pi)

    @wp.func
    def ray_angle(theta: scalar, ray: int, n_rays: int) -> scalar:
        """Angle [rad] of ray ``ray`` of ``n_rays`` of an agent heading ``theta`` [rad]."""
        phi = theta
        if ray != 0:
            # Ray 0's offset is exactly 0: skipping its division keeps the bits and keeps CUDA's
            # IEEE division off its slow path (a zero numerator takes it: measured ~4% of a scan).
            phi = theta + two_pi * scalar(ray) / scalar(n_rays)
        return phi

    @wp.func
    def ray_direction(theta: scalar, ray: int, n_rays: int) -> vec2:
        """Unit direction of ray ``ray`` of ``n_rays`` of an agent heading ``theta`` [rad]."""
        phi = ray_angle(theta, ray, n_rays)
        return vec2(wp.cos(phi), wp.sin(phi))

    @wp.func
    def nearer_static(sc: Scene, env: int, o: vec2, d: vec2, best: scalar, hit: wp.vec2i) -> wp.vec2i:
        """``hit`` at distance ``best`` [m], or the first obstacle, body shape or wall (in that
        order) strictly nearer along the ray ``o + t d``."""
        nearer, t = nearer_static_at(sc, env, o, d, best, hit)
        return nearer

    @wp.func
    def nearer_static_at(sc: Scene, env: int, o: vec2, d: vec2, best: scalar, hit: wp.vec2i):
        """``nearer_static`` and the distance [m] at which its hit lies: ``best`` when it is still
        ``hit``, else the static surface's exact distance (what ``hit_distance`` computes for it)."""
        oe = env * sc.per_env_obstacles
        kind = hit[0]
        index = hit[1]
        if wp.static(obstacles):
            for s in range(sc.obstacle_shape.shape[1]):
                shape = sc.obstacle_shape[oe, s]
                if shape != 0:
                    t = f.ray_obstacle(
                        o, d, shape, sc.obstacle_center[oe, s], sc.obstacle_angle[oe, s], sc.obstacle_size[oe, s]
                    )
                    if t < best:
                        best = t
                        kind = _HIT_OBSTACLE
                        index = s
        if wp.static(bodies):
            for s in range(sc.shape_kind.shape[0]):
                b = sc.shape_body[s]
                pose = shape_pose(sc.body_pos[env, b], sc.body_theta[env, b], sc.shape_offset[s], sc.shape_angle[s])
                t = f.ray_obstacle(o, d, sc.shape_kind[s], vec2(pose[0], pose[1]), pose[2], sc.shape_size[s])
                if t < best:
                    best = t
                    kind = _HIT_BODY
                    index = s  # the shape (the scan reports its body)
        if sc.see_walls != 0:
            t = f.ray_walls(o, d, sc.lower, sc.upper)
            if t < best:
                best = t
                kind = _HIT_WALL
                index = -1
        return wp.vec2i(kind, index), best

    @wp.func
    def closest_hit(sc: Scene, pos: wp.array2d(dtype=vec2), env: int, agent: int, o: vec2, d: vec2) -> wp.vec2i:
        """Pass 1, discrete: ``(kind, index)`` of the first surface the ray hits closer than
        ``max_range``. A function of its own so its loops stay out of the kernel's adjoint; its
        static part (``nearer_static``) is shared with the CPU's per-env scan."""
        pe = env * sc.per_env_params
        best = sc.max_range
        kind = _HIT_NONE
        index = int(-1)
        if sc.see_agents != 0:
            for j in range(pos.shape[1]):
                if j != agent:
                    center = pos[env, j]
                    radius = sc.params[pe, j, _RADIUS]
                    # A disc farther than max_range + radius cannot be hit within range: skip it.
                    # Exact (such a disc never beats max_range), and with one agent's rays on
                    # consecutive threads the test is the same for the whole warp (no divergence).
                    offset = center - o
                    reach = sc.max_range + radius
                    if wp.dot(offset, offset) <= reach * reach:
                        t = f.ray_circle_select(o, d, center, radius)
                        if t < best:
                            best = t
                            kind = _HIT_AGENT
                            index = j
        return nearer_static(sc, env, o, d, best, wp.vec2i(kind, index))

    @wp.func
    def hit_distance(sc: Scene, pos: wp.array2d(dtype=vec2), env: int, o: vec2, d: vec2, hit: wp.vec2i) -> scalar:
        """Pass 2: the distance [m] to the surface ``hit``, the only value the adjoint differentiates."""
        kind = hit[0]
        index = hit[1]
        if kind == _HIT_AGENT:
            return f.ray_circle(o, d, pos[env, index], sc.params[env * sc.per_env_params, index, _RADIUS])
        if wp.static(obstacles) and kind == _HIT_OBSTACLE:
            oe = env * sc.per_env_obstacles
            return f.ray_obstacle(
                o,
                d,
                sc.obstacle_shape[oe, index],
                sc.obstacle_center[oe, index],
                sc.obstacle_angle[oe, index],
                sc.obstacle_size[oe, index],
            )
        if wp.static(bodies) and kind == _HIT_BODY:
            b = sc.shape_body[index]
            pose = shape_pose(sc.body_pos[env, b], sc.body_theta[env, b], sc.shape_offset[index], sc.shape_angle[index])
            return f.ray_obstacle(o, d, sc.shape_kind[index], vec2(pose[0], pose[1]), pose[2], sc.shape_size[index])
        if kind == _HIT_WALL:
            return f.ray_walls(o, d, sc.lower, sc.upper)
        return sc.max_range

    @wp.func
    def store_hit(
        sc: Scene,
        env: int,
        agent: int,
        ray: int,
        hit: wp.vec2i,
        kind_out: wp.array3d(dtype=wp.int32),
        index_out: wp.array3d(dtype=wp.int32),
    ):
        """Write what a ray hit: its ``HIT_*`` kind and the agent, obstacle slot or body (a body
        shape's body) it belongs to."""
        kind_out[env, agent, ray] = hit[0]
        which = hit[1]
        if wp.static(bodies):
            if hit[0] == _HIT_BODY:
                which = sc.shape_body[which]
        index_out[env, agent, ray] = which

    @wp.func
    def finish_ray(
        sc: Scene,
        pos: wp.array2d(dtype=vec2),
        env: int,
        agent: int,
        ray: int,
        column: int,
        o: vec2,
        d: vec2,
        best: scalar,
        hit: wp.vec2i,
        distance_out: wp.array3d(dtype=scalar),
        kind_out: wp.array3d(dtype=wp.int32),
        index_out: wp.array3d(dtype=wp.int32),
    ):
        """The rest of a ray after the agent discs (nearest so far ``hit`` at ``best`` [m]): the
        static surfaces, then the reading (and what was hit) written; for the no-adjoint scans.
        A static surface's reading is the distance its test computed (``hit_distance`` would
        compute it again, to the same bits), no hit's is ``best`` (callers pass ``max_range``
        then), an agent's is its exact ``ray_circle``."""
        hit, reading = nearer_static_at(sc, env, o, d, best, hit)
        if hit[0] == _HIT_AGENT:
            reading = hit_distance(sc, pos, env, o, d, hit)
        distance_out[env, agent, column + ray] = reading
        if wp.static(with_hits):
            store_hit(sc, env, agent, ray, hit, kind_out, index_out)

    @wp.kernel(module="unique")
    def lidar_scan(
        scene: Scene,
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        rays_per_thread: int,
        column: int,
        distance_out: wp.array3d(dtype=scalar),
        kind_out: wp.array3d(dtype=wp.int32),
        index_out: wp.array3d(dtype=wp.int32),
        final_out: wp.array3d(dtype=scalar),
    ):
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        n_rays = scene.n_rays
        # One ray per thread on the GPU; on the CPU, where each thread costs a call, one env per thread.
        first = slot * rays_per_thread
        for item in range(first, wp.min(first + rays_per_thread, pos.shape[1] * n_rays)):
            agent = item // n_rays
            ray = item - agent * n_rays
            if wp.static(keeps):
                final_out[env, agent, column + ray] = distance_out[env, agent, column + ray]
            o = pos[env, agent]
            d = ray_direction(theta[env, agent], ray, n_rays)
            hit = closest_hit(scene, pos, env, agent, o, d)
            distance_out[env, agent, column + ray] = hit_distance(scene, pos, env, o, d, hit)
            if wp.static(with_hits):
                store_hit(scene, env, agent, ray, hit, kind_out, index_out)

    return SimpleNamespace(
        lidar_scan=lidar_scan,
        ray_angle=ray_angle,
        ray_direction=ray_direction,
        nearer_static=nearer_static,
        hit_distance=hit_distance,
        store_hit=store_hit,
        finish_ray=finish_ray,
    )


@functools.cache
def env_kernel(scalar: type, with_hits: bool, obstacles: bool, bodies: bool, fleet: int, keeps: bool):
    """``lidar_scan_env``: ``lidar_scan``'s readings with one thread per env and the fleet size
    ``fleet`` compiled in, for the CPU (where a launch's threads run one after another). Per agent,
    what every one of its rays needs of each disc (origin - centre, |.|^2 - r^2, whether the per-ray
    scan would test it at all) is computed once instead of once per ray; the rays then run the
    per-ray scan's arithmetic on those very values, so the bits are the same. No adjoint (the
    differentiable path keeps ``lidar_scan``). ``keeps`` as in ``kernels``."""
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    k = kernels(scalar, with_hits, obstacles, bodies)
    Scene = scene_struct(scalar)
    fleet_vec = wp.types.vector(fleet, scalar)
    fleet_flags = wp.types.vector(fleet, wp.int32)
    copy_columns = episode.copy_columns_func(scalar)

    @wp.kernel(enable_backward=False, module="unique")
    def lidar_scan_env(
        scene: Scene,
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        column: int,
        distance_out: wp.array3d(dtype=scalar),
        kind_out: wp.array3d(dtype=wp.int32),
        index_out: wp.array3d(dtype=wp.int32),
        final_out: wp.array3d(dtype=scalar),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        n_rays = scene.n_rays
        pe = env * scene.per_env_params
        for agent in range(wp.static(fleet)):
            if wp.static(keeps):
                copy_columns(distance_out, final_out, env, agent, column, column + n_rays)
            o = pos[env, agent]
            th = theta[env, agent]
            oc_x = fleet_vec()
            oc_y = fleet_vec()
            oc_c = fleet_vec()
            seen = fleet_flags()
            for j in range(wp.static(fleet)):
                center = pos[env, j]
                radius = scene.params[pe, j, _RADIUS]
                oc = o - center
                offset = center - o
                reach = scene.max_range + radius
                oc_x[j] = oc[0]
                oc_y[j] = oc[1]
                oc_c[j] = wp.dot(oc, oc) - radius * radius
                if scene.see_agents != 0 and j != agent and wp.dot(offset, offset) <= reach * reach:
                    seen[j] = 1  # the per-ray scan's range test, on the same values
            for ray in range(n_rays):
                d = k.ray_direction(th, ray, n_rays)
                best = scene.max_range
                kind = _HIT_NONE
                index = int(-1)
                for j in range(wp.static(fleet)):
                    if seen[j] != 0:
                        t = f.ray_disc_select(vec2(oc_x[j], oc_y[j]), oc_c[j], d)
                        if t < best:
                            best = t
                            kind = _HIT_AGENT
                            index = j
                hit = wp.vec2i(kind, index)
                k.finish_ray(scene, pos, env, agent, ray, column, o, d, best, hit, distance_out, kind_out, index_out)

    return lidar_scan_env


@functools.cache
def group_kernel(
    scalar: type, with_hits: bool, obstacles: bool, bodies: bool, group: int, fleet: int, n_rays: int, keeps: bool
):
    """``lidar_scan_group``: ``lidar_scan``'s readings with one thread per ``group`` consecutive rays
    of an agent (``group`` compiled in; the last group of an agent may be partial), for CUDA. Each
    disc is loaded, range-tested and reduced to its origin-relative terms (origin - centre,
    |.|^2 - r^2) once for the thread's rays, which keep their nearest hit so far in registers; the
    per-ray arithmetic is the per-ray scan's on the same values, so the bits are the same. No
    adjoint (the differentiable path keeps ``lidar_scan``). The fleet size ``fleet`` is compiled in:
    up to Warp's ``max_unroll`` agents the disc loop unrolls (its loads unconditional, so the
    compiler interleaves the discs), measured 6% faster on an H200 at 4,096 x 16 x 32 rays. So is
    ``n_rays``: the launch is one-dimensional (``dim = n_envs * fleet * groups``) and the thread's
    env, agent and rays come from divisions by constants (a 2-D launch and runtime divisors cost
    ~200 instructions per thread in the prologue, ncu on an H200). ``keeps`` as in ``kernels`` (as a
    runtime branch, never taken, the copy cost the step's scan 8.6 us at 4,096 x 16 x 32 rays on an
    H200: registers)."""
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    k = kernels(scalar, with_hits, obstacles, bodies)
    Scene = scene_struct(scalar)
    zero = scalar(0.0)
    ray_vec = wp.types.vector(group, scalar)
    ray_ints = wp.types.vector(group, wp.int32)
    groups = -(-n_rays // group)  # per agent

    @wp.kernel(enable_backward=False, module="unique")
    def lidar_scan_group(
        scene: Scene,
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        column: int,
        distance_out: wp.array3d(dtype=scalar),
        kind_out: wp.array3d(dtype=wp.int32),
        index_out: wp.array3d(dtype=wp.int32),
        final_out: wp.array3d(dtype=scalar),
    ):
        tid = wp.tid()
        env = tid // wp.static(fleet * groups)
        if use_mask != 0 and not env_mask[env]:
            return
        slot = tid - env * wp.static(fleet * groups)
        agent = slot // wp.static(groups)
        first = (slot - agent * wp.static(groups)) * wp.static(group)
        if wp.static(keeps):
            # ``episode.copy_columns`` unrolled for the thread's rays: its loop bound is a runtime
            # value, which compiles to 2,880 SASS instructions against these 2,624 (sass_stats).
            kept = ray_vec()
            for r in range(wp.static(group)):
                if first + r < wp.static(n_rays):
                    kept[r] = distance_out[env, agent, column + first + r]
            for r in range(wp.static(group)):
                if first + r < wp.static(n_rays):
                    final_out[env, agent, column + first + r] = kept[r]
        o = pos[env, agent]
        th = theta[env, agent]
        dx = ray_vec()
        dy = ray_vec()
        # Minus each ray's nearest agent hit so far [m]: the test below then forms -t with one add
        # (b + root) instead of two (Warp negates as 0 - x), and compares the other way round.
        near = ray_vec()
        index = ray_ints()
        for r in range(wp.static(group)):
            # past n_rays in a partial group: never stored
            phi = k.ray_angle(th, first + r, wp.static(n_rays))
            if wp.static(scalar is wp.float32):
                d = cos_sin_f32(phi)
            else:
                d = vec2(wp.cos(phi), wp.sin(phi))
            dx[r] = d[0]
            dy[r] = d[1]
            near[r] = -scene.max_range
            index[r] = -1
        if scene.see_agents != 0:
            pe = env * scene.per_env_params
            for j in range(wp.static(fleet)):
                radius = scene.params[pe, j, _RADIUS]
                oc = o - pos[env, j]
                dist2 = wp.dot(oc, oc)  # the per-ray scan's |centre - o|^2, to the bit
                reach = scene.max_range + radius
                if j != agent and dist2 <= reach * reach:  # the per-ray scan's range test
                    c = dist2 - radius * radius
                    # ``ray_disc_select``'s choice, with its selects folded into the comparison:
                    # inside the disc (the same for all of the agent's rays) every ray meets it at
                    # 0; outside, a ray meets it ahead (b < 0) at t = -(b + root) where the root
                    # exists (a negative argument gives NaN, which loses every comparison).
                    # t < nearest is -t > near. Same values (up to the sign of a zero), same choice.
                    if c <= zero:
                        for r in range(wp.static(group)):
                            if near[r] < zero:
                                near[r] = zero
                                index[r] = j
                    else:
                        for r in range(wp.static(group)):
                            b = wp.dot(oc, vec2(dx[r], dy[r]))
                            minus_t = b + f.ahead_root(b, c)  # NaN unless ahead and met
                            if minus_t > near[r]:
                                near[r] = minus_t
                                index[r] = j
        for r in range(wp.static(group)):
            ray = first + r
            if ray < wp.static(n_rays):
                hit = wp.vec2i(wp.where(index[r] >= 0, _HIT_AGENT, _HIT_NONE), index[r])
                d = vec2(dx[r], dy[r])
                best = -near[r]
                k.finish_ray(scene, pos, env, agent, ray, column, o, d, best, hit, distance_out, kind_out, index_out)

    return lidar_scan_group


#: ``SWARP_LIDAR_STREAM=side|main``: whether an environment's auto-reset scan (the finished envs'
#: new episodes) runs on a side stream, beside the neighbor refresh and masked observation (CUDA).
STREAM_ENV = "SWARP_LIDAR_STREAM"


def scan_stream(device) -> "wp.Stream | None":
    """The side stream for an environment's auto-reset scan on ``device``: a new stream on CUDA
    unless ``SWARP_LIDAR_STREAM=main``; ``None`` (the scan stays on the step's stream) elsewhere. A
    bad value raises."""
    side = env_choice(STREAM_ENV, ("side", "main")) == "side"
    return wp.Stream(device) if side and str(device).startswith("cuda") else None


def ray_group(device) -> int:
    """Rays per thread of the scan on ``device``: ``RAY_GROUP`` on CUDA (``SWARP_LIDAR_GROUP``
    overrides it: 1, 2, 4, 8 or 16; 1 is the per-ray kernel), 1 elsewhere (the CPU's default scan is
    the per-env ``env_kernel``)."""
    if not str(device).startswith("cuda"):
        return 1
    others = tuple(str(n) for n in (1, 2, 4, 8, 16) if n != RAY_GROUP)
    return int(env_choice(RAY_GROUP_ENV, (str(RAY_GROUP), *others)))


@functools.cache
def _placeholders(device: str) -> tuple[wp.array, wp.array]:
    """Arrays passed for unused outputs and masks (allocated once per device, so never inside a
    capture: the pre-capture pass of a graph allocates them)."""
    return wp.empty((1, 1, 1), dtype=wp.int32, device=device), wp.empty(1, dtype=wp.bool, device=device)


@functools.cache
def _no_readings(device: str, scalar: type) -> wp.array:
    """An empty ``final_out`` (no readings kept), allocated once per device and precision."""
    return wp.empty((0, 0, 0), dtype=scalar, device=device)


@functools.cache
def _no_bodies(device: str, scalar: type) -> tuple:
    """Empty stand-ins for the body fields of a ``LidarScene`` (allocated once per device and precision)."""
    vec2 = vec2_type(scalar)
    return (
        wp.zeros((0, 0), dtype=vec2, device=device),
        wp.zeros((0, 0), dtype=scalar, device=device),
        wp.zeros(0, dtype=wp.int32, device=device),
        wp.zeros(0, dtype=wp.int32, device=device),
        wp.zeros(0, dtype=vec2, device=device),
        wp.zeros(0, dtype=scalar, device=device),
        wp.zeros(0, dtype=vec2, device=device),
    )


def _check_rows(model: Model, n_envs: int) -> None:
    for what, rows in (("parameter", model.params.shape[0]), ("obstacle", model.obstacles.shape.shape[0])):
        if rows not in (1, n_envs):
            raise ValueError(f"per-env {what} rows ({rows}) must be 1 (shared) or n_envs ({n_envs})")


def launch_scan(
    model: Model,
    config: LidarConfig,
    pos: wp.array,
    theta: wp.array,
    distance_out: wp.array,
    column: int = 0,
    hits_out: tuple[wp.array, wp.array] | None = None,
    env_mask: wp.array | None = None,
    launcher: Launcher = EAGER,
    rays_per_thread: int | None = None,
    bodies: "SceneBodies | None" = None,
    group: int | None = None,
    final_out: wp.array | None = None,
) -> None:
    """Launch the scan of every agent's rays.

    Args:
        model: Agent radii (``params``), obstacles and world bounds.
        config: The lidar.
        pos: ``wp.array2d(vec2)`` [E, A] positions [m].
        theta: ``wp.array2d(scalar)`` [E, A] headings [rad].
        distance_out: ``wp.array3d(scalar)`` [E, A, >= column + n_rays]; ray k of an agent is
            written to column ``column + k`` (so readings can land inside an observation row).
        column: First column written.
        hits_out: Optional ``(kind, index)`` int32 arrays [E, A, n_rays] (see ``LidarScan``).
        env_mask: Optional [E] bool: only these envs are scanned.
        launcher: Eager, recording, or under the caller's graph capture.
        rays_per_thread: Scan with ``lidar_scan`` (the kernel with an adjoint), this many rays per
            thread. Default: ``group`` rays per thread on CUDA (``group_kernel``); on the CPU a whole
            env per thread, by ``env_kernel`` for fleets of at most ``ENV_KERNEL_MAX_FLEET``.
        bodies: The movable bodies to see (``SceneBodies``), or ``None``.
        group: Rays per thread of ``group_kernel`` when ``rays_per_thread`` is not given (>= 1; 1 is
            ``lidar_scan`` in its default layout). Default: ``ray_group(device)``.
        final_out: Optional array shaped like ``distance_out``: each scanned ray's previous reading
            is copied here before it is overwritten (an auto-reset keeps a finished env's last
            observation this way, so its scan need not wait for the observation that saves the
            other columns).
    """
    n_envs, n_agents = pos.shape
    _check_rows(model, n_envs)
    if distance_out.shape[0] != n_envs or distance_out.shape[1] != n_agents:
        raise ValueError(f"distance_out must be [{n_envs}, {n_agents}, ...], got {list(distance_out.shape)}")
    if distance_out.shape[2] < column + config.n_rays:
        raise ValueError(f"distance_out has {distance_out.shape[2]} columns; the scan needs {column + config.n_rays}")
    if final_out is not None and tuple(final_out.shape) != tuple(distance_out.shape):
        raise ValueError(
            f"final_out must be shaped like distance_out {list(distance_out.shape)}, got {list(final_out.shape)}"
        )
    s = model.scalar
    vec2 = vec2_type(s)
    n_items = n_agents * config.n_rays
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 1):
        raise ValueError(f"group must be an int >= 1 (rays per thread), got {group!r}")
    # The CPU's default: one thread per env, its rays sharing each agent's disc terms.
    cuda = str(model.device).startswith("cuda")
    per_env = rays_per_thread is None and group is None and not cuda and n_agents <= ENV_KERNEL_MAX_FLEET
    if rays_per_thread is None and group is None:
        group = ray_group(model.device)
    grouped = rays_per_thread is None and group > 1
    if rays_per_thread is None:
        rays_per_thread, threads = agents_per_thread(model.device, n_items)
    else:
        threads = -(-n_items // rays_per_thread)
    lower, upper = model.bounds_vectors()
    walls = int(config.see_walls and model.world.bounds is not None)
    with_hits = hits_out is not None
    no_hits, no_mask = _placeholders(str(model.device))
    if hits_out is None:
        hits_out = (no_hits, no_hits)
    mask = env_mask if env_mask is not None else no_mask
    keeps = final_out is not None
    if final_out is None:
        final_out = _no_readings(str(model.device), s)
    ob = model.obstacles
    scene = scene_struct(s)()
    scene.params = model.params
    scene.per_env_params = int(model.params.shape[0] > 1)
    scene.obstacle_shape = ob.shape
    scene.obstacle_center = ob.center
    scene.obstacle_angle = ob.angle
    scene.obstacle_size = ob.size
    scene.per_env_obstacles = int(ob.per_env)
    scene.see_agents = int(config.see_agents)
    scene.see_walls = walls
    scene.lower = vec2(*lower) if walls else vec2(0.0, 0.0)
    scene.upper = vec2(*upper) if walls else vec2(0.0, 0.0)
    scene.n_rays = config.n_rays
    scene.max_range = s(config.max_range)
    if bodies is None:
        # Empty arrays, never read (the kernel without ``bodies`` has no body code), but real
        # arrays: a tape walks every array field of a struct argument.
        (
            scene.body_pos, scene.body_theta, scene.shape_body, scene.shape_kind,
            scene.shape_offset, scene.shape_angle, scene.shape_size,
        ) = _no_bodies(str(model.device), s)  # fmt: skip
    else:
        if tuple(bodies.pos.shape) != (n_envs, bodies.model.n_bodies):
            raise ValueError(f"body poses must be [{n_envs}, {bodies.model.n_bodies}], got {list(bodies.pos.shape)}")
        bm = bodies.model
        scene.body_pos, scene.body_theta = bodies.pos, bodies.theta
        scene.shape_body, scene.shape_kind = bm.shape_body, bm.shape_kind
        scene.shape_offset, scene.shape_angle, scene.shape_size = bm.shape_offset, bm.shape_angle, bm.shape_size
    flags = (s, with_hits, ob.shape.shape[1] > 0, bodies is not None)
    if per_env:
        launcher.launch(
            env_kernel(*flags, n_agents, keeps),
            dim=n_envs,
            inputs=[scene, pos, theta, mask, int(env_mask is not None), column],
            outputs=[distance_out, *hits_out, final_out],
            device=model.device,
        )
        return
    if grouped:
        launcher.launch(
            group_kernel(*flags, group, n_agents, config.n_rays, keeps),
            dim=n_envs * n_agents * -(-config.n_rays // group),
            inputs=[scene, pos, theta, mask, int(env_mask is not None), column],
            outputs=[distance_out, *hits_out, final_out],
            device=model.device,
        )
        return
    launcher.launch(
        kernels(*flags, keeps).lidar_scan,
        dim=(n_envs, threads),
        inputs=[scene, pos, theta, mask, int(env_mask is not None), rays_per_thread, column],
        outputs=[distance_out, *hits_out, final_out],
        device=model.device,
    )


class SceneBodies(NamedTuple):
    """The movable bodies a scan sees: their ``BodyModel`` (shapes) and current poses.

    Fields:
        model: ``swarp.physics.bodies.BodyModel`` (``stepper.bodies``).
        pos: ``wp.array2d(vec2)`` [E, B] body positions [m].
        theta: ``wp.array2d(scalar)`` [E, B] body orientations [rad].
    """

    model: object
    pos: wp.array
    theta: wp.array


def world_bodies(world) -> SceneBodies | None:
    """The ``SceneBodies`` of a ``World``'s current state (``None`` without movable bodies)."""
    model = world.stepper.bodies
    if model is None:
        return None
    return SceneBodies(model, world.state.body_pos, world.state.body_theta)


class Lidar:
    """A lidar on every agent of a ``World``, with persistent output buffers (no allocation per scan).

    Args:
        world: The ``World`` whose state is scanned.
        config: The ``LidarConfig``.
    """

    def __init__(self, world, config: LidarConfig):
        if not isinstance(config, LidarConfig):
            raise TypeError(f"config must be a LidarConfig, got {type(config).__name__}")
        self.world = world
        self.config = config
        shape = (world.n_envs, world.n_agents, config.n_rays)
        device, scalar = world.stepper.device, world.stepper.scalar
        self._distance = wp.zeros(shape, dtype=scalar, device=device)
        self._kind = wp.zeros(shape, dtype=wp.int32, device=device)
        self._index = wp.zeros(shape, dtype=wp.int32, device=device)
        self.last = LidarScan(*(wp.to_torch(a) for a in (self._distance, self._kind, self._index)))
        self.streams = TorchStreamScope(device)

    @property
    def n_rays(self) -> int:
        return self.config.n_rays

    def launch(
        self,
        launcher: Launcher,
        out: wp.array,
        column: int,
        env_mask: wp.array | None = None,
        final_out: wp.array | None = None,
        poses: tuple[wp.array, wp.array] | None = None,
    ) -> None:
        """Launch a scan writing distances into columns ``[column, column + n_rays)`` of ``out``
        [E, A, obs_dim] (e.g. the environment's observation buffer, inside its step graph), only in
        the envs of ``env_mask`` [E] bool if given, first copying the readings it replaces to the
        same columns of ``final_out`` (shaped like ``out``) if given. ``poses``: ``(pos, theta)``
        [E, A] arrays to scan from instead of the world's (e.g. starts prepared ahead); the rest of
        the scene (radii, obstacles, bodies, bounds) is the world's."""
        state = self.world.state
        pos, theta = poses if poses is not None else (state.pos, state.theta)
        launch_scan(
            self.world.model,
            self.config,
            pos,
            theta,
            out,
            column,
            None,
            env_mask,
            launcher,
            bodies=world_bodies(self.world),
            final_out=final_out,
        )

    def scan(self) -> LidarScan:
        """Scan the world's current state now (eager); returns the persistent ``last`` buffers
        (overwritten by the next call)."""
        state = self.world.state
        hits = (self._kind, self._index)
        # An eager entry point: on a user torch stream the launch must be ordered on that stream.
        with self.streams.scope():
            launch_scan(
                self.world.model, self.config, state.pos, state.theta, self._distance, 0, hits,
                bodies=world_bodies(self.world),
            )  # fmt: skip
        return self.last

    def reference(self, pos: torch.Tensor | None = None, theta: torch.Tensor | None = None) -> LidarScan:
        """The torch reference scan of ``pos``/``theta`` (default: the world's state), bodies at
        their current poses; differentiable."""
        state = self.world.state.torch
        bodies = None
        if self.world.stepper.bodies is not None:
            bodies = self.world.stepper.bodies.shape_poses_torch(state.body_pos, state.body_theta)
        return lidar_reference_model(
            self.world.model,
            self.config,
            state.pos if pos is None else pos,
            state.theta if theta is None else theta,
            bodies,
        )


# --- differentiable Warp scan ---------------------------------------------------------------------


@functools.cache
def _streams(device: str) -> TorchStreamScope:
    return TorchStreamScope(device)


class _LidarFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, model: Model, config: LidarConfig, pos: torch.Tensor, theta: torch.Tensor, bodies):
        n_envs, n_agents = theta.shape
        s = model.scalar
        # Autograd runs ``forward`` with grad mode off; needs_input_grad says whether to tape.
        grad = bool(ctx.needs_input_grad[2] or ctx.needs_input_grad[3])
        pos_wp = wp.from_torch(pos.detach().contiguous(), dtype=vec2_type(s), requires_grad=grad)
        theta_wp = wp.from_torch(theta.detach().contiguous(), dtype=s, requires_grad=grad)
        out = wp.zeros((n_envs, n_agents, config.n_rays), dtype=s, device=model.device, requires_grad=grad)
        tape = wp.Tape() if grad else None
        streams = _streams(str(model.device))
        # One ray per thread even on the CPU: the adjoint then replays no per-thread loop state.
        with streams.scope(), tape if tape is not None else contextlib.nullcontext():
            launch_scan(model, config, pos_wp, theta_wp, out, rays_per_thread=1, bodies=bodies)
        ctx.saved = (tape, pos_wp, theta_wp, out, streams)
        return wp.to_torch(out, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_distance):
        tape, pos_wp, theta_wp, out, streams = ctx.saved
        if tape is None:
            return None, None, None, None, None
        wp.to_torch(out.grad).copy_(grad_distance)
        with streams.scope():
            tape.backward()
        grad_pos = wp.to_torch(pos_wp.grad).clone()
        grad_theta = wp.to_torch(theta_wp.grad).clone()
        tape.zero()
        return None, None, grad_pos, grad_theta, None


def lidar_warp(
    model: Model, config: LidarConfig, pos: torch.Tensor, theta: torch.Tensor, bodies: SceneBodies | None = None
) -> torch.Tensor:
    """The Warp scan as a differentiable torch function.

    Args:
        model: A ``Model`` (``stepper.model``) giving radii, obstacles and bounds.
        config: The lidar.
        pos: [E, A, 2] positions [m], the model's dtype and device.
        theta: [E, A] headings [rad].
        bodies: Movable bodies to see (``world_bodies(world)``), constants, or ``None``.

    Returns:
        [E, A, n_rays] distances [m]; gradients flow to ``pos`` and ``theta`` (obstacles and radii
        are constants).
    """
    _check_inputs(model, pos, theta)
    return _LidarFunction.apply(model, config, pos, theta, bodies)


def _check_inputs(model: Model, pos: torch.Tensor, theta: torch.Tensor) -> None:
    if not isinstance(pos, torch.Tensor) or not isinstance(theta, torch.Tensor):
        raise TypeError("pos and theta must be torch.Tensors")
    if pos.dim() != 3 or pos.shape[1:] != (model.n_agents, 2) or tuple(theta.shape) != tuple(pos.shape[:2]):
        raise ValueError(
            f"pos must be [E, {model.n_agents}, 2] and theta [E, {model.n_agents}], got {list(pos.shape)} and "
            f"{list(theta.shape)}"
        )
    dtype = torch.float64 if model.scalar is wp.float64 else torch.float32
    for name, t in (("pos", pos), ("theta", theta)):
        if t.dtype != dtype:
            raise TypeError(f"{name} must have dtype {dtype}, got {t.dtype}")
        if str(wp.device_from_torch(t.device)) != str(wp.get_device(model.device)):
            raise ValueError(f"{name} must be on the model's device {model.device}, got {t.device}")


# --- torch reference ------------------------------------------------------------------------------


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1)


def _rotate_back(v: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """``v`` [..., 2] rotated by ``-angle`` [...]."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack([c * v[..., 0] + s * v[..., 1], c * v[..., 1] - s * v[..., 0]], -1)


def ray_circle_torch(o: torch.Tensor, d: torch.Tensor, center: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
    """Hit distance [m] of rays ``o + t d`` (unit ``d``, [..., 2]) with discs; 0 inside, inf on a miss."""
    oc = o - center
    b = _dot(oc, d)
    c = _dot(oc, oc) - radius * radius
    disc = b * b - c
    hit = (c > 0) & (b < 0) & (disc >= 0)
    t = -b - torch.sqrt(torch.where(hit, disc, torch.ones_like(disc)))
    t = torch.where(hit, t, torch.full_like(t, math.inf))
    return torch.where(c <= 0, torch.zeros_like(t), t)


def ray_box_local_torch(o: torch.Tensor, d: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """Hit distance [m] of rays (box frame, [..., 2]) with boxes ``|x| <= half``; 0 inside, inf on a miss."""
    parallel = d == 0
    safe = torch.where(parallel, torch.ones_like(d), d)
    t1 = (-half - o) / safe
    t2 = (half - o) / safe
    inside = o.abs() <= half
    inf = torch.full_like(t1, math.inf)
    t_min = torch.where(parallel, torch.where(inside, -inf, inf), torch.minimum(t1, t2))
    t_max = torch.where(parallel, torch.where(inside, inf, -inf), torch.maximum(t1, t2))
    t_near = t_min.amax(-1)
    t_far = t_max.amin(-1)
    hit = (t_near <= t_far) & (t_far >= 0)
    return torch.where(hit, t_near.clamp(min=0.0), torch.full_like(t_near, math.inf))


def ray_obstacles_torch(
    o: torch.Tensor, d: torch.Tensor, shape: torch.Tensor, center: torch.Tensor, angle: torch.Tensor, size: torch.Tensor
) -> torch.Tensor:
    """Hit distances [m] of rays ``o``, ``d`` [..., 2] with obstacles (``shape`` [...] ``ObstacleShape``
    codes, ``center``/``size`` [..., 2], ``angle`` [...]); inf for a miss or an empty slot."""
    o, d, center, size = torch.broadcast_tensors(o, d, center, size)
    o_local = _rotate_back(o - center, angle)
    d_local = _rotate_back(d, angle)
    zero = torch.zeros_like(size[..., 0])
    circle = ray_circle_torch(o, d, center, size[..., 0])
    box = ray_box_local_torch(o_local, d_local, size)
    cap = torch.stack([size[..., 0], zero], -1)
    capsule = torch.minimum(
        box,
        torch.minimum(
            ray_circle_torch(o_local, d_local, -cap, size[..., 1]),
            ray_circle_torch(o_local, d_local, cap, size[..., 1]),
        ),
    )
    t = torch.full_like(circle, math.inf)
    t = torch.where(shape == int(ObstacleShape.CIRCLE), circle, t)
    t = torch.where(shape == int(ObstacleShape.BOX), box, t)
    return torch.where(shape == int(ObstacleShape.SEGMENT), capsule, t)


def ray_walls_torch(o: torch.Tensor, d: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
    """Distance [m] from ``o`` along ``d`` [..., 2] to the bounds box ``[lower, upper]`` [2] (0 outside it)."""
    safe = torch.where(d == 0, torch.ones_like(d), d)
    exit = torch.where(d > 0, (upper - o) / safe, (lower - o) / safe)
    exit = torch.where(d == 0, torch.full_like(exit, math.inf), exit)
    return exit.amin(-1).clamp(min=0.0)


def lidar_reference(
    config: LidarConfig,
    pos: torch.Tensor,
    theta: torch.Tensor,
    radius: torch.Tensor,
    obstacles: dict[str, torch.Tensor] | None = None,
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
    bodies: dict[str, torch.Tensor] | None = None,
) -> LidarScan:
    """Torch reference of the scan (the specification), differentiable in every float input.

    Args:
        config: The lidar.
        pos: [E, A, 2] positions [m].
        theta: [E, A] headings [rad].
        radius: [E_p, A] agent radii [m], ``E_p`` in {1, E}.
        obstacles: ``shape`` [E_o, O] int32 ``ObstacleShape`` codes, ``center`` [E_o, O, 2],
            ``angle`` [E_o, O], ``size`` [E_o, O, 2] (``Model.obstacle_tensors()``), or ``None``.
        bounds: ``((x_min, y_min), (x_max, y_max))`` [m] of the walls, or ``None``.
        bodies: Movable body shapes in the world frame (``BodyModel.shape_poses_torch``):
            ``shape`` [S], ``center`` [E, S, 2], ``angle`` [E, S], ``size`` [S, 2], ``body`` [S]
            (what ``index`` reports), or ``None``.

    Returns:
        ``LidarScan`` (distance keeps autograd history; kind and index are int32).
    """
    n_envs, n_agents = theta.shape
    rays = torch.arange(config.n_rays, device=pos.device, dtype=pos.dtype)
    phi = theta.unsqueeze(-1) + (2.0 * math.pi) * rays / config.n_rays  # [E, A, N]
    d = torch.stack([torch.cos(phi), torch.sin(phi)], -1).unsqueeze(-2)  # [E, A, N, 1, 2]
    o = pos.view(n_envs, n_agents, 1, 1, 2)
    candidates, kinds = [], []
    if config.see_agents:
        centers = pos.view(n_envs, 1, 1, n_agents, 2)
        t = ray_circle_torch(o, d, centers, radius.view(-1, 1, 1, n_agents))  # [E, A, N, A]
        self_hit = torch.eye(n_agents, dtype=torch.bool, device=pos.device).view(1, n_agents, 1, n_agents)
        candidates.append(torch.where(self_hit, torch.full_like(t, math.inf), t))
        kinds.append(torch.full((n_agents,), HIT_AGENT))
    if obstacles is not None and obstacles["shape"].shape[1] > 0:
        n_obs = obstacles["shape"].shape[1]
        t = ray_obstacles_torch(
            o,
            d,
            obstacles["shape"].view(-1, 1, 1, n_obs),
            obstacles["center"].view(-1, 1, 1, n_obs, 2),
            obstacles["angle"].view(-1, 1, 1, n_obs),
            obstacles["size"].view(-1, 1, 1, n_obs, 2),
        )
        candidates.append(t.expand(n_envs, n_agents, config.n_rays, n_obs))
        kinds.append(torch.full((n_obs,), HIT_OBSTACLE))
    body_of_shape = None
    if bodies is not None and bodies["shape"].shape[0] > 0:
        n_shapes = bodies["shape"].shape[0]
        t = ray_obstacles_torch(
            o,
            d,
            bodies["shape"].view(1, 1, 1, n_shapes),
            bodies["center"].view(-1, 1, 1, n_shapes, 2),
            bodies["angle"].view(-1, 1, 1, n_shapes),
            bodies["size"].view(1, 1, 1, n_shapes, 2),
        )
        candidates.append(t.expand(n_envs, n_agents, config.n_rays, n_shapes))
        kinds.append(torch.full((n_shapes,), HIT_BODY))
        body_of_shape = bodies["body"]
    if config.see_walls and bounds is not None:
        lower = torch.tensor(bounds[0], dtype=pos.dtype, device=pos.device)
        upper = torch.tensor(bounds[1], dtype=pos.dtype, device=pos.device)
        candidates.append(ray_walls_torch(o.squeeze(-2), d.squeeze(-2), lower, upper).unsqueeze(-1))
        kinds.append(torch.full((1,), HIT_WALL))
    shape = (n_envs, n_agents, config.n_rays)
    if not candidates:
        distance = torch.full(shape, config.max_range, dtype=pos.dtype, device=pos.device)
        none = torch.full(shape, HIT_NONE, dtype=torch.int32, device=pos.device)
        return LidarScan(distance, none, none - 1)
    all_t = torch.cat(candidates, -1)
    kind_of = torch.cat(kinds).to(pos.device)
    # What ``index`` reports per candidate: its position in its group, the owning body for shapes.
    offsets = torch.cat(
        [body_of_shape if int(k[0]) == HIT_BODY else torch.arange(k.numel(), device=pos.device) for k in kinds]
    )
    t, which = all_t.min(-1)
    hit = t < config.max_range
    distance = torch.where(hit, t, torch.full_like(t, config.max_range))
    kind = torch.where(hit, kind_of[which], torch.full_like(which, HIT_NONE)).to(torch.int32)
    index = torch.where(hit & (kind != HIT_WALL), offsets[which], torch.full_like(which, -1)).to(torch.int32)
    return LidarScan(distance, kind, index)


def lidar_reference_model(
    model: Model,
    config: LidarConfig,
    pos: torch.Tensor,
    theta: torch.Tensor,
    bodies: dict[str, torch.Tensor] | None = None,
) -> LidarScan:
    """``lidar_reference`` with radii, obstacles and bounds read from ``model`` (and ``bodies`` as
    there, e.g. ``BodyModel.shape_poses_torch``)."""
    radius = wp.to_torch(model.params)[..., PARAM_RADIUS]
    bounds = model.bounds_vectors() if model.world.bounds is not None else None
    return lidar_reference(config, pos, theta, radius, model.obstacle_tensors(), bounds, bodies)


__all__ = [
    "HIT_AGENT",
    "HIT_BODY",
    "HIT_NONE",
    "HIT_OBSTACLE",
    "HIT_WALL",
    "Lidar",
    "LidarConfig",
    "LidarScan",
    "SceneBodies",
    "launch_scan",
    "lidar_reference",
    "lidar_reference_model",
    "lidar_warp",
]
