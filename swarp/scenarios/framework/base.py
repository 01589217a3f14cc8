"""Scenario framework: the torch reference (``Scenario``) and its fast Warp twin (``FusedScenario``).

A scenario author writes the readable torch version first: it *is* the specification of the
observations, rewards, termination and resets, and it is differentiable. The fused twin
computes the same quantities with Warp kernels writing into the environment's persistent
buffers, which is what makes the whole step capturable in one CUDA graph. Tests pin the two
together. Vocabulary follows VMAS (``make_world``, ``reset_world``, ``observation``...), but every
method is vectorised over envs and agents: tensors are ``[n_envs, n_agents, ...]``.

Auto-reset, time limits and batching are mechanisms of the ``Environment``, not of scenarios.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from swarp.core.config import AgentConfig, Integrator, WorldConfig
from swarp.core.groups import GroupSpec
from swarp.runtime.launch import Launcher
from swarp.runtime.rows import OBSERVE_ONLY, OBSERVE_RESET, OBSERVE_STEP  # noqa: F401 (the observe modes)

if TYPE_CHECKING:
    from swarp.env.environment import Environment
    from swarp.runtime.step_end import StepEndHooks


@dataclass(frozen=True)
class WorldSpec:
    """What ``Scenario.make_world`` returns: the physical world the scenario runs in.

    Attributes:
        agents: One ``AgentConfig`` per agent.
        world: The ``WorldConfig``.
        dt: Step length [s].
        substeps: Physics substeps per step.
        integrator: Time integrator.
        max_steps: Default episode length [steps] (the environment's ``max_steps`` overrides it;
            ``None`` means no time limit).
        n_obstacle_slots: Per-env obstacle slots the scenario writes at reset (0: only the
            world's shared static obstacles).
        groups: Named groups of consecutive agents (``swarp.core.groups.GroupSpec``, in agent
            order), each with its observation width; empty: one group ``"agents"`` of them all.
        comm_dim: C, the width of the communication channel (VMAS's ``dim_c``): every agent of a
            group that is not ``silent`` sends a C-wide message with its action (``env.comm``),
            which observations may hear (``Environment.messages``); 0: no channel.
        alive_mask: Whether the world keeps a per-agent alive mask (``swarp.runtime.alive``): the
            scenario's resets and steps write ``env.alive`` (agents absent from an episode, agents
            that left); without it nothing of the mask is allocated or launched.
    """

    agents: tuple[AgentConfig, ...]
    world: WorldConfig = field(default_factory=WorldConfig)
    dt: float = 0.1
    substeps: int = 1
    integrator: Integrator = Integrator.EULER
    max_steps: int | None = 200
    n_obstacle_slots: int = 0
    groups: tuple[GroupSpec, ...] = ()
    comm_dim: int = 0
    alive_mask: bool = False

    def __post_init__(self):
        if not isinstance(self.comm_dim, int) or isinstance(self.comm_dim, bool) or self.comm_dim < 0:
            raise ValueError(f"WorldSpec.comm_dim must be an int >= 0, got {self.comm_dim!r}")


class Scenario:
    """Base class of the torch reference of a scenario.

    Subclasses set ``name``, a frozen dataclass ``Config`` of their options (validated in its
    ``__post_init__``) and implement the methods below. After ``make_world`` the environment calls
    ``bind(env)``; from then on ``self.env``, ``self.world`` (the ``World``), ``self.n_envs`` and
    ``self.device`` are available.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type] = object
    #: Whether a Warp twin exists (``FusedScenario`` sets it).
    fused_available: ClassVar[bool] = False

    def __init__(self, **options: Any):
        fields = {f.name for f in dataclasses.fields(self.Config)}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for scenario {self.name!r}; valid options: {sorted(fields)}")
        self.cfg = self.Config(**options)
        self.env: Environment | None = None

    @classmethod
    def option_names(cls) -> list[str]:
        """The keyword options this scenario accepts."""
        return sorted(f.name for f in dataclasses.fields(cls.Config))

    # --- construction --------------------------------------------------------------------

    def make_world(self) -> WorldSpec:
        """Describe the agents and the world. Called once, before any buffer exists."""
        raise NotImplementedError

    def bind(self, env: Environment) -> None:
        """Attach to the environment and allocate the scenario's persistent device tensors."""
        self.env = env
        self.world = env.world
        self.n_envs = env.n_envs
        self.n_agents = env.n_agents
        self.device = env.device
        self.dtype = env.dtype

    @property
    def obs_dim(self) -> int:
        """Width of one agent's observation vector."""
        raise NotImplementedError

    # --- the torch reference (the spec) ---------------------------------------------------

    def reset_world(self, env_mask: torch.Tensor) -> None:
        """Re-sample the state of the envs where ``env_mask`` [E] bool is set; leave others untouched.

        Draws must come from ``swarp.core.rng`` keyed by ``(seed, global env, episode)`` (see
        ``Environment.rng_keys``) so the fused twin can reproduce them bit for bit and a shard of
        a batch (``Environment.env_offset``) draws what the unsplit batch draws.
        """
        raise NotImplementedError

    def post_step(self) -> None:
        """Advance per-step scenario memory that observations read (a moving target, discovered
        targets). Called once per step, after the physics and before ``observations``; never after
        a reset. Values it stores must be detached (a grad-mode step calls it too). Default: nothing.
        """

    def observations(self) -> torch.Tensor:
        """[E, A, obs_dim] observations of the current state."""
        raise NotImplementedError

    def rewards(self) -> torch.Tensor:
        """[E, A] rewards of the transition that led to the current state.

        May update per-step scenario memory (e.g. the previous distance for progress shaping);
        it is called exactly once per step, after ``observations``.
        """
        raise NotImplementedError

    def done(self) -> torch.Tensor:
        """[E] bool: has the episode reached a terminal state (success or failure)?"""
        raise NotImplementedError

    def info(self) -> dict[str, torch.Tensor]:
        """Per-step diagnostics, each a tensor with leading dim E (keys as in ``info_buffers``)."""
        return {}

    def info_buffers(self) -> dict[str, torch.Tensor]:
        """Persistent device tensors the environment returns as ``info`` (allocated in ``bind``).

        The fused kernels write them in place; on the torch path the environment copies ``info()``
        into them, so both paths hand out the same tensors.
        """
        return {}

    def success(self) -> torch.Tensor:
        """[E] bool success metric used by training and evaluation (defaults to ``done``)."""
        return self.done()

    def scripted_actions(self) -> torch.Tensor:
        """A scripted (greedy) controller for this scenario: [E, A, act_dim] actions for the current
        state, in physical units inside ``env.action_bounds``.

        It proves the task is solvable and drives demos and pictures; it may read the whole state
        (it is not a decentralised policy). Raises ``NotImplementedError`` where there is none.
        """
        raise NotImplementedError(f"scenario {self.name!r} has no scripted controller")

    # --- snapshot ---------------------------------------------------------------------------

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The scenario's persistent device tensors that ``get_state`` / ``set_state`` must cover."""
        return {}

    # --- rendering --------------------------------------------------------------------------

    def drawables(self, env_index: torch.Tensor) -> list:
        """What the renderer draws for this scenario besides agents, obstacles and bounds.

        Called by ``swarp.render`` only (never on the step path); it must index device tensors,
        not copy them to the host (the renderer makes one copy of everything per frame).

        Args:
            env_index: [N] int64 device tensor, the envs being drawn.

        Returns:
            A list of ``swarp.scenarios.framework.drawables`` records (``Circles``, ``Segments``, ``Crosses``,
            ``Boxes``) whose tensors have leading dim N (e.g. ``self.goals[env_index]``), in world
            units [m]. Drawn above obstacles and below agents. Default: nothing.
        """
        return []


