"""Simulator adapters for the cross-simulator benchmarks, each run in a process of its own.

One measurement is one ``BenchConfig`` (simulator, n_envs, n_agents, device, task options) run
by ``run_isolated`` (the driver side, ``peer_runs.py``) in a fresh subprocess, which prints its
result as one JSON line on stdout.
A process per (simulator, config) keeps peak-memory figures clean (nothing left over from a
previous config or another framework) and lets each peer run under its own interpreter, i.e. its
own virtual environment where dependencies conflict (``python=`` / ``--python SIM=PATH``).

This file only imports the standard library at module level and is executed as a script by path
(``python peers.py --worker '<json>'``), so a peer's virtual environment does not need torch,
Warp or swarp: the JAX peers' adapters import nothing of swarp. A peer that cannot be imported
reports ``status: "skipped"`` with the reason and the install command.

Adapters (what one timed step includes):

* ``swarp``: ``Environment.step(actions)`` on navigation (fixed random actions, no grad), the
  default execution mode (one CUDA graph / CPU graph per step), options matched to the peer.
* ``vmas``: ``env.step(actions)`` of VMAS navigation (``variant`` ``default``: collisions and
  12-ray lidar; ``lower_bound``: ``collisions=False``, which also drops the lidar). No reset in step.
* ``jaxmarl``: MPE ``simple_spread`` with continuous actions; ``lax.scan`` over ``steps`` of
  ``vmap(env.step)`` (auto-reset included, as JaxMARL's ``step`` does) under ``jit``; every
  observation, reward and done is summed into the scan carry and returned, so XLA cannot drop work.
* ``camar``: CAMAR ``random_grid`` with ``obstacle_density=0`` (an open map; its border is a ring
  of landmark particles), holonomic dynamics; same jit + vmap + scan scheme (CAMAR's ``step`` does
  not reset).

Peak memory is measured inside the worker: on CUDA, torch's ``max_memory_allocated`` (VMAS; swarp
adds Warp's mempool high-water mark, since its buffers are Warp allocations) or JAX's
``peak_bytes_in_use``; on the CPU the process's peak RSS (``resource.getrusage``) and the part of it
added after the imports.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import statistics
import sys
import time

#: The simulators this module can run.
SIMULATORS = ("swarp", "vmas", "jaxmarl", "camar")
#: How a user installs each peer (see docs/benchmarks.md for the virtual environments).
INSTALL_HINTS = {
    "swarp": "pip install -e .",
    "vmas": "pip install vmas==1.5.2",
    "jaxmarl": "pip install jaxmarl==0.2.0 'jax[cuda12]' (in its own virtualenv)",
    "camar": "pip install camar==0.4.0 'jax[cuda12]' (in its own virtualenv)",
}
#: Prefix of the worker's result line on stdout (peers print their own messages).
RESULT_PREFIX = "SWARP_BENCH_RESULT "
#: Seconds a worker may run before it is reported as an error.
DEFAULT_TIMEOUT_S = 1800.0
#: Side of one CAMAR grid cell [m] (its ``obstacle_size`` default): the arena is cells x this.
CAMAR_CELL_M = 0.4
#: JaxMARL MPE agent radius [m] (simple_spread's).
MPE_AGENT_RADIUS_M = 0.15


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One measurement: a simulator at one batch shape.

    Attributes:
        sim: One of ``SIMULATORS``.
        n_envs: Parallel environments (>= 1).
        n_agents: Agents per environment (>= 1).
        device: ``"cpu"`` or ``"cuda"`` (the first GPU; JAX peers use it through ``JAX_PLATFORMS``).
        steps: Env steps per timed block (>= 1); JAX peers scan over them in one jitted call.
        repeats: Timed blocks (>= 1); the reported time is their median.
        warmup: Untimed steps first (compilation, capture, allocator warm-up); JAX peers always run
            one untimed block of ``steps`` to compile.
        min_block_s: Each timed block repeats its ``steps`` until at least this long [s] (0: once).
        cpu_threads: With a value n > 0, the worker is pinned to n CPU cores (``sched_setaffinity``) and
            torch/OpenMP use n threads; 0 leaves each framework's default. On a shared machine one
            thread per simulator keeps the figures stable (thread pools spin against other loads).
        variant: ``vmas``: ``"default"`` or ``"lower_bound"``; ignored elsewhere.
        options: ``swarp``: extra navigation options (``world_size``, ``agent_radius``,
            ``substeps``, ``max_steps``, ``auto_reset``...); ``camar``: ``grid_cells`` (cells per side).
    """

    sim: str
    n_envs: int
    n_agents: int
    device: str = "cpu"
    steps: int = 20
    repeats: int = 3
    warmup: int = 3
    min_block_s: float = 0.0
    cpu_threads: int = 0
    variant: str = "default"
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sim not in SIMULATORS:
            raise ValueError(f"sim must be one of {SIMULATORS}, got {self.sim!r}")
        for name in ("n_envs", "n_agents", "steps", "repeats"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {self.warmup!r}")
        if (
            isinstance(self.min_block_s, bool)
            or not isinstance(self.min_block_s, (int, float))
            or not (0 <= self.min_block_s < math.inf)
        ):
            raise ValueError(f"min_block_s must be a finite number >= 0, got {self.min_block_s!r}")
        if isinstance(self.cpu_threads, bool) or not isinstance(self.cpu_threads, int) or self.cpu_threads < 0:
            raise ValueError(f"cpu_threads must be an int >= 0, got {self.cpu_threads!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.variant not in ("default", "lower_bound"):
            raise ValueError(f"variant must be 'default' or 'lower_bound', got {self.variant!r}")
        if not isinstance(self.options, dict):
            raise TypeError(f"options must be a dict, got {type(self.options).__name__}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


class PeerUnavailable(ImportError):
    """The simulator (or one of its dependencies) cannot be imported in this interpreter."""


# --- measurement helpers (standard library only) ---------------------------------------------------


def _version(distribution: str) -> str:
    """Installed version of ``distribution`` (``"unknown"`` when it has no metadata)."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _rss_bytes() -> int:
    """Peak resident set size of this process so far [bytes] (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _time_blocks(run_chunk, synchronize, config: BenchConfig) -> tuple[list[float], list[int]]:
    """``(seconds per step, steps)`` of each of ``config.repeats`` timed blocks.

    A block runs ``run_chunk()`` (``config.steps`` steps) once, or again and again until
    ``config.min_block_s`` has passed, so fast simulators are not timed over a few microseconds
    (the machine is synchronised after each chunk: one wait per ``config.steps`` steps).
    """
    samples, counts = [], []
    for _ in range(config.repeats):
        synchronize()
        start = time.perf_counter()
        n_steps = 0
        while True:
            run_chunk()
            n_steps += config.steps
            if config.min_block_s <= 0:
                break
            synchronize()
            if time.perf_counter() - start >= config.min_block_s:
                break
        synchronize()
        samples.append((time.perf_counter() - start) / n_steps)
        counts.append(n_steps)
    return samples, counts


def _result(
    config: BenchConfig, version: str, timing: tuple[list[float], list[int]], memory: dict, conditions: dict
) -> dict:
    samples, counts = timing
    seconds = statistics.median(samples)
    return {
        "status": "ok",
        "sim": config.sim,
        "variant": config.variant,
        "version": version,
        "n_envs": config.n_envs,
        "n_agents": config.n_agents,
        "device": config.device,
        "steps": config.steps,
        "repeats": config.repeats,
        "cpu_threads": config.cpu_threads,
        "seconds_per_step": seconds,
        "samples": samples,
        "timed_steps": counts,
        "env_steps_per_s": config.n_envs / seconds,
        "agent_steps_per_s": config.n_envs * config.n_agents / seconds,
        "memory": memory,
        "conditions": conditions,
    }


def _cpu_memory(rss_after_import: int) -> dict:
    peak = _rss_bytes()
    return {"peak_bytes": peak, "source": "peak RSS", "added_bytes": peak - rss_after_import}


# --- torch-based simulators --------------------------------------------------------------------


def _torch_memory(torch, rss_after_import: int, extra_cuda_bytes: int = 0, extra_source: str = "") -> dict:
    if not torch.cuda.is_available() or extra_cuda_bytes < 0:
        return _cpu_memory(rss_after_import)
    source = "torch.cuda.max_memory_allocated" + extra_source
    return {"peak_bytes": torch.cuda.max_memory_allocated() + extra_cuda_bytes, "source": source}


def _torch_start(torch, config: BenchConfig) -> tuple[str, int]:
    """``(torch device, RSS after the imports)``; resets torch's CUDA peak counter."""
    device = "cuda:0" if config.device == "cuda" else "cpu"
    if device == "cuda:0":
        torch.cuda.reset_peak_memory_stats()
    return device, _rss_bytes()


def _time_torch_steps(torch, config: BenchConfig, step, synchronize) -> tuple[list[float], list[int]]:
    """Warm up with ``config.warmup`` calls of ``step()``, then time blocks of ``config.steps``."""

    def block(n: int) -> None:
        for _ in range(n):
            step()

    with torch.no_grad():
        block(config.warmup)
        return _time_blocks(lambda: block(config.steps), synchronize, config)


def swarp_navigation_options(config: BenchConfig) -> dict:
    """Navigation options of a swarp run: ``config.options`` less the env-level keys."""
    return {k: v for k, v in config.options.items() if k not in ("auto_reset", "max_steps")}


def run_swarp(config: BenchConfig) -> dict:
    """Time ``Environment.step`` on navigation (see the module docstring)."""
    try:
        import torch
        import warp as wp

        import swarp
        from swarp.benchmark.common import synchronize
        from swarp.benchmark.throughput import make_env
    except ImportError as exc:
        raise PeerUnavailable(f"swarp is not importable ({exc}); {INSTALL_HINTS['swarp']}") from exc
    device, rss_after_import = _torch_start(torch, config)
    auto_reset = bool(config.options.get("auto_reset", True))
    max_steps = int(config.options.get("max_steps", 200))
    env = make_env(
        config.n_envs,
        config.n_agents,
        device,
        "auto",
        "auto",
        auto_reset,
        max_steps,
        **swarp_navigation_options(config),
    )
    low, high = env.action_bounds
    gen = torch.Generator(device="cpu").manual_seed(1)
    u = torch.rand(env.n_envs, env.n_agents, env.act_dim, generator=gen, dtype=env.dtype).to(env.torch_device)
    actions = low + (high - low) * u
    timing = _time_torch_steps(torch, config, lambda: env.step(actions), lambda: synchronize(device))
    if device == "cuda:0" and wp.is_mempool_enabled(device):
        memory = _torch_memory(torch, rss_after_import, wp.get_mempool_used_mem_high(device), " + Warp mempool high")
    elif device == "cuda:0":
        # Without Warp's mempool its allocations are plain cudaMalloc calls that nothing counts:
        # report the device memory in use at the end instead (context included; not a peak).
        free, total = torch.cuda.mem_get_info()
        memory = {"peak_bytes": total - free, "source": "device memory in use at the end (Warp mempool off)"}
    else:
        memory = _cpu_memory(rss_after_import)
    cfg = env.scenario.cfg
    conditions = {
        "arena": f"[-{cfg.world_size:g}, {cfg.world_size:g}]^2 m, soft walls",
        "agent_radius_m": cfg.agent_radius,
        "observation": f"own state, goal, {cfg.obs_neighbors} nearest agents within {cfg.obs_range:g} m",
        "step": (
            f"{cfg.substeps} physics substep(s) with agent-agent contacts, observations, rewards, done"
            + (f", auto-reset (max_steps {max_steps})" if auto_reset else ", no reset")
            + f"; execution mode {env.execution_mode}"
        ),
    }
    return _result(config, f"swarp {swarp.__version__}, warp {wp.__version__}", timing, memory, conditions)


def run_vmas(config: BenchConfig) -> dict:
    """Time VMAS navigation's ``env.step`` (see the module docstring)."""
    try:
        import torch
        import vmas
    except ImportError as exc:
        raise PeerUnavailable(f"vmas is not importable ({exc}); {INSTALL_HINTS['vmas']}") from exc
    device, rss_after_import = _torch_start(torch, config)
    collisions = config.variant == "default"
    env = vmas.make_env(
        "navigation",
        num_envs=config.n_envs,
        device=device,
        continuous_actions=True,
        n_agents=config.n_agents,
        seed=0,
        collisions=collisions,
    )
    env.reset()
    gen = torch.Generator(device="cpu").manual_seed(1)
    actions = [(torch.rand(config.n_envs, 2, generator=gen) * 2 - 1).to(device) for _ in range(config.n_agents)]

    def synchronize() -> None:
        if device == "cuda:0":
            torch.cuda.synchronize()

    timing = _time_torch_steps(torch, config, lambda: env.step(actions), synchronize)
    memory = _torch_memory(torch, rss_after_import) if device == "cuda:0" else _cpu_memory(rss_after_import)
    scenario = env.scenario
    conditions = {
        "arena": "spawns in [-1, 1]^2 m, unbounded world",
        "agent_radius_m": scenario.agent_radius,
        "observation": (
            f"own state, goal, {scenario.n_lidar_rays}-ray lidar ({scenario.lidar_range:g} m)"
            if collisions
            else "own state, goal (no lidar)"
        ),
        "step": f"{env.world._substeps} physics substeps, "
        + ("agent-agent collisions" if collisions else "no collisions")
        + ", observations, rewards, done; no reset",
    }
    return _result(config, f"vmas {vmas.__version__}, torch {torch.__version__}", timing, memory, conditions)


# --- JAX-based simulators ----------------------------------------------------------------------


def _import_jax_peer(config: BenchConfig, module: str):
    """``(jax, the peer's module, RSS after the imports)``, JAX pinned to ``config.device``.

    Raises:
        PeerUnavailable: jax or the peer cannot be imported.
    """
    import importlib

    # CAMAR pre-generates maps on the CPU backend at import, so a GPU run keeps both (CUDA stays
    # the default backend: JAX prefers the accelerator whatever the order).
    os.environ["JAX_PLATFORMS"] = "cpu" if config.device == "cpu" else "cuda,cpu"
    # Without this XLA reserves 75% of the GPU up front; peak_bytes_in_use is unaffected either way.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        jax = importlib.import_module("jax")
        peer = importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"cannot import jax and {module} ({exc}); {INSTALL_HINTS[config.sim]}") from exc
    return jax, peer, _rss_bytes()


def _jax_memory(jax, rss_after_import: int) -> dict:
    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return {"peak_bytes": int(stats["peak_bytes_in_use"]), "source": "jax peak_bytes_in_use"}
    return _cpu_memory(rss_after_import)


def _time_jax_rollout(jax, config: BenchConfig, vstep, state, actions, consume):
    """Compile and time ``lax.scan`` over ``config.steps`` of ``vstep(keys, state, actions)``.

    ``consume(outputs)`` reduces a step's outputs to a scalar that is accumulated in the carry and
    returned, so no part of the step is dead code.
    """
    jnp = jax.numpy

    def rollout(state, key):
        def body(carry, _):
            state, key, total = carry
            key, step_key = jax.random.split(key)
            outputs = vstep(jax.random.split(step_key, config.n_envs), state, actions)
            return (outputs[1], key, total + consume(outputs)), None

        (state, key, total), _ = jax.lax.scan(body, (state, key, jnp.float32(0.0)), None, length=config.steps)
        return state, key, total

    run = jax.jit(rollout)
    carry = {"state": state, "key": jax.random.PRNGKey(1), "total": None}

    def block() -> None:
        carry["state"], carry["key"], carry["total"] = run(carry["state"], carry["key"])

    def synchronize() -> None:
        if carry["total"] is not None:
            carry["total"].block_until_ready()

    block()  # compile
    synchronize()
    timing = _time_blocks(block, synchronize, config)
    if not math.isfinite(float(carry["total"])):
        raise RuntimeError(f"{config.sim}: the consumed outputs are not finite")
    return timing


def run_jaxmarl(config: BenchConfig) -> dict:
    """Time JaxMARL MPE simple_spread (continuous actions), jit + vmap + scan."""
    jax, jaxmarl, rss_after_import = _import_jax_peer(config, "jaxmarl")
    jnp = jax.numpy
    n = config.n_agents
    env = jaxmarl.make("MPE_simple_spread_v3", num_agents=n, num_landmarks=n, action_type="Continuous")
    _, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), config.n_envs))
    act_key = jax.random.PRNGKey(2)
    actions = {
        agent: jax.random.uniform(k, (config.n_envs, env.action_space(agent).shape[0]))
        for agent, k in zip(env.agents, jax.random.split(act_key, n), strict=True)
    }

    def consume(outputs):
        obs, _, reward, dones, _ = outputs
        return (
            sum(jnp.sum(obs[a]) for a in env.agents)
            + sum(jnp.sum(reward[a]) for a in env.agents)
            + jnp.sum(dones["__all__"])
        )

    timing = _time_jax_rollout(jax, config, jax.vmap(env.step), state, actions, consume)
    obs_dim = env.observation_space(env.agents[0]).shape[0]
    conditions = {
        "arena": "spawns in [-1, 1]^2 m, unbounded world",
        "agent_radius_m": MPE_AGENT_RADIUS_M,
        "observation": f"own state, all {n} landmarks and {n - 1} other agents (obs_dim {obs_dim})",
        "step": f"1 physics step, all-pairs collisions, rewards, auto-reset (max_steps {env.max_steps})",
    }
    version = f"jaxmarl {_version('jaxmarl')}, jax {jax.__version__}"
    return _result(config, version, timing, _jax_memory(jax, rss_after_import), conditions)


