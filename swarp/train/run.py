"""``train()`` and ``resume()``: runs of ``swarp.train.ppo`` from a scenario name to checkpoints, with logging.

Outputs, in a folder of its own per run, ``<run_dir>/<scenario>__<seed>__<unix time>[-<n>]/``
(created atomically, so runs started together never share one): ``config.json``, ``metrics.jsonl``
(one JSON row per logged iteration: ``iteration``, ``frames``, ``train_seconds``, ``charts/*``,
``eval/*``, ``losses/*``, ``perf/*`` in microseconds; a non-finite value is written as ``null``),
``checkpoint.pt`` (``swarp.train.checkpoint``: every ``checkpoint_every`` iterations, at the end
and on Ctrl-C; resumable), ``learning_curve.png`` (with matplotlib) and TensorBoard events (with
tensorboard installed).

What stops a run: its budget (``total_steps``, ``max_seconds``), every seed reaching
``target_success`` at an evaluation (each seed's result is its policy at that evaluation), Ctrl-C
(a whole iteration is finished and checkpointed first), or divergence (``TrainingDiverged``: a
non-finite loss, gradient norm or parameter, or the env's health flags; no non-finite weights are
written and each run's last finite checkpoint stays).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

import swarp.distributed as sd
from swarp.runtime.sequence import refuse_open_capture
from swarp.train.action_spaces import env_action_kwargs
from swarp.train.buffers import StageClock
from swarp.train.checkpoint import load_checkpoint, save_checkpoint
from swarp.train.config import TrainConfig, check_fields, make_config
from swarp.train.evaluate import Evaluator, summary
from swarp.train.groups import GroupedPolicy, TrainedPolicy
from swarp.train.health import HealthWatch, TrainingDiverged, diverged
from swarp.train.networks import Policy
from swarp.train.ppo import Trainer, iterations_for
from swarp.train.tasks import Task, get_task

#: Reset seed of the evaluations during training (apart from the training seeds 0, 1, ...).
EVAL_SEED = 1_000_003
#: The largest seed (the environments' counter-based RNG takes seeds in [0, 2^31)).
MAX_SEED = 2**31 - 1
#: Fields a resumed run may change: when and how long it trains and logs, not what an iteration computes.
RESUMABLE_FIELDS = ("total_steps", "max_seconds", "target_success", "eval_every", "log_every", "checkpoint_every",
                    "progress")  # fmt: skip


@dataclass
class TrainResult:
    """What a run produced.

    Attributes:
        policy: The greedy policy: observations [E, A, O] -> physical actions [E, A, U], or int64
            indices [E, A, width] with discrete actions (where the run reached ``target_success``,
            the policy of that evaluation). With agent groups a ``GroupedPolicy``:
            ``{group: obs}`` -> ``{group: actions}``, each group's by its own networks.
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
        reached: ``(iteration, env-steps)`` of the evaluation at which the run reached
            ``target_success`` (``None``: it did not, or there was no target).
    """

    policy: TrainedPolicy
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
    reached: tuple[int, int] | None = None


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
        seeds: One run per seed (ints in [0, 2^31), distinct), all trained at once as one batched
            computation (each run its own env batch, weights, noise and minibatch order: the run its
            seed trains alone).
        n_envs: Parallel envs per run (default: 4096 on CUDA, 64 on the CPU).
        total_steps: Budget [env-steps per run] (default: the task record's, else the config's).
        max_seconds: Stop after this much training time [s].
        target_success: Stop once every run has reached this greedy success rate at an evaluation
            (default: the task record's); each run's result is its policy at that evaluation.
        options: Scenario options and environment keywords over the task record's
            (``{"difficulty": 0.5}``, ``{"max_steps": 50}`` for the episode length); the checkpoint
            keeps them, so evaluations and videos of it use them too.
        **overrides: ``TrainConfig`` fields (``lr=...``, ``algorithm="ippo"``,
            ``action_space="discrete"``; with agent groups ``action_space={"a": "discrete"}``,
            ``action_nvec={"a": (5, 3)}``...).

    Returns:
        A ``TrainResult`` for one seed, a list of them (in ``seeds`` order) for several.

    Raises:
        ValueError: a bad argument (named, with what it accepts and what it got).
        TrainingDiverged: a run went non-finite (see the module doc).
        KeyboardInterrupt: Ctrl-C, after the checkpoints of the last whole iteration were written.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    task = get_task(scenario).with_options(options)
    given = {k: v for k, v in dict(n_envs=n_envs, total_steps=total_steps, max_seconds=max_seconds,
                                   target_success=target_success).items() if v is not None}  # fmt: skip
    config_overrides = {**overrides, **given}
    if config_overrides.get("n_envs") is None and task.overrides.get("n_envs") is None:
        config_overrides["n_envs"] = 4096 if device.type == "cuda" else 64
    config = make_config(config_overrides, task.config_overrides())
    # The task's options for the config's action space come first; the run's own options override them.
    task = get_task(scenario).for_actions(config.action_space).with_options(options)
    results = _train(scenario, task, config, device, check_seeds(seeds))
    return results[0] if len(results) == 1 else results


def resume(*run_dirs, device=None, **overrides) -> TrainResult | list[TrainResult]:
    """Continue the runs whose folders (or checkpoint files) are ``run_dirs``, from their last checkpoint.

    The runs must have been trained together (one ``train`` call: the same scenario, config and
    iteration). Training continues in the same folders as if it had not stopped: on the CPU the
    iterations that follow are bit for bit those of the uninterrupted run.

    Args:
        run_dirs: Run folders (``TrainResult.run_dir``) or their ``checkpoint.pt`` files.
        device: Where to continue (default: CUDA when available).
        **overrides: Only the ``RESUMABLE_FIELDS`` (``total_steps=...`` to train longer...).

    Returns:
        As ``train``.

    Raises:
        ValueError: no run folders, a checkpoint without a resume state, runs that were not trained
            together, or an override of a field that decides what an iteration computes.
    """
    if not run_dirs:
        raise ValueError("resume() needs the run folders to continue")
    fixed = sorted(set(overrides) - set(RESUMABLE_FIELDS))
    if fixed:
        raise ValueError(f"a resumed run keeps its settings; it may change only {list(RESUMABLE_FIELDS)}, not {fixed}")
    checkpoints = [load_checkpoint(path) for path in run_dirs]
    first = checkpoints[0]
    for checkpoint in checkpoints:
        if checkpoint.resume is None:
            raise ValueError(f"{checkpoint.path}: holds no resume state (a data-parallel run, or an older checkpoint)")
        same = (checkpoint.scenario, checkpoint.config, checkpoint.task, checkpoint.extra.get("iteration"))
        if same != (first.scenario, first.config, first.task, first.extra.get("iteration")):
            raise ValueError(f"{checkpoint.path} and {first.path} were not trained together (their scenario, "
                             "config, task or iteration differ): resume them separately")  # fmt: skip
    seeds = check_seeds([c.seed for c in checkpoints])
    config = dataclasses.replace(first.config, **check_fields(TrainConfig, overrides))
    config.validate()
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    results = _train(first.scenario, first.task, config, device, seeds, resume_from=checkpoints)
    return results[0] if len(results) == 1 else results


def check_seeds(seeds) -> list[int]:
    """``seeds`` (an int, or a sequence of distinct ints in [0, 2^31)) as a list of ints.

    Raises:
        ValueError: a string, a non-integer, a bool, a seed out of range, a repeat, or none at all.
    """
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = [seeds]
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a sequence of ints, got {seeds!r} ({type(seeds).__name__})")
    seeds = list(seeds)
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(f"each seed must be an int in [0, {MAX_SEED}], got {seed!r} ({type(seed).__name__})")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    return seeds


@dataclass
class _Reached:
    """A run that reached the target: where, and its networks then (its result)."""

    iteration: int
    frames: int
    networks: dict


def _train(scenario: str, task: Task, config: TrainConfig, device: torch.device, seeds: list[int],
           resume_from: list | None = None) -> list[TrainResult]:  # fmt: skip
    joined = False
    if config.distributed and not sd.is_distributed():
        if not sd.launched_by_torchrun():
            raise RuntimeError("distributed=True needs the process group torchrun sets up: torchrun ... -m swarp.train")
        device, joined = torch.device(sd.init(device=None if device.type == "cuda" else "cpu")), True
    world = sd.get_world_size()
    if resume_from is not None and world > 1:
        raise ValueError("a data-parallel run cannot be resumed yet (each rank's envs would be needed)")
    if config.n_envs % world or config.eval_envs % world:
        raise ValueError(f"n_envs ({config.n_envs}) and eval_envs ({config.eval_envs}) must be multiples of the "
                         f"{world} processes")  # fmt: skip
    if device.type == "cuda":
        refuse_open_capture(device, "swarp.train")  # a capture left open would swallow the envs' set-up
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
        torch.backends.cudnn.allow_tf32 = config.tf32
    actions = env_action_kwargs(config)  # the action space (none: continuous, the env's default)
    envs = [sd.make_shard(scenario, global_n_envs=config.n_envs, device=str(device), seed=seed, **task.env_kwargs(),
                          **actions) for seed in seeds]  # fmt: skip
    trainer = Trainer.build(envs, task, config, seeds)
    evaluator = Evaluator(scenario, task, config.eval_envs, str(device), EVAL_SEED, actions)
    lead = sd.get_rank() == 0  # logs, writes checkpoints
    K = len(seeds)
    iteration, frames, train_seconds, eval_seconds = 0, 0, 0.0, 0.0
    reached: list[_Reached | None] = [None] * K
    rows: list[list[dict]] = [[] for _ in seeds]
    written: dict[int, str] = {}  # run -> its last checkpoint, for the divergence message
    if resume_from is not None:
        trainer.load_run_states([c.resume for c in resume_from])
        saved = resume_from[0].extra
        iteration, frames = saved["iteration"], saved["frames"]
        train_seconds, eval_seconds = saved["train_seconds"], saved["eval_seconds"]
        for k, checkpoint in enumerate(resume_from):
            if checkpoint.extra.get("reached") is not None:
                reached[k] = _Reached(*checkpoint.extra["reached"], checkpoint.networks())
            written[k] = f"its last finite checkpoint is {checkpoint.path} (iteration {iteration})"
        run_dirs = [Path(c.path).parent for c in resume_from]
        rows = [_Logger.rows_until(run_dir, iteration) for run_dir in run_dirs]
    elif config.run_dir and lead:
        stamp = int(time.time())
        run_dirs = [new_run_dir(Path(config.run_dir), f"{scenario}__{seed}__{stamp}") for seed in seeds]
    else:
        run_dirs = [None] * K
    loggers = [_Logger(run_dir, config, first_frames=frames if resume_from else None) for run_dir in run_dirs]
    watch = HealthWatch(trainer)
    n_iterations = iterations_for(config.total_steps, config.n_envs, config)
    frames_per_iteration = config.n_envs * config.rollout_steps
    clock = StageClock(device)
    bar = _Progress(scenario, seeds, config, n_iterations * frames_per_iteration, frames, config.progress and lead)

    def stop_diverged(at: int, flags: torch.Tensor, run_rows) -> TrainingDiverged:
        """Log the failed iteration, checkpoint the runs that are still finite now, close, and
        return the error to raise."""
        run_rows = run_rows if run_rows is not None else trainer.read_metrics()
        for k, row in enumerate(run_rows):
            loggers[k].write({"iteration": iteration, "frames": frames, **row, "diverged": bool(flags[k].any())})
        finite_now = ~trainer.health_flags().any(1).cpu()  # a sync: the newest iteration too
        checkpoint_runs([k for k in range(K) if bool(finite_now[k]) and not bool(flags[k].any())])
        _finish(rows, loggers, bar, envs, evaluator, joined)
        return diverged(at, flags, seeds, frames, config, written)

    def checkpoint_runs(runs) -> None:
        """Write the checkpoints of ``runs`` (finite: the caller checked their flags at this iteration)."""
        extra = {"iteration": iteration, "frames": frames, "train_seconds": train_seconds - trainer.capture_seconds(),
                 "eval_seconds": eval_seconds}  # fmt: skip
        for k in runs:
            if run_dirs[k] is None:
                continue
            at = reached[k]
            save_checkpoint(run_dirs[k] / "checkpoint.pt", trainer, k, scenario,
                            {**extra, "reached": None if at is None else [at.iteration, at.frames]},
                            networks=None if at is None else at.networks, resume=world == 1)  # fmt: skip
            written[k] = f"its last finite checkpoint is {run_dirs[k] / 'checkpoint.pt'} (iteration {iteration})"

    stop = iteration >= n_iterations or (config.target_success is not None and all(reached))
    _sync(device)
    with _deferred_interrupt() as interrupted:
        while not stop:
            iteration += 1
            start = time.perf_counter()
            trainer.iterate(clock)
            frames += frames_per_iteration
            asked_to_stop = interrupted()
            last = iteration == n_iterations
            evaluate_now = bool(config.eval_every and iteration % config.eval_every == 0)
            log_now = iteration % config.log_every == 0 or last or evaluate_now
            checkpoint_now = bool(config.checkpoint_every and iteration % config.checkpoint_every == 0)
            run_rows = trainer.read_metrics() if log_now else None  # the host sync
            failure = watch.check(iteration, now=log_now or checkpoint_now or asked_to_stop)
            train_seconds += time.perf_counter() - start
            if failure is not None:
                raise stop_diverged(*failure, run_rows)
            if log_now:
                captured = trainer.capture_seconds()
                stages = {f"perf/{name}_us": us for name, us in clock.read().items()}
                common = {"iteration": iteration, "frames": frames, "train_seconds": train_seconds - captured,
                          "capture_seconds": captured, **stages}  # fmt: skip
                common["charts/SPS"] = frames * K / max(common["train_seconds"], 1e-9)
                # Ranks' clocks differ: they stop together, when any rank's budget is spent.
                if sd.reduce_metrics({"over": _over_time(config, common["train_seconds"])}, "max")["over"] > 0:
                    last = True
                if evaluate_now or last:
                    eval_start = time.perf_counter()
                    for k, row in enumerate(run_rows):
                        if reached[k] is not None:
                            continue  # done: its result is the policy that reached the target
                        result = summary(evaluator(trainer.policy(k)))
                        row.update({f"eval/{key}": v for key, v in result.items()})
                        if config.target_success is not None and result["success"] >= config.target_success:
                            reached[k] = _Reached(iteration, frames, trainer.run_networks(k))
                            row["target_reached"] = True
                    eval_seconds += time.perf_counter() - eval_start
                    if config.target_success is not None and all(reached):
                        last = True
                for k, row in enumerate(run_rows):
                    rows[k].append({**common, **row})
                    loggers[k].write(rows[k][-1])
                bar.show(frames, common["train_seconds"], rows, reached)
            if checkpoint_now or last or asked_to_stop:
                checkpoint_runs(range(K))  # checked: every such iteration read its flags at once
            if asked_to_stop and not last:
                _finish(rows, loggers, bar, envs, evaluator, joined)
                where = " ".join(str(d) for d in run_dirs if d is not None)
                hint = f"; continue with: python -m swarp.train --resume {where}" if where else ""
                raise KeyboardInterrupt(f"interrupted after iteration {iteration} ({frames:,} env-steps){hint}")
            stop = last
    results = []
    for k, seed in enumerate(seeds):
        at = reached[k]
        policy = trainer.policy(k) if at is None else _policy(at.networks, trainer, config)
        final = rows[k][-1] if rows[k] else {}
        results.append(
            TrainResult(
                policy=policy,
                metrics=rows[k],
                checkpoint=None if run_dirs[k] is None else run_dirs[k] / "checkpoint.pt",
                run_dir=run_dirs[k],
                frames=frames,
                train_seconds=final.get("train_seconds", train_seconds),
                capture_seconds=trainer.capture_seconds(),
                eval_seconds=eval_seconds,
                config=config,
                seed=seed,
                final=final,
                reached=None if at is None else (at.iteration, at.frames),
            )
        )
    _finish(rows, loggers, bar, envs, evaluator, joined)
    return results


def new_run_dir(parent: Path, name: str) -> Path:
    """Create and return a new folder ``parent/name``, or ``parent/name-2``, ``-3``... where that
    exists: ``mkdir`` without ``exist_ok`` is atomic, so no two runs (threads or processes) get one folder."""
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"{parent}: 10,000 run folders named {name}* exist")


def _policy(networks: dict, trainer: Trainer, config: TrainConfig) -> TrainedPolicy:
    """A ``Policy`` (a ``GroupedPolicy`` with agent groups) from a run's saved networks (``Trainer.run_networks``)."""
    env = trainer.envs[0]
    low, high = (b.float().cpu() for b in env.action_bounds)
    if trainer.grouped:
        policy = GroupedPolicy.from_networks(networks, env.groups, low, high, config.hidden, config.depth,
                                             config.norm_obs)  # fmt: skip
    else:
        policy = Policy.from_networks(networks, env.obs_dim, low, high, config.hidden, config.depth, config.norm_obs,
                                      env.action_space)  # fmt: skip
    return policy.to(env.torch_device)


