"""Lidar (``swarp/sensors/lidar.py``): analytic hits per shape, Warp kernel against the torch
reference, env isolation, gradients, and ``lidar_rays=`` observations inside the step."""

import contextlib
import math

import pytest
import torch
import warp as wp

import swarp
from swarp import AgentConfig, Obstacle, Stepper, World, WorldConfig
from swarp.core.config import Body
from swarp.runtime.launch import Launcher
from swarp.runtime.plan import LIDAR_RAYS_PER_THREAD, ExecutionPlan
from swarp.sensors.lidar import (
    HIT_AGENT,
    HIT_BODY,
    HIT_NONE,
    HIT_OBSTACLE,
    HIT_WALL,
    Lidar,
    LidarConfig,
    launch_scan,
    lidar_reference_model,
    lidar_warp,
    world_bodies,
)
from swarp.sensors.lidar.kernels import ENV_KERNEL_MAX_FLEET

#: Agreement of float64 distances between kernel, reference and closed forms [m].
EXACT_TOL = 1e-12
#: Agreement of float32 kernel and reference distances [m] (rounding of a few trig/sqrt ops).
FLOAT32_TOL = 2e-5
#: Agreement of fused (Warp) and torch environment observations, float32.
OBS_TOL = 1e-5


def make_world(obstacles=(), bounds=None, n_agents=1, n_envs=1, radius=0.1, dtype="float64", device="cpu") -> World:
    world = WorldConfig(bounds=bounds, obstacles=tuple(obstacles), collisions=False)
    stepper = Stepper([AgentConfig(radius=radius)] * n_agents, device=device, world=world, dtype=dtype)
    return World(stepper, n_envs)


def place(world: World, pos, theta=None) -> None:
    device = str(world.stepper.device)
    pos = torch.as_tensor(pos, dtype=world.stepper.torch_dtype).reshape(world.n_envs, world.n_agents, 2).to(device)
    theta = torch.zeros(world.n_envs, world.n_agents, dtype=pos.dtype) if theta is None else theta
    world.set_state(pos=pos, theta=torch.as_tensor(theta, dtype=pos.dtype).reshape(pos.shape[:2]).to(device))


def both_scans(world: World, config: LidarConfig):
    """(kernel scan, reference scan), each a LidarScan; the kernel one is cloned."""
    kernel = Lidar(world, config).scan()
    kernel = type(kernel)(*(t.clone() for t in kernel))
    return kernel, lidar_reference_model(world.model, config, world.state.torch.pos, world.state.torch.theta)


# --- analytic hits ------------------------------------------------------------------------------

#: Distance to the near corner of a 0.2 m square turned 45 degrees, centred 1 m ahead [m].
CORNER = 1.0 - math.hypot(0.1, 0.1)
ANALYTIC_CASES = {
    # name: (obstacles, bounds, expected distance of ray 0 from the origin heading +x, expected kind)
    "circle": ([Obstacle.circle((1.0, 0.0), 0.25)], None, 0.75, HIT_OBSTACLE),
    "box": ([Obstacle.box((1.0, 0.0), (0.2, 0.3))], None, 0.8, HIT_OBSTACLE),
    "rotated box corner": ([Obstacle.box((1.0, 0.0), (0.1, 0.1), math.pi / 4)], None, CORNER, HIT_OBSTACLE),
    "bare segment": ([Obstacle.segment((0.5, -1.0), (0.5, 1.0))], None, 0.5, HIT_OBSTACLE),
    "capsule side": ([Obstacle.segment((0.5, -1.0), (0.5, 1.0), 0.05)], None, 0.45, HIT_OBSTACLE),
    "capsule cap": ([Obstacle.segment((0.5, 0.0), (1.5, 0.0), 0.1)], None, 0.4, HIT_OBSTACLE),
    "wall": ([], 0.7, 0.7, HIT_WALL),
    "nothing": ([], None, 2.0, HIT_NONE),
}


@pytest.mark.parametrize("case", ANALYTIC_CASES, ids=list(ANALYTIC_CASES))
def test_ray_hits_match_closed_forms(case):
    obstacles, bounds, expected, kind = ANALYTIC_CASES[case]
    world = make_world(obstacles, bounds)
    place(world, [[0.0, 0.0]])
    for scan in both_scans(world, LidarConfig(4, max_range=2.0)):
        assert abs(scan.distance[0, 0, 0].item() - expected) < EXACT_TOL
        assert scan.kind[0, 0, 0].item() == kind
        assert scan.index[0, 0, 0].item() == (0 if kind == HIT_OBSTACLE else -1)


def test_rays_fan_out_from_the_heading_and_see_walls_at_the_right_angles():
    world = make_world(bounds=(-1.0, 2.0, -3.0, 4.0))
    place(world, [[0.5, 0.0]], theta=[[math.pi / 2]])
    for scan in both_scans(world, LidarConfig(8, max_range=10.0)):
        # Ray k points along pi/2 + k pi/4: up, up-left, left, down-left, down, down-right, right, up-right.
        up, left, down, right = 4.0, 1.5, 3.0, 1.5
        expected = [up, left * math.sqrt(2), left, left * math.sqrt(2), down, right * math.sqrt(2), right]
        expected.append(right * math.sqrt(2))
        assert torch.allclose(scan.distance[0, 0], torch.tensor(expected, dtype=torch.float64), atol=EXACT_TOL)
        assert (scan.kind == HIT_WALL).all()


