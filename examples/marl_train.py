"""MAPPO on swarp through TorchRL's own components: the TorchRL ecosystem route.

swarp's trainer is ``swarp.train`` (``python -m swarp.train navigation``): the same algorithm written
once in ``swarp/train/ppo.py``, with the whole iteration replayed as CUDA graphs, about 40x faster
end to end than this script at the same batch (docs/training.md). This example shows how swarp plugs
into TorchRL instead: ``SwarpEnv``, TorchRL's ``Collector``, ``ClipPPOLoss`` and GAE, for users whose
pipeline is built on TorchRL. The per-scenario task records are ``swarp.train.tasks``.

    python examples/marl_train.py                                   # navigation, GPU defaults
    python examples/marl_train.py --scenario navigation --seed 1 --max-seconds 600 --target-success 0.95
    python examples/marl_train.py --device cpu --n-envs 64 --rollout-steps 32 --total-frames 60000   # CPU smoke
    torchrun --standalone --nproc-per-node 8 examples/marl_train.py --distributed --n-envs 32768   # 8 GPUs

Any registered scenario runs (``--scenario``, one of ``swarp.scenario_names()``); what differs per
scenario (episode length, scenario options such as substeps, the success metric, the default
budget) is one ``Task`` record in ``TASKS``. A scenario without a record trains with its own
defaults and ``terminated`` as success.

The algorithm (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games"): every agent acts from its own observation with one shared Gaussian policy (tanh-squashed
into the normalized box [-1, 1], which ``SwarpEnv`` maps onto the physical action bounds); a
critic that sees every agent's observation gives per-agent values; advantages by GAE over per-agent
rewards with the shared done flags; the clipped PPO objective over a few epochs of minibatches.
Rollouts are collected by a TorchRL ``Collector`` over ``SwarpEnv(layout="agents")``, so the batch
never leaves the device.

Data-parallel (``--distributed``, launched by ``torchrun``, one process per device; docs/scaling.md):
``--n-envs`` and ``--eval-envs`` are global and every rank simulates its shard of them
(``swarp.distributed.make_shard``: the union of the shards is the single-process batch of the same
seed); advantages are normalised over the global batch; after each backward pass the gradients are
averaged over ranks (``swarp.distributed.all_reduce_gradients``), so every rank takes the update one
process would take on the concatenated minibatches, and the replicas stay identical. Rank 0 logs,
evaluates (on the gathered shards) and writes the checkpoint. Without ``--distributed`` nothing of
this runs.

Outputs, in ``runs/<scenario>__<seed>__<unix time>/``: ``metrics.jsonl`` (one row per batch, stable
names: ``charts/episodic_return``, ``charts/success_rate``, ``charts/SPS``, ``eval/success_rate``,
``losses/*``, ``perf/*``), ``checkpoint.pt`` (every ``--checkpoint-every`` batches and at the end;
``examples/marl_eval.py`` loads it) and ``learning_curve.png`` (with matplotlib).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.envs import RewardSum, TransformedEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MultiAgentMLP, ProbabilisticActor, TanhNormal
from torchrl.objectives import ClipPPOLoss, ValueEstimators
from tqdm import tqdm

import swarp
import swarp.distributed as sd
from swarp.interop.torchrl import SwarpEnv
from swarp.train.config import field_docs, parse_dataclass
from swarp.train.run import new_run_dir, plot_learning_curve
from swarp.train.tasks import TASKS, Task, get_task  # noqa: F401 (TASKS: the records, re-exported)

try:  # torchrl 0.11 to 0.14 (0.14 keeps only this name)
    from torchrl.collectors import Collector as _Collector
except ImportError:  # an older torchrl: the same collector under its former name
    from torchrl.collectors import SyncDataCollector as _Collector

if "auto_register_policy_transforms" in inspect.signature(_Collector.__init__).parameters:
    Collector = _Collector
else:

    class Collector(_Collector):
        """The collector of a torchrl without ``auto_register_policy_transforms`` (0.11), taking and
        ignoring it: such a collector never adds transforms to the env, which ``False`` asks for."""

        def __init__(self, *args, auto_register_policy_transforms: bool | None = None, **kwargs):
            super().__init__(*args, **kwargs)


GROUP = "agents"
OBS_KEY = (GROUP, "observation")
ACTION_KEY = (GROUP, "action")
REWARD_KEY = (GROUP, "reward")
EPISODE_REWARD_KEY = (GROUP, "episode_reward")
#: The policy acts in this normalized box; SwarpEnv maps it onto the physical action bounds.
ACTION_LOW, ACTION_HIGH = -1.0, 1.0
#: Evaluation cap [steps] for scenarios without a time limit.
MAX_EVAL_STEPS = 1000


# --- per-scenario task settings: swarp.train's records ---------------------------------------------

#: Default training budget [env-steps] of a task without a ``total_steps`` override.
TOTAL_FRAMES = 200_000_000


# --- arguments -------------------------------------------------------------------------------------


@dataclass
class Args:
    scenario: str = "navigation"
    """the scenario to train on (one of swarp.scenario_names())"""
    seed: int = 0
    """seed of the simulator's reset RNG and of torch"""
    device: str | None = None
    """cpu or cuda (default: cuda when available)"""
    n_envs: int = 4096
    """parallel envs of the training batch"""
    rollout_steps: int = 32
    """steps per env per collected batch (a batch holds n_envs * rollout_steps env-steps)"""
    total_frames: int | None = None
    """training budget [env-steps] (default: the task's)"""
    max_seconds: float | None = None
    """stop after this much wall-clock time [s] (the batch in flight finishes)"""
    target_success: float | None = None
    """stop once a greedy evaluation reaches this success rate (time and frames include evaluations)"""
    lr: float = 3e-4
    """Adam learning rate of actor and critic"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the budget (frames or max_seconds, whichever ends first)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip_epsilon: float = 0.1
    """PPO ratio clipping"""
    entropy_coef: float = 1e-3
    """entropy bonus weight"""
    update_epochs: int = 8
    """passes over each batch"""
    minibatches: int = 16
    """minibatches per pass"""
    max_grad_norm: float = 1.0
    """gradient clipping (global norm)"""
    hidden: int = 256
    """width of the hidden layers of actor and critic"""
    depth: int = 2
    """hidden layers of actor and critic"""
    eval_every: int = 10
    """greedy evaluation every this many batches (0: only at the end)"""
    eval_envs: int = 1024
    """envs (= episodes) of each greedy evaluation"""
    checkpoint_every: int = 50
    """write checkpoint.pt every this many batches (and always at the end)"""
    run_dir: str = "runs"
    """folder of the run folders"""
    run_name: str | None = None
    """run folder name (default: <scenario>__<seed>__<unix time>)"""
    plot: bool = True
    """save learning_curve.png (needs matplotlib)"""
    progress: bool = True
    """show a tqdm progress bar"""
    distributed: bool = False
    """data-parallel over the processes torchrun starts (one per device: NCCL on GPUs, gloo on the CPU);
    n_envs and eval_envs are then global, split over the ranks (n_envs a multiple of their number)"""


_field_docs = field_docs


def parse_args(argv=None, cls=Args, description: str | None = __doc__):
    """argparse built from a dataclass of arguments: one ``--flag`` per field, its docstring as help."""
    return parse_dataclass(argv, cls, description)


# --- environment and networks ----------------------------------------------------------------------


def make_env(scenario: str, task: Task, n_envs: int, device: str, seed: int, shard: bool = False) -> SwarpEnv:
    """The TorchRL env of a task: ``SwarpEnv`` in the agents layout with normalized actions; with
    ``shard``, over this rank's shard of ``n_envs`` envs (``swarp.distributed.make_shard``)."""
    kwargs = {k: v for k, v in task.env_kwargs().items() if k != "auto_reset"}  # TorchRL resets the envs itself
    if shard:
        sim = sd.make_shard(scenario, global_n_envs=n_envs, device=device, seed=seed, **kwargs)
    else:
        sim = swarp.make(scenario, n_envs=n_envs, device=device, seed=seed, **kwargs)
    return SwarpEnv(sim, layout="agents", action_low=ACTION_LOW, action_high=ACTION_HIGH)


