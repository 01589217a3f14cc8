"""The 6-DOF quadrotor (``swarp/physics/drone.py``): hover, climb and yaw against closed forms, a
general manoeuvre against a numpy reference, the ground, mixing with planar agents, gradients."""

import math

import numpy as np
import pytest
import torch

import swarp
from swarp import AgentConfig, Stepper, TorchState, World, WorldConfig
from swarp.core.params import enable_per_env_params, write_params

#: Agreement of cases exact in exact arithmetic (hover, polynomial trajectories) [m].
EXACT_TOL = 1e-12
#: RK4 against closed-form rotations at these step sizes [rad].
RK4_TOL = 1e-9
#: Kernel against the numpy transcription of the same scheme (rounding only).
REFERENCE_TOL = 1e-11
G = 9.81
FREE = WorldConfig(collisions=False)
DRONE = AgentConfig(model="drone", mass=0.5, max_speed=100.0, drag=0.0)


def drone_world(agents=(DRONE,), integrator="rk4", dt=0.02, n_envs=1, world=FREE, substeps=1) -> World:
    stepper = Stepper(
        list(agents), dt=dt, device="cpu", world=world, integrator=integrator, dtype="float64", substeps=substeps
    )
    return World(stepper, n_envs)


def thrusts(world: World, values) -> torch.Tensor:
    values = torch.as_tensor(values, dtype=torch.float64)
    return values.expand(world.n_envs, world.n_agents, world.stepper.act_dim).contiguous()


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_hover_thrust_holds_altitude(integrator):
    world = drone_world(integrator=integrator)
    world.set_state(pos_z=torch.full((1, 1), 2.0, dtype=torch.float64))
    hover = DRONE.mass * G / 4
    for _ in range(200):
        world.step(thrusts(world, [hover] * 4))
    state = world.state.torch
    assert abs(state.pos_z.item() - 2.0) < EXACT_TOL and abs(state.vel_z.item()) < EXACT_TOL
    assert torch.allclose(state.quat, torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64))
    assert state.pos.abs().max() < EXACT_TOL and state.omega.abs().max() < EXACT_TOL


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_climb_matches_the_closed_form(integrator):
    accel, dt, n = 1.5, 0.02, 50
    world = drone_world(integrator=integrator, dt=dt)
    world.set_state(pos_z=torch.full((1, 1), 1.0, dtype=torch.float64))
    for _ in range(n):
        world.step(thrusts(world, [DRONE.mass * (G + accel) / 4] * 4))
    t = n * dt
    # RK4 is exact on a quadratic; semi-implicit Euler gives z_n = z_0 + a h^2 n (n + 1) / 2.
    exact = {"rk4": 1.0 + 0.5 * accel * t * t, "euler": 1.0 + accel * dt * dt * n * (n + 1) / 2}
    expected = exact[integrator]
    state = world.state.torch
    assert abs(state.pos_z.item() - expected) < 1e-11
    assert abs(state.vel_z.item() - accel * t) < 1e-11


def test_yaw_response_matches_the_closed_form():
    delta, dt, n = 0.05, 0.01, 100
    world = drone_world(dt=dt)
    world.set_state(pos_z=torch.ones(1, 1, dtype=torch.float64))
    hover = DRONE.mass * G / 4
    for _ in range(n):
        world.step(thrusts(world, [hover + delta, hover - delta, hover + delta, hover - delta]))
    t = n * dt
    yaw_accel = 4 * DRONE.yaw_moment * delta / DRONE.inertia_z
    state = world.state.torch
    expected_yaw = 0.5 * yaw_accel * t * t
    assert abs(state.theta.item() - expected_yaw) < RK4_TOL
    assert abs(state.ang_vel.item() - yaw_accel * t) < RK4_TOL
    assert abs(state.omega[0, 0, 2].item() - yaw_accel * t) < RK4_TOL
    quat = state.quat[0, 0].numpy()
    assert np.allclose(quat, [0, 0, math.sin(expected_yaw / 2), math.cos(expected_yaw / 2)], atol=RK4_TOL)
    assert abs(state.pos_z.item() - 1.0) < EXACT_TOL  # thrust stays vertical: no climb


