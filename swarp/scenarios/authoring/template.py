"""The template of a new scenario (torch reference only) and of its test file, and ``write_scenario``,
which fills both in: what ``python -m swarp.scenario new NAME`` writes.

The scenario is a VMAS ``dispersion``-like task: N agents, N landmarks, a landmark is eaten when an
agent comes close, the team shares +1 per landmark eaten, the episode ends when all are eaten.
docs/writing-scenarios.md walks through it block by block. The placeholders (``string.Template``):
``${name}``, the snake_case scenario name (also the module name), and ``${Class}``, its CamelCase
form (``${Class}Scenario``, ``${Class}Config``); the imports, the paths named in the docstring and,
with ``fused``, the twin (``TWIN_TEMPLATE``: Warp kernels and ``${Class}FusedScenario``).
"""

import builtins
import importlib.util
import keyword
import re
import string
import sys
from pathlib import Path

from swarp.scenarios.framework.base import get_scenario, scenario_names

SCENARIO_TEMPLATE = '''\
"""${name}: N agents eat N landmarks (a VMAS ``dispersion``-like task, ${paths}).

Holonomic agents with velocity control in the soft-walled arena ``[-L, L]^2``. A landmark is eaten
when an agent centre comes closer than ``eat_radius``; the team shares +1 per landmark eaten on a
step; the episode terminates when every landmark is eaten, or truncates at ``max_steps``.

Observation of agent i (``obs_dim = 4 + 3 N``): own position [m] (2), own velocity [m/s] (2), landmark
l - own position [m] for every landmark (2 N), and every landmark's eaten flag, 0 or 1 (N).
Info: ``n_eaten`` [E] int32 (landmarks eaten so far), ``eaten`` [E, N] bool.
"""

${imports}from swarp.scenarios.framework.drawables import Circles, Crosses
from swarp.scenarios.framework.options import OptionChecker

#: Renderer colors (RGB) of landmarks still to eat and of eaten ones.
TODO_COLOR, EATEN_COLOR = (90, 90, 90), (200, 200, 200)


# Options: swarp.make("${name}", n_agents=8) passes its scenario keywords here; __post_init__
# rejects a bad value with a message naming the option.
@dataclass(frozen=True)
class ${Class}Config:
    """Options of ${name} (SI units).

    Attributes:
        n_agents: Agents per env, and landmarks per env.
        world_size: Half-size L [m] of the arena ``[-L, L]^2``.
        agent_radius: Agent radius [m].
        max_speed: Speed limit [m/s].
        eat_radius: A landmark is eaten when an agent centre is closer than this [m].
        dt: Step length [s].
        substeps: Physics substeps per step.
        max_steps: Episode length [steps].
        max_neighbors: Width of the world's contact neighbor lists.
    """

    n_agents: int = 4
    world_size: float = 1.0
    agent_radius: float = 0.05
    max_speed: float = 1.0
    eat_radius: float = 0.1
    dt: float = 0.1
    substeps: int = 1
    max_steps: int = 100
    max_neighbors: int = 8

    def __post_init__(self) -> None:
        check = OptionChecker(self, "${name}")
        check.int("n_agents", 1, 256)
        for name in ("substeps", "max_steps", "max_neighbors"):
            check.int(name, 1)
        for name in ("world_size", "agent_radius", "max_speed", "eat_radius", "dt"):
            check.number(name)
        if self.agent_radius >= self.world_size:
            check.fail(f"agent_radius ({self.agent_radius}) must be smaller than world_size ({self.world_size})")

    # Read by arena.arena_world, not options: velocity control, a spawn grid sized automatically.
    ctrl_mode = "velocity"
    spawn_cells = None


class ${Class}Scenario(Scenario):
    """Agents eat landmarks; see the module docstring for the observation and reward."""

    name = "${name}"
    Config = ${Class}Config

    # The world: N equal holonomic agents in the arena, contact-only neighbor lists, and a spawn grid
    # for 2 N separated points (agents first, then landmarks).
    def make_world(self) -> WorldSpec:
        return arena.arena_world(self, 2 * self.cfg.n_agents, contacts_only=True)

    @property
    def obs_dim(self) -> int:
        return 4 + 3 * self.cfg.n_agents

    # Persistent tensors, allocated once: steps and resets only write them in place.
    def bind(self, env) -> None:
        super().bind(env)
        E, N, dev = self.n_envs, self.cfg.n_agents, env.torch_device
        self.landmarks = torch.zeros(E, N, 2, dtype=self.dtype, device=dev)  # [E, N, 2] positions [m]
        self.eaten = torch.zeros(E, N, dtype=torch.bool, device=dev)  # [E, N] eaten this episode
        self.newly_eaten = torch.zeros(E, dtype=torch.int32, device=dev)  # [E] eaten on the last step
        # The squared radius in the sim dtype, as a kernel would compute it (a constant, not state).
        self.eat_radius2 = torch.tensor(self.cfg.eat_radius, dtype=self.dtype, device=dev).square()
        self._info = {"n_eaten": torch.zeros_like(self.newly_eaten), "eaten": torch.zeros_like(self.eaten)}

    # A new episode in the envs of env_mask [E] bool: every state field, randomness only from the
    # keyed counter-based stream (arena.spawn_torch; more per-env uniforms: arena.env_draws_torch).
    def reset_world(self, env_mask: torch.Tensor) -> None:
        E, N = self.n_envs, self.cfg.n_agents
        points = arena.spawn_torch(self, env_mask, 2 * N)  # places the agents; [E, 2 N, 2], 0 off the mask
        self.landmarks.copy_(torch.where(env_mask.view(E, 1, 1), points[:, N:], self.landmarks))
        self.eaten.masked_fill_(env_mask.view(E, 1), False)
        self.newly_eaten.masked_fill_(env_mask, 0)

    def _d2(self) -> torch.Tensor:
        """[E, A, N] squared distance [m^2] of agent a to landmark l."""
        return (self.landmarks.unsqueeze(1) - self.env.state.pos.unsqueeze(2)).square().sum(-1)

    # Per-step memory, once per step after the physics (never after a reset): eat landmarks.
    def post_step(self) -> None:
        newly = (self._d2() < self.eat_radius2).any(dim=1) & ~self.eaten  # [E, N]
        self.newly_eaten.copy_(newly.sum(dim=1, dtype=torch.int32))
        self.eaten.logical_or_(newly)

    def observations(self) -> torch.Tensor:
        state, E, A = self.env.state, self.n_envs, self.n_agents
        to_landmarks = self.landmarks.unsqueeze(1) - state.pos.unsqueeze(2)  # [E, A, N, 2]
        flags = self.eaten.to(self.dtype).unsqueeze(1).expand(E, A, -1)  # [E, A, N]
        return torch.cat([state.pos, state.vel, to_landmarks.flatten(2), flags], dim=-1)

    # [E, A]: the shared reward, +1 per landmark eaten on this step.
    def rewards(self) -> torch.Tensor:
        return self.newly_eaten.to(self.dtype).unsqueeze(1).expand(self.n_envs, self.n_agents)

    # [E] bool terminal state (success); the time limit is the environment's business.
    def done(self) -> torch.Tensor:
        return self.eaten.all(dim=1)

    # Diagnostics, the same keys as info_buffers, each with leading dim E.
    def info(self) -> dict[str, torch.Tensor]:
        return {"n_eaten": self.eaten.sum(dim=1, dtype=torch.int32), "eaten": self.eaten}

    def info_buffers(self) -> dict[str, torch.Tensor]:
        return self._info

    # Everything a snapshot (env.get_state / set_state) must cover.
    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"landmarks": self.landmarks, "eaten": self.eaten, "newly_eaten": self.newly_eaten}

    # For swarp.render: index device tensors by env_index (the envs drawn), never copy to the host.
    def drawables(self, env_index: torch.Tensor) -> list:
        landmarks, eaten = self.landmarks.index_select(0, env_index), self.eaten.index_select(0, env_index)
        r = self.cfg.eat_radius
        return [
            Circles(landmarks, r, color=EATEN_COLOR, width_px=1.5, mask=eaten),
            Circles(landmarks, r, color=TODO_COLOR, width_px=1.5, mask=~eaten),
            Crosses(landmarks, 0.5 * r, color=TODO_COLOR, diagonal=True, mask=~eaten),
        ]

    # A greedy controller, [E, A, 2] velocity commands [m/s]: each agent heads for its nearest
    # landmark still to eat (stays put when none is left). Proves the task solvable; drives demos.
    def scripted_actions(self) -> torch.Tensor:
        pos, E = self.env.state.pos, self.n_envs
        d2 = self._d2().masked_fill(self.eaten.unsqueeze(1), float("inf"))  # [E, A, N]
        nearest = d2.argmin(dim=2, keepdim=True).expand(-1, -1, 2)  # [E, A, 2]
        target = torch.where(self.eaten.all(dim=1).view(E, 1, 1), pos, torch.gather(self.landmarks, 1, nearest))
        command = arena.seek_velocity(target, pos, self.env.stepper.dt, self.cfg.max_speed)
        return arena.track_velocity(self.env, command)
${twin}

# swarp.make("${name}", ...) works in every process that imports this module.
register_scenario("${name}", ${registered})
'''

