"""``swarp.testing.check_scenario`` on broken scenarios: each break is caught by its check, with the
method at fault named; ``register_scenario`` as a decorator and its checks; the torch path names
the method whose output has the wrong shape or keys."""

from dataclasses import dataclass

import pytest
import torch

import swarp
from swarp.runtime.host import host_rows
from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import OBSERVE_STEP
from swarp.scenarios.spread import SpreadScenario
from swarp.testing import HostTransferError, ScenarioContractError, check_scenario, forbid_host_transfers

OPTIONS = dict(n_envs=4, n_steps=12, max_steps=5)


class TorchSpread(SpreadScenario):
    """spread's torch reference alone: a torch-only scenario to break."""

    name = "torch_spread_for_tests"
    fused_available = False


class WideObservation(TorchSpread):
    name = "wide_observation"

    @property
    def obs_dim(self) -> int:
        return super().obs_dim + 1


class HostSyncReward(TorchSpread):
    name = "host_sync_reward"

    def rewards(self):
        reward = super().rewards()
        return reward * (1.0 + 0.0 * float(reward.sum()))  # a host sync


class MaskIndexedObservation(TorchSpread):
    name = "mask_indexed_observation"

    def observations(self):
        obs = super().observations()
        obs[obs.isnan()] = 0.0  # a boolean mask: a nonzero inside, a host sync
        return obs


class UploadedConstant(TorchSpread):
    name = "uploaded_constant"

    def post_step(self):
        self.scale = torch.tensor(2.0, device=self.landmarks.device)  # a host-to-device copy on CUDA


class TorchRandReset(TorchSpread):
    name = "torch_rand_reset"

    def reset_world(self, env_mask):
        super().reset_world(env_mask)
        noise = torch.rand(self.landmarks.shape, dtype=self.dtype, device=self.landmarks.device)
        self.landmarks.copy_(torch.where(env_mask.view(-1, 1, 1), noise, self.landmarks))


class ForgetfulReset(TorchSpread):
    """Keeps its extra memory across episodes: the reset does not write it."""

    name = "forgetful_reset"

    def bind(self, env):
        super().bind(env)
        self.memory = torch.zeros(self.n_envs, device=self.landmarks.device, dtype=self.dtype)

    def state_tensors(self):
        return {**super().state_tensors(), "memory": self.memory}


class ForgetfulFlag(TorchSpread):
    """A per-env flag set by the steps that no reset clears."""

    name = "forgetful_flag"

    def bind(self, env):
        super().bind(env)
        self.flag = torch.zeros(self.n_envs, device=self.landmarks.device, dtype=torch.bool)

    def post_step(self):
        self.flag.fill_(True)

    def state_tensors(self):
        return {**super().state_tensors(), "flag": self.flag}


#: The env a broken scenario below breaks in.
BROKEN_ENV = 2


class NanRewardInOneEnv(TorchSpread):
    """A reward of NaN in one env: two runs then differ (NaN != NaN), which is no randomness."""

    name = "nan_reward_in_one_env"

    def rewards(self):
        reward = super().rewards()
        broken = torch.arange(self.n_envs, device=reward.device).view(-1, 1) == BROKEN_ENV
        return torch.where(broken, torch.full_like(reward, torch.nan), reward)


class InfiniteObservation(TorchSpread):
    """An observation column of inf in one env: the same in every run, so only a finiteness check sees it."""

    name = "infinite_observation"

    def observations(self):
        obs = super().observations()
        broken = torch.arange(self.n_envs, device=obs.device).view(-1, 1, 1) == BROKEN_ENV
        return torch.where(broken, torch.full_like(obs, torch.inf), obs)


class InfiniteRestart(TorchSpread):
    """Agents placed at infinity when one env restarts for its second episode (an auto-reset)."""

    name = "infinite_restart"

    def reset_world(self, env_mask):
        super().reset_world(env_mask)
        pos = self.env.state.pos
        envs = torch.arange(self.n_envs, device=pos.device)
        broken = (env_mask & (envs == BROKEN_ENV) & (self.env.episode == 1)).view(-1, 1, 1)
        pos.copy_(torch.where(broken, torch.full_like(pos, torch.inf), pos))


