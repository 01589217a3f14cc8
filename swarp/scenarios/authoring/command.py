"""The command line of ``python -m swarp.scenario new NAME [--dir DIR] [--force] [--fused]``: write a new
scenario from the template (``swarp/scenario.py`` forwards here).

Writes ``DIR/NAME.py`` (the scenario, registered as NAME when imported) and ``DIR/test_NAME.py`` (its
pytest file); with ``--fused`` the module also holds the scenario's fused twin (Warp kernels).
Refuses, with exit status 2 and a one-line message, a name ``check_name`` refuses (no snake_case
identifier, longer than 64 characters, a built-in scenario's name, a module's or builtin's it would
shadow), files that exist (unless ``--force``), and a folder or file it cannot write.
"""

import argparse
import sys
from pathlib import Path

from swarp.scenarios.authoring.template import write_scenario


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m swarp.scenario", description="Start a swarp scenario of your own.")
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="write NAME.py (a template scenario) and test_NAME.py")
    new.add_argument("name", help="snake_case scenario name, also the module name (NAME.py)")
    new.add_argument("--dir", type=Path, default=Path("."), help="directory to write into (default: .)")
    new.add_argument("--force", action="store_true", help="overwrite files that exist")
    new.add_argument("--fused", action="store_true", help="also write the fused twin (Warp kernels) into NAME.py")
    args = parser.parse_args(argv)
    try:
        paths = write_scenario(args.name, args.dir, force=args.force, fused=args.fused)
    except (ValueError, OSError) as error:  # FileExistsError is an OSError
        print(f"python -m swarp.scenario: error: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"wrote {path}")
    module, test = paths
    print(
        f"next: python -m pytest -q {test}\n"
        f"      in Python: sys.path.insert(0, {str(module.parent)!r}); import {args.name}; "
        f"env = swarp.make({args.name!r}, n_envs=64)"
    )
    return 0
