"""The environment's torch paths: the scenario's torch reference step and reset (``fused=False``),
and the differentiable step (``Environment.step`` with actions that require grad).

Both run the physics' Warp launches and then the scenario's torch reference (the specification),
writing the environment's persistent output buffers as the fused step does, so a fused and a
reference environment hand out the same tensors. The episode bookkeeping is the fused path's own
kernels, launched eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import warp as wp

from swarp.core import params as param_table
from swarp.physics.autograd import warp_step
from swarp.runtime.launch import EAGER

if TYPE_CHECKING:
    from swarp.env.environment import Environment


def checked(value, env: Environment, method: str, shape: tuple, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``value`` if it is a tensor of ``shape`` (and ``dtype``), else a ``ValueError`` naming the
    scenario method that returned it (a shape comparison on the host: no device sync)."""
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape) or (dtype and value.dtype != dtype):
        is_tensor = isinstance(value, torch.Tensor)
        got = f"a tensor {tuple(value.shape)} {value.dtype}" if is_tensor else repr(value)
        want = f"{list(shape)}" + (f" {dtype}" if dtype else "")
        raise ValueError(f"{type(env.scenario).__name__}.{method}() returned {got}; expected a tensor {want}")
    return value


def scenario_info(env: Environment) -> dict[str, torch.Tensor]:
    """The scenario's ``info()``, its keys checked against ``info_buffers()``' (the env's ``info``)."""
    info = env.scenario.info()
    if info.keys() != env.scenario_info_keys:
        raise ValueError(f"{type(env.scenario).__name__}.info() returned keys {sorted(info)}; info_buffers() "
                         f"declares {sorted(env.scenario_info_keys)}: the two must match")  # fmt: skip
    return info


def observations(env: Environment) -> torch.Tensor:
    """Torch reference observation [E, A, obs_dim] of ``env.state``: the scenario's, then the lidar's."""
    obs = checked(env.scenario.observations(), env, "observations", (env.n_envs, env.n_agents, env.scenario.obs_dim))
    if env.lidar is None:
        return obs
    return torch.cat([obs, env.lidar.reference(env.state.pos, env.state.theta).distance], dim=-1)


def torch_step(env: Environment) -> None:
    """One no-grad step of the torch reference from the action buffer, writing the output buffers."""
    sc = env.scenario
    env.world.run_step()
    sc.post_step()
    env.obs.copy_(observations(env))
    env.reward.copy_(checked(sc.rewards(), env, "rewards", env.reward.shape))
    flag_non_finite(env, env.obs, env.reward)
    env.terminated.copy_(checked(sc.done(), env, "done", env.terminated.shape, torch.bool))
    for key, value in scenario_info(env).items():
        env.info[key].copy_(value)
    _end_step(env)
    if env.auto_reset:
        reset_envs(env, env.done)


def torch_reset(env: Environment) -> None:
    """A reset of the envs in ``env.reset_mask`` by the torch reference."""
    with env.streams.scope():
        env._launch_begin_episodes(EAGER)
    reset_envs(env, env.reset_mask)
    # An explicit reset refreshes the info of the reset envs (an auto-reset keeps the step's).
    for key, value in scenario_info(env).items():
        mask = env.reset_mask.view(-1, *([1] * (value.dim() - 1)))
        env.info[key].copy_(torch.where(mask, value, env.info[key]))


def reset_envs(env: Environment, mask: torch.Tensor) -> None:
    """Start new episodes in the envs of ``mask`` [E] bool (one of the environment's own mask
    buffers, ``done`` or ``reset_mask``): parameters, state, neighbor lists, observation rows."""
    r = env.randomization
    if r is not None:
        base = env.configured_params()
        table = param_table.sample_agent_params(base, r.ranges, env.rng_keys(), r.relative, r.per_agent)
        env.agent_params.copy_(torch.where(mask.view(-1, 1, 1), table, env.agent_params))
    env.scenario.reset_world(mask)
    mask_wp = env.buffers.done if mask is env.done else env.buffers.reset_mask
    with env.streams.scope():
        env.world.build_neighbors(mask_wp)
    env.obs.copy_(torch.where(mask.view(-1, 1, 1), observations(env), env.obs))
    flag_non_finite(env, env.obs, env_mask=mask)


