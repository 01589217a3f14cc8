"""Speaker-listener (VMAS 1.5.2 / MPE ``simple_speaker_listener``): a speaker that cannot move tells a
listener that cannot see the goal which landmark to go to, over a communication channel (torch
reference).

Two agent groups (``WorldSpec.groups``), the speaker first in agent order, as VMAS's agents:

* ``"speaker"`` (1 agent): a holonomic agent with a speed limit of 0 (it cannot move), which
  observes the goal landmark and says a message on the world's channel (``WorldSpec.comm_dim``
  C = ``n_landmarks``). Its actions keep VMAS's layout: 2 physical columns, whose box is
  ``[0, 0]`` (``env.action_bounds``; VMAS keeps them as ``[-1, 1]`` and ignores them), then the C
  message columns in ``[0, 1]`` (continuous), or one flat index of ``3 * 3 * C`` choices whose least
  significant digit is the message, sent one-hot (discrete: the 9 physical combinations all decode
  to a zero command).
* ``"listener"`` (1 agent, ``silent``): a holonomic agent under velocity control, actions (vx, vy)
  [m/s] with norm up to ``listener_speed``. It observes the landmarks and hears the speaker.

Each reset draws ``n_landmarks`` landmarks uniformly in ``[-(L - landmark_radius), L -
landmark_radius]^2`` (landmark l: per-env draws ``2 l``, ``2 l + 1``, ``arena.DRAW_ENV``), the goal
landmark uniformly among them (draw ``2 N``) and both agents at the arena scenarios' ranked spawn
points (random headings, at rest) in the soft-walled arena ``[-L, L]^2``. Agents do not collide
and landmarks are not physical (VMAS: ``collide=False``).

Observation of the speaker (``N`` columns): the goal landmark one-hot (VMAS: the goal's color).
Observation of the listener (``2 + 3 N`` columns; 11 with VMAS's 3 landmarks, as VMAS's):

=============  ======  ==========================================================================
slice          size    content
=============  ======  ==========================================================================
0:2            2       own velocity [m/s]
2:2+2N         2 N     landmark l - own position [m], landmarks in index order
2+2N:2+3N      N       the speaker's message heard (``Environment.messages``): what it said with
                       this step's action; zeros in the observation of a fresh start
=============  ======  ==========================================================================

The row store is ``2 + 3 N`` wide (the listener's width): the speaker's row holds zeros after its N
columns (the environment hands each group ``obs[:, lo:hi, :W_g]``).

Reward of both agents (shared): ``-distance_weight * d``, d the listener's distance to the goal
landmark [m]. VMAS 1.5.2 pays each agent ``-2 d`` (its loop adds ``-d`` once per agent; MPE paid
``-d^2``): the same optimum, half the scale. No terminal state: episodes end at ``max_steps``
(MPE's 25). Info: ``dist_to_goal`` [E] [m], ``success`` [E] bool (the listener within
``goal_radius`` of the goal landmark; also ``success()``). The Warp twin is
``speaker_listener_kernels.py``; ``scripted_actions`` is a scripted controller (the speaker says
the goal, the listener drives to the landmark it hears) and ``encode_actions`` turns its actions
into a discrete env's indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
import warp as wp

from swarp.core.config import AgentConfig, WorldConfig
from swarp.core.groups import GroupSpec
from swarp.core.spaces import encode_torch
from swarp.runtime.launch import Launcher
from swarp.scenarios import speaker_listener_kernels as sk
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP, FusedScenario, WorldSpec, register_scenario
from swarp.scenarios.framework.drawables import Circles
from swarp.scenarios.framework.options import OptionChecker
from swarp.scenarios.speaker_listener_kernels import LISTENER, SPEAKER, listener_obs_dim, speaker_obs_dim

#: Renderer: landmark l's color (RGB), VMAS's red, green and blue first; the goal ring's color and
#: width [px]; the ring marking the speaker.
LANDMARK_COLORS = (
    (166, 38, 38),
    (38, 166, 38),
    (38, 38, 166),
    (166, 166, 38),
    (166, 38, 166),
    (38, 166, 166),
)
GOAL_COLOR = (40, 40, 40)
GOAL_RING_PX = 2.0
SPEAKER_RING_COLOR = (40, 40, 40)
SPEAKER_RING_PX = 1.5
#: Landmarks per env: at most one color each.
MAX_LANDMARKS = len(LANDMARK_COLORS)


@dataclass(frozen=True)
class SpeakerListenerConfig:
    """Options of the speaker-listener scenario (SI units).

    Attributes:
        n_landmarks: Landmarks per env N (2 to ``MAX_LANDMARKS``); also the channel's width C.
        world_size: Half-size L [m] of the soft-walled arena ``[-L, L]^2``.
        agent_radius: Radius of both agents [m] (VMAS: 0.075).
        landmark_radius: Radius of a drawn landmark [m] (VMAS: 0.04; landmarks are not physical).
        listener_speed: The listener's speed limit [m/s].
        goal_radius: Success: the listener within this distance of the goal landmark's centre [m].
        distance_weight: Weight of the distance penalty [1/m].
        dt: Step length [s].
        substeps: Physics substeps per step.
        max_steps: Episode length [steps].
        n_agents: Agents per env (optional; generic tools pass it): 2 where given, the task's.
    """

    #: Name in option errors; what ``arena.spawn_grid`` reads (the spawn grid sized automatically).
    scenario_name: ClassVar[str] = "speaker_listener"
    spawn_cells: ClassVar[None] = None

    n_landmarks: int = 3
    world_size: float = 1.0
    agent_radius: float = 0.075
    landmark_radius: float = 0.04
    listener_speed: float = 1.0
    goal_radius: float = 0.1
    distance_weight: float = 1.0
    dt: float = 0.1
    substeps: int = 1
    max_steps: int = 25
    n_agents: int | None = None

    def __post_init__(self) -> None:
        check = OptionChecker(self, self.scenario_name)
        check.int("n_landmarks", 2, MAX_LANDMARKS)
        check.int("substeps", 1)
        check.int("max_steps", 1)
        for name in ("world_size", "agent_radius", "landmark_radius", "listener_speed", "goal_radius", "dt"):
            check.number(name)
        check.number("distance_weight", allow_zero=True)
        if self.n_agents is not None and (isinstance(self.n_agents, bool) or self.n_agents != 2):
            check.fail(f"n_agents must be 2 (one speaker, one listener) where given, got {self.n_agents!r}")
        if self.landmark_radius >= self.world_size:
            check.fail(
                f"landmark_radius ({self.landmark_radius}) must be < world_size ({self.world_size}): the "
                "landmarks must fit in the arena"
            )


class SpeakerListenerScenario(FusedScenario):
    """The speaker guides the listener to the goal landmark; see the module docstring."""

    name = "speaker_listener"
    Config = SpeakerListenerConfig

    def make_world(self) -> WorldSpec:
        """The speaker (speed limit 0) then the listener, holonomic velocity-controlled discs of
        ``agent_radius`` that do not collide, in the soft-walled arena; the two groups and the
        channel (C = ``n_landmarks``); sets the spawn grid."""
        c = self.cfg
        N = c.n_landmarks
        #: Half-size [m] of the square the landmarks are drawn in.
        self.landmark_extent = c.world_size - c.landmark_radius
        arena.spawn_grid(self, 2)
        speaker = AgentConfig(model="holonomic", ctrl_mode="velocity", radius=c.agent_radius, max_speed=0.0)
        listener = AgentConfig(
            model="holonomic", ctrl_mode="velocity", radius=c.agent_radius, max_speed=c.listener_speed
        )
        world = WorldConfig(bounds=c.world_size, bounds_mode="soft", collisions=False, max_neighbors=1,
                            neighbor_method="brute")  # fmt: skip
        groups = (
            GroupSpec("speaker", 1, speaker_obs_dim(N)),
            GroupSpec("listener", 1, listener_obs_dim(N), silent=True),
        )
        return WorldSpec(agents=(speaker, listener), world=world, dt=c.dt, substeps=c.substeps,
                         max_steps=c.max_steps, groups=groups, comm_dim=N)  # fmt: skip

    @property
    def obs_dim(self) -> int:
        """Width of the row store: the listener's (the widest group's)."""
        return listener_obs_dim(self.cfg.n_landmarks)

    def bind(self, env) -> None:
        """Allocate the landmarks [E, N] vec2 [m], the goal [E] int32 and the info as Warp arrays of
        the sim precision, with torch views (``landmarks`` [E, N, 2], ``goal`` [E])."""
        super().bind(env)
        E, N, dev, scalar = self.n_envs, self.cfg.n_landmarks, self.device, env.stepper.scalar
        self._landmarks = wp.zeros((E, N), dtype=wp.types.vector(2, scalar), device=dev)
        self._goal = wp.zeros(E, dtype=wp.int32, device=dev)
        self._dist = wp.zeros(E, dtype=scalar, device=dev)
        self._success = wp.zeros(E, dtype=wp.bool, device=dev)
        self._comm = wp.from_torch(env.comm, dtype=scalar)  # the channel, written by each step's decode
        #: [E, N, 2] the landmarks [m]; [E] int32 the goal landmark's index.
        self.landmarks = wp.to_torch(self._landmarks)
        self.goal = wp.to_torch(self._goal)
        #: The squared goal radius in the sim dtype (both twins compare squared distances with it).
        self.goal_radius2 = self.cfg.goal_radius * self.cfg.goal_radius

    def info_buffers(self) -> dict[str, torch.Tensor]:
        """``dist_to_goal`` [E] float [m], ``success`` [E] bool."""
        return {"dist_to_goal": wp.to_torch(self._dist), "success": wp.to_torch(self._success)}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """``landmarks`` [E, N, 2] [m] and ``goal`` [E] int32."""
        return {"landmarks": self.landmarks, "goal": self.goal}

    def drawables(self, env_index: torch.Tensor) -> list:
        """Each landmark a disc of its color, a dark ring of ``goal_radius`` around the goal
        landmark, and a dark ring around the speaker."""
        c = self.cfg
        landmarks = self.landmarks.index_select(0, env_index)
        goal = self._goal_positions().index_select(0, env_index).unsqueeze(1)
        speaker = self.env.state.pos.index_select(0, env_index)[:, SPEAKER : SPEAKER + 1]
        discs = [
            Circles(landmarks[:, m : m + 1], c.landmark_radius, color=LANDMARK_COLORS[m]) for m in range(c.n_landmarks)
        ]
        return [
            *discs,
            Circles(goal, c.goal_radius, color=GOAL_COLOR, width_px=GOAL_RING_PX),
            Circles(speaker, 1.6 * c.agent_radius, color=SPEAKER_RING_COLOR, width_px=SPEAKER_RING_PX),
        ]

    def scripted_actions(self) -> torch.Tensor:
        """[E, A, 2 + N] actions of ``scripted_actions`` (this module's) for the current state."""
        return scripted_actions(self.env)

    # --- torch reference --------------------------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        """Spawn both agents, draw the landmarks and the goal in the envs of ``env_mask`` [E] bool."""
        E, N = self.n_envs, self.cfg.n_landmarks
        arena.spawn_torch(self, env_mask, 2)  # places the agents
        extent = torch.full((), self.landmark_extent, dtype=self.dtype, device=self.landmarks.device)
        draws = torch.cat(arena.env_draws_torch(self, 2 * N + 1), -1)  # landmark l: 2 l, 2 l + 1; goal: 2 N
        landmarks = (draws[:, : 2 * N].view(E, N, 2) * 2.0 - 1.0) * extent
        goal = (draws[:, 2 * N] * N).to(torch.int32).clamp(max=N - 1)
        self.landmarks.copy_(torch.where(env_mask.view(E, 1, 1), landmarks, self.landmarks))
        self.goal.copy_(torch.where(env_mask, goal, self.goal))

    def _goal_positions(self) -> torch.Tensor:
        """[E, 2] the goal landmark of every env [m]."""
        index = self.goal.long().view(-1, 1, 1).expand(-1, 1, 2)
        return torch.gather(self.landmarks, 1, index).squeeze(1)

    def _goal_offset(self) -> torch.Tensor:
        """[E, 2] goal landmark - listener position [m]."""
        return self._goal_positions() - self.env.state.pos[:, LISTENER]

    def observations(self) -> torch.Tensor:
        """[E, 2, 2 + 3 N] rows in the sim dtype: the speaker's goal one-hot (zeros after it), the
        listener's velocity, landmarks and heard message (module docstring)."""
        state, N = self.env.state, self.cfg.n_landmarks
        pos, vel = state.pos[:, LISTENER], state.vel[:, LISTENER]
        speaker = F.one_hot(self.goal.long(), N).to(pos.dtype)
        heard = self.env.messages[:, SPEAKER]
        listener = torch.cat([vel, (self.landmarks - pos.unsqueeze(1)).flatten(1), heard], -1)
        return torch.stack([F.pad(speaker, (0, listener.shape[-1] - N)), listener], dim=1)

    def rewards(self) -> torch.Tensor:
        """[E, 2] the shared ``-distance_weight * d`` (module docstring)."""
        dist = arena.norm(self._goal_offset())
        return (-self.cfg.distance_weight * dist).unsqueeze(1).expand(-1, self.n_agents)

    def done(self) -> torch.Tensor:
        """[E] bool: never (episodes end at the time limit, as in VMAS)."""
        return torch.zeros(self.n_envs, dtype=torch.bool, device=self.goal.device)

    def success(self) -> torch.Tensor:
        """[E] bool: the listener is within ``goal_radius`` of the goal landmark."""
        r2 = torch.full((), self.goal_radius2, dtype=self.dtype, device=self.goal.device)
        return self._goal_offset().square().sum(-1) < r2

    def info(self) -> dict[str, torch.Tensor]:
        """This state's info, the keys and shapes of ``info_buffers``."""
        return {"dist_to_goal": arena.norm(self._goal_offset()), "success": self.success()}

    # --- fused twin -------------------------------------------------------------------------

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """The observation (``speaker_listener_kernels.observe_kernels``) and, for a step or a reset,
        ``speaker_listener_finish``."""
        c, s, state = self.cfg, self.env.stepper.scalar, self.world.state
        observe = sk.observe_kernels(s, c.n_landmarks)
        args = arena.fill(observe.ObserveArgs(), pos=state.pos, vel=state.vel, landmarks=self._landmarks,
                          goal=self._goal, comm=self._comm)  # fmt: skip
        inputs = [state.pos, self._landmarks, self._goal, s(self.goal_radius2), s(c.distance_weight)]
        finish_args = (inputs, [self.buffers.reward, self._dist, self._success])
        arena.launch_observe(self, launcher, env_mask, mode, observe.observe, args, sk.finish_kernel(s), finish_args)

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """The masked ``speaker_listener_reset``: spawns, headings, landmarks and the goal."""
        s = self.env.stepper.scalar
        outputs = [self._landmarks, self._goal]
        arena.launch_reset(self, launcher, sk.reset_kernel(s), env_mask, [s(self.landmark_extent)], outputs)


register_scenario("speaker_listener", SpeakerListenerScenario)


def scripted_actions(env) -> torch.Tensor:
    """Scripted controller, each agent acting on its own observation: the speaker says the goal
    landmark it sees (one-hot); the listener decodes the message it hears (the loudest entry) and
    drives to that landmark (``arena.seek_velocity``: full speed, one step to arrive when close),
    standing still while it hears nothing (the first step of an episode).

    Args:
        env: A speaker-listener ``Environment``.

    Returns:
        [E, 2, 2 + N] continuous actions of the env's dtype and device inside ``env.action_bounds``:
        the physical command (0 for the speaker) then the message (0 for the silent listener).
        ``encode_actions`` turns them into a discrete env's indices.
    """
    sc: SpeakerListenerScenario = env.scenario
    N = sc.cfg.n_landmarks
    obs = env.obs
    said = obs[:, SPEAKER, :N]  # the goal one-hot it observes
    heard = obs[:, LISTENER, 2 + 2 * N :]
    choice = heard.argmax(-1, keepdim=True)
    offsets = obs[:, LISTENER, 2 : 2 + 2 * N].reshape(-1, N, 2)
    target = torch.gather(offsets, 1, choice.unsqueeze(-1).expand(-1, 1, 2)).squeeze(1)
    velocity = arena.seek_velocity(target, torch.zeros_like(target), env.stepper.dt, sc.cfg.listener_speed)
    velocity = velocity * (heard.sum(-1, keepdim=True) > 0).to(velocity.dtype)
    low, high = (bound[:, :2] for bound in env.action_bounds)  # the physical box
    command = torch.clamp(torch.stack([torch.zeros_like(velocity), velocity], dim=1), low, high)
    message = torch.stack([said, torch.zeros_like(said)], dim=1)
    return torch.cat([command, message], -1)


def encode_actions(env, actions: torch.Tensor):
    """``scripted_actions``' continuous ``actions`` [E, 2, 2 + N] as ``env.step`` takes them in an
    env of any action spaces: themselves where every group is continuous, else ``{group: actions}``,
    a discrete group's encoded into the indices of its levels nearest the command
    (``swarp.core.spaces.encode_torch``) with the message's loudest entry as its choice."""
    if env.action_space is not None and not env.action_space.discrete:
        return actions
    low, high = env.action_bounds
    by_group = {}
    for group in env.groups:
        space, rows = group.action_space, actions[:, group.agents]
        D = space.physical_dim
        if not space.discrete:
            by_group[group.name] = rows[..., : space.width]
            continue
        choice = rows[..., D:].argmax(-1) if space.comm_dim else None
        by_group[group.name] = encode_torch(space, rows[..., :D], low[group.agents, :D], high[group.agents, :D], choice)
    if env.action_space is not None:  # one discrete space for every agent: one tensor
        return torch.cat(list(by_group.values()), dim=1)
    return by_group
