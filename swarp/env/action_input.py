"""The environment's action input: its agent groups' ``ActionSpace`` s, the buffers ``step`` copies
actions into, their checks, and the decode of discrete indices into the physical command.

Continuous actions go straight into the world's action buffer ``[E, A, D]``, as before. Discrete
ones go into an int64 index buffer ``[E, A, W]``; the step's first launch (``launch_decode``, inside
the captured step) or, on the torch reference, ``decode_torch`` writes the physical command from it
(``swarp.core.spaces`` documents the mapping). CPU shards view the index buffer and decode their
own rows.

With agent groups (``swarp.core.groups``) each group has its own space over its own agents and
columns: ``step`` takes a mapping by group, whose tensors are copied into their group's views of
the two buffers, and one decode launch serves every discrete group (a per-agent table of kinds and
levels; continuous agents are skipped).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.groups import AgentGroup, group_ranges, join, per_group
from swarp.core.spaces import ActionSpace, decode_torch
from swarp.runtime.actions import KIND_CODES, decode_kernel
from swarp.runtime.launch import Launcher


class ActionInput:
    """What ``step`` accepts and where it goes (module docstring).

    Args:
        core: The environment's ``EnvCore`` (its stepper, world, sizes and the scenario's groups).
        kind: ``"continuous"``, ``"discrete"`` or ``"multidiscrete"``, or a mapping of them by group
            (groups it leaves out are continuous).
        nvec: Levels per physical column for the discrete kinds (``ActionSpace.build``), or a
            mapping of them by group.

    Attributes:
        ranges: ``{group: (start, stop)}``, the agents of each group.
        spaces: ``{group: ActionSpace}`` (``physical_dim``: the widest arity of the group's agents).
        space: The ``ActionSpace`` of the one tensor ``step`` takes: the only group's, the
            continuous command ``[E, A, D]`` where every group is continuous, else ``None`` (``step``
            takes only a mapping by group).
        buffer: The tensor such a tensor is copied into: the world's [E, A, D] action buffer
            (continuous) or the [E, A, width] int64 index buffer; ``None`` where ``space`` is.
        indices: The int64 index buffer ``[E, A, W]`` (``W``: the widest discrete group's width),
            or ``None`` without discrete groups.
    """

    def __init__(self, core, kind, nvec):
        stepper = core.stepper
        self.core = core
        self.ranges = group_ranges(core.options.spec.groups, stepper.n_agents)
        names = list(self.ranges)
        kinds = per_group(kind, names, "action_space", "continuous")
        levels = per_group(nvec, names, "action_nvec", None)
        arity = [agent.act_dim for agent in core.options.spec.agents]
        self.spaces = {}
        for name, (start, stop) in self.ranges.items():
            try:
                self.spaces[name] = ActionSpace.build(kinds[name], levels[name], max(arity[start:stop]))
            except (TypeError, ValueError) as error:
                if len(names) == 1:
                    raise
                raise type(error)(f"group {name!r}: {error}") from None
        self._views: dict[str, torch.Tensor] = {}
        self._indices: wp.array | None = None
        self.indices: torch.Tensor | None = None
        discrete = [name for name in names if self.spaces[name].discrete]
        if discrete:
            width = max(self.spaces[name].width for name in discrete)
            shape = (core.n_envs, stepper.n_agents, width)
            self._indices = env_arrays.zeros("world.action_indices", shape, wp.int64, core.device)
            self.indices = wp.to_torch(self._indices)
            self._build_decode(discrete)
        for name, (start, stop) in self.ranges.items():
            space = self.spaces[name]
            target = self.indices if space.discrete else core.world.actions
            self._views[name] = target[:, start:stop, : space.width]
        if len(names) == 1:
            self.space = self.spaces[names[0]]
        elif not discrete:
            self.space = ActionSpace("continuous", stepper.act_dim)
        else:
            self.space = None
        self.buffer = None if self.space is None else self._views[names[0]] if len(names) == 1 else core.world.actions

    def _build_decode(self, discrete: list[str]) -> None:
        """The decode's per-agent tables: kind code [A] and levels [A, D] (0: a column the agent's
        group does not have), in Warp and torch."""
        core = self.core
        stepper = core.stepper
        kinds = torch.zeros(stepper.n_agents, dtype=torch.int32)
        levels = torch.zeros(stepper.n_agents, stepper.act_dim, dtype=torch.int32)
        for name in discrete:
            (start, stop), space = self.ranges[name], self.spaces[name]
            columns = space.physical_dim
            kinds[start:stop] = KIND_CODES[space.kind]
            levels[start:stop, :columns] = torch.tensor(space.nvec, dtype=torch.int32)
        low, high = stepper.model.action_bounds(core.torch_device, core.dtype)
        self._bounds_torch = (low, high)
        self._discrete = [(name, *self.ranges[name]) for name in discrete]
        self._nvec_torch = {
            name: torch.tensor(self.spaces[name].nvec, dtype=torch.int64, device=core.torch_device) for name in discrete
        }
        self._low, self._high = wp.from_torch(low.contiguous()), wp.from_torch(high.contiguous())
        self._kinds = wp.array(kinds.numpy(), dtype=wp.int32, device=core.device)
        self._levels = wp.array(levels.numpy(), dtype=wp.int32, device=core.device)

    def groups(self, obs_dims: Mapping[str, int]) -> tuple[AgentGroup, ...]:
        """The ``AgentGroup`` records, given each group's observation width."""
        return tuple(
            AgentGroup(name, start, stop, obs_dims[name], self.spaces[name])
            for name, (start, stop) in self.ranges.items()
        )

    def check(self, actions, name: str = "actions") -> None:
        """Raise a clear error unless ``actions`` fits: a tensor of ``space`` (shape, dtype,
        device), or a mapping with one tensor per group, each fitting its group's space. Reads no
        values (out-of-range indices raise ``invalid_actions()`` on the device)."""
        core = self.core
        if not isinstance(actions, Mapping):
            if self.space is None:
                raise TypeError(
                    f"{name} must be a mapping of tensors by group {list(self.ranges)}: the groups' action "
                    f"spaces differ, so no one tensor holds them (got {type(actions).__name__})"
                )
            self.space.check(actions, core.n_envs, core.stepper.n_agents, core.torch_device, core.dtype, name)
            return
        names = list(self.ranges)
        unknown, missing = sorted(set(actions) - set(names)), [n for n in names if n not in actions]
        if unknown or missing:
            problem = f"unknown group(s) {unknown}" if unknown else f"no actions for group(s) {missing}"
            raise ValueError(f"{name} has {problem}; the groups are {names}")
        for group, (start, stop) in self.ranges.items():
            space = self.spaces[group]
            space.check(actions[group], core.n_envs, stop - start, core.torch_device, core.dtype, f"{name}[{group!r}]")

    def write(self, actions) -> None:
        """Copy checked ``actions`` (a tensor or a mapping by group) into the buffers."""
        if isinstance(actions, torch.Tensor):
            self.buffer.copy_(actions)
        else:
            for group, view in self._views.items():
                view.copy_(actions[group])

    def join(self, actions) -> torch.Tensor:
        """The [E, A, D] physical command of checked continuous ``actions`` (a tensor, or a mapping
        by group whose narrower groups are padded with zero columns), keeping their autograd history."""
        if isinstance(actions, torch.Tensor):
            return actions
        if self.space is None or self.space.discrete:
            raise ValueError("a grad-mode step takes continuous actions")
        return join(actions, list(self.ranges), self.space.physical_dim)

    def launch_decode(self, launcher: Launcher) -> None:
        """Decode the index buffer into the world's action buffer (no-op without discrete groups)."""
        if self._indices is None:
            return
        core = self.core
        launcher.launch(
            decode_kernel(core.stepper.scalar),
            dim=(core.n_envs, core.stepper.n_agents),
            inputs=[self._indices, self._kinds, self._levels, self._low, self._high],
            outputs=[core.world.actions_array, core.world.invalid_action_flag],
            device=core.device,
        )

    def decode_torch(self) -> None:
        """``launch_decode`` in torch (the torch reference's step; capture-safe, no host sync)."""
        if self._indices is None:
            return
        world = self.core.world
        low, high = self._bounds_torch
        flag = wp.to_torch(world.invalid_action_flag)
        for name, start, stop in self._discrete:
            space = self.spaces[name]
            columns = space.physical_dim
            command, bad = decode_torch(
                space, self._views[name], low[start:stop, :columns], high[start:stop, :columns], self._nvec_torch[name]
            )
            world.actions[:, start:stop, :columns] = command
            flag.copy_(torch.maximum(flag, bad.any().to(flag.dtype).reshape(1)))