#: The imports of the torch-only scenario module.
TORCH_IMPORTS = """\
from dataclasses import dataclass

import torch

from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import Scenario, WorldSpec, register_scenario
"""

#: The imports of the module with a fused twin (``--fused``).
FUSED_IMPORTS = """\
import functools
from dataclasses import dataclass

import torch
import warp as wp

from swarp.scenarios.framework import arena
from swarp.scenarios.framework.base import (
    OBSERVE_ONLY,
    OBSERVE_STEP,
    FusedScenario,
    Scenario,
    WorldSpec,
    register_scenario,
)
"""

#: The fused twin (``--fused``): the torch class above kept as its reference, Warp kernels for the
#: step's observation, reward, termination and info and for the reset. No ``from __future__ import
#: annotations`` in a module with kernels (Warp reads the annotations as objects).
TWIN_TEMPLATE = '''

# --- going fast: the fused twin ------------------------------------------------------------------

#: The observe mode of a step (kernels compare the launch's mode against it).
STEP = wp.constant(OBSERVE_STEP)


@functools.cache
def fused_kernels(scalar):
    """The twin's kernels for one precision (``wp.float32`` or ``wp.float64``). No fused multiply-adds
    (``fuse_fp``): squared distances round as the torch reference's do, so both eat the same bits."""
    vec2 = wp.types.vector(2, scalar)
    zero, one = scalar(0.0), scalar(1.0)
    spawn = arena.reset_funcs(scalar)
    options = {"fuse_fp": False}

    # One thread per env. On a step: eat (the torch post_step), then termination; on a step or a
    # reset: the info of the current state (the torch info()).
    @wp.kernel(enable_backward=False, module="unique", module_options=options, grid_stride=False)
    def finish(
        mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        pos: wp.array2d(dtype=vec2),
        landmarks: wp.array2d(dtype=vec2),
        r2: scalar,
        eaten: wp.array2d(dtype=wp.bool),
        newly: wp.array(dtype=wp.int32),
        terminated: wp.array(dtype=wp.bool),
        n_eaten_out: wp.array(dtype=wp.int32),
        eaten_out: wp.array2d(dtype=wp.bool),
    ):
        env = wp.tid()
        if use_mask != 0 and not mask[env]:
            return
        n = landmarks.shape[1]
        new = int(0)  # int(0), not 0: a variable the loops may change (a bare literal is a constant)
        count = int(0)
        for m in range(n):
            hit = eaten[env, m]
            if mode == STEP and not hit:
                for a in range(pos.shape[1]):
                    d = landmarks[env, m] - pos[env, a]
                    if d[0] * d[0] + d[1] * d[1] < r2:
                        hit = True
                if hit:
                    eaten[env, m] = True
                    new += 1
            if hit:
                count += 1
            eaten_out[env, m] = hit
        n_eaten_out[env] = count
        if mode == STEP:
            newly[env] = new
            terminated[env] = count == n

    # One thread per agent: its observation row, in the torch reference's column order, and on a
    # step the shared reward.
    @wp.kernel(enable_backward=False, module="unique", module_options=options, grid_stride=False)
    def observe(
        mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        pos: wp.array2d(dtype=vec2),
        vel: wp.array2d(dtype=vec2),
        landmarks: wp.array2d(dtype=vec2),
        eaten: wp.array2d(dtype=wp.bool),
        newly: wp.array(dtype=wp.int32),
        obs: wp.array3d(dtype=scalar),
        reward: wp.array2d(dtype=scalar),
    ):
        env, a = wp.tid()
        if use_mask != 0 and not mask[env]:
            return
        p, v, n = pos[env, a], vel[env, a], landmarks.shape[1]
        obs[env, a, 0] = p[0]
        obs[env, a, 1] = p[1]
        obs[env, a, 2] = v[0]
        obs[env, a, 3] = v[1]
        for m in range(n):
            d = landmarks[env, m] - p
            obs[env, a, 4 + 2 * m] = d[0]
            obs[env, a, 5 + 2 * m] = d[1]
            obs[env, a, 4 + 2 * n + m] = wp.where(eaten[env, m], one, zero)
        if mode == STEP:
            reward[env, a] = scalar(newly[env])

    # One thread per (env, slot of spawn cells), masked: the twin of reset_world. Points are ranked
    # as spawn_torch ranks them: agents take ranks 0..A-1, landmark l rank A + l.
    @wp.kernel(enable_backward=False, module="unique", module_options=options, grid_stride=False)
    def reset(
        args: spawn.Spawn,
        landmarks: wp.array2d(dtype=vec2),
        eaten: wp.array2d(dtype=wp.bool),
        newly: wp.array(dtype=wp.int32),
    ):
        env, slot = wp.tid()
        if not args.env_mask[env]:
            return
        key = spawn.spawn_key(args, env)
        n_cells, n_agents = args.side * args.side, args.pos.shape[1]
        cells = spawn.spawn_cells(args, slot)
        for cell in range(cells[0], cells[1]):
            rank = spawn.cell_rank(key, n_cells, cell)
            if rank < n_agents + landmarks.shape[1]:
                point = spawn.spawn_point(args, key, cell, rank)
                if rank < n_agents:
                    spawn.spawn_agent(args, key, env, rank, point)
                else:
                    landmarks[env, rank - n_agents] = point
                    eaten[env, rank - n_agents] = False
        if slot == 0:
            newly[env] = 0

    return finish, observe, reset


class ${Class}FusedScenario(FusedScenario, ${Class}Scenario):
    """${name} with its fused twin: every torch method above stays the reference
    (``swarp.make("${name}", fused=False)`` runs it); the default step runs the kernels."""

    # The state as Warp arrays, and the torch names as views of the same memory: both paths (and
    # env.get_state) read and write one copy.
    def bind(self, env) -> None:
        super().bind(env)  # the torch reference's tensors, replaced here
        E, N, dev, scalar = self.n_envs, self.cfg.n_agents, env.device, env.stepper.scalar
        self._landmarks = wp.zeros((E, N), dtype=wp.types.vector(2, scalar), device=dev)
        self._eaten = wp.zeros((E, N), dtype=wp.bool, device=dev)
        self._newly = wp.zeros(E, dtype=wp.int32, device=dev)
        self._info_wp = [wp.zeros(E, dtype=wp.int32, device=dev), wp.zeros((E, N), dtype=wp.bool, device=dev)]
        self.landmarks, self.eaten, self.newly_eaten = map(wp.to_torch, (self._landmarks, self._eaten, self._newly))
        self._info = {"n_eaten": wp.to_torch(self._info_wp[0]), "eaten": wp.to_torch(self._info_wp[1])}
        self._r2 = scalar(self.eat_radius2.item())  # a host float, once: launches are recorded
        self._finish, self._observe, self._reset = fused_kernels(scalar)

    # Per mode (docs/writing-scenarios.md): a step eats, terminates, rewards and observes; an
    # auto-reset (OBSERVE_ONLY) only observes; an explicit reset observes and writes the info.
    def launch_observe(self, launcher, env_mask=None, mode=OBSERVE_STEP) -> None:
        b, s = self.buffers, self.world.state
        head = [b.no_mask if env_mask is None else env_mask, int(env_mask is not None), int(mode)]
        if mode != OBSERVE_ONLY:
            launcher.launch(
                self._finish,
                dim=self.n_envs,
                inputs=[*head, s.pos, self._landmarks, self._r2],
                outputs=[self._eaten, self._newly, b.terminated, *self._info_wp],
                device=self.device,
            )
        launcher.launch(
            self._observe,
            dim=(self.n_envs, self.n_agents),
            inputs=[*head, s.pos, s.vel, self._landmarks, self._eaten, self._newly],
            outputs=[b.obs, b.reward],
            device=self.device,
        )

    def launch_reset(self, launcher, env_mask) -> None:
        arena.launch_reset(self, launcher, self._reset, env_mask, [], [self._landmarks, self._eaten, self._newly])
'''

