"""The flocking scenario (``swarp/scenarios/flocking.py`` and its Warp twin ``flocking_kernels.py``):
parity over option corners, the observation layout, the reward terms, the drifting target, the
scripted controller against random actions, and option validation. The framework contract
(graph vs eager, masked resets, determinism, host transfers) is in ``test_contract.py``."""

import math

import pytest
import torch

import swarp
from swarp.scenarios.framework import arena
from tests.support import episode_success_rate, parity_rollout, random_actions, scripted_policy

N_PARITY_STEPS = 40

PARITY_CASES = {
    # A fast target in a small arena: it bounces off its square within the rollout.
    "bouncing_target": dict(n_agents=6, world_size=1.0, target_radius=0.3, target_speed=2.0, max_steps=20),
    # Short lists and a wide sensing range: lists overflow, agents collide, separation is large.
    "crowded": dict(
        n_agents=8, world_size=0.5, target_radius=0.2, agent_radius=0.06, max_neighbors=4, obs_range=1.0, max_steps=20
    ),
    "acceleration_control": dict(n_agents=5, ctrl_mode="acceleration", obs_neighbors=2, max_steps=20),
    "fixed_target_float64": dict(n_agents=4, target_speed=0.0, dtype="float64", max_steps=20),
    "no_neighbor_features": dict(n_agents=3, obs_neighbors=0, max_steps=20),
    # A 4-wide channel: each agent hears its observed neighbors' messages.
    "talking": dict(n_agents=6, comm_dim=4, max_steps=20),
    # Enough agents for the sort-based grid neighbor search (the others use all pairs).
    "grid_neighbors": dict(n_agents=130, world_size=2.0, obs_range=0.3, max_neighbors=6, max_steps=20, n_envs=2),
}


def excuse_truncated_lists(fused: dict, reference: dict) -> None:
    """Where an env's neighbor lists overflowed, the kernels see only the K nearest neighbors (as the
    physics does): collisions are a lower bound of the reference's all-pairs count and the
    separation sum may miss pairs. Check the bound, then take the reference's reward terms there."""
    overflow = fused["info.neighbor_overflow"]
    assert torch.equal(overflow, reference["info.neighbor_overflow"])
    assert bool((fused["info.collisions"] <= reference["info.collisions"]).all())
    rows = overflow.view(-1, 1)
    for key in ("reward", "env.reward", "info.collisions", "info.in_flock"):
        fused[key] = torch.where(rows, reference[key], fused[key])


@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, generator):
    options = dict(PARITY_CASES[case])
    seen = parity_rollout("flocking", options, N_PARITY_STEPS, generator, excuse=excuse_truncated_lists)
    assert seen["truncated"] > 0
    if case != "grid_neighbors":
        assert seen["info.in_flock"] > 0, "the scripted half of the batch should reach the target"
    if case == "crowded":
        assert seen["info.neighbor_overflow"] > 0 and seen["info.collisions"] > 0


def test_observation_layout_matches_the_docstring():
    env = swarp.make("flocking", n_envs=3, device="cpu", n_agents=5, obs_neighbors=2)
    assert env.obs_dim == 8 + 5 * 2
    obs, _ = env.reset()
    state, sc = env.state, env.scenario
    torch.testing.assert_close(obs[..., 0:2], state.pos)
    torch.testing.assert_close(obs[..., 2:4], state.vel)
    torch.testing.assert_close(obs[..., 4:6], sc.target.unsqueeze(1) - state.pos)
    torch.testing.assert_close(obs[..., 6:8], sc.target_vel.unsqueeze(1).expand(-1, 5, -1))
    torch.testing.assert_close(sc.target_vel.norm(dim=-1), torch.full((3,), sc.cfg.target_speed))
    slots = obs[..., 8:].reshape(3, 5, 2, 5)
    valid = slots[..., 4]
    assert bool(((valid == 0) | (valid == 1)).all())
    assert bool((slots[valid == 0] == 0).all())


