"""Frames and mosaics (``swarp/render/frame.py``, ``Environment.render``, ``Scenario.drawables``):
pixel content at projected positions for every registered scenario and every obstacle shape,
overlays, mosaic layout, one host copy per frame, no effect on the simulation, and clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import swarp
from swarp.render import Circles, Overlays, Style, render_frame, render_mosaic, renderer_for
from swarp.render.frame import Layout

from .conftest import BOX, CAPSULE, CIRCLE, agent_color, make_shapes_env, pixel, separated

STYLE = Style()
#: Random steps before a frame is checked: agents have moved, but not far from their spawn.
N_WARMUP_STEPS = 3
#: Clearance [px] beyond every drawn shape outside of which a pixel must be background.
BACKGROUND_CLEARANCE_PX = 3.0


def random_steps(env: swarp.Environment, n_steps: int, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    low, high = env.action_bounds
    with torch.no_grad():
        for _ in range(n_steps):
            u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
            env.step(low + (high - low) * u)


def pixel_centers_world(layout: Layout, tile: int = 0) -> np.ndarray:
    """[H, W, 2] world point [m] under every pixel centre of the image."""
    rows, cols = np.mgrid[0 : layout.height, 0 : layout.width]
    return layout.pixel_to_world(np.stack([cols + 0.5, rows + 0.5], axis=-1), tile)


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_every_scenario_draws_its_agents_where_they_are(name):
    env = swarp.make(name, n_envs=3, device="cpu", seed=0)
    random_steps(env, N_WARMUP_STEPS)
    env_index = 1
    image = env.render(env_index=env_index)
    assert image.shape == (480, 480, 3) and image.dtype == np.uint8
    layout = renderer_for(env).layout
    pos = env.state.pos[env_index].numpy().astype(np.float64)
    radius = max(cfg.radius for cfg in env.stepper.model.agents)
    clear = separated(pos, radius, slack=2.0 / layout.scale)
    if env.alive is not None:  # agents absent or gone are not drawn
        clear &= env.alive[env_index].numpy()
    assert clear.any(), "the test needs at least one agent clear of the others"
    for agent in np.nonzero(clear)[0]:
        center = layout.world_to_pixel(pos[agent])
        assert (center >= 0).all() and (center < [layout.width, layout.height]).all(), "agent out of view"
        np.testing.assert_array_equal(pixel(image, center), agent_color(agent), err_msg=f"{name}: agent {agent}")

    # Without obstacles and scenario drawables, everything away from the agents and the bounds
    # outline is background.
    bare = env.render(env_index=env_index, obstacles=False, scenario=False)
    world = pixel_centers_world(layout)
    near_agent = np.linalg.norm(world[:, :, None] - pos[None, None], axis=-1).min(-1)
    far = near_agent > radius + BACKGROUND_CLEARANCE_PX / layout.scale
    bounds = env.stepper.model.world.bounds
    if bounds is not None:
        x_min, x_max, y_min, y_max = bounds
        margin = BACKGROUND_CLEARANCE_PX / layout.scale
        x, y = world[..., 0], world[..., 1]
        far &= (x > x_min + margin) & (x < x_max - margin) & (y > y_min + margin) & (y < y_max - margin)
    assert far.mean() > 0.5
    assert (bare[far] == STYLE.background).all()


def test_navigation_draws_goals_and_obstacles_of_its_env():
    env = swarp.make("navigation", n_envs=4, device="cpu", seed=3, n_agents=5, n_obstacles=4)
    env_index = 2
    image = env.render(env_index=env_index)
    layout = renderer_for(env).layout
    scenario = env.scenario
    pos = env.state.pos[env_index].numpy().astype(np.float64)
    goals = scenario.goals[env_index].numpy().astype(np.float64)
    radius = scenario.cfg.agent_radius
    # Goal rings in their agent's color, unless an agent covers them.
    for agent, goal in enumerate(goals):
        if np.linalg.norm(pos - goal, axis=1).min() < scenario.goal_radius + radius + 3.0 / layout.scale:
            continue
        x, y = layout.world_to_pixel(goal).astype(int)
        reach = int(scenario.goal_radius * layout.scale) + 2
        window = image[y - reach : y + reach + 1, x - reach : x + reach + 1]
        assert (window == agent_color(agent)).all(axis=-1).any(), f"goal of agent {agent} not drawn"
    # This env's obstacles (per-env rows), filled at their centres.
    obstacles = {k: v[env_index].numpy() for k, v in env.world.model.obstacle_tensors().items()}
    assert (obstacles["shape"] != 0).sum() == 4
    for center in obstacles["center"]:
        np.testing.assert_array_equal(pixel(image, layout.world_to_pixel(center)), STYLE.obstacle)
    # Another env's obstacles are not this env's.
    other = env.world.model.obstacle_tensors()["center"][0].numpy()
    assert not np.allclose(other, obstacles["center"])


def test_obstacles_of_every_shape_are_drawn_with_their_orientation():
    env = make_shapes_env()
    image = env.render(env_index=0, width=400, height=400)
    layout = renderer_for(env).layout
    obstacle = STYLE.obstacle

    def at(point):
        return pixel(image, layout.world_to_pixel(point))

    # Circle: centre and just inside the rim; just outside it is background.
    center = np.array(CIRCLE.center)
    np.testing.assert_array_equal(at(center), obstacle)
    np.testing.assert_array_equal(at(center + [0.0, 0.9 * CIRCLE.size[0]]), obstacle)
    np.testing.assert_array_equal(at(center + [1.2 * CIRCLE.size[0], 0.0]), STYLE.background)
    # Oriented box: points near its rotated corners are inside; the unrotated corner is not.
    center, (hx, hy), angle = np.array(BOX.center), BOX.size, BOX.angle
    rotation = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        np.testing.assert_array_equal(at(center + rotation @ [0.85 * sx * hx, 0.6 * sy * hy]), obstacle)
    np.testing.assert_array_equal(at(center + [hx, -hy]), STYLE.background)
    # Capsule: along its axis up to its round caps; beside it is background.
    center, (half, thickness), angle = np.array(CAPSULE.center), CAPSULE.size, CAPSULE.angle
    axis = np.array([math.cos(angle), math.sin(angle)])
    normal = np.array([-axis[1], axis[0]])
    for t in (-1.0, -0.5, 0.0, 0.5, 1.0):
        np.testing.assert_array_equal(at(center + t * half * axis), obstacle)
    np.testing.assert_array_equal(at(center + (half + 0.7 * thickness) * axis), obstacle)
    np.testing.assert_array_equal(at(center + 2.5 * thickness * normal), STYLE.background)
    # Agents of the shared-obstacle world, with their heading ticks.
    for agent, point in enumerate(env.state.pos[0].numpy()):
        np.testing.assert_array_equal(at(point), agent_color(agent))
        theta = env.state.theta[0, agent].item()
        tick = point + 0.6 * 0.05 * np.array([math.cos(theta), math.sin(theta)])
        np.testing.assert_array_equal(at(tick), STYLE.heading)


def test_unbounded_world_fits_its_content():
    env = make_shapes_env(bounded=False)
    image = env.render(env_index=2, width=300, height=200)
    assert image.shape == (200, 300, 3)
    layout = renderer_for(env).layout
    # No bounds: no outline and nothing "outside"; the fitted view leaves a margin of background.
    border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]])
    assert (border == STYLE.background).all()
    for agent, point in enumerate(env.state.pos[2].numpy()):
        center = layout.world_to_pixel(point)
        assert 0 <= center[0] < 300 and 0 <= center[1] < 200
        np.testing.assert_array_equal(pixel(image, center), agent_color(agent))
    # An explicit extent wins: a 1 m window around agent 1 (letterboxed: 200 px per meter).
    point = env.state.pos[2, 1].numpy().astype(np.float64)
    extent = (point[0] - 0.5, point[0] + 0.5, point[1] - 0.5, point[1] + 0.5)
    image = env.render(env_index=2, width=300, height=200, extent=extent)
    layout = renderer_for(env).layout
    assert layout.scale == pytest.approx(200.0)
    np.testing.assert_allclose(layout.world_to_pixel(point), [150.0, 100.0])
    np.testing.assert_array_equal(image[100, 150], agent_color(1))


def test_mosaic_tiles_each_env_in_its_place():
    env = swarp.make("navigation", n_envs=7, device="cpu", seed=0, n_agents=3)
    random_steps(env, N_WARMUP_STEPS)
    indices = [6, 0, 3, 4, 1]
    image = render_mosaic(env, indices, cols=3, tile_size=(80, 60), gap=2)
    assert image.shape == (2 * 60 + 2, 3 * 80 + 2 * 2, 3)
    layout = renderer_for(env).layout
    assert (layout.rows, layout.cols, len(layout.origin)) == (2, 3, 5)
    radius = env.scenario.cfg.agent_radius
    for tile, env_index in enumerate(indices):
        pos = env.state.pos[env_index].numpy().astype(np.float64)
        for agent in np.nonzero(separated(pos, radius, slack=2.0 / layout.scale))[0]:
            center = layout.world_to_pixel(pos[agent], tile)
            x0, y0, x1, y1 = layout.clip[tile]
            assert x0 <= center[0] < x1 and y0 <= center[1] < y1
            np.testing.assert_array_equal(pixel(image, center), agent_color(agent))
    # Gaps between tiles, and the unused sixth cell, are gap-colored.
    assert (image[:, 80:82] == STYLE.gap).all()
    assert (image[60:62] == STYLE.gap).all()
    assert (image[62:, 2 * 82 :] == STYLE.gap).all()
    # Defaults: every env, ceil(sqrt(N)) columns.
    image = render_mosaic(env)
    layout = renderer_for(env).layout
    assert (layout.cols, layout.rows, len(layout.origin)) == (3, 3, 7)
    assert image.shape == (layout.height, layout.width, 3)


def test_overlays_draw_neighbor_graph_velocity_and_ids():
    env = make_shapes_env(n_envs=2, n_agents=3)
    # Two agents close together (neighbors), one moving fast to the right.
    pos = env.state.pos.clone()
    pos[1, 0] = torch.tensor([-0.3, 0.0])
    pos[1, 1] = torch.tensor([-0.18, 0.0])
    vel = torch.zeros_like(env.state.vel)
    vel[1, 2] = torch.tensor([1.0, 0.0])
    env.world.set_state(pos=pos, vel=vel)
    nbr, count = env.world.neighbor_lists()
    assert count[1, 0] >= 1 and 1 in nbr[1, 0].tolist()

    plain = env.render(env_index=1)
    graph = env.render(env_index=1, neighbors=True, headings=False)
    layout = renderer_for(env).layout

    def assert_line_through(image, point, color):
        """A thin horizontal line of ``color`` crosses the pixel column at ``point`` (anti-aliased: the
        darkest of the 3 pixels around it is at least half-way from background to ``color``)."""
        x, y = (int(c) for c in point)
        darkest = image[y - 1 : y + 2, x].astype(int).sum(axis=-1).argmin()
        value = image[y - 1 + darkest, x].astype(int)
        background, target = np.array(STYLE.background), np.array(color)
        assert np.abs(value - target).max() <= np.abs(background - target).max() / 2, value
        assert (plain[y - 1 : y + 2, x] == STYLE.background).all()

    midpoint = layout.world_to_pixel((pos[1, 0].numpy() + pos[1, 1].numpy()) / 2)
    assert_line_through(graph, midpoint, STYLE.neighbor)

    arrows = env.render(env_index=1, velocity=True, velocity_scale=0.3)
    shaft = layout.world_to_pixel(pos[1, 2].numpy() + [0.2, 0.0])  # beyond the disc, before the tip
    assert_line_through(arrows, shaft, STYLE.velocity)

    ids = env.render(env_index=1, ids=True)
    changed = (ids != plain).any(axis=-1)
    assert changed.any()
    # Text lands beside the agents only.
    rows, cols = np.nonzero(changed)
    near = np.linalg.norm(layout.pixel_to_world(np.stack([cols, rows], -1) + 0.5)[:, None] - pos[1].numpy(), axis=-1)
    assert (near.min(axis=1) < 0.15).all()


def test_frame_makes_one_host_copy(monkeypatch):
    env = swarp.make("navigation", n_envs=3, device="cpu", seed=0, n_obstacles=2)
    calls = []
    original = torch.Tensor.cpu

    def counting_cpu(self, *args, **kwargs):
        calls.append(tuple(self.shape))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cpu", counting_cpu)
    env.render(neighbors=True, velocity=True)
    assert len(calls) == 1
    render_mosaic(env, [0, 2], neighbors=True)
    assert len(calls) == 2


def test_rendering_never_changes_the_simulation():
    def rollout(render: bool) -> list[dict[str, torch.Tensor]]:
        env = swarp.make("navigation", n_envs=4, device="cpu", seed=5, n_obstacles=2, auto_reset=True, max_steps=8)
        generator = torch.Generator().manual_seed(11)
        low, high = env.action_bounds
        snapshots = []
        with torch.no_grad():
            for step in range(20):
                if render:
                    env.render(env_index=step % 4, neighbors=True, velocity=True, ids=step == 0)
                    render_mosaic(env, neighbors=True)
                u = torch.rand(4, env.n_agents, env.act_dim, generator=generator)
                env.step(low + (high - low) * u)
                snapshots.append(env.get_state())
        return snapshots

    for plain, rendered in zip(rollout(False), rollout(True), strict=True):
        assert plain.keys() == rendered.keys()
        for key in plain:
            assert torch.equal(plain[key], rendered[key]), key


def test_scenario_drawables_hook():
    env = make_shapes_env(n_envs=2)
    assert env.scenario.drawables(torch.tensor([0])) == []  # the base class draws nothing extra

    marker = (10, 200, 30)
    env.scenario.drawables = lambda index: [Circles(torch.zeros(len(index), 1, 2), 0.08, color=marker)]
    image = env.render(env_index=1)
    center = renderer_for(env).layout.world_to_pixel([0.0, 0.0])
    np.testing.assert_array_equal(pixel(image, center), marker)
    assert not (env.render(env_index=1, scenario=False) == marker).all(axis=-1).any()

    env.scenario.drawables = lambda index: ["not a drawable"]
    with pytest.raises(TypeError, match="drawables"):
        env.render()
    env.scenario.drawables = lambda index: [Circles(torch.zeros(5, 1, 2), 0.1)]
    with pytest.raises(ValueError, match=r"\[N, M, 2\]"):
        env.render()


def test_bad_arguments_raise_clear_errors():
    env = swarp.make("navigation", n_envs=2, device="cpu", seed=0)
    with pytest.raises(ValueError, match="render mode"):
        env.render(mode="rgb")
    for index in (2, -1):
        with pytest.raises(IndexError, match=r"env_index must be in \[0, n_envs\)"):
            env.render(env_index=index)
    for index in (0.5, "0", True, None):
        with pytest.raises(TypeError, match="env_index must be an int"):
            env.render(env_index=index)
    with pytest.raises(TypeError, match="unknown render option"):
        env.render(nieghbors=True)
    with pytest.raises(TypeError, match="must be a bool"):
        env.render(neighbors="yes")
    with pytest.raises(ValueError, match="velocity_scale"):
        env.render(velocity_scale=0.0)
    with pytest.raises(ValueError, match="width"):
        env.render(width=0)
    with pytest.raises(ValueError, match="extent"):
        env.render(extent=(1.0, -1.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="extent"):
        env.render(extent=(0.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="at least one env"):
        render_mosaic(env, [])
    with pytest.raises(IndexError, match="env_index"):
        render_mosaic(env, [0, 5])
    with pytest.raises(TypeError, match="env_indices"):
        render_mosaic(env, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="cols"):
        render_mosaic(env, cols=0)
    with pytest.raises(ValueError, match="mosaic width"):
        render_mosaic(env, cols=2, tile_size=9000)
    with pytest.raises(ValueError, match="gap"):
        render_mosaic(env, gap=-1)


@pytest.mark.gpu
def test_frame_of_a_cuda_env():
    env = swarp.make("navigation", n_envs=4, device="cuda:0", seed=0, n_obstacles=2)
    image = env.render(env_index=3, neighbors=True, velocity=True)
    layout = renderer_for(env).layout
    pos = env.state.pos[3].cpu().numpy().astype(np.float64)
    for agent in np.nonzero(separated(pos, env.scenario.cfg.agent_radius, slack=2.0 / layout.scale))[0]:
        np.testing.assert_array_equal(pixel(image, layout.world_to_pixel(pos[agent])), agent_color(agent))
    assert render_mosaic(env, tile_size=32, gap=0).shape == (64, 64, 3)


def test_overlay_defaults_are_documented_fields():
    assert Overlays.from_kwargs() == Overlays()
    assert Overlays.from_kwargs(neighbors=True).neighbors
    image = render_frame(swarp.make("navigation", n_envs=1, device="cpu"), width=64, height=48)
    assert image.shape == (48, 64, 3)


def test_lidar_overlay_draws_each_ray_to_its_hit():
    env = swarp.make("navigation", n_envs=1, device="cpu", n_agents=1, lidar_rays=4, lidar_range=0.5, world_size=1.0)
    env.world.set_state(pos=torch.tensor([[[0.0, 0.0]]]), theta=torch.zeros(1, 1))
    obs_before = env.obs.clone()
    plain = env.render(headings=False, scenario=False)
    rays = env.render(headings=False, scenario=False, lidar=True)
    layout = renderer_for(env).layout
    hit = env.lidar.last.distance[0, 0]
    assert torch.allclose(hit, torch.full((4,), 0.5))  # nothing within range: every ray ends at 0.5 m
    for ray, direction in enumerate([(1, 0), (0, 1), (-1, 0), (0, -1)]):
        inside = np.array(direction) * 0.35  # on the ray, beyond the agent's disc
        beyond = np.array(direction) * 0.65  # past the ray's end
        x, y = (int(c) for c in layout.world_to_pixel(inside))
        assert (plain[y - 1 : y + 2, x - 1 : x + 2] == STYLE.background).all()
        patch = rays[y - 1 : y + 2, x - 1 : x + 2].reshape(-1, 3).astype(int)
        # Anti-aliased: the closest pixel is at least half-way from the background to the ray color.
        halfway = np.abs(np.array(STYLE.background) - np.array(STYLE.lidar)).max() / 2
        assert np.abs(patch - np.array(STYLE.lidar)).max(axis=1).min() <= halfway, (ray, patch)
        x, y = (int(c) for c in layout.world_to_pixel(beyond))
        assert (rays[y - 1 : y + 2, x - 1 : x + 2] == STYLE.background).all()
    assert torch.equal(env.obs, obs_before)  # rendering reads; it never writes the observations
    with pytest.raises(ValueError, match="lidar_rays"):
        swarp.make("navigation", n_envs=1, device="cpu").render(lidar=True)


def test_agents_are_drawn_with_their_envs_own_radius():
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=1, agent_radius=0.2, per_env_params=True)
    env.set_agent_params(radius=torch.tensor([[0.05], [0.2]]))
    env.world.set_state(pos=torch.zeros(2, 1, 2))
    color = np.array(STYLE.palette[0])
    painted = [(env.render(env_index=i, scenario=False) == color).all(-1).sum() for i in (0, 1)]
    # Disc area scales with the radius squared: 16x, less anti-aliased rims and the heading tick.
    assert painted[1] > 10 * painted[0] > 0
