"""``swarp/physics/vmas_mode/``: the torch reference of VMAS 1.5.2's ``World.step`` against VMAS itself.

Each scenario world runs in VMAS with 16 envs, two seeds, for ``N_STEPS`` steps (give_way with boxes:
half) of VMAS's own random actions, through the physics half of ``Environment.step`` (``step_physics``;
a test checks it moves the world as ``env.step`` does), recording every ``World.step``'s start state,
agent forces and end state. ``step_torch`` steps the same inputs two ways: re-synced (from VMAS's start
state of each step, so differences cannot compound) and free-running (from the first state only, the
whole run). On this machine both agree with VMAS to the bit (0.0) in every world, except where the
broad phase differs (below); the tolerances leave room for float32 rounding that may differ elsewhere.

**The broad phase.** VMAS evaluates a pair's contact in every env once the pair's centres are within
the sum of circumscribed radii in any env; ``step_torch`` decides per env (``contacts.py``). The two
differ only where the narrow phase reaches past those radii (within ``LINE_MIN_DIST`` of a line's tip
or a box's corner) in an env while another env is in reach. In balance the agents sit under the
line's tips and it happens on these seeds: there the tests check that every env that differs had
such a *band contact* at the step's start, that ``broad_phase="any_env"`` (VMAS's rule) matches VMAS
in those steps and, free-running, over the whole run, and that envs never touched by one match VMAS
free-running. Band contacts are detected at a step's first substep; in worlds with several substeps
a band contact in a later one would surface as an unexplained difference (none does on these seeds).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import warnings

import pytest
import torch

from swarp.physics.vmas_mode import (
    BOX,
    LINE,
    SPHERE,
    EntitySpec,
    EntityState,
    EntityTable,
    VmasTorchStep,
    VmasWorldConfig,
    step_torch,
)
from swarp.physics.vmas_mode.contacts import contact_pairs, pair_forces
from swarp.physics.vmas_mode.geometry import keep_closest, norm
from swarp.testing import forbid_host_transfers
from swarp.testing.vmas_parity import (
    agent_forces,
    entity_state,
    entity_table,
    max_difference,
    record_world_steps,
    step_physics,
    vmas_core,
)

vmas = pytest.importorskip("vmas")

N_ENVS = 16
N_STEPS = 100
SEEDS = (0, 1)
#: Largest difference from VMAS of a re-synced step [m, m/s, rad, rad/s]. The reference performs
#: VMAS's float32 operations in VMAS's order and measures 0.0 here; the bound allows a few float32
#: ulps of states of order 1-10, for transcendental functions that round differently on another
#: CPU (torch's SIMD and scalar paths) in a tensor of another layout.
RESYNC_ATOL = 1e-5
#: Largest difference of the free-running trajectory (100 steps): 0.0 here; ulp-level differences could
#: grow through the stiff contacts (give_way's boxes: collision_force 10^4 N).
FREE_ATOL = 1e-3
#: Steps of each world that the capture test takes with one held ``VmasTorchStep``.
CAPTURE_STEPS = 10
#: Scenario worlds: (label, VMAS scenario name, options, steps). give_way with boxes runs 16 substeps a
#: step, of box-line and box-box contacts, the slowest to step in VMAS and in the reference alike: 50 of
#: them (800 substeps) keep the file within a minute on two cores.
WORLDS = (
    ("navigation", "navigation", {}, N_STEPS),
    ("dispersion", "dispersion", {}, N_STEPS),
    ("balance", "balance", {}, N_STEPS),
    ("transport", "transport", {}, N_STEPS),
    ("give_way", "give_way", {}, N_STEPS),
    ("give_way-boxes", "give_way", {"box_agents": True}, N_STEPS // 2),
    ("passage", "passage", {}, N_STEPS),
    ("wheel", "wheel", {}, N_STEPS),
    ("sampling", "sampling", {}, N_STEPS),
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@functools.cache
def vmas_run(label: str, seed: int):
    """``(table, config, records)`` of the VMAS steps of world ``label`` (cached: the contact test reuses
    a run)."""
    _, name, options, steps = next(world for world in WORLDS if world[0] == label)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VMAS warns about unused scenario keywords
        env = vmas.make_env(name, num_envs=N_ENVS, seed=seed, device="cpu", **options)
    table, config = entity_table(env.world)
    with record_world_steps(env.world) as records:
        for _ in range(steps):
            step_physics(env, env.get_random_actions())
    return table, config, records


def env_difference(ours: EntityState, theirs: EntityState) -> torch.Tensor:
    """[E] largest absolute difference of any field, per env."""
    fields = [(a - b).abs().flatten(1).max(dim=1).values for a, b in zip(ours, theirs, strict=True)]
    return torch.stack(fields).max(dim=0).values


def largest(values: torch.Tensor) -> float:
    """The largest of ``values`` [k], 0 for none."""
    return float(values.max()) if values.numel() else 0.0


def band_contact_envs(table: EntityTable, config: VmasWorldConfig, state: EntityState) -> torch.Tensor:
    """[E] bool: envs where VMAS's any-env broad phase applies a contact force the per-env one leaves
    out at ``state`` (a pair out of reach in the env, in reach in another, its narrow phase pushing)."""
    band = torch.zeros(state.pos.shape[0], dtype=torch.bool)
    for group in contact_pairs(table):
        forces = pair_forces(group, table, state.pos, state.rot, config.collision_force, config.contact_margin)
        near = norm(state.pos[:, group.first] - state.pos[:, group.second]) <= group.reach
        pushing = (forces.first_force != 0).any(dim=-1)
        band |= (~near & near.any(dim=0, keepdim=True) & pushing).any(dim=1)
    return band


@pytest.mark.parametrize(("label", "seed"), [(w[0], s) for w in WORLDS for s in SEEDS], ids=lambda v: str(v))
def test_steps_like_vmas(label, seed):
    table, config, records = vmas_run(label, seed)
    for previous, record in zip(records[:-1], records[1:], strict=True):
        # Nothing but World.step changes the state: the free-running comparison is meaningful.
        assert max_difference(previous.after, record.before) == 0.0
    free, touched = records[0].before, torch.zeros(N_ENVS, dtype=torch.bool)
    worst_resync = worst_free = worst_coupled = worst_band = 0.0
    for k, record in enumerate(records):
        stepped = step_torch(table, config, free, record.force, record.torque)
        in_sync = max_difference(free, record.before) == 0.0
        resynced = stepped if in_sync else step_torch(table, config, record.before, record.force, record.torque)
        difference = env_difference(resynced, record.after)
        band = torch.zeros(N_ENVS, dtype=torch.bool)
        if (difference > RESYNC_ATOL).any():
            band = band_contact_envs(table, config, record.before)
            unexplained = (difference > RESYNC_ATOL) & ~band
            assert not unexplained.any(), f"step {k}: envs {torch.nonzero(unexplained).flatten().tolist()} differ"
            coupled = step_torch(table, config, record.before, record.force, record.torque, broad_phase="any_env")
            worst_coupled = max(worst_coupled, max_difference(coupled, record.after))
            touched |= band
        worst_resync = max(worst_resync, largest(difference[~band]))
        worst_band = max(worst_band, largest(difference[band]))
        free = stepped
        worst_free = max(worst_free, largest(env_difference(free, record.after)[~touched]))
    assert worst_resync <= RESYNC_ATOL and worst_coupled <= RESYNC_ATOL
    assert worst_free <= FREE_ATOL, f"free-running {len(records)} steps: {worst_free:.3e}"
    if touched.any():
        coupled = records[0].before
        for record in records:
            coupled = step_torch(table, config, coupled, record.force, record.torque, broad_phase="any_env")
            worst_coupled = max(worst_coupled, max_difference(coupled, record.after))
        assert worst_coupled <= FREE_ATOL, f"any_env, free-running {len(records)} steps: {worst_coupled:.3e}"
    print(
        f"{label} seed {seed}: re-synced {worst_resync:.1e}, free {worst_free:.1e}, "
        f"band-contact envs {int(touched.sum())} (re-synced {worst_band:.1e} there, any_env {worst_coupled:.1e})"
    )


def same_bits(ours: EntityState, theirs: EntityState) -> bool:
    """Every field of two float32 states holds the same bit patterns (the sign of a zero counts)."""
    return all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(ours, theirs, strict=True))


@pytest.mark.parametrize("label", [world[0] for world in WORLDS])
def test_held_step_is_capture_safe(label):
    """One ``VmasTorchStep``, built once, steps every world as ``step_torch`` does, to the bit, and with
    VMAS's broad phase as VMAS does, while nothing in its call reads a tensor on the host or uploads a
    Python value (what a CUDA graph capture cannot hold)."""
    table, config, records = vmas_run(label, SEEDS[0])
    step = VmasTorchStep(table, config, broad_phase="any_env")
    for record in records[:CAPTURE_STEPS]:
        with forbid_host_transfers():
            ours = step(record.before, record.force, record.torque)
        functional = step_torch(table, config, record.before, record.force, record.torque, broad_phase="any_env")
        assert same_bits(ours, functional)
        assert max_difference(ours, record.after) <= RESYNC_ATOL


@pytest.mark.gpu
def test_held_step_replays_in_a_cuda_graph():
    """Captured in a torch CUDA graph, the step replays the bits of the eager step on new inputs (give_way:
    lines, friction, force clamps, 5 substeps)."""
    table, config, records = vmas_run("give_way", SEEDS[0])
    table = EntityTable(**{item.name: getattr(table, item.name).cuda() for item in dataclasses.fields(table)})
    step = VmasTorchStep(table, config)
    state = EntityState(*(field.cuda() for field in records[0].before))
    force, torque = records[0].force.cuda(), records[0].torque.cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture, as torch.cuda.graph asks
        step(state, force, torque)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(state, force, torque)
    for record in records[1:CAPTURE_STEPS]:
        for held, value in zip((*state, force, torque), (*record.before, record.force, record.torque), strict=True):
            held.copy_(value)
        graph.replay()
        eager = step(state, force, torque)
        assert same_bits(captured, eager)
        assert max_difference(EntityState(*(f.cpu() for f in captured)), record.after) <= RESYNC_ATOL


def test_balance_meets_the_band():
    """The per-env broad phase is a real difference on balance (seed 0): without it the test above
    would not exercise its band-contact path."""
    table, config, records = vmas_run("balance", 0)
    assert any(band_contact_envs(table, config, record.before).any() for record in records)


def test_contacts_matter():
    """Without contact forces the reference departs from VMAS: the worlds above exercise contacts."""
    table, config, records = vmas_run("transport", 0)
    no_contacts = dataclasses.replace(config, collision_force=0.0)
    worst = max(max_difference(step_torch(table, no_contacts, r.before, r.force, r.torque), r.after) for r in records)
    assert worst > 1e-2


def test_step_physics_is_env_step():
    """``step_physics`` moves the world as ``env.step`` does (give_way: a velocity controller, friction,
    force clamps, 5 substeps)."""
    worlds = [vmas.make_env("give_way", num_envs=4, seed=3, device="cpu") for _ in range(2)]
    generator = torch.Generator().manual_seed(3)
    for _ in range(10):
        actions = [torch.rand(4, 2, generator=generator) - 0.5 for _ in worlds[0].agents]
        worlds[0].step([a.clone() for a in actions])
        step_physics(worlds[1], [a.clone() for a in actions])
        assert max_difference(entity_state(worlds[0].world), entity_state(worlds[1].world)) == 0.0


def test_table_of_a_vmas_world():
    env = vmas.make_env("give_way", num_envs=2, seed=0, device="cpu", box_agents=True)
    table, config = entity_table(env.world)
    names = [entity.name for entity in env.world.entities]
    assert names[-2:] == ["agent_0", "agent_1"] and table.is_agent.tolist() == [False] * 10 + [True] * 2
    assert table.shape.tolist() == [SPHERE] * 2 + [LINE] * 8 + [BOX] * 2
    assert (config.dt, config.substeps, config.drag, config.collision_force) == (0.05, 16, 0.0, 10000.0)
    # Friction: the agents' own 0.1; the landmarks' from the world's 0.1 (> 0).
    assert table.linear_friction.tolist() == [0.1] * 12 and table.angular_friction.isnan().all()
    assert table.f_range[-2:].tolist() == [1.1, 1.1] and table.f_range[:-2].isinf().all()
    # Goals do not collide, static landmarks not with each other, agents with everything else.
    assert not table.collides[:2].any() and not table.collides[2:10, 2:10].any()
    assert table.collides[-2:, 2:].sum().item() == 2 * 9  # 8 lines and the other agent
    force, torque = agent_forces(env.world)
    assert force.shape == (2, 12, 2) and torque.shape == (2, 12) and not force[:, :-2].any()
    with record_world_steps(env.world):
        pass
    assert "step" not in vars(env.world)


def test_table_without_vmas(monkeypatch):
    monkeypatch.setitem(sys.modules, "vmas.simulator", None)
    with pytest.raises(ImportError, match="pip install vmas==1.5.2"):
        vmas_core()


def two_spheres(gap: float) -> tuple[EntityTable, VmasWorldConfig, EntityState]:
    """Two movable spheres (radii 0.1 and 0.15 m, masses 1 and 2 kg) on the x axis, ``gap`` [m] apart
    (negative: overlapping), at rest, in a default world."""
    config = VmasWorldConfig()
    specs = [
        EntitySpec(shape=SPHERE, size=(0.1, 0.0), mass=1.0, movable=True),
        EntitySpec(shape=SPHERE, size=(0.15, 0.0), mass=2.0, movable=True),
    ]
    table = EntityTable.from_specs(specs, config)
    pos = torch.tensor([[[0.0, 0.0], [0.25 + gap, 0.0]]])
    return table, config, EntityState(pos, torch.zeros(1, 2, 2), torch.zeros(1, 2), torch.zeros(1, 2))


@pytest.mark.parametrize("gap", [-0.05, -0.002, 0.0, 0.01])
def test_two_spheres_follow_the_contact_law(gap):
    """One step of two spheres against the closed form: ``f = F k log(1 + exp(-gap / k))`` along the
    centre line while ``gap <= 0``, none beyond; ``v = f / m dt``, ``p += v dt`` (at rest, drag acts on 0)."""
    table, config, state = two_spheres(gap)
    after = step_torch(table, config, state, torch.zeros(1, 2, 2), torch.zeros(1, 2))
    k, scale = config.contact_margin, config.collision_force
    push = scale * k * math.log1p(math.exp(-gap / k)) if gap <= 0 else 0.0  # [N], on b along +x
    expected_vel = torch.tensor([[[-push / 1.0 * config.dt, 0.0], [push / 2.0 * config.dt, 0.0]]])
    torch.testing.assert_close(after.vel, expected_vel, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(after.pos, state.pos + expected_vel * config.dt, rtol=1e-5, atol=1e-7)


def specs_with(**overrides) -> list[EntitySpec]:
    return [EntitySpec(movable=True, **overrides), EntitySpec(shape=BOX, size=(0.3, 0.1))]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dt": 0.0}, "dt"),
        ({"substeps": 0}, "substeps"),
        ({"drag": 1.5}, "drag"),
        ({"contact_margin": 0.0}, "contact_margin"),
        ({"gravity": (0.0,)}, "gravity"),
        ({"x_semidim": -1.0}, "x_semidim"),
        ({"collision_force": math.inf}, "collision_force"),
    ],
)
def test_world_config_is_checked(options, message):
    with pytest.raises(ValueError, match=message):
        VmasWorldConfig(**options)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (specs_with(size=(0.1, 0.2)), "size of entity 0"),
        (specs_with(mass=0.0), "mass"),
        (specs_with(drag=2.0), "drag"),
        (specs_with(max_speed=-1.0), "max_speed"),
        (specs_with(hollow=True), "hollow"),
        (specs_with(shape=7), "shape"),
    ],
)
def test_entity_table_is_checked(specs, message):
    with pytest.raises(ValueError, match=message):
        EntityTable.from_specs(specs, VmasWorldConfig())


def test_entity_table_fields_are_checked():
    table = EntityTable.from_specs(specs_with(), VmasWorldConfig())
    with pytest.raises(ValueError, match="mass must be torch.float64"):
        dataclasses.replace(table, mass=table.mass.float())
    with pytest.raises(ValueError, match=r"size must be .* of shape \[2, 2\]"):
        dataclasses.replace(table, size=table.size[:, 0])
    with pytest.raises(ValueError, match="symmetric"):
        dataclasses.replace(table, collides=torch.tensor([[False, True], [False, False]]))
    # The resolution rules: world friction only where > 0, limits inf, collisions of a static pair none.
    assert table.linear_friction.isnan().all() and table.max_f.isinf().all()
    assert table.drag.tolist() == [0.25, 0.25] and table.collides.tolist() == [[False, True], [True, False]]
    assert not EntityTable.from_specs([EntitySpec(), EntitySpec()], VmasWorldConfig()).collides.any()


def test_step_inputs_are_checked():
    table, config, state = two_spheres(0.0)
    with pytest.raises(ValueError, match="force must be float32 of shape"):
        step_torch(table, config, state, torch.zeros(1, 2), torch.zeros(1, 2))
    with pytest.raises(ValueError, match="broad_phase"):
        step_torch(table, config, state, torch.zeros(1, 2, 2), torch.zeros(1, 2), broad_phase="all")


def test_keep_closest_scans_like_vmas():
    """The first of equally close candidates wins, a NaN distance never does, none finite gives inf."""
    # [K = 2 candidates, 3 cases, 2]: a tie; a NaN then a point; an infinite point then a NaN.
    p = torch.tensor([[[0.0, 1.0], [math.nan, 0.0], [math.inf, 0.0]], [[1.0, 0.0], [0.0, 0.0], [math.nan, 0.0]]])
    q = torch.zeros_like(p)
    best_p, _ = keep_closest(p, q)
    assert best_p[0].tolist() == [0.0, 1.0] and best_p[1].tolist() == [0.0, 0.0]
    assert best_p[2].isinf().all()