TEST_TEMPLATE = '''\
"""Tests of the ${name} scenario: swarp's scenario contract, and the scripted controller against random
actions. Run with ``python -m pytest -q test_${name}.py`` from any directory."""

import sys
from pathlib import Path

import torch

import swarp
from swarp.testing import check_scenario

# ``import ${name}`` finds the module next to this file wherever pytest runs.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import ${name}  # noqa: E402,F401  (importing it registers "${name}")


def test_scenario_contract():
    # Raises AssertionError naming the failed check and the scenario method at fault. A short time
    # limit ends episodes inside the check's rollouts, so final_obs is checked too.
    results = check_scenario("${name}", max_steps=20)
    assert all(v == "ok" or v.startswith("skipped") for v in results.values()), results


def success_rate(policy, n_envs: int = 64, seed: int = 0) -> float:
    """Fraction of the first episodes of ``n_envs`` envs that end terminated (every landmark eaten),
    with ``policy(env)`` giving the [E, A, act_dim] actions of every step."""
    env = swarp.make("${name}", n_envs=n_envs, device="cpu", seed=seed, auto_reset=True)
    finished = torch.zeros(n_envs, dtype=torch.bool)
    success = torch.zeros(n_envs, dtype=torch.bool)
    with torch.no_grad():
        for _ in range(env.max_steps):  # every env ends its first episode by then
            _, _, terminated, truncated, _ = env.step(policy(env))
            first = (terminated | truncated) & ~finished
            success |= first & terminated
            finished |= first
    env.close()
    return success.float().mean().item()


def test_scripted_controller_beats_random_actions():
    generator = torch.Generator().manual_seed(0)

    def random_actions(env):
        low, high = env.action_bounds  # [A, act_dim] each, physical units
        u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=generator, dtype=env.dtype)
        return low + (high - low) * u

    scripted = success_rate(lambda env: env.scenario.scripted_actions())
    random = success_rate(random_actions)
    assert scripted > random, f"scripted success {scripted:.3f} should beat random {random:.3f}"
'''

