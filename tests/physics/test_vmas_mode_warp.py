"""``swarp/physics/vmas_mode/kernels.py``: the Warp step against the torch reference ``step_torch``.

**Exactly.** The Warp step rounds its transcendentals (cos, sin, and the exp and log1p of the contact
law's softplus) correctly, by way of float64 (``warp_geometry``'s module doc). Given the same, the
reference (``rounded_transcendentals``: ``torch.cos``, ``torch.sin`` and ``torch.logaddexp`` patched
for the block) must agree with it to the bit: every other float32 operation is the same operation in
the same order. It does, 0.0 re-synced and free-running, in every world below.

**As is**, against the reference with torch's own float32 transcendentals (SLEEF's vector code on the
CPU, the C library's in a vector loop's tail), which round an ulp the other way now and then. Since
the Warp step equals the rounded reference, this difference is the reference's own sensitivity to
its math library: a contact point an ulp off moves a force or torque by a few ulps, and a substep
multiplies that by ``sub_dt / m`` or ``sub_dt / I``. In the VMAS worlds it measures at most 5e-7
re-synced and 4e-5 free-running over ``test_vmas_mode.N_STEPS`` (balance: its line turns under the agents; most
worlds: 0.0, their headings stay 0); ``RESYNC_ATOL`` and ``FREE_ATOL`` leave a wide margin. The
hand-built world is checked exactly only: crowded, at random headings, an ulp there now and then
flips a discrete decision (a contact's onset, two segments crossing, the closer of two tied
candidates), which moves a velocity by up to ``F k softplus(LINE_MIN_DIST / k) sub_dt / m`` (about
2e-2 m/s there), so no tight bound holds.

The worlds are the reference tests' (``test_vmas_mode.py``): VMAS 1.5.2 scenario worlds of 16 envs,
seed 0, the worlds' steps of VMAS's random actions, recorded with ``swarp.testing.vmas_parity``; each
step is stepped from VMAS's state (re-synced) and from the previous step's result (free-running) with
VMAS's agent forces.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings

import pytest
import torch
import warp as wp

from swarp.physics.vmas_mode import BOX, LINE, SPHERE, EntitySpec, EntityState, EntityTable, VmasWorldConfig, step_torch
from swarp.physics.vmas_mode.contacts import BOX_BOX, SPHERE_SPHERE, contact_pairs, pair_forces
from swarp.physics.vmas_mode.geometry import norm
from swarp.physics.vmas_mode.kernels import VmasStep
from swarp.testing.vmas_parity import entity_table, max_difference, record_world_steps, step_physics
from tests.physics.test_vmas_mode import WORLDS

N_ENVS = 16
#: Largest difference from the reference with torch's own transcendentals in a VMAS world, re-synced
#: and free-running [m, m/s, rad, rad/s] (the module doc explains them); with correctly rounded ones, 0.0.
RESYNC_ATOL = 1e-5
FREE_ATOL = 1e-3
HAND_BUILT_STEPS = 20

COS, SIN = torch.cos, torch.sin


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def rounded_cos(x: torch.Tensor) -> torch.Tensor:
    return COS(x.double()).float()


def rounded_sin(x: torch.Tensor) -> torch.Tensor:
    return SIN(x.double()).float()


def rounded_logaddexp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch CPU's float32 ``logaddexp`` formula, ``max(a, b) + log1p(exp(-|a - b|))``, with ``exp`` and
    ``log1p`` correctly rounded."""
    tail = torch.exp((-(a - b).abs()).double()).float()
    total = torch.maximum(a, b) + torch.log1p(tail.double()).float()
    return torch.where((a == b) & (a.abs() == math.inf), a, total)


