"""Building blocks shared by the scenario library: option checks, neighbor features, collisions,
ranked spawns and exactly rounded trigonometry, each as a torch function (for the references) and a
Warp function (for the kernels, in ``arena_funcs``) computing the same thing in the same order.

Option checks and the shared config are in ``options``, the Warp twins and the draw layout of the
resets in ``arena_funcs`` (both re-exported here). Conventions the twins
rely on:

* Neighbor features: the k nearest other agents within ``obs_range``, nearest first (ties by
  index), each ``(dx, dy, dvx, dvy, 1)``; zeros past the last one. The kernels read them from the
  world's sorted neighbor list (whose radius must be >= ``obs_range``), the torch twin sorts all pairs.
* A collision of agents i and j (equal radii r): centre distance below ``2 r``, tested as
  ``d2 < reach * reach`` with ``reach = 2 r`` in the sim precision on both sides.
* Resets draw from the counter-based stream (``swarp.core.rng``). Cosines and sines of drawn angles
  are evaluated in float64 and rounded, so both twins get the same bits in float32 (libm and torch's
  vectorised float32 trigonometry may differ in the last bit).
"""

import math
import weakref

import torch
import warp as wp

from swarp.core.config import AgentConfig, ControlMode, DynamicsModel, WorldConfig
from swarp.core.precision import vec2_type
from swarp.runtime.rows import launch_observe_rows
from swarp.scenarios.framework import spawn
from swarp.scenarios.framework.arena_funcs import (  # noqa: F401 (the Warp twins, re-exported for authored scenarios)
    DRAW_BLOCK,
    DRAW_CELLS,
    DRAW_ENV,
    DRAW_HEADING,
    DRAW_JITTER,
    funcs,
    reset_funcs,
    spawn_points_kernel,
    spawn_struct,
)
from swarp.scenarios.framework.base import OBSERVE_ONLY, WorldSpec
from swarp.scenarios.framework.options import ArenaConfig, OptionChecker  # noqa: F401 (re-exported)

# --- the arena and its resets ----------------------------------------------------------------------

#: Spawn clearance from a cell edge, as a multiple of the agent radius.
CLEARANCE_FACTOR = 1.25


def spawn_grid(scenario, n_points: int) -> None:
    """Set the scenario's spawn grid for ``n_points`` separated points in ``[-L, L]^2`` (its config's
    ``world_size`` L [m], ``agent_radius`` and ``spawn_cells``): ``clearance`` [m] from a cell's
    edges, ``side`` (cells per side) and ``jitter`` [m], how far a point moves off its cell's centre
    (see ``spawn.py``)."""
    c = scenario.cfg
    scenario.clearance = CLEARANCE_FACTOR * c.agent_radius
    scenario.side = spawn.cells_per_side(c.world_size, scenario.clearance, n_points, c.spawn_cells)
    scenario.jitter = c.world_size / scenario.side - scenario.clearance


def arena_world(
    scenario,
    n_points: int,
    neighbor_reach: float = 0.0,
    contacts_only: bool = False,
    model: str = "holonomic",
    max_neighbors: int | None = None,
    n_obstacle_slots: int = 0,
):
    """The physical world of an arena scenario: ``n_agents`` equal agents (of dynamics ``model``) in
    the soft-walled square ``[-L, L]^2`` (L = ``world_size``), neighbor lists wide enough for the
    observation, for contacts within a step and for ``neighbor_reach`` [m]; with ``contacts_only`` (a
    scenario that observes no neighbors: ``obs_range`` and ``neighbor_reach`` unused) lists of the
    world's default contact radius (``WorldConfig.neighbor_radius``), which keeps them short.

    The scenario's config provides ``n_agents``, ``world_size`` [m], ``agent_radius`` [m],
    ``max_speed`` [m/s], ``ctrl_mode``, ``obs_range`` [m] (unless ``contacts_only``), ``spawn_cells``,
    ``max_neighbors`` (unless given), ``dt`` [s], ``substeps``, ``max_steps`` and ``neighbor_method``
    (``"auto"`` where a config has none) (``ArenaConfig``'s fields). ``n_obstacle_slots`` goes to the
    world as it is.

    Also sets the scenario's spawn grid for ``n_points`` points (``spawn_grid``).

    Returns:
        The ``WorldSpec``.
    """
    c = scenario.cfg
    spawn_grid(scenario, n_points)
    agent = AgentConfig(model=model, ctrl_mode=c.ctrl_mode, radius=c.agent_radius, max_speed=c.max_speed)
    reach = None
    if not contacts_only:
        reach = max(c.obs_range, neighbor_reach, 2.5 * c.agent_radius + 2.0 * c.max_speed * c.dt)
    world = WorldConfig(
        bounds=c.world_size,
        bounds_mode="soft",
        max_neighbors=c.max_neighbors if max_neighbors is None else max_neighbors,
        neighbor_radius=reach,
        neighbor_method=getattr(c, "neighbor_method", "auto"),
    )
    return WorldSpec(
        agents=(agent,) * c.n_agents,
        world=world,
        dt=c.dt,
        substeps=c.substeps,
        max_steps=c.max_steps,
        n_obstacle_slots=n_obstacle_slots,
    )