def test_rays_see_other_agents_of_their_env_and_never_themselves():
    world = make_world(n_agents=3, radius=0.1)
    place(world, [[0.0, 0.0], [0.6, 0.0], [0.0, -1.0]])
    for scan in both_scans(world, LidarConfig(4, max_range=2.0)):
        assert abs(scan.distance[0, 0, 0].item() - 0.5) < EXACT_TOL  # agent 1's near side
        assert (scan.kind[0, 0, 0].item(), scan.index[0, 0, 0].item()) == (HIT_AGENT, 1)
        assert abs(scan.distance[0, 0, 3].item() - 0.9) < EXACT_TOL  # agent 2 straight down
        assert (scan.kind[0, 0, 3].item(), scan.index[0, 0, 3].item()) == (HIT_AGENT, 2)
        # Agent 1 looks away from agent 0 along +x; its backward ray (k = 2) sees agent 0.
        assert scan.kind[0, 1, 0].item() == HIT_NONE
        assert abs(scan.distance[0, 1, 2].item() - 0.5) < EXACT_TOL


def test_rays_never_see_agents_or_obstacles_of_other_envs():
    world = make_world(n_agents=2, n_envs=2, radius=0.1)
    # Agent 0 sits at the origin in both envs; only env 1 has an agent and an obstacle next to it.
    place(world, [[[0.0, 0.0], [-5.0, 0.0]], [[0.0, 0.0], [0.5, 0.0]]])
    world.model.set_obstacles([[Obstacle.circle((-3.0, 3.0), 0.1)], [Obstacle.circle((0.0, 0.5), 0.1)]])
    for scan in both_scans(world, LidarConfig(4, max_range=2.0)):
        assert (scan.kind[0, 0] == HIT_NONE).all()
        assert torch.equal(scan.distance[0, 0], torch.full((4,), 2.0, dtype=torch.float64))
        assert (scan.kind[1, 0, 0].item(), scan.index[1, 0, 0].item()) == (HIT_AGENT, 1)
        assert (scan.kind[1, 0, 1].item(), scan.index[1, 0, 1].item()) == (HIT_OBSTACLE, 0)
        assert abs(scan.distance[1, 0, 0].item() - 0.4) < EXACT_TOL
        assert abs(scan.distance[1, 0, 1].item() - 0.4) < EXACT_TOL


def test_origin_inside_a_shape_reads_zero():
    world = make_world([Obstacle.box((0.0, 0.0), (0.3, 0.2), 0.4)])
    place(world, [[0.1, 0.05]])
    for scan in both_scans(world, LidarConfig(5, max_range=1.0)):
        assert torch.equal(scan.distance, torch.zeros_like(scan.distance))
        assert (scan.kind == HIT_OBSTACLE).all()


# --- kernel against reference ---------------------------------------------------------------------


def random_world(generator, dtype, n_envs=5, n_agents=6, device="cpu") -> World:
    shared = [
        Obstacle.circle((1.0, 0.3), 0.2),
        Obstacle.box((-0.5, 1.0), (0.1, 0.3), 0.7),
        Obstacle.segment((-1.0, -1.0), (-0.2, -1.4), 0.05),
        Obstacle.segment((0.5, -0.5), (1.0, -1.2)),
    ]
    world = make_world(shared, bounds=2.0, n_agents=n_agents, n_envs=n_envs, radius=0.08, dtype=dtype, device=device)
    world.model.set_obstacle_slots(n_envs, 2)
    obstacles = world.model.obstacle_tensors()
    per_env = (torch.rand(n_envs, 2, 2, generator=generator, dtype=torch.float64) * 3 - 1.5).to(device)
    obstacles["shape"][:, 4] = 2  # a box per env
    obstacles["center"][:, 4] = per_env[:, 0].to(obstacles["center"].dtype)
    obstacles["size"][:, 4] = 0.15
    obstacles["angle"][:, 4] = torch.linspace(-3, 3, n_envs, dtype=torch.float64, device=device).to(
        obstacles["angle"].dtype
    )
    obstacles["shape"][:, 5] = 3  # and a capsule
    obstacles["center"][:, 5] = per_env[:, 1].to(obstacles["center"].dtype)
    obstacles["size"][:, 5, 0] = 0.3
    obstacles["size"][:, 5, 1] = 0.02
    pos = torch.rand(n_envs, n_agents, 2, generator=generator, dtype=torch.float64) * 3.6 - 1.8
    theta = torch.rand(n_envs, n_agents, generator=generator, dtype=torch.float64) * 2 * math.pi - math.pi
    place(world, pos.to(world.stepper.torch_dtype), theta.to(world.stepper.torch_dtype))
    return world


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_warp_scan_equals_torch_reference(generator, dtype):
    world = random_world(generator, dtype)
    config = LidarConfig(32, max_range=1.5)
    kernel, reference = both_scans(world, config)
    tol = EXACT_TOL if dtype == "float64" else FLOAT32_TOL
    assert (kernel.distance - reference.distance).abs().max().item() < tol
    # Discrete results agree wherever the nearest two candidates are not within rounding of each other.
    assert (kernel.kind != reference.kind).float().mean().item() <= (0.0 if dtype == "float64" else 0.002)
    kinds = set(reference.kind.unique().tolist())
    assert kinds == {HIT_NONE, HIT_AGENT, HIT_OBSTACLE, HIT_WALL}, kinds