class MovingLandmarks(TorchSpread):
    """Landmarks that move at a velocity drawn per episode, a velocity ``state_tensors`` leaves out:
    a restored snapshot moves them at whatever velocity the env last drew."""

    name = "moving_landmarks"
    #: Largest landmark speed [m/s].
    LANDMARK_SPEED = 0.5

    def bind(self, env):
        super().bind(env)
        self.landmark_vel = torch.zeros_like(self.landmarks)

    def reset_world(self, env_mask):
        super().reset_world(env_mask)
        E, A = self.n_envs, self.n_agents
        draws = torch.cat(arena.env_draws_torch(self, 4 * A), -1)[:, 2 * A :].view(E, A, 2)  # after the landmarks'
        velocity = (2.0 * draws - 1.0) * self.LANDMARK_SPEED
        self.landmark_vel.copy_(torch.where(env_mask.view(E, 1, 1), velocity, self.landmark_vel))

    def post_step(self):
        self.landmarks.add_(self.landmark_vel * self.env.stepper.dt)


class ExtraInfo(TorchSpread):
    name = "extra_info"

    def info(self):
        return {**super().info(), "undeclared": torch.zeros(self.n_envs, device=self.landmarks.device)}


def test_a_torch_only_scenario_passes_and_is_unregistered_afterwards():
    report = check_scenario(TorchSpread, **OPTIONS)
    assert report["fused == torch"].startswith("skipped")
    assert all(value == "ok" for key, value in report.items() if key != "fused == torch"), report
    assert TorchSpread.name not in swarp.scenario_names()


def test_a_built_in_fused_scenario_checks_both_paths():
    report = check_scenario("spread", **OPTIONS)
    assert {"declared shapes (fused)", "declared shapes (torch)", "fused == torch"} <= set(report)
    assert all(value == "ok" for value in report.values()), report


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (WideObservation, r"declared shapes.*WideObservation.observations\(\) returned a tensor \(4, 3, 14\)"),
        (ExtraInfo, r"declared shapes.*ExtraInfo.info\(\) returned keys"),
        (HostSyncReward, r"no host transfers.*method at fault: rewards"),
        (MaskIndexedObservation, r"no host transfers.*boolean mask.*method at fault: observations"),
        (UploadedConstant, r"no host transfers.*torch.tensor\(\) of a Python value.*method at fault: post_step"),
        (TorchRandReset, r"determinism.*start differently.*keyed RNG.*method at fault: reset_world"),
        (ForgetfulReset, r"reset writes every state field.*scenario.memory.*method at fault: reset_world"),
        (ForgetfulFlag, r"reset writes every state field.*scenario.flag.*method at fault: reset_world"),
        (NanRewardInOneEnv, rf"finite values: step 0: reward is nan at env {BROKEN_ENV}, agent 0 \(the method at "
                            r"fault: rewards\)"),
        (InfiniteObservation, rf"finite values: the reset: obs is inf at env {BROKEN_ENV}, agent 0, column 0 \(the "
                              r"method at fault: observations\)"),
        (InfiniteRestart, rf"finite values: step 4: state.pos is inf at env {BROKEN_ENV}, agent 0, component 0 "
                          r"\(the method at fault: reset_world\)"),
        (MovingLandmarks, r"snapshot complete: the snapshot is incomplete: .* diverged at step 5: scenario.landmarks "
                          r"by up to .*state_tensors\(\) must return all the memory a step reads \(the method at "
                          r"fault: state_tensors\)"),
    ],
)  # fmt: skip
def test_each_break_is_caught_with_the_method_at_fault(cls, match):
    with pytest.raises(ScenarioContractError, match=match):
        check_scenario(cls, **OPTIONS)
    assert cls.name not in swarp.scenario_names()


def test_a_nan_in_one_env_is_reported_as_such_in_the_fused_path_too(monkeypatch):
    """spread's fused twin with one env's reward poisoned after its kernels ran: the finiteness
    check, not determinism, names it (the fused method at fault)."""
    launch_observe = SpreadScenario.launch_observe

    def poisoned(self, launcher, env_mask=None, mode=OBSERVE_STEP):
        launch_observe(self, launcher, env_mask, mode)
        self.env.reward[BROKEN_ENV].fill_(torch.nan)

    monkeypatch.setattr(SpreadScenario, "launch_observe", poisoned)
    with pytest.raises(ScenarioContractError, match=rf"spread: finite values \(fused\): .*reward is nan at env "
                                                    rf"{BROKEN_ENV}.*method at fault: launch_observe"):  # fmt: skip
        check_scenario("spread", **OPTIONS, plan={"launch": "eager"})


