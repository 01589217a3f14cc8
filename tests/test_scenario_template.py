"""``python -m swarp.scenario new``: the template scenario it writes runs, draws and is solved by its
scripted controller; its test file runs the scenario contract; bad names and existing files are
refused; and the whole path needs none of the optional dependencies."""

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import swarp
import swarp.render
from swarp.scenarios.authoring.command import main
from swarp.scenarios.authoring.template import class_stem, write_scenario
from swarp.scenarios.framework.base import get_scenario
from swarp.testing import check_scenario

NAME = "tmpl_dispersion"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def registered():
    """Names registered while the test runs; unregistered after it (the registry is process-wide)."""
    before = set(swarp.scenario_names())
    yield
    for name in set(swarp.scenario_names()) - before:
        swarp.unregister_scenario(name)


def import_path(path: Path, module_name: str):
    """Import the file ``path`` as a module of the unique name ``module_name`` (registering its scenario)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_actions(env, generator: torch.Generator) -> torch.Tensor:
    low, high = env.action_bounds
    return low + (high - low) * torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator)


def test_generated_scenario_steps_resets_and_is_solved(tmp_path, registered, generator):
    module_path, test_path = write_scenario(NAME, tmp_path)
    assert (module_path, test_path) == (tmp_path / f"{NAME}.py", tmp_path / f"test_{NAME}.py")
    module = import_path(module_path, f"_swarp_template_{NAME}")
    assert module.TmplDispersionScenario.name == NAME and NAME in swarp.scenario_names()

    env = swarp.make(NAME, n_envs=6, device="cpu", auto_reset=True, max_steps=8, n_agents=3)
    assert not env.fused and env.obs_dim == 4 + 3 * 3
    with pytest.raises(ValueError, match="eat_radius"):
        swarp.make(NAME, eat_radius=-1.0)
    for _ in range(12):  # crosses the time limit: auto-resets
        obs, reward, terminated, truncated, info = env.step(random_actions(env, generator))
    assert obs.shape == (6, 3, env.obs_dim) and reward.shape == (6, 3) and torch.isfinite(obs).all()
    assert set(info) == {"n_eaten", "eaten", "final_obs"} and info["eaten"].shape == (6, 3)
    assert (env.episode >= 1).all()
    assert {f"scenario.{k}" for k in ("landmarks", "eaten", "newly_eaten")} <= set(env.get_state())
    frame = swarp.render.render_frame(env, 0, width=64, height=64)
    assert frame.shape == (64, 64, 3)

    # The scripted controller eats every landmark well inside the time limit; random play does not.
    env = swarp.make(NAME, n_envs=16, device="cpu", seed=1, n_agents=4)
    eaten_at = torch.full((16,), -1)
    with torch.no_grad():
        for t in range(40):
            _, reward, terminated, _, _ = env.step(env.scenario.scripted_actions())
            eaten_at = torch.where((eaten_at < 0) & terminated, t, eaten_at)
    assert (eaten_at >= 0).all(), "the scripted controller should eat every landmark within 40 steps"
    assert env.scenario.eaten.all() and env.info["n_eaten"].eq(4).all()


def test_generated_fused_twin_passes_the_contract_and_matches_its_reference(tmp_path, registered, generator):
    """``--fused``: the module's twin is what the name registers; every contract check passes on both
    paths and the twin gives its torch reference's outputs (``fused == torch``), in float32 and 64."""
    name = "tmpl_dispersion_fused"
    module_path, _ = write_scenario(name, tmp_path, fused=True)
    module = import_path(module_path, f"_swarp_template_{name}")
    assert get_scenario(name) is module.TmplDispersionFusedFusedScenario
    report = check_scenario(name, max_steps=20)
    assert report["fused == torch"] == "ok" and report["reset writes every state field (fused)"] == "ok"
    assert all(v == "ok" for v in report.values()), report
    for dtype in ("float32", "float64"):
        fused = swarp.make(name, n_envs=8, device="cpu", auto_reset=True, max_steps=6, dtype=dtype, seed=3)
        reference = swarp.make(name, n_envs=8, device="cpu", auto_reset=True, max_steps=6, dtype=dtype, seed=3,
                               fused=False)  # fmt: skip
        assert fused.fused and not reference.fused
        for _ in range(10):  # crosses the time limit: auto-resets on both paths
            actions = random_actions(fused, generator)
            a, b = fused.step(actions), reference.step(actions)
            assert all(torch.equal(x, y) for x, y in zip(a[:4], b[:4], strict=True))
        assert torch.equal(fused.info["n_eaten"], reference.info["n_eaten"])


def test_generated_test_file_runs_the_contract(tmp_path):
    _, test_path = write_scenario("dispersion_x", tmp_path)
    text = test_path.read_text()
    assert "from swarp.testing import check_scenario" in text
    assert 'check_scenario("dispersion_x"' in text and "import dispersion_x" in text
    assert "scripted_actions()" in text and "assert scripted > random" in text
    compile(text, str(test_path), "exec")
    module = (tmp_path / "dispersion_x.py").read_text()
    assert "class DispersionXScenario(Scenario)" in module
    assert "\n\n\n\n" not in module  # no more than two blank lines (PEP 8), with or without the twin
    write_scenario("dispersion_x", tmp_path, force=True, fused=True)
    assert "\n\n\n\n" not in (tmp_path / "dispersion_x.py").read_text()


