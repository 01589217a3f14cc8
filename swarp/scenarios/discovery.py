"""Discovery: agents find targets that need several of them at once (torch reference).

A target counts as found at the end of a step where at least ``agents_per_target`` agents are
within ``covering_range`` of it; found targets stay found for the rest of the episode (they drop
out of the observation). Targets are not physical: agents drive through them.

Observation of agent i (``obs_dim = 4 + 3 T + 5 k`` with T = ``n_targets``, k = ``obs_neighbors``):

===============  =====  ========================================================
slice            size   content
===============  =====  ========================================================
0:2              2      own position [m]
2:4              2      own velocity [m/s]
4:4+3T           3 T    per target, in index order: target - position [m] (2) and
                        a still-to-find flag (1); all zeros once the target is found
4+3T:4+3T+5k     5 k    k nearest other agents within ``obs_range``, nearest first:
                        relative position (2) [m], relative velocity (2) [m/s],
                        valid flag (1); zeros (valid 0) where fewer are in range
===============  =====  ========================================================

Reward of agent i: ``-time_penalty`` every step, minus ``collision_penalty`` per other agent it
overlaps, plus ``covering_reward`` for every agent per target found on this step (shared).
Terminated when every target is found (success). Info: ``covered_fraction`` [E] (share of targets
found), ``collisions`` [E, A] int32. The found flags are ``scenario.found`` [E, T] bool.

Agents and targets spawn in distinct random jittered grid cells (``spawn.py``); no target is
found before the first step, even if agents spawn around it. The Warp twin is
``discovery_kernels.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime.launch import Launcher
from swarp.scenarios import discovery_kernels as dk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses

#: Most targets per env (the fused kernels keep each agent's covered targets in a 32-bit mask).
MAX_TARGETS = 32
#: Colors of targets still to find and of found ones (RGB), and the ring width [px].
TARGET_COLOR = (40, 40, 40)
FOUND_COLOR = (170, 210, 170)
TARGET_RING_PX = 1.5
#: Gain of the scripted controller [1/s], and where in the covering disc a team member waits,
#: as a fraction of ``covering_range`` from the target.
SEEK_GAIN = 2.0
WAIT_FRACTION = 0.5


@dataclass(frozen=True)
class DiscoveryConfig(arena.ArenaConfig):
    """Options of the discovery scenario (SI units).

    The shared arena options are ``arena.ArenaConfig``'s; defaults here: n_agents=5.

    Attributes:
        n_targets: Targets per env (at most ``MAX_TARGETS``).
        agents_per_target: Agents needed within ``covering_range`` at once to find a target (k).
        covering_range: Distance [m] from a target within which an agent covers it.
        covering_reward: Reward to every agent per target found (shared).
        time_penalty: Penalty per agent per step (>= 0).
    """

    scenario_name: ClassVar[str] = "discovery"

    n_agents: int = 5
    n_targets: int = 5
    agents_per_target: int = 2
    covering_range: float = 0.25
    covering_reward: float = 1.0
    time_penalty: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.checker()
        check.int("n_targets", 1, MAX_TARGETS)
        check.int("agents_per_target", 1, self.n_agents)
        check.number("covering_range")
        for name in ("covering_reward", "time_penalty"):
            check.number(name, allow_zero=True)


class DiscoveryScenario(FusedScenario):
    """Teams of agents find targets; see the module docstring for observations and rewards."""

    name = "discovery"
    Config = DiscoveryConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True
    saves_final_obs = True

    def make_world(self) -> WorldSpec:
        return arena.arena_world(self, self.cfg.n_agents + self.cfg.n_targets)

    @property
    def obs_dim(self) -> int:
        return 4 + 3 * self.cfg.n_targets + 5 * self.cfg.obs_neighbors

    def bind(self, env) -> None:
        super().bind(env)
        E, A, T, dev, scalar = self.n_envs, self.n_agents, self.cfg.n_targets, self.device, env.stepper.scalar
        vec2 = wp.types.vector(2, scalar)
        self._targets = wp.zeros((E, T), dtype=vec2, device=dev)
        self._found = wp.zeros((E, T), dtype=wp.bool, device=dev)
        self._newly_found = wp.zeros(E, dtype=wp.int32, device=dev)
        self._cover_bits = wp.zeros((E, A), dtype=wp.int32, device=dev)
        self._covered_fraction = wp.zeros(E, dtype=scalar, device=dev)
        self._collisions = wp.zeros((E, A), dtype=wp.int32, device=dev)
        self.targets = wp.to_torch(self._targets)
        self.found = wp.to_torch(self._found)
        self.newly_found = wp.to_torch(self._newly_found)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {"covered_fraction": wp.to_torch(self._covered_fraction), "collisions": wp.to_torch(self._collisions)}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"targets": self.targets, "found": self.found}

    def drawables(self, env_index: torch.Tensor) -> list:
        """Targets: a ring of radius ``covering_range`` and a cross, dark until found, pale after."""
        targets = self.targets.index_select(0, env_index)
        found = self.found.index_select(0, env_index)
        r = self.cfg.covering_range
        return [
            Circles(targets, r, color=FOUND_COLOR, width_px=TARGET_RING_PX, mask=found),
            Circles(targets, r, color=TARGET_COLOR, width_px=TARGET_RING_PX, mask=~found),
            Crosses(targets, 2.0 * self.cfg.agent_radius, color=TARGET_COLOR, mask=~found),
        ]

    def scripted_actions(self) -> torch.Tensor:
        return scripted_actions(self.env)

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        # One ranking for agents and targets: agent i takes the i-th smallest cell, target t the
        # (A + t)-th, so nothing shares a cell.
        A, E = self.n_agents, self.n_envs
        points = arena.spawn_torch(self, env_mask, A + self.cfg.n_targets)
        self.targets.copy_(torch.where(env_mask.view(E, 1, 1), points[:, A:], self.targets))
        self.found.masked_fill_(env_mask.view(E, 1), False)

    def _coverage(self) -> torch.Tensor:
        """[E, T] int: agents within ``covering_range`` of each target."""
        delta = self.targets.unsqueeze(1) - self.env.state.pos.unsqueeze(2)  # [E, A, T, 2]
        reach = torch.full((), self.cfg.covering_range, dtype=self.dtype, device=delta.device)
        return (delta.square().sum(-1) <= reach * reach).sum(dim=1)

    def post_step(self) -> None:
        """Mark the targets found on this step (enough agents around them now)."""
        newly = ~self.found & (self._coverage() >= self.cfg.agents_per_target)
        self.newly_found.copy_(newly.sum(dim=1).to(torch.int32))
        self.found.logical_or_(newly)

    def observations(self) -> torch.Tensor:
        state, c = self.env.state, self.cfg
        delta, d2 = arena.pairwise(state.pos)
        rel = self.targets.unsqueeze(1) - state.pos.unsqueeze(2)  # [E, A, T, 2]
        todo = (~self.found).unsqueeze(1).unsqueeze(-1).expand(-1, self.n_agents, -1, -1)  # [E, A, T, 1]
        per_target = torch.where(todo, torch.cat([rel, torch.ones_like(rel[..., :1])], -1), rel.new_zeros(()))
        parts = [
            state.pos,
            state.vel,
            per_target.reshape(self.n_envs, self.n_agents, 3 * c.n_targets),
            arena.neighbor_features(state.pos, state.vel, d2, delta, c.obs_neighbors, c.obs_range),
        ]
        return torch.cat(parts, dim=-1)

    def rewards(self) -> torch.Tensor:
        c = self.cfg
        _, d2 = arena.pairwise(self.env.state.pos)
        penalty = -c.time_penalty - c.collision_penalty * arena.collisions(d2, c.agent_radius).to(self.dtype)
        return penalty + c.covering_reward * self.newly_found.to(self.dtype).unsqueeze(1)

    def done(self) -> torch.Tensor:
        return self.found.all(dim=1)

    def info(self) -> dict[str, torch.Tensor]:
        _, d2 = arena.pairwise(self.env.state.pos)
        return {
            "covered_fraction": self.found.sum(dim=1).to(self.dtype) / self.cfg.n_targets,
            "collisions": arena.collisions(d2, self.cfg.agent_radius),
        }

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (``discovery_kernels.observe_kernels``) and, for a step or a reset,
        ``disc_finish``."""
        c, s = self.cfg, self.env.stepper.scalar
        scalar, max_neighbors, grid, fleet_size, k_obs, register_lists = arena.kernel_key(self)
        observe = dk.observe_kernels(scalar, max_neighbors, grid, k_obs, register_lists, c.n_targets)
        state = self.world.state
        args = arena.fill(
            observe.ObserveArgs(),
            pos=state.pos, vel=state.vel, targets=self._targets, found=self._found, nq=self.world.neighbor_query(),
            obs_range=s(c.obs_range), reach=s(2.0 * c.agent_radius), covering_range=s(c.covering_range),
            time_penalty=s(c.time_penalty), collision_penalty=s(c.collision_penalty),
            cover_bits_out=self._cover_bits, reward_out=self.buffers.reward, collisions_out=self._collisions,
        )  # fmt: skip
        finish = dk.finish_kernel(scalar, fleet_size, c.n_targets)
        finish_inputs = [self._cover_bits, c.agents_per_target, s(c.covering_reward)]
        finish_outputs = [self._found, self.buffers.obs, self.buffers.reward, self._newly_found, self._covered_fraction]
        arena.launch_observe(
            self, launcher, env_mask, mode, observe.observe, args, finish, (finish_inputs, finish_outputs)
        )

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``disc_reset``: agents, headings and targets."""
        reset = dk.reset_kernel(self.env.stepper.scalar, self.cfg.n_targets)
        arena.launch_reset(self, launcher, reset, env_mask, [], [self._targets, self._found])


def scripted_actions(env) -> torch.Tensor:
    """Teams of ``agents_per_target`` agents (the last team takes the leftovers) each head for a
    different target still to find (team g takes the (g mod m)-th of the m left, in index order), its
    members waiting on a small circle around it. Actions [E, A, 2] through ``arena.track_velocity``."""
    sc = env.scenario
    cfg, A = sc.cfg, env.n_agents
    dev, dtype = sc.targets.device, env.dtype
    k = cfg.agents_per_target
    n_teams = max(A // k, 1)
    agents = torch.arange(A, device=dev)
    team = torch.clamp(agents // k, max=n_teams - 1)
    member = agents - team * k
    team_size = torch.where(team == n_teams - 1, A - (n_teams - 1) * k, k)
    todo = ~sc.found  # [E, T]
    n_todo = todo.sum(dim=1, keepdim=True)  # [E, 1]
    rank = torch.cumsum(todo.long(), dim=1) - 1  # [E, T], the rank of each target still to find
    wanted = team.view(1, A) % n_todo.clamp(min=1)  # [E, A]
    match = todo.unsqueeze(1) & (rank.unsqueeze(1) == wanted.unsqueeze(2))  # [E, A, T]
    choice = match.to(torch.int8).argmax(dim=2)  # [E, A]
    goal = torch.gather(sc.targets, 1, choice.unsqueeze(-1).expand(-1, -1, 2))
    angle = 2.0 * math.pi * member.to(dtype) / team_size.to(dtype)
    offset = WAIT_FRACTION * cfg.covering_range * torch.stack([torch.cos(angle), torch.sin(angle)], -1)
    command = SEEK_GAIN * (goal + offset - env.state.pos)
    command = torch.where(n_todo.unsqueeze(-1) > 0, command, torch.zeros_like(command))
    return arena.track_velocity(env, command)


register_scenario("discovery", DiscoveryScenario)
