"""Contact forces: agent pairs, static obstacles and world bounds (``swarp/physics/contacts.py``,
``swarp/physics/bounds.py``)."""

import functools
import math

import numpy as np
import pytest
import torch
import warp as wp

from swarp import AgentConfig, Obstacle, ObstacleShape, Stepper, World, WorldConfig
from swarp.physics import contacts

#: Agreement of a float64 force or distance with its numpy reference [N] / [m].
FORCE_TOL = 1e-9
#: How far inside an obstacle or wall an agent may still be after being pushed out [m].
PUSH_OUT_TOL = 1e-6

K, C = 100.0, 2.0


def make_world(agents, world: WorldConfig, *, dt=0.1, substeps=1, dtype="float64", n_envs=1) -> World:
    stepper = Stepper(agents, dt=dt, device="cpu", world=world, substeps=substeps, integrator="euler", dtype=dtype)
    return World(stepper, n_envs)


def forces_of(world: World) -> torch.Tensor:
    """Contact forces [E, A, 2] of the last substep."""
    return wp.to_torch(world.forces)


def zeros_action(world: World) -> torch.Tensor:
    return torch.zeros(world.n_envs, world.n_agents, 2, dtype=world.stepper.torch_dtype)


# --- agent-agent -------------------------------------------------------------------------------