@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_agents_hear_their_observed_neighbors(kind, generator):
    """With ``comm_dim``, a step's row ends with the messages its k observed neighbors sent with that
    step's actions (the slots whose valid flag is set; zeros elsewhere and at a fresh start), the
    same in the Warp twin and the torch reference, with discrete (one-hot) messages too."""
    k, C = 3, 4
    make = dict(n_envs=16, n_agents=6, obs_neighbors=k, obs_range=1.0, comm_dim=C, action_space=kind)
    envs = [swarp.make("flocking", device="cpu", fused=fused, auto_reset=True, max_steps=5, **make)
            for fused in (True, False)]  # fmt: skip
    assert envs[0].obs_dim == 8 + (5 + C) * k and envs[0].act_dim == (2 + C if kind == "continuous" else 1)
    obs, _ = envs[0].reset()
    envs[1].reset()
    assert obs[..., 8 + 5 * k :].abs().sum() == 0
    for t in range(10):
        actions = random_actions(envs[0], generator)
        obs, *_ = envs[0].step(actions)
        reference, *_ = envs[1].step(actions)
        torch.testing.assert_close(obs, reference)
        if t == 8:  # mid-episode: check the heard block against the messages sent
            check_heard(envs[0], obs, k, C)
    assert (envs[0].step_count == 0).all() and obs[..., 8 + 5 * k :].abs().sum() == 0
    assert envs[0].final_obs[..., 8 + 5 * k :].abs().sum() > 0


def check_heard(env, obs, k: int, C: int) -> None:
    """Every valid neighbor slot's heard message is the message of the agent at that relative
    position; an empty slot hears nothing."""
    state, comm = env.state, env.comm
    E, A = obs.shape[:2]
    slots = obs[..., 8 : 8 + 5 * k].reshape(E, A, k, 5)
    heard = obs[..., 8 + 5 * k :].reshape(E, A, k, C)
    assert slots[..., 4].sum() > 0
    for e in range(E):
        for i in range(A):
            for w in range(k):
                if slots[e, i, w, 4] == 0:
                    assert heard[e, i, w].abs().sum() == 0
                    continue
                j = torch.argmin((state.pos[e] - state.pos[e, i] - slots[e, i, w, :2]).norm(dim=-1))
                torch.testing.assert_close(heard[e, i, w], comm[e, j])


def test_target_drifts_and_bounces_inside_its_square(generator):
    env = swarp.make("flocking", n_envs=8, device="cpu", target_speed=3.0, world_size=1.0, target_radius=0.4)
    sc = env.scenario
    limit = sc.target_limit
    reflected = 0
    for _ in range(50):
        before, velocity = sc.target.clone(), sc.target_vel.clone()
        env.step(random_actions(env, generator))
        assert bool((sc.target.abs() <= limit + 1e-6).all())
        # Speed is kept; a component flips exactly where the straight move would leave the square.
        torch.testing.assert_close(sc.target_vel.norm(dim=-1), torch.full((8,), 3.0))
        straight = before + velocity * env.stepper.dt
        flipped = sc.target_vel != velocity
        assert torch.equal(flipped, straight.abs() > limit)
        reflected += int(flipped.sum())
    assert reflected > 0


def test_reward_terms_follow_the_docstring():
    """One hand-placed state: each term of the reward as the docstring writes it."""
    cfg = dict(n_agents=3, world_size=1.0, target_speed=0.0, separation_distance=0.3, agent_radius=0.05)
    env = swarp.make("flocking", n_envs=1, device="cpu", fused=False, **cfg)
    sc, c = env.scenario, env.scenario.cfg
    pos = torch.tensor([[[0.0, 0.0], [0.08, 0.0], [0.4, 0.3]]])
    vel = torch.tensor([[[0.1, 0.0], [0.0, 0.1], [0.0, 0.0]]])
    env.world.set_state(pos=pos, vel=vel)
    sc.target.copy_(torch.tensor([[0.2, 0.0]]))
    sc.prev_dist.copy_(torch.tensor([[0.3, 0.3, 0.3]]))
    reward = sc.rewards()
    dist = (sc.target.view(1, 1, 2) - pos).norm(dim=-1)
    centroid, mean_vel = pos.mean(dim=1, keepdim=True), vel.mean(dim=1, keepdim=True)
    separation = torch.tensor([[1 - 0.08 / 0.3, 1 - 0.08 / 0.3, 0.0]])
    collisions = torch.tensor([[1.0, 1.0, 0.0]])  # 0.08 m apart, radii 0.05
    expected = (
        c.target_weight * (0.3 - dist)
        - c.cohesion_weight * (pos - centroid).norm(dim=-1)
        - c.alignment_weight * (vel - mean_vel).norm(dim=-1)
        - c.separation_weight * separation
        - c.collision_penalty * collisions
        + c.flock_bonus * torch.tensor([[0.0, 0.0, 1.0]])  # 2 is in the target disc, touching nobody
    )
    torch.testing.assert_close(reward, expected)
    info = sc.info()
    assert info["in_flock"].tolist() == [[False, False, True]]  # 0 and 1 collide
    torch.testing.assert_close(info["alignment"], torch.tensor([math.hypot(0.1, 0.1) / 3 / (0.2 / 3 + 1e-6)]))


