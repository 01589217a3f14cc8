"""Fleet: diff-drive carriers guided to a depot by holonomic scouts (torch reference).

A heterogeneous team in two agent groups (``WorldSpec.groups``), carriers first in agent order:

* ``"carriers"`` (``n_carriers``, default 3): differential-drive robots under velocity control,
  actions (forward speed [m/s] in ``[-carrier_speed, carrier_speed]``, yaw rate [rad/s] in
  ``[-carrier_turn_rate, carrier_turn_rate]``). They do **not** observe the depot.
* ``"scouts"`` (``n_scouts``, default 1): holonomic robots under velocity control, actions
  (vx, vy) [m/s] with norm up to ``scout_speed``. They observe the depot.

One depot per env (a ring of ``goal_radius``) is drawn at every reset, uniform in the square
``[-(L - goal_radius), L - goal_radius]^2``; agents spawn in random cells of the arena ``[-L, L]^2``
(soft walls) with random headings, at rest.

Observation of a carrier (``CARRIER_OBS_DIM = 9`` columns; body frame: x ahead, y to the left):

=======  ====  ================================================================================
slice    size  content
=======  ====  ================================================================================
0:2      2     heading (cos theta, sin theta)
2:4      2     own velocity, body frame [m/s]
4:6      2     nearest scout - own position, body frame [m]
6:8      2     nearest other carrier - own position, body frame [m] (zeros where there is none)
8:9      1     1 where another carrier exists, else 0
=======  ====  ================================================================================

Observation of a scout (``SCOUT_OBS_DIM = 6`` columns, world frame): own position [m] (0:2), own
velocity [m/s] (2:4), depot - own position [m] (4:6). The row store is ``OBS_DIM = 9`` wide: a
scout's row holds zeros in columns 6:9 (the environment hands each group ``obs[:, lo:hi, :W_g]``).

Reward of agent i (both groups): ``shaping_factor * (d_prev - d)``, its own progress towards the
depot [m], ``- collision_penalty * collisions_i`` (other agents overlapping it), ``+ final_reward``
for every agent on the step the last carrier arrives. Why this shaping: each agent's progress is
dense and depends on its own actions, so a PPO policy per group gets a clear per-step signal. A
scout earns it by driving to the depot and staying there (leaving it costs what arriving paid).
A carrier cannot see the depot, but once a scout holds the depot the scout's direction in the
carrier's observation *is* the depot's, so "follow the scout" is what its progress term pays for;
before the scout arrives, heading for it still closes most of the distance (the scout is between
the carriers and the depot, and twice as fast). The shared bonus ties both groups to the team's
goal; the small collision penalty keeps carriers from ramming the scout at the depot without making
the crowded depot a place to avoid (progress runs at up to 0.05 per step for a carrier).

Terminated (success) when every carrier is within ``goal_radius`` of the depot. Info:
``dist_to_depot`` [E, A] [m], ``at_depot`` [E, A] bool, ``delivered`` [E] int32 (carriers at the
depot), ``collisions`` [E, A] int32. The Warp twin is ``fleet_kernels.py``; ``scripted_actions``
is a scripted controller (scouts to the depot, carriers after the nearest scout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.core.groups import GroupSpec
from swarp.runtime.launch import Launcher
from swarp.scenarios import fleet_kernels as fk
from swarp.scenarios.fleet_kernels import CARRIER_OBS_DIM, OBS_DIM, SCOUT_OBS_DIM
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles, Crosses
from swarp.scenarios.framework.options import OptionChecker

#: Renderer: the depot's color (RGB) and ring width [px]; the ring marking each scout.
DEPOT_COLOR = (60, 60, 60)
DEPOT_RING_PX = 2.0
SCOUT_RING_COLOR = (40, 40, 40)
SCOUT_RING_PX = 1.5
#: Most agents per env.
MAX_AGENTS = 256
#: The carriers' discs may cover at most this share of the depot disc widened by an agent radius.
MAX_DEPOT_FILL = 0.5
#: Scripted controller: carriers stop this far from their scout, as a fraction of ``goal_radius``.
FOLLOW_FRACTION = 0.6
#: Scripted controller: the distance [m] over which a carrier slows to its stop, and the range
#: (in agent radii) and weight of its push away from other agents.
SLOW_DISTANCE = 0.1
SEPARATION_RADII = 3.0
SEPARATION_GAIN = 1.5


@dataclass(frozen=True)
class FleetConfig:
    """Options of the fleet scenario (SI units).

    Attributes:
        n_carriers: Carriers per env (default: 3, or ``n_agents - n_scouts`` where ``n_agents`` is given).
        n_scouts: Scouts per env (>= 1).
        n_agents: Every agent of an env (optional; generic tools pass it): sets ``n_carriers`` to
            ``n_agents - n_scouts``, or must equal ``n_carriers + n_scouts`` where both are given.
        world_size: Half-size L [m] of the arena ``[-L, L]^2`` (soft walls).
        agent_radius: Radius of every agent [m].
        carrier_speed: The carriers' forward speed limit [m/s].
        carrier_turn_rate: The carriers' yaw-rate limit [rad/s].
        scout_speed: The scouts' speed limit [m/s].
        goal_radius: A carrier is at the depot within this distance of its centre [m].
        shaping_factor: Weight of the progress term [1/m].
        collision_penalty: Penalty per overlapping other agent per step (>= 0).
        final_reward: Bonus for every agent on the step every carrier is at the depot.
        dt: Step length [s].
        substeps: Physics substeps per step.
        max_steps: Episode length [steps].
        max_neighbors: Width of the world's contact neighbor lists.
        neighbor_method: ``brute``, ``grid`` or ``auto``, as the arena scenarios'.
    """

    #: Name in option errors; what ``arena.spawn_grid`` reads (the spawn grid sized automatically).
    scenario_name: ClassVar[str] = "fleet"
    spawn_cells: ClassVar[None] = None

    n_carriers: int | None = None
    n_scouts: int = 1
    n_agents: int | None = None
    world_size: float = 1.0
    agent_radius: float = 0.05
    carrier_speed: float = 0.5
    carrier_turn_rate: float = 3.0
    scout_speed: float = 1.0
    goal_radius: float = 0.25
    shaping_factor: float = 1.0
    collision_penalty: float = 0.1
    final_reward: float = 1.0
    dt: float = 0.1
    substeps: int = 1
    max_steps: int = 100
    max_neighbors: int = 8
    neighbor_method: str = "auto"

    def __post_init__(self) -> None:
        check = OptionChecker(self, self.scenario_name)
        check.int("n_scouts", 1, MAX_AGENTS - 1)
        if self.n_carriers is not None:
            check.int("n_carriers", 1, MAX_AGENTS - 1)
        if self.n_agents is not None:
            check.int("n_agents", 2, MAX_AGENTS)
            if self.n_agents <= self.n_scouts:
                check.fail(f"n_agents ({self.n_agents}) must exceed n_scouts ({self.n_scouts}): at least one carrier")
            if self.n_carriers is not None and self.n_carriers + self.n_scouts != self.n_agents:
                check.fail(
                    f"n_agents ({self.n_agents}) must equal n_carriers + n_scouts "
                    f"({self.n_carriers} + {self.n_scouts}) where all three are given"
                )
        if self.agent_count > MAX_AGENTS:
            check.fail(f"n_carriers + n_scouts must be <= {MAX_AGENTS}, got {self.agent_count}")
        for name in ("substeps", "max_steps", "max_neighbors"):
            check.int(name, 1)
        for name in ("world_size", "agent_radius", "carrier_speed", "carrier_turn_rate", "scout_speed"):
            check.number(name)
        check.number("goal_radius")
        check.number("dt")
        for name in ("shaping_factor", "collision_penalty", "final_reward"):
            check.number(name, allow_zero=True)
        check.neighbor_method()
        if self.goal_radius + self.agent_radius >= self.world_size:
            check.fail(
                f"goal_radius + agent_radius ({self.goal_radius + self.agent_radius}) must be < world_size "
                f"({self.world_size}): the depot must fit in the arena"
            )
        room = MAX_DEPOT_FILL * (self.goal_radius + self.agent_radius) ** 2
        if self.carrier_count * self.agent_radius**2 > room:
            check.fail(
                f"goal_radius ({self.goal_radius}) is too small for {self.carrier_count} carriers of radius "
                f"{self.agent_radius}: their discs would cover more than {MAX_DEPOT_FILL:.0%} of the depot"
            )

    @property
    def carrier_count(self) -> int:
        """Carriers per env, resolved from ``n_carriers`` / ``n_agents``."""
        if self.n_carriers is not None:
            return self.n_carriers
        return self.n_agents - self.n_scouts if self.n_agents is not None else 3

    @property
    def agent_count(self) -> int:
        """Agents per env: carriers, then scouts."""
        return self.carrier_count + self.n_scouts


def body_frame(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """World-frame vectors ``x`` [..., 2] in the frame of agents heading ``(cos, sin)`` [..., 1]:
    (ahead, left), same units as ``x``."""
    return torch.cat([cos * x[..., 0:1] + sin * x[..., 1:2], cos * x[..., 1:2] - sin * x[..., 0:1]], -1)


def nearest_offsets(delta: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
    """[E, I, 2] offset to each row's nearest column (ties to the lower index) of ``delta``
    [E, I, J, 2] by the squared distances ``d2`` [E, I, J] (exclude a column with ``inf``)."""
    index = d2.argmin(dim=-1, keepdim=True).unsqueeze(-1).expand(-1, -1, -1, 2)
    return torch.gather(delta, 2, index).squeeze(2)


class FleetScenario(FusedScenario):
    """Carriers follow scouts to a depot; see the module docstring for observations and rewards."""

    name = "fleet"
    Config = FleetConfig

    def make_world(self) -> WorldSpec:
        """Carriers (diff drive) then scouts (holonomic), both velocity-controlled discs of
        ``agent_radius`` [m], in the soft-walled arena, with the two groups; sets the spawn grid."""
        c = self.cfg
        self.n_carriers, self.n_scouts = c.carrier_count, c.n_scouts
        #: Half-size [m] of the square the depot is drawn in.
        self.depot_extent = c.world_size - c.goal_radius
        arena.spawn_grid(self, c.agent_count)
        carrier = AgentConfig(model="diff_drive", ctrl_mode="velocity", radius=c.agent_radius,
                              max_speed=c.carrier_speed, max_ang_vel=c.carrier_turn_rate)  # fmt: skip
        scout = AgentConfig(model="holonomic", ctrl_mode="velocity", radius=c.agent_radius, max_speed=c.scout_speed)
        world = WorldConfig(bounds=c.world_size, bounds_mode="soft", max_neighbors=c.max_neighbors,
                            neighbor_method=c.neighbor_method)  # fmt: skip
        groups = (
            GroupSpec("carriers", self.n_carriers, CARRIER_OBS_DIM),
            GroupSpec("scouts", self.n_scouts, SCOUT_OBS_DIM),
        )
        agents = (carrier,) * self.n_carriers + (scout,) * self.n_scouts
        return WorldSpec(agents=agents, world=world, dt=c.dt, substeps=c.substeps, max_steps=c.max_steps, groups=groups)

    @property
    def obs_dim(self) -> int:
        """Width of the row store: ``OBS_DIM``, the carriers' (the widest group's)."""
        return OBS_DIM

    def bind(self, env) -> None:
        """Allocate the depot [E] vec2 [m], the reward memory and the info as Warp arrays of the
        sim precision, with torch views (``depot`` [E, 2], ``prev_dist`` [E, A])."""
        super().bind(env)
        E, A, dev, scalar = self.n_envs, self.n_agents, self.device, env.stepper.scalar
        self._depot = wp.zeros(E, dtype=wp.types.vector(2, scalar), device=dev)
        self._prev_dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._dist = wp.zeros((E, A), dtype=scalar, device=dev)
        self._at_depot = wp.zeros((E, A), dtype=wp.bool, device=dev)
        self._delivered = wp.zeros(E, dtype=wp.int32, device=dev)
        self._collisions = wp.zeros((E, A), dtype=wp.int32, device=dev)
        #: [E, 2] the depot [m]; [E, A] each agent's distance to it at the last observation [m].
        self.depot = wp.to_torch(self._depot)
        self.prev_dist = wp.to_torch(self._prev_dist)

    def info_buffers(self) -> dict[str, torch.Tensor]:
        """``dist_to_depot`` [E, A] float [m], ``at_depot`` [E, A] bool, ``delivered`` [E] int32,
        ``collisions`` [E, A] int32."""
        return {
            "dist_to_depot": wp.to_torch(self._dist),
            "at_depot": wp.to_torch(self._at_depot),
            "delivered": wp.to_torch(self._delivered),
            "collisions": wp.to_torch(self._collisions),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """``depot`` [E, 2] [m] and ``prev_dist`` [E, A] [m]."""
        return {"depot": self.depot, "prev_dist": self.prev_dist}

    def drawables(self, env_index: torch.Tensor) -> list:
        """The depot (a ring of ``goal_radius`` and a cross) and a dark ring around each scout."""
        depot = self.depot.index_select(0, env_index).unsqueeze(1)
        scouts = self.env.state.pos.index_select(0, env_index)[:, self.n_carriers :]
        r = self.cfg.goal_radius
        return [
            Circles(depot, r, color=DEPOT_COLOR, width_px=DEPOT_RING_PX),
            Crosses(depot, 0.3 * r, color=DEPOT_COLOR, diagonal=True),
            Circles(scouts, 1.8 * self.cfg.agent_radius, color=SCOUT_RING_COLOR, width_px=SCOUT_RING_PX),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of ``scripted_actions`` (this module's) for the current state."""
        return scripted_actions(self.env)

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        """Spawn every agent and draw the depot in the envs of ``env_mask`` [E] bool."""
        E, A = self.n_envs, self.n_agents
        spawn = arena.spawn_torch(self, env_mask, A)  # places the agents; [E, A, 2]
        extent = torch.full((), self.depot_extent, dtype=self.dtype, device=self.depot.device)
        depot = (torch.cat(arena.env_draws_torch(self, 2), -1) * 2.0 - 1.0) * extent  # per-env draws 0, 1
        self.depot.copy_(torch.where(env_mask.view(E, 1), depot, self.depot))
        dist = arena.norm(depot.unsqueeze(1) - spawn)
        self.prev_dist.copy_(torch.where(env_mask.view(E, 1), dist, self.prev_dist))

    def _distances(self) -> torch.Tensor:
        """[E, A] each agent's distance to the depot [m]."""
        return arena.norm(self.depot.unsqueeze(1) - self.env.state.pos)

    def observations(self) -> torch.Tensor:
        """[E, A, OBS_DIM] rows in the sim dtype: each group's columns (module docstring), zeros after."""
        state, C = self.env.state, self.n_carriers
        pos, vel = state.pos, state.vel
        delta, d2 = arena.pairwise(pos)  # delta[:, i, j] = p_j - p_i
        theta = state.theta[:, :C].unsqueeze(-1)
        cos, sin = torch.cos(theta), torch.sin(theta)
        scout = nearest_offsets(delta[:, :C, C:], d2[:, :C, C:])
        carriers = [cos, sin, body_frame(vel[:, :C], cos, sin), body_frame(scout, cos, sin)]
        if C > 1:
            eye = torch.eye(C, dtype=torch.bool, device=d2.device)
            others = d2[:, :C, :C].masked_fill(eye, math.inf)
            mate = body_frame(nearest_offsets(delta[:, :C, :C], others), cos, sin)
            carriers += [mate, torch.ones_like(cos)]
        else:
            carriers.append(torch.zeros_like(pos[:, :C, :1]).expand(-1, -1, 3))
        scouts = torch.cat([pos[:, C:], vel[:, C:], self.depot.unsqueeze(1) - pos[:, C:]], -1)
        # Each group's columns first, zeros after them (the padding of the narrower group).
        carriers = F.pad(torch.cat(carriers, -1), (0, OBS_DIM - CARRIER_OBS_DIM))
        return torch.cat([carriers, F.pad(scouts, (0, OBS_DIM - SCOUT_OBS_DIM))], dim=1)

    def _collisions_torch(self) -> torch.Tensor:
        """[E, A] int32: other agents overlapping each agent."""
        _, d2 = arena.pairwise(self.env.state.pos)
        return arena.collisions(d2, self.cfg.agent_radius)

    def rewards(self) -> torch.Tensor:
        """[E, A] rewards of the step (module docstring); updates ``prev_dist``."""
        c = self.cfg
        dist = self._distances()
        reward = c.shaping_factor * (self.prev_dist - dist)
        reward = reward - c.collision_penalty * self._collisions_torch().to(self.dtype)
        reward = reward + c.final_reward * self.done().to(self.dtype).unsqueeze(1)
        self.prev_dist.copy_(dist.detach())  # memory, not part of this step's differentiable output
        return reward

    def done(self) -> torch.Tensor:
        """[E] bool: every carrier within ``goal_radius`` of the depot."""
        return (self._distances()[:, : self.n_carriers] < self.cfg.goal_radius).all(dim=1)

    def success(self) -> torch.Tensor:
        """[E] bool: every carrier is within ``goal_radius`` of the depot."""
        return self.done()

    def info(self) -> dict[str, torch.Tensor]:
        """This state's info, the keys and shapes of ``info_buffers``."""
        dist = self._distances()
        at_depot = dist < self.cfg.goal_radius
        return {
            "dist_to_depot": dist,
            "at_depot": at_depot,
            "delivered": at_depot[:, : self.n_carriers].sum(dim=1, dtype=torch.int32),
            "collisions": self._collisions_torch(),
        }

    # --- fused twin -------------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (``fleet_kernels.observe_kernels``) and, for a step or a reset, ``fleet_finish``."""
        c, s = self.cfg, self.env.stepper.scalar
        observe = fk.observe_kernels(s)
        state = self.world.state
        args = arena.fill(
            observe.ObserveArgs(),
            pos=state.pos, vel=state.vel, theta=state.theta, depot=self._depot, n_carriers=self.n_carriers,
            reach=s(2.0 * c.agent_radius), goal_radius=s(c.goal_radius), shaping_factor=s(c.shaping_factor),
            collision_penalty=s(c.collision_penalty), prev_dist=self._prev_dist, reward_out=self.buffers.reward,
            dist_out=self._dist, at_depot_out=self._at_depot, collisions_out=self._collisions,
        )  # fmt: skip
        finish_args = ([self._at_depot, self.n_carriers, s(c.final_reward)], [self.buffers.reward, self._delivered])
        arena.launch_observe(self, launcher, env_mask, mode, observe.observe, args, fk.finish_kernel(s), finish_args)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``fleet_reset``: spawns, headings and the depot."""
        s = self.env.stepper.scalar
        arena.launch_reset(self, launcher, fk.reset_kernel(s), env_mask, [s(self.depot_extent)], [self._depot])


register_scenario("fleet", FleetScenario)


def scripted_actions(env) -> torch.Tensor:
    """Scripted controller: scouts drive to the depot and stop there, pushed apart from each other;
    each carrier steers after its nearest scout (what it observes), stopping ``FOLLOW_FRACTION *
    goal_radius`` short of it and pushed away from agents closer than ``SEPARATION_RADII`` radii.
    A carrier turns towards its commanded direction (yaw rate closing the heading error in one step)
    and drives forward in proportion to the cosine of that error (never backwards).

    Args:
        env: A fleet ``Environment``.

    Returns:
        [E, A, 2] actions in physical units of the env's dtype and device, inside
        ``env.action_bounds``: carriers (forward speed [m/s], yaw rate [rad/s]), scouts (vx, vy) [m/s].
    """
    sc: FleetScenario = env.scenario
    c, C, dt = sc.cfg, sc.n_carriers, env.stepper.dt
    state = env.state
    pos, theta = state.pos, state.theta[:, :C]
    delta, d2 = arena.pairwise(pos)  # delta[:, i, j] = p_j - p_i
    # Push away from every other agent closer than the separation range: sum of (p_i - p_j) / d_ij
    # weighted by 1 - d_ij / range.
    eye = torch.eye(pos.shape[1], dtype=torch.bool, device=pos.device)
    reach = SEPARATION_RADII * c.agent_radius
    d = arena.norm(delta)
    weight = torch.where((d < reach) & ~eye, 1.0 - d / reach, torch.zeros_like(d)) / d.clamp(min=1e-9)
    push = -(weight.unsqueeze(-1) * delta).sum(dim=2)  # [E, A, 2]
    # Scouts: one step to the depot at up to full speed, plus the push from the other scouts.
    scout_push = -(weight[:, C:, C:].unsqueeze(-1) * delta[:, C:, C:]).sum(dim=2)
    seek = arena.seek_velocity(sc.depot.unsqueeze(1).expand_as(pos[:, C:]), pos[:, C:], dt, c.scout_speed)
    scouts = seek + c.scout_speed * scout_push
    # Carriers: towards the nearest scout, fading to nothing at the stop distance.
    to_scout = nearest_offsets(delta[:, :C, C:], d2[:, :C, C:])
    gap = arena.norm(to_scout).unsqueeze(-1)
    pull = ((gap - FOLLOW_FRACTION * c.goal_radius) / SLOW_DISTANCE).clamp(0.0, 1.0) / gap.clamp(min=1e-9)
    want = to_scout * pull + SEPARATION_GAIN * push[:, :C]
    error = torch.atan2(want[..., 1], want[..., 0]) - theta
    error = torch.remainder(error + math.pi, 2.0 * math.pi) - math.pi
    strength = arena.norm(want).clamp(max=1.0)
    forward = c.carrier_speed * strength * torch.cos(error).clamp(min=0.0)
    turn = torch.where(strength > 0, error / dt, torch.zeros_like(error))
    carriers = torch.stack([forward, turn], -1)
    low, high = (bound[:, : env.stepper.act_dim] for bound in env.action_bounds)  # messages follow
    return torch.clamp(torch.cat([carriers, scouts], dim=1), low, high)
