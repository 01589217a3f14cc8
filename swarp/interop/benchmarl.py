"""BenchMARL tasks: every registered swarp scenario as a BenchMARL task (needs the ``benchmarl`` extra).

BenchMARL runs an ``Experiment`` of an algorithm, a model and a task. ``SwarpTask`` is the task enum
of swarp, one member per scenario of ``swarp.scenario_names()`` (``SwarpTask.NAVIGATION``,
``SwarpTask.PUSH_T``, ...), built as BenchMARL builds ``VmasTask``; its ``SwarpClass`` builds the
environments as ``SwarpEnv(swarp.make(...), layout="agents")``, the layout of TorchRL's ``VmasEnv``
(every agent in the group ``"agents"``), so BenchMARL's algorithms and models run on it unchanged::

    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig
    from swarp.interop.benchmarl import SwarpTask

    task = SwarpTask.NAVIGATION.get_from_yaml()    # the defaults, swarp/interop/benchmarl_tasks/navigation.yaml
    task.config["n_agents"] = 8                     # any scenario option or Environment keyword
    config = ExperimentConfig.get_from_yaml()       # BenchMARL's defaults; then, e.g.:
    config.loggers = ["csv"]                        # the default adds wandb, which the extra leaves out
    config.sampling_device = config.train_device = config.buffer_device = "cuda"
    config.on_policy_n_envs_per_worker = 600        # swarp envs simulated together (one batch)
    config.on_policy_collected_frames_per_batch = 60_000
    experiment = Experiment(
        task=task,
        algorithm_config=MappoConfig.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=0,
        config=config,
    )
    experiment.run()

A task's config is the keywords of ``swarp.make`` besides ``n_envs``, ``device`` and ``seed``, which
BenchMARL chooses (``on_policy_n_envs_per_worker`` or ``evaluation_episodes``, ``sampling_device``,
the experiment's seed): scenario options (``n_agents``, ``substeps``, ...) and ``Environment``
keywords (``max_steps``, ``auto_reset``, ...). ``max_steps`` [steps] is the episode length, and the
length of BenchMARL's evaluation rollouts. The YAML default of each scenario holds every option of
the scenario at its default, overridden by swarp's training record of the scenario
(``swarp.train.tasks``: e.g. navigation's 4 agents and 100 steps). YAML has no tuples: a list value
is handed to the scenario as a tuple. ``SwarpClass("my_scenario", default_config("my_scenario"))``
is the task of a scenario registered after this module was imported (the enum holds those
registered at import). BenchMARL's hydra command line (``benchmarl/run.py task=...``) knows only
BenchMARL's own task folders: use the Python API above.

Installing: ``pip install torch==2.13.0 -e ".[torchrl,benchmarl]"``. BenchMARL 1.5 imports only with
torchrl < 0.12, so the extra resolves torchrl 0.11 (``SwarpEnv`` works from torchrl 0.11.1 to 0.14);
pinning torch keeps pip from upgrading it for the newest torchvision, which BenchMARL requires.

Every task supports continuous and discrete actions, and BenchMARL picks one as for its VMAS tasks:
continuous where the algorithm allows it and ``ExperimentConfig.prefer_continuous_actions`` is true
(its default; MAPPO, IPPO, MASAC, ISAC, MADDPG, IDDPG), discrete otherwise (QMIX, VDN and IQL, which
are discrete-only, or MAPPO, IPPO, MASAC, ISAC with ``prefer_continuous_actions=False``). Continuous:
the action box BenchMARL sees is ``SwarpClass.action_box``, [-1, 1] in every dimension, which
``SwarpEnv`` maps affinely onto the scenario's physical ``action_bounds``, so one Gaussian head fits
every scenario; a subclass of ``SwarpClass`` with ``action_box = None``, passed to ``Experiment`` as
``MyClass("navigation", config)``, has physical actions instead. Discrete: the environment is made
with ``action_space="discrete"`` and the action is one int64 index per agent, ``("agents",
"action")`` [n_envs, n_agents] of a ``Categorical(prod(nvec))`` spec (VmasEnv's
``categorical_actions=True``, as BenchMARL's VMAS tasks use), decoded as VMAS 1.5.2 does
(``swarp.core.spaces``); the task config's ``action_nvec`` sets the levels per action column (VMAS's
3 by default: 9 choices for a 2-D command, 81 for the drones' 4 columns) and is ignored by continuous
runs. ``action_space`` itself is BenchMARL's choice, never a config key.
Communication (a scenario with a channel, ``WorldSpec.comm_dim`` C, e.g. a speaker and a listener):
each speaking agent's action carries VMAS's message, as ``SwarpEnv`` shows it. Continuous: C more
columns after the command, inside the same [-1, 1] box, mapped onto the message's [0, 1] (so the
Gaussian head's ``act_dim`` is D + C). Discrete: the ``Categorical`` has ``prod(nvec) * C`` choices,
the message's choice the least significant digit of the index (QMIX, VDN, IQL learn the joint
choice of command and message). A ``silent`` group's agents have no message in their action.
Per-agent info entries are ``("agents", "info", key)`` (BenchMARL logs them under
``collection/agents/info/``), per-env ones ``("info", key)`` (logged under ``collection/info/``);
neither is an observation. There is no global state and no action mask.
Agents that leave and arrive (``variable_navigation``, or a config with ``n_agents: [lo, hi]`` or
``leave_on_goal: true``): ``SwarpEnv`` adds each group's ``(group, "mask")`` and per-agent done
entries (``swarp.interop.torchrl``); ``observation_spec`` and ``info_spec`` leave the mask out (no
model reads it), and BenchMARL's losses read the group's done keys (it expands the root ones only
where a group has none), so MAPPO's and IPPO's GAE stops a departed agent's return where it left.
BenchMARL cannot leave dead agents' rows out of its loss means; swarp's own trainer does.

Agent groups. A scenario that declares groups (``WorldSpec.groups``, e.g. ``GroupSpec("a", 2, ...)``
and ``GroupSpec("b", 2, ...)``) is a task of several BenchMARL groups: ``SwarpEnv`` puts each group
under its own key (``("a", "observation")`` [n_envs, A_a, obs_dim_a], ``("a", "action")``,
``("a", "reward")``, ``("a", "info", key)``; the same for ``"b"``), ``group_map`` is ``{"a": ["a_0",
"a_1"], "b": ["b_0", "b_1"]}``, and every hook below answers per group, so BenchMARL builds one
policy (and critic) per group, each of its group's observation width, and logs each group's rewards
under ``collection/a/...``. The done entries stay at the root, one per env, as VmasEnv's (BenchMARL
expands them to each group). The action kind is BenchMARL's choice for the whole task (every group
continuous, or every group ``action_space="discrete"``); ``action_nvec`` may then be a mapping of
level counts by group (``{"a": [5, 3]}``; groups it leaves out take 3 per column). Evaluation videos draw env
0 of the evaluation batch with ``Environment.render``; BenchMARL's csv logger writes them with
torchvision, so where torchvision does not import (the CUDA build pip pairs with the CPU torch 2.13)
``has_render`` is False and evaluations run without them (``video_writer_problem``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torchrl.data import Composite
from torchrl.envs import EnvBase

from swarp.env.make import ENV_KWARGS, make
from swarp.interop.torchrl import SEED_MODULUS, SwarpEnv
from swarp.scenarios.framework.base import get_scenario, scenario_names

try:
    import yaml  # BenchMARL's own dependency (through hydra-core)
    from benchmarl.environments.common import Task, TaskClass
except ImportError as error:  # not installed, or installed beside a torchrl it does not import with
    raise ImportError(
        f"swarp.interop.benchmarl needs an importable BenchMARL ({error}); install swarp with its benchmarl "
        f"extra (pip install -e '.[torchrl,benchmarl]' in a checkout), which holds torchrl in the range "
        f"BenchMARL 1.5 imports with (>=0.11.1,<0.12)"
    ) from error

#: The folder of the per-scenario default configs, ``<scenario>.yaml``.
CONFIG_DIR = Path(__file__).parent / "benchmarl_tasks"
#: ``swarp.make`` keywords BenchMARL sets itself; a task config must not hold them.
RESERVED_KEYS = ("n_envs", "device", "seed", "batch_size", "env_offset", "action_space")
#: Why each reserved key is BenchMARL's, for the error message.
RESERVED_BY = {
    "action_space": "the action space from the algorithm (get_env_fun's continuous_actions: BenchMARL's "
    "prefer_continuous_actions, or a discrete-only algorithm such as QMIX); set action_nvec to choose the "
    "levels of the discrete actions",
}


def _read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping of a YAML file, without a hydra ``defaults`` list (as BenchMARL reads its own)."""
    with open(path) as file:
        config = yaml.safe_load(file)
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a task config must be a YAML mapping, got {type(config).__name__}")
    config.pop("defaults", None)
    return config


