"""swarp.train on CUDA: the captured iteration equals the eager one, and a run learns."""

import pytest
import torch

import swarp
from swarp.train import Trainer, get_task, make_config, train

pytestmark = pytest.mark.gpu


def cuda_trainer(capture: bool, seed: int = 0) -> Trainer:
    env = swarp.make("navigation", n_envs=256, device="cuda", seed=seed, auto_reset=True, max_steps=10,
                     n_agents=4, substeps=1)  # fmt: skip
    config = make_config({"n_envs": 256, "rollout_steps": 16, "minibatches": 4, "hidden": 64, "run_dir": "",
                          "progress": False, "capture": capture, "tf32": False, "init_log_std": -30.0})  # fmt: skip
    return Trainer.build([env], get_task("navigation"), config, [seed])


def test_a_captured_rollout_fills_what_the_eager_rollout_fills():
    """The rollout with env.step inside one CUDA graph against plain launches, from the same state
    and parameters (a near-deterministic policy: std e^-30, so the sampling noise cannot differ)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    eager, graphed = cuda_trainer(capture=False), cuda_trainer(capture=True)
    graphed.actor.load_state_dict(eager.actor.state_dict())
    graphed.critic.load_state_dict(eager.critic.state_dict())
    graphed.normalizer.load_state_dict(eager.normalizer.state_dict())
    stage = graphed.stages["collect"]
    stage()  # warm-up call (eager on a side stream)
    graphed.envs[0].set_state(eager.envs[0].get_state())
    stage()  # captured, then replayed
    assert stage.graph is not None
    eager.stages["collect"]()  # capture=False: every call is eager
    torch.cuda.synchronize()
    for name in ("obs", "reward", "value", "terminated", "truncated"):
        a, b = getattr(eager.buffers, name), getattr(graphed.buffers, name)
        if a.dtype == torch.bool:
            assert torch.equal(a, b), name
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=name)
    assert eager.buffers.terminated.any() or eager.buffers.truncated.any()
    # the replay keeps stepping the same env: a second replay moves on, it does not repeat
    before = graphed.buffers.obs.clone()
    stage()
    torch.cuda.synchronize()
    assert not torch.equal(before, graphed.buffers.obs)


def test_a_captured_training_run_learns_navigation():
    result = train("navigation", device="cuda", n_envs=1024, total_steps=1024 * 32 * 40, eval_every=0,
                   eval_envs=1024, run_dir="", progress=False)  # fmt: skip
    assert result.capture_seconds > 0
    assert result.final["eval/success_low"] > 0.5