def spawn_torch(scenario, env_mask: torch.Tensor, n_points: int) -> torch.Tensor:
    """The ranked spawn of the torch paths: ``n_points`` points in the cells of the smallest keys
    (point p in the p-th, jittered), agents first; writes the agents' state (``spawn_agent``) in
    the envs of ``env_mask`` [E] bool and returns the points [E, n_points, 2] [m] of those envs (other
    rows are zero: keep them out with ``torch.where(env_mask, ...)``). One launch of the fused
    resets' functions (``spawn_points_kernel``); ``spawn_torch_twin`` is its specification."""
    env = scenario.env
    spawn = _torch_spawn(scenario, env_mask, n_points)
    if spawn is None:  # a mask of the caller's own: arguments filled for this call
        spawn = _TorchSpawn(scenario, wp.from_torch(env_mask, dtype=wp.bool), n_points, record=False)
    spawn.points.zero_()
    with env.streams.scope():
        spawn()
    return spawn.points.clone()


class _TorchSpawn:
    """One ``spawn_points_kernel`` launch of ``spawn_torch`` over a mask, into its own points buffer;
    on the CPU recorded on the first call and replayed: a replay skips Warp's argument packing, which
    costs several times the launch itself (see docs/benchmarks.md)."""

    def __init__(self, scenario, env_mask: wp.array, n_points: int, record: bool):
        env = scenario.env
        scalar = env.stepper.scalar
        self.points = torch.zeros(scenario.n_envs, n_points, 2, dtype=scenario.dtype, device=env.torch_device)
        per_thread, threads = env.plan.split(scenario.side * scenario.side)
        self._launch = dict(
            kernel=spawn_points_kernel(scalar),
            dim=(scenario.n_envs, threads),
            inputs=[spawn_args(scenario, env_mask, per_thread), scenario.n_agents],
            outputs=[wp.from_torch(self.points, dtype=vec2_type(scalar))],
            device=env.device,
        )
        self._record = record and env.device == "cpu"
        self._cmd = None

    def __call__(self) -> None:
        if self._cmd is not None:
            self._cmd.launch()
        elif self._record:
            self._cmd = wp.launch(**self._launch, record_cmd=True)
            self._cmd.launch()
        else:
            wp.launch(**self._launch)


#: Each bound scenario's ``_TorchSpawn`` over the environment's own masks (``done``, ``reset_mask``:
#: every torch step's), by (mask, n_points). Kept beside the scenario rather than in it: a captured
#: step checks that the scenario's attributes stay as they were.
_TORCH_SPAWNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _torch_spawn(scenario, env_mask: torch.Tensor, n_points: int) -> _TorchSpawn | None:
    """The kept ``_TorchSpawn`` of ``scenario`` over ``env_mask`` (made on first use), or ``None``
    where ``env_mask`` is not one of the environment's own masks."""
    env = scenario.env
    own = {env.done.data_ptr(): env.done, env.reset_mask.data_ptr(): env.reset_mask}
    mask = own.get(env_mask.data_ptr())
    if mask is None:
        return None
    kept = _TORCH_SPAWNS.setdefault(scenario, {})
    key = (id(env), mask.data_ptr(), n_points)
    spawn = kept.get(key)
    if spawn is None:
        spawn = kept[key] = _TorchSpawn(scenario, wp.from_torch(mask, dtype=wp.bool), n_points, record=True)
    return spawn


