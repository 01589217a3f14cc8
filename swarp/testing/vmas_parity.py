"""Parity with VMAS 1.5.2: the VMAS physics mode's inputs read from a live VMAS world.

``entity_table`` turns a ``vmas.simulator.core.World`` into the mode's ``EntityTable`` and
``VmasWorldConfig``, ``entity_state`` and ``agent_forces`` read its state and the agents' processed
action forces, and ``record_world_steps`` records what every ``World.step`` of an env started from
and ended in, so a test can step ``swarp.physics.vmas_mode.step_torch`` from the same inputs:

    env = vmas.make_env("balance", num_envs=16, seed=0)
    table, config = entity_table(env.world)
    with record_world_steps(env.world) as steps:
        env.step(env.get_random_actions())       # or step_physics(env, actions): the physics only
    step = steps[0]
    ours = step_torch(table, config, step.before, step.force, step.torque)   # == step.after

``agent_action`` / ``vmas_actions`` read the policy agents' action settings (ranges, multipliers,
noise, dynamics, discrete levels, messages) into the mode's ``VmasActions``, whose forces a test
compares with a recorded step's ``force`` / ``torque`` and whose messages with ``agent_messages``.

VMAS is imported inside the functions (``pip install vmas==1.5.2``); the rest of swarp never needs it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from swarp.physics.vmas_mode import BOX, LINE, SPHERE, EntitySpec, EntityState, EntityTable, VmasWorldConfig
from swarp.physics.vmas_mode.actions import DYNAMICS, AgentAction, VmasActions

#: The VMAS release the VMAS mode follows (docs/vmas_reference.md).
VMAS_REQUIREMENT = "vmas==1.5.2"


def vmas_core():
    """VMAS's ``vmas.simulator.core`` module, or an ``ImportError`` saying how to install it."""
    try:
        from vmas.simulator import core
    except ImportError as error:
        raise ImportError(f"swarp.testing.vmas_parity needs VMAS: pip install {VMAS_REQUIREMENT}") from error
    return core


def vmas_private(obj, name: str):
    """VMAS's private attribute ``_name`` of ``obj``: VMAS 1.5.2 keeps the world's substeps, drag,
    frictions, gravity and force scales there, with no accessor."""
    return vars(obj)[f"_{name}"]


