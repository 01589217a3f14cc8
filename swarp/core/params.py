"""Per-env agent parameters: the opt-in ``[E, A, P]`` table for domain randomization.

By default every env shares one parameter row per agent (``Model.params`` is ``[1, A, P]``) and
the kernels read row ``env * 0``: nothing is paid for the feature. ``enable_per_env_params``
replaces the table by ``[E, A, P]`` (each env starting from the shared values); kernels then read
row ``env`` (the ``per_env_params`` flag every physics launch already passes). The table is then
edited *in place* (``write_params``), so graphs and recorded launches that read it stay valid and
a change takes effect on the next step.

Limits that size the neighbor lists and contact search are fixed when the model is built, so a
per-env value may never exceed them: the radius stays within the fleet's largest configured
radius and ``max_speed`` within its largest configured speed (configure the largest value you
will sample, then sample below it). Every other column only has to be physically valid.

``sample_agent_params`` draws tables from the counter-based RNG of ``swarp.core.rng``, keyed by
(seed, env, episode) like the resets, so a randomization is reproducible and independent of which
other envs are resampled with it. ``ParamRandomization`` describes a randomization the
``Environment`` applies at every episode start inside its step graph; ``kernels(scalar)`` holds
its Warp twin (``resample_params``), which draws the same numbers.

(No ``from __future__ import annotations`` here: Warp reads kernel annotations at definition.)
"""

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
import warp as wp

from swarp.core import stability
from swarp.core.rng import INV_2_24, ResetStreams, episode_key, uniform_u24, uniform_u24_torch
from swarp.core.types import PARAM_FIELDS, PARAM_MAX_SPEED, PARAM_RADIUS, Model, param_array

#: Column names of the parameter table, in column order (``PARAM_*`` indices of swarp.core.types).
PARAM_NAMES: tuple[str, ...] = PARAM_FIELDS
#: First draw index of parameter samples in an episode's random stream (clear of scenario draws).
DRAW_PARAMS = 1 << 24
_DRAW_PARAMS = wp.constant(DRAW_PARAMS)
_N_PARAMS = wp.constant(len(PARAM_FIELDS))

_STRICTLY_POSITIVE = (
    "radius",
    "mass",
    "wheelbase",
    "rear_axle_ratio",
    "arm_length",
    "inertia_x",
    "inertia_y",
    "inertia_z",
)


def param_column(name: str) -> int:
    """Column index of the parameter ``name`` (clear error listing the names)."""
    try:
        return PARAM_NAMES.index(name)
    except ValueError:
        raise ValueError(f"unknown agent parameter {name!r}; parameters: {list(PARAM_NAMES)}") from None


def param_ceilings(model: Model) -> dict[str, float]:
    """Upper limits a per-env value may reach without invalidating the model's contact sizing:
    ``radius`` <= the fleet's largest radius [m], ``max_speed`` <= its largest speed [m/s]."""
    return {
        "radius": model.max_radius,
        "max_speed": max(cfg.max_speed for cfg in model.agents),
    }


def enable_per_env_params(model: Model, n_envs: int) -> None:
    """Give every env its own parameter rows: ``model.params`` becomes ``[n_envs, A, P]``, each
    env a copy of the shared rows. A no-op when it already is; an error for any other shape.

    This reallocates the table: owners of recorded launches or graphs must invalidate them (the
    ``Environment`` does this at construction, before anything is captured).
    """
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
    rows = model.params.shape[0]
    if rows == n_envs and (rows > 1 or n_envs == 1):
        return
    if rows != 1:
        raise ValueError(f"the parameter table already has {rows} env rows; cannot re-shape it to {n_envs}")
    shared = wp.to_torch(model.params).cpu().numpy()  # a strided table: torch copies it whole
    model.params = param_array(np.repeat(shared, n_envs, axis=0), model.scalar, model.device)


