"""The communication channel (``WorldSpec.comm_dim``): VMAS 1.5.2's action layout (checked against
VMAS itself), the Warp decode against its torch reference, silent groups, what observations hear
(silence at a fresh start), the grad path through the messages, and bad input refused."""

import dataclasses
import math

import pytest
import torch

import swarp
from swarp.core.spaces import ActionSpace, decode_message_torch, decode_torch, encode_torch
from swarp.scenarios.fleet import FleetScenario
from swarp.scenarios.navigation import NavigationScenario
from tests.support import DEVICES

C = 3


class Talk(NavigationScenario):
    """Navigation with a C-wide channel that no observation reads (the decode's test bed)."""

    def make_world(self):
        return dataclasses.replace(super().make_world(), comm_dim=C)


class Echo(Talk):
    """``Talk`` whose torch observation appends every agent's heard message (torch reference only)."""

    fused_available = False

    @property
    def obs_dim(self) -> int:
        return super().obs_dim + C * self.cfg.n_agents

    def observations(self) -> torch.Tensor:
        heard = self.env.messages.reshape(self.n_envs, 1, -1).expand(-1, self.n_agents, -1)
        return torch.cat([super().observations(), heard], dim=-1)


class QuietScouts(FleetScenario):
    """Fleet with a 2-wide channel on which the scout is silent."""

    def make_world(self):
        spec = super().make_world()
        carriers, scouts = spec.groups
        return dataclasses.replace(spec, comm_dim=2, groups=(carriers, dataclasses.replace(scouts, silent=True)))


def test_layout_follows_vmas():
    """Widths, heads and strides of each kind with a channel: VMAS's action sizes and spaces."""
    continuous = ActionSpace.build("continuous", None, 2, comm_dim=C)
    assert (continuous.width, continuous.heads) == (2 + C, ())
    discrete = ActionSpace.build("discrete", None, 2, comm_dim=C)
    assert (discrete.width, discrete.heads, discrete.strides) == (1, (9 * C,), (3 * C, C, 1))
    multi = ActionSpace.build("multidiscrete", (4, 5), 2, comm_dim=C)
    assert (multi.width, multi.heads, multi.choices) == (3, (4, 5, C), (4, 5, C))
    silent = ActionSpace.build("discrete", None, 2)
    assert silent.heads == (9,) and silent.choices == (3, 3)


