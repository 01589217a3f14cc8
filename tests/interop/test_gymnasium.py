"""``swarp/interop/gymnasium/``: the VectorEnv adapter under Gymnasium's own checks."""

import warnings

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")  # the gymnasium extra; CI installs it

from gymnasium.utils import env_checker, passive_env_checker  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.gymnasium import SwarpVectorEnv  # noqa: E402


def make(n_envs=4, auto_reset=True, max_steps=20, **kwargs):
    return swarp.make(
        "navigation", n_envs=n_envs, device="cpu", seed=0, auto_reset=auto_reset, max_steps=max_steps, **kwargs
    )


@pytest.mark.parametrize(
    ("auto_reset", "mode"), [(True, None), (False, None), (False, AutoresetMode.DISABLED)], ids=["same", "next", "off"]
)
def test_gymnasium_checks(auto_reset, mode):
    # Gymnasium has no checker for vector envs; these are the parts of check_env that apply to one
    # (the batch-of-one case where they index a single terminated/truncated flag).
    envs = SwarpVectorEnv(make(n_envs=1, auto_reset=auto_reset), autoreset_mode=mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        passive_env_checker.check_space(
            envs.single_observation_space, "observation", passive_env_checker._check_box_observation_space
        )
        passive_env_checker.check_space(envs.single_action_space, "action", passive_env_checker._check_box_action_space)
        env_checker.check_reset_return_type(envs)
        env_checker.check_reset_seed_determinism(envs)
        env_checker.check_reset_options(envs)
        env_checker.check_reset_return_info_deprecation(envs)
        env_checker.check_seed_deprecation(envs)
        env_checker.check_returned_data_not_reused(envs)
        env_checker.check_space_limit(envs.single_action_space, "action")
    messages = [str(w.message) for w in caught]
    # The only warnings allowed: the observation box is unbounded (true for every scenario).
    assert all("infinity" in m for m in messages), messages


def test_spaces_and_step_contract():
    sim = make()
    envs = SwarpVectorEnv(sim)
    E, A = sim.n_envs, sim.n_agents
    assert envs.num_envs == E
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.single_observation_space.shape == (A, sim.obs_dim)
    assert envs.observation_space.shape == (E, A, sim.obs_dim)
    assert envs.action_space.shape == (E, A, sim.act_dim)
    low, high = sim.action_bounds
    np.testing.assert_array_equal(envs.single_action_space.low, low.numpy())
    np.testing.assert_array_equal(envs.single_action_space.high, high.numpy())
    obs, info = envs.reset(seed=3)
    passive_env_checker.check_obs(obs, envs.observation_space, "reset")
    envs.action_space.seed(0)
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
    passive_env_checker.check_obs(obs, envs.observation_space, "step")
    assert reward.shape == (E,) and terminated.shape == (E,) and truncated.shape == (E,)
    assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    np.testing.assert_allclose(reward, info["agent_reward"].mean(axis=1), rtol=1e-6)
    assert info["dist_to_goal"].shape == (E, A)
    assert info["final_obs"].shape == (E, A, sim.obs_dim) and info["_final_obs"].shape == (E,)


def test_step_determinism_for_the_batch():
    envs = SwarpVectorEnv(make())
    envs.action_space.seed(1)
    actions = envs.action_space.sample()
    results = []
    for _ in range(2):
        envs.reset(seed=11)
        results.append(envs.step(actions))
    for first, second in zip(results[0], results[1], strict=True):
        assert env_checker.data_equivalence(first, second, exact=True)


def test_same_step_autoreset_reports_the_final_observation():
    sim = make(max_steps=3)
    envs = SwarpVectorEnv(sim)
    envs.reset(seed=0)
    zeros = np.zeros(envs.action_space.shape, dtype=np.float32)
    for _ in range(2):
        obs, _, _, truncated, info = envs.step(zeros)
        assert not truncated.any() and not info["_final_obs"].any()
    last = obs
    obs, _, _, truncated, info = envs.step(zeros)
    assert truncated.all() and info["_final_obs"].all()
    # Zero actions keep agents still: the final observation is the previous one, the new one a reset.
    np.testing.assert_allclose(info["final_obs"], last, atol=1e-6)
    assert not np.allclose(obs, last)


def test_disabled_autoreset_with_reset_mask():
    sim = make(auto_reset=False)
    assert SwarpVectorEnv(make(auto_reset=False)).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # default
    envs = SwarpVectorEnv(sim, autoreset_mode="disabled")
    assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    obs, _ = envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    current = sim.obs.numpy().copy()
    mask = np.array([False, True, False, True])
    obs, _ = envs.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(obs[~mask], current[~mask])
    assert not np.allclose(obs[mask], current[mask])


def test_torch_backend_returns_device_tensors_that_survive_the_next_step():
    sim = make()
    envs = SwarpVectorEnv(sim, backend="torch", reward="sum")
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.device == sim.torch_device
    actions = torch.zeros(envs.action_space.shape)
    first, reward, terminated, truncated, info = envs.step(actions)
    saved = first.clone()
    envs.step(actions + 0.5)
    assert torch.equal(first, saved)
    torch.testing.assert_close(reward, info["agent_reward"].sum(dim=1))
    assert terminated.dtype == torch.bool


def test_render_and_argument_errors():
    envs = SwarpVectorEnv(make(n_envs=2), render_mode="rgb_array")
    envs.reset(seed=0)
    frames = envs.render()
    assert len(frames) == 2 and frames[0].shape[2] == 3 and frames[0].dtype == np.uint8
    assert SwarpVectorEnv(make(n_envs=2)).render() is None
    with pytest.raises(ValueError, match="backend"):
        SwarpVectorEnv(make(), backend="jax")
    with pytest.raises(ValueError, match="reward"):
        SwarpVectorEnv(make(), reward="max")
    with pytest.raises(ValueError, match="reset_mask"):
        SwarpVectorEnv(make()).reset(seed=1, options={"reset_mask": np.ones(4, dtype=bool)})
    with pytest.raises(TypeError, match="one seed"):
        SwarpVectorEnv(make()).reset(seed=[1, 2, 3, 4])


# --- the boundary: actions, options, close ------------------------------------------------------


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (None, TypeError, "actions must be real numbers .* got NoneType None"),
        ("fast", TypeError, "got str 'fast'"),
        (np.full((4, 4, 2), None), TypeError, "dtype object"),
        (np.zeros((4, 4, 2), dtype=bool), TypeError, "dtype bool"),
        ([[0.0, 1.0], [0.0]], TypeError, "not an array"),
        (0.5, ValueError, r"got \[\]"),
        (np.zeros((4, 2), np.float32), ValueError, r"got \[4, 2\]"),
        (np.zeros((1, 4, 2), np.float32), ValueError, r"got \[1, 4, 2\]"),
        (np.zeros((4, 2, 4), np.float32), ValueError, r"got \[4, 2, 4\]"),
        (torch.zeros(4, 4, 2, 1), ValueError, r"got \[4, 4, 2, 1\]"),
    ],
)
def test_bad_actions_raise_naming_the_argument_and_step_nothing(actions, error, match):
    """Issue 29 item 6: None and strings raised numpy's dtype message."""
    sim = make()
    envs = SwarpVectorEnv(sim)
    envs.reset(seed=0)
    state = sim.get_state()
    with pytest.raises(error, match=match):
        envs.step(actions)
    assert all(torch.equal(state[k], v) for k, v in sim.get_state().items())


