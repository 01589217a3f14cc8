"""Speaker-listener, fused: the Warp twin of ``speaker_listener.py`` (observations, rewards, info,
reset).

* ``observe_agent`` (one thread per agent, in ``rows.observe_kernels``): the speaker's row (the goal
  one-hot) or the listener's (its velocity, the landmarks relative to it and, on a step only, the
  speaker's message of that step: ``comm``; a fresh start hears silence), zeros past its group's
  width.
* ``speaker_listener_finish`` (one thread per env): the listener's distance to the goal landmark,
  the success flag, ``terminated`` (never) and, on a step, the shared reward of both agents.
* ``speaker_listener_reset`` (one thread per env and spawn cell, masked): the ranked spawn of both
  agents, the landmarks (per-env draws ``2 l``, ``2 l + 1``) and the goal (draw ``2 N``), exactly
  the draws of the torch reference.

Each kernel comes from a factory cached by precision (and landmark count); ``SpeakerListenerScenario``
launches them with its own arrays. The layout constants are here, beside the kernels that write
them, and ``speaker_listener.py`` imports them.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.precision import vec2_type
from swarp.runtime import episode, rows
from swarp.scenarios.framework import arena_funcs, base

#: Agent order: the speaker first (VMAS's ``speaker_0``), then the listener (``listener_0``).
SPEAKER = 0
LISTENER = 1

_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)
_LISTENER = wp.constant(LISTENER)


def speaker_obs_dim(n_landmarks: int) -> int:
    """Observation width of the speaker: the goal landmark one-hot."""
    return n_landmarks


def listener_obs_dim(n_landmarks: int) -> int:
    """Observation width of the listener: velocity (2), each landmark - position (2 N), the heard
    message (N: the channel is as wide as there are landmarks)."""
    return 2 + 3 * n_landmarks


@functools.cache
def observe_kernels(scalar: type, n_landmarks: int) -> SimpleNamespace:
    """``ObserveArgs``, ``observe_agent`` and its ``rows.observe_kernels`` (``observe``) for one
    precision (``wp.float32`` or ``wp.float64``) and landmark count."""
    vec2 = vec2_type(scalar)
    obs_dim = listener_obs_dim(n_landmarks)
    row_type = wp.types.vector(obs_dim, scalar)
    one = scalar(1.0)
    heard = 2 + 2 * n_landmarks  # first column of the heard message

    @wp.struct
    class ObserveArgs:
        pos: wp.array2d(dtype=vec2)
        vel: wp.array2d(dtype=vec2)
        landmarks: wp.array2d(dtype=vec2)
        goal: wp.array(dtype=wp.int32)
        comm: wp.array3d(dtype=scalar)

    @wp.func
    def observe_agent(a: ObserveArgs, mode: int, env: int, agent: int) -> row_type:
        """The agent's row, ``vector(obs_dim, scalar)`` (the speaker's N columns, zeros after them)."""
        row = row_type()
        if agent != _LISTENER:
            goal = a.goal[env]
            for m in range(wp.static(n_landmarks)):
                if goal == m:
                    row[m] = one
            return row
        p = a.pos[env, agent]
        v = a.vel[env, agent]
        row[0] = v[0]
        row[1] = v[1]
        for m in range(wp.static(n_landmarks)):
            d = a.landmarks[env, m] - p
            row[2 + 2 * m] = d[0]
            row[3 + 2 * m] = d[1]
        if mode == _OBSERVE_STEP:  # a fresh start (reset, auto-reset) hears silence
            for c in range(wp.static(n_landmarks)):
                row[heard + c] = a.comm[env, 0, c]
        return row

    return SimpleNamespace(
        ObserveArgs=ObserveArgs,
        observe_agent=observe_agent,
        observe=rows.observe_kernels(ObserveArgs, observe_agent, scalar, obs_dim),
    )


@functools.cache
def finish_kernel(scalar: type):
    """``speaker_listener_finish`` (one thread per env) for one precision: reads ``pos`` [E, A],
    ``landmarks`` [E, N] and ``goal`` [E]; writes ``dist`` [E] [m] and ``success`` [E] bool and, on
    a step, ``ep.terminated`` [E] (False: episodes end at the time limit) and the shared reward
    ``-distance_weight * dist`` of every agent into ``reward`` [E, A]."""
    vec2 = vec2_type(scalar)
    Episode = episode.episode_struct(scalar)

    # No FMA contraction: the squared distance (and so the success flag) as in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def speaker_listener_finish(
        pos: wp.array2d(dtype=vec2),
        landmarks: wp.array2d(dtype=vec2),
        goal: wp.array(dtype=wp.int32),
        goal_radius2: scalar,
        distance_weight: scalar,
        ep: Episode,
        mode: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        reward_out: wp.array2d(dtype=scalar),
        dist_out: wp.array(dtype=scalar),
        success_out: wp.array(dtype=wp.bool),
    ):
        env = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        d = landmarks[env, goal[env]] - pos[env, _LISTENER]
        d2 = d[0] * d[0] + d[1] * d[1]
        dist = wp.sqrt(d2)
        dist_out[env] = dist
        success_out[env] = d2 < goal_radius2
        if mode != _OBSERVE_STEP:
            return  # a reset only refreshes the info
        ep.terminated[env] = False
        for a in range(reward_out.shape[1]):
            reward_out[env, a] = -distance_weight * dist

    return speaker_listener_finish


@functools.cache
def reset_kernel(scalar: type):
    """``speaker_listener_reset`` (one thread per env and spawn cell, masked) for one precision: the
    agents' state (``spawn``), ``landmarks`` [E, N] vec2 [m] and ``goal`` [E] int32 of the masked envs."""
    vec2 = vec2_type(scalar)
    f = arena_funcs.reset_funcs(scalar)
    one = scalar(1.0)
    two = scalar(2.0)

    # No FMA contraction: the landmarks come out bit for bit as in the torch reference.
    @wp.kernel(enable_backward=False, module="unique", module_options={"fuse_fp": False}, grid_stride=False)
    def speaker_listener_reset(
        spawn: f.Spawn,
        landmark_extent: scalar,
        landmarks_out: wp.array2d(dtype=vec2),
        goal_out: wp.array(dtype=wp.int32),
    ):
        # Agent i spawns in the cell of the i-th smallest spawn key; the first slot's thread also draws
        # the landmarks (per-env draws 2 l, 2 l + 1) and the goal (draw 2 N).
        env, slot = wp.tid()
        if not spawn.env_mask[env]:
            return
        key = f.spawn_key(spawn, env)
        if slot == 0:
            n = landmarks_out.shape[1]
            for m in range(n):
                landmarks_out[env, m] = vec2(
                    (f.env_draw(key, 2 * m) * two - one) * landmark_extent,
                    (f.env_draw(key, 2 * m + 1) * two - one) * landmark_extent,
                )
            goal_out[env] = wp.min(int(f.env_draw(key, 2 * n) * scalar(n)), n - 1)
        cells = f.spawn_cells(spawn, slot)
        for cell in range(cells[0], cells[1]):
            f.spawn_cell(spawn, key, env, cell)

    return speaker_listener_reset
