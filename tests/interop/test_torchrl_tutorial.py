"""TorchRL's "Multi-Agent Reinforcement Learning (PPO) with TorchRL" tutorial, written for
``torchrl.envs.libs.vmas.VmasEnv``, run on ``SwarpEnv`` with only the environment line changed,
plus the VmasEnv attributes and ``render`` it and BenchMARL-style code rely on.

The tutorial is reproduced line for line (torchrl 0.14's ``tutorials/sphinx-tutorials/
multiagent_ppo.py``) at tiny sizes. Not reproduced: the device choice (the CPU here), matplotlib's
learning curve, and the global ``set_composite_lp_aggregate(False).set()``, which is the same call
used as a context manager so that it does not leak into other tests.
"""

import numpy as np
import pytest
import torch

pytest.importorskip("torchrl")  # the torchrl extra; CI installs it

from tensordict.nn import TensorDictModule, set_composite_lp_aggregate  # noqa: E402
from tensordict.nn.distributions import NormalParamExtractor  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data.replay_buffers import ReplayBuffer  # noqa: E402
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement  # noqa: E402
from torchrl.data.replay_buffers.storages import LazyTensorStorage  # noqa: E402
from torchrl.envs import RewardSum, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402
from torchrl.modules import MultiAgentMLP, ProbabilisticActor, TanhNormal  # noqa: E402
from torchrl.objectives import ClipPPOLoss, ValueEstimators  # noqa: E402

import swarp  # noqa: E402
from swarp.interop.torchrl import SwarpEnv  # noqa: E402

# The tutorial's hyperparameters, shrunk to a few seconds on the CPU.
device = torch.device("cpu")
vmas_device = device
frames_per_batch = 120  # tutorial: 6_000
n_iters = 2  # tutorial: 5
total_frames = frames_per_batch * n_iters
num_epochs = 2  # tutorial: 30
minibatch_size = 40  # tutorial: 400
lr = 3e-4
max_grad_norm = 1.0
clip_epsilon = 0.2
gamma = 0.99
lmbda = 0.9
entropy_eps = 1e-4
max_steps = 10  # tutorial: 100
num_vmas_envs = frames_per_batch // max_steps
scenario_name = "navigation"
n_agents = 3
num_cells = 32  # tutorial: 256


def make_env() -> SwarpEnv:
    """The tutorial's one changed line: ``VmasEnv(scenario=scenario_name, num_envs=num_vmas_envs,
    continuous_actions=True, max_steps=max_steps, device=vmas_device, n_agents=n_agents)``.

    The normalized box [-1, 1] is the action spec that ``TanhNormal``'s low / high are read from.
    """
    sim = swarp.make(
        scenario_name, n_envs=num_vmas_envs, device=vmas_device, seed=0, n_agents=n_agents, max_steps=max_steps
    )
    return SwarpEnv(sim, layout="agents", action_low=-1.0, action_high=1.0)


