"""``SwarpEnv`` over discrete and multi-discrete ``Environment``s: VmasEnv's specs (categorical and
one-hot), TorchRL's own spec check and rollouts, the same bits as the raw ``Environment``, and bad
input refused with the environment intact."""

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict import TensorDict  # noqa: E402
from torchrl.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import swarp  # noqa: E402
from swarp.core.spaces import decode_torch  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from swarp.testing import forbid_host_transfers  # noqa: E402
from tests.support import DEVICES  # noqa: E402

N_ENVS = 5
#: navigation: a 2-column command; drone_navigation: 4 columns (thrust and three torques).
SCENARIOS = ["navigation", "drone_navigation"]
KINDS = ["discrete", "multidiscrete"]
ENCODINGS = pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "onehot"])
LAYOUTS = pytest.mark.parametrize("layout", ["flat", "agents"])


def make(scenario="navigation", kind="discrete", seed=1, device="cpu", **kwargs):
    return swarp.make(scenario, n_envs=N_ENVS, device=device, seed=seed, max_steps=12, action_space=kind, **kwargs)


def random_indices(sim, generator: torch.Generator) -> torch.Tensor:
    """[E, A, width] int64 valid indices of ``sim``'s space, on its device."""
    heads = sim.action_space.heads
    columns = [torch.randint(0, n, (sim.n_envs, sim.n_agents), generator=generator) for n in heads]
    return torch.stack(columns, dim=-1).to(sim.torch_device)


def encode(sim, indices: torch.Tensor, categorical: bool) -> torch.Tensor:
    """``indices`` [E, A, width] in ``SwarpEnv``'s encoding (what its spec describes)."""
    space = sim.action_space
    if categorical:
        return (indices[..., 0] if space.kind == "discrete" else indices).clone()
    rows = [torch.nn.functional.one_hot(indices[..., c], n) for c, n in enumerate(space.heads)]
    return torch.cat(rows, dim=-1)


def action_td(env: SwarpEnv, action: torch.Tensor) -> TensorDict:
    return TensorDict({env.action_key: action}, batch_size=env.batch_size, device=env.device)


@LAYOUTS
@ENCODINGS
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_specs_follow_vmas_and_pass_check_env_specs(scenario, kind, categorical, layout):
    sim = make(scenario, kind)
    env = SwarpEnv(sim, layout=layout, categorical_actions=categorical)
    assert env.continuous_actions is False and env.categorical_actions is categorical
    space = sim.action_space
    D, A = space.physical_dim, sim.n_agents
    assert (4 if scenario == "drone_navigation" else 2) == D
    spec = env.full_action_spec[env.action_key]
    expected = {
        ("discrete", True): (Categorical, (N_ENVS, A)),
        ("discrete", False): (OneHot, (N_ENVS, A, 3**D)),
        ("multidiscrete", True): (MultiCategorical, (N_ENVS, A, D)),
        ("multidiscrete", False): (MultiOneHot, (N_ENVS, A, 3 * D)),
    }[kind, categorical]
    assert type(spec) is expected[0] and spec.shape == expected[1] and spec.dtype == torch.int64
    assert env.full_action_spec_unbatched[env.action_key].shape == expected[1][1:]
    check_env_specs(env, seed=0)
    data = env.rollout(6)  # TorchRL's random policy: samples of the spec
    assert data[env.action_key].shape == (N_ENVS, 6, *expected[1][1:])
    assert torch.isfinite(data["next"][env.observation_key]).all()
    assert not bool(sim.invalid_actions())  # every sample of the spec is a valid action


def test_spec_levels_follow_action_nvec():
    sim = make("navigation", "multidiscrete", action_nvec=(5, 2))
    spec = SwarpEnv(sim).full_action_spec["action"]
    assert isinstance(spec, MultiCategorical) and spec.shape == (N_ENVS, sim.n_agents, 2)
    samples = torch.stack([spec.rand() for _ in range(200)])
    assert samples[..., 0].max() == 4 and samples[..., 1].max() == 1 and samples.min() == 0
    flat = SwarpEnv(make("navigation", "discrete", action_nvec=(5, 2)), categorical_actions=False)
    assert flat.full_action_spec["action"].space.n == 10
    multi = SwarpEnv(make("navigation", "multidiscrete", action_nvec=(5, 2)), categorical_actions=False)
    assert multi.full_action_spec["action"].shape == (N_ENVS, sim.n_agents, 7)


@LAYOUTS
@ENCODINGS
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_bits_as_the_raw_environment(scenario, kind, categorical, layout):
    """Indices stepped through ``SwarpEnv`` (in its encoding) and straight into a twin ``Environment``
    give bit-identical commands, observations and rewards."""
    raw = make(scenario, kind, seed=7)
    env = SwarpEnv(make(scenario, kind, seed=7), layout=layout, categorical_actions=categorical)
    raw.reset()
    env.reset()
    generator = torch.Generator().manual_seed(3)
    low, high = raw.action_bounds
    for _ in range(4):
        indices = random_indices(raw, generator)
        action = encode(raw, indices, categorical)
        obs, reward, *_ = raw.step(indices)
        out = env.step(action_td(env, action))["next"]
        assert torch.equal(env.sim.world.actions, raw.world.actions)
        assert torch.equal(env.sim.world.actions, decode_torch(raw.action_space, indices, low, high)[0])
        assert torch.equal(env.to_physical(action), raw.world.actions)
        assert torch.equal(env.to_indices(action).long(), indices)
        assert torch.equal(out[env.observation_key], obs)
        assert torch.equal(out[env.reward_key], reward.unsqueeze(-1))
    assert not bool(env.sim.invalid_actions()) and not bool(raw.invalid_actions())