def test_thread_layouts_give_identical_readings(generator):
    world = random_world(generator, "float64")
    config = LidarConfig(16, max_range=1.5)
    shape = (world.n_envs, world.n_agents, config.n_rays)
    outs = []
    for per_thread in (1, 7, world.n_agents * config.n_rays):
        out = wp.zeros(shape, dtype=wp.float64, device="cpu")
        launch_scan(world.model, config, world.state.pos, world.state.theta, out, rays_per_thread=per_thread)
        outs.append(wp.to_torch(out))
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def scans_by_layout(world: World, config: LidarConfig, layouts, bodies=None, mask=None, column=0):
    """[(distance, kind, index)] of one scan per ``launch_scan`` layout keywords in ``layouts``,
    into buffers pre-filled with -7."""
    scans = []
    for layout in layouts:
        shape = (world.n_envs, world.n_agents, column + config.n_rays)
        device = str(world.stepper.device)
        out = [wp.full(shape, -7.0, dtype=world.stepper.scalar, device=device)]
        out += [wp.zeros(shape[:2] + (config.n_rays,), dtype=wp.int32, device=device) for _ in range(2)]
        launch_scan(
            world.model, config, world.state.pos, world.state.theta, out[0], column, tuple(out[1:]), mask,
            bodies=bodies, **layout,
        )  # fmt: skip
        scans.append([wp.to_torch(a).clone() for a in out])
    return scans


def crowd(world: World) -> None:
    """Hard cases for the scans' disc tests in a random world: in every env agent 1 inside agent 0's
    disc (every ray of each meets the other at 0), agent 2 just clear of agent 0 and agent 3 a few
    radii off it; env 1's headings near 5,000 rad."""
    pos = world.state.torch.pos.clone()
    theta = world.state.torch.theta.clone()
    for agent, offset in ((1, (0.03, 0.01)), (2, (0.0, 0.165)), (3, (-0.3, 0.05))):
        if agent < world.n_agents:
            pos[:, agent] = pos[:, 0] + torch.tensor(offset, dtype=pos.dtype, device=pos.device)
    theta[1] += 5000.0
    world.set_state(pos=pos, theta=theta)


#: (launch_scan layout keywords, n_agents, n_rays): the CPU's default per-env scan, and the grouped
#: scan (CUDA's default) with ``group`` rays per thread, partial last groups included.
SCAN_LAYOUTS = [({}, 6, 32), ({}, 40, 7), ({}, 1, 45), ({}, 64, 3)] + [
    ({"group": group}, n_agents, n_rays) for group, n_agents, n_rays in [(2, 6, 32), (8, 5, 7), (16, 40, 45), (4, 1, 9)]
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layout, n_agents, n_rays", SCAN_LAYOUTS)
def test_scan_layouts_give_the_per_ray_bits(generator, dtype, layout, n_agents, n_rays):
    """The CPU's per-env scan and the grouped scan (each disc's terms computed once for several rays
    of an agent) read exactly what the per-ray scan reads: distances, kinds and indices bit for bit,
    with obstacles of every shape, walls, a mask and a column offset, agents inside and beside
    others, and with movable bodies."""
    layouts = ({"rays_per_thread": 1}, layout)
    world = random_world(generator, dtype, n_envs=4, n_agents=n_agents)
    crowd(world)
    config = LidarConfig(n_rays, max_range=1.5)
    mask = wp.array([True, False, True, True], dtype=wp.bool, device="cpu")
    rays, other = scans_by_layout(world, config, layouts, mask=mask, column=3)
    for a, b in zip(rays, other, strict=True):
        assert torch.equal(a, b)
    assert (other[0][1] == -7.0).all() and (other[0][:, :, :3] == -7.0).all()
    expected = {HIT_OBSTACLE, HIT_WALL} | ({HIT_AGENT} if n_agents > 1 else set())
    assert expected <= set(other[1].unique().tolist())
    if n_agents > 1:  # agent 0 reads 0 on every ray (it is inside agent 1's disc)
        keep = wp.to_torch(mask)
        assert (other[0][keep, 0, 3:] == 0).all() and (other[1][keep, 0] == HIT_AGENT).all()
    bodies = body_world([Body((Obstacle.box((0.0, 0.0), (0.3, 0.1)),))] * 2, n_agents=n_agents, n_envs=4, dtype=dtype)
    body_pos = torch.tensor([[0.3, 0.2], [-0.4, 0.1]], dtype=world.state.torch.pos.dtype).expand(4, 2, 2)
    bodies.set_state(pos=world.state.torch.pos, body_pos=body_pos.contiguous())
    rays, other = scans_by_layout(bodies, config, layouts, bodies=world_bodies(bodies))
    for a, b in zip(rays, other, strict=True):
        assert torch.equal(a, b)
    assert (other[1] == HIT_BODY).any()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_agents, n_rays", [(6, 32), (16, 32), (5, 7), (40, 45), (1, 9)])
def test_cuda_grouped_scan_gives_the_per_ray_bits(generator, dtype, n_agents, n_rays):
    """On the GPU, CUDA's default scan (grouped rays, the disc test folded into the comparison,
    ``sincosf``, walls once) reads exactly what the per-ray scan (the differentiable one) reads:
    distances, kinds and indices bit for bit, with obstacles, walls, agents inside and beside
    others, huge headings, a mask, a column offset, and movable bodies."""
    world = random_world(generator, dtype, n_envs=4, n_agents=n_agents, device="cuda:0")
    crowd(world)
    config = LidarConfig(n_rays, max_range=1.5)
    mask = wp.array([True, False, True, True], dtype=wp.bool, device="cuda:0")
    rays, grouped = scans_by_layout(world, config, ({"rays_per_thread": 1}, {}), mask=mask, column=3)
    for a, b in zip(rays, grouped, strict=True):
        assert torch.equal(a, b)
    if n_agents > 1:
        assert (grouped[1] == HIT_AGENT).any() and (grouped[0][0, 0, 3:] == 0).all()
    bodies = body_world(
        [Body((Obstacle.box((0.0, 0.0), (0.3, 0.1)),))] * 2, n_agents=n_agents, n_envs=4, dtype=dtype, device="cuda:0"
    )
    body_pos = torch.tensor([[0.3, 0.2], [-0.4, 0.1]], device="cuda:0").to(world.state.torch.pos.dtype)
    bodies.set_state(pos=world.state.torch.pos, body_pos=body_pos.expand(4, 2, 2).contiguous())
    rays, grouped = scans_by_layout(bodies, config, ({"rays_per_thread": 1}, {}), bodies=world_bodies(bodies))
    for a, b in zip(rays, grouped, strict=True):
        assert torch.equal(a, b)
    assert (grouped[1] == HIT_BODY).any()


def test_the_plan_picks_the_scan_layout_and_bad_groups_are_refused():
    """CUDA's plan scans ``LIDAR_RAYS_PER_THREAD`` rays per thread, the CPU's a whole env per
    thread; a bad group is refused by name."""
    assert ExecutionPlan().lidar_rays_per_thread == 0 and LIDAR_RAYS_PER_THREAD == 4
    world = make_world(n_agents=2, bounds=10.0)
    out = wp.zeros((1, 2, 4), dtype=wp.float64, device="cpu")
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="group must be an int >= 0"):
            launch_scan(world.model, LidarConfig(4), world.state.pos, world.state.theta, out, group=bad)


