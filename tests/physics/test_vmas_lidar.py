"""``swarp/physics/vmas_mode/lidar.py`` against VMAS 1.5.2's ``Lidar.measure()`` and by hand.

Worlds: navigation (``collisions=True``: the agents' lidars see the other agents), sampling (a full
circle of 12 rays offset by 0.05 rad) and a world built here with sphere, box and line landmarks and a
``Lidar`` on every agent (full, partial and offset fields of view), in random states. On this machine
(CPU, float32) ``cast_rays`` equals VMAS's measurement to the bit: it mirrors VMAS's operations and
tensor layouts (the expanded [E, N, R] inputs of the SLEEF cos/sin), so exact equality is asserted.
"""

from __future__ import annotations

import math

import pytest
import torch

from swarp.physics.vmas_mode import BOX, LINE, SPHERE, EntitySpec, EntityState, EntityTable, VmasWorldConfig
from swarp.physics.vmas_mode.lidar import cast_rays, lidar_angles, lidar_seen
from swarp.testing import forbid_host_transfers

vmas = pytest.importorskip("vmas")

from swarp.testing.vmas_parity import entity_state, entity_table  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N_ENVS = 16


def lidar_of(agent):
    """The agent's VMAS ``Lidar``, or ``None``."""
    from vmas.simulator.sensors import Lidar

    return next((s for s in agent.sensors or () if isinstance(s, Lidar)), None)


def check_world(world) -> tuple[int, int]:
    """Compare ``cast_rays`` with every lidar of ``world``; return how many lidars were compared and
    how many of their rays hit something (closer than ``max_range``)."""
    table, _ = entity_table(world)
    state = entity_state(world)
    checked = hits = 0
    for agent in world.agents:
        sensor = lidar_of(agent)
        if sensor is None:
            continue
        row = world.entities.index(agent)
        mask = torch.tensor([sensor.entity_filter(e) for e in world.entities])
        seen = lidar_seen(table, row, mask)
        ours = cast_rays(table, state, row, sensor._angles[0], sensor._max_range, seen)
        theirs = sensor.measure()
        assert ours.dtype == theirs.dtype == torch.float32
        assert torch.equal(ours, theirs), (ours - theirs).abs().max()
        checked += 1
        hits += int((theirs < sensor._max_range).sum())
    return checked, hits


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("navigation", {"collisions": True, "n_agents": 4}), ("sampling", {"n_agents": 4, "lidar_range": 0.5})],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_scenarios_match_vmas(name, kwargs, seed):
    env = vmas.make_env(name, num_envs=N_ENVS, seed=seed, continuous_actions=True, **kwargs)
    env.reset()
    hits = 0
    for _ in range(8):
        env.step(env.get_random_actions())
        checked, step_hits = check_world(env.world)
        assert checked == len(env.world.agents)
        hits += step_hits
    assert hits > 0


def shape_world(seed: int):
    """A VMAS world with sphere, box and line landmarks and three lidar agents in random states."""
    from vmas.simulator.core import Agent, Box, Landmark, Line, Sphere, World
    from vmas.simulator.sensors import Lidar

    world = World(batch_dim=N_ENVS, device="cpu")
    for shape in (Sphere(0.2), Box(0.6, 0.3), Line(0.8), Box(0.2, 0.5), Line(0.4), Sphere(0.1)):
        world.add_landmark(Landmark(f"l{len(world.landmarks)}", shape=shape, collide=True))
    spans = [(0.0, 2 * math.pi, 32), (-math.pi / 3, math.pi / 3, 9), (0.05, 2 * math.pi + 0.05, 12)]
    for i, (start, end, n) in enumerate(spans):
        lidar = Lidar(world, angle_start=start, angle_end=end, n_rays=n, max_range=1.5)
        world.add_agent(Agent(f"a{i}", shape=Sphere(0.05), rotatable=True, sensors=[lidar]))
    generator = torch.Generator().manual_seed(seed)
    for entity in world.entities:
        pos = (torch.rand(N_ENVS, 2, generator=generator) * 2 - 1) * 1.2
        rot = (torch.rand(N_ENVS, 1, generator=generator) * 2 - 1) * math.pi
        entity.set_pos(pos, batch_index=None)
        entity.set_rot(rot, batch_index=None)
    return world


@pytest.mark.parametrize("seed", range(6))
def test_sphere_box_line_world_matches_vmas(seed):
    checked, hits = check_world(shape_world(seed))
    assert checked == 3 and hits > 0


