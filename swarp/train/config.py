"""The trainer's hyper-parameters, one dataclass, checked once at the door, and the command line built from it.

Every field declares its type and, where it has one, its range (``setting``); ``check_fields`` holds
any dataclass built that way to them, so ``TrainConfig(...)``, ``make_config``, ``--config`` files
and the flags all refuse a wrong type, a non-finite number or a value out of range with one
``ValueError`` that names the field, its flag, what it accepts and what it got.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import math
import numbers
import os
import typing
from dataclasses import dataclass

import numpy as np

from swarp.core.spaces import ACTION_SPACES


@dataclass(frozen=True)
class Range:
    """The values a numeric field accepts: ``low <= x`` (``low < x`` with ``low_open``), ``x <= high``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def __contains__(self, x: float) -> bool:
        above = self.low is None or (x > self.low if self.low_open else x >= self.low)
        return above and (self.high is None or x <= self.high)

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return "" if self.high is None else f"<= {self.high:g}"


def setting(default, *, at_least: float | None = None, above: float | None = None, at_most: float | None = None,
            choices: tuple = ()):  # fmt: skip
    """A dataclass field with its range (``at_least``/``above`` and ``at_most``) or its ``choices``."""
    low = above if above is not None else at_least
    return dataclasses.field(default=default, metadata={"range": Range(low, at_most, above is not None),
                                                        "choices": tuple(choices)})  # fmt: skip


