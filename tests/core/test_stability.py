"""Integration limits (``swarp/core/stability.py``): the substep maps transcribe the kernels, the
limits match their closed forms, every built-in scenario's defaults pass, unstable steps and
parameter tables are rejected with the limit and the fix, and the accepted range runs NaN-free."""

import math

import numpy as np
import pytest
import torch

import swarp
from swarp import AgentConfig, Stepper, World, WorldConfig
from swarp.core import stability
from swarp.core.config import Body, Obstacle
from swarp.core.stability import Scheme
from swarp.scenarios.framework.base import get_scenario

#: Agreement of a kernel substep with its linear map in float64 (rounding only).
MAP_TOL = 1e-12
K, C = 100.0, 2.0
WALL = WorldConfig(bounds=1.0, collision_k=K, collision_damping=C, collisions=False)


# --- the maps are the kernels' ------------------------------------------------------------------------


def wall_contact_step(agent: AgentConfig, integrator: str, h: float, pen: float, speed: float) -> tuple[float, float]:
    """One substep of an agent of radius 0.1 pressed ``pen`` [m] into the soft right wall at ``speed``
    [m/s] towards it, with a zero command: its (penetration, velocity) afterwards."""
    world = World(Stepper([agent], dt=h, device="cpu", world=WALL, integrator=integrator, dtype="float64"), 1)
    x0 = 1.0 - agent.radius + pen
    world.set_state(
        pos=torch.tensor([[[x0, 0.0]]], dtype=torch.float64),
        vel=torch.tensor([[[speed, 0.0]]], dtype=torch.float64),
        pos_z=torch.full((1, 1), 1.0, dtype=torch.float64),
    )
    world.step(torch.zeros(1, 1, world.stepper.act_dim, dtype=torch.float64))
    state = world.state.torch
    return float(state.pos[0, 0, 0]) - (1.0 - agent.radius), float(state.vel[0, 0, 0])


@pytest.mark.parametrize(
    ("agent", "integrator", "scheme"),
    [
        (AgentConfig(radius=0.1), "euler", Scheme.VELOCITY_LEVEL),
        (AgentConfig(radius=0.1, model="diff_drive"), "rk4", Scheme.VELOCITY_LEVEL),
        (AgentConfig(radius=0.1, ctrl_mode="acceleration", mass=0.7, drag=0.4), "euler", Scheme.SEMI_IMPLICIT),
        (AgentConfig(radius=0.1, ctrl_mode="acceleration", mass=0.7, drag=0.4), "rk4", Scheme.RK4_HELD),
        (AgentConfig(radius=0.1, model="drone", mass=0.8, drag=0.3), "euler", Scheme.SEMI_IMPLICIT),
        (AgentConfig(radius=0.1, model="drone", mass=0.8, drag=0.3), "rk4", Scheme.RK4_HELD),
    ],
)
def test_an_agent_substep_against_a_wall_is_its_linear_map(agent, integrator, scheme):
    h, pen, speed = 0.05, 0.01, 0.05
    assert stability.scheme_of(agent.model, agent.ctrl_mode, swarp.Integrator[integrator.upper()]) == scheme
    drag = agent.drag if scheme != Scheme.VELOCITY_LEVEL else 0.0
    M = stability.substep_map(scheme, h, K / agent.mass, C / agent.mass, drag)
    expected = M @ np.array([pen, speed])
    got = wall_contact_step(agent, integrator, h, pen, speed)
    np.testing.assert_allclose(got, expected, rtol=0, atol=MAP_TOL)


