"""TorchRL adapter: an ``Environment`` as a batched ``torchrl.envs.EnvBase`` (needs the ``torchrl`` extra).

    sim = swarp.make("navigation", n_envs=4096, device="cuda:0")
    env = SwarpEnv(sim)                                   # action spec == sim.action_bounds
    env = SwarpEnv(sim, layout="agents", action_low=-1.0, action_high=1.0)   # VmasEnv-style, normalized
    sim = swarp.make("navigation", n_envs=4096, device="cuda:0", action_space="discrete")
    env = SwarpEnv(sim, layout="agents")                  # Categorical(9) actions [E, A] int64
    env = SwarpEnv(sim, layout="agents", categorical_actions=False)   # OneHot(9) actions [E, A, 9]

Both layouts have ``batch_size=[n_envs]``, live on the simulator's device and share the done entries
at the root: ``done``, ``terminated``, ``truncated``, each [n_envs, 1] bool.

=============  =========================================  ==============================================
layout         ``"flat"`` (default without groups, mask)   ``"agents"`` (TorchRL's multi-agent convention)
=============  =========================================  ==============================================
observation    ``"observation"`` [E, A, obs_dim]           ``("agents", "observation")``
action         ``"action"`` [E, A, act_dim] (continuous)   ``("agents", "action")``
reward         ``"reward"`` [E, A, 1]                      ``("agents", "reward")``
per-agent info ``("info", key)`` [E, A, ...] native dtype  ``("agents", "info", key)`` float32, [E, A, 1]
                                                           when the scenario's tensor is [E, A]
per-env info   ``("info", key)`` [E, ...] native dtype     ``("info", key)`` float32, [E, 1] when [E]
alive mask     refused (a ValueError)                      ``("agents", "mask")`` [E, A] bool and
                                                           ``("agents", "done")``... [E, A, 1] (below)
=============  =========================================  ==============================================

Agents that leave and arrive (an ``Environment`` with an alive mask, ``sim.alive``: navigation's
``n_agents=(lo, hi)``, ``leave_on_goal``, ``variable_navigation``) follow TorchRL's convention for
them, ``PettingZooWrapper(use_mask=True)``'s. Such an env has the ``"agents"`` layout only (its
default; ``"flat"``, one done per env, is a ValueError), and each group g gains:

* ``(g, "mask")`` [E, A_g] bool, an observation entry: the agents that act in the next step
  (``sim.alive``; in the step that ends an episode, the simulator's rows as they are then);
* ``(g, "done")``, ``(g, "terminated")``, ``(g, "truncated")`` [E, A_g, 1] bool: within an episode an
  agent is done and terminated once it has left, or from the reset on when it is absent from the
  episode; at the step that ends the episode every agent is done, terminated where the env
  terminated or the agent was out before that step, truncated where the env was truncated (an
  agent leaving on that last step gets the env's flags, as in swarp's PettingZoo adapter).

The root ``done``, ``terminated``, ``truncated`` stay per env and alone end episodes: TorchRL resets
an env when its root ``done`` is set. The ``(g, "_reset")`` entries TorchRL derives from a group's
done entries (True for agents that left, in envs that go on) are ignored beside the root
``"_reset"``, and a reset with a group's ``"_reset"`` but no root one is a ValueError: an agent is
never reset alone. Absent agents are done right after a reset, so a masked env always has
``allow_done_after_reset=True``. A value estimator given the group's done keys (GAE, BenchMARL's
PPO losses) stops a departed agent's return at its departure. TorchRL's collectors start a new
``("collector", "traj_ids")`` at each step where any done entry is set: with a mask they count steps
where an agent is out, not episodes (read episodes from the root ``done``). The scenario's own
per-agent info entry ``alive`` stays, float32 as every info entry (BenchMARL logs its mean, the
share of agents present); the mask is the same bits as bool. Without a mask none of this is
declared: the specs are VmasEnv's.

The ``"agents"`` layout is the one ``torchrl.envs.libs.vmas.VmasEnv`` produces with its default
group map (every agent in one group named ``"agents"``, info cast to float32 and scalar entries
given a trailing 1), so BenchMARL-style code written against VmasEnv runs unchanged; ``group_map``
is set as VmasEnv sets it. An info entry counts as per-agent when its second dimension is
``n_agents``.

Agent groups (``Environment.groups``, declared by the scenario in ``WorldSpec.groups``). A grouped
``Environment`` has the ``"agents"`` layout only (its default; ``"flat"`` is a ValueError), with one
TorchRL group per agent group in place of ``"agents"``: ``group_map`` ``{"a": ["a_0", "a_1"], "b":
["b_0", ...]}`` (agent ``i`` of group ``g`` is ``"g_i"``, VmasEnv's default grouping of such names),
``(g, "observation")`` [E, A_g, obs_dim_g] of the group's own width, ``(g, "action")`` of the group's
own action space ([E, A_g, D_g] continuous in the group's bounds or the normalized box, or the
discrete specs below), ``(g, "reward")`` [E, A_g, 1] and ``(g, "info", key)`` [E, A_g, ...]. The done
entries stay at the root (one per env, as VmasEnv's; with an alive mask each group also has its
per-agent ones, above). The step reads each group's action, converts
it and hands ``Environment.step`` a mapping by group; the outputs are copies of each group's views,
so a grouped step copies what the same env without groups would. ``het_specs`` stays False: VmasEnv
sets it for a group whose own agents' specs differ, and a swarp group's agents share one spec.

VmasEnv's own attributes, in both layouts (a ``TransformedEnv`` forwards them to this env):
``n_agents``, ``num_envs``, ``max_steps``, ``scenario_name``, ``agent_names``,
``agent_names_to_indices_map``, ``group_map``, ``het_specs`` / ``het_specs_map`` (always
homogeneous), ``continuous_actions`` (False when the ``Environment`` was made with
``action_space="discrete"`` or ``"multidiscrete"``, for any group), ``categorical_actions`` (the encoding of
discrete actions; True, VmasEnv's default), ``available_envs`` (the scenarios ``swarp.make``
knows) and ``render(mode="human", env_index=0, agent_index_focus=None, visualize_when_rgb=False,
**overlays)``, which draws through ``Environment.render`` and returns the (H, W, 3) uint8 frame.
Everything else the tutorials use (``full_action_spec_unbatched``, ``action_key(s)``,
``reward_key(s)``, ``done_keys``, ...) is TorchRL's generic ``EnvBase``. Two differences remain:
the done entries are ``done``, ``terminated`` and ``truncated`` (VmasEnv has no ``truncated``),
and reaching ``max_steps`` sets ``truncated`` where VMAS sets ``terminated``, so value estimators
bootstrap the cut-off episodes correctly.

Continuous actions are physical by default (the spec is ``sim.action_bounds``, the box the kernels clamp to).
With scalar ``action_low`` / ``action_high`` the spec is that box instead, and actions are mapped
affinely onto ``action_bounds`` before the step (``to_physical``); finite values outside the box
are clamped to it first, so any finite action, however large, acts as the bound it exceeds.

Discrete actions. With an ``Environment`` of ``action_space="discrete"`` or ``"multidiscrete"`` the
action spec is VmasEnv's for a discrete VMAS env, all int64: with ``categorical_actions=True`` (the
default) ``Categorical(prod(nvec))`` of shape [E, A] or ``MultiCategorical(nvec)`` [E, A, D]; with
``False`` their one-hot encodings ``OneHot`` [E, A, prod(nvec)] or ``MultiOneHot`` [E, A, sum(nvec)],
turned into indices on the device before the step (``to_indices``). The index of a flat discrete
action is that of the multi-discrete columns, the first most significant, and index -> command is
VMAS 1.5.2's (``swarp.core.spaces``). ``action_low`` / ``action_high`` are for continuous actions
only (a ValueError otherwise). ``swarp.interop.torchrl_actions`` has the table and the rules.
A communication channel (``WorldSpec.comm_dim`` C) adds VMAS's message to each speaking group's
action: C columns in [0, 1] after the physical ones (the normalized box maps onto them too), or one
more head of C choices (``Categorical(prod(nvec) * C)``...); a ``silent`` group has none.

Inputs are checked here, once, from metadata alone (no host sync): a continuous action must be a
tensor of real numbers of shape [n_envs, n_agents, act_dim] exactly (never broadcast); another float
or int dtype, or another device, is converted to the simulator's. NaN and inf are passed on: the
step acts on them as 0 and raises ``sim.invalid_actions()``. A discrete action must have the spec's
shape exactly; categorical indices must be of an integer dtype (a float is a TypeError), one-hot rows
may be bool, int or float; another device is converted. Out-of-range indices, and one-hot rows that
are not one 1 among 0s, are passed on the same way: a zero command and ``sim.invalid_actions()``.
A ``"_reset"`` mask must be bool, [n_envs, 1] or [n_envs]. Swarp steps every env together, so a
partial ``"_step"`` mask is an error.

Resets. TorchRL resets finished envs itself, through ``reset`` with a ``"_reset"`` mask [E, 1] after
a step that reported them done, and expects the step to return the *last* observation of the
episode. A partial reset is one masked ``sim.reset_at``. An ``Environment`` made with
``auto_reset=True`` is supported and consistent with that contract: the step returns
``info["final_obs"]`` for the envs that finished (the simulator already started their next
episode), and the following ``reset`` hands out those already-started episodes instead of drawing
new ones. The episodes are therefore the same as with ``auto_reset=False`` (the reset RNG is keyed
by (seed, env, episode)); the one difference is that the reset's ``info`` rows of those envs
describe the finishing step, as the simulator's auto-reset keeps them.

The simulator's outputs are persistent buffers overwritten by the next call; everything put in a
tensordict here is a copy. Seeding (``set_seed``) restarts the simulator's reset RNG and resets
every env.
"""