@pytest.mark.parametrize("multidiscrete", [False, True])
def test_decode_matches_vmas(multidiscrete):
    """Every discrete action of VMAS's ``simple_reference`` (dim_c 10) decodes to VMAS's command
    and one-hot message."""
    vmas = pytest.importorskip("vmas")
    venv = vmas.make_env(
        "simple_reference", num_envs=90, device="cpu", continuous_actions=False,
        multidiscrete_actions=multidiscrete, seed=0,
    )  # fmt: skip
    agent = venv.agents[0]
    dim_c = venv.world.dim_c
    flat = torch.arange(90)
    digits = torch.stack([flat // (3 * dim_c), flat // dim_c % 3, flat % dim_c], dim=-1)
    given = digits if multidiscrete else flat.unsqueeze(-1)
    venv._set_action(given.clone(), agent)
    space = ActionSpace.build("multidiscrete" if multidiscrete else "discrete", None, 2, comm_dim=dim_c)
    u = float(agent.action.u_range_tensor[0])
    low, high = torch.full((1, 2), -u), torch.full((1, 2), u)
    command, bad = decode_torch(space, given.unsqueeze(1), low, high)
    message = decode_message_torch(space, given.unsqueeze(1), bad, torch.float32)
    assert not bad.any()
    assert torch.equal(command[:, 0], agent.action.u / agent.action.u_multiplier_tensor)
    assert torch.equal(message[:, 0], agent.action.c)


@pytest.mark.parametrize("kind", ["discrete", "multidiscrete"])
def test_encode_keeps_the_message_choice(kind):
    space = ActionSpace.build(kind, None, 2, comm_dim=C)
    low, high = torch.full((4, 2), -1.0), torch.full((4, 2), 1.0)
    command = torch.tensor([[[-1.0, 1.0], [0.0, 0.0], [1.0, -1.0], [0.0, 1.0]]])
    choice = torch.tensor([[0, 1, 2, 1]])
    indices = encode_torch(space, command, low, high, choice)
    again, bad = decode_torch(space, indices, low, high)
    assert torch.equal(again, command) and not bad.any()
    assert torch.equal(decode_message_torch(space, indices, bad, torch.float32).argmax(-1), choice)


def random_actions(env, generator, kind):
    """Actions of ``env``'s one space: continuous over [-1.5, 1.5] (messages beyond [0, 1] too),
    or indices uniform over each head."""
    shape = (env.n_envs, env.n_agents)
    if kind == "continuous":
        return torch.rand((*shape, env.act_dim), generator=generator) * 3.0 - 1.5
    return env.action_space.sample(*shape, generator)


@pytest.mark.parametrize("kind", ["continuous", "discrete", "multidiscrete"])
def test_fused_equals_torch_path_and_shards(kind):
    """The Warp decode (one launch, graph or sharded) and the torch reference send the same messages."""
    make = dict(n_envs=128, device="cpu", seed=3, action_space=kind, auto_reset=True)
    envs = [
        swarp.Environment(Talk(n_agents=4), **make),
        swarp.Environment(Talk(n_agents=4), fused=False, **make),
        swarp.Environment(Talk(n_agents=4), plan={"cpu_shards": 2}, **make),
    ]
    assert envs[2].plan.cpu_shards == 2
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        actions = random_actions(envs[0], generator, kind)
        for env in envs:
            env.step(actions)
        assert torch.equal(envs[0].comm, envs[1].comm) and torch.equal(envs[0].comm, envs[2].comm)
        if kind == "continuous":
            assert torch.equal(envs[0].comm, actions[..., 2:].clamp(0.0, 1.0))
        else:
            assert torch.equal(envs[0].comm.sum(-1), torch.ones(128, 4))
    for env in envs:
        assert not env.invalid_actions()


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_bad_messages_act_as_zero_and_flag(fused):
    env = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu", fused=fused)
    actions = torch.full((2, 2, 2 + C), 0.5)
    actions[1, 0, 3] = math.nan
    env.step(actions)
    assert env.invalid_actions()
    assert env.comm[1, 0].tolist() == [0.5, 0.0, 0.5] and env.comm[0, 0].tolist() == [0.5] * 3
    discrete = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu", fused=fused, action_space="discrete")
    indices = torch.tensor([[[9 * C], [4]], [[5], [-1]]])
    discrete.step(indices)
    assert discrete.invalid_actions()
    assert discrete.comm[0, 0].tolist() == [0.0] * C and discrete.comm[0, 1].tolist() == [0.0, 1.0, 0.0]
    assert discrete.world.actions[0, 0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
def test_silent_group_has_no_message(fused):
    """A silent group's actions have no message columns and its rows of ``comm`` stay 0; the
    speaking group's discrete choice arrives one-hot."""
    env = swarp.Environment(QuietScouts(), n_envs=3, device="cpu", fused=fused, action_space={"carriers": "discrete"})
    spaces = {g.name: g.action_space for g in env.groups}
    assert spaces["scouts"].comm_dim == 0 and spaces["scouts"].width == 2
    assert spaces["carriers"].heads == (18,)
    carriers = torch.tensor([[[1], [2], [17]]] * 3)
    env.step({"carriers": carriers, "scouts": torch.ones(3, 1, 2)})
    assert env.comm.shape == (3, 4, 2)
    assert env.comm[:, 3].abs().sum() == 0
    assert env.comm[0, :3].tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match=r"actions\['scouts'\] must have shape"):
        env.step({"carriers": carriers, "scouts": torch.ones(3, 1, 4)})


def test_observations_hear_silence_at_a_fresh_start():
    """An observation after a step hears that step's messages; the first of an episode (reset or
    auto-reset) hears zeros."""
    env = swarp.Environment(Echo(n_agents=2), n_envs=2, device="cpu", auto_reset=True, max_steps=2)
    width = Talk(n_agents=2).obs_dim
    obs, _ = env.reset()
    assert obs[..., width:].abs().sum() == 0
    actions = torch.full((2, 2, 2 + C), 0.25)
    obs, *_ = env.step(actions)
    assert torch.all(obs[..., width:] == 0.25)
    obs, _, _, truncated, info = env.step(actions)
    assert truncated.all() and obs[..., width:].abs().sum() == 0
    assert torch.all(info["final_obs"][..., width:] == 0.25)


def test_grad_reaches_the_messages():
    """A grad-mode step's observation carries the messages' autograd history: d(heard)/d(message)
    is 1 inside [0, 1] and 0 where the message is clamped; "direct" and "recompute" agree."""
    grads = []
    for mode in ("direct", "recompute"):
        env = swarp.Environment(Echo(n_agents=2), n_envs=2, device="cpu", plan={"grad_step": mode})
        width = Talk(n_agents=2).obs_dim
        actions = torch.tensor([0.1, -0.2, 0.5, 1.5, -0.5]).repeat(2, 2, 1).requires_grad_()
        obs, *_ = env.step(actions)
        assert torch.equal(obs[0, 0, width : width + C].detach(), torch.tensor([0.5, 1.0, 0.0]))
        obs[..., width:].sum().backward()
        assert torch.equal(actions.grad[..., 2:], torch.tensor([2.0, 0.0, 0.0]).repeat(2, 2, 1))
        grads.append(actions.grad)
    assert torch.equal(grads[0], grads[1])


def test_grouped_grad_joins_messages_after_the_command():
    env = swarp.Environment(QuietScouts(), n_envs=2, device="cpu")
    assert env.act_dim == 2 + 2
    carriers = torch.full((2, 3, 4), 0.5, requires_grad=True)
    scouts = torch.zeros(2, 1, 2, requires_grad=True)
    joined = env.action_input.join({"carriers": carriers, "scouts": scouts})
    assert joined.shape == (2, 4, 4) and torch.equal(joined[:, 3], torch.zeros(2, 4))
    assert torch.equal(env.action_input.messages_of(joined)[:, :3], torch.full((2, 3, 2), 0.5))
    obs, reward, *_ = env.step({"carriers": carriers, "scouts": scouts})
    reward["carriers"].sum().backward()
    assert carriers.grad is not None


def test_snapshot_carries_the_messages():
    env = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu")
    env.step(torch.full((2, 2, 2 + C), 0.75))
    snapshot = env.get_state()
    env.step(torch.full((2, 2, 2 + C), 0.25))
    env.set_state(snapshot)
    assert torch.all(env.comm == 0.75)


def test_bad_input_is_refused_and_leaves_the_env_intact():
    env = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu")
    before = env.get_state()
    with pytest.raises(ValueError, match=r"\[n_envs, n_agents, act_dim\] = \[2, 2, 5\]"):
        env.step(torch.zeros(2, 2, 2))
    discrete = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu", action_space="discrete")
    with pytest.raises(TypeError, match="integer indices"):
        discrete.step(torch.zeros(2, 2, 1))
    after = env.get_state()
    assert all(torch.equal(before[key], after[key]) for key in before)
    with pytest.raises(ValueError, match="comm_dim must be an int >= 0"):
        dataclasses.replace(Talk(n_agents=2).make_world(), comm_dim=-1)


@DEVICES
@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_cpu_and_device_agree(device, kind):
    generator = torch.Generator().manual_seed(1)
    envs = [swarp.Environment(Talk(n_agents=3), n_envs=16, device=d, action_space=kind) for d in ("cpu", device)]
    for _ in range(3):
        actions = random_actions(envs[0], generator, kind)
        for env in envs:
            env.step(actions.to(env.torch_device))
        assert torch.equal(envs[0].comm, envs[1].comm.cpu())


def test_action_bounds_add_the_message_box():
    """Continuous actions with messages: ``action_bounds`` is the joined [A, D + C] box, [0, 1] on
    the message columns of speaking agents and (0, 0) on a silent one's."""
    env = swarp.Environment(QuietScouts(), n_envs=2, device="cpu")
    low, high = env.action_bounds
    assert low.shape == (4, 4) and torch.equal(low[:, 2:], torch.zeros(4, 2))
    assert torch.equal(high[:, 2:], torch.tensor([[1.0, 1.0]] * 3 + [[0.0, 0.0]]))
    discrete = swarp.Environment(Talk(n_agents=2), n_envs=2, device="cpu", action_space="discrete")
    assert discrete.action_bounds[0].shape == (2, 2)
