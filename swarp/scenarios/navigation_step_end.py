"""Navigation's part in ending small batches' steps faster (``swarp.runtime.step_end``): the fused
step end and restarts from starts prepared ahead. Nothing in navigation needs it; the plan turns
it on (``ExecutionPlan.fused_step_end``, ``reset_ahead``: small CUDA batches).

* The fused end is ``step_rows`` around navigation's ``observe_agent`` and the very ``end_env`` /
  ``end_agent`` that ``nav_finish`` composes (``navigation_kernels.finish_kernels``).
* A prepared start (``AheadStarts``) is ``nav_reset`` keyed by the next episode into buffers of
  its own, then the masked observation into rows of its own; ``start_agent`` copies it in, on the
  fused end's lanes or in ``nav_swap`` where the end is split. Planar agents, no obstacles (their
  layout is drawn with the spawns and the step reads it), brute-force lists (the environment checks
  them: the grid would need its own binning of the prepared positions).
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.physics import neighbors
from swarp.runtime import rows
from swarp.runtime.alive import with_alive
from swarp.runtime.launch import Launcher
from swarp.runtime.step_end import (
    AheadMarks,
    StepEndHooks,
    envs_per_block,
    launch_step_rows,
    mark_ahead,
    step_rows_kernel,
)
from swarp.scenarios import navigation_kernels as nk
from swarp.scenarios import navigation_reset


@functools.cache
def swap_kernels(scalar: type, obs_dim: int, max_neighbors: int, obstacle_mode: int, masked: bool = False):
    """``NavAhead``, ``NavSwap``, ``start_agent`` and the ``nav_swap`` kernel for one precision, row
    width and neighbor-list width; ``masked``: the prepared starts carry their alive mask too."""
    vec2 = vec2_type(scalar)
    zero = scalar(0.0)
    Query = neighbors.query_struct(scalar, masked)
    NavReset = navigation_reset.reset_kernels(scalar, obstacle_mode, False, masked).NavReset
    obs_vec = wp.types.vector(obs_dim, scalar)
    list_k = wp.types.vector(max_neighbors, wp.int32)

    @wp.struct
    class NavAhead:
        """Prepared next starts (``launch_prepare`` writes them, ``start_agent`` starts them)."""

        pos: wp.array2d(dtype=vec2)
        theta: wp.array2d(dtype=scalar)
        goals: wp.array2d(dtype=vec2)
        prev_dist: wp.array2d(dtype=scalar)
        nbr: wp.array3d(dtype=wp.int32)
        count: wp.array2d(dtype=wp.int32)
        near: wp.array2d(dtype=wp.int32)
        total: wp.array2d(dtype=wp.int32)
        rows: wp.array2d(dtype=obs_vec)

    if masked:
        NavAhead = with_alive(NavAhead)  # noqa: N806 (a struct type)

    @wp.struct
    class NavSwap:
        """What starting prepared episodes reads and writes (``start_agent``; ``swap_args`` fills it)."""

        marks: AheadMarks
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
        # In groups, each loaded then stored, so few values are live at once: the fused end compiles
        # this into the observation's kernel, where every register this rare path holds would cost
        # every block occupancy (one group at a time needs fewer registers than all loads first:
        # docs/benchmarks.md). Each group waits for the stores before it (the compiler cannot tell
        # the arrays apart): a few memory round trips, on the lanes of restarting envs only.
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
        if wp.static(masked):
            sw.live.alive_out[env, agent] = sw.ahead.alive[env, agent]
        if n_total > n_kept:
            sw.nq.overflow[0] = 1
        # Whole rows as vectors: one address each, the columns at constant offsets from it.
        return sw.ahead.rows[env, agent]

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def nav_swap(
        done: wp.array(dtype=wp.bool),
        sw: NavSwap,
        agents_per_thread: int,
        obs: wp.array2d(dtype=obs_vec),
    ):
        """The auto-reset from prepared starts where the step's end is split: ``start_agent`` for
        each agent of a finished env (its row of ``obs``, the scenario's columns as
        ``rows.row_vectors`` views); every env's ahead mark."""
        env, slot = wp.tid()
        started = done[env]
        if not started:
            if slot == 0:
                mark_ahead(sw.marks, env, False, 0)
            return
        current = sw.marks.episode[env]
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, obs.shape[1])):
            obs[env, agent] = start_agent(sw, env, agent, obs[env, agent])
        if slot == 0:
            mark_ahead(sw.marks, env, True, current)

    return SimpleNamespace(NavAhead=NavAhead, NavSwap=NavSwap, start_agent=start_agent, nav_swap=nav_swap)