def camar_grid_cells(n_agents: int) -> int:
    """Cells per side of the CAMAR open map: the 5 x 5 of a 2 m arena, or more when spawns and
    goals (one cell each) need them."""
    return max(5, math.ceil(math.sqrt(2 * n_agents)))


def run_camar(config: BenchConfig) -> dict:
    """Time CAMAR on an open map with holonomic dynamics, jit + vmap + scan."""
    jax, camar, rss_after_import = _import_jax_peer(config, "camar")
    jnp = jax.numpy
    cells = int(config.options.get("grid_cells", camar_grid_cells(config.n_agents)))
    env = camar.camar_v0(
        "random_grid",
        "HolonomicDynamic",
        map_kwargs={"num_rows": cells, "num_cols": cells, "obstacle_density": 0.0, "num_agents": config.n_agents},
    )
    _, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), config.n_envs))
    actions = jax.random.uniform(
        jax.random.PRNGKey(2), (config.n_envs, config.n_agents, env.action_size), minval=-1.0, maxval=1.0
    )

    def consume(outputs):
        obs, _, reward, done, _ = outputs
        return jnp.sum(obs) + jnp.sum(reward) + jnp.sum(done)

    timing = _time_jax_rollout(jax, config, jax.vmap(env.step), state, actions, consume)
    half = cells * CAMAR_CELL_M / 2
    conditions = {
        "arena": f"[-{half:g}, {half:g}]^2 m open map ({cells} x {cells} cells, no obstacles), "
        f"walls of {env.num_landmarks} landmark particles",
        "agent_radius_m": float(env.map_generator.agent_rad),
        "observation": f"goal and the {env.max_obs} nearest agents/landmarks within its window",
        "step": f"{env.frameskip + 1} physics substeps, agent-agent and agent-wall collisions, rewards, done; no reset",
    }
    version = f"camar {_version('camar')}, jax {jax.__version__}"
    return _result(config, version, timing, _jax_memory(jax, rss_after_import), conditions)