def make_actor(env: SwarpEnv, hidden: int, depth: int) -> ProbabilisticActor:
    """Shared-parameter Gaussian policy: each agent's own observation -> tanh-squashed action."""
    sim = env.sim
    net = nn.Sequential(
        MultiAgentMLP(
            sim.obs_dim,
            2 * sim.act_dim,
            sim.n_agents,
            centralized=False,
            share_params=True,
            device=env.device,
            depth=depth,
            num_cells=hidden,
            activation_class=nn.Tanh,
        ),
        NormalParamExtractor(),
    )
    module = TensorDictModule(net, in_keys=[OBS_KEY], out_keys=[(GROUP, "loc"), (GROUP, "scale")])
    return ProbabilisticActor(
        module,
        in_keys=[(GROUP, "loc"), (GROUP, "scale")],
        out_keys=[ACTION_KEY],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": ACTION_LOW, "high": ACTION_HIGH},
        return_log_prob=True,
    )


def make_critic(env: SwarpEnv, hidden: int, depth: int) -> TensorDictModule:
    """Centralized critic: every agent's observation -> one value per agent."""
    sim = env.sim
    net = MultiAgentMLP(
        sim.obs_dim,
        1,
        sim.n_agents,
        centralized=True,
        share_params=False,
        device=env.device,
        depth=depth,
        num_cells=hidden,
        activation_class=nn.Tanh,
    )
    return TensorDictModule(net, in_keys=[OBS_KEY], out_keys=[(GROUP, "state_value")])