def spawn_torch_twin(scenario, env_mask: torch.Tensor, n_points: int) -> torch.Tensor:
    """``spawn_torch`` in torch ops: the specification its kernel must match bit for bit (and the
    fused resets' spawn through it). Same arguments and result."""
    c, E, dtype = scenario.cfg, scenario.n_envs, scenario.dtype
    key = scenario.env.rng_keys().view(E, 1)
    cells = spawn.smallest_cells_torch(spawn.cell_keys_torch(key, DRAW_CELLS, scenario.side**2), n_points)
    index = torch.arange(n_points, device=cells.device).view(1, n_points)
    draws = DRAW_JITTER + 2 * index
    drawn = spawn.cell_point_torch(cells, scenario.side, c.world_size, scenario.jitter, key, draws, dtype)
    points = torch.where(env_mask.view(E, 1, 1), drawn, torch.zeros_like(drawn))
    spawn_agents_torch(scenario, env_mask, points[:, : scenario.n_agents])
    return points


def spawn_agents_torch(
    scenario, env_mask: torch.Tensor, points: torch.Tensor, heading_draw: int = DRAW_HEADING
) -> None:
    """Torch twin of ``spawn_agent`` for every agent: agent a at ``points[:, a]`` ([E, A, 2] [m]), at
    rest, with its random heading in [-pi, pi) (draw ``heading_draw + a``), in the envs of
    ``env_mask`` [E] bool (the others keep their state)."""
    E, A = points.shape[:2]
    key = scenario.env.rng_keys().view(E, 1)
    agents = torch.arange(A, device=points.device).view(1, A)
    heading = (spawn.uniform_torch(key, heading_draw + agents, points.dtype) * 2.0 - 1.0) * math.pi
    m2, m3 = env_mask.view(E, 1), env_mask.view(E, 1, 1)
    state = scenario.env.state
    state.pos.copy_(torch.where(m3, points, state.pos))
    state.theta.copy_(torch.where(m2, heading, state.theta))
    state.vel.masked_fill_(m3, 0.0)
    state.speed.masked_fill_(m2, 0.0)
    state.ang_vel.masked_fill_(m2, 0.0)


def env_draws_torch(scenario, count: int, dtype: torch.dtype | None = None) -> list[torch.Tensor]:
    """The first ``count`` per-env uniforms in [0, 1) (draws ``DRAW_ENV + i``), each [E, 1], of
    ``dtype`` (default: the scenario's)."""
    key = scenario.env.rng_keys().view(scenario.n_envs, 1)
    return [spawn.uniform_torch(key, DRAW_ENV + i, dtype or scenario.dtype) for i in range(count)]


# --- torch twins ---------------------------------------------------------------------------------


def norm(vectors: torch.Tensor) -> torch.Tensor:
    """Euclidean norm over the last dim, ``sqrt(x^2 + y^2)`` as the kernels compute it, with a zero
    gradient (not NaN) where the vector is zero (agents at rest, at their centroid)."""
    square = vectors.square().sum(-1)
    positive = square > 0
    return torch.where(positive, torch.where(positive, square, torch.ones_like(square)).sqrt(), square)


