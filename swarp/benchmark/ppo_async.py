"""A PPO-shaped training loop driven by blocking ``step()`` versus ``send()`` / ``recv()``.

    python -m swarp.benchmark.ppo_async                 # CPU or CUDA, the default grid
    python -m swarp.benchmark.ppo_async --quick         # a smoke run
    python -m swarp.benchmark.ppo_async --envs 256 4096 --reps 5 --plot ppo_async.png

Every step runs an MLP actor-critic forward (compiled with ``torch.compile`` with ``--compile``)
and stores the transition; every ``--num-steps`` steps a PPO-style update runs (clipped policy
loss, value loss, entropy; ``--epochs`` x ``--minibatches``). The blocking loop waits for each step
before storing and updating; the async loop sends the actions and stores/updates while the
physics runs, then receives; the partial-batch loop (``swarp.make(..., batch_size=n_envs // 2)``,
an ``EnvPool`` of two groups) receives one half of the envs, acts on it and sends it back while
the other half steps. All loops do identical work per env-step; frames/s (env-steps/s) is
reported as a mean over repetitions with a 95% t-interval. The partial-batch loop keeps its groups
in flight between timed repetitions (steady state: one group-step crosses each boundary).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

import swarp
from swarp.benchmark.common import print_table, synchronize


class ActorCritic(nn.Module):
    """Shared-parameter MLP: per-agent observation -> (action mean, value)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 128):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.mean = nn.Linear(hidden, act_dim)
        self.value = nn.Linear(hidden, 1)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        return self.mean(h), self.value(h).squeeze(-1)


@dataclass
class Config:
    num_steps: int
    epochs: int
    minibatches: int
    warmup: int
    bench_steps: int
    reps: int
    compile: bool


