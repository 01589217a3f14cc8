"""Sampling, fused: the Warp twin of ``sampling.py`` (observations, rewards, consumption, reset).

* ``sampling_observe`` (one thread per agent): builds the agent's neighbor list for the next
  step's contacts, finds its field cell, whether it owns that cell (no lower-index agent shares
  it), reads the patch around it and consumes its cell. Race-free without atomics: the only
  cells written are cells under agents, each by its single owner, and no thread reads a cell
  under an agent other than its owner (the patch shows those as taken, whatever they hold).
* ``sampling_finish`` (one thread per env): sums the samples in agent order (deterministic),
  rewards, the collected share and the episode bookkeeping.
* ``sampling_reset`` (one thread per env and slot, masked): slot r < G evaluates field row r and
  its mass (Gaussian g from per-env draws ``4 g .. 4 g + 3``, ``env_draw``); slot s < spawn
  cells places the agent of its rank (``spawn_cell``).

Each kernel comes from a cached factory keyed by what it compiles for; ``SamplingScenario`` launches
them with its own arrays. The draws are ``arena_funcs.reset_funcs``'.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.physics import neighbors
from swarp.runtime import episode, health
from swarp.scenarios.framework import arena_funcs, base

_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def observe_kernel(scalar: type, max_neighbors: int, grid: bool, register_lists: bool, patch_radius: int):
    """``ObserveArgs`` and ``sampling_observe`` (one thread per agent) for one precision, neighbor-list width, backend
    and layout (``ExecutionPlan.register_lists``) and patch radius."""
    vec2 = vec2_type(scalar)
    nbk = neighbors.kernels(scalar, max_neighbors, register_lists)
    build_list = nbk.build_grid if grid else nbk.build_brute
    Query = neighbors.query_struct(scalar)
    zero = scalar(0.0)
    P = patch_radius
    width = 2 * P + 1

    @wp.func
    def cell_of(p: vec2, world_size: scalar, inv_cell: scalar, G: int) -> wp.vec2i:
        """(ix, iy) of the field cell under ``p``, clamped to the grid (twin of ``_cells``)."""
        ix = int(wp.floor((p[0] + world_size) * inv_cell))
        iy = int(wp.floor((p[1] + world_size) * inv_cell))
        return wp.vec2i(wp.clamp(ix, 0, G - 1), wp.clamp(iy, 0, G - 1))

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        nq: Query
        world_size: scalar
        inv_cell: scalar
        grid_cells: int
        obs_out: wp.array3d(dtype=scalar)
        field: wp.array2d(dtype=scalar)
        samples_out: wp.array2d(dtype=scalar)
        non_finite_out: wp.array(dtype=wp.int32)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def sampling_observe(
        args: ObserveArgs, env_mask: wp.array(dtype=wp.bool), use_mask: int, mode: int, agents_per_thread: int
    ):
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        n_agents = args.pos.shape[1]
        G = args.grid_cells
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, n_agents)):
            build_list(args.nq, env, agent)
            p = args.pos[env, agent]
            v = args.vel[env, agent]
            args.obs_out[env, agent, 0] = p[0]
            args.obs_out[env, agent, 1] = p[1]
            args.obs_out[env, agent, 2] = v[0]
            args.obs_out[env, agent, 3] = v[1]
            finite = health.finite(p) and health.finite(v)
            home = cell_of(p, args.world_size, args.inv_cell, G)
            owner = bool(True)
            taken = int(0)  # bit (dy + P) * width + (dx + P): a patch cell under some agent
            for j in range(n_agents):
                cj = cell_of(args.pos[env, j], args.world_size, args.inv_cell, G)
                dx = cj[0] - home[0]
                dy = cj[1] - home[1]
                if dx == 0 and dy == 0 and j < agent:
                    owner = False
                if wp.abs(dx) <= P and wp.abs(dy) <= P:
                    taken = taken | (1 << ((dy + P) * width + dx + P))
            for b in range(width * width):
                cx = home[0] + b % width - P
                cy = home[1] + b / width - P
                value = zero
                if ((taken >> b) & 1) == 0 and cx >= 0 and cx < G and cy >= 0 and cy < G:
                    value = args.field[env, cy * G + cx]
                args.obs_out[env, agent, 4 + b] = value
                finite = finite and health.finite(value)
            health.flag_env(args.non_finite_out, env, finite)
            sample = zero
            if owner:
                home_cell = home[1] * G + home[0]
                sample = args.field[env, home_cell]
                args.field[env, home_cell] = zero
            if mode == _OBSERVE_STEP:
                args.samples_out[env, agent] = sample

    return SimpleNamespace(ObserveArgs=ObserveArgs, sampling_observe=sampling_observe)


@functools.cache
def finish_kernel(scalar: type, fleet_size: int):
    """``sampling_finish`` (one thread per env) for one precision and fleet size."""
    Episode = episode.episode_struct(scalar)
    end_step = episode.funcs(scalar).end_step
    zero = scalar(0.0)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def sampling_finish(
        samples: wp.array2d(dtype=scalar),
        row_mass: wp.array2d(dtype=scalar),
        shared_reward: int,
        success_fraction: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        collected: wp.array(dtype=scalar),
        reward_out: wp.array2d(dtype=scalar),
        fraction_out: wp.array(dtype=scalar),
        success_out: wp.array(dtype=wp.bool),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        total = collected[env]
        if mode == _OBSERVE_STEP:
            step_total = zero
            for a in range(wp.static(fleet_size)):
                step_total += samples[env, a]
            finite = bool(True)
            for a in range(wp.static(fleet_size)):
                own = samples[env, a]
                if shared_reward != 0:
                    own = step_total
                reward_out[env, a] = own
                finite = finite and health.finite(own)
            health.flag_env(ep.non_finite, env, finite)
            total = total + step_total
            collected[env] = total
        mass = zero
        for r in range(row_mass.shape[1]):
            mass += row_mass[env, r]
        fraction = total / mass
        fraction_out[env] = fraction
        success_out[env] = fraction >= success_fraction
        if mode == _OBSERVE_STEP:
            end_step(ep, env, False)

    return sampling_finish


@functools.cache
def reset_kernel(scalar: type, n_gaussians: int):
    """``sampling_reset`` (one thread per env and slot, masked) for one precision and Gaussian count."""
    f = arena_funcs.reset_funcs(scalar)
    env_draw64 = arena_funcs.reset_funcs(wp.float64).env_draw  # the field is drawn and evaluated in float64
    gaussians = wp.types.vector(length=n_gaussians, dtype=wp.float64)
    half64 = wp.float64(0.5)
    one64 = wp.float64(1.0)
    two64 = wp.float64(2.0)
    zero = scalar(0.0)

    # No FMA contraction: spawn points come out bit for bit as on the CPU and in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def sampling_reset(
        spawn: f.Spawn,
        world_size64: wp.float64,
        cell_width64: wp.float64,
        sigma_min64: wp.float64,
        sigma_range64: wp.float64,
        n_slots: int,
        field_out: wp.array2d(dtype=scalar),
        row_mass_out: wp.array2d(dtype=scalar),
        collected_out: wp.array(dtype=scalar),
    ):
        # The spawn cells get consumed by the observe pass that follows every reset.
        env, thread = wp.tid()
        if not spawn.env_mask[env]:
            return
        G = row_mass_out.shape[1]
        key = f.spawn_key(spawn, env)
        slots = f.spawn_slots(spawn, thread, n_slots)
        for s in range(slots[0], slots[1]):
            if s == 0:
                collected_out[env] = zero
            if s < G:
                # Row s. Float64 throughout, rounded once per cell, so that the torch reference
                # (also float64) gets the same float32 bits whatever its exp and summation order.
                mu_x = gaussians()
                mu_y = gaussians()
                inv_two_var = gaussians()
                amplitude = gaussians()
                for g in range(n_gaussians):
                    mu_x[g] = (env_draw64(key, 4 * g) * two64 - one64) * world_size64
                    mu_y[g] = (env_draw64(key, 4 * g + 1) * two64 - one64) * world_size64
                    sigma = sigma_min64 + env_draw64(key, 4 * g + 2) * sigma_range64
                    inv_two_var[g] = half64 / (sigma * sigma)
                    amplitude[g] = half64 + half64 * env_draw64(key, 4 * g + 3)
                y = (wp.float64(s) + half64) * cell_width64 - world_size64
                row_total = wp.float64(0.0)
                for ix in range(G):
                    x = (wp.float64(ix) + half64) * cell_width64 - world_size64
                    value = wp.float64(0.0)
                    for g in range(n_gaussians):
                        dx = x - mu_x[g]
                        dy = y - mu_y[g]
                        value += amplitude[g] * wp.exp(-(dx * dx + dy * dy) * inv_two_var[g])
                    cell_value = scalar(value)
                    field_out[env, s * G + ix] = cell_value
                    row_total += wp.float64(cell_value)
                row_mass_out[env, s] = scalar(row_total)
            if s < spawn.side * spawn.side:
                f.spawn_cell(spawn, key, env, s)

    return sampling_reset
