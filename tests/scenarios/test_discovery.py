"""The discovery scenario (``swarp/scenarios/discovery.py`` and its Warp twin
``discovery_kernels.py``): parity over option corners, the observation layout, when a target
counts as found and what that pays, the scripted controller against random actions, and option
validation. The framework contract is in ``test_contract.py``."""

import pytest
import torch

import swarp
from tests.support import episode_success_rate, parity_rollout, random_actions, scripted_policy

N_PARITY_STEPS = 40

PARITY_CASES = {
    "defaults_short": dict(max_steps=25),
    # One agent finds alone: many finds, including several targets on one step.
    "solo_finder": dict(n_agents=3, n_targets=8, agents_per_target=1, covering_range=0.35, max_steps=25),
    "whole_team_needed": dict(n_agents=4, n_targets=2, agents_per_target=4, world_size=0.6, max_steps=30),
    "float64_accel": dict(n_agents=4, n_targets=3, ctrl_mode="acceleration", dtype="float64", max_steps=25),
    "many_targets": dict(n_agents=6, n_targets=32, agents_per_target=2, world_size=2.0, max_steps=20),
    "grid_neighbors": dict(
        n_agents=130, n_targets=6, world_size=2.0, obs_range=0.3, max_neighbors=6, max_steps=20, neighbor_method="grid"
    ),
}


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    options = dict(PARITY_CASES[case])
    if case == "grid_neighbors":
        options["n_envs"] = 2
    seen = parity_rollout("discovery", options, N_PARITY_STEPS, generator)
    assert seen["scenario.found"] > 0
    if case != "many_targets":  # 32 targets take longer than the time limit
        assert seen["terminated"] > 0
    if case != "grid_neighbors":  # 130 agents find 6 targets before any time limit
        assert seen["truncated"] > 0


def test_observation_layout_matches_the_docstring():
    env = swarp.make("discovery", n_envs=3, device="cpu", n_agents=4, n_targets=3, obs_neighbors=2)
    assert env.obs_dim == 4 + 3 * 3 + 5 * 2
    obs, info = env.reset()
    state, sc = env.state, env.scenario
    torch.testing.assert_close(obs[..., 0:2], state.pos)
    torch.testing.assert_close(obs[..., 2:4], state.vel)
    per_target = obs[..., 4:13].reshape(3, 4, 3, 3)
    torch.testing.assert_close(per_target[..., 0:2], sc.targets.unsqueeze(1) - state.pos.unsqueeze(2))
    assert bool((per_target[..., 2] == 1).all())
    assert not bool(sc.found.any()) and bool((info["covered_fraction"] == 0).all())
    # Agents and targets spawn in distinct cells.
    points = torch.cat([state.pos, sc.targets], dim=1)
    gaps = torch.cdist(points, points) + torch.eye(7) * 10
    assert bool((gaps > 2 * sc.clearance).all())


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_a_target_is_found_by_enough_agents_at_once(fused):
    env = swarp.make(
        "discovery",
        n_envs=1,
        device="cpu",
        fused=fused,
        n_agents=3,
        n_targets=2,
        agents_per_target=2,
        covering_range=0.2,
        collision_penalty=0.0,
        time_penalty=0.5,
        covering_reward=3.0,
    )
    sc = env.scenario
    sc.targets.copy_(torch.tensor([[[-0.5, 0.0], [0.5, 0.0]]]))
    zeros = torch.zeros(1, 3, 2)
    # One agent at target 0, two beside target 1 (0.15 m, within range), apart from each other.
    env.world.set_state(pos=torch.tensor([[[-0.5, 0.1], [0.5, 0.15], [0.5, -0.15]]]))
    obs, reward, terminated, _, info = env.step(zeros)
    assert sc.found.tolist() == [[False, True]]
    torch.testing.assert_close(reward, torch.full((1, 3), 3.0 - 0.5))
    torch.testing.assert_close(info["covered_fraction"], torch.tensor([0.5]))
    assert not bool(terminated.any())
    # A found target drops out of every agent's observation at once; target 0 is still listed.
    assert bool((obs[0, :, 7:10] == 0).all()) and bool((obs[0, :, 6] == 1).all())
    # Staying there finds nothing new; a second agent joining target 0 ends the episode.
    _, reward, _, _, _ = env.step(zeros)
    torch.testing.assert_close(reward, torch.full((1, 3), -0.5))
    env.world.set_state(pos=torch.tensor([[[-0.5, 0.1], [-0.5, -0.1], [0.5, -0.15]]]))
    _, reward, terminated, _, info = env.step(zeros)
    assert terminated.tolist() == [True] and sc.found.tolist() == [[True, True]]
    torch.testing.assert_close(reward, torch.full((1, 3), 3.0 - 0.5))
    torch.testing.assert_close(info["covered_fraction"], torch.tensor([1.0]))


def test_scripted_controller_beats_random_actions(generator):
    env = swarp.make("discovery", n_envs=64, device="cpu", seed=2, max_steps=150)
    scripted = episode_success_rate(env, scripted_policy, generator)
    random = episode_success_rate(env, lambda e, g: random_actions(e, g, 0.0), generator)
    assert scripted >= 0.9 and random <= 0.1, (scripted, random)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "n_agents must be an int >= 1"),
        (dict(n_targets=0), "n_targets must be an int >= 1 and <= 32"),
        (dict(n_targets=33), "n_targets must be an int >= 1 and <= 32"),
        (dict(agents_per_target=6), "agents_per_target must be an int >= 1 and <= 5"),
        (dict(agents_per_target=0), "agents_per_target must be an int >= 1"),
        (dict(covering_range=0.0), "covering_range must be a finite number > 0"),
        (dict(time_penalty=-0.01), "time_penalty must be a finite number >= 0"),
        (dict(obs_neighbors=5, max_neighbors=4), r"max_neighbors \(4\) must be >= obs_neighbors \(5\)"),
        (dict(ctrl_mode="warp"), "ctrl_mode"),
        (dict(n_agents=300, agents_per_target=2), "cannot place 305 separated points"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("discovery", n_envs=1, device="cpu", **options)