def pairwise(pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(delta [E, A, A, 2] = p_j - p_i, d2 [E, A, A])`` of positions ``pos`` [E, A, 2]."""
    delta = pos.unsqueeze(1) - pos.unsqueeze(2)
    return delta, delta.square().sum(-1)


def neighbor_order(d2: torch.Tensor, k: int, obs_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(order, valid)``, each [E, A, min(k, A)]: the indices of each agent's k nearest other agents
    by ``d2`` [E, A, A], nearest first (ties by index), and whether each lies within ``obs_range`` [m]."""
    A = d2.shape[1]
    eye = torch.eye(A, dtype=torch.bool, device=d2.device)
    in_range = (d2 <= obs_range**2) & ~eye
    key = torch.where(in_range, d2, torch.full_like(d2, math.inf))
    order = torch.sort(key, dim=-1, stable=True).indices[..., : min(k, A)]
    return order, torch.gather(in_range, 2, order)


def heard_messages(messages: torch.Tensor, d2: torch.Tensor, k: int, obs_range: float) -> torch.Tensor:
    """[E, A, C k] the messages ``messages`` [E, A, C] (``Environment.messages``) of each agent's k
    nearest other agents within ``obs_range`` [m] (``neighbor_order``'s), zeros past the last."""
    E, A, C = messages.shape
    if k == 0:
        return messages.new_zeros(E, A, 0)
    order, valid = neighbor_order(d2, k, obs_range)
    index = order.unsqueeze(-1).expand(-1, -1, -1, C)
    heard = torch.gather(messages.unsqueeze(1).expand(E, A, A, C), 2, index) * valid.unsqueeze(-1)
    if heard.shape[2] < k:
        heard = torch.nn.functional.pad(heard, (0, 0, 0, k - heard.shape[2]))
    return heard.reshape(E, A, C * k)


def neighbor_features(
    pos: torch.Tensor, vel: torch.Tensor, d2: torch.Tensor, delta: torch.Tensor, k: int, obs_range: float
) -> torch.Tensor:
    """[E, A, 5 k] features of the k nearest other agents within ``obs_range`` [m], nearest first
    (ties by index): relative position [m], relative velocity [m/s], valid flag; zeros past the last."""
    E, A = pos.shape[:2]
    if k == 0:
        return pos.new_zeros(E, A, 0)
    order, valid = neighbor_order(d2, k, obs_range)
    index2 = order.unsqueeze(-1).expand(-1, -1, -1, 2)
    rel_pos = torch.gather(delta, 2, index2)
    rel_vel = torch.gather(vel.unsqueeze(1).expand(E, A, A, 2), 2, index2) - vel.unsqueeze(2)
    feats = torch.cat([rel_pos, rel_vel, torch.ones_like(rel_pos[..., :1])], -1) * valid.unsqueeze(-1)
    if feats.shape[2] < k:
        feats = torch.nn.functional.pad(feats, (0, 0, 0, k - feats.shape[2]))
    return feats.reshape(E, A, 5 * k)


def collisions(d2: torch.Tensor, agent_radius: float) -> torch.Tensor:
    """[E, A] int32: other agents each agent overlaps (centre distance < 2 r), from ``d2`` [E, A, A]."""
    reach = torch.full((), 2.0 * agent_radius, dtype=d2.dtype, device=d2.device)
    eye = torch.eye(d2.shape[-1], dtype=torch.bool, device=d2.device)
    return ((d2 < reach * reach) & ~eye).sum(-1).to(torch.int32)


def separation(d2: torch.Tensor, distance: float) -> torch.Tensor:
    """[E, A] separation penalty: ``sum_j max(0, 1 - d_ij / distance)`` over other agents j."""
    eye = torch.eye(d2.shape[-1], dtype=torch.bool, device=d2.device)
    sep = torch.full((), distance, dtype=d2.dtype, device=d2.device)
    close = (d2 < sep * sep) & ~eye
    # Far pairs and the diagonal take sqrt(1) instead, then drop out: no NaN gradient at d2 = 0.
    term = 1.0 - torch.where(close, d2, torch.ones_like(d2)).sqrt() / sep
    return torch.where(close, term, torch.zeros_like(term)).sum(-1)


def neighbor_overflow(world) -> torch.Tensor:
    """[E] bool: was some agent's neighbor list of this env truncated at the last build?"""
    views = world.neighbors.torch
    return (views.total > views.count).any(dim=1)


def contact_overflow(world) -> torch.Tensor:
    """[E] bool: did some agent's list of this env drop agents while every kept entry is within
    contact reach (``near`` = K)? Then a contact partner may be among the dropped. Lists sorted by
    distance lose only entries farther than their last, so a list with a farther-than-contact entry
    lost no contact (torch twin of ``contact_overflow`` in the kernels)."""
    nb = world.neighbors
    views = nb.torch
    return ((views.total > views.count) & (views.near == nb.max_neighbors)).any(dim=1)


#: Time constant [s] over which ``track_velocity`` closes a velocity error under acceleration control
#: (in units of the step length).
TRACKING_STEPS = 1.0


def track_velocity(env, command: torch.Tensor) -> torch.Tensor:
    """Actions [E, A, 2] that make holonomic agents follow world-frame velocity ``command`` [E, A, 2]
    [m/s]: the command itself under velocity control, the acceleration closing the gap in one step
    under acceleration control; clipped to the command's columns of ``env.action_bounds``. For
    scripted controllers.

    Raises:
        NotImplementedError: Some agent is not holonomic.
    """
    agents = env.stepper.model.agents
    if any(a.model != DynamicsModel.HOLONOMIC for a in agents):
        raise NotImplementedError("scripted controllers drive holonomic agents only")
    low, high = (bound[:, : env.stepper.act_dim] for bound in env.action_bounds)
    if all(a.ctrl_mode == ControlMode.VELOCITY for a in agents):
        return torch.clamp(command, low, high)
    accel = (command - env.state.vel) / (TRACKING_STEPS * env.stepper.dt)
    velocity_mode = torch.tensor([a.ctrl_mode == ControlMode.VELOCITY for a in agents], device=command.device)
    return torch.clamp(torch.where(velocity_mode.view(1, -1, 1), command, accel), low, high)


def seek_velocity(target: torch.Tensor, pos: torch.Tensor, dt: float, max_speed: float) -> torch.Tensor:
    """[E, A, 2] velocity commands [m/s] that reach ``target`` [E, A, 2] from ``pos`` in one step of
    ``dt`` [s] when it is close enough, else head for it at ``max_speed`` [m/s] (scripted controllers).
    Each component stays inside ``[-max_speed, max_speed]`` (the action box) despite rounding."""
    velocity = (target - pos) / dt
    speed = velocity.norm(dim=-1, keepdim=True).clamp(min=1e-9)
    return (velocity * (max_speed / speed).clamp(max=1.0)).clamp(-max_speed, max_speed).contiguous()


def cos_sin(angle: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of ``arena_funcs.reset_funcs().cos_sin``: evaluated in float64, rounded to ``angle``'s dtype."""
    wide = angle.double()
    return torch.cos(wide).to(angle.dtype), torch.sin(wide).to(angle.dtype)


def launch_observe(sc, launcher, env_mask, mode: int, kernels, args, finish, finish_args: tuple) -> None:
    """Launch a scenario's observe kernels (``observe_kernels``, with the filled ``args`` struct)
    and, for a step or a reset, its per-env finish kernel, whose parameters end the library's way:
    ``(*inputs, ep, mode, env_mask, use_mask, *outputs)``; ``finish_args`` is ``(inputs, outputs)``
    without those. The unmasked step's observation goes through the tiled row store on CUDA."""
    env = sc.env
    mask = env_mask if env_mask is not None else sc.buffers.no_mask
    use_mask = int(env_mask is not None)
    launch_observe_rows(sc.buffers, launcher, kernels, args, env_mask, mode)
    if mode != OBSERVE_ONLY:
        inputs, outputs = finish_args
        launcher.launch(
            finish,
            dim=sc.n_envs,
            inputs=[*inputs, sc.buffers.episode_args, int(mode), mask, use_mask],
            outputs=outputs,
            device=env.device,
            block_dim=sc.plan.env_block,
        )


def fill(struct, **fields):
    """Set the fields of a Warp struct instance; returns it."""
    for name, value in fields.items():
        setattr(struct, name, value)
    return struct


def kernel_key(sc) -> tuple:
    """``(scalar, max_neighbors, grid, n_agents, obs_neighbors, register_lists)``: what a bound
    scenario's kernel factories specialise on (``register_lists``: the plan's; scenario kernel modules
    may append more)."""
    stepper = sc.env.stepper
    grid = stepper.neighbor_method == "grid"
    k = stepper.world.max_neighbors
    return stepper.scalar, k, grid, sc.n_agents, sc.cfg.obs_neighbors, sc.plan.register_lists


def spawn_args(sc, env_mask, slots_per_thread: int = 0, grid: bool = True):
    """A filled ``spawn_struct`` for a masked reset of the bound scenario ``sc``: ``env_mask`` [E]
    bool (a Warp array), the envs' random streams and agent state, ``slots_per_thread`` and, with
    ``grid``, the spawn grid that ``arena_world`` set (``sc.side``, ``sc.cfg.world_size``,
    ``sc.jitter``); without it the grid fields stay zero (a reset that places its agents itself,
    through ``spawn_agent``)."""
    state, scalar = sc.world.state, sc.env.stepper.scalar
    args = spawn_struct(scalar)()
    args.env_mask = env_mask
    args.streams = sc.env.buffers.reset_streams
    if grid:
        args.side = sc.side
        args.world_size = scalar(sc.cfg.world_size)
        args.jitter = scalar(sc.jitter)
    args.slots_per_thread = slots_per_thread
    args.pos, args.theta, args.vel = state.pos, state.theta, state.vel
    args.speed, args.ang_vel = state.speed, state.ang_vel
    return args


def launch_reset(sc, launcher, kernel, env_mask, inputs: list, outputs: list, slots: int | None = None) -> None:
    """Launch a scenario's masked ranked-spawn reset ``kernel(spawn, *inputs, *outputs)`` (``spawn``
    a ``spawn_struct``, ``spawn_args``) over ``slots`` work items per env (default: the spawn cells):
    one thread per (env, slot) on the GPU, one env per thread on the CPU (a thread's slots:
    ``spawn_slots``, ``spawn_cells``)."""
    env = sc.env
    n_slots = sc.side * sc.side if slots is None else slots
    per_thread, threads = sc.plan.split(n_slots)
    spawn = spawn_args(sc, env_mask, per_thread)
    launcher.launch(kernel, dim=(sc.n_envs, threads), inputs=[spawn, *inputs], outputs=outputs, device=env.device)
