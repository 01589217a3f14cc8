"""send()/recv(): same bits as step(), clear misuse errors, and physics overlapping caller work."""

import pytest
import torch

import swarp
from swarp.env import asynchronous

N_ENVS, N_AGENTS, N_STEPS = 16, 4, 120


def make_env(device="cpu", **kwargs) -> swarp.Environment:
    options = dict(n_envs=N_ENVS, device=device, seed=3, n_agents=N_AGENTS, auto_reset=True, max_steps=30)
    options.update(kwargs)
    return swarp.make("navigation", **options)


def action_sequence(env: swarp.Environment, generator: torch.Generator) -> list[torch.Tensor]:
    low, high = env.action_bounds
    return [
        (low.cpu() + (high - low).cpu() * torch.rand(N_ENVS, N_AGENTS, env.act_dim, generator=generator)).to(
            env.torch_device
        )
        for _ in range(N_STEPS)
    ]


def snapshot(outputs) -> list[torch.Tensor]:
    obs, reward, terminated, truncated, info = outputs
    return [t.clone() for t in (obs, reward, terminated, truncated, info["final_obs"], info["dist_to_goal"])]


@pytest.mark.parametrize("placement", ["thread", "inline"])
@pytest.mark.parametrize("fused", [True, False])
def test_send_recv_matches_step_bit_for_bit(fused, placement, generator, monkeypatch):
    """Both CPU placements of the step: the worker thread, and inline in send() (steps shorter than
    ``INLINE_BELOW_S``), forced here by the threshold."""
    monkeypatch.setattr(asynchronous, "INLINE_BELOW_S", 0.0 if placement == "thread" else 10.0)
    sync_env, async_env = make_env(fused=fused), make_env(fused=fused)
    actions = action_sequence(sync_env, generator)
    busy = torch.randn(256, 256)
    for a in actions:
        expected = snapshot(sync_env.step(a))
        async_env.send(a)
        busy = torch.tanh(busy @ busy.T / 256)  # caller work while the step runs
        got = snapshot(async_env.recv())
        for x, y in zip(expected, got, strict=True):
            assert torch.equal(x, y)
    assert int(sync_env.episode.sum()) > N_ENVS  # auto-resets happened along the way
    assert torch.equal(sync_env.state.pos, async_env.state.pos)
    assert async_env._async.runs_inline == (placement == "inline")


def test_short_cpu_steps_run_inline_and_long_ones_in_the_worker(monkeypatch):
    """The placement follows the running average of measured step times against the threshold."""
    env = make_env()
    actions = torch.zeros(N_ENVS, N_AGENTS, env.act_dim)
    env.send(actions)  # the first step is untimed: it goes to the worker
    assert env._async._future is not None
    env.recv()
    average = env._async.step_time_s
    assert average is not None and average > 0
    monkeypatch.setattr(asynchronous, "INLINE_BELOW_S", 10 * average)
    env.send(actions)
    assert env._async._future is None, "a short step ran inline in send()"
    env.recv()
    monkeypatch.setattr(asynchronous, "INLINE_BELOW_S", 0.0)
    env.send(actions)
    assert env._async._future is not None, "with no step short enough it goes to the worker"
    env.recv()


def test_caller_may_overwrite_its_actions_after_send(generator):
    sync_env, async_env = make_env(), make_env()
    for a in action_sequence(sync_env, generator)[:20]:
        expected = snapshot(sync_env.step(a))
        mine = a.clone()
        async_env.send(mine)
        mine.fill_(float("nan"))  # must not reach the pending step
        assert all(torch.equal(x, y) for x, y in zip(expected, snapshot(async_env.recv()), strict=True))
    assert not bool(async_env.invalid_actions())


def test_misuse_raises_clear_errors():
    env = make_env()
    zeros = torch.zeros(N_ENVS, N_AGENTS, 2)
    with pytest.raises(RuntimeError, match="without a pending send"):
        env.recv()
    env.send(zeros)
    with pytest.raises(RuntimeError, match="twice without recv"):
        env.send(zeros)
    for call in (lambda: env.step(zeros), env.reset, lambda: env.reset_at(torch.ones(N_ENVS, dtype=torch.bool))):
        with pytest.raises(RuntimeError, match="while a send\\(\\) is pending"):
            call()
    env.recv()
    with pytest.raises(RuntimeError, match="without a pending send"):
        env.recv()
    with pytest.raises(ValueError, match="shape"):
        env.send(torch.zeros(N_ENVS, N_AGENTS, 3))
    env.step(zeros)  # usable again; a failed send left nothing pending


@pytest.mark.gpu
def test_send_recv_on_cuda_matches_step_also_under_a_user_stream(generator):
    sync_env, async_env = make_env("cuda:0"), make_env("cuda:0")
    actions = action_sequence(sync_env, generator)
    user = torch.cuda.Stream()
    busy = torch.randn(1024, 1024, device="cuda")
    for i, a in enumerate(actions):
        expected = snapshot(sync_env.step(a))
        with torch.cuda.stream(user) if i % 2 else torch.cuda.stream(torch.cuda.current_stream()):
            async_env.send(a)
            busy = torch.tanh(busy @ busy.T / 1024)
            got = snapshot(async_env.recv())
        torch.cuda.synchronize()
        for x, y in zip(expected, got, strict=True):
            assert torch.equal(x, y)
