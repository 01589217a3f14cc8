"""Integration of every dynamics model against its closed form (``swarp/physics/dynamics.py``).

Agents are kept apart (or collisions are off) so no contact force acts: the motion is then the
pure ODE of each model, whose solutions under constant actions are lines and circular arcs.
"""

import functools
import math

import numpy as np
import pytest
import torch
import warp as wp

from swarp import AgentConfig, Stepper, TorchState, World, WorldConfig, warp_step
from swarp.core.config import ControlMode, DynamicsModel
from swarp.physics import dynamics

#: Agreement of cases that are exact in exact arithmetic (straight lines, RK4 on polynomials) [m].
EXACT_TOL = 1e-12
#: The same exact cases accumulated over a few float32 steps [m].
FLOAT32_TOL = 1e-5
#: RK4 against the closed-form arcs at the step sizes used below (global error ~ (w h)^4) [m].
RK4_TOL = 1e-6
#: Expected error ratios when the step is halved: first order (Euler) and fourth order (RK4).
EULER_RATIO = (1.9, 2.1)
RK4_RATIO = (15.0, 17.0)

FREE = WorldConfig(collisions=False)


def make_world(agents, *, dt=0.1, substeps=1, integrator="rk4", dtype="float64", n_envs=1, world=FREE) -> World:
    stepper = Stepper(agents, dt=dt, device="cpu", world=world, substeps=substeps, integrator=integrator, dtype=dtype)
    return World(stepper, n_envs)


def actions_like(world: World, values) -> torch.Tensor:
    """A constant action tensor [E, A, 2] of the world's dtype from anything broadcastable to it."""
    values = torch.as_tensor(values, dtype=world.stepper.torch_dtype)
    return values.expand(world.n_envs, world.n_agents, 2).contiguous()


def rollout(world: World, actions: torch.Tensor, n_steps: int) -> None:
    for _ in range(n_steps):
        world.step(actions)


def angle_error(a: torch.Tensor, b) -> torch.Tensor:
    """|a - b| on the circle [rad]."""
    return torch.remainder(a - b + math.pi, 2 * math.pi).sub(math.pi).abs()


def arc(x0, y0, heading0, v, w, t):
    """Position after driving at speed ``v`` along heading ``heading0`` while turning at rate ``w``."""
    x = x0 + v / w * (np.sin(heading0 + w * t) - np.sin(heading0))
    y = y0 - v / w * (np.cos(heading0 + w * t) - np.cos(heading0))
    return np.stack([x, y], axis=-1)


def accelerating_arc(x0, y0, heading0, s0, a, w, t):
    """Position when the speed grows as ``s0 + a t`` while the heading turns at rate ``w``."""

    def antiderivative(tau):
        s, phi = s0 + a * tau, heading0 + w * tau
        return (s * np.sin(phi) / w + a * np.cos(phi) / w**2, -s * np.cos(phi) / w + a * np.sin(phi) / w**2)

    (x1, y1), (x0_, y0_) = antiderivative(t), antiderivative(0.0)
    return np.stack([x0 + x1 - x0_, y0 + y1 - y0_], axis=-1)


def slip_and_yaw_rate(speed, steer, cfg: AgentConfig):
    """Kinematic bicycle slip angle beta and yaw rate for a speed and steering angle."""
    beta = np.arctan(cfg.rear_axle_ratio * np.tan(steer))
    return beta, speed * np.cos(beta) * np.tan(steer) / cfg.wheelbase


# --- holonomic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_holonomic_velocity_moves_u_dt(rng, integrator, dtype):
    n_envs, n_steps, dt = 6, 7, 0.1
    world = make_world(
        [AgentConfig(max_speed=2.0)] * 3, dt=dt, substeps=2, integrator=integrator, dtype=dtype, n_envs=n_envs
    )
    torch_dtype = world.stepper.torch_dtype
    pos0 = torch.as_tensor(rng.uniform(-1, 1, (n_envs, 3, 2)), dtype=torch_dtype)
    u = torch.as_tensor(rng.uniform(-1, 1, (n_envs, 3, 2)), dtype=torch_dtype)  # |u| <= sqrt(2) < max_speed
    world.set_state(pos=pos0)
    rollout(world, u, n_steps)
    tol = EXACT_TOL if dtype == "float64" else FLOAT32_TOL
    torch.testing.assert_close(world.state.torch.pos, pos0 + u * (n_steps * dt), atol=tol, rtol=0)
    torch.testing.assert_close(world.state.torch.vel, u, atol=0, rtol=0)
    torch.testing.assert_close(world.state.torch.speed, torch.linalg.vector_norm(u, dim=-1), atol=tol, rtol=0)
    assert torch.all(world.state.torch.ang_vel == 0)


