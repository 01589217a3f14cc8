"""Flocking: agents move as a cohesive, aligned, separated flock onto a target (torch reference).

The target starts at a random point and drifts at ``target_speed`` in a random direction,
bouncing off the inner square ``[-(L - R), L - R]^2`` (L = ``world_size``, R = ``target_radius``),
so the whole flock disc fits in the arena; ``target_speed=0`` gives a fixed target.

Observation of agent i (``obs_dim = 8 + (5 + C) k`` with ``k = obs_neighbors``, C = ``comm_dim``):

=========  =====  ==============================================================
slice      size   content
=========  =====  ==============================================================
0:2        2      own position [m]
2:4        2      own velocity [m/s]
4:6        2      target - position [m]
6:8        2      target velocity [m/s]
8:8+5k     5 k    k nearest other agents within ``obs_range``, nearest first:
                  relative position (2) [m], relative velocity (2) [m/s], valid flag (1);
                  zeros (valid 0) where fewer are in range
8+5k:      C k    with ``comm_dim`` C > 0: the messages the same k neighbors sent with this
                  step's actions (``Environment.messages``; zeros past the last, and in the
                  first observation of an episode)
=========  =====  ==============================================================

With ``comm_dim`` every agent says a C-wide message with its action (continuous: C more columns
in [0, 1]; discrete: one more head of C choices): a swarm that talks to its neighbors.

Reward of agent i, with c the flock centroid, v_bar the mean velocity and d_i = |target - p_i|::

    target_weight * (d_i_prev - d_i)                       progress towards the target [1/m]
  - cohesion_weight * |p_i - c|                            cohesion [1/m]
  - alignment_weight * |v_i - v_bar|                       alignment [s/m]
  - separation_weight * sum_j max(0, 1 - d_ij / s)         separation (s = separation_distance)
  - collision_penalty * (other agents it overlaps)
  + flock_bonus * [d_i < target_radius and touching nobody]   in the flock (the success test) [1]

Episodes never terminate; they truncate at ``max_steps``. Info: ``dist_to_target`` [E, A] [m],
``in_flock`` [E, A] bool (within ``target_radius`` of the target and touching nobody),
``collisions`` [E, A] int32, ``cohesion`` [E] (mean |p_i - c| [m]), ``alignment`` [E]
(polarisation |v_bar| / mean |v_i| in [0, 1]), ``neighbor_overflow`` [E] bool. Success: every
agent ``in_flock``.

Resets spawn agents in random jittered grid cells over the arena (``spawn.py``), all from the
counter-based RNG. The Warp twin is ``flocking_kernels.py``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime.launch import Launcher
from swarp.scenarios import flocking_kernels as fk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses

#: Added to the mean speed in the alignment info so a fleet at rest reads 0, not NaN [m/s].
ALIGNMENT_EPS = 1e-6
#: Color of the target ring and cross (RGB).
TARGET_COLOR = (40, 40, 40)
#: Width of the target ring [px].
TARGET_RING_PX = 1.5


@dataclass(frozen=True)
class FlockingConfig(arena.ArenaConfig):
    """Options of the flocking scenario (SI units).

    The shared arena options are ``arena.ArenaConfig``'s; defaults here: n_agents=8,
    world_size=2.0, obs_neighbors=4, obs_range=0.6.

    Attributes:
        target_speed: Target drift speed [m/s] (0: a fixed target).
        target_radius: Success radius R [m] around the target; also the target's margin from the walls.
        separation_distance: Distance s [m] under which neighbors cost separation.
        target_weight: Weight of the progress towards the target [1/m].
        cohesion_weight: Weight of the distance to the flock centroid [1/m].
        alignment_weight: Weight of the velocity mismatch with the flock [s/m].
        separation_weight: Weight of the separation penalty.
        flock_bonus: Reward per step for being in the flock: within ``target_radius`` of the
            target, touching nobody (the success test, so the return's best state is success).
    """

    scenario_name: ClassVar[str] = "flocking"

    n_agents: int = 8
    world_size: float = 2.0
    target_speed: float = 0.1
    target_radius: float = 0.5
    separation_distance: float = 0.2
    obs_neighbors: int = 4
    obs_range: float = 0.6
    comm_dim: int = 0
    target_weight: float = 1.0
    cohesion_weight: float = 0.1
    alignment_weight: float = 0.05
    separation_weight: float = 0.5
    flock_bonus: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.checker()
        for name in ("target_radius", "separation_distance"):
            check.number(name)
        check.int("comm_dim", 0)
        for name in ("target_speed", "target_weight", "cohesion_weight", "alignment_weight", "separation_weight",
                     "flock_bonus"):  # fmt: skip
            check.number(name, allow_zero=True)
        if self.target_radius >= self.world_size:
            check.fail(f"target_radius ({self.target_radius}) must be < world_size ({self.world_size})")
        if self.target_speed * self.dt > 2.0 * (self.world_size - self.target_radius):
            check.fail(
                f"target_speed * dt ({self.target_speed * self.dt}) must be <= 2 (world_size - target_radius) "
                f"({2.0 * (self.world_size - self.target_radius)}): the target would skip past a wall"
            )


class FlockingScenario(FusedScenario):
    """A flock gathers on a drifting target; see the module docstring for observations and rewards."""

    name = "flocking"
    Config = FlockingConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True
    saves_final_obs = True

    def make_world(self) -> WorldSpec:
        c = self.cfg
        #: Half-size [m] of the square the target moves in.
        self.target_limit = c.world_size - c.target_radius
        spec = arena.arena_world(self, c.n_agents, neighbor_reach=c.separation_distance)
        return dataclasses.replace(spec, comm_dim=c.comm_dim)

    @property
    def obs_dim(self) -> int:
        return 8 + (5 + self.cfg.comm_dim) * self.cfg.obs_neighbors

    def bind(self, env) -> None:
        super().bind(env)
        E, A, dev, scalar = self.n_envs, self.n_agents, self.device, env.stepper.scalar
        vec2 = wp.types.vector(2, scalar)
        self._target = wp.zeros(E, dtype=vec2, device=dev)
        self._target_vel = wp.zeros(E, dtype=vec2, device=dev)
        self._prev_dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._in_flock = wp.zeros((E, A), dtype=wp.bool, device=dev)
        self._collisions = wp.zeros((E, A), dtype=wp.int32, device=dev)
        self._cohesion = wp.zeros(E, dtype=scalar, device=dev)
        self._alignment = wp.zeros(E, dtype=scalar, device=dev)
        self._overflow = wp.zeros(E, dtype=wp.bool, device=dev)
        self.target = wp.to_torch(self._target)
        self.target_vel = wp.to_torch(self._target_vel)
        self.prev_dist = wp.to_torch(self._prev_dist)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {
            "dist_to_target": wp.to_torch(self._dist),
            "in_flock": wp.to_torch(self._in_flock),
            "collisions": wp.to_torch(self._collisions),
            "cohesion": wp.to_torch(self._cohesion),
            "alignment": wp.to_torch(self._alignment),
            "neighbor_overflow": wp.to_torch(self._overflow),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"target": self.target, "target_vel": self.target_vel, "prev_dist": self.prev_dist}

    def drawables(self, env_index: torch.Tensor) -> list:
        """The target: a ring of radius ``target_radius`` (the success disc) and a cross."""
        target = self.target.index_select(0, env_index).unsqueeze(1)
        return [
            Circles(target, self.cfg.target_radius, color=TARGET_COLOR, width_px=TARGET_RING_PX),
            Crosses(target, 2.0 * self.cfg.agent_radius, color=TARGET_COLOR),
        ]

    def success(self) -> torch.Tensor:
        return self._in_flock_torch().all(dim=1)

    def scripted_actions(self) -> torch.Tensor:
        return scripted_actions(self.env)

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        c, E = self.cfg, self.n_envs
        spawn = arena.spawn_torch(self, env_mask, self.n_agents)
        x, y, angle = arena.env_draws_torch(self, 3)
        target = torch.cat([x, y], -1).mul(2.0).sub(1.0).mul(self.target_limit)
        cos, sin = arena.cos_sin((angle * 2.0 - 1.0) * math.pi)
        target_vel = torch.cat([cos, sin], -1) * c.target_speed
        m1 = env_mask.view(E, 1)
        self.target.copy_(torch.where(m1, target, self.target))
        self.target_vel.copy_(torch.where(m1, target_vel, self.target_vel))
        dist = (target.unsqueeze(1) - spawn).square().sum(-1).sqrt()
        self.prev_dist.copy_(torch.where(m1, dist, self.prev_dist))

    def post_step(self) -> None:
        """Move the target one step, bouncing off the walls of its square."""
        limit = self.target_limit
        moved = self.target + self.target_vel * self.env.stepper.dt
        over, under = moved > limit, moved < -limit
        moved = torch.where(over, 2.0 * limit - moved, torch.where(under, -2.0 * limit - moved, moved))
        self.target_vel.copy_(torch.where(over | under, -self.target_vel, self.target_vel))
        self.target.copy_(moved)

    def observations(self) -> torch.Tensor:
        state = self.env.state
        delta, d2 = arena.pairwise(state.pos)
        parts = [
            state.pos,
            state.vel,
            self.target.unsqueeze(1) - state.pos,
            self.target_vel.unsqueeze(1).expand(-1, self.n_agents, -1),
            arena.neighbor_features(state.pos, state.vel, d2, delta, self.cfg.obs_neighbors, self.cfg.obs_range),
        ]
        if self.cfg.comm_dim:
            parts.append(arena.heard_messages(self.env.messages, d2, self.cfg.obs_neighbors, self.cfg.obs_range))
        return torch.cat(parts, dim=-1)

    def _distances(self) -> torch.Tensor:
        return arena.norm(self.target.unsqueeze(1) - self.env.state.pos)

    def _in_flock_torch(self) -> torch.Tensor:
        _, d2 = arena.pairwise(self.env.state.pos)
        return (self._distances() < self.cfg.target_radius) & (arena.collisions(d2, self.cfg.agent_radius) == 0)

    def rewards(self) -> torch.Tensor:
        c, state = self.cfg, self.env.state
        dist = self._distances()
        _, d2 = arena.pairwise(state.pos)
        cohesion = arena.norm(state.pos - state.pos.mean(dim=1, keepdim=True))
        alignment = arena.norm(state.vel - state.vel.mean(dim=1, keepdim=True))
        collisions = arena.collisions(d2, c.agent_radius)
        in_flock = (dist < c.target_radius) & (collisions == 0)
        reward = (
            c.target_weight * (self.prev_dist - dist)
            - c.separation_weight * arena.separation(d2, c.separation_distance)
            - c.collision_penalty * collisions.to(self.dtype)
            + c.flock_bonus * in_flock.to(self.dtype)
            - c.cohesion_weight * cohesion
            - c.alignment_weight * alignment
        )
        self.prev_dist.copy_(dist.detach())
        return reward

    def done(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.target.device)

    def info(self) -> dict[str, torch.Tensor]:
        c, state = self.cfg, self.env.state
        dist = self._distances()
        _, d2 = arena.pairwise(state.pos)
        n_collisions = arena.collisions(d2, c.agent_radius)
        speed = arena.norm(state.vel)
        mean_vel = state.vel.mean(dim=1)
        return {
            "dist_to_target": dist,
            "in_flock": (dist < c.target_radius) & (n_collisions == 0),
            "collisions": n_collisions,
            "cohesion": arena.norm(state.pos - state.pos.mean(dim=1, keepdim=True)).mean(dim=1),
            "alignment": arena.norm(mean_vel) / (speed.mean(dim=1) + ALIGNMENT_EPS),
            "neighbor_overflow": arena.neighbor_overflow(self.world),
        }

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (``flocking_kernels.observe_kernels``) and, for a step or a reset,
        ``flock_finish``."""
        env, world, c = self.env, self.world, self.cfg
        s, max_neighbors, grid, fleet_size, k_obs, register_lists = arena.kernel_key(self)
        observe = fk.observe_kernels(s, max_neighbors, grid, k_obs, register_lists, c.comm_dim)
        state, nb = world.state, world.neighbors
        limit, dt = s(self.target_limit), s(env.stepper.dt)
        args = arena.fill(
            observe.ObserveArgs(),
            pos=state.pos, vel=state.vel, target=self._target, target_vel=self._target_vel,
            nq=world.neighbor_query(), comm=env.action_input.comm_array, obs_range=s(c.obs_range),
            reach=s(2.0 * c.agent_radius),
            sep_distance=s(c.separation_distance), target_limit=limit, target_radius=s(c.target_radius), dt=dt,
            target_weight=s(c.target_weight), separation_weight=s(c.separation_weight),
            collision_penalty=s(c.collision_penalty), flock_bonus=s(c.flock_bonus), prev_dist=self._prev_dist,
            reward_out=self.buffers.reward, dist_out=self._dist, in_flock_out=self._in_flock,
            collisions_out=self._collisions,
        )  # fmt: skip
        finish = fk.finish_kernel(s, fleet_size)
        weights = [s(c.cohesion_weight), s(c.alignment_weight)]
        finish_inputs = [state.pos, state.vel, nb.count, nb.total, limit, dt, *weights]
        flock = [self._target, self._target_vel, self.buffers.reward, self._cohesion, self._alignment]
        finish_args = (finish_inputs, [*flock, self._overflow])
        arena.launch_observe(self, launcher, env_mask, mode, observe.observe, args, finish, finish_args)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``flock_reset``: spawns, headings and the target."""
        s = self.env.stepper.scalar
        inputs = [s(self.target_limit), s(self.cfg.target_speed)]
        reset = fk.reset_kernel(s)
        arena.launch_reset(self, launcher, reset, env_mask, inputs, [self._target, self._target_vel])


#: Gains of the scripted flocking controller: target pull [1/s], separation push [m/s], and the
#: distance [m] inside which the pull fades so the flock settles instead of piling onto the target.
SEEK_GAIN = 1.5
SEPARATION_SPEED = 1.0
SETTLE_FRACTION = 0.4


def scripted_actions(env) -> torch.Tensor:
    """Boids with a target: pull towards the target (fading inside ``SETTLE_FRACTION * target_radius``),
    match its drift, and push away from observed neighbors closer than ``separation_distance``.
    Actions [E, A, 2] through ``arena.track_velocity``."""
    cfg, obs = env.scenario.cfg, env.obs
    rel_target = obs[..., 4:6]
    dist = rel_target.norm(dim=-1, keepdim=True)
    settle = SETTLE_FRACTION * cfg.target_radius
    pull = SEEK_GAIN * rel_target * ((dist - settle).clamp(min=0) / dist.clamp(min=1e-9)).clamp(max=1.0)
    command = pull + obs[..., 6:8]
    k = cfg.obs_neighbors
    if k:
        nbrs = obs[..., 8 : 8 + 5 * k].reshape(*obs.shape[:2], k, 5)
        rel, valid = nbrs[..., 0:2], nbrs[..., 4:5]
        d = rel.norm(dim=-1, keepdim=True).clamp(min=1e-6)
        weight = valid * (1.0 - d / cfg.separation_distance).clamp(min=0)
        command = command - SEPARATION_SPEED * (weight * rel / d).sum(dim=2)
    actions = arena.track_velocity(env, command)
    if cfg.comm_dim:  # it says nothing
        actions = torch.nn.functional.pad(actions, (0, cfg.comm_dim))
    return actions


register_scenario("flocking", FlockingScenario)
