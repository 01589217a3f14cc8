"""The entries of ``swarp.interop.torchrl.SwarpEnv``'s tensordicts: its specs and the assembly of each
output, in the layouts of that module's docstring.

``TensorDictLayout`` holds, for one ``Environment`` and layout, what goes where: the observation and
action keys, which info entries are per agent and which per env, and whether the ``Environment``
keeps an alive mask (``sim.alive``). Every tensor an output holds is a copy: the simulator's outputs
are persistent buffers overwritten by the next call.

Alive mask (the ``"agents"`` layout; ``SwarpEnv`` refuses the flat one), TorchRL's convention for
agents that come and go (``torchrl.envs.libs.pettingzoo.PettingZooWrapper(use_mask=True)``): each
group g has the observation entry ``(g, "mask")`` [E, A_g] bool, the agents that act in the next
step (``sim.alive``), and the done entries ``(g, "done")``, ``(g, "terminated")``, ``(g,
"truncated")`` [E, A_g, 1] bool (``agent_flags``). The root ``done``, ``terminated``,
``truncated`` [E, 1] stay per env; without a mask there are no group done entries (VmasEnv's specs).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Composite, TensorSpec, Unbounded

from swarp.env.environment import Environment

#: Names of the done entries, at the root (per env) and, with an alive mask, in each group (per agent).
DONE_KEYS = ("done", "terminated", "truncated")


def vmas_info(value: torch.Tensor, per_agent: bool) -> torch.Tensor:
    """An info entry as VmasEnv gives it (a copy): float32, with a trailing 1 on [E] entries and on
    per-agent [E, A] ones (other shapes unchanged)."""
    value = value.to(torch.float32, copy=True)
    if value.dim() == 1 or (per_agent and value.dim() == 2):
        value = value.unsqueeze(-1)
    return value


def leaf_spec(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> TensorSpec:
    """The spec of an output entry of ``shape`` and ``dtype``: ``Categorical(2)`` for bool, else
    ``Unbounded``."""
    if dtype == torch.bool:
        return Categorical(n=2, shape=shape, dtype=torch.bool, device=device)
    return Unbounded(shape=shape, dtype=dtype, device=device)


def agent_flags(present: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-agent done flags, new tensors [E, A, 1] bool, keyed as ``DONE_KEYS``.

    Args:
        present: [E, A] bool, the agents still in their episode (alive); an agent that is not (it
            left, or is absent from the episode) is terminated.
        terminated: [E] bool, the envs whose episode terminated: all their agents are terminated.
        truncated: [E] bool, the envs whose episode was truncated: all their agents are truncated.

    Returns:
        ``{"done": terminated | truncated, "terminated": ~present | terminated, "truncated": truncated}``
        per agent.
    """
    term = ~present | terminated.unsqueeze(-1)
    trunc = truncated.unsqueeze(-1).expand_as(present)
    return {
        "done": (term | trunc).unsqueeze(-1),
        "terminated": term.unsqueeze(-1),
        "truncated": trunc.unsqueeze(-1).clone(),
    }


def done_specs(shape: tuple[int, ...], device: torch.device) -> dict[str, TensorSpec]:
    """``{name: Categorical(2) [*shape, 1] bool}`` for each of ``DONE_KEYS``."""
    return {name: Categorical(n=2, shape=(*shape, 1), dtype=torch.bool, device=device) for name in DONE_KEYS}


