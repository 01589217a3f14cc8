"""Navigation, fused: the Warp twin of ``navigation.py`` (observations, rewards, termination, reset).

Three kernels, all writing into persistent buffers so a step can be captured (and, for the
auto-reset from starts prepared ahead, ``FusedScenario.supports_reset_ahead``, ``AheadStarts``
buffers and the ``nav_swap`` kernel that starts them):

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled row store on CUDA):
  the observation row, the distance to goal, collisions, progress and the reward but its per-env
  terms, and per-env tallies of agents on goal and of possibly lost contacts; the k nearest
  neighbors come straight from the neighbor list it builds.
* ``nav_finish`` (one thread per env): termination, the shared/bonus reward terms, overflow.
* ``nav_reset`` (one thread per env and spawn cell, masked): spawns, goals, headings and obstacles from the
  counter-based RNG, exactly the draws of the torch reference.

On small CUDA batches the step's observation, ``nav_finish`` and ``nav_swap`` are one kernel,
``step_rows`` (``rows.step_rows_kernel`` around ``observe_agent``, ``end_env``, ``end_agent`` and
``start_agent``; ``fused_step_end`` says where).
"""

import functools
import math
from types import SimpleNamespace

import warp as wp

from swarp.core.config import ObstacleShape
from swarp.core.launch import Launcher, agents_per_thread, env_choice, per_env_block
from swarp.core.precision import vec2_type
from swarp.core.rng import ResetStreams, episode_key, index_hashes, uniform_u24_hashed
from swarp.core.types import PARAM_RADIUS
from swarp.env import episode, selection
from swarp.env.selection import EnvListArgs
from swarp.physics import neighbors
from swarp.scenarios import base, rows, spawn

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