def test_forbid_host_transfers_refuses_what_a_cuda_graph_cannot_capture_and_allows_the_rest():
    x = torch.arange(6.0)
    mask = x > 2
    index = torch.tensor([0, 2])
    refused = {
        "item": lambda: x.sum().item(),
        "bool": lambda: bool(x.sum()),
        "mask read": lambda: x[mask],
        "mask write": lambda: x.__setitem__(mask, 0.0),
        "mask in a tuple": lambda: x.view(6, 1)[mask, 0],
        "torch.nonzero": lambda: torch.nonzero(x),
        "Tensor.nonzero": lambda: x.nonzero(),
        "unique": lambda: torch.unique(x),
        "masked_select": lambda: torch.masked_select(x, mask),
        "tensor of a list": lambda: torch.tensor([1.0, 2.0]),
        "as_tensor of a number": lambda: torch.as_tensor(3),
    }
    with forbid_host_transfers():
        for name, call in refused.items():
            with pytest.raises(HostTransferError):
                call()
                pytest.fail(f"{name} ran")
        y = x.clone()
        y[1:3] = 7.0  # slices and integer indices are fine, and so is torch.where
        picked = y[index]
        kept = torch.where(mask, x, 0.0)
        same = torch.as_tensor(x)
    assert torch.equal(picked, torch.tensor([0.0, 7.0])) and torch.equal(kept, torch.tensor([0, 0, 0, 3, 4, 5.0]))
    assert same is x and x[mask].numel() == 3 and torch.tensor(1.0).item() == 1.0  # all restored afterwards


def test_swarps_own_cpu_host_reads_pass_the_guard():
    mask, expected = torch.tensor([False, True, True, False]), torch.tensor([1, 2])
    with forbid_host_transfers():
        rows = host_rows(mask)  # swarp.runtime.host: sanctioned
        with pytest.raises(HostTransferError):
            mask.nonzero()  # the same read elsewhere is refused
    assert torch.equal(rows, expected)


def test_the_torch_path_names_the_method_with_a_wrong_shape_or_keys():
    swarp.register_scenario(WideObservation.name, WideObservation)
    swarp.register_scenario(ExtraInfo.name, ExtraInfo)
    try:
        with pytest.raises(ValueError, match=r"WideObservation.observations\(\) returned a tensor \(2, 3, 14\)"):
            swarp.make(WideObservation.name, n_envs=2, device="cpu")
        with pytest.raises(ValueError, match=r"ExtraInfo.info\(\) returned keys .*'undeclared'.*info_buffers"):
            swarp.make(ExtraInfo.name, n_envs=2, device="cpu")
    finally:
        swarp.unregister_scenario(WideObservation.name)
        swarp.unregister_scenario(ExtraInfo.name)


def test_register_scenario_as_a_decorator_and_its_refusals():
    @swarp.register_scenario("decorated_spread")
    class Decorated(TorchSpread):
        pass

    try:
        assert swarp.make("decorated_spread", n_envs=2, device="cpu").scenario.__class__ is Decorated
    finally:
        swarp.unregister_scenario("decorated_spread")
    assert "decorated_spread" not in swarp.scenario_names()

    class NoDataclass(TorchSpread):
        class Config:
            n_agents = 3

    with pytest.raises(TypeError, match=r"NoDataclass.Config must be a dataclass"):
        swarp.register_scenario("no_dataclass", NoDataclass)
    with pytest.raises(TypeError, match="needs a Scenario subclass"):
        swarp.register_scenario("not_a_scenario", dataclass(type("Plain", (), {})))
    with pytest.raises(ValueError, match="unknown scenario"):
        swarp.unregister_scenario("never_registered")


def test_command_lines_import_user_scenario_modules(tmp_path, monkeypatch, capsys):
    """``--import MODULE`` registers a user's scenario before the scenario choices are built."""
    (tmp_path / "user_scenarios_for_tests.py").write_text(
        "import swarp\nfrom tests.test_testing import TorchSpread\n\n\n"
        "class Mine(TorchSpread):\n    name = 'mine_for_tests'\n\n\nswarp.register_scenario('mine_for_tests', Mine)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from swarp.benchmark import throughput

    try:
        throughput.main(["--import", "user_scenarios_for_tests", "--scenario", "mine_for_tests", "--device", "cpu",
                         "--envs", "8", "--agents", "3", "--iters", "5", "--repeats", "1"])  # fmt: skip
        assert "mine_for_tests" in capsys.readouterr().out
    finally:
        swarp.unregister_scenario("mine_for_tests")


def test_forbid_host_transfers_leaves_torch_as_it_found_it():
    """After the block, torch builds a tensor from 0-d tensors again (a patched and deleted
    ``Tensor.__getitem__`` once left CPython's sequence slot filled: ``len() of a 0-d tensor``)."""
    values = torch.zeros(4)
    with forbid_host_transfers(), pytest.raises(HostTransferError, match="boolean mask"):
        values[values > 0]
    assert torch.equal(torch.tensor([torch.tensor(1.0), torch.tensor(-1.0)]), torch.tensor([1.0, -1.0]))