def test_holonomic_acceleration_rk4_is_exact_for_constant_accel(rng):
    n_envs, n_steps, dt = 5, 9, 0.1
    cfg = AgentConfig(ctrl_mode="acceleration", max_speed=100.0, max_accel=10.0)
    world = make_world([cfg] * 2, dt=dt, substeps=3, n_envs=n_envs)
    pos0 = torch.as_tensor(rng.uniform(-1, 1, (n_envs, 2, 2)))
    vel0 = torch.as_tensor(rng.uniform(-1, 1, (n_envs, 2, 2)))
    accel = torch.as_tensor(rng.uniform(-3, 3, (n_envs, 2, 2)))
    world.set_state(pos=pos0, vel=vel0)
    rollout(world, accel, n_steps)
    t = n_steps * dt
    torch.testing.assert_close(world.state.torch.pos, pos0 + vel0 * t + 0.5 * accel * t**2, atol=EXACT_TOL, rtol=0)
    torch.testing.assert_close(world.state.torch.vel, vel0 + accel * t, atol=EXACT_TOL, rtol=0)


def test_holonomic_acceleration_euler_error_is_first_order():
    """Semi-implicit Euler overshoots a constant acceleration by exactly ``a h t / 2``."""
    accel, t = torch.tensor([1.5, -0.5], dtype=torch.float64), 1.0
    cfg = AgentConfig(ctrl_mode="acceleration", max_speed=100.0, max_accel=10.0)
    errors = []
    for n_steps in (10, 20):
        h = t / n_steps
        world = make_world([cfg], dt=h, integrator="euler")
        rollout(world, actions_like(world, accel), n_steps)
        error = world.state.torch.pos[0, 0] - 0.5 * accel * t**2
        torch.testing.assert_close(error, 0.5 * accel * h * t, atol=EXACT_TOL, rtol=0)
        torch.testing.assert_close(world.state.torch.vel[0, 0], accel * t, atol=EXACT_TOL, rtol=0)
        errors.append(error.norm().item())
    assert EULER_RATIO[0] < errors[0] / errors[1] < EULER_RATIO[1]


def test_holonomic_drag_matches_exponential_approach():
    drag, accel, v0, t = 2.0, np.array([1.0, -0.4]), np.array([0.5, 0.5]), 1.0
    cfg = AgentConfig(ctrl_mode="acceleration", max_speed=100.0, max_accel=10.0, drag=drag)
    world = make_world([cfg], dt=0.05)
    world.set_state(vel=torch.as_tensor(v0).view(1, 1, 2))
    rollout(world, actions_like(world, accel), 20)
    terminal = accel / drag
    decay = np.exp(-drag * t)
    vel = terminal + (v0 - terminal) * decay
    pos = terminal * t + (v0 - terminal) * (1 - decay) / drag
    np.testing.assert_allclose(world.state.torch.vel[0, 0].numpy(), vel, atol=RK4_TOL, rtol=0)
    np.testing.assert_allclose(world.state.torch.pos[0, 0].numpy(), pos, atol=RK4_TOL, rtol=0)


# --- diff drive --------------------------------------------------------------------------------


@pytest.mark.parametrize("substeps", [1, 4])
def test_diff_drive_velocity_follows_arc(rng, substeps):
    n_envs, n_steps, dt = 6, 20, 0.05
    cfg = AgentConfig(model="diff_drive", max_speed=2.0, max_ang_vel=4.0)
    world = make_world([cfg], dt=dt, substeps=substeps, n_envs=n_envs)
    pos0 = rng.uniform(-1, 1, (n_envs, 1, 2))
    theta0 = rng.uniform(-math.pi, math.pi, (n_envs, 1))
    v = rng.uniform(-1.5, 1.5, (n_envs, 1))
    w = rng.choice([-1, 1], (n_envs, 1)) * rng.uniform(0.5, 3.0, (n_envs, 1))
    world.set_state(pos=torch.as_tensor(pos0), theta=torch.as_tensor(theta0))
    rollout(world, torch.as_tensor(np.stack([v, w], axis=-1)), n_steps)
    t = n_steps * dt
    expected = arc(pos0[..., 0], pos0[..., 1], theta0, v, w, t)
    np.testing.assert_allclose(world.state.torch.pos.numpy(), expected, atol=RK4_TOL, rtol=0)
    assert torch.all(angle_error(world.state.torch.theta, torch.as_tensor(theta0 + w * t)) < EXACT_TOL)
    np.testing.assert_allclose(world.state.torch.speed.numpy(), v, atol=0, rtol=0)
    np.testing.assert_allclose(world.state.torch.ang_vel.numpy(), w, atol=0, rtol=0)
    heading = world.state.torch.theta.numpy()
    np.testing.assert_allclose(
        world.state.torch.vel.numpy(), np.stack([v * np.cos(heading), v * np.sin(heading)], -1), atol=EXACT_TOL
    )