_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
#: Progress values the step's fused end loads at once when it averages an env's (shared reward).
MEAN_CHUNK = 4
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def kernels(
    scalar: type,
    obs_neighbors: int,
    obstacle_mode: int,
    max_neighbors: int,
    grid: bool,
    fleet_size: int,
    drones: bool,
    layout: neighbors.ListLayout = neighbors.CPU_LAYOUT,
):
    """Kernels for one precision, neighbor count k, obstacle shape mode (0 circle, 1 box, 2 mixed)
    and the world's neighbor-list width and backend (the observe kernel builds each agent's list).
    With ``drones`` (``drone_navigation``) the reset also puts each agent level at the altitude,
    at rest, yawed to its heading (the 6-DOF fields); without, it leaves them alone. ``layout``:
    how the lists are kept (``neighbors.list_layout``)."""
    vec2 = vec2_type(scalar)
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)
    half = scalar(0.5)
    nbk = neighbors.kernels(scalar, max_neighbors, layout)
    build_list = nbk.build_grid if grid else nbk.build_brute
    Query = neighbors.query_struct(scalar)
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)
    k_obs = obs_neighbors
    sp = spawn.funcs(scalar)
    circle = wp.constant(int(ObstacleShape.CIRCLE))
    box = wp.constant(int(ObstacleShape.BOX))

    obs_dim = 8 + 5 * k_obs
    fleet_vec = wp.types.vector(fleet_size, scalar)
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
        row[4] = wp.cos(th)
        row[5] = wp.sin(th)
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
                a.reward_out[env, agent] = a.shaping_factor * progress + collision + zero
        if mode != _OBSERVE_ONLY:
            on_goal = dist < a.goal_radius
            a.dist_out[env, agent] = dist
            a.on_goal_out[env, agent] = on_goal
            a.collisions_out[env, agent] = n_collisions
            # Per-env tallies for nav_finish, which reads and clears them: integer atomics, so the
            # counts do not depend on the order agents arrive in. A contact may be lost only where
            # the list dropped agents and holds nothing beyond contact reach
            # (``common.contact_overflow``).
            if on_goal:
                wp.atomic_add(a.goal_tally, env, 1)
            if n_total > n_kept and n_near == wp.static(max_neighbors):
                wp.atomic_add(a.overflow_tally, env, 1)
        a.prev_dist[env, agent] = dist
        return row

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
    def finish_env(f: NavFinish, env: int):
        """End env ``env``'s step after its agents' observation, on one thread: the shared and bonus
        reward terms, termination (every agent on goal) and ``episode.end_step``. (``end_env`` and
        ``end_agent`` split the same work between an env's lane and its agents' lanes.)"""
        all_on_goal = f.goal_tally[env] == wp.static(fleet_size)
        clear_tallies(f, env, f.overflow_tally[env] > 0)
        bonus = zero
        if all_on_goal:
            bonus = f.final_reward
        if f.shared_reward != 0:
            # A compile-time agent count: small fleets unroll, so the per-agent loads of this one
            # thread per env are all in flight at once instead of one latency after another
            # (measured on an H200 at 16,384 x 16: the rolled loop took 36 us at 6% warp occupancy).
            total = zero
            # The collision terms already in reward_out, loaded up front: the compiler cannot tell
            # the stores below from these loads apart (runtime strides), so loading each one just
            # before its store would chain fleet_size memory round trips.
            prior = fleet_vec()
            for a in range(wp.static(fleet_size)):
                prior[a] = f.reward_out[env, a]
                total += f.progress[env, a]
            mean = total / scalar(fleet_size)
            for a in range(wp.static(fleet_size)):
                f.reward_out[env, a] = f.shaping_factor * mean + prior[a] + bonus
        elif all_on_goal:
            # The observation wrote each agent's reward but this bonus (rare: every agent on goal).
            for a in range(fleet_size):
                f.reward_out[env, a] = f.reward_out[env, a] + bonus
        end_step(f.ep, env, all_on_goal)

    @wp.kernel(enable_backward=False, module="unique")
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

    @wp.kernel(enable_backward=False, module="unique")
    def nav_reset(env_mask: wp.array(dtype=wp.bool), args: NavReset):
        env, slot = wp.tid()
        if not env_mask[env]:
            return
        reset_env(args, env, slot)

    @wp.kernel(enable_backward=False, module="unique")
    def nav_reset_listed(envs: EnvListArgs, args: NavReset):
        """``nav_reset`` over the entries of an env list (``swarp.env.selection``)."""
        row, slot = wp.tid()
        for i in range(row, envs.count[0], envs.stride):
            reset_env(args, envs.envs[i], slot)

    list_k = wp.types.vector(max_neighbors, wp.int32)

    @wp.struct
    class NavAhead:
        """Prepared next starts (``launch_prepare_ahead`` writes them, ``nav_swap`` starts them)."""

        pos: wp.array2d(dtype=vec2)
        theta: wp.array2d(dtype=scalar)
        goals: wp.array2d(dtype=vec2)
        prev_dist: wp.array2d(dtype=scalar)
        nbr: wp.array3d(dtype=wp.int32)
        count: wp.array2d(dtype=wp.int32)
        near: wp.array2d(dtype=wp.int32)
        total: wp.array2d(dtype=wp.int32)
        rows: wp.array2d(dtype=obs_vec)

    @wp.struct
    class NavSwap:
        """What starting prepared episodes reads and writes (``start_agent``; ``_swap_args`` fills it)."""

        marks: episode.AheadMarks
        ahead: NavAhead
        live: NavReset
        nq: Query
        prev_dist: wp.array2d(dtype=scalar)
        final_obs: wp.array2d(dtype=obs_vec)

    @wp.func
    def start_agent(sw: NavSwap, env: int, agent: int, old: obs_vec) -> obs_vec:
        """Start agent ``agent`` of env ``env`` from its prepared start: ``old`` (its last row) to
        ``final_obs`` and everything ``nav_reset`` and the ``OBSERVE_ONLY`` observation would write,
        copied from ``ahead``. Returns the start's first observation row (the caller stores it)."""
        # In groups, each loaded then stored, so few values are live at once: the step's fused end
        # (``step_rows``) compiles this into the observation's kernel, where every register this
        # rare path holds would cost every block occupancy (one group at a time: 80 registers with
        # the launch bounds, no spill; all loads first: 96). Each group waits for the stores before
        # it (the compiler cannot tell the arrays apart): a few memory round trips, on the lanes of
        # restarting envs only.
        sw.final_obs[env, agent] = old
        entries = list_k()
        for k in range(wp.static(max_neighbors)):
            entries[k] = sw.ahead.nbr[env, k, agent]
        for k in range(wp.static(max_neighbors)):
            sw.nq.nbr[env, k, agent] = entries[k]
        p = sw.ahead.pos[env, agent]
        th = sw.ahead.theta[env, agent]
        g = sw.ahead.goals[env, agent]
        d = sw.ahead.prev_dist[env, agent]
        n_kept = sw.ahead.count[env, agent]
        n_near = sw.ahead.near[env, agent]
        n_total = sw.ahead.total[env, agent]
        sw.live.pos_out[env, agent] = p
        sw.live.theta_out[env, agent] = th
        sw.live.vel_out[env, agent] = vec2(zero, zero)
        sw.live.speed_out[env, agent] = zero
        sw.live.ang_vel_out[env, agent] = zero
        sw.live.goals_out[env, agent] = g
        sw.prev_dist[env, agent] = d
        sw.nq.count[env, agent] = n_kept
        sw.nq.near[env, agent] = n_near
        sw.nq.total[env, agent] = n_total
        if n_total > n_kept:
            sw.nq.overflow[0] = 1
        # Whole rows as vectors: one address each, the columns at constant offsets from it.
        return sw.ahead.rows[env, agent]

    @wp.kernel(enable_backward=False, module="unique")
    def nav_swap(
        done: wp.array(dtype=wp.bool),
        sw: NavSwap,
        agents_per_thread: int,
        obs: wp.array2d(dtype=obs_vec),
    ):
        """The auto-reset from prepared starts: ``start_agent`` for each agent of a finished env (its
        row of ``obs``, the scenario's columns as ``rows.row_vectors`` views); every env's ahead
        mark (``episode.mark_ahead``)."""
        env, slot = wp.tid()
        started = done[env]
        if not started:
            if slot == 0:
                episode.mark_ahead(sw.marks, env, False, 0)
            return
        current = sw.marks.episode[env]
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, obs.shape[1])):
            obs[env, agent] = start_agent(sw, env, agent, obs[env, agent])
        if slot == 0:
            episode.mark_ahead(sw.marks, env, True, current)

    @wp.struct
    class NavEnd:
        """What the step's fused end (``step_rows``, ``rows.step_rows_kernel``) reads and writes."""

        finish: NavFinish
        swap: NavSwap

    # What the lane ending an env's step hands its agents (``rows.step_rows_kernel``): whether the
    # env starts a prepared episode now, the mean progress (shared reward), the bonus, and whether
    # every agent is on goal (1 or 0).
    end_values = wp.types.vector(4, scalar)
    chunk_vec = wp.types.vector(MEAN_CHUNK, scalar)

    @wp.func
    def mean_progress(f: NavFinish, env: int) -> scalar:
        """The env's mean progress, summed in agent order (``nav_finish``'s bits) ``MEAN_CHUNK``
        loads at a time: a loop over the agents at run time, so it holds few registers."""
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
    def end_env(e: NavEnd, env: int) -> end_values:
        """``finish_env``'s per-env part, in the kernel that ends the step (one lane per env): the
        tallies, ``episode.end_step``, and what ``end_agent`` needs."""
        f = e.finish
        # Clearing the tallies before ``end_step`` loads the episode counters costs a round trip;
        # loading all first held more registers (stack 32 -> 56 bytes at 16 agents, spilled in the
        # observation's kernel).
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
    def end_agent(e: NavEnd, env: int, agent: int, values: end_values):
        """``finish_env``'s per-agent part on the agent's own lane: its share of the shared reward,
        or its bonus (``end_env``'s ``values``)."""
        f = e.finish
        if f.shared_reward != 0:
            f.reward_out[env, agent] = f.shaping_factor * values[1] + f.reward_out[env, agent] + values[2]
        elif values[3] != zero:
            f.reward_out[env, agent] = f.reward_out[env, agent] + values[2]

    @wp.func
    def end_env_ahead(e: NavEnd, env: int) -> end_values:
        """``end_env`` where restarts swap in prepared starts: also sets the env's ahead mark."""
        values = end_env(e, env)
        started = values[0] != zero
        episode.mark_ahead(e.swap.marks, env, started, e.swap.marks.episode[env])
        return values

    @wp.func
    def start_env_agent(e: NavEnd, env: int, agent: int, old: obs_vec) -> obs_vec:
        return start_agent(e.swap, env, agent, old)

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, obs_dim),
        NavFinish=NavFinish,
        nav_finish=nav_finish,
        NavReset=NavReset,
        nav_reset=nav_reset,
        nav_reset_listed=nav_reset_listed,
        NavAhead=NavAhead,
        NavSwap=NavSwap,
        nav_swap=nav_swap,
        NavEnd=NavEnd,
        step_rows=rows.step_rows_kernel(
            ObserveArgs, observe_agent, NavEnd, end_env, end_agent, None, scalar, obs_dim, fleet_size, 4
        )
        if rows.envs_per_block(fleet_size)
        else None,
        step_rows_ahead=rows.step_rows_kernel(
            ObserveArgs,
            observe_agent,
            NavEnd,
            end_env_ahead,
            end_agent,
            start_env_agent,
            scalar,
            obs_dim,
            fleet_size,
            4,
        )
        if rows.envs_per_block(fleet_size)
        else None,
    )


