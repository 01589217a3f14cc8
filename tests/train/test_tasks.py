"""Every registered scenario's task record trains above random play (a scenario change that makes
one unlearnable fails here), and the pieces of the results table: scripted baselines, scenario
options through ``train``/``evaluate``, the table and its figure."""

import json

import pytest
import torch

import swarp
from swarp.scenarios.framework.base import get_scenario
from swarp.train import Evaluator, evaluate, get_task, train
from swarp.train.cli import scenario_option
from swarp.train.results import load_runs, markdown_table, plot_curves, run_all, summary_table
from swarp.train.tasks import TASKS

#: Env-steps of the CPU run per scenario (32 envs x 32 steps per iteration): 20 iterations,
#: 100 where 20 do not yet beat random play (measured on the 2-core CI machine kind: 2-17 s each).
#: drone_navigation: 200. At 100 it passed with torch's 2 threads by 0.4 and failed on 1 thread
#: (return -102.3 against random's -100.4: the reductions' order changes the run); at 200 it clears
#: the bar by 3.2 (2 threads) and 1.3 (1 thread).
BUDGET = {"balance": 102_400, "drone_navigation": 204_800, "push_t": 61_440}
DEFAULT_BUDGET = 20_480
#: Seeds trained (in one batch) where one short run is a coin flip. push_t's first 20-60 k steps land
#: below random play for about one seed in four: seeds 0-3 at 20,480, 40,960 and 61,440 steps, before
#: and after the CPU's inline cos and sin moved its observations by an ulp. The median is asserted
#: (at 40,960: 0.022 before, 0.043 after, against a bar of -0.059). The runs also depend on the CPU's
#: float paths (torch's kernels differ between machines): on a 2-core EPYC in s26 the same code gave
#: seeds 0-2 -0.003, -0.139, -0.081 at 40,960 (median below the bar) and 0.001, 0.196, 0.069 at
#: 61,440 (seeds 3-4: 0.073, 0.058), hence 61,440.
SEEDS = {"push_t": (0, 1, 2)}
#: Episodes of each comparison, and their reset seed (apart from the training seed 0).
EPISODES, EVAL_SEED = 64, 777


def test_every_built_in_scenario_has_a_task_record():
    built_in = {name for name in swarp.scenario_names() if get_scenario(name).__module__.startswith("swarp.")}
    assert built_in == set(TASKS), sorted(built_in ^ set(TASKS))


#: Tasks the trainer cannot run yet, and why (``raises``: the trainer's refusal at the start).
PENDING = {
    "speaker_listener": "swarp.train builds its groups' action spaces without the communication channel "
    "(space_of: no comm_dim; group_box: the physical columns only), so the speaker's space does not match"
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(raises=ValueError, reason=PENDING[name], strict=False))
        if name in PENDING
        else name
        for name in swarp.scenario_names()
    ],
)
def test_the_task_record_trains_above_random_play(name):
    """A short CPU run of the shipped task record (the median of ``SEEDS``' runs) beats random
    play's mean return on the same fresh episodes by 1% of random's magnitude (at least 0.02)."""
    seeds = SEEDS.get(name, (0,))
    results = train(name, device="cpu", n_envs=32, total_steps=BUDGET.get(name, DEFAULT_BUDGET), eval_every=0,
                    eval_envs=32, run_dir="", progress=False, log_every=1000, seeds=seeds)  # fmt: skip
    results = results if len(seeds) > 1 else [results]
    evaluator = Evaluator(name, get_task(name), EPISODES, "cpu", EVAL_SEED)
    policy = torch.tensor([evaluator(r.policy)["return"].mean().item() for r in results]).median().item()
    random = evaluator(evaluator.random_actions(EVAL_SEED))["return"].mean().item()
    assert policy > random + max(0.02, 0.01 * abs(random)), (policy, random)


def test_the_scripted_baseline_is_scored_on_the_same_episodes():
    score = evaluate(_tiny_policy("navigation"), "navigation", episodes=32, device="cpu")
    assert set(score) == {"policy", "random", "scripted"}
    assert score["scripted"]["success"] >= 0.9 > score["random"]["success"]
    assert score["scripted"]["episodes"] == score["random"]["episodes"] == 32


def test_a_scenario_without_a_usable_scripted_controller_has_no_scripted_score():
    """drone_navigation inherits navigation's controller, which drives holonomic agents only."""
    evaluator = Evaluator("drone_navigation", get_task("drone_navigation"), 4, "cpu", EVAL_SEED)
    assert evaluator.scripted_actions() is None


