"""The execution plan: every launch and layout decision of a step, made once.

An ``Environment`` computes its ``ExecutionPlan`` before it allocates anything, from the device, the
batch's sizes and what its scenario supports (``choose_plan``), and shows it as ``env.plan``. Every
launch of the step reads its layout from the plan; nothing else in the package decides how a step
runs, and no environment variable changes it (``SWARP_LAUNCH_MODE=eager`` and ``SWARP_LAUNCH_DEBUG``,
``swarp.runtime.launch``, are the only switches: escape hatches for debugging).

``swarp.make(..., plan={"fused_step_end": False})`` fixes fields; the rules choose the others
around them, and a field the device or the scenario cannot honour is an error naming it.

Each rule below is the measurement that earned it (numbers: docs/benchmarks.md; history:
docs/journal/). A new optimisation is a field here with a measured rule, or it is not kept.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import warp as wp

from swarp.core.config import WorldConfig
from swarp.runtime import workers
from swarp.runtime.launch import replay_enabled

#: Resident threads per SM of the GPUs swarp targets (an H200: 132 SMs x 2048).
THREADS_PER_SM = 2048
#: Threads per block of the one-thread-per-env kernels on CUDA (a step's finish, episode
#: bookkeeping). Their threads are latency-bound; Warp's default 256 put 16,384 envs on 64 blocks,
#: half of an H200's SMs (ncu: 12% achieved occupancy), while 32 spreads them over every SM.
ENV_BLOCK = 32
#: Widest neighbor list kept in registers on CUDA (``register_lists``): the physics step at
#: 16,384 x 16 / 64 agents 48.0 -> 36.0 / 235.1 -> 184.4 us against lists in local memory (H200).
REGISTER_LIST_MAX_K = 16
#: Rays per thread of the CUDA lidar scan: 1.9-2.2x the step at 4,096 x 16 x 32 rays, against
#: 2.9x with 2 rays and slower with 8 or 16 (registers), H200.
LIDAR_RAYS_PER_THREAD = 4
#: Most agents per env whose step ends in one fused kernel (a block of 64 threads holds whole envs).
FUSED_END_MAX_AGENTS = 64
#: Most agents per env of a fused substep with one agent per thread: an env's threads share one
#: block (CUDA's limit).
FUSED_SUBSTEP_MAX_AGENTS = 1024
#: Most agents per env for which CUDA's plan chooses the fused substep: 1.005-1.12x at 3-128 agents,
#: 0.96-0.99x at 256 (H100, s30-s31, docs/benchmarks.md). Larger envs run it where a plan asks.
FUSED_SUBSTEP_CHOSEN_MAX_AGENTS = 128
#: Most agent threads (E x A) whose fused end stores its rows thread by thread instead of through
#: the tiled store (``tiled_rows=False``): navigation with realistic auto-reset, two rounds, us/step
#: tiled / direct, 1,024 x 3 24.80 / 22.96 and 24.71 / 23.13, 1,024 x 8 26.07 / 24.72 and 26.16 /
#: 24.77; from 1,024 x 16 and 4,096 x 3 the uncoalesced stores lose (29.3 / 30.8, 25.8 / 26.8;
#: 4,096 x 16 35.1 / 49.2), H200. Against the native store (s27) direct still wins at 512-1,024 x
#: 3-8 (1,024 x 4 23.43 / 22.21 and 23.19 / 22.38) and loses at 2,048 x 8 (25.57 / 28.32).
DIRECT_ROWS_MAX_THREADS = 8192
#: Envs per CPU shard (``cpu_shards``): at least ``MIN_SHARD_ENVS``, at most ``MAX_SHARD_ENVS``.
#: Navigation x 4, two shards on the 2-core EPYC VM (CI's kind), speed-up over one thread: 256 envs
#: 0.67x, 512 1.13x, 1,024 1.41x, 4,096 1.36x, 8,192 0.69x, 16,384 0.82x (a shard's copies and
#: working set past the cores' caches). On the GPU machine's 16-core Xeon at 2 / 4 / 8 / 16 shards:
#: 1,024 envs 2.26 / 2.50 / 1.99 / 0.84x, 4,096 1.58 / 1.94 / 2.35 / 2.09x, 16,384 1.09 / 2.36 /
#: 3.13 / 3.82x. A batch whose shards would exceed ``MAX_SHARD_ENVS`` on the threads there are
#: stays on one thread (``plan={"cpu_shards": N}`` forces it).
MIN_SHARD_ENVS = 512
MAX_SHARD_ENVS = 2048
#: Most shards whose other threads are spinning graph workers (``cpu_graph_workers``). Navigation x 4,
#: two shards against a thread pool, alternated processes: 1,024 envs 363 -> 255 us/step (2-core
#: VM), 2,048 646 -> 573, 4,096 1,207 -> 1,154; on the GPU machine's 16-core host (two runs each)
#: 1,024 envs at 2 / 4 shards 1.44-1.62x / 1.94-2.50x one thread against the pool's 1.14-1.23x /
#: 1.17-1.59x, but at 8 and 16 shards the spinning threads lost (4,096 x 16: 2,952-4,812 against
#: 1,374-1,439 us).
GRAPH_WORKERS_MAX_SHARDS = 4

LAUNCH_MODES = ("graph", "replay", "eager")
GRAD_STEPS = ("direct", "recompute", "compiled")
ASYNC_CPU_PLACEMENTS = ("measure", "inline", "thread")


@dataclass(frozen=True)
class ExecutionPlan:
    """How one environment's step and reset run on its device (decided once; see the module doc).

    Attributes:
        launch: ``"graph"`` (the whole step captured once and replayed: a CUDA graph, or Warp's
            CPU graph replayed in C++), ``"replay"`` (recorded launches replayed with pre-packed
            arguments) or ``"eager"`` (plain launches).
        one_thread_per_env: Each kernel thread walks a whole env (its agents, spawn cells or rays),
            instead of one item per thread. The CPU runs a launch's threads one after another and
            each costs a call: 1.4x faster on the navigation step at 1,024 x 4 (2-core EPYC).
        env_block: ``block_dim`` of the one-thread-per-env kernels (``None``: Warp's default).
        register_lists: Neighbor lists kept in registers while candidates stream past, the brute
            scan in two passes (mark, then insert); else entries shift in local memory. Same lists.
        tiled_rows: The step's observation rows leave each block through shared memory as one
            coalesced store (CUDA); else each thread stores its own row.
        fused_substep: Each substep's contact forces and integration are one kernel, blocks of
            whole envs with a block barrier between the two (``swarp.physics.substep``), instead
            of two launches.
        fused_step_end: The step's observation, the end of each env's step and (with
            ``reset_ahead``) the swap of prepared starts are one kernel (a scenario with
            ``swarp.runtime.step_end`` hooks).
        list_resets: The auto-reset's launches walk a device-side list of the finished envs
            (``swarp.runtime.env_list``) instead of masking every env.
        reset_ahead: The auto-reset swaps in each env's next start, drawn and observed the step
            after its episode began, on a side stream (``swarp.runtime.step_end``).
        lidar_rays_per_thread: Rays of one agent per thread of the lidar scan; 0: one thread per
            env, every ray of its agents (the CPU's scan).
        lidar_side_stream: The auto-reset's lidar scan runs on a side stream beside the restart's
            neighbor refresh and observation (CUDA).
        async_cpu: Where a CPU ``send()`` runs its step: ``"measure"`` (inline or in a worker
            thread, whichever the caller's loop measures faster), ``"inline"`` or ``"thread"``.
        cpu_shards: CPU: the envs are stepped in this many slices, one thread each, each a shard
            ``Environment`` whose buffers are copied in and out around its step
            (``swarp.env.shards``); 1: one thread. Warp runs a CPU kernel's threads serially.
        cpu_graph_workers: The shards' other threads are ``swarp.runtime.workers.GraphWorker``
            threads, which spin between steps and replay their shard's graph in native code (no
            wake-up, no GIL at the hand-off); else a thread pool. Only for graphs (``launch="graph"``).
        compile_torch: The torch reference's torch work on the CPU (the scenario's methods after the
            physics, the health check, the auto-reset's fresh observation) runs through
            ``torch.compile``: fused C++ loops instead of one dispatch per op, after a compile of
            seconds on the first step (``swarp.env.reference``); its physics and bookkeeping
            launches run as Warp CPU graphs.
        grad_step: How ``Environment.step`` with actions that require grad runs
            (``swarp.env.grad``): ``"direct"`` (the torch reference recorded by autograd),
            ``"recompute"`` (the no-grad step forward; the backward recomputes the step in a twin
            environment, one CUDA graph a step on CUDA) or ``"compiled"`` (``"recompute"`` with
            the twin's torch reference through ``torch.compile``: fused kernels, after a compile of
            seconds on the first backward). The same gradient up to float rounding.
    """

    launch: str = "replay"
    one_thread_per_env: bool = True
    env_block: int | None = None
    register_lists: bool = False
    tiled_rows: bool = False
    fused_substep: bool = False
    fused_step_end: bool = False
    list_resets: bool = False
    reset_ahead: bool = False
    lidar_rays_per_thread: int = 0
    lidar_side_stream: bool = False
    async_cpu: str = "measure"
    cpu_shards: int = 1
    cpu_graph_workers: bool = False
    compile_torch: bool = False
    grad_step: str = "direct"

    def __post_init__(self) -> None:
        if self.launch not in LAUNCH_MODES:
            raise ValueError(f"plan.launch must be one of {LAUNCH_MODES}, got {self.launch!r}")
        if self.async_cpu not in ASYNC_CPU_PLACEMENTS:
            raise ValueError(f"plan.async_cpu must be one of {ASYNC_CPU_PLACEMENTS}, got {self.async_cpu!r}")
        if self.grad_step not in GRAD_STEPS:
            raise ValueError(f"plan.grad_step must be one of {GRAD_STEPS}, got {self.grad_step!r}")
        for name in ("one_thread_per_env", "register_lists", "tiled_rows", "fused_substep", "fused_step_end",
                     "list_resets", "reset_ahead", "lidar_side_stream", "cpu_graph_workers",
                     "compile_torch"):  # fmt: skip
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"plan.{name} must be a bool, got {getattr(self, name)!r}")
        block = self.env_block
        if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
            raise ValueError(f"plan.env_block must be None or an int >= 1, got {block!r}")
        shards = self.cpu_shards
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ValueError(f"plan.cpu_shards must be an int >= 1, got {shards!r}")
        rays = self.lidar_rays_per_thread
        if isinstance(rays, bool) or not isinstance(rays, int) or rays < 0:
            raise ValueError(f"plan.lidar_rays_per_thread must be an int >= 0, got {rays!r}")
        if self.reset_ahead and self.list_resets:
            raise ValueError(
                "plan.reset_ahead swaps every restart in from its prepared start: list_resets must be False"
            )

    def split(self, n_items: int) -> tuple[int, int]:
        """``(items per thread, threads per env)`` of a kernel over ``n_items`` items of an env
        (agents, spawn cells, rays): all in one thread (``one_thread_per_env``), or one each."""
        return (n_items, 1) if self.one_thread_per_env else (1, n_items)


FIELDS = tuple(f.name for f in dataclasses.fields(ExecutionPlan))


@dataclass(frozen=True)
class Capabilities:
    """What a plan may use, besides the device: the facts ``choose_plan`` decides from.

    Attributes:
        capturable: The whole step can be captured (fused kernels and a capture-safe reset; the
            torch reference on CUDA, by torch).
        fused: The scenario's Warp twin runs the step (``fused=False``: the torch reference).
        auto_reset: Finished envs restart inside the step.
        lidar: The observation ends with a lidar scan.
        fuses_end: The scenario can end a step in one kernel (``StepEndHooks.fuses_end``).
        prepares_ahead: The scenario can prepare starts ahead (``StepEndHooks.prepares_ahead``).
        fuses_substep: The physics can run each substep as one kernel: no movable bodies, no
            drones (``swarp.physics.substep.can_fuse``).
    """

    capturable: bool = False
    fused: bool = False
    auto_reset: bool = False
    lidar: bool = False
    fuses_end: bool = False
    prepares_ahead: bool = False
    fuses_substep: bool = False


def choose_plan(
    device: str,
    n_envs: int = 1,
    n_agents: int = 1,
    max_neighbors: int = 0,
    use_graph: bool | str = "auto",
    can: Capabilities = Capabilities(),
    fixed: ExecutionPlan | Mapping[str, Any] | None = None,
    cpu_threads: int = 1,
) -> ExecutionPlan:
    """The plan of a batch of ``n_envs`` x ``n_agents`` agents with neighbor lists of width
    ``max_neighbors`` on ``device``, given what it ``can`` use.

    Args:
        device: Warp device string (``"cpu"``, ``"cuda:0"``).
        n_envs, n_agents, max_neighbors: Batch and list sizes.
        use_graph: ``"auto"`` (a graph where ``can.capturable``), ``True`` (a graph required:
            recorded launches with a warning where none is possible, chosen by the caller) or
            ``False`` (never a graph).
        can: ``Capabilities``.
        fixed: Fields to keep as given: an ``ExecutionPlan`` (all of them) or a mapping of some;
            the rules choose the others around them.
        cpu_threads: Threads a CPU step may use (``cpu_shards`` is at most this).

    Raises:
        ValueError: a fixed field names no plan field, or asks for what the device or the
            scenario cannot do (the message says which and why).
    """
    if isinstance(fixed, ExecutionPlan):
        chosen = dataclasses.asdict(fixed)
    else:
        chosen = dict(fixed or {})
        unknown = sorted(set(chosen) - set(FIELDS))
        if unknown:
            raise ValueError(f"unknown plan field(s) {unknown}; plan fields: {list(FIELDS)}")
    given = set(chosen)
    cuda = str(device).startswith("cuda")
    bound = throughput_bound(device, n_envs, n_agents)

    def rule(name: str, value) -> None:
        if name not in given:
            chosen[name] = value

    rule("launch", launch_mode(use_graph, can.capturable))
    rule("one_thread_per_env", not cuda)
    rule("env_block", ENV_BLOCK if cuda else None)
    rule("register_lists", cuda and max_neighbors <= REGISTER_LIST_MAX_K)
    # One launch fewer per substep: navigation on the CPU (one thread, interleaved in one process,
    # 30 rounds) 1,024 x 4 283.2 -> 278.4 us/step (1.02x, every round 0.995-1.047x), 256 x 16 1.00x
    # (2-core EPYC). On CUDA, where the force also stays in a register: 1.01-1.04x on the s27 grid
    # and 262,144 x 16 (1.00x at 1,024 x 16), three rounds a cell (H100, docs/benchmarks.md s30).
    measured = cuda and n_agents <= FUSED_SUBSTEP_CHOSEN_MAX_AGENTS
    rule("fused_substep", can.fuses_substep and (chosen["one_thread_per_env"] or measured))
    # Small batches are a chain of latency-bound launches, which the fused end shortens by two; from
    # two GPU-fulls of agent threads its blocks hold registers through the per-env end and lose:
    # 65,536 x 16 263.8 vs 254.0 us/step split, 262,144 x 16 883.1 vs 859.7 (H200).
    fits = can.fused and can.fuses_end and n_agents <= FUSED_END_MAX_AGENTS
    rule("fused_step_end", fits and cuda and not bound)
    # The tiled store's barriers and shared round trip are on the critical path of the fused end's
    # few blocks, and coalescing matters only from larger batches (DIRECT_ROWS_MAX_THREADS).
    direct = chosen["fused_step_end"] and n_envs * n_agents <= DIRECT_ROWS_MAX_THREADS
    rule("tiled_rows", cuda and not direct)
    # The auto-reset's reset and masked observation, prepared beside the next step's physics instead
    # of chained at its end: 4,096 x 8 34.7 -> 29.1 us/step, 16,384 x 16 87.9 -> 81.7 (H200, with
    # the fused end). Not where the masked preparation over every env would compete with a
    # saturated GPU, nor without a graph (each launch is host time there).
    ahead = can.fused and can.auto_reset and can.prepares_ahead
    rule("reset_ahead", ahead and cuda and chosen["launch"] == "graph" and not bound)
    # A list costs a fixed ~12 us per step on an H200 (16,384 x 16: 92 -> 104 us/step) and saves the
    # blocks of the envs a mask skips (262,144 x 16: 951 -> 864). On the CPU a skipped env is not
    # free (each thread copies its struct arguments before it tests its mask): 1,024 x 4 324 -> 300 us.
    lists = can.fused and can.auto_reset and not chosen["reset_ahead"]
    rule("list_resets", lists and (not cuda or bound))
    rule("lidar_rays_per_thread", LIDAR_RAYS_PER_THREAD if cuda else 0)
    # Two latency-bound chains over the few restarting envs paid once: 88 -> 84-85 us/step at
    # 4,096 x 16 x 32 rays (H200).
    rule("lidar_side_stream", cuda and can.lidar and can.auto_reset and not chosen["reset_ahead"])
    rule("async_cpu", "measure")
    rule("cpu_shards", cpu_shard_count(device, n_envs, cpu_threads, can))
    # Spinning native workers instead of a pool's sleeping threads: 1.4x at 1,024 x 4 over two shards
    # (GRAPH_WORKERS_MAX_SHARDS has the measurements); past four shards the spinning threads lose.
    graphs = chosen["launch"] == "graph"
    spinning = 2 <= chosen["cpu_shards"] <= GRAPH_WORKERS_MAX_SHARDS
    rule("cpu_graph_workers", graphs and spinning and workers.available())
    # The CPU torch reference, asked for a graph (``use_graph=True``): compiled, its torch work fused
    # loop nests instead of an op-by-op dispatch (the 256 x 8 template step 2.7-3.1x -> 1.7-2.1x
    # spread's fused step, interleaved, 2-core EPYC). Not by default: the first steps compile 11-15 s.
    rule("compile_torch", not cuda and not can.fused and use_graph is True)
    # The no-grad step forward and a captured recompute a step backward, against the torch reference
    # recorded op by op: navigation 1,024 x 4, T = 30 forward + backward on the H200 189.6 -> 12.92 ms;
    # on the CPU, with no graph to replay, the recompute is a second forward: 113 -> 141 ms (2-core EPYC).
    # The recompute's torch reference compiled (its ~100 small kernels and their adjoints fused by
    # inductor): 13.34 -> 7.76 ms on the H200, after a compile of 5-45 s; it needs triton. On the
    # CPU 1.1x "direct" (203.5 -> 185.6 ms), not worth a compile of seconds in every process.
    rule("grad_step", ("compiled" if has_triton() else "recompute") if cuda else "direct")
    plan = ExecutionPlan(**chosen)
    _check(plan, device, n_agents, can, given)
    return plan


def cpu_shard_count(device, n_envs: int, cpu_threads: int, can: Capabilities) -> int:
    """Shards of a CPU step over ``cpu_threads`` threads: as many as have ``MIN_SHARD_ENVS`` envs
    each, if that is two or more of at most ``MAX_SHARD_ENVS`` envs, for fused kernels on the CPU
    (the torch reference's ops hold the GIL); else 1."""
    if str(device).startswith("cuda") or not can.fused:
        return 1
    shards = min(cpu_threads, n_envs // MIN_SHARD_ENVS)
    return shards if shards >= 2 and -(-n_envs // shards) <= MAX_SHARD_ENVS else 1


#: ``neighbor_method="auto"``'s rule per device kind: the fewest agents per env from which the grid
#: is taken, and the largest share of a bounded arena that one agent's 3 x 3 cells may cover for
#: it. Grid / brute-force time, H100 (us/step): bare physics at 1,024 agents 0.29, navigation with
#: 0.9% coverage at 512 agents 1.29 (256 envs) to 0.85 (4,096), at 6% coverage 1.3-2.0, navigation's
#: defaults (56%) 2.5-3.2; the CPU (2-core EPYC): physics at 128 agents 0.69, navigation at 6%
#: coverage 0.99 at 128 and 0.79 at 256, at 56% 1.3-1.5 (docs/benchmarks.md, s31).
GRID_RULE = {"cpu": (128, 1.0 / 16.0), "cuda": (512, 1.0 / 64.0)}


def choose_neighbor_method(world: WorldConfig, n_agents: int, device) -> str:
    """``"brute"`` or ``"grid"``: ``world.neighbor_method`` for ``n_agents`` per env on ``device``
    (``"cpu"``, ``"cuda"`` or ``"cuda:N"``), ``"auto"`` decided by ``GRID_RULE``: the grid from the
    device's threshold (or ``world.grid_threshold``), unless ``world.bounds`` and
    ``world.neighbor_radius`` are both given and the 3 x 3 cells an agent visits (side
    ``neighbor_radius``) cover more of the arena than the device's share; there the grid visits
    nearly as many agents as brute force, each at a higher price."""
    if world.neighbor_method != "auto":
        return world.neighbor_method
    min_agents, max_cover = GRID_RULE["cuda" if str(device).startswith("cuda") else "cpu"]
    if n_agents < (min_agents if world.grid_threshold is None else world.grid_threshold):
        return "brute"
    if world.bounds is None or world.neighbor_radius is None:
        return "grid"
    x_min, x_max, y_min, y_max = world.bounds
    cover = 9.0 * world.neighbor_radius**2 / ((x_max - x_min) * (y_max - y_min))
    return "grid" if cover <= max_cover else "brute"


@functools.cache
def has_triton() -> bool:
    """Whether triton, inductor's CUDA code generator, is installed (``plan.grad_step="compiled"``)."""
    return importlib.util.find_spec("triton") is not None


def launch_mode(use_graph: bool | str, capturable: bool) -> str:
    """``"graph"`` where a graph is wanted and possible, else ``"replay"`` (``"eager"`` under
    ``SWARP_LAUNCH_MODE=eager``). A CPU graph is Warp's operation stream replayed in C++: about 4x
    less overhead than replaying recorded launches from Python (16 envs x 4 agents)."""
    if use_graph not in (True, False, "auto"):
        raise ValueError(f"use_graph must be True, False or 'auto', got {use_graph!r}")
    if use_graph is not False and capturable:
        return "graph"
    return "replay" if replay_enabled() else "eager"


def throughput_bound(device, n_envs: int, n_agents: int) -> bool:
    """Whether a step's per-agent launches over ``n_envs`` x ``n_agents`` threads are bound by
    throughput rather than latency: on CUDA from two GPU-fulls of agent threads (E x A >= 2 x SMs x
    ``THREADS_PER_SM``: 540,672 on an H200; 262,144 x 3 is above, 16,384 x 16 below). False on the CPU."""
    dev = wp.get_device(device)
    return dev.is_cuda and n_envs * n_agents >= 2 * dev.sm_count * THREADS_PER_SM


def fused_substep_problem(plan: ExecutionPlan, device, n_agents: int, fuses_substep: bool) -> str | None:
    """Why ``plan.fused_substep`` cannot run on ``device`` for envs of ``n_agents`` agents
    (``fuses_substep``: ``Capabilities.fuses_substep``), or ``None`` where it can or is off.
    ``choose_plan`` and a ``Stepper`` given a plan both check it here."""
    if not plan.fused_substep:
        return None
    if not fuses_substep:
        return "the world has movable bodies or the fleet drones, whose kernels run between"
    if plan.one_thread_per_env:
        return None
    if not str(device).startswith("cuda") and not getattr(wp.config, "enable_cpu_blocks", False):
        return "on the CPU one agent per thread needs wp.config.enable_cpu_blocks for its block barrier"
    if n_agents > FUSED_SUBSTEP_MAX_AGENTS:
        return f"an env's threads share a block of at most {FUSED_SUBSTEP_MAX_AGENTS}, got {n_agents}"
    return None


def _check(plan: ExecutionPlan, device: str, n_agents: int, can: Capabilities, given: set[str]) -> None:
    """Raise where ``plan`` asks for what ``device`` or the scenario cannot do."""
    cuda = str(device).startswith("cuda")

    def fail(field: str, why: str) -> None:
        raise ValueError(f"plan.{field}={getattr(plan, field)!r} is not possible here: {why}")

    if plan.launch == "graph" and not can.capturable:
        fail(
            "launch",
            "this step cannot be captured (the torch reference on the CPU, or a fused reset that is not capture-safe)",
        )
    if plan.tiled_rows and not cuda and not getattr(wp.config, "enable_cpu_blocks", False):
        fail(
            "tiled_rows",
            "on the CPU the tiled store needs wp.config.enable_cpu_blocks (Warp honours CPU blocks only then)",
        )
    if plan.fused_step_end:
        if not (can.fused and can.fuses_end):
            fail("fused_step_end", "the scenario has no fused step end (StepEndHooks.fuses_end)")
        if not cuda and not getattr(wp.config, "enable_cpu_blocks", False):
            fail(
                "fused_step_end",
                "on the CPU its block barriers need wp.config.enable_cpu_blocks (Warp honours CPU blocks only then)",
            )
        if n_agents > FUSED_END_MAX_AGENTS:
            fail("fused_step_end", f"a block holds whole envs of at most {FUSED_END_MAX_AGENTS} agents, got {n_agents}")
    why = fused_substep_problem(plan, device, n_agents, can.fuses_substep)
    if why:
        fail("fused_substep", why)
    if plan.list_resets and not (can.fused and can.auto_reset):
        fail("list_resets", "only the fused auto-reset walks a list of its envs: it needs fused kernels and auto_reset")
    if plan.reset_ahead and not (can.fused and can.auto_reset and can.prepares_ahead):
        fail(
            "reset_ahead",
            "it needs auto_reset and a fused scenario that prepares its starts ahead (StepEndHooks.prepares_ahead) "
            "over brute-force neighbor lists",
        )
    if plan.lidar_side_stream and not cuda and "lidar_side_stream" in given:
        fail("lidar_side_stream", "side streams are CUDA streams")
    if plan.cpu_shards > 1:
        if cuda:
            fail("cpu_shards", "shards are CPU threads; a CUDA step runs every env at once")
        if not can.fused:
            fail("cpu_shards", "only fused kernels step in shards (the torch reference's ops hold the GIL)")
        if plan.reset_ahead:
            fail("cpu_shards", "a shard does not carry starts prepared ahead: reset_ahead must be False")
    if plan.cpu_graph_workers:
        if plan.cpu_shards < 2:
            fail("cpu_graph_workers", "graph workers run the shards after the first: it needs cpu_shards >= 2")
        if plan.launch != "graph":
            fail("cpu_graph_workers", "a graph worker replays captured graphs: it needs launch='graph'")
        if not workers.available():
            fail("cpu_graph_workers", "this Warp has no C replay of CPU graphs to call (swarp.runtime.workers)")
    if plan.compile_torch:
        if can.fused:
            fail("compile_torch", "it compiles the torch reference's step: it needs fused=False")
        if cuda:
            fail("compile_torch", "on CUDA the torch reference's step is captured as one CUDA graph instead")
