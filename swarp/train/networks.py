"""The networks of the PPO family, for K runs at once: a shared actor over agents, a MAPPO or IPPO
critic, and a running observation normalizer.

Every parameter and buffer has a leading run dimension K (one slice per independent training run);
a forward pass takes ``[K, ..., features]`` and runs the K networks as batched matrix products, so K
seeds train as one computation (JaxMARL's vectorised runs, in PyTorch). K = 1 is a single run. Shapes
below: E envs (or any middle dims), A agents, O observation columns, U action columns. The actor is
a tanh-squashed Gaussian (``Actor``) for continuous actions, categorical heads (``CategoricalActor``,
``swarp.train.action_spaces`` says how they sample) for discrete and multi-discrete ones.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

import swarp.distributed as sd
from swarp.core.spaces import ActionSpace
from swarp.train.action_spaces import check_space_fits


class StackedLinear(nn.Module):
    """K independent linear layers: ``x`` [K, N, n_in] -> [K, N, n_out] (one batched matmul)."""

    def __init__(self, k: int, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(k, n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(k, 1, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class StackedMLP(nn.Module):
    """K tanh MLPs (``depth`` hidden layers of ``hidden``): [K, ..., n_in] -> [K, ..., n_out]."""

    def __init__(self, k: int, n_in: int, n_out: int, hidden: int, depth: int):
        super().__init__()
        widths = [n_in] + [hidden] * depth + [n_out]
        self.layers = nn.ModuleList(StackedLinear(k, a, b) for a, b in zip(widths, widths[1:], strict=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        h = x.reshape(shape[0], -1, shape[-1])
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = torch.tanh(h)
        return h.reshape(*shape[:-1], h.shape[-1])

    @torch.no_grad()
    def initialise(self, generators: list[torch.Generator], out_gain: float) -> None:
        """Orthogonal weights (gain sqrt(2) inside, ``out_gain`` at the output), zero biases; run k's
        draws come from ``generators[k]`` (CPU), so a run's initial weights do not depend on K."""
        for k, generator in enumerate(generators):
            for i, layer in enumerate(self.layers):
                gain = out_gain if i == len(self.layers) - 1 else math.sqrt(2.0)
                n_in, n_out = layer.weight.shape[1:]
                w = nn.init.orthogonal_(torch.empty(n_out, n_in), gain, generator=generator)
                layer.weight[k].copy_(w.T)
                layer.bias[k].zero_()


