"""Per-env agent parameters (``swarp/core/params.py`` and the ``Environment`` API over it): each env
obeys its own limits, in-place updates reach the next step without recapture, sampling is
reproducible and validated, and the shared default is untouched."""

import math

import pytest
import torch
import warp as wp

import swarp
from swarp import AgentConfig, Stepper, World, WorldConfig
from swarp.core import types
from swarp.core.params import (
    PARAM_NAMES,
    ParamRandomization,
    check_param_table,
    enable_per_env_params,
    param_column,
    sample_agent_params,
    write_params,
)
from swarp.core.rng import stream_key_torch

#: Agreement of float64 states with their closed forms.
EXACT_TOL = 1e-12

MAX_SPEED = param_column("max_speed")
RADIUS = param_column("radius")


def per_env_world(agents, n_envs, world=None, dtype="float64") -> World:
    stepper = Stepper(agents, dt=0.1, device="cpu", world=world or WorldConfig(), dtype=dtype)
    world = World(stepper, n_envs)
    enable_per_env_params(stepper.model, n_envs)
    world.invalidate()
    return world


def test_every_param_constant_names_its_column():
    """Kernels read columns through ``PARAM_*``; each must index the field of its name."""
    aliases = {"rear_axle_ratio": "REAR_RATIO"}
    for column, name in enumerate(PARAM_NAMES):
        assert getattr(types, "PARAM_" + aliases.get(name, name.upper())) == column, name
    assert len(PARAM_NAMES) == types.N_PARAMS and "max_body_rate" in PARAM_NAMES
    row = [float(getattr(AgentConfig(model="drone"), name)) for name in PARAM_NAMES]
    stepper = Stepper([AgentConfig(model="drone")], device="cpu", dtype="float64")
    assert stepper.model.params.numpy()[0, 0].tolist() == row


def test_default_table_is_shared_and_per_env_copies_it():
    env = swarp.make("navigation", n_envs=4, device="cpu", n_agents=3)
    assert tuple(env.agent_params.shape) == (1, 3, len(PARAM_NAMES)) and not env.per_env_params
    randomized = swarp.make("navigation", n_envs=4, device="cpu", n_agents=3, per_env_params=True)
    assert tuple(randomized.agent_params.shape) == (4, 3, len(PARAM_NAMES)) and randomized.per_env_params
    assert torch.equal(randomized.agent_params, env.agent_params.expand(4, -1, -1))


def test_each_env_obeys_its_own_speed_and_turn_limits():
    agents = [AgentConfig(model="holonomic", max_speed=2.0), AgentConfig(model="diff_drive", max_ang_vel=3.0)]
    world = per_env_world(agents, n_envs=3, world=WorldConfig(collisions=False))
    world.set_state(pos=torch.tensor([[0.0, 0.0], [0.0, 5.0]], dtype=torch.float64).expand(3, 2, 2).contiguous())
    speeds = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    turns = torch.tensor([0.25, 1.0, 3.0], dtype=torch.float64)
    write_params(world.model, max_speed=speeds.view(3, 1), max_ang_vel=turns.view(3, 1))
    actions = torch.tensor([[10.0, 0.0], [10.0, 10.0]], dtype=torch.float64).expand(3, 2, 2).contiguous()
    world.step(actions)
    state = world.state.torch
    assert torch.allclose(state.speed[:, 0], speeds, atol=EXACT_TOL)  # holonomic: clipped to its env's limit
    assert torch.allclose(state.speed[:, 1], speeds, atol=EXACT_TOL)  # diff drive forward speed
    assert torch.allclose(state.ang_vel[:, 1], turns, atol=EXACT_TOL)
    assert torch.allclose(state.pos[:, 0, 0], 0.1 * speeds, atol=EXACT_TOL)


def test_each_env_uses_its_own_radius_and_mass_in_contacts():
    agents = [AgentConfig(ctrl_mode="acceleration", radius=0.2, max_accel=0.0)] * 2
    world = per_env_world(agents, n_envs=3, world=WorldConfig(collision_k=100.0, collision_damping=0.0))
    # Centres 0.3 apart: radii 0.1 do not touch, 0.2 overlap by 0.1 (force 10 N); env 2 is twice as heavy.
    write_params(
        world.model,
        radius=torch.tensor([[0.1], [0.2], [0.2]], dtype=torch.float64),
        mass=torch.tensor([[1.0], [1.0], [2.0]], dtype=torch.float64),
    )
    pos = torch.tensor([[-0.15, 0.0], [0.15, 0.0]], dtype=torch.float64).expand(3, 2, 2).contiguous()
    world.set_state(pos=pos)
    world.step(torch.zeros(3, 2, 2, dtype=torch.float64))
    vel = world.state.torch.vel[:, 1, 0]
    # Semi-implicit Euler: v = F / m * dt.
    assert torch.allclose(vel, torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64), atol=EXACT_TOL)


