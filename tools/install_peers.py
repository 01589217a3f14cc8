"""Install the staged peer wheels (``tools/stage_peers.sh``) whose module this Python cannot import
yet, into ``~/peers`` (put it on PYTHONPATH): the machine's own JAX, numpy and friends stay first.

    python3 install_peers.py .peers
"""

import importlib.util
import pathlib
import subprocess
import sys

#: Distribution name (as in the wheel file name, lower case) -> the module that proves it installed.
MODULES = {
    "absl_py": "absl",
    "camar": "camar",
    "contourpy": "contourpy",
    "cycler": "cycler",
    "farama_notifications": "farama_notifications",
    "fonttools": "fontTools",
    "gymnasium": "gymnasium",
    "gymnax": "gymnax",
    "jaxmarl": "jaxmarl",
    "kiwisolver": "kiwisolver",
    "markdown_it_py": "markdown_it",
    "matplotlib": "matplotlib",
    "mdurl": "mdurl",
    "msgpack": "msgpack",
    "packaging": "packaging",
    "pandas": "pandas",
    "pillow": "PIL",
    "pygments": "pygments",
    "pyparsing": "pyparsing",
    "python_dateutil": "dateutil",
    "pytz": "pytz",
    "pyyaml": "yaml",
    "rich": "rich",
    "safetensors": "safetensors",
    "seaborn": "seaborn",
    "six": "six",
    "toolz": "toolz",
    "tzdata": "tzdata",
}


def main() -> None:
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".peers")
    todo = []
    for wheel in sorted(folder.glob("*.whl")):
        module = MODULES.get(wheel.name.split("-")[0].lower())
        if module is None or importlib.util.find_spec(module) is None:
            todo.append(str(wheel))
    print("installing:", [pathlib.Path(w).name.split("-")[0] for w in todo])
    if todo:
        target = pathlib.Path.home() / "peers"
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target)]
        subprocess.run(command + todo, check=True)


if __name__ == "__main__":
    main()