def _scenario(name: str) -> str:
    """The registered scenario named ``name``, in any case (BenchMARL's enum names are upper case)."""
    if not isinstance(name, str):
        raise TypeError(f"a swarp task name must be a str, got {type(name).__name__}")
    names = scenario_names()
    if name in names:
        return name
    matches = [n for n in names if n.lower() == name.lower()]
    if len(matches) != 1:
        raise ValueError(f"no swarp scenario {name!r}; registered: {names}")
    return matches[0]


def default_config(scenario: str) -> dict[str, Any]:
    """The scenario's own defaults as a task config: ``max_steps`` first, then every option.

    Built from the scenario's ``Config`` dataclass (the packaged YAML files start from it and add
    the training record's overrides). Tuples become lists, as YAML holds them.

    Raises:
        ValueError: ``scenario`` is not registered.
    """
    cls = get_scenario(_scenario(scenario))
    defaults = {}
    for field in dataclasses.fields(cls.Config):
        if field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        else:
            continue  # a required option has no default to write down
        defaults[field.name] = list(value) if isinstance(value, tuple) else value
    out = {"max_steps": defaults.pop("max_steps")} if "max_steps" in defaults else {}
    return {**out, **defaults}


def config_path(scenario: str) -> Path:
    """Path of the packaged default config of ``scenario`` (``benchmarl_tasks/<scenario>.yaml``)."""
    return CONFIG_DIR / f"{_scenario(scenario)}.yaml"