def test_in_place_update_takes_effect_next_step_without_recapture():
    env = swarp.make("navigation", n_envs=3, device="cpu", n_agents=2, per_env_params=True, max_speed=1.0)
    assert env.execution_mode == "graph"
    actions = torch.tensor([5.0, 0.0]).expand(3, 2, 2).contiguous()
    env.step(actions)
    graph = env.launches.step_seq._graph
    assert graph is not None
    assert torch.allclose(env.state.speed, torch.ones(3, 2))
    env.set_agent_params(max_speed=torch.tensor([[0.25], [0.5], [1.0]]))
    env.step(actions)
    assert env.launches.step_seq._graph is graph
    assert torch.allclose(env.state.speed, torch.tensor([[0.25], [0.5], [1.0]]).expand(3, 2))


def test_fused_and_torch_navigation_agree_with_per_env_radii(generator):
    common = dict(n_envs=4, device="cpu", n_agents=6, per_env_params=True, agent_radius=0.15, world_size=1.0)
    envs = [swarp.make("navigation", fused=f, **common) for f in (True, False)]
    for env in envs:
        env.set_agent_params(radius=torch.tensor([[0.03], [0.07], [0.11], [0.15]]))
        env.reset(seed=3)
    collisions = []
    for _ in range(6):
        # Everyone drives to the centre, so agents crowd and the radius decides who touches.
        actions = (-3.0 * envs[0].state.pos + 0.1 * torch.rand(4, 6, 2, generator=generator)).contiguous()
        outs = [env.step(actions) for env in envs]
        assert (outs[0][0] - outs[1][0]).abs().max().item() < 1e-5
        assert (outs[0][1] - outs[1][1]).abs().max().item() < 1e-5
        assert torch.equal(outs[0][4]["collisions"], outs[1][4]["collisions"])
        collisions.append(outs[0][4]["collisions"].sum(-1))
    # Larger radii in the same arena collide more (per env, summed over the steps).
    total = torch.stack(collisions).sum(0)
    assert total[0] < total[3]


def test_randomize_is_reproducible_within_ranges_and_per_episode():
    env = swarp.make("navigation", n_envs=5, device="cpu", n_agents=3, per_env_params=True, seed=7)
    ranges = {"mass": (0.5, 2.0), "max_speed": (0.2, 0.9)}
    env.randomize_agent_params(ranges)
    first = env.agent_params.clone()
    assert (first[..., param_column("mass")] >= 0.5).all() and (first[..., param_column("mass")] < 2.0).all()
    speeds = first[..., MAX_SPEED]
    assert (speeds >= 0.2).all() and (speeds < 0.9).all() and speeds.unique().numel() == 15
    untouched = [c for c in range(len(PARAM_NAMES)) if c not in (param_column("mass"), MAX_SPEED)]
    assert torch.equal(first[..., untouched], env.configured_params()[..., untouched].expand(5, -1, -1))
    env.randomize_agent_params(ranges)
    assert torch.equal(env.agent_params, first)  # same (seed, env, episode): same draws
    env.reset()
    env.randomize_agent_params(ranges)
    assert not torch.equal(env.agent_params, first)  # a new episode draws new values


def test_randomize_masked_shared_across_agents_and_relative():
    env = swarp.make("navigation", n_envs=4, device="cpu", n_agents=3, per_env_params=True)
    before = env.agent_params.clone()
    mask = torch.tensor([True, False, True, False])
    env.randomize_agent_params({"mass": (2.0, 3.0)}, env_mask=mask, relative=True, per_agent=False)
    mass = env.agent_params[..., param_column("mass")]
    assert torch.equal(env.agent_params[~mask], before[~mask])
    assert ((mass[mask] >= 2.0) & (mass[mask] < 3.0)).all()  # configured mass 1 kg times the factor
    assert (mass[mask] == mass[mask][:, :1]).all()  # one draw per env


def test_sampling_matches_the_counter_based_rng_twin():
    base = torch.ones(1, 2, len(PARAM_NAMES), dtype=torch.float64)
    keys = stream_key_torch(torch.tensor(3), torch.arange(4), torch.tensor(0))
    table = sample_agent_params(base, {"drag": (0.0, 1.0)}, keys)
    assert table.shape == (4, 2, len(PARAM_NAMES))
    again = sample_agent_params(base, {"drag": (0.0, 1.0)}, keys[[2, 0]])
    assert torch.equal(again, table[[2, 0]])  # an env's draws do not depend on the others


