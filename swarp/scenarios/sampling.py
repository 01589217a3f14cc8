"""Sampling: agents collect samples from a scalar field that is a sum of random Gaussians (torch reference).

Every env holds its own field on a ``G x G`` grid over the arena ``[-L, L]^2`` (``G = grid_cells``,
cell width ``w = 2 L / G``): cell ``c = iy * G + ix`` starts with the value at its centre of
``sum_g a_g exp(-|x - mu_g|^2 / (2 sigma_g^2))`` over ``n_gaussians`` Gaussians with centres
uniform in the arena, widths uniform in ``[sigma_min, sigma_max]`` and amplitudes uniform in
``[0.5, 1]``, evaluated in float64 and rounded once per cell (so both twins get the same bits).
An agent's cell is ``floor((p + L) / w)`` per axis, clamped to the grid (an agent
pushed past the soft walls samples the edge cell).

**Consumption.** At every step (and at the reset, for the spawn cells) each cell under an agent is
consumed: its value goes to zero. When several agents share a cell, the one of lowest index
collects it, so the result does not depend on thread order.

Observation of agent i (``obs_dim = 4 + (2 P + 1)^2`` with ``P = patch_radius``):

=========  ============  =========================================================================
slice      size          content
=========  ============  =========================================================================
0:2        2             own position [m]
2:4        2             own velocity [m/s]
4:         (2P+1)^2      remaining field values of the cells around the agent's cell, rows
                         ``dy = -P..P`` (outer) by columns ``dx = -P..P``; 0 outside the grid and
                         for cells consumed this step (any agent's cell), i.e. what is left to take
=========  ============  =========================================================================

Reward: the values an agent collected this step (own), or with ``shared_reward`` (default) the
sum collected by all agents, given to every agent. No terminal state: episodes truncate at
``max_steps``. Info: ``collected_fraction`` [E], the share of the episode's initial field mass
collected so far; ``success`` [E] bool, ``collected_fraction >= success_fraction`` (the success
metric, also ``success()``).

Resets spawn agents in a uniform random subset of jittered grid cells (``arena.spawn_torch`` over
``spawn.py``) and draw Gaussian g from per-env draws ``4 g .. 4 g + 3`` (``arena.DRAW_ENV``).
The Warp twin is ``sampling_kernels.py``; ``greedy_actions`` is a scripted controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import warp as wp

from swarp.runtime.launch import Launcher
from swarp.scenarios import sampling_kernels as smk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_ONLY, OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles
from swarp.scenarios.framework.options import ArenaWorldConfig

#: Largest patch radius: the patch's occupancy bits live in one int32.
MAX_PATCH_RADIUS = 2
#: Field dots drawn by the renderer: color (RGB) and the largest dot radius, as a share of a cell width.
FIELD_COLOR = (235, 170, 70)
FIELD_DOT_SCALE = 0.45


@dataclass(frozen=True)
class SamplingConfig(ArenaWorldConfig):
    """Options of the sampling scenario (SI units).

    The world's options are ``ArenaWorldConfig``'s (at most 256 agents; holonomic agents with
    velocity control); defaults here: max_steps=100.

    Attributes:
        grid_cells: Field cells per side G.
        n_gaussians: Gaussians summed into each env's field.
        sigma_min: Smallest Gaussian width [m].
        sigma_max: Largest Gaussian width [m] (>= sigma_min).
        patch_radius: P: the observation holds the (2P+1)^2 cells around the agent's cell (0..2).
        shared_reward: Every agent gets the sum collected by all agents (else its own samples).
        success_fraction: Share of the field mass to collect for success, in (0, 1].
    """

    scenario_name: ClassVar[str] = "sampling"
    #: What ``arena.arena_world`` reads (fixed for this task): velocity control, the automatic spawn grid.
    ctrl_mode: ClassVar[str] = "velocity"
    spawn_cells: ClassVar[None] = None

    max_steps: int = 100
    grid_cells: int = 20
    n_gaussians: int = 3
    sigma_min: float = 0.1
    sigma_max: float = 0.3
    patch_radius: int = 1
    shared_reward: bool = True
    success_fraction: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.checker()
        check.int("grid_cells", 1, 256)
        check.int("n_gaussians", 1, 64)
        check.int("patch_radius", 0, MAX_PATCH_RADIUS)
        for name in ("sigma_min", "sigma_max"):
            check.number(name)
        check.number("success_fraction", high=1.0)
        check.bool("shared_reward")
        if self.sigma_max < self.sigma_min:
            raise ValueError(f"sampling option sigma_max ({self.sigma_max}) must be >= sigma_min ({self.sigma_min})")


class SamplingScenario(FusedScenario):
    """Agents collect a Gaussian-sum field cell by cell; see the module docstring."""

    name = "sampling"
    Config = SamplingConfig
    builds_neighbors = True
    ends_steps = True
    checks_finite = True

    def make_world(self) -> WorldSpec:
        self.cell_width = 2.0 * self.cfg.world_size / self.cfg.grid_cells
        return arena.arena_world(self, self.cfg.n_agents, contacts_only=True)

    @property
    def obs_dim(self) -> int:
        return 4 + (2 * self.cfg.patch_radius + 1) ** 2

    @property
    def inv_cell_width(self) -> float:
        """1 / w [1/m], the factor from arena coordinates to cell coordinates."""
        return self.cfg.grid_cells / (2.0 * self.cfg.world_size)

    def bind(self, env) -> None:
        super().bind(env)
        E, dev, scalar, G = self.n_envs, self.device, env.stepper.scalar, self.cfg.grid_cells
        self._field = wp.zeros((E, G * G), dtype=scalar, device=dev)
        self._row_mass = wp.zeros((E, G), dtype=scalar, device=dev)
        self._collected = wp.zeros(E, dtype=scalar, device=dev)
        self._samples = wp.zeros((E, self.n_agents), dtype=scalar, device=dev)
        self._fraction = wp.zeros(E, dtype=scalar, device=dev)
        self._success = wp.zeros(E, dtype=wp.bool, device=dev)
        self.field = wp.to_torch(self._field)
        self.row_mass = wp.to_torch(self._row_mass)
        self.collected = wp.to_torch(self._collected)
        centers = (torch.arange(G, dtype=self.dtype, device=self.field.device) + 0.5) * self.cell_width
        centers = centers - self.cfg.world_size
        self.cell_centers = torch.stack(torch.meshgrid(centers, centers, indexing="xy"), -1).view(G * G, 2)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return {"collected_fraction": wp.to_torch(self._fraction), "success": wp.to_torch(self._success)}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"field": self.field, "row_mass": self.row_mass, "collected": self.collected}

    def drawables(self, env_index: torch.Tensor) -> list:
        """The remaining field: one dot per cell, its radius growing with the square root of the
        cell's value relative to the env's largest remaining value."""
        field = self.field.index_select(0, env_index)
        peak = field.amax(dim=1, keepdim=True)
        scale = (field / peak.clamp(min=1e-12)).clamp(0.0, 1.0).sqrt()
        centers = self.cell_centers.unsqueeze(0).expand(field.shape[0], -1, -1)
        radius = FIELD_DOT_SCALE * self.cell_width * scale
        return [Circles(centers, radius, color=FIELD_COLOR, mask=field > 0)]

    # --- torch reference --------------------------------------------------------------------

    def _initial_field(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(field [E, G*G], row_mass [E, G])`` of the episodes starting now.

        Evaluated in float64 and rounded once per cell (and per row sum), like the kernel."""
        c, f64 = self.cfg, torch.float64
        # [E, n_gaussians, 4]: Gaussian g takes per-env draws 4 g .. 4 g + 3 (mu_x, mu_y, sigma, amplitude).
        draws = torch.cat(arena.env_draws_torch(self, 4 * c.n_gaussians, f64), -1).view(self.n_envs, -1, 4)
        mu_x = (draws[..., 0] * 2.0 - 1.0) * c.world_size
        mu_y = (draws[..., 1] * 2.0 - 1.0) * c.world_size
        sigma = c.sigma_min + draws[..., 2] * (c.sigma_max - c.sigma_min)
        amplitude = 0.5 + 0.5 * draws[..., 3]
        inv_two_var = 0.5 / (sigma * sigma)
        centers = (torch.arange(c.grid_cells, dtype=f64, device=draws.device) + 0.5) * self.cell_width - c.world_size
        centers = torch.stack(torch.meshgrid(centers, centers, indexing="xy"), -1).view(-1, 2)
        dx = centers[:, 0].view(1, -1, 1) - mu_x.unsqueeze(1)  # [E, C, n_gaussians]
        dy = centers[:, 1].view(1, -1, 1) - mu_y.unsqueeze(1)
        terms = amplitude.unsqueeze(1) * torch.exp(-(dx * dx + dy * dy) * inv_two_var.unsqueeze(1))
        field = terms.sum(-1).to(self.dtype)
        row_mass = field.to(f64).view(-1, c.grid_cells, c.grid_cells).sum(-1).to(self.dtype)
        return field, row_mass

    def _cells(self) -> torch.Tensor:
        """[E, A] int64 index of each agent's field cell."""
        G = self.cfg.grid_cells
        scale = torch.full((), self.inv_cell_width, dtype=self.dtype, device=self.field.device)
        world_size = torch.full((), self.cfg.world_size, dtype=self.dtype, device=self.field.device)
        ij = torch.floor((self.env.state.pos + world_size) * scale).long().clamp(0, G - 1)
        return ij[..., 1] * G + ij[..., 0]

    def reset_world(self, env_mask: torch.Tensor) -> None:
        arena.spawn_torch(self, env_mask, self.n_agents)
        field, row_mass = self._initial_field()
        m2 = env_mask.view(self.n_envs, 1)
        self.row_mass.copy_(torch.where(m2, row_mass, self.row_mass))
        # The spawn cells are consumed without reward: an episode starts with what is left to take.
        field = field.scatter(1, self._cells(), 0.0)
        self.field.copy_(torch.where(m2, field, self.field))
        self.collected.masked_fill_(env_mask, 0.0)

    def observations(self) -> torch.Tensor:
        c, E, A = self.cfg, self.n_envs, self.n_agents
        G, P = c.grid_cells, c.patch_radius
        cells = self._cells()
        remaining = self.field.scatter(1, cells, 0.0)  # this step's cells are taken
        padded = torch.nn.functional.pad(remaining.view(E, G, G), (P, P, P, P))
        offsets = torch.arange(-P, P + 1, device=cells.device)
        iy = (cells // G).view(E, A, 1, 1) + offsets.view(1, 1, -1, 1) + P
        ix = (cells % G).view(E, A, 1, 1) + offsets.view(1, 1, 1, -1) + P
        patch = padded.view(E, -1).gather(1, (iy * (G + 2 * P) + ix).view(E, -1)).view(E, A, -1)
        return torch.cat([self.env.state.pos, self.env.state.vel, patch], dim=-1)

    def rewards(self) -> torch.Tensor:
        cells = self._cells()
        A = self.n_agents
        same = cells.unsqueeze(2) == cells.unsqueeze(1)  # [E, a, j]
        earlier = torch.ones(A, A, dtype=torch.bool, device=cells.device).tril(-1)
        owner = ~(same & earlier).any(dim=2)
        samples = self.field.gather(1, cells) * owner.to(self.dtype)
        self.field.scatter_(1, cells, 0.0)
        total = samples.sum(dim=1, keepdim=True)
        self.collected.add_(total.squeeze(1))
        return total.expand(-1, A).clone() if self.cfg.shared_reward else samples

    def done(self) -> torch.Tensor:
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.field.device)

    def _collected_fraction(self) -> torch.Tensor:
        return self.collected / self.row_mass.sum(dim=1)

    def info(self) -> dict[str, torch.Tensor]:
        fraction = self._collected_fraction()
        return {"collected_fraction": fraction, "success": fraction >= self.cfg.success_fraction}

    def success(self) -> torch.Tensor:
        """[E] bool: at least ``success_fraction`` of the episode's field mass collected."""
        return self._collected_fraction() >= self.cfg.success_fraction

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``greedy_actions``) for the current state."""
        return greedy_actions(self.env)

    # --- fused twin -------------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """``sampling_observe`` then ``sampling_finish`` (the latter not after an auto-reset, whose
        step rewards and info must survive).

        The world's grid binning (``World.prepare_neighbors``) must have run: ``sampling_observe``
        builds the neighbor list of every agent it observes.
        """
        env, world, c, b = self.env, self.world, self.cfg, self.buffers
        stepper = env.stepper
        s = stepper.scalar
        observe = smk.observe_kernel(
            s, stepper.world.max_neighbors, stepper.neighbor_method == "grid", self.plan.register_lists, c.patch_radius
        )
        args = arena.fill(
            observe.ObserveArgs(),
            pos=world.state.pos, vel=world.state.vel, nq=world.neighbor_query(), world_size=s(c.world_size),
            inv_cell=s(self.inv_cell_width), grid_cells=c.grid_cells, obs_out=b.obs, field=self._field,
            samples_out=self._samples, non_finite_out=b.non_finite,
        )  # fmt: skip
        mask = env_mask if env_mask is not None else b.no_mask
        use_mask = int(env_mask is not None)
        per_thread, threads = self.plan.split(self.n_agents)
        launcher.launch(
            observe.sampling_observe,
            dim=(self.n_envs, threads),
            inputs=[args, mask, use_mask, int(mode), per_thread],
            device=env.device,
        )
        if mode != OBSERVE_ONLY:
            launcher.launch(
                smk.finish_kernel(s, self.n_agents),
                dim=self.n_envs,
                inputs=[
                    self._samples, self._row_mass, int(c.shared_reward), s(c.success_fraction), b.episode_args,
                    int(mode), mask, use_mask,
                ],
                outputs=[self._collected, b.reward, self._fraction, self._success],
                device=env.device,
                block_dim=self.plan.env_block,
            )  # fmt: skip

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``sampling_reset``: one slot per field row or spawn cell, whichever are more."""
        c = self.cfg
        n_slots = max(c.grid_cells, self.side * self.side)
        sigmas = [wp.float64(c.sigma_min), wp.float64(c.sigma_max - c.sigma_min)]
        inputs = [wp.float64(c.world_size), wp.float64(self.cell_width), *sigmas, n_slots]
        outputs = [self._field, self._row_mass, self._collected]
        reset = smk.reset_kernel(self.env.stepper.scalar, c.n_gaussians)
        arena.launch_reset(self, launcher, reset, env_mask, inputs, outputs, slots=n_slots)


#: Distance scale [m] of the greedy controller's preference for near cells.
GREEDY_DECAY = 0.3


def greedy_actions(env) -> torch.Tensor:
    """Scripted controller: each agent heads at full speed for the remaining cell with the best
    value discounted by distance, ``value * exp(-distance / GREEDY_DECAY)`` (it sees the whole field).

    Args:
        env: A sampling ``Environment``.

    Returns:
        [E, A, 2] velocity commands [m/s] of the env's dtype and device.
    """
    sc: SamplingScenario = env.scenario
    pos = env.state.pos
    distance = (sc.cell_centers.view(1, 1, -1, 2) - pos.unsqueeze(2)).norm(dim=-1)  # [E, A, C]
    score = sc.field.unsqueeze(1) * torch.exp(-distance / GREEDY_DECAY)
    target = sc.cell_centers[score.argmax(dim=2)]
    return arena.seek_velocity(target, pos, env.stepper.dt, sc.cfg.max_speed)


register_scenario("sampling", SamplingScenario)