# --- numpy reference --------------------------------------------------------------------------------


def quat_mul(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def rotate(q, v):
    return quat_mul(quat_mul(q, np.array([*v, 0.0])), q * np.array([-1, -1, -1, 1]))[:3]


def reference_rk4(cfg: AgentConfig, state, f, h, g=G):
    """One RK4 substep of the drone ODE (numpy float64), ``state = (p, v, q, w)``."""
    arm, k = cfg.arm_length, cfg.yaw_moment
    thrust = f.sum()
    tau = np.array([arm * (f[1] - f[3]), arm * (f[2] - f[0]), k * (f[0] - f[1] + f[2] - f[3])])
    inertia = np.array([cfg.inertia_x, cfg.inertia_y, cfg.inertia_z])

    def rates(p, v, q, w):
        a = rotate(q / np.linalg.norm(q), [0, 0, thrust / cfg.mass]) - np.array([0, 0, g]) - cfg.drag * v
        return v, a, 0.5 * quat_mul(q, np.array([*w, 0.0])), (tau - np.cross(w, inertia * w)) / inertia

    p, v, q, w = state
    k1 = rates(p, v, q, w)
    k2 = rates(*(x + 0.5 * h * dx for x, dx in zip(state, k1, strict=True)))
    k3 = rates(*(x + 0.5 * h * dx for x, dx in zip(state, k2, strict=True)))
    k4 = rates(*(x + h * dx for x, dx in zip(state, k3, strict=True)))
    p, v, q, w = (x + h / 6 * (a + 2 * b + 2 * c + d) for x, a, b, c, d in zip(state, k1, k2, k3, k4, strict=True))
    return p, v, q / np.linalg.norm(q), w


def test_general_manoeuvre_matches_a_numpy_reference(rng):
    cfg = AgentConfig(model="drone", mass=0.7, drag=0.3, max_speed=100.0, inertia_x=0.012, inertia_y=0.009)
    dt, n = 0.01, 60
    world = drone_world([cfg], dt=dt)
    q0 = rng.normal(size=4)
    q0 /= np.linalg.norm(q0)
    w0 = rng.normal(size=3)
    world.set_state(
        pos=torch.tensor([[[0.2, -0.1]]], dtype=torch.float64),
        pos_z=torch.full((1, 1), 3.0, dtype=torch.float64),
        vel=torch.tensor([[[0.3, 0.1]]], dtype=torch.float64),
        vel_z=torch.full((1, 1), -0.2, dtype=torch.float64),
        quat=torch.tensor(q0).view(1, 1, 4),
        omega=torch.tensor(w0).view(1, 1, 3),
    )
    state = (np.array([0.2, -0.1, 3.0]), np.array([0.3, 0.1, -0.2]), q0, w0)
    for _ in range(n):
        f = rng.uniform(0.5, 2.5, 4)
        world.step(thrusts(world, f))
        state = reference_rk4(cfg, state, f, dt)
    got = world.state.torch
    p, v, q, w = state
    assert np.abs(got.pos[0, 0].numpy() - p[:2]).max() < REFERENCE_TOL
    assert abs(got.pos_z.item() - p[2]) < REFERENCE_TOL
    assert np.abs(got.vel[0, 0].numpy() - v[:2]).max() < REFERENCE_TOL and abs(got.vel_z.item() - v[2]) < REFERENCE_TOL
    assert np.abs(got.quat[0, 0].numpy() - q).max() < REFERENCE_TOL
    assert np.abs(got.omega[0, 0].numpy() - w).max() < REFERENCE_TOL
    heading = rotate(q, [1.0, 0.0, 0.0])
    assert abs(got.theta.item() - math.atan2(heading[1], heading[0])) < REFERENCE_TOL
    assert abs(got.ang_vel.item() - rotate(q, w)[2]) < REFERENCE_TOL


# --- limits, ground, mixing -----------------------------------------------------------------------------


def test_thrusts_are_clamped_and_a_drone_without_thrust_lands():
    world = drone_world(dt=0.05)
    world.set_state(pos_z=torch.full((1, 1), 0.5, dtype=torch.float64))
    world.step(thrusts(world, [-3.0, -3.0, -3.0, -3.0]))  # clamped to 0: free fall
    assert abs(world.state.torch.vel_z.item() + G * 0.05) < EXACT_TOL
    for _ in range(40):
        world.step(thrusts(world, [0.0] * 4))
    assert world.state.torch.pos_z.item() == 0.0 and world.state.torch.vel_z.item() == 0.0
    low, high = world.stepper.model.action_bounds("cpu", torch.float64)
    assert torch.equal(low, torch.zeros(1, 4, dtype=torch.float64))
    assert torch.equal(high, torch.full((1, 4), DRONE.max_thrust, dtype=torch.float64))
    world.step(thrusts(world, [100.0] * 4))  # clamped to max_thrust each
    expected = 4 * DRONE.max_thrust / DRONE.mass - G
    assert abs(world.state.torch.vel_z.item() - expected * 0.05) < EXACT_TOL


def test_drones_mix_with_planar_agents_and_collide_in_the_ground_plane():
    agents = [DRONE, AgentConfig(model="holonomic", ctrl_mode="acceleration", max_accel=0.0, mass=1.0)]
    agents.append(AgentConfig(model="diff_drive"))
    springs = WorldConfig(collision_k=100.0, collision_damping=0.0)
    world = drone_world(agents, integrator="euler", dt=0.01, world=springs)
    world.set_state(
        pos=torch.tensor([[[0.0, 0.0], [0.08, 0.0], [2.0, 0.0]]], dtype=torch.float64),
        pos_z=torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64),
    )
    hover = DRONE.mass * G / 4
    actions = torch.tensor([[[hover] * 4, [0.0] * 4, [0.5, 1.0, 0.0, 0.0]]], dtype=torch.float64)
    world.step(actions)
    state = world.state.torch
    overlap = 2 * 0.05 - 0.08
    force = 100.0 * overlap  # the pair pushes apart along x, equal and opposite
    assert abs(state.vel[0, 0, 0].item() + force / DRONE.mass * 0.01) < EXACT_TOL
    assert abs(state.vel[0, 1, 0].item() - force / 1.0 * 0.01) < EXACT_TOL
    assert abs(state.pos_z[0, 0].item() - 1.0) < EXACT_TOL  # the drone still hovers
    assert abs(state.speed[0, 2].item() - 0.5) < EXACT_TOL and abs(state.ang_vel[0, 2].item() - 1.0) < EXACT_TOL
    # Planar agents carry the 6-DOF fields at rest.
    assert torch.equal(state.quat[0, 1:], torch.tensor([[0.0, 0.0, 0.0, 1.0]] * 2, dtype=torch.float64))