_OBSTACLE_MODES = {"circle": 0, "box": 1, "mixed": 2}


def _kernels_for(sc):
    stepper = sc.env.stepper
    return kernels(
        stepper.scalar,
        sc.cfg.obs_neighbors,
        _OBSTACLE_MODES[sc.cfg.obstacle_shape],
        stepper.world.max_neighbors,
        stepper.neighbor_method == "grid",
        sc.n_agents,
        stepper.model.has_drones,
        neighbors.list_layout(sc.env.device, stepper.world.max_neighbors),
    )


#: How the CUDA step ends: ``fused`` (default) observes, finishes each env and starts the prepared
#: episodes of those it ends in one kernel (``rows.step_rows_kernel``); ``split`` launches the
#: observation, ``nav_finish`` and (reset ahead) ``nav_swap`` in a chain (the A/B switch).
STEP_END_ENV = "SWARP_STEP_END"


def fused_step_end(sc) -> bool:
    """Whether the step of navigation ``sc`` ends in one ``step_rows`` kernel: where the step's rows
    are tiled (``rows.tiled_rows``: CUDA), a block holds whole envs (at most ``rows.OBS_BLOCK``
    agents) and the step is latency-bound (``selection.throughput_bound``), unless
    ``SWARP_STEP_END=split``.

    Above that size the fused kernel's blocks hold their registers through the per-env end (a
    memory round trip between two barriers) and lose more than the two launches it saves: measured
    on an H200, 65,536 x 16 263.8 vs 254.0 us/step split, 262,144 x 16 883.1 vs 859.7, 16,384 x 64
    357.8 vs 351.3 (docs/benchmarks.md)."""
    fused = env_choice(STEP_END_ENV, ("fused", "split")) == "fused"
    env = sc.env
    small = not selection.throughput_bound(env.device, sc.n_envs, sc.n_agents)
    return fused and small and rows.tiled_rows(env.device) and rows.envs_per_block(sc.n_agents) > 0


