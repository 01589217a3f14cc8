"""``swarp/interop/torchrl.py`` over an alive mask (navigation's ``n_agents=(lo, hi)`` and
``leave_on_goal``), TorchRL's convention for agents that come and go (``PettingZooWrapper(use_mask=True)``):
each group's ``mask`` is ``sim.alive`` and its per-agent done entries mark the agents that left (or
are absent) until their env resets, while the root done entries stay per env. Checked through
``check_env_specs``, step-by-step rollouts, a collector over several episodes, GAE and partial resets,
with and without the simulator's auto-reset, in one group and in two."""

import inspect

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs.utils import check_env_specs, step_mdp  # noqa: E402
from torchrl.objectives.value import GAE  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402
from tests.groups_support import GroupedNavigation  # noqa: E402

#: A goal radius that random actions reach: agents leave mid-episode.
OPTIONS = dict(n_agents=(2, 4), leave_on_goal=True, goal_radius=0.4, world_size=0.5)
E, MAX_STEPS = 4, 10
FLAGS = ("done", "terminated", "truncated")


def make_env(auto_reset=False, seed=0, grouped=False) -> SwarpEnv:
    kwargs = dict(n_envs=E, device="cpu", seed=seed, auto_reset=auto_reset, max_steps=MAX_STEPS)
    if grouped:
        return SwarpEnv(swarp.Environment(GroupedNavigation(**OPTIONS), **kwargs))
    return SwarpEnv(swarp.make("navigation", **OPTIONS, **kwargs))


def joined(td: TensorDict, env: SwarpEnv, key: str) -> torch.Tensor:
    """A per-agent entry of every group, joined along the agent dimension in agent order ([..., A])."""
    return torch.cat([td[group, key].reshape(*td.batch_size, -1) for group in env.group_map], dim=-1)


@pytest.mark.parametrize("grouped", [False, True], ids=["one_group", "two_groups"])
@pytest.mark.parametrize("auto_reset", [False, True], ids=["reset", "auto_reset"])
def test_specs_declare_the_mask_and_per_agent_done_entries(auto_reset, grouped):
    env = make_env(auto_reset, grouped=grouped)
    assert env.layout == "agents"  # the default with a mask; "flat" has no place for per-agent flags
    groups = {"a": 2, "b": 2} if grouped else {"agents": 4}
    assert env.group_map.keys() == groups.keys()
    assert set(env.done_keys) == {*FLAGS, *((g, f) for g in groups for f in FLAGS)}
    assert env.reset_keys == ["_reset", *((g, "_reset") for g in sorted(groups))]
    for group, n in groups.items():
        mask = env.full_observation_spec[group, "mask"]
        assert mask.shape == (E, n) and mask.dtype == torch.bool
        for flag in FLAGS:
            spec = env.full_done_spec[group, flag]
            assert spec.shape == (E, n, 1) and spec.dtype == torch.bool
        assert env.full_done_spec[flag].shape == (E, 1)
    check_env_specs(env, seed=0)
    check_env_specs(env, break_when_any_done=False)


def test_flat_layout_is_refused_and_unmasked_specs_are_unchanged():
    sim = swarp.make("navigation", n_envs=2, device="cpu", **OPTIONS)
    with pytest.raises(ValueError, match="alive mask.*layout='agents'"):
        SwarpEnv(sim, layout="flat")
    plain = SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu"), layout="agents")
    assert plain.done_keys == ["done", "terminated", "truncated"] and plain.reset_keys == ["_reset"]
    assert set(plain.full_observation_spec["agents"].keys()) == {"observation", "info"}
    assert SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu")).layout == "flat"