def check_param_table(model: Model, table: torch.Tensor, name: str = "agent params") -> None:
    """Raise a clear error unless ``table`` [E_p, A, P] holds valid parameters for ``model``.

    Checks finiteness, signs, ``rear_axle_ratio`` in (0, 1], ``max_steer`` in [0, pi/2), that the
    model's substep integrates the table's masses and drags stably (``check_param_stability``) and
    the ceilings of ``param_ceilings``. Reads the values on the host (one sync).
    """
    values = table.detach().to("cpu", torch.float64)
    if not torch.isfinite(values).all():
        raise ValueError(f"{name} must be finite")
    for column, field in enumerate(PARAM_NAMES):
        col = values[..., column]
        low = col.min().item()
        if field in _STRICTLY_POSITIVE and low <= 0:
            raise ValueError(f"{name}: {field} must be > 0, got min {low}")
        if low < 0:
            raise ValueError(f"{name}: {field} must be >= 0, got min {low}")
    ratio = values[..., param_column("rear_axle_ratio")].max().item()
    if ratio > 1.0:
        raise ValueError(f"{name}: rear_axle_ratio must be <= 1, got max {ratio}")
    steer = values[..., param_column("max_steer")].max().item()
    if steer >= math.pi / 2:
        raise ValueError(f"{name}: max_steer must be < pi/2 rad, got max {steer}")
    check_param_stability(model, values, name)
    ceilings = param_ceilings(model)
    for field, column in (("radius", PARAM_RADIUS), ("max_speed", PARAM_MAX_SPEED)):
        high = values[..., column].max().item()
        # The table holds the model's precision: compare with the ceiling rounded the same way.
        ceiling = torch.tensor(ceilings[field], dtype=table.dtype).item()
        if high > ceiling:
            raise ValueError(
                f"{name}: {field} max {high} exceeds {ceiling}, the largest value the model's contact search "
                f"was sized for; configure the agents with the largest {field} you will use"
            )


def check_param_stability(model: Model, table: torch.Tensor, name: str = "agent params") -> None:
    """Raise a ``ValueError`` unless the model's substep ``dt / substeps`` integrates every row of
    ``table`` [E_p, A, P] stably (``swarp.core.stability``): a lighter mass stiffens every contact of
    its agent, a larger drag damps a second-order one explicitly. Per agent, each (lightest,
    heaviest) mass with each (smallest, largest) drag is checked: the stable set is convex in
    (1 / mass, drag), so these corners bound every row."""
    values = table.detach().to("cpu", torch.float64)
    mass = values[..., param_column("mass")]
    drag = values[..., param_column("drag")]
    masses = torch.stack([mass.amin(0), mass.amax(0)], -1).tolist()  # [A, 2]
    drags = torch.stack([drag.amin(0), drag.amax(0)], -1).tolist()
    terms = stability.agent_terms(model.agents, model.world, model.integrator, masses, drags)
    stability.check_substep(
        terms, model.world, model.dt, model.substeps, name, remedy="raise the lightest mass (or lower the drag)"
    )


