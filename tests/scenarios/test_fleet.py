"""The fleet scenario (``swarp/scenarios/fleet.py`` and its Warp twin ``fleet_kernels.py``): two
agent groups of their own dynamics and observation widths, parity of the twins over long random
rollouts, reset draws, the padding of the narrower group, the observation layout, termination and
its bonus, the scripted controller against random actions, and option validation. The framework
contract is in ``test_contract.py``."""

import math

import pytest
import torch

import swarp
from swarp.core.config import DynamicsModel
from swarp.scenarios.fleet import FleetScenario, scripted_actions
from swarp.scenarios.fleet_kernels import CARRIER_OBS_DIM, OBS_DIM, SCOUT_OBS_DIM
from tests.support import (
    PARITY_ATOL,
    assert_rows_match,
    episode_success_rate,
    make_pair,
    parity_rollout,
    random_actions,
    record,
    scripted_policy,
)

#: Steps of the random-action parity rollouts: several episodes of ``max_steps`` each.
N_RANDOM_STEPS = 300
N_PARITY_STEPS = 60

PARITY_CASES = {
    "defaults": dict(max_steps=30),
    "two_scouts_one_carrier": dict(n_carriers=1, n_scouts=2, max_steps=30),
    # Big agents in a small arena: collisions, agents at the walls, a depot near them.
    "crowded": dict(n_agents=7, n_scouts=2, world_size=0.5, agent_radius=0.06, goal_radius=0.2, max_steps=30),
    "float64": dict(dtype="float64", max_steps=30),
    "grid_neighbors": dict(
        n_carriers=40, n_scouts=4, world_size=3.0, goal_radius=0.8, max_steps=30, n_envs=2, neighbor_method="grid"
    ),  # fmt: skip
}


