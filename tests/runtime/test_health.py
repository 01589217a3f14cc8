"""The state-health flag (``swarp.runtime.health``): raised by the kernels that produce a non-finite
state, observation or reward, per env, sticky until ``clear_flags`` or a full reset."""

import pytest
import torch
import warp as wp

import swarp
from swarp.runtime import health
from swarp.scenarios.navigation import NavigationScenario
from tests.support import random_actions

N_ENVS = 4
#: Scenario memory whose NaN poisons the reward alone (the observation stays finite).
REWARD_MEMORY = {
    "navigation": "prev_dist",
    "drone_navigation": "prev_dist",
    "give_way": "prev_route",  # route_shaping (default): the progress is the route's
    "flocking": "prev_dist",
    "fleet": "prev_dist",
    "formation": "prev_dist",
    "balance": "prev_err",
    "push_t": "prev_err",
    "transport": "prev_err",
}


def make(name: str, **options) -> swarp.Environment:
    return swarp.make(name, n_envs=N_ENVS, device="cpu", seed=0, auto_reset=True, **options)


def steps(env: swarp.Environment, generator: torch.Generator, n: int = 3) -> None:
    for _ in range(n):
        env.step(random_actions(env, generator, overshoot=0.0))


@pytest.mark.parametrize("name", swarp.scenario_names())
def test_a_nan_state_raises_the_flag_of_its_env_only(name):
    env = make(name)
    gen = torch.Generator().manual_seed(0)
    steps(env, gen)
    assert not env.non_finite()
    env.state.pos[2, 0, 0] = float("nan")
    steps(env, gen, 1)
    assert env.non_finite()
    assert env.non_finite_envs().tolist() == [2]
    env.clear_flags()
    assert not env.non_finite()
    assert env.non_finite_envs().numel() == 0


@pytest.mark.parametrize("name", sorted(REWARD_MEMORY))
def test_a_non_finite_reward_raises_the_flag_with_finite_observations(name):
    env = make(name)
    gen = torch.Generator().manual_seed(1)
    steps(env, gen)
    env.scenario.state_tensors()[REWARD_MEMORY[name]][1] = float("inf")
    steps(env, gen, 1)
    assert torch.isfinite(env.obs).all()
    assert not torch.isfinite(env.reward[1]).all()
    assert env.non_finite_envs().tolist() == [1]


def test_the_flag_is_sticky_across_auto_resets_and_reset_at_until_cleared():
    env = make("navigation", max_steps=2)
    gen = torch.Generator().manual_seed(2)
    env.scenario.state_tensors()["goals"][3] = float("nan")
    steps(env, gen, 1)
    assert env.non_finite_envs().tolist() == [3]
    steps(env, gen, 4)  # env 3 finished and restarted (finite again) twice
    env.reset_at(torch.ones(N_ENVS, dtype=torch.bool))
    assert torch.isfinite(env.obs).all()
    assert env.non_finite_envs().tolist() == [3]
    env.reset()  # a full reset starts every flag's count over
    assert not env.non_finite()


def test_a_full_reset_and_clear_flags_lower_every_sticky_flag():
    env = make("navigation")
    actions = torch.zeros(N_ENVS, env.n_agents, env.act_dim)
    actions[0, 0, 0] = float("nan")
    env.step(actions)
    env.state.pos[1, 0, 0] = float("inf")
    env.step(torch.zeros_like(actions))
    assert env.invalid_actions() and env.non_finite()
    env.clear_flags()
    assert not env.invalid_actions() and not env.non_finite()
    env.step(actions)
    assert env.invalid_actions()
    env.reset()
    assert not env.invalid_actions() and not env.neighbor_overflow() and not env.non_finite()


def test_final_observations_are_checked_before_the_auto_reset_replaces_them():
    """An env that finishes on a non-finite observation restarts finite: only its final_obs held the NaN."""
    env = make("navigation", max_steps=3)
    gen = torch.Generator().manual_seed(3)
    steps(env, gen, 2)  # the next step ends every episode
    env.scenario.state_tensors()["goals"][0] = float("nan")
    steps(env, gen, 1)
    assert bool(env.done.all())
    assert not torch.isfinite(env.final_obs[0]).all() and torch.isfinite(env.obs).all()
    assert env.non_finite_envs().tolist() == [0]


@pytest.mark.parametrize("path", ["reference", "grad"])
def test_the_torch_paths_raise_the_flag(path):
    env = make("navigation", fused=path == "grad")
    gen = torch.Generator().manual_seed(4)
    steps(env, gen)
    env.scenario.state_tensors()["goals"][1] = float("nan")
    actions = random_actions(env, gen, overshoot=0.0)
    if path == "grad":
        env.step(actions.requires_grad_(True))
    else:
        env.step(actions)
    assert env.non_finite_envs().tolist() == [1]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 3.0e38])
