"""The lidar sensor: its configuration, the scan launch, ``Lidar`` on a world's agents and the
differentiable scan ``lidar_warp``."""

import contextlib
import functools
from typing import NamedTuple

import torch
import warp as wp

from swarp.core.precision import vec2_type
from swarp.core.types import Model
from swarp.runtime.launch import EAGER, Launcher
from swarp.runtime.plan import ExecutionPlan, choose_plan
from swarp.runtime.sequence import TorchStreamScope
from swarp.sensors.lidar.config import LidarConfig, LidarScan
from swarp.sensors.lidar.kernels import ENV_KERNEL_MAX_FLEET, env_kernel, group_kernel, scan_kernel, scene_struct
from swarp.sensors.lidar.reference import lidar_reference_model


@functools.cache
def _placeholders(device: str) -> tuple[wp.array, wp.array]:
    """Arrays passed for unused outputs and masks (allocated once per device, so never inside a
    capture: the pre-capture pass of a graph allocates them)."""
    return wp.empty((1, 1, 1), dtype=wp.int32, device=device), wp.empty(1, dtype=wp.bool, device=device)


@functools.cache
def _no_readings(device: str, scalar: type) -> wp.array:
    """An empty ``final_out`` (no readings kept), allocated once per device and precision."""
    return wp.empty((0, 0, 0), dtype=scalar, device=device)


@functools.cache
def _no_bodies(device: str, scalar: type) -> tuple:
    """Empty stand-ins for the body fields of a ``LidarScene`` (allocated once per device and precision)."""
    vec2 = vec2_type(scalar)
    return (
        wp.zeros((0, 0), dtype=vec2, device=device),
        wp.zeros((0, 0), dtype=scalar, device=device),
        wp.zeros(0, dtype=wp.int32, device=device),
        wp.zeros(0, dtype=wp.int32, device=device),
        wp.zeros(0, dtype=vec2, device=device),
        wp.zeros(0, dtype=scalar, device=device),
        wp.zeros(0, dtype=vec2, device=device),
    )


def _check_rows(model: Model, n_envs: int) -> None:
    for what, rows in (("parameter", model.params.shape[0]), ("obstacle", model.obstacles.shape.shape[0])):
        if rows not in (1, n_envs):
            raise ValueError(f"per-env {what} rows ({rows}) must be 1 (shared) or n_envs ({n_envs})")


