"""Snapshots and pickling of an environment: what ``get_state``/``set_state`` copy, and the recipe
a pickle or a copy rebuilds from.

A snapshot (``Snapshots``) is clones of every buffer that decides the next step (the key list is
``Environment.get_state``'s docstring); restoring one checks it whole first, copies it in place
(buffers keep their addresses, so graphs stay valid) and rebuilds what derives from it.

A pickle is not a snapshot: an environment pickles as ``(class, scenario as given, constructor
arguments)`` (``rebuild``, ``check_picklable``), and unpickling builds a fresh one.
"""

from __future__ import annotations

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
    """

    def __init__(self, core: EnvCore, parameters: AgentParameters):
        self.core = core
        self.parameters = parameters

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
        return tensors

    def get(self) -> dict[str, torch.Tensor]:
        """A clone of every snapshot buffer, by key."""
        return {k: v.clone() for k, v in self.tensors().items()}

    def restore(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Check ``snapshot`` whole, then copy it into the buffers and rebuild ``done`` and the
        neighbor lists (``Environment.set_state``; the caller redoes anything prepared ahead)."""
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
