"""The fused substep: contact forces and integration in one kernel (``swarp/physics/substep.py``,
``ExecutionPlan.fused_substep``)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import warp as wp

from swarp import AgentConfig, Obstacle, Stepper, World, WorldConfig
from swarp.core.config import Body
from swarp.physics import substep
from swarp.runtime.plan import Capabilities, ExecutionPlan, choose_plan
from tests.physics.test_step import ARENA, FLEET

CASES = [
    ("float32", "rk4", 2, ARENA),
    ("float64", "euler", 1, ARENA),
    ("float32", "euler", 3, dataclasses.replace(ARENA, obstacles=(), bounds_mode="clamp")),
]


def make_world(device, fused, dtype, integrator, substeps, world, n_envs, one_thread_per_env=False) -> World:
    plan = ExecutionPlan(launch="eager", one_thread_per_env=one_thread_per_env, fused_substep=fused)
    stepper = Stepper(
        FLEET, dt=0.05, device=device, world=world, substeps=substeps, integrator=integrator, dtype=dtype, plan=plan
    )
    return World(stepper, n_envs)


def rollout(world: World, seed: int, n_steps: int = 30) -> list[dict[str, torch.Tensor]]:
    """States, forces and invalid-action flags after each of ``n_steps`` steps from a crowded start
    under random actions (some of them non-finite)."""
    rng = np.random.default_rng(seed)
    n_envs, n_agents = world.n_envs, world.n_agents
    dtype, device = world.stepper.torch_dtype, world.stepper.torch_device
    start = {
        "pos": rng.uniform(-0.6, 0.6, (n_envs, n_agents, 2)),
        "theta": rng.uniform(-math.pi, math.pi, (n_envs, n_agents)),
        "speed": rng.uniform(-0.3, 0.3, (n_envs, n_agents)),
    }
    world.set_state(**{k: torch.as_tensor(v, dtype=dtype, device=device) for k, v in start.items()})
    out = []
    for t in range(n_steps):
        actions = rng.uniform(-1.5, 1.5, (n_envs, n_agents, 2))
        if t == 7:
            actions[0, 2, 1] = np.nan  # an invalid action acts as 0 and raises the flag
        world.step(torch.as_tensor(actions, dtype=dtype, device=device))
        snapshot = {k: v.clone() for k, v in world.state.torch._asdict().items()}
        snapshot["forces"] = torch.as_tensor(world.forces.numpy()).clone()
        snapshot["invalid"] = torch.as_tensor(world.invalid_action_flag.numpy()).clone()
        snapshot["non_finite"] = torch.as_tensor(world.non_finite_flags.numpy()).clone()
        out.append(snapshot)
    return out


def assert_same_bits(fused: list[dict], split: list[dict]) -> None:
    for t, (a, b) in enumerate(zip(fused, split, strict=True)):
        for name in a:
            assert torch.equal(a[name], b[name]), f"step {t}: {name} differs"
    assert any(bool((s["forces"] != 0).any()) for s in split)  # the agents really touch
    assert int(split[-1]["invalid"][0]) == 1


def check_fused_matches_split(device: str, n_envs: int, one_thread_per_env: bool) -> None:
    for dtype, integrator, substeps, world in CASES:
        fused = make_world(device, True, dtype, integrator, substeps, world, n_envs, one_thread_per_env)
        split = make_world(device, False, dtype, integrator, substeps, world, n_envs, one_thread_per_env)
        assert_same_bits(rollout(fused, 5), rollout(split, 5))


def test_fused_substep_gives_the_split_substeps_bits_on_the_cpu():
    check_fused_matches_split("cpu", n_envs=5, one_thread_per_env=True)


def test_one_agent_per_thread_waits_at_the_block_barrier_on_cpu_blocks(monkeypatch):
    # CUDA's layout, run by Warp's CPU blocks: without the barrier an agent would integrate before
    # the next one of its env read its state, and the bits would differ.
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    check_fused_matches_split("cpu", n_envs=7, one_thread_per_env=False)


@pytest.mark.gpu
def test_fused_substep_gives_the_split_substeps_bits_on_cuda():
    # 18 agents, one per thread: 3 envs per block of 54 threads, the last block partly empty.
    check_fused_matches_split("cuda:0", n_envs=7, one_thread_per_env=False)


@pytest.mark.gpu
def test_fused_substep_holds_an_env_of_more_agents_than_a_block_in_one_block():
    fleet = [AgentConfig(radius=0.02)] * 80
    world = WorldConfig(bounds=0.5, collision_k=200.0, max_neighbors=8)
    runs = []
    for fused in (True, False):
        plan = ExecutionPlan(launch="eager", one_thread_per_env=False, fused_substep=fused)
        w = World(Stepper(fleet, dt=0.05, device="cuda:0", world=world, plan=plan), 3)
        assert substep.layout(3, 80, False) == (3, 1, 80)
        runs.append(rollout(w, 1, n_steps=10))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a["pos"], b["pos"]) and torch.equal(a["vel"], b["vel"])


def test_the_plan_fuses_substeps_where_the_physics_can():
    can = Capabilities(fuses_substep=True)
    assert choose_plan("cpu", 1024, 4, 8, can=can).fused_substep
    assert not choose_plan("cpu", 64, 4, 8, can=can, fixed={"one_thread_per_env": False}).fused_substep
    assert not choose_plan("cpu", 1024, 4, 8, can=Capabilities()).fused_substep
    assert substep.can_fuse(FLEET, ARENA)
    assert not substep.can_fuse([AgentConfig(model="drone")], WorldConfig())
    bodies = WorldConfig(bounds=2.0, bodies=(Body((Obstacle.circle((0, 0), 0.1),)),))
    assert not substep.can_fuse(FLEET, bodies)
    with pytest.raises(ValueError, match="plan.fused_substep=True is not possible here: the world has movable bodies"):
        choose_plan("cpu", 64, 4, 8, can=Capabilities(), fixed={"fused_substep": True})
    with pytest.raises(ValueError, match="on the CPU one agent per thread needs wp.config.enable_cpu_blocks"):
        choose_plan("cpu", 64, 4, 8, can=can, fixed={"fused_substep": True, "one_thread_per_env": False})
    with pytest.raises(ValueError, match="movable bodies or the fleet drones"):
        Stepper(FLEET[:2], world=bodies, device="cpu", plan=ExecutionPlan(fused_substep=True))
    with pytest.raises(ValueError, match="on the CPU one agent per thread needs wp.config.enable_cpu_blocks"):
        Stepper(FLEET, world=ARENA, device="cpu", plan=ExecutionPlan(fused_substep=True, one_thread_per_env=False))
    # A bare Stepper decides for its own fleet and world.
    assert Stepper(FLEET, world=ARENA, device="cpu").plan.fused_substep
    assert not Stepper(FLEET[:2], world=bodies, device="cpu").plan.fused_substep


@pytest.mark.gpu
def test_the_cuda_plan_fuses_the_substep_up_to_the_measured_env_size():
    can = Capabilities(fuses_substep=True)
    assert choose_plan("cuda:0", 1024, 4, 8, can=can).fused_substep
    assert choose_plan("cuda:0", 64, 128, 8, can=can).fused_substep
    assert not choose_plan("cuda:0", 64, 129, 8, can=can).fused_substep  # beyond the A/B: where asked
    assert choose_plan("cuda:0", 4, 1024, 8, can=can, fixed={"fused_substep": True}).fused_substep
    assert not choose_plan("cuda:0", 1024, 4, 8, can=Capabilities()).fused_substep
    assert not choose_plan("cuda:0", 1024, 4, 8, can=can, fixed={"fused_substep": False}).fused_substep
    with pytest.raises(ValueError, match="an env's threads share a block of at most 1024, got 2000"):
        choose_plan("cuda:0", 4, 2000, 8, can=can, fixed={"fused_substep": True})


def test_the_layout_puts_whole_envs_in_a_block():
    assert substep.layout(100, 3, False) == (5, 21, 3)  # 21 envs x 3 agents = 63 threads a block
    assert substep.layout(100, 16, False) == (25, 4, 16)
    assert substep.layout(100, 4, True) == (2, 64, 1)  # one thread holds an env
