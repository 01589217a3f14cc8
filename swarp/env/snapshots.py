"""Snapshots and pickling of an environment: what ``get_state``/``set_state`` copy, and the recipe
a pickle or a copy rebuilds from.

A snapshot (``Snapshots``) is clones of every buffer that decides the next step (the key list is
``Environment.get_state``'s docstring); restoring one checks it whole first, copies it in place
(buffers keep their addresses, so graphs stay valid) and rebuilds what derives from it.

A pickle is not a snapshot: an environment pickles as ``(class, scenario as given, constructor
arguments)`` (``rebuild``, ``check_picklable``), and unpickling builds a fresh one.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import torch

from swarp.core import params as param_table
from swarp.core.config import ObstacleShape
from swarp.env.core import EnvCore
from swarp.env.parameters import AgentParameters


class Snapshots:
    """The snapshot buffers of one environment.

    Args:
        core: The environment's core.
        parameters: Its agent parameters.
        comm: Its messages buffer ``[E, A, C]`` (``Environment.comm``), or ``None``.
    """

    def __init__(self, core: EnvCore, parameters: AgentParameters, comm: torch.Tensor | None = None):
        self.core = core
        self.parameters = parameters
        self.comm = comm

    def tensors(self) -> dict[str, torch.Tensor]:
        """The live buffers a snapshot copies, by key (see ``Environment.get_state``)."""
        core = self.core
        world = core.world
        state = world.state.torch
        tensors = {f"state.{name}": getattr(state, name) for name in world.state.fields}
        tensors.update(
            {
                "env.seed": core.seed_tensor,
                "env.episode": core.episode,
                "env.step_count": core.step_count,
                "env.obs": core.obs,
                "env.reward": core.reward,
                "env.terminated": core.terminated,
                "env.truncated": core.truncated,
                "env.final_obs": core.final_obs,
                "env.agent_params": self.parameters.table,
            }
        )
        tensors.update({f"obstacles.{k}": v for k, v in world.model.obstacle_tensors().items()})
        tensors.update({f"scenario.{k}": v for k, v in core.scenario.state_tensors().items()})
        tensors.update({f"info.{k}": v for k, v in core.info.items() if k != "final_obs"})
        if self.comm is not None:
            tensors["env.comm"] = self.comm
        return tensors

    def get(self) -> dict[str, torch.Tensor]:
        """A clone of every snapshot buffer, by key."""
        return {k: v.clone() for k, v in self.tensors().items()}

    def restore(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Check ``snapshot`` whole, then copy it into the buffers and rebuild ``done`` and the
        neighbor lists (``Environment.set_state``; the caller tells the step end, ``start_again``)."""
        if not isinstance(snapshot, dict):
            raise TypeError(f"snapshot must be a dict from get_state(), got {type(snapshot).__name__}")
        core = self.core
        tensors = self.tensors()
        missing = sorted(set(tensors) - set(snapshot))
        extra = sorted(set(snapshot) - set(tensors))
        if missing or extra:
            raise ValueError(f"snapshot does not match this environment: missing {missing}, unexpected {extra}")
        # Validate every entry before copying any, so a rejected snapshot leaves the env untouched.
        for key, dst in tensors.items():
            src = snapshot[key]
            if not isinstance(src, torch.Tensor):
                raise TypeError(f"snapshot[{key!r}] must be a torch.Tensor, got {type(src).__name__}")
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(
                    f"snapshot[{key!r}] must be {dst.dtype} {list(dst.shape)}, got {src.dtype} {list(src.shape)}"
                )
        self.check_values(snapshot)
        with torch.no_grad():  # a snapshot entry with autograd history must not attach it to the buffers
            for key, dst in tensors.items():
                dst.copy_(snapshot[key])
            torch.logical_or(core.terminated, core.truncated, out=core.done)
        core.seed_value = None
        with core.streams.scope():
            core.world.build_neighbors()

    def check_values(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Raise ``ValueError`` unless every value of ``snapshot`` (keys, shapes and dtypes already
        checked) is one ``get_state`` could have produced (see ``Environment.set_state``)."""
        low, high = int(min(ObstacleShape)), int(max(ObstacleShape))
        rules = [(key, torch.isfinite, "finite") for key, value in snapshot.items() if value.is_floating_point()]
        rules += [
            ("env.seed", lambda seed: seed >= 0, "in [0, 2^31)"),  # int32: < 2^31 by its dtype
            ("env.episode", lambda count: count >= 0, ">= 0"),  # reset's -1 is advanced to 0 before it returns
            ("env.step_count", lambda count: count >= 0, ">= 0"),
            ("obstacles.shape", lambda code: (code >= low) & (code <= high), f"a shape code in [{low}, {high}]"),
            ("obstacles.size", lambda size: size >= 0, ">= 0 [m]"),
        ]
        for key, valid, expected in rules:
            value = snapshot[key]
            ok = valid(value)
            if not bool(ok.all()):
                index = (~ok).nonzero()[0].tolist()
                raise ValueError(
                    f"snapshot[{key!r}] must be {expected}, got {value[tuple(index)].item()} at index {index}"
                )
        params = snapshot["env.agent_params"]
        param_table.check_param_table(self.core.world.model, params, name="snapshot['env.agent_params']")


class Snapshotting:
    """The snapshot and pickling methods of ``Environment`` (it provides ``snapshots``,
    ``launches``, ``scenario_as_given``, ``rebuild_kwargs`` and its ``_check_open`` and
    ``_check_no_pending_send`` guards).

    Pickling and copying: an environment pickles (``pickle``, ``cloudpickle``, ``torch.save``,
    multiprocessing) as what it was built from, never as its buffers: the scenario as it was given
    (its class and options, ``scenario.cfg``, before the environment bound buffers to it) and the
    constructor's arguments (``n_envs``, the resolved ``device``, ``seed``, ``auto_reset``,
    ``max_steps``, ``fused``, ``use_graph``, ``clone_outputs``, ``dtype``, ``env_offset``, the lidar,
    parameter and plan options), which is everything ``swarp.make`` passes. Unpickling builds a new
    environment from them, freshly reset with the seed it was built with: the state is not carried
    (episodes, counters, a later ``reset(seed=...)``, parameters written by ``set_agent_params``,
    a ``close()``). To carry it, pickle a snapshot beside it and restore it:
    ``env2, snap = pickle.loads(pickle.dumps((env, env.get_state()))); env2.set_state(snap)``.
    An unpickled env steps exactly like a fresh one made with the same arguments. ``copy.copy`` and
    ``copy.deepcopy`` give such a rebuilt environment too (two envs never share buffers). An
    environment built from a ``Scenario`` instance of your own pickles when that scenario does
    (module-level class, picklable options); otherwise pickling raises ``TypeError`` naming what
    does not pickle.
    """

    def get_state(self) -> dict[str, torch.Tensor]:
        """An exact snapshot of the whole batch: clones of every buffer that decides the next step.

        ``set_state`` restores it, after which the env steps, resets and auto-resets to the same
        bits as after the ``get_state`` (same seed, same actions, same bits). Keys:

        * ``state.*``: the world state [E, A, ...] (``self.state``'s fields: agents, the drone
          fields, bodies [E, B, ...] in a world with bodies).
        * ``env.seed`` [1] int32, ``env.episode`` and ``env.step_count`` [E] int32: the reset RNG's
          seed and counters (they key every reset draw, prepared starts' and re-drawn parameters'
          included) and the episode clocks.
        * ``env.obs``, ``env.final_obs`` [E, A, obs_dim], ``env.reward`` [E, A], ``env.terminated``
          and ``env.truncated`` [E] bool: the last outputs (``done``, the envs a caller's
          ``reset_at(env.done)`` would restart, is their ``or`` and is rebuilt from them).
        * ``env.agent_params``: the agent parameter table (``agent_params``: [E, A, P] per env, or
          the shared [1, A, P]), as drawn by ``randomize_params`` or written by ``set_agent_params``.
        * ``obstacles.*``: the obstacle arrays (``Model.obstacle_tensors``; per-env slots a scenario
          samples at reset included).
        * ``scenario.*``: the scenario's memory (``Scenario.state_tensors``: goals, targets, the
          previous distances of progress rewards...).
        * ``info.*``: the scenario's info buffers (``final_obs`` is ``env.final_obs``).

        Left out on purpose, as nothing the next step computes reads them: the sticky diagnostic
        flags (``invalid_actions``, ``neighbor_overflow``, ``non_finite``: they keep counting across
        a restore), per-step scratch that a step writes before it reads it (contact forces, the
        action buffer, the reset mask, the auto-reset's env list, a scenario's per-step terms;
        navigation's tallies are zero between steps), the lidar's ``last`` scan (``Lidar.scan``),
        and what is static after construction (plan, configured parameters, the ranges of
        ``randomize_params``). Derived buffers are rebuilt by ``set_state`` instead:
        neighbor lists (from ``state.pos``), ``done``, and the starts prepared ahead
        (``plan.reset_ahead``: prepared again from the restored counters at the next step).

        Returns:
            ``{key: tensor}`` of device tensors, each a clone (later steps do not change it).

        Raises:
            RuntimeError: a ``send()`` is pending (its step is rewriting the buffers).
        """
        self._check_open("get_state")
        self._check_no_pending_send("get_state")
        return self.snapshots.get()

    def set_state(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Restore a ``get_state`` snapshot in place (buffers keep their addresses: graphs stay valid).

        The snapshot is checked whole before anything is copied, so a rejected one leaves the env
        as it was: the same keys as ``get_state`` gives, each a tensor of its shape and dtype, and
        values ``get_state`` could have produced: finite floats, a seed in [0, 2^31), episode and
        step counters >= 0, a valid parameter table (``swarp.core.params.check_param_table``, as
        ``set_agent_params`` checks it) and valid obstacle codes and sizes. Tensors may be on
        another device (a snapshot of a CUDA env restored on the CPU, or one loaded with
        ``torch.load(map_location=...)``): they are copied across, bit for bit. One host sync.

        Args:
            snapshot: ``{key: tensor}`` from ``get_state`` (of this env or one built alike).

        Raises:
            TypeError: ``snapshot`` is not a dict, or an entry is not a tensor.
            ValueError: missing or unexpected keys, or an entry of the wrong shape, dtype or value
                (the message names the key, and for a non-finite value its first index).
            RuntimeError: a ``send()`` is pending.
        """
        self._check_open("set_state")
        self._check_no_pending_send("set_state")
        self.snapshots.restore(snapshot)
        if self.launches.shards is not None:
            self.launches.shards.mark_dirty()
        self.launches.start_again()  # what the step end drew ahead follows the episode counters

    def __reduce__(self):
        """Pickle as ``(class, scenario as given, constructor arguments)``: unpickling rebuilds a fresh,
        reset environment (the state is not carried; see the class docstring).

        Raises:
            TypeError: the scenario or an argument does not pickle (named in the message).
        """
        recipe = (type(self), self.scenario_as_given, dict(self.rebuild_kwargs))
        check_picklable(recipe)
        return (rebuild, recipe)

    def __copy__(self) -> Snapshotting:
        """A rebuilt environment (as ``copy.deepcopy``): a shallow copy would share device buffers."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo: dict) -> Snapshotting:
        """A fresh environment rebuilt from copies of the scenario as given and of the arguments
        (the state is not carried: ``set_state(env.get_state())`` on the copy carries it)."""
        scenario, kwargs = copy.deepcopy((self.scenario_as_given, self.rebuild_kwargs), memo)
        rebuilt = rebuild(type(self), scenario, kwargs)
        memo[id(self)] = rebuilt
        return rebuilt


# --- pickling ----------------------------------------------------------------------------------


def rebuild(cls: type, scenario, kwargs: dict[str, Any]):
    """Unpickling and copying: a new environment of ``cls`` from an unbound ``scenario`` and the
    constructor's keyword arguments (``Environment.__reduce__``)."""
    return cls(scenario, **kwargs)


def check_picklable(recipe: tuple[type, Any, dict[str, Any]]) -> None:
    """Raise a ``TypeError`` that names the culprit when the recipe an environment pickles as
    (``(class, scenario as given, constructor arguments)``) does not pickle with ``pickle``.

    The check is ``pickle``'s whatever the pickler at work (``cloudpickle`` pickles more, such as
    classes defined in a function): an environment that pickles at all pickles everywhere.
    """
    try:
        pickle.dumps(recipe, protocol=pickle.HIGHEST_PROTOCOL)
        return
    except Exception as error:  # pickling raises TypeError, AttributeError, PicklingError...
        failure = error
    cls, scenario, kwargs = recipe
    parts = [(f"the environment class {cls.__qualname__}", cls)]
    parts += [(f"its scenario (the {type(scenario).__qualname__} instance as given)", scenario)]
    parts += [(f"the argument {name}={value!r}", value) for name, value in kwargs.items()]
    culprit = "its scenario or an argument"
    for what, value in parts:
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            culprit = what
            break
    raise TypeError(
        f"cannot pickle this {cls.__name__}: it pickles as the scenario it was built from and its "
        f"arguments, and {culprit} does not pickle ({type(failure).__name__}: {failure}); define the "
        "scenario class at module level, with options and attributes that pickle"
    ) from failure