def test_fleets_without_drones_keep_their_results_and_act_dim():
    stepper = Stepper([AgentConfig()], device="cpu")
    assert stepper.act_dim == 2 and not stepper.model.has_drones
    mixed = Stepper([AgentConfig(), DRONE], device="cpu")
    assert mixed.act_dim == 4 and mixed.model.has_drones


# --- gradients ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("order", ["drone first", "drone between"])
def test_gradcheck_float64(integrator, order, rng):
    planar = [AgentConfig(radius=0.05), AgentConfig(model="diff_drive", ctrl_mode="acceleration", radius=0.05)]
    agents = [DRONE, *planar] if order == "drone first" else [planar[0], DRONE, planar[1]]
    stepper = Stepper(agents, dt=0.02, device="cpu", integrator=integrator, dtype="float64")
    drone = agents.index(DRONE)
    q = rng.normal(size=(1, 3, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)

    def tensor(value):
        return torch.tensor(value, dtype=torch.float64, requires_grad=True)

    # Agents 1 m apart (no contact), the drone 2 m up; every command inside its limits.
    fields = (
        tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]),
        tensor([[0.1, -0.2, 0.4]]),
        tensor([[[0.2, 0.1], [0.0, 0.3], [0.1, -0.1]]]),
        tensor([[0.2, 0.3, 0.1]]),
        tensor([[0.1, 0.0, 0.2]]),
        tensor([[2.0 if a == drone else 0.0 for a in range(3)]]),
        tensor([[0.1, 0.0, 0.0]]),
        tensor(q),
        tensor(rng.normal(size=(1, 3, 3))),
    )
    commands = [[0.3, 0.2, 0.0, 0.0], [0.4, -0.5, 0.0, 0.0]]
    commands.insert(drone, [1.0, 1.5, 1.2, 0.9])
    actions = tensor([commands])

    def step(*inputs):
        return tuple(swarp.warp_step(stepper, TorchState(*inputs[:-1]), inputs[-1]))

    assert torch.autograd.gradcheck(step, (*fields, actions))