def _finish(rows, loggers, bar, envs, evaluator, joined: bool) -> None:
    """Close what a run opened: the loggers (writing the learning curves), the bar, the envs, the process group."""
    for k, logger in enumerate(loggers):
        logger.close(rows[k])
    bar.close()
    for env in envs:
        env.close()
    evaluator.env.close()
    if joined:
        sd.shutdown()


def _over_time(config: TrainConfig, train_seconds: float) -> bool:
    return config.max_seconds is not None and train_seconds >= config.max_seconds


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _deferred_interrupt():
    """Within the block, Ctrl-C (SIGINT) only raises a flag, read at the end of an iteration, so the
    run is checkpointed at a whole iteration; a second Ctrl-C interrupts at once. Yields the flag's
    reader. Outside the main thread (no signal handlers there) the flag stays down."""
    hit = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield hit.is_set
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        hit.set()
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, handler)
    try:
        yield hit.is_set
    finally:
        signal.signal(signal.SIGINT, previous)


class _Progress:
    """The tqdm bar over env-steps per run, its end the earliest stop in sight: the step budget, or
    where ``max_seconds`` falls at the current rate; its label the stop conditions, its postfix every
    seed's last greedy success (a check mark once it reached the target). Does nothing when disabled
    or without tqdm."""

    def __init__(self, scenario: str, seeds: list[int], config: TrainConfig, budget: int, start: int, enabled: bool):
        self.config, self.seeds, self.budget = config, seeds, budget
        self.bar = None
        try:
            from tqdm import tqdm
        except ImportError:
            return
        if not enabled:
            return
        ends = [f"{budget / 1e6:g} M env-steps" if budget >= 1e6 else f"{budget:,} env-steps"]
        if config.max_seconds is not None:
            ends.append(f"{config.max_seconds:g} s")
        if config.target_success is not None:
            ends.append(f"success {config.target_success:g}" + (" (every seed)" if len(seeds) > 1 else ""))
        label = f"{scenario} seed{'s' if len(seeds) > 1 else ''} {','.join(map(str, seeds))} to " + " or ".join(ends)
        self.bar = tqdm(total=budget, initial=start, unit="step", unit_scale=True, dynamic_ncols=True, desc=label)

    def show(self, frames: int, seconds: float, rows: list[list[dict]], reached: list) -> None:
        if self.bar is None:
            return
        if self.config.max_seconds is not None and seconds > 0:
            at_deadline = frames + frames / seconds * max(0.0, self.config.max_seconds - seconds)
            self.bar.total = max(frames, min(self.budget, int(at_deadline)))
        self.bar.update(frames - self.bar.n)
        evals = []
        for k in range(len(self.seeds)):
            last = next((r["eval/success"] for r in reversed(rows[k]) if "eval/success" in r), None)
            evals.append("-" if last is None else f"{last:.2f}" + ("*" if reached[k] is not None else ""))
        postfix = {"eval": "/".join(evals)}
        if rows[0] and "charts/SPS" in rows[0][-1]:
            postfix["SPS"] = f"{rows[0][-1]['charts/SPS']:.3g}"
        self.bar.set_postfix(postfix)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _json_row(row: dict) -> str:
    """One metrics row as strict JSON: non-finite numbers become ``null``."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
    return json.dumps(clean, allow_nan=False)


class _Logger:
    """Rows to ``metrics.jsonl`` (and TensorBoard when installed); the learning curve at the end."""

    def __init__(self, run_dir: Path | None, config: TrainConfig, first_frames: int | None = None):
        self.run_dir = run_dir
        self.writer = None
        if run_dir is None:
            return
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=1))
        try:
            from torch.utils.tensorboard import SummaryWriter

            # A resumed run drops the events logged after its checkpoint (they are trained again).
            purge = None if first_frames is None else first_frames + 1
            self.writer = SummaryWriter(str(run_dir), purge_step=purge)
        except ImportError:
            pass

    @staticmethod
    def rows_until(run_dir: Path, iteration: int) -> list[dict]:
        """The rows of ``run_dir/metrics.jsonl`` up to ``iteration``; rewrites the file to hold just
        them (the rows after a checkpoint are logged again when a resumed run trains them again)."""
        path = run_dir / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []
        rows = [row for row in rows if row["iteration"] <= iteration and "diverged" not in row]
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(_json_row(row) + "\n" for row in rows))
        os.replace(tmp, path)
        return rows

    def write(self, row: dict) -> None:
        if self.run_dir is None:
            return
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(_json_row(row) + "\n")
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
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
        points = [(r["frames"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            frames, values = zip(*points, strict=True)
            ax.plot(frames, values, label=label)
    ax_return.set(xlabel="env-steps", ylabel="episodic return (mean over agents)")
    ax_success.set(xlabel="env-steps", ylabel="success rate", ylim=(-0.02, 1.02))
    if ax_success.lines:
        ax_success.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