@pytest.mark.parametrize("name", ["transport", "push_t", "balance"])
def test_body_scenarios_expose_their_scripted_controller(name):
    env = swarp.make(name, n_envs=4, device="cpu", seed=0)
    module = __import__(f"swarp.scenarios.{name}", fromlist=["scripted_actions"])
    assert torch.equal(env.scenario.scripted_actions(), module.scripted_actions(env))


def test_scenario_options_reach_training_evaluation_and_the_checkpoint(tmp_path):
    result = train("give_way", device="cpu", n_envs=8, total_steps=512, rollout_steps=8, eval_every=0, eval_envs=8,
                   run_dir=str(tmp_path), progress=False, options={"bay_position": 0.2})  # fmt: skip
    saved = torch.load(result.checkpoint, weights_only=True)
    assert saved["task"]["options"] == {"bay_position": 0.2}
    with pytest.raises(ValueError, match="bay_position must be < 1"):
        evaluate(result.checkpoint, episodes=4, device="cpu", options={"bay_position": 1.5})


def test_scenario_option_flags_parse_literals():
    assert scenario_option("difficulty=0.5") == ("difficulty", 0.5)
    assert scenario_option("shared_reward=False") == ("shared_reward", False)
    assert scenario_option("model=drone") == ("model", "drone")
    with pytest.raises(Exception, match="NAME=VALUE"):
        scenario_option("difficulty")


def test_the_results_table_reads_run_folders(tmp_path):
    """Two seeds trained and scored as ``python -m swarp.train`` writes them, then tabulated."""
    from swarp.train.__main__ import main

    folder = tmp_path / "navigation" / "mappo"
    main(["navigation", "--device", "cpu", "--seeds", "0", "1", "--n-envs", "16", "--rollout-steps", "8",
          "--total-steps", "640", "--eval-every", "2", "--eval-envs", "16", "--eval-episodes", "16",
          "--no-progress", "--run-dir", str(folder)])  # fmt: skip
    runs = load_runs(tmp_path)
    assert [(r.scenario, r.algorithm, r.seed) for r in runs] == [("navigation", "mappo", 0), ("navigation", "mappo", 1)]
    score = json.loads((runs[0].path / "score.json").read_text())
    assert score["episodes"] == 16 and "scripted" in score
    assert len(runs[0].curve) == 3 and runs[0].frames == 640  # evaluations after iterations 2 and 4, and the last
    table = markdown_table(runs, threshold=0.0)
    rows = table.splitlines()[2:]
    assert len(rows) == 2 and all(row.startswith("| navigation | mappo |") for row in rows)
    assert "not reached" not in table  # every run is at or above a threshold of 0
    assert "not reached" in markdown_table(runs, threshold=1.01)
    assert "| navigation | mappo | 2 of 2 |" in summary_table(runs, threshold=0.0)
    assert "| navigation | mappo | 0 of 2 |" in summary_table(runs, threshold=1.01)
    # --resume skips the pair already scored (no process is started for it).
    assert run_all(tmp_path, ["navigation"], ["mappo"], [0, 1], 1.0, 0.9, 1, "cpu", [], resume=True) == []
    pytest.importorskip("matplotlib")
    plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def _tiny_policy(name):
    return train(name, device="cpu", n_envs=8, total_steps=64, rollout_steps=8, eval_every=0, eval_envs=8,
                 run_dir="", progress=False).policy  # fmt: skip


def test_every_built_in_record_carries_the_budget_that_solves_it():
    """``python -m swarp.train SCENARIO`` with nothing else trains to the record's target within its
    budget (docs/results.md checks both on seeds 3-5); the config takes them unless the caller says."""
    from swarp.train import make_config

    for name, task in TASKS.items():
        assert task.total_steps is not None and task.target_success is not None, name
        config = make_config({"n_envs": 64}, task.config_overrides())
        assert (config.total_steps, config.target_success) == (task.total_steps, task.target_success), name
    config = make_config({"n_envs": 64, "total_steps": 10}, TASKS["give_way"].config_overrides())
    assert config.total_steps == 10 and config.target_success == TASKS["give_way"].target_success


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"overrides": {"total_steps": 5}}, "Task.total_steps"),
        ({"overrides": {"lr": "fast"}}, "Task.overrides: TrainConfig.lr"),
        ({"max_steps": 0}, "Task.max_steps"),
        ({"success": "won"}, "Task.success"),
        ({"options": {"seed": 1}}, "may not set 'seed'"),
        ({"options": {"max_steps": 5}}, "Task.max_steps"),
        ({"target_success": 2.0}, "Task: TrainConfig.target_success"),
    ],
)
def test_a_bad_task_record_is_refused(fields, words):
    from swarp.train import Task

    with pytest.raises(ValueError, match=words):
        Task(**fields)
