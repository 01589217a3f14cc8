"""CPU shards (``swarp.env.shards``, ``plan.cpu_shards``): an environment stepped in slices over
threads gives the very bits of the same environment on one thread, whatever is read or written
between its steps."""

import pickle

import pytest
import torch

import swarp
from swarp.runtime.plan import MAX_SHARD_ENVS, MIN_SHARD_ENVS
from tests.support import assert_bit_identical, random_actions, record

N_ENVS = 7  # uneven slices: 4 + 3, 3 + 2 + 2


def make(name: str, shards: int, **kwargs) -> swarp.Environment:
    kwargs = {"auto_reset": True, "max_steps": 9, "plan": {"cpu_shards": shards}, **kwargs}
    return swarp.make(name, n_envs=N_ENVS, device="cpu", seed=3, **kwargs)


def trajectory(env: swarp.Environment, steps: int = 24) -> list[dict]:
    """Random in-bounds steps (several auto-resets), a ``reset_at`` halfway, every step recorded."""
    gen = torch.Generator().manual_seed(0)
    rows = []
    for t in range(steps):
        rows.append(record(env, env.step(random_actions(env, gen, overshoot=0.0))))
        if t == steps // 2:
            mask = torch.arange(N_ENVS) % 3 == 0
            env.reset_at(mask)
            rows.append({"obs": env.obs.clone(), **env.get_state()})
    return rows


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_every_scenario_steps_to_the_same_bits_in_two_and_three_shards(name):
    expected = trajectory(make(name, 1))
    for shards in (2, 3):
        env = make(name, shards)
        assert env.launches.shards is not None and [hi - lo for lo, hi in env.launches.shards.bounds] == (
            [4, 3] if shards == 2 else [3, 2, 2]
        )
        assert_bit_identical(trajectory(env), expected)


def test_shards_view_the_environments_framework_buffers_and_copy_the_rest():
    env = make("navigation", 2)
    shards = env.launches.shards
    for shard, (lo, hi) in zip(shards.envs, shards.bounds, strict=True):
        for mine, theirs in ((env.obs, shard.obs), (env.state.pos, shard.state.pos), (env.done, shard.done)):
            assert theirs.data_ptr() == mine[lo:hi].data_ptr()
    # The scenario's memory is the shard's own, linked by copies.
    goals = env.scenario.state_tensors()["goals"]
    assert goals.data_ptr() != shards.envs[0].scenario.state_tensors()["goals"].data_ptr()
    assert all(n >= 20 for n in shards.n_views)


@pytest.mark.parametrize(
    "options",
    [
        {"lidar_rays": 6},
        {"randomize_params": {"mass": (0.5, 2.0), "max_speed": (0.5, 1.0)}},
        {"auto_reset": False},
        {"use_graph": False},
        {"dtype": "float64"},
        {"neighbor_method": "grid", "n_agents": 12},
        {"neighbor_method": "grid", "n_agents": 12, "use_graph": False},
    ],
    ids=["lidar", "randomized-params", "no-auto-reset", "replay", "float64", "grid", "grid-replay"],
)
def test_lidar_parameters_resets_replay_float64_and_the_grid_shard_to_the_same_bits(options):
    assert_bit_identical(trajectory(make("navigation", 3, **options)), trajectory(make("navigation", 1, **options)))


def test_writes_between_steps_reach_the_shards():
    """set_state, set_agent_params, a write through ``env.state``, reset(seed) and send/recv: the
    sharded env follows each exactly as the one-thread env does."""
    donor = make("formation", 1)
    gen = torch.Generator().manual_seed(5)
    for _ in range(12):  # past the episodes' end (max_steps 9): its final rows are not the env's
        donor.step(random_actions(donor, gen, overshoot=0.0))
    snapshot = donor.get_state()

    def run(env):
        gen = torch.Generator().manual_seed(1)
        rows = []
        env.set_state(snapshot)
        rows.append(record(env, env.step(random_actions(env, gen, overshoot=0.0))))
        env.set_agent_params(max_speed=0.5 * float(env.agent_params[0, 0, 2]))
        rows.append(record(env, env.step(random_actions(env, gen, overshoot=0.0))))
        with torch.no_grad():
            env.state.pos[2, 1] += 0.05
        rows.append(record(env, env.step(random_actions(env, gen, overshoot=0.0))))
        obs, info = env.reset(seed=11)
        rows.append({"obs": obs.clone(), **env.get_state()})
        env.send(random_actions(env, gen, overshoot=0.0))
        rows.append(record(env, env.recv()))
        return rows

    assert_bit_identical(run(make("formation", 3)), run(make("formation", 1)))


def test_health_flags_of_a_shard_reach_the_environment():
    env = make("navigation", 3)
    gen = torch.Generator().manual_seed(2)
    env.step(random_actions(env, gen, overshoot=0.0))
    assert not bool(env.non_finite()) and not bool(env.invalid_actions())
    with torch.no_grad():
        env.state.pos[5, 0, 0] = float("nan")  # env 5: the third shard's
    actions = random_actions(env, gen, overshoot=0.0)
    actions[6, 0, 0] = float("nan")
    env.step(actions)
    assert bool(env.non_finite()) and env.non_finite_envs().tolist() == [5]
    assert bool(env.invalid_actions())
    env.clear_flags()
    env.reset()
    env.step(random_actions(env, gen, overshoot=0.0))
    assert not bool(env.non_finite()) and not bool(env.invalid_actions())


