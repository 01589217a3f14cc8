"""Shared torch reference of the body scenarios: agents push a movable body to a goal pose.

``transport``, ``push_t`` and ``balance`` are subclasses that choose the bodies, the reset layout
and the success and failure rules; observations, rewards and the reset draws are common, and so
is the Warp twin (``body_goal_kernels.py``).

Observation of agent i (``obs_dim = 8 + 6 B`` for ``B`` bodies):

=============  =====  ===========================================================================
slice          size   content
=============  =====  ===========================================================================
0:2            2      own position [m]
2:4            2      own velocity [m/s]
4+6b:6+6b      2      body b position - own position [m]
6+6b:8+6b      2      body b velocity [m/s]
8+6b:10+6b     2      body b orientation (cos, sin)
4+6B:6+6B      2      goal - target body position [m]
6+6B:8+6B      2      (cos, sin) of the goal angle minus the target body angle
=============  =====  ===========================================================================

Reward (shared by all agents): ``shaping_factor * (err_prev - err)`` with
``err = distance + angle_weight * |angle error|`` of the target body, plus ``final_reward`` on the
step of success, minus ``failure_penalty`` on the step of failure. Terminated on success or failure.
Info: ``dist_to_goal`` [E], ``angle_error`` [E] (wrapped, absolute) [rad], ``success`` [E] bool,
``failure`` [E] bool.

Resets draw from the counter-based RNG (``swarp.core.rng``), draw indices ``DRAW_*`` shared with
the kernels. ``RING`` layout: the body at a uniform point of ``[-body_extent, body_extent]^2`` (and
a uniform angle when ``random_body_angle``), agents evenly spaced on a ring of ``ring_radius``
around it from a uniform phase, the goal uniform in ``[-goal_extent, goal_extent]^2`` (and a uniform
angle when ``random_goal_angle``). ``BALANCE`` layout: see ``balance.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import torch
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.physics import bodies as physics_bodies
from swarp.runtime.launch import Launcher
from swarp.scenarios import body_goal_kernels as bk
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec
from swarp.scenarios.framework.spawn import uniform_torch

RING = bk.RING
BALANCE = bk.BALANCE
#: Per-substep contact phase ``h * sqrt(k / m)`` the derived substep count keeps below [rad].
MAX_CONTACT_PHASE = 0.5


def stable_substeps(dt: float, stiffness: float, mass: float) -> int:
    """Substeps per step so that a contact spring of ``stiffness`` [N/m] on the lightest ``mass``
    [kg] turns at most ``MAX_CONTACT_PHASE`` rad per substep (semi-implicit Euler is stable to 2)."""
    return max(1, math.ceil(dt * math.sqrt(stiffness / mass) / MAX_CONTACT_PHASE))


def check_options(cfg, scenario: str, ints: dict[str, int], positive: tuple[str, ...], non_negative: tuple[str, ...]):
    """Validate scenario options: ``ints`` maps int names to their minimum; the others are finite numbers."""
    for name, low in ints.items():
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{scenario} option {name} must be an int >= {low}, got {value!r}")
    for names, allow_zero in ((positive, False), (non_negative, True)):
        for name in names:
            value = getattr(cfg, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
                or (value == 0 and not allow_zero)
            ):
                bound = ">= 0" if allow_zero else "> 0"
                raise ValueError(f"{scenario} option {name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class BodyGoalConfig:
    """Options every body scenario has (SI units); each scenario's config adds its own.

    Attributes:
        n_agents: Agents per env.
        world_size: Half-size L [m] of the arena ``[-L, L]^2`` (soft walls).
        agent_radius: Agent radius [m].
        max_speed: Agent speed limit [m/s] (holonomic, velocity control; agents weigh 1 kg).
        contact_stiffness: Contact spring constant [N/m]; the substeps follow from it.
        shaping_factor: Weight of the progress term [1/m].
        final_reward: Bonus on the step of success.
        dt: Step length [s].
        substeps: Physics substeps (default: ``stable_substeps(dt, contact_stiffness, 1 kg)``).
        max_steps: Default episode length [steps].
    """

    n_agents: int = 4
    world_size: float = 1.0
    agent_radius: float = 0.05
    max_speed: float = 0.5
    contact_stiffness: float = 400.0
    shaping_factor: float = 1.0
    final_reward: float = 1.0
    dt: float = 0.1
    substeps: int | None = None
    max_steps: int = 200

    #: Scenario name in error messages; the scenario's own options, checked like the shared ones.
    scenario: ClassVar[str] = "body scenario"
    positive_options: ClassVar[tuple[str, ...]] = ()
    non_negative_options: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        ints = {"n_agents": 1, "max_steps": 1} | ({"substeps": 1} if self.substeps is not None else {})
        positive = ("world_size", "agent_radius", "max_speed", "contact_stiffness", "dt", *self.positive_options)
        non_negative = ("shaping_factor", "final_reward", *self.non_negative_options)
        check_options(self, self.scenario, ints, positive, non_negative)


@dataclass(frozen=True)
class Layout:
    """Reset geometry [m] (see the module docstring); unused fields stay 0."""

    kind: int
    body_extent: float = 0.0
    goal_extent: float = 0.0
    ring_radius: float = 0.0
    random_body_angle: bool = False
    random_goal_angle: bool = False
    line_y: float = 0.0
    line_half_length: float = 0.0
    line_half_thickness: float = 0.0
    package_radius: float = 0.0
    agent_radius: float = 0.0
    goal_y: float = 0.0


def wrap_angle_torch(theta: torch.Tensor) -> torch.Tensor:
    """Torch twin of ``dynamics.wrap_angle`` (into [-pi, pi))."""
    return theta - 2.0 * math.pi * torch.floor((theta + math.pi) / (2.0 * math.pi))


class BodyGoalScenario(FusedScenario):
    """Base of the body scenarios; subclasses set ``layout``, ``target_body``, ``angle_weight`` and
    the tolerances in ``make_world``, and may override ``failure_torch`` (with its kernel twin flag)."""

    ends_steps = True
    checks_finite = True
    #: Index of the body whose pose is steered to the goal.
    target_body: int = 0
    #: Whether the kernels check balance failure (the target falls below body 0, the line).
    checks_drop: bool = False

    def body_world(self, bodies: tuple, joints: tuple = ()) -> WorldSpec:
        """The ``WorldSpec`` of ``cfg.n_agents`` holonomic velocity-controlled agents, ``bodies`` and
        ``joints`` in a walled arena, with the substeps the contact stiffness needs unless
        ``cfg.substeps`` is set."""
        c = self.cfg
        agent = AgentConfig(radius=c.agent_radius, max_speed=c.max_speed)
        world = WorldConfig(
            bounds=c.world_size, collision_k=c.contact_stiffness, bodies=tuple(bodies), joints=tuple(joints)
        )
        substeps = c.substeps or stable_substeps(c.dt, c.contact_stiffness, agent.mass)
        return WorldSpec(agents=(agent,) * c.n_agents, world=world, dt=c.dt, substeps=substeps, max_steps=c.max_steps)

    def bind(self, env) -> None:
        super().bind(env)
        E, dev, scalar = self.n_envs, self.device, env.stepper.scalar
        vec2 = wp.types.vector(2, scalar)
        self.n_bodies = env.stepper.n_bodies
        self._goal = wp.zeros(E, dtype=vec2, device=dev)
        self._goal_angle = wp.zeros(E, dtype=scalar, device=dev)
        self._prev_err = wp.zeros(E, dtype=scalar, device=dev)
        self._dist = wp.zeros(E, dtype=scalar, device=dev)
        self._angle_error = wp.zeros(E, dtype=scalar, device=dev)
        self._success = wp.zeros(E, dtype=wp.bool, device=dev)
        self._failure = wp.zeros(E, dtype=wp.bool, device=dev)
        self.goal = wp.to_torch(self._goal)
        self.goal_angle = wp.to_torch(self._goal_angle)
        self.prev_err = wp.to_torch(self._prev_err)

    @property
    def obs_dim(self) -> int:
        return 8 + 6 * self.n_bodies

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {
            "dist_to_goal": wp.to_torch(self._dist),
            "angle_error": wp.to_torch(self._angle_error),
            "success": wp.to_torch(self._success),
            "failure": wp.to_torch(self._failure),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"goal": self.goal, "goal_angle": self.goal_angle, "prev_err": self.prev_err}

    # --- torch reference --------------------------------------------------------------------

    def _layout_torch(self, key: torch.Tensor):
        """``(agent_pos [E, A, 2], body_pos [E, B, 2], body_theta [E, B], goal [E, 2], goal_angle [E])``."""
        lay, dtype, A = self.layout, self.dtype, self.n_agents
        u = [uniform_torch(key, draw, dtype) for draw in range(bk.N_DRAWS)]
        agents = torch.arange(A, device=key.device, dtype=dtype).view(1, A)
        if lay.kind == RING:
            center = torch.stack([u[bk.DRAW_BODY_X] * 2.0 - 1.0, u[bk.DRAW_BODY_Y] * 2.0 - 1.0], -1) * lay.body_extent
            theta = (u[bk.DRAW_BODY_ANGLE] * 2.0 - 1.0) * math.pi if lay.random_body_angle else torch.zeros_like(u[0])
            phase = (u[bk.DRAW_PHASE].unsqueeze(1) + agents / A) * (2.0 * math.pi)
            ring = torch.stack([torch.cos(phase), torch.sin(phase)], -1) * lay.ring_radius
            agent_pos = center.unsqueeze(1) + ring
            body_pos, body_theta = center.unsqueeze(1), theta.unsqueeze(1)
            goal = torch.stack([u[bk.DRAW_GOAL_X] * 2.0 - 1.0, u[bk.DRAW_GOAL_Y] * 2.0 - 1.0], -1) * lay.goal_extent
            goal_angle = (
                (u[bk.DRAW_GOAL_ANGLE] * 2.0 - 1.0) * math.pi if lay.random_goal_angle else torch.zeros_like(u[0])
            )
        else:
            line_x = (u[bk.DRAW_BODY_X] * 2.0 - 1.0) * lay.body_extent
            package_x = line_x + (u[bk.DRAW_PACKAGE] * 2.0 - 1.0) * (0.5 * lay.line_half_length)
            package_y = lay.line_y + lay.line_half_thickness + lay.package_radius
            line = torch.stack([line_x, torch.full_like(line_x, lay.line_y)], -1)
            package = torch.stack([package_x, torch.full_like(line_x, package_y)], -1)
            body_pos = torch.stack([line, package], 1)
            body_theta = torch.zeros_like(body_pos[..., 0])
            spread = ((agents + 0.5) / A * 2.0 - 1.0) * (0.8 * lay.line_half_length)
            agent_y = lay.line_y - lay.line_half_thickness - lay.agent_radius
            agent_pos = torch.stack(
                [line_x.unsqueeze(1) + spread, torch.full_like(spread + line_x.unsqueeze(1), agent_y)], -1
            )
            goal = torch.stack(
                [(u[bk.DRAW_GOAL_X] * 2.0 - 1.0) * lay.goal_extent, torch.full_like(line_x, lay.goal_y)], -1
            )
            goal_angle = torch.zeros_like(line_x)
        return agent_pos, body_pos, body_theta, goal, goal_angle

    def reset_world(self, env_mask: torch.Tensor) -> None:
        E = self.n_envs
        key = self.env.rng_keys().view(E)
        agent_pos, body_pos, body_theta, goal, goal_angle = self._layout_torch(key)
        m1, m2, m3 = env_mask, env_mask.view(E, 1), env_mask.view(E, 1, 1)
        state = self.env.state
        state.pos.copy_(torch.where(m3, agent_pos, state.pos))
        for name in ("theta", "speed", "ang_vel", "body_ang_vel"):
            getattr(state, name).masked_fill_(m2, 0.0)
        state.vel.masked_fill_(m3, 0.0)
        state.body_vel.masked_fill_(m3, 0.0)
        state.body_pos.copy_(torch.where(m3, body_pos, state.body_pos))
        state.body_theta.copy_(torch.where(m2, body_theta, state.body_theta))
        self.goal.copy_(torch.where(m2, goal, self.goal))
        self.goal_angle.copy_(torch.where(m1, goal_angle, self.goal_angle))
        self.prev_err.copy_(torch.where(m1, self._error_torch(), self.prev_err))

    def _errors_torch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(distance [E] [m], |angle error| [E] [rad])`` of the target body."""
        state = self.env.state
        target = self.target_body
        dist = (self.goal - state.body_pos[:, target]).square().sum(-1).sqrt()
        angle = wrap_angle_torch(self.goal_angle - state.body_theta[:, target]).abs()
        return dist, angle

    def _error_torch(self) -> torch.Tensor:
        dist, angle = self._errors_torch()
        return dist + self.angle_weight * angle

    def observations(self) -> torch.Tensor:
        state = self.env.state
        E, A = self.n_envs, self.n_agents
        parts = [state.pos, state.vel]
        for b in range(self.n_bodies):
            parts.append(state.body_pos[:, b : b + 1] - state.pos)
            parts.append(state.body_vel[:, b : b + 1].expand(E, A, 2))
            theta = state.body_theta[:, b : b + 1].unsqueeze(-1).expand(E, A, 1)
            parts += [torch.cos(theta), torch.sin(theta)]
        target = self.target_body
        parts.append((self.goal - state.body_pos[:, target]).unsqueeze(1).expand(E, A, 2))
        delta = (self.goal_angle - state.body_theta[:, target]).view(E, 1, 1).expand(E, A, 1)
        parts += [torch.cos(delta), torch.sin(delta)]
        return torch.cat(parts, dim=-1)

    def success_torch(self) -> torch.Tensor:
        dist, angle = self._errors_torch()
        return (dist < self.position_tolerance) & (angle < self.angle_tolerance)

    def failure_torch(self) -> torch.Tensor:
        """[E] bool: the package fell below the line (balance); never otherwise."""
        state = self.env.state
        if not self.checks_drop:
            return torch.zeros(self.n_envs, dtype=torch.bool, device=state.pos.device)
        return state.body_pos[:, self.target_body, 1] < state.body_pos[:, 0, 1]

    def rewards(self) -> torch.Tensor:
        c = self.cfg
        err = self._error_torch()
        reward = c.shaping_factor * (self.prev_err - err)
        reward = reward + c.final_reward * self.success_torch().to(self.dtype)
        reward = reward - self.failure_penalty * self.failure_torch().to(self.dtype)
        self.prev_err.copy_(err.detach())
        return reward.unsqueeze(1).expand(self.n_envs, self.n_agents)

    def done(self) -> torch.Tensor:
        return self.success_torch() | self.failure_torch()

    def success(self) -> torch.Tensor:
        return self.success_torch()

    def info(self) -> dict[str, torch.Tensor]:
        dist, angle = self._errors_torch()
        return {
            "dist_to_goal": dist,
            "angle_error": angle,
            "success": self.success_torch(),
            "failure": self.failure_torch(),
        }

    # --- fused twin -----------------------------------------------------------------------

    def _observe_kernel(self) -> SimpleNamespace:
        scalar = self.env.stepper.scalar
        return bk.observe_kernel(scalar, self.n_agents, self.n_bodies, self.target_body, self.checks_drop)

    def _task(self):
        """The ``Task`` struct (built once: it holds array handles and constants)."""
        task = getattr(self, "_task_struct", None)
        if task is None:
            s = self.env.stepper.scalar
            task = self._observe_kernel().Task()
            task.goal, task.goal_angle, task.prev_err = self._goal, self._goal_angle, self._prev_err
            task.dist, task.angle_error = self._dist, self._angle_error
            task.success, task.failure = self._success, self._failure
            task.angle_weight = s(self.angle_weight)
            task.position_tolerance = s(self.position_tolerance)
            task.angle_tolerance = s(min(self.angle_tolerance, 1.0e30))
            task.shaping_factor = s(self.cfg.shaping_factor)
            task.final_reward = s(self.cfg.final_reward)
            task.failure_penalty = s(self.failure_penalty)
            self._task_struct = task
        return task

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """``body_goal_observe`` (ends the step for ``OBSERVE_STEP``)."""
        state = self.world.state
        mask = env_mask if env_mask is not None else self.buffers.no_mask
        launcher.launch(
            self._observe_kernel().body_goal_observe,
            dim=self.n_envs,
            inputs=[
                state.pos, state.vel, state.body_pos, state.body_theta, state.body_vel, self._task(),
                self.buffers.episode_args, mask, int(env_mask is not None), int(mode),
            ],
            outputs=[self.buffers.obs, self.buffers.reward],
            device=self.env.device,
            block_dim=self.plan.env_block,
        )  # fmt: skip

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``body_goal_reset``."""
        state, lay = self.world.state, self.layout
        s = self.env.stepper.scalar
        k = bk.reset_kernel(s, lay.kind, self.n_agents, self.n_bodies)
        args = k.Layout()
        for name in ("body_extent", "goal_extent", "ring_radius", "line_y", "line_half_length", "line_half_thickness"):
            setattr(args, name, s(getattr(lay, name)))
        for name in ("package_radius", "agent_radius", "goal_y"):
            setattr(args, name, s(getattr(lay, name)))
        args.random_body_angle = int(lay.random_body_angle)
        args.random_goal_angle = int(lay.random_goal_angle)
        launcher.launch(
            k.body_goal_reset,
            dim=self.n_envs,
            inputs=[env_mask, self.buffers.reset_streams, args],
            outputs=[*state.planar_arrays(), *physics_bodies.of_state(state), self._goal, self._goal_angle],
            device=self.env.device,
            block_dim=self.plan.env_block,
        )
