"""The body scenarios (``transport``, ``push_t``, ``balance``: ``swarp/scenarios/body_goal.py``, its
Warp twin ``body_goal_kernels.py`` and the three scenario modules): fused/reference parity, resets,
determinism, graph against eager, no host sync, snapshots, gradients through the bodies, and the
scripted controllers against random actions."""

import importlib
import math

import pytest
import torch

import swarp
from tests.support import HostTransferError, forbid_host_transfers

SCENARIOS = ("transport", "push_t", "balance")
#: The CPU everywhere; CUDA (where the fused step is one captured CUDA graph) on GPU machines.
DEVICES = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
#: Fused kernels against the torch reference, float32. Resets differ from the reference by the
#: rounding of cos/sin (ring spawns), and contacts carry that along: [m], [m/s], [-].
PARITY_ATOL = 1e-4
N_PARITY_STEPS = 40
N_ENVS = 8
#: Envs and steps of the scripted-against-random comparison (an episode each).
N_EVAL_ENVS = 16
#: Success-rate margin by which the scripted controller must beat random actions.
SCRIPTED_MARGIN = 0.5
#: Scripted steps before the agents of every scenario are pushing their body (push-T agents first
#: walk to their pushing points: about 15 steps).
N_APPROACH_STEPS = 25


def make(name: str, **options) -> swarp.Environment:
    options = dict(dict(n_envs=N_ENVS, device="cpu", seed=5), **options)
    return swarp.make(name, **options)


def random_actions(env: swarp.Environment, generator: torch.Generator) -> torch.Tensor:
    low, high = env.action_bounds
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
    return (low + (high - low) * u.to(low.device)).contiguous()


def record(env: swarp.Environment, outputs: tuple) -> dict[str, torch.Tensor]:
    obs, reward, terminated, truncated, info = outputs
    row = {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}
    row.update({f"info.{k}": v for k, v in info.items() if k != "final_obs"})
    row.update({f"state.{k}": v for k, v in env.state._asdict().items()})
    row.update({f"scenario.{k}": v for k, v in env.scenario.state_tensors().items()})
    return {k: v.clone() for k, v in row.items()}


DISCRETE = ("terminated", "truncated", "info.success", "info.failure")


PARITY_CASES = {name: (name, {}) for name in SCENARIOS} | {"transport_tethered": ("transport", {"tethered": True})}


@DEVICES
@pytest.mark.parametrize("case", list(PARITY_CASES))
def test_fused_matches_torch_reference(case, device, generator):
    name, options = PARITY_CASES[case]
    fused = make(name, fused=True, auto_reset=True, max_steps=15, device=device, **options)
    reference = make(name, fused=False, auto_reset=True, max_steps=15, device=device, **options)
    assert fused.fused and not reference.fused and fused.execution_mode == "graph"
    seen = dict.fromkeys(DISCRETE, 0)
    for t in range(N_PARITY_STEPS):
        actions = random_actions(fused, generator)
        a, b = record(fused, fused.step(actions)), record(reference, reference.step(actions))
        for key in a:
            if key in DISCRETE:
                assert torch.equal(a[key], b[key]), f"{name} step {t}: {key}"
                seen[key] += int(a[key].count_nonzero())
            else:
                torch.testing.assert_close(a[key], b[key], atol=PARITY_ATOL, rtol=0, msg=f"{name} step {t}: {key}")
    assert seen["truncated"] > 0, "auto-resets after the time limit were covered"
    if name == "balance":
        assert seen["info.failure"] > 0, "random carriers drop the package"


@pytest.mark.parametrize("name", SCENARIOS)
def test_masked_resets_match_the_reference_and_leave_other_envs_alone(name):
    fused, reference = make(name, fused=True), make(name, fused=False)
    mask = torch.arange(N_ENVS) % 3 == 0
    for seed in (0, 11):
        fused.reset(seed=seed)
        reference.reset(seed=seed)
        for _ in range(2):
            for key, value in reference.state._asdict().items():
                torch.testing.assert_close(getattr(fused.state, key), value, atol=1e-6, rtol=0, msg=key)
            for key, value in reference.scenario.state_tensors().items():
                torch.testing.assert_close(fused.scenario.state_tensors()[key], value, atol=1e-6, rtol=0, msg=key)
            torch.testing.assert_close(fused.obs, reference.obs, atol=1e-6, rtol=0)
            before = {k: v.clone() for k, v in fused.state._asdict().items()}
            fused.reset_at(mask)
            reference.reset_at(mask)
            for key, value in fused.state._asdict().items():
                assert torch.equal(value[~mask], before[key][~mask]), f"{key} of an unmasked env changed"
    # Different episodes draw different layouts.
    assert not torch.equal(fused.state.body_pos[0], before["body_pos"][0]) or name == "balance"


@pytest.mark.parametrize("name", SCENARIOS)
def test_graph_eager_and_reruns_give_the_same_bits(name, generator, monkeypatch):
    noise = [random_actions(make(name), generator) for _ in range(25)]

    def run(env):
        return [record(env, env.step(actions)) for actions in noise]

    graph = run(make(name, auto_reset=True, max_steps=10))
    again = run(make(name, auto_reset=True, max_steps=10))
    replay = run(make(name, auto_reset=True, max_steps=10, use_graph=False))
    monkeypatch.setenv("SWARP_LAUNCH_MODE", "eager")
    eager = run(make(name, auto_reset=True, max_steps=10, use_graph=False))
    for other in (again, replay, eager):
        for row_a, row_b in zip(graph, other, strict=True):
            for key in row_a:
                assert torch.equal(row_a[key], row_b[key]), key