def test_cpu_scan_layout_follows_the_fleet_size():
    """Fleets up to ``ENV_KERNEL_MAX_FLEET`` scan with the per-env kernel on the CPU, larger ones
    (and any explicit ``rays_per_thread``) with the per-ray kernel."""
    launched = []

    class Spy(Launcher):
        def launch(self, kernel, *args, **kwargs):
            launched.append(kernel.key)

    for n_agents in (ENV_KERNEL_MAX_FLEET, ENV_KERNEL_MAX_FLEET + 1):
        world = make_world(n_agents=n_agents, bounds=10.0)
        out = wp.zeros((1, n_agents, 4), dtype=wp.float64, device="cpu")
        launch_scan(world.model, LidarConfig(4), world.state.pos, world.state.theta, out, launcher=Spy())
        launch_scan(
            world.model, LidarConfig(4), world.state.pos, world.state.theta, out, launcher=Spy(), rays_per_thread=2
        )
    assert ["lidar_scan_env" in key for key in launched] == [True, False, False, False]


def test_env_mask_and_column_offset():
    world = make_world(n_agents=2, n_envs=3, bounds=1.0)
    place(world, torch.zeros(3, 2, 2, dtype=torch.float64) + torch.tensor([[0.0, 0.0], [0.5, 0.5]]))
    config = LidarConfig(4, max_range=5.0)
    out = wp.full((3, 2, 10), -7.0, dtype=wp.float64, device="cpu")
    mask = wp.array([True, False, True], dtype=wp.bool, device="cpu")
    launch_scan(world.model, config, world.state.pos, world.state.theta, out, column=3, env_mask=mask)
    got = wp.to_torch(out)
    assert (got[1] == -7.0).all() and (got[:, :, :3] == -7.0).all() and (got[:, :, 7:] == -7.0).all()
    assert abs(got[0, 0, 3].item() - 1.0) < EXACT_TOL


# --- gradients --------------------------------------------------------------------------------------


def test_warp_scan_gradcheck_float64(generator):
    world = random_world(generator, "float64", n_envs=2, n_agents=3)
    config = LidarConfig(8, max_range=1.5)
    pos = world.state.torch.pos.clone().requires_grad_()
    theta = world.state.torch.theta.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda p, t: lidar_warp(world.model, config, p, t), (pos, theta))


def test_warp_scan_gradients_equal_the_reference_gradients(generator):
    world = random_world(generator, "float64")
    config = LidarConfig(16, max_range=1.5)
    pos = world.state.torch.pos.clone().requires_grad_()
    theta = world.state.torch.theta.clone().requires_grad_()
    weights = torch.rand(world.n_envs, world.n_agents, config.n_rays, generator=generator, dtype=torch.float64)
    warp_grads = torch.autograd.grad((lidar_warp(world.model, config, pos, theta) * weights).sum(), (pos, theta))
    reference = lidar_reference_model(world.model, config, pos, theta).distance
    torch_grads = torch.autograd.grad((reference * weights).sum(), (pos, theta))
    for a, b in zip(warp_grads, torch_grads, strict=True):
        assert (a - b).abs().max().item() < 1e-10
    assert warp_grads[0].abs().sum() > 0 and warp_grads[1].abs().sum() > 0


def test_reference_gradcheck_float64(generator):
    world = random_world(generator, "float64", n_envs=2, n_agents=3)
    config = LidarConfig(8, max_range=1.5)
    pos = world.state.torch.pos.clone().requires_grad_()
    theta = world.state.torch.theta.clone().requires_grad_()

    def scan(p, t):
        return lidar_reference_model(world.model, config, p, t).distance

    assert torch.autograd.gradcheck(scan, (pos, theta))