@ENCODINGS
@pytest.mark.parametrize("kind", KINDS)
def test_invalid_indices_and_one_hot_rows_raise_the_device_flag(kind, categorical):
    """Out-of-range indices (or one-hot rows that are not one 1 among 0s) act as a zero command for
    their agent only and raise ``invalid_actions()``; the other agents act as commanded."""
    sim = make("drone_navigation", kind)
    env = SwarpEnv(sim, categorical_actions=categorical)
    env.reset()
    indices = random_indices(sim, torch.Generator().manual_seed(0))
    action = encode(sim, indices, categorical)
    if categorical:
        action[0, 0] = -1
        action[1, 2] = sim.action_space.heads[0] if kind == "discrete" else action[1, 2] + 3
    else:
        action[0, 0] = 0  # no 1 at all
        action[1, 2, :2] = 1  # two 1s in the first head
        action[2, 1, -1] = 2  # a value neither 0 nor 1
    bad = torch.zeros(N_ENVS, sim.n_agents, dtype=torch.bool)
    bad[0, 0] = bad[1, 2] = True
    bad[2, 1] = not categorical
    assert not bool(sim.invalid_actions())
    env.step(action_td(env, action))
    assert bool(sim.invalid_actions())
    low, high = sim.action_bounds
    expected = decode_torch(sim.action_space, indices, low, high)[0]
    assert torch.equal(sim.world.actions[bad], torch.zeros_like(expected[bad]))
    assert torch.equal(sim.world.actions[~bad], expected[~bad])
    assert expected[bad].abs().sum() > 0  # the zeroing is the flag's doing, not the indices' command


def test_float_one_hot_and_bool_one_hot_step_as_int_one_hot():
    sims = [make("navigation", "multidiscrete", seed=2) for _ in range(3)]
    envs = [SwarpEnv(sim, categorical_actions=False) for sim in sims]
    indices = random_indices(sims[0], torch.Generator().manual_seed(5))
    one_hot = encode(sims[0], indices, categorical=False)
    for env, action in zip(envs, (one_hot, one_hot.float(), one_hot.bool()), strict=True):
        env.reset()
        env.step(action_td(env, action))
    assert torch.equal(sims[0].obs, sims[1].obs) and torch.equal(sims[0].obs, sims[2].obs)
    nan = one_hot.float()
    nan[0, 0, 0] = float("nan")
    envs[1].step(action_td(envs[1], nan))
    assert bool(sims[1].invalid_actions()) and not bool(sims[0].invalid_actions())


@pytest.mark.parametrize("kind", KINDS)
def test_bad_inputs_are_refused_with_the_environment_intact(kind):
    sim, twin = make("navigation", kind, seed=4), make("navigation", kind, seed=4)
    cat, hot = SwarpEnv(sim), SwarpEnv(sim, categorical_actions=False)
    cat.reset()
    twin.reset()
    indices = random_indices(sim, torch.Generator().manual_seed(1))
    good = encode(sim, indices, categorical=True)
    good_hot = encode(sim, indices, categorical=False)
    before = sim.obs.clone()
    cases = [
        (cat, good.float(), TypeError, "integer indices"),
        (cat, good.bool(), TypeError, "integer indices"),
        (cat, good.unsqueeze(-1), ValueError, "must have shape"),
        (cat, good[:, :1], ValueError, "must have shape"),
        (hot, good_hot[..., :-1], ValueError, "one-hot"),
        (hot, good, ValueError, "must have shape"),
        (hot, good_hot.to(torch.complex64), TypeError, "one-hot tensor"),
    ]
    for env, action, error, message in cases:
        with pytest.raises(error, match=message):
            env.step(action_td(env, action))
    with pytest.raises(KeyError, match=r"n_envs, n_agents"):
        cat.step(TensorDict({"other": good}, batch_size=[N_ENVS]))
    assert torch.equal(sim.obs, before) and not bool(sim.invalid_actions())
    cat.step(action_td(cat, good))
    twin.step(indices)
    assert torch.equal(sim.obs, twin.obs)  # the refused inputs left no trace


def test_constructor_errors_and_continuous_only_options():
    sim = make("navigation", "discrete")
    with pytest.raises(ValueError, match="continuous actions only"):
        SwarpEnv(sim, action_low=-1.0, action_high=1.0)
    with pytest.raises(TypeError, match="categorical_actions must be a bool"):
        SwarpEnv(sim, categorical_actions=1)
    continuous = SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu"))
    with pytest.raises(ValueError, match="continuous"):
        continuous.to_indices(torch.zeros(2, continuous.n_agents, 2))


def test_continuous_specs_do_not_depend_on_categorical_actions():
    specs = []
    for categorical in (True, False):
        env = SwarpEnv(swarp.make("navigation", n_envs=3, device="cpu"), categorical_actions=categorical)
        assert env.continuous_actions is True and env.categorical_actions is categorical
        specs.append(env.full_action_spec)
    assert isinstance(specs[0]["action"], Bounded) and specs[0] == specs[1]


@DEVICES
@ENCODINGS
@pytest.mark.parametrize("kind", KINDS)
def test_discrete_step_reads_no_values_on_the_host(device, kind, categorical):
    sim = make("drone_navigation", kind, device=device)
    env = SwarpEnv(sim, layout="agents", categorical_actions=categorical)
    env.reset()
    indices = random_indices(sim, torch.Generator().manual_seed(0))
    action = encode(sim, indices, categorical)
    action.view(-1)[0] = -1 if categorical else 3  # invalid: flagged on the device, not checked here
    td = action_td(env, action)
    with forbid_host_transfers():
        out = env.step(td)
    assert out["next", "agents", "observation"].device == sim.torch_device
    assert bool(sim.invalid_actions())
