"""Pickling and copying an ``Environment`` or an ``EnvPool`` (``swarp/env/environment.py``, ``pool.py``).

An environment pickles as what it was built from (scenario as given, constructor arguments) and
unpickles freshly reset: it then steps bit for bit like a fresh env made with the same arguments.
Its state travels only in a ``get_state`` snapshot; ``copy.copy`` / ``copy.deepcopy`` rebuild too.
What does not pickle is named in a ``TypeError``.
"""

import copy
import pickle
import types

import pytest
import torch

import swarp
from swarp.core.params import ParamRandomization
from swarp.env.pool import EnvPool
from swarp.scenarios.navigation import NavigationScenario
from tests.support import assert_bit_identical, noise_sequence, rollout

N_STEPS = 40
#: Few envs and agents, short episodes (auto-resets inside a rollout).
BASE = dict(n_envs=3, device="cpu", seed=7, n_agents=3, max_steps=12, auto_reset=True)
#: Configurations whose every argument must survive the round trip.
CONFIGS = {
    "fused": {},
    "torch_float64_offset_lidar": dict(
        fused=False,
        dtype="float64",
        env_offset=5,
        lidar_rays=3,
        lidar_range=0.7,
        clone_outputs=True,
        randomize_params=ParamRandomization({"mass": (0.5, 2.0)}, relative=True),
        n_obstacles=2,
    ),
}


def build(config: str) -> swarp.Environment:
    return swarp.make("navigation", **{**BASE, **CONFIGS[config]})


def diverge(env: swarp.Environment, generator: torch.Generator, n_steps: int = 9) -> None:
    """Move ``env`` away from its construction state (a reseeded reset, then steps)."""
    env.reset(seed=11)
    for actions in noise_sequence(env, n_steps, generator):
        env.step(actions.to(env.dtype))


def dtype_noise(env: swarp.Environment, generator: torch.Generator) -> list[torch.Tensor]:
    return [a.to(env.dtype) for a in noise_sequence(env, N_STEPS, generator)]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_unpickled_env_steps_like_a_fresh_one_made_alike(config, generator):
    env = build(config)
    diverge(env, generator)
    restored = pickle.loads(pickle.dumps(env))
    fresh = build(config)
    assert type(restored) is swarp.Environment and restored is not env
    attributes = "n_envs n_agents obs_dim act_dim device dtype env_offset max_steps auto_reset clone_outputs fused plan"
    for attribute in attributes.split():
        assert getattr(restored, attribute) == getattr(fresh, attribute), attribute
    assert restored.seed_value == BASE["seed"]  # the seed it was built with, not the later reset's
    assert (restored.lidar is None) == (fresh.lidar is None) and restored.randomization == fresh.randomization
    state, fresh_state = restored.get_state(), fresh.get_state()
    assert state.keys() == fresh_state.keys()
    for key, value in fresh_state.items():  # freshly reset, not the diverged state
        assert torch.equal(state[key], value), key
    noise = dtype_noise(fresh, generator)
    assert_bit_identical(rollout(restored, noise), rollout(fresh, noise))


def test_cloudpickle_and_torch_save_rebuild_too(generator, tmp_path):
    cloudpickle = pytest.importorskip("cloudpickle")
    env = build("fused")
    diverge(env, generator)
    path = tmp_path / "env.pt"
    torch.save(env, path)
    copies = [cloudpickle.loads(cloudpickle.dumps(env)), torch.load(path, weights_only=False)]
    fresh = build("fused")
    noise = dtype_noise(fresh, generator)
    expected = rollout(fresh, noise)
    for restored in copies:
        assert_bit_identical(rollout(restored, noise), expected)


