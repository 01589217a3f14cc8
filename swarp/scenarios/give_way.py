"""Give way (VMAS ``give_way``): two agents swap ends of a one-lane corridor (torch reference).

The arena is the square ``[-H, H]^2`` (``H = half_length``). A corridor runs along its x axis,
carved out of four box obstacles, shared by every env, that fill the rest of the square: below
the lane, above it left and right of a bay, and behind the bay. The bay is a niche above the lane
at ``x = bay_position * H`` (default 0.4: off centre towards agent 1's end, so agents driving
straight at their goals meet in the one-lane part; VMAS centres it, where in this physics contact
pushes one agent aside in most meetings); it is where one agent steps aside so the other can pass. The arena's soft
walls close the corridor's ends. Agent 0 starts at the left end and has its goal at the right end,
agent 1 the other way round. Always two agents (``n_agents`` other than 2 is an error): a
"4,096 x 16" benchmark of this task is its 2-agent default, 4,096 x 2.

``difficulty`` in [0, 1] is the curriculum knob (``r`` = agent radius): the lane half-width goes
from ``2.4 r`` (0: the agents can pass side by side) to ``1.3 r`` (1: one lane, only the bay lets
them pass), and the bay's half-width from ``4 r`` to ``1.6 r``; its depth is ``2.6 r``. Change it
with a new env (the corridor is static geometry).

The observation, reward, termination and info are navigation's (``navigation.py``) with one
observed neighbor that is always in range (``obs_dim = 13``):

=========  =====  ==============================================================
slice      size   content
=========  =====  ==============================================================
0:2        2      own position [m]
2:4        2      own velocity [m/s]
4:6        2      heading (cos theta, sin theta)
6:8        2      goal - position [m]
8:13       5      the other agent: relative position (2) [m], relative velocity
                  (2) [m/s], valid flag (1, always 1)
=========  =====  ==============================================================

Reward of agent i: ``shaping_factor * (d_prev - d)``, the mean progress of both agents to their
goals (``shared_reward``, the default, as in VMAS, which sums the two; or its own progress), where
``d`` is the remaining length of the route that lets both pass (``route_shaping``, the default:
one agent through the bay, the other waiting short of it; ``route_lengths_torch``) or, without it,
the straight distance to the goal; minus
``collision_penalty`` while the agents overlap, plus ``final_reward`` for both on the step both
are on goal. Terminated (and success) when both are within ``goal_radius`` of their goals. Info:
``dist_to_goal`` [E, 2], ``on_goal`` [E, 2] bool, ``collisions`` [E, 2] int32,
``neighbor_overflow`` [E] bool.

Resets draw each agent's spawn uniformly in a ``2 r`` long stretch at its end of the lane (and
across the lane's free width; agent a: per-env draws ``2 a``, ``2 a + 1``, ``arena.DRAW_ENV``) and
a uniform heading (``arena.spawn_agents_torch``), from the counter-based RNG; goals are fixed at
``x = -+(H - 2 r)`` on the lane axis. The Warp twin reuses the navigation observation kernels, adding
``give_way_kernels.give_way_reset`` and, with ``route_shaping``, ``give_way_route`` between
navigation's observe and finish kernels; ``scripted_actions`` is a scripted controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import warp as wp

from swarp.core.config import AgentConfig, Obstacle, WorldConfig
from swarp.core.precision import vec2_type
from swarp.runtime.launch import Launcher
from swarp.scenarios import give_way_kernels as gk
from swarp.scenarios import navigation_kernels as nk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, WorldSpec, register_scenario
from swarp.scenarios.framework.options import OptionChecker
from swarp.scenarios.navigation import NavigationScenario

#: Lane half-width at difficulty 0 and 1, bay half-width at difficulty 0 and 1, bay depth and
#: how far the walls reach past the arena, all as multiples of the agent radius.
LANE_EASY, LANE_HARD = 2.4, 1.3
BAY_EASY, BAY_HARD = 4.0, 1.6
BAY_DEPTH = 2.6
WALL = 1.0
#: Distance of the spawn stretch's inner end from the corridor end, its length, and the distance of
#: the goals from the corridor ends [agent radii].
SPAWN_GAP, SPAWN_LENGTH, GOAL_GAP = 3.5, 2.0, 2.0
#: Corridor length [agent radii] that agent 1's spawn stretch, the widest bay and a radius between
#: them take up, beyond the bay's centre.
BAY_CLEARANCE = SPAWN_GAP + SPAWN_LENGTH + BAY_EASY + 1.0
N_AGENTS = 2


@dataclass(frozen=True)
class GiveWayConfig:
    """Options of the give-way scenario (SI units).

    Attributes:
        n_agents: Must be 2 (accepted so generic tools that pass ``n_agents`` can build the task).
        difficulty: Curriculum knob in [0, 1] (0: the lane fits two agents; 1: one lane plus the bay).
        bay_position: Centre of the bay as a fraction of ``half_length``, in [0, 1), towards agent
            1's end (0: the corridor's centre, VMAS's layout: agents driving straight meet there and
            contact pushes one aside in 96% of episodes; from 0.2 on they deadlock unless one gives way).
        half_length: Half-length H [m] of the corridor.
        agent_radius: Agent radius r [m].
        max_speed: Speed limit [m/s] (holonomic agents, velocity control).
        shared_reward: Reward each agent with the mean progress of both (the team's), not its own:
            then the agent that steps into the bay loses nothing by letting the other pass.
        route_shaping: Measure progress along the route that lets both pass (one agent through
            the bay, the other waiting short of it until then: ``route_lengths_torch``) instead of
            straight to the goal. Without it no policy we trained left the standoff (docs/results.md).
        shaping_factor: Weight of the progress term [1/m].
        collision_penalty: Penalty per step while the two agents overlap (>= 0).
        final_reward: Bonus for both agents on the step both are on goal.
        goal_radius: On-goal distance [m] (default: the agent radius).
        collision_k: Contact stiffness [N/m] of walls and agents. Stiff, so that agents pushing at
            full speed sink about half a radius into a wall or each other (the soft default of
            ``WorldConfig`` would let them squeeze past each other, or through the walls).
        dt: Step length [s].
        substeps: Physics substeps per step; ``collision_k * (dt / substeps)^2`` must stay below 1 [kg]
            (agent mass 1 kg) for the contacts to be stable.
        max_steps: Episode length [steps].
    """

    n_agents: int = N_AGENTS
    difficulty: float = 1.0
    bay_position: float = 0.4
    half_length: float = 2.0
    agent_radius: float = 0.1
    max_speed: float = 1.0
    shared_reward: bool = True
    route_shaping: bool = True
    shaping_factor: float = 1.0
    collision_penalty: float = 1.0
    final_reward: float = 1.0
    goal_radius: float | None = None
    collision_k: float = 1500.0
    dt: float = 0.1
    substeps: int = 4
    max_steps: int = 100

    def __post_init__(self) -> None:
        check = OptionChecker(self, "give_way")
        if isinstance(self.n_agents, bool) or self.n_agents != N_AGENTS:
            raise ValueError(f"give_way option n_agents must be {N_AGENTS} (a two-agent task), got {self.n_agents!r}")
        check.number("difficulty", allow_zero=True, high=1.0)
        check.bool("shared_reward")
        check.bool("route_shaping")
        check.number("bay_position", allow_zero=True)
        if self.bay_position >= 1.0:
            raise ValueError(f"give_way option bay_position must be < 1, got {self.bay_position!r}")
        for name in ("half_length", "agent_radius", "max_speed", "dt"):
            check.number(name)
        for name in ("shaping_factor", "collision_penalty", "final_reward"):
            check.number(name, allow_zero=True)
        if self.goal_radius is not None:
            check.number("goal_radius")
        check.int("substeps", 1)
        check.int("max_steps", 1)
        check.number("collision_k")
        stiffness = self.collision_k * (self.dt / self.substeps) ** 2
        if stiffness >= 1.0:
            raise ValueError(
                f"give_way options give unstable contacts: collision_k * (dt / substeps)^2 = {stiffness:.3g} must be "
                f"< 1 (agent mass 1 kg); raise substeps or lower collision_k"
            )
        min_radii = BAY_CLEARANCE / (1.0 - self.bay_position)
        min_half_length = min_radii * self.agent_radius
        if self.half_length < min_half_length:
            raise ValueError(
                f"give_way option half_length must be >= {min_radii:g} agent radii ({min_half_length:g} m) to "
                f"leave room between the spawns and the bay, got {self.half_length!r}"
            )

    # What navigation's observation and reward code reads (fixed for this task).
    obs_neighbors = 1
    obstacle_shape = "box"
    n_obstacles = 0

    @property
    def obs_range(self) -> float:
        """Sensing range [m]: longer than the arena's diagonal, so the other agent is always observed."""
        return 3.0 * self.half_length


def box_between(x_min: float, x_max: float, y_min: float, y_max: float) -> Obstacle:
    """The axis-aligned box obstacle ``[x_min, x_max] x [y_min, y_max]`` [m]."""
    center = (0.5 * (x_min + x_max), 0.5 * (y_min + y_max))
    return Obstacle.box(center, (0.5 * (x_max - x_min), 0.5 * (y_max - y_min)))


class GiveWayScenario(NavigationScenario):
    """Two agents swap ends of a one-lane corridor with a bay; see the module docstring."""

    name = "give_way"
    Config = GiveWayConfig

    def make_world(self) -> WorldSpec:
        c = self.cfg
        r, d, H = c.agent_radius, c.difficulty, c.half_length
        self.lane_half_width = r * (LANE_EASY + (LANE_HARD - LANE_EASY) * d)
        self.bay_half_width = r * (BAY_EASY + (BAY_HARD - BAY_EASY) * d)
        self.bay_depth = BAY_DEPTH * r
        self.bay_x = c.bay_position * H
        h, bay_x, bay_top = self.lane_half_width, self.bay_x, self.lane_half_width + self.bay_depth
        # The walls fill the square arena [-H, H]^2 around the lane and the bay (and reach a margin
        # past it, so no agent ever sees their far faces).
        far = H + WALL * r
        left_end, right_end = bay_x - self.bay_half_width, bay_x + self.bay_half_width
        walls = (
            box_between(-far, far, -far, -h),
            box_between(-far, left_end, h, far),
            box_between(right_end, far, h, far),
            box_between(left_end, right_end, bay_top, far),
        )
        self.walls = walls
        # The route of ``route_lengths_torch``: the bay's centre and mouth, where the other agent
        # waits (beside the bay, on the lane's axis), and the lead at which the two have passed.
        self.route = SimpleNamespace(
            bay=(bay_x, h + 0.5 * self.bay_depth),
            mouth=(bay_x, 0.0),
            wait_x=(bay_x - self.bay_half_width - r, bay_x + self.bay_half_width + r),
            lane_half_width=h,
            pass_gap=2.0 * r,
        )
        self.spawn_jitter = (SPAWN_LENGTH * r, max(h - 1.05 * r, 0.0))
        self.spawn_inner = H - SPAWN_GAP * r
        self.goal_x = H - GOAL_GAP * r
        agent = AgentConfig(model="holonomic", ctrl_mode="velocity", radius=r, max_speed=c.max_speed)
        world = WorldConfig(
            bounds=H,
            bounds_mode="soft",
            collision_k=c.collision_k,
            max_neighbors=1,
            neighbor_radius=c.obs_range,
            obstacles=walls,
        )
        return WorldSpec(agents=(agent,) * N_AGENTS, world=world, dt=c.dt, substeps=c.substeps, max_steps=c.max_steps)

    def bind(self, env) -> None:
        super().bind(env)
        self._prev_route = wp.zeros((self.n_envs, N_AGENTS), dtype=env.stepper.scalar, device=self.device)
        self.prev_route = wp.to_torch(self._prev_route)
        g, dtype = self.route, self.prev_route.dtype
        # The route's points as tensors, made once (no host-to-device copy in a step).
        g.bay_t = torch.tensor(g.bay, dtype=dtype, device=self.prev_route.device)
        g.mouth_t = torch.tensor(g.mouth, dtype=dtype, device=self.prev_route.device)
        g.wait_t = torch.tensor([[g.wait_x[0], 0.0], [g.wait_x[1], 0.0]], dtype=dtype, device=self.prev_route.device)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        if self.cfg.route_shaping:
            tensors["prev_route"] = self.prev_route
        return tensors

    def observes_like_navigation(self) -> bool:
        return not self.cfg.route_shaping

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        E, dtype, dev = self.n_envs, self.dtype, self.goals.device
        agents = torch.arange(N_AGENTS, device=dev).view(1, N_AGENTS)
        side = (2 * agents - 1).to(dtype)  # agent 0 on the left (-1), agent 1 on the right (+1)
        draws = torch.cat(arena.env_draws_torch(self, 2 * N_AGENTS), -1).view(E, N_AGENTS, 2)  # agent a: 2 a, 2 a + 1
        inner = torch.full((), self.spawn_inner, dtype=dtype, device=dev)
        jitter_x = torch.full((), self.spawn_jitter[0], dtype=dtype, device=dev)
        jitter_y = torch.full((), self.spawn_jitter[1], dtype=dtype, device=dev)
        x = side * (inner + draws[..., 0] * jitter_x)
        y = (draws[..., 1] * 2.0 - 1.0) * jitter_y
        spawn = torch.stack([x, y], dim=-1)
        arena.spawn_agents_torch(self, env_mask, spawn)
        goal_x = torch.full((), self.goal_x, dtype=dtype, device=dev)
        goals = torch.stack([-side * goal_x, torch.zeros_like(side)], dim=-1).expand(E, N_AGENTS, 2)
        m2, m3 = env_mask.view(E, 1), env_mask.view(E, 1, 1)
        self.goals.copy_(torch.where(m3, goals, self.goals))
        dist = (goals - spawn).square().sum(-1).sqrt()
        self.prev_dist.copy_(torch.where(m2, dist, self.prev_dist))
        if self.cfg.route_shaping:
            self.prev_route.copy_(torch.where(m2, route_lengths_torch(self, spawn, goals), self.prev_route))

    def _step_progress(self) -> torch.Tensor:
        progress = super()._step_progress()
        if not self.cfg.route_shaping:
            return progress
        route = route_lengths_torch(self, self.env.state.pos, self.goals)
        progress = self.prev_route - route
        self.prev_route.copy_(route.detach())
        return progress

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2] actions of this scenario's scripted controller (``scripted_actions``) for the current state."""
        return scripted_actions(self.env)

    # --- fused twin -------------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        if not self.cfg.route_shaping:
            nk.launch_observe(self, launcher, env_mask, mode)
            return

        def route(launcher: Launcher) -> None:
            self.launch_route(launcher, env_mask, mode)

        nk.launch_observe(self, launcher, env_mask, mode, before_finish=route)

    def launch_route(self, launcher: Launcher, env_mask, mode: int) -> None:
        """``give_way_route`` (between navigation's observe and finish)."""
        c, b, g = self.cfg, self.buffers, self.route
        s = self.env.stepper.scalar
        vec2 = vec2_type(s)
        k = gk.route_kernel(s)
        args = arena.fill(
            k.RouteArgs(),
            pos=self.world.state.pos, goals=self.arrays.goals, bay=vec2(s(g.bay[0]), s(g.bay[1])),
            mouth=vec2(s(g.mouth[0]), s(g.mouth[1])), wait0_x=s(g.wait_x[0]), wait1_x=s(g.wait_x[1]),
            lane_half_width=s(g.lane_half_width), pass_gap=s(g.pass_gap), shared_reward=int(c.shared_reward),
            shaping_factor=s(c.shaping_factor), collision_penalty=s(c.collision_penalty),
            collisions=self.arrays.collisions, prev_route=self._prev_route, progress_out=self.arrays.progress,
            reward_out=b.reward, non_finite_out=b.non_finite,
        )  # fmt: skip
        mask = env_mask if env_mask is not None else b.no_mask
        launcher.launch(
            k.give_way_route,
            dim=self.n_envs,
            inputs=[args, int(mode), mask, int(env_mask is not None)],
            device=self.env.device,
            block_dim=self.plan.env_block,
        )

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``give_way_reset`` (no spawn grid: one thread per env and agent)."""
        s = self.env.stepper.scalar
        jitter_x, jitter_y = s(self.spawn_jitter[0]), s(self.spawn_jitter[1])
        launcher.launch(
            gk.reset_kernel(s),
            dim=(self.n_envs, self.n_agents),
            inputs=[
                arena.spawn_args(self, env_mask, grid=False),
                s(self.spawn_inner),
                jitter_x,
                jitter_y,
                s(self.goal_x),
            ],
            outputs=[self.arrays.goals],
            device=self.env.device,
        )


def route_lengths_torch(sc: GiveWayScenario, pos: torch.Tensor, goals: torch.Tensor) -> torch.Tensor:
    """[E, 2] each agent's remaining route length [m] (``route_shaping``) from positions ``pos`` and
    goals ``goals`` ([E, 2, 2], m).

    The routes run along the corridor: an agent out of the lane (centre above its top edge, in the
    bay) goes back through the bay's mouth ``M`` (on the lane's axis under the bay's centre ``B``).
    Once agent 0 leads agent 1 by ``2 r`` the two have passed: each route is then straight to the
    goal, or through ``M`` from the bay. Before, one agent yields: its route runs through ``B``
    and ``M``; the other's runs straight to its goal when it is on its side of the bay (agent 0
    left of ``bay_x - (bay half-width + r)``, agent 1 right of ``bay_x + ...``) or the yielder is
    already out of the lane, else through that waiting point on the lane's axis. The yielder is the
    agent whose choice makes the two routes' sum shorter (agent 1 on a tie). The sum's decrease is
    the team's progress: backing up to the bay pays at once, as do stepping in and, once the other
    has passed, stepping out.
    """
    g = sc.route
    bay, mouth, wait_at = g.bay_t, g.mouth_t, g.wait_t  # wait_at: agent 0's, agent 1's waiting point

    def length(v: torch.Tensor) -> torch.Tensor:
        return v.square().sum(-1).sqrt()

    x, out_of_lane = pos[..., 0], pos[..., 1] > g.lane_half_width
    from_mouth = length(mouth - goals)
    home = torch.where(out_of_lane, length(pos - mouth) + from_mouth, length(goals - pos))
    via_bay = length(pos - bay) + length(bay - mouth) + from_mouth
    via_wait = length(wait_at - pos) + length(goals - wait_at)
    clear0 = (x[:, 0] <= wait_at[0, 0]) | out_of_lane[:, 1]
    clear1 = (x[:, 1] >= wait_at[1, 0]) | out_of_lane[:, 0]
    waiting = torch.where(torch.stack([clear0, clear1], -1), home, via_wait)
    one_yields = (via_bay[:, 1] + waiting[:, 0] <= via_bay[:, 0] + waiting[:, 1]).unsqueeze(-1)
    one_yielding = torch.stack([waiting[:, 0], via_bay[:, 1]], -1)
    zero_yielding = torch.stack([via_bay[:, 0], waiting[:, 1]], -1)
    passed = (x[:, 0] - x[:, 1] > g.pass_gap).unsqueeze(-1)
    return torch.where(passed, home, torch.where(one_yields, one_yielding, zero_yielding))


def scripted_actions(env) -> torch.Tensor:
    """Scripted controller: agent 1 gives way. It drives along the lane's axis to the bay and
    waits inside until agent 0 has passed; agent 0 waits before the bay until agent 1 is inside.

    Args:
        env: A give-way ``Environment``.

    Returns:
        [E, 2, 2] velocity commands [m/s] of the env's dtype and device.
    """
    sc: GiveWayScenario = env.scenario
    r = sc.cfg.agent_radius
    pos, goals = env.state.pos, sc.goals
    x0, x1, y1 = pos[:, 0, 0], pos[:, 1, 0], pos[:, 1, 1]
    zeros = torch.zeros_like(x1)
    in_bay = (y1 > sc.lane_half_width + r).unsqueeze(-1)  # agent 1 is out of the lane
    passed = (x0 > x1 + 2.5 * r).unsqueeze(-1)  # agent 0 is past agent 1
    # Agent 0: along the axis to its goal, stopping short of the bay until agent 1 is inside it.
    wait = torch.stack([zeros + sc.bay_x - sc.bay_half_width - 3.0 * r, zeros], -1)
    target0 = torch.where(~in_bay & ~passed, wait, goals[:, 0])
    # Agent 1: along the axis to the bay's mouth, up into the bay and wait; once passed, back
    # down to the mouth and on to its goal.
    mouth = torch.stack([zeros + sc.bay_x, zeros], -1)
    bay = torch.stack([zeros + sc.bay_x, zeros + sc.lane_half_width + 0.5 * sc.bay_depth], -1)
    under_bay = ((x1 - sc.bay_x).abs() < sc.bay_half_width - r).unsqueeze(-1)
    leaving = torch.where((y1 > 0.5 * r).unsqueeze(-1), mouth, goals[:, 1])
    target1 = torch.where(passed, leaving, torch.where(under_bay, bay, mouth))
    return arena.seek_velocity(torch.stack([target0, target1], dim=1), pos, env.stepper.dt, sc.cfg.max_speed)


register_scenario("give_way", GiveWayScenario)
