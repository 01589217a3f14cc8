"""Spread (MPE ``simple_spread``): n agents cover n landmarks together (torch reference).

Observation of agent i (``obs_dim = 4 A + 2`` with ``A = n_agents`` agents and as many landmarks):

==================  ========  ================================================================
slice               size      content
==================  ========  ================================================================
0:2                 2         own velocity [m/s]
2:4                 2         own position [m]
4:4+2A              2 A       landmark l - own position [m], landmarks in index order
4+2A:4A+2           2 (A-1)   agent j - own position [m], the other agents in index order
==================  ========  ================================================================

Reward of agent i (shared term plus its own collisions, as in MPE):
``-sum_l min_j |landmark_l - p_j| - collision_penalty * collisions_i``, where ``collisions_i``
counts the other agents closer than ``2 * agent_radius``. No terminal state: episodes truncate at
``max_steps`` (default 25, as in MPE). Info: ``landmark_dist`` [E, A] (landmark l to its nearest
agent [m]), ``covered`` [E, A] bool (``landmark_dist < cover_radius``), ``collisions`` [E, A] int32.
Success (``success()``, and ``info["covered"]`` all true): every landmark covered.

Resets draw agents in a uniform random subset of jittered grid cells (``arena.spawn_torch`` over
``spawn.py``) and landmarks uniformly in ``[-(L - r), L - r]^2`` (landmark l: per-env draws ``2 l``,
``2 l + 1``, ``arena.DRAW_ENV``), from the counter-based RNG. Holonomic agents with velocity
control (continuous actions). The Warp twin is ``spread_kernels.py``;
``greedy_actions`` is a scripted controller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime import rows
from swarp.runtime.launch import Launcher
from swarp.scenarios import spread_kernels as sk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses
from swarp.scenarios.framework.options import ArenaWorldConfig

#: Landmark marker color (RGB) and cover-ring width [px] for the renderer.
LANDMARK_COLOR = (90, 90, 90)
COVER_RING_PX = 1.5


@dataclass(frozen=True)
class SpreadConfig(ArenaWorldConfig):
    """Options of the spread scenario (SI units).

    The world's options are ``ArenaWorldConfig``'s (at most 256 agents; holonomic agents with
    velocity control); defaults here: n_agents=3 (also the landmarks per env), agent_radius=0.1,
    max_steps=25.

    Attributes:
        cover_radius: A landmark counts as covered when an agent centre is this close [m]
            (default: the agent radius).
        collision_penalty: Penalty per other agent overlapping an agent, per step (>= 0).
    """

    scenario_name: ClassVar[str] = "spread"
    #: What ``arena.arena_world`` reads (fixed for this task): velocity control, the automatic spawn grid.
    ctrl_mode: ClassVar[str] = "velocity"
    spawn_cells: ClassVar[None] = None

    n_agents: int = 3
    agent_radius: float = 0.1
    max_steps: int = 25
    cover_radius: float | None = None
    collision_penalty: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.checker()
        check.number("collision_penalty", allow_zero=True)
        if self.cover_radius is not None:
            check.number("cover_radius")
        if self.agent_radius >= self.world_size:
            raise ValueError(
                f"spread option agent_radius ({self.agent_radius}) must be smaller than world_size ({self.world_size})"
            )


class SpreadScenario(FusedScenario):
    """Agents cover landmarks; see the module docstring for the observation and reward."""

    name = "spread"
    Config = SpreadConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True

    def make_world(self) -> WorldSpec:
        self.landmark_extent = self.cfg.world_size - self.cfg.agent_radius
        return arena.arena_world(self, self.cfg.n_agents, contacts_only=True)

    @property
    def obs_dim(self) -> int:
        return 4 * self.cfg.n_agents + 2

    @property
    def saves_final_obs(self) -> bool:  # type: ignore[override]
        """Whether the masked observation saves ``final_obs`` itself: the row kernels of fleets of
        at most ``spread_kernels.ROWS_MAX_AGENTS`` do, the pair-parallel kernels of larger ones not."""
        return self.cfg.n_agents <= sk.ROWS_MAX_AGENTS

    @property
    def cover_radius(self) -> float:
        return self.cfg.cover_radius if self.cfg.cover_radius is not None else self.cfg.agent_radius

    def bind(self, env) -> None:
        super().bind(env)
        E, A, dev, scalar = self.n_envs, self.n_agents, self.device, env.stepper.scalar
        self._landmarks = wp.zeros((E, A), dtype=wp.types.vector(2, scalar), device=dev)
        self._landmark_dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._covered = wp.zeros((E, A), dtype=wp.bool, device=dev)
        self._collisions = wp.zeros((E, A), dtype=wp.int32, device=dev)
        self.landmarks = wp.to_torch(self._landmarks)
        # (i, j) of every pair of distinct agents, row by row: integer indices, no host sync per step.
        pairs = (~torch.eye(A, dtype=torch.bool)).nonzero()
        self._others = tuple(pairs.T.to(self.landmarks.device))

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {
            "landmark_dist": wp.to_torch(self._landmark_dist),
            "covered": wp.to_torch(self._covered),
            "collisions": wp.to_torch(self._collisions),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"landmarks": self.landmarks}

    def drawables(self, env_index: torch.Tensor) -> list:
        """Landmarks: a gray x and a ring of ``cover_radius``."""
        landmarks = self.landmarks.index_select(0, env_index)
        return [
            Circles(landmarks, self.cover_radius, color=LANDMARK_COLOR, width_px=COVER_RING_PX),
            Crosses(landmarks, 0.5 * self.cover_radius, color=LANDMARK_COLOR, diagonal=True),
        ]

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        E, A = self.n_envs, self.n_agents
        arena.spawn_torch(self, env_mask, A)
        extent = torch.full((), self.landmark_extent, dtype=self.dtype, device=self.landmarks.device)
        draws = torch.cat(arena.env_draws_torch(self, 2 * A), -1).view(E, A, 2)  # landmark l: draws 2 l, 2 l + 1
        landmarks = (draws * 2.0 - 1.0) * extent
        self.landmarks.copy_(torch.where(env_mask.view(E, 1, 1), landmarks, self.landmarks))

    def _offsets(self) -> torch.Tensor:
        """[E, A, A, 2]: position of agent j minus position of agent i at ``[:, i, j]``."""
        pos = self.env.state.pos
        return pos.unsqueeze(1) - pos.unsqueeze(2)

    def observations(self) -> torch.Tensor:
        E, A = self.n_envs, self.n_agents
        pos = self.env.state.pos
        to_landmarks = self.landmarks.unsqueeze(1) - pos.unsqueeze(2)  # [E, A(agent), A(landmark), 2]
        to_others = self._offsets()[:, self._others[0], self._others[1]].view(E, A, A - 1, 2)
        return torch.cat([self.env.state.vel, pos, to_landmarks.flatten(2), to_others.flatten(2)], dim=-1)

    def _landmark_distances(self) -> torch.Tensor:
        """[E, A]: distance of landmark l to its nearest agent [m]."""
        delta = self.landmarks.unsqueeze(2) - self.env.state.pos.unsqueeze(1)  # [E, landmark, agent, 2]
        return arena.norm(delta).min(dim=2).values

    def _collisions_torch(self) -> torch.Tensor:
        d2 = self._offsets().square().sum(-1)
        reach = torch.full((), 2.0 * self.cfg.agent_radius, dtype=self.dtype, device=d2.device)
        eye = torch.eye(self.n_agents, dtype=torch.bool, device=d2.device)
        return ((d2 < reach * reach) & ~eye).sum(-1).to(torch.int32)

    def rewards(self) -> torch.Tensor:
        shared = -self._landmark_distances().sum(dim=1, keepdim=True)
        return shared - self.cfg.collision_penalty * self._collisions_torch().to(self.dtype)

    def done(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.env.state.pos.device)

    def info(self) -> dict[str, torch.Tensor]:
        dist = self._landmark_distances()
        return {"landmark_dist": dist, "covered": dist < self.cover_radius, "collisions": self._collisions_torch()}

    def success(self) -> torch.Tensor:
        """[E] bool: every landmark has an agent within ``cover_radius``."""
        return (self._landmark_distances() < self.cover_radius).all(dim=1)

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``greedy_actions``) for the current state."""
        return greedy_actions(self.env)

    # --- fused twin -------------------------------------------------------------------------

    def kernels(self) -> SimpleNamespace:
        """The bound scenario's kernels (``spread_kernels``): ``agents`` (``agent_kernels``),
        ``observe`` (the row kernels of fleets of at most ``ROWS_MAX_AGENTS``, else ``None``),
        ``pair_observe`` (``spread_observe``, larger fleets), ``finish`` and ``reset``."""
        stepper, register_lists = self.env.stepper, self.plan.register_lists
        s, k, grid = stepper.scalar, stepper.world.max_neighbors, stepper.neighbor_method == "grid"
        small = self.saves_final_obs
        return SimpleNamespace(
            agents=sk.agent_kernels(s, k, grid, register_lists),
            observe=sk.row_observe_kernels(s, k, grid, register_lists, self.n_agents) if small else None,
            pair_observe=None if small else sk.pair_observe_kernel(s),
            finish=sk.finish_kernel(s, self.n_agents),
            reset=sk.reset_kernel(s),
        )

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (and, for a step, ``spread_finish``): the row kernels
        (``rows.observe_kernels``) for fleets of at most ``ROWS_MAX_AGENTS``, else the pair-parallel
        ``spread_observe`` next to ``spread_agents``.

        The world's grid binning (``World.prepare_neighbors``) must have run: the observation builds
        the neighbor list of every agent it observes.
        """
        k = self.kernels()
        env, world, c, b = self.env, self.world, self.cfg, self.buffers
        s = env.stepper.scalar
        state = world.state
        args = arena.fill(
            k.agents.AgentArgs(),
            pos=state.pos, vel=state.vel, landmarks=self._landmarks, nq=world.neighbor_query(),
            reach=s(2.0 * c.agent_radius), cover_radius=s(self.cover_radius), collision_penalty=s(c.collision_penalty),
            reward_out=b.reward, landmark_dist_out=self._landmark_dist, covered_out=self._covered,
            collisions_out=self._collisions,
        )  # fmt: skip
        if k.observe is not None:
            rows.launch_observe_rows(b, launcher, k.observe, args, env_mask, mode)
        else:
            per_thread, threads = self.plan.split(self.n_agents)
            pairs_per_thread, pair_threads = self.plan.split(self.obs_dim // 2)
            mask = env_mask if env_mask is not None else b.no_mask
            use_mask = int(env_mask is not None)
            launcher.launch(
                k.pair_observe,
                dim=(self.n_envs, threads, pair_threads),
                inputs=[state.pos, state.vel, self._landmarks, mask, use_mask, per_thread, pairs_per_thread],
                outputs=[b.obs, b.non_finite],
                device=env.device,
            )
            launcher.launch(
                k.agents.spread_agents,
                dim=(self.n_envs, threads),
                inputs=[args, mask, use_mask, int(mode), per_thread],
                device=env.device,
            )
        if mode == OBSERVE_STEP:
            launcher.launch(
                k.finish,
                dim=self.n_envs,
                inputs=[self._landmark_dist, b.episode_args],
                outputs=[b.reward],
                device=env.device,
                block_dim=self.plan.env_block,
            )

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``spread_reset``: spawns, headings and landmarks."""
        inputs = [self.env.stepper.scalar(self.landmark_extent)]
        reset = sk.reset_kernel(self.env.stepper.scalar)
        arena.launch_reset(self, launcher, reset, env_mask, inputs, [self._landmarks])


def greedy_actions(env) -> torch.Tensor:
    """Scripted controller: assign landmarks to agents greedily (closest free pair first), then
    drive each agent straight at its landmark at up to full speed.

    Args:
        env: A spread ``Environment`` (holonomic velocity control).

    Returns:
        [E, A, 2] velocity commands [m/s] of the env's dtype and device.
    """
    sc: SpreadScenario = env.scenario
    E, A = env.n_envs, env.n_agents
    pos, landmarks = env.state.pos, sc.landmarks
    dist = (landmarks.unsqueeze(1) - pos.unsqueeze(2)).square().sum(-1)  # [E, agent, landmark]
    target = torch.zeros_like(pos)
    rows = torch.arange(E, device=pos.device)
    for _ in range(A):
        flat = dist.flatten(1).argmin(dim=1)
        agent, landmark = flat // A, flat % A
        target[rows, agent] = landmarks[rows, landmark]
        dist[rows, agent, :] = math.inf
        dist[rows, :, landmark] = math.inf
    return arena.seek_velocity(target, pos, env.stepper.dt, sc.cfg.max_speed)


register_scenario("spread", SpreadScenario)