def build_tutorial():
    """The tutorial from the environment to the optimizer, unchanged but for ``make_env``."""
    torch.manual_seed(0)
    env = make_env()

    print("action_spec:", env.full_action_spec)
    print("reward_spec:", env.full_reward_spec)
    print("done_spec:", env.full_done_spec)
    print("observation_spec:", env.observation_spec)
    print("action_keys:", env.action_keys)
    print("reward_keys:", env.reward_keys)
    print("done_keys:", env.done_keys)

    env = TransformedEnv(
        env,
        RewardSum(in_keys=[env.reward_key], out_keys=[("agents", "episode_reward")]),
    )
    check_env_specs(env)

    n_rollout_steps = 5
    rollout = env.rollout(n_rollout_steps)
    print("rollout of three steps:", rollout)
    print("Shape of the rollout TensorDict:", rollout.batch_size)
    assert rollout.batch_size == (num_vmas_envs, n_rollout_steps)

    share_parameters_policy = True
    policy_net = torch.nn.Sequential(
        MultiAgentMLP(
            n_agent_inputs=env.observation_spec["agents", "observation"].shape[-1],  # n_obs_per_agent
            n_agent_outputs=2 * env.full_action_spec[env.action_key].shape[-1],  # 2 * n_actions_per_agents
            n_agents=env.n_agents,
            centralised=False,
            share_params=share_parameters_policy,
            device=device,
            depth=2,
            num_cells=num_cells,
            activation_class=torch.nn.Tanh,
        ),
        NormalParamExtractor(),
    )
    policy_module = TensorDictModule(
        policy_net,
        in_keys=[("agents", "observation")],
        out_keys=[("agents", "loc"), ("agents", "scale")],
    )
    policy = ProbabilisticActor(
        module=policy_module,
        spec=env.action_spec_unbatched,
        in_keys=[("agents", "loc"), ("agents", "scale")],
        out_keys=[env.action_key],
        distribution_class=TanhNormal,
        distribution_kwargs={
            "low": env.full_action_spec_unbatched[env.action_key].space.low,
            "high": env.full_action_spec_unbatched[env.action_key].space.high,
        },
        return_log_prob=True,
    )

    share_parameters_critic = True
    mappo = True  # IPPO if False
    critic_net = MultiAgentMLP(
        n_agent_inputs=env.observation_spec["agents", "observation"].shape[-1],
        n_agent_outputs=1,  # 1 value per agent
        n_agents=env.n_agents,
        centralised=mappo,
        share_params=share_parameters_critic,
        device=device,
        depth=2,
        num_cells=num_cells,
        activation_class=torch.nn.Tanh,
    )
    critic = TensorDictModule(
        module=critic_net,
        in_keys=[("agents", "observation")],
        out_keys=[("agents", "state_value")],
    )
    print("Running policy:", policy(env.reset()))
    print("Running value:", critic(env.reset()))
    return env, policy, critic


