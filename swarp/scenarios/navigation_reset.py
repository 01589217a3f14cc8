"""Navigation's reset (the Warp twin of ``NavigationScenario.reset_world``): the draw layout of
an episode's random stream, ``reset_kernels`` (``nav_reset``: one thread per env and spawn cell,
masked, or its listed twin: spawns, goals, headings, obstacles and, with the alive mask, the env's
agent count, exactly the draws of the torch reference), its arguments over the live state (a reset,
an auto-reset) or a start prepared ahead (``navigation_step_end``), and the cell-key tables it
ranks with, made once when binding."""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key, index_hashes, uniform_u24, uniform_u24_hashed
from swarp.runtime.alive import ALIVE_ARRAY, extend_struct
from swarp.runtime.env_list import EnvListArgs
from swarp.runtime.launch import Launcher
from swarp.scenarios.framework import spawn

# Draw-index blocks of one episode's random stream (see swarp.core.rng), shared with the torch
# reference in navigation.py so both consume identical random bits.
DRAW_BLOCK = 1 << 12
DRAW_SPAWN_CELLS = wp.constant(0)
DRAW_GOAL_CELLS = wp.constant(1 * DRAW_BLOCK)
DRAW_SPAWN_JITTER = wp.constant(2 * DRAW_BLOCK)
DRAW_GOAL_JITTER = wp.constant(4 * DRAW_BLOCK)
DRAW_HEADING = wp.constant(6 * DRAW_BLOCK)
DRAW_OBSTACLE = wp.constant(7 * DRAW_BLOCK)
DRAW_OBSTACLE_CELLS = wp.constant(8 * DRAW_BLOCK)
DRAW_AGENT_COUNT = wp.constant(9 * DRAW_BLOCK)
#: The agent count's draw keeps ``COUNT_BITS`` of its 24 bits: ``(u * span) >> COUNT_BITS`` stays
#: within int32 for any span of agents (at most 2000).
COUNT_BITS = 12

OBSTACLE_MODES = {"circle": 0, "box": 1, "mixed": 2}
_COUNT_BITS = wp.constant(COUNT_BITS)


@wp.func
def agent_count(key: wp.uint32, low: int, high: int) -> int:
    """The agents present in the episode of ``key``, in ``[low, high]`` (the torch twin is
    ``navigation.agent_counts_torch``)."""
    u = uniform_u24(key, DRAW_AGENT_COUNT) >> _COUNT_BITS
    return low + ((u * (high - low + 1)) >> _COUNT_BITS)


def reset_struct(scalar: type, masked: bool = False):
    """``NavReset``, what ``nav_reset`` reads and writes besides its envs (``reset_args`` fills it),
    for one precision; ``masked``: and the fewest agents an env draws and the alive mask it writes."""
    return reset_struct_of(scalar, bool(masked))


