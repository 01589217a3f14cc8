"""send()/recv(): same bits as step(), clear misuse errors, and physics overlapping caller work."""

import time

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
def test_send_recv_matches_step_bit_for_bit(fused, placement, generator):
    """Both CPU placements of the step, forced (``plan.async_cpu``): the worker thread, and inline
    in send()."""
    sync_env, async_env = make_env(fused=fused), make_env(fused=fused, plan={"async_cpu": placement})
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
    assert async_env.async_step.last_threaded == (placement == "thread")


class FakeClock:
    """``time.perf_counter`` stand-in that only moves when told to."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(placement: asynchronous.CpuPlacement, clock: FakeClock, n: int, period, step_s: float = 0.005):
    """``n`` sends; after each, the clock advances by ``period(threaded)`` [s]. Returns the
    placements chosen."""
    chosen = []
    for _ in range(n):
        threaded = placement.next(step_s)
        chosen.append(threaded)
        clock.now += period(threaded)
    return chosen


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(asynchronous.time, "perf_counter", fake)
    return fake


def test_placement_keeps_the_worker_when_it_shortens_the_loop(clock):
    """Caller work of 10 ms and a 5 ms step: inline 15 ms per send, in the worker 10 ms."""
    placement = asynchronous.CpuPlacement()
    settle, probe = asynchronous.PROBE_SENDS, 2 * asynchronous.PROBE_SENDS
    chosen = drive(placement, clock, settle + probe + 1 + 20, lambda threaded: 0.010 if threaded else 0.015)
    assert not any(chosen[:settle]), "settling sends run inline"
    measured = chosen[settle : settle + 4]
    assert all(a != b for a, b in zip(measured[:-1], measured[1:], strict=True)), "the measurement alternates"
    assert placement.period_s == {"inline": pytest.approx(0.015), "thread": pytest.approx(0.010)}
    assert placement.threaded and all(chosen[settle + probe :])


def test_placement_stays_inline_when_the_worker_does_not_pay(clock):
    """No caller work: the worker only adds its hand-off (and contention) to each period."""
    placement = asynchronous.CpuPlacement()
    n = 3 * asynchronous.PROBE_SENDS + 20
    chosen = drive(placement, clock, n, lambda threaded: 0.0051 if threaded else 0.005)
    assert not placement.threaded and not any(chosen[-20:])
    # A worker only 1% faster is not worth it either (THREAD_MARGIN).
    placement = asynchronous.CpuPlacement()
    drive(placement, clock, n, lambda threaded: 0.0099 if threaded else 0.010)
    assert not placement.threaded


def test_placement_median_ignores_a_rare_long_iteration(clock):
    """A PPO update makes one period long; it must not decide for the placement it landed on."""
    placement = asynchronous.CpuPlacement()
    sends = iter(range(1000))
    drive(placement, clock, 4 * asynchronous.PROBE_SENDS, lambda threaded: 1.0 if next(sends) == 9 else 0.005)
    assert placement.period_s["inline"] == pytest.approx(0.005) and placement.period_s["thread"] == pytest.approx(0.005)
    assert not placement.threaded


def test_placement_measures_again_after_holding(clock, monkeypatch):
    """The caller's loop changes (its work between send and recv grows): the next measurement
    after ``HOLD_SENDS`` sends moves the step to the worker."""
    monkeypatch.setattr(asynchronous, "HOLD_SENDS", 10)
    placement = asynchronous.CpuPlacement()
    work = [0.0]

    def period(threaded):  # the worker hides the caller's work, inline adds it
        return 0.005 + (0.0 if threaded else work[0])

    drive(placement, clock, 3 * asynchronous.PROBE_SENDS, period)
    assert not placement.threaded
    work[0] = 0.010
    drive(placement, clock, 10 + 2 * asynchronous.PROBE_SENDS + 2, period)
    assert placement.threaded


def test_short_steps_stay_inline_unmeasured(clock):
    placement = asynchronous.CpuPlacement()
    chosen = drive(placement, clock, 100, lambda threaded: 0.05, step_s=asynchronous.OVERLAP_MIN_S / 2)
    assert not any(chosen) and placement.period_s == {"inline": None, "thread": None}


def test_forced_placements():
    assert all(asynchronous.CpuPlacement("thread").next(1.0) for _ in range(50))
    assert not any(asynchronous.CpuPlacement("inline").next(1.0) for _ in range(50))
    # "long" (EnvPool groups): the worker for every step but those too short to pay the hand-off.
    long = asynchronous.CpuPlacement("long")
    assert long.next(None), "an untimed step goes to the worker"
    assert long.next(asynchronous.OVERLAP_MIN_S) and long.threaded
    assert not long.next(asynchronous.OVERLAP_MIN_S / 2) and not long.threaded


def test_a_real_slow_step_goes_to_the_worker_when_the_caller_works(monkeypatch):
    """End to end, real clock: a step made 5 ms long and 10 ms of caller work between send and
    recv end up in the worker; the results stay the same bits as step()."""
    sync_env, env = make_env(), make_env()
    slow = env.launches.run_step

    def long_step():
        slow()
        time.sleep(0.005)

    monkeypatch.setattr(env.launches, "run_step", long_step)
    actions = torch.zeros(N_ENVS, N_AGENTS, env.act_dim)
    for _ in range(3 * asynchronous.PROBE_SENDS + 4):
        expected = snapshot(sync_env.step(actions))
        env.send(actions)
        time.sleep(0.010)
        assert all(torch.equal(x, y) for x, y in zip(expected, snapshot(env.recv()), strict=True))
    assert env.async_step.placement.threaded and env.async_step.last_threaded


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
    """One environment's ``send`` queues the step on torch's current stream, a user stream or not."""
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
    assert not async_env.async_step.side_stream


def closed_calls(env: swarp.Environment) -> dict:
    """Every public method that runs or reads the env, called as a user would."""
    zeros = torch.zeros(N_ENVS, N_AGENTS, 2)
    return {
        "step": lambda: env.step(zeros),
        "send": lambda: env.send(zeros),
        "recv": env.recv,
        "reset": env.reset,
        "reset_at": lambda: env.reset_at(torch.ones(N_ENVS, dtype=torch.bool)),
        "get_state": env.get_state,
        "set_state": lambda: env.set_state({}),
        "set_agent_params": lambda: env.set_agent_params(max_speed=0.5),
        "render": lambda: env.render(width=16, height=16),
    }


@pytest.mark.parametrize("fused", [True, False])
def test_close_releases_the_worker_and_every_later_call_raises(fused):
    """Issue 29 item 7: ``Environment`` had no ``close()``."""
    env = make_env(fused=fused, plan={"async_cpu": "thread"})
    env.send(torch.zeros(N_ENVS, N_AGENTS, 2))
    env.recv()
    obs = env.obs.clone()
    env.close()
    env.close()  # idempotent
    assert env.async_step._executor._shutdown, "the worker thread is stopped"
    if fused:
        assert env.launches.step_seq._graph is None and env.launches.step_seq._program is None, "graphs are dropped"
    for name, call in closed_calls(env).items():
        with pytest.raises(RuntimeError, match=f"the Environment is closed: {name}\\(\\) cannot run after close"):
            call()
    assert torch.equal(env.obs, obs), "tensors already returned stay readable and unchanged"


def test_close_finishes_a_pending_send(monkeypatch):
    """A step pending in the worker at close() completes (it is never half-done) and is dropped."""
    sync_env, env = make_env(), make_env(plan={"async_cpu": "thread"})
    slow = env.launches.run_step

    def long_step():
        time.sleep(0.05)  # still running when close() is called
        slow()

    monkeypatch.setattr(env.launches, "run_step", long_step)
    actions = torch.full((N_ENVS, N_AGENTS, 2), 0.5)
    sync_env.step(actions)
    env.send(actions)
    env.close()
    assert not env.async_step.pending
    assert torch.equal(env.state.pos, sync_env.state.pos) and torch.equal(env.obs, sync_env.obs)
    with pytest.raises(RuntimeError, match="the Environment is closed: recv"):
        env.recv()


def test_close_without_send_and_the_flags_stay_readable():
    env = make_env()
    env.close()
    assert env.async_step is None
    assert not bool(env.invalid_actions())
