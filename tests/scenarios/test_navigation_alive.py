"""Navigation's agents that leave and arrive (``n_agents=(lo, hi)``, ``leave_on_goal``; the world's
alive mask, ``swarp/runtime/alive.py``): fused == torch reference, every step-end strategy and
launch mode alike, same seed same bits, dead agents frozen, unseen and unrewarded, clear errors."""

import pytest
import torch
import warp as wp

import swarp
from tests.support import make_pair, mixed_actions, parity_rollout

#: Every configuration of the mask: a variable count alone, departures alone, both, on the grid.
ALIVE_CASES = {
    "range": dict(n_agents=(2, 5), world_size=0.5, max_steps=25),
    "leave": dict(n_agents=4, leave_on_goal=True, world_size=0.5, max_steps=25),
    "range_leave": dict(n_agents=(1, 6), leave_on_goal=True, world_size=0.6, max_steps=25, obs_range=2.0),
    "obstacles_diff_drive": dict(
        n_agents=(2, 4), leave_on_goal=True, model="diff_drive", n_obstacles=2, world_size=0.6, max_steps=25
    ),
    "grid": dict(
        n_agents=(60, 130),
        leave_on_goal=True,
        world_size=2.0,
        obs_range=0.4,
        max_neighbors=6,
        max_steps=20,
        n_envs=2,
        neighbor_method="grid",
    ),
}
N_STEPS = 120


@pytest.mark.parametrize("case", list(ALIVE_CASES))
def test_fused_matches_torch_reference(case, generator):
    """Fused and torch twins agree on every output over episodes with auto-resets, departures and
    envs of different sizes (``info.alive`` exactly)."""
    options = dict(ALIVE_CASES[case])
    steps = 40 if case == "grid" else N_STEPS
    seen = parity_rollout("navigation", options, steps, generator)
    assert seen["truncated"] > 0 and seen["info.on_goal"] > 0
    assert seen["info.alive"] > 0
    if case != "grid":
        assert seen["terminated"] > 0


#: The fused end runs on the CPU under Warp's CPU blocks, against the split end of the same rows.
SPLIT_TILED = {"tiled_rows": True, "fused_step_end": False}
FUSED_END = {"tiled_rows": True, "fused_step_end": True}
PLANS = {
    "fused_end": (FUSED_END, SPLIT_TILED),
    "fused_end_direct_store": ({"tiled_rows": False, "fused_step_end": True}, SPLIT_TILED),
    "listed": ({"list_resets": True}, {"list_resets": False}),
    "ahead": ({"reset_ahead": True}, {"reset_ahead": False}),
    "ahead_fused_end": ({"reset_ahead": True, **FUSED_END}, {"reset_ahead": False, **SPLIT_TILED}),
    "eager": ({"launch": "eager"}, None),
    "replay": ({"launch": "replay"}, None),
    "graph": ({"launch": "graph"}, None),
    "shards": ({"cpu_shards": 2}, None),
}


@pytest.mark.parametrize("case", list(PLANS))
def test_every_step_end_and_launch_mode_gives_the_same_bits(case, generator, monkeypatch):
    """The plan's variants of the fused step (the fused end, listed resets, starts prepared ahead,
    launch modes, CPU shards) hand out the very bits of the plan they vary, over auto-resets,
    explicit resets and a snapshot restored."""
    plan, base_plan = PLANS[case]
    if "fused_step_end" in plan:
        monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    options = dict(n_envs=6, device="cpu", seed=5, auto_reset=True, n_agents=(2, 5), leave_on_goal=True)
    options.update(world_size=0.5, max_steps=15)
    base = swarp.make("navigation", plan=base_plan, **options)
    other = swarp.make("navigation", plan=plan, **options)
    for key, value in plan.items():
        assert getattr(other.plan, key) == value
    base.reset()
    other.reset()
    for t in range(40):
        actions = mixed_actions(base, generator)
        if t == 17:
            for env in (base, other):
                env.reset_at(torch.arange(6) % 3 == 0)
        if t == 25:
            snapshots = [env.get_state() for env in (base, other)]
        if t == 31:
            for env, snapshot in zip((base, other), snapshots, strict=True):
                env.set_state(snapshot)
        outputs = [env.step(actions) for env in (base, other)]
        for a, b in zip(outputs[0][:4], outputs[1][:4], strict=True):
            assert torch.equal(a, b)
        assert torch.equal(base.alive, other.alive)
        assert torch.equal(base.state.pos, other.state.pos)


def test_same_seed_same_bits(generator):
    envs = [swarp.make("navigation", n_envs=4, device="cpu", seed=11, auto_reset=True, n_agents=(1, 5)) for _ in "ab"]
    for env in envs:
        env.reset()
    actions = [mixed_actions(envs[0], generator) for _ in range(30)]
    for t in range(30):
        outs = [env.step(actions[t]) for env in envs]
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
        assert torch.equal(envs[0].alive, envs[1].alive)