@functools.cache
def reset_struct_of(scalar: type, masked: bool):
    """``reset_struct``, cached by its whole key: a call with ``masked`` left out gets the same struct."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)

    @wp.struct
    class NavReset:
        """What ``nav_reset`` reads and writes besides its envs (``launch_reset`` fills it)."""

        streams: ResetStreams
        side: int
        world_size: scalar
        jitter: scalar
        obstacle_extent: scalar
        box_extent: scalar
        first_obstacle: int
        n_obstacles: int
        cells_per_thread: int
        altitude: scalar
        obstacle_hashes: wp.array(dtype=wp.uint32)
        spawn_hashes: wp.array(dtype=wp.uint32)
        goal_hashes: wp.array(dtype=wp.uint32)
        pos_out: wp.array2d(dtype=vec2)
        theta_out: wp.array2d(dtype=scalar)
        vel_out: wp.array2d(dtype=vec2)
        speed_out: wp.array2d(dtype=scalar)
        ang_vel_out: wp.array2d(dtype=scalar)
        pos_z_out: wp.array2d(dtype=scalar)
        vel_z_out: wp.array2d(dtype=scalar)
        quat_out: wp.array2d(dtype=quat)
        omega_out: wp.array2d(dtype=vec3)
        goals_out: wp.array2d(dtype=vec2)
        obstacle_shape_out: wp.array2d(dtype=wp.int32)
        obstacle_center_out: wp.array2d(dtype=vec2)
        obstacle_angle_out: wp.array2d(dtype=scalar)
        obstacle_size_out: wp.array2d(dtype=vec2)

    if masked:
        return extend_struct(NavReset, "NavResetAlive", {"min_agents": int, "alive_out": ALIVE_ARRAY})
    return NavReset


@functools.cache
def reset_kernels(scalar: type, obstacle_mode: int, drones: bool, masked: bool = False):
    """``NavReset``, ``reset_env`` and the ``nav_reset`` kernel (and its listed twin) for one
    precision and obstacle shape mode (0 circle, 1 box, 2 mixed). With ``drones``
    (``drone_navigation``) the reset also puts each agent level at the altitude, at rest, yawed to
    its heading (the 6-DOF fields); without, it leaves them alone. ``masked``: it draws the env's
    agent count in ``[min_agents, A]`` and writes ``alive_out`` (the agents from it on are absent)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)
    half = scalar(0.5)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)
    sp = spawn.funcs(scalar)
    circle = wp.constant(int(ObstacleShape.CIRCLE))
    box = wp.constant(int(ObstacleShape.BOX))

    NavReset = reset_struct(scalar, masked)  # noqa: N806 (a struct type)

    @wp.func
    def reset_env(rs: NavReset, env: int, slot: int):
        """Reset env ``env``'s cells of launch slot ``slot`` (``nav_reset``'s work for one env)."""
        # Obstacles take the n_obstacles cells of smallest obstacle key; among the other cells,
        # agent i spawns in the cell of i-th smallest spawn key and has its goal in the cell of
        # i-th smallest goal key (prev_dist is set by the observe pass). One thread per (env, cell)
        # on the GPU; on the CPU, where each thread costs a call, one env per thread.
        n_agents = rs.pos_out.shape[1]
        n_cells = rs.side * rs.side
        first = slot * rs.cells_per_thread
        key = episode_key(rs.streams, env)
        threshold = sp.nth_key(key, DRAW_OBSTACLE_CELLS, n_cells, rs.n_obstacles - 1)
        for cell in range(first, wp.min(first + rs.cells_per_thread, n_cells)):
            my_obstacle_key = int(0)
            if rs.n_obstacles > 0:
                my_obstacle_key = uniform_u24_hashed(key, rs.obstacle_hashes[cell])
            if rs.n_obstacles > 0 and not sp.before(threshold[0], threshold[1], my_obstacle_key, cell):
                # An obstacle cell: its slot is its rank among all obstacle keys.
                o = int(0)
                for c in range(n_cells):
                    if sp.before(uniform_u24_hashed(key, rs.obstacle_hashes[c]), c, my_obstacle_key, cell):
                        o += 1
                draw = DRAW_OBSTACLE + 4 * o
                u_shape = sp.uniform(key, draw)
                u_a = sp.uniform(key, draw + 1)
                u_b = sp.uniform(key, draw + 2)
                u_angle = sp.uniform(key, draw + 3)
                is_circle = bool(False)
                if wp.static(obstacle_mode == 0):
                    is_circle = True
                elif wp.static(obstacle_mode == 2):
                    is_circle = u_shape < scalar(0.5)
                o_slot = rs.first_obstacle + o
                rs.obstacle_center_out[env, o_slot] = sp.cell_point(cell, rs.side, rs.world_size, zero, key, draw)
                if is_circle:
                    rs.obstacle_shape_out[env, o_slot] = circle
                    rs.obstacle_size_out[env, o_slot] = vec2(
                        rs.obstacle_extent * (scalar(0.5) + scalar(0.5) * u_a), zero
                    )
                    rs.obstacle_angle_out[env, o_slot] = zero
                else:
                    rs.obstacle_shape_out[env, o_slot] = box
                    rs.obstacle_size_out[env, o_slot] = vec2(
                        rs.box_extent * (scalar(0.5) + scalar(0.5) * u_a),
                        rs.box_extent * (scalar(0.5) + scalar(0.5) * u_b),
                    )
                    rs.obstacle_angle_out[env, o_slot] = (u_angle * two - one) * pi
                continue
            my_spawn_key = uniform_u24_hashed(key, rs.spawn_hashes[cell])
            my_goal_key = uniform_u24_hashed(key, rs.goal_hashes[cell])
            spawn_rank = int(0)
            goal_rank = int(0)
            for c in range(n_cells):
                # Without obstacles every cell is free: skip hashing the obstacle keys.
                free = rs.n_obstacles == 0
                if not free:
                    free = sp.before(threshold[0], threshold[1], uniform_u24_hashed(key, rs.obstacle_hashes[c]), c)
                if free:
                    if sp.before(uniform_u24_hashed(key, rs.spawn_hashes[c]), c, my_spawn_key, cell):
                        spawn_rank += 1
                    if sp.before(uniform_u24_hashed(key, rs.goal_hashes[c]), c, my_goal_key, cell):
                        goal_rank += 1
            if spawn_rank < n_agents:
                a = spawn_rank
                rs.pos_out[env, a] = sp.cell_point(
                    cell, rs.side, rs.world_size, rs.jitter, key, DRAW_SPAWN_JITTER + 2 * a
                )
                heading = (sp.uniform(key, DRAW_HEADING + a) * two - one) * pi
                rs.theta_out[env, a] = heading
                rs.vel_out[env, a] = vec2(zero, zero)
                rs.speed_out[env, a] = zero
                rs.ang_vel_out[env, a] = zero
                if wp.static(drones):
                    yaw = heading * half
                    rs.pos_z_out[env, a] = rs.altitude
                    rs.vel_z_out[env, a] = zero
                    rs.quat_out[env, a] = quat(zero, zero, wp.sin(yaw), wp.cos(yaw))
                    rs.omega_out[env, a] = vec3(zero, zero, zero)
                if wp.static(masked):
                    rs.alive_out[env, a] = a < agent_count(key, rs.min_agents, n_agents)
            if goal_rank < n_agents:
                a = goal_rank
                rs.goals_out[env, a] = sp.cell_point(
                    cell, rs.side, rs.world_size, rs.jitter, key, DRAW_GOAL_JITTER + 2 * a
                )

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def nav_reset(env_mask: wp.array(dtype=wp.bool), args: NavReset):
        env, slot = wp.tid()
        if not env_mask[env]:
            return
        reset_env(args, env, slot)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def nav_reset_listed(envs: EnvListArgs, args: NavReset):
        """``nav_reset`` over the entries of an env list (``swarp.runtime.env_list``)."""
        row, slot = wp.tid()
        for i in range(row, envs.count[0], envs.stride):
            reset_env(args, envs.envs[i], slot)

    return SimpleNamespace(
        NavReset=NavReset, reset_env=reset_env, nav_reset=nav_reset, nav_reset_listed=nav_reset_listed
    )


