"""The speaker-listener scenario (``swarp/scenarios/speaker_listener.py`` and its Warp twin
``speaker_listener_kernels.py``): VMAS's layout of groups, actions and observations, a speaker that
cannot move, what the listener hears (the speaker's message of the step, silence at a fresh start),
parity of the twins over long rollouts with auto-resets in continuous and discrete actions, graph ==
eager, seeds, reward and success, the scripted controller against a silent speaker and random play,
the grad path through the message, and option validation. The framework contract is in
``test_contract.py``."""

import pytest
import torch

import swarp
from swarp.scenarios.speaker_listener import encode_actions, scripted_actions
from swarp.scenarios.speaker_listener_kernels import listener_obs_dim
from tests.support import (
    assert_bit_identical,
    assert_rows_match,
    random_actions,
    record,
    rollout_actions,
)

N = 3
#: The listener's heard message: its last N columns.
HEARD = slice(2 + 2 * N, 2 + 3 * N)
N_RANDOM_STEPS = 300
KINDS = ["continuous", "discrete", "multidiscrete"]


def make(fused: bool = True, **options) -> swarp.Environment:
    return swarp.make("speaker_listener", **{"n_envs": 16, "device": "cpu", "seed": 7, "fused": fused, **options})


def flat(value) -> torch.Tensor:
    """A step's mapping by group joined back into agent order (speaker, listener)."""
    return torch.cat([value["speaker"], value["listener"]], dim=1) if isinstance(value, dict) else value


def mixed(env, generator) -> object:
    """Even envs under the scripted controller (episodes succeed), odd envs at random, in the env's
    action spaces (a tensor, or a mapping by group)."""
    noise = random_actions(env, generator)
    scripted = encode_actions(env, scripted_actions(env))
    even = (torch.arange(env.n_envs) % 2 == 0).view(-1, 1, 1)
    if isinstance(noise, dict):
        return {k: torch.where(even, scripted[k], noise[k]).contiguous() for k in noise}
    return torch.where(even, scripted, noise).contiguous()


def test_groups_actions_and_observations_follow_vmas():
    """Speaker first (3 columns, 2 + 3 action columns, or 27 discrete choices), listener second
    (11 columns, 2 action columns, 9 choices): VMAS 1.5.2's spaces of ``simple_speaker_listener``."""
    env = make()
    assert env.grouped and [(g.name, g.start, g.stop, g.obs_dim) for g in env.groups] == [
        ("speaker", 0, 1, N),
        ("listener", 1, 2, listener_obs_dim(N)),
    ]
    spaces = {g.name: g.action_space for g in env.groups}
    assert (spaces["speaker"].width, spaces["speaker"].comm_dim) == (2 + N, N)
    assert (spaces["listener"].width, spaces["listener"].comm_dim) == (2, 0)
    assert env.act_dim == 2 + N and env.comm.shape == (16, 2, N)
    low, high = env.action_bounds
    assert low.tolist() == [[0.0] * 5, [-1.0, -1.0, 0.0, 0.0, 0.0]]
    assert high.tolist() == [[0.0, 0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0, 0.0]]
    discrete = make(action_space="discrete")
    assert [g.action_space.heads for g in discrete.groups] == [(27,), (9,)]
    vmas = pytest.importorskip("vmas")
    for continuous in (True, False):
        venv = vmas.make_env("simple_speaker_listener", num_envs=2, device="cpu", continuous_actions=continuous)
        obs_widths = [space.shape[0] for space in venv.observation_space]
        assert obs_widths == [g.obs_dim for g in env.groups]
        if continuous:
            assert [space.shape[0] for space in venv.action_space] == [spaces["speaker"].width, 2]
        else:
            assert [space.n for space in venv.action_space] == [27, 9]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_the_speaker_cannot_move_and_the_listener_drives(fused):
    env = make(fused=fused, n_envs=2)
    env.world.set_state(pos=torch.tensor([[[0.5, 0.5], [0.0, 0.0]]] * 2))  # the listener away from the walls
    start = env.state.pos.clone()
    actions = torch.tensor([[[1.0, -1.0, 0.25, 0.5, 2.0], [0.5, -0.5, 1.0, 1.0, 1.0]]] * 2)
    for _ in range(3):
        env.step(actions)
    assert torch.equal(env.state.pos[:, 0], start[:, 0])
    torch.testing.assert_close(env.state.pos[:, 1], start[:, 1] + torch.tensor([0.15, -0.15]), atol=1e-6, rtol=0)
    assert env.comm[:, 0].tolist() == [[0.25, 0.5, 1.0]] * 2 and not env.comm[:, 1].any()


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_listener_hears_the_step_and_silence_at_a_fresh_start(fused, kind, generator):
    """A step's observation carries the speaker's message of that step (continuous: clamped to
    [0, 1]; discrete: one-hot); the first observation of an episode (reset, auto-reset) hears
    zeros, while ``final_obs`` keeps what was heard on the last step; the speaker never hears."""
    env = make(fused=fused, auto_reset=True, max_steps=4, action_space=kind)
    obs, _ = env.reset()
    assert not obs["listener"][..., HEARD].any()
    for t in range(9):
        obs, _, _, truncated, info = env.step(random_actions(env, generator))
        heard = obs["listener"][:, 0, HEARD]
        if (t + 1) % 4 == 0:
            assert truncated.all() and not heard.any()
            assert torch.equal(info["final_obs"]["listener"][:, 0, HEARD], env.comm[:, 0])
        else:
            assert torch.equal(heard, env.comm[:, 0]) and heard.any()
        if kind != "continuous":
            assert torch.equal(env.comm[:, 0].sum(-1), torch.ones(16))
        assert obs["speaker"].sum(-1).eq(1).all()  # the goal one-hot, nothing heard


