"""The execution plan: every launch and layout decision of a step, made once.

An ``Environment`` computes its ``ExecutionPlan`` before it allocates anything, from the device, the
batch's sizes and what its scenario supports (``choose_plan``), and shows it as ``env.plan``. Every
launch of the step reads its layout from the plan; nothing else in the package decides how a step
runs, and no environment variable changes it (``SWARP_LAUNCH_MODE=eager`` and ``SWARP_LAUNCH_DEBUG``,
``swarp.runtime.launch``, are the only switches: escape hatches for debugging).

``swarp.make(..., plan={"fused_step_end": False})`` fixes fields; the rules choose the others
around them, and a field the device or the scenario cannot honour is an error naming it.

Each rule below is the measurement that earned it: its row in docs/benchmarks.md, "The execution
plan's rules: the evidence" (history: docs/journal/). A new optimisation is a field here with a
measured rule, or it is not kept.
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

#: Resident threads per SM of the GPUs swarp targets (Hopper).
THREADS_PER_SM = 2048
#: Threads per block of the one-thread-per-env kernels on CUDA (a step's finish, episode
#: bookkeeping). Their threads are latency-bound: Warp's default 256 left half the SMs idle at
#: 16,384 envs, 32 spreads them over every SM (docs/benchmarks.md, the plan rules' evidence).
ENV_BLOCK = 32
#: Widest neighbor list kept in registers on CUDA (``register_lists``): faster than lists in local
#: memory up to this width (docs/benchmarks.md, the plan rules' evidence).
REGISTER_LIST_MAX_K = 16
#: Rays per thread of the CUDA lidar scan: fewer repeat the disc loads, more cost registers
#: (docs/benchmarks.md, the plan rules' evidence).
LIDAR_RAYS_PER_THREAD = 4
#: Most agents per env whose step ends in one fused kernel (a block of 64 threads holds whole envs).
FUSED_END_MAX_AGENTS = 64
#: Most agents per env of a fused substep with one agent per thread: an env's threads share one
#: block (CUDA's limit).
FUSED_SUBSTEP_MAX_AGENTS = 1024
#: Most agents per env for which CUDA's plan chooses the fused substep: faster up to here, no gain
#: from 256 (docs/benchmarks.md, the plan rules' evidence). Larger envs run it where a plan asks.
FUSED_SUBSTEP_CHOSEN_MAX_AGENTS = 128
#: Most agent threads (E x A) whose fused end stores its rows thread by thread instead of through
#: the tiled store (``tiled_rows=False``): below it the store's barriers cost more than coalescing
#: saves, above it the uncoalesced stores lose (docs/benchmarks.md, the plan rules' evidence).
DIRECT_ROWS_MAX_THREADS = 8192
#: Envs per CPU shard (``cpu_shards``): at least ``MIN_SHARD_ENVS``, at most ``MAX_SHARD_ENVS``.
#: Smaller shards do not pay for the hand-off; larger ones outgrow the cores' caches
#: (docs/benchmarks.md, the plan rules' evidence). A batch whose shards would exceed
#: ``MAX_SHARD_ENVS`` on the threads there are stays on one thread (``plan={"cpu_shards": N}``
#: forces it).
MIN_SHARD_ENVS = 512
MAX_SHARD_ENVS = 2048
#: Most shards whose other threads are spinning graph workers (``cpu_graph_workers``): up to here
#: they beat a thread pool's hand-off, past it the spinning threads take the cores the shards need
#: (docs/benchmarks.md, the plan rules' evidence).
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
            each costs a call (docs/benchmarks.md, the plan rules' evidence).
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
    # One launch fewer per substep, and on CUDA the force stays in a register (evidence:
    # docs/benchmarks.md, the plan rules' table, as for every rule below).
    measured = cuda and n_agents <= FUSED_SUBSTEP_CHOSEN_MAX_AGENTS
    rule("fused_substep", can.fuses_substep and (chosen["one_thread_per_env"] or measured))
    # Small batches are a chain of latency-bound launches, which the fused end shortens by two; from
    # two GPU-fulls of agent threads its blocks hold registers through the per-env end and lose.
    fits = can.fused and can.fuses_end and n_agents <= FUSED_END_MAX_AGENTS
    rule("fused_step_end", fits and cuda and not bound)
    # The tiled store's barriers and shared round trip are on the critical path of the fused end's
    # few blocks, and coalescing matters only from larger batches (DIRECT_ROWS_MAX_THREADS).
    direct = chosen["fused_step_end"] and n_envs * n_agents <= DIRECT_ROWS_MAX_THREADS
    rule("tiled_rows", cuda and not direct)
    # The auto-reset's reset and masked observation, prepared beside the next step's physics instead
    # of chained at its end. Not where the masked preparation over every env would compete with a
    # saturated GPU, nor without a graph (each launch is host time there).
    ahead = can.fused and can.auto_reset and can.prepares_ahead
    rule("reset_ahead", ahead and cuda and chosen["launch"] == "graph" and not bound)
    # A list costs a fixed compaction and walk per step and saves the blocks of the envs a mask
    # skips, which pays only on a saturated GPU. On the CPU a skipped env is not free (each thread
    # copies its struct arguments before it tests its mask).
    lists = can.fused and can.auto_reset and not chosen["reset_ahead"]
    rule("list_resets", lists and (not cuda or bound))
    rule("lidar_rays_per_thread", LIDAR_RAYS_PER_THREAD if cuda else 0)
    # Two latency-bound chains over the few restarting envs paid once.
    rule("lidar_side_stream", cuda and can.lidar and can.auto_reset and not chosen["reset_ahead"])
    rule("async_cpu", "measure")
    rule("cpu_shards", cpu_shard_count(device, n_envs, cpu_threads, can))
    # Spinning native workers instead of a pool's sleeping threads: no wake-up at the hand-off; past
    # GRAPH_WORKERS_MAX_SHARDS the spinning threads lose.
    graphs = chosen["launch"] == "graph"
    spinning = 2 <= chosen["cpu_shards"] <= GRAPH_WORKERS_MAX_SHARDS
    rule("cpu_graph_workers", graphs and spinning and workers.available())
    # The CPU torch reference, asked for a graph (``use_graph=True``): compiled, its torch work fused
    # loop nests instead of an op-by-op dispatch. Not by default: the first steps compile for seconds.
    rule("compile_torch", not cuda and not can.fused and use_graph is True)
    # The no-grad step forward and a captured recompute a step backward, against the torch reference
    # recorded op by op; on the CPU, with no graph to replay, the recompute is a second forward and
    # loses. The recompute's torch reference compiled (its ~100 small kernels and their adjoints fused
    # by inductor) is faster again after a compile of seconds; it needs triton. On the CPU it gains
    # too little to pay for a compile in every process.
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
#: it: the grid pays a fixed price per candidate that brute force's streamed scan does not, so it
#: wins only once it skips enough agents (docs/benchmarks.md, the plan rules' evidence).
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
    ``SWARP_LAUNCH_MODE=eager``). A CPU graph is Warp's operation stream replayed in C++, with less
    overhead than replaying recorded launches from Python (docs/benchmarks.md)."""
    if use_graph not in (True, False, "auto"):
        raise ValueError(f"use_graph must be True, False or 'auto', got {use_graph!r}")
    if use_graph is not False and capturable:
        return "graph"
    return "replay" if replay_enabled() else "eager"


def throughput_bound(device, n_envs: int, n_agents: int) -> bool:
    """Whether a step's per-agent launches over ``n_envs`` x ``n_agents`` threads are bound by
    throughput rather than latency: on CUDA from two GPU-fulls of agent threads (E x A >= 2 x SMs x
    ``THREADS_PER_SM``; 262,144 x 3 is above, 16,384 x 16 below). False on the CPU."""
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