def test_a_body_substep_against_a_wall_is_its_linear_map():
    """A 0.6 kg disc body (contact lever 0: W = 1/M) with implicit damping, pressed into the wall."""
    disc = Body((Obstacle.circle((0, 0), 0.1),), mass=0.6, linear_damping=0.5, angular_damping=0.8)
    world_cfg = WorldConfig(bounds=1.0, collision_k=K, collision_damping=C, bodies=(disc,))
    h, pen, speed = 0.05, 0.01, 0.05
    world = World(Stepper([AgentConfig()], dt=h, device="cpu", world=world_cfg, dtype="float64"), 1)
    world.set_state(
        pos=torch.tensor([[[-0.5, 0.0]]], dtype=torch.float64),
        body_pos=torch.tensor([[[0.9 + pen, 0.0]]], dtype=torch.float64),
        body_vel=torch.tensor([[[speed, 0.0]]], dtype=torch.float64),
    )
    world.step(torch.zeros(1, 1, 2, dtype=torch.float64))
    (term,) = stability.body_terms(world_cfg)
    assert term.inverse_mass == 1.0 / 0.6 and term.drag == 0.5
    expected = stability.substep_map(Scheme.BODY, h, K / 0.6, C / 0.6, 0.5) @ np.array([pen, speed])
    state = world.state.torch
    got = (float(state.body_pos[0, 0, 0]) - 0.9, float(state.body_vel[0, 0, 0]))
    np.testing.assert_allclose(got, expected, rtol=0, atol=MAP_TOL)


# --- the limits -------------------------------------------------------------------------------------


def test_limits_match_their_closed_forms():
    w = 2.0  # inverse mass [1/kg]
    # Velocity-level: neither the spring (h^2 k W <= 2) nor the damper (h c W <= 1) over-corrects.
    assert math.isclose(
        stability.largest_stable_substep(Scheme.VELOCITY_LEVEL, K * w, C * w, 0.0), math.sqrt(2 / (K * w)), rel_tol=1e-6
    )
    assert math.isclose(stability.largest_stable_substep(Scheme.VELOCITY_LEVEL, 1.0, 50.0, 0.0), 1 / 50.0, rel_tol=1e-6)
    # Semi-implicit Euler and bodies: h^2 k W + 2 h c W = 4.
    root = (-2 * C * w + math.sqrt((2 * C * w) ** 2 + 16 * K * w)) / (2 * K * w)
    for scheme in (Scheme.SEMI_IMPLICIT, Scheme.BODY):
        assert math.isclose(stability.largest_stable_substep(scheme, K * w, C * w, 0.0), root, rel_tol=1e-6)
    # Drag alone: explicit Euler h d <= 2, RK4 on the real axis h d <= 2.785.
    assert math.isclose(stability.largest_stable_substep(Scheme.SEMI_IMPLICIT, 0.0, 0.0, 4.0), 0.5, rel_tol=1e-6)
    assert math.isclose(stability.largest_stable_substep(Scheme.RK4_HELD, 0.0, 0.0, 4.0), 2.7853 / 4.0, rel_tol=1e-4)
    # RK4 with the force held gains energy without damping at every h: det = 1 + a / 2.
    M = stability.substep_map(Scheme.RK4_HELD, 0.01, K, 0.0, 0.0)
    assert math.isclose(np.linalg.det(M), 1 + 0.01**2 * K / 2, rel_tol=1e-12)


def test_rk4_contacts_are_held_to_semi_implicit_eulers_limit():
    agent = AgentConfig(ctrl_mode="acceleration", drag=0.5)
    (rk4,) = stability.agent_terms([agent], WALL, swarp.Integrator.RK4)
    (euler,) = stability.agent_terms([agent], WALL, swarp.Integrator.EULER)
    assert rk4.scheme == Scheme.RK4_HELD and rk4.checked_scheme == Scheme.SEMI_IMPLICIT
    assert rk4.limit(WALL) == euler.limit(WALL)
    # Without contacts only the drag is checked, by RK4's own stability region.
    free = WorldConfig(collisions=False)
    (drag_only,) = stability.agent_terms([agent], free, swarp.Integrator.RK4)
    assert not drag_only.contact and drag_only.checked_scheme == Scheme.RK4_HELD
    assert stability.agent_terms([AgentConfig()], free, swarp.Integrator.EULER) == []


