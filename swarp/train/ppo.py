"""MAPPO and IPPO on a swarp scenario, every stage of the iteration on the device.

The algorithm (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games"; IPPO: de Witt et al. 2020): every agent acts from its own observation with one shared
Gaussian policy, squashed by tanh into the scenario's physical action box; the critic gives one value
per agent, from every agent's observation (MAPPO) or from the agent's own (IPPO); advantages by GAE
over per-agent rewards with the env's shared done flags, bootstrapping from the value of
``final_obs`` where an episode was truncated and from nothing where it terminated; the clipped PPO
objective over a few epochs of minibatches of whole env-steps (all agents of an env together).
With a discrete or multi-discrete action space (``TrainConfig.action_space``) the shared policy is
categorical heads over the env's indices instead (``networks.CategoricalActor``), sampled by
Gumbel-max from the same per-run generators; the rest of the iteration is the same. A scenario of
agent groups gets one policy and one critic per group (``swarp.train.groups``: each reads its own
observation columns and acts in its own space); the buffers, advantages and losses stay per agent.

One iteration is three stages over preallocated buffers: ``collect`` (T steps of policy + env.step,
auto-reset on), ``advantages`` and ``update``. On CUDA each stage is replayed as one CUDA graph
after a warm-up iteration (``swarp.train.graphs``), so an iteration is three graph launches and a
read of the metrics every ``log_every`` iterations; on the CPU the same code runs eagerly.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
from torch import nn

import swarp.distributed as sd
from swarp.env.environment import Environment
from swarp.train.action_spaces import flat_reward, space_of, step_actions
from swarp.train.buffers import Buffers, StageClock
from swarp.train.config import TrainConfig
from swarp.train.graphs import Graphed
from swarp.train.groups import (
    GroupedPolicy,
    GroupNets,
    action_shape,
    actions_text,
    build_networks,
    group_records,
    modules,
    values,
)
from swarp.train.networks import Actor, CategoricalActor, Critic, Normalizer, Policy, take_run
from swarp.train.tasks import Task, episode_success

#: Columns of the device-side episode statistics: episodes ended, of them successful, their return sum.
EPISODES, SUCCESSES, RETURN_SUM = range(3)
#: Columns of the device-side update statistics (sums over minibatch steps).
LOSS_NAMES = ("policy_loss", "value_loss", "approx_kl", "clip_fraction")
#: Columns of ``Trainer.health`` (raised inside the captured update), then of the env's own flags
#: that ``health_flags`` appends: what went non-finite.
UPDATE_CHECKS = ("loss", "gradient norm", "parameters")
HEALTH_CHECKS = (*UPDATE_CHECKS, "environment state, observation or reward", "actions")


@dataclass
class Trainer:
    """K independent PPO-family runs trained as one computation, run k on ``envs[k]`` (auto-reset on)
    with its own seed, initial weights, sampling noise and minibatch order: each run is the run that
    ``K = 1`` would train alone with its seed. Build it with ``Trainer.build``; ``iterate()`` runs one
    iteration of every run; ``policy(k)`` is run k's greedy policy."""

    envs: list[Environment]
    task: Task
    config: TrainConfig
    seeds: list[int]
    normalizer: Normalizer | nn.ModuleDict  # the one group's, or a ModuleDict by group (swarp.train.groups)
    actor: Actor | CategoricalActor | nn.ModuleDict
    critic: Critic | nn.ModuleDict
    nets: list[GroupNets]  # each group's networks (the modules above), in agent order
    optimizer: torch.optim.Optimizer
    generators: list[torch.Generator]  # run k's sampling noise and minibatch orders, on the device
    buffers: Buffers
    episode_return: torch.Tensor  # [K, E] running return of each env's current episode (mean over agents)
    episode_stats: torch.Tensor  # [K, 3] float64, see EPISODES...; zeroed at each read
    update_stats: torch.Tensor  # [K, 4] float64 sums, see LOSS_NAMES; zeroed at each update
    return_state: torch.Tensor  # [K, E, A] running discounted return (norm_returns)
    return_var: Normalizer  # running variance of return_state (norm_returns)
    health: torch.Tensor  # [K, len(UPDATE_CHECKS)] bool, sticky: a non-finite loss, gradient norm or parameter seen
    stages: dict[str, Graphed] = field(default_factory=dict)
    run_streams: list = field(default_factory=list)  # CUDA, K > 1: run k's env steps on stream k, concurrently

    @classmethod
    def build(cls, envs: list[Environment], task: Task, config: TrainConfig, seeds: list[int]) -> Trainer:
        """Networks, optimizer and buffers for ``envs`` (one per run, alike but for their seeds).

        Under ``torch.distributed`` (``envs`` this rank's shards, ``swarp.distributed.make_shard``),
        every rank starts from the same weights (drawn from the seeds), draws its own noise and
        minibatch orders (``rank_seed``), and averages gradients and statistics over ranks."""
        if len(envs) != len(seeds) or not envs:
            raise ValueError(f"one env per seed: {len(envs)} envs, {len(seeds)} seeds")
        config.validate()
        env = envs[0]
        for other in envs:
            if not other.auto_reset:
                raise ValueError("the trainer needs Environments with auto_reset=True")
            shape = (other.n_envs, other.n_agents, other.obs_dim, other.groups, other.torch_device)
            if shape != (env.n_envs, env.n_agents, env.obs_dim, env.groups, env.torch_device):
                raise ValueError("the runs' envs must agree in n_envs, n_agents, obs_dim, agent groups (their action "
                                 "spaces) and device")  # fmt: skip
        for group in env.groups:
            space = group.action_space
            if space != space_of(config, space.physical_dim, group.name, space.comm_dim):
                where = f"group {group.name!r} of the envs takes" if env.grouped else "the envs take"
                raise ValueError(f"{where} {space.kind} actions (nvec {space.nvec}), the config asks for "
                                 f"{config.action_space} (action_nvec {config.action_nvec}): make the envs with "
                                 "swarp.make(..., action_space=..., action_nvec=...) as the config says")  # fmt: skip
        dev, K = env.torch_device, len(envs)
        A, obs_dim = env.n_agents, env.obs_dim
        low, high = (b.to(torch.float32).cpu() for b in env.action_bounds)
        init = [torch.Generator().manual_seed(int(s)) for s in seeds]  # CPU draws: the same on every device
        nets = build_networks(K, env.groups, low, high, config, init)
        for net in nets:
            net.normalizer, net.actor, net.critic = net.normalizer.to(dev), net.actor.to(dev), net.critic.to(dev)
        normalizer, actor, critic = (modules(nets, name) for name in ("normalizer", "actor", "critic"))
        cuda = dev.type == "cuda"
        params = [*actor.parameters(), *critic.parameters()]
        optimizer = torch.optim.Adam(params, lr=config.lr, eps=1e-5, capturable=cuda, fused=cuda or None)
        T, E = config.rollout_steps, env.n_envs
        masked = env.alive is not None  # the agents' alive mask: losses over the agents that acted
        trainer = cls(
            envs=envs,
            task=task,
            config=config,
            seeds=[int(s) for s in seeds],
            normalizer=normalizer,
            actor=actor,
            critic=critic,
            nets=nets,
            optimizer=optimizer,
            generators=[torch.Generator(device=dev).manual_seed(_noise_seed(int(s))) for s in seeds],
            buffers=Buffers.allocate(K, T, E, A, obs_dim, [action_shape(net) for net in nets], dev, masked),
            episode_return=torch.zeros(K, E, device=dev),
            episode_stats=torch.zeros(K, 3, dtype=torch.float64, device=dev),
            update_stats=torch.zeros(K, len(LOSS_NAMES), dtype=torch.float64, device=dev),
            return_state=torch.zeros(K, E, A, device=dev),
            return_var=Normalizer(K, 1, enabled=config.norm_returns).to(dev),
            health=torch.zeros(K, len(UPDATE_CHECKS), dtype=torch.bool, device=dev),
        )
        for run_env, seed in zip(envs, seeds, strict=True):
            run_env.reset(seed=int(seed))
        alive = None if envs[0].alive is None else torch.stack([env.alive for env in envs])
        trainer.update_normalizers(trainer.observations(), alive)  # the first rollout: standardised too
        if cuda and K > 1:
            trainer.run_streams = [torch.cuda.Stream(dev) for _ in range(K)]
        pool = torch.cuda.graph_pool_handle() if cuda else None
        for name, fn in (("collect", trainer.collect), ("advantages", trainer.advantages), ("update", trainer.update)):
            trainer.stages[name] = Graphed(fn, dev, enabled=config.capture, warmup=1, pool=pool,
                                           generators=trainer.generators)  # fmt: skip
        return trainer

    @property
    def n_runs(self) -> int:
        return len(self.envs)

    @property
    def discrete(self) -> bool:
        """Whether every group's policy is categorical (the envs take indices)."""
        return all(net.discrete for net in self.nets)

    @property
    def grouped(self) -> bool:
        """Whether the agents act in several groups, each with its own networks (``swarp.train.groups``)."""
        return len(self.nets) > 1

    def normalized(self, obs: torch.Tensor) -> list[torch.Tensor]:
        """Each group's normalized observations [K, ..., A_g, obs_dim_g] of ``obs`` [K, ..., A, O]."""
        return [net.normalizer(net.view(obs)) for net in self.nets]

    def update_normalizers(self, obs: torch.Tensor, acting: torch.Tensor | None = None) -> None:
        """Fold ``obs`` [K, ..., A, O] into each group's observation statistics (its rows and columns),
        with ``acting`` [K, ..., A] bool (the alive mask) only the rows of agents that acted."""
        for net in self.nets:
            net.normalizer.update(net.view(obs), None if acting is None else net.rows(acting))

    def observations(self) -> torch.Tensor:
        """[K, E, A, O] float32: every run's current observations (a copy)."""
        return torch.stack([env.obs for env in self.envs]).float()

    def policy(self, k: int = 0) -> Policy | GroupedPolicy:
        """Run ``k``'s greedy policy (a copy of its current parameters; by group where ``grouped``)."""
        if self.grouped:
            return GroupedPolicy(take_run(self.normalizer, k), take_run(self.actor, k), self.envs[k].groups)
        return Policy(take_run(self.normalizer, k), take_run(self.actor, k))

    def noise(self, like: torch.Tensor) -> torch.Tensor:
        """Standard normal draws shaped like ``like`` [K, ...], run k's from its own generator."""
        return torch.stack([torch.randn(like.shape[1:], generator=g, device=like.device) for g in self.generators])

    def uniform(self, like: torch.Tensor) -> torch.Tensor:
        """Uniform [0, 1) float32 draws shaped like ``like`` [K, ...], run k's from its own generator."""
        return torch.stack([torch.rand(like.shape[1:], generator=g, device=like.device) for g in self.generators])

    # --- 1. collect: T steps of the policy in the env --------------------------------------------

    @torch.no_grad()
    def collect(self) -> None:
        b = self.buffers
        for t in range(self.config.rollout_steps):
            obs = self.observations()
            b.obs[:, t].copy_(obs)
            xs = self.normalized(obs)
            actions, log_probs = [], []
            for net, x, raw in zip(self.nets, xs, b.raw_actions, strict=True):
                mean = net.actor(x)  # discrete: the logits
                if net.discrete:
                    chosen = net.actor.sample(mean, self.uniform(mean))  # [K, E, A_g, width] int64
                    raw[:, t].copy_(chosen)
                    log_probs.append(net.actor.log_prob(chosen, mean))
                    actions.append(chosen)
                else:
                    u = mean + net.actor.std(mean) * self.noise(mean)
                    raw[:, t].copy_(u)
                    log_probs.append(net.actor.log_prob(u, mean))
                    actions.append(net.actor.squash(u))
            b.log_prob[:, t].copy_(log_probs[0] if len(log_probs) == 1 else torch.cat(log_probs, dim=-1))
            b.value[:, t].copy_(values(self.nets, xs))
            main = torch.cuda.current_stream() if self.run_streams else None
            for k, env in enumerate(self.envs):
                if self.grouped:
                    run_actions = {net.group.name: a[k] for net, a in zip(self.nets, actions, strict=True)}
                else:
                    run_actions = actions[0][k]
                with _on_stream(self.run_streams[k] if main else None, main):
                    self.step_run(k, t, env, step_actions(env, run_actions))
            for stream in self.run_streams:
                main.wait_stream(stream)

    def step_run(self, k: int, t: int, env: Environment, actions) -> None:
        """Step run ``k``'s env with ``actions`` as ``env.step`` takes them ([E, A, U] physical; discrete:
        [E, A, width] int64 indices; a grouped env: ``{group: actions}``) and store step ``t`` of its
        transition (a grouped env's rewards and final observations joined into the flat buffers)."""
        b = self.buffers
        if b.acting is not None:
            b.acting[k, t].copy_(env.alive)  # the agents this step acts for (swarp.runtime.alive)
        _, reward, terminated, truncated, info = env.step(actions)
        reward = flat_reward(reward)
        b.reward[k, t].copy_(reward)
        b.terminated[k, t].copy_(terminated)
        b.truncated[k, t].copy_(truncated)
        if self.grouped:
            for net in self.nets:
                net.view(b.final_obs[k, t]).copy_(info["final_obs"][net.group.name])
        else:
            b.final_obs[k, t].copy_(info["final_obs"])
        done = terminated | truncated
        if b.left is not None:  # left within an episode that goes on (an ended one restarted every agent)
            b.left[k, t].copy_(b.acting[k, t] & ~env.alive & ~done.unsqueeze(-1))
        success = episode_success(self.task, terminated, info) & done
        self.episode_return[k].add_(reward.mean(-1))
        ended = torch.stack([done.sum(), success.sum(), (self.episode_return[k] * done).sum()])
        self.episode_stats[k].add_(ended.double())
        self.episode_return[k].masked_fill_(done, 0.0)

    # --- 2. advantages: GAE over the buffers -----------------------------------------------------

    @torch.no_grad()
    def advantages(self) -> None:
        cfg, b = self.config, self.buffers
        reward = b.reward
        done = (b.terminated | b.truncated).unsqueeze(-1)  # [K, T, E, 1]
        if cfg.norm_returns:
            returns = []
            for t in range(cfg.rollout_steps):
                self.return_state.mul_(cfg.gamma).add_(reward[:, t])
                returns.append(self.return_state.clone())
                self.return_state.masked_fill_(done[:, t], 0.0)
            self.return_var.update(torch.stack(returns, 1).unsqueeze(-1))
            reward = reward * torch.rsqrt(self.return_var.var + 1e-8).view(-1, 1, 1, 1)
        # The value after step t: the next step's where the episode goes on, the final
        # observation's where it was cut short (truncated), zero where it terminated.
        last_value = values(self.nets, self.normalized(self.observations()))
        following = torch.cat([b.value[:, 1:], last_value.unsqueeze(1)], dim=1)
        final_value = values(self.nets, self.normalized(b.final_obs))
        next_value = torch.where(done, final_value, following) * (~b.terminated).unsqueeze(-1)
        carry = (~done) * (cfg.gamma * cfg.gae_lambda)
        if b.left is not None:  # an agent that left ends its own episode: no value after, nothing carried back
            next_value, carry = next_value * ~b.left, carry * ~b.left
        delta = reward + cfg.gamma * next_value - b.value
        advantage = torch.zeros_like(last_value)
        for t in reversed(range(cfg.rollout_steps)):
            advantage = delta[:, t] + carry[:, t] * advantage
            b.advantage[:, t].copy_(advantage)
        torch.add(b.advantage, b.value, out=b.returns)

    # --- 3. update: epochs of clipped-PPO minibatch steps ------------------------------------------

    def update(self) -> None:
        cfg, b = self.config, self.buffers
        K, n, A = self.n_runs, cfg.rollout_steps * self.envs[0].n_envs, self.envs[0].n_agents
        obs = b.obs.view(K, n, A, -1)
        raws = [raw.view(K, n, raw.shape[3], -1) for raw in b.raw_actions]
        old_log_prob, returns = b.log_prob.view(K, n, A), b.returns.view(K, n, A)
        advantage = b.advantage.view(K, n, A)
        # With the alive mask every mean is over the agents that acted (``agent_mean``): the others' zero
        # rows and rewards are no samples of the policy.
        weight = None if b.acting is None else b.acting.view(K, n, A).to(advantage.dtype)
        mean, std = sd.global_mean_std(advantage, dim=(1, 2), weight=weight)  # [K, 1, 1]
        advantage = (advantage - mean) / (std + 1e-8)  # per run, over every rank's batch
        self.update_stats.zero_()
        size = n // cfg.minibatches
        runs = torch.arange(K, device=obs.device).unsqueeze(1)
        for _ in range(cfg.epochs):
            draws = torch.stack([torch.rand(n, generator=g, device=obs.device) for g in self.generators])
            order = torch.argsort(draws, dim=1)  # [K, n]: a permutation per run, drawn on the device
            for i in range(cfg.minibatches):
                index = (runs, order[:, i * size : (i + 1) * size])
                self.minibatch_step(obs[index], [raw[index] for raw in raws], old_log_prob[index], advantage[index],
                                    returns[index], None if weight is None else weight[index])  # fmt: skip
        self.update_normalizers(b.obs, b.acting)  # after the update: it used the statistics the rollout used
        with torch.no_grad():  # one reduction per parameter tensor an iteration
            largest = torch.stack([p.detach().abs().flatten(1).amax(1) for p in self.parameters()]).amax(0)
            self.health[:, 2] |= ~torch.isfinite(largest)

    def minibatch_step(self, obs, raws, old_log_prob, advantage, returns, weight=None) -> None:
        """One gradient step of every run on its minibatch ([K, M, A, ...] each; ``raws``: each group's
        [K, M, A_g, U_g]). The losses are means over every agent of every group: a group weighs by
        its agent count (docs/training.md); with ``weight`` ([K, M, A] 1/0: the agents that acted, the
        alive mask) over the agents that acted only."""
        cfg = self.config
        xs = self.normalized(obs)
        with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            means, value = [net.actor(x) for net, x in zip(self.nets, xs, strict=True)], values(self.nets, xs)
        log_probs = [net.actor.log_prob(raw, mean.float())
                     for net, raw, mean in zip(self.nets, raws, means, strict=True)]  # fmt: skip
        log_prob = log_probs[0] if len(log_probs) == 1 else torch.cat(log_probs, dim=-1)  # [K, M, A]
        log_ratio = log_prob - old_log_prob
        ratio = log_ratio.exp()
        clipped = ratio.clamp(1.0 - cfg.clip_coef, 1.0 + cfg.clip_coef)
        policy_loss = -agent_mean(torch.minimum(ratio * advantage, clipped * advantage), weight)  # [K]
        value_loss = 0.5 * agent_mean((value.float() - returns).square(), weight)  # [K]
        loss = policy_loss + cfg.vf_coef * value_loss
        if cfg.ent_coef:
            loss = loss - cfg.ent_coef * self.entropy(means, weight)
        self.health[:, 0] |= ~torch.isfinite(loss.detach())
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # runs share no parameter: each run's gradient is its own loss's
        sd.all_reduce_gradients(self.parameters())  # data-parallel: the mean over ranks (no-op alone)
        self.clip_gradients()
        self.optimizer.step()
        with torch.no_grad():
            approx_kl = agent_mean((ratio - 1.0) - log_ratio, weight)
            clip_fraction = agent_mean(((ratio - 1.0).abs() > cfg.clip_coef).float(), weight)
            stats = torch.stack([policy_loss, value_loss, approx_kl, clip_fraction], dim=1)
            self.update_stats.add_(stats.detach().double())

    def entropy(self, means: list[torch.Tensor], weight: torch.Tensor | None = None) -> torch.Tensor:
        """[K] the policies' entropy bonus of each group's actor outputs ``means`` ([K, M, A_g, ...]):
        the categoricals' exact entropy, or the squashed Gaussian's at reparameterized samples (run
        k's noise); with groups, their mean weighted by agent count (the mean over every agent);
        with ``weight`` ([K, M, A]: the agents that acted), the mean over those agents."""
        if weight is not None:
            per_agent = [
                net.actor.agent_entropy(mean.float()) if net.discrete
                else net.actor.agent_entropy(mean.float(), self.noise(mean))
                for net, mean in zip(self.nets, means, strict=True)
            ]  # fmt: skip
            return agent_mean(torch.cat(per_agent, dim=-1), weight)
        parts = []
        for net, mean in zip(self.nets, means, strict=True):
            if net.discrete:
                parts.append(net.actor.entropy(mean.float()))
            else:
                parts.append(net.actor.squashed_entropy(mean.float(), self.noise(mean)))
        if len(parts) == 1:
            return parts[0]
        n_agents = self.envs[0].n_agents
        return sum(part * (net.group.n_agents / n_agents) for net, part in zip(self.nets, parts, strict=True))

    def parameters(self) -> list[nn.Parameter]:
        """Every trained parameter (actor, then critic; with groups every group's actor, then every
        group's critic), each [K, ...]."""
        return [*self.actor.parameters(), *self.critic.parameters()]

    def clip_gradients(self) -> None:
        """Scale each run's gradient to global norm <= ``max_grad_norm`` (``clip_grad_norm_``, per run)."""
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])  # [P, K]
        total = torch.linalg.vector_norm(norms, dim=0)  # [K]
        self.health[:, 1] |= ~torch.isfinite(total)
        scale = (self.config.max_grad_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))

    # --- the iteration ---------------------------------------------------------------------------

    def iterate(self, clock: StageClock | None = None) -> None:
        """One iteration of every run: collect, advantages, update (graph replays after the warm-up)."""
        for name in ("collect", "advantages", "update"):
            if clock is not None:
                clock.mark(name)
            self.stages[name]()
        if clock is not None:
            clock.mark("end")

    def read_metrics(self) -> list[dict[str, float]]:
        """Per run: the episode statistics since the last read and the last update's mean losses (one
        host sync); zeroes the episode statistics."""
        episode_stats = sd.all_reduce(self.episode_stats).tolist()  # summed over ranks
        losses = (sd.all_reduce(self.update_stats, "mean") / (self.config.epochs * self.config.minibatches)).tolist()
        log_std = {net.group.name: net.actor.log_std.detach().mean(1).tolist() for net in self.nets if not net.discrete}
        self.episode_stats.zero_()
        rows = []
        for k in range(self.n_runs):
            episodes, successes, return_sum = episode_stats[k]
            row = {f"losses/{name}": v for name, v in zip(LOSS_NAMES, losses[k], strict=True)}
            if episodes:
                row.update(
                    {
                        "charts/episodes": int(episodes),
                        "charts/success_rate": successes / episodes,
                        "charts/episodic_return": return_sum / episodes,
                    }
                )
            for name, stds in log_std.items():  # a group's under charts/log_std/<group>
                row["charts/log_std" + (f"/{name}" if self.grouped else "")] = stds[k]
            rows.append(row)
        return rows

    def capture_seconds(self) -> float:
        """Wall time spent capturing the stages' graphs [s]."""
        return sum(stage.capture_seconds for stage in self.stages.values())

    def health_flags(self) -> torch.Tensor:
        """[K, len(HEALTH_CHECKS)] bool device tensor: per run, which checks have failed so far (the
        update's sticky flags, then the env's ``non_finite()`` and ``invalid_actions()``). A few
        device ops, no host sync; under ``torch.distributed`` the ranks' flags are or-ed (a collective)."""
        env_flags = torch.stack([torch.stack([env.non_finite(), env.invalid_actions()]) for env in self.envs])
        flags = torch.cat([self.health, env_flags.to(self.health.device)], dim=1)
        return sd.all_reduce(flags.int(), "max").bool() if sd.is_distributed() else flags

    # --- a run's state, to resume it ---------------------------------------------------------------

    def run_networks(self, k: int) -> dict[str, dict[str, torch.Tensor]]:
        """Run ``k``'s networks as CPU ``state_dict``s: ``normalizer``, ``actor``, ``critic`` (each [1, ...])."""
        return {name: _cpu_state(take_run(getattr(self, name), k)) for name in ("normalizer", "actor", "critic")}

    def run_state(self, k: int) -> dict:
        """Everything of run ``k`` that decides its next iteration, on the CPU: its networks and
        return statistics, its slice of Adam's state, its generator, its env's ``get_state()`` and the
        running episode tallies. ``load_run_states`` puts it back; the iterations that follow are
        the ones the run would have trained (on the CPU bit for bit)."""
        optimizer = []
        for p in self.parameters():
            state = self.optimizer.state.get(p, {})
            optimizer.append({key: (v if v.dim() == 0 else v[k : k + 1]).detach().cpu().clone()
                              for key, v in state.items()})  # fmt: skip
        return {
            **self.run_networks(k),
            "action_space": self.action_record(),
            "return_var": _cpu_state(take_run(self.return_var, k)),
            "optimizer": optimizer,
            "generator": self.generators[k].get_state().cpu(),
            "env": {key: v.detach().cpu() for key, v in self.envs[k].get_state().items()},
            "episode_return": self.episode_return[k].cpu().clone(),
            "episode_stats": self.episode_stats[k].cpu().clone(),
            "return_state": self.return_state[k].cpu().clone(),
            "health": self.health[k].cpu().clone(),
        }

    def action_record(self) -> dict:
        """The action space as plain values (a run state's ``action_space``): ``{"kind", "nvec"}``
        (and ``"comm_dim"`` with a channel), or with groups ``{"groups": group_records(...)}`` (each
        group's range, width and space)."""
        if self.grouped:
            return {"groups": group_records(self.envs[0].groups)}
        space = self.envs[0].action_space
        channel = {"comm_dim": space.comm_dim} if space.comm_dim else {}
        return {"kind": space.kind, "nvec": list(space.nvec), **channel}

    def load_run_states(self, states: list[dict]) -> None:
        """Put back ``run_state(k)`` of every run (``states[k]`` for run k), before the first iteration.

        Raises:
            ValueError: ``states`` does not match this trainer (runs, shapes): nothing is changed then.
        """
        if len(states) != self.n_runs:
            raise ValueError(f"{len(states)} run states for a trainer of {self.n_runs} runs")
        mine = self.action_record()
        for state in states:  # states written before discrete actions hold none: continuous
            saved = state.get("action_space", {"kind": "continuous", "nvec": []}) if isinstance(state, dict) else {}
            if saved != mine:
                raise ValueError(f"the saved runs were trained with {actions_text(saved)}; this trainer has "
                                 f"{actions_text(mine)}: a run resumes in the action space it was trained "
                                 "in")  # fmt: skip
        params = self.parameters()
        try:
            modules = {name: _stack_states([s[name] for s in states]) for name in
                       ("normalizer", "actor", "critic", "return_var")}  # fmt: skip
            optimizer = self.optimizer.state_dict()
            for i in range(len(params)):
                entries = [s["optimizer"][i] for s in states]
                if entries[0]:
                    optimizer["state"][i] = {key: v if v.dim() == 0 else torch.cat([e[key] for e in entries])
                                             for key, v in entries[0].items()}  # fmt: skip
            for name, state in modules.items():
                getattr(self, name).load_state_dict(state)
            self.optimizer.load_state_dict(optimizer)
        except (KeyError, IndexError, RuntimeError, TypeError) as error:
            detail = f"{type(error).__name__}: {error}"
            raise ValueError(f"the saved run states do not fit this trainer ({detail})") from None
        for k, (state, env) in enumerate(zip(states, self.envs, strict=True)):
            self.generators[k].set_state(state["generator"])
            env.set_state({key: v.to(env.torch_device) for key, v in state["env"].items()})
            self.episode_return[k].copy_(state["episode_return"])
            self.episode_stats[k].copy_(state["episode_stats"])
            self.return_state[k].copy_(state["return_state"])
            self.health[k].copy_(state["health"])


