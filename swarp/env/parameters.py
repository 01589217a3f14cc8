"""The environment's agent parameter table: its torch view, validated writes, domain randomization.

The table itself is the world model's (``swarp.core.params``): [1, A, P] shared by every env, or
[E, A, P] with ``per_env_params``. ``randomize_params`` re-draws it at the start of every episode
inside the step (``launch_randomize``, a stage of the reset and auto-reset launches).
"""

from __future__ import annotations

from typing import Any

import torch
import warp as wp

from swarp.core import params as param_table
from swarp.core.params import ParamRandomization
from swarp.env.core import EnvCore
from swarp.runtime.launch import Launcher


class AgentParameters:
    """The parameter table of ``core``'s world, and its re-draw at every episode start.

    Args:
        core: The environment's core (its world model holds the table).
        per_env_params: Whether every env has its own row of the table.

    Raises:
        ValueError: a value ``core.randomization``'s ranges can produce is not a valid parameter.
    """

    def __init__(self, core: EnvCore, per_env_params: bool):
        self.core = core
        self.per_env = per_env_params
        self._view: tuple | None = None  # (the table, its torch view): one view per table
        self._configured: torch.Tensor | None = None
        if core.randomization is not None:
            self._stage_randomization(core.randomization)

    @property
    def table(self) -> torch.Tensor:
        """Zero-copy torch view of the table: [E or 1, A, P] (``Environment.agent_params``)."""
        params = self.core.world.model.params
        if self._view is None or self._view[0] is not params:  # compiled code reads the view too
            self._view = (params, wp.to_torch(params))
        return self._view[1]

    def configured(self) -> torch.Tensor:
        """[1, A, P] the parameters the ``AgentConfig``s give (the shared table's values)."""
        if self._configured is None:
            core = self.core
            rows = [[float(getattr(cfg, n)) for n in param_table.PARAM_NAMES] for cfg in core.stepper.model.agents]
            self._configured = torch.tensor([rows], dtype=core.dtype, device=core.torch_device)
        return self._configured

    def write(self, values: torch.Tensor | None, env_mask: torch.Tensor | None, **columns: Any) -> None:
        """``Environment.set_agent_params``' write (validated; the table is left as it was on error)."""
        param_table.write_params(self.core.world.model, values, env_mask, **columns)

    def sample(self, ranges: dict, keys: torch.Tensor, relative: bool, per_agent: bool) -> torch.Tensor:
        """A table drawn from ``ranges`` with the reset RNG ``keys`` [E] int64 (``randomize_agent_params``)."""
        if not self.per_env:
            raise RuntimeError("randomize_agent_params needs an environment built with per_env_params=True")
        return param_table.sample_agent_params(self.configured(), ranges, keys, relative=relative, per_agent=per_agent)

    def _stage_randomization(self, randomization: ParamRandomization) -> None:
        """Validate every value the ranges can produce (once, here) and stage the kernel's arrays."""
        core = self.core
        base = self.configured()
        for table in randomization.extreme_tables(base):
            param_table.check_param_table(core.world.model, table, name="randomize_params")
        ranges = list(randomization.ranges.items())
        dev, scalar = core.device, core.stepper.scalar
        self._columns = wp.array([param_table.param_column(n) for n, _ in ranges], dtype=wp.int32, device=dev)
        self._low = wp.array([float(b[0]) for _, b in ranges], dtype=scalar, device=dev)
        self._high = wp.array([float(b[1]) for _, b in ranges], dtype=scalar, device=dev)
        self._base = wp.from_torch(base.contiguous(), dtype=scalar)

    def launch_randomize(self, launcher: Launcher, env_mask: wp.array) -> None:
        """Re-draw the parameters of the envs in ``env_mask`` [E] bool (no-op without ``randomize_params``)."""
        core, r = self.core, self.core.randomization
        if r is None:
            return
        launcher.launch(
            param_table.kernels(core.stepper.scalar).resample_params,
            dim=(core.n_envs, core.n_agents),
            inputs=[
                env_mask,
                core.buffers.reset_streams,
                self._columns,
                self._low,
                self._high,
                int(r.relative),
                int(r.per_agent),
                self._base,
            ],
            outputs=[core.world.model.params],
            device=core.device,
        )


class ParameterMethods:
    """The agent parameter methods of ``Environment`` (it provides ``parameters``, ``launches``,
    ``rng_keys`` and its ``_check_open`` and ``_check_no_pending_send`` guards)."""

    @property
    def per_env_params(self) -> bool:
        """Whether every env has its own agent parameters (``agent_params`` is [E, A, P])."""
        return self.parameters.per_env

    @property
    def agent_params(self) -> torch.Tensor:
        """Zero-copy view of the agent parameter table: [E, A, P] with ``per_env_params``, else
        [1, A, P] shared by every env; columns ``swarp.core.params.PARAM_NAMES`` (SI units).

        The step reads it in place: ``set_agent_params`` writes it with validation, and a change
        takes effect on the next step without recapturing anything. ``action_bounds`` keeps the
        configured limits; the kernels clamp each env's actions to its own.
        """
        return self.parameters.table

    def set_agent_params(
        self, values: torch.Tensor | None = None, env_mask: torch.Tensor | None = None, **columns: Any
    ) -> None:
        """Write agent parameters in place, validated (one host sync); next step uses them.

        Args:
            values: A whole table broadcastable to ``agent_params``' shape.
            env_mask: Optional [E] bool: only these envs change (needs ``per_env_params``).
            **columns: Parameters by name, e.g. ``mass=torch.full((E, A), 2.0)`` or ``max_speed=0.5``;
                each broadcastable to [E_p, A]. radius and max_speed may not exceed the configured
                fleet maxima (they size the contact search).

        Raises:
            TypeError: ``values`` is not a tensor, or a column is neither a number nor a tensor.
            ValueError: a shape that does not broadcast (named with the shape it must broadcast to,
                the table's columns and the shape given), an ``env_mask`` that is not [E] bool, or
                invalid values; the table is left as it was.
        """
        self._check_open("set_agent_params")
        self._check_no_pending_send("set_agent_params")
        self.parameters.write(values, env_mask, **columns)
        self.launches.start_again()  # scans the step end drew ahead saw the old radii

    def randomize_agent_params(
        self,
        ranges: dict[str, tuple[float, float]],
        env_mask: torch.Tensor | None = None,
        relative: bool = False,
        per_agent: bool = True,
    ) -> None:
        """Domain randomization: draw parameters uniformly in ``ranges`` for every env (or those in
        ``env_mask``), in place. Draws come from the reset RNG keyed by (seed, env, episode), so
        calling this after each reset gives every episode its own, reproducible parameters.

        Args:
            ranges: ``{name: (low, high)}`` in SI units, or factors of the configured values with
                ``relative=True`` (e.g. ``{"mass": (0.8, 1.2)}``).
            env_mask: Optional [E] bool.
            relative: Scale the configured (``AgentConfig``) values instead of replacing them.
            per_agent: Each agent draws its own value; otherwise all agents of an env share one.
        """
        table = self.parameters.sample(ranges, self.rng_keys(), relative, per_agent)
        self.set_agent_params(table, env_mask=env_mask)

    def configured_params(self) -> torch.Tensor:
        """[1, A, P] the parameters the ``AgentConfig``s give (the shared table's values)."""
        return self.parameters.configured()