def scalar(value, what: str) -> float | None:
    """``value`` (a number, a one-element tensor or ``None``) as a Python float; ``ValueError`` for a
    per-env tensor, which the table cannot hold."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{what} is a tensor of shape {list(value.shape)}: the table holds one value per entity")
        return float(value.item())
    return float(value)


def world_config(world) -> VmasWorldConfig:
    """The ``VmasWorldConfig`` of a VMAS ``World``."""
    gravity = vmas_private(world, "gravity")
    return VmasWorldConfig(
        dt=float(world.dt),
        substeps=int(vmas_private(world, "substeps")),
        drag=float(vmas_private(world, "drag")),
        linear_friction=float(vmas_private(world, "linear_friction")),
        angular_friction=float(vmas_private(world, "angular_friction")),
        gravity=tuple(float(g) for g in gravity.tolist()),
        x_semidim=scalar(world.x_semidim, "World.x_semidim"),
        y_semidim=scalar(world.y_semidim, "World.y_semidim"),
        collision_force=float(vmas_private(world, "collision_force")),
        joint_force=float(vmas_private(world, "joint_force")),
        torque_constraint_force=float(vmas_private(world, "torque_constraint_force")),
        contact_margin=float(vmas_private(world, "contact_margin")),
    )


def entity_spec(entity) -> EntitySpec:
    """The ``EntitySpec`` of one VMAS ``Landmark`` or ``Agent``."""
    core = vmas_core()
    shape = entity.shape
    if isinstance(shape, core.Sphere):
        code, size, hollow = SPHERE, (float(shape.radius), 0.0), False
    elif isinstance(shape, core.Box):
        code, size, hollow = BOX, (float(shape.length), float(shape.width)), bool(shape.hollow)
    elif isinstance(shape, core.Line):
        code, size, hollow = LINE, (float(shape.length), 0.0), False
    else:
        raise ValueError(
            f"entity {entity.name!r} has a {type(shape).__name__}: the VMAS mode has spheres, boxes, lines"
        )
    gravity = entity.gravity
    if gravity is not None:
        gravity = torch.as_tensor(gravity, dtype=torch.float64).cpu()
        if gravity.numel() not in (1, 2):
            raise ValueError(f"entity {entity.name!r}'s gravity has shape {list(gravity.shape)}: one (x, y) expected")
        gravity = tuple(gravity.expand(2).tolist()) if gravity.numel() == 1 else tuple(gravity.flatten().tolist())
    is_agent = isinstance(entity, core.Agent)
    agent_limits = {
        name: scalar(getattr(entity, name), f"{entity.name}.{name}") if is_agent else None
        for name in ("max_f", "f_range", "max_t", "t_range")
    }
    return EntitySpec(
        shape=code,
        size=size,
        hollow=hollow,
        mass=float(entity.mass),
        movable=bool(entity.movable),
        rotatable=bool(entity.rotatable),
        collide=bool(entity.collide),
        is_agent=is_agent,
        drag=scalar(entity.drag, f"{entity.name}.drag"),
        linear_friction=scalar(entity.linear_friction, f"{entity.name}.linear_friction"),
        angular_friction=scalar(entity.angular_friction, f"{entity.name}.angular_friction"),
        gravity=gravity,
        max_speed=scalar(entity.max_speed, f"{entity.name}.max_speed"),
        v_range=scalar(entity.v_range, f"{entity.name}.v_range"),
        **agent_limits,
    )


def entity_table(world) -> tuple[EntityTable, VmasWorldConfig]:
    """The VMAS mode's model of a live VMAS 1.5.2 ``World`` (after ``make_env`` or a reset): its
    ``EntityTable`` (rows in ``world.entities`` order, on the world's device, collision filters
    resolved on the host) and ``VmasWorldConfig``.

    Raises:
        ValueError: The world has joints (not modelled yet), a shape other than sphere, box or
            line, or a per-env parameter tensor.
    """
    if len(list(world.joints)):
        raise ValueError("the world has joints: the VMAS mode does not model joints yet")
    config = world_config(world)
    entities = world.entities
    accepts = torch.tensor([[a is not b and a.collides(b) for b in entities] for a in entities], dtype=torch.bool)
    specs = [entity_spec(entity) for entity in entities]
    return EntityTable.from_specs(specs, config, accepts, device=world.device), config


def entity_state(world) -> EntityState:
    """A copy of the world's state: ``pos`` / ``vel`` [E, N, 2], ``rot`` / ``ang_vel`` [E, N], float32,
    with E = ``world.batch_dim`` envs and N entities in ``world.entities`` order."""
    states = [entity.state for entity in world.entities]
    return EntityState(
        pos=torch.stack([s.pos for s in states], dim=1).to(torch.float32),
        vel=torch.stack([s.vel for s in states], dim=1).to(torch.float32),
        rot=torch.stack([s.rot[:, 0] for s in states], dim=1).to(torch.float32),
        ang_vel=torch.stack([s.ang_vel[:, 0] for s in states], dim=1).to(torch.float32),
    )


def agent_forces(world) -> tuple[torch.Tensor, torch.Tensor]:
    """The agents' ``state.force`` [E, N, 2] [N] and ``state.torque`` [E, N] [N m] (copies, float32)
    placed in their ``world.entities`` rows, zeros in the landmarks' rows. Read between the action
    processing and ``World.step`` (``record_world_steps`` does), they are the step's inputs."""
    core = vmas_core()
    entities = world.entities
    first = entities[0].state.pos
    force = torch.zeros(first.shape[0], len(entities), 2, dtype=torch.float32, device=first.device)
    torque = torch.zeros(first.shape[0], len(entities), dtype=torch.float32, device=first.device)
    for row, entity in enumerate(entities):
        if isinstance(entity, core.Agent):
            force[:, row] = entity.state.force
            torque[:, row] = entity.state.torque[:, 0]
    return force, torque


def agent_action(agent) -> AgentAction:
    """The ``AgentAction`` of one VMAS policy ``Agent``.

    Raises:
        ValueError: The agent is scripted (``action_script``), or its dynamics is not modelled (the
            message lists those that are).
    """
    if agent.action_script is not None:
        raise ValueError(f"agent {agent.name!r} is scripted (action_script): the VMAS mode has policy agents only")
    by_class = {cls: name for name, (cls, _) in DYNAMICS.items()}
    kind = type(agent.dynamics).__name__
    if kind not in by_class:
        modelled = ", ".join(f"{cls} ({name!r})" for cls, name in by_class.items())
        raise ValueError(f"agent {agent.name!r} has VMAS dynamics {kind}: the VMAS mode models {modelled}")
    u_noise = agent.action.u_noise
    return AgentAction(
        dynamics=by_class[kind],
        action_size=int(agent.action_size),
        u_range=agent.action.u_range,  # VMAS's Python numbers, rounded to float32 once, where VMAS rounds them
        u_multiplier=agent.action.u_multiplier,
        u_noise=0.0 if u_noise is None else float(u_noise),
        nvec=tuple(int(n) for n in agent.discrete_action_nvec),
        silent=bool(agent.silent),
        c_noise=0.0 if agent.c_noise is None else float(agent.c_noise),
    )