def check_step(env: SwarpEnv, nxt: TensorDict, acting: torch.Tensor, gone: torch.Tensor) -> torch.Tensor:
    """Asserts on a step's output ``nxt`` (before any reset); returns the envs whose episode ended."""
    sim = env.sim
    ended = sim.terminated | sim.truncated
    assert torch.equal(joined(nxt, env, "mask"), sim.alive)
    assert torch.equal(nxt["done"].squeeze(-1), ended)
    assert torch.equal(nxt["terminated"].squeeze(-1), sim.terminated)
    done, term, trunc = (joined(nxt, env, flag) for flag in FLAGS)
    on = ~ended
    # Ongoing envs: an agent is done (terminated) when it is not alive: it left, now or before, or is absent.
    assert torch.equal(done[on], ~sim.alive[on]) and torch.equal(term[on], ~sim.alive[on])
    assert not bool(trunc[on].any())
    assert bool(done[on][gone[on]].all())  # departed agents stay done until their env resets
    # Ended envs: every agent is done; terminated if its env terminated or it was out before the step.
    assert bool(done[ended].all())
    assert torch.equal(term[ended], ~acting[ended] | sim.terminated[ended, None])
    assert torch.equal(trunc[ended], sim.truncated[ended, None].expand(-1, sim.n_agents))
    return ended


def check_reset(env: SwarpEnv, td: TensorDict, envs: torch.Tensor) -> None:
    """Asserts on the rows ``envs`` [E] bool of a reset's output ``td``: a new episode."""
    alive = env.sim.alive
    assert torch.equal(joined(td, env, "mask")[envs], alive[envs])
    assert torch.equal(joined(td, env, "done")[envs], ~alive[envs])  # absent agents are done from the start
    assert not bool(td["done"][envs].any())


@pytest.mark.parametrize("grouped", [False, True], ids=["one_group", "two_groups"])
@pytest.mark.parametrize("auto_reset", [False, True], ids=["reset", "auto_reset"])
def test_step_by_step_masks_and_dones(auto_reset, grouped):
    torch.manual_seed(0)
    env = make_env(auto_reset, seed=3, grouped=grouped)
    sim = env.sim
    td = env.reset()
    check_reset(env, td, torch.ones(E, dtype=torch.bool))
    gone = torch.zeros_like(sim.alive)  # agents that left during the current episode
    departures = episodes = 0
    for _ in range(4 * MAX_STEPS):
        acting = sim.alive.clone()
        td = env.step(env.rand_action(td))
        ended = check_step(env, td["next"], acting, gone)
        left = acting & ~sim.alive & ~ended[:, None]
        assert not bool((gone & sim.alive & ~ended[:, None]).any())  # no one comes back within an episode
        gone |= left
        departures += int(left.sum())
        episodes += int(ended.sum())
        td = env.maybe_reset(step_mdp(td))
        check_reset(env, td, ended)
        gone[ended] = False
    assert episodes >= E and departures > 0


def random_policy(env: SwarpEnv) -> TensorDictModule:
    """Uniform random actions in the spec's box; asserts that each step's mask is ``sim.alive``."""
    (group,) = env.group_map
    space = env.full_action_spec[group, "action"].space
    low, high = space.low.to(env.device), space.high.to(env.device)

    def act(mask):
        assert torch.equal(mask, env.sim.alive)  # the agents about to act
        return low + (high - low) * torch.rand(low.shape)

    return TensorDictModule(act, in_keys=[(group, "mask")], out_keys=[(group, "action")])


def collect(env: SwarpEnv, steps: int) -> TensorDict:
    quiet = {"auto_register_policy_transforms": False}  # torchrl 0.14's argument, absent in 0.11
    if "auto_register_policy_transforms" not in inspect.signature(Collector.__init__).parameters:
        quiet = {}
    collector = Collector(
        env, random_policy(env), frames_per_batch=E * steps, total_frames=E * steps, trust_policy=True, **quiet
    )
    batch = next(iter(collector)).clone()
    collector.shutdown()
    return batch


