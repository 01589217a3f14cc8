"""Discrete and multi-discrete actions (swarp.core.spaces): VMAS 1.5.2's mapping, checked against
VMAS itself; the Warp decode against its torch reference; graph, eager, shards and send alike;
bad input refused with the environment intact."""

import math
import pickle

import pytest
import torch

import swarp
from swarp.core.spaces import ActionSpace, decode_torch
from tests.support import DEVICES

#: Scenarios over every dynamics model: holonomic, diff-drive, bicycle, and drones (a [0, T] box).
CASES = [
    ("navigation", {}),
    ("navigation", {"model": "diff_drive"}),
    ("navigation", {"model": "kinematic_bicycle"}),
    ("drone_navigation", {}),
]
KINDS = ["discrete", "multidiscrete"]


def random_indices(env, generator: torch.Generator, out_of_range: float = 0.0) -> torch.Tensor:
    """[E, A, width] int64 indices of ``env``'s space; a share ``out_of_range`` of them invalid."""
    heads = env.action_space.heads
    shape = (env.n_envs, env.n_agents)
    columns = [torch.randint(0, n, shape, generator=generator) for n in heads]
    indices = torch.stack(columns, dim=-1)
    if out_of_range:
        flip = torch.rand(indices.shape, generator=generator) < out_of_range
        wrong = torch.where(torch.rand(indices.shape, generator=generator) < 0.5, -1, torch.tensor(heads) + 2)
        indices = torch.where(flip, wrong, indices)
    return indices.to(env.torch_device)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nvec", [None, 2, 5, (4, 3)])