def test_continuous_messages_are_clamped_to_the_unit_box():
    env = make(n_envs=1)
    obs, *_ = env.step(torch.tensor([[[0.0, 0.0, -0.5, 0.25, 3.0], [0.0, 0.0, 0.0, 0.0, 0.0]]]))
    assert obs["listener"][0, 0, HEARD].tolist() == [0.0, 0.25, 1.0]


@pytest.mark.parametrize(
    "options",
    [
        dict(max_steps=25),
        dict(max_steps=10, action_space="discrete"),
        dict(max_steps=10, action_space="multidiscrete", dtype="float64"),
        dict(max_steps=10, n_landmarks=5, action_space={"listener": "discrete"}),
    ],
    ids=["continuous", "discrete", "multidiscrete64", "five_landmarks_mixed"],
)
def test_fused_matches_torch_reference_over_long_rollouts(options, generator):
    """Hundreds of steps (half the envs scripted, half random, beyond the bounds) with auto-resets:
    observations, rewards, flags, info, messages and state agree (floats within ``PARITY_ATOL``)."""
    fused, reference = make(True, auto_reset=True, **options), make(False, auto_reset=True, **options)
    assert_rows_match(record(fused, _outputs(fused)), record(reference, _outputs(reference)), "reset")
    successes = resets = 0
    for t in range(N_RANDOM_STEPS):
        actions = mixed(fused, generator)
        fused_row = record(fused, fused.step(actions))
        assert_rows_match(fused_row, record(reference, reference.step(actions)), f"step {t}")
        assert torch.equal(fused.comm, reference.comm), f"step {t}: comm"
        successes += int(fused_row["info.success"].sum())
        resets += int(fused_row["truncated"].sum())
    assert resets >= 10 * fused.n_envs and successes > 0


def _outputs(env):
    return env.obs, env.reward, env.terminated, env.truncated, env.info


@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_graph_replay_and_eager_are_bit_identical_and_seeds_repeat(kind, generator):
    """Every launch mode of the plan gives the same bits, with auto-resets; the same seed the same
    trajectory, another seed another."""
    options = dict(auto_reset=True, max_steps=7, action_space=kind)
    eager_env = make(plan={"launch": "eager"}, **options)
    assert eager_env.execution_mode == "eager"
    actions = [random_actions(eager_env, generator) for _ in range(30)]
    eager = rollout_actions(eager_env, actions)
    for env in (make(use_graph=False, **options), make(**options)):
        assert env.execution_mode in ("replay", "graph")
        assert_bit_identical(eager, rollout_actions(env, actions))
    assert_bit_identical(eager, rollout_actions(make(plan={"launch": "eager"}, **options), actions))
    other = make(seed=8, **options)
    assert not torch.equal(other.scenario.landmarks, make(**options).scenario.landmarks)


def test_reset_draws_landmarks_and_goals_in_the_arena():
    env = make(n_envs=512, seed=3)
    sc = env.scenario
    assert bool((sc.landmarks.abs() <= sc.landmark_extent).all()) and sc.landmarks.std(dim=0).min() > 0.4
    counts = torch.bincount(sc.goal.long(), minlength=N)
    assert counts.min() > 512 / N * 0.8, counts
    assert torch.equal(env.obs[:, 0, :N].argmax(-1), sc.goal.long())


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_reward_is_the_shared_distance_penalty_and_success_the_goal_radius(fused):
    env = make(fused=fused, n_envs=2, distance_weight=2.0)
    sc = env.scenario
    goal = sc.landmarks[torch.arange(2), sc.goal.long()]
    pos = env.state.pos.clone()
    pos[:, 1] = goal + torch.tensor([[0.06, 0.0], [0.0, -0.3]])
    env.world.set_state(pos=pos)
    _, reward, terminated, truncated, info = env.step(torch.zeros(2, 2, 2 + N))
    torch.testing.assert_close(info["dist_to_goal"], torch.tensor([0.06, 0.3]), atol=1e-5, rtol=0)
    assert info["success"].tolist() == [True, False] and torch.equal(sc.success(), info["success"])
    for group in ("speaker", "listener"):
        torch.testing.assert_close(reward[group][:, 0], torch.tensor([-0.12, -0.6]), atol=1e-5, rtol=0)
    assert not terminated.any() and not truncated.any()