def test_diff_drive_acceleration_follows_accelerating_arc(rng):
    n_envs, n_steps, dt = 6, 20, 0.05
    cfg = AgentConfig(model="diff_drive", ctrl_mode="acceleration", max_speed=10.0, max_accel=5.0, max_ang_vel=5.0)
    world = make_world([cfg], dt=dt, n_envs=n_envs)
    pos0 = rng.uniform(-1, 1, (n_envs, 1, 2))
    theta0 = rng.uniform(-math.pi, math.pi, (n_envs, 1))
    s0 = rng.uniform(-1, 1, (n_envs, 1))
    w0 = rng.choice([-1, 1], (n_envs, 1)) * rng.uniform(0.5, 2.0, (n_envs, 1))
    a = rng.uniform(-2, 2, (n_envs, 1))
    world.set_state(
        pos=torch.as_tensor(pos0), theta=torch.as_tensor(theta0), speed=torch.as_tensor(s0), ang_vel=torch.as_tensor(w0)
    )
    rollout(world, torch.as_tensor(np.stack([a, np.zeros_like(a)], axis=-1)), n_steps)
    t = n_steps * dt
    expected = accelerating_arc(pos0[..., 0], pos0[..., 1], theta0, s0, a, w0, t)
    np.testing.assert_allclose(world.state.torch.pos.numpy(), expected, atol=RK4_TOL, rtol=0)
    np.testing.assert_allclose(world.state.torch.speed.numpy(), s0 + a * t, atol=EXACT_TOL, rtol=0)
    np.testing.assert_allclose(world.state.torch.ang_vel.numpy(), w0, atol=0, rtol=0)


def test_diff_drive_angular_acceleration_integrates_heading_exactly(rng):
    """Yaw rate grows linearly, so the heading is quadratic in time and RK4 (Simpson) is exact."""
    n_envs, n_steps, dt = 4, 10, 0.1
    cfg = AgentConfig(model="diff_drive", ctrl_mode="acceleration", max_ang_vel=100.0, max_ang_accel=10.0)
    world = make_world([cfg], dt=dt, substeps=2, n_envs=n_envs)
    theta0 = rng.uniform(-math.pi, math.pi, (n_envs, 1))
    w0 = rng.uniform(-1, 1, (n_envs, 1))
    alpha = rng.uniform(-3, 3, (n_envs, 1))
    world.set_state(theta=torch.as_tensor(theta0), ang_vel=torch.as_tensor(w0))
    rollout(world, torch.as_tensor(np.stack([np.zeros_like(alpha), alpha], axis=-1)), n_steps)
    t = n_steps * dt
    np.testing.assert_allclose(world.state.torch.ang_vel.numpy(), w0 + alpha * t, atol=EXACT_TOL, rtol=0)
    expected_theta = torch.as_tensor(theta0 + w0 * t + 0.5 * alpha * t**2)
    assert torch.all(angle_error(world.state.torch.theta, expected_theta) < EXACT_TOL)
    assert torch.all(world.state.torch.pos == 0)  # zero speed: the heading turns in place


