"""Navigation, fused: the Warp twin of ``navigation.py`` (observations, rewards, termination, reset).

Three small kernel factories, each keyed by what it compiles for:

* ``observe_kernels``: ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled
  row store on CUDA) builds the agent's neighbor list and writes its observation row, the distance
  to goal, collisions, progress and the reward but its per-env terms, and per-env tallies of agents
  on goal and of possibly lost contacts.
* ``finish_kernels``: how an env's step ends, once: ``end_env`` (termination, the shared and bonus
  reward terms, ``episode.end_step``) and ``end_agent`` (each agent's share), composed by
  ``finish_env`` in ``nav_finish`` (one thread per env) and by the fused step end
  (``navigation_step_end``) on the agents' own lanes.
* ``reset_kernels``: ``nav_reset`` (one thread per env and spawn cell, masked, or its listed twin):
  spawns, goals, headings and obstacles from the counter-based RNG, exactly the draws of the torch
  reference.
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core import trig
from swarp.core.config import ObstacleShape
from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key, index_hashes, uniform_u24_hashed
from swarp.core.types import PARAM_RADIUS
from swarp.physics import neighbors
from swarp.runtime import episode, health, rows
from swarp.runtime.env_list import EnvListArgs
from swarp.runtime.launch import Launcher
from swarp.scenarios.framework import spawn

_RADIUS = wp.constant(PARAM_RADIUS)

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

_OBSERVE_ONLY = wp.constant(rows.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(rows.OBSERVE_STEP)
#: Progress values ``end_env`` loads at once when it averages an env's (shared reward).
MEAN_CHUNK = 4
OBSTACLE_MODES = {"circle": 0, "box": 1, "mixed": 2}


@functools.cache
def observe_kernels(scalar: type, obs_neighbors: int, max_neighbors: int, grid: bool, register_lists: bool):
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision, neighbor count k and the world's neighbor lists (width, backend and layout: the
    observation builds each agent's list)."""
    vec2 = vec2_type(scalar)
    cos_sin = trig.cos_sin(scalar)
    nbk = neighbors.kernels(scalar, max_neighbors, register_lists)
    build_list = nbk.build_grid if grid else nbk.build_brute
    Query = neighbors.query_struct(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    k_obs = obs_neighbors
    obs_dim = 8 + 5 * k_obs
    obs_vec = wp.types.vector(obs_dim, scalar)

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        theta: wp.array2d(dtype=scalar)
        params: wp.array3d(dtype=scalar)
        per_env_params: int
        goals: wp.array2d(dtype=vec2)
        nq: Query
        obs_range: scalar
        goal_radius: scalar
        collision_penalty: scalar
        shared_reward: int
        shaping_factor: scalar
        prev_dist: wp.array2d(dtype=scalar)
        progress_out: wp.array2d(dtype=scalar)
        reward_out: wp.array2d(dtype=scalar)
        dist_out: wp.array2d(dtype=scalar)
        on_goal_out: wp.array2d(dtype=wp.bool)
        collisions_out: wp.array2d(dtype=wp.int32)
        goal_tally: wp.array(dtype=wp.int32)
        overflow_tally: wp.array(dtype=wp.int32)
        non_finite_out: wp.array(dtype=wp.int32)

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> obs_vec:
        """Build one agent's neighbor list, write its per-agent outputs and return its observation
        row. Every index into the row is a compile-time constant, so it stays in registers."""
        # This agent's neighbor list, built here from the final positions (no separate launch),
        # read from the registers it was built in. The list is sorted nearest first: possible
        # collisions are in its near prefix (the contact radius covers every pair's reach) and the
        # observed neighbors (within obs_range, at most k) are its first entries. Every index below
        # is a compile-time constant; the list is read before the rest of the row is made, so its
        # registers are free again by then.
        nbr_d2, nbr_j, n_kept, n_near, n_total = build_list(a.nq, env, agent)
        pe = env * a.per_env_params
        r = a.params[pe, agent, _RADIUS]
        n_collisions = int(0)
        for s in range(wp.static(max_neighbors)):
            if s < n_near:
                reach = r + a.params[pe, nbr_j[s], _RADIUS]
                if nbr_d2[s] < reach * reach:
                    n_collisions += 1
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        row = obs_vec()
        range2 = a.obs_range * a.obs_range
        for w in range(wp.static(k_obs)):
            if w < n_kept and nbr_d2[w] <= range2:
                j = nbr_j[w]
                delta = a.pos[env, j] - p
                dv = a.vel[env, j] - v
                row[8 + 5 * w + 0] = delta[0]
                row[8 + 5 * w + 1] = delta[1]
                row[8 + 5 * w + 2] = dv[0]
                row[8 + 5 * w + 3] = dv[1]
                row[8 + 5 * w + 4] = one
        th = a.theta[env, agent]
        rel_goal = a.goals[env, agent] - p
        row[0] = p[0]
        row[1] = p[1]
        row[2] = v[0]
        row[3] = v[1]
        heading = cos_sin(th)
        row[4] = heading[0]
        row[5] = heading[1]
        row[6] = rel_goal[0]
        row[7] = rel_goal[1]
        # Slots of neighbors not in range keep the zeros (valid flag 0) the row started with.
        dist = wp.sqrt(wp.dot(rel_goal, rel_goal))
        if mode == _OBSERVE_STEP:
            progress = a.prev_dist[env, agent] - dist
            collision = -(a.collision_penalty * scalar(n_collisions))
            a.progress_out[env, agent] = progress
            if a.shared_reward != 0:
                a.reward_out[env, agent] = collision  # nav_finish adds the shared term
            else:
                # The whole reward but the all-on-goal bonus, which nav_finish adds (adding the
                # zero keeps the bits of ``... + bonus`` with no bonus: -0 + 0 is +0).
                reward = a.shaping_factor * progress + collision + zero
                a.reward_out[env, agent] = reward
                health.flag_env(a.non_finite_out, env, health.finite(reward))
        if mode != _OBSERVE_ONLY:
            on_goal = dist < a.goal_radius
            a.dist_out[env, agent] = dist
            a.on_goal_out[env, agent] = on_goal
            a.collisions_out[env, agent] = n_collisions
            # Per-env tallies for nav_finish, which reads and clears them: integer atomics, so the
            # counts do not depend on the order agents arrive in. A contact may be lost only where
            # the list dropped agents and holds nothing beyond contact reach
            # (``arena.contact_overflow``).
            if on_goal:
                wp.atomic_add(a.goal_tally, env, 1)
            if n_total > n_kept and n_near == wp.static(max_neighbors):
                wp.atomic_add(a.overflow_tally, env, 1)
        a.prev_dist[env, agent] = dist
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        obs_dim=obs_dim,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, obs_dim),
    )


