"""The trainer's hyper-parameters, one dataclass, and the command line built from it."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import typing
from dataclasses import dataclass


@dataclass
class TrainConfig:
    """Hyper-parameters of a ``swarp.train`` run. Each field's docstring is its ``--help`` text."""

    algorithm: str = "mappo"
    """mappo (a critic over every agent's observation) or ippo (a critic over the agent's own)"""
    n_envs: int | None = None
    """parallel envs of the training batch (default: 4096 on CUDA, 64 on the CPU)"""
    rollout_steps: int = 32
    """steps per env per iteration (an iteration holds n_envs * rollout_steps env-steps)"""
    total_steps: int = 50_000_000
    """training budget [env-steps]"""
    max_seconds: float | None = None
    """stop after this much training time [s] (the iteration in flight finishes)"""
    target_success: float | None = None
    """stop once a greedy evaluation reaches this success rate"""
    lr: float = 1e-3
    """Adam learning rate of actor and critic"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip_coef: float = 0.2
    """PPO ratio clipping"""
    ent_coef: float = 0.0
    """entropy bonus weight (the entropy of the squashed actions, estimated at reparameterized samples)"""
    vf_coef: float = 0.5
    """value loss weight"""
    epochs: int = 2
    """passes over each iteration's batch (2 solves navigation sooner than 4, H200 and CPU: docs/training.md)"""
    minibatches: int = 4
    """minibatches per pass"""
    max_grad_norm: float = 1.0
    """gradient clipping (global norm)"""
    hidden: int = 128
    """width of the hidden layers of actor and critic"""
    depth: int = 2
    """hidden layers of actor and critic"""
    init_log_std: float = -0.5
    """initial log standard deviation of the pre-squash Gaussian"""
    norm_obs: bool = True
    """running observation normalization (statistics updated once per iteration, on the device)"""
    norm_returns: bool = False
    """scale rewards by the running standard deviation of the discounted return"""
    capture: bool = True
    """on CUDA, replay rollout, advantage and update as CUDA graphs (after warm-up iterations)"""
    tf32: bool = True
    """TF32 matmuls on CUDA"""
    bf16: bool = False
    """bf16 autocast of the update's forward passes (CUDA)"""
    eval_every: int = 10
    """greedy evaluation every this many iterations (0: only at the end)"""
    eval_envs: int = 1024
    """episodes of each greedy evaluation during training"""
    log_every: int = 1
    """read the metrics back every this many iterations (each read is a host sync)"""
    run_dir: str = "runs"
    """folder of the run folders ("" writes nothing)"""
    progress: bool = True
    """show a tqdm progress bar (when tqdm is installed)"""
    distributed: bool = False
    """data-parallel over the processes torchrun starts (NCCL on GPUs, gloo on the CPU): n_envs and
    eval_envs are global, each rank simulates its shard, gradients and statistics are averaged"""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field out of range."""
        if self.algorithm not in ("mappo", "ippo"):
            raise ValueError(f"algorithm must be 'mappo' or 'ippo', got {self.algorithm!r}")
        if self.n_envs is None:
            raise ValueError("n_envs is unset: swarp.train.train picks it from the device")
        for name in ("n_envs", "rollout_steps", "total_steps", "epochs", "minibatches", "hidden", "depth", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if (self.n_envs * self.rollout_steps) % self.minibatches:
            raise ValueError(
                f"n_envs * rollout_steps ({self.n_envs * self.rollout_steps}) must be a multiple of minibatches "
                f"({self.minibatches})"
            )
        for name in ("gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.lr <= 0 or self.clip_coef <= 0 or self.max_grad_norm <= 0:
            raise ValueError("lr, clip_coef and max_grad_norm must be > 0")
        if self.eval_every < 0 or self.eval_envs < 1:
            raise ValueError("eval_every must be >= 0 and eval_envs >= 1")


def make_config(overrides: dict | None = None, task_overrides: dict | None = None) -> TrainConfig:
    """A validated ``TrainConfig``: the defaults, then the task's overrides, then the caller's.

    Raises:
        ValueError: an unknown field name or a value out of range.
    """
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    values: dict = {}
    for source in (task_overrides or {}, overrides or {}):
        unknown = sorted(set(source) - names)
        if unknown:
            raise ValueError(f"unknown TrainConfig fields {unknown}; valid: {sorted(names)}")
        values.update(source)
    config = TrainConfig(**values)
    config.validate()
    return config


def load_config_file(path: str) -> dict:
    """Field overrides from a JSON file (an object of ``TrainConfig`` field names to values)."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file holds one JSON object, got {type(data).__name__}")
    return data


def field_docs(cls) -> dict[str, str]:
    """The docstring under each dataclass field, read from the source (the fields' help texts)."""
    docs, body = {}, ast.parse(inspect.getsource(cls)).body[0].body
    for node, doc in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
            docs[node.target.id] = " ".join(str(doc.value.value).split())
    return docs


def add_fields(parser: argparse.ArgumentParser, cls, defaults: bool = True) -> None:
    """One ``--flag`` per field of dataclass ``cls``, its docstring as help. With ``defaults=False``
    every flag defaults to ``None`` (only the flags given are overrides)."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        kind = next((t for t in typing.get_args(kind) if t is not type(None)), kind)  # X | None -> X
        flag, help_text = f"--{f.name.replace('_', '-')}", f"{docs.get(f.name, '')} (default: {f.default})"
        default = f.default if defaults else None
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        else:
            parser.add_argument(flag, type=kind, default=default, help=help_text)


def parse_dataclass(argv, cls, description: str | None = None):
    """An instance of dataclass ``cls`` from command-line flags (``add_fields``)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_fields(parser, cls)
    return cls(**vars(parser.parse_args(argv)))