def reference_pair_force(p_i, v_i, r_i, p_j, v_j, r_j, k, c):
    """Force on i from j (numpy, float64), for centres that do not coincide."""
    delta = p_i - p_j
    d = np.linalg.norm(delta, axis=-1, keepdims=True)
    normal = delta / d
    separating = np.sum((v_i - v_j) * normal, axis=-1, keepdims=True)
    magnitude = np.maximum(k * (r_i + r_j - d) - c * separating, 0.0)
    return np.where(d < r_i + r_j, magnitude * normal, 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pair_forces_are_equal_and_opposite_bitwise(rng, dtype):
    n_envs = 256
    radii = (0.1, 0.15)
    agents = [AgentConfig(ctrl_mode="acceleration", radius=r) for r in radii]
    world = make_world(agents, WorldConfig(collision_k=K, collision_damping=C), n_envs=n_envs, dtype=dtype)
    torch_dtype = world.stepper.torch_dtype
    p0 = rng.uniform(-1, 1, (n_envs, 2))
    angle = rng.uniform(-math.pi, math.pi, n_envs)
    # Mostly overlapping pairs, some merely in neighbor range, a few with coincident centres.
    distance = rng.uniform(0.0, 1.2, n_envs) * sum(radii)
    distance[:8] = 0.0
    p1 = p0 + distance[:, None] * np.stack([np.cos(angle), np.sin(angle)], -1)
    pos = torch.as_tensor(np.stack([p0, p1], axis=1), dtype=torch_dtype)
    vel = torch.as_tensor(rng.uniform(-0.5, 0.5, (n_envs, 2, 2)), dtype=torch_dtype)
    world.set_state(pos=pos, vel=vel)
    world.step(zeros_action(world))
    forces = forces_of(world)
    assert torch.equal(forces[:, 0], -forces[:, 1])
    assert (forces[:, 0].norm(dim=-1) > 0).sum() > n_envs // 2
    assert torch.all(forces[distance >= sum(radii)] == 0)
    # Coincident centres push apart along x, the lower index towards +x.
    coincident = forces[:8]
    assert torch.all(coincident[:, 0, 0] > 0) and torch.all(coincident[:, :, 1] == 0)
    if dtype == "float64":
        pos64, vel64 = pos.numpy(), vel.numpy()
        rest = slice(8, None)
        expected = reference_pair_force(
            pos64[rest, 0], vel64[rest, 0], radii[0], pos64[rest, 1], vel64[rest, 1], radii[1], K, C
        )
        np.testing.assert_allclose(forces[rest, 0].numpy(), expected, atol=FORCE_TOL, rtol=0)
        torch.testing.assert_close(
            coincident[:, 0, 0], K * sum(radii) - C * (vel[:8, 0, 0] - vel[:8, 1, 0]).clamp(max=K * sum(radii) / C)
        )


def test_crowd_forces_sum_to_zero(rng):
    """Gathered per agent over symmetric neighbor lists, the forces of an env cancel."""
    n_envs, n_agents = 4, 24
    world = make_world(
        [AgentConfig(ctrl_mode="acceleration", radius=0.1)] * n_agents,
        WorldConfig(collision_k=K, collision_damping=C, max_neighbors=n_agents - 1),
        n_envs=n_envs,
    )
    world.set_state(
        pos=torch.as_tensor(rng.uniform(-0.4, 0.4, (n_envs, n_agents, 2))),
        vel=torch.as_tensor(rng.uniform(-0.5, 0.5, (n_envs, n_agents, 2))),
    )
    world.step(zeros_action(world))
    assert not bool(world.neighbor_overflow())
    forces = forces_of(world)
    assert forces.norm(dim=-1).max() > 1.0
    torch.testing.assert_close(forces.sum(dim=1), torch.zeros(n_envs, 2, dtype=torch.float64), atol=FORCE_TOL, rtol=0)


def test_collisions_flag_disables_agent_forces_only():
    overlapping = torch.tensor([[[0.0, 0.0], [0.05, 0.0]]], dtype=torch.float64)
    agents = [AgentConfig(radius=0.1)] * 2
    off = make_world(agents, WorldConfig(collisions=False))
    on = make_world(agents, WorldConfig(collisions=True))
    for world in (off, on):
        world.set_state(pos=overlapping)
        for _ in range(5):
            world.step(zeros_action(world))
    assert torch.all(forces_of(off) == 0)
    assert torch.equal(off.state.torch.pos, overlapping)
    gap = on.state.torch.pos[0, 1, 0] - on.state.torch.pos[0, 0, 0]
    assert gap > 0.1, "with collisions on the overlapping pair separates"
    # Obstacles still act when agent-agent collisions are off.
    blocked = make_world(agents, WorldConfig(collisions=False, obstacles=(Obstacle.circle((0.02, 0.0), 0.05),)))
    blocked.set_state(pos=overlapping)
    blocked.step(zeros_action(blocked))
    assert torch.all(forces_of(blocked).norm(dim=-1) > 0)


# --- obstacles ---------------------------------------------------------------------------------

OBSTACLES = {
    "circle": Obstacle.circle((0.3, -0.2), 0.5),
    "box": Obstacle.box((0.1, 0.2), (0.6, 0.3), angle=0.7),
    "capsule": Obstacle.segment((-0.5, -0.3), (0.4, 0.5), thickness=0.2),
    "thin_segment": Obstacle.segment((-0.5, 0.3), (0.5, -0.1)),
}


def reference_distance(p: np.ndarray, obstacle: Obstacle) -> np.ndarray:
    """Signed distance [m] from points p [..., 2] to an obstacle (numpy, float64)."""
    c, s = math.cos(-obstacle.angle), math.sin(-obstacle.angle)
    rel = p - np.asarray(obstacle.center)
    x, y = c * rel[..., 0] - s * rel[..., 1], s * rel[..., 0] + c * rel[..., 1]
    a, b = obstacle.size
    if obstacle.shape == ObstacleShape.CIRCLE:
        return np.hypot(x, y) - a
    if obstacle.shape == ObstacleShape.BOX:
        qx, qy = np.abs(x) - a, np.abs(y) - b
        return np.hypot(np.maximum(qx, 0), np.maximum(qy, 0)) + np.minimum(np.maximum(qx, qy), 0)
    return np.hypot(x - np.clip(x, -a, a), y) - b


@functools.cache
def distance_kernel(scalar):
    obstacle_distance = contacts.funcs(scalar).obstacle_distance
    vec2 = wp.types.vector(2, scalar)
    vec3 = wp.types.vector(3, scalar)

    @wp.kernel(module="unique")
    def distance(
        points: wp.array(dtype=vec2),
        shape: int,
        center: vec2,
        angle: scalar,
        size: vec2,
        hit_out: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        hit_out[i] = obstacle_distance(points[i], shape, center, angle, size)

    return distance


@pytest.mark.parametrize("name", list(OBSTACLES))
def test_obstacle_distance_and_normal_match_reference(rng, name):
    obstacle = OBSTACLES[name]
    points = rng.uniform(-1.2, 1.2, (2000, 2))
    vec2 = wp.types.vector(2, wp.float64)
    hits = wp.zeros(len(points), dtype=wp.types.vector(3, wp.float64), device="cpu")
    wp.launch(
        distance_kernel(wp.float64),
        dim=len(points),
        inputs=[
            wp.array(points, dtype=vec2, device="cpu"),
            int(obstacle.shape),
            vec2(*obstacle.center),
            wp.float64(obstacle.angle),
            vec2(*obstacle.size),
        ],
        outputs=[hits],
        device="cpu",
    )
    hits = hits.numpy()
    expected = reference_distance(points, obstacle)
    np.testing.assert_allclose(hits[:, 0], expected, atol=FORCE_TOL, rtol=0)
    assert (expected < 0).any() and (expected > 0).any() or obstacle.size[1] == 0
    np.testing.assert_allclose(np.linalg.norm(hits[:, 1:], axis=1), 1.0, atol=FORCE_TOL)
    # The normal is the gradient of the signed distance wherever that is smooth.
    eps = 1e-6
    gradient = np.stack(
        [
            reference_distance(points + [eps, 0], obstacle) - reference_distance(points - [eps, 0], obstacle),
            reference_distance(points + [0, eps], obstacle) - reference_distance(points - [0, eps], obstacle),
        ],
        axis=1,
    ) / (2 * eps)
    smooth = np.abs(np.linalg.norm(gradient, axis=1) - 1.0) < 1e-4
    assert smooth.mean() > 0.9
    np.testing.assert_allclose(hits[smooth, 1:], gradient[smooth], atol=1e-4)


@pytest.mark.parametrize("name", ["circle", "box", "capsule"])
@pytest.mark.parametrize("model", ["holonomic", "diff_drive"])
def test_agent_inside_obstacle_is_pushed_out(rng, name, model):
    obstacle = OBSTACLES[name]
    n_envs, radius = 16, 0.05
    # Random start points strictly inside the obstacle, away from its centre and medial axis.
    candidates = rng.uniform(-1.2, 1.2, (20000, 2))
    depth = -reference_distance(candidates, obstacle)
    inside = candidates[(depth > 0.02) & (depth < 0.12)][:n_envs]
    assert len(inside) == n_envs
    world = make_world(
        [AgentConfig(model=model, radius=radius)],
        WorldConfig(obstacles=(obstacle,)),
        dt=0.1,
        substeps=2,
        n_envs=n_envs,
    )
    world.set_state(pos=torch.as_tensor(inside[:, None, :]))
    for _ in range(100):
        world.step(zeros_action(world))
    final = world.state.torch.pos[:, 0].numpy()
    clearance = reference_distance(final, obstacle) - radius
    assert np.all(clearance >= -PUSH_OUT_TOL), clearance.min()
    assert np.all(np.linalg.norm(final - inside, axis=1) > 0.02)
    if name == "box":
        # Pushed out through the face nearest to the start, along the box's own axes.
        c, s = math.cos(-obstacle.angle), math.sin(-obstacle.angle)

        def local(p):
            rel = p - np.asarray(obstacle.center)
            return np.stack([c * rel[:, 0] - s * rel[:, 1], s * rel[:, 0] + c * rel[:, 1]], 1)

        start, end = local(inside), local(final)
        gaps = np.abs(start) - np.asarray(obstacle.size)
        axis = np.argmax(gaps, axis=1)
        rows = np.arange(n_envs)
        assert np.all(np.sign(end[rows, axis]) == np.sign(start[rows, axis]))
        assert np.all(np.abs(end[rows, axis]) >= np.asarray(obstacle.size)[axis] + radius - PUSH_OUT_TOL)


def test_per_env_obstacles_act_only_in_their_env():
    world = make_world([AgentConfig(radius=0.1)], WorldConfig(), n_envs=2)
    world.model.set_obstacles([[Obstacle.circle((0.05, 0.0), 0.1)], [Obstacle.circle((5.0, 5.0), 0.1)]])
    world.invalidate()
    world.step(zeros_action(world))
    forces = forces_of(world)
    assert forces[0, 0, 0] < 0 and forces[0, 0, 1] == 0
    assert torch.all(forces[1] == 0)


# --- world bounds ----------------------------------------------------------------------------

BOUNDS = (-1.0, 2.0, -0.5, 1.5)


def outward_drive(rng, n_envs, n_agents, torch_dtype):
    angle = rng.uniform(-math.pi, math.pi, (n_envs, n_agents))
    return torch.as_tensor(np.stack([np.cos(angle), np.sin(angle)], -1), dtype=torch_dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("model", ["holonomic", "diff_drive"])
def test_clamp_bounds_never_let_an_agent_out(rng, dtype, model):
    n_envs, n_agents, radius = 4, 8, 0.1
    world = make_world(
        [AgentConfig(model=model, radius=radius, max_speed=2.0)] * n_agents,
        WorldConfig(bounds=BOUNDS, bounds_mode="clamp", collisions=False),
        n_envs=n_envs,
        dtype=dtype,
        substeps=2,
    )
    torch_dtype = world.stepper.torch_dtype
    lo_x, hi_x, lo_y, hi_y = (torch.tensor(b, dtype=torch_dtype) for b in BOUNDS)
    r = torch.tensor(radius, dtype=torch_dtype)
    if model == "holonomic":
        drive = outward_drive(rng, n_envs, n_agents, torch_dtype) * 2.0
    else:
        world.set_state(theta=torch.as_tensor(rng.uniform(-3, 3, (n_envs, n_agents)), dtype=torch_dtype))
        drive = torch.tensor([2.0, 0.5], dtype=torch_dtype).expand(n_envs, n_agents, 2).contiguous()
    pos, vel = world.state.torch.pos, world.state.torch.vel
    touched = torch.zeros(n_envs, n_agents, dtype=torch.bool)
    for _ in range(30):
        world.step(drive)
        x, y = pos[..., 0], pos[..., 1]
        assert torch.all((x >= lo_x + r) & (x <= hi_x - r) & (y >= lo_y + r) & (y <= hi_y - r))
        # On a wall, the velocity component pointing out of the arena is zeroed.
        assert torch.all(vel[..., 0][x == hi_x - r] <= 0) and torch.all(vel[..., 0][x == lo_x + r] >= 0)
        assert torch.all(vel[..., 1][y == hi_y - r] <= 0) and torch.all(vel[..., 1][y == lo_y + r] >= 0)
        touched |= (x == hi_x - r) | (x == lo_x + r) | (y == hi_y - r) | (y == lo_y + r)
    assert touched.float().mean() > 0.5, "the drive should press most agents against a wall"


def test_soft_bounds_push_back_with_bounded_penetration():
    """A soft wall is the contact spring: pressing into it at speed u settles at u m / (k h)."""
    radius, speed, dt = 0.1, 0.5, 0.05
    world = make_world(
        [AgentConfig(radius=radius)] * 2,
        WorldConfig(bounds=BOUNDS, bounds_mode="soft", collision_k=K, collision_damping=C),
        dt=dt,
    )
    # Agent 0 presses into the right wall; agent 1 starts half outside the top wall and rests.
    world.set_state(pos=torch.tensor([[[1.5, 0.0], [0.0, 1.5]]], dtype=torch.float64))
    drive = torch.tensor([[[speed, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    penetration = []
    for _ in range(200):
        world.step(drive)
        penetration.append(world.state.torch.pos[0, 0, 0].item() + radius - BOUNDS[1])
    settled = speed * 1.0 / (K * dt)
    assert max(penetration) > 0.5 * settled, "soft walls let an agent penetrate"
    assert max(penetration) <= settled + FORCE_TOL
    assert penetration[-1] == pytest.approx(settled, abs=1e-6)
    assert world.state.torch.pos[0, 1, 1] <= BOUNDS[3] - radius + PUSH_OUT_TOL
    assert world.state.torch.pos[0, 1, 1] > BOUNDS[3] - radius - 0.05


def test_without_bounds_agents_roam_freely():
    world = make_world([AgentConfig()], WorldConfig(bounds=None))
    drive = torch.tensor([[[1.0, -1.0]]], dtype=torch.float64) / math.sqrt(2)
    for _ in range(100):
        world.step(drive)
    torch.testing.assert_close(world.state.torch.pos[0, 0], drive[0, 0] * 10.0)
    assert torch.all(forces_of(world) == 0)
