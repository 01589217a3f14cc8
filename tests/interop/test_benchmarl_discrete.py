"""``swarp/interop/benchmarl.py`` with discrete actions: BenchMARL's discrete-only algorithms (QMIX,
VDN, IQL) train on a swarp task, whose environment is then built with ``action_space="discrete"``
and a ``Categorical`` action spec, as BenchMARL's VMAS tasks have."""

import csv
import math

import pytest

try:  # the benchmarl extra (BenchMARL 1.5.2 imports only with torchrl < 0.12)
    import benchmarl  # noqa: F401
except ImportError as error:
    pytest.skip(f"BenchMARL is not importable here: {error}", allow_module_level=True)

import torch  # noqa: E402
from benchmarl.algorithms import IqlConfig, MappoConfig, QmixConfig, VdnConfig  # noqa: E402
from benchmarl.experiment import Callback, Experiment, ExperimentConfig  # noqa: E402
from benchmarl.models.mlp import MlpConfig  # noqa: E402
from torchrl.data import Bounded, Categorical  # noqa: E402

from swarp.interop.benchmarl import SwarpTask  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402

N_AGENTS = 2
MAX_STEPS = 16
N_ENVS = 4
ITERATIONS = 3


def test_discrete_env_fun_builds_a_categorical_discrete_env():
    task = SwarpTask.NAVIGATION.get_task(config={"n_agents": N_AGENTS, "max_steps": MAX_STEPS})
    env = task.get_env_fun(num_envs=3, continuous_actions=False, seed=1, device="cpu")()
    try:
        assert isinstance(env, SwarpEnv) and env.sim.action_space.kind == "discrete"
        assert env.continuous_actions is False and env.categorical_actions is True and not env.normalized
        spec = task.action_spec(env)["agents", "action"]
        assert isinstance(spec, Categorical) and spec.space.n == 9 and spec.shape == (N_AGENTS,)
        assert spec.dtype == torch.int64
        data = env.rollout(4)
        assert data["agents", "action"].shape == (3, 4, N_AGENTS) and data["agents", "action"].dtype == torch.int64
        assert not bool(env.sim.invalid_actions())
    finally:
        env.close()

    # action_nvec sets the levels of discrete runs and is ignored by continuous ones.
    task.config["action_nvec"] = [5, 3]
    env = task.get_env_fun(num_envs=2, continuous_actions=False, seed=0, device="cpu")()
    assert task.action_spec(env)["agents", "action"].space.n == 15 and env.sim.action_space.nvec == (5, 3)
    env.close()
    env = task.get_env_fun(num_envs=2, continuous_actions=True, seed=0, device="cpu")()
    spec = task.action_spec(env)["agents", "action"]
    assert isinstance(spec, Bounded) and spec.shape == (N_AGENTS, 2) and env.sim.action_space.kind == "continuous"
    env.close()

    drones = SwarpTask.DRONE_NAVIGATION.get_from_yaml()
    env = drones.get_env_fun(num_envs=2, continuous_actions=False, seed=0, device="cpu")()
    assert drones.action_spec(env)["agents", "action"].space.n == 3**4  # four command columns
    env.close()


class ActionRecorder(Callback):
    """Keeps the actions of every collected batch ([n_envs, steps, n_agents] int64 indices)."""

    def __init__(self):
        super().__init__()
        self.actions = []

    def on_batch_collected(self, batch):
        self.actions.append(batch["agents", "action"].clone())


def experiment_config(tmp_path) -> ExperimentConfig:
    config = ExperimentConfig.get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.max_n_iters = ITERATIONS
    config.max_n_frames = None
    frames = N_ENVS * MAX_STEPS  # one episode of each env per iteration
    config.off_policy_n_envs_per_worker = config.on_policy_n_envs_per_worker = N_ENVS
    config.off_policy_collected_frames_per_batch = config.on_policy_collected_frames_per_batch = frames
    config.off_policy_n_optimizer_steps = 2
    config.off_policy_train_batch_size = 32
    config.off_policy_memory_size = 1_000
    config.off_policy_init_random_frames = 0
    config.on_policy_n_minibatch_iters = 1
    config.on_policy_minibatch_size = 32
    config.evaluation = True
    config.evaluation_interval = 2 * frames  # once, after the second iteration
    config.evaluation_episodes = 2
    config.render = False
    config.loggers = ["csv"]  # BenchMARL's default adds wandb, which the benchmarl extra does not install
    config.save_folder = str(tmp_path)
    config.checkpoint_interval = 0
    config.checkpoint_at_end = False
    return config


def small_experiment(task, algorithm_config, config: ExperimentConfig, callbacks=()) -> Experiment:
    """A BenchMARL ``Experiment`` of ``task`` with 16-cell MLP actor and critic, seed 0 (not run)."""
    model = MlpConfig(num_cells=[16], activation_class=torch.nn.Tanh, layer_class=torch.nn.Linear)
    return Experiment(
        task=task,
        algorithm_config=algorithm_config,
        model_config=model,
        critic_model_config=model,
        seed=0,
        config=config,
        callbacks=list(callbacks),
    )


def run(tmp_path, algorithm_config, prefer_continuous: bool = True) -> tuple[Experiment, ActionRecorder]:
    task = SwarpTask.NAVIGATION.get_from_yaml()
    task.config.update(n_agents=N_AGENTS, max_steps=MAX_STEPS)
    config = experiment_config(tmp_path)
    config.prefer_continuous_actions = prefer_continuous
    recorder = ActionRecorder()
    experiment = small_experiment(task, algorithm_config, config, [recorder])
    experiment.run()
    return experiment, recorder


def logged(experiment: Experiment, name: str) -> list[float]:
    folder = experiment.folder_name
    with open(folder / folder.name / "scalars" / f"{name}.csv") as file:
        return [float(row[1]) for row in csv.reader(file)]


@pytest.mark.parametrize("algorithm", [QmixConfig, VdnConfig, IqlConfig], ids=["qmix", "vdn", "iql"])
def test_discrete_only_algorithms_train_a_few_iterations(tmp_path, algorithm):
    experiment, recorder = run(tmp_path, algorithm.get_from_yaml())
    assert experiment.continuous_actions is False
    assert experiment.n_iters_performed == ITERATIONS
    assert experiment.total_frames == ITERATIONS * N_ENVS * MAX_STEPS
    losses = logged(experiment, "train_agents_loss")
    assert len(losses) == ITERATIONS and all(math.isfinite(x) for x in losses)
    assert logged(experiment, "eval_reward_episode_reward_mean")  # the evaluation ran on the discrete env
    actions = torch.cat(recorder.actions)
    assert actions.dtype == torch.int64 and actions.shape[-1] == N_AGENTS
    assert actions.min() >= 0 and actions.max() < 9
    assert actions.unique().numel() > 1  # epsilon-greedy exploration uses several choices


def test_mappo_preferring_discrete_actions_trains_on_the_discrete_env(tmp_path):
    # An algorithm of both kinds with prefer_continuous_actions=False gets the discrete env (and a
    # categorical policy); with the default it keeps continuous actions (test_benchmarl.py).
    experiment, recorder = run(tmp_path, MappoConfig.get_from_yaml(), prefer_continuous=False)
    assert experiment.continuous_actions is False and experiment.n_iters_performed == ITERATIONS
    assert all(math.isfinite(x) for x in logged(experiment, "train_agents_loss_objective"))
    actions = torch.cat(recorder.actions)
    assert actions.dtype == torch.int64 and actions.min() >= 0 and actions.max() < 9
