"""``swarp.testing.check_scenario`` over a scenario with an alive mask (``swarp/runtime/alive.py``):
masked navigation passes, and a reference that pays a dead agent is caught."""

import pytest
import torch

from swarp.scenarios.navigation import NavigationScenario
from swarp.testing import ScenarioContractError, check_scenario

LEAVING = dict(n_agents=(2, 5), leave_on_goal=True, goal_radius=0.3, world_size=0.5, max_steps=15, n_steps=20)


class PaysTheDead(NavigationScenario):
    """Navigation whose torch reference forgets to zero the rewards of dead agents."""

    name = "pays_the_dead"
    fused_available = False

    def _masked_rewards(self) -> torch.Tensor:
        reward = super()._masked_rewards()
        return reward + 1.0


def test_masked_navigation_keeps_the_contract():
    report = check_scenario("navigation", **LEAVING)
    assert report["alive mask (fused)"] == "ok" and report["alive mask (torch)"] == "ok"
    assert "alive mask (fused)" not in check_scenario("navigation", n_steps=3)  # no mask, no check


def test_a_reward_for_a_dead_agent_is_caught():
    with pytest.raises(ScenarioContractError, match="alive mask.*dead"):
        check_scenario(PaysTheDead, **LEAVING)