def vmas_actions(env, table: EntityTable) -> VmasActions:
    """The mode's ``VmasActions`` of a VMAS ``Environment`` (its policy agents, its action kind and
    ``dim_c``) over ``table`` (``entity_table(env.world)``)."""
    if len(env.agents) != len(env.world.agents):
        raise ValueError("the world has scripted agents: the VMAS mode has policy agents only")
    kind = "continuous" if env.continuous_actions else "multidiscrete" if env.multidiscrete_actions else "discrete"
    return VmasActions([agent_action(agent) for agent in env.agents], table, kind, int(env.world.dim_c))


def agent_messages(env) -> torch.Tensor:
    """[E, A, C] float32 the policy agents' ``action.c`` (the message of their last ``_set_action``),
    zeros for a silent agent."""
    dim_c = int(env.world.dim_c)
    messages = torch.zeros(env.num_envs, len(env.agents), dim_c, dtype=torch.float32, device=env.device)
    for index, agent in enumerate(env.agents):
        if dim_c and not agent.silent:
            messages[:, index] = agent.action.c
    return messages


@dataclass(frozen=True)
class WorldStep:
    """One recorded ``World.step``: the state it started from (``before``), the agents' action
    ``force`` [E, N, 2] and ``torque`` [E, N] it applied (as ``agent_forces`` reads them) and the
    state it ended in (``after``)."""

    before: EntityState
    force: torch.Tensor
    torque: torch.Tensor
    after: EntityState


@contextlib.contextmanager
def record_world_steps(world) -> Iterator[list[WorldStep]]:
    """Within the block, every ``world.step()`` (as ``Environment.step`` calls it, after the action
    processing) appends a ``WorldStep`` to the yielded list. The world's own ``step`` runs unchanged;
    the block wraps it on the instance and restores the class's method on exit."""
    records: list[WorldStep] = []
    step = world.step

    def recorded_step() -> None:
        before, (force, torque) = entity_state(world), agent_forces(world)
        step()
        records.append(WorldStep(before, force, torque, entity_state(world)))

    world.step = recorded_step
    try:
        yield records
    finally:
        del world.step


def step_physics(env, actions: Sequence[torch.Tensor]) -> None:
    """VMAS's ``Environment.step`` up to and including the physics, for a test that needs only the
    physics: each policy agent's action is set (``Environment._set_action``: checks, clamps, the
    discrete mapping, ``u_multiplier``, noise), every agent's action processed
    (``scenario.env_process_action``: scripts, the scenario's ``process_action``, the dynamics' force),
    then ``pre_step``, ``world.step`` and ``post_step``, within VMAS's own random stream as ``step``
    runs them. It skips rewards, observations, dones and the step counter, which cost most of a step
    in scenarios such as passage and sampling; where a scenario's reward or observation changes the
    state, the physics differ from ``env.step``'s.

    Args:
        env: A VMAS ``Environment``.
        actions: One [E, action size] tensor per policy agent (``env.agents`` order), as ``env.step``
            takes them ([E] is read as [E, 1], as ``env.step`` reads a flat discrete index).
    """
    vmas_core()  # a clear ImportError without VMAS
    from vmas.simulator.environment.environment import local_seed

    with local_seed(env.vmas_random_state):
        for action, agent in zip(actions, env.agents, strict=True):
            env._set_action(action.unsqueeze(-1) if action.dim() == 1 else action, agent)  # as env.step
        for agent in env.world.agents:
            env.scenario.env_process_action(agent)
        env.scenario.pre_step()
        env.world.step()
        env.scenario.post_step()


def max_difference(ours: EntityState, theirs: EntityState) -> float:
    """The largest absolute difference of any field of two states (``inf`` where one is not finite
    and the other is, or where they differ in shape)."""
    worst = 0.0
    for a, b in zip(ours, theirs, strict=True):
        if a.shape != b.shape:
            return math.inf
        same_nan = torch.isnan(a) & torch.isnan(b)
        difference = torch.where(same_nan, 0.0, (a - b).abs().nan_to_num(math.inf))
        worst = max(worst, float(difference.max()) if difference.numel() else 0.0)
    return worst