from __future__ import annotations

import math

import torch
from tensordict import NestedKey, TensorDictBase
from torchrl.envs import EnvBase

from swarp.core.groups import DEFAULT_GROUP
from swarp.env.environment import Environment
from swarp.interop.checks import env_mask, group_action_bounds
from swarp.interop.torchrl_actions import GroupActions
from swarp.interop.torchrl_specs import TensorDictLayout
from swarp.scenarios.framework.base import scenario_names

LAYOUTS = ("flat", "agents")
#: Name of the single agent group of the ``"agents"`` layout for a scenario without groups
#: (VmasEnv's default group, and swarp's).
GROUP = DEFAULT_GROUP
#: Seeds handed to the simulator are reduced into its range [0, 2^31).
SEED_MODULUS = 2**31
#: ``render`` modes, as VmasEnv's (``"human"``, its default, also shows the frame in a window).
RENDER_MODES = ("human", "rgb_array")


class _ClassProperty:
    """A read-only property of the class (``SwarpEnv.available_envs``), as VmasEnv's."""

    def __init__(self, getter):
        self.getter = getter
        self.__doc__ = getter.__doc__

    def __get__(self, instance, owner):
        return self.getter(owner)


class SwarpEnv(EnvBase):
    """A swarp ``Environment`` as a batched TorchRL env (see the module docstring for the layout).

    Args:
        env: The ``swarp.Environment`` to wrap (its batch becomes ``batch_size=[n_envs]``).
        layout: ``"flat"`` (``"observation"``, ``"action"``, ``"reward"`` at the root) or
            ``"agents"`` (VmasEnv's multi-agent layout: ``("agents", ...)``, or one group per
            agent group of a grouped ``env``). ``None`` (default): ``"flat"``, or ``"agents"`` for a
            grouped ``env`` or one with an alive mask, which have no flat layout.
        action_low: With ``action_high``, a scalar normalized action box ``[action_low, action_high]``
            mapped onto ``env.action_bounds``; ``None`` (default) for physical actions. With groups,
            the box of every continuous group.
        action_high: Upper end of the normalized box.
        allow_done_after_reset: Passed to ``EnvBase``; always True with an alive mask (absent
            agents are done from the reset on).
        categorical_actions: For a discrete or multidiscrete ``env`` (or group): the action is the
            indices (True, VmasEnv's default: ``Categorical`` / ``MultiCategorical``) or their one-hot
            encoding (False: ``OneHot`` / ``MultiOneHot``); ``swarp.interop.torchrl_actions`` gives
            the shapes. No effect on continuous actions.

    Attributes:
        sim: The wrapped ``Environment``.
        layout: ``"flat"`` or ``"agents"``.
        group_map: In the ``"agents"`` layout, ``{group: [agent names]}`` in agent order:
            ``{"agents": ["agent_0", ...]}`` without groups, ``{"a": ["a_0", "a_1"], "b": [...]}``
            with; ``None`` in the ``"flat"`` layout.
        agent_names: ``["agent_0", ...]``, or ``["<group>_<i>", ...]`` with groups (``i`` counts
            within the group, so VmasEnv's default grouping of these names is ``group_map``).
        agent_names_to_indices_map: ``{"agent_0": 0, ...}``: each agent's index along the agent
            dimension of the ``Environment`` (VmasEnv's attribute).
        het_specs: ``False``: within a group every agent has the same specs (VmasEnv's attribute,
            which marks a group whose agents' specs differ; groups may differ from one another).
        het_specs_map: ``{group: False}`` in the ``"agents"`` layout, else ``{}``.
        group_actions: ``{group: GroupActions}``: each group's action spec and conversion.
        entries: The ``swarp.interop.torchrl_specs.TensorDictLayout``: what the tensordicts hold
            where (observation and action keys, info entries, the alive mask's entries).
        info_keys: The scenario's info entries handed out (``entries.info_keys``).

    The other VmasEnv attributes are the properties ``n_agents``, ``num_envs``, ``max_steps``,
    ``scenario_name``, ``continuous_actions``, ``categorical_actions``, ``available_envs`` and the
    method ``render``; ``observation_key`` is the one observation key (a KeyError with several, as
    ``EnvBase.action_key``; each group's is ``(group, "observation")``).
    """

    batch_locked = True

    def __init__(
        self,
        env: Environment,
        layout: str | None = None,
        action_low: float | None = None,
        action_high: float | None = None,
        allow_done_after_reset: bool = False,
        *,
        categorical_actions: bool = True,
    ):
        layout = self._check_args(env, layout, action_low, action_high, categorical_actions)
        # Absent agents are done from the reset on (their per-agent done entries).
        allow_done_after_reset = bool(allow_done_after_reset) or env.alive is not None
        super().__init__(
            device=env.torch_device, batch_size=torch.Size([env.n_envs]), allow_done_after_reset=allow_done_after_reset
        )
        self.sim = env
        self.layout = layout
        self._categorical = categorical_actions
        self._groups = env.groups
        if env.grouped:
            self.agent_names = [f"{g.name}_{i}" for g in env.groups for i in range(g.n_agents)]
        else:
            self.agent_names = [f"agent_{i}" for i in range(env.n_agents)]
        names = {g.name: self.agent_names[g.start : g.stop] for g in env.groups}
        self.group_map = names if layout == "agents" else None
        self.agent_names_to_indices_map = {name: i for i, name in enumerate(self.agent_names)}
        self.het_specs = False
        self.het_specs_map = dict.fromkeys(names, False) if layout == "agents" else {}
        self.entries = TensorDictLayout(env, layout)
        self.info_keys = self.entries.info_keys

        # Physical bounds, cached on the device (Environment.action_bounds builds them on the host).
        self.physical_low, self.physical_high = (b.to(env.torch_device, env.dtype) for b in env.action_bounds)
        self.normalized = action_low is not None
        self.action_low = self.action_high = None
        if self.normalized:
            self.action_low, self.action_high = float(action_low), float(action_high)
        box = (self.action_low, self.action_high) if self.normalized else None
        self.group_actions = {}
        for g in env.groups:
            box_g = (*(b.to(env.torch_device, env.dtype) for b in group_action_bounds(env, g)), box)
            self.group_actions[g.name] = GroupActions(g.name, g.n_agents, g.action_space, categorical_actions, *box_g)
        self._pending = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
        # With an alive mask: the agents that acted in the last step (sim.alive as the step began).
        self._acting = None if env.alive is None else torch.empty_like(env.alive)
        self._make_specs()

    @staticmethod
    def _check_args(env, layout, action_low, action_high, categorical_actions) -> str:
        """The layout to use, after checking the constructor's arguments."""
        if not isinstance(env, Environment):
            raise TypeError(f"SwarpEnv wraps a swarp.Environment, got {type(env).__name__}")
        if layout is None:
            layout = "agents" if env.grouped or env.alive is not None else "flat"
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if layout == "flat" and env.grouped:
            raise ValueError(
                f"layout='flat' puts every agent in one tensor, but this Environment has agent groups "
                f"{[g.name for g in env.groups]}, each with its own observation width and action space: use "
                f"layout='agents' (one TorchRL group per agent group, as VmasEnv's group_map; the default here)"
            )
        if layout == "flat" and env.alive is not None:
            raise ValueError(
                "layout='flat' has one done entry per env, but this Environment keeps an alive mask (agents that "
                "leave, or a per-env agent count): use layout='agents' (the default here), whose group holds the "
                "mask and TorchRL's per-agent done entries"
            )
        if not isinstance(categorical_actions, bool):
            raise TypeError(f"categorical_actions must be a bool, got {categorical_actions!r}")
        if action_low is not None and all(g.action_space.discrete for g in env.groups):
            kinds = " / ".join(sorted({g.action_space.kind for g in env.groups}))
            raise ValueError(
                f"action_low / action_high (a normalized action box) apply to continuous actions only; this "
                f"Environment has {kinds} actions (indices, see categorical_actions)"
            )
        if (action_low is None) != (action_high is None):
            raise ValueError("give both action_low and action_high (a normalized box) or neither (physical actions)")
        if action_low is not None:
            for name, value in (("action_low", action_low), ("action_high", action_high)):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"{name} must be a finite scalar, got {value!r}")
            if not action_low < action_high:
                raise ValueError(f"action_low must be < action_high, got {action_low!r} and {action_high!r}")
        return layout

    # --- VmasEnv attributes -------------------------------------------------------------------

    @property
    def n_agents(self) -> int:
        """Agents per env A (the agent dimension of every per-agent entry)."""
        return self.sim.n_agents

    @property
    def num_envs(self) -> int:
        """Parallel envs E, ``batch_size[0]`` (VmasEnv's name for ``sim.n_envs``)."""
        return self.sim.n_envs

    @property
    def max_steps(self) -> int | None:
        """Episode length limit [steps] (``None``: no limit); reaching it sets ``truncated``."""
        return self.sim.max_steps

    @property
    def scenario_name(self) -> str:
        """Name of the wrapped scenario, as ``swarp.make`` takes it (``"navigation"``)."""
        return self.sim.scenario.name

    @property
    def observation_key(self) -> NestedKey:
        """The observation's key: ``"observation"`` (flat) or ``("agents", "observation")``.

        Raises:
            KeyError: the env has several groups (each group's is ``(group, "observation")``).
        """
        entries = self.entries.observation_keys
        if len(entries) > 1:
            raise KeyError(f"observation_key: this env has one observation per group, at {entries}")
        return entries[0]

    @property
    def continuous_actions(self) -> bool:
        """Whether the wrapped env's actions are continuous (float [n_envs, n_agents, act_dim]);
        False for ``action_space="discrete"`` or ``"multidiscrete"`` (integer indices), and with
        groups unless every group's actions are continuous."""
        return not any(g.action_space.discrete for g in self._groups)

    @property
    def categorical_actions(self) -> bool:
        """The encoding of discrete actions given at construction (True, VmasEnv's default: indices;
        False: one-hot); it has no effect on continuous actions."""
        return self._categorical

    @_ClassProperty
    def available_envs(cls) -> list[str]:
        """Names of the scenarios ``swarp.make`` builds (VmasEnv's class property), sorted."""
        return scenario_names()

    def render(
        self,
        mode: str = "human",
        env_index: int = 0,
        agent_index_focus: int | None = None,
        visualize_when_rgb: bool = False,
        **overlays,
    ):
        """Draw one env, with VmasEnv's signature; reads the state, never steps or writes it.

        Args:
            mode: ``"human"`` (VmasEnv's default) shows the frame in a window (pygame, the ``viz``
                extra) and returns it; ``"rgb_array"`` only returns it.
            env_index: The env to draw, an int in ``[0, num_envs)``.
            agent_index_focus: ``None`` only (the view is the world; choose another with ``extent``).
            visualize_when_rgb: With ``mode="rgb_array"``, also show the frame in a window.
            **overlays: Passed to ``Environment.render``: ``width``, ``height`` [px], ``extent``
                ``(x_min, x_max, y_min, y_max)`` [m] and ``swarp.render.Overlays`` switches
                (``neighbors``, ``velocity``, ``ids``, ``lidar``, ...).

        Returns:
            The (H, W, 3) uint8 RGB frame (numpy; 480 x 480 by default), in both modes.

        Raises:
            ValueError: an unknown ``mode``, or an ``agent_index_focus`` other than ``None``.
            IndexError: ``env_index`` outside ``[0, num_envs)``.
            TypeError: a non-int ``env_index``, a non-bool ``visualize_when_rgb`` or an unknown
                overlay keyword.
            RuntimeError: the ``Environment`` is closed.
        """
        if mode not in RENDER_MODES:
            raise ValueError(f"render mode must be one of {RENDER_MODES}, got {mode!r}")
        if agent_index_focus is not None:
            raise ValueError(
                f"agent_index_focus={agent_index_focus!r} is not supported: the frame shows the world; pass "
                "extent=(x_min, x_max, y_min, y_max) [m] to choose the view"
            )
        if not isinstance(visualize_when_rgb, bool):
            raise TypeError(f"visualize_when_rgb must be a bool, got {visualize_when_rgb!r}")
        show = mode == "human" or visualize_when_rgb
        return self.sim.render(mode="human" if show else "rgb_array", env_index=env_index, **overlays)

    # --- specs ------------------------------------------------------------------------------

    def _make_specs(self) -> None:
        action_specs = {name: actions.spec(self.num_envs) for name, actions in self.group_actions.items()}
        specs = self.entries.specs(action_specs, self.device)
        self.full_done_spec = specs["done"]
        self.full_observation_spec = specs["observation"]
        self.full_action_spec = specs["action"]
        self.full_reward_spec = specs["reward"]

    # --- actions ----------------------------------------------------------------------------

    def _actions_of(self, group: str | None) -> GroupActions:
        if group is None:
            if len(self.group_actions) > 1:
                raise ValueError(f"this env has groups {list(self.group_actions)}: name one (group=...)")
            (actions,) = self.group_actions.values()
            return actions
        if group not in self.group_actions:
            raise KeyError(f"no group {group!r}; the groups are {list(self.group_actions)}")
        return self.group_actions[group]

    def to_physical(self, action: torch.Tensor, group: str | None = None) -> torch.Tensor:
        """Map actions [..., A, act_dim] of the spec's box to physical units, in the simulator's
        dtype and on its device (the identity map with physical actions).

        Normalized actions are clamped to ``[action_low, action_high]`` first, so every finite value
        maps inside ``sim.action_bounds`` (1e30 to the upper bound, not to inf); NaN and inf pass
        unchanged (the step acts on them as 0 and raises ``sim.invalid_actions()``).

        With discrete actions, ``action`` is in the spec's encoding ([..., A, *per_agent], see
        ``to_indices``) and the result is the physical command [..., A, D] the step decodes it to
        (``swarp.core.spaces.decode_torch``; 0 for an agent with an invalid index or one-hot row).

        With groups, ``group`` names the group whose action this is ([..., A_g, ...] in, the
        group's [..., A_g, D_g] command out).

        Raises:
            TypeError: ``action`` is not a tensor of real numbers (of integers, for categorical
                discrete actions).
            ValueError: its last two dimensions are not [n_agents, act_dim] (discrete: its trailing
                dimensions are not the spec's); no ``group`` named where there are several.
            KeyError: ``group`` is not a group of the env.
        """
        return self._actions_of(group).physical(action)

    def to_indices(self, action: torch.Tensor, group: str | None = None) -> torch.Tensor:
        """The indices [..., A, width] ``Environment.step`` takes for discrete actions in the spec's
        encoding: categorical [..., A] (``discrete``) or [..., A, D] (``multidiscrete``) of an integer
        dtype (kept), or one-hot [..., A, prod(nvec)] / [..., A, sum(nvec)] of bool, int or float
        (int64 out; -1, out of range, for a row that is not one 1 among 0s). On the simulator's
        device; no host sync. With groups, ``group`` names the group (as ``to_physical``).

        Raises:
            ValueError: the env's (group's) actions are continuous, the shape is not the spec's, or
                no ``group`` is named where there are several.
            TypeError: not a tensor, or of a dtype the encoding does not take
                (``swarp.interop.torchrl_actions.to_indices``).
            KeyError: ``group`` is not a group of the env.
        """
        return self._actions_of(group).indices(action)

    # --- EnvBase hooks ----------------------------------------------------------------------

    def _by_group(self, value):
        """An output of the ``Environment`` (a tensor, or a mapping by group when grouped) as a
        mapping by group."""
        return value if self.sim.grouped else {self._groups[0].name: value}

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        sim = self.sim
        partial = tensordict.get("_step", None)  # EnvBase.step passes it on only when some is True
        if partial is not None and not bool(partial.all()):  # a host read, only on this rare path
            raise ValueError(
                "SwarpEnv steps every env together: a '_step' mask must be all True (partial steps are not "
                "supported; reset finished envs with '_reset' instead)"
            )
        inputs = {}
        for name, actions in self.group_actions.items():
            key = self.entries.action_keys[name]
            action = tensordict.get(key, None)
            if action is None:
                keys = sorted(str(k) for k in tensordict.keys(include_nested=True, leaves_only=True))
                raise KeyError(f"step() needs the action at {key!r} ({actions.dims}); the tensordict has {keys}")
            inputs[name] = actions.step_input(action, f"tensordict[{key!r}]", sim.n_envs)
        if self._acting is not None:
            self._acting.copy_(sim.alive)  # the step rewrites sim.alive in place
        obs, reward, terminated, truncated, info = sim.step(inputs if sim.grouped else next(iter(inputs.values())))
        obs, reward = self._by_group(obs), self._by_group(reward)
        if sim.auto_reset:
            # The simulator already started the next episode of the envs that finished; TorchRL
            # wants their last observation here, and the new one from the reset that follows.
            done = terminated | truncated
            final = self._by_group(info["final_obs"])
            obs = {name: torch.where(done.view(-1, 1, 1), final[name], value) for name, value in obs.items()}
            self._pending.copy_(done)
        else:
            obs = {name: value.clone() for name, value in obs.items()}
        present = None
        if self._acting is not None:
            # An episode that ends ends for every agent that acted in it (an agent leaving on its
            # last step gets the env's flags); an ongoing one loses the agents that left.
            present = torch.where((terminated | truncated).unsqueeze(-1), self._acting, sim.alive)
        return self.entries.output(obs, reward, info, terminated, truncated, present)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        sim = self.sim
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is None and tensordict is not None:
            self._check_group_resets(tensordict)
        if mask is None:
            obs, info = sim.reset()
            self._pending.zero_()
            terminated = truncated = torch.zeros(sim.n_envs, dtype=torch.bool, device=self.device)
        else:
            mask = env_mask(mask, "tensordict['_reset']", sim.n_envs, self.device, shapes=[(sim.n_envs, 1)])
            # Envs the simulator auto-reset during the last step already hold their next episode.
            obs = sim.reset_at(mask & ~self._pending)
            self._pending.logical_and_(~mask)
            info = sim.info
            # Rows of envs not in the mask are discarded by TorchRL; keep them as they were.
            terminated = sim.terminated & ~mask
            truncated = sim.truncated & ~mask
        obs = {name: value.clone() for name, value in self._by_group(obs).items()}
        return self.entries.output(obs, None, info, terminated, truncated)

    def _check_group_resets(self, tensordict: TensorDictBase) -> None:
        """Refuse a group's ``"_reset"`` without the root one: an agent is never reset alone. With the
        root's (TorchRL writes both where a group has done entries), the groups' are ignored: they
        are True for agents that left, whose envs go on."""
        groups = [key for key in self.reset_keys if key != "_reset" and tensordict.get(key, None) is not None]
        if groups:
            raise ValueError(
                f"SwarpEnv resets whole envs: {groups} (per agent) need the root '_reset' [n_envs, 1] beside "
                "them, which alone says which envs reset; an agent that left stays out until its env resets"
            )

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            return
        self.sim.reset(seed=int(seed) % SEED_MODULUS)
        self._pending.zero_()

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the adapter and the wrapped ``Environment`` (``Environment.close``); idempotent."""
        super().close(raise_if_closed=raise_if_closed)
        self.sim.close()

    def __del__(self):
        # EnvBase.__del__ would close(): garbage collection of the adapter must not close the
        # Environment, which its owner may go on using. Only an explicit close() does.
        pass

    def _actions_text(self) -> str:
        if not self.sim.grouped:
            return next(iter(self.group_actions.values())).describe()
        return "{" + "; ".join(f"{name}: {a.describe()}" for name, a in self.group_actions.items()) + "}"

    def __repr__(self) -> str:
        sim = self.sim
        return (
            f"SwarpEnv({sim.scenario.name!r}, n_envs={sim.n_envs}, n_agents={sim.n_agents}, layout={self.layout!r}, "
            f"actions={self._actions_text()}, auto_reset={sim.auto_reset}, "
            f"device={self.device})"
        )