def test_counts_cover_the_range_and_shards_draw_the_unsplit_batch():
    """Each env draws its count in [lo, hi] from the counter-based RNG: every count occurs over a
    batch, and an env of a batch split at ``env_offset`` draws what it draws unsplit."""
    env = swarp.make("navigation", n_envs=64, device="cpu", seed=2, n_agents=(2, 5))
    env.reset()
    counts = env.alive.sum(1)
    assert set(counts.tolist()) == {2, 3, 4, 5}
    # The present agents are the first k of every env.
    assert torch.equal(env.alive, torch.arange(5).view(1, 5) < counts.view(-1, 1))
    tail = swarp.make("navigation", n_envs=16, device="cpu", seed=2, n_agents=(2, 5), env_offset=48)
    tail.reset()
    assert torch.equal(tail.alive, env.alive[48:])
    env.reset()
    assert not torch.equal(env.alive.sum(1), counts)  # a new episode draws again


@pytest.mark.parametrize("fused", [True, False])
def test_dead_agents_are_frozen_unseen_and_unrewarded(fused, generator):
    """An absent agent never moves, observes a zero row, earns 0, is in no neighbor list, and its
    actions are ignored (even non-finite ones)."""
    env = swarp.make("navigation", n_envs=8, device="cpu", seed=3, n_agents=(1, 4), fused=fused, obs_range=2.0)
    env.reset()
    dead = ~env.alive
    assert bool(dead.any())
    start = env.state.pos.clone()
    for _ in range(20):
        actions = torch.where(dead.unsqueeze(-1), torch.full_like(env.world.actions, float("nan")), env.world.actions)
        actions = torch.where(dead.unsqueeze(-1), actions, mixed_actions(env, generator))
        obs, reward, *_ = env.step(actions)
        assert torch.equal(env.state.pos[dead], start[dead])
        assert bool((obs[dead] == 0).all()) and bool((reward[dead] == 0).all())
        nbr, count = env.world.neighbor_lists()
        assert bool((count[dead] == 0).all())
        listed = torch.zeros_like(dead)
        for e in range(env.n_envs):
            ids = nbr[e][nbr[e] >= 0].long()
            listed[e, ids] = True
        assert not bool((listed & dead).any())
    assert not bool(env.invalid_actions())


@pytest.mark.parametrize("fused", [True, False])
def test_agents_leave_on_goal_and_the_env_ends_when_all_have(fused):
    """With ``leave_on_goal`` an agent on its goal leaves at the end of that step (its last row and
    reward are the step's, its later ones zero), and the env terminates once every present agent has."""
    env = swarp.make("navigation", n_envs=4, device="cpu", seed=1, n_agents=(2, 4), leave_on_goal=True, fused=fused)
    env.reset()
    present = env.alive.clone()
    left_at = torch.full(present.shape, -1)
    ended = torch.zeros(env.n_envs, dtype=torch.bool)
    for t in range(60):
        before = env.alive.clone()
        obs, reward, terminated, _, info = env.step(env.scenario.scripted_actions())
        leaving = before & ~env.alive
        assert torch.equal(leaving, before & info["on_goal"])
        left_at[leaving] = t
        assert torch.equal(terminated & ~ended, ((~env.alive).all(1)) & ~ended)
        assert bool((reward[~before] == 0).all())
        ended |= terminated
        if bool(ended.all()):
            break
    assert bool(ended.all())
    assert torch.equal(left_at >= 0, present)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("leave", [True, False])
def test_the_bonus_is_paid_on_each_arrival_when_agents_leave_else_at_the_finish(fused, leave):
    """With ``leave_on_goal`` each agent earns ``final_reward`` on the step it reaches its goal (a
    bonus at the env's finish would pay agents to wait outside their goals for the others); without,
    the agents that acted earn it on the step every one of them is on goal."""
    only_bonus = dict(shaping_factor=0.0, collision_penalty=0.0, final_reward=2.5)
    env = swarp.make("navigation", n_envs=6, device="cpu", seed=2, n_agents=(2, 4), leave_on_goal=leave,
                     fused=fused, **only_bonus)  # fmt: skip
    env.reset()
    paid = torch.zeros(env.n_envs, env.n_agents)
    for _ in range(60):
        before = env.alive.clone()
        _, reward, terminated, _, info = env.step(env.scenario.scripted_actions())
        expected = (before & (info["on_goal"] if leave else terminated.view(-1, 1))).float()
        assert torch.equal(reward, 2.5 * expected)
        paid += expected
        if bool(terminated.any()):
            break
    assert bool((paid > 0).any())


