"""Fleet resets shared by the spread, sampling and give-way scenarios: Warp functions and torch twins.

A reset places agent ``a`` at a point with a uniform heading and zero velocity. ``grid_spawn``
picks the points as ``spawn.py``'s uniform random subset of jittered grid cells: the agent of
rank ``a`` among the cells' keys takes that cell. Draw indices are fixed here, in blocks of
``DRAW_BLOCK``; scenarios draw their own quantities from ``FIRST_FREE_DRAW`` on.
"""

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.core.precision import vec2_type
from swarp.scenarios import spawn
from swarp.scenarios.base import WorldSpec

DRAW_BLOCK = 1 << 12
DRAW_SPAWN_CELLS = wp.constant(0)
DRAW_SPAWN_JITTER = wp.constant(1 * DRAW_BLOCK)  # two draws per agent
DRAW_HEADING = wp.constant(3 * DRAW_BLOCK)
#: First draw index a scenario may use for its own quantities.
FIRST_FREE_DRAW = 4 * DRAW_BLOCK
#: Spawn clearance from a cell edge, as a multiple of the agent radius.
CLEARANCE_FACTOR = 1.25


@dataclass(frozen=True)
class SpawnGrid:
    """The spawn grid of ``n_agents`` agents of radius ``agent_radius`` [m] in ``[-L, L]^2``.

    Attributes:
        side: Cells per side (``spawn.cells_per_side``; raises a clear error when they do not fit).
        world_size: L [m].
        jitter: Largest offset [m] of a spawn from its cell centre, per axis.
    """

    side: int
    world_size: float
    jitter: float

    @classmethod
    def build(cls, world_size: float, agent_radius: float, n_agents: int) -> "SpawnGrid":
        clearance = CLEARANCE_FACTOR * agent_radius
        side = spawn.cells_per_side(world_size, clearance, n_agents)
        return cls(side, world_size, world_size / side - clearance)

    @property
    def n_cells(self) -> int:
        return self.side * self.side


@functools.cache
def funcs(scalar: type) -> SimpleNamespace:
    """Warp functions for one precision."""
    vec2 = vec2_type(scalar)
    sp = spawn.funcs(scalar)
    zero = scalar(0.0)
    one = scalar(1.0)
    two = scalar(2.0)
    pi = scalar(math.pi)

    @wp.func
    def place_agent(
        key: wp.uint32,
        env: int,
        agent: int,
        p: vec2,
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
    ):
        """Put ``agent`` at ``p`` at rest, with its uniform heading in [-pi, pi)."""
        pos_out[env, agent] = p
        theta_out[env, agent] = (sp.uniform(key, DRAW_HEADING + agent) * two - one) * pi
        vel_out[env, agent] = vec2(zero, zero)
        speed_out[env, agent] = zero
        ang_vel_out[env, agent] = zero

    @wp.func
    def grid_spawn(
        key: wp.uint32,
        env: int,
        cell: int,
        side: int,
        world_size: scalar,
        jitter: scalar,
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
    ):
        """Place the agent whose rank among the spawn keys is this ``cell``'s, if there is one."""
        rank = sp.cell_rank(key, DRAW_SPAWN_CELLS, side * side, cell)
        if rank < pos_out.shape[1]:
            p = sp.cell_point(cell, side, world_size, jitter, key, DRAW_SPAWN_JITTER + 2 * rank)
            place_agent(key, env, rank, p, pos_out, theta_out, vel_out, speed_out, ang_vel_out)

    return SimpleNamespace(place_agent=place_agent, grid_spawn=grid_spawn)