@dataclass
class TrainConfig:
    """Hyper-parameters of a ``swarp.train`` run. Each field's docstring is its ``--help`` text."""

    algorithm: str = setting("mappo", choices=("mappo", "ippo"))
    """mappo (a critic over every agent's observation) or ippo (a critic over the agent's own)"""
    action_space: str | dict[str, str] = setting("continuous", choices=ACTION_SPACES)
    """the env's action space and the policy's head: continuous (a tanh-squashed Gaussian), discrete (one
    categorical over every combination of levels) or multidiscrete (one categorical per action column);
    with agent groups one kind for every group, or one per group: a=discrete (groups left out: continuous)"""
    action_nvec: int | tuple[int, ...] | dict[str, int | tuple[int, ...]] | None = None
    """levels per action column of the discrete spaces: one int for every column or one per column
    (default: 3, VMAS's); only with --action-space discrete or multidiscrete; by group where
    --action-space is: a=5,3 (group a's columns have 5 and 3 levels)"""
    n_envs: int | None = setting(None, at_least=1)
    """parallel envs of the training batch (default: 4096 on CUDA, 64 on the CPU)"""
    rollout_steps: int = setting(32, at_least=1)
    """steps per env per iteration (an iteration holds n_envs * rollout_steps env-steps)"""
    total_steps: int = setting(50_000_000, at_least=1)
    """training budget [env-steps] (a task record sets the budget that solves its task)"""
    max_seconds: float | None = setting(None, above=0.0)
    """stop after this much training time [s] (the iteration in flight finishes)"""
    target_success: float | None = setting(None, at_least=0.0, at_most=1.0)
    """stop once a greedy evaluation reaches this success rate (with several seeds: once each seed has)"""
    lr: float = setting(1e-3, above=0.0)
    """Adam learning rate of actor and critic"""
    gamma: float = setting(0.99, at_least=0.0, at_most=1.0)
    """discount factor"""
    gae_lambda: float = setting(0.95, at_least=0.0, at_most=1.0)
    """GAE lambda"""
    clip_coef: float = setting(0.2, above=0.0)
    """PPO ratio clipping"""
    ent_coef: float = setting(0.0, at_least=0.0)
    """entropy bonus weight (the entropy of the squashed actions, estimated at reparameterized samples;
    with discrete actions the categoricals' exact entropy, summed over columns)"""
    vf_coef: float = setting(0.5, at_least=0.0)
    """value loss weight"""
    epochs: int = setting(2, at_least=1)
    """passes over each iteration's batch (2 solves navigation sooner than 4: docs/training.md)"""
    minibatches: int = setting(4, at_least=1)
    """minibatches per pass"""
    max_grad_norm: float = setting(1.0, above=0.0)
    """gradient clipping (global norm)"""
    hidden: int = setting(128, at_least=1)
    """width of the hidden layers of actor and critic"""
    depth: int = setting(2, at_least=1)
    """hidden layers of actor and critic"""
    init_log_std: float = setting(-0.5, at_least=-50.0, at_most=5.0)
    """initial log standard deviation of the pre-squash Gaussian (continuous actions only)"""
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
    eval_every: int = setting(10, at_least=0)
    """greedy evaluation every this many iterations (0: only at the end)"""
    eval_envs: int = setting(1024, at_least=1)
    """episodes of each greedy evaluation during training"""
    log_every: int = setting(1, at_least=1)
    """read the metrics back every this many iterations (each read is a host sync)"""
    checkpoint_every: int = setting(500, at_least=0)
    """write each run's resumable checkpoint.pt every this many iterations (0: only at the end or on Ctrl-C)"""
    run_dir: str = "runs"
    """folder of the run folders ("" writes nothing)"""
    progress: bool = True
    """show a tqdm progress bar (when tqdm is installed)"""
    distributed: bool = False
    """data-parallel over the processes torchrun starts (NCCL on GPUs, gloo on the CPU): n_envs and
    eval_envs are global, each rank simulates its shard, gradients and statistics are averaged"""

    def __post_init__(self) -> None:
        for name, value in check_fields(type(self), self.__dict__).items():
            setattr(self, name, value)

    def kind_of(self, group: str) -> str:
        """The action space kind ``action_space`` gives agent group ``group`` (a kind for every
        group, or the group's entry of a mapping; ``"continuous"`` where it has none)."""
        kinds = self.action_space
        return kinds if isinstance(kinds, str) else kinds.get(group, "continuous")

    def _check_action_fields(self) -> None:
        """Raise ``ValueError`` where ``action_nvec`` gives levels to continuous actions."""
        nvec, kinds = self.action_nvec, self.action_space
        if nvec is None:
            return
        if isinstance(nvec, dict):
            continuous = [group for group in nvec if self.kind_of(group) == "continuous"]
            if continuous:
                raise ValueError(f"TrainConfig.action_nvec ({nvec}) gives levels to group(s) {continuous}, whose "
                                 f"action_space ({kinds}) is continuous: name them discrete or multidiscrete "
                                 "in action_space (--action-space GROUP=KIND), or leave them out of "
                                 "action_nvec")  # fmt: skip
            return
        if isinstance(kinds, dict):
            raise ValueError(f"TrainConfig.action_nvec ({nvec}) is one for every group, but action_space ({kinds}) "
                             "is by group: give the levels by group too (--action-nvec GROUP=N[,N...])")  # fmt: skip
        if kinds == "continuous":
            raise ValueError(
                f"TrainConfig.action_nvec ({nvec}) applies to discrete action spaces; set "
                "action_space (--action-space) to discrete or multidiscrete, or leave action_nvec unset"
            )

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field of the wrong type, non-finite or out of range,
        or the fields that disagree with each other."""
        self.__post_init__()  # fields may have been assigned since construction
        self._check_action_fields()
        if self.n_envs is None:
            raise ValueError("TrainConfig.n_envs is unset: swarp.train.train picks it from the device")
        if (self.n_envs * self.rollout_steps) % self.minibatches:
            raise ValueError(
                f"TrainConfig: n_envs * rollout_steps ({self.n_envs} * {self.rollout_steps}) must be a multiple of "
                f"minibatches ({self.minibatches})"
            )


def check_fields(cls, values: dict, source: str = "") -> dict:
    """``values`` (field name -> value) checked against dataclass ``cls``'s field types and ranges.

    Accepted: for an ``int`` field an integer (not a bool); for a ``float`` field a finite real number
    (not a bool); for a ``bool`` field ``True``/``False``; for a ``str`` field a string or a path; for
    ``X | None`` also ``None``. Returns the values as those types (a numpy integer becomes an int).

    Raises:
        ValueError: an unknown field name, or a value that does not fit; the message names the field,
            its flag, what it accepts and what it got (prefixed by ``source``, e.g. a file's path).
    """
    prefix = f"{source}: " if source else ""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{prefix}unknown {cls.__name__} fields {unknown}; valid: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    checked = {}
    for name, value in values.items():
        try:
            checked[name] = _check_value(value, hints[name], fields[name].metadata)
        except ValueError as error:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{prefix}{cls.__name__}.{name} ({flag}) {error}") from None
    return checked


def _check_value(value, kind, metadata):
    """``value`` as field type ``kind`` (``T`` or ``T | None``) within ``metadata``'s range/choices."""
    args = typing.get_args(kind)
    optional = type(None) in args
    by_group = any(typing.get_origin(t) is dict for t in args)
    if any(typing.get_origin(t) is tuple for t in args):
        entry_optional = optional and not isinstance(value, dict)  # a group's entry is levels, never None
        return _check_by_group(value, lambda v: _check_levels(v, entry_optional), by_group, "level counts")
    if by_group:
        plain = next(t for t in args if typing.get_origin(t) is not dict)
        return _check_by_group(value, lambda v: _check_value(v, plain, metadata), True, "kinds")
    base = next(t for t in args if t is not type(None)) if optional else kind
    valid = metadata.get("range") or Range()
    choices = metadata.get("choices") or ()
    expected = {bool: "a bool (True or False)", int: "an int", float: "a finite number", str: "a string"}[base]
    if choices:
        expected = "one of " + ", ".join(map(repr, choices))
    elif str(valid):
        expected += f" {valid}"
    if optional:
        expected += " or None"
    if value is None and optional:
        return None
    got = f"got {value!r} ({type(value).__name__})"
    if base is bool:
        ok = isinstance(value, (bool, np.bool_))
        value = bool(value) if ok else value
    elif base is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
        value = int(value) if ok else value
    elif base is float:
        ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        if ok:
            value = float(value)
            ok = math.isfinite(value)
    else:
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
        ok = isinstance(value, str)
    if ok and base in (int, float):
        ok = value in valid
    if ok and choices:
        ok = value in choices
    if not ok:
        raise ValueError(f"must be {expected}, {got}")
    return value


def _check_by_group(value, check, by_group: bool, what: str):
    """``value`` checked by ``check``, or, for a field that may be given by agent group
    (``by_group``), a non-empty mapping of group names (identifiers) to values ``check`` accepts."""
    if not (by_group and isinstance(value, dict)):
        return check(value)
    if not value:
        raise ValueError(f"must name at least one group when it is a mapping of {what} by group, got {{}}")
    checked = {}
    for group, entry in value.items():
        if not (isinstance(group, str) and group.isidentifier()):
            raise ValueError(f"maps group names to {what}; {group!r} is not a group name")
        if entry is None:
            raise ValueError(f"group {group!r}: None is not one of the {what}")
        try:
            checked[group] = check(entry)
        except ValueError as error:
            raise ValueError(f"group {group!r}: {error}") from None
    return checked


def _check_levels(value, optional: bool):
    """A level-count field (``int | tuple[int, ...]``): an int >= 2, or a sequence of them (a tuple;
    one element is that int)."""
    expected = "an int >= 2 or a sequence of ints >= 2" + (" or None" if optional else "")
    if value is None and optional:
        return None

    def level(n) -> bool:
        return isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_)) and n >= 2

    if level(value):
        return int(value)
    if isinstance(value, (list, tuple)) and value and all(level(n) for n in value):
        return int(value[0]) if len(value) == 1 else tuple(int(n) for n in value)
    raise ValueError(f"must be {expected}, got {value!r} ({type(value).__name__})")