def _per_run(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """View a [K, n] tensor so it broadcasts against ``like`` [K, ..., n]."""
    return t.view(t.shape[0], *([1] * (like.dim() - 2)), t.shape[-1])


class Normalizer(nn.Module):
    """Per run, the running mean and variance of observation columns [K, O] over every (env, agent,
    step) seen; ``forward`` standardises and clips to +-``clip``. Disabled, it is the identity."""

    def __init__(self, k: int, n: int, enabled: bool = True, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.enabled, self.clip, self.eps = enabled, clip, eps
        self.register_buffer("mean", torch.zeros(k, n))
        self.register_buffer("var", torch.ones(k, n))
        self.register_buffer("count", torch.zeros(k, 1, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        mean, scale = _per_run(self.mean, x), _per_run(torch.rsqrt(self.var + self.eps), x)
        return ((x - mean) * scale).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Fold the rows of ``x`` [K, ..., O] into run k's statistics (Chan's parallel update; no host
        sync), only those where ``mask`` [K, ...] bool is True when given (the agents that acted:
        a departed agent's zeros are not observations). Under ``torch.distributed`` the rows of every
        rank's ``x`` count (one all-reduce), so the ranks' statistics stay identical."""
        if not self.enabled:
            return
        rows = x.reshape(x.shape[0], -1, x.shape[-1]).double()
        if mask is None:
            count = torch.full((rows.shape[0], 1), float(rows.shape[1]), dtype=torch.float64, device=rows.device)
        else:
            weight = mask.reshape(rows.shape[0], -1, 1).double()
            rows, count = rows * weight, weight.sum(1)
        moments = sd.all_reduce(torch.cat([rows.sum(1), rows.square().sum(1), count], dim=1))  # [K, 2 O + 1]
        n_cols = rows.shape[-1]
        n = moments[:, -1:]  # 0 only where the mask hid every row: the statistics stay as they were
        batch_mean = moments[:, :n_cols] / n.clamp_min(1.0)
        batch_var = ((moments[:, n_cols:-1] / n.clamp_min(1.0)) - batch_mean.square()).clamp_min(0.0)
        batch_mean, batch_var = batch_mean.float(), batch_var.float()
        total = self.count + n
        weight = (n / total.clamp_min(1.0)).float()
        delta = batch_mean - self.mean
        self.mean.add_(delta * weight)
        self.var.copy_(self.var * (1 - weight) + batch_var * weight + delta.square() * (weight * (1 - weight)))
        self.count.copy_(total)


class Actor(nn.Module):
    """Shared Gaussian policy: each agent's normalized observation [K, ..., A, O] -> the mean
    [K, ..., A, U] of a Gaussian over pre-squash actions; ``squash`` maps a sample into the physical
    box ``[low, high]`` ([A, U] each) through tanh. The log standard deviation is a learned [K, U].
    Where every agent has the same box it is kept once ([K, 1, U]), so the actor acts for any number
    of agents."""

    def __init__(self, k: int, obs_dim: int, low: torch.Tensor, high: torch.Tensor, hidden: int, depth: int,
                 init_log_std: float):  # fmt: skip
        super().__init__()
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
            raise ValueError("the scenario's action bounds must be finite for a squashed policy")
        if bool((low == low[:1]).all() and (high == high[:1]).all()):
            low, high = low[:1], high[:1]  # one box for every agent
        act_dim = low.shape[-1]
        self.net = StackedMLP(k, obs_dim, act_dim, hidden, depth)
        self.log_std = nn.Parameter(torch.full((k, act_dim), float(init_log_std)))
        self.register_buffer("center", ((high + low) / 2).expand(k, *low.shape).clone())
        self.register_buffer("half_range", ((high - low) / 2).expand(k, *low.shape).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        """Pre-squash actions [K, E, A, U] -> physical actions in ``[low, high]``."""
        return self.center.unsqueeze(1) + self.half_range.unsqueeze(1) * torch.tanh(u)

    def std(self, like: torch.Tensor) -> torch.Tensor:
        """exp(log_std), shaped to broadcast against ``like`` [K, ..., U]."""
        return _per_run(torch.exp(self.log_std), like)

    def log_prob(self, u: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        """[K, ..., A] log density of pre-squash ``u`` under N(mean, exp(log_std)^2), summed over U. (The
        tanh Jacobian is the same for old and new policy at a stored ``u``, so PPO's ratio needs none.)"""
        log_std = _per_run(self.log_std, u)
        z = (u - mean) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def entropy(self) -> torch.Tensor:
        """[K] entropy of each run's pre-squash Gaussian (state independent)."""
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    def squashed_entropy(self, mean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """[K] entropy of each run's squashed actions (tanh of the Gaussian, before the box's
        constant scale), estimated at the reparameterized samples ``mean + std * noise`` (``mean``
        and standard-normal ``noise`` [K, ..., A, U]) and averaged over them.

        The pre-squash Gaussian's entropy (``entropy``) grows with the standard deviation even where
        a saturated mean makes every sample the same action at the box's edge; this one falls there
        (the tanh's log-Jacobian, ``log(1 - tanh(u)^2)``, is very negative), so a bonus on it keeps
        the actions exploring instead of paying for saturation."""
        u = mean + self.std(mean) * noise
        log_jacobian = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))  # log(1 - tanh(u)^2), stable
        return self.entropy() + log_jacobian.sum(-1).flatten(1).mean(1)

    def agent_entropy(self, mean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``squashed_entropy`` of each agent [K, ..., A], not averaged (a masked mean weighs them)."""
        u = mean + self.std(mean) * noise
        log_jacobian = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
        return self.entropy().view(-1, *([1] * (u.dim() - 2))) + log_jacobian.sum(-1)


class CategoricalActor(nn.Module):
    """Shared categorical policy: each agent's normalized observation [K, ..., A, O] -> the logits
    [K, ..., A, sum(space.heads)] of one categorical per column of ``space`` (module docstring).

    The physical box ``low``, ``high`` ([A, D] each, physical units) is kept as ``center`` and
    ``half_range`` buffers ([K, A, D], or [K, 1, D] where every agent shares one box), as the
    Gaussian ``Actor`` keeps it, so a policy can check that an env decodes its indices into the box
    it was trained in; the env does the decode (``swarp.core.spaces``).
    """

    def __init__(self, k: int, obs_dim: int, space: ActionSpace, low: torch.Tensor, high: torch.Tensor, hidden: int,
                 depth: int):  # fmt: skip
        super().__init__()
        if not space.discrete:
            raise ValueError(f"a categorical actor needs a discrete action space, got {space.kind!r}")
        if low.shape[-1] != space.physical_dim:
            raise ValueError(f"action bounds of {low.shape[-1]} columns for a space over {space.physical_dim}")
        if bool((low == low[:1]).all() and (high == high[:1]).all()):
            low, high = low[:1], high[:1]  # one box for every agent
        self.space = space
        self.heads = list(space.heads)
        self.net = StackedMLP(k, obs_dim, sum(self.heads), hidden, depth)
        self.register_buffer("nvec", torch.tensor(space.nvec, dtype=torch.int64).expand(k, -1).clone())
        self.register_buffer("center", ((high + low) / 2).expand(k, *low.shape).clone())
        self.register_buffer("half_range", ((high - low) / 2).expand(k, *low.shape).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [K, ..., A, sum(heads)] float32 of normalized observations ``x`` [K, ..., A, O]."""
        return self.net(x)

    def split(self, logits: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Each head's log-probabilities, [K, ..., A, heads[j]] float32 each (log-softmax of its logits)."""
        return tuple(torch.log_softmax(h, dim=-1) for h in logits.split(self.heads, dim=-1))

    def sample(self, logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
        """Indices [K, ..., A, width] int64 drawn from the categoricals of ``logits`` by Gumbel-max,
        with ``uniform`` [K, ..., A, sum(heads)] draws in [0, 1) (one per logit; no host sync)."""
        gumbel = -torch.log(-torch.log(uniform.clamp_min(torch.finfo(uniform.dtype).tiny)))
        noisy = (logits + gumbel).split(self.heads, dim=-1)
        return torch.stack([h.argmax(-1) for h in noisy], dim=-1)

    def greedy(self, logits: torch.Tensor) -> torch.Tensor:
        """Indices [K, ..., A, width] int64: each head's most likely choice (the first of ties)."""
        return torch.stack([h.argmax(-1) for h in logits.split(self.heads, dim=-1)], dim=-1)

    def log_prob(self, indices: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """[K, ..., A] float32 log-probability of ``indices`` [K, ..., A, width] (int64) under the
        categoricals of ``logits``: the sum over columns of each column's log-probability."""
        columns = [lp.gather(-1, indices[..., j : j + 1]).squeeze(-1) for j, lp in enumerate(self.split(logits))]
        return torch.stack(columns, dim=-1).sum(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """[K] float32: each run's policy entropy [nats], summed over columns and averaged over the
        other dims of ``logits`` [K, ..., A, sum(heads)] (the exact entropy of the categoricals)."""
        return self.agent_entropy(logits).flatten(1).mean(1)

    def agent_entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """``entropy`` of each agent [K, ..., A], not averaged (a masked mean weighs them)."""
        per_column = [-(lp.exp() * lp).sum(-1) for lp in self.split(logits)]
        return torch.stack(per_column, dim=-1).sum(-1)


class Critic(nn.Module):
    """Per-agent values [K, ..., A] from observations [K, ..., A, O]: MAPPO's centralized critic reads
    every agent's observation (one network, one output per agent); IPPO's reads each agent's own (one
    network shared over agents).

    An agent group's centralized critic (``joint_dim`` given) gives its ``n_agents`` agents' values
    from the joint input of every group's observations (``of_joint``), ``joint_dim`` columns."""

    def __init__(self, k: int, obs_dim: int, n_agents: int, hidden: int, depth: int, centralized: bool,
                 joint_dim: int | None = None):  # fmt: skip
        super().__init__()
        self.centralized = centralized
        n_in, n_out = (joint_dim or obs_dim * n_agents, n_agents) if centralized else (obs_dim, 1)
        self.net = StackedMLP(k, n_in, n_out, hidden, depth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.centralized:
            return self.net(x.flatten(-2))
        return self.net(x).squeeze(-1)

    def of_joint(self, joint: torch.Tensor) -> torch.Tensor:
        """A centralized critic's values [K, ..., n_agents] float32 of the joint input ``joint``
        [K, ..., joint_dim] (every agent's normalized observation, flattened and concatenated)."""
        return self.net(joint)


class Policy(nn.Module):
    """The trained policy of one run: observations [E, A, O] -> its greedy actions for ``env.step``:
    continuous, physical actions [E, A, U] (tanh of the Gaussian mean, in the scenario's bounds) in
    the observations' dtype; discrete kinds, indices [E, A, width] int64 (each head's argmax). One
    network shared by the agents: it acts for any agent count A where all agents were trained in one
    action box (``n_agents`` is then ``None``), else for the A agents it was trained with."""

    def __init__(self, normalizer: Normalizer, actor: Actor | CategoricalActor):
        super().__init__()
        self.normalizer, self.actor = normalizer, actor

    @classmethod
    def from_networks(cls, networks: dict, obs_dim: int, low: torch.Tensor, high: torch.Tensor, hidden: int,
                      depth: int, norm_obs: bool, space: ActionSpace | None = None) -> Policy:  # fmt: skip
        """A policy from one run's ``state_dict``s (``networks["normalizer"]``, ``networks["actor"]``,
        as ``Trainer.run_networks`` gives them), its action box from ``low``, ``high`` ([A, D], CPU),
        its head from ``space`` (``None`` or continuous: the Gaussian; discrete kinds: categorical).

        Raises:
            KeyError: an actor entry is missing.
            ValueError: the saved actor is of the other kind (a Gaussian's for a discrete ``space``, or
                categorical heads for a continuous one), or was trained with other level counts.
            RuntimeError: an entry's shape does not fit (``load_state_dict``).
        """
        normalizer = Normalizer(1, obs_dim, enabled=norm_obs)
        normalizer.load_state_dict(networks["normalizer"])
        saved = networks["actor"]
        discrete = space is not None and space.discrete
        if discrete and "log_std" in saved:
            raise ValueError(f"the actor is a continuous run's Gaussian, not the {space.kind} policy asked for")
        if not discrete and "nvec" in saved:
            raise ValueError("the actor is a discrete run's categorical heads, not the continuous policy asked for")
        if discrete:
            actor = CategoricalActor(1, obs_dim, space, low, high, hidden, depth)
        else:
            actor = Actor(1, obs_dim, low, high, hidden, depth, 0.0)
        # The box comes from the bounds (kept once where every agent shares it), not the saved buffers.
        actor.load_state_dict({k: v for k, v in saved.items() if k not in ("center", "half_range")}, strict=False)
        missing = set(actor.state_dict()) - set(saved)
        if missing:
            raise KeyError(f"actor.{sorted(missing)[0]}")
        if discrete and actor.nvec[0].tolist() != list(space.nvec):
            raise ValueError(f"the actor was trained with action levels {actor.nvec[0].tolist()}, not {space.nvec}")
        return cls(normalizer, actor)

    @property
    def space(self) -> ActionSpace:
        """The action space it was trained in (its kind and levels)."""
        if isinstance(self.actor, CategoricalActor):
            return self.actor.space
        return ActionSpace("continuous", self.actor.log_std.shape[-1])

    def env_kwargs(self) -> dict:
        """The ``swarp.make`` keywords of an env it acts in: none (continuous), else ``action_space``
        and ``action_nvec``."""
        space = self.space
        return {"action_space": space.kind, "action_nvec": space.nvec} if space.discrete else {}

    @property
    def obs_dim(self) -> int:
        return self.normalizer.mean.shape[-1]

    @property
    def act_dim(self) -> int:
        """Columns of the actions it returns (``env.act_dim`` of an env it acts in)."""
        return self.space.width

    @property
    def n_agents(self) -> int | None:
        """The agent count it acts for (``None``: any)."""
        agents = self.actor.center.shape[-2]
        return None if agents == 1 else agents

    def action_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(low, high)``, each [A, U] ([1, U] for one box shared by any number of agents)."""
        center, half = self.actor.center[0], self.actor.half_range[0]
        return center - half, center + half

    def check_fits(self, n_agents: int, obs_dim: int, act_dim: int, low: torch.Tensor, high: torch.Tensor,
                   space: ActionSpace | None = None) -> None:  # fmt: skip
        """Raise ``ValueError`` naming the mismatch unless this policy can act in an env of ``n_agents``
        agents, ``obs_dim`` observation and ``act_dim`` action columns, action box ``low``, ``high``
        ([A, D] each, physical units) and action space ``space`` (``None``: continuous)."""
        problems = []
        if obs_dim != self.obs_dim:
            problems.append(f"observations of {obs_dim} columns, not {self.obs_dim}")
        space_problem = check_space_fits(self.space, space or ActionSpace("continuous", low.shape[-1]))
        if space_problem is not None:
            problems.append(space_problem)
        elif act_dim != self.act_dim:
            problems.append(f"actions of {act_dim} columns, not {self.act_dim}")
        elif self.n_agents is not None and n_agents != self.n_agents:
            problems.append(f"{n_agents} agents, not the {self.n_agents} its per-agent action boxes were trained for")
        else:
            mine_low, mine_high = (b.to(low.device, torch.float32).expand(low.shape) for b in self.action_box())
            if not (torch.allclose(mine_low, low.float(), rtol=1e-6, atol=1e-6)
                    and torch.allclose(mine_high, high.float(), rtol=1e-6, atol=1e-6)):  # fmt: skip
                problems.append(f"action box [{low.tolist()}, {high.tolist()}], not the trained "
                                f"[{mine_low.tolist()}, {mine_high.tolist()}]")  # fmt: skip
        if problems:
            raise ValueError("; ".join(problems))

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.check_obs(obs)
        return greedy_actions(self.normalizer, self.actor, obs)

    def check_obs(self, obs: torch.Tensor) -> None:
        """Raise ``ValueError`` unless ``obs`` is [E, A, obs_dim] for an agent count A it acts for."""
        if obs.dim() != 3 or obs.shape[-1] != self.obs_dim:
            raise ValueError(f"the policy takes observations [E, A, {self.obs_dim}], got {list(obs.shape)}")
        if self.n_agents is not None and obs.shape[1] != self.n_agents:
            raise ValueError(f"the policy acts for {self.n_agents} agents (their action boxes differ), got "
                             f"observations of {obs.shape[1]} agents")  # fmt: skip


def greedy_actions(normalizer: Normalizer, actor: Actor | CategoricalActor, obs: torch.Tensor) -> torch.Tensor:
    """One run's greedy actions of observations ``obs`` [E, A, O] (unnormalized, any float dtype):
    physical actions [E, A, U] in ``obs``'s dtype (tanh of the Gaussian's mean, inside the box), or
    int64 indices [E, A, width] (each head's argmax)."""
    x = normalizer(obs.float().unsqueeze(0))
    if isinstance(actor, CategoricalActor):
        return actor.greedy(actor(x))[0]
    return actor.squash(actor(x))[0].to(obs.dtype)


def take_run(module: nn.Module, k: int) -> nn.Module:
    """A copy of ``module`` holding only run ``k`` (every parameter and buffer sliced to [1, ...])."""
    single = copy.deepcopy(module)
    with torch.no_grad():
        for name, tensor in [*single.named_parameters(), *single.named_buffers()]:
            owner = single.get_submodule(name.rpartition(".")[0]) if "." in name else single
            leaf = name.rpartition(".")[2]
            sliced = tensor[k : k + 1].clone()
            if isinstance(tensor, nn.Parameter):
                setattr(owner, leaf, nn.Parameter(sliced, requires_grad=tensor.requires_grad))
            else:
                owner.register_buffer(leaf, sliced)
    return single