# The tutorial's Collector(...) line warns about torchrl 0.15's InitTracker default for any env
# without an "is_init" entry (VmasEnv too); the line is kept as the tutorial has it.
@pytest.mark.filterwarnings("ignore:The env passed to Collector is missing transforms:FutureWarning")
def test_multiagent_ppo_tutorial_trains_on_swarp():
    tqdm = pytest.importorskip("tqdm").tqdm  # the torchrl extra installs it
    with set_composite_lp_aggregate(False):
        env, policy, critic = build_tutorial()

        collector = Collector(
            env,
            policy,
            device=vmas_device,
            storing_device=device,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
        )
        replay_buffer = ReplayBuffer(
            storage=LazyTensorStorage(frames_per_batch, device=device),
            sampler=SamplerWithoutReplacement(),
            batch_size=minibatch_size,
        )
        loss_module = ClipPPOLoss(
            actor_network=policy,
            critic_network=critic,
            clip_epsilon=clip_epsilon,
            entropy_coeff=entropy_eps,
            normalize_advantage=False,  # Important to avoid normalizing across the agent dimension
        )
        loss_module.set_keys(
            reward=env.reward_key,
            action=env.action_key,
            value=("agents", "state_value"),
            # These last 2 keys will be expanded to match the reward shape
            done=("agents", "done"),
            terminated=("agents", "terminated"),
        )
        loss_module.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=lmbda)
        GAE = loss_module.value_estimator
        optim = torch.optim.Adam(loss_module.parameters(), lr)
        before = [p.detach().clone() for p in loss_module.parameters()]

        pbar = tqdm(total=n_iters, desc="episode_reward_mean = 0")
        episode_reward_mean_list = []
        losses = []
        for tensordict_data in collector:
            tensordict_data.set(
                ("next", "agents", "done"),
                tensordict_data.get(("next", "done"))
                .unsqueeze(-1)
                .expand(tensordict_data.get_item_shape(("next", env.reward_key))),
            )
            tensordict_data.set(
                ("next", "agents", "terminated"),
                tensordict_data.get(("next", "terminated"))
                .unsqueeze(-1)
                .expand(tensordict_data.get_item_shape(("next", env.reward_key))),
            )
            with torch.no_grad():
                GAE(
                    tensordict_data,
                    params=loss_module.critic_network_params,
                    target_params=loss_module.target_critic_network_params,
                )
            data_view = tensordict_data.reshape(-1)
            replay_buffer.extend(data_view)

            for _ in range(num_epochs):
                for _ in range(frames_per_batch // minibatch_size):
                    subdata = replay_buffer.sample()
                    loss_vals = loss_module(subdata)
                    loss_value = loss_vals["loss_objective"] + loss_vals["loss_critic"] + loss_vals["loss_entropy"]
                    loss_value.backward()
                    torch.nn.utils.clip_grad_norm_(loss_module.parameters(), max_grad_norm)
                    optim.step()
                    optim.zero_grad()
                    losses.append(loss_value.detach())

            collector.update_policy_weights_()

            done = tensordict_data.get(("next", "agents", "done"))
            episode_reward_mean = tensordict_data.get(("next", "agents", "episode_reward"))[done].mean().item()
            episode_reward_mean_list.append(episode_reward_mean)
            pbar.set_description(f"episode_reward_mean = {episode_reward_mean}", refresh=False)
            pbar.update()
        pbar.close()
        collector.shutdown()

    # Every batch is num_vmas_envs episodes of max_steps steps, cut off (truncated) at the last one.
    assert tensordict_data.batch_size == (num_vmas_envs, max_steps)
    assert tensordict_data["next", "truncated"][:, -1].all()
    assert tensordict_data["advantage"].shape == (num_vmas_envs, max_steps, n_agents, 1)
    assert len(episode_reward_mean_list) == n_iters and np.isfinite(episode_reward_mean_list).all()
    assert len(losses) == n_iters * num_epochs * (frames_per_batch // minibatch_size)
    assert torch.isfinite(torch.stack(losses)).all()
    assert any(not torch.equal(a, b) for a, b in zip(before, loss_module.parameters(), strict=True)), "no update"
    # The sampled actions stay in the spec's box [-1, 1] (TanhNormal's low / high).
    action = tensordict_data[env.action_key]
    assert action.shape == (num_vmas_envs, max_steps, n_agents, 2) and action.abs().max() <= 1.0


def test_tutorial_render_rollout_makes_a_gif(tmp_path):
    """The tutorial's Colab "Render" route: frames of ``env.render(mode="rgb_array")`` into a GIF."""
    Image = pytest.importorskip("PIL.Image")  # the viz extra
    with set_composite_lp_aggregate(False):
        env, policy, _ = build_tutorial()

        def rendering_callback(env, td):
            env.frames.append(Image.fromarray(env.render(mode="rgb_array")))

        env.frames = []
        with torch.no_grad():
            env.rollout(
                max_steps=max_steps,
                policy=policy,
                callback=rendering_callback,
                auto_cast_to_device=True,
                break_when_any_done=False,
            )
        path = tmp_path / f"{scenario_name}.gif"
        env.frames[0].save(path, save_all=True, append_images=env.frames[1:], duration=3, loop=0)
    assert len(env.frames) == max_steps - 1  # rollout() calls back after every step but the last
    assert env.frames[0].size == (480, 480) and env.frames[0].mode == "RGB"
    with Image.open(path) as gif:
        assert gif.n_frames > 1


def test_tutorial_render_in_a_window(monkeypatch):
    """The tutorial's GUI "Render" route, ``callback=lambda env, _: env.render()`` (mode "human",
    VmasEnv's default), headless through SDL's dummy video driver."""
    pygame = pytest.importorskip("pygame", reason="a window needs the viz extra (pygame)")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    frames = []
    try:
        with set_composite_lp_aggregate(False):
            env, policy, _ = build_tutorial()
            with torch.no_grad():
                env.rollout(
                    max_steps=3,
                    policy=policy,
                    callback=lambda env, _: frames.append(env.render()),
                    auto_cast_to_device=True,
                    break_when_any_done=False,
                )
        assert len(frames) == 2 and all(f.shape == (480, 480, 3) for f in frames)
        assert pygame.display.get_surface().get_size() == (480, 480)
    finally:
        if pygame.display.get_init():
            pygame.display.quit()


# --- the VmasEnv attributes ------------------------------------------------------------------------


def test_vmas_attributes():
    sim = swarp.make("navigation", n_envs=4, device="cpu", seed=0, n_agents=3, max_steps=7)
    env = SwarpEnv(sim, layout="agents")
    names = ["agent_0", "agent_1", "agent_2"]
    assert env.n_agents == 3 and env.num_envs == 4 and env.batch_size == (4,)
    assert env.max_steps == 7 and env.scenario_name == "navigation"
    assert env.continuous_actions is True and env.categorical_actions is True
    assert env.agent_names == names and env.group_map == {"agents": names}
    assert env.agent_names_to_indices_map == {name: i for i, name in enumerate(names)}
    assert env.het_specs is False and env.het_specs_map == {"agents": False}
    assert "navigation" in SwarpEnv.available_envs and env.available_envs == swarp.scenario_names()
    # A TransformedEnv forwards them, as it does VmasEnv's.
    transformed = TransformedEnv(env, RewardSum(in_keys=[env.reward_key], out_keys=[("agents", "episode_reward")]))
    assert transformed.n_agents == 3 and transformed.num_envs == 4 and transformed.scenario_name == "navigation"
    # The flat layout has the same env-level attributes and no group.
    flat = SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu", seed=0, max_steps=None))
    assert flat.n_agents == flat.sim.n_agents and flat.num_envs == 2 and flat.max_steps is None
    assert flat.group_map is None and flat.het_specs_map == {}


def test_render_returns_an_rgb_frame_of_the_chosen_env():
    sim = swarp.make("navigation", n_envs=3, device="cpu", seed=0, n_agents=3)
    env = SwarpEnv(sim, layout="agents")
    env.reset()
    frame = env.render(mode="rgb_array")
    assert isinstance(frame, np.ndarray) and frame.shape == (480, 480, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, sim.render(env_index=0))
    assert np.array_equal(env.render(mode="rgb_array", env_index=2, agent_index_focus=None), sim.render(env_index=2))
    small = env.render(mode="rgb_array", width=64, height=48, neighbors=True)
    assert small.shape == (48, 64, 3)


def test_render_errors():
    env = SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu", seed=0), layout="agents")
    with pytest.raises(ValueError, match="render mode must be one of"):
        env.render(mode="rgb")
    with pytest.raises(ValueError, match="agent_index_focus=1 is not supported.*extent"):
        env.render(mode="rgb_array", agent_index_focus=1)
    with pytest.raises(TypeError, match="visualize_when_rgb must be a bool"):
        env.render(mode="rgb_array", visualize_when_rgb="yes")
    with pytest.raises(IndexError, match=r"env_index must be in \[0, n_envs\)"):
        env.render(mode="rgb_array", env_index=2)
    with pytest.raises(TypeError, match="unknown render option"):
        env.render(mode="rgb_array", plot_position_function=lambda pos: pos)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.render(mode="rgb_array")


def test_attributes_match_a_real_vmas_env():
    """Where the VMAS extra is installed: the tutorial's navigation env on both sides has the same
    VmasEnv attributes, the same agent grouping and spec layout (one agent group; its action is a
    bounded [n_agents, 2] box), and the same done keys up to swarp's extra ``truncated``."""
    pytest.importorskip("vmas")
    from torchrl.envs.libs.vmas import VmasEnv

    vmas_env = VmasEnv(
        scenario="navigation", num_envs=2, continuous_actions=True, max_steps=5, device="cpu", n_agents=3
    )
    env = SwarpEnv(swarp.make("navigation", n_envs=2, device="cpu", seed=0, n_agents=3, max_steps=5), layout="agents")
    for name in (
        "n_agents",
        "num_envs",
        "max_steps",
        "scenario_name",
        "continuous_actions",
        "categorical_actions",
        "group_map",
        "agent_names",
        "agent_names_to_indices_map",
        "het_specs",
        "het_specs_map",
        "action_key",
        "reward_key",
        "action_keys",
        "reward_keys",
        "batch_size",
    ):
        assert getattr(env, name) == getattr(vmas_env, name), name
    assert [*vmas_env.done_keys, "truncated"] == env.done_keys
    assert "navigation" in type(vmas_env).available_envs and "navigation" in SwarpEnv.available_envs
    ours, theirs = env.full_action_spec_unbatched[env.action_key], vmas_env.full_action_spec_unbatched[env.action_key]
    assert type(ours) is type(theirs) and ours.shape == theirs.shape
    # VmasEnv's render call gives a frame here (rendering VMAS itself needs an OpenGL display).
    frame = env.render(mode="rgb_array")
    assert frame.ndim == 3 and frame.shape[-1] == 3 and frame.dtype == np.uint8
