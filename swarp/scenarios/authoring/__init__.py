"""Starting a scenario of your own: the template (``template.py``, what a new scenario module and
its test file say) and the command that writes it (``command.py``): ``python -m swarp.scenario new
NAME [--dir DIR] [--force] [--fused]`` writes ``DIR/NAME.py`` (a worked, torch-only template
scenario, or with ``--fused`` its Warp twin too) and ``DIR/test_NAME.py``; in Python,
``write_scenario(NAME, DIR)``. docs/writing-scenarios.md walks through the template."""

from swarp.scenarios.authoring.command import main
from swarp.scenarios.authoring.template import check_name, write_scenario

__all__ = ["check_name", "main", "write_scenario"]
