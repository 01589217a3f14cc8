"""The command lines: ``python -m swarp.train``, ``python -m swarp.train.eval`` and the main job."""

import imageio.v3 as imageio

import swarp.demo
from swarp.train import __main__ as train_cli
from swarp.train import eval as eval_cli


def test_train_then_eval_a_checkpoint_with_a_video(tmp_path, capsys):
    results = train_cli.main(["navigation", "--device", "cpu", "--n-envs", "8", "--rollout-steps", "4", "--total-steps",
                              "64", "--hidden", "16", "--eval-envs", "8", "--eval-episodes", "16", "--run-dir",
                              str(tmp_path), "--no-progress", "--algorithm", "ippo"])  # fmt: skip
    (result,) = results
    assert result.config.algorithm == "ippo" and result.frames == 64
    assert "greedy success" in capsys.readouterr().out
    video = tmp_path / "policy.gif"
    score = eval_cli.main([str(result.checkpoint), "--episodes", "16", "--device", "cpu", "--video", str(video)])
    assert score["policy"]["episodes"] == 16 and 0.0 <= score["random"]["success"] <= 1.0
    assert imageio.imread(video, index=None).shape[0] == 101  # one episode of 100 steps, and the start


def test_a_config_file_sets_fields(tmp_path):
    config = tmp_path / "c.json"
    config.write_text('{"hidden": 8, "epochs": 1}')
    (result,) = train_cli.main(["navigation", "--device", "cpu", "--config", str(config), "--n-envs", "8",
                                "--rollout-steps", "4", "--total-steps", "32", "--eval-envs", "8", "--eval-episodes",
                                "8", "--run-dir", "", "--no-progress"])  # fmt: skip
    assert result.config.hidden == 8 and result.config.epochs == 1


def test_the_main_job_trains_and_writes_its_curve_and_gif(tmp_path, capsys):
    curve, gif = tmp_path / "curve.png", tmp_path / "swarm.gif"
    score = swarp.demo.main(["--device", "cpu", "--total-steps", "4096", "--episodes", "32", "--curve", str(curve),
                             "--gif", str(gif)])  # fmt: skip
    out = capsys.readouterr().out
    assert "greedy policy" in out and "random play" in out
    assert curve.exists() and imageio.imread(gif, index=None).ndim == 4
    assert score["policy"]["episodes"] == 32
