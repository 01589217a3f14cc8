"""VMAS's action processing: from a policy's actions to the agents' action forces and messages.

VMAS 1.5.2 turns each policy agent's action into the force and torque ``World.step`` applies in three
places (docs/vmas_reference.md, section 2): ``Environment._set_action`` (the discrete mapping, the
``u_range`` check, ``u_multiplier``, ``u_noise``, the message), the scenario's ``process_action`` hook
and the dynamics' ``process_action`` (``state.force`` / ``state.torque`` from ``u``). ``VmasActions``
does the first and the last, batched over agents, in VMAS's float32 operations, so the forces equal
VMAS's to the bit (tests/physics/test_vmas_actions.py):

1. **Decode** (``VmasActions.decode``). Each agent's action in its own layout (VMAS's): continuous,
   ``action_size`` physical columns then, for a speaking agent, ``comm_dim`` message columns;
   ``discrete``, one flat index (the first column most significant, the message's choice the least);
   ``multidiscrete``, one index per physical column (and one for the message). A discrete index maps
   to VMAS's levels ``l / (n - 1) * 2u - u`` through ``swarp.core.spaces.decode_torch``, whose bits are
   VMAS's on the symmetric box ``[-u_range, u_range]``; a message is clamped to ``[0, 1]``
   (continuous) or one-hot (discrete).
2. **Scale** (``VmasActions.scale``). ``u *= u_multiplier``, then ``u += noise * u_noise``.
3. **Dynamics** (``VmasActions.forces``). ``holonomic``: ``force = u[:2]``; ``holonomic_rotation``:
   also ``torque = u[2]``. The forces land in the agents' rows of the entity table (landmark rows 0),
   the ``force`` / ``torque`` that ``VmasTorchStep`` takes.

**Out-of-box and bad actions: swarp's rule, not VMAS's assert.** VMAS asserts ``|u| <= u_range`` (and
messages in ``[0, 1]``, indices in range) unless ``clamp_actions``, which clamps. A step that may run
inside a CUDA graph cannot raise on a value, so here, as in the rest of swarp's physics, a continuous
physical column is clamped to ``[-u_range, u_range]`` (the identity on every action VMAS accepts) and a
message to ``[0, 1]``; a non-finite entry acts as 0, and an out-of-range index makes the agent's
command and message 0; both set the agent's entry of ``ProcessedActions.bad``, which the engine turns
into ``invalid_actions()``. The checks VMAS's API makes (an error without ``clamp_actions``) belong to
the API layer: ``swarp.vmas`` checks or clamps against ``env.action_bounds`` before a step.

**Noise: drawn by the caller.** VMAS draws ``u_noise``'s normals with ``torch.randn`` from its global
stream, policy agent by policy agent, which a captured step cannot replay. Here the standard normals
are an argument, ``noise`` [E, A, D] (and ``comm_noise`` [E, A, C] for ``c_noise``): a caller with
VMAS's stream passes VMAS's draws and gets VMAS's bits (the tests do), and the engine passes a
counter-based draw of its own (the same distribution, different draws).

**One documented difference.** VMAS reads a continuous message from column 2 (``dim_p``) whatever the
agent's ``action_size`` (a latent bug: an agent with three physical columns would send its torque
column as the message's first entry). Here the message follows the agent's ``action_size`` columns.

Only the dynamics in ``DYNAMICS`` are modelled; scripted agents (``action_script``) and the scenario's
``process_action`` hook are not part of this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from swarp.core.spaces import (
    ACTION_SPACES,
    INDEX_DTYPES,
    ActionSpace,
    continuous_message,
    decode_message_torch,
    decode_torch,
)
from swarp.physics.vmas_mode.entities import EntityTable

#: The dynamics models modelled, by name: the VMAS class each is, and the action columns it needs.
DYNAMICS = {"holonomic": ("Holonomic", 2), "holonomic_rotation": ("HolonomicWithRotation", 3)}
#: VMAS 1.5.2's other dynamics models, refused with a clear message until they are modelled.
UNSUPPORTED_DYNAMICS = ("forward", "rotation", "static", "diff_drive", "kinematic_bicycle", "drone")
#: The action column a ``holonomic_rotation`` agent's torque comes from (VMAS's ``u[:, 2]``).
TORQUE_COLUMN = 2


def as_floats(name: str, value, size: int) -> tuple[float, ...]:
    """``value`` (a number for every column, or one per column) as ``size`` finite floats."""
    values = value if isinstance(value, Sequence) and not isinstance(value, str) else (value,) * size
    if len(values) != size or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ValueError(
            f"AgentAction.{name} must be a number or {size} numbers (one per action column), got {value!r}"
        )
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"AgentAction.{name} must be finite, got {value!r}")
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class AgentAction:
    """One policy agent's action as VMAS's ``Agent`` constructor describes it (its names and defaults).

    Attributes:
        dynamics: ``"holonomic"`` (VMAS's ``Holonomic``, the default) or ``"holonomic_rotation"``
            (``HolonomicWithRotation``); others are refused (``UNSUPPORTED_DYNAMICS``).
        action_size: Physical action columns; ``None``: ``len(nvec)`` where ``nvec`` is given, else the
            columns the dynamics needs (2, 3), as VMAS. Never fewer than the dynamics needs.
        u_range: Bound of each physical column, ``|u| <= u_range`` (a number for every column, or one
            per column), >= 0. Units are the action's: [N] for force columns, [N m] for torque.
        u_multiplier: Factor applied to each column after the range check (VMAS's order).
        u_noise: Standard deviation of the Gaussian noise added to every column after the multiplier
            (0: none), >= 0 (VMAS allows only a scalar here).
        nvec: Levels of each physical column for discrete actions (VMAS's ``discrete_action_nvec``),
            each >= 2; ``None``: 3 per column.
        silent: The agent sends no message (VMAS's default ``True``).
        c_noise: Standard deviation of the noise added to the agent's message (0: none), >= 0.
    """

    dynamics: str = "holonomic"
    action_size: int | None = None
    u_range: float | tuple[float, ...] = 1.0
    u_multiplier: float | tuple[float, ...] = 1.0
    u_noise: float = 0.0
    nvec: tuple[int, ...] | None = None
    silent: bool = True
    c_noise: float = 0.0

    def __post_init__(self) -> None:
        if self.dynamics not in DYNAMICS:
            supported = ", ".join(f"{name!r} (VMAS's {cls})" for name, (cls, _) in DYNAMICS.items())
            later = ", ".join(UNSUPPORTED_DYNAMICS)
            raise ValueError(
                f"AgentAction.dynamics {self.dynamics!r} is not modelled by the VMAS mode; supported: {supported} "
                f"(VMAS's {later} are not yet)"
            )
        needed = DYNAMICS[self.dynamics][1]
        nvec = None if self.nvec is None else tuple(self.nvec)
        size = self.action_size if self.action_size is not None else (len(nvec) if nvec is not None else needed)
        if isinstance(size, bool) or not isinstance(size, int) or size < needed:
            raise ValueError(
                f"AgentAction.action_size must be an int >= {needed} (what {self.dynamics!r} needs), got {size!r}"
            )
        if nvec is not None and (len(nvec) != size or not all(isinstance(n, int) and n >= 2 for n in nvec)):
            raise ValueError(f"AgentAction.nvec must give {size} ints >= 2 (one per action column), got {self.nvec!r}")
        u_range = as_floats("u_range", self.u_range, size)
        if any(u < 0 for u in u_range):
            raise ValueError(f"AgentAction.u_range must be >= 0, got {self.u_range!r}")
        for name in ("u_noise", "c_noise"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < math.inf):
                raise ValueError(f"AgentAction.{name} must be a finite number >= 0, got {value!r}")
        object.__setattr__(self, "action_size", size)
        object.__setattr__(self, "nvec", nvec)
        object.__setattr__(self, "u_range", u_range)
        object.__setattr__(self, "u_multiplier", as_floats("u_multiplier", self.u_multiplier, size))


class ProcessedActions(NamedTuple):
    """What ``VmasActions`` makes of a step's actions, float32 on the table's device.

    Attributes:
        force: [E, N, 2] action force [N] per entity row (VMAS's ``agent.state.force``; landmark rows 0),
            ``VmasTorchStep``'s ``force``.
        torque: [E, N] action torque [N m] per entity row (``agent.state.torque``; 0 where the
            dynamics sets none), ``VmasTorchStep``'s ``torque``.
        u: [E, A, D] the physical command after multiplier and noise (VMAS's ``agent.action.u``;
            columns past an agent's ``action_size`` 0).
        message: [E, A, C] the message sent (``agent.action.c``; zeros for a silent agent).
        bad: [E, A] bool, agents whose action had a non-finite entry or an index out of range.
    """

    force: torch.Tensor
    torque: torch.Tensor
    u: torch.Tensor
    message: torch.Tensor
    bad: torch.Tensor


@dataclass(frozen=True)
class DecodeGroup:
    """Policy agents sharing one discrete ``ActionSpace``, decoded together.

    Attributes:
        space: Their ``ActionSpace``.
        agents: [A_g] int64 policy-agent indices.
        low, high: [A_g, D_g] float32 their box ``-u_range``, ``u_range``.
        choices: [len(space.choices)] int64 ``space.choices``, made once.
    """

    space: ActionSpace
    agents: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    choices: torch.Tensor


class VmasActions:
    """VMAS's action processing for the policy agents of an entity table (module docstring).

    Construction builds every table on the host once; the calls launch torch operations only (no host
    read of a value, no upload), so they run inside a CUDA graph capture, and they are differentiable
    in continuous actions.

    Args:
        agents: One ``AgentAction`` per agent row of ``table``, in row order.
        table: The entity table; its agents must be its last rows (VMAS's ``world.entities``: landmarks,
            then agents), all of them policy agents.
        kind: ``"continuous"``, ``"discrete"`` or ``"multidiscrete"`` (VMAS's ``continuous_actions``,
            ``multidiscrete_actions``), for every agent.
        comm_dim: C, the world's message width (VMAS's ``dim_c``), >= 0.
    """

    def __init__(
        self, agents: Sequence[AgentAction], table: EntityTable, kind: str = "continuous", comm_dim: int = 0
    ) -> None:
        agents = tuple(agents)
        if kind not in ACTION_SPACES:
            raise ValueError(f"kind must be one of {ACTION_SPACES}, got {kind!r}")
        if isinstance(comm_dim, bool) or not isinstance(comm_dim, int) or comm_dim < 0:
            raise ValueError(f"comm_dim must be an int >= 0, got {comm_dim!r}")
        if not all(isinstance(agent, AgentAction) for agent in agents):
            raise TypeError("agents must be AgentAction records, one per agent row of the table")
        is_agent = table.is_agent.tolist()
        n_landmarks = len(is_agent) - len(agents)
        if n_landmarks < 0 or is_agent != [False] * n_landmarks + [True] * len(agents):
            raise ValueError(
                f"the table's agent rows must be its last {len(agents)} rows (one per AgentAction, after the "
                f"landmarks), got is_agent {is_agent}"
            )
        device = table.device
        self.agents, self.kind, self.comm_dim, self.n_landmarks = agents, kind, comm_dim, n_landmarks
        self.spaces = tuple(
            ActionSpace.build(
                kind, None if kind == "continuous" else a.nvec, a.action_size, 0 if a.silent else comm_dim
            )
            for a in agents
        )
        self.physical_dim = max((a.action_size for a in agents), default=DYNAMICS["holonomic"][1])
        self.width = max((space.width for space in self.spaces), default=self.physical_dim)
        dim = self.physical_dim

        def rows(values, pad: float) -> torch.Tensor:
            padded = [list(v) + [pad] * (dim - len(v)) for v in values]
            return torch.tensor(padded, dtype=torch.float32, device=device).reshape(len(agents), dim)

        self.u_range = rows([a.u_range for a in agents], 0.0)  # [A, D]; 0: a column the agent lacks
        self.u_low = -self.u_range
        self.u_multiplier = rows([a.u_multiplier for a in agents], 1.0)
        self.used = rows([[1.0] * a.action_size for a in agents], 0.0) > 0
        self.speaks = torch.tensor([not a.silent for a in agents], dtype=torch.bool, device=device)
        self.rotates = torch.tensor([a.dynamics == "holonomic_rotation" for a in agents], device=device)
        self.u_noise = torch.tensor([[a.u_noise] for a in agents], dtype=torch.float32, device=device)
        self.c_noise = torch.tensor([[a.c_noise] for a in agents], dtype=torch.float32, device=device)
        # Host flags: a term no agent has is skipped, without reading a tensor at call time.
        self.has_u_noise = any(a.u_noise > 0 for a in agents)
        self.has_c_noise = comm_dim > 0 and any(a.c_noise > 0 and not a.silent for a in agents)
        self.has_torque = any(a.dynamics == "holonomic_rotation" for a in agents)
        starts = [[min(a.action_size + c, self.width - 1) for c in range(comm_dim)] for a in agents]
        self.message_columns = torch.tensor(starts, dtype=torch.int64, device=device).reshape(len(agents), comm_dim)
        self.groups = self.decode_groups(device) if kind != "continuous" else ()

    def decode_groups(self, device: torch.device) -> tuple[DecodeGroup, ...]:
        """The agents grouped by ``ActionSpace`` (first appearance order), each with its tables."""
        members: dict[ActionSpace, list[int]] = {}
        for index, space in enumerate(self.spaces):
            members.setdefault(space, []).append(index)
        groups = []
        for space, indices in members.items():
            high = self.u_range[indices][:, : space.physical_dim]
            groups.append(
                DecodeGroup(
                    space=space,
                    agents=torch.tensor(indices, dtype=torch.int64, device=device),
                    low=-high,
                    high=high,
                    choices=torch.tensor(space.choices, dtype=torch.int64, device=device),
                )
            )
        return tuple(groups)

    @property
    def n_agents(self) -> int:
        """A, the policy agents."""
        return len(self.agents)

    def stack(self, actions: Sequence[torch.Tensor]) -> torch.Tensor:
        """VMAS's per-agent actions (``env.step``'s list: [E, width_a], or [E] for a flat index) as the
        [E, A, W] tensor the calls take, each agent's columns first and zeros after them."""
        if len(actions) != self.n_agents:
            raise ValueError(f"expected actions for {self.n_agents} agents, got {len(actions)}")
        columns = [a.unsqueeze(-1) if a.dim() == 1 else a for a in actions]
        return torch.stack([F.pad(a, (0, self.width - a.shape[-1])) for a in columns], dim=1)

    def check(self, actions: torch.Tensor) -> None:
        """Raise unless ``actions`` is [E, A, W] on the table's device, float32 (continuous) or of an
        integer dtype (discrete kinds). Reads no value."""
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor [E, A, W], got {type(actions).__name__}")
        if actions.dim() != 3 or tuple(actions.shape[1:]) != (self.n_agents, self.width):
            raise ValueError(
                f"actions must have shape [E, {self.n_agents}, {self.width}] (E envs, A agents, the widest "
                f"agent's {self.kind} action), got {list(actions.shape)}"
            )
        wanted = (torch.float32,) if self.kind == "continuous" else INDEX_DTYPES
        if actions.dtype not in wanted:
            raise TypeError(f"{self.kind} actions must have dtype {' or '.join(map(str, wanted))}, got {actions.dtype}")
        if actions.device != self.u_range.device:
            raise ValueError(f"actions are on {actions.device}, the table on {self.u_range.device}")

    def decode(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Stage 1: ``(u [E, A, D], message [E, A, C], bad [E, A])`` of ``actions`` [E, A, W] (float32
        physical command in the action's units, clamped to ``u_range``; float32 message; bool)."""
        self.check(actions)
        if self.kind == "continuous":
            return self.decode_continuous(actions)
        n_envs = actions.shape[0]
        u = actions.new_zeros((n_envs, self.n_agents, self.physical_dim), dtype=torch.float32)
        message = u.new_zeros((n_envs, self.n_agents, self.comm_dim))
        bad = actions.new_zeros((n_envs, self.n_agents), dtype=torch.bool)
        for group in self.groups:
            space = group.space
            indices = actions[:, group.agents, : space.width]
            command, wrong = decode_torch(space, indices, group.low, group.high, group.choices)
            u = u.index_copy(1, group.agents, F.pad(command, (0, self.physical_dim - space.physical_dim)))
            bad = bad.index_copy(1, group.agents, wrong)
            if space.comm_dim:
                sent = decode_message_torch(space, indices, wrong, torch.float32)
                message = message.index_copy(1, group.agents, sent)
        return u, message, bad

    def decode_continuous(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``decode`` of continuous actions (float32 [E, A, W])."""
        physical = actions[..., : self.physical_dim]
        finite = torch.isfinite(physical)
        bad = (~finite & self.used).any(dim=-1)
        u = torch.where(finite & self.used, physical, 0.0)
        u = torch.clamp(u, self.u_low, self.u_range)
        if not self.comm_dim:
            return u, actions.new_zeros((*actions.shape[:2], 0)), bad
        raw = actions.gather(2, self.message_columns.expand(actions.shape[0], -1, -1))
        message, wrong = continuous_message(raw)
        speaks = self.speaks.unsqueeze(-1)
        return u, torch.where(speaks, message, 0.0), bad | (wrong & self.speaks)

    def scale(self, u: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Stage 2: ``u * u_multiplier``, then ``+ noise * u_noise`` (VMAS's order and float32 operations).

        Args:
            u: [E, A, D] float32 decoded command (``decode``).
            noise: [E, A, D] float32 standard normal draws, read for the agents whose ``u_noise`` > 0 (in
                their ``action_size`` columns); needed when any has one, else ignored.

        Returns:
            [E, A, D] float32 the command the dynamics read (VMAS's ``agent.action.u``).
        """
        u = u * self.u_multiplier
        if not self.has_u_noise:
            return u
        if noise is None or tuple(noise.shape) != tuple(u.shape) or noise.dtype != torch.float32:
            got = None if noise is None else f"{noise.dtype} {list(noise.shape)}"
            raise ValueError(f"an agent has u_noise > 0: noise must be float32 {list(u.shape)} normals, got {got}")
        noisy = (self.u_noise > 0).unsqueeze(0) & self.used
        return torch.where(noisy, u + noise * self.u_noise, u)

    def forces(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stage 3, the dynamics: ``(force [E, N, 2] [N], torque [E, N] [N m])`` in entity rows from the
        command ``u`` [E, A, D] (``scale``): ``force = u[:2]``, ``torque = u[2]`` for
        ``holonomic_rotation`` agents, 0 otherwise and in landmark rows."""
        n_envs = u.shape[0]
        landmarks = u.new_zeros((n_envs, self.n_landmarks, 2))
        force = torch.cat([landmarks, u[..., :2]], dim=1)
        if self.has_torque:
            agents = torch.where(self.rotates, u[..., TORQUE_COLUMN], 0.0)
        else:
            agents = u.new_zeros((n_envs, self.n_agents))
        return force, torch.cat([landmarks[..., 0], agents], dim=1)

    def __call__(
        self, actions: torch.Tensor, noise: torch.Tensor | None = None, comm_noise: torch.Tensor | None = None
    ) -> ProcessedActions:
        """The three stages on one step's actions.

        Args:
            actions: [E, A, W] each agent's action in its own layout (module docstring; ``stack`` builds
                it from VMAS's list): float32 (continuous) or integer indices (discrete kinds).
            noise: [E, A, D] float32 standard normals for ``u_noise`` (``scale``).
            comm_noise: [E, A, C] float32 standard normals for ``c_noise``, needed when a speaking agent
                has one: ``message += comm_noise * c_noise``.

        Returns:
            ``ProcessedActions``.
        """
        u, message, bad = self.decode(actions)
        u = self.scale(u, noise)
        if self.has_c_noise:
            if comm_noise is None or tuple(comm_noise.shape) != tuple(message.shape):
                got = None if comm_noise is None else list(comm_noise.shape)
                raise ValueError(
                    f"an agent has c_noise > 0: comm_noise must be {list(message.shape)} normals, got {got}"
                )
            noisy = ((self.c_noise > 0) & self.speaks.unsqueeze(-1)).unsqueeze(0)
            message = torch.where(noisy, message + comm_noise * self.c_noise, message)
        force, torque = self.forces(u)
        return ProcessedActions(force, torque, u, message, bad)


__all__ = ["DYNAMICS", "UNSUPPORTED_DYNAMICS", "AgentAction", "DecodeGroup", "ProcessedActions", "VmasActions"]
