"""Scenarios with agent groups for tests (not registered: pass an instance to ``swarp.Environment``)."""

import dataclasses

from swarp.core.groups import GroupSpec
from swarp.scenarios.navigation import NavigationScenario

#: Columns of group "b"'s observation in ``NarrowNavigation``.
NARROW = 6


class GroupedNavigation(NavigationScenario):
    """Navigation of 4 agents as groups "a" (2) and "b" (2), both full width."""

    def make_world(self):
        spec = super().make_world()
        return dataclasses.replace(spec, groups=(GroupSpec("a", 2, self.obs_dim), GroupSpec("b", 2, self.obs_dim)))


class NarrowNavigation(NavigationScenario):
    """Navigation (torch reference) whose group "b" observes only its first ``NARROW`` columns."""

    fused_available = False

    def make_world(self):
        spec = super().make_world()
        return dataclasses.replace(spec, groups=(GroupSpec("a", 2, self.obs_dim), GroupSpec("b", 2, NARROW)))

    def observations(self):
        obs = super().observations().clone()
        obs[:, 2:, NARROW:] = 0
        return obs
