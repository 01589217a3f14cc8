"""BenchMARL on ``variable_navigation`` (a per-env agent count, agents leaving on their goals): the
task keeps the alive mask out of the models' inputs, and MAPPO and IPPO train on the per-agent done
entries of ``SwarpEnv`` (BenchMARL expands the root ones only where a group has none), so GAE stops a
departed agent's return at the step it left."""

import math

import pytest

try:  # the benchmarl extra (BenchMARL 1.5.2 imports only with torchrl < 0.12)
    import benchmarl  # noqa: F401
except ImportError as error:
    pytest.skip(f"BenchMARL is not importable here: {error}", allow_module_level=True)

import torch  # noqa: E402
from benchmarl.algorithms import IppoConfig, MappoConfig  # noqa: E402
from benchmarl.experiment import Callback  # noqa: E402

from swarp.interop.benchmarl import SwarpTask  # noqa: E402
from tests.interop.test_benchmarl_discrete import (  # noqa: E402
    MAX_STEPS,
    N_ENVS,
    experiment_config,
    logged,
    small_experiment,
)

ITERATIONS = 2
#: Up to 4 agents an env, in a world small enough for random actions to reach the goals.
OPTIONS = dict(n_agents=(2, 4), max_steps=MAX_STEPS, world_size=0.5, goal_radius=0.4)


@pytest.fixture
def task():
    task = SwarpTask.VARIABLE_NAVIGATION.get_from_yaml()
    assert task.config["leave_on_goal"] and task.config["n_agents"] == (2, 8)
    task.config.update(OPTIONS)
    return task


def test_the_mask_is_no_model_input(task):
    env = task.get_env_fun(num_envs=2, continuous_actions=True, seed=0, device="cpu")()
    try:
        assert ("agents", "mask") in env.full_observation_spec.keys(True, True)
        assert set(task.observation_spec(env).keys(True, True)) == {("agents", "observation")}
        info = task.info_spec(env)
        assert all(key[:2] == ("agents", "info") for key in info.keys(True, True))
        assert ("agents", "done") in env.done_keys
    finally:
        env.close()


class Departures(Callback):
    """Checks each training minibatch: where an agent left within an ongoing episode, GAE's value
    target is that step's reward alone (no bootstrap from after its departure)."""

    def __init__(self):
        super().__init__()
        self.departures = self.agent_only_done = 0

    def on_batch_collected(self, batch):
        root = batch["next", "done"].unsqueeze(-2).expand_as(batch["next", "agents", "done"])
        self.agent_only_done += int((batch["next", "agents", "done"] & ~root).sum())

    def on_train_step(self, batch, group):
        left = batch[group, "mask"] & ~batch["next", group, "mask"] & ~batch["next", "done"]
        self.departures += int(left.sum())
        target, reward = batch[group, "value_target"][left], batch["next", group, "reward"][left]
        torch.testing.assert_close(target, reward)


@pytest.mark.parametrize("algorithm", [MappoConfig, IppoConfig], ids=["mappo", "ippo"])
def test_ppo_trains_on_the_per_agent_done_entries(task, tmp_path, algorithm):
    config = experiment_config(tmp_path)
    config.max_n_iters = ITERATIONS
    config.on_policy_minibatch_size = N_ENVS * MAX_STEPS  # every sample once per iteration
    callback = Departures()
    experiment = small_experiment(task, algorithm.get_from_yaml(), config, [callback])
    loss = experiment.losses["agents"]
    assert loss.tensor_keys.done == ("agents", "done") and loss.tensor_keys.terminated == ("agents", "terminated")
    assert loss.value_estimator.tensor_keys.done == ("agents", "done")
    experiment.run()
    assert experiment.n_iters_performed == ITERATIONS
    assert callback.agent_only_done > 0 and callback.departures > 0
    losses = logged(experiment, "train_agents_loss_objective")
    assert len(losses) == ITERATIONS and all(math.isfinite(x) for x in losses)
    assert logged(experiment, "collection_agents_info_alive")  # the fraction of present agents