def load_default_config(scenario: str) -> dict[str, Any]:
    """The packaged default config of ``scenario``, checked (``check_config``).

    Raises:
        ValueError: ``scenario`` is not registered, or the file holds an invalid config.
        FileNotFoundError: no default config is packaged for it (a scenario registered by the user:
            start from ``default_config``).
    """
    path = config_path(scenario)
    if not path.is_file():
        raise FileNotFoundError(
            f"no BenchMARL default config for swarp scenario {scenario!r} at {path}; "
            f"use default_config({scenario!r}) or give the config yourself"
        )
    return check_config(scenario, _read_yaml(path))


def check_config(scenario: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with its keys checked against ``swarp.make``'s, lists made tuples (also
    the values of a mapping, such as a per-group ``action_nvec``).

    Only the keys are checked here (cheaply, without building an environment): the values are
    validated by the scenario and the ``Environment`` when ``swarp.make`` builds one.

    Raises:
        TypeError: ``config`` is not a mapping with str keys.
        ValueError: ``scenario`` is not registered, a key is neither a scenario option nor an
            ``Environment`` keyword, or is one BenchMARL sets (``RESERVED_KEYS``).
    """
    name = _scenario(scenario)
    if not isinstance(config, Mapping):
        raise TypeError(f"a swarp task config must be a mapping, got {type(config).__name__}")
    options = get_scenario(name).option_names()
    valid = sorted(set(options) | {k for k in ENV_KWARGS if k not in RESERVED_KEYS})
    out = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise TypeError(f"swarp task {name!r}: config keys must be str, got {key!r}")
        if key in RESERVED_KEYS:
            why = RESERVED_BY.get(
                key,
                "n_envs from on_policy_n_envs_per_worker / off_policy_n_envs_per_worker or evaluation_episodes, "
                "device from sampling_device, seed from the experiment",
            )
            raise ValueError(f"swarp task {name!r}: {key!r} is set by BenchMARL ({why}); remove it from the config")
        if key not in valid:
            raise ValueError(f"swarp task {name!r}: unknown config key {key!r}; valid keys: {valid}")
        out[key] = _tuples(value)
    return out


def _tuples(value: Any) -> Any:
    """A copy of a config value with its lists made tuples, also inside a mapping (a per-group
    ``action_nvec``)."""
    if isinstance(value, Mapping):
        return {key: _tuples(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(value)
    return copy.deepcopy(value)


def _base_env(env: EnvBase) -> SwarpEnv:
    """The ``SwarpEnv`` under BenchMARL's transforms (``TransformedEnv.base_env``, repeatedly)."""
    base = env
    while not isinstance(base, SwarpEnv) and hasattr(base, "base_env"):
        base = base.base_env
    if not isinstance(base, SwarpEnv):
        raise TypeError(f"expected a SwarpEnv (possibly transformed), got {type(env).__name__}")
    return base