def flag_non_finite(
    env: Environment, obs: torch.Tensor, reward: torch.Tensor | None = None, env_mask: torch.Tensor | None = None
) -> None:
    """Raise the health flag (``env.non_finite()``) of every env, or every env of ``env_mask`` [E]
    bool, whose ``obs`` [E, A, W] rows or ``reward`` [E, A] hold a NaN or infinity (device-side,
    no host sync). ``x * 0`` is 0 for a finite ``x`` and NaN otherwise, so one multiply and one sum
    per env find them, with no false alarm from large finite values (256 x 8 x 28 on the CPU: 56 us,
    against 230 us for the fused path's check kernel and 300 us for torch's isfinite passes). The
    saved final rows need no check of their own: they are rows this check saw."""
    bad = (obs * 0).sum(dim=(1, 2))
    if reward is not None:
        bad = bad + (reward * 0).sum(dim=1)
    bad = bad.isnan()
    if env_mask is not None:
        bad &= env_mask
    flags = wp.to_torch(env.world.non_finite_flags)
    flags.bitwise_or_(bad.to(flags.dtype))


def grad_step(env: Environment, actions: torch.Tensor):
    """The differentiable step: physics through ``warp_step``, then the scenario's torch reference
    on the new state, so ``loss.backward()`` reaches ``actions`` (the fused kernels are no-grad only).

    The physics starts from a copy of the persistent state, a constant: gradients reach this
    step's actions, not earlier ones through the state (``swarp.rollout`` does backpropagation
    through time). The new state is written back, detached, into the persistent buffers, and
    every persistent output buffer is updated as on the no-grad path, so the env stays
    consistent; the returned ``obs`` and ``reward`` are fresh tensors with grad history.

    With auto-reset, an env that finished this step is reset as usual: its ``obs`` rows start
    the new episode (constants, zero gradient), its ``reward`` is the finishing transition's
    (with gradient), and ``info["final_obs"]`` is a fresh tensor with grad history holding
    every env's observation before the resets (the last observation of finished envs).

    Returns:
        What ``Environment.step`` returns.
    """
    sc = env.scenario
    current = env.world.state.torch
    state_in = type(current)(*(t.clone() for t in current))
    world = env.world
    state = warp_step(
        env.stepper, state_in, actions, invalid_flag=world.invalid_action_flag, non_finite_flag=world.non_finite_flags
    )
    with torch.no_grad():
        for dst, src in zip(env.world.state.torch, state, strict=True):
            dst.copy_(src)
    with env.streams.scope():
        env.world.build_neighbors()
    env._grad_state = state
    try:
        sc.post_step()
        obs = observations(env)
        reward = checked(sc.rewards(), env, "rewards", env.reward.shape)
        terminated = checked(sc.done(), env, "done", env.terminated.shape, torch.bool)
        step_info = scenario_info(env)
    finally:
        env._grad_state = None
    for name, tensor in sc.state_tensors().items():
        if tensor.requires_grad:
            raise RuntimeError(
                f"scenario {sc.name!r} stored a tensor with autograd history in its persistent memory "
                f"{name!r} during a grad-mode step; store a detached value (tensor.copy_(value.detach()))"
            )
    with torch.no_grad():
        env.obs.copy_(obs)
        env.reward.copy_(reward)
        flag_non_finite(env, env.obs, env.reward)
        env.terminated.copy_(terminated)
        for key, value in step_info.items():
            env.info[key].copy_(value)
    _end_step(env)
    info = dict(env.info)
    if env.auto_reset:
        reset_envs(env, env.done)
        info["final_obs"] = obs
        obs = torch.where(env.done.view(-1, 1, 1), env.obs, obs)
    if env.clone_outputs:
        info = {k: v if k == "final_obs" else v.clone() for k, v in info.items()}
        return obs, reward, env.terminated.clone(), env.truncated.clone(), info
    return obs, reward, env.terminated, env.truncated, info


def _end_step(env: Environment) -> None:
    """The fused path's bookkeeping, eagerly: count the step, flag time limits, and with
    auto-reset save the finished envs' rows to ``final_obs`` and start their next episode."""
    with env.streams.scope():
        env._launch_advance(EAGER)
        env._launch_save_final_obs(EAGER)