def test_actions_of_other_dtypes_and_containers_step_alike():
    results = []
    values = np.tile(np.array([[1, -1]]), (4, 4, 1))
    for actions in (
        values.astype(np.float32),
        values,
        values.astype(np.float64),
        values.tolist(),
        torch.tensor(values),
    ):
        envs = SwarpVectorEnv(make())
        envs.reset(seed=0)
        results.append(envs.step(actions)[0])
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_huge_float64_actions_act_as_the_bound_and_nan_raises_the_flag():
    """float64 1e300 used to become inf in the cast to float32: acting as 0, with the invalid flag."""
    bound, huge = SwarpVectorEnv(make()), SwarpVectorEnv(make())
    high = bound.single_action_space.high
    for envs in (bound, huge):
        envs.reset(seed=0)
    expected = bound.step(np.broadcast_to(high, bound.action_space.shape).copy())[0]
    got = huge.step(np.full(huge.action_space.shape, 1e300))[0]
    np.testing.assert_array_equal(got, expected)
    assert not bool(huge.sim.invalid_actions())
    nan = np.zeros(huge.action_space.shape)
    nan[0, 0, 0] = np.nan
    huge.step(nan)
    assert bool(huge.sim.invalid_actions()), "NaN acts as 0 and raises the flag, as documented"


def test_reset_mask_must_be_a_bool_mask():
    """Issue 29 item 6: np.arange(8) was read as a mask and reset 7 of 8 envs."""
    sim = make(n_envs=8, auto_reset=False)
    envs = SwarpVectorEnv(sim)
    envs.reset(seed=0)
    episodes = sim.episode.clone()
    for mask, error, match in (
        (np.arange(8), TypeError, "got dtype int64: env indices"),
        (np.ones(8, dtype=np.int32), TypeError, "dtype int32"),
        (torch.arange(8) % 2, TypeError, "torch.int64"),
        (np.ones(7, dtype=bool), ValueError, r"got shape \[7\]"),
        (np.ones((8, 1), dtype=bool), ValueError, r"got shape \[8, 1\]"),
    ):
        with pytest.raises(error, match=match) as caught:
            envs.reset(options={"reset_mask": mask})
        assert "options['reset_mask'] must be a bool mask of shape [8]" in str(caught.value)
    assert torch.equal(sim.episode, episodes), "a rejected mask must reset nothing"
    mask = [i % 3 == 0 for i in range(8)]  # a list of bools, or a torch bool tensor, is a mask
    envs.reset(options={"reset_mask": mask})
    envs.reset(options={"reset_mask": torch.tensor(mask)})
    assert torch.equal(sim.episode - episodes, 2 * torch.tensor(mask).int())


def test_reset_options_are_checked():
    envs = SwarpVectorEnv(make())
    with pytest.raises(
        ValueError, match=r"unknown reset option\(s\) \['resetmask'\]; the options are \['reset_mask'\]"
    ):
        envs.reset(options={"resetmask": np.ones(4, dtype=bool)})
    with pytest.raises(TypeError, match="options must be a dict"):
        envs.reset(options=["reset_mask"])
    with pytest.raises(TypeError, match="one seed"):
        envs.reset(seed=True)


def test_close_closes_the_environment():
    sim = make()
    envs = SwarpVectorEnv(sim)
    envs.reset(seed=0)
    envs.close()
    envs.close()  # idempotent
    for call in (lambda: envs.step(np.zeros(envs.action_space.shape, np.float32)), envs.reset):
        with pytest.raises(RuntimeError, match="the Environment is closed"):
            call()