def test_the_torch_paths_check_flags_exactly_the_non_finite_entries(value):
    """The torch path's check (``reference.flag_non_finite``: ``x * 0`` summed per env) flags
    NaN and both infinities in rows and rewards, in the env that holds them, and no large finite
    value (a sum of the values themselves could overflow)."""
    from swarp.env.reference import flag_non_finite

    env = make("navigation", fused=False)
    for target in ("obs", "reward"):
        env.clear_flags()
        obs, reward = env.obs.clone(), env.reward.clone()
        (obs if target == "obs" else reward)[2, 1, ...] = value
        flag_non_finite(env, obs, reward)
        assert env.non_finite_envs().tolist() == ([] if value == 3.0e38 else [2]), target
    env.clear_flags()
    obs = env.obs.clone()
    obs[1, 0, 0] = value
    flag_non_finite(env, obs, env_mask=torch.arange(env.n_envs) != 1)  # env 1 is outside the mask
    assert env.non_finite_envs().tolist() == []


class UncheckedNavigation(NavigationScenario):
    """Navigation as a scenario that does not check its own outputs: the environment's fallback does."""

    name = "unchecked_navigation"
    checks_finite = False


def test_scenarios_that_do_not_check_their_outputs_get_the_read_back_check():
    swarp.register_scenario(UncheckedNavigation.name, UncheckedNavigation)
    try:
        env = make(UncheckedNavigation.name)
        gen = torch.Generator().manual_seed(5)
        steps(env, gen)
        assert not env.non_finite()
        env.scenario.state_tensors()["goals"][2] = float("nan")
        steps(env, gen, 1)
        assert env.non_finite_envs().tolist() == [2]
    finally:
        swarp.unregister_scenario(UncheckedNavigation.name)


def test_the_read_back_kernel_checks_rows_rewards_and_final_rows_of_finished_envs():
    E, A, W = 5, 2, 3
    obs = torch.zeros(E, A, W)
    reward = torch.zeros(E, A)
    final = torch.zeros(E, A, W)
    done = torch.tensor([False, False, False, True, False])
    obs[1, 1, 2] = float("nan")
    reward[2, 0] = float("-inf")
    final[3, 0, 0] = float("inf")
    final[4, 1, 1] = float("nan")  # env 4 did not finish: its final row is stale, not checked
    mask = torch.tensor([True, True, False, True, True])

    def run(env_mask, use_mask, with_reward, with_final):
        flags = torch.zeros(E, dtype=torch.int32)
        wp.launch(
            health.check_outputs_kernel(wp.float32),
            dim=(E, A),
            inputs=[wp.from_torch(env_mask), use_mask]
            + [wp.from_torch(obs), wp.from_torch(reward), with_reward, wp.from_torch(final), wp.from_torch(done)]
            + [with_final],
            outputs=[wp.from_torch(flags)],
            device="cpu",
        )
        return torch.nonzero(flags).flatten().tolist()

    assert run(mask, 0, 1, 1) == [1, 2, 3]
    assert run(mask, 0, 0, 0) == [1]
    assert run(mask, 1, 1, 1) == [1, 3]  # env 2 is masked out


