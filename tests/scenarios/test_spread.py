"""The spread scenario (``swarp/scenarios/spread.py`` and its Warp twin ``spread_kernels.py``)."""

import pytest
import torch

import swarp
from swarp.scenarios.spread import greedy_actions
from tests.support import check_parity, controlled_actions, random_policy, success_rate

NAME = "spread"
PARITY_CASES = {
    "default": dict(max_steps=12),
    # Crowded: agents overlap (collision terms) and landmarks get covered.
    "crowded": dict(n_agents=6, world_size=0.5, agent_radius=0.08, max_steps=12, cover_radius=0.15),
    "single_agent": dict(n_agents=1, max_steps=12),
    "float64_substeps": dict(n_agents=4, substeps=2, dtype="float64", max_steps=12),
    # Past ROWS_MAX_AGENTS: the pair-parallel observation and the per-agent kernel.
    "large_fleet_pairs": dict(n_agents=30, world_size=2.0, max_steps=12),
}


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    seen = check_parity(NAME, PARITY_CASES[case], greedy_actions, generator, n_steps=30)
    assert seen["truncated"] > 0
    if case in ("default", "crowded"):
        assert seen["info.covered"] > 0
    if case == "crowded":
        assert seen["info.collisions"] > 0


def test_small_fleets_observe_through_rows_and_large_ones_through_pairs():
    """Fleets up to ROWS_MAX_AGENTS observe through the row kernels (which save final_obs
    themselves), larger ones through the pair-parallel kernels; the parity cases above pin both to
    the torch reference."""
    from swarp.scenarios import spread_kernels

    small = swarp.make(NAME, n_envs=2, device="cpu", n_agents=spread_kernels.ROWS_MAX_AGENTS)
    large = swarp.make(NAME, n_envs=2, device="cpu", n_agents=spread_kernels.ROWS_MAX_AGENTS + 1, world_size=2.0)
    assert small.scenario.kernels().observe is not None and small.scenario.saves_final_obs
    assert large.scenario.kernels().observe is None and not large.scenario.saves_final_obs


def test_reward_and_info_follow_their_definition():
    """Reward = -(sum over landmarks of the nearest-agent distance) - penalty * own collisions."""
    # A crowded arena, so that some steps have collisions.
    env = swarp.make(NAME, n_envs=3, device="cpu", seed=2, n_agents=4, world_size=0.4, collision_penalty=0.5)
    generator = torch.Generator().manual_seed(0)
    n_collisions = 0
    for _ in range(10):
        obs, reward, terminated, truncated, info = env.step(controlled_actions(env, greedy_actions, generator))
        pos, landmarks = env.state.pos, env.scenario.landmarks
        dist = torch.cdist(landmarks.double(), pos.double()).min(dim=2).values  # [E, landmark]
        d2 = torch.cdist(pos.double(), pos.double())
        collisions = ((d2 < 2 * env.scenario.cfg.agent_radius) & ~torch.eye(4, dtype=torch.bool)).sum(-1)
        expected = -dist.sum(1, keepdim=True) - 0.5 * collisions
        torch.testing.assert_close(reward.double(), expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(info["landmark_dist"].double(), dist, atol=1e-5, rtol=0)
        assert torch.equal(info["collisions"], collisions.to(torch.int32))
        n_collisions += int(collisions.sum())
    assert n_collisions > 0
    assert not bool(terminated.any())
    # Observation layout: velocity, position, landmark offsets, other agents' offsets (index order).
    torch.testing.assert_close(obs[..., 0:2], env.state.vel)
    torch.testing.assert_close(obs[..., 2:4], pos)
    torch.testing.assert_close(obs[:, 2, 4:12].reshape(3, 4, 2), landmarks - pos[:, 2:3])
    others = torch.stack([pos[:, j] - pos[:, 2] for j in (0, 1, 3)], 1)
    torch.testing.assert_close(obs[:, 2, 12:18].reshape(3, 3, 2), others)
    assert env.obs_dim == 4 * 4 + 2


def test_greedy_controller_beats_random():
    env = swarp.make(NAME, n_envs=64, device="cpu", seed=0, n_agents=3)
    n_steps = env.max_steps
    greedy = success_rate(env, greedy_actions, n_steps)
    random = success_rate(env, random_policy(), n_steps)
    assert greedy >= 0.8 and random <= 0.1, (greedy, random)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "spread option n_agents must be an int >= 1"),
        (dict(n_agents=2.0), "n_agents must be an int"),
        (dict(agent_radius=-0.1), "agent_radius must be a finite number > 0"),
        (dict(cover_radius=float("inf")), "cover_radius must be a finite number > 0"),
        (dict(collision_penalty=-1.0), "collision_penalty must be a finite number >= 0"),
        (dict(agent_radius=1.5), r"agent_radius \(1.5\) must be smaller than world_size"),
        (dict(n_agents=200), "cannot place 200 separated points"),
        (dict(landmarks=3), "unknown keyword"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make(NAME, n_envs=1, device="cpu", **options)