class TensorDictLayout:
    """What goes where in the tensordicts of a ``SwarpEnv`` over ``sim`` in ``layout``.

    Args:
        sim: The wrapped ``Environment``.
        layout: ``"flat"`` or ``"agents"`` (checked by ``SwarpEnv``: the flat one has neither
            groups nor an alive mask).

    Attributes:
        layout: As given.
        groups: ``sim.groups`` (one group, ``"agents"``, without groups).
        masked: Whether ``sim`` keeps an alive mask (``sim.alive`` is not None): then each group has
            a ``"mask"`` and per-agent done entries.
        observation_keys: ``["observation"]`` (flat) or ``[(g, "observation") for each group g]``.
        action_keys: ``{g: "action"}`` (flat) or ``{g: (g, "action")}``.
        info_keys: The scenario's info entries handed out (``sim.info`` without ``final_obs``).
        agent_info: Those of ``info_keys`` that are per agent (second dimension ``n_agents``).
        env_info: The other ones (per env).
    """

    def __init__(self, sim: Environment, layout: str):
        self.sim, self.layout = sim, layout
        self.groups = sim.groups
        self.masked = sim.alive is not None
        flat = layout == "flat"
        self.observation_keys = ["observation"] if flat else [(g.name, "observation") for g in self.groups]
        self.action_keys = {g.name: "action" if flat else (g.name, "action") for g in self.groups}
        self.info_keys = [key for key in sim.info if key != "final_obs"]
        A = sim.n_agents
        self.agent_info = [k for k in self.info_keys if sim.info[k].dim() >= 2 and sim.info[k].shape[1] == A]
        self.env_info = [k for k in self.info_keys if k not in self.agent_info]

    def info_spec(self, key: str, agents: int) -> tuple[torch.Size, torch.dtype]:
        """Shape and dtype of info entry ``key`` in a group of ``agents`` agents: the native ones
        (flat), else VmasEnv's (``vmas_info``: float32, a trailing 1 on [E] and [E, A] entries)."""
        value = self.sim.info[key]
        if self.layout == "flat":
            return value.shape, value.dtype
        shape = value.shape
        if key in self.agent_info:
            shape = torch.Size([shape[0], agents, *shape[2:]])
        if (key in self.agent_info and value.dim() == 2) or value.dim() == 1:
            shape = torch.Size([*shape, 1])
        return shape, torch.float32

    def specs(self, action_specs: dict[str, TensorSpec], device: torch.device) -> dict[str, Composite]:
        """The env's specs, batched ([E] first), on ``device``.

        Args:
            action_specs: ``{group: its batched action spec}`` (``GroupActions.spec``).
            device: The simulator's device.

        Returns:
            ``{"done": ..., "observation": ..., "action": ..., "reward": ...}``: the ``full_*_spec``
            Composites, keyed as in the module docstring of ``swarp.interop.torchrl``.
        """
        sim, dev = self.sim, device
        E = sim.n_envs
        batch = torch.Size([E])
        done = Composite(done_specs((E,), dev), shape=batch, device=dev)
        if self.layout == "flat":
            observation = Unbounded(shape=(E, sim.n_agents, sim.obs_dim), dtype=sim.dtype, device=dev)
            obs = Composite(observation=observation, shape=batch, device=dev)
            if self.info_keys:
                info = {key: leaf_spec(*self.info_spec(key, sim.n_agents), dev) for key in self.info_keys}
                obs["info"] = Composite(info, shape=batch, device=dev)
            (actions,) = action_specs.values()
            reward = Unbounded(shape=(E, sim.n_agents, 1), dtype=sim.dtype, device=dev)
            return {
                "done": done,
                "observation": obs,
                "action": Composite(action=actions, shape=batch, device=dev),
                "reward": Composite(reward=reward, shape=batch, device=dev),
            }
        obs, action, reward = (Composite(shape=batch, device=dev) for _ in range(3))
        for g in self.groups:
            shape = (E, g.n_agents)
            observation = Unbounded(shape=(*shape, g.obs_dim), dtype=sim.dtype, device=dev)
            group = Composite(observation=observation, shape=shape, device=dev)
            if self.masked:
                group["mask"] = Categorical(n=2, shape=shape, dtype=torch.bool, device=dev)
                done[g.name] = Composite(done_specs(shape, dev), shape=shape, device=dev)
            if self.agent_info:
                info = {k: leaf_spec(*self.info_spec(k, g.n_agents), dev) for k in self.agent_info}
                group["info"] = Composite(info, shape=shape, device=dev)
            obs[g.name] = group
            action[g.name] = Composite(action=action_specs[g.name], shape=shape, device=dev)
            rewards = Unbounded(shape=(*shape, 1), dtype=sim.dtype, device=dev)
            reward[g.name] = Composite(reward=rewards, shape=shape, device=dev)
        if self.env_info:
            info = {k: leaf_spec(*self.info_spec(k, sim.n_agents), dev) for k in self.env_info}
            obs["info"] = Composite(info, shape=batch, device=dev)
        return {"done": done, "observation": obs, "action": action, "reward": reward}

    def output(
        self,
        obs: dict[str, torch.Tensor],
        reward: dict[str, torch.Tensor] | None,
        info: dict[str, torch.Tensor],
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        present: torch.Tensor | None = None,
    ) -> TensorDict:
        """An output tensordict, ``batch_size=[E]`` on the simulator's device.

        Args:
            obs: ``{group: [E, A_g, obs_dim_g]}``, already copies (put in as they are).
            reward: ``{group: [E, A_g]}`` (copied), or None (a reset's output has no reward).
            info: The ``Environment``'s info mapping (its entries are copied).
            terminated: [E] bool, per env.
            truncated: [E] bool, per env.
            present: With an alive mask, [E, A] bool: the agents counted as still in their episode
                for the per-agent flags (``agent_flags``); the ``mask`` entries are ``sim.alive``.
        """
        E = self.sim.n_envs
        flags = {
            "done": (terminated | truncated).unsqueeze(-1),
            "terminated": terminated.unsqueeze(-1).clone(),
            "truncated": truncated.unsqueeze(-1).clone(),
        }
        if self.layout == "flat":
            (name,) = obs
            out: dict = {"observation": obs[name], **flags}
            if reward is not None:
                out["reward"] = reward[name].unsqueeze(-1).clone()
            if self.info_keys:
                out["info"] = TensorDict({key: info[key].clone() for key in self.info_keys}, batch_size=(E,))
            return TensorDict(out, batch_size=(E,), device=self.sim.torch_device)
        out, grouped = flags, self.sim.grouped
        if self.masked:
            mask = self.sim.alive
            per_agent = agent_flags(mask if present is None else present, terminated, truncated)
        for g in self.groups:
            group: dict = {"observation": obs[g.name]}
            if self.masked:
                group["mask"] = mask[:, g.start : g.stop].clone()
                group.update({key: value[:, g.start : g.stop] for key, value in per_agent.items()})
            if reward is not None:
                group["reward"] = reward[g.name].unsqueeze(-1).clone()
            if self.agent_info:
                rows = {key: info[key][:, g.start : g.stop] if grouped else info[key] for key in self.agent_info}
                values = {key: vmas_info(value, True) for key, value in rows.items()}
                group["info"] = TensorDict(values, batch_size=(E, g.n_agents))
            out[g.name] = TensorDict(group, batch_size=(E, g.n_agents))
        if self.env_info:
            out["info"] = TensorDict({key: vmas_info(info[key], False) for key in self.env_info}, batch_size=(E,))
        return TensorDict(out, batch_size=(E,), device=self.sim.torch_device)
