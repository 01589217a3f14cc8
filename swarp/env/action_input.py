"""The environment's action input: its agent groups' ``ActionSpace`` s, the buffers ``step`` copies
actions into, their checks, and the decode of discrete indices and messages.

Continuous actions go straight into the world's action buffer ``[E, A, D]``, as before. Discrete
ones go into an int64 index buffer ``[E, A, W]``; the step's first physics launch decodes them
into the physical command (``decode``: ``swarp.runtime.actions``, folded into the fused substep,
else a launch of its own before it), the torch reference with ``decode_torch``
(``swarp.core.spaces`` documents the mapping). CPU shards view the index buffer and decode their
own rows. Messages (``WorldSpec.comm_dim``) ride along: a continuous group's message columns go
into a raw buffer that the same decode clamps into ``comm``; a discrete group's message choice is
its index's last digit, decoded one-hot into ``comm``.

With agent groups (``swarp.core.groups``) each group has its own space over its own agents and
columns: ``step`` takes a mapping by group, whose tensors are copied into their group's views of
the buffers, and one decode serves every group (per-agent tables of kinds, levels and channel
widths; continuous silent agents are skipped).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.groups import AgentGroup, group_ranges, join, per_group
from swarp.core.spaces import ActionSpace, continuous_message, decode_message_torch, decode_torch
from swarp.runtime.actions import KIND_CODES, Decode, decode_args


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
        spaces: ``{group: ActionSpace}`` (``physical_dim``: the widest arity of the group's agents;
            ``comm_dim``: the channel's width, 0 for a silent group).
        space: The ``ActionSpace`` of the one tensor ``step`` takes: the only group's, the
            continuous command (and message) ``[E, A, D + C]`` where every group is continuous, else
            ``None`` (``step`` takes only a mapping by group).
        buffer: The tensor such a tensor is copied into as it is: the world's action buffer
            (continuous: ``World.actions_given``, the command then the messages' columns) or the
            [E, A, width] int64 index buffer; ``None`` where ``space`` is.
        indices: The int64 index buffer ``[E, A, W]`` (``W``: the widest discrete group's width),
            or ``None`` without discrete groups.
        comm_dim: C, the channel's width (``WorldSpec.comm_dim``; 0: none).
        comm: The messages sent with the last step's actions ``[E, A, C]`` (sim dtype; a silent
            agent's row 0), or ``None`` without a channel.
        silence: Zeros like ``comm``: what an observation of a fresh start hears.
        comm_array: ``comm`` as a Warp array (a scenario kernel's input), or ``None``.
        raw: The continuous groups' message columns as given ``[E, A, C]`` (the decode clamps
            them into ``comm``), or ``None`` without a continuous group that speaks.
        decode: What the step's physics decodes first (``swarp.runtime.actions.Decode``: the
            tables and buffers, and whether it writes messages), or ``None`` (continuous, silent).
    """

    def __init__(self, core, kind, nvec):
        stepper = core.stepper
        spec = core.options.spec
        self.core = core
        self.ranges = group_ranges(spec.groups, stepper.n_agents)
        names = list(self.ranges)
        kinds = per_group(kind, names, "action_space", "continuous")
        levels = per_group(nvec, names, "action_nvec", None)
        arity = [agent.act_dim for agent in spec.agents]
        self.comm_dim = spec.comm_dim
        silent = {group.name: group.silent for group in spec.groups}
        self.spaces = {}
        for name, (start, stop) in self.ranges.items():
            comm = 0 if silent.get(name, False) else self.comm_dim
            try:
                self.spaces[name] = ActionSpace.build(kinds[name], levels[name], max(arity[start:stop]), comm)
            except (TypeError, ValueError) as error:
                if len(names) == 1:
                    raise
                raise type(error)(f"group {name!r}: {error}") from None
        shape = (core.n_envs, stepper.n_agents)
        self.indices = self._indices = self.comm = self.comm_array = self.silence = self.raw = self._raw = None
        discrete = [name for name in names if self.spaces[name].discrete]
        if discrete:
            width = max(self.spaces[name].width for name in discrete)
            self._indices = env_arrays.zeros("world.action_indices", (*shape, width), wp.int64, core.device)
            self.indices = wp.to_torch(self._indices)
        speaking = [name for name in names if self.spaces[name].comm_dim]
        if speaking:
            channel = (*shape, self.comm_dim)
            self.comm_array = env_arrays.zeros("world.comm", channel, stepper.scalar, core.device)
            self.comm = wp.to_torch(self.comm_array)
            self.silence = torch.zeros_like(self.comm)
            if any(not self.spaces[name].discrete for name in speaking):
                # The message columns of the world's one action buffer (``World.actions_given``).
                self.raw = core.world.actions_given[..., stepper.act_dim :]
                self._raw = wp.from_torch(self.raw, dtype=stepper.scalar)
        self._views = {name: self._group_views(name) for name in names}
        #: What the step's physics decodes first (``swarp.runtime.actions.Decode``), or ``None``.
        self.decode = None
        if discrete or speaking:
            self._build_decode(discrete, speaking)
        all_continuous = not discrete
        if len(names) == 1:
            self.space = self.spaces[names[0]]
        elif all_continuous:
            self.space = ActionSpace("continuous", stepper.act_dim, (), self.comm_dim if speaking else 0)
        else:
            self.space = None
        self.buffer = None
        if self.space is not None and all_continuous:
            self.buffer = core.world.actions_given  # with messages: command and messages in one copy
        elif self.space is not None:
            self.buffer = self._views[names[0]][0]

    def _group_views(self, name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Where group ``name``'s actions go: its rows of the index buffer (discrete) or of the
        command buffer, and of the raw message buffer (a continuous group with a channel)."""
        (start, stop), space = self.ranges[name], self.spaces[name]
        if space.discrete:
            return self.indices[:, start:stop, : space.width], None
        physical = self.core.world.actions[:, start:stop, : space.physical_dim]
        raw = self.raw[:, start:stop] if space.comm_dim else None
        return physical, raw

    def _build_decode(self, discrete: list[str], speaking: list[str]) -> None:
        """The decode's per-agent tables: kind code [A], levels [A, D] (0: a column the agent's
        group does not have) and channel width [A] (0: silent), in Warp and torch."""
        core = self.core
        stepper = core.stepper
        kinds = torch.zeros(stepper.n_agents, dtype=torch.int32)
        levels = torch.zeros(stepper.n_agents, stepper.act_dim, dtype=torch.int32)
        speaks = torch.zeros(stepper.n_agents, dtype=torch.int32)
        for name, (start, stop) in self.ranges.items():
            space = self.spaces[name]
            speaks[start:stop] = space.comm_dim
            if space.discrete:
                kinds[start:stop] = KIND_CODES[space.kind]
                levels[start:stop, : space.physical_dim] = torch.tensor(space.nvec, dtype=torch.int32)
        low, high = stepper.model.action_bounds(core.torch_device, core.dtype)
        self._bounds_torch = (low, high)
        self._discrete = [(name, *self.ranges[name]) for name in discrete]
        self._continuous_speaking = [(name, *self.ranges[name]) for name in speaking if name not in discrete]
        device = core.torch_device
        self._choices = {
            name: torch.tensor(self.spaces[name].choices, dtype=torch.int64, device=device) for name in discrete
        }
        self._speaking = (speaks > 0).to(device=device, dtype=core.dtype).view(-1, 1)
        self._low, self._high = wp.from_torch(low.contiguous()), wp.from_torch(high.contiguous())
        args = decode_args(stepper.scalar)()
        args.indices, args.low, args.high = self._indices, self._low, self._high
        args.kinds = wp.array(kinds.numpy(), dtype=wp.int32, device=core.device)
        args.levels = wp.array(levels.numpy(), dtype=wp.int32, device=core.device)
        if speaking:
            args.speaks = wp.array(speaks.numpy(), dtype=wp.int32, device=core.device)
            args.raw, args.message = self._raw, self.comm_array
        self.decode = Decode(args, self.comm_dim if speaking else 0)

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
            if self.buffer is not None:
                self.buffer.copy_(actions)
            else:
                self.write_joined(actions)
            return
        for group, (target, raw) in self._views.items():
            part = actions[group]
            if raw is None:
                target.copy_(part)
            else:
                columns = target.shape[-1]
                target.copy_(part[..., :columns])
                raw.copy_(part[..., columns:])

    def join(self, actions) -> torch.Tensor:
        """The [E, A, D + C] command and message of checked continuous ``actions`` (a tensor, or a
        mapping by group whose narrower groups are padded with zero columns), keeping their
        autograd history."""
        if isinstance(actions, torch.Tensor):
            return actions
        if self.space is None or self.space.discrete:
            raise ValueError("a grad-mode step takes continuous actions")
        names = list(self.ranges)
        physical_dim = self.core.stepper.act_dim
        if not self.space.comm_dim:
            return join(actions, names, physical_dim)
        commands = {name: actions[name][..., : self.spaces[name].physical_dim] for name in names}
        messages = {name: actions[name][..., self.spaces[name].physical_dim :] for name in names}
        return torch.cat([join(commands, names, physical_dim), join(messages, names, self.comm_dim)], dim=-1)

    def physical(self, joined: torch.Tensor) -> torch.Tensor:
        """The [E, A, D] command of ``join``'s [E, A, D + C] (``joined`` itself without a channel)."""
        return joined[..., : self.core.stepper.act_dim] if self._raw is not None else joined

    def write_joined(self, joined: torch.Tensor) -> None:
        """Copy ``join``'s [E, A, D + C] into the world's action buffer (one copy)."""
        self.core.world.actions_given.copy_(joined)

    def messages_of(self, joined: torch.Tensor) -> torch.Tensor | None:
        """The [E, A, C] messages of ``join``'s continuous ``joined`` [E, A, D + C] with its autograd
        history (silent agents' rows 0); ``None`` without a channel."""
        if self._raw is None:
            return None
        message, _ = continuous_message(joined[..., self.core.stepper.act_dim :])
        return message * self._speaking

    def continuous_speaking_rows(self) -> torch.Tensor | None:
        """[A] bool on the env's device: the agents whose continuous actions carry messages, or
        ``None`` where no continuous action does (``Environment.action_bounds``)."""
        if self.raw is None:
            return None
        rows = torch.zeros(self.core.stepper.n_agents, dtype=torch.bool, device=self.core.torch_device)
        for name, (start, stop) in self.ranges.items():
            space = self.spaces[name]
            rows[start:stop] = bool(space.comm_dim) and not space.discrete
        return rows

    def decode_torch(self) -> None:
        """The decode in torch (the torch reference's step; capture-safe, no host sync)."""
        if self._indices is None and self.comm_array is None:
            return
        world = self.core.world
        low, high = self._bounds_torch
        flag = wp.to_torch(world.invalid_action_flag)
        for name, start, stop in self._discrete:
            space = self.spaces[name]
            columns = space.physical_dim
            view = self._views[name][0]
            command, bad = decode_torch(
                space, view, low[start:stop, :columns], high[start:stop, :columns], self._choices[name]
            )
            world.actions[:, start:stop, :columns] = command
            if space.comm_dim:
                self.comm[:, start:stop] = decode_message_torch(space, view, bad, self.comm.dtype)
            flag.copy_(torch.maximum(flag, bad.any().to(flag.dtype).reshape(1)))
        for name, start, stop in self._continuous_speaking:
            message, bad = continuous_message(self._views[name][1])
            self.comm[:, start:stop] = message
            flag.copy_(torch.maximum(flag, bad.any().to(flag.dtype).reshape(1)))