def make_config(overrides: dict | None = None, task_overrides: dict | None = None) -> TrainConfig:
    """A validated ``TrainConfig``: the defaults, then the task's overrides, then the caller's.

    Raises:
        ValueError: an unknown field name or a value of the wrong type, non-finite or out of range
            (the field and the value named).
    """
    values = {
        **check_fields(TrainConfig, task_overrides or {}, "the task record"),
        **check_fields(TrainConfig, overrides or {}),
    }
    config = TrainConfig(**values)
    config.validate()
    return config


def load_config_file(path: str) -> dict:
    """Field overrides from a JSON file (an object of ``TrainConfig`` field names to values), checked.

    Raises:
        ValueError: the file is missing or unreadable, is not one JSON object, or holds an unknown
            field or a bad value; the message names the file (``--config PATH``).
    """
    source = f"--config {path}"
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as error:
        raise ValueError(f"{source}: cannot read the file ({error.strerror or error})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: not a JSON file ({error}); it holds one JSON object of TrainConfig "
                         'fields, e.g. {"lr": 3e-4, "epochs": 4}') from None  # fmt: skip
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a config file holds one JSON object, got {type(data).__name__}")
    return check_fields(TrainConfig, data, source)


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
        levels = any(typing.get_origin(t) is tuple for t in typing.get_args(kind))
        by_group = any(typing.get_origin(t) is dict for t in typing.get_args(kind))
        kind = next((t for t in typing.get_args(kind) if t is not type(None)), kind)  # X | None -> X
        flag, help_text = f"--{f.name.replace('_', '-')}", f"{docs.get(f.name, '')} (default: {f.default})"
        default = f.default if defaults else None
        if by_group:  # --action-space discrete, or a=discrete b=multidiscrete; --action-nvec 3 5, or a=5,3
            metavar = "N|GROUP=N[,N...]" if levels else "KIND|GROUP=KIND"
            parser.add_argument(flag, nargs="+", default=default, metavar=metavar, action=_GroupTokens,
                                levels=levels, help=help_text)  # fmt: skip
        elif levels:  # --action-nvec 3, or 3 5 (one per column)
            parser.add_argument(flag, type=int, nargs="+", default=default, metavar="N", help=help_text)
        elif kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        else:
            parser.add_argument(flag, type=kind, default=default, help=help_text)


