"""``swarp.vmas.make_env`` on a scenario with agent groups: agents named ``"{group}_{i}"``, each with
its group's observation width and action space, laid out as VMAS 1.5.2 lays out a heterogeneous
scenario's (``simple_tag``: adversaries and good agents of different observation widths)."""

import contextlib
import dataclasses

import numpy as np
import pytest
import torch

import swarp
from swarp.core.groups import GroupSpec
from swarp.scenarios.navigation import NavigationScenario
from swarp.vmas import VmasEnvironment, make_env
from tests.groups_support import NARROW, GroupedNavigation, NarrowNavigation

vmas = pytest.importorskip("vmas")  # the reference; CI installs it

E = 3  # envs per test env: small, the CPU is shared
KINDS = {"continuous": (True, False), "discrete": (False, False), "multidiscrete": (False, True)}


class TagLikeNavigation(NavigationScenario):
    """Navigation of 4 agents grouped as VMAS's ``simple_tag`` names its agents: 3 ``"adversary"``
    at full width, 1 ``"agent"`` observing its first ``NARROW`` columns (torch reference)."""

    fused_available = False

    def make_world(self):
        spec = super().make_world()
        groups = (GroupSpec("adversary", 3, self.obs_dim), GroupSpec("agent", 1, NARROW))
        return dataclasses.replace(spec, groups=groups)

    def observations(self):
        obs = super().observations().clone()
        obs[:, 3:, NARROW:] = 0
        return obs


@contextlib.contextmanager
def registered(cls, name="vmas_groups_test"):
    """``cls`` registered under ``name`` for the block (``make_env`` builds by name)."""
    swarp.register_scenario(name, cls)
    try:
        yield name
    finally:
        swarp.unregister_scenario(name)


def values_of(leaf):
    """A Box's bounds, a Discrete's choices, a MultiDiscrete's levels."""
    if hasattr(leaf, "low"):
        return leaf.low.tolist(), leaf.high.tolist()
    return int(leaf.n) if hasattr(leaf, "n") else leaf.nvec.tolist()


