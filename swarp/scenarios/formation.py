"""Formation: agents take the slots of a regular polygon around a center (torch reference).

Each reset draws a center c (uniform in the square that keeps every slot inside the arena) and a
rotation phi (uniform); agent i's slot is ``c + R (cos(phi + 2 pi i / n), sin(phi + 2 pi i / n))``
with R = ``formation_radius`` and n = ``n_agents``: a fixed assignment of agents to slots.

Observation of agent i (``obs_dim = 8 + 5 k`` with ``k = obs_neighbors``):

=========  =====  ==============================================================
slice      size   content
=========  =====  ==============================================================
0:2        2      own position [m]
2:4        2      own velocity [m/s]
4:6        2      own slot - position [m]
6:8        2      formation center - position [m]
8:8+5k     5 k    k nearest other agents within ``obs_range``, nearest first:
                  relative position (2) [m], relative velocity (2) [m/s], valid flag (1);
                  zeros (valid 0) where fewer are in range
=========  =====  ==============================================================

Reward of agent i: ``shaping_factor * (d_prev - d)`` (its progress towards its slot, or the mean
progress of all agents with ``shared_reward``), minus ``collision_penalty`` per other agent it
overlaps, plus ``final_reward`` for everyone on the step the formation is complete. Terminated when
every agent is within ``tolerance`` of its slot (success). Info: ``formation_error`` [E] (mean
distance to slot [m]), ``dist_to_slot`` [E, A] [m], ``on_slot`` [E, A] bool, ``collisions`` [E, A]
int32.

Agents spawn in random jittered grid cells (``spawn.py``); everything is drawn from the
counter-based RNG. The Warp twin is ``formation_kernels.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime.launch import Launcher
from swarp.scenarios import formation_kernels as fmk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses

#: Width of the slot rings drawn by the renderer [px].
SLOT_RING_PX = 2.0
#: Color of the formation center's cross (RGB).
CENTER_COLOR = (40, 40, 40)
#: Gain of the scripted go-to-slot controller [1/s].
SEEK_GAIN = 2.0


@dataclass(frozen=True)
class FormationConfig(arena.ArenaConfig):
    """Options of the formation scenario (SI units).

    The shared arena options are ``arena.ArenaConfig``'s; defaults here: n_agents=5.

    Attributes:
        formation_radius: Circumradius R [m] of the polygon.
        tolerance: Distance [m] to its slot within which an agent counts as placed.
        shared_reward: Replace each agent's progress term by the mean progress of all agents.
        shaping_factor: Weight of the progress term [1/m].
        final_reward: Bonus for every agent on the step the formation is complete.
    """

    scenario_name: ClassVar[str] = "formation"

    n_agents: int = 5
    formation_radius: float = 0.4
    tolerance: float = 0.05
    shared_reward: bool = False
    shaping_factor: float = 1.0
    final_reward: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.checker()
        for name in ("formation_radius", "tolerance"):
            check.number(name)
        for name in ("shaping_factor", "final_reward"):
            check.number(name, allow_zero=True)
        check.bool("shared_reward")
        if self.formation_radius + self.agent_radius >= self.world_size:
            check.fail(
                f"formation_radius + agent_radius ({self.formation_radius + self.agent_radius}) must be < "
                f"world_size ({self.world_size}): the polygon must fit in the arena"
            )
        side = 2.0 * self.formation_radius * math.sin(math.pi / self.n_agents) if self.n_agents > 1 else math.inf
        if side <= 2.0 * self.agent_radius:
            check.fail(
                f"formation_radius ({self.formation_radius}) is too small for {self.n_agents} agents of radius "
                f"{self.agent_radius}: neighboring slots are {side:.4g} m apart, agents need more than "
                f"{2.0 * self.agent_radius:.4g} m"
            )


class FormationScenario(FusedScenario):
    """Agents fill the corners of a polygon; see the module docstring for observations and rewards."""

    name = "formation"
    Config = FormationConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True
    saves_final_obs = True

    def make_world(self) -> WorldSpec:
        c = self.cfg
        #: Half-size [m] of the square the center is drawn in.
        self.center_limit = c.world_size - c.formation_radius - c.agent_radius
        return arena.arena_world(self, c.n_agents)

    @property
    def obs_dim(self) -> int:
        return 8 + 5 * self.cfg.obs_neighbors

    def bind(self, env) -> None:
        super().bind(env)
        E, A, dev, scalar = self.n_envs, self.n_agents, self.device, env.stepper.scalar
        vec2 = wp.types.vector(2, scalar)
        self._slots = wp.zeros((E, A), dtype=vec2, device=dev)
        self._center = wp.zeros(E, dtype=vec2, device=dev)
        self._prev_dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._progress = wp.zeros((E, A), dtype=scalar, device=dev)
        self._dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._on_slot = wp.zeros((E, A), dtype=wp.bool, device=dev)
        self._collisions = wp.zeros((E, A), dtype=wp.int32, device=dev)
        self._error = wp.zeros(E, dtype=scalar, device=dev)
        self.slots = wp.to_torch(self._slots)
        self.center = wp.to_torch(self._center)
        self.prev_dist = wp.to_torch(self._prev_dist)
        # Unit offsets of the slots before rotation: cos and sin of 2 pi i / n, rounded from float64.
        angles = torch.arange(A, dtype=torch.float64) * (2.0 * math.pi / A)
        corners = torch.stack([torch.cos(angles), torch.sin(angles)], -1).to(self.dtype)
        self._corners = wp.array(corners.numpy(), dtype=vec2, device=dev)
        self.corners = wp.to_torch(self._corners)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {
            "formation_error": wp.to_torch(self._error),
            "dist_to_slot": wp.to_torch(self._dist),
            "on_slot": wp.to_torch(self._on_slot),
            "collisions": wp.to_torch(self._collisions),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"slots": self.slots, "center": self.center, "prev_dist": self.prev_dist}

    def drawables(self, env_index: torch.Tensor) -> list:
        """Each agent's slot (a ring of radius ``tolerance`` in its color) and the center (a cross)."""
        slots = self.slots.index_select(0, env_index)
        center = self.center.index_select(0, env_index).unsqueeze(1)
        return [
            Circles(slots, self.cfg.tolerance, width_px=SLOT_RING_PX),
            Crosses(center, 2.0 * self.cfg.agent_radius, color=CENTER_COLOR, diagonal=True),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """Go to the slot: velocity ``SEEK_GAIN * (slot - position)``."""
        return arena.track_velocity(self.env, SEEK_GAIN * (self.slots - self.env.state.pos))

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        c, E, A = self.cfg, self.n_envs, self.n_agents
        spawn = arena.spawn_torch(self, env_mask, A)
        x, y, angle = arena.env_draws_torch(self, 3)
        center = torch.cat([x, y], -1).mul(2.0).sub(1.0).mul(self.center_limit)
        cos, sin = arena.cos_sin((angle * 2.0 - 1.0) * math.pi)
        # Rotate the unit corners by phi and scale: slot = center + R (rotation @ corner).
        ux, uy = self.corners[:, 0].view(1, A), self.corners[:, 1].view(1, A)
        slots = torch.stack(
            [
                center[:, 0:1] + c.formation_radius * (cos * ux - sin * uy),
                center[:, 1:2] + c.formation_radius * (sin * ux + cos * uy),
            ],
            -1,
        )
        m1, m3 = env_mask.view(E, 1), env_mask.view(E, 1, 1)
        self.center.copy_(torch.where(m1, center, self.center))
        self.slots.copy_(torch.where(m3, slots, self.slots))
        dist = (slots - spawn).square().sum(-1).sqrt()
        self.prev_dist.copy_(torch.where(m1, dist, self.prev_dist))

    def observations(self) -> torch.Tensor:
        state, c = self.env.state, self.cfg
        delta, d2 = arena.pairwise(state.pos)
        parts = [
            state.pos,
            state.vel,
            self.slots - state.pos,
            self.center.unsqueeze(1) - state.pos,
            arena.neighbor_features(state.pos, state.vel, d2, delta, c.obs_neighbors, c.obs_range),
        ]
        return torch.cat(parts, dim=-1)

    def _distances(self) -> torch.Tensor:
        return arena.norm(self.slots - self.env.state.pos)

    def rewards(self) -> torch.Tensor:
        c = self.cfg
        dist = self._distances()
        progress = self.prev_dist - dist
        if c.shared_reward:
            progress = progress.mean(dim=1, keepdim=True).expand_as(progress)
        _, d2 = arena.pairwise(self.env.state.pos)
        reward = c.shaping_factor * progress - c.collision_penalty * arena.collisions(d2, c.agent_radius).to(self.dtype)
        reward = reward + c.final_reward * self.done().to(self.dtype).unsqueeze(1)
        self.prev_dist.copy_(dist.detach())
        return reward

    def done(self) -> torch.Tensor:
        return (self._distances() < self.cfg.tolerance).all(dim=1)

    def info(self) -> dict[str, torch.Tensor]:
        dist = self._distances()
        _, d2 = arena.pairwise(self.env.state.pos)
        return {
            "formation_error": dist.mean(dim=1),
            "dist_to_slot": dist,
            "on_slot": dist < self.cfg.tolerance,
            "collisions": arena.collisions(d2, self.cfg.agent_radius),
        }

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (``formation_kernels.observe_kernels``) and, for a step or a reset,
        ``form_finish``."""
        c = self.cfg
        s, max_neighbors, grid, fleet_size, k_obs, register_lists = arena.kernel_key(self)
        observe = fmk.observe_kernels(s, max_neighbors, grid, k_obs, register_lists)
        state = self.world.state
        args = arena.fill(
            observe.ObserveArgs(),
            pos=state.pos, vel=state.vel, slots=self._slots, center=self._center, nq=self.world.neighbor_query(),
            obs_range=s(c.obs_range), reach=s(2.0 * c.agent_radius), tolerance=s(c.tolerance),
            collision_penalty=s(c.collision_penalty), prev_dist=self._prev_dist, progress_out=self._progress,
            reward_out=self.buffers.reward, dist_out=self._dist, on_slot_out=self._on_slot,
            collisions_out=self._collisions,
        )  # fmt: skip
        finish_inputs = [self._progress, self._dist, self._on_slot, int(c.shared_reward), s(c.shaping_factor)]
        finish_inputs += [s(c.final_reward)]
        finish_args = (finish_inputs, [self.buffers.reward, self._error])
        finish = fmk.finish_kernel(s, fleet_size)
        arena.launch_observe(self, launcher, env_mask, mode, observe.observe, args, finish, finish_args)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``form_reset``: spawns, headings, center and slots."""
        s = self.env.stepper.scalar
        inputs = [s(self.center_limit), s(self.cfg.formation_radius), self._corners]
        arena.launch_reset(self, launcher, fmk.reset_kernel(s), env_mask, inputs, [self._center, self._slots])


register_scenario("formation", FormationScenario)