class _GroupTokens(argparse.Action):
    """The tokens of a flag that takes one value for every agent group or ``GROUP=VALUE`` tokens, one
    per group: ``--action-space discrete`` or ``--action-space a=discrete b=multidiscrete``;
    ``--action-nvec 3 5`` (levels) or ``--action-nvec a=5,3 b=4`` (levels by group)."""

    def __init__(self, *args, levels: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.levels = levels

    def __call__(self, parser, namespace, values, option_string=None):
        named = [token.partition("=") for token in values]
        try:
            if not any(sep for _, sep, _ in named):
                value = [int(token) for token in values] if self.levels else " ".join(values)
            elif all(sep and name.isidentifier() for name, sep, _ in named):
                value = {name: self.entry(text) for name, _, text in named}
            else:
                raise ValueError
        except ValueError:
            form = "N [N ...] or GROUP=N[,N...] ..." if self.levels else "KIND or GROUP=KIND ..."
            parser.error(f"{option_string} takes {form}, got {' '.join(values)!r}")
        setattr(namespace, self.dest, value)

    def entry(self, text: str):
        """One group's value: its levels (``5`` or ``5,3``) or its kind."""
        if not self.levels:
            return text
        levels = [int(n) for n in text.split(",")]
        return levels[0] if len(levels) == 1 else tuple(levels)


def parse_dataclass(argv, cls, description: str | None = None):
    """An instance of dataclass ``cls`` from command-line flags (``add_fields``), its fields checked
    (``check_fields``: a bad value exits with argparse's usage error naming the flag)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_fields(parser, cls)
    values = vars(parser.parse_args(argv))
    try:
        values = check_fields(cls, values)
    except ValueError as error:
        parser.error(str(error))
    return cls(**values)
