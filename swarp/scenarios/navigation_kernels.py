"""Navigation, fused: the Warp twin of ``navigation.py`` (observations, rewards, termination, reset).

Two small kernel factories, each keyed by what it compiles for:

* ``observe_kernels``: ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``: tiled
  row store on CUDA) builds the agent's neighbor list and writes its observation row, the distance
  to goal, collisions, progress and the reward but its per-env terms, and per-env tallies of agents
  on goal and of possibly lost contacts.
* ``finish_kernels``: how an env's step ends, once: ``end_env`` (termination, the shared and bonus
  reward terms, ``episode.end_step``) and ``end_agent`` (each agent's share), composed by
  ``finish_env`` in ``nav_finish`` (one thread per env) and by the fused step end
  (``navigation_step_end``) on the agents' own lanes.
* the reset's (``navigation_reset.reset_kernels``, beside its launch).

Each factory's ``masked`` key compiles its variant for the world's alive mask
(``swarp.runtime.alive``: an absent or departed agent observes zeros, earns nothing and counts as
done; with ``leave`` an agent on its goal leaves at the end of the step; the reset draws each
env's agent count); without it the kernels are those of a navigation without the mask.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core import trig
from swarp.core.precision import vec2_type
from swarp.core.types import PARAM_RADIUS
from swarp.physics import neighbors
from swarp.runtime import episode, health, rows
from swarp.runtime.alive import ALIVE_ARRAY, extend_struct, with_alive
from swarp.runtime.launch import Launcher
from swarp.scenarios import navigation_reset

_RADIUS = wp.constant(PARAM_RADIUS)

_OBSERVE_ONLY = wp.constant(rows.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(rows.OBSERVE_STEP)
#: Progress values ``end_env`` loads at once when it averages an env's (shared reward).
MEAN_CHUNK = 4


@functools.cache
def observe_kernels(
    scalar: type, obs_neighbors: int, max_neighbors: int, grid: bool, register_lists: bool, masked: bool = False
):
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision, neighbor count k and the world's neighbor lists (width, backend and layout: the
    observation builds each agent's list), and with the alive mask or not (``masked``)."""
    vec2 = vec2_type(scalar)
    cos_sin = trig.cos_sin(scalar)
    nbk = neighbors.kernels(scalar, max_neighbors, register_lists, masked)
    build_list = nbk.build_grid if grid else nbk.build_brute
    Query = neighbors.query_struct(scalar, masked)
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

    if masked:
        ObserveArgs = with_alive(ObserveArgs)  # noqa: N806 (a struct type)

    @wp.func
    def absent_agent(a: ObserveArgs, mode: int, env: int, agent: int, dist: scalar) -> obs_vec:
        """``observe_agent`` of a dead agent (absent, or left): zero outputs, counted as done."""
        if mode == _OBSERVE_STEP:
            a.progress_out[env, agent] = zero
            a.reward_out[env, agent] = zero
        if mode != _OBSERVE_ONLY:
            a.dist_out[env, agent] = zero
            a.on_goal_out[env, agent] = False
            a.collisions_out[env, agent] = 0
            wp.atomic_add(a.goal_tally, env, 1)
        a.prev_dist[env, agent] = dist
        return obs_vec()

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
        if wp.static(masked):
            if not a.alive[env, agent]:
                return absent_agent(a, mode, env, agent, dist)
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
def finish_kernels(scalar: type, fleet_size: int, masked: bool = False, leave: bool = False):
    """How an env's step ends (``NavFinish``, ``end_env``, ``end_agent``, ``finish_env``) and the
    ``nav_finish`` kernel, for one precision and fleet size; ``masked``: with the alive mask (the
    bonus only for the agents that acted; no shared reward), ``leave``: and agents on goal leave."""
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

    if masked:
        fields = {"alive": ALIVE_ARRAY, "on_goal": wp.array2d(dtype=wp.bool)}
        NavFinish = extend_struct(NavFinish, "NavFinishAlive", fields)  # noqa: N806 (a struct type)

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
    def end_acting_agent(f: NavFinish, env: int, agent: int, values: end_values):
        """``end_agent`` with the alive mask: the bonus where every agent is on goal and this one acted;
        with ``leave``, where it is on goal (its arrival; a dead agent's is false), and it leaves."""
        arrived = bool(False)
        if wp.static(leave):
            arrived = f.on_goal[env, agent]
        elif values[3] != zero:
            arrived = f.alive[env, agent]
        if arrived:
            reward = f.reward_out[env, agent] + f.final_reward
            f.reward_out[env, agent] = reward
            health.flag_env(f.ep.non_finite, env, health.finite(reward))
            if wp.static(leave):
                f.alive[env, agent] = False

    @wp.func
    def end_agent(f: NavFinish, env: int, agent: int, values: end_values):
        """Agent ``agent``'s part of ending env ``env``'s step (``end_env``'s ``values``): its share
        of the shared reward, or the bonus (rare: every agent on goal)."""
        if wp.static(masked):
            end_acting_agent(f, env, agent, values)
        elif f.shared_reward != 0:
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
        if wp.static(masked):
            for a in range(fleet_size):
                end_agent(f, env, a, values)
        elif f.shared_reward != 0:
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


def kernels_for(sc) -> SimpleNamespace:
    """The three factories' kernels for the bound navigation scenario ``sc``: ``.observe``,
    ``.finish``, ``.reset``."""
    stepper, plan = sc.env.stepper, sc.plan
    k = stepper.world.max_neighbors
    masked, leave = mask_keys(sc)
    return SimpleNamespace(
        observe=observe_kernels(
            stepper.scalar, sc.cfg.obs_neighbors, k, stepper.neighbor_method == "grid", plan.register_lists, masked
        ),
        finish=finish_kernels(stepper.scalar, sc.n_agents, masked, leave),
        reset=navigation_reset.reset_kernels_of(sc),
    )


def mask_keys(sc) -> tuple[bool, bool]:
    """``(masked, leave)`` of the bound scenario ``sc``: whether its world keeps an alive mask, and
    whether its agents leave on their goals (``leave_on_goal``)."""
    masked = sc.world.alive is not None
    return masked, masked and bool(getattr(sc.cfg, "leave_on_goal", False))


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
    if sc.world.alive is not None:
        f.alive, f.on_goal = sc.world.alive, sc.arrays.on_goal
    return f


def observe_args(sc, k, pos, vel, theta, goals, nq, prev_dist, alive=None):
    """``ObserveArgs`` of the scenario ``sc`` over these agent arrays ([E, A]), neighbor query,
    reward memory and, with the alive mask, ``alive`` (the live ones, or a prepared start's)."""
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
    if sc.world.alive is not None:
        args.alive = sc.world.alive if alive is None else alive
    return args
