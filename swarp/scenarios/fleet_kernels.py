"""Fleet, fused: the Warp twin of ``fleet.py`` (observations, rewards, termination, info, reset).

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``): the agent's row in its
  group's layout (carriers: body-frame view of the nearest scout and carrier; scouts: the depot),
  zeros past its group's width; its distance to the depot, progress reward and collisions (a scan
  of the env's agents: fleets are small).
* ``fleet_finish`` (one thread per env): carriers at the depot, termination and the success bonus.
* ``fleet_reset`` (one thread per env and spawn cell, masked): the ranked spawn of every agent and
  the depot (per-env draws 0 and 1), exactly the draws of the torch reference.

Each kernel comes from a factory cached by precision; ``FleetScenario`` launches them with its own
arrays. The layout constants are here, beside the kernels that write them, and ``fleet.py``
imports them.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core import trig
from swarp.core.precision import vec2_type
from swarp.runtime import episode, rows
from swarp.scenarios.framework import arena_funcs, base

#: Observation width of a carrier: heading (2), body-frame velocity (2), nearest scout (2), nearest
#: other carrier (2) and its valid flag (1).
CARRIER_OBS_DIM = 9
#: Observation width of a scout: position (2), velocity (2), depot - position (2).
SCOUT_OBS_DIM = 6
#: The row store's width: the widest group's.
OBS_DIM = max(CARRIER_OBS_DIM, SCOUT_OBS_DIM)

_OBSERVE_ONLY = wp.constant(base.OBSERVE_ONLY)
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@functools.cache
def observe_kernels(scalar: type) -> SimpleNamespace:
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision (``wp.float32`` or ``wp.float64``)."""
    vec2 = vec2_type(scalar)
    row_type = wp.types.vector(OBS_DIM, scalar)
    cos_sin = trig.cos_sin(scalar)
    one = scalar(1.0)
    far = scalar(1.0e30)

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        theta: wp.array2d(dtype=scalar)
        depot: wp.array(dtype=vec2)
        n_carriers: int
        reach: scalar
        goal_radius: scalar
        shaping_factor: scalar
        collision_penalty: scalar
        prev_dist: wp.array2d(dtype=scalar)
        reward_out: wp.array2d(dtype=scalar)
        dist_out: wp.array2d(dtype=scalar)
        at_depot_out: wp.array2d(dtype=wp.bool)
        collisions_out: wp.array2d(dtype=wp.int32)

    @wp.func
    def body_frame(x: vec2, heading: vec2) -> vec2:
        """World-frame vector ``x`` in the frame of an agent heading ``(cos, sin)``: (ahead, left)."""
        return vec2(heading[0] * x[0] + heading[1] * x[1], heading[0] * x[1] - heading[1] * x[0])

    @wp.func
    def nearest(a: ObserveArgs, env: int, agent: int, first: int, stop: int) -> wp.vec2i:
        """Agent ``first <= j < stop`` (not ``agent``) nearest to ``agent``, ties to the lower index:
        ``(j, 1)``, or ``(agent, 0)`` where there is none."""
        p = a.pos[env, agent]
        best = far
        found = wp.vec2i(agent, 0)
        for j in range(first, stop):
            if j != agent:
                d = a.pos[env, j] - p
                d2 = wp.dot(d, d)
                if found[1] == 0 or d2 < best:
                    best = d2
                    found = wp.vec2i(j, 1)
        return found

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> row_type:
        """Write the agent's per-agent outputs (per ``mode``: reward [E, A] on a step; distance [m],
        at-depot flag and collisions otherwise too) and return its row, ``vector(OBS_DIM, scalar)``."""
        n_agents = a.pos.shape[1]
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        reach2 = a.reach * a.reach
        n_collisions = int(0)
        for j in range(n_agents):
            if j != agent:
                d = a.pos[env, j] - p
                if wp.dot(d, d) < reach2:
                    n_collisions += 1
        to_depot = a.depot[env] - p
        dist = wp.sqrt(wp.dot(to_depot, to_depot))
        row = row_type()
        if agent < a.n_carriers:
            heading = cos_sin(a.theta[env, agent])
            own = body_frame(v, heading)
            scout = body_frame(a.pos[env, nearest(a, env, agent, a.n_carriers, n_agents)[0]] - p, heading)
            mate = nearest(a, env, agent, 0, a.n_carriers)
            row[0] = heading[0]
            row[1] = heading[1]
            row[2] = own[0]
            row[3] = own[1]
            row[4] = scout[0]
            row[5] = scout[1]
            if mate[1] != 0:
                rel = body_frame(a.pos[env, mate[0]] - p, heading)
                row[6] = rel[0]
                row[7] = rel[1]
                row[8] = one
        else:
            # Columns SCOUT_OBS_DIM.. keep the zeros the row started with: padding.
            row[0] = p[0]
            row[1] = p[1]
            row[2] = v[0]
            row[3] = v[1]
            row[4] = to_depot[0]
            row[5] = to_depot[1]
        if mode == _OBSERVE_STEP:
            progress = a.prev_dist[env, agent] - dist
            a.reward_out[env, agent] = a.shaping_factor * progress - a.collision_penalty * scalar(n_collisions)
        if mode != _OBSERVE_ONLY:
            a.dist_out[env, agent] = dist
            a.at_depot_out[env, agent] = dist < a.goal_radius
            a.collisions_out[env, agent] = n_collisions
        a.prev_dist[env, agent] = dist
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, OBS_DIM),
    )


@functools.cache
def finish_kernel(scalar: type):
    """``fleet_finish`` (one thread per env) for one precision: reads ``at_depot`` [E, A] bool,
    writes ``delivered`` [E] int32 and, on a step, ``ep.terminated`` [E] bool and the bonus into
    ``reward`` [E, A]."""
    Episode = episode.episode_struct(scalar)
    zero = scalar(0.0)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def fleet_finish(
        at_depot: wp.array2d(dtype=wp.bool),
        n_carriers: int,
        final_reward: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        reward_out: wp.array2d(dtype=scalar),
        delivered_out: wp.array(dtype=wp.int32),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        count = int(0)
        for a in range(n_carriers):
            if at_depot[env, a]:
                count += 1
        delivered_out[env] = count
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        complete = count == n_carriers
        ep.terminated[env] = complete
        bonus = zero
        if complete:
            bonus = final_reward
        for a in range(reward_out.shape[1]):
            reward_out[env, a] = reward_out[env, a] + bonus

    return fleet_finish


@functools.cache
def reset_kernel(scalar: type):
    """``fleet_reset`` (one thread per env and spawn cell, masked) for one precision: the agents'
    state (``spawn``) and ``depot`` [E] vec2 [m] of the masked envs."""
    vec2 = vec2_type(scalar)
    f = arena_funcs.reset_funcs(scalar)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: the depot comes out bit for bit as in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def fleet_reset(spawn: f.Spawn, depot_extent: scalar, depot_out: wp.array(dtype=vec2)):
        # Agent i spawns in the cell of i-th smallest spawn key; the first slot's thread also draws
        # the depot (per-env draws 0 and 1, uniform in the square of half-size depot_extent).
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        if slot == 0:
            depot_out[env] = vec2(
                (f.env_draw(key, 0) * two - one) * depot_extent, (f.env_draw(key, 1) * two - one) * depot_extent
            )
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            f.spawn_cell(spawn, key, env, cell)

    return fleet_reset
