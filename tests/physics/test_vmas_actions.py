"""``swarp/physics/vmas_mode/actions.py``: VMAS's action processing against VMAS 1.5.2 itself.

Each world runs in VMAS with ``N_ENVS`` envs for ``N_STEPS`` steps of VMAS's own random actions
through the physics half of ``Environment.step`` (``vmas_parity.step_physics``), recording the agents'
``state.force`` / ``state.torque`` as ``World.step`` receives them; ``VmasActions`` processes the same
actions, and the forces, torques, commands (``agent.action.u``) and messages (``agent.action.c``)
must be VMAS's to the bit (compared as int32 bit patterns, so even the sign of a zero counts). The
worlds: navigation (continuous, discrete, multidiscrete), transport (``u_multiplier`` 0.6),
simple_speaker_listener (a speaking, immovable agent: ``dim_c`` 3) and ``Rotating``, a scenario of
this file (``HolonomicWithRotation``, per-column ranges and multipliers, uneven discrete levels,
``u_noise`` and ``c_noise`` with VMAS's own normals replayed).
"""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from swarp.physics.vmas_mode import SPHERE, EntitySpec, EntityTable, VmasWorldConfig
from swarp.physics.vmas_mode.actions import AgentAction, VmasActions
from swarp.testing import forbid_host_transfers
from swarp.testing.vmas_parity import (
    agent_action,
    agent_messages,
    entity_table,
    record_world_steps,
    step_physics,
    vmas_actions,
)

vmas = pytest.importorskip("vmas")
core = pytest.importorskip("vmas.simulator.core")
BaseScenario = pytest.importorskip("vmas.simulator.scenario").BaseScenario
HolonomicWithRotation = pytest.importorskip("vmas.simulator.dynamics.holonomic_with_rot").HolonomicWithRotation

N_ENVS = 16
N_STEPS = 20
KINDS = {
    "continuous": {},
    "discrete": {"continuous_actions": False},
    "multidiscrete": {"continuous_actions": False, "multidiscrete_actions": True},
}


class Rotating(BaseScenario):
    """Two agents and a goal, for the action pipeline only: a silent ``HolonomicWithRotation`` agent
    (ranges (1, 0.5, 0.25), multipliers (2, 1, 0.3), levels (3, 4, 5), ``u_noise`` 0.1) and a
    speaking holonomic one (range 0.7, multiplier 0.6, levels (2, 7), ``u_noise`` 0.2, ``c_noise``
    0.05) in a world with ``dim_c`` 2. The speaker is holonomic because VMAS reads a continuous
    message from column 2 whatever the action size (docs/vmas_reference.md, 2.1)."""

    def make_world(self, batch_dim, device, **kwargs):
        world = core.World(batch_dim, device, dim_c=2)
        world.add_landmark(core.Landmark("goal", collide=False))
        world.add_agent(
            core.Agent(
                "turner",
                dynamics=HolonomicWithRotation(),
                u_range=[1.0, 0.5, 0.25],
                u_multiplier=[2.0, 1.0, 0.3],
                discrete_action_nvec=[3, 4, 5],
                u_noise=0.1,
            )
        )
        world.add_agent(
            core.Agent(
                "speaker",
                u_range=0.7,
                u_multiplier=0.6,
                discrete_action_nvec=[2, 7],
                u_noise=0.2,
                silent=False,
                c_noise=0.05,
            )
        )
        return world

    def reset_world_at(self, env_index=None):
        pass

    def observation(self, agent):
        return agent.state.pos

    def reward(self, agent):
        return torch.zeros(self.world.batch_dim, device=self.world.device)


WORLDS = {"navigation": ("navigation", tuple(KINDS)), "transport": ("transport", ("continuous", "discrete"))}
WORLDS["speaker_listener"] = ("simple_speaker_listener", tuple(KINDS))
WORLDS["rotating"] = (Rotating, tuple(KINDS))


def bits(values: torch.Tensor) -> torch.Tensor:
    """The float32 ``values`` as their int32 bit patterns."""
    return values.contiguous().view(torch.int32)


