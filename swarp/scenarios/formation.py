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

import torch
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.core.launch import Launcher
from swarp.render.drawables import Circles, Crosses
from swarp.scenarios import common
from swarp.scenarios import formation_kernels as fk
from swarp.scenarios.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.spawn import cell_point_torch, cells_per_side, uniform_torch

#: Spawn clearance from a cell edge, as a multiple of the agent radius.
CLEARANCE_FACTOR = 1.25
#: Width of the slot rings drawn by the renderer [px].
SLOT_RING_PX = 2.0
#: Color of the formation center's cross (RGB).
CENTER_COLOR = (40, 40, 40)
#: Gain of the scripted go-to-slot controller [1/s].
SEEK_GAIN = 2.0


@dataclass(frozen=True)
class FormationConfig:
    """Options of the formation scenario (SI units).

    Attributes:
        n_agents: Agents per env (= polygon corners).
        world_size: Half-size L [m] of the square arena ``[-L, L]^2`` (soft walls).
        agent_radius: Agent radius [m].
        max_speed: Speed limit [m/s].
        ctrl_mode: ``velocity`` or ``acceleration`` (holonomic agents).
        formation_radius: Circumradius R [m] of the polygon.
        tolerance: Distance [m] to its slot within which an agent counts as placed.
        obs_neighbors: k, the nearest other agents in each observation.
        obs_range: Sensing range [m] for the neighbor observation.
        shared_reward: Replace each agent's progress term by the mean progress of all agents.
        shaping_factor: Weight of the progress term [1/m].
        collision_penalty: Penalty per overlapping agent per step (>= 0).
        final_reward: Bonus for every agent on the step the formation is complete.
        spawn_cells: Cells per side of the spawn grid (default: chosen from n_agents).
        dt: Step length [s].
        substeps: Physics substeps per step.
        max_steps: Episode length [steps].
        max_neighbors: Neighbor-list width K (>= obs_neighbors).
    """

    n_agents: int = 5
    world_size: float = 1.0
    agent_radius: float = 0.05
    max_speed: float = 1.0
    ctrl_mode: str = "velocity"
    formation_radius: float = 0.4
    tolerance: float = 0.05
    obs_neighbors: int = 3
    obs_range: float = 0.5
    shared_reward: bool = False
    shaping_factor: float = 1.0
    collision_penalty: float = 1.0
    final_reward: float = 1.0
    spawn_cells: int | None = None
    dt: float = 0.1
    substeps: int = 1
    max_steps: int = 200
    max_neighbors: int = 16

    def __post_init__(self) -> None:
        check = common.OptionChecker(self, "formation")
        check.int("n_agents", 1, 2000)
        check.int("obs_neighbors", 0)
        check.int("substeps", 1)
        check.int("max_steps", 1)
        check.int("max_neighbors", 1)
        for name in ("world_size", "agent_radius", "max_speed", "formation_radius", "tolerance", "obs_range", "dt"):
            check.number(name)
        for name in ("shaping_factor", "collision_penalty", "final_reward"):
            check.number(name, allow_zero=True)
        check.bool("shared_reward")
        if self.spawn_cells is not None:
            check.int("spawn_cells", 1)
        check.ctrl_mode()
        check.neighbors()
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

    def make_world(self) -> WorldSpec:
        c = self.cfg
        agent = AgentConfig(ctrl_mode=c.ctrl_mode, radius=c.agent_radius, max_speed=c.max_speed)
        self.clearance = CLEARANCE_FACTOR * c.agent_radius
        self.side = cells_per_side(c.world_size, self.clearance, c.n_agents, c.spawn_cells)
        self.jitter = c.world_size / self.side - self.clearance
        #: Half-size [m] of the square the center is drawn in.
        self.center_limit = c.world_size - c.formation_radius - c.agent_radius
        world = WorldConfig(
            bounds=c.world_size,
            bounds_mode="soft",
            max_neighbors=c.max_neighbors,
            neighbor_radius=max(c.obs_range, 2.5 * c.agent_radius + 2.0 * c.max_speed * c.dt),
        )
        return WorldSpec(agents=(agent,) * c.n_agents, world=world, dt=c.dt, substeps=c.substeps, max_steps=c.max_steps)

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
        return common.track_velocity(self.env, SEEK_GAIN * (self.slots - self.env.state.pos))

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        c, E, A = self.cfg, self.n_envs, self.n_agents
        dtype, dev = self.dtype, self.slots.device
        key = self.env.rng_keys().view(E, 1)
        cells = common.ranked_cells(key, fk.DRAW_CELLS, self.side * self.side, A)
        agents = torch.arange(A, device=dev).view(1, A)
        spawn = cell_point_torch(cells, self.side, c.world_size, self.jitter, key, fk.DRAW_JITTER + 2 * agents, dtype)
        heading = (uniform_torch(key, fk.DRAW_HEADING + agents, dtype) * 2.0 - 1.0) * math.pi
        center = torch.cat(
            [(uniform_torch(key, fk.DRAW_CENTER + i, dtype) * 2.0 - 1.0) * self.center_limit for i in (0, 1)], -1
        )
        cos, sin = common.cos_sin((uniform_torch(key, fk.DRAW_CENTER + 2, dtype) * 2.0 - 1.0) * math.pi)
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
        state = self.env.state
        state.pos.copy_(torch.where(m3, spawn, state.pos))
        state.theta.copy_(torch.where(m1, heading, state.theta))
        state.vel.masked_fill_(m3, 0.0)
        state.speed.masked_fill_(m1, 0.0)
        state.ang_vel.masked_fill_(m1, 0.0)
        self.center.copy_(torch.where(m1, center, self.center))
        self.slots.copy_(torch.where(m3, slots, self.slots))
        dist = (slots - spawn).square().sum(-1).sqrt()
        self.prev_dist.copy_(torch.where(m1, dist, self.prev_dist))

    def observations(self) -> torch.Tensor:
        state, c = self.env.state, self.cfg
        delta, d2 = common.pairwise(state.pos)
        parts = [
            state.pos,
            state.vel,
            self.slots - state.pos,
            self.center.unsqueeze(1) - state.pos,
            common.neighbor_features(state.pos, state.vel, d2, delta, c.obs_neighbors, c.obs_range),
        ]
        return torch.cat(parts, dim=-1)

    def _distances(self) -> torch.Tensor:
        return (self.slots - self.env.state.pos).square().sum(-1).sqrt()

    def rewards(self) -> torch.Tensor:
        c = self.cfg
        dist = self._distances()
        progress = self.prev_dist - dist
        if c.shared_reward:
            progress = progress.mean(dim=1, keepdim=True).expand_as(progress)
        _, d2 = common.pairwise(self.env.state.pos)
        reward = c.shaping_factor * progress - c.collision_penalty * common.collisions(d2, c.agent_radius).to(
            self.dtype
        )
        reward = reward + c.final_reward * self.done().to(self.dtype).unsqueeze(1)
        self.prev_dist.copy_(dist.detach())
        return reward

    def done(self) -> torch.Tensor:
        return (self._distances() < self.cfg.tolerance).all(dim=1)

    def info(self) -> dict[str, torch.Tensor]:
        dist = self._distances()
        _, d2 = common.pairwise(self.env.state.pos)
        return {
            "formation_error": dist.mean(dim=1),
            "dist_to_slot": dist,
            "on_slot": dist < self.cfg.tolerance,
            "collisions": common.collisions(d2, self.cfg.agent_radius),
        }

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        fk.launch_observe(self, launcher, env_mask, mode)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        fk.launch_reset(self, launcher, env_mask)


register_scenario("formation", FormationScenario)
