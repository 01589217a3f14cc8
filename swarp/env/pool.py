"""Partial batches: ``EnvPool``, EnvPool-style ``send`` / ``recv`` over groups of envs.

A pool of ``n_envs`` envs is split into ``n_envs // batch_size`` groups of ``batch_size`` envs,
each its own ``Environment`` (group g holds the global envs ``g * batch_size ...``, built with
``env_offset = g * batch_size`` so its resets draw exactly what those envs of one unsplit batch
draw). ``recv`` returns the outputs of one group with their global ``env_id``; ``send`` starts that
group's next step asynchronously (``Environment.send``: a side stream on CUDA, a worker thread on
the CPU) and the caller moves on to the next group. With two groups, one half of the batch steps
while the policy runs on the other half:

```python
pool = swarp.make("navigation", n_envs=4096, batch_size=2048, device="cuda")
pool.async_reset()
for _ in range(n):
    obs, reward, terminated, truncated, info = pool.recv()   # one group, info["env_id"] [B]
    pool.send(policy(obs), info["env_id"])
```

Groups come back in round-robin order, so every round of ``n_groups`` ``recv`` calls covers every
env exactly once, and the sequence of results is deterministic: each group's trajectory is the
very same bits as the matching rows of one ``Environment`` of ``n_envs`` envs stepped with the
same actions (scenario and episode state are per env; the reset RNG is keyed by global env index).
Outputs are the group's persistent buffers (or clones with ``clone_outputs=True``); they stay
valid until that group's next ``send``.

A pool pickles (and ``copy.deepcopy`` copies it) as its groups, each as what it was built from
(``Environment``'s pickling): unpickling gives a fresh pool of freshly reset groups, ready for
``async_reset`` as after ``swarp.make``; no step, pending ``send`` or state is carried.
"""

from __future__ import annotations

import torch

from swarp.env.asynchronous import AsyncStep
from swarp.env.environment import Environment, check_seed