def vmas_noise(env, processing: VmasActions) -> tuple[torch.Tensor, torch.Tensor]:
    """``(noise [E, A, D], comm_noise [E, A, C])``: the normals VMAS's next ``_set_action`` calls will
    draw from its stream (agent by agent: ``u_noise``'s, then ``c_noise``'s), drawn from a copy of it."""
    noise = torch.zeros(env.num_envs, processing.n_agents, processing.physical_dim)
    comm_noise = torch.zeros(env.num_envs, processing.n_agents, processing.comm_dim)
    saved = torch.random.get_rng_state()
    torch.random.set_rng_state(env.vmas_random_state[0])
    try:
        for index, agent in enumerate(env.agents):
            if agent.u_noise > 0:
                noise[:, index, : agent.action_size] = torch.randn(env.num_envs, agent.action_size)
            if processing.comm_dim and not agent.silent and agent.c_noise > 0:
                comm_noise[:, index] = torch.randn(env.num_envs, processing.comm_dim)
    finally:
        torch.random.set_rng_state(saved)
    return noise, comm_noise


@pytest.mark.parametrize(
    ("label", "kind"), [(label, kind) for label, (_, kinds) in WORLDS.items() for kind in kinds], ids=str
)
def test_forces_equal_vmas(label, kind):
    scenario = WORLDS[label][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VMAS warns about unused scenario keywords
        env = vmas.make_env(
            scenario if isinstance(scenario, str) else scenario(), num_envs=N_ENVS, seed=0, device="cpu", **KINDS[kind]
        )
    table, _ = entity_table(env.world)
    processing = vmas_actions(env, table)
    assert processing.kind == kind
    with record_world_steps(env.world) as records:
        for step in range(N_STEPS):
            actions = env.get_random_actions()
            given = processing.stack(actions)
            noise, comm_noise = vmas_noise(env, processing)
            with forbid_host_transfers():
                ours = processing(given, noise, comm_noise)
            step_physics(env, [a.clone() for a in actions])
            theirs = records[-1]
            assert torch.equal(bits(ours.force), bits(theirs.force)), f"step {step}: forces differ"
            assert torch.equal(bits(ours.torque), bits(theirs.torque)), f"step {step}: torques differ"
            assert torch.equal(bits(ours.message), bits(agent_messages(env))), f"step {step}: messages differ"
            for index, agent in enumerate(env.agents):
                assert torch.equal(bits(ours.u[:, index, : agent.action_size]), bits(agent.action.u))
            assert not ours.bad.any()
    if label == "transport":
        assert {a.u_multiplier for a in processing.agents} == {(0.6, 0.6)}
    if label == "rotating":
        assert processing.has_u_noise and processing.has_c_noise and processing.has_torque
    if label == "speaker_listener":
        assert ours.message.abs().sum() > 0 and not ours.message[:, 1].any()


def spheres_table(n_landmarks: int, n_agents: int) -> EntityTable:
    specs = [EntitySpec(collide=False)] * n_landmarks
    specs += [EntitySpec(shape=SPHERE, movable=True, rotatable=True, is_agent=True)] * n_agents
    return EntityTable.from_specs(specs, VmasWorldConfig())


def test_out_of_box_and_non_finite_continuous_actions():
    """swarp's rule: a physical column is clamped to its range, a message to [0, 1]; a non-finite entry
    acts as 0 and flags the agent. The force lands in the agents' rows only."""
    agents = [AgentAction(dynamics="holonomic_rotation", u_range=(1.0, 2.0, 0.5), silent=False), AgentAction()]
    processing = VmasActions(agents, spheres_table(1, 2), comm_dim=1)
    actions = torch.tensor(
        [
            [[3.0, -5.0, 0.25, 1.5], [0.5, -0.5, 0.0, 0.0]],
            [[float("nan"), 1.0, float("inf"), -2.0], [0.0, float("nan"), 0.0, 0.0]],
        ]
    )
    out = processing(actions)
    assert out.u.tolist() == [[[1.0, -2.0, 0.25], [0.5, -0.5, 0.0]], [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]
    assert out.message.tolist() == [[[1.0], [0.0]], [[0.0], [0.0]]]
    assert out.bad.tolist() == [[False, False], [True, True]]
    assert out.force[:, 0].eq(0).all() and out.force[0, 1:].tolist() == [[1.0, -2.0], [0.5, -0.5]]
    assert out.torque.tolist() == [[0.0, 0.25, 0.0], [0.0, 0.0, 0.0]]


def test_out_of_range_indices_act_as_zero():
    processing = VmasActions([AgentAction(silent=False)] * 2, spheres_table(0, 2), kind="discrete", comm_dim=2)
    out = processing(torch.tensor([[[17], [18]], [[-1], [5]]]))  # 9 x 2 choices: 18 and -1 are out
    assert out.bad.tolist() == [[False, True], [True, False]]
    assert out.u.tolist() == [[[1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]]  # 5: digits (0, 2, 1)
    assert out.message.tolist() == [[[0.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]]


def test_noise_scales_and_is_required():
    processing = VmasActions([AgentAction(u_noise=0.5), AgentAction()], spheres_table(0, 2))
    actions = torch.zeros(1, 2, 2)
    with pytest.raises(ValueError, match="u_noise > 0: noise must be"):
        processing(actions)
    out = processing(actions, noise=torch.ones(1, 2, 2))
    assert out.u.tolist() == [[[0.5, 0.5], [0.0, 0.0]]]


def test_continuous_actions_are_differentiable():
    processing = VmasActions([AgentAction(u_multiplier=(0.5, 2.0), u_range=1.0)], spheres_table(1, 1))
    actions = torch.tensor([[[0.3, 1.5]]], requires_grad=True)
    processing(actions).force.sum().backward()
    assert actions.grad.tolist() == [[[0.5, 0.0]]]  # the clamped column passes no gradient


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dynamics": "diff_drive"}, "'holonomic' .*'holonomic_rotation'.*diff_drive"),
        ({"dynamics": "holonomic_rotation", "action_size": 2}, "action_size must be an int >= 3"),
        ({"u_range": (1.0,)}, "u_range must be a number or 2 numbers"),
        ({"u_range": -1.0}, "u_range must be >= 0"),
        ({"nvec": (3, 1)}, "nvec must give 2 ints >= 2"),
        ({"u_noise": -0.1}, "u_noise must be a finite number >= 0"),
        ({"u_multiplier": float("inf")}, "u_multiplier must be finite"),
    ],
)
def test_agent_action_is_checked(options, message):
    with pytest.raises(ValueError, match=message):
        AgentAction(**options)


def test_vmas_actions_are_checked():
    table = spheres_table(1, 2)
    agent_first = EntityTable.from_specs([EntitySpec(is_agent=True, movable=True), EntitySpec()], VmasWorldConfig())
    with pytest.raises(ValueError, match="last 1 rows"):
        VmasActions([AgentAction()], agent_first)
    with pytest.raises(ValueError, match="kind must be one of"):
        VmasActions([AgentAction()] * 2, table, kind="box")
    processing = VmasActions([AgentAction()] * 2, table)
    with pytest.raises(ValueError, match=r"actions must have shape \[E, 2, 2\]"):
        processing(torch.zeros(4, 2, 3))
    with pytest.raises(TypeError, match="continuous actions must have dtype torch.float32"):
        processing(torch.zeros(4, 2, 2, dtype=torch.float64))


def test_vmas_dynamics_outside_the_mode_are_refused():
    env = vmas.make_env("diff_drive", num_envs=1, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"DiffDrive: the VMAS mode models Holonomic \(.holonomic.\)"):
        vmas_actions(env, entity_table(env.world)[0])
    scripted = types.SimpleNamespace(name="keeper", action_script=lambda agent, world: None)
    with pytest.raises(ValueError, match="scripted"):
        agent_action(scripted)
