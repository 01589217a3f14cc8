"""``train()``: a run of ``swarp.train.ppo`` from a scenario name to a checkpoint, with logging.

Outputs, in ``<run_dir>/<scenario>__<seed>__<unix time>/``: ``metrics.jsonl`` (one row per logged
iteration: ``frames``, ``train_seconds``, ``charts/*``, ``eval/*``, ``losses/*``, ``perf/*`` in
microseconds), ``checkpoint.pt`` (``swarp.train.checkpoint``), ``learning_curve.png`` (with
matplotlib) and TensorBoard events (with tensorboard installed).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

import swarp.distributed as sd
from swarp.train.checkpoint import save_checkpoint
from swarp.train.config import TrainConfig, make_config
from swarp.train.evaluate import Evaluator, summary
from swarp.train.networks import Policy
from swarp.train.ppo import StageClock, Trainer, iterations_for
from swarp.train.tasks import get_task

#: Reset seed of the evaluations during training (apart from the training seeds 0, 1, ...).
EVAL_SEED = 1_000_003


@dataclass
class TrainResult:
    """What a run produced.

    Attributes:
        policy: The greedy policy: observations [E, A, O] -> physical actions [E, A, U].
        metrics: Every logged row (the rows of ``metrics.jsonl``).
        checkpoint: Path of the checkpoint (``None`` with ``run_dir=""``).
        run_dir: The run's folder (``None`` with ``run_dir=""``).
        frames: Env-steps trained (by this run).
        train_seconds: Wall time of the training iterations [s] (no evaluation, no capture; all runs at once).
        capture_seconds: Wall time of capturing the CUDA graphs [s].
        eval_seconds: Wall time of the evaluations [s].
        config: The run's hyper-parameters.
        seed: The run's seed.
        final: The last logged row.
    """

    policy: Policy
    metrics: list[dict]
    checkpoint: Path | None
    run_dir: Path | None
    frames: int
    train_seconds: float
    capture_seconds: float
    eval_seconds: float
    config: TrainConfig
    seed: int = 0
    final: dict = field(default_factory=dict)


def train(
    scenario: str,
    *,
    device=None,
    seeds=(0,),
    n_envs: int | None = None,
    total_steps: int | None = None,
    max_seconds: float | None = None,
    target_success: float | None = None,
    options: dict | None = None,
    **overrides,
) -> TrainResult | list[TrainResult]:
    """Train a PPO-family policy on ``scenario`` with its task record's defaults.

    Args:
        scenario: A registered scenario name.
        device: ``"cuda"``, ``"cpu"``... (default: CUDA when available).
        seeds: One run per seed, all trained at once as one batched computation (each run its own
            env batch, weights, noise and minibatch order: the run its seed trains alone).
        n_envs: Parallel envs per run (default: 4096 on CUDA, 64 on the CPU).
        total_steps: Budget [env-steps per run] (default: the config's).
        max_seconds: Stop after this much training time [s].
        target_success: Stop once a greedy evaluation reaches this success rate (every run's, with
            several seeds).
        options: Scenario options over the task record's (``{"difficulty": 0.5}``); the checkpoint
            keeps them, so evaluations and videos of it use them too.
        **overrides: ``TrainConfig`` fields (``lr=...``, ``algorithm="ippo"``...).

    Returns:
        A ``TrainResult`` for one seed, a list of them (in ``seeds`` order) for several.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    task = get_task(scenario)
    if options:
        task = dataclasses.replace(task, options={**task.options, **options})
    given = {k: v for k, v in dict(n_envs=n_envs, total_steps=total_steps, max_seconds=max_seconds,
                                   target_success=target_success).items() if v is not None}  # fmt: skip
    config_overrides = {**overrides, **given}
    if config_overrides.get("n_envs") is None and task.overrides.get("n_envs") is None:
        config_overrides["n_envs"] = 4096 if device.type == "cuda" else 64
    config = make_config(config_overrides, task.overrides)
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    results = _train(scenario, task, config, device, seeds)
    return results[0] if len(results) == 1 else results


def _train(scenario: str, task, config: TrainConfig, device: torch.device, seeds: list[int]) -> list[TrainResult]:
    joined = False
    if config.distributed and not sd.is_distributed():
        if not sd.launched_by_torchrun():
            raise RuntimeError("distributed=True needs the process group torchrun sets up: torchrun ... -m swarp.train")
        device, joined = torch.device(sd.init(device=None if device.type == "cuda" else "cpu")), True
    world = sd.get_world_size()
    if config.n_envs % world or config.eval_envs % world:
        raise ValueError(f"n_envs ({config.n_envs}) and eval_envs ({config.eval_envs}) must be multiples of the "
                         f"{world} processes")  # fmt: skip
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
        torch.backends.cudnn.allow_tf32 = config.tf32
    max_steps = {} if task.max_steps is None else {"max_steps": task.max_steps}
    options = dict(auto_reset=True, **max_steps, **task.options)
    envs = [sd.make_shard(scenario, global_n_envs=config.n_envs, device=str(device), seed=seed, **options)
            for seed in seeds]  # fmt: skip
    trainer = Trainer.build(envs, task, config, seeds)
    evaluator = Evaluator(scenario, task, config.eval_envs, str(device), EVAL_SEED)
    lead = sd.get_rank() == 0  # logs, writes checkpoints
    stamp = int(time.time())
    run_dirs = [None] * len(seeds)
    if config.run_dir and lead:
        run_dirs = [Path(config.run_dir) / f"{scenario}__{seed}__{stamp}" for seed in seeds]
        for run_dir in run_dirs:
            run_dir.mkdir(parents=True, exist_ok=True)
    loggers = [_Logger(run_dir, config) for run_dir in run_dirs]
    n_iterations = iterations_for(config.total_steps, config.n_envs, config)
    frames_per_iteration = config.n_envs * config.rollout_steps
    clock = StageClock(device)
    bar = _progress(n_iterations * frames_per_iteration * len(seeds), config.progress and lead)
    frames, train_seconds, eval_seconds = 0, 0.0, 0.0
    rows: list[list[dict]] = [[] for _ in seeds]
    reached = [False] * len(seeds)
    _sync(device)
    for iteration in range(1, n_iterations + 1):
        start = time.perf_counter()
        trainer.iterate(clock)
        frames += frames_per_iteration
        last = iteration == n_iterations
        evaluate_now = bool(config.eval_every and iteration % config.eval_every == 0)
        if not (iteration % config.log_every == 0 or last or evaluate_now):
            train_seconds += time.perf_counter() - start
            continue
        run_rows = trainer.read_metrics()  # the host sync
        stages = clock.read()
        train_seconds += time.perf_counter() - start
        captured = trainer.capture_seconds()
        common = {"iteration": iteration, "frames": frames, "train_seconds": train_seconds - captured,
                  "capture_seconds": captured, **{f"perf/{name}_us": us for name, us in stages.items()}}  # fmt: skip
        common["charts/SPS"] = frames * len(seeds) / max(common["train_seconds"], 1e-9)
        # Ranks' clocks differ: they stop together, when any rank's budget is spent.
        if sd.reduce_metrics({"over": max_done(config, common["train_seconds"])}, "max")["over"] > 0:
            last = True
        if evaluate_now or last:
            eval_start = time.perf_counter()
            for k, row in enumerate(run_rows):
                result = summary(evaluator(trainer.policy(k)))
                row.update({f"eval/{key}": v for key, v in result.items()})
                reached[k] = config.target_success is not None and result["success"] >= config.target_success
            eval_seconds += time.perf_counter() - eval_start
            if all(reached):
                last = True
        for k, row in enumerate(run_rows):
            row = {**common, **row}
            if reached[k] and last:
                row["target_reached"] = True
            rows[k].append(row)
            loggers[k].write(row)
        bar.update(frames * len(seeds) - bar.n)
        first = rows[0][-1]
        bar.set_postfix({k: f"{first[v]:.3g}" for k, v in (("succ", "charts/success_rate"), ("eval", "eval/success"),
                         ("SPS", "charts/SPS")) if v in first})  # fmt: skip
        if last:
            break
    bar.close()
    results = []
    for k, seed in enumerate(seeds):
        checkpoint = None
        if run_dirs[k] is not None:
            checkpoint = save_checkpoint(run_dirs[k] / "checkpoint.pt", trainer, k, scenario, {"frames": frames})
        loggers[k].close(rows[k])
        final = rows[k][-1] if rows[k] else {}
        results.append(
            TrainResult(
                policy=trainer.policy(k),
                metrics=rows[k],
                checkpoint=checkpoint,
                run_dir=run_dirs[k],
                frames=frames,
                train_seconds=final.get("train_seconds", train_seconds),
                capture_seconds=trainer.capture_seconds(),
                eval_seconds=eval_seconds,
                config=config,
                seed=seed,
                final=final,
            )
        )
    for env in envs:
        env.close()
    evaluator.env.close()
    if joined:
        sd.shutdown()
    return results


def max_done(config: TrainConfig, train_seconds: float) -> bool:
    return config.max_seconds is not None and train_seconds >= config.max_seconds


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _progress(total: int, enabled: bool):
    """A tqdm bar over env-steps, or a stand-in that does nothing (disabled, or no tqdm)."""
    try:
        from tqdm import tqdm
    except ImportError:
        enabled = False
    if not enabled:
        return _NoBar()
    return tqdm(total=total, unit="frames", unit_scale=True, dynamic_ncols=True)


class _NoBar:
    n = 0

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, _values) -> None:
        pass

    def close(self) -> None:
        pass