def test_scripted_controller_beats_random_actions(generator):
    env = swarp.make("flocking", n_envs=48, device="cpu", seed=2, max_steps=120)
    scripted = episode_success_rate(env, scripted_policy, generator)
    random = episode_success_rate(env, lambda e, g: random_actions(e, g, 0.0), generator)
    assert scripted >= 0.9 and random <= 0.05, (scripted, random)


def test_scripted_controller_under_acceleration_control(generator):
    env = swarp.make("flocking", n_envs=32, device="cpu", seed=3, max_steps=150, ctrl_mode="acceleration")
    assert episode_success_rate(env, scripted_policy, generator) >= 0.8


def test_track_velocity_rejects_non_holonomic_fleets():
    env = swarp.make("navigation", n_envs=1, device="cpu", model="diff_drive")
    with pytest.raises(NotImplementedError, match="holonomic"):
        arena.track_velocity(env, torch.zeros(1, env.n_agents, 2))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_agents=0), "n_agents must be an int >= 1"),
        (dict(n_agents=True), "n_agents must be an int"),
        (dict(target_radius=0.0), "target_radius must be a finite number > 0"),
        (dict(target_radius=2.5), r"target_radius \(2.5\) must be < world_size"),
        (dict(target_speed=-1.0), "target_speed must be a finite number >= 0"),
        (dict(target_speed=100.0), "the target would skip past a wall"),
        (dict(separation_distance=float("inf")), "separation_distance must be a finite number > 0"),
        (dict(cohesion_weight=-0.1), "cohesion_weight must be a finite number >= 0"),
        (dict(obs_neighbors=5, max_neighbors=4), r"max_neighbors \(4\) must be >= obs_neighbors \(5\)"),
        (dict(ctrl_mode="torque"), "ctrl_mode"),
        (dict(model="diff_drive"), r"unknown keyword\(s\) \['model'\]"),
        (dict(n_agents=2000, world_size=0.8, target_radius=0.3), "cannot place 2000 separated points"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("flocking", n_envs=1, device="cpu", **options)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_talking_flock_on_cuda(kind, generator):
    """With a channel on CUDA: the captured graph and eager launches give the same bits, and the
    CPU the same values to float rounding (the decode folded into the fused substep, the heard block)."""
    make = dict(n_envs=64, n_agents=8, comm_dim=4, action_space=kind, auto_reset=True, max_steps=6)
    cpu = swarp.make("flocking", device="cpu", **make)
    graph = swarp.make("flocking", device="cuda:0", **make)
    eager = swarp.make("flocking", device="cuda:0", use_graph=False, **make)
    assert graph.graph_mode and not eager.graph_mode
    for _ in range(10):
        actions = random_actions(cpu, generator)
        expected, *_ = cpu.step(actions)
        obs, *_ = graph.step(actions.to("cuda:0"))
        again, *_ = eager.step(actions.to("cuda:0"))
        assert torch.equal(obs, again) and torch.equal(graph.comm, eager.comm)
        torch.testing.assert_close(obs.cpu(), expected, atol=1e-4, rtol=0)