def launch_observe(sc, launcher: Launcher, env_mask, mode: int, before_finish=None) -> None:
    """Launch the observation (``rows.observe_kernels`` around ``observe_agent``) and, for a step,
    ``nav_finish`` for the scenario ``sc``; or, for a step of every env where ``fused_step_end``,
    one ``step_rows`` kernel that does both (and, with starts prepared ahead, ``nav_swap``'s work:
    ``NavigationScenario.swaps_in_step``).

    The world's grid binning (``World.prepare_neighbors``) must have run: the observation builds
    the neighbor list of every agent it observes. ``nav_finish`` ends the step's bookkeeping; it
    runs after every observation that adds to the per-env tallies (all modes but OBSERVE_ONLY, with
    the same mask) and clears them, so launch the two only through here.
    ``before_finish(launcher)``, when given, launches between the two (a variant's extra
    observation columns and per-agent reward terms, before rows are copied to ``final_obs``).
    """
    k = _kernels_for(sc)
    env, world = sc.env, sc.world
    state = world.state
    args = _observe_args(sc, k, state.pos, state.vel, state.theta, sc._goals, world.neighbor_query(), sc._prev_dist)
    if mode == base.OBSERVE_STEP and env_mask is None and before_finish is None and sc.step_end_fused:
        end = k.NavEnd()
        end.finish = _finish_args(sc, k)
        kernel = k.step_rows
        if sc.swaps_in_step():
            end.swap = _swap_args(sc, k, sc._ahead_marks)
            kernel = k.step_rows_ahead
        rows.launch_step_rows(sc, launcher, kernel, args, end)
        return
    rows.launch_observe_rows(sc, launcher, k.observe, args, env_mask, mode)
    if before_finish is not None:
        before_finish(launcher)
    if mode != base.OBSERVE_ONLY:
        mask = env_mask if env_mask is not None else world.neighbors.no_mask
        launcher.launch(
            k.nav_finish,
            dim=sc.n_envs,
            inputs=[_finish_args(sc, k), int(mode), mask, int(env_mask is not None)],
            device=env.device,
            block_dim=per_env_block(env.device),
        )


