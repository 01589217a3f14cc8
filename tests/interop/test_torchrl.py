"""``swarp/interop/torchrl.py``: SwarpEnv specs, layouts, partial resets, auto-reset and a collector."""

import inspect

import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402

N_ENVS = 6
GOAL_GAIN = 2.0  # go-to-goal controller gain [1/s]


def make(n_envs=N_ENVS, seed=1, max_steps=25, **kwargs):
    return swarp.make("navigation", n_envs=n_envs, device="cpu", seed=seed, max_steps=max_steps, **kwargs)


def go_to_goal(observation: torch.Tensor) -> torch.Tensor:
    """Velocity towards each agent's goal (navigation obs 6:8), clipped to the physical box."""
    return torch.clamp(GOAL_GAIN * observation[..., 6:8], -1.0, 1.0)


def greedy_policy(env: SwarpEnv) -> TensorDictModule:
    prefix = ("agents",) if env.layout == "agents" else ()
    return TensorDictModule(go_to_goal, in_keys=[(*prefix, "observation")], out_keys=[(*prefix, "action")])


def collect(env: SwarpEnv, steps: int) -> TensorDict:
    # torchrl 0.14 warns about recurrent policies unless told not to register their transforms; 0.11
    # (the BenchMARL pin) has no such argument.
    quiet = {"auto_register_policy_transforms": False}
    if "auto_register_policy_transforms" not in inspect.signature(Collector.__init__).parameters:
        quiet = {}
    collector = Collector(
        env,
        greedy_policy(env),
        frames_per_batch=env.sim.n_envs * steps,
        total_frames=env.sim.n_envs * steps,
        device=env.device,
        storing_device=env.device,
        trust_policy=True,  # a parameter-free policy: nothing to move
        **quiet,
    )
    batch = next(iter(collector)).clone()
    collector.shutdown()
    return batch


@pytest.mark.parametrize("layout", ["flat", "agents"])
@pytest.mark.parametrize("auto_reset", [False, True])
@pytest.mark.parametrize("normalized", [False, True])
def test_check_env_specs(layout, auto_reset, normalized):
    bounds = {"action_low": -1.0, "action_high": 1.0} if normalized else {}
    env = SwarpEnv(make(max_steps=4, auto_reset=auto_reset), layout=layout, **bounds)
    check_env_specs(env, seed=0)


def test_flat_layout_shapes_and_info():
    sim = make()
    env = SwarpEnv(sim)
    E, A = sim.n_envs, sim.n_agents
    td = env.rollout(3)
    assert td.batch_size == (E, 3)
    assert td["observation"].shape == (E, 3, A, sim.obs_dim)
    assert td["action"].shape == (E, 3, A, sim.act_dim)
    assert td["next", "reward"].shape == (E, 3, A, 1)
    for key in ("done", "terminated", "truncated"):
        assert td["next", key].shape == (E, 3, 1) and td["next", key].dtype == torch.bool
    # Scenario info keeps its native shape and dtype at ("next", "info", key).
    assert td["next", "info", "dist_to_goal"].shape == (E, 3, A)
    assert td["next", "info", "on_goal"].dtype == torch.bool
    assert td["next", "info", "collisions"].dtype == torch.int32
    assert td["next", "info", "neighbor_overflow"].shape == (E, 3)
    torch.testing.assert_close(td["next", "info", "dist_to_goal"][:, -1], sim.info["dist_to_goal"])
    # The action spec is the simulator's physical box.
    low, high = sim.action_bounds
    spec = env.full_action_spec["action"]
    torch.testing.assert_close(spec.space.low, low.expand(E, A, sim.act_dim))
    torch.testing.assert_close(spec.space.high, high.expand(E, A, sim.act_dim))


def test_agents_layout_matches_vmas_convention():
    sim = make()
    env = SwarpEnv(sim, layout="agents")
    E, A = sim.n_envs, sim.n_agents
    assert env.group_map == {"agents": [f"agent_{i}" for i in range(A)]}
    assert env.action_key == ("agents", "action")
    assert env.reward_key == ("agents", "reward")
    assert env.done_keys == ["done", "terminated", "truncated"]
    td = env.rollout(2)
    assert td["agents"].batch_size == (E, 2, A)
    assert td["next", "agents", "observation"].shape == (E, 2, A, sim.obs_dim)
    assert td["next", "agents", "reward"].shape == (E, 2, A, 1)
    # VmasEnv's info convention: float32, per-agent entries grouped, scalars with a trailing 1.
    info = td["next", "agents", "info"]
    assert info["dist_to_goal"].shape == (E, 2, A, 1) and info["dist_to_goal"].dtype == torch.float32
    assert info["on_goal"].dtype == torch.float32
    assert td["next", "info", "neighbor_overflow"].shape == (E, 2, 1)
    assert ("agents", "done") not in td["next"].keys(True)