@functools.cache
def finish_kernels(scalar: type, fleet_size: int):
    """How an env's step ends (``NavFinish``, ``end_env``, ``end_agent``, ``finish_env``) and the
    ``nav_finish`` kernel, for one precision and fleet size."""
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    one = scalar(1.0)
    fleet_vec = wp.types.vector(fleet_size, scalar)
    # What ending an env's step hands its agents: whether the env restarts now (an auto-reset),
    # the mean progress (shared reward), the bonus, and whether every agent is on goal (1 or 0).
    end_values = wp.types.vector(4, scalar)
    chunk_vec = wp.types.vector(MEAN_CHUNK, scalar)

    @wp.struct
    class NavFinish:
        """What ending a step of an env reads and writes (``finish_env``; ``_finish_args`` fills it)."""

        progress: wp.array2d(dtype=scalar)
        shared_reward: int
        shaping_factor: scalar
        final_reward: scalar
        ep: Episode
        goal_tally: wp.array(dtype=wp.int32)
        overflow_tally: wp.array(dtype=wp.int32)
        reward_out: wp.array2d(dtype=scalar)
        overflow_out: wp.array(dtype=wp.bool)

    @wp.func
    def clear_tallies(f: NavFinish, env: int, overflow: bool):
        """Write env ``env``'s overflow flag (``overflow``: its overflow tally was nonzero) and clear
        the tallies the observation counted (agents on goal, possibly lost contacts) for the next one."""
        f.overflow_out[env] = overflow
        f.goal_tally[env] = 0
        f.overflow_tally[env] = 0

    @wp.func
    def mean_progress(f: NavFinish, env: int) -> scalar:
        """The env's mean progress, summed in agent order ``MEAN_CHUNK`` loads at a time: a loop over
        the agents at run time, so it holds few registers (the fused step end compiles it into the
        observation's kernel)."""
        n = f.progress.shape[1]
        total = zero
        for first in range(0, n, wp.static(MEAN_CHUNK)):
            part = chunk_vec()
            for i in range(wp.static(MEAN_CHUNK)):
                if first + i < n:
                    part[i] = f.progress[env, first + i]
            for i in range(wp.static(MEAN_CHUNK)):
                if first + i < n:
                    total += part[i]
        return total / scalar(fleet_size)

    @wp.func
    def end_env(f: NavFinish, env: int) -> end_values:
        """End env ``env``'s step after its agents' observation: the tallies, termination (every
        agent on goal), ``episode.end_step``; returns what ``end_agent`` needs."""
        # Clearing the tallies before ``end_step`` loads the episode counters costs a round trip;
        # loading all first held more registers (stack 32 -> 56 bytes at 16 agents, spilled in the
        # fused end's kernel).
        all_on_goal = f.goal_tally[env] == wp.static(fleet_size)
        clear_tallies(f, env, f.overflow_tally[env] > 0)
        mean = zero
        if f.shared_reward != 0:
            mean = mean_progress(f, env)
        started = zero
        if end_step(f.ep, env, all_on_goal) and f.ep.auto_reset != 0:
            started = one
        bonus = zero
        on_goal = zero
        if all_on_goal:
            bonus = f.final_reward
            on_goal = one
        return end_values(started, mean, bonus, on_goal)

    @wp.func
    def end_agent(f: NavFinish, env: int, agent: int, values: end_values):
        """Agent ``agent``'s part of ending env ``env``'s step (``end_env``'s ``values``): its share
        of the shared reward, or the bonus (rare: every agent on goal)."""
        if f.shared_reward != 0:
            reward = f.shaping_factor * values[1] + f.reward_out[env, agent] + values[2]
            f.reward_out[env, agent] = reward
            health.flag_env(f.ep.non_finite, env, health.finite(reward))
        elif values[3] != zero:
            reward = f.reward_out[env, agent] + values[2]
            f.reward_out[env, agent] = reward
            health.flag_env(f.ep.non_finite, env, health.finite(reward))

    @wp.func
    def finish_env(f: NavFinish, env: int):
        """``end_env`` and every agent's ``end_agent``, on one thread."""
        values = end_env(f, env)
        if f.shared_reward != 0:
            # A compile-time agent count, and every load before the stores: the per-agent loads of
            # this one thread are all in flight at once instead of one latency after another (the
            # compiler cannot tell the stores from the loads apart; a rolled loop is much slower on
            # a GPU, see docs/benchmarks.md). ``end_agent``'s shared term, agent by agent.
            prior = fleet_vec()
            for a in range(wp.static(fleet_size)):
                prior[a] = f.reward_out[env, a]
            finite = bool(True)
            for a in range(wp.static(fleet_size)):
                reward = f.shaping_factor * values[1] + prior[a] + values[2]
                f.reward_out[env, a] = reward
                finite = finite and health.finite(reward)
            health.flag_env(f.ep.non_finite, env, finite)
        elif values[3] != zero:
            for a in range(fleet_size):
                end_agent(f, env, a, values)  # the bonus (rare: every agent on goal)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def nav_finish(f: NavFinish, mode: int, env_mask: wp.array(dtype=wp.bool), use_mask: int):
        """``finish_env`` for every env after a step's observation; after a reset's (other modes),
        only the tallies of the envs of ``env_mask`` (``use_mask``)."""
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        if mode != _OBSERVE_STEP:
            clear_tallies(f, env, f.overflow_tally[env] > 0)  # a reset only refreshes the info
            return
        finish_env(f, env)

    return SimpleNamespace(
        NavFinish=NavFinish, end_values=end_values, end_env=end_env, end_agent=end_agent, nav_finish=nav_finish
    )