# --- kinematic bicycle --------------------------------------------------------------------------


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_bicycle_velocity_follows_slipping_arc(rng, integrator):
    n_envs, dt = 6, 0.05
    n_steps = 20 if integrator == "rk4" else 1  # one Euler step of a constant yaw rate is still exact in theta
    cfg = AgentConfig(model="kinematic_bicycle", max_speed=2.0, wheelbase=0.3, rear_axle_ratio=0.4, max_steer=0.7)
    world = make_world([cfg], dt=dt, integrator=integrator, n_envs=n_envs)
    pos0 = rng.uniform(-1, 1, (n_envs, 1, 2))
    theta0 = rng.uniform(-math.pi, math.pi, (n_envs, 1))
    v = rng.uniform(-1.5, 1.5, (n_envs, 1))
    steer = rng.choice([-1, 1], (n_envs, 1)) * rng.uniform(0.1, 0.6, (n_envs, 1))
    world.set_state(pos=torch.as_tensor(pos0), theta=torch.as_tensor(theta0))
    rollout(world, torch.as_tensor(np.stack([v, steer], axis=-1)), n_steps)
    beta, yaw_rate = slip_and_yaw_rate(v, steer, cfg)
    t = n_steps * dt
    np.testing.assert_allclose(world.state.torch.ang_vel.numpy(), yaw_rate, atol=EXACT_TOL, rtol=0)
    assert torch.all(angle_error(world.state.torch.theta, torch.as_tensor(theta0 + yaw_rate * t)) < EXACT_TOL)
    if integrator == "rk4":
        expected = arc(pos0[..., 0], pos0[..., 1], theta0 + beta, v, yaw_rate, t)
    else:  # one explicit step along the initial velocity direction theta0 + beta
        expected = pos0 + t * v[..., None] * np.stack([np.cos(theta0 + beta), np.sin(theta0 + beta)], -1)
    np.testing.assert_allclose(world.state.torch.pos.numpy(), expected, atol=RK4_TOL, rtol=0)
    heading = world.state.torch.theta.numpy() + beta
    np.testing.assert_allclose(
        world.state.torch.vel.numpy(), np.stack([v * np.cos(heading), v * np.sin(heading)], -1), atol=EXACT_TOL
    )


def test_bicycle_acceleration_control(rng):
    n_envs, n_steps, dt = 6, 20, 0.05
    cfg = AgentConfig(model="kinematic_bicycle", ctrl_mode="acceleration", max_speed=10.0, max_accel=5.0)
    world = make_world([cfg] * 2, dt=dt, n_envs=n_envs)
    pos0 = rng.uniform(-1, 1, (n_envs, 2, 2))
    theta0 = rng.uniform(-math.pi, math.pi, (n_envs, 2))
    s0 = rng.uniform(0.2, 1.0, (n_envs, 2))
    # Agent 0 accelerates straight ahead; agent 1 keeps its speed on a steady turn.
    accel = np.stack([rng.uniform(-2, 2, n_envs), np.zeros(n_envs)], axis=1)
    steer = np.stack([np.zeros(n_envs), rng.uniform(-0.5, 0.5, n_envs)], axis=1)
    world.set_state(pos=torch.as_tensor(pos0), theta=torch.as_tensor(theta0), speed=torch.as_tensor(s0))
    rollout(world, torch.as_tensor(np.stack([accel, steer], axis=-1)), n_steps)
    t = n_steps * dt
    pos = world.state.torch.pos.numpy()
    direction = np.stack([np.cos(theta0[:, 0]), np.sin(theta0[:, 0])], -1)
    straight = pos0[:, 0] + (s0[:, 0] * t + 0.5 * accel[:, 0] * t**2)[:, None] * direction
    np.testing.assert_allclose(pos[:, 0], straight, atol=EXACT_TOL, rtol=0)
    np.testing.assert_allclose(world.state.torch.speed.numpy()[:, 0], s0[:, 0] + accel[:, 0] * t, atol=EXACT_TOL)
    beta, yaw_rate = slip_and_yaw_rate(s0[:, 1], steer[:, 1], cfg)
    turning = arc(pos0[:, 1, 0], pos0[:, 1, 1], theta0[:, 1] + beta, s0[:, 1], yaw_rate, t)
    np.testing.assert_allclose(pos[:, 1], turning, atol=RK4_TOL, rtol=0)
    np.testing.assert_allclose(world.state.torch.ang_vel.numpy()[:, 1], yaw_rate, atol=EXACT_TOL, rtol=0)