def test_layouts_agree():
    flat = SwarpEnv(make(seed=3))
    grouped = SwarpEnv(make(seed=3), layout="agents")
    a, b = collect(flat, 12), collect(grouped, 12)
    torch.testing.assert_close(a["next", "observation"], b["next", "agents", "observation"], rtol=0, atol=0)
    torch.testing.assert_close(a["next", "reward"], b["next", "agents", "reward"], rtol=0, atol=0)
    assert torch.equal(a["next", "done"], b["next", "done"])


def test_normalized_actions_map_onto_physical_bounds():
    sim = make(model="diff_drive")
    env = SwarpEnv(sim, action_low=-1.0, action_high=1.0)
    low, high = sim.action_bounds
    E, A = sim.n_envs, sim.n_agents
    spec = env.full_action_spec["action"].space
    assert torch.all(spec.low == -1.0) and torch.all(spec.high == 1.0)
    corners = torch.stack([torch.full((E, A, sim.act_dim), v) for v in (-1.0, 0.0, 1.0)])
    torch.testing.assert_close(env.to_physical(corners[0]), low.expand_as(corners[0]))
    torch.testing.assert_close(env.to_physical(corners[1]), (0.5 * (low + high)).expand_as(corners[0]))
    torch.testing.assert_close(env.to_physical(corners[2]), high.expand_as(corners[0]))
    # A step with normalized actions equals a step of the raw simulator with the mapped ones.
    twin = make(model="diff_drive")
    env.reset()
    twin.reset()
    action = torch.rand(E, A, sim.act_dim, generator=torch.Generator().manual_seed(0)) * 2 - 1
    out = env.step(TensorDict({"action": action}, batch_size=[E]))
    obs, *_ = twin.step(env.to_physical(action))
    torch.testing.assert_close(out["next", "observation"], obs, rtol=0, atol=0)


def test_outputs_are_copies_of_the_persistent_buffers():
    sim = make()
    env = SwarpEnv(sim)
    td0 = env.reset()
    first = env.rand_step(td0.clone())
    saved = first["next", "observation"].clone()
    env.rand_step(first["next"].clone())
    assert torch.equal(first["next", "observation"], saved), "a later step overwrote an earlier tensordict"
    assert first["next", "observation"].data_ptr() != sim.obs.data_ptr()
    assert first["next", "info", "dist_to_goal"].data_ptr() != sim.info["dist_to_goal"].data_ptr()


def test_partial_reset_through_reset_mask():
    sim = make()
    env = SwarpEnv(sim)
    td = env.reset()
    for _ in range(5):
        td = env.rand_step(td)["next"].clone()
    before = sim.obs.clone()
    episodes = sim.episode.clone()
    mask = torch.tensor([True, False, True, False, False, False]).unsqueeze(-1)
    td.set("_reset", mask)
    out = env.reset(td)
    reset = mask.squeeze(-1)
    assert torch.equal(sim.episode, episodes + reset.int())
    assert torch.equal(sim.step_count[reset], torch.zeros(2, dtype=sim.step_count.dtype))
    assert torch.equal(out["observation"][~reset], before[~reset]), "envs outside the mask must be untouched"
    assert not torch.equal(out["observation"][reset], before[reset])
    assert not out["done"][reset].any()


def test_collector_rollout_stays_on_device_and_resets_finished_envs():
    env = SwarpEnv(make())
    batch = collect(env, 60)
    for key, value in batch.items(include_nested=True, leaves_only=True):
        assert value.device == env.device, f"{key} left the device"
    done = batch["next", "done"].squeeze(-1)
    terminated = batch["next", "terminated"].squeeze(-1)
    # The go-to-goal policy finishes envs at different steps: resets are partial.
    partial = done.any(0) & ~done.all(0)
    assert terminated.any() and partial.any()
    # Within an episode, the next observation is the following step's observation; after a done,
    # the following step starts from a fresh reset.
    carried = (batch["next", "observation"][:, :-1] == batch["observation"][:, 1:]).flatten(2).all(-1)
    assert torch.equal(carried, ~done[:, :-1])