def test_class_stem():
    assert class_stem("dispersion2") == "Dispersion2"
    assert class_stem("my_own_task") == "MyOwnTask"


@pytest.mark.parametrize("name", ["Dispersion", "2fast", "my-task", "my task", "_hidden", "class", ""])
def test_cli_refuses_invalid_names(name, tmp_path, capsys):
    assert main(["new", name, "--dir", str(tmp_path)]) == 2
    assert "invalid scenario name" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["spread", "navigation"])
def test_cli_refuses_builtin_scenario_names(name, tmp_path, capsys):
    assert main(["new", name, "--dir", str(tmp_path)]) == 2
    assert "built-in swarp scenario" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cli_refuses_module_names_it_would_shadow(tmp_path, capsys):
    for name in ("torch", "json"):
        assert main(["new", name, "--dir", str(tmp_path)]) == 2
        assert "would shadow" in capsys.readouterr().err


def test_cli_refuses_names_too_long_for_a_file_with_one_line(tmp_path, capsys):
    """300 characters once ended in the file system's traceback (file name too long), exit 1."""
    assert main(["new", "a" * 300, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m swarp.scenario: error: scenario name 'aaaaaaaaaaaaaaaaaaaaaaaa'... (300 characters) is "
                   "too long: at most 64 (it names the files NAME.py and test_NAME.py)\n")  # fmt: skip
    assert main(["new", "a" * 64, "--dir", str(tmp_path)]) == 0  # the longest name allowed
    assert (tmp_path / f"test_{'a' * 64}.py").exists()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("msvcrt", "would shadow the standard-library module 'msvcrt'"),  # Windows' own: no module here
        ("list", "would shadow the Python builtin 'list' where the module is imported"),
        ("range", "would shadow the Python builtin 'range'"),  # the test file it writes calls range()
        ("con", "is a device name on Windows"),
        ("lpt1", "is a device name on Windows"),
    ],
)
def test_cli_refuses_names_of_modules_builtins_and_devices(name, reason, tmp_path, capsys):
    assert main(["new", name, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert reason in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_cli_reports_a_folder_or_file_it_cannot_write_in_one_line(tmp_path, capsys):
    """An ``OSError`` while writing is a one-line error with exit status 2, not a traceback."""
    occupied = tmp_path / "a_file"
    occupied.write_text("")
    error = "python -m swarp.scenario: error:"
    assert main(["new", "dispersion_z", "--dir", str(occupied)]) == 2
    assert capsys.readouterr().err == f"{error} cannot make the folder {occupied}: File exists\n"
    (tmp_path / "dispersion_z.py").mkdir()  # a folder where the module goes
    assert main(["new", "dispersion_z", "--dir", str(tmp_path), "--force"]) == 2
    assert capsys.readouterr().err == f"{error} cannot write {tmp_path / 'dispersion_z.py'}: Is a directory\n"


def test_cli_refuses_existing_files_without_force(tmp_path, capsys):
    assert main(["new", "dispersion_y", "--dir", str(tmp_path / "new")]) == 0  # creates the folder
    assert capsys.readouterr().out.count("wrote ") == 2
    module = tmp_path / "new" / "dispersion_y.py"
    module.write_text("# edited\n")
    assert main(["new", "dispersion_y", "--dir", str(tmp_path / "new")]) == 2
    assert "--force" in capsys.readouterr().err
    assert module.read_text() == "# edited\n"
    assert main(["new", "dispersion_y", "--dir", str(tmp_path / "new"), "--force"]) == 0
    assert "register_scenario" in module.read_text() and "FusedScenario" not in module.read_text()
    assert main(["new", "dispersion_y", "--dir", str(tmp_path / "new"), "--force", "--fused"]) == 0
    assert 'register_scenario("dispersion_y", DispersionYFusedScenario)' in module.read_text()


#: Optional dependencies (extras) none of the template's paths may import.
OPTIONAL = ("torchrl", "tensordict", "benchmarl", "gymnasium", "pettingzoo", "vmas", "stable_baselines3",
            "matplotlib", "pygame", "imageio", "tqdm", "tensorboard", "scipy")  # fmt: skip


def test_cli_and_scenario_need_no_optional_dependency(tmp_path):
    """In a fresh process where every optional dependency fails to import: ``python -m swarp.scenario
    new`` writes the files, and the scenario imports, steps, auto-resets, renders and runs its
    scripted controller."""
    script = textwrap.dedent(f"""
        import importlib.abc, runpy, sys
        BLOCKED = {OPTIONAL!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"optional dependency {{name}} is blocked")
        sys.meta_path.insert(0, Block())
        sys.argv = ["swarp.scenario", "new", "lean_task", "--dir", {str(tmp_path)!r}]
        try:
            runpy.run_module("swarp.scenario", run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            assert exit.code == 0, exit.code
        sys.path.insert(0, {str(tmp_path)!r})
        import torch, lean_task, swarp, swarp.render
        env = swarp.make("lean_task", n_envs=4, device="cpu", auto_reset=True, max_steps=5)
        for _ in range(7):
            env.step(env.scenario.scripted_actions())
        swarp.render.render_frame(env, 0, width=32, height=32)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("lean ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote" in result.stdout and "lean ok" in result.stdout
    assert (tmp_path / "lean_task.py").exists() and (tmp_path / "test_lean_task.py").exists()
