"""Drone navigation: the navigation task flown by 6-DOF quadrotors (``DynamicsModel.DRONE``).

Everything planar is navigation's (``navigation.py``): goals, progress shaping, collisions in the
ground plane, termination, spawns. On top of it:

=============  =====  ========================================================================
slice          size   content (after navigation's ``8 + 5 k`` columns)
=============  =====  ========================================================================
n:n+1          1      altitude error ``z - altitude`` [m]
n+1:n+2        1      vertical velocity [m/s]
n+2:n+6        4      attitude quaternion (x, y, z, w)
n+6:n+9        3      body rates [rad/s]
=============  =====  ========================================================================

Actions are the four rotor thrusts [N] (``env.action_bounds``: ``[0, max_thrust]``). Reward:
navigation's, minus ``altitude_penalty * |z - altitude|`` per agent and step. Resets put every
drone at ``altitude``, level, yawed to navigation's random heading, at rest. The fused twin is the
observe kernel below, launched between navigation's two, and navigation's reset kernel compiled
with the drone fields (one launch).
"""

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime import health
from swarp.runtime.launch import Launcher
from swarp.scenarios import navigation_kernels as nk
from swarp.scenarios.framework import base
from swarp.scenarios.framework.base import OBSERVE_STEP, register_scenario
from swarp.scenarios.navigation import NavigationConfig, NavigationScenario

#: Observation columns the drone variant appends to navigation's.
DRONE_OBS = 9
_OBSERVE_STEP = wp.constant(base.OBSERVE_STEP)


@dataclass(frozen=True)
class DroneNavigationConfig(NavigationConfig):
    """Navigation's options (``model`` must stay ``"drone"``) plus:

    Attributes:
        altitude: Flight altitude [m] of spawns and of the altitude term, > 0.
        altitude_penalty: Weight [1/m] of ``|z - altitude|`` in the reward, >= 0.
    """

    model: str = "drone"
    altitude: float = 1.0
    altitude_penalty: float = 0.5
    _drones: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, allow_zero in (("altitude", False), ("altitude_penalty", True)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"drone_navigation option {name} must be a finite number, got {value!r}")
            if value < 0 or (value == 0 and not allow_zero):
                raise ValueError(f"drone_navigation option {name} must be {'>=' if allow_zero else '>'} 0, got {value}")


@functools.cache
def kernels(scalar: type) -> SimpleNamespace:
    """The variant's observe kernel for one precision (its reset is navigation's ``nav_reset``,
    compiled with the drone fields)."""
    vec3 = wp.types.vector(3, scalar)
    quat = wp.types.quaternion(scalar)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def drone_observe(
        pos_z: wp.array2d(dtype=scalar),
        vel_z: wp.array2d(dtype=scalar),
        attitude: wp.array2d(dtype=quat),
        omega: wp.array2d(dtype=vec3),
        altitude: scalar,
        altitude_penalty: scalar,
        column: int,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        agents_per_thread: int,
        obs_out: wp.array3d(dtype=scalar),
        reward_out: wp.array2d(dtype=scalar),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        first = slot * agents_per_thread
        for agent in range(first, wp.min(first + agents_per_thread, pos_z.shape[1])):
            error = pos_z[env, agent] - altitude
            vz = vel_z[env, agent]
            q = attitude[env, agent]
            w = omega[env, agent]
            obs_out[env, agent, column] = error
            obs_out[env, agent, column + 1] = vz
            for k in range(4):
                obs_out[env, agent, column + 2 + k] = q[k]
            for k in range(3):
                obs_out[env, agent, column + 6 + k] = w[k]
            finite = health.finite(error) and health.finite(vz) and health.finite(q) and health.finite(w)
            if mode == _OBSERVE_STEP:
                # Navigation's finish adds its shared terms after this and checks the sum.
                reward = reward_out[env, agent] - altitude_penalty * wp.abs(error)
                reward_out[env, agent] = reward
                finite = finite and health.finite(reward)
            health.flag_env(non_finite_out, env, finite)

    return SimpleNamespace(drone_observe=drone_observe)


class DroneNavigationScenario(NavigationScenario):
    """Navigation with quadrotors; see the module docstring for what the variant adds."""

    name = "drone_navigation"
    Config = DroneNavigationConfig

    @property
    def obs_dim(self) -> int:
        return super().obs_dim + DRONE_OBS

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        super().reset_world(env_mask)
        state = self.env.state
        m2 = env_mask.view(-1, 1)
        half = 0.5 * state.theta
        level = torch.stack([torch.zeros_like(half), torch.zeros_like(half), torch.sin(half), torch.cos(half)], -1)
        state.pos_z.copy_(torch.where(m2, torch.full_like(state.pos_z, self.cfg.altitude), state.pos_z))
        state.vel_z.masked_fill_(m2, 0.0)
        state.quat.copy_(torch.where(m2.unsqueeze(-1), level, state.quat))
        state.omega.masked_fill_(m2.unsqueeze(-1), 0.0)

    def _altitude_error(self) -> torch.Tensor:
        return self.env.state.pos_z - self.cfg.altitude

    def observations(self) -> torch.Tensor:
        state = self.env.state
        extra = [self._altitude_error().unsqueeze(-1), state.vel_z.unsqueeze(-1), state.quat, state.omega]
        return torch.cat([super().observations(), *extra], dim=-1)

    def rewards(self) -> torch.Tensor:
        return super().rewards() - self.cfg.altitude_penalty * self._altitude_error().abs()

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        def drone_columns(launcher: Launcher) -> None:
            env, state = self.env, self.world.state
            s = env.stepper.scalar
            per_thread, threads = self.plan.split(self.n_agents)
            mask = env_mask if env_mask is not None else self.buffers.no_mask
            launcher.launch(
                kernels(s).drone_observe,
                dim=(self.n_envs, threads),
                inputs=[
                    state.pos_z,
                    state.vel_z,
                    state.quat,
                    state.omega,
                    s(self.cfg.altitude),
                    s(self.cfg.altitude_penalty),
                    super(DroneNavigationScenario, self).obs_dim,
                    mask,
                    int(env_mask is not None),
                    int(mode),
                    per_thread,
                ],
                outputs=[self.buffers.obs, self.buffers.reward, self.buffers.non_finite],
                device=env.device,
            )

        nk.launch_observe(self, launcher, env_mask, mode, before_finish=drone_columns)


register_scenario("drone_navigation", DroneNavigationScenario)