def test_adversarial_disc_layouts_match_the_reference():
    """Discs tangent to rays and at the edges of the range: adversarial layouts
    (discs tangent to rays, centred on ray directions, across the 0 / 2 pi seam of the ray fan,
    headings near +-pi, a disc reaching exactly max_range, agents overlapping) read as the torch
    reference (the kernel skips discs beyond max_range + radius; the reference tests every pair)."""
    n_rays, max_range, r = 8, 1.0, 0.1
    step = 2 * math.pi / n_rays
    layouts = []
    for heading in (0.0, math.pi - 1e-7, -math.pi, 0.3 * step):
        for k, (dist, shift) in enumerate(
            [
                (0.5, 0.0),  # on a ray
                (0.5, math.asin(r / 0.5)),  # tangent to a ray
                (0.5, -math.asin(r / 0.5) - 1e-9),  # just past tangent
                (max_range + r, 0.0),  # near surface exactly at max_range
                (0.15, 0.5 * step),  # close and wide, between rays
                (0.05, 0.0),  # overlapping: inside the other disc
            ]
        ):
            angle = heading + (k % n_rays) * step + shift
            if k % 2:
                angle = heading - step / 2 + shift  # across the seam between the last ray and ray 0
            layouts.append((heading, (dist * math.cos(angle), dist * math.sin(angle))))
    world = make_world(n_agents=2, n_envs=len(layouts), radius=r)
    pos = torch.tensor([[[0.0, 0.0], list(p)] for _, p in layouts], dtype=torch.float64)
    theta = torch.tensor([[h, 0.0] for h, _ in layouts], dtype=torch.float64)
    place(world, pos, theta)
    kernel, reference = both_scans(world, LidarConfig(n_rays, max_range=max_range))
    assert (kernel.distance - reference.distance).abs().max().item() < EXACT_TOL
    assert torch.equal(kernel.kind, reference.kind) and torch.equal(kernel.index, reference.index)
    assert (kernel.kind == HIT_AGENT).sum() >= len(layouts), "most layouts put the other disc on a ray"


def test_equally_near_surfaces_resolve_agents_first_then_lowest_index():
    """Ties of distance (exact here: every surface 0.5 m ahead) go to an agent before an obstacle
    before a wall, and to the lowest index among agents, as in the reference; without agents the
    obstacle wins over the wall."""
    world = make_world([Obstacle.circle((0.75, 0.0), 0.25)], bounds=0.5, n_agents=3, radius=0.25)
    place(world, [[0.0, 0.0], [0.75, 0.0], [0.75, 0.0]])
    for config, kind, index in ((LidarConfig(4), HIT_AGENT, 1), (LidarConfig(4, see_agents=False), HIT_OBSTACLE, 0)):
        kernel, reference = both_scans(world, config)
        assert kernel.distance[0, 0, 0].item() == 0.5
        assert (kernel.kind[0, 0, 0].item(), kernel.index[0, 0, 0].item()) == (kind, index)
        assert torch.equal(kernel.kind, reference.kind) and torch.equal(kernel.index, reference.index)


def test_discs_across_the_ray_seam_at_large_ray_counts():
    """Tens of thousands of rays: a disc just clockwise of the heading is seen by the last rays
    and by ray 0."""
    world = make_world(n_agents=2, radius=0.1)
    place(world, [[0.0, 0.0], [0.5 * math.cos(-0.01), 0.5 * math.sin(-0.01)]])
    kernel, reference = both_scans(world, LidarConfig(40_000, max_range=1.0))
    assert (kernel.distance - reference.distance).abs().max().item() < EXACT_TOL
    assert torch.equal(kernel.index, reference.index) and (kernel.kind[0, 0] == HIT_AGENT).sum() > 100
    assert kernel.kind[0, 0, 0] == HIT_AGENT and kernel.kind[0, 0, -1] == HIT_AGENT
    with pytest.raises(ValueError, match="n_rays"):
        LidarConfig(0)


# --- movable bodies ------------------------------------------------------------------------------


def body_world(bodies, n_agents=1, n_envs=1, dtype="float64", obstacles=(), device="cpu") -> World:
    world = WorldConfig(bodies=tuple(bodies), obstacles=tuple(obstacles), collisions=False)
    # Two substeps: a 1 kg box (0.25 kg at its corners) is beyond the contact stability limit of one
    # 0.1 s substep (swarp.core.stability); the scans do not depend on it.
    stepper = Stepper([AgentConfig(radius=0.1)] * n_agents, device=device, world=world, dtype=dtype, substeps=2)
    return World(stepper, n_envs)


def body_scans(world: World, config: LidarConfig):
    """(kernel scan, reference scan) of a world with bodies at their current poses."""
    kernel = Lidar(world, config).scan()
    kernel = type(kernel)(*(t.clone() for t in kernel))
    return kernel, Lidar(world, config).reference()


