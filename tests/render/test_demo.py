"""The command-line entry points: ``python -m swarp.render.demo`` and ``python -m swarp.benchmark.render``
(the viz extra is installed by the README test command)."""

from __future__ import annotations

import sys

import imageio.v3 as imageio
import pytest

import swarp
from swarp.benchmark import render as render_benchmark
from swarp.render import demo


def test_demo_saves_a_video_of_the_scripted_policy(tmp_path, capsys):
    path = tmp_path / "nav.gif"
    demo.main(["--save", str(path), "--steps", "4", "--n-envs", "2", "--n-agents", "3", "--size", "64"])
    assert imageio.imread(path, index=None).shape == (5, 64, 64, 3)
    assert "wrote" in capsys.readouterr().out


def test_demo_mosaic_video(tmp_path):
    path = tmp_path / "grid.mp4"
    demo.main(["--save", str(path), "--steps", "2", "--mosaic", "4", "--n-agents", "2", "--size", "128"])
    assert len(imageio.imread(path, index=None)) == 3


def test_demo_imports_a_user_scenario_module(tmp_path, monkeypatch):
    """``--import MODULE`` registers the module's scenarios before ``--scenario``'s choices are listed."""
    (tmp_path / "demo_scenario_for_tests.py").write_text(
        "import swarp\n"
        "from swarp.scenarios.framework.base import get_scenario\n\n\n"
        "class Mine(get_scenario('spread')):\n"
        "    name = 'demo_mine_for_tests'\n\n\n"
        "swarp.register_scenario('demo_mine_for_tests', Mine)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "mine.gif"
    try:
        demo.main(["--import", "demo_scenario_for_tests", "--scenario", "demo_mine_for_tests", "--save", str(path),
                   "--steps", "2", "--n-envs", "1", "--n-agents", "2", "--size", "64"])  # fmt: skip
        assert imageio.imread(path, index=None).shape == (3, 64, 64, 3)
    finally:
        swarp.unregister_scenario("demo_mine_for_tests")


def test_demo_opens_the_viewer(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    demo.main(["--frames", "3", "--n-envs", "2", "--size", "96"])
    if not sys.platform.startswith("linux"):
        return
    monkeypatch.delenv("SDL_VIDEODRIVER")
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit, match="--save"):
        demo.main(["--frames", "1"])


def test_benchmark_entry_point_prints_a_table(capsys):
    render_benchmark.main(["--envs", "4", "--agents", "2", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "mosaic ms" in out and "neighbors+velocity" in out