@DEVICES
@pytest.mark.parametrize("name", SCENARIOS)
def test_steps_and_resets_make_no_host_transfers(name, device, generator):
    env = make(name, auto_reset=True, max_steps=5, device=device)
    noise = [random_actions(env, generator) for _ in range(12)]
    env.step(noise[0])
    mask = torch.arange(N_ENVS, device=device) % 2 == 0
    env.reset_at(mask)
    with forbid_host_transfers():
        with pytest.raises(HostTransferError):
            bool(torch.ones(1))
        for actions in noise[1:]:
            env.step(actions)
        env.reset_at(mask)
    assert bool((env.episode >= 2).all())


@pytest.mark.parametrize("name", SCENARIOS)
def test_snapshots_cover_the_bodies(name, generator):
    env = make(name)
    for _ in range(3):
        env.step(random_actions(env, generator))
    snapshot = env.get_state()
    assert {"state.body_pos", "state.body_theta", "state.body_vel", "state.body_ang_vel"} <= snapshot.keys()
    noise = [random_actions(env, generator) for _ in range(5)]
    first = [record(env, env.step(a)) for a in noise]
    env.set_state(snapshot)
    second = [record(env, env.step(a)) for a in noise]
    for row_a, row_b in zip(first, second, strict=True):
        for key in row_a:
            assert torch.equal(row_a[key], row_b[key]), key


def test_observation_layout_matches_the_docstring():
    env = make("balance", n_envs=2)
    env.step(random_actions(env, torch.Generator().manual_seed(0)))
    obs, s, sc = env.obs, env.state, env.scenario
    assert env.obs_dim == 8 + 6 * 2
    torch.testing.assert_close(obs[..., 0:2], s.pos)
    torch.testing.assert_close(obs[..., 2:4], s.vel)
    for b in range(2):
        o = 4 + 6 * b
        torch.testing.assert_close(obs[..., o : o + 2], s.body_pos[:, b : b + 1] - s.pos)
        torch.testing.assert_close(obs[..., o + 2 : o + 4], s.body_vel[:, b : b + 1].expand_as(s.vel))
        torch.testing.assert_close(obs[..., o + 4], torch.cos(s.body_theta[:, b : b + 1]).expand_as(s.theta))
    torch.testing.assert_close(obs[..., 16:18], (sc.goal - s.body_pos[:, 1]).unsqueeze(1).expand_as(s.pos))


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_grad_mode_step_reaches_the_actions_through_the_body(name):
    """Scripted steps bring the agents into contact; then the reward of one grad-mode step (the body's
    progress only: the agents appear in no reward term) has a gradient with respect to the actions."""
    env = make(name, dtype="float64")
    controller = importlib.import_module(f"swarp.scenarios.{name}").scripted_actions
    for _ in range(N_APPROACH_STEPS):
        env.step(controller(env))
    actions = controller(env).clone().requires_grad_()
    _, reward, *_ = env.step(actions)
    reward.sum().backward()
    assert bool(torch.isfinite(actions.grad).all())
    assert float(actions.grad.abs().sum()) > 1e-3


@pytest.mark.parametrize("name", SCENARIOS)
def test_scripted_controller_beats_random_actions(name, generator):
    controller = importlib.import_module(f"swarp.scenarios.{name}").scripted_actions
    rates = {}
    for policy in ("scripted", "random"):
        env = make(name, n_envs=N_EVAL_ENVS, seed=2)
        solved = torch.zeros(N_EVAL_ENVS, dtype=torch.bool)
        for _ in range(env.max_steps):
            actions = controller(env) if policy == "scripted" else random_actions(env, generator)
            *_, info = env.step(actions)
            solved |= info["success"]
        rates[policy] = float(solved.float().mean())
    assert rates["scripted"] >= rates["random"] + SCRIPTED_MARGIN, rates


def test_push_t_substeps_follow_the_contact_stiffness():
    soft, stiff = swarp.make("push_t", device="cpu"), swarp.make("push_t", device="cpu", contact_stiffness=1600.0)
    assert soft.stepper.substeps == 4 and stiff.stepper.substeps == 8
    assert swarp.make("push_t", device="cpu", substeps=2).stepper.substeps == 2
    assert math.isclose(sum(b.mass for b in soft.stepper.world.bodies), 2.0)


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        ("transport", dict(package_mass=0.0), "package_mass must be a finite number > 0"),
        ("transport", dict(n_agents=0), "n_agents must be an int >= 1"),
        ("push_t", dict(bar_half_extents=(0.2,)), "bar_half_extents must be two finite numbers"),
        ("push_t", dict(world_size=0.3), "do not fit"),
        ("balance", dict(goal_height=2.0), "goal_height must be inside the arena"),
        ("balance", dict(gravity=-1.0), "gravity must be a finite number >= 0"),
    ],
)
def test_bad_options_are_rejected_with_a_clear_message(name, options, match):
    with pytest.raises(ValueError, match=match):
        swarp.make(name, device="cpu", **options)


def test_tethered_transport_keeps_its_rods_and_pulls_the_package_home(generator):
    """Rods of the spawn ring's length tie the agents to the package: over a scripted episode their
    length error stays small, and pulling together solves every env."""
    env = make("transport", n_envs=N_EVAL_ENVS, tethered=True)
    assert len(env.stepper.world.joints) == env.n_agents
    controller = importlib.import_module("swarp.scenarios.transport").scripted_actions
    ring = env.scenario.layout.ring_radius
    solved = torch.zeros(N_EVAL_ENVS, dtype=torch.bool)
    worst = 0.0
    for _ in range(env.max_steps):
        *_, info = env.step(controller(env))
        solved |= info["success"]
        stretch = (env.state.pos - env.state.body_pos).norm(dim=-1) - ring
        worst = max(worst, float(stretch.abs().max()))
    assert bool(solved.all()) and worst < 0.1, worst
