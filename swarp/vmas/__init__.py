"""VMAS drop-in: ``make_env`` builds a swarp environment behind VMAS's ``Environment`` API.

    from swarp.vmas import make_env                      # instead of ``from vmas import make_env``

    env = make_env("navigation", num_envs=32, device="cpu", seed=0, max_steps=100, n_agents=4)
    obs = env.reset()                                    # list of n_agents tensors [32, obs_dim]
    for _ in range(200):
        actions = [env.get_random_action(agent) for agent in env.agents]    # [32, act_dim] each
        obs, rews, dones, info = env.step(actions)      # rews: n_agents x [32]; dones: [32] bool
        for index in dones.nonzero().flatten().tolist():
            obs = env.reset_at(index)

What follows VMAS 1.5.2 (``vmas/simulator/environment/environment.py``) exactly:

* ``reset(seed=None, return_observations=True, return_info=False, return_dones=False)`` and
  ``reset_at(index, ...)`` return what VMAS's do: the observations alone, or a list of the requested
  parts in the order observations, dones (or terminated, truncated), infos; ``None`` when nothing is
  requested. ``reset_at`` resets one env and returns the observations of every env.
* ``step(actions)`` takes a list of per-agent tensors ``[num_envs, get_agent_action_size(agent)]``
  or a dict keyed by agent name, and returns the list ``[obs, rews, dones, infos]``, or ``[obs, rews, terminated,
  truncated, infos]`` with ``terminated_truncated=True``. ``obs`` and ``rews`` are lists of per-agent
  tensors (``[num_envs, obs_dim]`` float32 and ``[num_envs]`` float32), or dicts by agent name with
  ``dict_spaces=True``; ``dones`` is ``[num_envs]`` bool; ``infos`` a list (dict) of per-agent dicts
  of tensors with leading dimension ``num_envs``. Every returned tensor is the caller's (a copy, never
  a view of the simulator's buffers).
* Actions out of ``action_space`` (or NaN) raise ``ValueError`` unless ``clamp_actions=True``, which
  clamps them into it (NaN still raises); actions are detached unless ``grad_enabled=True``, when the
  step is differentiable (swarp's grad-mode step) and the outputs carry autograd history.
* Discrete actions: ``continuous_actions=False`` gives each agent ``Discrete(prod(nvec))`` (actions
  [num_envs, 1] or [num_envs], the flat index, first column most significant) and
  ``multidiscrete_actions=True`` with it ``MultiDiscrete(nvec)`` (actions [num_envs, len(nvec)]);
  ``nvec`` is VMAS's default 3 levels per physical column (``agent.discrete_action_nvec``).
  ``get_agent_action_size`` is 1 or ``len(nvec)``, ``agent.action_size`` stays the physical width,
  ``get_random_action`` returns int64 [num_envs] or [num_envs, len(nvec)], and the physical command
  of an index is VMAS's (for odd ``n`` index 0 is "stay"), decoded by swarp's step
  (``env.sim.world.actions`` holds it). Indices may be of any integer dtype or, as VMAS takes them,
  floats of whole numbers; an index out of range raises ``ValueError`` whatever ``clamp_actions``
  (VMAS asserts), and so does a float that is not a whole number (VMAS would decode it to a level
  between two).
* Agent groups (a swarp scenario declaring several: VMAS's heterogeneous agents). Agents are named
  ``"{group}_{i}"`` (``i`` within the group, as VMAS names ``simple_tag``'s ``"adversary_0"`` ...
  ``"agent_0"``), in agent order; each observes ``[num_envs, obs_dim_g]``, its group's width, and
  acts in its group's space (``action_size``, box and ``discrete_action_nvec`` of the group; the
  swarp option ``action_nvec`` may give levels by group); ``observation_space`` / ``action_space``
  hold each agent's own. ``continuous_actions`` / ``multidiscrete_actions`` are one for the env, as
  in VMAS.
* Communication (a swarp scenario with a channel, ``WorldSpec.comm_dim``; VMAS's ``dim_c``):
  ``env.world.dim_c`` is its width, ``agent.silent`` is True for a ``silent`` group's agents (and
  every agent without a channel), and a speaking agent's actions carry its message as VMAS's:
  ``action_size + dim_c`` columns, the message's in [0, 1] (checked, or clamped with
  ``clamp_actions``), ``Discrete(prod(nvec) * dim_c)`` (the choice the least significant digit) or
  ``MultiDiscrete([*nvec, dim_c])``, sent one-hot; ``get_agent_action_size`` and
  ``get_random_action`` count it. After a step ``agent.action.u`` / ``agent.action.c`` are the
  command and message sent and ``agent.state.c`` the message the agent's state holds (zeros in an
  env reset since); ``c`` is ``None`` for a silent agent (``swarp.vmas.agent``).
* ``max_steps=None`` is an infinite horizon (no truncation); with ``max_steps`` an env is done from
  the step where its step count reaches it until it is reset.
* ``env.agents`` (objects with ``.name`` ``"agent_0"``..., ``.action_size``, ``.batch_dim``,
  ``.device``), ``n_agents``, ``num_envs`` (= ``batch_dim``), ``device`` (a ``torch.device``),
  ``max_steps``, ``steps`` ([num_envs] float32 step counters), ``get_random_action(agent)``,
  ``get_random_actions()``, ``get_agent_action_size(agent)``, ``done()``, ``get_from_scenario``,
  ``continuous_actions``, ``multidiscrete_actions``, ``observation_space`` / ``action_space``
  (``Tuple``, or ``Dict`` by agent name with ``dict_spaces=True``, of float32 ``Box`` es, or of
  ``Discrete`` / ``MultiDiscrete`` spaces; built with ``gymnasium.spaces``, where VMAS uses
  ``gym.spaces``), and ``render(mode="rgb_array", env_index=0)`` -> (H, W, 3) uint8.

What differs, by design (docs/vmas.md has the migration table and the scenario comparison):

* The scenarios are swarp's (``SCENARIOS`` maps VMAS names to them; swarp's own names work too):
  observations, rewards, termination and defaults differ from VMAS's; VMAS option names are
  translated where a swarp option means the same thing (``translate``; ``VMAS_OPTIONS`` is the
  table) and refused with a message naming swarp's equivalent, or saying none exists, otherwise.
  Options are passed only where given: swarp's defaults apply to the rest.
* Discrete levels are set by the swarp option ``action_nvec`` (an int, or one int per physical
  column), not by a scenario's ``agent.discrete_action_nvec``; the levels span each agent's swarp
  action box, which differs from VMAS's in some scenarios (give_way, transport, balance). No
  ``wrapper`` (swarp has its own Gymnasium, PettingZoo and TorchRL adapters in ``swarp.interop``).
* Randomness is swarp's counter-based reset RNG keyed by (seed, env, episode), not torch's global
  RNG: ``seed=None`` means seed 0, ``reset(seed=s)`` restarts it from ``s``, and ``seed(s)`` makes
  the next ``reset()`` do so. ``get_random_action`` draws from a generator of its own, seeded alike.
  Neither touches torch's, numpy's or Python's global RNG.
* The batched swarp ``Environment`` is ``env.sim``: ``[num_envs, n_agents, ...]`` tensors, no
  per-agent copies, resets of many envs in one ``sim.reset_at(mask)``.

The parts: ``option_table.py`` (``SCENARIOS``, ``VMAS_OPTIONS``: the VMAS name table),
``translate.py`` (``translate``), ``make.py`` (``make_env``), ``environment.py``
(``VmasEnvironment``) and ``agent.py`` (``VmasAgent`` and its spaces).
"""

from swarp.vmas.agent import VmasAgent
from swarp.vmas.environment import VmasEnvironment
from swarp.vmas.make import make_env
from swarp.vmas.option_table import ENV_OPTIONS, NO_COUNTERPART, NOT_PER_AGENT, SCENARIOS, VMAS_OPTIONS, VmasOption
from swarp.vmas.translate import Translation, translate

__all__ = [
    "ENV_OPTIONS",
    "NO_COUNTERPART",
    "NOT_PER_AGENT",
    "SCENARIOS",
    "VMAS_OPTIONS",
    "Translation",
    "VmasAgent",
    "VmasEnvironment",
    "VmasOption",
    "make_env",
    "translate",
]
