"""``python -m swarp.scenario new NAME [--dir DIR] [--force] [--fused]``: the command that starts a
scenario of your own. It forwards to ``swarp.scenarios.authoring``, where the template lives beside
the scenario framework; ``write_scenario`` and ``check_name`` are its Python face."""

import sys

from swarp.scenarios.authoring import check_name, main, write_scenario

__all__ = ["check_name", "main", "write_scenario"]

if __name__ == "__main__":
    sys.exit(main())
