"""The environment's action input: its ``ActionSpace``, the buffer ``step`` copies actions into,
their checks, and the decode of discrete indices into the physical command.

Continuous actions go straight into the world's action buffer, as before. Discrete ones go into an
int64 index buffer ``[E, A, width]``; the step's first launch (``launch_decode``, inside the
captured step) or, on the torch reference, ``decode_torch`` writes the physical command from it
(``swarp.core.spaces`` documents the mapping). CPU shards view the index buffer and decode their
own rows.
"""

from __future__ import annotations

import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.spaces import ActionSpace, decode_torch
from swarp.runtime.actions import decode_kernel
from swarp.runtime.launch import Launcher


class ActionInput:
    """What ``step`` accepts and where it goes (module docstring).

    Args:
        core: The environment's ``EnvCore`` (its stepper, world and sizes).
        kind: ``"continuous"``, ``"discrete"`` or ``"multidiscrete"``.
        nvec: Levels per physical column for the discrete kinds (``ActionSpace.build``).

    Attributes:
        space: The ``ActionSpace``.
        buffer: The tensor ``step`` copies actions into: the world's [E, A, D] action buffer
            (continuous) or the [E, A, width] int64 index buffer.
    """

    def __init__(self, core, kind: str, nvec):
        stepper = core.stepper
        self.core = core
        self.space = ActionSpace.build(kind, nvec, stepper.act_dim)
        self._indices: wp.array | None = None
        if not self.space.discrete:
            self.buffer = core.world.actions
            return
        shape = (core.n_envs, stepper.n_agents, self.space.width)
        self._indices = env_arrays.zeros("world.action_indices", shape, wp.int64, core.device)
        self.buffer = wp.to_torch(self._indices)
        low, high = stepper.model.action_bounds(core.torch_device, core.dtype)
        self._bounds_torch = (low, high)
        self._nvec_torch = torch.tensor(self.space.nvec, dtype=torch.int64, device=core.torch_device)
        self._low, self._high = wp.from_torch(low.contiguous()), wp.from_torch(high.contiguous())
        self._nvec = wp.array(list(self.space.nvec), dtype=wp.int32, device=core.device)

    def check(self, actions: torch.Tensor, name: str = "actions") -> None:
        """Raise a clear error unless ``actions`` fits the space (shape, dtype, device); reads no
        values (out-of-range indices raise ``invalid_actions()`` on the device)."""
        core = self.core
        self.space.check(actions, core.n_envs, core.stepper.n_agents, core.torch_device, core.dtype, name)

    def launch_decode(self, launcher: Launcher) -> None:
        """Decode the index buffer into the world's action buffer (no-op when continuous)."""
        if self._indices is None:
            return
        core = self.core
        launcher.launch(
            decode_kernel(core.stepper.scalar),
            dim=(core.n_envs, core.stepper.n_agents),
            inputs=[self._indices, self._nvec, int(self.space.kind == "discrete"), self._low, self._high],
            outputs=[core.world.actions_array, core.world.invalid_action_flag],
            device=core.device,
        )

    def decode_torch(self) -> None:
        """``launch_decode`` in torch (the torch reference's step; capture-safe, no host sync)."""
        if self._indices is None:
            return
        world = self.core.world
        command, bad = decode_torch(self.space, self.buffer, *self._bounds_torch, self._nvec_torch)
        world.actions.copy_(command)
        flag = wp.to_torch(world.invalid_action_flag)
        flag.copy_(torch.maximum(flag, bad.any().to(flag.dtype).reshape(1)))