# --- convergence order ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["diff_drive", "kinematic_bicycle"])
def test_error_order_when_halving_the_step(model):
    cfg = AgentConfig(model=model, max_speed=2.0, max_ang_vel=4.0, wheelbase=0.4, max_steer=1.0)
    v, control, theta0, t = 0.8, 0.9, 0.3, 1.0
    if model == "diff_drive":
        beta, yaw_rate = 0.0, control
    else:
        beta, yaw_rate = slip_and_yaw_rate(v, control, cfg)
    expected = arc(0.0, 0.0, theta0 + beta, v, yaw_rate, t)
    ratios = {}
    for integrator in ("euler", "rk4"):
        errors = []
        for n_steps in (10, 20):
            world = make_world([cfg], dt=t / n_steps, integrator=integrator)
            world.set_state(theta=torch.full((1, 1), theta0, dtype=torch.float64))
            rollout(world, actions_like(world, [v, control]), n_steps)
            errors.append(np.linalg.norm(world.state.torch.pos[0, 0].numpy() - expected))
        assert errors[1] > 1e-12, "error below float64 resolution: the ratio would be noise"
        ratios[integrator] = errors[0] / errors[1]
    assert EULER_RATIO[0] < ratios["euler"] < EULER_RATIO[1], ratios
    assert RK4_RATIO[0] < ratios["rk4"] < RK4_RATIO[1], ratios


# --- limits ------------------------------------------------------------------------------------


def test_velocity_commands_are_clamped_to_limits():
    dt = 0.1
    agents = [
        AgentConfig(max_speed=1.0),
        AgentConfig(model="diff_drive", max_speed=1.0, max_ang_vel=3.0),
        AgentConfig(model="diff_drive", max_speed=1.0, max_ang_vel=3.0),
        AgentConfig(model="kinematic_bicycle", max_speed=1.0, max_steer=0.6, wheelbase=0.2),
        AgentConfig(model="kinematic_bicycle", max_speed=1.0, max_steer=0.6, wheelbase=0.2),
    ]
    world = make_world(agents, dt=dt)
    world.set_state(pos=torch.arange(10, dtype=torch.float64).view(1, 5, 2) * 10.0)
    pos0 = world.state.torch.pos.clone()
    commands = torch.tensor([[[3.0, 4.0], [5.0, 10.0], [-5.0, -10.0], [0.5, 1.2], [-3.0, -1.2]]], dtype=torch.float64)
    world.step(commands)
    s = world.state.torch
    torch.testing.assert_close(s.pos[0, 0] - pos0[0, 0], torch.tensor([0.6, 0.8], dtype=torch.float64) * dt)
    torch.testing.assert_close(s.speed[0, 1:3], torch.tensor([1.0, -1.0], dtype=torch.float64), atol=0, rtol=0)
    torch.testing.assert_close(s.ang_vel[0, 1:3], torch.tensor([3.0, -3.0], dtype=torch.float64), atol=0, rtol=0)
    torch.testing.assert_close(s.theta[0, 1:3], torch.tensor([0.3, -0.3], dtype=torch.float64), atol=EXACT_TOL, rtol=0)
    _, yaw_rate = slip_and_yaw_rate(np.array([0.5, -1.0]), np.array([0.6, -0.6]), agents[3])
    torch.testing.assert_close(s.speed[0, 3:], torch.tensor([0.5, -1.0], dtype=torch.float64), atol=0, rtol=0)
    torch.testing.assert_close(s.ang_vel[0, 3:], torch.as_tensor(yaw_rate), atol=EXACT_TOL, rtol=0)


def test_acceleration_commands_and_integrated_speeds_are_clamped():
    dt = 0.1
    agents = [
        AgentConfig(ctrl_mode="acceleration", max_speed=1.0, max_accel=2.0),
        AgentConfig(
            model="diff_drive",
            ctrl_mode="acceleration",
            max_speed=1.0,
            max_accel=2.0,
            max_ang_vel=3.0,
            max_ang_accel=6.0,
        ),
        AgentConfig(model="kinematic_bicycle", ctrl_mode="acceleration", max_speed=1.0, max_accel=2.0),
    ]
    for integrator in ("euler", "rk4"):
        world = make_world(agents, dt=dt, integrator=integrator)
        world.set_state(pos=torch.tensor([[[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]]], dtype=torch.float64))
        commands = torch.tensor([[[30.0, 40.0], [10.0, -100.0], [-10.0, 0.0]]], dtype=torch.float64)
        world.step(commands)
        s = world.state.torch
        torch.testing.assert_close(s.vel[0, 0], torch.tensor([0.6, 0.8], dtype=torch.float64) * 2.0 * dt)
        torch.testing.assert_close(s.speed[0], torch.tensor([0.2, 0.2, -0.2], dtype=torch.float64))
        torch.testing.assert_close(s.ang_vel[0, 1], torch.tensor(-0.6, dtype=torch.float64))
        rollout(world, commands, 20)
        torch.testing.assert_close(s.speed[0], torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64))
        assert torch.linalg.vector_norm(s.vel[0, 0]) <= 1.0 + EXACT_TOL
        torch.testing.assert_close(s.ang_vel[0, 1], torch.tensor(-3.0, dtype=torch.float64), atol=0, rtol=0)