class Loop:
    """Rollout storage, the policy and the update, shared by both drivers."""

    def __init__(self, env: swarp.Environment, cfg: Config):
        self.env, self.cfg = env, cfg
        dev = env.torch_device
        self.net = ActorCritic(env.obs_dim, env.act_dim).to(dev)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=3e-4)
        self.infer = torch.compile(self.net) if cfg.compile else self.net
        shape = (cfg.num_steps, env.n_envs, env.n_agents)
        self.obs = torch.zeros(*shape, env.obs_dim, device=dev)
        self.act = torch.zeros(*shape, env.act_dim, device=dev)
        self.logp = torch.zeros(shape, device=dev)
        self.val = torch.zeros(shape, device=dev)
        self.rew = torch.zeros(shape, device=dev)
        self.low, self.high = env.action_bounds

    @torch.no_grad()
    def act_on(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mean, value = self.infer(obs)
        dist = torch.distributions.Normal(mean, self.net.log_std.exp())
        action = dist.sample()
        return action, dist.log_prob(action).sum(-1), value

    def store(self, slot: int, obs, action, logp, value, reward) -> None:
        self.obs[slot].copy_(obs)
        self.act[slot].copy_(action)
        self.logp[slot].copy_(logp)
        self.val[slot].copy_(value)
        self.rew[slot].copy_(reward)

    def update(self) -> None:
        """A PPO-style update over the stored rollout (returns as reward-to-go, no GAE)."""
        returns = torch.flip(torch.cumsum(torch.flip(self.rew, [0]), 0), [0])
        advantages = returns - self.val
        n = self.cfg.num_steps * self.env.n_envs * self.env.n_agents
        flat = [t.reshape(n, *t.shape[3:]) for t in (self.obs, self.act, self.logp, returns, advantages)]
        batch = max(n // self.cfg.minibatches, 1)
        for _ in range(self.cfg.epochs):
            perm = torch.randperm(n, device=self.obs.device)
            for idx in perm.split(batch):
                obs, act, old_logp, ret, adv = (t[idx] for t in flat)
                mean, value = self.net(obs)
                dist = torch.distributions.Normal(mean, self.net.log_std.exp())
                ratio = (dist.log_prob(act).sum(-1) - old_logp).exp()
                policy = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                loss = policy + 0.5 * (value - ret).square().mean() - 0.01 * dist.entropy().sum(-1).mean()
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()

    def clip(self, action: torch.Tensor) -> torch.Tensor:
        return torch.clamp(action, self.low, self.high)


def run_blocking(loop: Loop, n_steps: int, start: int) -> None:
    env = loop.env
    obs = env.obs.clone()
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        action, logp, value = loop.act_on(obs)
        next_obs, reward, *_ = env.step(loop.clip(action))
        loop.store(slot, obs, action, logp, value, reward)
        obs = next_obs.clone()
        if slot == loop.cfg.num_steps - 1:
            loop.update()


def run_async(loop: Loop, n_steps: int, start: int) -> None:
    """The seed's pattern: receive, act, send, then store and (when due) update while it runs."""
    env = loop.env
    obs = env.obs.clone()
    action, logp, value = loop.act_on(obs)
    env.send(loop.clip(action))
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        next_obs, reward, *_ = env.recv()
        loop.store(slot, obs, action, logp, value, reward)
        obs = next_obs.clone()  # the output buffers are rewritten by the step we send next
        action, logp, value = loop.act_on(obs)
        env.send(loop.clip(action))
        if slot == loop.cfg.num_steps - 1:
            loop.update()  # overlaps the step just sent
    env.recv()  # the step sent last is received and dropped (one extra step per call)


def run_pool(loop: Loop, n_steps: int, start: int) -> None:
    """Partial batches: per env-step, each group in turn is received, acted on and sent back (its
    physics then overlaps the policy work on the other groups); the update overlaps every group."""
    pool = loop.env
    if not hasattr(loop, "last"):
        pool.async_reset()
        shape = (pool.n_envs, pool.n_agents)
        dev = pool.torch_device
        loop.last = {
            "obs": torch.zeros(*shape, pool.obs_dim, device=dev),
            "act": torch.zeros(*shape, pool.act_dim, device=dev),
            "logp": torch.zeros(shape, device=dev),
            "val": torch.zeros(shape, device=dev),
        }
        loop.fresh = True
    last = loop.last
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        for _ in range(pool.n_groups):
            obs, reward, *_, info = pool.recv()
            ids = info["env_id"]
            if not loop.fresh:  # the transition that ends with this recv
                for name, storage in (("obs", loop.obs), ("act", loop.act), ("logp", loop.logp), ("val", loop.val)):
                    storage[slot][ids] = last[name][ids]
                loop.rew[slot][ids] = reward
            action, logp, value = loop.act_on(obs)
            last["obs"][ids], last["act"][ids], last["logp"][ids], last["val"][ids] = obs, action, logp, value
            pool.send(loop.clip(action), ids)
        loop.fresh = False
        if slot == loop.cfg.num_steps - 1:
            loop.update()  # overlaps every group's step in flight


def bench(mode: str, n_envs: int, device: str, cfg: Config, n_agents: int) -> list[float]:
    options = dict(n_envs=n_envs, device=device, seed=0, n_agents=n_agents, auto_reset=True)
    if mode == "pool":
        options["batch_size"] = n_envs // 2
    env = swarp.make("navigation", **options)
    loop = Loop(env, cfg)
    driver = {"step": run_blocking, "send/recv": run_async, "pool": run_pool}[mode]
    driver(loop, cfg.warmup, 0)
    synchronize(env.device)
    rates = []
    for rep in range(cfg.reps):
        synchronize(env.device)
        start = time.perf_counter()
        driver(loop, cfg.bench_steps, cfg.warmup + rep * cfg.bench_steps)
        synchronize(env.device)
        rates.append(n_envs * cfg.bench_steps / (time.perf_counter() - start))
    return rates


def summarise(rates: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    mean = statistics.fmean(rates)
    if len(rates) < 2:
        return mean, 0.0
    try:
        from scipy import stats

        t = float(stats.t.ppf(0.975, df=len(rates) - 1))
    except ImportError:  # the bench extra brings scipy; without it fall back to the normal quantile
        t = 1.96
    return mean, t * statistics.stdev(rates) / len(rates) ** 0.5


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--envs", type=int, nargs="+", default=None)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--bench-steps", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=64)
    parser.add_argument("--num-steps", type=int, default=64, help="rollout length between updates")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--compile", action="store_true", help="torch.compile the inference forward")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", default=None, help="save a frames/s vs n_envs plot (matplotlib)")
    args = parser.parse_args(argv)
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    envs = args.envs or ([1, 16, 256, 1024, 4096, 16384] if cuda else [1, 16, 64, 256, 1024])
    if args.quick:
        envs, args.reps, args.bench_steps, args.warmup, args.num_steps = envs[:2], 2, 32, 8, 16
    cfg = Config(args.num_steps, args.epochs, args.minibatches, args.warmup, args.bench_steps, args.reps, args.compile)
    rows = []
    for n_envs in envs:
        step_mean, step_ci = summarise(bench("step", n_envs, device, cfg, args.agents))
        recv_mean, recv_ci = summarise(bench("send/recv", n_envs, device, cfg, args.agents))
        pool_mean, pool_ci = (
            summarise(bench("pool", n_envs, device, cfg, args.agents)) if n_envs >= 2 else (float("nan"),) * 2
        )
        rows.append(
            [
                n_envs,
                step_mean,
                step_ci,
                recv_mean,
                recv_ci,
                recv_mean / step_mean,
                pool_mean,
                pool_ci,
                pool_mean / step_mean,
            ]
        )
        print(f"  done {n_envs}", flush=True)
    print(f"\ndevice={device} agents={args.agents} torch={torch.__version__}; frames/s = env-steps/s, +- 95% CI")
    print_table(["n_envs", "step()", "+-", "send/recv", "+-", "speed-up", "half batches", "+-", "speed-up"], rows)
    if args.plot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for column, label in ((1, "step()"), (3, "send()/recv()"), (6, "half batches")):
            ax.errorbar(
                [r[0] for r in rows],
                [r[column] for r in rows],
                yerr=[r[column + 1] for r in rows],
                label=label,
                marker="o",
                capsize=3,
            )
        ax.set(xscale="log", yscale="log", xlabel="n_envs", ylabel="env-steps/s", title=f"PPO loop on {device}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
