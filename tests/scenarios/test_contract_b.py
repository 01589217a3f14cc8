"""What every fused scenario owes, checked for sampling, give_way and spread: graph = replay =
eager bit for bit, masked resets touching only masked envs, a one-launch capturable reset,
determinism per seed and no host transfers (parity with the torch reference is per scenario,
in ``test_<name>.py``)."""

import pytest
import torch

import swarp
from swarp.scenarios.give_way import scripted_actions as give_way_controller
from swarp.scenarios.sampling import greedy_actions as sampling_controller
from swarp.scenarios.spread import greedy_actions as spread_controller
from tests.scenarios import helpers_b as h

#: name -> (options with short episodes, scripted controller)
SCENARIOS = {
    "sampling": (dict(n_agents=4, max_steps=10), sampling_controller),
    "spread": (dict(n_agents=4, max_steps=10), spread_controller),
    "give_way": (dict(max_steps=15), give_way_controller),
}
BY_NAME = pytest.mark.parametrize("name", list(SCENARIOS))
PATHS = pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
#: The CPU everywhere; CUDA (a real CUDA graph) on GPU machines.
DEVICES = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])


@DEVICES
@BY_NAME
def test_graph_replay_and_eager_are_bit_identical(name, device, monkeypatch):
    options, controller = SCENARIOS[name]
    h.check_graph_replay_eager(name, options, controller, 25, monkeypatch, device)


@DEVICES
@BY_NAME
@PATHS
def test_reset_at_changes_only_masked_envs(name, fused, device):
    options, controller = SCENARIOS[name]
    h.check_masked_reset(name, options, controller, fused, device)


@BY_NAME
def test_reset_draws_are_identical_between_fused_and_reference(name):
    h.check_reset_draws_identical(name, SCENARIOS[name][0])


@BY_NAME
def test_scripted_controller_stays_in_the_action_box(name):
    options, controller = SCENARIOS[name]
    env = swarp.make(name, n_envs=8, device="cpu", seed=0, **options)
    low, high = env.action_bounds
    for _ in range(20):
        actions = controller(env)
        assert bool(((actions >= low) & (actions <= high)).all())
        env.step(actions)


@BY_NAME
def test_reset_is_one_launch(name):
    h.check_reset_is_one_launch(name, SCENARIOS[name][0])


@BY_NAME
def test_same_seed_same_bits(name):
    options, controller = SCENARIOS[name]
    h.check_determinism(name, options, controller)


@DEVICES
@BY_NAME
@PATHS
def test_no_host_transfers(name, fused, device, generator):
    h.check_no_host_transfers(name, SCENARIOS[name][0], fused, generator, device)


def one_item_per_thread(device, n_items):
    """The CUDA thread layout of ``swarp.core.launch.agents_per_thread``, forced on any device."""
    return 1, n_items


#: The kernel modules whose launches size their grids with ``agents_per_thread``.
LAYOUT_MODULES = {
    "sampling": "swarp.scenarios.sampling_kernels",
    "spread": "swarp.scenarios.spread_kernels",
    "give_way": "swarp.scenarios.navigation_kernels",
}


@BY_NAME
def test_gpu_thread_layout_gives_the_cpu_layout_bits(name, monkeypatch):
    """The kernels run one item (agent, observation pair, cell) per thread on the GPU and one env
    per thread on the CPU; forcing the GPU layout on the CPU must not change a bit."""
    options, controller = SCENARIOS[name]
    make = dict(n_envs=4, device="cpu", seed=2, auto_reset=True, **options)
    reference = h.rollout(swarp.make(name, **make), controller, 25)
    monkeypatch.setattr(f"{LAYOUT_MODULES[name]}.agents_per_thread", one_item_per_thread)
    h.assert_bit_identical(reference, h.rollout(swarp.make(name, **make), controller, 25))


@BY_NAME
def test_grad_step_reaches_the_actions(name):
    """With ``actions.requires_grad`` the step runs the torch reference on the physics' autograd
    output: observations (and the shaped rewards) have gradients with respect to the actions, and
    the scenario's persistent memory stays free of autograd history."""
    options, controller = SCENARIOS[name]
    env = swarp.make(name, n_envs=3, device="cpu", seed=0, auto_reset=True, **options)
    for _ in range(3):
        actions = controller(env).clone().requires_grad_(True)
        obs, reward, *_ = env.step(actions)
        (obs.square().sum() + reward.sum()).backward()
        assert actions.grad is not None and bool(torch.isfinite(actions.grad).all())
        assert bool((actions.grad != 0).any())
    assert not any(t.requires_grad for t in env.scenario.state_tensors().values())
