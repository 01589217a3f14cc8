"""Navigation: every agent drives to its own goal without colliding (torch reference).

Observation of agent i (``obs_dim = 8 + 5 k`` with ``k = obs_neighbors``):

=========  =====  ==============================================================
slice      size   content
=========  =====  ==============================================================
0:2        2      own position [m]
2:4        2      own velocity [m/s]
4:6        2      heading (cos theta, sin theta)
6:8        2      goal - position [m]
8:8+5k     5 k    k nearest other agents within ``obs_range``, nearest first:
                  relative position (2) [m], relative velocity (2) [m/s], valid flag (1);
                  zeros (valid 0) where fewer are in range
=========  =====  ==============================================================

Reward of agent i: ``shaping_factor * (d_prev - d)`` (its own progress towards its goal, or the
mean progress of all agents with ``shared_reward``), minus ``collision_penalty`` per other agent
it overlaps, plus ``final_reward`` for everyone on the step all agents are on goal.
Terminated when every agent is within ``goal_radius`` of its goal. Info: ``dist_to_goal`` [E, A],
``on_goal`` [E, A] bool, ``collisions`` [E, A] int32, ``neighbor_overflow`` [E] bool (some agent's
list is full of agents within contact reach and dropped others: a contact may have been missed).

Agents that leave and arrive (``swarp.runtime.alive``): with ``n_agents=(lo, hi)`` every env
draws its agent count k in [lo, hi] at each reset (agents k.. are absent that episode), and with
``leave_on_goal`` an agent leaves at the end of the step it reaches its goal. A dead agent
(absent, or left) is frozen, in no neighbor list, observes a zero row, earns 0 and counts as on
goal for termination; the bonus goes to the agents that acted, and with ``leave_on_goal`` to each
agent on its own arrival (paid at the env's finish, it would reward waiting outside the goal
for the others: session 37's greedy policies never arrived). Info ``alive`` [E, A] bool (also
``env.alive``): the agents that act in the next step; ``on_goal``, ``dist_to_goal`` and
``collisions`` are zero for an agent that did not act. Not with ``shared_reward``.

The neighbor list keeps the K = ``max_neighbors`` nearest agents within ``obs_range``: the observed
k are its first entries and the contacts its near prefix, so K = max(8, k) loses neither (8 discs
of one radius cannot all touch a ninth), and a list of 8 is a shorter step than one of 16, the more
so the larger the fleet (docs/benchmarks.md).

Resets draw spawns and goals as uniform random subsets of jittered grid cells (``spawn.py``), and
optional circle/box obstacles in further cells, all on the device from the counter-based RNG.
The Warp twin is ``navigation_kernels.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import torch
import warp as wp

from swarp.core.config import DynamicsModel, ObstacleShape, coerce_enum
from swarp.core.precision import vec2_type
from swarp.core.rng import uniform_u24_torch
from swarp.core.types import PARAM_RADIUS
from swarp.runtime.launch import Launcher
from swarp.scenarios import navigation_kernels as nk
from swarp.scenarios import navigation_reset
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses
from swarp.scenarios.framework.spawn import (
    cell_keys_torch,
    cell_point_torch,
    smallest_cells_torch,
    uniform_torch,
)
from swarp.scenarios.navigation_step_end import NavigationStepEnd

DRAW_SPAWN_CELLS = int(navigation_reset.DRAW_SPAWN_CELLS)
DRAW_GOAL_CELLS = int(navigation_reset.DRAW_GOAL_CELLS)
DRAW_SPAWN_JITTER = int(navigation_reset.DRAW_SPAWN_JITTER)
DRAW_GOAL_JITTER = int(navigation_reset.DRAW_GOAL_JITTER)
DRAW_HEADING = int(navigation_reset.DRAW_HEADING)
DRAW_OBSTACLE = int(navigation_reset.DRAW_OBSTACLE)
DRAW_OBSTACLE_CELLS = int(navigation_reset.DRAW_OBSTACLE_CELLS)
DRAW_AGENT_COUNT = int(navigation_reset.DRAW_AGENT_COUNT)
#: Width of the goal ring drawn by the renderer [px].
GOAL_RING_PX = 2.0
#: Default neighbor-list width: enough for every possible contact partner of a disc (at most 6
#: equal discs touch one; 8 leaves room for overlap and unequal radii) and for the observed k <= 8.
DEFAULT_LIST_WIDTH = 8
#: Gain of the scripted go-to-goal controller [1/s] (the demo's greedy policy).
SEEK_GAIN = 2.0


@dataclass(frozen=True)
class NavigationConfig(arena.ArenaConfig):
    """Options of the navigation scenario (SI units).

    The shared arena options are ``arena.ArenaConfig``'s, with its defaults (``n_agents``,
    ``world_size`` L [m] of the arena ``[-L, L]^2`` with soft walls at its edge, ``agent_radius``
    [m], ``max_speed`` [m/s], ``ctrl_mode``, ``obs_neighbors`` k, ``obs_range`` [m],
    ``collision_penalty`` per overlapping agent pair member per step, ``spawn_cells`` (default:
    chosen from n_agents), ``dt`` [s], ``substeps``, ``max_steps``, ``neighbor_method``) but:

    Attributes:
        max_neighbors: Neighbor-list width K (>= obs_neighbors; default max(8, obs_neighbors)).
        model: Dynamics model name (``holonomic``, ``diff_drive``, ``kinematic_bicycle``).
        n_obstacles: Random obstacles per env, re-sampled at every reset.
        obstacle_shape: ``circle``, ``box`` or ``mixed``.
        shared_reward: Replace each agent's progress term by the mean progress of all agents.
        shaping_factor: Weight of the progress term [1/m].
        final_reward: Bonus for every agent on the step all agents are on goal.
        goal_radius: On-goal distance [m] (default: the agent radius).
        n_agents: Agents per env, or ``(lo, hi)``: each env draws its count in [lo, hi] at every
            reset (buffers hold hi; the others are absent). Stored as ``n_agents = hi``,
            ``min_agents = lo``.
        min_agents: The fewest agents an env draws (``n_agents=(lo, hi)`` sets it; ``None``: a
            fixed count).
        leave_on_goal: An agent that reaches its goal leaves (stops acting, observing and
            colliding); the env ends when every present agent has left.
    """

    scenario_name: ClassVar[str] = "navigation"
    max_neighbors_optional: ClassVar[bool] = True

    max_neighbors: int | None = None
    model: str = "holonomic"
    n_obstacles: int = 0
    obstacle_shape: str = "mixed"
    shared_reward: bool = False
    shaping_factor: float = 1.0
    final_reward: float = 1.0
    goal_radius: float | None = None
    min_agents: int | None = None
    leave_on_goal: bool = False
    #: Whether the scenario flies drones (``drone_navigation`` sets it).
    _drones: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if isinstance(self.n_agents, (tuple, list)):
            agent_range(self)
        super().__post_init__()
        check = self.checker()
        check.int("n_obstacles", 0, 2000)
        check.bool("leave_on_goal")
        if self.min_agents is not None:
            check.int("min_agents", 1, self.n_agents)
        if self.alive_mask:
            if self._drones:
                check.fail("n_agents=(lo, hi) and leave_on_goal are not supported with drones (navigation only)")
            if self.shared_reward:
                check.fail("shared_reward cannot be combined with n_agents=(lo, hi) or leave_on_goal")
        for name in ("shaping_factor", "final_reward"):
            check.number(name, allow_zero=True)
        check.number("goal_radius", optional=True)
        model = coerce_enum(DynamicsModel, self.model, "navigation option model")
        if (model == DynamicsModel.DRONE) != self._drones:
            raise ValueError(
                "drones fly the 'drone_navigation' scenario (its observation and reset cover altitude "
                "and attitude); 'navigation' takes holonomic, diff_drive or kinematic_bicycle"
                if model == DynamicsModel.DRONE
                else f"drone_navigation flies drones only, got model={self.model!r}"
            )
        if self.obstacle_shape not in ("circle", "box", "mixed"):
            raise ValueError(
                f"navigation option obstacle_shape must be 'circle', 'box' or 'mixed', got {self.obstacle_shape!r}"
            )

    @property
    def alive_mask(self) -> bool:
        """Whether the world keeps an alive mask (a variable agent count, or agents that leave)."""
        return self.min_agents is not None or self.leave_on_goal

    @property
    def list_width(self) -> int:
        """K, the neighbor-list width: ``max_neighbors``, or max(8, obs_neighbors) by default."""
        return self.max_neighbors if self.max_neighbors is not None else max(DEFAULT_LIST_WIDTH, self.obs_neighbors)


def agent_range(cfg) -> None:
    """Check ``cfg.n_agents == (lo, hi)`` and store it as ``n_agents = hi``, ``min_agents = lo``."""
    value = cfg.n_agents
    ints = len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ints or not 1 <= value[0] <= value[1]:
        cfg.checker().fail(f"n_agents must be an int or a pair (lo, hi) of ints with 1 <= lo <= hi, got {value!r}")
    if cfg.min_agents is not None:
        cfg.checker().fail("give n_agents=(lo, hi) or min_agents, not both")
    object.__setattr__(cfg, "n_agents", value[1])
    object.__setattr__(cfg, "min_agents", value[0])


def agent_counts_torch(key: torch.Tensor, low: int, high: int) -> torch.Tensor:
    """[E] int64 agents present in the episodes of ``key`` [E] (torch twin of ``navigation_reset.agent_count``)."""
    u = uniform_u24_torch(key, DRAW_AGENT_COUNT) >> navigation_reset.COUNT_BITS
    return low + ((u * (high - low + 1)) >> navigation_reset.COUNT_BITS)


@dataclass
class NavigationArrays:
    """The Warp arrays a bound navigation scenario keeps for its kernels (E envs, A agents).

    Attributes:
        goals: [E, A] vec2, each agent's goal [m].
        prev_dist: [E, A] scalar, the distance to goal at the last observation [m] (reward memory).
        progress: [E, A] scalar, this step's decrease of the distance to goal [m].
        dist: [E, A] scalar, distance to goal [m] (info).
        on_goal: [E, A] bool, within ``goal_radius`` of the goal (info).
        collisions: [E, A] int32, other agents each agent overlaps (info).
        overflow: [E] bool, some agent may have lost a contact to a full neighbor list (info).
        goal_tally: [E] int32, agents on goal, counted by the observation and cleared by
            ``nav_finish`` (zero between steps).
        overflow_tally: [E] int32, agents that may have lost a contact, likewise.
        cell_hashes: The tables of ``navigation_kernels.cell_hashes`` for ``nav_reset``, or ``None``
            for a variant with its own reset and no spawn grid (give_way).
    """

    goals: wp.array
    prev_dist: wp.array
    progress: wp.array
    dist: wp.array
    on_goal: wp.array
    collisions: wp.array
    overflow: wp.array
    goal_tally: wp.array
    overflow_tally: wp.array
    cell_hashes: tuple | None = None

    @classmethod
    def zeros(cls, n_envs: int, n_agents: int, scalar: type, device) -> NavigationArrays:
        """Zeroed arrays for ``n_envs`` envs of ``n_agents`` agents in precision ``scalar``."""
        E, A = n_envs, n_agents
        return cls(
            goals=wp.zeros((E, A), dtype=vec2_type(scalar), device=device),
            prev_dist=wp.zeros((E, A), dtype=scalar, device=device),
            progress=wp.zeros((E, A), dtype=scalar, device=device),
            dist=wp.zeros((E, A), dtype=scalar, device=device),
            on_goal=wp.zeros((E, A), dtype=wp.bool, device=device),
            collisions=wp.zeros((E, A), dtype=wp.int32, device=device),
            overflow=wp.zeros(E, dtype=wp.bool, device=device),
            goal_tally=wp.zeros(E, dtype=wp.int32, device=device),
            overflow_tally=wp.zeros(E, dtype=wp.int32, device=device),
        )


class NavigationScenario(FusedScenario):
    """Agents reach their own goals; see the module docstring for the observation and reward."""

    name = "navigation"
    Config = NavigationConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True
    saves_final_obs = True
    #: The ``navigation_step_end.NavigationStepEnd`` hooks (``step_end_hooks``), or ``None``.
    step_end = None

    def make_world(self) -> WorldSpec:
        c = self.cfg
        n_cells = c.n_agents + c.n_obstacles
        spec = arena.arena_world(
            self, n_cells, model=c.model, max_neighbors=c.list_width, n_obstacle_slots=c.n_obstacles
        )
        # An obstacle fills its cell but a clearance of one agent radius less than a spawn keeps.
        self.obstacle_extent = c.world_size / self.side - (self.clearance - c.agent_radius)
        return replace(spec, alive_mask=self.masked)

    @property
    def masked(self) -> bool:
        """Whether this navigation keeps an alive mask (``NavigationConfig.alive_mask``)."""
        return bool(getattr(self.cfg, "alive_mask", False))

    @property
    def min_agents(self) -> int:
        """The fewest agents an env draws at reset (all of them without ``n_agents=(lo, hi)``)."""
        low = getattr(self.cfg, "min_agents", None)
        return self.cfg.n_agents if low is None else low

    @property
    def obs_dim(self) -> int:
        return 8 + 5 * self.cfg.obs_neighbors

    @property
    def goal_radius(self) -> float:
        return self.cfg.goal_radius if self.cfg.goal_radius is not None else self.cfg.agent_radius

    def bind(self, env) -> None:
        super().bind(env)
        E, A, dev, scalar = self.n_envs, self.n_agents, self.device, env.stepper.scalar
        #: The Warp arrays of the kernels (``NavigationArrays``).
        self.arrays = NavigationArrays.zeros(E, A, scalar, dev)
        self.goals = wp.to_torch(self.arrays.goals)
        self.prev_dist = wp.to_torch(self.arrays.prev_dist)
        # The reset's lookup tables, made here, outside any capture (variants with their own reset
        # and no spawn grid, like give_way, need none).
        self.arrays.cell_hashes = navigation_reset.cell_hashes(self) if hasattr(self, "side") else None
        if self.masked:
            #: [E, A] bool, the world's alive mask (``env.alive``), and which agents acted in the
            #: last step (the torch reference's memory between its methods).
            self.alive = env.alive
            self.acting = torch.ones_like(self.alive)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        buffers = {
            "dist_to_goal": wp.to_torch(self.arrays.dist),
            "on_goal": wp.to_torch(self.arrays.on_goal),
            "collisions": wp.to_torch(self.arrays.collisions),
            "neighbor_overflow": wp.to_torch(self.arrays.overflow),
        }
        if self.masked:
            buffers["alive"] = self.alive
        return buffers

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = {"goals": self.goals, "prev_dist": self.prev_dist}
        if self.masked:
            tensors["alive"] = self.alive
        return tensors

    def drawables(self, env_index: torch.Tensor) -> list:
        """Each agent's goal: a ring of radius ``goal_radius`` and a cross, in the agent's color."""
        goals = self.goals.index_select(0, env_index)
        alive = None if self.env.alive is None else self.env.alive.index_select(0, env_index)  # gone: no goal
        return [
            Circles(goals, self.goal_radius, width_px=GOAL_RING_PX, mask=alive),
            Crosses(goals, 0.5 * self.goal_radius, mask=alive),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """Go to goal: velocity ``SEEK_GAIN * (goal - position)`` (holonomic agents only)."""
        return arena.track_velocity(self.env, SEEK_GAIN * (self.goals - self.env.state.pos))

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        c, E, A, n_obs = self.cfg, self.n_envs, self.n_agents, self.cfg.n_obstacles
        dtype, dev = self.dtype, self.goals.device
        n_cells = self.side * self.side
        key = self.env.rng_keys().view(E, 1)
        # Obstacles take the cells of smallest obstacle key; agent i spawns in the free cell of i-th
        # smallest spawn key and aims at the free cell of i-th smallest goal key.
        obstacle_cells = smallest_cells_torch(cell_keys_torch(key, DRAW_OBSTACLE_CELLS, n_cells), n_obs)
        free = torch.ones(E, n_cells, dtype=torch.bool, device=dev).scatter_(1, obstacle_cells, False)
        spawn_cells = smallest_cells_torch(cell_keys_torch(key, DRAW_SPAWN_CELLS, n_cells), A, free)
        goal_cells = smallest_cells_torch(cell_keys_torch(key, DRAW_GOAL_CELLS, n_cells), A, free)
        agents = torch.arange(A, device=dev).view(1, A)
        spawn = cell_point_torch(
            spawn_cells, self.side, c.world_size, self.jitter, key, DRAW_SPAWN_JITTER + 2 * agents, dtype
        )
        if n_obs:
            self._reset_obstacles_torch(env_mask, obstacle_cells, key)
        goals = cell_point_torch(
            goal_cells, self.side, c.world_size, self.jitter, key, DRAW_GOAL_JITTER + 2 * agents, dtype
        )
        arena.spawn_agents_torch(self, env_mask, spawn, heading_draw=DRAW_HEADING)
        m2, m3 = env_mask.view(E, 1), env_mask.view(E, 1, 1)
        self.goals.copy_(torch.where(m3, goals, self.goals))
        dist = (goals - spawn).square().sum(-1).sqrt()
        self.prev_dist.copy_(torch.where(m2, dist, self.prev_dist))
        if self.masked:
            present = agents < agent_counts_torch(key.view(E), self.min_agents, A).view(E, 1)
            self.alive.copy_(torch.where(m2, present, self.alive))
            self.acting.copy_(torch.where(m2, present, self.acting))

    def _reset_obstacles_torch(self, env_mask: torch.Tensor, cells: torch.Tensor, key: torch.Tensor) -> None:
        c, dtype = self.cfg, self.dtype
        n_obs = c.n_obstacles
        slots = torch.arange(n_obs, device=cells.device).view(1, n_obs)
        draw = DRAW_OBSTACLE + 4 * slots
        u_shape = uniform_torch(key, draw, dtype)
        u_a = uniform_torch(key, draw + 1, dtype)
        u_b = uniform_torch(key, draw + 2, dtype)
        u_angle = uniform_torch(key, draw + 3, dtype)
        if c.obstacle_shape == "mixed":
            is_circle = u_shape < 0.5
        else:
            is_circle = torch.full_like(u_shape, c.obstacle_shape == "circle", dtype=torch.bool)
        extent = self.obstacle_extent
        box_extent = extent / math.sqrt(2.0)
        circle_size = torch.stack([extent * (0.5 + 0.5 * u_a), torch.zeros_like(u_a)], -1)
        box_size = torch.stack([box_extent * (0.5 + 0.5 * u_a), box_extent * (0.5 + 0.5 * u_b)], -1)
        size = torch.where(is_circle.unsqueeze(-1), circle_size, box_size)
        center = cell_point_torch(cells, self.side, c.world_size, 0.0, key, draw, dtype)
        angle = torch.where(is_circle, torch.zeros_like(u_angle), (u_angle * 2.0 - 1.0) * math.pi)
        shape = torch.where(is_circle, int(ObstacleShape.CIRCLE), int(ObstacleShape.BOX)).to(torch.int32)
        obstacles = self.world.model.obstacle_tensors()
        first = self.world.model.first_free_obstacle
        m2 = env_mask.view(-1, 1)
        m3 = env_mask.view(-1, 1, 1)
        view = slice(first, first + n_obs)
        obstacles["shape"][:, view] = torch.where(m2, shape, obstacles["shape"][:, view])
        obstacles["center"][:, view] = torch.where(m3, center, obstacles["center"][:, view])
        obstacles["angle"][:, view] = torch.where(m2, angle, obstacles["angle"][:, view])
        obstacles["size"][:, view] = torch.where(m3, size, obstacles["size"][:, view])

    def observations(self) -> torch.Tensor:
        c, state = self.cfg, self.env.state
        heading = [torch.cos(state.theta).unsqueeze(-1), torch.sin(state.theta).unsqueeze(-1)]
        parts = [state.pos, state.vel, *heading, self.goals - state.pos]
        if c.obs_neighbors:
            delta, d2 = arena.pairwise(state.pos)
            d2 = self._pairs_of(d2, self.alive if self.masked else None)
            parts.append(arena.neighbor_features(state.pos, state.vel, d2, delta, c.obs_neighbors, c.obs_range))
        obs = torch.cat(parts, dim=-1)
        if self.masked:  # a copy of the mask: autograd keeps it, and rewards() writes the mask
            return torch.where(self.alive.clone().unsqueeze(-1), obs, torch.zeros_like(obs))
        return obs

    @staticmethod
    def _pairs_of(d2: torch.Tensor, alive: torch.Tensor | None) -> torch.Tensor:
        """``d2`` [E, A, A] with the pairs of a dead agent (``alive`` [E, A]) out of every range."""
        if alive is None:
            return d2
        both = alive.unsqueeze(-1) & alive.unsqueeze(-2)
        return torch.where(both, d2, torch.full_like(d2, math.inf))

    def _distances(self) -> torch.Tensor:
        return (self.goals - self.env.state.pos).square().sum(-1).sqrt()

    def _collisions_torch(self) -> torch.Tensor:
        _, d2 = arena.pairwise(self.env.state.pos)
        d2 = self._pairs_of(d2, self.acting if self.masked else None)
        radius = self.env.agent_params[..., PARAM_RADIUS]  # [E_p, A]: per-env radii when randomized
        eye = torch.eye(self.n_agents, dtype=torch.bool, device=d2.device)
        reach = radius.unsqueeze(-1) + radius.unsqueeze(-2)
        return ((d2 < reach * reach) & ~eye).sum(-1).to(torch.int32)

    def rewards(self) -> torch.Tensor:
        c = self.cfg
        if self.masked:
            return self._masked_rewards()
        progress = self._step_progress()
        if c.shared_reward:
            progress = progress.mean(dim=1, keepdim=True).expand_as(progress)
        reward = c.shaping_factor * progress - c.collision_penalty * self._collisions_torch().to(self.dtype)
        return reward + c.final_reward * self.done().to(self.dtype).unsqueeze(1)

    def _step_progress(self) -> torch.Tensor:
        """[E, A] each agent's progress this step [m] (``prev_dist - dist``), updating ``prev_dist``."""
        dist = self._distances()
        progress = self.prev_dist - dist
        # Memory, not part of this step's differentiable output (a grad-mode step must not leave
        # autograd history in persistent buffers).
        self.prev_dist.copy_(dist.detach())
        return progress

    def _masked_rewards(self) -> torch.Tensor:
        """``rewards`` with the alive mask: the agents that act this step (``acting``) earn, the
        bonus is theirs where every one of them is on goal; with ``leave_on_goal`` it is each one's
        on its own arrival, and those on goal leave (``alive``)."""
        c = self.cfg
        acting = self.alive.clone()  # autograd keeps it: the mask buffers change below
        self.acting.copy_(acting)
        progress = self._step_progress()
        on_goal = (self._distances() < self.goal_radius) & acting
        reward = c.shaping_factor * progress - c.collision_penalty * self._collisions_torch().to(self.dtype)
        if c.leave_on_goal:  # an agent's own arrival: a bonus at the env's finish would pay waiting
            bonus = on_goal
            self.alive.copy_(acting & ~on_goal.detach())
        else:
            bonus = (on_goal | ~acting).all(dim=1, keepdim=True)
        reward = reward + c.final_reward * bonus.to(self.dtype)
        return torch.where(acting, reward, torch.zeros_like(reward))

    def done(self) -> torch.Tensor:
        on_goal = self._distances() < self.goal_radius
        if self.masked:  # absent and departed agents count as arrived
            on_goal = on_goal | ~self.alive
        return on_goal.all(dim=1)

    def info(self) -> dict[str, torch.Tensor]:
        dist = self._distances()
        info = {
            "dist_to_goal": dist,
            "on_goal": dist < self.goal_radius,
            "collisions": self._collisions_torch(),
            "neighbor_overflow": arena.contact_overflow(self.world),
        }
        if self.masked:
            acting = self.acting
            info["dist_to_goal"] = torch.where(acting, dist, torch.zeros_like(dist))
            info["on_goal"] = info["on_goal"] & acting
            info["collisions"] = torch.where(acting, info["collisions"], torch.zeros_like(info["collisions"]))
            info["alive"] = self.alive
        return info

    # --- fused twin -----------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        nk.launch_observe(self, launcher, env_mask, mode)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        navigation_reset.launch_reset(self, launcher, env_mask)

    def observes_like_navigation(self) -> bool:
        """Whether this scenario's fused observation is navigation's alone (a variant that adds
        columns or reward terms between observe and finish returns False: its steps end split)."""
        return type(self).launch_observe is NavigationScenario.launch_observe

    def step_end_hooks(self, spec: WorldSpec) -> NavigationStepEnd:
        # A variant that replaces the observation (drone_navigation's columns) ends its steps
        # split; one that replaces the reset (give_way) does not prepare starts ahead.
        cls = type(self)
        fuses = self.observes_like_navigation()
        own_reset = cls.launch_reset is NavigationScenario.launch_reset
        planar = all(a.model != DynamicsModel.DRONE for a in spec.agents)
        prepares = fuses and own_reset and planar and self.cfg.n_obstacles == 0
        self.step_end = NavigationStepEnd(self, fuses, prepares)
        return self.step_end


register_scenario("navigation", NavigationScenario)


def scripted_actions(env, gain: float = 2.0) -> torch.Tensor:
    """Scripted controller: each agent commands a velocity toward its own goal (``gain`` x the goal
    offset of observation columns 6:8), clipped to the action box; it ignores the other agents.

    Args:
        env: A navigation ``Environment`` (holonomic velocity control, the default).

    Returns:
        [E, A, 2] velocity commands [m/s] of the env's dtype and device.
    """
    low, high = (bound[:, : env.stepper.act_dim] for bound in env.action_bounds)  # messages follow
    return torch.clamp(gain * env.obs[..., 6:8], low, high)