def test_the_rule_shards_only_with_enough_threads_and_envs():
    def shards(n_envs, threads, **kwargs):
        env = swarp.make("navigation", n_envs=n_envs, n_agents=2, device="cpu", cpu_threads=threads, **kwargs)
        return env.plan.cpu_shards

    assert shards(2 * MIN_SHARD_ENVS, 2) == 2
    assert shards(2 * MIN_SHARD_ENVS - 1, 16) == 1  # too few envs for two shards
    assert shards(16 * MIN_SHARD_ENVS, 1) == 1  # one thread
    assert shards(16 * MIN_SHARD_ENVS, 64) == 16  # as many as have MIN_SHARD_ENVS envs each
    assert shards(2 * MAX_SHARD_ENVS, 2) == 2
    assert shards(2 * MAX_SHARD_ENVS + 1, 2) == 1  # two threads' shards would be too large
    assert shards(16 * MIN_SHARD_ENVS, 16, fused=False) == 1  # the torch reference holds the GIL
    env = swarp.make("navigation", n_envs=4, device="cpu")
    assert env.plan.cpu_shards == 1 and env.launches.shards is None


def test_bad_shard_requests_are_errors_that_say_why():
    with pytest.raises(ValueError, match="cpu_threads must be"):
        swarp.make("navigation", n_envs=4, device="cpu", cpu_threads=0)
    with pytest.raises(ValueError, match="more shards than envs"):
        swarp.make("navigation", n_envs=2, device="cpu", plan={"cpu_shards": 3})
    with pytest.raises(ValueError, match="only fused kernels"):
        swarp.make("navigation", n_envs=4, device="cpu", fused=False, plan={"cpu_shards": 2})
    with pytest.raises(ValueError, match="cpu_shards must be an int"):
        swarp.make("navigation", n_envs=4, device="cpu", plan={"cpu_shards": 0})


def test_a_sharded_env_pickles_and_closes():
    env = make("navigation", 2)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.plan.cpu_shards == 2 and copy.launches.shards is not None
    assert_bit_identical(trajectory(copy, 6), trajectory(make("navigation", 2), 6))
    env.close()
    assert all(shard.closed for shard in env.launches.shards.envs)
    with pytest.raises(RuntimeError, match="closed"):
        env.step(torch.zeros(N_ENVS, env.n_agents, env.act_dim))


def test_invalidate_links_the_buffers_again_and_keeps_the_bits():
    env, expected = make("navigation", 2), make("navigation", 1)
    gen = torch.Generator().manual_seed(4)
    actions = [random_actions(env, gen, overshoot=0.0) for _ in range(4)]
    first = [record(expected, expected.step(a)) for a in actions]
    rows = [record(env, env.step(a)) for a in actions[:2]]
    old = env.launches.shards._step_seqs
    env.invalidate()
    rows += [record(env, env.step(a)) for a in actions[2:]]
    assert env.launches.shards._step_seqs is not old
    assert_bit_identical(rows, first)


def test_send_on_a_worker_thread_captures_the_shards_graphs_on_the_caller_s_thread():
    env = make("navigation", 2, plan={"cpu_shards": 2, "async_cpu": "thread"})
    expected = make("navigation", 1)
    gen = torch.Generator().manual_seed(6)
    actions = random_actions(env, gen, overshoot=0.0)
    env.launches.shards.invalidate()  # no graph until the first send captures them
    env.send(actions)
    assert all(seq._graph is not None for seq in env.launches.shards._step_seqs)
    assert env.async_step.last_threaded
    assert_bit_identical([record(env, env.recv())], [record(expected, expected.step(actions))])


def test_a_grad_mode_step_between_sharded_steps_gives_the_same_bits():
    def run(env):
        gen = torch.Generator().manual_seed(8)
        # The grad step is the 9th: every episode ends in it (max_steps 9) and restarts through the shards.
        rows = [record(env, env.step(random_actions(env, gen, overshoot=0.0))) for _ in range(8)]
        actions = random_actions(env, gen, overshoot=0.0).requires_grad_(True)
        obs, reward, terminated, truncated, info = env.step(actions)
        reward.sum().backward()
        rows.append({"obs": obs.detach().clone(), "grad": actions.grad.clone(), **env.get_state()})
        rows += [record(env, env.step(random_actions(env, gen, overshoot=0.0))) for _ in range(8)]
        return rows

    assert_bit_identical(run(make("navigation", 2)), run(make("navigation", 1)))


def test_shard_graphs_replay_on_native_workers_and_recorded_launches_on_a_pool():
    graphs, launches = make("navigation", 3), make("navigation", 3, use_graph=False)
    for env in (graphs, launches):
        env.step(torch.zeros(N_ENVS, env.n_agents, env.act_dim))
    assert len(graphs.launches.shards._workers) == 2 and graphs.launches.shards._pool is None
    assert launches.launches.shards._workers is None and launches.launches.shards._pool is not None
    graphs.close()
    assert not any(worker._thread.is_alive() for worker in graphs.launches.shards._workers)