def test_info_alive_is_the_env_mask():
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=(2, 3))
    _, info = env.reset()
    assert info["alive"] is env.alive and env.alive.dtype == torch.bool
    assert swarp.make("navigation", n_envs=2, device="cpu").alive is None


def test_snapshot_carries_the_mask():
    env = swarp.make("navigation", n_envs=4, device="cpu", seed=4, n_agents=(1, 4), leave_on_goal=True)
    env.reset()
    snapshot = env.get_state()
    alive = env.alive.clone()
    env.reset()
    env.set_state(snapshot)
    assert torch.equal(env.alive, alive)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(n_agents=(4, 2)), "1 <= lo <= hi"),
        (dict(n_agents=(0, 2)), "1 <= lo <= hi"),
        (dict(n_agents=(1, 2, 3)), "pair"),
        (dict(n_agents=(1.0, 2)), "pair"),
        (dict(n_agents=(2, 3), min_agents=1), "not both"),
        (dict(min_agents=5, n_agents=4), "min_agents"),
        (dict(leave_on_goal=1), "leave_on_goal must be a bool"),
        (dict(n_agents=(2, 3), shared_reward=True), "shared_reward"),
    ],
)
def test_bad_options_get_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        swarp.make("navigation", n_envs=2, device="cpu", **options)


@pytest.mark.parametrize("scenario", ["flocking", "drone_navigation"])
def test_scenarios_without_the_mask_refuse_an_agent_range(scenario):
    with pytest.raises(ValueError, match=r"n_agents=\(lo, hi\)"):
        swarp.make(scenario, n_envs=2, device="cpu", n_agents=(2, 4))


@pytest.mark.gpu
def test_cpu_matches_cuda(generator):
    """The mask on CUDA: the same counts and departures, floats within tolerance of the CPU. Each
    step starts from the CPU's state (``set_state``), so rounding does not compound over the 100
    steps (compounded, it reached 4e-4 within 100 steps on an H100)."""
    options = dict(n_envs=16, seed=9, auto_reset=True, n_agents=(2, 6), leave_on_goal=True, world_size=0.6)
    cpu, cuda = (swarp.make("navigation", device=device, **options) for device in ("cpu", "cuda"))
    cpu.reset()
    cuda.reset()
    assert torch.equal(cpu.alive, cuda.alive.cpu())
    for _ in range(100):
        cuda.set_state({key: value.cuda() for key, value in cpu.get_state().items()})
        actions = mixed_actions(cpu, generator)
        obs, reward, terminated, truncated, _ = cpu.step(actions)
        obs_c, reward_c, terminated_c, truncated_c, _ = cuda.step(actions.cuda())
        assert torch.equal(cpu.alive, cuda.alive.cpu())
        assert torch.equal(terminated, terminated_c.cpu()) and torch.equal(truncated, truncated_c.cpu())
        torch.testing.assert_close(obs, obs_c.cpu(), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(reward, reward_c.cpu(), atol=1e-4, rtol=1e-4)


def test_pair_helper_builds_both_twins_with_the_mask():
    fused, reference = make_pair("navigation", n_agents=(2, 3))
    assert fused.alive is not None and reference.alive is not None


def test_grad_mode_steps_give_the_no_grad_values_and_no_gradient_to_dead_agents():
    """A grad-mode step (the torch reference on the taped physics) hands out the no-grad step's
    values; a dead agent's action reaches nothing (its state is frozen, its reward zero)."""
    options = dict(n_envs=4, device="cpu", seed=0, auto_reset=True, n_agents=(2, 4), leave_on_goal=True)
    options.update(goal_radius=0.3, world_size=0.5, max_steps=10)
    env, plain = swarp.make("navigation", **options), swarp.make("navigation", **options)
    env.reset()
    plain.reset()
    for _ in range(12):
        dead = ~env.alive.clone()
        actions = env.scenario.scripted_actions().clone().requires_grad_(True)
        obs, reward, *_ = env.step(actions)
        expected_obs, expected_reward, *_ = plain.step(actions.detach())
        assert torch.equal(obs.detach(), expected_obs) and torch.equal(reward.detach(), expected_reward)
        (reward.sum() + obs.sum()).backward()
        assert torch.isfinite(actions.grad).all()
        assert bool((actions.grad[dead] == 0).all())


@pytest.mark.parametrize("fused", [True, False])
def test_a_pool_of_groups_draws_and_steps_as_the_unsplit_batch(fused, generator):
    """``EnvPool`` groups (``env_offset``) with the mask: each group's rows are the unsplit batch's."""
    from tests.env.test_pool import N_AGENTS, run_pool_against_batch

    run_pool_against_batch("cpu", generator, fused=fused, n_agents=(1, N_AGENTS), leave_on_goal=True, goal_radius=0.1)
