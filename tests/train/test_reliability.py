"""The trainer takes nothing on trust (issue 55): settings are checked at the door, divergence stops
a run, runs never share a folder, options reach the env, checkpoints explain themselves, and an
interrupted run resumes bit for bit on the CPU."""

import json
import os
import re
import signal
import threading

import pytest
import torch

import swarp
from swarp.scenarios.framework.base import register_scenario, unregister_scenario
from swarp.scenarios.spread import SpreadScenario
from swarp.train import Trainer, evaluate, load_checkpoint, make_config, train
from swarp.train.__main__ import main as train_main
from swarp.train.checkpoint import FORMAT
from swarp.train.config import TrainConfig, load_config_file
from swarp.train.eval import main as eval_main
from swarp.train.health import TrainingDiverged
from swarp.train.results import main as results_main
from swarp.train.run import new_run_dir, resume

#: The issue's tiny CPU run: 8 envs x 8 steps an iteration, 2 minibatches.
T = dict(device="cpu", n_envs=8, rollout_steps=8, minibatches=2, hidden=16, total_steps=64, eval_envs=8, eval_every=0,
         progress=False, run_dir="")  # fmt: skip


def strict_rows(path) -> list[dict]:
    """metrics.jsonl's rows, refusing the bare NaN / Infinity tokens that are not JSON."""

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines() if line]


# --- 1. divergence ------------------------------------------------------------------------------


def test_a_diverging_run_stops_at_once_writes_no_nan_checkpoint_and_valid_json(tmp_path):
    with pytest.raises(TrainingDiverged, match=r"(?s)diverged at iteration \d .*seed 0: non-finite loss") as caught:
        train("navigation", **{**T, "lr": 1e10, "total_steps": 384, "run_dir": str(tmp_path)})
    assert caught.value.runs == [0]
    (run_dir,) = tmp_path.iterdir()
    assert not (run_dir / "checkpoint.pt").exists()
    rows = strict_rows(run_dir / "metrics.jsonl")
    assert rows[-1]["diverged"] and rows[-1]["losses/value_loss"] is None
    # It stopped at the first non-finite iteration (the second at this size), not after all six.
    assert [r["iteration"] for r in rows] == list(range(1, caught.value.iteration + 1)) and len(rows) <= 2
    assert all(r["losses/value_loss"] is not None for r in rows[:-1])


class NanRewardLater(SpreadScenario):
    """spread's torch reference, whose reward turns NaN in env 0 from its 20th step on."""

    name = "nan_reward_later_for_tests"
    fused_available = False

    def bind(self, env):
        super().bind(env)
        self.steps = torch.zeros((), device=self.landmarks.device)

    def post_step(self):
        super().post_step()
        self.steps += 1

    def rewards(self):
        reward = super().rewards()
        bad = torch.zeros_like(reward)
        bad[0] = torch.where(self.steps >= 20, float("nan"), 0.0)
        return reward + bad


@pytest.fixture
def nan_scenario():
    register_scenario(NanRewardLater.name, NanRewardLater)
    yield NanRewardLater.name
    unregister_scenario(NanRewardLater.name)


def test_an_env_going_non_finite_stops_the_run_and_keeps_the_last_finite_checkpoint(tmp_path, nan_scenario):
    """Iteration 2 (steps 9-16) is finite and checkpointed; iteration 3 meets the NaN reward."""
    with pytest.raises(TrainingDiverged, match="environment state, observation or reward") as caught:
        train(nan_scenario, **{**T, "total_steps": 640, "checkpoint_every": 2, "run_dir": str(tmp_path)})
    assert caught.value.iteration == 3
    assert "iteration 2" in str(caught.value)
    (run_dir,) = tmp_path.iterdir()
    kept = load_checkpoint(run_dir)  # loads: every weight finite
    assert kept.extra["iteration"] == 2