def test_auto_reset_environment_gives_the_same_trajectories():
    """An Environment made with auto_reset=True is handled consistently: final observations in
    "next", the already-started episode at the reset, the same episodes as without auto-reset."""
    plain = collect(SwarpEnv(make(seed=5)), 60)
    auto = collect(SwarpEnv(make(seed=5, auto_reset=True)), 60)
    assert plain["next", "done"].any()
    for key in (("observation",), ("next", "observation"), ("next", "reward"), ("next", "done"), ("next", "truncated")):
        torch.testing.assert_close(plain[key], auto[key], rtol=0, atol=0, msg=f"{key} differs")


def test_auto_reset_partial_reset_of_envs_that_did_not_finish():
    sim = make(auto_reset=True, max_steps=50)
    env = SwarpEnv(sim)
    td = env.reset()
    td = env.rand_step(td)["next"].clone()
    episodes = sim.episode.clone()
    mask = torch.zeros(sim.n_envs, 1, dtype=torch.bool)
    mask[2] = True
    td.set("_reset", mask)
    env.reset(td)
    assert torch.equal(sim.episode - episodes, mask.squeeze(-1).int())


def test_set_seed_makes_resets_reproducible():
    env = SwarpEnv(make())
    env.set_seed(7)
    a = env.reset()["observation"]
    env.rollout(3)
    env.set_seed(7)
    b = env.reset()["observation"]
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_float64_environment():
    sim = make(dtype="float64")
    env = SwarpEnv(sim, layout="agents", action_low=-1.0, action_high=1.0)
    check_env_specs(env, seed=0)
    assert env.rollout(2)["next", "agents", "observation"].dtype == torch.float64


def test_argument_errors():
    sim = make()
    with pytest.raises(TypeError, match="swarp.Environment"):
        SwarpEnv(object())
    with pytest.raises(ValueError, match="layout"):
        SwarpEnv(sim, layout="grouped")
    with pytest.raises(ValueError, match="both"):
        SwarpEnv(sim, action_low=-1.0)
    with pytest.raises(ValueError, match="action_low must be < action_high"):
        SwarpEnv(sim, action_low=1.0, action_high=-1.0)
    with pytest.raises(ValueError, match="finite"):
        SwarpEnv(sim, action_low=-float("inf"), action_high=1.0)


@pytest.mark.gpu
def test_collector_on_cuda_stays_on_device():
    sim = swarp.make("navigation", n_envs=64, device="cuda", seed=0, max_steps=20)
    env = SwarpEnv(sim, layout="agents")
    batch = collect(env, 30)
    for key, value in batch.items(include_nested=True, leaves_only=True):
        assert value.device.type == "cuda", f"{key} left the device"


# --- the boundary: actions, masks, close ----------------------------------------------------------


def agents_action(sim, action: torch.Tensor) -> TensorDict:
    E, A = sim.n_envs, sim.n_agents
    return TensorDict({"agents": TensorDict({"action": action}, batch_size=[E, A])}, batch_size=[E])


def test_wrong_action_shapes_and_a_missing_action_raise_clear_errors():
    """Issue 29 item 6: torch's broadcast message and an AttributeError before."""
    sim = make()
    env = SwarpEnv(sim, layout="agents", action_low=-1.0, action_high=1.0)
    env.reset()
    E, A, D = sim.n_envs, sim.n_agents, sim.act_dim
    steps = sim.step_count.clone()
    with pytest.raises(ValueError, match=r"tensordict\[\('agents', 'action'\)\] must have shape .* got \[6, 4, 3\]"):
        env.step(agents_action(sim, torch.zeros(E, A, 3)))
    with pytest.raises(ValueError, match=r"got \[6, 4, 1\]"):  # would broadcast onto the bounds
        env.step(agents_action(sim, torch.zeros(E, A, 1)))
    with pytest.raises(KeyError, match=r"step\(\) needs the action at \('agents', 'action'\)"):
        env.step(TensorDict({}, batch_size=[E]))
    flat = SwarpEnv(make())
    flat.reset()
    with pytest.raises(KeyError, match="needs the action at 'action'"):
        flat.step(TensorDict({"observation": torch.zeros(E, A, sim.obs_dim)}, batch_size=[E]))
    for bad in (torch.zeros(E, A, D, dtype=torch.bool), torch.zeros(E, A, D, dtype=torch.complex64)):
        with pytest.raises(TypeError, match="must be real numbers"):
            flat.step(TensorDict({"action": bad}, batch_size=[E]))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        env.to_physical([[0.0, 0.0]])
    with pytest.raises(ValueError, match=r"\[\.\.\., n_agents, act_dim\]"):
        env.to_physical(torch.zeros(E, 1, D))
    assert torch.equal(sim.step_count, steps), "a rejected action must not step"


