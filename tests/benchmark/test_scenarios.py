"""The scenario sweep entry point (``python -m swarp.benchmark.scenarios``): every registered
scenario by default, its table, skipped shapes, scenario options and the JSON rows. Nothing here
is timed; the numbers come from the script on the benchmark machines."""

import json

import pytest

import swarp
from swarp.benchmark import scenarios as sweep


def test_default_sweep_covers_every_registered_scenario_mode_model_and_lidar():
    """Every scenario x (its own dynamics, and each other model its ``model`` option accepts) x
    lidar rays 0 and 32 x shape x mode."""
    args = sweep.argparse.Namespace(scenarios=None, devices=["cpu"], shapes=None, modes=None, option=[])
    cases = sweep.cases(args)
    assert {c.scenario for c in cases} == set(swarp.scenario_names())
    assert {(c.n_envs, c.n_agents) for c in cases} == {(64, 8), (256, 16)}
    assert {c.mode for c in cases} == {"eager", "fused", "graph"}
    assert {c.lidar_rays for c in cases} == {0, 32}
    models = {(c.scenario, c.model) for c in cases}
    planar = ("navigation", "variable_navigation")  # navigation's model option
    for name in planar:
        assert {m for n, m in models if n == name} == {"default", "diff_drive", "kinematic_bicycle"}
    assert {m for name, m in models if name not in planar} == {"default"}  # fixed dynamics, or only drones
    per_cell = len(cases) // len(set(models)) // 2  # cells per (scenario, model, rays)
    assert per_cell == len(sweep.DEFAULT_SHAPES["cpu"]) * (len(sweep.MODES) - 1)  # the CPU compiles only if asked
    args.devices = ["cuda:0"]
    assert {c.mode for c in sweep.cases(args)} == set(sweep.MODES)
    args.devices, args.modes = ["cpu"], ["torch_graph"]
    assert {c.mode for c in sweep.cases(args)} == {"torch_graph"}


@pytest.mark.parametrize(
    ("name", "models", "expected"),
    [
        ("navigation", ["diff_drive"], ["diff_drive"]),
        ("navigation", ["default", "holonomic", "drone"], ["default"]),  # holonomic is its own; no drones
        ("navigation", ["holonomic"], ["holonomic"]),
        ("drone_navigation", ["default", "drone", "diff_drive"], ["default"]),
        ("drone_navigation", ["drone"], ["drone"]),
        ("flocking", ["diff_drive"], []),
        ("flocking", ["default", "diff_drive"], ["default"]),
    ],
)
def test_model_axis_keeps_the_models_each_scenario_accepts(name, models, expected):
    assert sweep.scenario_models(name, models) == expected


def test_small_sweep_prints_a_table_and_writes_json(tmp_path, capsys):
    path = tmp_path / "rows.json"
    results = sweep.main(
        [
            "--scenarios", "formation", "flocking", "--devices", "cpu", "--shapes", "4x3", "2x64",
            "--modes", "eager", "graph", "--iters", "1", "--repeats", "1", "--option", "obs_neighbors=2",
            "--models", "default", "--lidar-rays", "0", "--json", str(path),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "env-steps/s" in out and "formation" in out and "flocking" in out
    # 64 agents do not fit formation's default polygon: reported, not raised.
    skipped = [r for r in results if r.seconds is None]
    assert [(r.case.scenario, r.case.n_agents) for r in skipped] == [("formation", 64)] * 2
    assert "skipped: formation option formation_radius" in skipped[0].error
    measured = [r for r in results if r.seconds is not None]
    assert len(measured) == 6 and all(r.seconds > 0 for r in measured)
    assert {r.execution for r in measured if r.case.mode == "graph"} == {"graph"}
    rows = json.loads(path.read_text())
    assert len(rows) == 8 and rows[0]["options"] == {"obs_neighbors": 2}


def test_model_and_lidar_axes_reach_the_environment(capsys):
    """``--models`` and ``--lidar-rays`` build what they name: navigation's diff-drive agents, with
    and without a lidar scan in the observation; the table shows both axes."""
    built = []
    make = sweep.make_env

    def spy(*args, **kwargs):
        env = make(*args, **kwargs)
        built.append((env.stepper.model.agents[0].model.name, env.obs_dim - env.scenario_obs_dim))
        return env

    sweep.make_env = spy
    try:
        results = sweep.main(
            [
                "--scenarios", "navigation", "--devices", "cpu", "--shapes", "3x2", "--modes", "graph",
                "--iters", "1", "--repeats", "1", "--models", "diff_drive", "--lidar-rays", "0", "5",
            ]
        )  # fmt: skip
    finally:
        sweep.make_env = make
    assert built == [("DIFF_DRIVE", 0), ("DIFF_DRIVE", 5)]
    assert [(r.case.model, r.case.lidar_rays) for r in results] == [("diff_drive", 0), ("diff_drive", 5)]
    assert all(r.seconds for r in results)
    table = capsys.readouterr().out
    assert "lidar" in table and "diff_drive" in table


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--lidar-rays", "-1"], "lidar rays must be an int >= 0, got '-1'"),
        (["--lidar-rays", "x"], "lidar rays must be an int >= 0, got 'x'"),
        (["--models", "tank"], "invalid choice: 'tank'"),
    ],
)
def test_bad_axis_values_are_rejected(bad, message, capsys):
    with pytest.raises(SystemExit):
        sweep.main(["--scenarios", "navigation", "--devices", "cpu", *bad])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("text", "shape"), [("4096x16", (4096, 16)), ("1X2", (1, 2))])
def test_shapes_parse(text, shape):
    assert sweep.parse_shape(text) == shape


@pytest.mark.parametrize("text", ["4096", "0x3", "ax2"])
def test_bad_shapes_are_rejected(text):
    with pytest.raises(sweep.argparse.ArgumentTypeError, match="shape"):
        sweep.parse_shape(text)


def test_unknown_scenario_is_an_error(capsys):
    with pytest.raises(SystemExit):
        sweep.main(["--scenarios", "no-such-scenario", "--devices", "cpu"])
    assert "registered" in capsys.readouterr().err


def test_issue_6_target_lines_judge_graph_rows_at_the_target_shape():
    """Only CUDA graph rows at 4,096 x 16 are judged; body scenarios are listed, not judged (issue
    7 sets their target at another shape)."""

    def result(name, rate, device="cuda:0", mode="graph", shape=sweep.TARGET_SHAPE):
        return sweep.Result(sweep.Case(name, device, *shape, mode), seconds=shape[0] / rate)

    lines = sweep.target_lines(
        [
            result("spread", 60e6),
            result("flocking", 40e6),
            result("push_t", 7e6),
            result("formation", 10e6, mode="fused"),
            result("sampling", 10e6, device="cpu"),
            result("discovery", 10e6, shape=(1024, 8)),
        ]
    )
    assert len(lines) == 3
    assert lines[0].startswith("  spread: 60.0 M") and lines[0].endswith(": met")
    assert lines[1].startswith("  flocking: 40.0 M") and lines[1].endswith("NOT met")
    assert "push_t" in lines[2] and "issue 7" in lines[2] and "NOT met" not in lines[2]
