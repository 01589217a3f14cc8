"""World: a Stepper bound to a batch of ``n_envs`` envs, with its persistent state and buffers.

This is the no-grad hot path's owner. It keeps the neighbor lists current after every step (so
observations and the next step's contacts can read them without a rebuild), owns the persistent
action buffer a recorded program or CUDA graph reads from, and owns that recorded program:
anything that reallocates or changes what was recorded (obstacles, parameters) invalidates it.
"""

from __future__ import annotations

import torch
import warp as wp

from swarp.core import env_arrays
from swarp.core.types import State
from swarp.physics.neighbors import bin_agents
from swarp.physics.step import Stepper
from swarp.runtime.actions import Decode
from swarp.runtime.launch import EAGER, Launcher, Program, Recorder
from swarp.runtime.sequence import CompiledSequence, TorchStreamScope


class World:
    """A batch of ``n_envs`` worlds sharing one ``Stepper``.

    Attributes:
        stepper: The step pipeline.
        n_envs: E.
        state: Persistent ``State`` [E, A], updated in place by ``step``.
        neighbors: Persistent ``NeighborBuffers``; valid for ``state`` after every ``step`` and
            every ``build_neighbors``.
        actions: ``torch.Tensor`` [E, A, act_dim], the persistent action buffer the launches read.
        actions_given: ``torch.Tensor`` [E, A, act_dim + message_columns], contiguous: ``actions``
            followed by the messages' columns (``actions`` itself without them), so that actions
            and messages given as one tensor are one copy.
        non_finite_flags: ``wp.array(int32)`` [E], sticky health flags: env ``e``'s is set once a
            state (or, in an ``Environment``, an observation or reward) of env ``e`` went non-finite
            (``swarp.runtime.health``).
        alive: ``wp.array2d(bool)`` [E, A], which agents act, collide and are listed
            (``swarp.runtime.alive``; all true until a scenario's reset writes it), or ``None``
            where the world was built without one (``alive_mask``).
    """

    def __init__(self, stepper: Stepper, n_envs: int, message_columns: int = 0, alive_mask: bool = False):
        self.stepper = stepper
        self.n_envs = n_envs
        # Named for swarp.core.env_arrays: a CPU shard's world views its environment's.
        self.state = stepper.allocate_state(n_envs, name="state")
        self.neighbors = stepper.allocate_neighbors(n_envs, name="neighbors")
        self.forces = stepper.allocate_forces(n_envs)
        self.invalid_action_flag = wp.zeros(1, dtype=wp.int32, device=stepper.device)
        self.non_finite_flags = env_arrays.zeros("flags.non_finite", (n_envs,), wp.int32, stepper.device)
        shape = (n_envs, stepper.n_agents, stepper.act_dim + message_columns)
        self.actions_given = wp.to_torch(env_arrays.zeros("world.actions", shape, stepper.scalar, stepper.device))
        self.actions = self.actions_given[..., : stepper.act_dim] if message_columns else self.actions_given
        self._actions_wp = wp.from_torch(self.actions, dtype=stepper.scalar)
        self.alive: wp.array | None = None
        if alive_mask:
            self.alive = env_arrays.full("world.alive", (n_envs, stepper.n_agents), True, wp.bool, stepper.device)
            stepper.set_alive(self.alive)
            self.neighbors.alive = self.alive
        self._program: Program | CompiledSequence | None = None
        self.build_neighbors()
        # The zeroed placeholder state stacks every agent on the origin; truncating those lists is
        # no event the caller should see, so the sticky flag starts lowered.
        self.clear_neighbor_overflow()

    @property
    def actions_array(self) -> wp.array:
        """The action buffer as a Warp array ([E, A, act_dim]; ``actions`` is its torch view)."""
        return self._actions_wp

    @property
    def model(self):
        """The stepper's static ``Model``."""
        return self.stepper.model

    @property
    def n_agents(self) -> int:
        return self.stepper.n_agents

    def simulate(
        self, launcher: Launcher = EAGER, rebuild_neighbors: bool = True, decode: Decode | None = None
    ) -> None:
        """The launches of one step from the action buffer: substeps, then the neighbor rebuild;
        ``decode``: discrete actions or messages to decode into the action buffer first
        (``Stepper.simulate``).

        With ``rebuild_neighbors=False`` the lists are left for the caller to rebuild: only the
        grid binning runs (``prepare_neighbors``), and a later kernel must build every agent's list
        through ``neighbor_query`` before anything reads them (a scenario's observation kernel
        does this to save a launch).
        """
        self.stepper.simulate(
            self.state,
            self._actions_wp,
            self.neighbors,
            self.forces,
            self.invalid_action_flag,
            launcher,
            neighbors_valid=True,
            non_finite_flag=self.non_finite_flags,
            decode=decode,
        )
        if rebuild_neighbors:
            self.build_neighbors(launcher=launcher)
        else:
            self.prepare_neighbors(launcher)

    def prepare_neighbors(self, launcher: Launcher = EAGER) -> None:
        """Everything of a neighbor rebuild except the per-agent queries (grid binning; none for brute)."""
        if self.stepper.neighbor_method == "grid":
            bin_agents(self.state.pos, self.model.neighbor_radius, self.neighbors, launcher)

    def neighbor_query(self, env_mask: wp.array | None = None):
        """The ``NeighborQuery`` struct that builds this world's lists from inside other kernels
        (call ``prepare_neighbors`` first); see ``physics.neighbors.query_struct``."""
        return self.neighbors.query(self.state.pos, self.model.neighbor_radius, self.model.near_radius, env_mask)

    def step(self, actions: torch.Tensor) -> None:
        """Advance every env by one step (no-grad, in place).

        Args:
            actions: [E, A, act_dim] tensor, sim dtype and device, physical units. Non-finite
                entries act as 0 and raise ``invalid_actions()``.
        """
        self.stepper.check_actions(actions, self.n_envs)
        self.actions.copy_(actions)
        self.run_step()

    def run_step(self) -> None:
        """One step from whatever is in ``actions``: replay the recorded program (eager launches
        where ``stepper.plan.launch`` is ``"eager"``; with ``plan.compile_torch``, the CPU torch
        step compiled, a Warp CPU graph of the launches)."""
        plan = self.stepper.plan
        if plan.launch == "eager":
            self.simulate(EAGER)
        elif plan.compile_torch:
            if self._program is None:
                self._program = CompiledSequence(self.simulate, "graph", self.stepper.device, TorchStreamScope("cpu"))
            self._program()
        elif self._program is None:
            recorder = Recorder()
            self.simulate(recorder)
            self._program = recorder.program(source=self.simulate)
        else:
            self._program()

    def invalidate(self) -> None:
        """Drop the recorded program (call after changing anything it recorded)."""
        self._program = None

    def build_neighbors(self, env_mask: wp.array | None = None, launcher: Launcher = EAGER) -> None:
        """Rebuild the neighbor lists of all envs, or of those where ``env_mask`` [E] bool is set."""
        self.stepper.build_neighbors(self.state.pos, self.neighbors, env_mask, launcher)

    def neighbor_overflow(self) -> torch.Tensor:
        """0-d bool device tensor: has any neighbor list been truncated since the last clear?"""
        return wp.to_torch(self.neighbors.overflow)[0] != 0

    def clear_neighbor_overflow(self) -> None:
        """Reset the sticky overflow flag (device-side)."""
        self.neighbors.overflow.zero_()

    def invalid_actions(self) -> torch.Tensor:
        """0-d bool device tensor: has a non-finite action been seen since the last clear?"""
        return wp.to_torch(self.invalid_action_flag)[0] != 0

    def clear_invalid_actions(self) -> None:
        """Lower the sticky invalid-action flag (device-side)."""
        self.invalid_action_flag.zero_()

    def non_finite(self) -> torch.Tensor:
        """0-d bool device tensor: has any env's state gone non-finite since the last clear? (A
        device reduction over ``non_finite_flags``: no host sync.)"""
        return wp.to_torch(self.non_finite_flags).any()

    def non_finite_envs(self) -> torch.Tensor:
        """[n] int64 indices of the envs whose flag is raised, ascending (one host sync)."""
        return torch.nonzero(wp.to_torch(self.non_finite_flags)).flatten()

    def clear_non_finite(self) -> None:
        """Lower every env's health flag (device-side)."""
        self.non_finite_flags.zero_()

    def neighbor_lists(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(nbr [E, A, K] int32, count [E, A] int32)``: neighbors nearest first, ``-1`` past ``count``.

        ``nbr`` is a padded copy (the storage is K-major and holds stale entries past ``count``);
        ``count`` is a zero-copy view. For the raw storage use ``neighbors.nbr`` [E, K, A].
        """
        raw = wp.to_torch(self.neighbors.nbr).permute(0, 2, 1)
        count = wp.to_torch(self.neighbors.count)
        slots = torch.arange(raw.shape[2], device=raw.device)
        return torch.where(slots < count.unsqueeze(-1), raw, torch.full_like(raw, -1)), count

    def edge_index(self, compact: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """COO radius graph over the whole batch, agents numbered ``env * A + agent``.

        Args:
            compact: ``False`` (default, no host sync): returns ``(edge_index [2, E*A*K] int64,
                valid [E*A*K] bool)`` with padding edges marked invalid. ``True``: returns only the
                valid edges, ``[2, n_edges]`` int64; this needs a device-to-host sync for the size.

        Edges point from neighbor (source, row 0) to agent (target, row 1), PyG's convention.
        """
        nbr, _ = self.neighbor_lists()
        n_envs, n_agents, max_k = nbr.shape
        base = torch.arange(n_envs, device=nbr.device).view(n_envs, 1, 1) * n_agents
        target = (base + torch.arange(n_agents, device=nbr.device).view(1, n_agents, 1)).expand(-1, -1, max_k)
        valid = nbr >= 0
        source = torch.where(valid, nbr.long() + base, torch.zeros_like(target))
        edges = torch.stack([source.reshape(-1), target.reshape(-1)])
        if compact:
            return edges[:, valid.reshape(-1)]
        return edges, valid.reshape(-1)

    def set_state(self, **fields: torch.Tensor) -> None:
        """Overwrite state fields from tensors (e.g. ``pos=[E, A, 2]``) and rebuild the neighbors.

        Every field is checked (name, type, dtype, shape, finite values) before any is written, so
        a rejected call leaves the state as it was."""
        for name, value in fields.items():
            if name not in self.state.torch._fields:
                raise ValueError(f"unknown state field {name!r}; fields: {list(self.state.torch._fields)}")
            view = getattr(self.state.torch, name)
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
            if value.dtype != view.dtype:
                raise TypeError(f"{name} must have dtype {view.dtype}, got {value.dtype}")
            if tuple(value.shape) != tuple(view.shape):
                raise ValueError(f"{name} must have shape {list(view.shape)}, got {list(value.shape)}")
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                index = tuple(torch.nonzero(~torch.isfinite(value))[0].tolist())
                raise ValueError(f"{name} must be finite, got {value[index].item()} at index {list(index)}")
        for name, value in fields.items():
            getattr(self.state.torch, name).copy_(value)
        self.build_neighbors()


__all__ = ["World", "State"]
