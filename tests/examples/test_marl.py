"""``examples/marl_train.py`` and ``examples/marl_eval.py`` end to end at CI size (CPU, seconds):
a MAPPO run on navigation writes its checkpoint, metrics and plot, and the evaluation of that
checkpoint beats a random policy on the same episodes. ``--distributed``: 2 gloo processes take
the single-process PPO step, and a 2-process ``torchrun`` training run completes."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

import swarp  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: The smoke run: 64 envs x 32 steps per batch, 30 batches, 16 gradient steps each (~4.5 s of training on
#: 2 CPU cores; docs/training.md has its measured result).
SMOKE = [
    "--device", "cpu", "--n-envs", "64", "--rollout-steps", "32", "--total-frames", "61440",
    "--hidden", "64", "--update-epochs", "4", "--minibatches", "4", "--eval-every", "10", "--eval-envs", "64",
    "--checkpoint-every", "10", "--no-progress",
]  # fmt: skip


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs")
    final = load_example("marl_train").main([*SMOKE, "--run-dir", str(run_dir), "--run-name", "smoke"])
    return final, run_dir / "smoke"


@pytest.mark.slow
def test_smoke_run_writes_checkpoint_metrics_and_plot(trained):
    final, run = trained
    assert final["frames"] == 61440
    assert Path(final["checkpoint"]) == run / "checkpoint.pt" and (run / "checkpoint.pt").exists()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 30 and rows[-1]["frames"] == 61440
    names = set().union(*rows)
    for name in (
        "charts/episodic_return",
        "charts/success_rate",
        "charts/SPS",
        "eval/success_rate",
        "losses/policy_loss",
        "losses/value_loss",
        "perf/simulator_share",
    ):
        assert name in names, name
    assert all(row["charts/SPS"] > 0 for row in rows)
    assert (run / "learning_curve.png").exists()


@pytest.mark.slow
def test_evaluation_of_the_checkpoint_beats_random(trained, tmp_path):
    final, run = trained
    evaluation = load_example("marl_eval")
    output = tmp_path / "eval.json"
    video = tmp_path / "rollout.gif"
    results = evaluation.main(
        [
            "--checkpoint", str(run / "checkpoint.pt"), "--device", "cpu", "--episodes", "256", "--n-envs", "128",
            "--video", str(video), "--output", str(output),
        ]
    )  # fmt: skip
    assert json.loads(output.read_text()) == results
    assert video.exists() and video.stat().st_size > 0
    greedy, random = results["greedy"], results["random"]
    for r in (greedy, random):
        assert r["episodes"] == 256
        assert 0.0 <= r["success_ci95"][0] <= r["success_rate"] <= r["success_ci95"][1] <= 1.0
    # Random actions essentially never bring all four agents onto their goals at once; the smoke
    # run measured 0.6-0.8 greedy success after 61k env-steps. The margin is wide on purpose.
    assert random["success_rate"] < 0.05
    assert greedy["success_rate"] > 0.3
    assert greedy["success_ci95"][0] > random["success_ci95"][1]
    assert greedy["mean_return"] > random["mean_return"]


def test_target_success_stops_training_at_the_first_evaluation_that_reaches_it(tmp_path):
    final = load_example("marl_train").main(
        [
            "--device", "cpu", "--n-envs", "8", "--rollout-steps", "8", "--total-frames", "100000", "--hidden", "16",
            "--eval-every", "1", "--eval-envs", "8", "--target-success", "0.0", "--no-progress", "--no-plot",
            "--run-dir", str(tmp_path), "--run-name", "target",
        ]
    )  # fmt: skip
    assert final["target_reached"] and final["frames"] == 64 and final["batch"] == 1
    assert (tmp_path / "target" / "checkpoint.pt").exists()


def test_every_registered_scenario_has_a_task():
    train = load_example("marl_train")
    for name in swarp.scenario_names():
        task = train.get_task(name)
        assert task.success == "terminated" or task.success.startswith("info:")
    with pytest.raises(ValueError, match="registered"):
        train.get_task("no-such-scenario")


def test_wilson_interval():
    evaluation = load_example("marl_eval")
    low, high = evaluation.wilson_interval(0, 100)
    assert low == 0.0 and 0.03 < high < 0.04
    low, high = evaluation.wilson_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-3) and high == pytest.approx(0.5962, abs=1e-3)


def test_arguments_come_from_the_dataclass():
    train = load_example("marl_train")
    args = train.parse_args(["--scenario", "navigation", "--no-plot", "--max-seconds", "1.5", "--n-envs", "8"])
    assert args.plot is False and args.max_seconds == 1.5 and args.n_envs == 8 and args.device is None
    assert "docstring under each" not in train.parse_args.__doc__  # help text comes from the field docstrings
    assert train._field_docs(train.Args)["gamma"] == "discount factor"  # swarp.train.config.field_docs


# --- data-parallel training (--distributed) ---------------------------------------------------------

#: The PPO-step check: 8 envs x 8 steps of navigation, one minibatch of all 64 rows.
PPO_ENVS, PPO_STEPS = 8, 8


def _ppo_setup(train_module, args):
    """Actor, critic and PPO loss of the example, with the same initial weights in every process."""
    torch.manual_seed(0)
    env = train_module.make_env("navigation", train_module.get_task("navigation"), PPO_ENVS, "cpu", seed=3)
    actor = train_module.make_actor(env, args.hidden, args.depth)
    critic = train_module.make_critic(env, args.hidden, args.depth)
    loss_module = train_module.make_loss(actor, critic, args)
    return env, actor, loss_module, torch.optim.Adam(loss_module.parameters(), lr=args.lr)


def _ppo_step_worker(device: str) -> dict:
    """On each rank: a fixed batch, then one ``gradient_step`` on the whole batch (the single-process
    reference: every rank computes the same gradient, so its all-reduce changes nothing) and one
    on this rank's half of it (the data-parallel step)."""
    import swarp.distributed as sd

    train_module = load_example("marl_train")
    # entropy_coef 0: TanhNormal's entropy is a sampled estimate whose gradient would differ by draws.
    args = train_module.Args(hidden=16, depth=1, entropy_coef=0.0, lr=1e-3)
    env, actor, reference, reference_optimizer = _ppo_setup(train_module, args)
    torch.manual_seed(1)
    with torch.no_grad():  # as in the collector
        batch = env.rollout(PPO_STEPS, actor, break_when_any_done=False)  # the same on both ranks
    train_module.compute_advantages(reference, batch)
    flat = batch.reshape(-1)
    half = flat.shape[0] // 2
    _, _, parallel, parallel_optimizer = _ppo_setup(train_module, args)
    results = {}
    for name, module, optimizer, minibatch in (
        ("single", reference, reference_optimizer, flat),
        ("parallel", parallel, parallel_optimizer, flat[sd.get_rank() * half : (sd.get_rank() + 1) * half]),
    ):
        train_module.gradient_step(module, optimizer, minibatch, args.max_grad_norm)
        results[name] = {
            "grads": [p.grad.clone() for p in module.parameters()],
            "params": [p.detach().clone() for p in module.parameters()],
        }
    return results