# --- invalid actions ---------------------------------------------------------------------------


@pytest.mark.parametrize("ctrl_mode", ["velocity", "acceleration"])
def test_non_finite_actions_act_as_zero_and_raise_the_flag(ctrl_mode):
    agents = [
        AgentConfig(ctrl_mode=ctrl_mode),
        AgentConfig(ctrl_mode=ctrl_mode),
        AgentConfig(model="diff_drive", ctrl_mode=ctrl_mode),
        AgentConfig(model="kinematic_bicycle", ctrl_mode=ctrl_mode),
    ]
    world = make_world(agents, n_envs=2)
    world.set_state(pos=torch.arange(16, dtype=torch.float64).view(2, 4, 2) * 5.0)
    clean = torch.tensor([[0.3, 0.4], [0.0, 0.0], [0.0, 0.5], [0.5, 0.0]], dtype=torch.float64).expand(2, 4, 2)
    dirty = clean.clone()
    dirty[0] = torch.tensor([[math.nan, 0.4], [math.inf, -math.inf], [math.nan, 0.5], [0.5, math.nan]])
    reference = make_world(agents, n_envs=2)
    reference.set_state(pos=world.state.torch.pos.clone())
    # The clean twin of each dirty row zeroes exactly the non-finite components.
    zeroed = torch.where(torch.isfinite(dirty), dirty, torch.zeros_like(dirty))
    assert not bool(world.invalid_actions())
    for _ in range(3):
        world.step(dirty)
        reference.step(zeroed)
    assert bool(world.invalid_actions())
    assert not bool(reference.invalid_actions())
    for name, value in world.state.torch._asdict().items():
        assert torch.isfinite(value).all(), name
        assert torch.equal(value, getattr(reference.state.torch, name)), name
    world.clear_invalid_actions()
    assert not bool(world.invalid_actions())
    world.step(clean.contiguous())
    assert not bool(world.invalid_actions())


# --- heterogeneous fleets ---------------------------------------------------------------------------


def test_mixed_fleet_each_agent_follows_its_own_model(rng):
    """Every agent of a mixed fleet moves bit for bit as it does alone in a world of its own."""
    agents = [
        AgentConfig(),
        AgentConfig(model="diff_drive"),
        AgentConfig(model="kinematic_bicycle", wheelbase=0.2),
        AgentConfig(ctrl_mode="acceleration", drag=0.5),
        AgentConfig(model="diff_drive", ctrl_mode="acceleration"),
        AgentConfig(model="kinematic_bicycle", ctrl_mode="acceleration", rear_axle_ratio=0.8),
    ]
    n_envs, n_steps = 3, 8
    fleet = make_world(agents, dtype="float32", n_envs=n_envs, world=WorldConfig(), integrator="rk4", substeps=2)
    spread = torch.arange(len(agents), dtype=torch.float32).view(1, -1, 1) * torch.tensor([10.0, 0.0])
    pos0 = spread + torch.as_tensor(rng.uniform(-1, 1, (n_envs, len(agents), 2)), dtype=torch.float32)
    theta0 = torch.as_tensor(rng.uniform(-3, 3, (n_envs, len(agents))), dtype=torch.float32)
    fleet.set_state(pos=pos0, theta=theta0)
    solos = []
    for i, cfg in enumerate(agents):
        solo = make_world([cfg], dtype="float32", n_envs=n_envs, world=WorldConfig(), integrator="rk4", substeps=2)
        solo.set_state(pos=pos0[:, i : i + 1].contiguous(), theta=theta0[:, i : i + 1].contiguous())
        solos.append(solo)
    for _ in range(n_steps):
        actions = torch.as_tensor(rng.uniform(-1, 1, (n_envs, len(agents), 2)), dtype=torch.float32)
        fleet.step(actions)
        for i, solo in enumerate(solos):
            solo.step(actions[:, i : i + 1].contiguous())
    for i, solo in enumerate(solos):
        for name, value in fleet.state.torch._asdict().items():
            assert torch.equal(value[:, i], getattr(solo.state.torch, name)[:, 0]), (agents[i], name)
    # Same actions, different models: the trajectories really differ.
    assert not torch.allclose(fleet.state.torch.pos[:, 1] - pos0[:, 1], fleet.state.torch.pos[:, 2] - pos0[:, 2])