def _finish_args(sc, k):
    """``NavFinish`` of the scenario ``sc``."""
    env, c = sc.env, sc.cfg
    s = env.stepper.scalar
    f = k.NavFinish()
    f.progress = sc._progress
    f.shared_reward, f.shaping_factor, f.final_reward = int(c.shared_reward), s(c.shaping_factor), s(c.final_reward)
    f.ep = env.episode_args
    f.goal_tally, f.overflow_tally = sc._goal_tally, sc._overflow_tally
    f.reward_out, f.overflow_out = env._reward, sc._overflow
    return f


def _observe_args(sc, k, pos, vel, theta, goals, nq, prev_dist):
    """``ObserveArgs`` of the scenario ``sc`` over these agent arrays ([E, A]), neighbor query and
    reward memory (the live ones, or a prepared start's)."""
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    args = k.ObserveArgs()
    args.pos, args.vel, args.theta = pos, vel, theta
    args.params = world.model.params
    args.per_env_params = int(world.model.params.shape[0] > 1)
    args.goals = goals
    args.nq = nq
    args.obs_range, args.goal_radius, args.collision_penalty = s(c.obs_range), s(sc.goal_radius), s(c.collision_penalty)
    args.shared_reward, args.shaping_factor = int(c.shared_reward), s(c.shaping_factor)
    args.prev_dist, args.progress_out, args.reward_out = prev_dist, sc._progress, env._reward
    args.dist_out, args.on_goal_out, args.collisions_out = sc._dist, sc._on_goal, sc._collisions
    args.goal_tally, args.overflow_tally = sc._goal_tally, sc._overflow_tally
    return args