@pytest.mark.parametrize("auto_reset", [False, True], ids=["reset", "auto_reset"])
def test_collector_over_several_episodes(auto_reset):
    torch.manual_seed(1)
    env = make_env(auto_reset, seed=3)
    batch = collect(env, 4 * MAX_STEPS)
    T = batch.shape[1]
    mask, nmask = batch["agents", "mask"], batch["next", "agents", "mask"]
    ndone, nterm = batch["next", "agents", "done"][..., 0], batch["next", "agents", "terminated"][..., 0]
    root = batch["next", "done"]  # [E, T, 1]
    assert bool((root.sum(1) >= 2).all())  # several episodes of every env
    assert bool(ndone[root.squeeze(-1)].all())  # an episode's end is every agent's
    on = ~root.expand_as(ndone)
    assert torch.equal(ndone[on], ~nmask[on])  # within an episode: done where not alive
    departures = 0
    for e in range(E):
        for t in range(T):
            if bool(root[e, t]):
                continue
            for a in torch.nonzero(mask[e, t] & ~nmask[e, t]).flatten().tolist():
                departures += 1
                assert bool(nterm[e, t, a])  # terminated at the step it left
                for u in range(t, T):  # done from then until its env's episode ends, never back
                    assert bool(ndone[e, u, a])
                    if bool(root[e, u]):
                        break
                    assert u + 1 == T or not bool(mask[e, u + 1, a])
    assert departures > 0
    # The first step of each new episode starts from the reset: mask and done of the new episode.
    starts = root[:, :-1].squeeze(-1)
    assert torch.equal(batch["agents", "done"][:, 1:][starts][..., 0], ~mask[:, 1:][starts])
    assert not bool(batch["done"][:, 1:][starts].any())


def test_gae_stops_a_departed_agents_advantage_at_its_departure():
    torch.manual_seed(2)
    env = make_env(seed=3)
    batch = collect(env, 3 * MAX_STEPS)
    g = torch.Generator().manual_seed(0)
    shape = batch["next", "agents", "reward"].shape  # [E, T, A, 1]
    batch["agents", "state_value"] = torch.randn(shape, generator=g)
    batch["next", "agents", "state_value"] = torch.randn(shape, generator=g)
    gamma, lmbda = 0.9, 0.8
    gae = GAE(gamma=gamma, lmbda=lmbda, value_network=None)
    gae.set_keys(
        reward=("agents", "reward"),
        done=("agents", "done"),
        terminated=("agents", "terminated"),
        value=("agents", "state_value"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    gae(batch)
    advantage = batch["agents", "advantage"]
    # The reference recursion, agent by agent, on the per-agent flags.
    reward, value = batch["next", "agents", "reward"], batch["agents", "state_value"]
    next_value = batch["next", "agents", "state_value"]
    done, term = (batch["next", "agents", flag].float() for flag in ("done", "terminated"))
    expected = torch.zeros_like(advantage)
    running = torch.zeros_like(advantage[:, 0])
    for t in reversed(range(shape[1])):
        delta = reward[:, t] + gamma * next_value[:, t] * (1 - term[:, t]) - value[:, t]
        running = delta + gamma * lmbda * (1 - done[:, t]) * running
        expected[:, t] = running
    torch.testing.assert_close(advantage, expected)
    # At the step an agent leaves within an ongoing episode, its advantage is that step's alone.
    left = batch["agents", "mask"] & ~batch["next", "agents", "mask"] & ~batch["next", "done"]
    assert bool(left.any())
    torch.testing.assert_close(advantage[left], (reward - value)[left])


def test_group_resets_follow_the_root():
    env = make_env(seed=3)
    sim = env.sim
    td = env.reset()
    for _ in range(3):
        td = step_mdp(env.step(env.rand_action(td)))
    assert not bool(td["done"].any()) and bool(td["agents", "done"].any())  # agents left, the envs go on
    episodes = sim.episode.clone()
    # TorchRL writes a group's "_reset" beside the root's; the root's alone says which envs reset.
    td["_reset"] = (torch.arange(E) == 1).unsqueeze(-1)
    td["agents", "_reset"] = torch.ones(E, sim.n_agents, 1, dtype=torch.bool)
    td = env.reset(td)
    assert torch.equal(sim.episode - episodes, (torch.arange(E) == 1).to(sim.episode.dtype))
    check_reset(env, td, torch.arange(E) == 1)
    with pytest.raises(ValueError, match="need the root '_reset'"):
        env.reset(TensorDict({"agents": {"_reset": torch.ones(E, sim.n_agents, 1, dtype=torch.bool)}}, [E]))