def test_rays_see_body_shapes_where_the_body_is_and_how_it_is_turned():
    # Body 1: a 0.4 x 0.2 box; body 0 a disc far behind the agent, so the box's index is 1.
    world = body_world([Body((Obstacle.circle((0.0, 0.0), 0.1),)), Body((Obstacle.box((0.0, 0.0), (0.2, 0.1)),))])
    place(world, [[0.0, 0.0]])
    config = LidarConfig(4, max_range=2.0)
    for theta, expected in ((0.0, 0.8), (math.pi / 2, 0.9)):  # ray 0 meets the box's short side, then its long one
        world.set_state(
            body_pos=torch.tensor([[[-1.5, 0.0], [1.0, 0.0]]], dtype=torch.float64),
            body_theta=torch.tensor([[0.0, theta]], dtype=torch.float64),
        )
        for scan in body_scans(world, config):
            assert abs(scan.distance[0, 0, 0].item() - expected) < EXACT_TOL
            assert scan.kind[0, 0, 0].item() == HIT_BODY and scan.index[0, 0, 0].item() == 1
            assert abs(scan.distance[0, 0, 2].item() - 1.4) < EXACT_TOL  # ray 2 (backwards): the disc
            assert scan.kind[0, 0, 2].item() == HIT_BODY and scan.index[0, 0, 2].item() == 0
    # A compound body: its second shape, offset in the body frame, is what the ray meets first.
    world = body_world([Body((Obstacle.circle((0.0, 0.0), 0.1), Obstacle.circle((0.0, 0.5), 0.1)))])
    place(world, [[0.0, 0.0]])
    world.set_state(
        body_pos=torch.tensor([[[1.0, 0.0]]], dtype=torch.float64),
        body_theta=torch.tensor([[math.pi / 2]], dtype=torch.float64),  # the offset (0, 0.5) now points to -x
    )
    for scan in body_scans(world, LidarConfig(4, max_range=2.0)):
        assert abs(scan.distance[0, 0, 0].item() - 0.4) < EXACT_TOL
        assert scan.index[0, 0, 0].item() == 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_warp_scan_with_bodies_equals_the_reference(generator, dtype):
    shapes = (Obstacle.box((0.0, 0.0), (0.15, 0.05)), Obstacle.box((0.0, 0.1), (0.05, 0.1)))  # a T
    world = body_world(
        [Body(shapes), Body((Obstacle.circle((0.0, 0.0), 0.12),))],
        n_agents=4,
        n_envs=3,
        dtype=dtype,
        obstacles=[Obstacle.circle((0.0, 0.9), 0.1)],
    )
    torch_dtype = world.stepper.torch_dtype
    place(world, (torch.rand(3, 4, 2, generator=generator, dtype=torch.float64) * 2 - 1).to(torch_dtype))
    world.set_state(
        body_pos=(torch.rand(3, 2, 2, generator=generator, dtype=torch.float64) * 1.6 - 0.8).to(torch_dtype),
        body_theta=(torch.rand(3, 2, generator=generator, dtype=torch.float64) * 6 - 3).to(torch_dtype),
    )
    kernel, reference = body_scans(world, LidarConfig(24, max_range=1.5))
    tol = EXACT_TOL if dtype == "float64" else FLOAT32_TOL
    assert (kernel.distance - reference.distance).abs().max().item() < tol
    # Discrete results agree up to near-ties (float32 rounding), as without bodies.
    limit = 0.0 if dtype == "float64" else 0.002
    assert (kernel.kind != reference.kind).float().mean().item() <= limit
    assert (kernel.index != reference.index).float().mean().item() <= limit
    assert (kernel.kind == HIT_BODY).sum() > 10, "the bodies should be in sight of several rays"
    assert set(kernel.index[kernel.kind == HIT_BODY].tolist()) == {0, 1}


def test_warp_scan_gradients_with_bodies_equal_the_reference_gradients(generator):
    world = body_world([Body((Obstacle.box((0.0, 0.0), (0.15, 0.05)),))], n_agents=3, n_envs=2)
    place(world, torch.rand(2, 3, 2, generator=generator, dtype=torch.float64) * 1.2 - 0.6)
    world.set_state(
        body_pos=torch.rand(2, 1, 2, generator=generator, dtype=torch.float64) * 0.4 - 0.2,
        body_theta=torch.rand(2, 1, generator=generator, dtype=torch.float64) * 6 - 3,
    )
    config = LidarConfig(16, max_range=1.5)
    pos = world.state.torch.pos.clone().requires_grad_()
    theta = world.state.torch.theta.clone().requires_grad_()
    weights = torch.rand(2, 3, config.n_rays, generator=generator, dtype=torch.float64)
    scan = lidar_warp(world.model, config, pos, theta, world_bodies(world))
    warp_grads = torch.autograd.grad((scan * weights).sum(), (pos, theta))
    reference = Lidar(world, config).reference(pos, theta).distance
    assert (scan.detach() - reference.detach()).abs().max().item() < EXACT_TOL
    torch_grads = torch.autograd.grad((reference * weights).sum(), (pos, theta))
    for a, b in zip(warp_grads, torch_grads, strict=True):
        assert (a - b).abs().max().item() < 1e-10
    assert torch.autograd.gradcheck(
        lambda p, t: lidar_warp(world.model, config, p, t, world_bodies(world)), (pos, theta)
    )


@pytest.mark.parametrize("name", ["push_t", "transport", "balance"])
def test_body_scenarios_with_lidar_fused_match_torch(name, generator):
    """The body a scenario moves shows in its lidar columns, the same on the fused and torch paths."""
    common = dict(n_envs=4, device="cpu", auto_reset=True, max_steps=6, lidar_rays=16, lidar_range=1.0)
    fused, reference = swarp.make(name, fused=True, **common), swarp.make(name, fused=False, **common)
    base = fused.obs_dim - 16
    for _ in range(8):
        actions = (torch.rand(4, fused.n_agents, fused.act_dim, generator=generator) * 2 - 1) * fused.action_bounds[1]
        out_f, out_r = fused.step(actions), reference.step(actions)
        assert (out_f[0] - out_r[0]).abs().max().item() < 1e-4
    scan = fused.lidar.scan()
    assert torch.equal(fused.obs[..., base:], scan.distance)
    assert (scan.kind == HIT_BODY).any(), "no ray sees the scenario's body"


