"""``swarp.vmas.make_env`` with a communication channel, against VMAS 1.5.2's own layouts: the
action spaces and sizes of ``simple_speaker_listener`` (a speaker and a silent listener, ``dim_c``
3) and ``simple_reference`` (two speakers, ``dim_c`` 10), ``world.dim_c``, ``agent.silent``, and
``agent.action.c`` / ``agent.state.c`` after a step and a reset, as VMAS's agents hold them."""

import dataclasses

import pytest
import torch

from swarp.core.groups import GroupSpec
from swarp.scenarios.navigation import NavigationScenario
from swarp.vmas import make_env
from tests.test_vmas_groups import KINDS, leaves, registered

vmas = pytest.importorskip("vmas")  # the reference; CI installs it

E = 3


class SpeakerListener(NavigationScenario):
    """Navigation of a speaker and a silent listener on a 3-wide channel (VMAS's
    ``simple_speaker_listener`` layout; 2 agents)."""

    def make_world(self):
        spec = super().make_world()
        groups = (GroupSpec("speaker", 1, self.obs_dim), GroupSpec("listener", 1, self.obs_dim, silent=True))
        return dataclasses.replace(spec, groups=groups, comm_dim=3)


class Reference(NavigationScenario):
    """Navigation whose agents all speak on a 10-wide channel (``simple_reference``'s layout)."""

    def make_world(self):
        return dataclasses.replace(super().make_world(), comm_dim=10)


def pair(vmas_name, scenario, kind, **kwargs):
    continuous, multidiscrete = KINDS[kind]
    flags = dict(continuous_actions=continuous, multidiscrete_actions=multidiscrete, **kwargs)
    theirs = vmas.make_env(vmas_name, num_envs=E, device="cpu", seed=0, **flags)
    with registered(scenario, "vmas_comm_test") as name:
        ours = make_env(name, num_envs=E, seed=0, n_agents=2, **flags)
    return ours, theirs


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("vmas_name", "scenario"), [
    ("simple_speaker_listener", SpeakerListener), ("simple_reference", Reference),
])  # fmt: skip
def test_spaces_follow_vmas(vmas_name, scenario, kind):
    ours, theirs = pair(vmas_name, scenario, kind)
    assert ours.world.dim_c == theirs.world.dim_c
    assert [a.name for a in ours.agents] == [a.name for a in theirs.agents]
    assert [a.silent for a in ours.agents] == [a.silent for a in theirs.agents]
    assert [a.action_size for a in ours.agents] == [a.action_size for a in theirs.agents]
    assert leaves(ours.action_space) == leaves(theirs.action_space)
    for mine, their in zip(ours.agents, theirs.agents, strict=True):
        assert ours.get_agent_action_size(mine) == theirs.get_agent_action_size(their)
        assert ours.get_random_action(mine).shape == theirs.get_random_action(their).shape
        assert ours.action_space.spaces[mine.index].contains(ours.get_random_action(mine)[0].numpy())


@pytest.mark.parametrize("kind", KINDS)
def test_messages_are_read_as_vmas_agents_hold_them(kind):
    """The same actions in both: the speaker's ``action.c`` and ``state.c`` after a step are VMAS's,
    the listener's ``None``; a reset zeros ``state.c`` and keeps ``action.c``, as VMAS does."""
    ours, theirs = pair("simple_speaker_listener", SpeakerListener, kind)
    ours.reset()
    theirs.reset()
    speaker, listener = ours.agents
    assert speaker.action.c is None and speaker.action.u is None and listener.state.c is None
    assert torch.equal(speaker.state.c, theirs.agents[0].state.c)  # zeros before the first step
    actions = ours.get_random_actions()
    ours.step(actions)
    theirs.step([a.clone() for a in actions])
    vmas_speaker, vmas_listener = theirs.agents
    assert torch.equal(speaker.action.c, vmas_speaker.action.c)
    assert torch.equal(speaker.state.c, vmas_speaker.state.c)
    assert listener.action.c is None and listener.state.c is None and vmas_listener.state.c is None
    torch.testing.assert_close(speaker.action.u, vmas_speaker.action.u / vmas_speaker.action.u_multiplier_tensor)
    assert torch.equal(speaker.action.c, ours.sim.comm[:, 0]) and ours.sim.comm[:, 1].abs().sum() == 0
    sent = speaker.action.c
    ours.reset_at(1)
    theirs.reset_at(1)
    assert torch.equal(speaker.state.c, vmas_speaker.state.c) and speaker.state.c[1].abs().sum() == 0
    assert torch.equal(speaker.action.c, sent)


def test_continuous_messages_are_checked_or_clamped_as_vmas():
    ours, _ = pair("simple_speaker_listener", SpeakerListener, "continuous")
    clamped, theirs = pair("simple_speaker_listener", SpeakerListener, "continuous", clamp_actions=True)
    actions = [torch.tensor([[0.0, 0.0, 0.5, 1.5, -0.5]] * E), torch.zeros(E, 2)]
    with pytest.raises(ValueError, match=r"agent speaker_0, env 0, component 3: 1\.5 not in \[0\.0, 1\.0\]"):
        ours.step(actions)
    clamped.step(actions)
    theirs.step(actions)
    assert clamped.agents[0].action.c[0].tolist() == [0.5, 1.0, 0.0]
    assert torch.equal(clamped.agents[0].action.c, theirs.agents[0].action.c)
    with pytest.raises(ValueError, match="shape"):
        ours.step([torch.zeros(E, 2), torch.zeros(E, 2)])  # the speaker's message columns are missing