@functools.cache
def reset_kernels(scalar: type, obstacle_mode: int, drones: bool):
    """``NavReset``, ``reset_env`` and the ``nav_reset`` kernel (and its listed twin) for one
    precision and obstacle shape mode (0 circle, 1 box, 2 mixed). With ``drones``
    (``drone_navigation``) the reset also puts each agent level at the altitude, at rest, yawed to
    its heading (the 6-DOF fields); without, it leaves them alone."""
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


def kernels_for(sc) -> SimpleNamespace:
    """The three factories' kernels for the bound navigation scenario ``sc``: ``.observe``,
    ``.finish``, ``.reset``."""
    stepper, plan = sc.env.stepper, sc.plan
    k = stepper.world.max_neighbors
    return SimpleNamespace(
        observe=observe_kernels(
            stepper.scalar, sc.cfg.obs_neighbors, k, stepper.neighbor_method == "grid", plan.register_lists
        ),
        finish=finish_kernels(stepper.scalar, sc.n_agents),
        reset=reset_kernels(stepper.scalar, OBSTACLE_MODES[sc.cfg.obstacle_shape], stepper.model.has_drones),
    )


def launch_observe(sc, launcher: Launcher, env_mask, mode: int, before_finish=None) -> None:
    """Launch the observation (``rows.observe_kernels`` around ``observe_agent``) and, for a step,
    ``nav_finish`` for the scenario ``sc``; or, for a step of every env where ``plan.fused_step_end``,
    one kernel that does both (``navigation_step_end``).

    The world's grid binning (``World.prepare_neighbors``) must have run: the observation builds
    the neighbor list of every agent it observes. ``nav_finish`` ends the step's bookkeeping; it
    runs after every observation that adds to the per-env tallies (all modes but OBSERVE_ONLY, with
    the same mask) and clears them, so launch the two only through here.
    ``before_finish(launcher)``, when given, launches between the two (a variant's extra
    observation columns and per-agent reward terms, before rows are copied to ``final_obs``).
    """
    k = kernels_for(sc)
    world, b = sc.world, sc.buffers
    state = world.state
    args = observe_args(
        sc, k, state.pos, state.vel, state.theta, sc.arrays.goals, world.neighbor_query(), sc.arrays.prev_dist
    )
    if mode == rows.OBSERVE_STEP and env_mask is None and sc.plan.fused_step_end:
        sc.step_end.launch_step_end(launcher, args)
        return
    rows.launch_observe_rows(b, launcher, k.observe.observe, args, env_mask, mode)
    if before_finish is not None:
        before_finish(launcher)
    if mode != rows.OBSERVE_ONLY:
        mask = env_mask if env_mask is not None else b.no_mask
        launcher.launch(
            k.finish.nav_finish,
            dim=sc.n_envs,
            inputs=[finish_args(sc, k), int(mode), mask, int(env_mask is not None)],
            device=b.device,
            block_dim=sc.plan.env_block,
        )