def test_decode_matches_vmas(kind, nvec):
    """Every index of the space decodes to the command VMAS 1.5.2's ``_set_action`` gives, bit for bit."""
    vmas = pytest.importorskip("vmas")
    levels = [3, 3] if nvec is None else [nvec] * 2 if isinstance(nvec, int) else list(nvec)
    n_choices = math.prod(levels)
    venv = vmas.make_env(
        "navigation", num_envs=n_choices, device="cpu", continuous_actions=False,
        multidiscrete_actions=kind == "multidiscrete", n_agents=1, seed=0,
    )  # fmt: skip
    agent = venv.agents[0]
    agent.discrete_action_nvec = levels
    flat = torch.arange(n_choices)
    columns = torch.stack([flat // levels[1], flat % levels[1]], dim=-1)
    vmas_input = flat.unsqueeze(-1) if kind == "discrete" else columns
    venv._set_action(vmas_input, agent)
    expected = agent.action.u / agent.action.u_multiplier_tensor

    space = ActionSpace.build(kind, nvec, 2)
    u = float(agent.action.u_range_tensor[0])
    low, high = torch.full((1, 2), -u), torch.full((1, 2), u)
    ours, bad = decode_torch(space, vmas_input.unsqueeze(1), low, high)
    assert not bad.any()
    assert torch.equal(ours[:, 0], expected)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scenario,options", CASES)
def test_warp_decode_equals_torch_reference(scenario, options, kind):
    """The step's Warp decode writes the torch reference's command, out-of-range indices included."""
    env = swarp.make(scenario, n_envs=6, device="cpu", seed=3, action_space=kind, fused=True, **options)
    generator = torch.Generator().manual_seed(1)
    low, high = env.action_bounds
    for _ in range(3):
        indices = random_indices(env, generator, out_of_range=0.2)
        env.step(indices)
        expected, bad = decode_torch(env.action_space, indices, low, high)
        assert bad.any() and not bad.all()
        assert torch.equal(env.world.actions, expected)
        assert bool(env.invalid_actions())
    assert env.action_space.physical_dim == env.stepper.act_dim


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scenario,options", CASES[:2] + CASES[3:])
def test_fused_equals_torch_path(scenario, options, kind):
    """A discrete rollout of the fused path and of the torch reference path: same commands, and the
    same observations and rewards within the scenario's parity tolerance."""
    envs = [
        swarp.make(scenario, n_envs=4, device="cpu", seed=5, action_space=kind, fused=fused, auto_reset=True, **options)
        for fused in (True, False)
    ]
    generator = torch.Generator().manual_seed(2)
    for _ in range(15):
        indices = random_indices(envs[0], generator)
        outs = [env.step(indices) for env in envs]
        assert torch.equal(envs[0].world.actions, envs[1].world.actions)
        torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-4, rtol=0)
        torch.testing.assert_close(outs[0][1], outs[1][1], atol=1e-4, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_graph_replay_eager_same_bits(kind):
    """The decode inside a captured step, a recorded replay and eager launches: same bits."""
    generator = torch.Generator().manual_seed(4)
    base = swarp.make("navigation", n_envs=5, device="cpu", seed=9, action_space=kind, auto_reset=True)
    sequence = [random_indices(base, generator, out_of_range=0.05) for _ in range(25)]
    results = []
    for launch in ("graph", "replay", "eager"):
        env = swarp.make(
            "navigation", n_envs=5, device="cpu", seed=9, action_space=kind, auto_reset=True, plan={"launch": launch}
        )
        assert env.plan.launch == launch
        obs = [env.step(a)[0].clone() for a in sequence]
        results.append((torch.stack(obs), env.state.pos.clone(), bool(env.invalid_actions())))
    for other in results[1:]:
        assert torch.equal(results[0][0], other[0]) and torch.equal(results[0][1], other[1])
        assert results[0][2] == other[2] is True


def test_same_seed_same_bits_and_index_dtypes():
    """Two environments with one seed and int64 / int32 indices of the same values: same bits."""
    generator = torch.Generator().manual_seed(6)
    a, b = (swarp.make("navigation", n_envs=4, device="cpu", seed=2, action_space="discrete") for _ in range(2))
    for _ in range(10):
        indices = random_indices(a, generator)
        out_a, out_b = a.step(indices)[0].clone(), b.step(indices.to(torch.int32))[0]
        assert torch.equal(out_a, out_b)


def test_cpu_shards_and_send_recv_match_one_thread():
    """Shards decode their own rows; send/recv decodes as step does: both equal one thread's step."""
    generator = torch.Generator().manual_seed(7)
    kwargs = dict(n_envs=1024, device="cpu", seed=1, action_space="multidiscrete", auto_reset=True, n_agents=3)
    one = swarp.make("navigation", cpu_threads=1, **kwargs)
    sharded = swarp.make("navigation", plan={"cpu_shards": 2}, cpu_threads=2, **kwargs)
    sent = swarp.make("navigation", cpu_threads=1, **kwargs)
    assert sharded.plan.cpu_shards == 2
    for _ in range(5):
        indices = random_indices(one, generator)
        expected = one.step(indices)[0].clone()
        assert torch.equal(sharded.step(indices)[0], expected)
        sent.send(indices)
        assert torch.equal(sent.recv()[0], expected)
    sharded.close()
    sent.close()


def test_bad_input_is_refused_and_leaves_the_env_intact():
    env = swarp.make("navigation", n_envs=3, device="cpu", seed=0, action_space="discrete", n_agents=2)
    state = env.get_state()
    good = torch.zeros(3, 2, 1, dtype=torch.int64)
    with pytest.raises(TypeError, match="integer indices"):
        env.step(good.float())
    with pytest.raises(ValueError, match=r"\[n_envs, n_agents, 1\] = \[3, 2, 1\]"):
        env.step(torch.zeros(3, 2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"\[n_envs, n_agents, 1\]"):
        env.step(torch.zeros(3, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        env.step([[0, 0]] * 3)
    after = env.get_state()
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, after[key]), key
    assert not bool(env.invalid_actions())
    env.step(good)  # still steps
    assert not bool(env.invalid_actions())


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"action_space": "categorical"}, ValueError, "action_space must be one of"),
        ({"action_space": "discrete", "action_nvec": 1}, ValueError, "each an int >= 2"),
        ({"action_space": "discrete", "action_nvec": (3, 3, 3)}, ValueError, "2 level counts"),
        ({"action_space": "discrete", "action_nvec": "33"}, TypeError, "sequence of ints"),
        ({"action_space": "continuous", "action_nvec": 3}, ValueError, "discrete action spaces"),
    ],
)
def test_bad_space_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        swarp.make("navigation", n_envs=2, device="cpu", **kwargs)


def test_out_of_range_acts_as_zero_and_flags():
    env = swarp.make("navigation", n_envs=2, device="cpu", seed=0, action_space="multidiscrete", n_agents=2)
    indices = torch.tensor([[[2, 2], [3, 0]], [[0, -1], [1, 1]]])
    env.step(indices)
    assert bool(env.invalid_actions())
    assert torch.equal(env.world.actions[0, 1], torch.zeros(2)) and torch.equal(env.world.actions[1, 0], torch.zeros(2))
    assert torch.equal(env.world.actions[0, 0], torch.ones(2))  # index 2 of 3: the top level
    assert torch.equal(env.world.actions[1, 1], -torch.ones(2))  # index 1 of 3: the bottom level
    env.clear_flags()
    env.step(torch.zeros_like(indices))
    assert not bool(env.invalid_actions())