def test_state_travels_only_in_a_snapshot(generator):
    env = build("fused")
    diverge(env, generator)
    restored, snapshot = pickle.loads(pickle.dumps((env, env.get_state())))
    assert not torch.equal(restored.obs, env.obs)  # a fresh reset, not the pickled env's state
    restored.set_state(snapshot)
    noise = dtype_noise(env, generator)
    assert_bit_identical(rollout(restored, noise), rollout(env, noise))


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_copies_are_rebuilt_envs_with_buffers_of_their_own(copier, generator):
    env = build("fused")
    diverge(env, generator)
    env.close()
    twin = copier(env)
    assert twin is not env and twin.scenario is not env.scenario
    assert twin.obs.data_ptr() != env.obs.data_ptr() and twin.world is not env.world
    fresh = build("fused")
    noise = dtype_noise(fresh, generator)
    assert_bit_identical(rollout(twin, noise), rollout(fresh, noise))  # open again, freshly reset
    with pytest.raises(RuntimeError, match="closed"):
        env.step(noise[0])
    # The copy's copy: what it was built from is kept, not its state.
    assert_bit_identical(rollout(copier(twin), noise[:5]), rollout(build("fused"), noise[:5]))


def test_env_built_from_a_scenario_instance_pickles(generator):
    def build_direct():
        return swarp.Environment(NavigationScenario(n_agents=2, world_size=0.8), n_envs=2, device="cpu", seed=4)

    env = build_direct()
    diverge(env, generator, n_steps=3)
    restored = pickle.loads(pickle.dumps(env))
    assert isinstance(restored.scenario, NavigationScenario) and restored.scenario.cfg == env.scenario.cfg
    assert restored.scenario.env is restored and env.scenario.env is env  # each bound to its own env
    fresh = build_direct()
    noise = dtype_noise(fresh, generator)
    assert_bit_identical(rollout(restored, noise), rollout(fresh, noise))


def test_what_does_not_pickle_is_named():
    class LocalNavigation(NavigationScenario):  # defined in a function: pickle cannot find it
        pass

    env = swarp.Environment(LocalNavigation(n_agents=2), n_envs=1, device="cpu")
    with pytest.raises(TypeError, match=r"scenario \(the .*LocalNavigation instance as given\).*module level"):
        pickle.dumps(env)
    copy.deepcopy(env)  # a copy needs no pickling
    env = swarp.make("navigation", n_envs=1, device="cpu", n_agents=2, plan=types.MappingProxyType({}))
    with pytest.raises(TypeError, match=r"the argument plan=mappingproxy\(\{\}\) does not pickle"):
        pickle.dumps(env)


# --- EnvPool ------------------------------------------------------------------------------------


def pool_rounds(pool: EnvPool, actions: list[torch.Tensor]) -> list[torch.Tensor]:
    """Reset, then ``len(actions)`` recv/send cycles; the clones of everything received."""
    pool.async_reset()
    received = []
    for step_actions in actions:
        obs, reward, terminated, truncated, info = pool.recv()
        received += [obs.clone(), reward.clone(), terminated.clone(), truncated.clone(), info["env_id"].clone()]
        pool.send(step_actions[info["env_id"]], info["env_id"])
    return received


def pool_actions(pool: EnvPool, n_steps: int, generator: torch.Generator) -> list[torch.Tensor]:
    """[n_envs, A, act_dim] uniform actions inside the bounds, one tensor per recv/send cycle."""
    low, high = pool.action_bounds
    return [low + (high - low) * torch.rand(pool.n_envs, *low.shape, generator=generator) for _ in range(n_steps)]


@pytest.mark.parametrize("copier", [lambda p: pickle.loads(pickle.dumps(p)), copy.deepcopy], ids=["pickle", "deepcopy"])
def test_pool_pickles_as_its_groups(copier, generator):
    def build_pool():
        return swarp.make("navigation", batch_size=2, **{**BASE, "n_envs": 4})

    pool = build_pool()
    actions = pool_actions(pool, 30, generator)
    pool_rounds(pool, actions[:3])  # leaves a step pending
    restored = copier(pool)
    assert isinstance(restored, EnvPool) and restored is not pool
    assert (restored.n_envs, restored.batch_size, restored.n_groups) == (4, 2, 2)
    assert [g.env_offset for g in restored.groups] == [0, 2]
    assert all(a is not b for a, b in zip(restored.groups, pool.groups, strict=True))
    got, expected = pool_rounds(restored, actions), pool_rounds(build_pool(), actions)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)
    pool.close()
