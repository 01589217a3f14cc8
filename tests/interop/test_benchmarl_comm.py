"""BenchMARL on swarp tasks with a communication channel: MAPPO (continuous: the message columns in
the normalized box, mapped onto [0, 1]) and QMIX / IQL (discrete: the message head in the
``Categorical``) train a few iterations on ``Talk``; MAPPO on two groups, one of them silent."""

import math

import pytest

try:  # the benchmarl extra (BenchMARL 1.5.2 imports only with torchrl < 0.12)
    import benchmarl  # noqa: F401
except ImportError as error:
    pytest.skip(f"BenchMARL is not importable here: {error}", allow_module_level=True)

import torch  # noqa: E402
from benchmarl.algorithms import IqlConfig, MappoConfig, QmixConfig  # noqa: E402
from benchmarl.experiment import Callback  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.benchmarl import SwarpClass, default_config  # noqa: E402
from tests.env.test_comm import C, QuietScouts, Talk  # noqa: E402
from tests.interop.test_benchmarl_discrete import MAX_STEPS, experiment_config, logged, small_experiment  # noqa: E402

ITERATIONS = 2


class Talk2(Talk):
    """``Talk`` of 2 agents by default (the registered test task)."""

    def __init__(self, **options):
        options.setdefault("n_agents", 2)
        super().__init__(**options)


def task_of(name, scenario, **config_updates):
    swarp.register_scenario(name, scenario)
    config = default_config(name)
    config.update(max_steps=MAX_STEPS, **config_updates)
    return SwarpClass(name, config)


@pytest.fixture
def talk():
    try:
        yield task_of("talk_comm_test", Talk2, n_agents=2)
    finally:
        swarp.unregister_scenario("talk_comm_test")


@pytest.fixture
def scouts():
    try:
        yield task_of("quiet_scouts_comm_test", QuietScouts)
    finally:
        swarp.unregister_scenario("quiet_scouts_comm_test")


class Sent(Callback):
    """Each collected batch's actions by group, and the messages the collector's env sent last."""

    def __init__(self):
        super().__init__()
        self.actions, self.comm = [], []

    def on_batch_collected(self, batch):
        groups = self.experiment.group_map
        self.actions.append({g: batch[g, "action"].clone() for g in groups})
        self.comm.append(self.experiment.collector.env.sim.comm.clone())


def run(task, tmp_path, algorithm):
    config = experiment_config(tmp_path)
    config.max_n_iters = ITERATIONS
    sent = Sent()
    experiment = small_experiment(task, algorithm.get_from_yaml(), config, [sent])
    experiment.run()
    assert experiment.n_iters_performed == ITERATIONS
    return experiment, sent


@pytest.mark.parametrize(
    "algorithm,loss", [(MappoConfig, "loss_objective"), (QmixConfig, "loss"), (IqlConfig, "loss")],
    ids=["mappo", "qmix", "iql"],
)  # fmt: skip
def test_a_comm_task_trains(talk, tmp_path, algorithm, loss):
    experiment, sent = run(talk, tmp_path, algorithm)
    discrete = algorithm is not MappoConfig
    assert experiment.continuous_actions is not discrete
    losses = logged(experiment, f"train_agents_{loss}")
    assert len(losses) == ITERATIONS and all(math.isfinite(x) for x in losses)
    actions = torch.cat([a["agents"] for a in sent.actions])
    comm = torch.stack(sent.comm)
    if discrete:  # one index of 9 * C choices, the message's choice its least significant digit
        assert actions.dtype == torch.int64 and actions.min() >= 0 and actions.max() < 9 * C
        assert actions.max() >= 9  # beyond the 9 physical choices: the message head is in the spec
        assert torch.equal(comm.sum(-1), torch.ones_like(comm[..., 0]))
    else:  # the normalized [-1, 1] box over the command and the message, the message sent in [0, 1]
        assert actions.shape[-1] == 2 + C and actions.abs().max() <= 1
        assert (comm >= 0).all() and (comm <= 1).all() and comm.std() > 0


def test_mappo_trains_two_groups_with_a_silent_one(scouts, tmp_path):
    experiment, sent = run(scouts, tmp_path, MappoConfig)
    assert experiment.group_map == {"carriers": ["carriers_0", "carriers_1", "carriers_2"], "scouts": ["scouts_0"]}
    assert sent.actions[0]["carriers"].shape[-1] == 2 + 2 and sent.actions[0]["scouts"].shape[-1] == 2
    for group in experiment.group_map:
        losses = logged(experiment, f"train_{group}_loss_objective")
        assert len(losses) == ITERATIONS and all(math.isfinite(x) for x in losses), group
    comm = torch.stack(sent.comm)
    assert comm[..., 3, :].abs().sum() == 0 and comm[..., :3, :].std() > 0