def episode_success(task: Task, next_td: TensorDict) -> torch.Tensor:
    """[...] bool success of the episodes that end at ``next_td`` (a ``"next"`` tensordict)."""
    if task.success == "terminated":
        return next_td["terminated"].squeeze(-1)
    if task.success.startswith("info:"):
        key = task.success[len("info:") :]
        value = next_td.get((GROUP, "info", key), None)
        if value is None:
            value = next_td["info", key]
        value = value.bool()
        if value.dim() == next_td.batch_dims:  # a per-env flag (body scenarios)
            return value
        return value.flatten(next_td.batch_dims).all(-1)
    raise ValueError(f"unknown success metric {task.success!r}: 'terminated' or 'info:<key>'")


# --- evaluation ------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate(env: SwarpEnv, policy, task: Task, waves: int = 1, seed: int | None = None) -> dict[str, torch.Tensor]:
    """Run ``waves`` x ``n_envs`` episodes: every env plays one episode per wave, from a full reset.

    Args:
        env: The env (reset here; with ``seed``, its reset RNG restarts from it, so two policies
            evaluated with the same seed start from the same states).
        policy: A TorchRL policy (reads ``("agents", "observation")``, writes ``("agents", "action")``).
        task: The task (episode length and success metric).
        waves: Episodes per env.

    Returns:
        ``{"success": [N] bool, "return": [N] float (mean over agents)}``, N = waves x n_envs, on
        the env's device.
    """
    sim = env.sim
    if seed is not None:
        env.set_seed(seed)
    successes, returns = [], []
    for _ in range(waves):
        td = env.reset()
        alive = torch.ones(sim.n_envs, dtype=torch.bool, device=env.device)
        success = torch.zeros_like(alive)
        episode_return = torch.zeros(sim.n_envs, dtype=sim.dtype, device=env.device)
        # Every episode ends by max_steps at the latest; steps past an env's end are not counted.
        for step in range(episode_length(env)):
            td = env.step(policy(td))
            next_td = td["next"]
            episode_return += alive * next_td[REWARD_KEY].mean(dim=(1, 2))
            done = next_td["done"].squeeze(-1)
            success |= alive & done & episode_success(task, next_td)
            alive &= ~done
            td = next_td
            if step % 10 == 9 and not alive.any():  # a host sync, so only every 10 steps
                break
        successes.append(success)
        returns.append(episode_return)
    return {"success": torch.cat(successes), "return": torch.cat(returns)}


def greedy(actor: ProbabilisticActor):
    """The actor's deterministic action (tanh of the Gaussian mean)."""

    def act(td: TensorDict) -> TensorDict:
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return actor(td)

    return act


# --- training --------------------------------------------------------------------------------------


def save_checkpoint(path: Path, args: Args, task: Task, env: SwarpEnv, actor, critic, frames: int, seconds: float):
    torch.save(
        {
            "args": dataclasses.asdict(args),
            "task": dataclasses.asdict(task),
            "obs_dim": env.sim.obs_dim,
            "act_dim": env.sim.act_dim,
            "n_agents": env.sim.n_agents,
            "actor": actor.state_dict(),
            "critic": critic.state_dict(),
            "frames": frames,
            "seconds": seconds,
        },
        path,
    )