def launch_scan(
    model: Model,
    config: LidarConfig,
    pos: wp.array,
    theta: wp.array,
    distance_out: wp.array,
    column: int = 0,
    hits_out: tuple[wp.array, wp.array] | None = None,
    env_mask: wp.array | None = None,
    launcher: Launcher = EAGER,
    rays_per_thread: int | None = None,
    bodies: "SceneBodies | None" = None,
    group: int | None = None,
    final_out: wp.array | None = None,
    plan: ExecutionPlan | None = None,
) -> None:
    """Launch the scan of every agent's rays.

    Args:
        model: Agent radii (``params``), obstacles and world bounds.
        config: The lidar.
        pos: ``wp.array2d(vec2)`` [E, A] positions [m].
        theta: ``wp.array2d(scalar)`` [E, A] headings [rad].
        distance_out: ``wp.array3d(scalar)`` [E, A, >= column + n_rays]; ray k of an agent is
            written to column ``column + k`` (so readings can land inside an observation row).
        column: First column written.
        hits_out: Optional ``(kind, index)`` int32 arrays [E, A, n_rays] (see ``LidarScan``).
        env_mask: Optional [E] bool: only these envs are scanned.
        launcher: Eager, recording, or under the caller's graph capture.
        rays_per_thread: Scan with ``lidar_scan`` (the kernel with an adjoint), this many rays per
            thread. Default: the layout ``group`` says.
        bodies: The movable bodies to see (``SceneBodies``), or ``None``.
        group: Rays of an agent per thread when ``rays_per_thread`` is not given: 0 is a whole env
            per thread (``env_kernel`` for fleets of at most ``ENV_KERNEL_MAX_FLEET``, else
            ``lidar_scan``), 1 ``lidar_scan``'s one ray per thread, more ``group_kernel``. Default:
            ``plan.lidar_rays_per_thread``.
        final_out: Optional array shaped like ``distance_out``: each scanned ray's previous reading
            is copied here before it is overwritten (an auto-reset keeps a finished env's last
            observation this way, so its scan need not wait for the observation that saves the
            other columns).
        plan: The ``ExecutionPlan`` whose layout a default scan follows (default: ``choose_plan``
            for the model's device).
    """
    n_envs, n_agents = pos.shape
    _check_rows(model, n_envs)
    if distance_out.shape[0] != n_envs or distance_out.shape[1] != n_agents:
        raise ValueError(f"distance_out must be [{n_envs}, {n_agents}, ...], got {list(distance_out.shape)}")
    if distance_out.shape[2] < column + config.n_rays:
        raise ValueError(f"distance_out has {distance_out.shape[2]} columns; the scan needs {column + config.n_rays}")
    if final_out is not None and tuple(final_out.shape) != tuple(distance_out.shape):
        raise ValueError(
            f"final_out must be shaped like distance_out {list(distance_out.shape)}, got {list(final_out.shape)}"
        )
    s = model.scalar
    vec2 = vec2_type(s)
    n_items = n_agents * config.n_rays
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
        raise ValueError(f"group must be an int >= 0 (rays per thread; 0: an env per thread), got {group!r}")
    if rays_per_thread is None:
        if group is None:
            group = (plan or choose_plan(str(model.device))).lidar_rays_per_thread
        if group == 0:  # a whole env per thread
            rays_per_thread = n_items if n_agents > ENV_KERNEL_MAX_FLEET else None
        elif group == 1:
            rays_per_thread = 1
    per_env = rays_per_thread is None and group == 0
    grouped = rays_per_thread is None and not per_env
    threads = -(-n_items // rays_per_thread) if rays_per_thread is not None else 0
    lower, upper = model.bounds_vectors()
    walls = int(config.see_walls and model.world.bounds is not None)
    with_hits = hits_out is not None
    no_hits, no_mask = _placeholders(str(model.device))
    if hits_out is None:
        hits_out = (no_hits, no_hits)
    mask = env_mask if env_mask is not None else no_mask
    keeps = final_out is not None
    if final_out is None:
        final_out = _no_readings(str(model.device), s)
    ob = model.obstacles
    scene = scene_struct(s)()
    scene.params = model.params
    scene.per_env_params = int(model.params.shape[0] > 1)
    scene.obstacle_shape = ob.shape
    scene.obstacle_center = ob.center
    scene.obstacle_angle = ob.angle
    scene.obstacle_size = ob.size
    scene.per_env_obstacles = int(ob.per_env)
    scene.see_agents = int(config.see_agents)
    scene.see_walls = walls
    scene.lower = vec2(*lower) if walls else vec2(0.0, 0.0)
    scene.upper = vec2(*upper) if walls else vec2(0.0, 0.0)
    scene.n_rays = config.n_rays
    scene.max_range = s(config.max_range)
    if bodies is None:
        # Empty arrays, never read (the kernel without ``bodies`` has no body code), but real
        # arrays: a tape walks every array field of a struct argument.
        (
            scene.body_pos, scene.body_theta, scene.shape_body, scene.shape_kind,
            scene.shape_offset, scene.shape_angle, scene.shape_size,
        ) = _no_bodies(str(model.device), s)  # fmt: skip
    else:
        if tuple(bodies.pos.shape) != (n_envs, bodies.model.n_bodies):
            raise ValueError(f"body poses must be [{n_envs}, {bodies.model.n_bodies}], got {list(bodies.pos.shape)}")
        bm = bodies.model
        scene.body_pos, scene.body_theta = bodies.pos, bodies.theta
        scene.shape_body, scene.shape_kind = bm.shape_body, bm.shape_kind
        scene.shape_offset, scene.shape_angle, scene.shape_size = bm.shape_offset, bm.shape_angle, bm.shape_size
    flags = (s, with_hits, ob.shape.shape[1] > 0, bodies is not None)
    if per_env:
        launcher.launch(
            env_kernel(*flags, n_agents, keeps),
            dim=n_envs,
            inputs=[scene, pos, theta, mask, int(env_mask is not None), column],
            outputs=[distance_out, *hits_out, final_out],
            device=model.device,
        )
        return
    if grouped:
        launcher.launch(
            group_kernel(*flags, group, n_agents, config.n_rays, keeps),
            dim=n_envs * n_agents * -(-config.n_rays // group),
            inputs=[scene, pos, theta, mask, int(env_mask is not None), column],
            outputs=[distance_out, *hits_out, final_out],
            device=model.device,
        )
        return
    launcher.launch(
        scan_kernel(*flags, keeps),
        dim=(n_envs, threads),
        inputs=[scene, pos, theta, mask, int(env_mask is not None), rays_per_thread, column],
        outputs=[distance_out, *hits_out, final_out],
        device=model.device,
    )


class SceneBodies(NamedTuple):
    """The movable bodies a scan sees: their ``BodyModel`` (shapes) and current poses.

    Fields:
        model: ``swarp.physics.bodies.BodyModel`` (``stepper.bodies``).
        pos: ``wp.array2d(vec2)`` [E, B] body positions [m].
        theta: ``wp.array2d(scalar)`` [E, B] body orientations [rad].
    """

    model: object
    pos: wp.array
    theta: wp.array


def world_bodies(world) -> SceneBodies | None:
    """The ``SceneBodies`` of a ``World``'s current state (``None`` without movable bodies)."""
    model = world.stepper.bodies
    if model is None:
        return None
    return SceneBodies(model, world.state.body_pos, world.state.body_theta)


class Lidar:
    """A lidar on every agent of a ``World``, with persistent output buffers (no allocation per scan).

    Args:
        world: The ``World`` whose state is scanned.
        config: The ``LidarConfig``.
    """

    def __init__(self, world, config: LidarConfig):
        if not isinstance(config, LidarConfig):
            raise TypeError(f"config must be a LidarConfig, got {type(config).__name__}")
        self.world = world
        self.config = config
        shape = (world.n_envs, world.n_agents, config.n_rays)
        device, scalar = world.stepper.device, world.stepper.scalar
        self._distance = wp.zeros(shape, dtype=scalar, device=device)
        self._kind = wp.zeros(shape, dtype=wp.int32, device=device)
        self._index = wp.zeros(shape, dtype=wp.int32, device=device)
        self.last = LidarScan(*(wp.to_torch(a) for a in (self._distance, self._kind, self._index)))
        self.streams = TorchStreamScope(device)
        self.plan = world.stepper.plan

    @property
    def n_rays(self) -> int:
        return self.config.n_rays

    def launch(
        self,
        launcher: Launcher,
        out: wp.array,
        column: int,
        env_mask: wp.array | None = None,
        final_out: wp.array | None = None,
        poses: tuple[wp.array, wp.array] | None = None,
    ) -> None:
        """Launch a scan writing distances into columns ``[column, column + n_rays)`` of ``out``
        [E, A, obs_dim] (e.g. the environment's observation buffer, inside its step graph), only in
        the envs of ``env_mask`` [E] bool if given, first copying the readings it replaces to the
        same columns of ``final_out`` (shaped like ``out``) if given. ``poses``: ``(pos, theta)``
        [E, A] arrays to scan from instead of the world's (e.g. starts prepared ahead); the rest of
        the scene (radii, obstacles, bodies, bounds) is the world's."""
        state = self.world.state
        pos, theta = poses if poses is not None else (state.pos, state.theta)
        launch_scan(
            self.world.model,
            self.config,
            pos,
            theta,
            out,
            column,
            None,
            env_mask,
            launcher,
            bodies=world_bodies(self.world),
            final_out=final_out,
            plan=self.plan,
        )

    def scan(self) -> LidarScan:
        """Scan the world's current state now (eager); returns the persistent ``last`` buffers
        (overwritten by the next call)."""
        state = self.world.state
        hits = (self._kind, self._index)
        # An eager entry point: on a user torch stream the launch must be ordered on that stream.
        with self.streams.scope():
            launch_scan(
                self.world.model, self.config, state.pos, state.theta, self._distance, 0, hits,
                bodies=world_bodies(self.world), plan=self.plan,
            )  # fmt: skip
        return self.last

    def reference(self, pos: torch.Tensor | None = None, theta: torch.Tensor | None = None) -> LidarScan:
        """The torch reference scan of ``pos``/``theta`` (default: the world's state), bodies at
        their current poses; differentiable."""
        state = self.world.state.torch
        bodies = None
        if self.world.stepper.bodies is not None:
            bodies = self.world.stepper.bodies.shape_poses_torch(state.body_pos, state.body_theta)
        return lidar_reference_model(
            self.world.model,
            self.config,
            state.pos if pos is None else pos,
            state.theta if theta is None else theta,
            bodies,
        )


# --- differentiable Warp scan ---------------------------------------------------------------------


@functools.cache
def _streams(device: str) -> TorchStreamScope:
    return TorchStreamScope(device)


class _LidarFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, model: Model, config: LidarConfig, pos: torch.Tensor, theta: torch.Tensor, bodies):
        n_envs, n_agents = theta.shape
        s = model.scalar
        # Autograd runs ``forward`` with grad mode off; needs_input_grad says whether to tape.
        grad = bool(ctx.needs_input_grad[2] or ctx.needs_input_grad[3])
        pos_wp = wp.from_torch(pos.detach().contiguous(), dtype=vec2_type(s), requires_grad=grad)
        theta_wp = wp.from_torch(theta.detach().contiguous(), dtype=s, requires_grad=grad)
        out = wp.zeros((n_envs, n_agents, config.n_rays), dtype=s, device=model.device, requires_grad=grad)
        tape = wp.Tape() if grad else None
        streams = _streams(str(model.device))
        # One ray per thread even on the CPU: the adjoint then replays no per-thread loop state.
        with streams.scope(), tape if tape is not None else contextlib.nullcontext():
            launch_scan(model, config, pos_wp, theta_wp, out, rays_per_thread=1, bodies=bodies)
        ctx.saved = (tape, pos_wp, theta_wp, out, streams)
        return wp.to_torch(out, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_distance):
        tape, pos_wp, theta_wp, out, streams = ctx.saved
        if tape is None:
            return None, None, None, None, None
        wp.to_torch(out.grad).copy_(grad_distance)
        with streams.scope():
            tape.backward()
        grad_pos = wp.to_torch(pos_wp.grad).clone()
        grad_theta = wp.to_torch(theta_wp.grad).clone()
        tape.zero()
        return None, None, grad_pos, grad_theta, None


def lidar_warp(
    model: Model, config: LidarConfig, pos: torch.Tensor, theta: torch.Tensor, bodies: SceneBodies | None = None
) -> torch.Tensor:
    """The Warp scan as a differentiable torch function.

    Args:
        model: A ``Model`` (``stepper.model``) giving radii, obstacles and bounds.
        config: The lidar.
        pos: [E, A, 2] positions [m], the model's dtype and device.
        theta: [E, A] headings [rad].
        bodies: Movable bodies to see (``world_bodies(world)``), constants, or ``None``.

    Returns:
        [E, A, n_rays] distances [m]; gradients flow to ``pos`` and ``theta`` (obstacles and radii
        are constants).
    """
    _check_inputs(model, pos, theta)
    return _LidarFunction.apply(model, config, pos, theta, bodies)


def _check_inputs(model: Model, pos: torch.Tensor, theta: torch.Tensor) -> None:
    if not isinstance(pos, torch.Tensor) or not isinstance(theta, torch.Tensor):
        raise TypeError("pos and theta must be torch.Tensors")
    if pos.dim() != 3 or pos.shape[1:] != (model.n_agents, 2) or tuple(theta.shape) != tuple(pos.shape[:2]):
        raise ValueError(
            f"pos must be [E, {model.n_agents}, 2] and theta [E, {model.n_agents}], got {list(pos.shape)} and "
            f"{list(theta.shape)}"
        )
    dtype = torch.float64 if model.scalar is wp.float64 else torch.float32
    for name, t in (("pos", pos), ("theta", theta)):
        if t.dtype != dtype:
            raise TypeError(f"{name} must have dtype {dtype}, got {t.dtype}")
        if str(wp.device_from_torch(t.device)) != str(wp.get_device(model.device)):
            raise ValueError(f"{name} must be on the model's device {model.device}, got {t.device}")