ADAPTERS = {"swarp": run_swarp, "vmas": run_vmas, "jaxmarl": run_jaxmarl, "camar": run_camar}


def limit_cpu_threads(n_threads: int) -> None:
    """Pin this process to its first ``n_threads`` allowed cores and size OpenMP pools to match;
    call before any simulator is imported."""
    cores = sorted(os.sched_getaffinity(0))
    if n_threads > len(cores):
        raise ValueError(f"cpu_threads={n_threads} but only {len(cores)} cores are available")
    os.sched_setaffinity(0, cores[:n_threads])
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(n_threads)


def run_in_process(config: BenchConfig) -> dict:
    """Run ``config`` here (the worker side); a missing peer gives a ``skipped`` result."""
    if config.cpu_threads:
        limit_cpu_threads(config.cpu_threads)
    try:
        return ADAPTERS[config.sim](config)
    except PeerUnavailable as exc:
        return {"status": "skipped", "sim": config.sim, "variant": config.variant, "reason": str(exc)}


#: The driver side's names (``peer_runs.py``), still importable from here. They load on first use,
#: not at import: run by path, this file is a peer's worker and imports only the standard library.
DRIVER_NAMES = frozenset({"label", "parse_pythons", "plot_env_steps", "run_isolated", "worker_environment"})


def __getattr__(name: str):
    """The driver-side name ``name`` (``DRIVER_NAMES``) from ``peer_runs.py``; ``AttributeError`` else."""
    if name in DRIVER_NAMES:
        from swarp.benchmark import peer_runs

        return getattr(peer_runs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="Run one BenchConfig and print its result as JSON.")
    parser.add_argument("--worker", required=True, help="the BenchConfig as JSON")
    args = parser.parse_args(argv)
    config = BenchConfig(**json.loads(args.worker))
    print(RESULT_PREFIX + json.dumps(run_in_process(config)), flush=True)


if __name__ == "__main__":
    # Run by path, this file's folder heads sys.path, where its siblings (common.py, physics.py,
    # render.py...) would shadow top-level modules of those names inside the peers' imports.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    _worker_main(sys.argv[1:])
