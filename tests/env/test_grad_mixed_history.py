"""Grad-mode steps inside a no-grad history (``swarp/env/grad.py``): same seed, same actions, same
bits. A history whose steps are partly taken with actions that require grad is the all-no-grad
history bit for bit: the grad steps' own outputs and every later step's outputs, state and buffers,
across auto-resets (one inside a grad step, the next step right after it), for every scenario (all
of them support grad mode) and for each way a step can run."""

import pytest
import torch

import swarp
from tests.support import flat_outputs, mixed_actions, record

#: Short episodes, so the rollout crosses time limits; ``mixed_actions`` adds terminations.
OPTIONS = dict(n_envs=3, device="cpu", seed=0, max_steps=4)
N_STEPS = 10
#: The steps taken with grads: two in a row, one ending every unfinished episode (step 3 and 7,
#: the time limit) so that an auto-reset runs inside a grad step and a no-grad step follows it.
GRAD_STEPS = (2, 3, 7)


def finished_rows_only(row: dict) -> dict:
    """``row`` with ``info.final_obs`` zeroed outside the envs that finished: a grad step hands out
    every env's pre-reset observation there, a no-grad step leaves other rows stale."""
    if "info.final_obs" not in row:
        return row
    done = (row["terminated"] | row["truncated"]).view(-1, 1, 1)
    return dict(row, **{"info.final_obs": torch.where(done, row["info.final_obs"], 0)})


def assert_mixed_history_is_the_no_grad_one(name: str, generator: torch.Generator, **options) -> None:
    options = dict(OPTIONS, **options)
    plain = swarp.make(name, **options)
    mixed = swarp.make(name, **options)
    for t in range(N_STEPS):
        actions = mixed_actions(plain, generator)
        with torch.no_grad():
            expected = record(plain, flat_outputs(plain, plain.step(actions)))
        if t in GRAD_STEPS:
            leaf = actions.clone().requires_grad_()
            obs, reward, terminated, truncated, info = flat_outputs(mixed, mixed.step(leaf))
            (obs.sum() + reward.sum()).backward()
            assert torch.isfinite(leaf.grad).all(), f"{name} step {t}"
            info = {key: value.detach() for key, value in info.items()}
            got = record(mixed, (obs.detach(), reward.detach(), terminated, truncated, info))
        else:
            with torch.no_grad():
                got = record(mixed, flat_outputs(mixed, mixed.step(actions)))
        expected, got = finished_rows_only(expected), finished_rows_only(got)
        assert expected.keys() == got.keys()
        for key in expected:
            kind = "grad" if t in GRAD_STEPS else "no-grad"
            assert torch.equal(expected[key], got[key]), f"{name} step {t} ({kind}): {key} differs"
    if options.get("auto_reset"):
        assert int(plain.episode.sum()) >= plain.n_envs, f"{name}: the rollout should cross auto-resets"


@pytest.mark.parametrize("auto_reset", [False, True], ids=["no_reset", "auto_reset"])
@pytest.mark.parametrize("name", swarp.scenario_names())
def test_grad_steps_in_a_no_grad_history_change_no_bit(name, auto_reset, generator):
    assert_mixed_history_is_the_no_grad_one(name, generator, auto_reset=auto_reset)


@pytest.mark.parametrize(
    "options",
    [
        dict(plan={"reset_ahead": True}),  # the auto-reset swaps in starts prepared the step before
        dict(plan={"cpu_shards": 2}),  # the step runs in two shards
        dict(plan={"grad_step": "recompute"}),
        dict(fused=False),  # the torch reference's step
        dict(lidar_rays=4),
        dict(use_graph=False),
    ],
    ids=["reset_ahead", "shards", "recompute", "torch", "lidar", "replay"],
)
def test_grad_steps_in_a_no_grad_navigation_history_change_no_bit(options, generator):
    assert_mixed_history_is_the_no_grad_one("navigation", generator, auto_reset=True, **options)


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_a_direct_grad_step_keeps_its_gradient_through_later_steps(name, generator):
    """A ``"direct"`` step's autograd graph holds the torch reference it ran: later steps, with
    grads or without, auto-resets among them, do not change its gradient."""
    env = swarp.make(name, auto_reset=True, **OPTIONS)
    assert env.plan.grad_step == "direct"
    for _ in range(2):
        with torch.no_grad():
            env.step(mixed_actions(env, generator))
    start = env.get_state()
    actions = mixed_actions(env, generator)
    later = [mixed_actions(env, generator) for _ in range(4)]

    def loss_of(obs, reward, terminated, truncated, info):
        weights = torch.linspace(-1.0, 1.0, obs.shape[-1], dtype=obs.dtype)
        return (info["final_obs"] * weights).sum() + 3.0 * reward.sum()

    leaf = actions.clone().requires_grad_()
    (alone,) = torch.autograd.grad(loss_of(*flat_outputs(env, env.step(leaf))), leaf)
    env.set_state(start)
    leaf = actions.clone().requires_grad_()
    loss = loss_of(*flat_outputs(env, env.step(leaf)))
    for t, step_actions in enumerate(later):
        if t % 2:
            with torch.no_grad():
                env.step(step_actions)
        else:
            env.step(step_actions.clone().requires_grad_())
    (after,) = torch.autograd.grad(loss, leaf)
    assert alone.abs().sum() > 0, name
    assert torch.equal(alone, after), name