@pytest.mark.slow
def test_distributed_ppo_step_equals_the_single_process_step_on_the_concatenated_batch(tmp_path):
    from distributed_ranks import run_ranks

    ranks = run_ranks(_ppo_step_worker, tmp_path)
    single = ranks[0]["single"]
    assert any(g.abs().max() > 0 for g in single["grads"])
    for result in ranks:
        for key in ("grads", "params"):
            for got, want in zip(result["parallel"][key], single[key], strict=True):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # The replicas took the very same step: identical bits on both ranks.
    for a, b in zip(ranks[0]["parallel"]["params"], ranks[1]["parallel"]["params"], strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_distributed_training_runs_under_torchrun(tmp_path):
    """``torchrun --nproc-per-node 2 marl_train.py --distributed`` on the CPU (gloo): global frame
    counts, evaluations, one metrics file and one checkpoint written by rank 0."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(EXAMPLES / "marl_train.py"), "--distributed", "--device", "cpu", "--n-envs", "16", "--rollout-steps", "8",
        "--total-frames", "384", "--hidden", "16", "--update-epochs", "2", "--minibatches", "2", "--eval-every", "2",
        "--eval-envs", "8", "--no-progress", "--no-plot", "--run-dir", str(tmp_path), "--run-name", "dist",
    ]  # fmt: skip
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(EXAMPLES.parent), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count("navigation: 384 env-steps") == 1  # printed by rank 0 only
    rows = [json.loads(line) for line in (tmp_path / "dist" / "metrics.jsonl").read_text().splitlines()]
    assert [row["frames"] for row in rows] == [128, 256, 384]  # 2 ranks x 8 envs x 8 steps per batch
    assert "eval/success_rate" in rows[1] and "eval/success_rate" in rows[2]
    checkpoint = torch.load(tmp_path / "dist" / "checkpoint.pt", weights_only=False)
    assert checkpoint["frames"] == 384
    # No wrapper in the state dict: it loads into the example's plain actor (marl_eval.py).
    train = load_example("marl_train")
    actor = train.make_actor(train.make_env("navigation", train.get_task("navigation"), 2, "cpu", 0), 16, 2)
    actor.load_state_dict(checkpoint["actor"])