def make_env(
    scenario: str,
    num_envs: int,
    seed: int | None,
    device: Any,
    config: Mapping[str, Any],
    action_box: tuple[float, float] | None = (-1.0, 1.0),
    continuous_actions: bool = True,
) -> SwarpEnv:
    """A ``SwarpEnv`` of ``num_envs`` envs of ``scenario`` in the ``"agents"`` layout (one group
    ``"agents"``, or one group per agent group of a scenario that declares groups).

    Args:
        scenario: A registered scenario name (any case).
        num_envs: Envs simulated together, the env's ``batch_size=[num_envs]``.
        seed: The simulator's seed (reduced into [0, 2^31)); ``None`` is 0.
        device: Torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
        config: ``swarp.make`` keywords (``check_config``).
        action_box: ``(low, high)``: the normalized continuous action box mapped onto the physical
            action bounds; ``None``: physical actions. Unused with discrete actions.
        continuous_actions: True: continuous actions, float32 [num_envs, n_agents, act_dim];
            False: ``action_space="discrete"`` with the config's ``action_nvec`` levels (VMAS's 3
            per column by default; a mapping by group with groups), int64 indices [num_envs,
            n_agents] in ``[0, prod(nvec))`` (a ``Categorical`` spec, as BenchMARL's VMAS tasks
            build; ``prod(nvec) * C`` choices where the agents speak on a C-wide channel). With
            groups these hold per group: [num_envs, A_g, ...]. ``action_nvec`` in the config is
            ignored with continuous actions, as VMAS ignores an agent's ``discrete_action_nvec``.

    Raises:
        ValueError: as ``check_config``; ``num_envs`` is not an int >= 1; ``seed`` is not an int.
    """
    options = check_config(scenario, config)
    if continuous_actions:
        options.pop("action_nvec", None)
    else:
        options["action_space"] = "discrete"
        action_box = None
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an int or None, got {seed!r}")
    sim = make(_scenario(scenario), n_envs=num_envs, device=device, seed=(seed or 0) % SEED_MODULUS, **options)
    low, high = action_box if action_box is not None else (None, None)
    return SwarpEnv(sim, layout="agents", action_low=low, action_high=high)