# --- in an environment ------------------------------------------------------------------------------


def nav_pair(**options):
    common = dict(n_envs=6, device="cpu", n_agents=4, auto_reset=True, max_steps=4, **options)
    return swarp.make("navigation", fused=True, **common), swarp.make("navigation", fused=False, **common)


def test_lidar_observations_fused_match_torch_reference_with_auto_reset(generator):
    fused, reference = nav_pair(lidar_rays=12, lidar_range=0.7, n_obstacles=3)
    base = swarp.make("navigation", n_envs=1, device="cpu", n_agents=4).obs_dim
    assert fused.obs_dim == reference.obs_dim == base + 12
    assert fused.execution_mode == "graph"
    seen_done = False
    for _ in range(9):
        actions = torch.rand(6, 4, 2, generator=generator) * 2 - 1
        out_f, out_r = fused.step(actions), reference.step(actions)
        seen_done |= bool(out_f[2].any() or out_f[3].any())
        assert (out_f[0] - out_r[0]).abs().max().item() < OBS_TOL
        assert (out_f[4]["final_obs"] - out_r[4]["final_obs"]).abs().max().item() < OBS_TOL
    assert seen_done
    lidar_columns = fused.obs[..., base:]
    assert torch.equal(lidar_columns, fused.lidar.scan().distance)
    assert (lidar_columns < 0.7).any() and (lidar_columns == 0.7).any()


def test_lidar_observations_after_reset_match():
    fused, reference = nav_pair(lidar_rays=6, n_obstacles=2)
    obs_f, _ = fused.reset(seed=5)
    obs_r, _ = reference.reset(seed=5)
    assert (obs_f - obs_r).abs().max().item() < OBS_TOL


def test_grad_mode_step_differentiates_lidar_observations():
    env = swarp.make("navigation", n_envs=3, device="cpu", n_agents=4, lidar_rays=8, n_obstacles=3, dtype="float64")
    actions = (torch.rand(3, 4, 2, dtype=torch.float64) * 0.5).requires_grad_()
    obs, *_ = env.step(actions)
    obs[..., env.scenario_obs_dim :].sum().backward()
    assert actions.grad is not None and actions.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lidar_rays=-1), "lidar_rays"),
        (dict(lidar_rays=2.5), "lidar_rays"),
        (dict(lidar_rays=4, lidar_range=0.0), "max_range"),
        (dict(lidar_rays=4, lidar_range=float("inf")), "max_range"),
    ],
)
def test_bad_lidar_options_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        swarp.make("navigation", n_envs=1, device="cpu", **kwargs)


def test_lidar_warp_rejects_bad_inputs():
    world = make_world(n_agents=2)
    config = LidarConfig(4)
    with pytest.raises(ValueError, match="pos must be"):
        lidar_warp(world.model, config, torch.zeros(1, 3, 2, dtype=torch.float64), torch.zeros(1, 3))
    with pytest.raises(TypeError, match="dtype"):
        lidar_warp(world.model, config, torch.zeros(1, 2, 2), torch.zeros(1, 2))


def test_async_steps_with_lidar_and_randomized_params_are_bit_identical(generator):
    common = dict(n_envs=4, device="cpu", n_agents=3, auto_reset=True, max_steps=3, n_obstacles=2, lidar_rays=8)
    common["randomize_params"] = {"mass": (0.5, 2.0)}
    sync, overlapped = swarp.make("navigation", **common), swarp.make("navigation", **common)
    for _ in range(5):
        actions = torch.rand(4, 3, 2, generator=generator) * 2 - 1
        obs, *_ = sync.step(actions)
        overlapped.send(actions)
        obs_async, *_ = overlapped.recv()
        assert torch.equal(obs, obs_async)
        assert torch.equal(sync.agent_params, overlapped.agent_params)


@pytest.mark.gpu
def test_cuda_graph_step_with_lidar_and_randomized_params_matches_the_torch_path(generator):
    common = dict(n_envs=64, device="cuda:0", n_agents=8, auto_reset=True, max_steps=4, n_obstacles=3)
    common.update(lidar_rays=32, randomize_params={"mass": (0.5, 2.0), "max_speed": (0.5, 1.0)})
    fused, reference = (swarp.make("navigation", fused=f, **common) for f in (True, False))
    assert fused.execution_mode == "graph"
    for _ in range(6):
        actions = (torch.rand(64, 8, 2, generator=generator) * 2 - 1).cuda()
        out_f, out_r = fused.step(actions), reference.step(actions)
        # float32 on CUDA: the fused kernels and the torch reference round differently (measured on
        # the H200: up to 1.6e-5 after six steps with contacts), so the CPU tolerance x 10.
        assert (out_f[0] - out_r[0]).abs().max().item() < 10 * OBS_TOL
        assert (fused.agent_params - reference.agent_params).abs().max().item() < 1e-6
    scan = fused.lidar.scan()
    assert torch.equal(scan.distance, fused.obs[..., fused.scenario_obs_dim :])