def one_landmark_table(spec: EntitySpec) -> EntityTable:
    agent = EntitySpec(size=(0.05, 0.0), movable=True, rotatable=True, is_agent=True)
    return EntityTable.from_specs([spec, agent], VmasWorldConfig())


def single_state(landmark_pos, landmark_rot, agent_pos, agent_rot) -> EntityState:
    pos = torch.tensor([[landmark_pos, agent_pos]], dtype=torch.float32)
    rot = torch.tensor([[landmark_rot, agent_rot]], dtype=torch.float32)
    return EntityState(pos=pos, vel=torch.zeros_like(pos), rot=rot, ang_vel=torch.zeros_like(rot))


@pytest.mark.parametrize(
    ("spec", "landmark_rot", "expected"),
    [
        (EntitySpec(shape=SPHERE, size=(0.25, 0.0)), 0.0, 0.75),  # centre 1 m ahead, radius 0.25
        (EntitySpec(shape=BOX, size=(0.4, 1.0)), 0.0, 0.8),  # face at x = 1 - 0.2
        (EntitySpec(shape=BOX, size=(1.0, 0.4)), math.pi / 2, 0.8),  # rotated: length along y
        (EntitySpec(shape=LINE, size=(1.0, 0.0)), math.pi / 2, 1.0),  # a vertical segment at x = 1
    ],
)
def test_hand_computed_hits(spec, landmark_rot, expected):
    table = one_landmark_table(spec)
    angles = torch.tensor([0.0, math.pi / 2, math.pi], dtype=torch.float32)  # ahead, left, behind
    state = single_state((1.0, 0.0), landmark_rot, (0.0, 0.0), 0.0)
    seen = lidar_seen(table, 1, torch.ones(2, dtype=torch.bool))
    dist = cast_rays(table, state, 1, angles, 2.0, seen)
    assert dist.shape == (1, 3)
    assert dist[0, 0].item() == pytest.approx(expected, abs=1e-6)
    assert dist[0, 1:].tolist() == [2.0, 2.0]  # misses read max_range
    # The agent's heading turns the rays: facing backwards, the ray "behind" sees the landmark.
    turned = cast_rays(table, single_state((1.0, 0.0), landmark_rot, (0.0, 0.0), math.pi), 1, angles, 2.0, seen)
    assert turned[0, 2].item() == pytest.approx(expected, abs=1e-6)
    assert turned[0, 0].item() == 2.0
    # Out of range or filtered out: max_range.
    assert cast_rays(table, state, 1, angles, 0.5, seen)[0].tolist() == [0.5, 0.5, 0.5]
    unseen = lidar_seen(table, 1, torch.zeros(2, dtype=torch.bool))
    assert cast_rays(table, state, 1, angles, 2.0, unseen)[0].tolist() == [2.0, 2.0, 2.0]


def test_lidar_seen_rejects_non_colliders():
    table = one_landmark_table(EntitySpec(collide=False))
    with pytest.raises(ValueError, match="cannot collide"):
        lidar_seen(table, 1, torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="not an agent"):
        lidar_seen(table, 0, torch.ones(2, dtype=torch.bool))


@pytest.mark.parametrize(
    ("start", "end", "n"),
    [(0.0, 2 * math.pi, 8), (0.0, 2 * math.pi, 32), (0.05, 2 * math.pi + 0.05, 12), (-1.0, 1.0, 7), (0.3, 2.0, 1)],
)
def test_angles_match_vmas(start, end, n):
    from vmas.simulator.core import World
    from vmas.simulator.sensors import Lidar

    sensor = Lidar(World(batch_dim=2, device="cpu"), angle_start=start, angle_end=end, n_rays=n)
    ours = lidar_angles(n, start, end)
    assert ours.dtype == torch.float32 and ours.shape == (n,)
    assert torch.equal(ours, sensor._angles[0])


def test_cast_rays_never_reads_the_host():
    world = shape_world(0)
    table, _ = entity_table(world)
    state = entity_state(world)
    row = world.entities.index(world.agents[0])
    seen = lidar_seen(table, row, torch.ones(table.n_entities, dtype=torch.bool))
    angles = lidar_angles(32)
    with forbid_host_transfers():
        dist = cast_rays(table, state, row, angles, 1.5, seen)
    assert dist.shape == (N_ENVS, 32)