def test_missing_drone_fields_start_at_rest():
    stepper = Stepper([DRONE], dt=0.02, device="cpu", dtype="float64")
    zeros = torch.zeros(1, 1, dtype=torch.float64)
    planar = torch.zeros(1, 1, 2, dtype=torch.float64)
    state = TorchState(planar, zeros, planar, zeros, zeros)  # the drone fields left out (None)
    out = swarp.warp_step(stepper, state, torch.full((1, 1, 4), DRONE.mass * G / 4, dtype=torch.float64))
    assert out.pos_z.item() == 0.0
    assert torch.equal(out.quat[0, 0], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64))


# --- finite under any in-bounds actions -----------------------------------------------------------------

#: drone_navigation's drone and step (the configuration whose body rates used to overflow).
NAV_DRONE = AgentConfig(model="drone")
NAV_DT = 0.1
#: Rounding allowed above the body-rate limit [-] (the clip scales by limit / |w|).
RATE_RTOL = 1e-6


def worst_torque(step: int, max_thrust: float) -> list[float]:
    """Rotor 1 at full thrust, rotor 3 off, rotors 0 and 2 alternating: the largest sustained roll
    torque with a pitch torque that flips every step."""
    high = step % 2 == 0
    return [max_thrust if high else 0.0, max_thrust, 0.0 if high else max_thrust, 0.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_body_rates_stay_finite_and_limited_under_any_in_bounds_thrusts(integrator, dtype):
    """Env 0 holds the worst torque, envs 1-7 fly uniform random thrusts, 4,000 steps at
    drone_navigation's dt: every field stays finite, |w| <= max_body_rate and q a unit quaternion.
    (Without the limit |w| overflowed within ~90 steps.)"""
    n_envs, n_steps = 8, 4000
    stepper = Stepper([NAV_DRONE], dt=NAV_DT, device="cpu", world=FREE, integrator=integrator, dtype=dtype)
    world = World(stepper, n_envs)
    torch_dtype = stepper.torch_dtype
    world.set_state(pos_z=torch.full((n_envs, 1), 1.0, dtype=torch_dtype))
    generator = torch.Generator().manual_seed(0)
    limit = NAV_DRONE.max_body_rate
    fastest = 0.0
    for t in range(n_steps):
        actions = torch.rand(n_envs, 1, 4, generator=generator, dtype=torch_dtype) * NAV_DRONE.max_thrust
        actions[0, 0] = torch.tensor(worst_torque(t, NAV_DRONE.max_thrust), dtype=torch_dtype)
        world.step(actions)
        rates = world.state.torch.omega.norm(dim=-1)
        assert bool((rates <= limit * (1 + RATE_RTOL)).all()), (t, rates.max())
        fastest = max(fastest, float(rates.max()))
    for name, value in world.state.torch._asdict().items():
        assert bool(torch.isfinite(value).all()), name
    torch.testing.assert_close(world.state.torch.quat.norm(dim=-1), torch.ones(n_envs, 1, dtype=torch_dtype))
    assert fastest > 0.9 * limit, "the worst torque spins the drone up to the limit"
    assert not bool(world.invalid_actions())


def test_the_body_rate_limit_holds_on_entry_and_is_a_parameter_column():
    """A state set above the limit is clipped in the first substep, and the limit is a per-env
    parameter (``max_body_rate``): each env's drone saturates at its own."""
    limits = torch.tensor([2.0, 7.0], dtype=torch.float64)
    stepper = Stepper([NAV_DRONE], dt=0.02, device="cpu", world=FREE, dtype="float64")
    world = World(stepper, 2)
    enable_per_env_params(world.model, 2)
    write_params(world.model, max_body_rate=limits.view(2, 1))
    world.set_state(omega=torch.tensor([[[300.0, -400.0, 0.0]]] * 2, dtype=torch.float64))
    world.step(torch.zeros(2, 1, 4, dtype=torch.float64))
    torch.testing.assert_close(world.state.torch.omega.norm(dim=-1)[:, 0], limits, rtol=1e-12, atol=0)
    direction = world.state.torch.omega[:, 0] / limits.view(2, 1)
    torch.testing.assert_close(direction, torch.tensor([[0.6, -0.8, 0.0]] * 2, dtype=torch.float64))
    for t in range(400):
        world.step(thrusts(world, worst_torque(t, NAV_DRONE.max_thrust)))
    rates = world.state.torch.omega.norm(dim=-1)[:, 0]
    assert bool((rates <= limits * (1 + RATE_RTOL)).all()) and bool((rates > 0.9 * limits).all()), rates
    with pytest.raises(ValueError, match="max_body_rate must be >= 0"):
        write_params(world.model, max_body_rate=-1.0)


def test_a_degenerate_attitude_becomes_level_not_nan():
    """Warp's normalize maps a zero quaternion to the identity; the step stays finite from there."""
    world = drone_world()
    world.set_state(pos_z=torch.ones(1, 1, dtype=torch.float64), quat=torch.zeros(1, 1, 4, dtype=torch.float64))
    world.step(thrusts(world, [1.0, 2.0, 1.0, 0.5]))
    state = world.state.torch
    assert all(bool(torch.isfinite(value).all()) for value in state)
    assert abs(float(state.quat.norm()) - 1.0) < EXACT_TOL


def test_drone_navigation_stays_finite_under_random_in_bounds_actions():
    """The issue's reproduction at CI size: 16 envs, auto-reset, uniform thrusts inside
    ``action_bounds`` for 2,000 steps (NaN appeared from step ~91 before the body-rate limit)."""
    env = swarp.make("drone_navigation", n_envs=16, device="cpu", seed=0, auto_reset=True)
    env.reset()
    low, high = env.action_bounds
    generator = torch.Generator().manual_seed(0)
    for step in range(2000):
        actions = low + (high - low) * torch.rand((env.n_envs, *low.shape), generator=generator, dtype=low.dtype)
        obs, reward, *_ = env.step(actions)
        if step % 50 == 49:
            assert bool(torch.isfinite(obs).all()) and bool(torch.isfinite(reward).all()), step
            assert float(env.state.omega.norm(dim=-1).max()) <= NAV_DRONE.max_body_rate * (1 + RATE_RTOL)
    assert all(bool(torch.isfinite(value).all()) for value in env.state if value is not None)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_huge_finite_thrusts_act_as_the_bounds(integrator, dtype):
    """Each env commands rotor thrusts of +-huge finite magnitudes; its twin commands the clamped
    bounds (max_thrust for +, 0 for -): the same bits, and no invalid-action flag."""
    finfo_max = float(np.finfo(np.dtype(dtype)).max)
    signs = torch.tensor([[1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, -1.0, 1.0], [1.0, 1.0, -1.0, -1.0]], dtype=torch.float64)
    n_envs = 3 * 4
    worlds = [
        World(Stepper([NAV_DRONE], dt=0.02, device="cpu", world=FREE, integrator=integrator, dtype=dtype), n_envs)
        for _ in range(2)
    ]
    torch_dtype = worlds[0].stepper.torch_dtype
    huge = torch.cat([signs * m for m in (1e20, 1e30, 3e38, finfo_max)]).to(torch_dtype).view(n_envs, 1, 4)
    bounds = torch.where(huge > 0, NAV_DRONE.max_thrust, 0.0).to(torch_dtype)
    for world, actions in zip(worlds, (huge, bounds), strict=True):
        world.set_state(pos_z=torch.full((n_envs, 1), 1.0, dtype=torch_dtype))
        for _ in range(5):
            world.step(actions)
        assert not bool(world.invalid_actions())
    for name, value in worlds[0].state.torch._asdict().items():
        assert torch.equal(value, getattr(worlds[1].state.torch, name)), name