class EnvPool:
    """``n_envs`` envs stepped ``batch_size`` at a time with ``send`` / ``recv`` (see module doc).

    Args:
        groups: The ``Environment`` of each group, all of one scenario configuration, equal batch
            sizes, one device, group g built with ``env_offset = g * batch_size`` (``swarp.make``
            with ``batch_size`` builds them).

    Attributes:
        n_envs: Total envs E (= n_groups x batch_size).
        batch_size: Envs per group B (the batch ``recv`` returns).
        n_groups: Number of groups G.
        groups: The per-group ``Environment`` objects (for inspection; step them through the pool).

    Pickling and ``copy.deepcopy`` rebuild the pool from its groups' construction arguments (see
    the module doc); the state of the cycle and of the envs is not carried.
    """

    def __init__(self, groups: list[Environment]):
        if not groups or not all(isinstance(g, Environment) for g in groups):
            raise TypeError("groups must be a non-empty list of Environment")
        batch = groups[0].n_envs
        for index, group in enumerate(groups):
            if group.n_envs != batch:
                raise ValueError(f"every group must have {batch} envs, group {index} has {group.n_envs}")
            if group.env_offset != index * batch:
                raise ValueError(f"group {index} must have env_offset {index * batch}, got {group.env_offset}")
            if group.device != groups[0].device:
                raise ValueError("every group must be on one device")
            if group.closed:
                raise ValueError(f"group {index} is closed")
        for group in groups:
            if group.async_step is None:  # each group on its own side stream (CUDA) or worker thread (CPU)
                group.async_step = AsyncStep(group, side_stream=True, cpu_placement="long")
        self.groups = groups
        self.batch_size = batch
        self.n_groups = len(groups)
        self.n_envs = batch * self.n_groups
        device = groups[0].torch_device
        self._env_ids = [torch.arange(g * batch, (g + 1) * batch, device=device) for g in range(self.n_groups)]
        self._next_recv = 0  # the group recv returns next
        self._received: int | None = None  # the group whose outputs the caller holds (awaiting send)
        self._fresh: set[int] = set()  # groups reset and not yet received (their outputs are reset outputs)
        self._closed = False

    def __reduce__(self):
        """Pickle as the groups (each rebuilt from its construction arguments, ``Environment.__reduce__``):
        unpickling builds a new pool over fresh groups. Raises ``TypeError`` where a group does not pickle."""
        return (EnvPool, (list(self.groups),))

    # --- properties shared by every group -----------------------------------------------------

    @property
    def device(self) -> str:
        """Warp device string of every group."""
        return self.groups[0].device

    @property
    def torch_device(self) -> torch.device:
        """torch device of every group."""
        return self.groups[0].torch_device

    @property
    def n_agents(self) -> int:
        """Agents per env A."""
        return self.groups[0].n_agents

    @property
    def obs_dim(self) -> int:
        """Observation width per agent."""
        return self.groups[0].obs_dim

    @property
    def act_dim(self) -> int:
        """Action width per agent."""
        return self.groups[0].act_dim

    @property
    def action_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(low, high)`` [A, act_dim] physical action bounds (as ``Environment.action_bounds``)."""
        return self.groups[0].action_bounds

    # --- stepping --------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"the EnvPool is closed: {what}() cannot run after close(); build a new one")

    def async_reset(self, seed: int | None = None) -> None:
        """Reset every env (with ``seed``: restart the reset RNG from it, as ``Environment.reset``).

        May be called at any point of the ``recv`` / ``send`` cycle: steps still pending from
        ``send`` are finished first and their outputs dropped. The next ``n_groups`` ``recv`` calls
        return the groups' reset outputs (reward 0, flags False) in order 0, 1, ...; ``send`` then
        steps them.

        Raises:
            ValueError: ``seed`` is not an int in [0, 2^31) (nothing is changed).
            RuntimeError: the pool is closed.
        """
        self._check_open("async_reset")
        if seed is not None:
            check_seed(seed)  # before anything changes
        for group in self.groups:
            if group.async_step.pending:
                group.async_step.wait()
        for group in self.groups:
            group.reset(seed=seed)
            group.reward.zero_()
        self._next_recv = 0
        self._received = None
        self._fresh = set(range(self.n_groups))

    def recv(self):
        """The next group's outputs: ``(obs [B, A, obs_dim], reward [B, A], terminated [B],
        truncated [B], info)`` with ``info["env_id"]`` the [B] int64 global env ids of the rows.

        Waits (on the device, no host sync on CUDA) for that group's pending step.

        Raises:
            RuntimeError: before ``async_reset``, when the previous ``recv``'s group was not sent
                yet (send it first: groups cycle in order), or after ``close``.
        """
        self._check_open("recv")
        if self._received is not None:
            raise RuntimeError(
                f"recv() was called while group {self._received} (received last) awaits send(); send its actions first"
            )
        g = self._next_recv
        group = self.groups[g]
        if g in self._fresh:
            self._fresh.discard(g)
            outputs = group.outputs()
        elif group.async_step.pending:
            outputs = group.recv()
        else:
            raise RuntimeError("recv() was called before async_reset()")
        self._received = g
        self._next_recv = (g + 1) % self.n_groups
        *tensors, info = outputs
        return (*tensors, {**info, "env_id": self._env_ids[g]})

    def send(self, actions: torch.Tensor, env_id: torch.Tensor | None = None) -> None:
        """Start the next step of the group ``recv`` returned last, with ``actions`` [B, A, act_dim].

        Args:
            actions: Physical actions of that group's envs, in the row order of its ``recv`` (with
                agent groups, ``Environment.step``'s mapping by agent group).
            env_id: Optional: the ``info["env_id"]`` tensor that ``recv`` returned with the group,
                checked to be that group's (by identity: no device read).

        Raises:
            RuntimeError: no group awaits actions (``send`` without a ``recv`` before it), or the
                pool is closed.
            ValueError: ``env_id`` is not the id tensor of the group awaiting actions, or
                ``actions`` is not [B, A, act_dim] (the group still awaits them).
            TypeError: ``actions`` is not a tensor of the simulator's dtype.
        """
        self._check_open("send")
        g = self._received
        if g is None:
            raise RuntimeError("send() was called without a recv() before it: recv() returns the group to act on")
        if env_id is not None and env_id is not self._env_ids[g]:
            raise ValueError(
                f"env_id must be the info['env_id'] tensor recv() returned for group {g} (envs "
                f"{g * self.batch_size}..{(g + 1) * self.batch_size - 1}); partial batches step whole groups"
            )
        if isinstance(actions, torch.Tensor) and actions.shape != (self.batch_size, self.n_agents, self.act_dim):
            expected = (self.batch_size, self.n_agents, self.act_dim)
            raise ValueError(
                f"actions must have shape [batch_size, n_agents, act_dim] = {list(expected)} (the envs of the "
                f"group recv() returned), got {list(actions.shape)}"
            )
        self.groups[g].send(actions)  # checks the rest; on an error the group still awaits actions
        self._received = None

    def close(self) -> None:
        """Close every group (``Environment.close``: pending steps finished and dropped, worker
        threads stopped). Idempotent; afterwards ``recv``, ``send`` and ``async_reset`` raise
        ``RuntimeError``."""
        if self._closed:
            return
        self._closed = True
        self._received = None
        self._fresh = set()
        for group in self.groups:
            group.close()