def test_pickle_keeps_the_space():
    env = swarp.make("navigation", n_envs=2, device="cpu", action_space="discrete", action_nvec=(5, 2))
    copy = pickle.loads(pickle.dumps(env))
    assert copy.action_space == env.action_space == ActionSpace("discrete", 2, (5, 2))
    assert copy.act_dim == 1 and copy.action_space.heads == (10,)


@DEVICES
@pytest.mark.parametrize("kind", KINDS)
def test_cpu_and_device_agree(device, kind):
    """The decode on the device equals the CPU's (float tolerance: only levels of 3 here, exact)."""
    generator = torch.Generator().manual_seed(8)
    envs = [swarp.make("drone_navigation", n_envs=4, device=d, seed=1, action_space=kind) for d in ("cpu", device)]
    for _ in range(4):
        indices = random_indices(envs[0], generator, out_of_range=0.1)
        for env in envs:
            env.step(indices.to(env.torch_device))
        torch.testing.assert_close(envs[1].world.actions.cpu(), envs[0].world.actions, atol=1e-6, rtol=0)
        assert bool(envs[0].invalid_actions()) == bool(envs[1].invalid_actions())


def test_pool_distributed_shard_and_testing_helpers():
    """An EnvPool of discrete groups, a distributed shard, and swarp.testing's random actions and
    scenario contract all take the space."""
    from swarp.distributed import make_shard
    from swarp.testing import random_actions

    pool = swarp.make("navigation", n_envs=4, batch_size=2, device="cpu", seed=0, action_space="discrete")
    generator = torch.Generator().manual_seed(0)
    pool.async_reset()
    space, n_agents = pool.groups[0].action_space, pool.groups[0].n_agents
    for _ in range(4):
        obs, reward, terminated, truncated, info = pool.recv()
        pool.send(space.sample(2, n_agents, generator), info["env_id"])
    pool.recv()
    with pytest.raises(TypeError, match="integer indices"):
        pool.send(torch.zeros(2, n_agents, 1))
    pool.send(space.sample(2, n_agents, generator))  # the group still awaits its actions
    assert not any(bool(group.invalid_actions()) for group in pool.groups)
    shard = make_shard("navigation", 8, device="cpu", action_space="multidiscrete", action_nvec=5)
    assert shard.action_space.heads == (5, 5)
    indices = random_actions(shard, torch.Generator().manual_seed(1))
    assert indices.dtype == torch.int64 and indices.shape == (shard.n_envs, shard.n_agents, 2)
    assert int(indices.min()) >= 0 and int(indices.max()) <= 4 and len(indices.unique()) > 1
    shard.step(indices)
    assert not bool(shard.invalid_actions())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nvec", [None, 2, 5, (4, 3, 2, 7)])
def test_encode_is_the_nearest_level(kind, nvec):
    """encode_torch inverts decode_torch on every level, and maps any command to its nearest level
    (drone boxes [0, T] and empty columns included)."""
    from swarp.core.spaces import encode_torch

    env = swarp.make("drone_navigation", n_envs=3, device="cpu", action_space=kind, action_nvec=nvec)
    low, high = env.action_bounds
    generator = torch.Generator().manual_seed(3)
    indices = random_indices(env, generator)
    levels, _ = decode_torch(env.action_space, indices, low, high)
    again, _ = decode_torch(env.action_space, encode_torch(env.action_space, levels, low, high), low, high)
    assert torch.equal(again, levels)
    command = low + (high - low) * (1.4 * torch.rand(3, env.n_agents, 4, generator=generator) - 0.2)
    nearest, _ = decode_torch(env.action_space, encode_torch(env.action_space, command, low, high), low, high)
    step = (high - low) / (torch.tensor(env.action_space.nvec) - 1)
    assert bool(((nearest - command.clamp(low, high)).abs() <= step / 2 + 1e-6).all())


@DEVICES
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_discrete_step_makes_no_host_transfer(device, fused, kind):
    """The decode (the Warp launch, or the torch reference's, which a CUDA capture holds) reads no
    value on the host and copies nothing up to the device."""
    from swarp.testing import forbid_host_transfers

    env = swarp.make("navigation", n_envs=4, device=device, seed=0, action_space=kind, fused=fused, auto_reset=True)
    indices = random_indices(env, torch.Generator().manual_seed(0), out_of_range=0.1)
    env.step(indices)  # the first step captures or records
    with forbid_host_transfers():
        for _ in range(3):
            env.step(indices)
    assert bool(env.invalid_actions())