class _Logger:
    """Rows to ``metrics.jsonl`` (and TensorBoard when installed); the learning curve at the end."""

    def __init__(self, run_dir: Path | None, config: TrainConfig):
        self.run_dir = run_dir
        self.writer = None
        if run_dir is None:
            return
        (run_dir / "config.json").write_text(json.dumps(config.__dict__, indent=1))
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir))
        except ImportError:
            pass

    def write(self, row: dict) -> None:
        if self.run_dir is None:
            return
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(key, value, row["frames"])

    def close(self, rows: list[dict]) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.run_dir is not None:
            plot_learning_curve(rows, self.run_dir / "learning_curve.png")


def plot_learning_curve(rows: list[dict], path: Path, eval_key: str = "eval/success") -> bool:
    """Return and success rate (rows' ``charts/episodic_return``, ``charts/success_rate`` and
    ``eval_key``) against env-steps, to a PNG at ``path``; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_return, ax_success) = plt.subplots(1, 2, figsize=(10, 3.5))
    for key, ax, label in (
        ("charts/episodic_return", ax_return, "train"),
        ("charts/success_rate", ax_success, "train (stochastic)"),
        (eval_key, ax_success, "eval (greedy)"),
    ):
        points = [(r["frames"], r[key]) for r in rows if key in r]
        if points:
            frames, values = zip(*points, strict=True)
            ax.plot(frames, values, label=label)
    ax_return.set(xlabel="env-steps", ylabel="episodic return (mean over agents)")
    ax_success.set(xlabel="env-steps", ylabel="success rate", ylim=(-0.02, 1.02))
    ax_success.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