def make_loss(actor: ProbabilisticActor, critic: TensorDictModule, args: Args) -> ClipPPOLoss:
    """The clipped PPO loss over per-agent rewards, with GAE as its value estimator."""
    loss_module = ClipPPOLoss(
        actor_network=actor,
        critic_network=critic,
        clip_epsilon=args.clip_epsilon,
        entropy_coeff=args.entropy_coef,
        normalize_advantage=False,  # normalized over the whole batch in compute_advantages
    )
    loss_module.set_keys(
        reward=REWARD_KEY,
        action=ACTION_KEY,
        value=(GROUP, "state_value"),
        sample_log_prob=(GROUP, "action_log_prob"),
        # GAE reads the done flags per agent: the env's (an alive mask's), or the shared ones
        # expanded in compute_advantages.
        done=(GROUP, "done"),
        terminated=(GROUP, "terminated"),
    )
    loss_module.make_value_estimator(ValueEstimators.GAE, gamma=args.gamma, lmbda=args.gae_lambda)
    return loss_module


@torch.no_grad()
def compute_advantages(loss_module: ClipPPOLoss, batch: TensorDict) -> None:
    """GAE advantages of a collected batch [n_envs, steps], written to ``batch["advantage"]`` and
    normalized over the whole batch (over every rank's batch under ``--distributed``)."""
    next_td = batch["next"]
    agent_shape = batch.get_item_shape(("next", *REWARD_KEY))
    for name in ("done", "terminated"):
        if (GROUP, name) not in next_td.keys(True):  # an env with an alive mask has them per agent
            next_td.set((GROUP, name), next_td[name].unsqueeze(-1).expand(agent_shape))
    loss_module.value_estimator(
        batch, params=loss_module.critic_network_params, target_params=loss_module.target_critic_network_params
    )
    advantage = batch["advantage"]
    mean, std = sd.global_mean_std(advantage)
    batch["advantage"] = (advantage - mean) / (std + 1e-8)


def gradient_step(loss_module: ClipPPOLoss, optimizer: torch.optim.Optimizer, minibatch, max_grad_norm: float):
    """One PPO gradient step on ``minibatch``; returns the loss tensordict.

    Under ``--distributed`` every rank passes its own minibatch and the gradients are averaged over
    ranks before clipping: the step is the one a single process takes on the concatenated
    minibatches (the losses are means over equally sized minibatches), identical on every rank.
    Without a process group the all-reduce does nothing.
    """
    losses = loss_module(minibatch)
    loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    sd.all_reduce_gradients(loss_module.parameters())
    nn.utils.clip_grad_norm_(loss_module.parameters(), max_grad_norm)
    optimizer.step()
    return losses