@pytest.mark.gpu
def test_cuda_lidar_gradients_match_the_reference(generator):
    world = random_world(generator, "float64")
    cpu_model = world.model
    stepper = Stepper(
        [AgentConfig(radius=0.08)] * world.n_agents, device="cuda:0", world=cpu_model.world, dtype="float64"
    )
    config = LidarConfig(16, max_range=1.5)
    pos = world.state.torch.pos.cuda().requires_grad_()
    theta = world.state.torch.theta.cuda().requires_grad_()
    got = torch.autograd.grad(lidar_warp(stepper.model, config, pos, theta).sum(), (pos, theta))
    want = torch.autograd.grad(lidar_reference_model(stepper.model, config, pos, theta).distance.sum(), (pos, theta))
    for a, b in zip(got, want, strict=True):
        assert (a - b).abs().max().item() < 1e-10


@pytest.mark.parametrize("name", ["navigation", "drone_navigation"])
def test_graph_and_recorded_replay_agree_bit_for_bit(name, generator, monkeypatch):
    monkeypatch.setenv("SWARP_LAUNCH_DEBUG", "1")  # every replay re-validates its recorded arguments
    common = dict(n_envs=4, device="cpu", n_agents=3, auto_reset=True, max_steps=3, n_obstacles=2, lidar_rays=6)
    common["randomize_params"] = {"mass": (0.5, 2.0)}
    graph, replay = (swarp.make(name, use_graph=g, **common) for g in ("auto", False))
    assert (graph.execution_mode, replay.execution_mode) == ("graph", "replay")
    for _ in range(6):
        actions = torch.rand(4, 3, graph.act_dim, generator=generator) * 2.0
        assert torch.equal(graph.step(actions)[0], replay.step(actions)[0])


@pytest.mark.parametrize("layout", [{"rays_per_thread": 1}, {"rays_per_thread": 3}, {}, {"group": 4}, {"group": 8}])
def test_masked_scan_keeps_the_readings_it_replaces(generator, layout):
    """With ``final_out`` (an auto-reset's final observation) every layout's masked scan first
    copies the readings it overwrites there: masked envs' lidar columns hold the old readings, all
    else of ``final_out`` is untouched, and the new readings are the plain scan's bits."""
    world = random_world(generator, "float32", n_envs=4, n_agents=6)
    config = LidarConfig(7, max_range=1.5)
    mask_t = torch.tensor([True, False, True, False])
    mask = wp.array(mask_t.numpy(), dtype=wp.bool, device="cpu")
    ((fresh, _, _),) = scans_by_layout(world, config, [layout], mask=mask, column=3)
    old = torch.rand(4, 6, 10, generator=generator)
    out = wp.from_torch(old.clone())
    final = wp.from_torch(torch.full((4, 6, 10), -5.0))
    launch_scan(world.model, config, world.state.pos, world.state.theta, out, 3, None, mask, final_out=final, **layout)
    out_t, final_t = wp.to_torch(out), wp.to_torch(final)
    assert torch.equal(final_t[mask_t][:, :, 3:], old[mask_t][:, :, 3:])
    assert (final_t[~mask_t] == -5.0).all() and (final_t[:, :, :3] == -5.0).all()
    assert torch.equal(out_t[mask_t][:, :, 3:], fresh[mask_t][:, :, 3:])
    assert torch.equal(out_t[~mask_t], old[~mask_t]) and torch.equal(out_t[:, :, :3], old[:, :, :3])
    with pytest.raises(ValueError, match="final_out must be shaped like distance_out"):
        bad = wp.zeros((4, 6, 9), dtype=wp.float32)
        launch_scan(world.model, config, world.state.pos, world.state.theta, out, 3, None, mask, final_out=bad)


@pytest.mark.gpu
@pytest.mark.parametrize("launch_mode", ["graph", "eager"])
def test_cuda_reset_scan_on_a_side_stream_gives_the_same_steps(generator, launch_mode):
    """The auto-reset's scan forked onto a side stream beside the neighbor refresh and the masked
    observation (``plan.lidar_side_stream``, the default) steps bit for bit like the single-stream
    step: observations, rewards, flags and final_obs over resets, in a captured graph and live
    (eager launches), and under a user torch stream."""
    common = dict(n_envs=256, device="cuda:0", n_agents=8, auto_reset=True, max_steps=5, n_obstacles=3)
    common["lidar_rays"] = 32
    if launch_mode == "eager":
        common["plan"] = {"launch": "eager"}
    side = swarp.make("navigation", **common)
    plain = swarp.make("navigation", **{**common, "auto_reset": False})
    main = swarp.make("navigation", **{**common, "plan": {**common.get("plan", {}), "lidar_side_stream": False}})
    assert side.plan.lidar_side_stream and not main.plan.lidar_side_stream
    assert side.execution_mode == ("graph" if launch_mode == "graph" else "eager")
    user = torch.cuda.Stream()
    for step in range(12):
        actions = (torch.rand(256, 8, 2, generator=generator) * 2 - 1).cuda()
        with torch.cuda.stream(user) if step % 2 else contextlib.nullcontext():
            want = [t.clone() for t in main.step(actions)[:4]] + [main.final_obs.clone()]
            got = [t.clone() for t in side.step(actions)[:4]] + [side.final_obs.clone()]
            last = plain.step(actions)[0].clone()
            done = got[2] | got[3]
            plain.reset_at(done)
        torch.cuda.synchronize()
        for a, b in zip(want, got, strict=True):
            assert torch.equal(a, b)
        assert torch.equal(got[4][done], last[done])  # final_obs: the rows the reset overwrote
        assert torch.equal(got[0], plain.obs)
    assert main.episode.sum() > 0  # envs did reset
