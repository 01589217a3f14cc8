"""The give-way scenario (``swarp/scenarios/give_way.py``, reset and route kernels
``give_way_kernels.py``; its observation and reward kernels are navigation's)."""

import pytest
import torch

import swarp
from swarp.core.config import ObstacleShape
from swarp.scenarios.framework.arena import seek_velocity
from swarp.scenarios.give_way import N_AGENTS, scripted_actions
from tests.support import check_parity, random_policy, success_rate

NAME = "give_way"
PARITY_CASES = {
    "hard": dict(max_steps=60),
    "easy_float64": dict(difficulty=0.0, dtype="float64", max_steps=60),
    "mid_substeps": dict(difficulty=0.5, substeps=6, collision_k=2000.0, collision_penalty=0.3, max_steps=60),
    "own_reward": dict(shared_reward=False, max_steps=60),  # the route kernel writes the whole reward
    "straight_progress": dict(route_shaping=False, max_steps=60),  # navigation's fused step end
}


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    seen = check_parity(NAME, PARITY_CASES[case], scripted_actions, generator, n_steps=80)
    # The scripted half of the batch finishes episodes; the random half runs into the time limit.
    assert seen["terminated"] > 0 and seen["truncated"] > 0 and seen["info.on_goal"] > 0


def test_corridor_is_four_boxes_and_difficulty_narrows_the_lane():
    """Difficulty 0 leaves room for two agents side by side; difficulty 1 only for one."""
    widths = {}
    for difficulty in (0.0, 0.5, 1.0):
        env = swarp.make(NAME, n_envs=2, device="cpu", difficulty=difficulty)
        obstacles = env.world.model.obstacle_tensors()
        assert obstacles["shape"].shape == (1, 4)  # static, shared by every env
        assert bool((obstacles["shape"] == int(ObstacleShape.BOX)).all())
        r = env.scenario.cfg.agent_radius
        # The lane is the gap between the bottom wall's top face and the top walls' bottom faces.
        center, size = obstacles["center"][0], obstacles["size"][0]
        lane_bottom = float(center[0, 1] + size[0, 1])
        lane_top = float(center[1, 1] - size[1, 1])
        widths[difficulty] = lane_top - lane_bottom
        bay_width = 2 * float(size[3, 0])
        assert bay_width > 2 * r  # the bay always fits an agent
    r = 0.1
    assert widths[0.0] > 4 * r > widths[1.0] > 2 * r
    assert widths[0.0] > widths[0.5] > widths[1.0]


def test_spawns_and_goals_sit_at_opposite_ends_of_the_lane():
    env = swarp.make(NAME, n_envs=64, device="cpu", seed=3)
    sc = env.scenario
    pos, goals = env.state.pos, sc.goals
    r, half = sc.cfg.agent_radius, sc.cfg.half_length
    assert bool((pos[:, 0, 0] < -half / 2).all() and (pos[:, 1, 0] > half / 2).all())
    assert bool((pos[..., 1].abs() <= sc.lane_half_width - r).all())  # clear of the walls
    assert bool((goals[:, 0, 0] > half / 2).all() and (goals[:, 1, 0] < -half / 2).all())
    assert bool((pos[..., 0].abs() <= half - r).all())
    assert len({round(float(x), 6) for x in pos[:, 0, 0]}) > 32, "spawns are randomised"


def test_walls_keep_agents_in_the_corridor(generator):
    env = swarp.make(NAME, n_envs=16, device="cpu", seed=0, max_steps=1000)
    sc = env.scenario
    low, high = env.action_bounds
    for _ in range(60):
        env.step(low + (high - low) * torch.rand(16, N_AGENTS, 2, generator=generator))
        y = env.state.pos[..., 1]
        x = env.state.pos[..., 0]
        in_lane = y.abs() <= sc.lane_half_width + 0.2 * sc.cfg.agent_radius
        in_bay = ((x - sc.bay_x).abs() <= sc.bay_half_width) & (y <= sc.lane_half_width + sc.bay_depth)
        assert bool((in_lane | in_bay).all())


def straight_to_goal(env: swarp.Environment) -> torch.Tensor:
    """Both agents drive straight at their goals, ignoring each other."""
    return seek_velocity(env.scenario.goals, env.state.pos, env.stepper.dt, env.scenario.cfg.max_speed)


@pytest.mark.parametrize("difficulty", [0.0, 1.0])
def test_scripted_controller_beats_random_and_difficulty_forces_giving_way(difficulty):
    """At difficulty 0 the agents can pass each other anywhere; at 1 driving straight deadlocks
    in the one-lane part, and only giving way (the scripted controller) gets both home."""
    env = swarp.make(NAME, n_envs=32, device="cpu", seed=0, difficulty=difficulty)
    n_steps = env.max_steps - 1
    scripted = success_rate(env, scripted_actions, n_steps)
    random = success_rate(env, random_policy(), n_steps)
    straight = success_rate(env, straight_to_goal, n_steps)
    assert scripted >= 0.9 and random <= 0.05, (scripted, random)
    if difficulty == 0.0:
        assert straight >= 0.9, straight
    else:
        assert straight <= 0.05, straight


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(difficulty=1.5), r"give_way option difficulty must be a finite number >= 0 and <= 1.0"),
        (dict(difficulty=-0.1), "difficulty must be a finite number"),
        (dict(half_length=1.0), "half_length must be >= 17.5 agent radii"),
        (dict(half_length=1.0, bay_position=0.0), "half_length must be >= 10.5 agent radii"),
        (dict(bay_position=1.0), "bay_position must be < 1"),
        (dict(bay_position=-0.1), "bay_position must be a finite number"),
        (dict(shared_reward=1), "shared_reward"),
        (dict(agent_radius=0.0), "agent_radius must be a finite number > 0"),
        (dict(max_steps=0), "max_steps must be an int >= 1"),
        (dict(substeps=1), "unstable contacts"),
        (dict(n_agents=16), "give_way option n_agents must be 2"),
        (dict(n_agents=True), "n_agents must be 2"),
        (dict(lanes=2), "unknown keyword"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make(NAME, n_envs=1, device="cpu", **options)


@pytest.mark.parametrize("fused", [True, False])
def test_shared_reward_pays_both_agents_their_mean_progress(fused, generator):
    """The same actions with and without ``shared_reward``: the shared reward of each agent is the
    mean of the two own-progress rewards (no collisions, no one home, on this stretch)."""
    envs = [swarp.make(NAME, n_envs=8, device="cpu", seed=3, fused=fused, shared_reward=shared, collision_penalty=0.0)
            for shared in (False, True)]  # fmt: skip
    low, high = envs[0].action_bounds
    for _ in range(5):
        action = low + (high - low) * torch.rand(8, N_AGENTS, 2, generator=generator)
        own, shared = (env.step(action)[1] for env in envs)
        torch.testing.assert_close(shared, own.mean(dim=1, keepdim=True).expand(-1, N_AGENTS))