def train(args: Args) -> dict:
    """Train; returns the final metrics row plus ``run_dir`` and ``checkpoint`` paths."""
    task = get_task(args.scenario)
    if args.distributed:
        device = sd.init(device=args.device)  # joins torchrun's process group; cuda:LOCAL_RANK or cpu
        if args.n_envs % sd.get_world_size():
            raise ValueError(f"--n-envs ({args.n_envs}) must be a multiple of the {sd.get_world_size()} processes")
    else:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    world, rank = sd.get_world_size(), sd.get_rank()  # 1 and 0 without --distributed
    lead = rank == 0
    frames_per_batch = args.n_envs * args.rollout_steps  # global; each rank collects 1/world of it
    # Whole batches: the collector cannot stop mid-batch.
    budget = args.total_frames or task.total_steps or TOTAL_FRAMES
    total_frames = math.ceil(budget / frames_per_batch) * frames_per_batch
    run_name = args.run_name or f"{args.scenario}__{args.seed}__{int(time.time())}"
    # A folder of its own (``-2``, ``-3``... where the name is taken); other ranks write nothing.
    run_dir = new_run_dir(Path(args.run_dir), run_name) if lead else Path(args.run_dir) / run_name
    torch.manual_seed(args.seed)

    base_env = make_env(args.scenario, task, args.n_envs, device, args.seed, shard=args.distributed)
    env = TransformedEnv(base_env, RewardSum(in_keys=[REWARD_KEY], out_keys=[EPISODE_REWARD_KEY]))
    eval_env = make_env(args.scenario, task, args.eval_envs, device, args.seed + 1, shard=args.distributed)
    actor = make_actor(base_env, args.hidden, args.depth)
    critic = make_critic(base_env, args.hidden, args.depth)

    loss_module = make_loss(actor, critic, args)
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=args.lr)
    if args.distributed:
        sd.broadcast_parameters(loss_module)  # identical replicas (same seed already; this makes it sure)
        torch.manual_seed(sd.rank_seed(args.seed))  # each rank samples its own actions and minibatches

    simulator_seconds_per_step = time_simulator(base_env.sim, device)
    collector = Collector(
        env,
        actor,
        frames_per_batch=frames_per_batch // world,
        total_frames=total_frames // world,
        device=device,
        storing_device=device,
        auto_register_policy_transforms=False,
    )

    rows: list[dict] = []
    episode_window: deque[torch.Tensor] = deque(maxlen=max(1, math.ceil(episode_length(base_env) / args.rollout_steps)))
    frames = 0
    start = time.perf_counter()
    bar = tqdm(
        total=total_frames, unit="frames", unit_scale=True, disable=not (args.progress and lead), dynamic_ncols=True
    )
    collect_start = time.perf_counter()
    for batch_index, batch in enumerate(collector, start=1):
        collect_seconds = time.perf_counter() - collect_start
        update_start = time.perf_counter()
        if args.anneal_lr:
            progress = frames / total_frames
            if args.max_seconds:
                progress = max(progress, (update_start - start) / args.max_seconds)
            optimizer.param_groups[0]["lr"] = args.lr * max(0.0, 1.0 - progress)
        batch_frames = batch.numel() * world  # every rank collects an equal share
        frames += batch_frames
        row: dict = {"frames": frames, "batch": batch_index, "charts/learning_rate": optimizer.param_groups[0]["lr"]}
        check_health(base_env.sim, batch_index)
        row["health/invalid_actions"] = int(base_env.sim.invalid_actions())

        # Statistics of the episodes that ended in the last episode length's worth of batches: every
        # env finishes at least one in that window, so the synchronized first episodes (which all
        # time out in the same batch) do not swing the curve. Host reads: logging only.
        next_td = batch["next"]
        done = next_td["done"].squeeze(-1)
        episode_window.append(
            sd.all_reduce(  # summed over ranks (no-op in one process)
                torch.stack(
                    [
                        done.sum(),
                        (episode_success(task, next_td) & done).sum(),
                        (next_td[EPISODE_REWARD_KEY].mean(dim=(-2, -1)) * done).sum(),
                    ]
                ).double()
            )
        )
        n_done, n_success, return_sum = torch.stack(list(episode_window)).sum(0).tolist()
        if n_done:
            row["charts/episodic_return"] = return_sum / n_done
            row["charts/success_rate"] = n_success / n_done
            row["charts/episodes"] = int(n_done)

        # --- MAPPO update ---
        compute_advantages(loss_module, batch)
        flat = batch.reshape(-1)
        minibatch_size = max(1, flat.shape[0] // args.minibatches)
        stats: dict[str, list[torch.Tensor]] = {"policy_loss": [], "value_loss": [], "entropy": []}
        for _ in range(args.update_epochs):
            order = torch.randperm(flat.shape[0], device=flat.device)
            for i in range(args.minibatches):
                minibatch = flat[order[i * minibatch_size : (i + 1) * minibatch_size]]
                losses = gradient_step(loss_module, optimizer, minibatch, args.max_grad_norm)
                stats["policy_loss"].append(losses["loss_objective"].detach())
                stats["value_loss"].append(losses["loss_critic"].detach())
                stats["entropy"].append(losses["entropy"].detach())
        row.update(sd.reduce_metrics({f"losses/{k}": torch.stack(v).mean() for k, v in stats.items()}, "mean"))
        update_seconds = time.perf_counter() - update_start

        elapsed = time.perf_counter() - start
        batch_seconds = collect_seconds + update_seconds
        row.update(
            {
                "time": elapsed,
                "charts/SPS": batch_frames / batch_seconds,
                "perf/collect_SPS": batch_frames / collect_seconds,
                "perf/collect_seconds": collect_seconds,
                "perf/update_seconds": update_seconds,
                # Estimate: the simulator's own step time (timed alone at this batch size) x steps.
                "perf/simulator_share": min(1.0, args.rollout_steps * simulator_seconds_per_step / batch_seconds),
            }
        )
        last = collector_finished(frames, total_frames, elapsed, args.max_seconds)
        # Ranks' clocks differ: stop together, when any rank's budget is spent.
        last = sd.reduce_metrics({"last": last}, "max")["last"] > 0
        if (args.eval_every and batch_index % args.eval_every == 0) or last:
            result = evaluate(eval_env, greedy(actor), task, seed=args.seed + 1)
            result = {k: sd.all_gather_envs(v) for k, v in result.items()}  # every rank's shard, in env order
            row["eval/success_rate"] = float(result["success"].float().mean())
            row["eval/episodic_return"] = float(result["return"].mean())
            if args.target_success is not None and row["eval/success_rate"] >= args.target_success:
                row["target_reached"] = last = True  # the checkpoint below is this policy
        rows.append(row)
        if lead:
            with open(run_dir / "metrics.jsonl", "a") as log:
                log.write(json.dumps(row) + "\n")
        if lead and (last or batch_index % args.checkpoint_every == 0):
            save_checkpoint(run_dir / "checkpoint.pt", args, task, base_env, actor, critic, frames, elapsed)
        bar.update(batch_frames)
        bar.set_postfix(
            {
                k: f"{row[v]:.3g}"
                for k, v in (("ret", "charts/episodic_return"), ("succ", "charts/success_rate"))
                if v in row
            }
            | {"SPS": f"{row['charts/SPS']:.3g}"}
        )
        if last:
            break
        collect_start = time.perf_counter()
    bar.close()
    collector.shutdown()
    if args.distributed:
        sd.shutdown()
    if args.plot and lead:
        plot_learning_curve(rows, run_dir / "learning_curve.png", eval_key="eval/success_rate")
    final = dict(rows[-1])
    final.update(run_dir=str(run_dir), checkpoint=str(run_dir / "checkpoint.pt"))
    if args.distributed:
        final.update(rank=rank, world_size=world)
    return final


def check_health(sim: swarp.Environment, batch_index: int) -> None:
    """Stop training on a simulation that went non-finite (the state-health flag, read once per
    batch): a NaN state would otherwise train the policy on garbage without a trace."""
    if bool(sim.non_finite()):
        envs = sim.non_finite_envs().tolist()
        raise RuntimeError(
            f"batch {batch_index}: a state, observation or reward went non-finite in envs {envs[:16]}"
            f"{' ...' if len(envs) > 16 else ''} (global index: + env_offset {sim.env_offset})"
        )


def episode_length(env: SwarpEnv) -> int:
    """The time limit of the env's episodes [steps] (``MAX_EVAL_STEPS`` without one)."""
    return env.sim.max_steps or MAX_EVAL_STEPS


def collector_finished(frames: int, total_frames: int, elapsed: float, max_seconds: float | None) -> bool:
    return frames >= total_frames or (max_seconds is not None and elapsed >= max_seconds)


@torch.no_grad()
def time_simulator(sim: swarp.Environment, device: str, steps: int = 20) -> float:
    """Seconds per ``sim.step`` at the training batch size, random actions (state restored after)."""
    snapshot = sim.get_state()
    low, high = (b.to(sim.torch_device) for b in sim.action_bounds)
    actions = low + (high - low) * torch.rand(sim.n_envs, sim.n_agents, sim.act_dim, device=sim.torch_device)
    sim.step(actions)  # warm-up (compiles or captures on first use)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        sim.step(actions)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / steps
    sim.set_state(snapshot)
    return seconds


def main(argv=None) -> dict:
    args = parse_args(argv)
    final = train(args)
    if final.get("rank", 0) == 0:
        print(
            f"{args.scenario}: {final['frames']:,} env-steps in {final['time']:.1f} s; greedy success "
            f"{final.get('eval/success_rate', math.nan):.3f}, checkpoint {final['checkpoint']}"
        )
    return final


if __name__ == "__main__":
    main()