# --- 2, 3. settings and seeds, at the door ------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("rollout_steps", 2.5, "an int >= 1"),
        ("hidden", 16.5, "an int >= 1"),
        ("epochs", "2", "an int >= 1"),
        ("lr", "1e-3", "a finite number > 0"),
        ("run_dir", 5, "a string"),
        ("target_success", 1.5, "in [0, 1]"),
        ("target_success", -0.5, "in [0, 1]"),
        ("max_seconds", -1, "> 0"),
        ("eval_every", 1.5, "an int >= 0"),
        ("norm_obs", "false", "a bool"),
        ("lr", float("inf"), "finite"),
        ("vf_coef", float("nan"), "finite"),
        ("ent_coef", float("nan"), "finite"),
        ("max_grad_norm", float("nan"), "finite"),
        ("init_log_std", float("nan"), "finite"),
        ("algorithm", "qmix", "one of 'mappo', 'ippo'"),
    ],
)
def test_every_bad_setting_is_refused_naming_the_field_and_the_value(field, value, words):
    flag = "--" + field.replace("_", "-")
    with pytest.raises(ValueError) as caught:
        train("navigation", **{**T, field: value})
    message = str(caught.value)
    assert f"TrainConfig.{field} ({flag})" in message and words in message and repr(value) in message
    with pytest.raises(ValueError, match=f"TrainConfig.{field}"):
        TrainConfig(**{field: value})


def test_a_field_set_after_construction_is_checked_when_the_trainer_is_built():
    config = make_config({"n_envs": 8, "minibatches": 2})
    config.lr = float("nan")
    env = swarp.make("navigation", n_envs=8, device="cpu", auto_reset=True)
    with pytest.raises(ValueError, match=r"TrainConfig.lr \(--lr\)"):
        Trainer.build([env], swarp.train.get_task("navigation"), config, [0])


@pytest.mark.parametrize("seeds", [(1.5,), "01", (True,), (-1,), (2**31,), (0, 0), ()])
def test_seeds_are_never_coerced(seeds):
    with pytest.raises(ValueError, match="seed"):
        train("navigation", **{**T, "seeds": seeds})


