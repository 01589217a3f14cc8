"""Observation rows: the two kernels every fused scenario observes with, around its own
``observe_agent`` Warp func.

A scenario writes ``observe_agent(args, mode, env, agent) -> row``: it writes the agent's
per-agent outputs through ``args`` (a Warp struct holding at least ``pos`` [E, A]) and returns its
observation row, a ``vector(obs_dim)`` indexed only by compile-time constants (so it stays in
registers). ``observe_kernels`` wraps it in:

* ``observe``: one agent per thread (one env per thread on the CPU), masked (resets; its twin
  ``observe_listed`` walks the auto-reset's env list where it pays, ``swarp.env.selection``), each thread
  storing its row with scalar stores; with ``save`` (an auto-reset, ``OBSERVE_ONLY``) it first copies
  the row it overwrites to ``final_obs`` (``FusedScenario.saves_final_obs``); a start prepared ahead
  (``FusedScenario.supports_reset_ahead``) is observed by it into its own rows, saving none;
* ``observe_rows``: every env, for the CUDA step: blocks of ``OBS_BLOCK`` consecutive agents
  (flat row = env * A + agent) whose rows go through shared memory (a Warp tile) and leave as one
  coalesced ``[OBS_BLOCK, obs_dim]`` store, instead of ``obs_dim`` scalar stores per thread
  ``4 * obs_dim`` bytes apart. Only the scenario's columns are written (lidar columns follow).

``step_rows_kernel`` makes a step's ``observe_rows`` that also ends the step of its envs (a
scenario's per-env and per-agent end hooks, and the swap of starts prepared ahead), in blocks of
whole envs: one launch instead of a chain of three on small CUDA batches (docs/architecture.md).

``SWARP_OBS_STORE=scalar`` turns the tiled store off and ``SWARP_OBS_STORE=tile`` stages rows by a
tile transpose instead of per-column scatters (A/B measurements, docs/benchmarks.md).
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.core.launch import Launcher, agents_per_thread, env_choice
from swarp.env import episode
from swarp.env.selection import EnvListArgs
from swarp.scenarios.base import OBSERVE_ONLY, OBSERVE_STEP

#: Agents (observation rows) per block of the tiled observation kernel.
OBS_BLOCK = 64
#: How the tiled kernel stages rows in shared memory: ``scatter`` (default) writes each thread's row
#: into a row-major ``[OBS_BLOCK, obs_dim]`` tile, column by column; ``tile`` builds the
#: ``[obs_dim, OBS_BLOCK]`` tile of the rows and transposes it, which reads shared memory with a
#: stride of OBS_BLOCK words (one bank: ncu counted 90% excess shared wavefronts at 16,384 x 16);
#: ``scalar`` stores rows straight from each thread (no tile).
_OBS_STORE = env_choice("SWARP_OBS_STORE", ("scatter", "tile", "scalar"))
_TILED_ROWS = _OBS_STORE != "scalar"


def tiled_rows(device: str) -> bool:
    """Whether the step's observation uses the tiled row store: on CUDA (and on the CPU only when
    Warp honours CPU block widths, ``wp.config.enable_cpu_blocks``, which the tests use to check it)."""
    return _TILED_ROWS and (device.startswith("cuda") or bool(getattr(wp.config, "enable_cpu_blocks", False)))


@functools.cache
def observe_kernels(Args, observe_agent, scalar: type, obs_dim: int) -> SimpleNamespace:
    """``observe(args, env_mask, use_mask, mode, save, agents_per_thread, obs_out, final_obs_out)``,
    its listed twin ``observe_listed`` (``env_mask, use_mask`` -> an ``EnvListArgs``) and
    ``observe_rows(args, mode, obs_rows)`` around ``observe_agent`` (see the module docstring)."""
    row_type = wp.types.vector(obs_dim, scalar)
    save_row = episode.save_row_func(scalar)

    @wp.func
    def observe_env(
        args: Args,
        mode: int,
        save: int,
        env: int,
        first: int,
        agents_per_thread: int,
        obs_out: wp.array3d(dtype=scalar),
        final_obs_out: wp.array3d(dtype=scalar),
    ):
        """Observe agents ``[first, first + agents_per_thread)`` of ``env`` and store their rows (with
        ``save``, first copying each row it replaces to ``final_obs_out``)."""
        for agent in range(first, wp.min(first + agents_per_thread, args.pos.shape[1])):
            if save != 0:
                save_row(obs_out, final_obs_out, env, agent)  # an auto-reset: keep the last row
            row = observe_agent(args, mode, env, agent)
            for c in range(wp.static(obs_dim)):
                obs_out[env, agent, c] = row[c]

    @wp.kernel(enable_backward=False, module="unique")
    def observe(
        args: Args,
        env_mask: wp.array(dtype=wp.bool),
        use_mask: int,
        mode: int,
        save: int,
        agents_per_thread: int,
        obs_out: wp.array3d(dtype=scalar),
        final_obs_out: wp.array3d(dtype=scalar),
    ):
        env, slot = wp.tid()
        if use_mask != 0 and not env_mask[env]:
            return
        observe_env(args, mode, save, env, slot * agents_per_thread, agents_per_thread, obs_out, final_obs_out)

    @wp.kernel(enable_backward=False, module="unique")
    def observe_listed(
        args: Args,
        envs: EnvListArgs,
        mode: int,
        save: int,
        agents_per_thread: int,
        obs_out: wp.array3d(dtype=scalar),
        final_obs_out: wp.array3d(dtype=scalar),
    ):
        row, slot = wp.tid()
        for i in range(row, envs.count[0], envs.stride):
            env = envs.envs[i]
            observe_env(args, mode, save, env, slot * agents_per_thread, agents_per_thread, obs_out, final_obs_out)

    @wp.kernel(enable_backward=False, module="unique")
    def observe_rows(args: Args, mode: int, obs_rows: wp.array2d(dtype=scalar)):
        block, lane = wp.tid()
        row_index = block * wp.static(OBS_BLOCK) + lane
        n_agents = args.pos.shape[1]
        row = row_type()
        if row_index < obs_rows.shape[0]:
            env = row_index / n_agents
            row = observe_agent(args, mode, env, row_index - env * n_agents)
        if wp.static(_OBS_STORE == "tile"):
            rows = wp.tile_transpose(wp.tile(row))
            wp.tile_store(obs_rows, rows, offset=(block * wp.static(OBS_BLOCK), 0))
        else:
            rows = wp.tile_zeros(shape=(wp.static(OBS_BLOCK), wp.static(obs_dim)), dtype=scalar, storage="shared")
            for c in range(wp.static(obs_dim)):
                wp.tile_scatter_masked(rows, lane, c, row[c], True)
            wp.tile_store(obs_rows, rows, offset=(block * wp.static(OBS_BLOCK), 0))

    return SimpleNamespace(observe=observe, observe_listed=observe_listed, observe_rows=observe_rows)


#: ``step_rows``' launch bounds by (row width, precision): the blocks of ``OBS_BLOCK`` threads ptxas
#: must fit on an SM. Unbounded, ptxas gives it 90 registers for navigation's default rows (23 float32
#: columns: k = 3 neighbors) where ``observe_rows`` takes 80, one block fewer per SM; asking for 11
#: keeps 80 (24 bytes more stack) and measured faster (docs/benchmarks.md, session 11). Other widths
#: compile unbounded to ``observe_rows``' registers (k = 1, 2, 5, 8, 16: 80, 72, 80, 128, 168, at 16
#: agents), where bounds would only spill (k = 8: 168 bytes of stack, k = 16: 496); k = 4 (84-94
#: unbounded against 80, spilling when bounded) is unmeasured and left unbounded.
#: ``tools/sass_stats.py step_rows`` shows the counts.
STEP_ROWS_MIN_BLOCKS = {(23, wp.float32): 11}


def envs_per_block(n_agents: int) -> int:
    """Envs in one block of ``step_rows_kernel`` (0: an env has more agents than ``OBS_BLOCK``)."""
    return OBS_BLOCK // n_agents


@functools.cache
def step_rows_kernel(
    Args, observe_agent, End, end_env, end_agent, start_agent, scalar: type, obs_dim: int, n_agents: int, n_values: int
):
    """``step_rows(args, end, obs_rows)``: the step's ``observe_rows`` (``OBSERVE_STEP``) that also
    ends the step of its envs, for blocks of whole envs (``envs_per_block(n_agents)`` envs,
    ``launch_step_rows``).

    Every agent of the block is observed. Then (a block barrier makes what they wrote visible to
    the block) one lane per env calls ``end_env(end, env) -> vector(n_values, scalar)``: the env's
    per-env terms (termination, the episode counters: ``episode.end_step``) and the values its
    agents need, the first nonzero where the env starts a prepared episode now. Then (another
    barrier; the values pass through shared memory) every agent calls ``end_agent(end, env, agent,
    values)`` and, with ``start_agent``, every agent of a restarting env calls ``start_agent(end,
    env, agent, row) -> row``, which keeps the row just observed as its final one and returns the
    prepared start's first row. The block's rows leave through shared memory as in ``observe_rows``.

    One launch instead of three in a chain (observation, a per-env finish, the auto-reset's swap):
    each a few microseconds of latency on the GPU, most of a small batch's step. Per-agent work
    stays on the agents' lanes, so the kernel keeps the observation's registers."""
    row_type = wp.types.vector(obs_dim, scalar)
    values_type = wp.types.vector(n_values, scalar)
    per_block = envs_per_block(n_agents)
    block_rows = per_block * n_agents
    if per_block < 1:
        raise ValueError(f"step_rows_kernel needs at most {OBS_BLOCK} agents per env, got {n_agents}")

    min_blocks = STEP_ROWS_MIN_BLOCKS.get((obs_dim, scalar))

    @wp.kernel(enable_backward=False, module="unique", launch_bounds=(OBS_BLOCK, min_blocks) if min_blocks else None)
    def step_rows(args: Args, end: End, obs_rows: wp.array2d(dtype=scalar)):
        block, lane = wp.tid()
        n_envs = obs_rows.shape[0] / wp.static(n_agents)
        local = lane / wp.static(n_agents)
        env = block * wp.static(per_block) + local
        agent = lane - local * wp.static(n_agents)
        row = row_type()
        if env < n_envs:
            row = observe_agent(args, wp.static(OBSERVE_STEP), env, agent)
        # One value vector per env of the block, in shared memory. Each scatter is a block barrier
        # (Warp's tile scatters synchronize the block when they return), which also makes the
        # block's global writes visible to the whole block: the first orders the observation's
        # per-agent outputs before the per-env ends, the second the ends before the agents read
        # their env's values.
        values = wp.tile_zeros(shape=wp.static(per_block), dtype=values_type, storage="shared")
        wp.tile_scatter_masked(values, 0, values_type(), False)
        end_lane = block * wp.static(per_block) + lane
        mine = values_type()
        if lane < wp.static(per_block) and end_lane < n_envs:  # noqa: SIM102 (Warp's ``and`` evaluates both)
            mine = end_env(end, end_lane)
        wp.tile_scatter_masked(values, lane, mine, lane < wp.static(per_block))
        if env < n_envs:
            env_values = wp.tile_extract(values, local)
            end_agent(end, env, agent, env_values)
            if wp.static(start_agent is not None):  # noqa: SIM102 (compiled in only with ``start_agent``)
                if env_values[0] != scalar(0.0):
                    row = start_agent(end, env, agent, row)
        rows = wp.tile_zeros(shape=(wp.static(block_rows), wp.static(obs_dim)), dtype=scalar, storage="shared")
        for c in range(wp.static(obs_dim)):
            wp.tile_scatter_masked(rows, lane, c, row[c], True)
        wp.tile_store(obs_rows, rows, offset=(block * wp.static(block_rows), 0))

    return step_rows


def launch_step_rows(sc, launcher: Launcher, kernel, args, end) -> None:
    """Launch ``kernel`` (a ``step_rows_kernel``) over every env of the scenario ``sc``, writing the
    scenario's columns of ``sc.env._obs``."""
    env = sc.env
    per_block = envs_per_block(sc.n_agents)
    rows = env._obs.reshape((sc.n_envs * sc.n_agents, env._obs.shape[2]))
    block_rows = per_block * sc.n_agents
    launcher.launch(
        kernel,
        dim=(-(-sc.n_envs // per_block), block_rows),
        inputs=[args, end],
        outputs=[rows],
        device=env.device,
        block_dim=block_rows,
    )


def row_vectors(array: wp.array, width: int, start: int = 0) -> wp.array:
    """A view of columns ``[start, start + width)`` of ``array`` [E, A, W] (unit column stride) as
    [E, A] vectors of ``width``: a kernel then moves a whole row through one address, the columns
    at constant offsets from it (indexed ``[E, A, c]`` each column is an address of its own, held
    in registers). Shares the memory: no copy, nothing allocated on the device."""
    item = wp.types.type_size_in_bytes(array.dtype)
    if array.ndim != 3 or array.shape[2] < start + width or array.strides[2] != item:
        raise ValueError(
            f"row_vectors needs [E, A, >= {start + width}] rows with unit column stride, got {array.shape}"
        )
    vec = wp.types.vector(width, array.dtype)
    ptr = array.ptr + start * item
    return wp.array(ptr=ptr, dtype=vec, shape=array.shape[:2], strides=array.strides[:2], device=array.device)


def launch_observe_rows(
    sc, launcher: Launcher, kernels: SimpleNamespace, args, env_mask, mode: int, rows_out: wp.array | None = None
) -> None:
    """Launch ``sc``'s observation (``kernels`` from ``observe_kernels``, ``args`` its filled
    struct) for the envs of ``env_mask`` [E] bool, or for every env (``None``: the tiled store
    where ``tiled_rows``), writing ``sc.env._obs``; with ``mode=OBSERVE_ONLY`` (an auto-reset)
    first saving the rows it replaces to ``sc.env._final_obs_saved``. ``rows_out``: write these
    [E, A, >= obs_dim] rows instead, saving none (a start prepared ahead; ``env_mask`` required)."""
    env = sc.env
    if rows_out is not None:
        per_thread, threads = agents_per_thread(env.device, sc.n_agents)
        launcher.launch(
            kernels.observe,
            dim=(sc.n_envs, threads),
            inputs=[args, env_mask, 1, int(mode), 0, per_thread],
            outputs=[rows_out, rows_out],
            device=env.device,
        )
        return
    save = int(mode == OBSERVE_ONLY)
    if env_mask is None and tiled_rows(env.device):
        rows = env._obs.reshape((sc.n_envs * sc.n_agents, env._obs.shape[2]))
        launcher.launch(
            kernels.observe_rows,
            dim=(-(-rows.shape[0] // OBS_BLOCK), OBS_BLOCK),
            inputs=[args, int(mode)],
            outputs=[rows],
            device=env.device,
            block_dim=OBS_BLOCK,
        )
        return
    per_thread, threads = agents_per_thread(env.device, sc.n_agents)
    listed = env.list_envs(env_mask, threads)
    if listed is not None:
        launcher.launch(
            kernels.observe_listed,
            dim=(listed[1], threads),
            inputs=[args, listed[0], int(mode), save, per_thread],
            outputs=[env._obs, env._final_obs_saved],
            device=env.device,
        )
        return
    mask = env_mask if env_mask is not None else sc.world.neighbors.no_mask
    launcher.launch(
        kernels.observe,
        dim=(sc.n_envs, threads),
        inputs=[args, mask, int(env_mask is not None), int(mode), save, per_thread],
        outputs=[env._obs, env._final_obs_saved],
        device=env.device,
    )