@pytest.mark.parametrize(
    "columns, match",
    [
        (dict(radius=0.3), "radius max"),
        (dict(max_speed=1.5), "max_speed max"),
        (dict(mass=0.0), "mass must be > 0"),
        (dict(drag=-1.0), "drag must be >= 0"),
        (dict(max_steer=2.0), "max_steer"),
        (dict(rear_axle_ratio=1.5), "rear_axle_ratio"),
        (dict(mass=float("nan")), "finite"),
        (dict(weight=1.0), "unknown agent parameter"),
        (dict(mass=torch.ones(3)), "broadcast"),
    ],
)
def test_invalid_parameters_are_rejected_and_leave_the_table_untouched(columns, match):
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=2, per_env_params=True)
    before = env.agent_params.clone()
    with pytest.raises(ValueError, match=match):
        env.set_agent_params(**columns)
    assert torch.equal(env.agent_params, before)


#: ``set_agent_params`` arguments of wrong shapes or types, and the message each gets (2 envs, 2 agents).
WRONG_ARGUMENTS = [
    pytest.param(dict(values=torch.ones(5)), ValueError,
                 r"^values must broadcast to the agent parameter table \[E_p, A, P\] = \[2, 2, 17\] \(2 envs, 2 "
                 r"agents, 17 parameters: radius, mass, .*, max_body_rate\), got shape \[5\]$", id="table"),
    pytest.param(dict(values=torch.ones(3, 2, 17)), ValueError, r"= \[2, 2, 17\] .*got shape \[3, 2, 17\]$",
                 id="table of more envs"),
    pytest.param(dict(mass=torch.ones(5)), ValueError,
                 r"^mass must broadcast to the parameter rows \[E_p, A\] = \[2, 2\] \(2 envs, 2 agents\), got shape "
                 r"\[5\]$", id="column"),
    pytest.param(dict(mass=[1.0, 2.0]), TypeError, r"^mass must be a number or a torch.Tensor, got list$",
                 id="column of a list"),
    pytest.param(dict(mass=2.0, env_mask=torch.ones(3, dtype=torch.bool)), ValueError,
                 r"^env_mask must be a \[2\] bool tensor \(one flag per env\), got a torch.bool tensor of shape \[3\]$",
                 id="mask"),
    pytest.param(dict(mass=2.0, env_mask=torch.ones(2)), ValueError,
                 r"^env_mask must be a \[2\] bool tensor \(one flag per env\), got a torch.float32 tensor of shape "
                 r"\[2\]$", id="mask of floats"),
]  # fmt: skip


@pytest.mark.parametrize("arguments, error, match", WRONG_ARGUMENTS)
def test_wrong_shapes_are_named_with_the_shape_expected_and_leave_the_table_untouched(arguments, error, match):
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=2, per_env_params=True)
    before = env.agent_params.clone()
    with pytest.raises(error, match=match):
        env.set_agent_params(**arguments)
    assert torch.equal(env.agent_params, before)


def test_the_shared_table_names_its_shape_and_how_to_get_per_env_rows():
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=2)
    with pytest.raises(ValueError, match=r"= \[1, 2, 17\] \(1 row shared by every env \(per_env_params=False\), 2 "
                                         r"agents, 17 parameters: .*got shape \[2, 2, 17\]$"):  # fmt: skip
        env.set_agent_params(torch.ones(2, 2, 17))


def test_randomize_and_masks_need_per_env_params():
    env = swarp.make("navigation", n_envs=2, device="cpu", n_agents=2)
    with pytest.raises(RuntimeError, match="per_env_params=True"):
        env.randomize_agent_params({"mass": (1.0, 2.0)})
    with pytest.raises(ValueError, match="per-env parameters"):
        env.set_agent_params(mass=2.0, env_mask=torch.tensor([True, False]))
    env.set_agent_params(mass=2.0)  # the shared table can still be edited in place
    assert (env.agent_params[..., param_column("mass")] == 2.0).all()
    with pytest.raises(TypeError, match="per_env_params"):
        swarp.make("navigation", n_envs=2, device="cpu", per_env_params=1)


def test_check_accepts_the_ceilings_exactly():
    world = per_env_world([AgentConfig(radius=0.1, max_speed=1.0)], n_envs=2, dtype="float32")
    table = world.model.params.numpy()
    check_param_table(world.model, torch.from_numpy(table))
    assert math.isclose(float(table[0, 0, RADIUS]), 0.1, rel_tol=1e-6)