@functools.cache
def end_kernels(
    scalar: type,
    obs_neighbors: int,
    max_neighbors: int,
    grid: bool,
    register_lists: bool,
    fleet_size: int,
    obstacle_mode: int,
    tiled: bool = True,
    masked: bool = False,
    leave: bool = False,
):
    """The fused step end's kernels around ``nk.observe_kernels``, ``nk.finish_kernels`` and
    ``swap_kernels`` (same keys): ``step_rows`` and, swapping prepared starts in,
    ``step_rows_ahead`` (with its ``NavEnd`` struct); ``masked``, ``leave``: with the alive mask."""
    observe = nk.observe_kernels(scalar, obs_neighbors, max_neighbors, grid, register_lists, masked)
    finish = nk.finish_kernels(scalar, fleet_size, masked, leave)
    swap = swap_kernels(scalar, observe.obs_dim, max_neighbors, obstacle_mode, masked)
    NavFinish, end_env, end_agent, end_values = finish.NavFinish, finish.end_env, finish.end_agent, finish.end_values
    NavSwap = swap.NavSwap
    obs_vec = wp.types.vector(observe.obs_dim, scalar)
    zero = scalar(0.0)

    @wp.struct
    class NavEnd:
        """What the fused end reads and writes (``swap``: only with prepared starts). Both variants
        take it, the split one through ``end_env_split``: handed ``NavFinish`` itself, the kernel
        spilled registers and the step with no auto-reset measured slower (docs/benchmarks.md)."""

        finish: NavFinish
        swap: NavSwap

    @wp.func
    def end_env_split(e: NavEnd, env: int) -> end_values:
        """``end_env`` (no prepared starts to mark)."""
        return end_env(e.finish, env)

    @wp.func
    def end_env_ahead(e: NavEnd, env: int) -> end_values:
        """``end_env``, and the env's ahead mark."""
        values = end_env(e.finish, env)
        mark_ahead(e.swap.marks, env, values[0] != zero, e.swap.marks.episode[env])
        return values

    @wp.func
    def end_agent_of(e: NavEnd, env: int, agent: int, values: end_values):
        end_agent(e.finish, env, agent, values)

    @wp.func
    def start_env_agent(e: NavEnd, env: int, agent: int, old: obs_vec) -> obs_vec:
        return swap.start_agent(e.swap, env, agent, old)

    def kernel(End, on_env, on_agent, start):
        if not envs_per_block(fleet_size):
            return None  # more agents than a block holds: the end stays split
        return step_rows_kernel(
            observe.ObserveArgs,
            observe.observe_agent,
            End,
            on_env,
            on_agent,
            start,
            scalar,
            observe.obs_dim,
            fleet_size,
            4,
            tiled,
        )

    return SimpleNamespace(
        NavEnd=NavEnd,
        swap=swap,
        step_rows=kernel(NavEnd, end_env_split, end_agent_of, None),
        step_rows_ahead=kernel(NavEnd, end_env_ahead, end_agent_of, start_env_agent),
    )


class AheadStarts:
    """The prepared next starts of a navigation scenario ``sc``: per env, the state ``nav_reset``
    would draw for the next episode, its neighbor lists and first observation rows ([E, A] arrays,
    [E, A, obs_dim] rows)."""

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
        #: With the alive mask, the starts' own (their agent counts); their lists honour it.
        self.alive = None if sc.world.alive is None else wp.zeros((E, A), dtype=wp.bool, device=dev)
        self.lists.alive = self.alive
        # Planar starts: the 6-DOF fields of ``agent_arrays`` are never written (drones opt out).
        self.agent_arrays = (self.pos, self.theta, self.vel, self._zeros, self._zeros, *live[5:])
        model = sc.world.model
        self.query = self.lists.query(self.pos, model.neighbor_radius, model.near_radius)


