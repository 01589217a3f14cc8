"""The BenchMARL task family (swarp.interop.benchmarl): a task per scenario, loadable defaults that
agree with swarp's training records, and BenchMARL's own MAPPO running a few iterations on the CPU."""

import json
import pickle
import warnings

import pytest

try:  # the benchmarl extra (BenchMARL 1.5.2 imports only with torchrl < 0.12)
    import benchmarl  # noqa: F401
except ImportError as error:
    pytest.skip(f"BenchMARL is not importable here: {error}", allow_module_level=True)

import torch  # noqa: E402
from benchmarl.algorithms import MappoConfig  # noqa: E402
from benchmarl.experiment import Experiment, ExperimentConfig  # noqa: E402
from benchmarl.models.mlp import MlpConfig  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.benchmarl import (  # noqa: E402
    SwarpClass,
    SwarpTask,
    check_config,
    config_path,
    default_config,
    task_names,
    video_writer_problem,
)
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from swarp.train.tasks import get_task  # noqa: E402


def test_every_registered_scenario_has_a_task_and_a_loadable_default_config():
    assert task_names() == swarp.scenario_names()
    for name in swarp.scenario_names():
        member = SwarpTask[name.upper()]
        assert config_path(name).is_file(), f"no benchmarl_tasks/{name}.yaml"
        task = member.get_from_yaml()
        assert isinstance(task, SwarpClass) and task.scenario == name
        assert task.supports_continuous_actions() and task.supports_discrete_actions()
        # The defaults: every option of the scenario, at its default unless swarp's training record
        # of the scenario says otherwise (regenerate the YAML when either changes).
        record = get_task(name)
        expected = check_config(name, default_config(name))
        expected.update(record.options)
        if record.max_steps is not None:
            expected["max_steps"] = record.max_steps
        assert task.config == expected, name
        assert member.get_task().config == task.config
        assert pickle.loads(pickle.dumps(task)) == task  # BenchMARL pickles the task with its checkpoints


def test_default_configs_build_environments():
    for name in ("navigation", "push_t"):
        task = SwarpTask[name.upper()].get_from_yaml()
        env = task.get_env_fun(num_envs=2, continuous_actions=True, seed=3, device="cpu")()
        try:
            assert isinstance(env, SwarpEnv) and env.batch_size == torch.Size([2])
            assert task.group_map(env) == {"agents": env.agent_names}
            assert task.max_steps(env) == task.config["max_steps"] == env.sim.max_steps
            action = task.action_spec(env)["agents", "action"]
            assert action.shape == (env.sim.n_agents, env.sim.act_dim)
            assert (action.space.low == -1).all() and (action.space.high == 1).all()
            obs = task.observation_spec(env)
            assert set(obs.keys(True, True)) == {("agents", "observation")}
            info = task.info_spec(env)
            assert info is None or all(key[:2] == ("agents", "info") for key in info.keys(True, True))
            data = env.rollout(3)
            assert data["next", "agents", "reward"].shape == (2, 3, env.sim.n_agents, 1)
            frame = task.render_callback(None, env, data)
            assert frame.ndim == 3 and frame.shape[-1] == 3
        finally:
            env.close()


def test_bad_configs_are_clear_errors():
    with pytest.raises(ValueError, match="unknown config key 'n_agent'"):
        SwarpTask.NAVIGATION.get_task(config={"n_agent": 3})
    with pytest.raises(ValueError, match="set by BenchMARL"):
        SwarpTask.NAVIGATION.get_task(config={"n_envs": 3})
    with pytest.raises(ValueError, match="no swarp scenario"):
        SwarpClass("no_such_scenario", {})
    with pytest.raises(TypeError, match="mapping"):
        SwarpClass("navigation", [("n_agents", 3)])
    with pytest.raises(ValueError, match="'action_space' is set by BenchMARL"):
        SwarpTask.NAVIGATION.get_task(config={"action_space": "discrete"})
    task = SwarpTask.NAVIGATION.get_task(config={"n_agents": 2})
    with pytest.raises(ValueError, match="num_envs"):
        task.get_env_fun(num_envs=0, continuous_actions=True, seed=0, device="cpu")()
    with pytest.raises(FileNotFoundError):
        SwarpTask.NAVIGATION.get_from_yaml("/nonexistent/navigation.yaml")


def test_mappo_experiment_runs_a_few_iterations_on_the_cpu(tmp_path):
    task = SwarpTask.NAVIGATION.get_from_yaml()
    task.config.update(n_agents=2, max_steps=16)
    config = ExperimentConfig.get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.max_n_iters = 3
    config.max_n_frames = None
    config.on_policy_n_envs_per_worker = 4
    config.on_policy_collected_frames_per_batch = 64  # 16 steps of the 4 envs: one episode each
    config.on_policy_n_minibatch_iters = 1
    config.on_policy_minibatch_size = 32
    config.evaluation = True
    config.evaluation_interval = 128  # once, after the second iteration
    config.evaluation_episodes = 2
    assert config.render  # BenchMARL's default: an evaluation video, where torchvision imports (below)
    config.loggers = ["csv"]  # BenchMARL's default adds wandb, which the benchmarl extra does not install
    config.create_json = True
    config.save_folder = str(tmp_path)
    config.checkpoint_interval = 0
    config.checkpoint_at_end = True
    model = MlpConfig(num_cells=[16], activation_class=torch.nn.Tanh, layer_class=torch.nn.Linear)
    experiment = Experiment(
        task=task,
        algorithm_config=MappoConfig.get_from_yaml(),
        model_config=model,
        critic_model_config=model,
        seed=0,
        config=config,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        experiment.run()
    assert experiment.n_iters_performed == 3
    assert experiment.total_frames == 3 * 64
    folder = experiment.folder_name
    assert folder.parent == tmp_path and "navigation" in folder.name
    checkpoints = list((folder / "checkpoints").glob("*.pt"))
    assert checkpoints, "no checkpoint written at the end"
    runs = json.loads(next(folder.glob("*.json")).read_text())["swarp"]["navigation"]["mappo"]["seed_0"]
    evaluations = [value for key, value in runs.items() if key.startswith("step_")]
    assert evaluations and all(len(e["return"]) == config.evaluation_episodes for e in evaluations)
    scalars = folder / folder.name / "scalars"  # the csv logger's files, one per logged value
    for name in (
        "collection_agents_reward_episode_reward_mean",
        "collection_agents_info_on_goal",  # a per-agent info entry of the scenario
        "eval_reward_episode_reward_mean",
    ):
        assert (scalars / f"{name}.csv").is_file(), name
    videos = list((folder / folder.name / "videos").glob("eval_video_*.mp4"))
    no_video = [str(w.message) for w in caught if "evaluate without videos" in str(w.message)]
    if video_writer_problem() is None:
        assert videos and not no_video
    else:  # torchvision does not import under this torch: no video, one warning saying why, no failure
        assert not videos and no_video and video_writer_problem() in no_video[0]