def cell_hashes(sc) -> tuple[wp.array, wp.array, wp.array]:
    """The index halves of the obstacle, spawn and goal cell-key draws (``rng.index_hashes``) of
    the scenario ``sc``'s grid: every thread of ``nav_reset`` ranks its cell against all cells, so
    it would hash each of those indices again (half the reset's arithmetic). Launches a kernel:
    call it when binding, never under a graph capture."""
    n_cells, device = sc.side * sc.side, sc.env.device
    blocks = (DRAW_OBSTACLE_CELLS, DRAW_SPAWN_CELLS, DRAW_GOAL_CELLS)
    return tuple(index_hashes(int(first), n_cells, device) for first in blocks)


def _reset_args(sc, k, streams, agent_arrays, goals):
    """``NavReset`` of the scenario ``sc`` keyed by ``streams``, writing ``agent_arrays`` (the
    nine arrays of ``WorldState.agent_arrays()``: the live state, or a prepared start's) and ``goals``."""
    env, world, c = sc.env, sc.world, sc.cfg
    s = env.stepper.scalar
    ob = world.model.obstacles
    per_thread, _ = agents_per_thread(env.device, sc.side * sc.side)
    args = k.NavReset()
    args.streams, args.side, args.cells_per_thread = streams, sc.side, per_thread
    args.world_size, args.jitter, args.obstacle_extent = s(c.world_size), s(sc.jitter), s(sc.obstacle_extent)
    args.box_extent = s(sc.obstacle_extent / math.sqrt(2.0))  # as the reference rounds it: once, from double
    args.first_obstacle, args.n_obstacles = world.model.first_free_obstacle, c.n_obstacles
    args.altitude = s(c.altitude if env.stepper.model.has_drones else 0.0)  # drones fly drone_navigation only
    args.obstacle_hashes, args.spawn_hashes, args.goal_hashes = sc._cell_hashes
    (
        args.pos_out, args.theta_out, args.vel_out, args.speed_out, args.ang_vel_out,
        args.pos_z_out, args.vel_z_out, args.quat_out, args.omega_out,
    ) = agent_arrays  # fmt: skip
    args.goals_out = goals
    args.obstacle_shape_out, args.obstacle_center_out = ob.shape, ob.center
    args.obstacle_angle_out, args.obstacle_size_out = ob.angle, ob.size
    return args


def launch_reset(sc, launcher: Launcher, env_mask) -> None:
    """Launch ``nav_reset`` over the envs of ``env_mask`` [E] bool (its listed twin where
    ``Environment.list_envs`` says so) for the scenario ``sc`` (drones: their 6-DOF fields too, in
    the same launch; the world's state always holds those arrays)."""
    k = _kernels_for(sc)
    env = sc.env
    args = _reset_args(sc, k, env.reset_streams, sc.world.state.agent_arrays(), sc._goals)
    _, threads = agents_per_thread(env.device, sc.side * sc.side)
    listed = env.list_envs(env_mask, threads)
    if listed is None:
        launcher.launch(k.nav_reset, dim=(sc.n_envs, threads), inputs=[env_mask, args], device=env.device)
    else:
        launcher.launch(k.nav_reset_listed, dim=(listed[1], threads), inputs=[listed[0], args], device=env.device)