def test_the_groups_are_consecutive_carriers_then_scouts_of_their_own_dynamics_and_widths():
    env = swarp.make("fleet", n_envs=2, device="cpu", n_carriers=3, n_scouts=2)
    assert env.grouped and [(g.name, g.start, g.stop, g.obs_dim) for g in env.groups] == [
        ("carriers", 0, 3, CARRIER_OBS_DIM),
        ("scouts", 3, 5, SCOUT_OBS_DIM),
    ]
    assert env.obs_dim == OBS_DIM == max(CARRIER_OBS_DIM, SCOUT_OBS_DIM) and env.act_dim == 2
    models = [agent.model for agent in env.stepper.model.agents]
    assert models == [DynamicsModel.DIFF_DRIVE] * 3 + [DynamicsModel.HOLONOMIC] * 2
    low, high = env.action_bounds
    assert high.tolist() == [[0.5, 3.0]] * 3 + [[1.0, 1.0]] * 2 and torch.equal(low, -high)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_a_forward_command_drives_a_carrier_along_its_heading_and_a_scout_holonomically(fused):
    env = swarp.make("fleet", n_envs=1, device="cpu", fused=fused, n_carriers=1)
    env.world.set_state(pos=torch.tensor([[[0.0, 0.0], [0.5, 0.5]]]), theta=torch.tensor([[0.7, 0.0]]))
    env.step(torch.tensor([[[0.5, 2.0], [0.0, -1.0]]]))
    # The carrier drives 0.05 m along its heading and turns 0.2 rad.
    heading = torch.tensor([math.cos(0.7), math.sin(0.7)])
    torch.testing.assert_close(env.state.pos[0, 0], 0.05 * heading, atol=1e-6, rtol=0)
    torch.testing.assert_close(env.state.theta[0, 0], torch.tensor(0.9), atol=1e-6, rtol=0)
    torch.testing.assert_close(env.state.pos[0, 1], torch.tensor([0.5, 0.4]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    """Half the envs under the scripted controller (episodes terminate), half at random."""
    seen = parity_rollout("fleet", dict(PARITY_CASES[case]), N_PARITY_STEPS, generator)
    assert seen["truncated"] > 0 and seen["info.at_depot"] > 0
    if case != "grid_neighbors":
        assert seen["terminated"] > 0 and seen["info.delivered"] > 0
    if case == "crowded":
        assert seen["info.collisions"] > 0


@pytest.mark.parametrize("options", [dict(max_steps=40), dict(n_carriers=5, n_scouts=2, max_steps=25)])
def test_fused_matches_torch_reference_over_long_random_rollouts(options, generator):
    """Hundreds of steps of uniform random actions (beyond the bounds: clamping acts) with auto-reset:
    observations, rewards, flags and info agree (floats within ``PARITY_ATOL``)."""
    fused, reference = make_pair("fleet", **options)
    assert_rows_match(record(fused, _outputs(fused)), record(reference, _outputs(reference)), "reset")
    collisions = truncated = 0
    for t in range(N_RANDOM_STEPS):
        actions = random_actions(fused, generator)
        fused_row = record(fused, fused.step(actions))
        assert_rows_match(fused_row, record(reference, reference.step(actions)), f"step {t}")
        collisions += int(fused_row["info.collisions"].sum())
        truncated += int(fused_row["truncated"].sum())
    assert truncated >= 5 * fused.n_envs and collisions > 0


def _outputs(env):
    return env.obs, env.reward, env.terminated, env.truncated, env.info


def test_reset_draws_are_bit_identical_between_fused_and_reference():
    fused, reference = make_pair("fleet", n_scouts=2)
    mask = torch.arange(fused.n_envs) % 3 == 1
    for seed in (0, 5, 987654):
        fused.reset(seed=seed)
        reference.reset(seed=seed)
        for _ in range(2):  # a full reset, then a masked one
            for key in ("pos", "theta", "vel", "speed", "ang_vel"):
                assert torch.equal(getattr(fused.state, key), getattr(reference.state, key)), (seed, key)
            assert torch.equal(fused.scenario.depot, reference.scenario.depot), seed
            torch.testing.assert_close(fused.scenario.prev_dist, reference.scenario.prev_dist, atol=PARITY_ATOL, rtol=0)
            torch.testing.assert_close(fused.obs, reference.obs, atol=PARITY_ATOL, rtol=0)
            fused.reset_at(mask)
            reference.reset_at(mask)
    # Depots differ between envs and lie where the depot disc fits in the arena.
    depot = fused.scenario.depot
    assert bool((depot.abs() <= fused.scenario.depot_extent).all()) and depot.std(dim=0).min() > 0.2


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("n_carriers", [1, 3])
def test_the_narrower_groups_columns_are_zero(fused, n_carriers, generator):
    """A scout's row holds zeros after its ``SCOUT_OBS_DIM`` columns, through steps, auto-resets
    and ``final_obs``; a lone carrier's other-carrier columns are zero, its flag 0."""
    env = swarp.make("fleet", n_envs=8, device="cpu", fused=fused, auto_reset=True, max_steps=10,
                     n_carriers=n_carriers, n_scouts=2)  # fmt: skip
    rows, n_final = [env.obs.clone()], 0
    for _ in range(25):
        obs, _, terminated, truncated, info = env.step(random_actions(env, generator))
        assert obs["scouts"].shape == (8, 2, SCOUT_OBS_DIM) and obs["carriers"].shape == (8, n_carriers, OBS_DIM)
        rows.append(env.obs.clone())  # the row store: the scouts' padding columns too
        done = terminated | truncated
        if done.any():
            rows.append(env.final_obs[done])
            n_final += 1
    assert n_final >= 2
    for obs in rows:
        assert not obs[..., n_carriers:, SCOUT_OBS_DIM:].any()
        assert obs[..., :n_carriers, 4:6].abs().sum() > 0  # the carriers' columns are not all zero
        flag = obs[..., :n_carriers, 8]
        assert bool((flag == (1.0 if n_carriers > 1 else 0.0)).all())
        if n_carriers == 1:
            assert not obs[..., :1, 6:8].any()


def test_observation_layout_matches_the_docstring(generator):
    env = swarp.make("fleet", n_envs=3, device="cpu", n_carriers=3, n_scouts=2)
    for _ in range(4):
        env.step(random_actions(env, generator))
    obs, state, sc = env.obs, env.state, env.scenario
    C = 3
    pos, vel = state.pos.double(), state.vel.double()
    c, s = torch.cos(state.theta[:, :C].double()), torch.sin(state.theta[:, :C].double())

    def body(x):  # world-frame [E, C, 2] -> (ahead, left)
        return torch.stack([c * x[..., 0] + s * x[..., 1], c * x[..., 1] - s * x[..., 0]], -1)

    offsets = pos.unsqueeze(1) - pos.unsqueeze(2)  # [e, i, j] = p_j - p_i
    dist = offsets.norm(dim=-1)
    scout = offsets[:, :C, C:].gather(2, dist[:, :C, C:].argmin(-1)[..., None, None].expand(-1, -1, 1, 2))[:, :, 0]
    mates = dist[:, :C, :C] + torch.eye(C, dtype=torch.float64) * 1e9
    mate = offsets[:, :C, :C].gather(2, mates.argmin(-1)[..., None, None].expand(-1, -1, 1, 2))[:, :, 0]
    expected = torch.cat([c[..., None], s[..., None], body(vel[:, :C]), body(scout), body(mate),
                          torch.ones(3, C, 1, dtype=torch.float64)], -1)  # fmt: skip
    torch.testing.assert_close(obs[:, :C].double(), expected, atol=1e-5, rtol=0)
    scouts = torch.cat([pos[:, C:], vel[:, C:], sc.depot.double().unsqueeze(1) - pos[:, C:]], -1)
    torch.testing.assert_close(obs[:, C:, :SCOUT_OBS_DIM].double(), scouts, atol=1e-5, rtol=0)
    # The info of the step: distances to the depot, who is there, carriers delivered.
    torch.testing.assert_close(env.info["dist_to_depot"].double(), (sc.depot.double().unsqueeze(1) - pos).norm(dim=-1))
    assert torch.equal(env.info["delivered"], env.info["at_depot"][:, :C].sum(1, dtype=torch.int32))


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_terminates_with_the_bonus_when_every_carrier_is_at_the_depot(fused):
    env = swarp.make("fleet", n_envs=2, device="cpu", fused=fused, final_reward=5.0, collision_penalty=0.0)
    sc = env.scenario
    # Carriers on a ring of 0.15 m around the depot (env 1: one of them 0.3 m out, towards the
    # arena's centre); the scout in the far corner.
    angles = torch.tensor([0.0, 2.0, 4.0])
    ring = torch.stack([torch.cos(angles), torch.sin(angles)], -1)
    pos = env.state.pos.clone()
    pos[:, :3] = sc.depot.unsqueeze(1) + 0.15 * ring
    pos[1, 2] = sc.depot[1] * (1.0 - 0.3 / sc.depot[1].norm())
    pos[:, 3] = -0.9 * sc.depot.sign()
    env.world.set_state(pos=pos)
    sc.prev_dist.copy_((sc.depot.unsqueeze(1) - pos).norm(dim=-1))
    _, by_group, terminated, _, info = env.step(torch.zeros(2, 4, 2))
    reward = torch.cat([by_group["carriers"], by_group["scouts"]], dim=1)
    assert terminated.tolist() == [True, False]
    assert info["delivered"].tolist() == [3, 2]
    assert info["at_depot"].tolist() == [[True, True, True, False], [True, True, False, False]]
    torch.testing.assert_close(reward[0], torch.full((4,), 5.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(reward[1], torch.zeros(4), atol=1e-5, rtol=0)
    assert torch.equal(sc.success(), terminated)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_each_agent_is_paid_its_own_progress_less_its_collisions(fused, generator):
    """Crowded random play: every agent's reward is ``shaping_factor * (d_prev - d) -
    collision_penalty * collisions`` (no bonus: nobody delivers), with collisions on the way."""
    env = swarp.make("fleet", n_envs=8, device="cpu", fused=fused, shaping_factor=2.0, collision_penalty=0.5,
                     n_carriers=5, n_scouts=2, world_size=0.5, agent_radius=0.07, goal_radius=0.22)  # fmt: skip
    collisions = 0
    for _ in range(20):
        prev = env.scenario.prev_dist.clone()
        _, by_group, terminated, truncated, info = env.step(random_actions(env, generator))
        reward = torch.cat([by_group["carriers"], by_group["scouts"]], dim=1)
        assert not (terminated | truncated).any()
        expected = 2.0 * (prev - info["dist_to_depot"]) - 0.5 * info["collisions"].float()
        torch.testing.assert_close(reward, expected, atol=1e-5, rtol=0)
        collisions += int(info["collisions"].sum())
    assert collisions > 0


def test_scripted_controller_succeeds_and_random_actions_do_not(generator):
    """The scripted controller (scouts to the depot, carriers after their scout) within the episode
    on 64 envs; random actions almost never."""
    env = swarp.make("fleet", n_envs=64, device="cpu", seed=3)
    scripted = episode_success_rate(env, scripted_policy, generator)
    random = episode_success_rate(env, lambda e, g: random_actions(e, g, 0.0), generator)
    assert scripted >= 0.95 and random <= 0.05, (scripted, random)
    assert torch.equal(env.scenario.scripted_actions(), scripted_actions(env))


def test_the_scripted_carriers_follow_the_scout_not_the_depot():
    """A carrier turns after the scout (ahead-left of it), not towards the depot (to its right),
    and drives forward only where the scout lies ahead."""
    env = swarp.make("fleet", n_envs=1, device="cpu", seed=0, n_carriers=1)
    sc = env.scenario
    sc.depot.copy_(torch.tensor([[0.0, -0.6]]))
    for scout, drives in (([-0.5, 0.5], False), ([0.5, 0.1], True)):
        env.world.set_state(pos=torch.tensor([[[0.0, 0.0], scout]]), theta=torch.zeros(1, 2))
        forward, turn = sc.scripted_actions()[0, 0].tolist()
        assert turn > 0.0 and (forward > 0.0) == drives, (scout, forward, turn)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_carriers=0), "n_carriers must be an int >= 1"),
        (dict(n_scouts=0), "n_scouts must be an int >= 1"),
        (dict(n_scouts=1.0), "n_scouts must be an int"),
        (dict(n_agents=1), "n_agents must be an int >= 2"),
        (dict(n_agents=3, n_scouts=3), r"n_agents \(3\) must exceed n_scouts \(3\)"),
        (dict(n_agents=5, n_carriers=3), r"n_agents \(5\) must equal n_carriers \+ n_scouts \(3 \+ 1\)"),
        (dict(n_carriers=300), "n_carriers must be an int >= 1 and <= 255"),
        (dict(carrier_speed=0.0), "carrier_speed must be a finite number > 0"),
        (dict(scout_speed=-1.0), "scout_speed must be a finite number > 0"),
        (dict(carrier_turn_rate=float("inf")), "carrier_turn_rate must be a finite number > 0"),
        (dict(goal_radius=0.0), "goal_radius must be a finite number > 0"),
        (dict(goal_radius=0.96), "the depot must fit in the arena"),
        (dict(n_carriers=12, goal_radius=0.15), r"too small for 12 carriers"),
        (dict(final_reward=float("nan")), "final_reward must be a finite number >= 0"),
        (dict(collision_penalty=-0.1), "collision_penalty must be a finite number >= 0"),
        (dict(max_steps=0), "max_steps must be an int >= 1"),
        (dict(neighbor_method="kd"), "neighbor_method must be one of brute, grid, auto"),
        (dict(n_carriers=20, n_scouts=20, world_size=0.4, goal_radius=0.3), "cannot place 40 separated points"),
        (dict(depot_radius=0.2), r"unknown keyword\(s\) \['depot_radius'\]"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("fleet", n_envs=1, device="cpu", **options)


def test_n_agents_sets_the_carriers_for_generic_tools():
    assert FleetScenario(n_agents=6).cfg.carrier_count == 5
    assert FleetScenario(n_agents=6, n_scouts=2).cfg.carrier_count == 4
    assert FleetScenario(n_agents=4, n_carriers=3).cfg.agent_count == 4
    assert FleetScenario().cfg.carrier_count == 3
    assert swarp.make("fleet", n_envs=1, device="cpu", n_agents=5).n_agents == 5


@pytest.mark.gpu
def test_on_cuda_the_twins_agree_and_match_the_cpu(generator):
    """On CUDA: the Warp twin equals the torch reference (PARITY_ATOL) and the CPU's fused env
    (float tolerance, the first 20 steps) over scripted and random steps with auto-reset; step
    returns each group's views."""
    options = dict(n_envs=16, seed=5, auto_reset=True, max_steps=30)
    fused, reference = (swarp.make("fleet", device="cuda:0", fused=f, **options) for f in (True, False))
    cpu = swarp.make("fleet", device="cpu", fused=True, **options)
    for t in range(80):
        actions = scripted_actions(cpu) if t % 2 else random_actions(cpu, generator)
        obs, *_ = fused.step(actions.to("cuda:0"))
        reference.step(actions.to("cuda:0"))
        cpu.step(actions)
        assert obs["scouts"].shape == (16, 1, SCOUT_OBS_DIM) and obs["scouts"].device.type == "cuda"
        assert_rows_match(record(fused, _outputs(fused)), record(reference, _outputs(reference)), f"step {t}")
        if t < 20:  # later, rounding differences between the devices grow through the contacts
            torch.testing.assert_close(fused.obs.cpu(), cpu.obs, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(fused.reward.cpu(), cpu.reward, atol=1e-4, rtol=1e-4)