def _success(env, act) -> float:
    """Share of envs whose listener ends its first episode at the goal."""
    env.reset()
    with torch.no_grad():
        for _ in range(env.max_steps):
            *_, truncated, info = env.step(act(env))
    assert truncated.all()
    return float(info["success"].float().mean())


@pytest.mark.parametrize("kind", KINDS)
def test_scripted_controller_succeeds_where_a_silent_speaker_and_random_play_fail(kind, generator):
    """Seeds 0-2, 256 envs: the scripted pair reaches the goal in every episode, in each action
    space; the same listener with a speaker that says nothing does not, and random play almost never."""
    for seed in range(3):
        env = swarp.make("speaker_listener", n_envs=256, device="cpu", seed=seed, action_space=kind)
        assert _success(env, lambda e: encode_actions(e, scripted_actions(e))) == 1.0

    def silent(e):
        actions = scripted_actions(e)
        actions[:, 0, 2:] = torch.eye(N)[0]  # always "landmark 0"
        return encode_actions(e, actions)

    assert _success(env, silent) < 0.5
    assert _success(env, lambda e: random_actions(e, generator)) < 0.05
    assert torch.equal(env.scenario.scripted_actions(), scripted_actions(env))


def test_the_message_carries_the_gradient_to_the_speaker():
    """A grad-mode step: the listener's heard columns are the speaker's message with its history,
    so a loss on them reaches the speaker's message columns (and only inside [0, 1])."""
    env = make(fused=False, n_envs=2)
    speaker = torch.tensor([[[0.0, 0.0, 0.3, 1.5, -0.2]]] * 2, requires_grad=True)
    listener = torch.zeros(2, 1, 2, requires_grad=True)
    obs, *_ = env.step({"speaker": speaker, "listener": listener})
    obs["listener"][..., HEARD].sum().backward()
    assert speaker.grad[0, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(n_landmarks=1), "n_landmarks must be an int >= 2 and <= 6"),
        (dict(n_landmarks=7), "n_landmarks must be an int >= 2 and <= 6"),
        (dict(n_landmarks=3.0), "n_landmarks must be an int"),
        (dict(listener_speed=0.0), "listener_speed must be a finite number > 0"),
        (dict(goal_radius=-0.1), "goal_radius must be a finite number > 0"),
        (dict(distance_weight=float("nan")), "distance_weight must be a finite number >= 0"),
        (dict(landmark_radius=1.5), r"landmark_radius \(1.5\) must be < world_size"),
        (dict(max_steps=0), "max_steps must be an int >= 1"),
        (dict(n_agents=3), r"n_agents must be 2 \(one speaker, one listener\) where given, got 3"),
        (dict(lidar_rays=4), "lidar"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swarp.make("speaker_listener", n_envs=1, device="cpu", **options)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_on_cuda_the_twins_agree_and_match_the_cpu(kind, generator):
    """On CUDA: the Warp twin equals the torch reference (PARITY_ATOL) and the CPU's fused env
    (float tolerance) over scripted and random steps with auto-resets, messages included."""
    options = dict(n_envs=64, seed=5, auto_reset=True, max_steps=10, action_space=kind)
    fused, reference = (swarp.make("speaker_listener", device="cuda:0", fused=f, **options) for f in (True, False))
    cpu = swarp.make("speaker_listener", device="cpu", **options)
    for t in range(60):
        actions = mixed(cpu, generator)
        on_gpu = {k: v.to("cuda:0") for k, v in actions.items()} if isinstance(actions, dict) else actions.to("cuda:0")
        fused.step(on_gpu)
        reference.step(on_gpu)
        cpu.step(actions)
        assert_rows_match(record(fused, _outputs(fused)), record(reference, _outputs(reference)), f"step {t}")
        assert torch.equal(fused.comm.cpu(), cpu.comm), f"step {t}"
        torch.testing.assert_close(fused.obs.cpu(), cpu.obs, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(fused.reward.cpu(), cpu.reward, atol=1e-4, rtol=1e-4)
        assert torch.equal(fused.info["success"].cpu(), cpu.info["success"]), f"step {t}"