class SwarpClass(TaskClass):
    """The BenchMARL ``TaskClass`` of a swarp scenario (BenchMARL's ``VmasClass`` counterpart).

    Args:
        name: The scenario (any case: ``SwarpTask`` members pass their upper-case names).
        config: ``swarp.make`` keywords (``check_config``); ``None`` is ``{}`` (the scenario's own
            defaults).

    Attributes:
        name: As given (BenchMARL names the experiment after ``name.lower()``).
        config: The config dict (BenchMARL edits and saves it; it is checked again at each
            ``get_env_fun``).
        action_box: ``(low, high)`` of the normalized action box, ``(-1.0, 1.0)``; ``None`` in a
            subclass gives physical actions (``SwarpEnv``'s spec is then ``action_bounds``).

    Raises:
        ValueError, TypeError: as ``check_config``.
    """

    action_box: tuple[float, float] | None = (-1.0, 1.0)

    def __init__(self, name: str, config: Mapping[str, Any] | None):
        config = {} if config is None else config
        check_config(name, config)
        super().__init__(name=name, config=dict(config))

    @property
    def scenario(self) -> str:
        """The registered scenario name of this task."""
        return _scenario(self.name)

    def get_env_fun(
        self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any
    ) -> Callable[[], EnvBase]:
        """A function of no arguments that builds a fresh ``SwarpEnv`` (``make_env``) of ``num_envs``
        envs on ``device``: ``batch_size=[num_envs]``, observation ``("agents", "observation")``
        [num_envs, n_agents, obs_dim] float32, reward ``("agents", "reward")`` [num_envs, n_agents,
        1] float32, and action ``("agents", "action")``: with ``continuous_actions``, float32
        [num_envs, n_agents, act_dim] in ``action_box``; without, int64 indices [num_envs, n_agents]
        of a ``Categorical(prod(nvec))`` spec (``action_space="discrete"``, ``nvec`` from the config's
        ``action_nvec``, 3 levels per column by default: 9 choices on a 2-D command). A scenario
        with agent groups has these entries under each group's name instead of ``"agents"``, of
        the group's agents A_g, observation width and action columns.

        Raises:
            ValueError: the config is invalid (``check_config``).
        """
        config = check_config(self.scenario, self.config)
        return functools.partial(
            make_env, self.scenario, num_envs, seed, device, config, self.action_box, bool(continuous_actions)
        )

    def supports_continuous_actions(self) -> bool:
        """True: every swarp scenario has continuous actions."""
        return True

    def supports_discrete_actions(self) -> bool:
        """True: every swarp scenario also runs with discrete actions (``action_space="discrete"``),
        so BenchMARL's discrete-only algorithms (QMIX, VDN, IQL) run on it."""
        return True

    def has_render(self, env: EnvBase) -> bool:
        """True where BenchMARL can write its evaluation videos: ``Environment.render`` draws any
        scenario (``render_callback``), but the csv logger writes the video with torchvision
        (``video_writer_problem``). False, with one warning saying why, where torchvision does not
        import: the evaluation then runs without a video instead of failing."""
        problem = video_writer_problem()
        if problem is not None:  # Python's default filter shows it once
            warnings.warn(
                f"swarp's BenchMARL tasks evaluate without videos: {problem}, and BenchMARL's csv logger "
                f"writes its videos with torchvision.io.write_video; a torchvision built for this torch "
                f"brings them back (for a CPU torch, from PyTorch's CPU wheel index)",
                stacklevel=2,
            )
        return problem is None

    def max_steps(self, env: EnvBase) -> int:
        """The episode length [steps]: the config's ``max_steps``, else the environment's.

        Raises:
            ValueError: neither gives a length (a scenario without a time limit).
        """
        steps = self.config.get("max_steps")
        if steps is None:
            steps = _base_env(env).sim.max_steps
        if steps is None:
            raise ValueError(
                f"swarp task {self.name.lower()!r} has no time limit; set max_steps in its config "
                f"(BenchMARL's evaluation rollouts need a length)"
            )
        return int(steps)

    def group_map(self, env: EnvBase) -> dict[str, list[str]]:
        """``{"agents": ["agent_0", ..., "agent_{A-1}"]}``: one group of every agent; for a scenario
        with agent groups, one entry per group in agent order (``{"a": ["a_0", "a_1"], "b": [...]}``)."""
        group_map = getattr(env, "group_map", None)
        return dict(group_map) if group_map else dict(_base_env(env).group_map)

    def state_spec(self, env: EnvBase) -> Composite | None:
        """None: swarp scenarios have no global state (MAPPO's critic of a group then sees the
        observations of every agent of the group)."""
        return None

    def action_mask_spec(self, env: EnvBase) -> Composite | None:
        """None: no action masks, in any group."""
        return None

    def observation_spec(self, env: EnvBase) -> Composite:
        """The unbatched observation spec without info or alive mask: ``(group, "observation")``
        [A_g, obs_dim_g] float32 of each group (``("agents", "observation")`` [n_agents, obs_dim]
        without groups); BenchMARL's models read every entry of it."""
        spec = env.full_observation_spec_unbatched.clone()
        for group in self.group_map(env):
            for key in ("info", "mask"):
                if key in spec[group]:
                    del spec[(group, key)]
        if "info" in spec:
            del spec["info"]
        return spec

    def info_spec(self, env: EnvBase) -> Composite | None:
        """The per-agent info entries ``(group, "info", key)`` of each group (float32, [A_g, ...]; a
        scalar per agent is [A_g, 1]), or None when the scenario has none."""
        spec = env.full_observation_spec_unbatched.clone()
        if "info" in spec:
            del spec["info"]  # per-env entries: not per group
        for group in self.group_map(env):
            for key in ("observation", "mask"):
                if key in spec[group]:
                    del spec[(group, key)]
            if "info" not in spec[group]:
                del spec[group]
        return spec if len(spec.keys()) else None

    def action_spec(self, env: EnvBase) -> Composite:
        """The unbatched action spec ``(group, "action")`` of each group (``("agents", "action")``
        without groups): continuous, [A_g, act_dim_g] float32 bounded by ``action_box`` (or by the
        physical bounds); discrete, [A_g] int64 ``Categorical(prod(nvec_g))``."""
        return env.full_action_spec_unbatched

    @staticmethod
    def env_name() -> str:
        """``"swarp"``: the environment's name in BenchMARL's experiment folders and logs."""
        return "swarp"

    @staticmethod
    def render_callback(experiment, env: EnvBase, data) -> Any:
        """An (H, W, 3) uint8 RGB frame [px] of env 0 of ``env`` (``Environment.render``), for
        BenchMARL's evaluation videos."""
        return _base_env(env).sim.render(mode="rgb_array", env_index=0)


