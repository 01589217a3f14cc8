"""``swarp.vmas.make_env(..., continuous_actions=False)``: discrete and multi-discrete actions side by
side with VMAS 1.5.2 itself: the same spaces, the same accepted inputs, the same physical command."""

import math

import numpy as np
import pytest
import torch

from swarp.vmas import SCENARIOS, make_env

vmas = pytest.importorskip("vmas")  # the reference; CI installs it

KINDS = {"discrete": False, "multidiscrete": True}  # kind -> multidiscrete_actions
#: VMAS scenarios whose agents' action box equals swarp's (the others differ by design: give_way's
#: v_range, transport's and balance's u_multiplier).
SAME_BOX = ("navigation", "flocking", "discovery", "sampling", "simple_spread")


def pair(scenario="navigation", num_envs=9, kind="discrete", **kwargs):
    """``(ours, theirs)``: the same make_env call on swarp.vmas and on VMAS."""
    kwargs = dict(num_envs=num_envs, device="cpu", seed=0, continuous_actions=False, **kwargs)
    kwargs["multidiscrete_actions"] = KINDS[kind]
    return make_env(scenario, **kwargs), vmas.make_env(scenario, **kwargs)


def every_index(nvec, kind, num_envs):
    """[num_envs, width] int64: env e takes flat choice e (discrete) or its columns (multidiscrete)."""
    flat = torch.arange(num_envs) % math.prod(nvec)
    if kind == "discrete":
        return flat.unsqueeze(-1)
    columns, rest = [], flat
    for d in range(len(nvec)):
        stride = math.prod(nvec[d + 1 :])
        columns.append(rest // stride)
        rest = rest % stride
    return torch.stack(columns, dim=-1)


def describe(space):
    """A space as library-neutral values (VMAS builds gym spaces, swarp gymnasium ones)."""
    name = type(space).__name__
    if name == "Discrete":
        return (name, int(space.n), int(space.start), np.dtype(space.dtype))
    if name == "MultiDiscrete":
        return (name, tuple(int(n) for n in space.nvec), np.dtype(space.dtype))
    if name == "Tuple":
        return (name, tuple(describe(s) for s in space.spaces))
    if name == "Dict":
        return (name, tuple((key, describe(s)) for key, s in space.spaces.items()))
    raise AssertionError(f"unexpected space {space!r}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_spaces_and_sizes_equal_vmas(scenario, kind):
    """Every mapped scenario: the same action spaces, per-agent sizes, agent attributes and flags."""
    options = {} if scenario == "give_way" else {"n_agents": 3}
    for dict_spaces in (False, True):
        ours, theirs = pair(scenario, num_envs=2, kind=kind, dict_spaces=dict_spaces, **options)
        assert describe(ours.action_space) == describe(theirs.action_space)
        assert (ours.continuous_actions, ours.multidiscrete_actions) == (False, KINDS[kind])
        assert (theirs.continuous_actions, theirs.multidiscrete_actions) == (False, KINDS[kind])
        for mine, their in zip(ours.agents, theirs.agents, strict=True):
            assert ours.get_agent_action_size(mine) == theirs.get_agent_action_size(their) == (2 if KINDS[kind] else 1)
            assert mine.action_size == their.action_size == 2
            assert mine.discrete_action_nvec == list(their.discrete_action_nvec) == [3, 3]
            assert describe(ours.get_agent_action_space(mine)) == describe(theirs.get_agent_action_space(their))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nvec", [(3, 3), (5, 2), (4, 4)])
def test_step_gives_vmas_physical_command(kind, nvec):
    """Every index through both steps: swarp's decoded command equals VMAS's ``agent.action.u``
    bit for bit (levels other than VMAS's default via ``action_nvec`` / ``discrete_action_nvec``)."""
    num_envs = math.prod(nvec)
    options = {} if nvec == (3, 3) else {"action_nvec": nvec}
    ours = make_env(
        "navigation", num_envs=num_envs, device="cpu", seed=0, continuous_actions=False,
        multidiscrete_actions=KINDS[kind], n_agents=2, **options,
    )  # fmt: skip
    theirs = vmas.make_env(
        "navigation", num_envs=num_envs, device="cpu", seed=0, continuous_actions=False,
        multidiscrete_actions=KINDS[kind], n_agents=2,
    )  # fmt: skip
    for agent in theirs.agents:
        agent.discrete_action_nvec = list(nvec)
    assert describe(ours.get_agent_action_space("agent_0")) == describe(theirs.get_agent_action_space(theirs.agents[0]))
    indices = every_index(nvec, kind, num_envs)
    actions = [indices, indices.flip(0)]  # agent 1 takes the choices in reverse order
    ours.step([a.clone() for a in actions])
    theirs.step([a.clone() for a in actions])
    for i, agent in enumerate(theirs.agents):
        assert torch.equal(ours.sim.world.actions[:, i], agent.action.u)
    assert not bool(ours.sim.invalid_actions())
    assert torch.equal(ours.sim.action_input.buffer[:, 0], indices)  # the indices reached swarp's step as given


def float_copy(t):
    return t.float()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "convert",
    [
        lambda t: t,
        lambda t: t.to(torch.int32),
        lambda t: t.to(torch.uint8),
        float_copy,  # VMAS's step takes float tensors of whole numbers
        lambda t: t.double(),
        lambda t: t.tolist(),  # VMAS converts non-tensors with torch.tensor(..., dtype=float32)
        lambda t: t.squeeze(-1) if t.shape[-1] == 1 else t,  # [E] for one column, unsqueezed as VMAS does
    ],
    ids=["int64", "int32", "uint8", "float32", "float64", "list", "squeezed"],
)
def test_accepted_inputs_are_vmas_inputs(kind, convert):
    """Whatever dtype or container VMAS's step takes for discrete actions, swarp's takes to the
    same command."""
    ours, theirs = pair(kind=kind, n_agents=2)
    indices = every_index((3, 3), kind, 9)
    ours.step([convert(indices) for _ in ours.agents])
    theirs.step([convert(indices) for _ in theirs.agents])
    for i, agent in enumerate(theirs.agents):
        assert torch.equal(ours.sim.world.actions[:, i], agent.action.u)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_levels_span_each_scenarios_box_as_vmas_does(scenario):
    """Every mapped scenario: the same index gives the same level of the agent's box (VMAS's
    ``_set_action``, the first thing its step does, against swarp's step); where the boxes are the
    same the commands are equal."""
    options = {} if scenario == "give_way" else {"n_agents": 2}
    ours, theirs = pair(scenario, kind="multidiscrete", **options)
    indices = every_index((3, 3), "multidiscrete", 9)
    ours.step([indices for _ in ours.agents])
    agent = theirs.agents[0]
    theirs._set_action(indices.clone(), agent)
    scale = agent.action.u_range_tensor * agent.action.u_multiplier_tensor
    high = ours.sim.action_bounds[1][0]
    torch.testing.assert_close(ours.sim.world.actions[:, 0] / high, agent.action.u / scale, rtol=0, atol=1e-6)
    if scenario in SAME_BOX:
        assert torch.equal(ours.sim.world.actions[:, 0], agent.action.u)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_inputs_raise_where_vmas_asserts(kind):
    """Out-of-range indices: VMAS asserts, swarp raises ValueError (whatever ``clamp_actions``, as
    VMAS ignores it for discrete actions); a float that is not a whole number, which VMAS would
    decode to a level between two, raises too. The env is not stepped."""
    ours, theirs = pair(kind=kind, n_agents=2)
    clamped = make_env(
        "navigation", num_envs=9, device="cpu", seed=0, continuous_actions=False,
        multidiscrete_actions=KINDS[kind], n_agents=2, clamp_actions=True,
    )  # fmt: skip
    good = every_index((3, 3), kind, 9)
    too_big = good.clone()
    too_big[4, -1] = 9 if kind == "discrete" else 3
    negative = good.clone()
    negative[2, 0] = -1
    for bad in (too_big, negative):
        with pytest.raises(AssertionError, match="out of bounds"):
            theirs.step([bad.clone(), good.clone()])
        for env in (ours, clamped):
            before = env.sim.state.pos.clone()
            with pytest.raises(ValueError, match=r"agent_0 out of bounds.*allowed int range \[0, "):
                env.step([bad.clone(), good.clone()])
            assert torch.equal(env.sim.state.pos, before)
    half = good.float()
    half[3, 0] = 0.5
    with pytest.raises(ValueError, match="integer indices.*env 3, column 0 holds 0.5"):
        ours.step([good, half])
    with pytest.raises(ValueError, match="integer indices"):
        ours.step([good.float().fill_(float("nan")), good])
    width = 1 if kind == "discrete" else 2
    with pytest.raises(ValueError, match=rf"must have shape \[num_envs, .*\] = \[9, {width}\]"):
        ours.step([torch.zeros(9, 3, dtype=torch.int64), good])
    with pytest.raises(TypeError, match="real numbers"):
        ours.step([good.bool(), good])


@pytest.mark.parametrize("kind", KINDS)
def test_random_actions_are_vmas_shaped_seeded_and_step(kind):
    ours, theirs = pair(kind=kind, n_agents=3, max_steps=5)
    for mine, their in zip(ours.agents, theirs.agents, strict=True):
        a, b = ours.get_random_action(mine), theirs.get_random_action(their)
        assert a.shape == b.shape and a.dtype == b.dtype == torch.int64
        assert ours.action_space[mine.index].contains(a[0].numpy() if a.dim() == 2 else int(a[0]))
    ours.seed(7)
    first = ours.get_random_actions()
    ours.seed(7)
    assert all(torch.equal(x, y) for x, y in zip(first, ours.get_random_actions(), strict=True))
    heads = ours.sim.action_space.heads
    draws = torch.cat([ours.get_random_action("agent_0").reshape(9, -1) for _ in range(40)])
    assert draws.min() == 0 and all(int(draws[:, c].max()) == n - 1 for c, n in enumerate(heads))
    ours.reset()
    for _ in range(6):  # through the time limit and a reset_at, as a VMAS script runs
        obs, rews, dones, info = ours.step(ours.get_random_actions())
        assert not bool(ours.sim.invalid_actions())
        for index in dones.nonzero().flatten().tolist():
            ours.reset_at(index)
    assert len(obs) == 3 and obs[0].shape == (9, ours.sim.obs_dim)


def test_dict_spaces_and_dict_actions():
    ours, theirs = pair(kind="multidiscrete", n_agents=2, dict_spaces=True)
    assert list(ours.action_space.spaces) == ["agent_0", "agent_1"]
    indices = every_index((3, 3), "multidiscrete", 9)
    obs, *_ = ours.step({"agent_1": indices.flip(0), "agent_0": indices})
    theirs.step({"agent_1": indices.flip(0), "agent_0": indices})
    assert set(obs) == {"agent_0", "agent_1"}
    for i, agent in enumerate(theirs.agents):
        assert torch.equal(ours.sim.world.actions[:, i], agent.action.u)


def test_action_nvec_and_flags_are_checked():
    env = make_env("navigation", num_envs=2, continuous_actions=False, action_nvec=(5, 4), n_agents=1)
    assert env.action_space[0].n == 20 and env.agents[0].discrete_action_nvec == [5, 4]
    env = make_env("navigation", num_envs=2, continuous_actions=False, multidiscrete_actions=True, action_nvec=2)
    assert tuple(env.action_space[0].nvec) == (2, 2)
    with pytest.raises(ValueError, match="action_nvec applies to discrete"):
        make_env("navigation", num_envs=2, action_nvec=3)
    with pytest.raises(ValueError, match="needs continuous_actions=False"):
        make_env("navigation", num_envs=2, multidiscrete_actions=True)
    with pytest.raises(TypeError, match="multidiscrete_actions must be a bool"):
        make_env("navigation", num_envs=2, continuous_actions=False, multidiscrete_actions="yes")
    continuous = make_env("navigation", num_envs=2)
    assert continuous.continuous_actions and not continuous.multidiscrete_actions
    assert type(continuous.action_space[0]).__name__ == "Box" and continuous.get_agent_action_size("agent_0") == 2
