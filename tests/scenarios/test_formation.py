"""The formation scenario (``swarp/scenarios/formation.py`` and its Warp twin
``formation_kernels.py``): parity over option corners, the polygon of slots, the observation
layout, termination and info, the scripted controller against random actions, and option
validation. The framework contract is in ``test_contract.py``."""

import math

import pytest
import torch

import swarp
from tests.support import episode_success_rate, parity_rollout, random_actions, scripted_policy

N_PARITY_STEPS = 40

PARITY_CASES = {
    "small_arena": dict(n_agents=4, world_size=0.6, formation_radius=0.25, max_steps=20),
    # A tight polygon and big agents: collisions on the way in, progress shared.
    "shared_crowded": dict(
        n_agents=6, formation_radius=0.2, agent_radius=0.08, shared_reward=True, world_size=0.6, max_steps=25
    ),
    "acceleration_control": dict(n_agents=5, ctrl_mode="acceleration", obs_neighbors=4, max_steps=20),
    "single_agent_float64": dict(n_agents=1, dtype="float64", world_size=0.6, max_steps=20),
    "grid_neighbors": dict(
        n_agents=130,
        world_size=3.0,
        formation_radius=2.5,
        obs_range=0.3,
        max_neighbors=6,
        max_steps=20,
        n_envs=2,
        neighbor_method="grid",
    ),
}
#: Cases where the scripted half of the batch completes the formation within the time limit.
TERMINATING_CASES = ("small_arena", "shared_crowded", "single_agent_float64")


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    seen = parity_rollout("formation", dict(PARITY_CASES[case]), N_PARITY_STEPS, generator)
    assert seen["truncated"] > 0 and seen["info.on_slot"] > 0
    if case in TERMINATING_CASES:
        assert seen["terminated"] > 0
    if case == "shared_crowded":
        assert seen["info.collisions"] > 0


@pytest.mark.parametrize("n_agents", [1, 3, 5, 8])
def test_slots_form_a_regular_polygon_inside_the_arena(n_agents):
    env = swarp.make("formation", n_envs=64, device="cpu", seed=1, n_agents=n_agents, formation_radius=0.5)
    sc = env.scenario
    R, L = sc.cfg.formation_radius, sc.cfg.world_size
    slots, center = sc.slots.double(), sc.center.double()
    offsets = slots - center.unsqueeze(1)
    torch.testing.assert_close(offsets.norm(dim=-1), torch.full((64, n_agents), R, dtype=torch.float64))
    angles = torch.atan2(offsets[..., 1], offsets[..., 0])
    # Consecutive agents sit 2 pi / n apart, counter-clockwise.
    step = torch.remainder(angles.roll(-1, dims=1) - angles, 2 * math.pi)
    if n_agents > 1:
        torch.testing.assert_close(step, torch.full_like(step, 2 * math.pi / n_agents), atol=1e-5, rtol=0)
    assert bool((slots.abs() <= L - sc.cfg.agent_radius).all())
    # Rotations and centers vary between envs.
    assert angles[:, 0].std() > 1.0 and center.std(dim=0).min() > 0.1


def test_observation_layout_matches_the_docstring():
    env = swarp.make("formation", n_envs=3, device="cpu", n_agents=4, obs_neighbors=2)
    assert env.obs_dim == 8 + 5 * 2
    obs, info = env.reset()
    state, sc = env.state, env.scenario
    torch.testing.assert_close(obs[..., 0:2], state.pos)
    torch.testing.assert_close(obs[..., 2:4], state.vel)
    torch.testing.assert_close(obs[..., 4:6], sc.slots - state.pos)
    torch.testing.assert_close(obs[..., 6:8], sc.center.unsqueeze(1) - state.pos)
    # Info of a reset: distances to the slots and their mean.
    torch.testing.assert_close(info["dist_to_slot"], (sc.slots - state.pos).norm(dim=-1))
    torch.testing.assert_close(info["formation_error"], info["dist_to_slot"].mean(dim=1))


def test_terminates_with_the_bonus_when_every_agent_is_on_its_slot():
    env = swarp.make("formation", n_envs=2, device="cpu", n_agents=3, final_reward=5.0, collision_penalty=0.0)
    sc = env.scenario
    # Env 0: everyone a hair from its slot; env 1: one agent still far.
    pos = sc.slots.clone()
    pos[:, :, 0] += 0.01
    pos[1, 2] = sc.center[1]
    env.world.set_state(pos=pos)
    sc.prev_dist.copy_((sc.slots - pos).norm(dim=-1))
    _, reward, terminated, _, info = env.step(torch.zeros(2, 3, 2))
    assert terminated.tolist() == [True, False]
    assert info["on_slot"].tolist() == [[True, True, True], [True, True, False]]
    torch.testing.assert_close(reward[0], torch.full((3,), 5.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(reward[1], torch.zeros(3), atol=1e-5, rtol=0)


def test_scripted_controller_beats_random_actions(generator):
    env = swarp.make("formation", n_envs=64, device="cpu", seed=2, max_steps=100)
    scripted = episode_success_rate(env, scripted_policy, generator)
    random = episode_success_rate(env, lambda e, g: random_actions(e, g, 0.0), generator)
    assert scripted >= 0.9 and random <= 0.05, (scripted, random)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "n_agents must be an int >= 1"),
        (dict(n_agents=3.0), "n_agents must be an int"),
        (dict(tolerance=0.0), "tolerance must be a finite number > 0"),
        (dict(formation_radius=-0.4), "formation_radius must be a finite number > 0"),
        (dict(formation_radius=0.98), "the polygon must fit in the arena"),
        (dict(n_agents=12, formation_radius=0.1), "neighboring slots are"),
        (dict(shared_reward=1), "shared_reward must be a bool"),
        (dict(final_reward=float("nan")), "final_reward must be a finite number >= 0"),
        (dict(obs_neighbors=5, max_neighbors=4), r"max_neighbors \(4\) must be >= obs_neighbors \(5\)"),
        (dict(ctrl_mode="jerk"), "ctrl_mode"),
        (dict(n_agents=10, spawn_cells=3), "cannot place 10 separated points"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("formation", n_envs=1, device="cpu", **options)
