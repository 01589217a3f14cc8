"""Gymnasium adapter: an ``Environment`` as a ``gymnasium.vector.VectorEnv``, and registered single envs.

Needs the ``gymnasium`` extra.

    sim = swarp.make("navigation", n_envs=64)         # auto_reset=False, swarp's default
    envs = SwarpVectorEnv(sim)                        # NEXT_STEP auto-reset; numpy in, numpy out
    obs, info = envs.reset(seed=0)                    # obs [64, A, obs_dim] float32
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Spaces keep the agent axis: each sub-env observes a ``Box(-inf, inf, (A, obs_dim))`` and acts in a
``Box(low, high, (A, act_dim))`` whose bounds are ``sim.action_bounds`` (physical units), so the
batched spaces are ``(n_envs, A, ...)``. ``flatten_agents=True`` joins the last two axes instead
(``(A * obs_dim,)`` and ``(A * act_dim,)`` per sub-env: one learner acting for every agent).
Discrete action spaces (``swarp.make(..., action_space="discrete" | "multidiscrete")``, see
``swarp.core.spaces``) become int64 ``MultiDiscrete`` spaces of the same layout: each agent's
``env.action_space.heads`` (one column of ``prod(nvec)`` choices, or one column per physical action
of ``nvec[d]``), shape (A, width) per sub-env or (A * width,) flattened; one agent's one flat index,
flattened, is a ``Discrete(prod(nvec))`` (the batched space then a ``MultiDiscrete`` of shape (E,)).
Every agent of a one-group env shares one ``ActionSpace``, so these spaces always exist. Actions are
integer indices of that shape (floats are refused); the simulator decodes them into the physical
command with VMAS 1.5.2's levels, and an index out of range acts as a zero command and raises
``sim.invalid_actions()``.
Communication (a scenario's channel, ``WorldSpec.comm_dim`` C; VMAS 1.5.2's ``dim_c`` layout): a
continuous agent's ``act_dim`` is ``D + C``, its physical command then its message, whose bounds in
``sim.action_bounds`` (and so in the ``Box``) are [0, 1]; a discrete agent's head has C times the
choices (``Discrete(prod(nvec) * C)``: the message's choice is the flat index's least significant
digit) and a multi-discrete one one more column of C choices (``MultiDiscrete([*nvec, C])``). The
choice is sent as a one-hot message; ``sim.comm`` [E, A, C] holds what was sent. A scenario with a
``silent`` group has agents of different spaces: refused as below.
Agent groups (a scenario declaring several, ``sim.grouped``): these spaces hold one observation
width and one action space for every agent, so an env whose groups differ in either (a discrete
group, another width) is refused at construction (``ValueError`` naming the alternatives: the
PettingZoo adapter gives each agent its group's spaces, TorchRL's and BenchMARL's one spec per
group; ``swarp.interop.spaces.check_one_space``). Groups that differ in name only (every group
continuous with one ``ActionSpace`` and one ``obs_dim``) are served as one group: the by-group
outputs are joined along the agent axis, agents in group order, so the spaces, arrays and info are
those of a one-group env of the same A agents.
``reward`` is one number per env as Gymnasium's vector API requires: the mean over agents by default
(``reward="sum"`` for the sum), with the per-agent rewards [E, A] in ``info["agent_reward"]``.

Auto-reset (``autoreset_mode``, an ``AutoresetMode`` or its name; ``metadata["autoreset_mode"]``):

* ``NEXT_STEP``, Gymnasium's default and this adapter's for an ``Environment`` built with
  ``auto_reset=False``. A step that ends an env's episode returns its last observation; the next
  ``step`` resets that env instead of stepping it: its observation starts the new episode, its
  reward (and ``info["agent_reward"]`` row) is 0, its ``terminated`` / ``truncated`` are False, its
  action is ignored (zeroed before the step, so a NaN there raises no flag) and its info rows
  describe the reset. Built on ``Environment.reset_at``: no host sync on the torch backend; the
  numpy backend skips the reset launch when no env finished (it knows from the last step's
  outputs, already on the host). Every Gymnasium vector wrapper accepts this mode.
* ``SAME_STEP``, the default for an ``Environment`` built with ``auto_reset=True``. A finished env is
  reset inside ``step``; the returned observation starts its next episode,
  ``info["final_obs"]`` [E, A, obs_dim] holds the last observation of the finished envs (rows where
  ``info["_final_obs"]`` [E] is set; other rows are stale) and the scenario's info entries describe
  the finishing step. Gymnasium's observation wrappers (``NormalizeObservation``,
  ``FlattenObservation``, ``TransformObservation``, ``DtypeObservation``...) reject this mode.
* ``DISABLED`` (``auto_reset=False``, asked for explicitly). Reset finished envs yourself with
  ``reset(options={"reset_mask": mask})`` (mask [E] bool), or all of them with ``reset()``.
  ``NormalizeObservation`` rejects this mode.

``backend="numpy"`` (default) returns numpy arrays, copied to the host on every call: what
Gymnasium's wrappers expect. ``backend="torch"`` returns torch tensors on the simulator's device,
cloned so they survive the next step, for loops of your own (or TorchRL); both accept numpy or torch
actions. Gymnasium's stateful and vectorized wrappers run numpy code on what ``step`` returns (or
on the actions), whatever the device, so they cannot take torch tensors. Wrapping a torch-backend
env in ``RecordEpisodeStatistics``, ``NormalizeObservation``, ``NormalizeReward``,
``DictInfoToList`` or one of the ``VectorizeTransformObservation`` / ``VectorizeTransformAction`` /
``VectorizeTransformReward`` families (``FlattenObservation``, ``DtypeObservation``,
``RescaleObservation``, ``ClipAction``, ``RescaleAction``, ``ClipReward``...) raises a ``TypeError``
naming the fix, at construction or at the first ``reset``: build the env with ``backend="numpy"``,
wrap it, and put ``gymnasium.wrappers.vector.NumpyToTorch`` outermost if the learner wants tensors
(that wrapper needs the ``array-api-compat`` package). The check reads the stack frames just above
``metadata`` and ``reset`` for the wrapper calling them (every wrapper reaches one of them before
its first step, so ``step`` itself pays nothing). Wrappers that
apply your own function (``TransformObservation``, ``TransformReward``, ``TransformAction``) and
``RecordVideo`` stay allowed.

``reset(seed=s)`` restarts the simulator's counter-based reset RNG from ``s`` (an int in
[0, 2^31); one seed for the whole batch, envs still differ), so seeded resets are reproducible.

Inputs are checked here, once, from metadata alone (no host sync): actions must be real numbers of
shape [n_envs, n_agents, act_dim] (``flatten_agents``: [n_envs, n_agents * act_dim]) exactly (a
numpy array, a nested list or a torch tensor; never broadcast; any int or float dtype, converted to
the simulator's, finite values beyond its range kept finite); NaN and inf are passed on, acting as 0
and raising ``sim.invalid_actions()``. Discrete kinds take integer indices of the action space's
shape (any int dtype, converted to int64; float, bool and complex raise ``TypeError``). ``options``
may hold only ``"reset_mask"``, a bool mask [n_envs] (env indices are rejected, as
``Environment.reset_at`` rejects them). ``close()`` closes the wrapped ``Environment``. The
``Environment`` resets itself when built, so ``step`` before the first ``reset`` is valid.

Registered envs. Importing this module registers ``"swarp/<scenario>-v0"`` with Gymnasium for
every scenario ``swarp.make`` knows (``register_envs()`` registers scenarios added later). Gymnasium
1.x loads no plugins, so something must import it: ``import swarp.interop.gymnasium`` (then
``gymnasium.register_envs(swarp.interop.gymnasium)`` keeps linters from calling the import unused),
or the id's module prefix, ``gymnasium.make("swarp.interop.gymnasium:swarp/navigation-v0")``:

    import gymnasium
    import swarp.interop.gymnasium

    env = gymnasium.make("swarp/navigation-v0")              # SwarpGymnasiumEnv: one env, agents flattened
    envs = gymnasium.make_vec("swarp/navigation-v0", num_envs=64)  # SwarpVectorEnv, NEXT_STEP

Keywords of ``make`` / ``make_vec`` go to ``swarp.make`` (scenario options such as ``n_agents``,
and ``max_steps``, ``device``, ``seed``...) or to the adapter (``reward``, and for ``make_vec``
``backend``, ``autoreset_mode``, ``flatten_agents``); ``make`` simulates on the CPU unless given a
``device`` (one env is latency-bound), ``make_vec`` on CUDA when available. Both flatten the
agents: a ``SwarpGymnasiumEnv`` observes ``Box(-inf, inf, (A * obs_dim,))`` and acts in
``Box(low, high, (A * act_dim,))`` (discrete kinds: ``MultiDiscrete`` of shape (A * width,), or
``Discrete`` for one agent: ``action_space="discrete", n_agents=1`` is a classic single-agent
discrete task, for DQN and the like), the same single spaces ``make_vec`` batches.
``vectorization_mode="sync"`` builds Gymnasium's ``SyncVectorEnv`` of ``SwarpGymnasiumEnv``
instead (one simulator per env: slower). Episodes end as the scenario's do (``max_steps``); the
registrations set no ``max_episode_steps``. (``swarp.interop.torchrl.SwarpEnv`` is TorchRL's
adapter, a different class.)

The parts: ``vector.py`` (``SwarpVectorEnv``) and ``registered.py`` (``SwarpGymnasiumEnv``,
``make_vector_env``, ``register_envs``).
"""

from swarp.interop.gymnasium.registered import (
    NAMESPACE,
    VERSION,
    SwarpGymnasiumEnv,
    env_id,
    make_vector_env,
    register_envs,
)
from swarp.interop.gymnasium.vector import BACKENDS, RESET_OPTIONS, REWARD_MODES, WRAPPER_SEARCH_DEPTH, SwarpVectorEnv

__all__ = [
    "BACKENDS",
    "NAMESPACE",
    "RESET_OPTIONS",
    "REWARD_MODES",
    "VERSION",
    "WRAPPER_SEARCH_DEPTH",
    "SwarpGymnasiumEnv",
    "SwarpVectorEnv",
    "env_id",
    "make_vector_env",
    "register_envs",
]

register_envs()
