"""BenchMARL on a swarp task with two agent groups: the task's hooks answer per group (group map,
observation, action and info specs), and BenchMARL's MAPPO, IPPO (continuous) and QMIX (discrete)
train a few iterations with one policy per group, each of its group's observation width."""

import math

import pytest

try:  # the benchmarl extra (BenchMARL 1.5.2 imports only with torchrl < 0.12)
    import benchmarl  # noqa: F401
except ImportError as error:
    pytest.skip(f"BenchMARL is not importable here: {error}", allow_module_level=True)

import torch  # noqa: E402
from benchmarl.algorithms import IppoConfig, MappoConfig, QmixConfig  # noqa: E402
from benchmarl.experiment import Callback  # noqa: E402
from torchrl.data import Bounded, Categorical  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.benchmarl import SwarpClass, default_config  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from tests.groups_support import NARROW, NarrowNavigation  # noqa: E402
from tests.interop.test_benchmarl_discrete import (  # noqa: E402
    MAX_STEPS,
    N_ENVS,
    experiment_config,
    logged,
    small_experiment,
)

#: The test scenario's name while registered (group "b" observes NARROW columns, group "a" all).
SCENARIO = "narrow_navigation_groups_test"
GROUPS = ("a", "b")
ITERATIONS = 2


@pytest.fixture
def task():
    swarp.register_scenario(SCENARIO, NarrowNavigation)
    try:
        config = default_config(SCENARIO)
        config.update(n_agents=4, max_steps=MAX_STEPS)
        yield SwarpClass(SCENARIO, config)
    finally:
        swarp.unregister_scenario(SCENARIO)


def test_hooks_answer_per_group(task):
    env = task.get_env_fun(num_envs=2, continuous_actions=True, seed=0, device="cpu")()
    try:
        assert isinstance(env, SwarpEnv) and env.layout == "agents"
        assert task.group_map(env) == {"a": ["a_0", "a_1"], "b": ["b_0", "b_1"]}
        widths = {"a": env.sim.obs_dim, "b": NARROW}
        obs = task.observation_spec(env)
        assert set(obs.keys(True, True)) == {("a", "observation"), ("b", "observation")}
        action = task.action_spec(env)
        info = task.info_spec(env)
        for group in GROUPS:
            assert obs[group, "observation"].shape == (2, widths[group])
            spec = action[group, "action"]
            assert isinstance(spec, Bounded) and spec.shape == (2, 2)
            assert (spec.space.low == -1).all() and (spec.space.high == 1).all()
            assert ("dist_to_goal" in info[group, "info"]) and info[group, "info", "dist_to_goal"].shape == (2, 1)
        assert set(info.keys()) == set(GROUPS)  # per-env info is not per group
        assert task.state_spec(env) is None and task.action_mask_spec(env) is None
        data = env.rollout(3)
        assert data["next", "b", "observation"].shape == (2, 3, 2, NARROW)
    finally:
        env.close()
    # Discrete runs: every group gets indices; action_nvec may give each group its levels.
    task.config["action_nvec"] = {"a": [5, 3]}
    env = task.get_env_fun(num_envs=2, continuous_actions=False, seed=0, device="cpu")()
    try:
        action = task.action_spec(env)
        assert isinstance(action["a", "action"], Categorical) and action["a", "action"].space.n == 15
        assert isinstance(action["b", "action"], Categorical) and action["b", "action"].space.n == 9
        assert env.rollout(3)["a", "action"].dtype == torch.int64
    finally:
        env.close()


class Batches(Callback):
    """Keeps each collected batch's observation shapes and actions by group."""

    def __init__(self):
        super().__init__()
        self.shapes, self.actions = [], []

    def on_batch_collected(self, batch):
        self.shapes.append({g: tuple(batch[g, "observation"].shape) for g in GROUPS})
        self.actions.append({g: batch[g, "action"].clone() for g in GROUPS})


@pytest.mark.parametrize(
    "algorithm,loss",
    [(MappoConfig, "loss_objective"), (IppoConfig, "loss_objective"), (QmixConfig, "loss")],
    ids=["mappo", "ippo", "qmix"],
)
def test_algorithms_train_one_policy_per_group(task, tmp_path, algorithm, loss):
    batches = Batches()
    config = experiment_config(tmp_path)  # one episode of each env per iteration, as the discrete tests
    config.max_n_iters = ITERATIONS
    experiment = small_experiment(task, algorithm.get_from_yaml(), config, [batches])
    experiment.run()
    assert experiment.n_iters_performed == ITERATIONS
    assert experiment.continuous_actions is (algorithm is not QmixConfig)  # QMIX is discrete-only
    assert experiment.group_map == {"a": ["a_0", "a_1"], "b": ["b_0", "b_1"]}
    width = swarp.make(SCENARIO, n_envs=1, device="cpu", n_agents=4).obs_dim
    assert batches.shapes[0] == {"a": (N_ENVS, MAX_STEPS, 2, width), "b": (N_ENVS, MAX_STEPS, 2, NARROW)}
    for group in GROUPS:
        losses = logged(experiment, f"train_{group}_{loss}")
        assert len(losses) == ITERATIONS and all(math.isfinite(x) for x in losses), group
        assert logged(experiment, f"collection_{group}_reward_episode_reward_mean"), group
        assert logged(experiment, f"eval_{group}_reward_episode_reward_mean"), group
        actions = torch.cat([b[group] for b in batches.actions])
        if algorithm is QmixConfig:
            assert actions.dtype == torch.int64 and actions.min() >= 0 and actions.max() < 9
        else:
            assert actions.dtype == torch.float32 and actions.shape[-1] == 2
