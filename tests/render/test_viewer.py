"""The interactive viewer (``swarp/render/viewer.py``), headless through SDL's dummy video driver:
frames and steps, keys, camera, and dragging an agent or a goal (which writes into that env only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pygame = pytest.importorskip("pygame", reason="the viewer needs the viz extra (pygame)")

import swarp  # noqa: E402
from swarp.render.viewer import Viewer  # noqa: E402

N_FRAMES = 5


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    yield
    if pygame.display.get_init():
        pygame.display.quit()


def make_env() -> swarp.Environment:
    return swarp.make("navigation", n_envs=3, device="cpu", seed=0, n_agents=3, n_obstacles=1)


def key(code: int) -> None:
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=code, mod=0, unicode="", scancode=0))


def drag(start, end) -> None:
    start, end = tuple(int(round(c)) for c in start), tuple(int(round(c)) for c in end)
    pygame.event.post(pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=1, pos=start))
    pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=end, rel=(0, 0), buttons=(1, 0, 0)))
    pygame.event.post(pygame.event.Event(pygame.MOUSEBUTTONUP, button=1, pos=end))


def test_viewer_runs_frames_headless():
    env = make_env()
    viewer = Viewer(env, width=160, height=120, fps=0)
    assert viewer.run(max_frames=N_FRAMES) == N_FRAMES
    assert viewer.steps == N_FRAMES and not viewer.running
    assert not pygame.display.get_init()  # run closes the window


def test_keys_pause_step_switch_envs_toggle_and_quit():
    env = make_env()
    viewer = Viewer(env, width=160, height=160, fps=0, paused=True)
    image = viewer.frame()
    assert image.shape == (160, 160, 3) and viewer.steps == 0
    key(pygame.K_PERIOD)
    viewer.frame()
    assert viewer.steps == 1 and viewer.paused
    key(pygame.K_SPACE)
    viewer.frame()
    assert viewer.steps == 2 and not viewer.paused
    key(pygame.K_n), key(pygame.K_n), key(pygame.K_n), key(pygame.K_p)
    key(pygame.K_g), key(pygame.K_v)
    viewer.frame()
    assert viewer.env_index == 2
    assert viewer.overlays["neighbors"] and viewer.overlays["velocity"]
    extent = viewer.extent()
    key(pygame.K_EQUALS)
    viewer.frame()
    zoomed = viewer.extent()
    assert zoomed[1] - zoomed[0] == pytest.approx((extent[1] - extent[0]) / 1.25)
    key(pygame.K_0)
    key(pygame.K_q)
    viewer.frame()
    assert viewer.zoom == 1.0 and not viewer.running
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    assert viewer.run(max_frames=10) == 0  # already stopped


def test_dragging_an_agent_or_goal_writes_into_that_env_only():
    env = make_env()
    viewer = Viewer(env, width=200, height=200, fps=0, paused=True, env_index=1)
    viewer.frame()
    before = env.get_state()
    agent, target = 2, np.array([0.3, -0.45])
    drag(viewer.world_to_screen(env.state.pos[1, agent].numpy()), viewer.world_to_screen(target))
    viewer.frame()
    after = env.get_state()
    moved = after["state.pos"][1, agent]
    assert torch.allclose(moved, torch.tensor(target, dtype=moved.dtype), atol=1.5 / viewer.renderer.layout.scale)
    for name in ("state.pos", "state.vel", "state.theta", "scenario.goals"):
        changed = (after[name] != before[name]).reshape(3, -1).any(dim=1)
        assert not changed[[0, 2]].any(), name
    assert (after["state.vel"][1, agent] == 0).all()
    # The drawn frame follows at once (paused: no step in between).
    image = viewer.frame()
    center = viewer.world_to_screen(moved.numpy())
    assert (image[int(center[1]), int(center[0])] == swarp.render.PALETTE[agent]).all()

    goal, goal_target = 0, np.array([-0.4, 0.35])
    goals = env.scenario.goals
    drag(viewer.world_to_screen(goals[1, goal].numpy()), viewer.world_to_screen(goal_target))
    viewer.frame()
    assert torch.allclose(goals[1, goal], torch.tensor(goal_target, dtype=goals.dtype), atol=1.5 / 40.0)
    assert torch.equal(goals[[0, 2]], before["scenario.goals"][[0, 2]])
    viewer.close()


def test_render_human_mode_shows_a_window():
    env = make_env()
    frame = env.render(mode="human", width=64, height=64)
    assert frame.shape == (64, 64, 3)
    assert pygame.display.get_surface().get_size() == (64, 64)


def test_bad_viewer_arguments():
    env = make_env()
    with pytest.raises(ValueError, match="width"):
        Viewer(env, width=10)
    with pytest.raises(ValueError, match="fps"):
        Viewer(env, fps=-1)
    with pytest.raises(TypeError, match="action_fn"):
        Viewer(env, action_fn="greedy")
    with pytest.raises(IndexError, match="env_index"):
        Viewer(env, env_index=3)
    with pytest.raises(TypeError, match="unknown render option"):
        Viewer(env, graph=True)
