"""State health: the sticky per-env flag raised when a state, observation or reward goes non-finite.

``flags`` is a ``wp.array(int32)`` [E] (the world's, ``World.non_finite_flags``): a kernel that
writes a value of env ``env`` and finds it NaN or infinite stores ``flags[env] = 1``. Nothing
clears it but an explicit clear (``Environment.clear_flags``, a full ``reset``), so one check per
training iteration sees every event since the last; nothing reads it on the host unless asked
(``Environment.non_finite`` is a device reduction, ``non_finite_envs`` the one sync).

The checks ride in the kernels that produce the values, on registers they already hold: the
physics' integration kernels check every agent's (and body's) new state, the observation wrappers
(``rows.observe_kernels``, ``step_end.step_rows_kernel``) every row they store, and the built-in
scenarios every reward where they store its final value. A fused scenario that does not say it
checks its own values (``FusedScenario.checks_finite``) gets ``check_outputs``, one launch after its
step that reads every row and reward back.
"""

import functools
from types import SimpleNamespace
from typing import Any

import warp as wp


@wp.func
def finite(x: Any) -> bool:
    """Whether ``x`` (a float, a vector, a quaternion: every component) is finite: ``x - x`` is
    exactly zero for a finite value and NaN for an infinite or NaN one, and NaN is the only value
    unequal to itself. Arithmetic, so it compiles inline on the CPU, where ``wp.isfinite`` is a call
    into Warp's runtime per component that makes the compiler spill every live register around it
    (docs/benchmarks.md, "Other measured choices in the code")."""
    d = x - x
    return d == d


@wp.func
def flag_env(flags: wp.array(dtype=wp.int32), env: int, finite: bool):
    """Raise env ``env``'s flag unless ``finite`` (the store happens only on the rare bad path).
    ``flags`` is [E], or [1] for a step with no per-env flags (a functional physics step): then
    every env raises the one flag."""
    if not finite:
        flags[wp.min(env, flags.shape[0] - 1)] = 1


@functools.cache
def funcs(scalar: type, width: int) -> SimpleNamespace:
    """``finite_row(row) -> bool`` for a ``vector(width, scalar)`` row held in registers."""
    row_type = wp.types.vector(width, scalar)

    @wp.func
    def finite_row(row: row_type) -> bool:
        return finite(row)

    return SimpleNamespace(finite_row=finite_row)


@functools.cache
def check_outputs_kernel(scalar: type):
    """``check_outputs(env_mask [E] bool, use_mask, obs [E, A, W], reward [E, A], with_reward,
    final_obs [E, A, W'], done [E] bool, with_final, flags [E])`` over ``dim=(E, A)``: raise the
    flag of every env (of ``env_mask`` where ``use_mask``) with a non-finite observation entry,
    reward (``with_reward``) or saved final observation entry (``with_final``, envs of ``done``).
    The fallback for fused scenarios whose kernels do not check their own outputs."""

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def check_outputs(
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        obs: wp.array3d(dtype=scalar),
        reward: wp.array2d(dtype=scalar),
        with_reward: int,
        final_obs: wp.array3d(dtype=scalar),
        done: wp.array(dtype=wp.bool),
        with_final: int,
        flags: wp.array(dtype=wp.int32),
    ):
        env, agent = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        ok = bool(True)
        for c in range(obs.shape[2]):
            ok = ok and finite(obs[env, agent, c])
        if with_reward != 0:
            ok = ok and finite(reward[env, agent])
        if with_final != 0 and done[env]:
            for c in range(final_obs.shape[2]):
                ok = ok and finite(final_obs[env, agent, c])
        flag_env(flags, env, ok)

    return check_outputs