@pytest.mark.parametrize(
    "plan",
    [
        {"reset_ahead": False, "fused_step_end": False},
        {"reset_ahead": True},
        {"tiled_rows": True, "fused_step_end": True},
        {"tiled_rows": True, "fused_step_end": True, "reset_ahead": True},
    ],
    ids=["direct", "ahead", "fused_end", "fused_end_ahead"],
)
@pytest.mark.parametrize("shared_reward", [False, True])
def test_every_observation_and_reward_path_of_the_plan_checks(plan, shared_reward, monkeypatch):
    """The CUDA paths (tiled rows, the fused step end, prepared starts) run on the CPU by plan."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    env = make("navigation", n_agents=4, max_steps=5, plan=plan, shared_reward=shared_reward)
    gen = torch.Generator().manual_seed(6)
    steps(env, gen, 7)
    assert not env.non_finite()
    env.scenario.state_tensors()["prev_dist"][1, 2] = float("nan")  # the reward alone
    env.state.pos[3, 0, 1] = float("nan")  # the observation (and state)
    steps(env, gen, 1)
    assert env.non_finite_envs().tolist() == [1, 3]


def test_large_spread_fleets_check_their_pair_parallel_rows():
    env = make("spread", n_agents=30)
    gen = torch.Generator().manual_seed(7)
    steps(env, gen, 2)
    assert not env.non_finite()
    env.scenario.state_tensors()["landmarks"][0, 5] = float("nan")
    steps(env, gen, 1)
    assert env.non_finite_envs().tolist() == [0]


# --- the physics' own checks: a World or a functional step, no Environment ---------------------


def _world(model: str, bodies: bool = False):
    from swarp import AgentConfig, Body, Obstacle, Stepper, World, WorldConfig

    shapes = (Obstacle.circle((0.0, 0.0), 0.1),)
    config = WorldConfig(bounds=2.0, bodies=(Body(shapes, mass=5.0),) if bodies else ())
    stepper = Stepper([AgentConfig(model=model)] * 3, dt=0.05, device="cpu", world=config)
    world = World(stepper, n_envs=3)
    world.state.torch.pos.copy_(torch.tensor([[-1.0, 0.5], [0.0, 0.5], [1.0, 0.5]]).expand(3, 3, 2))
    world.build_neighbors()
    return world


@pytest.mark.parametrize("model", ["holonomic", "diff_drive", "kinematic_bicycle", "drone"])
def test_the_integration_kernels_flag_a_non_finite_state_per_env(model):
    world = _world(model)
    actions = torch.full((3, 3, world.stepper.act_dim), 0.1)
    world.step(actions)
    assert not world.non_finite()
    field = "omega" if model == "drone" else "theta"  # a field no observation is needed to see
    getattr(world.state.torch, field)[1, 2].fill_(float("inf"))
    world.step(actions)
    assert world.non_finite_envs().tolist() == [1]
    world.clear_non_finite()
    assert not world.non_finite()


def test_the_body_integration_flags_a_non_finite_body_state():
    world = _world("holonomic", bodies=True)
    actions = torch.zeros(3, 3, 2)
    world.step(actions)
    assert not world.non_finite()
    world.state.torch.body_ang_vel[2, 0] = float("nan")
    world.step(actions)
    assert world.non_finite_envs().tolist() == [2]


def test_a_functional_step_raises_the_steppers_flag_for_any_env():
    world = _world("holonomic")
    state = world.state.torch._replace(pos=world.state.torch.pos.clone())
    state.pos[0, 0, 0] = float("nan")
    actions = torch.zeros(3, 3, 2, requires_grad=True)
    swarp.warp_step(world.stepper, state, actions)
    assert bool(wp.to_torch(world.stepper.non_finite_any)[0])
    assert not world.non_finite()  # the world's own state was not stepped


@pytest.mark.gpu
@pytest.mark.parametrize("n_envs", [256, 16384], ids=["fused_end_ahead", "tiled"])
def test_the_flag_on_cuda_graphs_needs_no_host_sync(n_envs):
    """CUDA's own plans (the fused step end with starts prepared ahead at small batches, tiled rows
    at large ones) under graph capture: the flag is raised inside the graph, read without a sync."""
    from tests.support import forbid_host_transfers

    env = swarp.make("navigation", n_envs=n_envs, device="cuda:0", seed=0, auto_reset=True, n_agents=8)
    gen = torch.Generator().manual_seed(8)
    actions = random_actions(env, gen, overshoot=0.0)
    env.step(actions)  # capture
    assert env.graph_mode
    env.scenario.state_tensors()["prev_dist"][7, 1] = float("nan")
    env.state.pos[n_envs - 1, 0, 0] = float("inf")
    with forbid_host_transfers():
        for _ in range(3):
            env.step(actions)
        flag = env.non_finite()
    assert flag.device.type == "cuda" and bool(flag)
    assert env.non_finite_envs().tolist() == [7, n_envs - 1]


@wp.kernel
def _finite_scalars_kernel(
    x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float64), out: wp.array2d(dtype=wp.int32)
):
    i = wp.tid()
    out[0, i] = wp.where(health.finite(x[i]), 1, 0)
    out[1, i] = wp.where(health.finite(y[i]), 1, 0)


@wp.kernel
def _finite_vectors_kernel(v: wp.array(dtype=wp.vec3), q: wp.array(dtype=wp.quat), out: wp.array2d(dtype=wp.int32)):
    i = wp.tid()
    out[0, i] = wp.where(health.finite(v[i]), 1, 0)
    out[1, i] = wp.where(health.finite(q[i]), 1, 0)


def test_finite_is_false_exactly_for_infinite_and_nan_values():
    inf, nan = float("inf"), float("nan")
    values = [0.0, -0.0, 1.0, -3.0e38, 3.4e38, 1.0e-45, inf, -inf, nan]  # 1e-45: a float32 denormal
    expected = [1, 1, 1, 1, 1, 1, 0, 0, 0]
    out = wp.zeros((2, len(values)), dtype=wp.int32, device="cpu")
    x = wp.array(values, dtype=wp.float32, device="cpu")
    y = wp.array([*values[:-4], 1.7e308, inf, -inf, nan], dtype=wp.float64, device="cpu")
    wp.launch(_finite_scalars_kernel, dim=len(values), inputs=[x, y], outputs=[out], device="cpu")
    assert out.numpy().tolist() == [expected, expected]
    # Vectors and quaternions: finite only when every component is.
    vectors = [[1.0, 2.0, 3.0], [inf, 0.0, 0.0], [0.0, nan, 0.0], [0.0, 0.0, -inf], [3.0e38, -3.0e38, 0.0]]
    quats = [[0.0, 0.0, 0.0, 1.0], [nan, 0.0, 0.0, 1.0], [0.0, inf, 0.0, 1.0], [0.0, 0.0, 0.0, -inf], [0.5] * 4]
    out = wp.zeros((2, len(vectors)), dtype=wp.int32, device="cpu")
    v = wp.array(vectors, dtype=wp.vec3, device="cpu")
    q = wp.array(quats, dtype=wp.quat, device="cpu")
    wp.launch(_finite_vectors_kernel, dim=len(vectors), inputs=[v, q], outputs=[out], device="cpu")
    assert out.numpy().tolist() == [[1, 0, 0, 0, 1], [1, 0, 0, 0, 1]]
