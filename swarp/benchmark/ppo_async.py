"""A PPO-shaped training loop driven by blocking ``step()`` versus ``send()`` / ``recv()``.

    python -m swarp.benchmark.ppo_async                 # CPU or CUDA, the default grid
    python -m swarp.benchmark.ppo_async --quick         # a smoke run
    python -m swarp.benchmark.ppo_async --envs 256 4096 --reps 5 --plot async.png   # plot path
    python -m swarp.benchmark.ppo_async --device cpu --policy-device cuda:0 --groups 4   # CPU sim, CUDA learner

Every step runs an MLP actor-critic forward (compiled with ``torch.compile`` with ``--compile``)
and stores the transition; every ``--num-steps`` steps a PPO-style update runs (clipped policy
loss, value loss, entropy; ``--epochs`` x ``--minibatches``). The blocking loop waits for each step
before storing and updating; the async loop sends the actions and stores/updates while the
physics runs, then receives; the partial-batch loop (``swarp.make(..., batch_size=n_envs // G)``,
an ``EnvPool`` of ``--groups`` G groups) receives one group, acts on it and sends it back while the
other groups step (on the CPU each group steps in its own worker thread, so groups also step in
parallel with each other). All loops do identical work per env-step; frames/s (env-steps/s) is
reported as a mean over repetitions with a 95% t-interval; a speed-up is the median over
repetitions of the paired ratio to ``step()`` (the modes' repetitions are interleaved). The
partial-batch loop keeps its groups in flight between timed repetitions (steady state: one
group-step crosses each boundary).

The simulator runs on ``--device`` and the policy and update on ``--policy-device`` (default: the
same): ``--device cpu --policy-device cuda:0`` is a CPU simulator feeding a CUDA learner, with the
observations and rewards copied to the learner and the actions back every step.

Two columns say how much overlap could give at all: ``env share``, the time of the env steps alone
(``step()`` with fixed actions, the same number of steps) over the blocking loop's time, and
``ceiling``, the blocking loop's time over the longer of its two parts (env, everything else):
the speed-up of a perfect overlap of one env step with the rest of one iteration. ``send/recv
cost`` is the interface's own price: env steps alone through ``send``+``recv`` over through
``step()`` (1.00 = free).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

import swarp
from swarp.benchmark.common import check_health, print_table, synchronize


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
    """One benchmark configuration (the command-line options of the same names)."""

    policy_device: str | None = None
    num_steps: int = 64
    epochs: int = 2
    minibatches: int = 4
    warmup: int = 64
    bench_steps: int = 256
    reps: int = 5
    compile: bool = False
    hidden: int = 128


class Loop:
    """Rollout storage, the policy and the update, shared by both drivers."""

    def __init__(self, env: swarp.Environment, cfg: Config):
        self.env, self.cfg = env, cfg
        self.sim_device = env.torch_device
        dev = self.device = torch.device(cfg.policy_device) if cfg.policy_device else env.torch_device
        self.net = ActorCritic(env.obs_dim, env.act_dim, cfg.hidden).to(dev)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=3e-4)
        self.infer = torch.compile(self.net) if cfg.compile else self.net
        shape = (cfg.num_steps, env.n_envs, env.n_agents)
        self.obs = torch.zeros(*shape, env.obs_dim, device=dev)
        self.act = torch.zeros(*shape, env.act_dim, device=dev)
        self.logp = torch.zeros(shape, device=dev)
        self.val = torch.zeros(shape, device=dev)
        self.rew = torch.zeros(shape, device=dev)
        self.low, self.high = (bound.to(dev) for bound in env.action_bounds)

    @functools.cached_property
    def fixed_action(self) -> torch.Tensor:
        """Zero actions [E, A, act_dim] on the simulator's device (clipped into bounds)."""
        env = self.env
        return self.to_sim(torch.zeros(env.n_envs, env.n_agents, env.act_dim, device=self.device))

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """A copy of the observation buffer on the policy device (the env rewrites its buffer)."""
        return obs.to(self.device, copy=True)

    def to_sim(self, action: torch.Tensor) -> torch.Tensor:
        """Clipped actions on the simulator's device."""
        return torch.clamp(action, self.low, self.high).to(self.sim_device)

    @torch.no_grad()
    def act_on(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mean, value = self.infer(obs)
        dist = torch.distributions.Normal(mean, self.net.log_std.exp(), validate_args=False)
        action = dist.sample()
        return action, dist.log_prob(action).sum(-1), value

    def store(self, slot: int, obs, action, logp, value, reward) -> None:
        self.obs[slot].copy_(obs)
        self.act[slot].copy_(action)
        self.logp[slot].copy_(logp)
        self.val[slot].copy_(value)
        self.rew[slot].copy_(reward)  # copy_ also moves it from the simulator's device

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
                dist = torch.distributions.Normal(mean, self.net.log_std.exp(), validate_args=False)
                ratio = (dist.log_prob(act).sum(-1) - old_logp).exp()
                policy = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                loss = policy + 0.5 * (value - ret).square().mean() - 0.01 * dist.entropy().sum(-1).mean()
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()


def run_env_only(loop: Loop, n_steps: int, start: int) -> None:
    """The env steps alone, with fixed in-bounds actions (the env share of the blocking loop)."""
    for _ in range(n_steps):
        loop.env.step(loop.fixed_action)


def run_env_send_recv(loop: Loop, n_steps: int, start: int) -> None:
    """``run_env_only`` through ``send``/``recv``: with it, the interface's own cost."""
    for _ in range(n_steps):
        loop.env.send(loop.fixed_action)
        loop.env.recv()


def run_blocking(loop: Loop, n_steps: int, start: int) -> None:
    env = loop.env
    obs = loop.observe(env.obs)
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        action, logp, value = loop.act_on(obs)
        next_obs, reward, *_ = env.step(loop.to_sim(action))
        loop.store(slot, obs, action, logp, value, reward)
        obs = loop.observe(next_obs)
        if slot == loop.cfg.num_steps - 1:
            loop.update()


def run_async(loop: Loop, n_steps: int, start: int) -> None:
    """The seed's pattern: act, send, then do what needs no step result (store the transition's
    start; the update when due) while the step runs, then receive. The step sent last stays in
    flight between calls (steady state, as the pool's groups), so every call steps ``n_steps``."""
    env = loop.env
    if not hasattr(loop, "in_flight"):
        obs = loop.observe(env.obs)
        action, logp, value = loop.act_on(obs)
        env.send(loop.to_sim(action))
        loop.in_flight = obs, action, logp, value
    obs, action, logp, value = loop.in_flight
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        for storage, value_ in ((loop.obs, obs), (loop.act, action), (loop.logp, logp), (loop.val, value)):
            storage[slot].copy_(value_)  # overlaps the step in flight
        next_obs, reward, *_ = env.recv()
        loop.rew[slot].copy_(reward)
        obs = loop.observe(next_obs)  # the output buffers are rewritten by the step we send next
        action, logp, value = loop.act_on(obs)
        env.send(loop.to_sim(action))
        if slot == loop.cfg.num_steps - 1:
            loop.update()  # overlaps the step just sent
    loop.in_flight = obs, action, logp, value


def run_pool(loop: Loop, n_steps: int, start: int) -> None:
    """Partial batches: per env-step, each group in turn is received, acted on and sent back (its
    physics then overlaps the policy work on the other groups); the update overlaps every group."""
    pool = loop.env
    batch = pool.batch_size
    if not hasattr(loop, "last"):
        pool.async_reset()
        loop.last = {"obs": torch.zeros_like(loop.obs[0]), "act": torch.zeros_like(loop.act[0])}
        loop.last.update(logp=torch.zeros_like(loop.logp[0]), val=torch.zeros_like(loop.val[0]))
        loop.fresh = True
    last = loop.last
    for s in range(start, start + n_steps):
        slot = s % loop.cfg.num_steps
        for g in range(pool.n_groups):  # recv returns the groups in round-robin order from 0
            rows = slice(g * batch, (g + 1) * batch)
            obs, reward, *_, info = pool.recv()
            if not loop.fresh:  # the transition that ends with this recv
                for name, storage in (("obs", loop.obs), ("act", loop.act), ("logp", loop.logp), ("val", loop.val)):
                    storage[slot, rows] = last[name][rows]
                loop.rew[slot, rows] = reward
            obs = loop.observe(obs)
            action, logp, value = loop.act_on(obs)
            last["obs"][rows], last["act"][rows], last["logp"][rows], last["val"][rows] = obs, action, logp, value
            pool.send(loop.to_sim(action), info["env_id"])
        loop.fresh = False
        if slot == loop.cfg.num_steps - 1:
            loop.update()  # overlaps every group's step in flight


DRIVERS = {
    "env": run_env_only,
    "env send/recv": run_env_send_recv,
    "step": run_blocking,
    "send/recv": run_async,
    "pool": run_pool,
}


class Run:
    """One driver (a ``DRIVERS`` mode) on its own environment and loop, timed a repetition at a time.

    Args:
        mode: A ``DRIVERS`` key.
        n_envs: Envs of the environment (``pool``: of the whole pool).
        device: The simulator's device.
        groups: The pool's group count (``pool`` only).
    """

    def __init__(self, mode: str, n_envs: int, device: str, cfg: Config, n_agents: int, groups: int = 2):
        options = dict(n_envs=n_envs, device=device, seed=0, n_agents=n_agents, auto_reset=True)
        if mode == "pool":
            options["batch_size"] = n_envs // groups
        self.mode, self.n_envs, self.cfg = mode, n_envs, cfg
        self.env = swarp.make("navigation", **options)
        self.loop = Loop(self.env, cfg)
        self.driver = DRIVERS[mode]
        self.devices = sorted({self.env.device, str(self.loop.device)})
        self.driver(self.loop, cfg.warmup, 0)
        self.position = cfg.warmup

    def sync(self) -> None:
        """Wait for the devices; a step still in flight (send/recv, pool) keeps running."""
        for name in self.devices:
            synchronize(name)

    def time(self) -> float:
        """Run ``bench_steps`` steps; returns env-steps/s."""
        self.sync()
        start = time.perf_counter()
        self.driver(self.loop, self.cfg.bench_steps, self.position)
        self.sync()
        seconds = time.perf_counter() - start
        self.position += self.cfg.bench_steps
        check_health(self.env, f"ppo_async {self.mode}")  # after the clock: a sync of its own
        return self.n_envs * self.cfg.bench_steps / seconds

    def close(self) -> None:
        if self.mode == "pool":
            self.env.close()


def bench(modes: list[str], n_envs: int, device: str, cfg: Config, n_agents: int, groups: int = 2):
    """Env-steps/s of each timed repetition of every mode, ``{mode: [rate, ...]}``.

    Every mode is built and warmed up first; the repetitions then interleave the modes, in an order
    rotated every repetition, so slow drifts of the machine (clocks, other load) hit them alike.
    """
    runs = [Run(mode, n_envs, device, cfg, n_agents, groups) for mode in modes]
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for rep in range(cfg.reps):
        shift = rep % len(runs)
        for run in runs[shift:] + runs[:shift]:
            rates[run.mode].append(run.time())
    for run in runs:
        run.close()
    return rates


def paired_speedup(rates: list[float], baseline: list[float]) -> float:
    """Median over repetitions of ``rates[i] / baseline[i]``: the repetitions of all modes are
    interleaved (``bench``), so each pair saw the same machine state; the median keeps one
    disturbed repetition from moving the result."""
    return statistics.median(r / b for r, b in zip(rates, baseline, strict=True))


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


def ratio_text(value: float) -> str:
    """A ratio column's cell: two decimals, or two significant digits below 0.1, so a small but
    nonzero share (a cheap env under an expensive loop, or a loaded machine) never reads 0.00."""
    if value != value or value == 0 or abs(value) >= 0.1:
        return f"{value:,.2f}"
    return f"{value:.2g}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="the simulator's device (default: cuda:0 if any, else cpu)")
    parser.add_argument("--policy-device", default=None, help="the policy's and update's device (default: --device)")
    parser.add_argument("--envs", type=int, nargs="+", default=None)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--groups", type=int, default=2, help="groups of the partial-batch (EnvPool) loop")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--bench-steps", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=64)
    parser.add_argument("--num-steps", type=int, default=64, help="rollout length between updates")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128, help="width of the policy's two hidden layers")
    parser.add_argument("--compile", action="store_true", help="torch.compile the inference forward")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (CPU policy)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None, help="write every repetition's env-steps/s to this file")
    parser.add_argument(
        "--plot", default="ppo_async.png", help="where to save the frames/s vs n_envs plot (matplotlib; '' for none)"
    )
    args = parser.parse_args(argv)
    if args.groups < 2:
        parser.error("--groups must be at least 2")
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    envs = args.envs or ([1, 16, 256, 1024, 4096, 16384] if cuda else [1, 16, 64, 256, 1024])
    if args.quick:
        envs, args.reps, args.bench_steps, args.warmup, args.num_steps = envs[:2], 2, 32, 8, 16
    cfg = Config(
        args.policy_device,
        args.num_steps,
        args.epochs,
        args.minibatches,
        args.warmup,
        args.bench_steps,
        args.reps,
        args.compile,
        args.hidden,
    )
    rows, raw = [], {}
    for n_envs in envs:
        modes = ["env", "env send/recv", "step", "send/recv"]
        pool = n_envs % args.groups == 0 and n_envs >= args.groups
        rates = bench(modes + (["pool"] if pool else []), n_envs, device, cfg, args.agents, args.groups)
        env_mean, _ = summarise(rates["env"])
        step_mean, step_ci = summarise(rates["step"])
        row = [n_envs, step_mean, step_ci]
        for mode in modes[3:] + ["pool"]:
            mean, ci = summarise(rates[mode]) if mode in rates else (float("nan"),) * 2
            row += [mean, ci, paired_speedup(rates[mode], rates["step"]) if mode in rates else float("nan")]
        share = step_mean / env_mean  # env time over loop time, both per env-step
        interface = env_mean / summarise(rates["env send/recv"])[0]  # send+recv time over step time
        rows.append(row + [share, 1.0 / max(share, 1.0 - share), interface])
        raw[n_envs] = rates
        print(f"  done {n_envs}", flush=True)
    policy = args.policy_device or device
    print(
        f"\nsimulator={device} policy={policy} agents={args.agents} groups={args.groups} "
        f"hidden={args.hidden} compile={args.compile} torch={torch.__version__} threads={torch.get_num_threads()}; "
        "frames/s = env-steps/s, +- 95% CI"
    )
    columns = ["send/recv", f"{args.groups} groups"]
    print_table(
        ["n_envs", "step()", "+-"]
        + [name for column in columns for name in (column, "+-", "speed-up")]
        + ["env share", "ceiling", "send/recv cost"],
        [row[:-3] + [ratio_text(v) for v in row[-3:]] for row in rows],
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rates": raw, "rows": rows}, f, indent=1)
    if args.plot:
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            print("no plot: matplotlib is not installed (pip install 'swarp[plot]')")
            return

        fig, ax = plt.subplots(figsize=(6, 4))
        means = [1] + [3 + 3 * k for k in range(len(columns))]  # (mean, +-) of step(), then triples
        for column, label in zip(means, ["step()"] + columns, strict=True):
            ax.errorbar(
                [r[0] for r in rows],
                [r[column] for r in rows],
                yerr=[r[column + 1] for r in rows],
                label=label,
                marker="o",
                capsize=3,
            )
        title = f"PPO loop, simulator {device}, policy {policy}"
        ax.set(xscale="log", yscale="log", xlabel="n_envs", ylabel="env-steps/s", title=title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