class FusedScenario(Scenario):
    """A scenario with a Warp twin of its observations, rewards, termination and reset.

    The fused launches write into the environment's persistent device buffers, reached through
    ``self.buffers`` (a ``swarp.runtime.buffers.EnvBuffers``, set by ``bind``: ``obs``, ``reward``,
    ``terminated``, ``final_obs_saved``, ``episode_args``, ``reset_streams``...), and into the
    scenario's own (its info tensors), and must not allocate, so they can be recorded and captured.
    Every launch takes its thread layout from ``self.plan`` (``plan.split``, ``plan.env_block``).

    Three optional fusions save launches on the step (each a launch of a few microseconds on the
    GPU, which is most of a small batch's step):

    * ``builds_neighbors``: the observation kernel builds every observed agent's neighbor list
      itself (through ``world.neighbor_query()``, after ``world.prepare_neighbors``), so the
      environment launches no separate rebuild.
    * ``saves_final_obs``: with ``mode=OBSERVE_ONLY`` (the auto-reset of finished envs) the masked
      observation kernel copies each row it is about to overwrite to ``buffers.final_obs_saved``
      (``rows.observe_kernels`` does; the whole row, or its scenario columns when a lidar's masked
      scan keeps its own), so the environment launches no separate copy.
    * ``ends_steps``: a per-env kernel of ``launch_observe(mode=OBSERVE_STEP)`` finishes the step
      by calling ``swarp.runtime.episode.funcs(scalar).end_step(buffers.episode_args, env,
      terminated)``, so the environment launches no separate bookkeeping kernel. Otherwise it must
      write ``buffers.terminated`` and the environment does the rest.

    And one promise about the health flag (``swarp.runtime.health``):

    * ``checks_finite``: every observation and reward its kernels store is checked where it is
      stored (the row wrappers of ``swarp.runtime.rows`` check the rows; the scenario checks each
      final reward with ``health.flag_env(buffers.non_finite, env, health.finite(r))``), so the
      environment launches no kernel that reads them back (``health.check_outputs_kernel``).
    """

    fused_available: ClassVar[bool] = True
    builds_neighbors: ClassVar[bool] = False
    ends_steps: ClassVar[bool] = False
    saves_final_obs: ClassVar[bool] = False
    checks_finite: ClassVar[bool] = False

    def bind(self, env: Environment) -> None:
        super().bind(env)
        self.buffers = env.buffers
        self.plan = env.plan

    def launch_observe(self, launcher: Launcher, env_mask=None, mode: int = OBSERVE_STEP) -> None:
        """Launch the observation kernels (and, per ``mode``, rewards, termination and info).

        Args:
            launcher: Where launches go.
            env_mask: Optional [E] bool Warp array: only these envs are recomputed (after a reset).
            mode: ``OBSERVE_STEP``, ``OBSERVE_ONLY`` or ``OBSERVE_RESET``; the latter two also
                re-initialise per-episode reward memory (e.g. the previous distance to goal).
        """
        raise NotImplementedError

    def launch_reset(self, launcher: Launcher, env_mask) -> None:
        """Launch the masked single-kernel reset for envs where ``env_mask`` [E] bool is set.

        Key the draws with ``swarp.core.rng.episode_key(buffers.reset_streams, env)``: it folds in
        the seed, the episode counter and the env's global index (``Environment.env_offset``).
        """
        raise NotImplementedError

    def supports_graph_reset(self) -> bool:
        """Whether ``launch_reset`` is capture-safe (no host RNG, no allocation, no host branching)."""
        return True

    def step_end_hooks(self, spec: WorldSpec) -> StepEndHooks | None:
        """Optional: this scenario's part in ending small batches' steps faster (one fused kernel,
        restarts from starts prepared ahead; ``swarp.runtime.step_end``) for the world ``spec``,
        or ``None`` (the default; nothing else changes without it). Called before ``bind``."""
        return None