#: Names refused because a module of that name next to the scenario would shadow what it imports.
SHADOWED = frozenset({"swarp", "torch", "warp", "numpy", "pytest"})
#: Longest scenario name [characters]: it names NAME.py and test_NAME.py (file systems allow 255 bytes).
MAX_NAME_LENGTH = 64
#: Device names Windows reserves: no file ``con.py`` can be made there.
WINDOWS_DEVICES = frozenset(
    {"con", "prn", "aux", "nul"} | {f"{port}{digit}" for port in ("com", "lpt") for digit in "123456789"}
)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def class_stem(name: str) -> str:
    """The CamelCase form of snake_case ``name`` (``dispersion_2`` -> ``Dispersion2``)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def check_name(name: str, folder: Path | None = None) -> None:
    """Refuse a scenario name that cannot be a module and a scenario of its own.

    Args:
        name: The candidate, snake_case (``[a-z][a-z0-9_]*``, not a Python keyword), at most
            ``MAX_NAME_LENGTH`` characters.
        folder: Where the module will be written: a module of this name found there is the
            scenario itself (written before), not one it would shadow.

    Raises:
        ValueError: ``name`` is longer than ``MAX_NAME_LENGTH``, is no snake_case identifier, is a
            Python keyword, is the name of a built-in swarp scenario, would shadow an importable or
            standard-library module (``torch``, ``json``...) or a Python builtin (``list``, ``sum``:
            the test file imports the module by its name), or is a device name Windows reserves.
    """
    if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"scenario name {name[:24]!r}... ({len(name)} characters) is too long: at most {MAX_NAME_LENGTH} "
            f"(it names the files NAME.py and test_NAME.py)"
        )
    if not isinstance(name, str) or not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(
            f"invalid scenario name {name!r}: use a snake_case Python identifier "
            "(lower-case letters, digits and underscores, starting with a letter; no keyword)"
        )
    if name in scenario_names() and get_scenario(name).__module__.startswith("swarp."):
        raise ValueError(f"{name!r} is a built-in swarp scenario; choose another name")
    if hasattr(builtins, name):
        raise ValueError(f"scenario name {name!r} would shadow the Python builtin {name!r} where the module is "
                         "imported; choose another name")  # fmt: skip
    if name in WINDOWS_DEVICES:
        raise ValueError(f"scenario name {name!r} is a device name on Windows (no file {name}.py can be made "
                         "there); choose another name")  # fmt: skip
    if name in sys.stdlib_module_names:
        raise ValueError(f"scenario name {name!r} would shadow the standard-library module {name!r}; choose another "
                         "name")  # fmt: skip
    spec = None if name in SHADOWED else importlib.util.find_spec(name)
    own = folder is not None and spec is not None and spec.origin is not None
    if own and Path(spec.origin).resolve() == (Path(folder) / f"{name}.py").resolve():
        return
    if name in SHADOWED or spec is not None:
        raise ValueError(f"scenario name {name!r} would shadow the importable module {name!r}; choose another name")


def render_template(name: str, fused: bool = False) -> tuple[str, str]:
    """``(scenario module source, test file source)`` for scenario ``name`` (not checked); ``fused``:
    the module also holds the fused twin, registered under ``name``."""
    fields = {"name": name, "Class": class_stem(name)}
    twin = string.Template(TWIN_TEMPLATE).substitute(fields) if fused else ""
    registered = f"{fields['Class']}FusedScenario" if fused else f"{fields['Class']}Scenario"
    module = string.Template(SCENARIO_TEMPLATE).substitute(
        fields,
        imports=FUSED_IMPORTS if fused else TORCH_IMPORTS,
        twin=twin,
        registered=registered,
        paths="with a fused twin" if fused else "torch reference only",
    )
    return module, string.Template(TEST_TEMPLATE).substitute(fields)


def write_scenario(name: str, folder, force: bool = False, fused: bool = False) -> list[Path]:
    """Write a new scenario from the template: ``folder/name.py`` (the scenario, registered as
    ``name`` when imported) and ``folder/test_name.py`` (its pytest file).

    Args:
        name: The scenario name, snake_case; also the module name (see ``check_name``).
        folder: Directory (str or ``Path``) to write into; created if missing.
        force: Overwrite files that exist (otherwise they are an error and nothing is written).
        fused: Also write the fused twin (Warp kernels) into the module; it is what ``name``
            registers, and ``fused=False`` in ``swarp.make`` runs the torch reference.

    Returns:
        The two paths written, ``[scenario module, test file]``.

    Raises:
        ValueError: A refused name (``check_name``).
        FileExistsError: A file exists and ``force`` is false.
        OSError: The folder cannot be made or a file cannot be written (the message names it and
            the system's reason, on one line).
    """
    folder = Path(folder)
    check_name(name, folder)
    paths = [folder / f"{name}.py", folder / f"test_{name}.py"]
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise FileExistsError(f"{', '.join(existing)} already exist(s); pass --force (force=True) to overwrite")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OSError(f"cannot make the folder {folder}: {error.strerror or error}") from error
    for path, text in zip(paths, render_template(name, fused), strict=True):
        try:
            path.write_text(text)
        except OSError as error:
            raise OSError(f"cannot write {path}: {error.strerror or error}") from error
    return paths