# --- heading wrap --------------------------------------------------------------------------------


@functools.cache
def wrap_kernel(scalar):
    wrap_angle = dynamics.funcs(scalar).wrap_angle

    @wp.kernel(module="unique")
    def wrap(theta: wp.array(dtype=scalar), wrapped_out: wp.array(dtype=scalar)):
        i = wp.tid()
        wrapped_out[i] = wrap_angle(theta[i])

    return wrap


@pytest.mark.parametrize(("scalar", "np_dtype"), [(wp.float32, np.float32), (wp.float64, np.float64)])
def test_wrap_angle_lands_in_half_open_range_at_the_seams(scalar, np_dtype):
    pi = np_dtype(np.pi)
    values = []
    for seam in np.array([-5, -3, -1, 0, 1, 2, 3, 5, 7], np_dtype) * pi:
        x = seam
        for _ in range(8):
            x = np.nextafter(x, np_dtype(-np.inf))
        for _ in range(17):
            values.append(x)
            x = np.nextafter(x, np_dtype(np.inf))
    theta = wp.array(np.array(values, np_dtype), dtype=scalar, device="cpu")
    wrapped = wp.zeros_like(theta)
    wp.launch(wrap_kernel(scalar), dim=len(values), inputs=[theta], outputs=[wrapped], device="cpu")
    wrapped = wrapped.numpy()
    assert np.all(wrapped >= -pi) and np.all(wrapped < pi), np.array(values)[(wrapped < -pi) | (wrapped >= pi)]
    # Wrapping moves by whole turns only.
    turns = (np.array(values, np.float64) - wrapped) / (2 * np.pi)
    np.testing.assert_allclose(turns, np.round(turns), atol=1e-5)


def test_heading_stays_wrapped_while_spinning():
    cfg = AgentConfig(model="diff_drive", max_ang_vel=3.0)
    world = make_world([cfg], dt=0.1, n_envs=2)
    world.set_state(theta=torch.tensor([[np.nextafter(np.pi, 0.0)], [-np.pi]], dtype=torch.float64))
    world.step(actions_like(world, [0.0, 0.0]))
    theta = world.state.torch.theta
    assert torch.all(theta >= -math.pi) and torch.all(theta < math.pi), theta
    spin = torch.tensor([[[0.0, 3.0]], [[0.0, -3.0]]], dtype=torch.float64)
    for _ in range(50):
        world.step(spin)
        assert torch.all(theta >= -math.pi) and torch.all(theta < math.pi), theta


# --- huge finite actions ------------------------------------------------------------------------

#: Finite action magnitudes far beyond any bound; float32 squares overflow from ~1.8e19, float64
#: ones from ~1.3e154 (the clamp then rescales by the largest component).
HUGE = {
    "float32": (1e20, 1e30, -1e30, 3e38, float(np.finfo(np.float32).max)),
    "float64": (1e20, 1e30, -1e30, 3e38, 1e200, float(np.finfo(np.float64).max)),
}
#: Agreement of a huge action's motion with the bound's where the clamp rounds differently [ulp].
CLAMP_ULPS = 8
CONTROLLED = {
    "holonomic": dict(max_speed=1.5, max_accel=2.5),
    "diff_drive": dict(max_speed=1.5, max_accel=2.5, max_ang_vel=2.0, max_ang_accel=3.0),
    "kinematic_bicycle": dict(max_speed=1.5, max_accel=2.5, max_steer=0.5, wheelbase=0.2),
}


def bound_actions(cfg: AgentConfig, direction: torch.Tensor) -> torch.Tensor:
    """The action at the bound in ``direction`` [2]: the holonomic norm limit along it, the box
    corner of each wheeled component by its sign."""
    velocity = cfg.ctrl_mode == ControlMode.VELOCITY
    if cfg.model == DynamicsModel.HOLONOMIC:
        return direction / direction.norm() * (cfg.max_speed if velocity else cfg.max_accel)
    second = cfg.max_ang_vel if velocity else cfg.max_ang_accel
    if cfg.model == DynamicsModel.KINEMATIC_BICYCLE:
        second = cfg.max_steer
    return torch.sign(direction) * torch.tensor([cfg.max_speed if velocity else cfg.max_accel, second])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("ctrl_mode", ["velocity", "acceleration"])