@functools.cache
def video_writer_problem() -> str | None:
    """Why BenchMARL's evaluation videos cannot be written in this process, or None if they can.

    With ``ExperimentConfig.render`` on (BenchMARL's default) and a task whose ``has_render`` is
    true, the evaluation collects a frame per step and ``benchmarl.experiment.logger.Logger``
    hands the video to every logger; the csv logger (torchrl's ``CSVLogger``, which
    ``torchrl.record.loggers.get_logger("csv", ...)`` builds with ``video_format="mp4"``) writes it
    with ``torchvision.io.write_video``, importing torchvision at that moment. BenchMARL requires
    torchvision, and the one pip takes beside ``torch==2.13.0`` from PyPI is a CUDA build
    (0.28.0+cu130) whose import fails under the CPU torch (``RuntimeError: operator torchvision::nms
    does not exist``). The answer is cached: the import is tried once per process.
    """
    try:
        import torchvision.io  # noqa: F401
    except Exception as error:  # ImportError, or the RuntimeError of a torchvision built for another torch
        return f"torchvision does not import here ({type(error).__name__}: {error})"
    return None


class _SwarpTaskBase(Task):
    """Behaviour of ``SwarpTask``: defaults from ``benchmarl_tasks/`` and the ``SwarpClass``."""

    @staticmethod
    def associated_class() -> type[TaskClass]:
        """``SwarpClass``."""
        return SwarpClass

    def get_from_yaml(self, path: str | None = None) -> SwarpClass:
        """The ``SwarpClass`` of this scenario with the config of ``path``, by default the packaged
        ``benchmarl_tasks/<scenario>.yaml``.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the file holds an invalid config (``check_config``).
        """
        config = load_default_config(self.name) if path is None else check_config(self.name, _read_yaml(path))
        return self.get_task(config=config)


#: BenchMARL's task enum of swarp: one member per scenario registered when this module was imported,
#: named as the scenario in upper case (``SwarpTask.NAVIGATION``, ``SwarpTask.GIVE_WAY``, ...; a
#: name that is no identifier in upper case, or one that differs from another only in case, has
#: none: use ``SwarpClass``).
#: ``member.get_from_yaml()`` (or ``member.get_task()``) is its ``SwarpClass`` with the default
#: config; ``member.get_task(config={...})`` with another.
SwarpTask = _SwarpTaskBase(
    "SwarpTask",
    list(dict.fromkeys(n.upper() for n in scenario_names() if n.upper().isidentifier())),
    module=__name__,
    qualname="SwarpTask",
)


def task_names() -> list[str]:
    """The scenario names of ``SwarpTask``'s members, in its order (lower case)."""
    return [member.name.lower() for member in SwarpTask]