@contextlib.contextmanager
def rounded_transcendentals():
    """Within the block, ``torch.cos``, ``torch.sin`` and ``torch.logaddexp`` (the reference's only
    transcendentals) round correctly: evaluated in float64, rounded once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "cos", rounded_cos)
        patch.setattr(torch, "sin", rounded_sin)
        patch.setattr(torch, "logaddexp", rounded_logaddexp)
        yield


def reference_step(table, config, state, force, torque, *, rounded: bool) -> EntityState:
    with rounded_transcendentals() if rounded else contextlib.nullcontext():
        return step_torch(table, config, state, force, torque)


def same_state(a: EntityState, b: EntityState) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@functools.cache
def vmas_run(label: str):
    """``(table, config, records)`` of world ``label`` (seed 0)."""
    vmas = pytest.importorskip("vmas")
    _, name, options, steps = next(world for world in WORLDS if world[0] == label)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VMAS warns about unused scenario keywords
        env = vmas.make_env(name, num_envs=N_ENVS, seed=0, device="cpu", **options)
    table, config = entity_table(env.world)
    with record_world_steps(env.world) as records:
        for _ in range(steps):
            step_physics(env, env.get_random_actions())
    return table, config, records


def compare(table, config, steps, rounded: bool) -> tuple[float, float]:
    """``(re-synced, free-running)`` largest differences of the Warp step from the reference (with
    correctly ``rounded`` transcendentals or torch's) over ``steps``, ``(start state, force, torque)``
    each. A free-running step that starts where the re-synced one does is not stepped twice."""
    stepper = VmasStep(table, config, steps[0][0].pos.shape[0], "cpu")
    ours_free = theirs_free = steps[0][0]
    worst_resync = worst_free = 0.0
    for before, force, torque in steps:
        ours = stepper.step_tensors(before, force, torque)
        theirs = reference_step(table, config, before, force, torque, rounded=rounded)
        worst_resync = max(worst_resync, max_difference(ours, theirs))
        if not same_state(ours_free, before):
            ours = stepper.step_tensors(ours_free, force, torque)
        if not same_state(theirs_free, before):
            theirs = reference_step(table, config, theirs_free, force, torque, rounded=rounded)
        ours_free, theirs_free = ours, theirs
        worst_free = max(worst_free, max_difference(ours_free, theirs_free))
    return worst_resync, worst_free


@pytest.mark.parametrize("label", [world[0] for world in WORLDS])
def test_steps_like_the_reference(label):
    table, config, records = vmas_run(label)
    steps = [(record.before, record.force, record.torque) for record in records]
    exact = compare(table, config, steps, rounded=True)
    as_is = compare(table, config, steps, rounded=False)
    print(f"{label}: {len(steps)} steps, rounded transcendentals {exact}, torch's {as_is}")
    assert exact == (0.0, 0.0)
    assert as_is[0] <= RESYNC_ATOL and as_is[1] <= FREE_ATOL, as_is


def largest(values: torch.Tensor) -> float:
    return float(values.max())


def f32(value: float) -> float:
    """``value`` rounded to float32, as the step rounds a limit."""
    return float(torch.tensor(value, dtype=torch.float32))


def hand_built_world(n_envs: int = 64, seed: int = 0):
    """``(table, config, state, force, torque)``: spheres, lines and boxes (solid and hollow; static,
    only rotating, movable) with every limit, own and world friction, drag, gravity and semidims set,
    crowded into a small arena at random headings so that every shape pair pushes somewhere, and
    action forces beyond the limits."""
    config = VmasWorldConfig(
        dt=0.1,
        substeps=3,
        linear_friction=0.1,
        angular_friction=0.05,
        gravity=(0.0, -0.5),
        x_semidim=0.37,
        y_semidim=0.32,
    )
    agent = {"movable": True, "is_agent": True}
    specs = [
        EntitySpec(shape=SPHERE, size=(0.08, 0.0)),
        EntitySpec(shape=LINE, size=(0.5, 0.0), mass=2.0, movable=True, rotatable=True),
        EntitySpec(shape=BOX, size=(0.3, 0.1), rotatable=True),
        EntitySpec(shape=BOX, size=(0.4, 0.25), hollow=True),
        EntitySpec(shape=SPHERE, size=(0.06, 0.0), max_speed=0.5, f_range=1.0, max_f=0.8, linear_friction=0.3, **agent),
        EntitySpec(shape=SPHERE, size=(0.05, 0.0), v_range=0.4, max_f=1.5, drag=0.1, gravity=(0.0, -1.0), **agent),
        EntitySpec(shape=LINE, size=(0.3, 0.0), rotatable=True, max_t=0.05, t_range=0.04, **agent),
        EntitySpec(
            shape=BOX, size=(0.2, 0.12), rotatable=True, t_range=0.1, f_range=0.7, angular_friction=0.2, **agent
        ),
        EntitySpec(shape=BOX, size=(0.18, 0.18), hollow=True, rotatable=True, max_speed=0.6, mass=1.5, **agent),
    ]
    table = EntityTable.from_specs(specs, config)
    n = len(specs)
    generator = torch.Generator().manual_seed(seed)
    pos = (torch.rand(n_envs, n, 2, generator=generator) * 2 - 1) * torch.tensor([0.35, 0.3])
    rot = (torch.rand(n_envs, n, generator=generator) * 2 - 1) * math.pi
    vel = torch.randn(n_envs, n, 2, generator=generator) * 0.5
    state = EntityState(pos, vel, rot, torch.randn(n_envs, n, generator=generator))
    force = torch.randn(n_envs, n, 2, generator=generator) * 1.5
    torque = torch.randn(n_envs, n, generator=generator) * 0.1
    return table, config, state, force, torque


def test_hand_built_world_pushes_every_way():
    """The hand-built world exercises every pair kind and every limit the step applies."""
    table, config, state, force, torque = hand_built_world()
    kinds = set()
    for group in contact_pairs(table):
        forces = pair_forces(group, table, state.pos, state.rot, config.collision_force, config.contact_margin)
        near = norm(state.pos[:, group.first] - state.pos[:, group.second]) <= group.reach
        if ((forces.first_force != 0).any(dim=-1) & near).any():
            kinds.add(group.kind)
    assert kinds == set(range(SPHERE_SPHERE, BOX_BOX + 1))
    stepper = VmasStep(table, config, state.pos.shape[0], "cpu")
    force_in, torque_in = wp.from_torch(force.clone(), dtype=wp.vec2), wp.from_torch(torque.clone())
    views = [wp.from_torch(t.clone(), dtype=wp.vec2 if t.dim() == 3 else wp.float32) for t in state]
    stepper.step(*views, force_in, torque_in)
    after = EntityState(*(wp.to_torch(v) for v in views))
    clamped_force, clamped_torque = wp.to_torch(force_in), wp.to_torch(torque_in)
    # max_f (agent 5), f_range (4, 7), max_t (6), t_range (6, 7) all cut the action.
    assert largest(norm(clamped_force[:, 5])) == pytest.approx(1.5) and largest(clamped_force[:, 7].abs()) == f32(0.7)
    assert largest(norm(clamped_force[:, 4])) == pytest.approx(0.8)
    assert largest(clamped_torque[:, 6].abs()) == f32(0.04) and largest(clamped_torque[:, 7].abs()) == f32(0.1)
    assert torch.equal(clamped_force[:, :4], force[:, :4]) and torch.equal(clamped_torque[:, 8], torque[:, 8])
    # max_speed (4, 8), v_range (5) and the semidims bind.
    assert largest(norm(after.vel[:, 4])) == pytest.approx(0.5) and largest(norm(after.vel[:, 8])) == pytest.approx(0.6)
    assert largest(after.vel[:, 5].abs()) == f32(0.4)
    assert largest(after.pos[..., 0].abs()) == f32(0.37) and largest(after.pos[..., 1].abs()) == f32(0.32)
    # The static sphere and box keep their poses; the rotating box only turns.
    assert torch.equal(after.pos[:, [0, 2, 3]], state.pos[:, [0, 2, 3]])
    assert torch.equal(after.rot[:, 3], state.rot[:, 3])
    assert not torch.equal(after.rot[:, 2], state.rot[:, 2])


def test_hand_built_world_steps_like_the_reference():
    """Every shape pair, friction, gravity, drag, the limits and the semidims, re-synced (from the
    reference's states) and free-running, to the bit (with correctly rounded transcendentals: the
    module doc says why not with torch's)."""
    table, config, state, force, torque = hand_built_world()
    steps = []
    for _ in range(HAND_BUILT_STEPS):
        steps.append((state, force, torque))
        state = reference_step(table, config, state, force, torque, rounded=True)
    assert compare(table, config, steps, rounded=True) == (0.0, 0.0)


def test_two_launches_give_the_same_bits():
    table, config, state, force, torque = hand_built_world(n_envs=16, seed=1)
    stepper = VmasStep(table, config, 16, "cpu")
    first, second = (stepper.step_tensors(state, force, torque) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_step_tensors_leaves_its_inputs():
    table, config, state, force, torque = hand_built_world(n_envs=4)
    copies = [t.clone() for t in (*state, force, torque)]
    VmasStep(table, config, 4, "cpu").step_tensors(state, force, torque)
    assert all(torch.equal(a, b) for a, b in zip((*state, force, torque), copies, strict=True))


def test_inputs_are_checked():
    table, config, state, force, torque = hand_built_world(n_envs=4)
    stepper = VmasStep(table, config, 4, "cpu")
    arrays = [wp.from_torch(t.clone(), dtype=wp.vec2 if t.dim() == 3 else wp.float32) for t in (*state, force, torque)]
    with pytest.raises(ValueError, match=r"pos must be vec2f of shape \[4, 9\] .* got vec2f of shape \[3, 9\]"):
        stepper.step(arrays[0][:3], *arrays[1:])
    with pytest.raises(ValueError, match="rot must be float32 of shape"):
        stepper.step(arrays[0], arrays[1], wp.zeros((4, 9), dtype=wp.float64, device="cpu"), *arrays[3:])
    with pytest.raises(TypeError, match="torque must be a Warp array, got Tensor"):
        stepper.step(*arrays[:5], torque)
    with pytest.raises(ValueError, match=r"force must be float32 of shape \[4, 9, 2\]"):
        stepper.step_tensors(state, force[..., 0], torque)
    with pytest.raises(ValueError, match="state.rot is on meta"):
        stepper.step_tensors(state._replace(rot=state.rot.to("meta")), force, torque)
    with pytest.raises(ValueError, match="n_envs"):
        VmasStep(table, config, 0, "cpu")


@pytest.mark.gpu
def test_cuda_graph_replays_the_step():
    """On CUDA: a captured step replays to the eager step's bits, and a CPU array is refused."""
    table, config, state, force, torque = hand_built_world(n_envs=32)
    stepper = VmasStep(table, config, 32, "cuda:0")
    cuda = [t.to("cuda:0") for t in (*state, force, torque)]
    eager = stepper.step_tensors(EntityState(*cuda[:4]), cuda[4], cuda[5])
    arrays = [wp.from_torch(t.clone(), dtype=wp.vec2 if t.dim() == 3 else wp.float32) for t in cuda]
    torch.cuda.synchronize()  # the copies run on torch's stream, the graph on Warp's
    with wp.ScopedCapture(device="cuda:0", force_module_load=False) as capture:
        stepper.step(*arrays)
    wp.capture_launch(capture.graph)
    wp.synchronize_device("cuda:0")
    for a, b in zip(eager, arrays[:4], strict=True):
        assert torch.equal(a, wp.to_torch(b))
    on_cpu = [wp.from_torch(t.clone(), dtype=a.dtype) for t, a in zip((*state, force, torque), arrays, strict=True)]
    with pytest.raises(ValueError, match="is on cpu"):
        stepper.step(*on_cpu)


@pytest.mark.gpu
def test_cuda_steps_like_the_cpu():
    """No FMA contraction, IEEE division and square root, transcendentals by way of float64: the CUDA
    step gives the CPU step's bits (but for float64 results within an ulp of a float32 rounding
    boundary, about 2^-29 a call)."""
    table, config, state, force, torque = hand_built_world()
    cpu = VmasStep(table, config, 64, "cpu").step_tensors(state, force, torque)
    cuda = VmasStep(table, config, 64, "cuda:0").step_tensors(
        EntityState(*(t.to("cuda:0") for t in state)), force.to("cuda:0"), torque.to("cuda:0")
    )
    assert max_difference(cpu, EntityState(*(t.cpu() for t in cuda))) == 0.0