def open_arena(cfg) -> tuple[WorldSpec, SpawnGrid]:
    """The world of a fleet of ``cfg.n_agents`` holonomic, velocity-controlled agents in the square
    arena ``[-cfg.world_size, cfg.world_size]^2`` with soft walls, and its spawn grid.

    ``cfg`` provides ``n_agents``, ``world_size`` [m], ``agent_radius`` [m], ``max_speed`` [m/s],
    ``max_neighbors``, ``dt`` [s], ``substeps`` and ``max_steps``. Neighbor lists use the world's
    contact radius (they serve contacts only).
    """
    agent = AgentConfig(model="holonomic", ctrl_mode="velocity", radius=cfg.agent_radius, max_speed=cfg.max_speed)
    world = WorldConfig(bounds=cfg.world_size, bounds_mode="soft", max_neighbors=cfg.max_neighbors)
    spec = WorldSpec(
        agents=(agent,) * cfg.n_agents, world=world, dt=cfg.dt, substeps=cfg.substeps, max_steps=cfg.max_steps
    )
    return spec, SpawnGrid.build(cfg.world_size, cfg.agent_radius, cfg.n_agents)


# --- torch twins ------------------------------------------------------------------------------


def headings_torch(key: torch.Tensor, n_agents: int, dtype: torch.dtype) -> torch.Tensor:
    """[E, A] headings [rad] of ``place_agent`` (``key`` [E, 1])."""
    agents = torch.arange(n_agents, device=key.device).view(1, n_agents)
    return (spawn.uniform_torch(key, int(DRAW_HEADING) + agents, dtype) * 2.0 - 1.0) * math.pi


def grid_spawn_torch(key: torch.Tensor, grid: SpawnGrid, n_agents: int, dtype: torch.dtype) -> torch.Tensor:
    """[E, A, 2] spawn points [m] of ``grid_spawn`` (``key`` [E, 1])."""
    agents = torch.arange(n_agents, device=key.device).view(1, n_agents)
    cells = spawn.smallest_cells_torch(spawn.cell_keys_torch(key, int(DRAW_SPAWN_CELLS), grid.n_cells), n_agents)
    draw = int(DRAW_SPAWN_JITTER) + 2 * agents
    return spawn.cell_point_torch(cells, grid.side, grid.world_size, grid.jitter, key, draw, dtype)


def place_agents_torch(state, env_mask: torch.Tensor, pos: torch.Tensor, key: torch.Tensor) -> None:
    """Torch twin of ``place_agent`` for every agent of the envs in ``env_mask`` [E] bool.

    Args:
        state: The env's ``TorchState`` (written in place).
        env_mask: [E] bool.
        pos: [E, A, 2] new positions [m].
        key: [E, 1] RNG keys of the new episodes.
    """
    m2, m3 = env_mask.view(-1, 1), env_mask.view(-1, 1, 1)
    heading = headings_torch(key, pos.shape[1], pos.dtype)
    state.pos.copy_(torch.where(m3, pos, state.pos))
    state.theta.copy_(torch.where(m2, heading, state.theta))
    state.vel.masked_fill_(m3, 0.0)
    state.speed.masked_fill_(m2, 0.0)
    state.ang_vel.masked_fill_(m2, 0.0)


def seek_velocity(target: torch.Tensor, pos: torch.Tensor, dt: float, max_speed: float) -> torch.Tensor:
    """[E, A, 2] velocity commands [m/s] that reach ``target`` [E, A, 2] from ``pos`` in one step of
    ``dt`` [s] when it is close enough, else head for it at ``max_speed`` [m/s] (scripted controllers).
    Each component stays inside ``[-max_speed, max_speed]`` (the action box) despite rounding."""
    velocity = (target - pos) / dt
    speed = velocity.norm(dim=-1, keepdim=True).clamp(min=1e-9)
    return (velocity * (max_speed / speed).clamp(max=1.0)).clamp(-max_speed, max_speed).contiguous()


def safe_norm(delta: torch.Tensor) -> torch.Tensor:
    """``|delta|`` over the last dim (size 2), [m]; its gradient is 0 instead of NaN where ``delta`` is 0
    (an agent exactly on its target)."""
    d2 = delta.square().sum(-1)
    positive = d2 > 0
    return torch.where(positive, torch.where(positive, d2, torch.ones_like(d2)).sqrt(), torch.zeros_like(d2))
