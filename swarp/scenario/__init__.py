"""Starting a scenario of your own: ``python -m swarp.scenario new NAME [--dir DIR] [--force]`` writes
``DIR/NAME.py`` (a worked, torch-only template scenario) and ``DIR/test_NAME.py``; in Python,
``write_scenario(NAME, DIR)``. docs/writing-scenarios.md walks through the template."""

from swarp.scenario.template import check_name, write_scenario

__all__ = ["check_name", "write_scenario"]