@pytest.mark.parametrize("model", list(CONTROLLED))
def test_huge_finite_actions_move_as_the_bound_does(model, ctrl_mode, integrator, dtype):
    """Env i commands the huge magnitude i along an axis (agent 0) and along (0.6, -0.8) (agent 1);
    its twin commands the bound in the same directions. Same bits where the clamp is exact (the
    wheeled boxes; a holonomic axis once the square overflows), a few ulps otherwise; no flag."""
    cfg = AgentConfig(model=model, ctrl_mode=ctrl_mode, **CONTROLLED[model])
    magnitudes = HUGE[dtype]
    worlds = [make_world([cfg, cfg], integrator=integrator, dtype=dtype, n_envs=len(magnitudes)) for _ in range(2)]
    torch_dtype = worlds[0].stepper.torch_dtype
    directions = torch.tensor([[1.0, 0.0], [0.6, -0.8]], dtype=torch.float64)
    huge = torch.stack([torch.tensor(m, dtype=torch_dtype) * directions.to(torch_dtype) for m in magnitudes])
    bound = torch.stack(
        [torch.stack([bound_actions(cfg, math.copysign(1.0, m) * d) for d in directions]) for m in magnitudes]
    )
    assert torch.isfinite(huge).all()
    for world, actions in zip(worlds, (huge, bound.to(torch_dtype)), strict=True):
        world.set_state(pos=torch.tensor([[0.0, 0.0], [5.0, 0.0]], dtype=torch_dtype).expand(len(magnitudes), 2, 2))
        for _ in range(3):
            world.step(actions)
        assert not bool(world.invalid_actions())
    eps = float(np.finfo(np.dtype(dtype)).eps)
    got, expected = worlds[0].state.torch, worlds[1].state.torch
    for row, magnitude in enumerate(magnitudes):
        overflowed = abs(magnitude) > math.sqrt(float(np.finfo(np.dtype(dtype)).max))  # |u|^2 is inf
        exact = [0, 1] if model != "holonomic" else [0] if overflowed else []
        for name in ("pos", "theta", "vel", "speed", "ang_vel"):
            for agent in range(2):
                a, b = getattr(got, name)[row, agent], getattr(expected, name)[row, agent]
                if agent in exact:
                    assert torch.equal(a, b), (magnitude, name, agent, a, b)
                else:
                    tol = CLAMP_ULPS * eps * max(1.0, float(b.abs().max()))
                    torch.testing.assert_close(a, b, rtol=0, atol=tol, msg=f"{magnitude} {name} {agent}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ctrl_mode", ["velocity", "acceleration"])
def test_gradients_through_the_clamp_of_a_huge_action_are_finite_and_exact(ctrl_mode, dtype):
    """Past the clamp an action only turns the clamped vector: d clip(u) / du = limit / |u| across u
    and 0 along it, for huge finite u too (the rescaling branch's adjoint included)."""
    cfg = AgentConfig(ctrl_mode=ctrl_mode, max_speed=10.0, max_accel=2.0)
    stepper = Stepper([cfg], dt=0.1, device="cpu", world=FREE, integrator="euler", dtype=dtype)
    torch_dtype = stepper.torch_dtype
    h = 0.1
    limit = cfg.max_speed if ctrl_mode == "velocity" else cfg.max_accel
    for magnitude in HUGE[dtype]:
        zeros = torch.zeros(1, 1, dtype=torch_dtype)
        state = TorchState(
            torch.zeros(1, 1, 2, dtype=torch_dtype), zeros, torch.zeros(1, 1, 2, dtype=torch_dtype), zeros, zeros
        )
        actions = torch.tensor([[[magnitude, 0.0]]], dtype=torch_dtype, requires_grad=True)
        out = warp_step(stepper, state, actions)
        out.pos[..., 1].sum().backward()
        grad = actions.grad[0, 0]
        assert torch.isfinite(grad).all(), (magnitude, grad)
        # Velocity control: p = clip(u) h; acceleration control: p = clip(u) h^2 (semi-implicit Euler).
        scale = h if ctrl_mode == "velocity" else h * h
        expected = scale * limit / abs(magnitude)
        assert grad[0] == 0.0, (magnitude, grad)
        torch.testing.assert_close(grad[1], torch.tensor(expected, dtype=torch_dtype), rtol=1e-5, atol=0.0)