def write_params(
    model: Model,
    values: torch.Tensor | None = None,
    env_mask: torch.Tensor | None = None,
    **columns: torch.Tensor | float,
) -> None:
    """Validate and write parameters into ``model.params`` in place (graphs stay valid).

    Args:
        model: The model whose table is written ([1, A, P] shared or [E, A, P] per env).
        values: A whole table, broadcastable to ``model.params``' shape.
        env_mask: Optional [E] bool: only these env rows change (per-env tables only).
        **columns: Single parameters by name (``mass=...``), each broadcastable to [E_p, A]
            (a number, an [A] row, an [E_p, 1] column, ...). Applied after ``values``.

    Raises:
        TypeError: ``values`` is not a tensor, or a column is neither a number nor a tensor.
        ValueError: a shape that does not broadcast (the message names the argument, the shape it
            must broadcast to and the shape given), an unknown column, an ``env_mask`` that is not
            [E] bool or given for a shared table, or values ``check_param_table`` refuses.
    """
    table = wp.to_torch(model.params)
    new = table.clone()
    if values is not None:
        if not isinstance(values, torch.Tensor):
            raise TypeError(f"values must be a torch.Tensor, got {type(values).__name__}")
        if not _broadcasts_to(values.shape, table.shape):
            raise ValueError(
                f"values must broadcast to the agent parameter table [E_p, A, P] = {list(table.shape)} "
                f"({_table_rows(table)}, {len(PARAM_NAMES)} parameters: {', '.join(PARAM_NAMES)}), "
                f"got shape {list(values.shape)}"
            )
        new[:] = values.to(new.device, new.dtype)
    for field, value in columns.items():
        column = param_column(field)
        if isinstance(value, torch.Tensor):
            if not _broadcasts_to(value.shape, table.shape[:2]):
                raise ValueError(
                    f"{field} must broadcast to the parameter rows [E_p, A] = {list(table.shape[:2])} "
                    f"({_table_rows(table)}), got shape {list(value.shape)}"
                )
            value = value.to(new.device, new.dtype)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{field} must be a number or a torch.Tensor, got {type(value).__name__}")
        new[..., column] = value
    if env_mask is not None:
        if table.shape[0] == 1:
            raise ValueError("env_mask needs per-env parameters (the table is shared by every env)")
        if not isinstance(env_mask, torch.Tensor) or env_mask.dtype != torch.bool or env_mask.shape != table.shape[:1]:
            got = (f"a {env_mask.dtype} tensor of shape {list(env_mask.shape)}" if isinstance(env_mask, torch.Tensor)
                   else type(env_mask).__name__)  # fmt: skip
            raise ValueError(f"env_mask must be a [{table.shape[0]}] bool tensor (one flag per env), got {got}")
        new = torch.where(env_mask.to(new.device).view(-1, 1, 1), new, table)
    check_param_table(model, new)
    table.copy_(new)


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` (without growing it)."""
    try:
        return torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        return False


def _table_rows(table: torch.Tensor) -> str:
    """What the two leading dims of a parameter table are: ``2 envs, 3 agents`` or, for the shared
    table, ``1 row shared by every env (per_env_params=False), 3 agents``."""
    envs = "1 row shared by every env (per_env_params=False)" if table.shape[0] == 1 else f"{table.shape[0]} envs"
    return f"{envs}, {table.shape[1]} agents"


def _check_ranges(ranges: Mapping[str, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """``{column: (low, high)}`` from ``{name: (low, high)}``, validated."""
    if not isinstance(ranges, Mapping) or not ranges:
        raise ValueError("ranges must be a non-empty mapping {parameter name: (low, high)}")
    columns = {}
    for field, bounds in ranges.items():
        column = param_column(field)
        if (
            not isinstance(bounds, (tuple, list))
            or len(bounds) != 2
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
            or bounds[0] > bounds[1]
        ):
            raise ValueError(f"range of {field} must be a finite (low, high) with low <= high, got {bounds!r}")
        columns[column] = (float(bounds[0]), float(bounds[1]))
    return columns


def sample_agent_params(
    base: torch.Tensor,
    ranges: Mapping[str, tuple[float, float]],
    keys: torch.Tensor,
    relative: bool = False,
    per_agent: bool = True,
) -> torch.Tensor:
    """Draw a parameter table: uniform values in ``ranges``, other columns from ``base``.

    The value of column ``c`` for agent ``a`` of env ``e`` is ``low + (high - low) * u`` (times
    ``base`` when ``relative``), ``u`` the 24-bit uniform of draw ``DRAW_PARAMS + a' * P + c``
    under ``keys[e]``, where ``a' = a`` (``per_agent``) or 0. The Warp twin (``resample_params``)
    evaluates the same expression.

    Args:
        base: [E_b, A, P] table the unsampled columns come from (E_b in {1, E}).
        ranges: ``{name: (low, high)}``; with ``relative`` the bounds are factors of ``base``.
        keys: [E] int64 RNG stream keys (``Environment.rng_keys()``: one per env and episode).
        relative: Scale ``base`` instead of replacing it.
        per_agent: Each agent draws its own value; otherwise one draw per env is shared by its agents.

    Returns:
        [E, A, P] table of ``base``'s dtype and device (validate it with ``check_param_table``).
    """
    columns = _check_ranges(ranges)
    n_envs = keys.shape[0]
    n_agents = base.shape[1]
    table = base.expand(n_envs, -1, -1).clone()
    agents = torch.arange(n_agents, device=keys.device).view(1, n_agents)
    if not per_agent:
        agents = torch.zeros_like(agents)
    for column, (low, high) in columns.items():
        index = DRAW_PARAMS + agents * len(PARAM_NAMES) + column
        u = uniform_u24_torch(keys.view(-1, 1), index).to(table.dtype) * INV_2_24  # [E, A] in [0, 1)
        low_t, high_t = (torch.full((), b, dtype=table.dtype, device=table.device) for b in (low, high))
        value = low_t + (high_t - low_t) * u
        table[..., column] = value * table[..., column] if relative else value
    return table


@dataclass(frozen=True)
class ParamRandomization:
    """Agent parameters re-drawn at the start of every episode (``Environment(randomize_params=...)``).

    Attributes:
        ranges: ``{name: (low, high)}``: SI values, or factors of the configured values with
            ``relative``.
        relative: Scale the ``AgentConfig`` values instead of replacing them.
        per_agent: Each agent draws its own value; otherwise all agents of an env share one.
    """

    ranges: Mapping[str, tuple[float, float]]
    relative: bool = False
    per_agent: bool = True

    def __post_init__(self) -> None:
        _check_ranges(self.ranges)
        for name in ("relative", "per_agent"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"ParamRandomization.{name} must be a bool, got {getattr(self, name)!r}")
        object.__setattr__(self, "ranges", dict(self.ranges))

    def extreme_tables(self, base: torch.Tensor) -> tuple[torch.Tensor]:
        """The tables to validate once, up front, so that every draw is valid: one [2, A, P] table
        whose rows are the lowest and the highest draw. ``check_param_table`` checks each column's
        extremes over its rows and, for the stability limit, every (mass, drag) corner, which a
        separate lowest and highest table would not (the lightest mass with the largest drag)."""
        low, high = base.clone(), base.clone()
        for column, (lo, hi) in _check_ranges(self.ranges).items():
            scale = base[..., column] if self.relative else torch.ones_like(base[..., column])
            low[..., column] = lo * scale
            high[..., column] = hi * scale
        return (torch.cat([low, high]),)


@functools.cache
def kernels(scalar: type) -> SimpleNamespace:
    """``resample_params``: the Warp twin of ``sample_agent_params`` for the envs of a mask."""

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def resample_params(
        env_mask: wp.array(dtype=wp.bool),
        streams: ResetStreams,
        columns: wp.array(dtype=wp.int32),
        low: wp.array(dtype=scalar),
        high: wp.array(dtype=scalar),
        relative: int,
        per_agent: int,
        base: wp.array3d(dtype=scalar),
        params_out: wp.array3d(dtype=scalar),
    ):
        env, agent = wp.tid()
        if not env_mask[env]:
            return
        key = episode_key(streams, env)
        drawer = agent * per_agent
        for c in range(columns.shape[0]):
            column = columns[c]
            u = scalar(uniform_u24(key, _DRAW_PARAMS + drawer * _N_PARAMS + column)) * scalar(INV_2_24)
            value = low[c] + (high[c] - low[c]) * u
            if relative != 0:
                value = value * base[0, agent, column]
            params_out[env, agent, column] = value

    return SimpleNamespace(resample_params=resample_params)


__all__ = [
    "PARAM_NAMES",
    "ParamRandomization",
    "check_param_stability",
    "check_param_table",
    "enable_per_env_params",
    "param_ceilings",
    "param_column",
    "sample_agent_params",
    "write_params",
]