def finish_args(sc, k):
    """``NavFinish`` of the scenario ``sc``."""
    c, b = sc.cfg, sc.buffers
    s = b.scalar
    f = k.finish.NavFinish()
    f.progress = sc.arrays.progress
    f.shared_reward, f.shaping_factor, f.final_reward = int(c.shared_reward), s(c.shaping_factor), s(c.final_reward)
    f.ep = b.episode_args
    f.goal_tally, f.overflow_tally = sc.arrays.goal_tally, sc.arrays.overflow_tally
    f.reward_out, f.overflow_out = b.reward, sc.arrays.overflow
    return f


def observe_args(sc, k, pos, vel, theta, goals, nq, prev_dist):
    """``ObserveArgs`` of the scenario ``sc`` over these agent arrays ([E, A]), neighbor query and
    reward memory (the live ones, or a prepared start's)."""
    world, c, b = sc.world, sc.cfg, sc.buffers
    s = b.scalar
    args = k.observe.ObserveArgs()
    args.pos, args.vel, args.theta = pos, vel, theta
    args.params = world.model.params
    args.per_env_params = int(world.model.params.shape[0] > 1)
    args.goals = goals
    args.nq = nq
    args.obs_range, args.goal_radius, args.collision_penalty = s(c.obs_range), s(sc.goal_radius), s(c.collision_penalty)
    args.shared_reward, args.shaping_factor = int(c.shared_reward), s(c.shaping_factor)
    args.prev_dist, args.progress_out, args.reward_out = prev_dist, sc.arrays.progress, b.reward
    args.dist_out, args.on_goal_out, args.collisions_out = sc.arrays.dist, sc.arrays.on_goal, sc.arrays.collisions
    args.goal_tally, args.overflow_tally = sc.arrays.goal_tally, sc.arrays.overflow_tally
    args.non_finite_out = b.non_finite
    return args


