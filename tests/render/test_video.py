"""Videos and notebook animations (``swarp/render/video.py``): files decode to the expected frame
count and size, default and custom policies, mosaics, and clear errors."""

from __future__ import annotations

import imageio.v3 as imageio
import numpy as np
import pytest
import torch

import swarp
from swarp.render import animate, random_action_fn, save_video
from swarp.render.video import rollout_frames

#: Steps per test video: short, the frame count is what matters.
N_STEPS = 6


def make_env(**kwargs) -> swarp.Environment:
    return swarp.make("navigation", n_envs=3, device="cpu", seed=0, n_agents=3, **kwargs)


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_video_decodes_to_one_frame_per_step_plus_the_first(tmp_path, suffix):
    env = make_env()
    path = save_video(env, tmp_path / f"run{suffix}", N_STEPS, width=96, height=64, fps=10)
    frames = imageio.imread(path, index=None)
    assert frames.shape == (N_STEPS + 1, 64, 96, 3)
    # The agents moved: frames differ.
    assert not np.array_equal(frames[0], frames[-1])


def test_mosaic_video_with_a_policy_and_odd_sizes(tmp_path):
    env = make_env()
    seen = []

    def policy(env, obs):
        seen.append(obs.shape)
        return torch.zeros(env.n_envs, env.n_agents, env.act_dim)

    path = save_video(env, tmp_path / "grid.mp4", 3, policy, env_indices="all", tile_size=41, gap=1)
    frames = imageio.imread(path, index=None)
    # 3 envs in 2 columns: 2 x 41 + 1 = 83 px, padded to even sizes for H.264.
    assert frames.shape == (4, 84, 84, 3)
    assert seen == [(3, 3, env.obs_dim)] * 3


def test_rollout_frames_start_from_the_current_state():
    env = make_env()
    first = env.render(width=64, height=64)
    frames = list(rollout_frames(env, 2, width=64, height=64))
    assert len(frames) == 3
    np.testing.assert_array_equal(frames[0], first)


def test_random_action_fn_is_reproducible_and_in_bounds():
    env = make_env()
    a = random_action_fn(seed=4)(env, env.obs)
    b = random_action_fn(seed=4)(env, env.obs)
    low, high = env.action_bounds
    assert a.shape == (3, 3, env.act_dim) and torch.equal(a, b)
    assert (a >= low).all() and (a <= high).all()


def test_animate_returns_an_html5_video():
    html = animate(make_env(), 2, width=32, height=32)
    text = html.data if hasattr(html, "data") else html
    assert text.startswith("<video") and "data:video/mp4;base64," in text


def test_bad_video_arguments(tmp_path):
    env = make_env()
    with pytest.raises(ValueError, match="must end in one of"):
        save_video(env, tmp_path / "run.avi", 2)
    with pytest.raises(ValueError, match="n_steps"):
        save_video(env, tmp_path / "run.gif", -1)
    with pytest.raises(ValueError, match="fps"):
        save_video(env, tmp_path / "run.gif", 2, fps=0)
    with pytest.raises(TypeError, match="action_fn"):
        save_video(env, tmp_path / "run.gif", 2, action_fn="greedy")
    with pytest.raises(ValueError, match="env_indices"):
        save_video(env, tmp_path / "run.gif", 2, env_indices="some")
    with pytest.raises(TypeError, match="unknown render option"):
        save_video(env, tmp_path / "run.gif", 2, colour=True)
