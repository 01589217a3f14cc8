"""Drone navigation (``swarp/scenarios/drone_navigation.py``): the fused twin against the torch
reference, the reset attitude, the observation layout and the altitude term."""

import math

import pytest
import torch

import swarp

#: Agreement of fused (Warp) and torch float32 observations and rewards.
TOL = 1e-5
G = 9.81


def pair(**options):
    common = dict(n_envs=6, device="cpu", n_agents=3, auto_reset=True, max_steps=4, seed=2, **options)
    return tuple(swarp.make("drone_navigation", fused=f, **common) for f in (True, False))


def test_fused_matches_the_torch_reference_through_auto_resets(generator):
    fused, reference = pair(n_obstacles=2)
    assert fused.execution_mode == "graph" and fused.act_dim == 4
    assert (fused.obs - reference.obs).abs().max().item() < TOL
    resets = 0
    for _ in range(9):
        actions = torch.rand(6, 3, 4, generator=generator) * 5.0
        out_f, out_r = fused.step(actions), reference.step(actions)
        for a, b in zip(out_f[:2], out_r[:2], strict=True):
            assert (a - b).abs().max().item() < TOL
        assert (out_f[4]["final_obs"] - out_r[4]["final_obs"]).abs().max().item() < TOL
        resets += int(out_f[3].sum())
    assert resets > 0


def test_resets_fly_level_at_altitude_with_the_spawn_heading():
    env = swarp.make("drone_navigation", n_envs=4, device="cpu", n_agents=3, altitude=1.5)
    state = env.state
    assert torch.equal(state.pos_z, torch.full((4, 3), 1.5)) and (state.vel_z == 0).all() and (state.omega == 0).all()
    half = 0.5 * state.theta
    expected = torch.stack([torch.zeros_like(half), torch.zeros_like(half), torch.sin(half), torch.cos(half)], -1)
    assert (state.quat - expected).abs().max().item() < 1e-6
    base = 8 + 5 * env.scenario.cfg.obs_neighbors
    assert env.obs_dim == base + 9
    assert torch.equal(env.obs[..., base], torch.zeros(4, 3))  # on altitude
    assert torch.equal(env.obs[..., base + 2 : base + 6], state.quat)


def test_hovering_keeps_altitude_and_the_altitude_term_prices_a_fall():
    hover, fall = pair(altitude_penalty=1.0)
    mass = hover.stepper.model.agents[0].mass
    with torch.no_grad():
        hover.step(torch.full((6, 3, 4), mass * G / 4))
        fall.step(torch.zeros(6, 3, 4))
    base = 8 + 5 * hover.scenario.cfg.obs_neighbors
    assert hover.obs[..., base].abs().max().item() < 1e-6
    # Semi-implicit Euler: one step of free fall drops g h^2.
    assert torch.allclose(fall.obs[..., base], torch.full((6, 3), -G * hover.stepper.dt**2), atol=1e-6)
    # Same planar motion (none), so the reward difference is the altitude term alone.
    assert torch.allclose(hover.reward - fall.reward, fall.obs[..., base].abs(), atol=1e-6)


def test_models_are_checked_in_both_directions():
    with pytest.raises(ValueError, match="drone_navigation"):
        swarp.make("navigation", n_envs=1, device="cpu", model="drone")
    with pytest.raises(ValueError, match="drones only"):
        swarp.make("drone_navigation", n_envs=1, device="cpu", model="holonomic")
    with pytest.raises(ValueError, match="altitude"):
        swarp.make("drone_navigation", n_envs=1, device="cpu", altitude=-1.0)
    assert math.isfinite(swarp.make("drone_navigation", n_envs=1, device="cpu", lidar_rays=4).obs.sum().item())