def test_config_files_name_themselves_in_every_error(tmp_path, capsys):
    bad = tmp_path / "c.json"
    bad.write_text('{"lr": "fast"}')
    with pytest.raises(ValueError, match=r"--config .*c.json: TrainConfig.lr \(--lr\) must be a finite number"):
        load_config_file(str(bad))
    yaml = tmp_path / "cfg.yaml"
    yaml.write_text("lr: 0.001\n")
    with pytest.raises(SystemExit) as exit_:
        train_main(["navigation", "--device", "cpu", "--config", str(yaml)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "cfg.yaml" in err and "not a JSON file" in err
    with pytest.raises(ValueError, match="cannot read"):
        load_config_file(str(tmp_path / "missing.json"))


# --- 4. every run its own folder -----------------------------------------------------------------


def test_runs_started_together_never_share_a_folder(tmp_path):
    first = train("navigation", **{**T, "run_dir": str(tmp_path)})
    second = train("navigation", **{**T, "run_dir": str(tmp_path)})
    assert first.run_dir != second.run_dir
    assert len(strict_rows(first.run_dir / "metrics.jsonl")) == len(strict_rows(second.run_dir / "metrics.jsonl")) == 1

    made, threads = [], [threading.Thread(target=lambda: made.append(new_run_dir(tmp_path, "x__0__1")))
                         for _ in range(16)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 16 and all(path.is_dir() for path in made)


# --- 5. options a user can set -------------------------------------------------------------------


def test_the_episode_length_and_the_envs_keywords_can_be_set(tmp_path):
    result = train("navigation", **{**T, "run_dir": str(tmp_path)}, options={"max_steps": 7, "auto_reset": True})
    assert load_checkpoint(result.checkpoint).task.max_steps == 7
    assert load_checkpoint(result.checkpoint).task.options == {"n_agents": 4, "substeps": 1}
    (result,) = train_main(["navigation", "--device", "cpu", "--n-envs", "8", "--rollout-steps", "8", "--minibatches",
                            "2", "--hidden", "16", "--total-steps", "64", "--eval-episodes", "8", "--no-progress",
                            "--run-dir", str(tmp_path), "--option", "max_steps=9"])  # fmt: skip
    assert load_checkpoint(result.checkpoint).task.max_steps == 9
    with pytest.raises(ValueError, match="auto_reset=False cannot be set"):
        train("navigation", **T, options={"auto_reset": False})
    with pytest.raises(ValueError, match=r"'n_envs'.*--n-envs"):
        train("navigation", **T, options={"n_envs": 4})
    with pytest.raises(ValueError, match=r"'seed'.*seeds="):
        evaluate(result.checkpoint, episodes=4, device="cpu", options={"seed": 3})


# --- 6, 7. checkpoints that explain themselves ---------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train("navigation", **{**T, "run_dir": str(tmp_path_factory.mktemp("runs"))}).checkpoint


def test_damaged_and_foreign_files_get_a_value_error_naming_them(checkpoint, tmp_path):
    raw = checkpoint.read_bytes()
    cases = {
        "truncated.pt": raw[: len(raw) // 2],
        "empty.pt": b"",
        "text.pt": b"hello, not a checkpoint\n",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    torch.save({"format": FORMAT}, tmp_path / "tag_only.pt")
    torch.save([1, 2, 3], tmp_path / "a_list.pt")
    data = torch.load(checkpoint, weights_only=True)
    data["actor"]["net.layers.0.weight"][0, 0, 0] = float("nan")
    torch.save(data, tmp_path / "nan_weights.pt")
    data = torch.load(checkpoint, weights_only=True)
    data["dims"]["obs_dim"] = 13
    torch.save(data, tmp_path / "wrong_dims.pt")
    for name in [*cases, "tag_only.pt", "a_list.pt", "nan_weights.pt", "wrong_dims.pt"]:
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            load_checkpoint(tmp_path / name)
    with pytest.raises(ValueError, match="non-finite"):
        load_checkpoint(tmp_path / "nan_weights.pt")
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_a_checkpoint_records_what_it_was_trained_on(checkpoint):
    loaded = load_checkpoint(checkpoint.parent)  # a run folder works too
    assert loaded.scenario == "navigation" and loaded.dims == {"n_agents": 4, "obs_dim": 23, "act_dim": 2}
    assert loaded.task.options == {"n_agents": 4, "substeps": 1} and loaded.task.max_steps == 100
    assert loaded.resume is not None and loaded.extra["iteration"] == 1


@pytest.mark.parametrize(
    "scenario, options, words",
    [
        ("flocking", None, "observations of 28 columns, not 23"),
        ("drone_navigation", None, "actions of 4 columns, not 2"),
        ("transport", None, "cannot act in transport"),
        ("navigation", {"obs_neighbors": 1}, "observations of 13 columns, not 23"),
    ],
)
def test_a_checkpoint_that_cannot_act_somewhere_is_refused_with_the_mismatch(checkpoint, scenario, options, words):
    with pytest.raises(ValueError, match="cannot act in") as caught:
        evaluate(checkpoint, scenario, episodes=4, device="cpu", options=options)
    assert words in str(caught.value) and str(checkpoint) in str(caught.value)


def test_the_shared_policy_acts_for_other_agent_counts(checkpoint):
    score = evaluate(checkpoint, episodes=4, device="cpu", options={"n_agents": 6})
    assert score["policy"]["episodes"] == 4
    policy = load_checkpoint(checkpoint).policy
    assert policy(torch.zeros(3, 6, 23)).shape == (3, 6, 2)
    with pytest.raises(ValueError, match=r"observations \[E, A, 23\], got \[3, 6, 13\]"):
        policy(torch.zeros(3, 6, 13))


# --- 10. resume ----------------------------------------------------------------------------------


def test_a_resumed_run_continues_bit_for_bit(tmp_path):
    """Six iterations straight, against four, a stop, and two more from the checkpoint (with
    evaluations and the observation normaliser, Adam and the env state in play)."""
    common = {**T, "eval_every": 2, "checkpoint_every": 0, "lr": 3e-3}
    straight = train("navigation", **{**common, "total_steps": 6 * 64, "run_dir": str(tmp_path / "a")})
    first = train("navigation", **{**common, "total_steps": 4 * 64, "run_dir": str(tmp_path / "b")})
    resumed = resume(first.run_dir, total_steps=6 * 64)
    assert resumed.run_dir == first.run_dir and resumed.frames == straight.frames == 6 * 64
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    rows = strict_rows(first.run_dir / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(straight.metrics, rows, strict=True):
        assert a["losses/policy_loss"] == b["losses/policy_loss"] and a.get("eval/success") == b.get("eval/success")
    with pytest.raises(ValueError, match=r"may change only .* not \['lr'\]"):
        resume(first.run_dir, lr=1e-4)


def test_ctrl_c_writes_a_whole_iteration_and_the_run_resumes_bit_for_bit(tmp_path, monkeypatch):
    common = {**T, "total_steps": 5 * 64, "checkpoint_every": 0}
    straight = train("navigation", **{**common, "run_dir": str(tmp_path / "a")})
    iterate = Trainer.iterate
    calls = []

    def iterate_then_ctrl_c(self, clock=None):
        iterate(self, clock)
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while iteration 2 is being logged

    monkeypatch.setattr(Trainer, "iterate", iterate_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt, match=r"after iteration 2 .*--resume"):
        train("navigation", **{**common, "run_dir": str(tmp_path / "b")})
    monkeypatch.setattr(Trainer, "iterate", iterate)
    (run_dir,) = (tmp_path / "b").iterdir()
    assert load_checkpoint(run_dir).extra["iteration"] == 2
    resumed = resume(run_dir)
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key


def test_periodic_checkpoints_are_written_while_training(tmp_path, monkeypatch):
    seen = []
    iterate = Trainer.iterate

    def iterate_and_look(self, clock=None):
        iterate(self, clock)
        path = next(tmp_path.iterdir()) / "checkpoint.pt"
        seen.append(load_checkpoint(path).extra["iteration"] if path.exists() else None)

    monkeypatch.setattr(Trainer, "iterate", iterate_and_look)
    train("navigation", **{**T, "total_steps": 5 * 64, "checkpoint_every": 2, "run_dir": str(tmp_path)})
    assert seen == [None, None, 2, 2, 4]  # seen before each iteration's own write


# --- 12. first contact ---------------------------------------------------------------------------


def test_a_target_stops_once_every_seed_has_reached_it_and_keeps_each_seeds_policy(tmp_path, capsys):
    results = train("navigation", **{**T, "progress": True, "seeds": (0, 1), "total_steps": 10 * 64, "eval_every": 1,
                                     "target_success": 0.0})  # fmt: skip
    assert [r.reached for r in results] == [(1, 64), (1, 64)] and results[0].frames == 64
    err = capsys.readouterr().err
    assert "seeds 0,1 to 640 env-steps or success 0 (every seed)" in err
    assert re.search(r"eval=\d\.\d\d\*/\d\.\d\d\*", err), err[-300:]


def test_command_lines_refuse_bad_values_before_doing_work(checkpoint, capsys, tmp_path):
    for argv, words in [
        ([str(checkpoint), "--episodes", "0"], "--episodes: must be an int >= 1"),
        ([str(checkpoint), "--video", str(tmp_path / "out.avi")], "video path must end in one of"),
        ([str(tmp_path / "missing.pt"), "--video", str(tmp_path / "out.avi")], "video path must end in one of"),
        ([str(tmp_path / "missing.pt")], "no such checkpoint"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            eval_main(argv)
        assert exit_.value.code == 2 and words in capsys.readouterr().err, argv
    with pytest.raises(SystemExit) as exit_:
        results_main(["run", str(tmp_path), "--parallel", "0"])
    assert exit_.value.code == 2 and "--parallel: must be an int >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        train_main(["no_such_scenario"])
    assert exit_.value.code == 2 and "--import the module" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        train_main(["navigation", "--device", "cpu", "--lr", "nan"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "TrainConfig.lr (--lr) must be a finite number > 0, got nan" in err


def test_ctrl_c_on_the_command_line_exits_130_with_the_resume_command(tmp_path, monkeypatch, capsys):
    iterate = Trainer.iterate

    def iterate_then_ctrl_c(self, clock=None):
        iterate(self, clock)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Trainer, "iterate", iterate_then_ctrl_c)
    with pytest.raises(SystemExit) as exit_:
        train_main(["navigation", "--device", "cpu", "--n-envs", "8", "--rollout-steps", "8", "--minibatches", "2",
                    "--hidden", "16", "--total-steps", "640", "--no-progress", "--run-dir", str(tmp_path)])  # fmt: skip
    monkeypatch.setattr(Trainer, "iterate", iterate)
    (run_dir,) = tmp_path.iterdir()
    assert exit_.value.code == 130
    assert f"continue with: python -m swarp.train --resume {run_dir}" in capsys.readouterr().err
    (result,) = train_main(["--resume", str(run_dir), "--device", "cpu", "--eval-episodes", "8"])
    assert result.frames == 640 and (run_dir / "score.json").exists()