def agent_mean(values: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """[K] the mean of ``values`` [K, M, A] over its last two dims, or with ``weight`` (1/0 of the
    same shape) over the entries it keeps (none kept: 0)."""
    if weight is None:
        return values.mean((1, 2))
    return (values * weight).sum((1, 2)) / weight.sum((1, 2)).clamp_min(1.0)


def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items()}


def _stack_states(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per-run ``state_dict``s ([1, ...] each) -> one of the K runs ([K, ...])."""
    return {name: torch.cat([state[name] for state in states]) for name in states[0]}


def _on_stream(stream, main):
    """Context: work on CUDA ``stream`` after what ``main`` has queued (a branch of a captured graph),
    or inline with ``stream`` None."""
    if stream is None:
        return contextlib.nullcontext()
    stream.wait_stream(main)
    return torch.cuda.stream(stream)


def _noise_seed(seed: int) -> int:
    """The seed of a run's noise generator: the run's seed alone, a per-rank seed under ``torch.distributed``."""
    return sd.rank_seed(seed) if sd.is_distributed() else seed


def iterations_for(total_steps: int, n_envs: int, config: TrainConfig) -> int:
    """Iterations that cover ``total_steps`` env-steps of one run (whole iterations)."""
    return max(1, math.ceil(total_steps / (n_envs * config.rollout_steps)))