_REGISTRY: dict[str, type[Scenario]] = {}


def register_scenario(name: str, cls: type[Scenario] | None = None):
    """Register a scenario class under ``name`` for ``swarp.make``: ``register_scenario("mine", Mine)``,
    or as a class decorator, ``@register_scenario("mine")`` (returns the class).

    Raises:
        ValueError: ``name`` is not a non-empty string.
        TypeError: ``cls`` is not a ``Scenario`` subclass, or its ``Config`` is not a dataclass.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"scenario name must be a non-empty string, got {name!r}")
    if cls is None:
        return lambda decorated: register_scenario(name, decorated)
    if not (isinstance(cls, type) and issubclass(cls, Scenario)):
        raise TypeError(f"register_scenario({name!r}, ...) needs a Scenario subclass, got {cls!r}")
    if not (isinstance(cls.Config, type) and dataclasses.is_dataclass(cls.Config)):
        raise TypeError(f"register_scenario({name!r}, {cls.__name__}): {cls.__name__}.Config must be a dataclass "
                        f"of the scenario's options (@dataclass(frozen=True)), got {cls.Config!r}")  # fmt: skip
    if not cls.name:
        cls.name = name
    _REGISTRY[name] = cls
    return cls


def unregister_scenario(name: str) -> None:
    """Remove ``name`` from the registry (a scenario re-defined in a notebook, a test's scenario)."""
    get_scenario(name)  # a clear error for an unknown name
    del _REGISTRY[name]


def import_scenario_modules(argv: list[str] | None) -> list[str]:
    """Import the module of every ``--import MODULE`` in ``argv`` (default: ``sys.argv[1:]``), so
    the scenarios it registers exist before a command line lists its scenario choices; returns the
    modules imported. The command line declares the flag too (``add_import_flag``), for ``--help``."""
    import argparse
    import importlib
    import sys

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--import", dest="modules", action="append", default=[])
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    for module in known.modules:
        importlib.import_module(module)
    return known.modules


def add_import_flag(parser) -> None:
    """Declare ``--import MODULE`` (repeatable) on an ``argparse`` parser (see ``import_scenario_modules``)."""
    parser.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                        help="import this module first (it registers your scenarios; repeatable)")  # fmt: skip


def scenario_names() -> list[str]:
    """Names of the registered scenarios, sorted."""
    return sorted(_REGISTRY)


def get_scenario(name: str) -> type[Scenario]:
    """The scenario class registered under ``name`` (clear error listing the known names)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; registered scenarios: {scenario_names()}") from None