def cell_hashes(sc) -> tuple[wp.array, wp.array, wp.array]:
    """The index halves of the obstacle, spawn and goal cell-key draws (``rng.index_hashes``) of
    the scenario ``sc``'s grid: every thread of ``nav_reset`` ranks its cell against all cells, so
    it would hash each of those indices again (half the reset's arithmetic). Launches a kernel:
    call it when binding, never under a graph capture."""
    n_cells, device = sc.side * sc.side, sc.env.device
    blocks = (DRAW_OBSTACLE_CELLS, DRAW_SPAWN_CELLS, DRAW_GOAL_CELLS)
    return tuple(index_hashes(int(first), n_cells, device) for first in blocks)


def reset_kernels_of(sc) -> SimpleNamespace:
    """``reset_kernels`` of the bound navigation scenario ``sc``."""
    stepper = sc.env.stepper
    mode = OBSTACLE_MODES[sc.cfg.obstacle_shape]
    return reset_kernels(stepper.scalar, mode, stepper.model.has_drones, sc.world.alive is not None)


def reset_args(sc, k, streams, agent_arrays, goals, alive=None):
    """``NavReset`` of the scenario ``sc`` keyed by ``streams``, writing ``agent_arrays`` (the
    nine arrays of ``WorldState.agent_arrays()``: the live state, or a prepared start's), ``goals``
    and, with the alive mask, ``alive`` (default: the world's)."""
    world, c, b = sc.world, sc.cfg, sc.buffers
    s = b.scalar
    ob = world.model.obstacles
    per_thread, _ = sc.plan.split(sc.side * sc.side)
    args = k.reset.NavReset()
    args.streams, args.side, args.cells_per_thread = streams, sc.side, per_thread
    args.world_size, args.jitter, args.obstacle_extent = s(c.world_size), s(sc.jitter), s(sc.obstacle_extent)
    args.box_extent = s(sc.obstacle_extent / math.sqrt(2.0))  # as the reference rounds it: once, from double
    args.first_obstacle, args.n_obstacles = world.model.first_free_obstacle, c.n_obstacles
    args.altitude = s(c.altitude if sc.env.stepper.model.has_drones else 0.0)  # drones fly drone_navigation only
    args.obstacle_hashes, args.spawn_hashes, args.goal_hashes = sc.arrays.cell_hashes
    (
        args.pos_out, args.theta_out, args.vel_out, args.speed_out, args.ang_vel_out,
        args.pos_z_out, args.vel_z_out, args.quat_out, args.omega_out,
    ) = agent_arrays  # fmt: skip
    args.goals_out = goals
    args.obstacle_shape_out, args.obstacle_center_out = ob.shape, ob.center
    args.obstacle_angle_out, args.obstacle_size_out = ob.angle, ob.size
    if world.alive is not None:
        args.min_agents = sc.min_agents
        args.alive_out = world.alive if alive is None else alive
    return args


def launch_reset(
    sc,
    launcher: Launcher,
    env_mask,
    streams: "ResetStreams | None" = None,
    agent_arrays=None,
    goals=None,
    alive=None,
) -> None:
    """Launch ``nav_reset`` over the envs of ``env_mask`` [E] bool for the scenario ``sc`` (its
    listed twin where the auto-reset lists its envs, ``EnvBuffers.list_envs``; drones: their 6-DOF
    fields too, in the same launch). By default the draws of the current episodes into the live
    state and goals; ``streams``, ``agent_arrays``, ``goals`` and ``alive`` redirect it (a start
    prepared ahead)."""
    k = SimpleNamespace(reset=reset_kernels_of(sc))
    b = sc.buffers
    live = streams is None
    args = reset_args(
        sc,
        k,
        b.reset_streams if live else streams,
        sc.world.state.agent_arrays() if live else agent_arrays,
        sc.arrays.goals if live else goals,
        None if live else alive,
    )
    _, threads = sc.plan.split(sc.side * sc.side)
    listed = b.list_envs(env_mask, threads) if live else None
    if listed is None:
        launcher.launch(k.reset.nav_reset, dim=(sc.n_envs, threads), inputs=[env_mask, args], device=b.device)
    else:
        launcher.launch(k.reset.nav_reset_listed, dim=(listed[1], threads), inputs=[listed[0], args], device=b.device)