def test_int_and_float64_actions_step_as_their_float32_values():
    E = N_ENVS
    envs = [SwarpEnv(make(seed=2)) for _ in range(3)]
    for env in envs:
        env.reset()
    shape = (E, envs[0].sim.n_agents, envs[0].sim.act_dim)
    action = torch.randint(-1, 2, shape, generator=torch.Generator().manual_seed(0))
    outs = [
        env.step(TensorDict({"action": a}, batch_size=[E]))["next", "observation"]
        for env, a in zip(envs, (action.float(), action, action.double()), strict=True)
    ]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_normalized_actions_clamp_for_every_finite_value():
    """A finite value of any size maps to the bound it exceeds (3e38 * scale overflowed to inf,
    which acts as 0 and raises the invalid flag); inf and NaN still reach the step as they are."""
    sim = make(model="diff_drive")
    env = SwarpEnv(sim, action_low=-0.5, action_high=0.5)  # onto diff-drive's [-1, 1] x [-3, 3]: scales 2, 6
    low, high = env.physical_low, env.physical_high
    E, A, D = sim.n_envs, sim.n_agents, sim.act_dim
    for value, bound in ((1e30, high), (3e38, high), (2.0, high), (-1e30, low), (-3e38, low), (-2.0, low)):
        assert torch.equal(env.to_physical(torch.full((E, A, D), value)), bound.expand(E, A, D)), value
    huge64 = torch.full((E, A, D), 1e300, dtype=torch.float64)
    assert torch.equal(env.to_physical(huge64), high.expand(E, A, D))
    special = torch.zeros(E, A, D)
    special[0, 0, 0], special[0, 1, 1], special[1, 0, 0] = float("inf"), -float("inf"), float("nan")
    mapped = env.to_physical(special)
    assert mapped[0, 0, 0] == float("inf") and mapped[0, 1, 1] == -float("inf") and mapped[1, 0, 0].isnan()
    finite = torch.isfinite(special)
    assert torch.equal(mapped[finite], env.to_physical(torch.zeros(E, A, D))[finite])
    # End to end: 1e30 steps exactly as the box's upper edge does, and raises nothing.
    twin = SwarpEnv(make(model="diff_drive"), action_low=-0.5, action_high=0.5)
    for e in (env, twin):
        e.reset()
    a = env.step(TensorDict({"action": torch.full((E, A, D), 1e30)}, batch_size=[E]))
    b = twin.step(TensorDict({"action": torch.full((E, A, D), 0.5)}, batch_size=[E]))
    assert torch.equal(a["next", "observation"], b["next", "observation"])
    assert not bool(sim.invalid_actions())
    env.step(TensorDict({"action": torch.full((E, A, D), float("nan"))}, batch_size=[E]))
    assert bool(sim.invalid_actions()), "NaN acts as 0 and raises the flag, as documented"
    assert torch.isfinite(sim.state.pos).all()


def test_reset_and_step_masks_are_checked():
    sim = make()
    env = SwarpEnv(sim)
    td = env.reset()
    episodes = sim.episode.clone()
    E = sim.n_envs
    for bad, error in (
        (torch.ones(E, 1, dtype=torch.int64), TypeError),
        (torch.ones(E, 2, dtype=torch.bool), ValueError),
    ):
        with pytest.raises(error, match=r"tensordict\['_reset'\] must be a bool mask"):
            env._reset(TensorDict({"_reset": bad}, batch_size=[E]))
    assert torch.equal(sim.episode, episodes)
    # A [E] bool mask is as good as TorchRL's [E, 1].
    env._reset(TensorDict({"_reset": torch.arange(E) == 1}, batch_size=[E]))
    assert torch.equal(sim.episode - episodes, (torch.arange(E) == 1).int())
    partial = td.clone()
    partial["action"] = torch.zeros(E, sim.n_agents, sim.act_dim)
    partial["_step"] = torch.arange(E) < 2
    with pytest.raises(ValueError, match="'_step' mask must be all True"):
        env.step(partial)


def test_close_closes_the_environment_and_garbage_collection_does_not():
    import gc

    sim = make()
    SwarpEnv(sim).reset()
    gc.collect()  # the adapter is gone: its owner's environment stays usable
    sim.step(torch.zeros(sim.n_envs, sim.n_agents, sim.act_dim))
    env = SwarpEnv(sim)
    env.close()
    env.close()  # idempotent
    assert env.is_closed
    with pytest.raises(RuntimeError, match="the Environment is closed: step"):
        env.rand_step(TensorDict({}, batch_size=[sim.n_envs]))
    with pytest.raises(RuntimeError, match="the Environment is closed: reset"):
        env.reset()
