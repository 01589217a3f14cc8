"""Shared fixtures of the rendering tests: a tiny torch-only scenario with one obstacle of every
shape (not registered, so it never shows up in ``swarp.scenario_names()``), pixel helpers, and the
``gpu`` marker's skip."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

import swarp
from swarp import AgentConfig, Obstacle, WorldConfig
from swarp.render.frame import PALETTE
from swarp.scenarios.framework.base import Scenario, WorldSpec

#: The static obstacles of ``ShapesScenario``: world frame [m], angles [rad].
CIRCLE = Obstacle.circle((-0.5, 0.5), 0.15)
BOX = Obstacle.box((0.45, 0.45), (0.25, 0.08), angle=0.6)
CAPSULE = Obstacle.segment((-0.6, -0.55), (0.5, -0.35), thickness=0.04)
SHAPES = (CIRCLE, BOX, CAPSULE)


@dataclass(frozen=True)
class ShapesConfig:
    """Options of ``ShapesScenario``: agent count and whether the arena is bounded."""

    n_agents: int = 3
    bounded: bool = True


class ShapesScenario(Scenario):
    """Agents on a row at y = 0.1 * env (clear of every obstacle), headings 0.7 * agent [rad]."""

    name = "render-shapes"
    Config = ShapesConfig

    def make_world(self) -> WorldSpec:
        world = WorldConfig(bounds=1.0 if self.cfg.bounded else None, obstacles=SHAPES)
        return WorldSpec(agents=(AgentConfig(radius=0.05),) * self.cfg.n_agents, world=world, max_steps=50)

    @property
    def obs_dim(self) -> int:
        return 2

    def reset_world(self, env_mask: torch.Tensor) -> None:
        state = self.env.state
        agents = torch.arange(self.n_agents, dtype=self.dtype)
        envs = torch.arange(self.n_envs, dtype=self.dtype)
        x = (-0.6 + 0.4 * agents).view(1, -1).expand(self.n_envs, -1)
        y = (0.1 * envs).view(-1, 1).expand(-1, self.n_agents)
        pos = torch.stack([x, y], dim=-1).to(state.pos.device)
        mask = env_mask.view(-1, 1, 1)
        state.pos.copy_(torch.where(mask, pos, state.pos))
        state.theta.copy_(torch.where(env_mask.view(-1, 1), 0.7 * agents.to(state.pos.device), state.theta))
        state.vel.masked_fill_(mask, 0.0)

    def observations(self) -> torch.Tensor:
        return self.env.state.pos.clone()

    def rewards(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, self.n_agents, dtype=self.dtype, device=self.env.state.pos.device)

    def done(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.env.state.pos.device)


def make_shapes_env(n_envs: int = 3, **options) -> swarp.Environment:
    """A CPU ``Environment`` of ``ShapesScenario`` (torch path)."""
    return swarp.Environment(ShapesScenario(**options), n_envs=n_envs, device="cpu", seed=0)


def agent_color(agent: int) -> np.ndarray:
    """The palette color of agent ``agent`` (RGB uint8)."""
    return np.array(PALETTE[agent % len(PALETTE)], dtype=np.uint8)


def pixel(image: np.ndarray, point_px) -> np.ndarray:
    """The RGB value of the pixel containing the continuous pixel coordinate ``(x, y)``."""
    x, y = (int(math.floor(c)) for c in point_px)
    return image[y, x]


def separated(pos: np.ndarray, radius: float, slack: float) -> np.ndarray:
    """[A] bool: agents whose disc is at least ``slack`` [m] clear of every other agent's disc."""
    distance = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    np.fill_diagonal(distance, np.inf)
    return distance.min(axis=1) > 2 * radius + slack
