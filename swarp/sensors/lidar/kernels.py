"""Lidar scan kernels: one ray per thread (with an adjoint), one env per thread (the CPU), and
groups of an agent's rays per thread (CUDA).

All three read the same bits: the per-env and grouped scans compute each disc's origin-relative
terms once for several rays and then run the per-ray scan's arithmetic on those very values
(tests pin them together). A scan finds *which* surface a ray hits in a first, discrete pass and
then computes the distance to that one surface again, so the adjoint differentiates exactly one
closed-form hit distance (the same function the torch ``min`` differentiates).
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core import trig
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS
from swarp.physics import body_kernels
from swarp.runtime import episode
from swarp.sensors.lidar.geometry import (
    HIT_AGENT,
    HIT_BODY,
    HIT_NONE,
    HIT_OBSTACLE,
    HIT_WALL,
    funcs,
)

_HIT_BODY = wp.constant(HIT_BODY)
_HIT_AGENT = wp.constant(HIT_AGENT)
_HIT_OBSTACLE = wp.constant(HIT_OBSTACLE)
_HIT_WALL = wp.constant(HIT_WALL)
_HIT_NONE = wp.constant(HIT_NONE)
_RADIUS = wp.constant(PARAM_RADIUS)
#: Largest fleet the CPU's per-env scan (``env_kernel``, its loops over the fleet unrolled) serves;
#: larger fleets scan with ``lidar_scan``, one env per thread.
ENV_KERNEL_MAX_FLEET = 64


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
def ray_funcs(scalar: type) -> SimpleNamespace:
    """``ray_angle`` and ``ray_direction`` of one precision: where ray ``ray`` of ``n_rays`` of an
    agent heading ``theta`` [rad] points."""
    vec2 = vec2_type(scalar)
    cos_sin = trig.cos_sin(scalar)
    two_pi = scalar(2.0 * math.pi)

    @wp.func
    def ray_angle(theta: scalar, ray: int, n_rays: int) -> scalar:
        """Angle [rad] of ray ``ray`` of ``n_rays`` of an agent heading ``theta`` [rad]."""
        phi = theta
        if ray != 0:
            # Ray 0's offset is exactly 0: skipping its division keeps the bits and keeps CUDA's
            # IEEE division off its slow path, which a zero numerator takes (docs/benchmarks.md).
            phi = theta + two_pi * scalar(ray) / scalar(n_rays)
        return phi

    @wp.func
    def ray_direction(theta: scalar, ray: int, n_rays: int) -> vec2:
        """Unit direction of ray ``ray`` of ``n_rays`` of an agent heading ``theta`` [rad]."""
        phi = ray_angle(theta, ray, n_rays)
        return cos_sin(phi)

    return SimpleNamespace(ray_angle=ray_angle, ray_direction=ray_direction)


@functools.cache
def hit_funcs(scalar: type, obstacles: bool, bodies: bool) -> SimpleNamespace:
    """What a ray hits, for one precision and scene (``obstacles``, ``bodies`` as in ``kernels``):
    ``nearer_static`` and ``nearer_static_at`` (obstacles, body shapes, walls), ``closest_hit``
    (pass 1, discrete), ``hit_distance`` (pass 2, differentiated) and ``store_hit``."""
    vec2 = vec2_type(scalar)
    shape_pose = body_kernels.probe_funcs(scalar).shape_pose
    f = funcs(scalar)
    Scene = scene_struct(scalar)

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

    return SimpleNamespace(
        nearer_static=nearer_static,
        nearer_static_at=nearer_static_at,
        closest_hit=closest_hit,
        hit_distance=hit_distance,
        store_hit=store_hit,
    )


@functools.cache
def finish_func(scalar: type, with_hits: bool, obstacles: bool, bodies: bool):
    """``finish_ray``: a ray after the agent discs, for the no-adjoint scans (see its docstring)."""
    vec2 = vec2_type(scalar)
    Scene = scene_struct(scalar)
    h = hit_funcs(scalar, obstacles, bodies)
    nearer_static_at, hit_distance, store_hit = h.nearer_static_at, h.hit_distance, h.store_hit

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

    return finish_ray


@functools.cache
def scan_kernel(scalar: type, with_hits: bool, obstacles: bool = True, bodies: bool = False, keeps: bool = False):
    """``lidar_scan``, the scan kernel for one precision; ``with_hits`` also writes what each ray
    hit; without ``obstacles`` (no obstacle slots) the obstacle tests are not compiled (fewer
    registers), with ``bodies`` the rays also test every shape of the movable bodies, with ``keeps``
    each ray first copies the reading it replaces to ``final_out`` (``launch_scan``'s ``final_out``;
    compiled in only where asked, since even a branch never taken costs a kernel registers)."""
    vec2 = vec2_type(scalar)
    Scene = scene_struct(scalar)
    ray_direction = ray_funcs(scalar).ray_direction
    h = hit_funcs(scalar, obstacles, bodies)
    closest_hit, hit_distance, store_hit = h.closest_hit, h.hit_distance, h.store_hit

    @wp.kernel(module="unique", grid_stride=False)
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

    return lidar_scan


def kernels(
    scalar: type, with_hits: bool, obstacles: bool = True, bodies: bool = False, keeps: bool = False
) -> SimpleNamespace:
    """The scan kernel and its functions of one configuration, by name (``scan_kernel``,
    ``ray_funcs``, ``hit_funcs`` and ``finish_func``, each cached)."""
    h = hit_funcs(scalar, obstacles, bodies)
    return SimpleNamespace(
        lidar_scan=scan_kernel(scalar, with_hits, obstacles, bodies, keeps),
        **vars(ray_funcs(scalar)),
        nearer_static=h.nearer_static,
        hit_distance=h.hit_distance,
        store_hit=h.store_hit,
        finish_ray=finish_func(scalar, with_hits, obstacles, bodies),
    )


@functools.cache
def env_kernel(scalar: type, with_hits: bool, obstacles: bool, bodies: bool, fleet: int, keeps: bool):
    """``lidar_scan_env``: ``lidar_scan``'s readings with one thread per env and the fleet size
    ``fleet`` compiled in, for the CPU (where a launch's threads run one after another). Per agent,
    what every one of its rays needs of each disc (origin - centre, |.|^2 - r^2, whether the per-ray
    scan would test it at all) is computed once instead of once per ray; the rays then run the
    per-ray scan's arithmetic on those very values, so the bits are the same. No adjoint (the
    differentiable path keeps ``lidar_scan``). ``keeps`` as in ``scan_kernel``."""
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    ray_direction = ray_funcs(scalar).ray_direction
    finish_ray = finish_func(scalar, with_hits, obstacles, bodies)
    Scene = scene_struct(scalar)
    fleet_vec = wp.types.vector(fleet, scalar)
    fleet_flags = wp.types.vector(fleet, wp.int32)
    copy_columns = episode.copy_columns_func(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
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
                d = ray_direction(th, ray, n_rays)
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
                finish_ray(scene, pos, env, agent, ray, column, o, d, best, hit, distance_out, kind_out, index_out)

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
    compiler interleaves the discs: faster, see docs/benchmarks.md). So is ``n_rays``: the launch is
    one-dimensional (``dim = n_envs * fleet * groups``) and the thread's env, agent and rays come
    from divisions by constants (a 2-D launch and runtime divisors cost about 200 instructions per
    thread in the prologue). ``keeps`` as in ``scan_kernel`` (as a runtime branch, even never taken,
    the copy cost the scan registers and time: docs/benchmarks.md)."""
    vec2 = vec2_type(scalar)
    f = funcs(scalar)
    ray_angle = ray_funcs(scalar).ray_angle
    finish_ray = finish_func(scalar, with_hits, obstacles, bodies)
    Scene = scene_struct(scalar)
    zero = scalar(0.0)
    ray_vec = wp.types.vector(group, scalar)
    ray_ints = wp.types.vector(group, wp.int32)
    groups = -(-n_rays // group)  # per agent

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
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
            phi = ray_angle(th, first + r, wp.static(n_rays))
            if wp.static(scalar is wp.float32):
                d = trig.sincos_f32(phi)
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
                finish_ray(scene, pos, env, agent, ray, column, o, d, best, hit, distance_out, kind_out, index_out)

    return lidar_scan_group