class NavigationStepEnd(StepEndHooks):
    """``StepEndHooks`` of a navigation scenario (``NavigationScenario.step_end_hooks``).

    Args:
        sc: The scenario (bound later).
        fuses_end: Whether its step observation is navigation's own (a variant adding columns,
            drone_navigation, ends its steps split).
        prepares_ahead: Whether it can prepare starts ahead (see the module docstring).
    """

    def __init__(self, sc, fuses_end: bool, prepares_ahead: bool):
        self.sc = sc
        self.fuses_end = fuses_end
        self.prepares_ahead = prepares_ahead
        self.ahead: AheadStarts | None = None
        self.marks = None

    def _kernels(self):
        """``(navigation's kernels, its fused end's)`` for the bound scenario."""
        sc = self.sc
        stepper = sc.env.stepper
        key = (
            stepper.scalar,
            sc.cfg.obs_neighbors,
            stepper.world.max_neighbors,
            stepper.neighbor_method == "grid",
            sc.plan.register_lists,
            sc.n_agents,
            navigation_reset.OBSTACLE_MODES[sc.cfg.obstacle_shape],
            sc.plan.tiled_rows,
            *nk.mask_keys(sc),
        )
        return nk.kernels_for(sc), end_kernels(*key)

    def bind(self, marks: AheadMarks) -> None:
        sc = self.sc
        self.ahead = AheadStarts(sc)
        self.marks = marks
        # The live goals and reward memory: the scenario's own arrays.
        self.goals = sc.arrays.goals
        self.prev_dist = sc.arrays.prev_dist

    def launch_prepare(self, launcher: Launcher, env_mask: wp.array, streams) -> None:
        sc, ahead = self.sc, self.ahead
        k = nk.kernels_for(sc)
        navigation_reset.launch_reset(sc, launcher, env_mask, streams, ahead.agent_arrays, ahead.goals, ahead.alive)
        args = nk.observe_args(
            sc, k, ahead.pos, ahead.vel, ahead.theta, ahead.goals, ahead.query, ahead.prev_dist, ahead.alive
        )
        rows.launch_observe_rows(
            sc.buffers, launcher, k.observe.observe, args, env_mask, rows.OBSERVE_ONLY, rows_out=ahead.rows
        )

    def prepared_poses(self) -> tuple[wp.array, wp.array]:
        return self.ahead.pos, self.ahead.theta

    def swap_args(self, k, swap):
        """``NavSwap`` (of ``swap_kernels``) of the prepared starts into the live state."""
        sc, ahead = self.sc, self.ahead
        world, b = sc.world, sc.buffers
        src = swap.NavAhead()
        src.pos, src.theta, src.goals, src.prev_dist = ahead.pos, ahead.theta, ahead.goals, ahead.prev_dist
        lists = ahead.lists
        src.nbr, src.count, src.near, src.total = lists.nbr, lists.count, lists.near, lists.total
        src.rows = rows.row_vectors(ahead.rows, sc.obs_dim)
        if ahead.alive is not None:
            src.alive = ahead.alive
        sw = swap.NavSwap()
        sw.marks, sw.ahead = self.marks, src
        sw.live = navigation_reset.reset_args(sc, k, b.reset_streams, world.state.agent_arrays(), self.goals)
        sw.nq, sw.prev_dist = world.neighbor_query(), self.prev_dist
        sw.final_obs = rows.row_vectors(b.final_obs_saved, sc.obs_dim)
        return sw

    def launch_swap(self, launcher: Launcher, env_mask: wp.array, marks: AheadMarks) -> None:
        sc = self.sc
        k, ends = self._kernels()
        per_thread, threads = sc.plan.split(sc.n_agents)
        launcher.launch(
            ends.swap.nav_swap,
            dim=(sc.n_envs, threads),
            inputs=[env_mask, self.swap_args(k, ends.swap), per_thread],
            outputs=[rows.row_vectors(sc.buffers.obs, sc.obs_dim)],
            device=sc.buffers.device,
        )

    def launch_step_end(self, launcher: Launcher, args) -> None:
        """The step's observation (``args``: its ``ObserveArgs``) and end of every env's step in
        one kernel, swapping the prepared starts in where the plan prepares them."""
        sc = self.sc
        k, ends = self._kernels()
        end = ends.NavEnd()
        end.finish = nk.finish_args(sc, k)
        kernel = ends.step_rows
        if sc.plan.reset_ahead:
            end.swap, kernel = self.swap_args(k, ends.swap), ends.step_rows_ahead
        launch_step_rows(sc.buffers, launcher, kernel, args, end)