def test_a_body_contact_lever_is_its_farthest_corner_or_circle_offset():
    t_shapes = (Obstacle.box((0.0, 0.0857), (0.2, 0.05)), Obstacle.box((0.0, -0.1143), (0.05, 0.15)))
    assert math.isclose(stability.contact_lever(Body(t_shapes)), Body(t_shapes).bounding_radius)
    assert stability.contact_lever(Body((Obstacle.circle((0, 0), 0.3),))) == 0.0
    assert math.isclose(stability.contact_lever(Body((Obstacle.circle((0.3, 0.4), 0.1),))), 0.5)


# --- what is accepted and rejected -------------------------------------------------------------------


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_every_built_in_scenario_default_is_within_its_limits(name):
    spec = get_scenario(name)().make_world()
    terms = stability.agent_terms(spec.agents, spec.world, spec.integrator) + stability.body_terms(spec.world)
    stability.check_substep(terms, spec.world, spec.dt, spec.substeps)
    limit = min(term.limit(spec.world) for term in terms)
    assert spec.dt / spec.substeps < 0.9 * limit, (name, spec.dt / spec.substeps, limit)


@pytest.mark.parametrize(("dt", "substeps"), [(0.3, "3"), (1e6, r"70710\d\d")])
def test_unstable_time_steps_are_rejected_with_the_limit_and_the_fix(dt, substeps):
    """navigation went NaN from step ~24 at dt = 0.3 s and from step 1 at 1e6 s: now an error that
    names the limit (sqrt(2 m / k) = 0.1414 s), the values and the fix."""
    with pytest.raises(
        ValueError, match=rf"0\.1414 s of agent 0 .*collision_k=100 N/m.*mass of 1 kg: use substeps >= {substeps}"
    ):
        swarp.make("navigation", n_envs=2, device="cpu", dt=dt)
    Stepper([AgentConfig()], dt=0.14, device="cpu", world=WorldConfig(bounds=1.0))  # just inside


def test_a_parameter_table_beyond_the_limit_is_rejected_and_left_untouched():
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=2, per_env_params=True)
    before = env.agent_params.clone()
    with pytest.raises(ValueError, match=r"agent params: .* mass of 0\.3 kg: raise the lightest mass .* substeps >= 2"):
        env.set_agent_params(mass=torch.tensor([[1.0, 0.3], [1.0, 1.0]]))
    assert torch.equal(env.agent_params, before)
    env.set_agent_params(mass=0.5)  # h^2 k / m = 2: the limit itself, still accepted


def test_a_randomization_is_checked_at_every_mass_and_drag_corner():
    """The lightest mass with the largest drag is unstable although the lowest and the highest
    draw each are stable: the randomization is still rejected up front."""
    ranges = {"mass": (0.6, 1.0), "drag": (0.0, 10.0)}
    with pytest.raises(ValueError, match=r"randomize_params: .*drag=10 1/s on a mass of 0\.6 kg"):
        swarp.make("navigation", n_envs=2, device="cpu", ctrl_mode="acceleration", randomize_params=ranges)
    swarp.make("navigation", n_envs=2, device="cpu", ctrl_mode="acceleration", randomize_params={"mass": (0.6, 1.0)})


@pytest.mark.parametrize(("name", "options"), [("navigation", {"dt": 0.14}), ("drone_navigation", {"dt": 0.18})])
def test_the_largest_accepted_step_runs_finite(name, options):
    """Just inside the limit, random in-bounds actions with auto-reset stay finite (20,000 steps at
    64 envs by hand)."""
    env = swarp.make(name, n_envs=16, device="cpu", seed=1, auto_reset=True, **options)
    env.reset()
    low, high = env.action_bounds
    generator = torch.Generator().manual_seed(1)
    for _ in range(1000):
        obs, reward, *_ = env.step(
            low + (high - low) * torch.rand((16, *low.shape), generator=generator, dtype=low.dtype)
        )
    assert bool(torch.isfinite(obs).all()) and bool(torch.isfinite(reward).all())
    assert all(bool(torch.isfinite(value).all()) for value in env.state if value is not None)