class AheadStarts:
    """The prepared next starts of a navigation scenario ``sc`` (reset ahead,
    ``FusedScenario.supports_reset_ahead``): per env, the state ``nav_reset`` would draw for the
    next episode, its neighbor lists and first observation rows ([E, A] arrays, [E, A, obs_dim]
    rows)."""

    def __init__(self, sc):
        E, A, dev = sc.n_envs, sc.n_agents, sc.env.device
        stepper = sc.env.stepper
        scalar = stepper.scalar
        vec2 = vec2_type(scalar)
        live = sc.world.state.agent_arrays()
        self.pos = wp.zeros((E, A), dtype=vec2, device=dev)
        self.theta = wp.zeros((E, A), dtype=scalar, device=dev)
        self.vel = wp.zeros((E, A), dtype=vec2, device=dev)  # a start is at rest: stays zero
        self._zeros = wp.zeros((E, A), dtype=scalar, device=dev)  # speed and angular velocity (zero)
        self.goals = wp.zeros((E, A), dtype=vec2, device=dev)
        self.prev_dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self.rows = wp.zeros((E, A, sc.obs_dim), dtype=scalar, device=dev)
        self.lists = neighbors.NeighborBuffers(E, A, stepper.world.max_neighbors, scalar, dev, grid=False)
        # Planar starts: the 6-DOF fields of ``agent_arrays`` are never written (drones opt out).
        self.agent_arrays = (self.pos, self.theta, self.vel, self._zeros, self._zeros, *live[5:])
        model = sc.world.model
        self.query = self.lists.query(self.pos, model.neighbor_radius, model.near_radius)


def supports_reset_ahead(sc) -> bool:
    """Whether navigation ``sc`` can prepare its starts ahead: planar agents, no obstacles (their
    layout is drawn with the spawns and the step reads it), brute-force neighbor lists (the grid
    would need its own binning of the prepared positions)."""
    return sc.cfg.n_obstacles == 0 and not sc.env.stepper.model.has_drones and sc.env.stepper.neighbor_method == "brute"


def launch_prepare_ahead(sc, launcher: Launcher, env_mask, streams) -> None:
    """Prepare the next starts of the envs of ``env_mask`` [E] bool into ``sc._ahead`` (an
    ``AheadStarts``): ``nav_reset`` keyed by ``streams``, then the masked observation into its
    ``rows`` (``rows.launch_observe_rows(rows_out=)``)."""
    k = _kernels_for(sc)
    env, ahead = sc.env, sc._ahead
    args = _reset_args(sc, k, streams, ahead.agent_arrays, ahead.goals)
    _, threads = agents_per_thread(env.device, sc.side * sc.side)
    launcher.launch(k.nav_reset, dim=(sc.n_envs, threads), inputs=[env_mask, args], device=env.device)
    obs_args = _observe_args(sc, k, ahead.pos, ahead.vel, ahead.theta, ahead.goals, ahead.query, ahead.prev_dist)
    rows.launch_observe_rows(sc, launcher, k.observe, obs_args, env_mask, base.OBSERVE_ONLY, rows_out=ahead.rows)


def _swap_args(sc, k, marks):
    """``NavSwap`` of the scenario ``sc`` (its prepared starts, ``sc._ahead``) with the ahead ``marks``."""
    env, world, ahead = sc.env, sc.world, sc._ahead
    src = k.NavAhead()
    src.pos, src.theta, src.goals, src.prev_dist = ahead.pos, ahead.theta, ahead.goals, ahead.prev_dist
    lists = ahead.lists
    src.nbr, src.count, src.near, src.total = lists.nbr, lists.count, lists.near, lists.total
    src.rows = rows.row_vectors(ahead.rows, sc.obs_dim)
    sw = k.NavSwap()
    sw.marks, sw.ahead = marks, src
    sw.live = _reset_args(sc, k, env.reset_streams, world.state.agent_arrays(), sc._goals)
    sw.nq, sw.prev_dist = world.neighbor_query(), sc._prev_dist
    sw.final_obs = rows.row_vectors(env._final_obs_saved, sc.obs_dim)
    return sw


def launch_swap_ahead(sc, launcher: Launcher, env_mask, marks) -> None:
    """Start the prepared next episodes of the envs of ``env_mask`` [E] bool (``nav_swap``)."""
    k = _kernels_for(sc)
    per_thread, threads = agents_per_thread(sc.env.device, sc.n_agents)
    launcher.launch(
        k.nav_swap,
        dim=(sc.n_envs, threads),
        inputs=[env_mask, _swap_args(sc, k, marks), per_thread],
        outputs=[rows.row_vectors(sc.env._obs, sc.obs_dim)],
        device=sc.env.device,
    )