def leaves(space):
    """A per-agent ``Tuple`` / ``Dict`` as library-neutral rows (VMAS builds gym spaces, swarp
    gymnasium ones): ``(container, key, kind, shape, dtype, values_of)`` per agent."""
    container = type(space).__name__
    items = space.spaces.items() if container == "Dict" else enumerate(space.spaces)
    return [
        (container, key, type(leaf).__name__, tuple(leaf.shape), np.dtype(leaf.dtype), values_of(leaf))
        for key, leaf in items
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dict_spaces", [False, True])
def test_spaces_are_laid_out_as_vmas_lays_out_a_heterogeneous_scenario(kind, dict_spaces):
    """The same agent names and order, per-agent action spaces and sizes, random actions of the
    same shapes, and observation spaces of each agent's own width, as ``obs`` has it (VMAS builds
    them from the observations)."""
    continuous, multidiscrete = KINDS[kind]
    flags = dict(continuous_actions=continuous, multidiscrete_actions=multidiscrete, dict_spaces=dict_spaces)
    theirs = vmas.make_env("simple_tag", num_envs=E, device="cpu", seed=0, **flags)
    with registered(TagLikeNavigation) as name:
        ours = make_env(name, num_envs=E, seed=0, n_agents=4, **flags)
    names = ["adversary_0", "adversary_1", "adversary_2", "agent_0"]
    assert [a.name for a in ours.agents] == [a.name for a in theirs.agents] == names
    assert leaves(ours.action_space) == leaves(theirs.action_space)
    for mine, their in zip(ours.agents, theirs.agents, strict=True):
        assert ours.get_agent_action_size(mine) == theirs.get_agent_action_size(their)
        assert ours.get_random_action(mine).shape == theirs.get_random_action(their).shape
    for env in (ours, theirs):
        obs = env.reset()
        shapes = [(key, tuple(o.shape[1:])) for key, o in (obs.items() if dict_spaces else enumerate(obs))]
        assert [(key, shape) for _, key, _, shape, _, _ in leaves(env.observation_space)] == shapes
        sizes = [shape for _, shape in shapes]
        assert sizes[0] == sizes[1] == sizes[2] != sizes[3]  # a group's agents share their width
    assert [row[3] for row in leaves(ours.observation_space)] == [(ours.sim.obs_dim,)] * 3 + [(NARROW,)]


def test_discrete_groups_of_their_own_levels_step_by_group():
    """Per-group levels (``action_nvec`` by group): each agent's indices reach its group's rows of
    the index buffer, and each agent observes its group's width."""
    with registered(NarrowNavigation) as name:
        env = make_env(name, num_envs=E, seed=0, n_agents=4, continuous_actions=False, action_nvec={"a": 5})
    assert [a.name for a in env.agents] == ["a_0", "a_1", "b_0", "b_1"]
    assert [s.n for s in env.action_space.spaces] == [25, 25, 9, 9]
    assert [a.discrete_action_nvec for a in env.agents] == [[5, 5]] * 2 + [[3, 3]] * 2
    actions = [torch.tensor(row) for row in ([24, 3, 0], [1, 2, 12], [8, 0, 4], [[7], [5], [1]])]
    obs, rews, dones, infos = env.step(actions)
    indices = env.sim.action_input.indices
    assert torch.equal(indices[:, :, 0], torch.stack([a.reshape(E) for a in actions], dim=1))
    assert [tuple(o.shape) for o in obs] == [(E, env.sim.obs_dim)] * 2 + [(E, NARROW)] * 2
    assert torch.equal(obs[3], env.sim.obs[:, 3, :NARROW]) and obs[3].data_ptr() != env.sim.obs.data_ptr()
    assert [tuple(r.shape) for r in rews] == [(E,)] * 4 and dones.shape == (E,)
    assert set(infos[2]) == set(env.sim.info)
    with pytest.raises(ValueError, match=r"discrete action of b_0 out of bounds: env 0, column 0 holds 9"):
        env.step([torch.zeros(E, dtype=torch.int64)] * 2 + [torch.full((E,), 9), torch.zeros(E, dtype=torch.int64)])
    with pytest.raises(ValueError, match=r"action of a_1 must have shape \[num_envs, 1\] = \[3, 1\]"):
        env.step([torch.zeros(E, 1), torch.zeros(E, 2), torch.zeros(E, 1), torch.zeros(E, 1)])


def test_continuous_groups_check_clamp_and_differentiate():
    with registered(GroupedNavigation) as name:
        env = make_env(name, num_envs=E, seed=0, n_agents=4, max_steps=3, dict_spaces=True)
        clamped = make_env(name, num_envs=E, seed=0, n_agents=4, clamp_actions=True, grad_enabled=True)
    actions = {a.name: torch.zeros(E, 2) for a in env.agents}
    actions["b_1"] = torch.tensor([[0.0, 0.5]] * (E - 1) + [[0.0, 7.0]])
    with pytest.raises(ValueError, match=r"agent b_1, env 2, component 1: 7\.0 not in \[-1\.0, 1\.0\]"):
        env.step(actions)
    commands = [torch.full((E, 2), 0.25 * i, requires_grad=True) for i in range(4)]
    obs, rews, dones, _ = clamped.step(commands)
    assert torch.equal(clamped.sim.world.actions, torch.stack([c.detach() for c in commands], 1).clamp(-1, 1))
    sum(r.sum() for r in rews).backward()
    assert all(c.grad is not None for c in commands)
    for _ in range(3):
        obs, rews, dones, _ = env.step({a.name: env.get_random_action(a) for a in env.agents})
    assert dones.all() and set(obs) == {"a_0", "a_1", "b_0", "b_1"}
    obs = env.reset_at(1)
    assert not env.done()[1] and obs["b_0"].shape == (E, env.sim.obs_dim)


def test_mixed_kinds_and_communication_are_refused():
    sim = swarp.Environment(GroupedNavigation(n_agents=4), n_envs=E, device="cpu", action_space={"a": "discrete"})
    with pytest.raises(ValueError, match=r"one action kind for every agent .*\['continuous', 'discrete'\]"):
        VmasEnvironment(sim)
    with registered(GroupedNavigation) as name, pytest.raises(TypeError, match="unknown option 'dim_c'"):
        make_env(name, num_envs=E, n_agents=4, dim_c=3)