def cell_hashes(sc) -> tuple[wp.array, wp.array, wp.array]:
    """The index halves of the obstacle, spawn and goal cell-key draws (``rng.index_hashes``) of
    the scenario ``sc``'s grid: every thread of ``nav_reset`` ranks its cell against all cells, so
    it would hash each of those indices again (half the reset's arithmetic). Launches a kernel:
    call it when binding, never under a graph capture."""
    n_cells, device = sc.side * sc.side, sc.env.device
    blocks = (DRAW_OBSTACLE_CELLS, DRAW_SPAWN_CELLS, DRAW_GOAL_CELLS)
    return tuple(index_hashes(int(first), n_cells, device) for first in blocks)


def reset_args(sc, k, streams, agent_arrays, goals):
    """``NavReset`` of the scenario ``sc`` keyed by ``streams``, writing ``agent_arrays`` (the
    nine arrays of ``WorldState.agent_arrays()``: the live state, or a prepared start's) and ``goals``."""
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
    return args


def launch_reset(
    sc, launcher: Launcher, env_mask, streams: "ResetStreams | None" = None, agent_arrays=None, goals=None
) -> None:
    """Launch ``nav_reset`` over the envs of ``env_mask`` [E] bool for the scenario ``sc`` (its
    listed twin where the auto-reset lists its envs, ``EnvBuffers.list_envs``; drones: their 6-DOF
    fields too, in the same launch). By default the draws of the current episodes into the live
    state and goals; ``streams``, ``agent_arrays`` and ``goals`` redirect it (a start prepared ahead)."""
    k = kernels_for(sc)
    b = sc.buffers
    live = streams is None
    args = reset_args(
        sc,
        k,
        b.reset_streams if live else streams,
        sc.world.state.agent_arrays() if live else agent_arrays,
        sc.arrays.goals if live else goals,
    )
    _, threads = sc.plan.split(sc.side * sc.side)
    listed = b.list_envs(env_mask, threads) if live else None
    if listed is None:
        launcher.launch(k.reset.nav_reset, dim=(sc.n_envs, threads), inputs=[env_mask, args], device=b.device)
    else:
        launcher.launch(k.reset.nav_reset_listed, dim=(listed[1], threads), inputs=[listed[0], args], device=b.device)