def test_warp_step_accepts_per_env_params_of_its_batch():
    agents = [AgentConfig(max_speed=2.0)]
    world = per_env_world(agents, n_envs=2)
    write_params(world.model, max_speed=torch.tensor([[0.5], [2.0]], dtype=torch.float64))
    state = world.state.torch
    actions = torch.full((2, 1, 2), 3.0, dtype=torch.float64, requires_grad=True)
    out = swarp.warp_step(world.stepper, state, actions)
    assert torch.allclose(out.speed[:, 0], torch.tensor([0.5, 2.0], dtype=torch.float64), atol=EXACT_TOL)
    with pytest.raises(ValueError, match="per-env parameter rows"):
        swarp.warp_step(world.stepper, swarp.TorchState(*(t[:1].clone() for t in state)), actions[:1])


# --- re-drawn at every episode start, inside the step graph ------------------------------------


def test_in_graph_randomization_matches_the_torch_path_and_only_touches_reset_envs(generator):
    ranges = {"mass": (0.5, 2.0), "max_speed": (0.3, 1.0)}
    common = dict(n_envs=6, device="cpu", n_agents=3, auto_reset=True, max_steps=3, seed=4, randomize_params=ranges)
    fused, reference = (swarp.make("navigation", fused=f, **common) for f in (True, False))
    assert fused.execution_mode == "graph" and fused.per_env_params
    assert torch.equal(fused.agent_params, reference.agent_params)
    fused.step_count.copy_(torch.tensor([0, 1, 2, 0, 1, 2], dtype=torch.int32))  # stagger the time limits
    reference.step_count.copy_(fused.step_count)
    for _ in range(5):
        before = fused.agent_params.clone()
        actions = torch.rand(6, 3, 2, generator=generator) * 2 - 1
        out_f, out_r = fused.step(actions), reference.step(actions)
        assert torch.equal(fused.agent_params, reference.agent_params)  # same bits, same draws
        assert (out_f[0] - out_r[0]).abs().max().item() < 1e-5
        done = out_f[2] | out_f[3]
        assert 0 < done.sum() < 6
        assert torch.equal(fused.agent_params[~done], before[~done])
        assert not torch.equal(fused.agent_params[done], before[done])
    redrawn = fused.agent_params.clone()
    fused.randomize_agent_params(ranges)  # the method draws what the episode start drew
    assert torch.equal(fused.agent_params, redrawn)


def test_relative_shared_randomization_scales_the_configured_values():
    randomization = ParamRandomization({"mass": (0.8, 1.2)}, relative=True, per_agent=False)
    env = swarp.make("navigation", n_envs=8, device="cpu", n_agents=3, randomize_params=randomization)
    mass = env.agent_params[..., param_column("mass")]
    assert ((mass >= 0.8) & (mass < 1.2)).all() and (mass == mass[:, :1]).all() and mass.unique().numel() == 8


@pytest.mark.parametrize(
    "ranges, match",
    [
        ({"radius": (0.01, 0.2)}, "radius max"),
        ({"mass": (0.0, 1.0)}, "mass must be > 0"),
        ({"mass": (2.0, 1.0)}, "low <= high"),
        ({"weight": (1.0, 2.0)}, "unknown agent parameter"),
        ({}, "non-empty"),
    ],
)
def test_randomization_ranges_are_validated_up_front(ranges, match):
    with pytest.raises(ValueError, match=match):
        swarp.make("navigation", n_envs=2, device="cpu", randomize_params=ranges)


@pytest.mark.parametrize("per_env", [False, True])
def test_parameter_tables_store_each_parameter_contiguously_over_agents(per_env):
    """``params[e, a, p]`` indexes as an [E_p, A, P] table, but consecutive agents of one parameter
    are adjacent in memory (what coalesces the kernels' parameter reads on a GPU)."""
    agents = [AgentConfig(radius=0.05 + 0.01 * i, max_speed=1.0 + i) for i in range(5)]
    world = World(Stepper(agents, device="cpu"), 3)
    if per_env:
        enable_per_env_params(world.model, 3)
    params = world.model.params
    n_rows, n_agents, n_params = params.shape
    assert (n_rows, n_agents) == ((3 if per_env else 1), 5) and n_params == len(PARAM_NAMES)
    item = wp.types.type_size_in_bytes(params.dtype)
    assert params.strides[1] == item and params.strides[2] == n_agents * item
    table = torch.as_tensor(params.numpy())
    expected = torch.tensor([[cfg.radius, cfg.max_speed] for cfg in agents], dtype=table.dtype)
    assert torch.equal(table[..., [RADIUS, MAX_SPEED]], expected.expand(n_rows, -1, -1))
