"""The Gymnasium and SB3 adapters on environments with agent groups: one observation space and one
action space serve every agent, so groups that differ (in observation width or action space) are
refused at construction with a message naming the adapters that take them; groups that differ in
name only (every group continuous, one space, one width) behave as the one-group scenario."""

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")  # the sb3 extra; CI installs it

from gymnasium.utils.env_checker import check_env  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.gymnasium import SwarpGymnasiumEnv, SwarpVectorEnv, make_vector_env  # noqa: E402
from swarp.interop.sb3 import SwarpVecEnv, make_vec_env  # noqa: E402
from swarp.interop.spaces import check_one_space  # noqa: E402
from swarp.scenarios.navigation import NavigationScenario  # noqa: E402
from tests.groups_support import GroupedNavigation, NarrowNavigation  # noqa: E402

#: Environments whose groups differ: widths, kinds, and two discrete groups (``step`` then takes a
#: mapping by group, even where their spaces are alike).
DIFFERING = {
    "widths": (NarrowNavigation, {}),
    "kinds": (GroupedNavigation, {"action_space": {"a": "discrete"}}),
    "discrete": (GroupedNavigation, {"action_space": "discrete"}),
}
REFUSED = r"agent groups differ \('a': 2 agents, obs_dim .*swarp\.interop\.pettingzoo\.SwarpParallelEnv"


def sim_of(scenario, n_envs=2, **kwargs):
    kwargs.setdefault("max_steps", 6)
    return swarp.Environment(scenario(n_agents=4), n_envs=n_envs, device="cpu", seed=5, **kwargs)


@pytest.mark.parametrize("case", sorted(DIFFERING))
def test_groups_that_differ_are_refused_naming_the_alternatives(case):
    scenario, kwargs = DIFFERING[case]
    with pytest.raises(ValueError, match="SwarpVectorEnv gives every agent one observation space" + ".*" + REFUSED):
        SwarpVectorEnv(sim_of(scenario, **kwargs))
    with pytest.raises(ValueError, match="SwarpGymnasiumEnv .*" + REFUSED):
        SwarpGymnasiumEnv(sim_of(scenario, n_envs=1, **kwargs))
    with pytest.raises(ValueError, match="SwarpVecEnv .*" + REFUSED + r".*torchrl\.SwarpEnv"):
        SwarpVecEnv(sim_of(scenario, auto_reset=True, **kwargs))


def test_registered_grouped_scenarios_are_refused_by_the_make_functions():
    swarp.register_scenario("grouped_navigation_gym", GroupedNavigation)
    try:
        mixed = {"n_agents": 4, "device": "cpu", "action_space": {"b": "multidiscrete"}}
        with pytest.raises(ValueError, match=REFUSED):
            make_vector_env(2, "grouped_navigation_gym", **mixed)
        with pytest.raises(ValueError, match=REFUSED):
            SwarpGymnasiumEnv("grouped_navigation_gym", **mixed)
        with pytest.raises(ValueError, match=REFUSED):
            make_vec_env("grouped_navigation_gym", n_envs=2, **mixed)
        check_env(SwarpGymnasiumEnv("grouped_navigation_gym", n_agents=4, max_steps=8), skip_render_check=True)
    finally:
        swarp.unregister_scenario("grouped_navigation_gym")


def test_one_group_and_name_only_groups_pass_the_check():
    check_one_space(sim_of(NavigationScenario), "X")
    check_one_space(sim_of(GroupedNavigation), "X")


def test_vector_env_of_name_only_groups_is_the_one_group_env():
    """Same spaces, and step for step (an episode end included, SAME_STEP's final_obs) the same
    arrays as the one-group navigation env it was built from."""
    grouped = SwarpVectorEnv(sim_of(GroupedNavigation, n_envs=3, auto_reset=True))
    plain = SwarpVectorEnv(sim_of(NavigationScenario, n_envs=3, auto_reset=True))
    assert grouped.single_observation_space == plain.single_observation_space
    assert grouped.single_action_space == plain.single_action_space
    np.testing.assert_array_equal(grouped.reset(seed=1)[0], plain.reset(seed=1)[0])
    plain.action_space.seed(0)
    ended = 0
    for _ in range(8):
        actions = plain.action_space.sample()
        ours, theirs = grouped.step(actions), plain.step(actions)
        for mine, expected in zip(ours[:4], theirs[:4], strict=True):
            np.testing.assert_array_equal(mine, expected)
        for key in ("agent_reward", "final_obs", "_final_obs"):
            np.testing.assert_array_equal(ours[4][key], theirs[4][key])
        ended += int(theirs[4]["_final_obs"].sum())
    assert ended == 3  # max_steps 6: every env's episode ended on the way


@pytest.mark.parametrize("layout", ["per_agent", "per_env"])
def test_sb3_vec_env_of_name_only_groups_is_the_one_group_env(layout):
    grouped = SwarpVecEnv(sim_of(GroupedNavigation, auto_reset=True), layout=layout)
    plain = SwarpVecEnv(sim_of(NavigationScenario, auto_reset=True), layout=layout)
    assert grouped.observation_space == plain.observation_space and grouped.action_space == plain.action_space
    np.testing.assert_array_equal(grouped.reset(), plain.reset())
    generator = torch.Generator().manual_seed(0)
    finished = 0
    for _ in range(7):
        actions = torch.rand((plain.num_envs, *plain.action_space.shape), generator=generator) * 2 - 1
        ours, theirs = grouped.step(actions), plain.step(actions)
        for mine, expected in zip(ours[:3], theirs[:3], strict=True):
            np.testing.assert_array_equal(mine, expected)
        for mine, expected in zip(ours[3], theirs[3], strict=True):
            assert mine.keys() == expected.keys()
            if "terminal_observation" in expected:
                np.testing.assert_array_equal(mine["terminal_observation"], expected["terminal_observation"])
                finished += 1
    assert finished == plain.num_envs  # max_steps 6: every SB3 env finished once
