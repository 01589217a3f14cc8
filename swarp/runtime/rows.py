"""Observation rows: the kernels every fused scenario observes with, around its own
``observe_agent`` Warp func, and the observe modes.

A scenario writes ``observe_agent(args, mode, env, agent) -> row``: it writes the agent's
per-agent outputs through ``args`` (a Warp struct holding at least ``pos`` [E, A]) and returns its
observation row, a ``vector(obs_dim)`` indexed only by compile-time constants (so it stays in
registers). ``observe_kernels`` wraps it in:

* ``observe``: one agent per thread (one env per thread on the CPU), masked (resets; its twin
  ``observe_listed`` walks the auto-reset's env list where it pays, ``swarp.runtime.env_list``),
  each thread storing its row with scalar stores; compiled with ``save`` (an auto-reset,
  ``OBSERVE_ONLY``) it first copies the row it overwrites to ``final_obs``
  (``FusedScenario.saves_final_obs``), and for one agent a thread without the loop over a thread's
  agents (``masked(per_agent, save)``: the variants a plan needs compile on first use);
* ``observe_rows``: every env, for the CUDA step (``ExecutionPlan.tiled_rows``): blocks of
  ``OBS_BLOCK`` consecutive agents (flat row = env * A + agent) whose rows leave through shared
  memory as one coalesced ``[OBS_BLOCK, obs_dim]`` store (``block_rows_store``), instead of
  ``obs_dim`` scalar stores per thread ``4 * obs_dim`` bytes apart. Only the scenario's columns are
  written (lidar columns follow).

``launch_observe_rows`` picks the kernel for a launch from the plan and the env list.
"""

import functools
from types import SimpleNamespace

import warp as wp

from swarp.runtime import episode, health
from swarp.runtime.buffers import EnvBuffers
from swarp.runtime.env_list import EnvListArgs
from swarp.runtime.launch import Launcher

#: What a fused scenario's ``launch_observe`` computes besides the observation (its ``mode``).
OBSERVE_ONLY = 0  # after an auto-reset: the step's rewards and info must survive
OBSERVE_STEP = 1  # a step: rewards, termination, info
OBSERVE_RESET = 2  # an explicit reset: info of the fresh state (and reward memory), no reward

#: Agents (observation rows) per block of the tiled observation kernel.
OBS_BLOCK = 64


@functools.cache
def block_rows_store(scalar: type, width: int):
    """``store_rows(rows_out, row, first, lane, block_rows)``, a Warp function every thread of a
    block of ``block_rows`` (<= ``OBS_BLOCK``) threads calls: thread ``lane`` hands over its ``row``
    (``vector(width, scalar)``) as row ``first + lane`` of ``rows_out`` ([R, >= width] of
    ``scalar``): only the first ``width`` columns are written, rows from R on are dropped.

    On CUDA the block's rows pass through a shared tile (odd pitch: no bank conflicts) between two
    block barriers and leave as coalesced stores, thread t storing the block's flat elements t,
    t + block_rows, ... (``width`` stores, each address a division by the constant ``width`` away,
    unrolled 4 at a time: fully unrolled, ptxas hoists the shared loads and ``step_rows`` spills). It replaces
    Warp's tile scatter and store, which pay a barrier per column and per-element bounds and
    stride arithmetic (docs/benchmarks.md, the plan rules' evidence: the tiled rows' store). Elsewhere
    (CPU blocks) each thread stores its own row: the same values."""
    ctype = {float: "wp::float32", wp.float32: "wp::float32", wp.float64: "wp::float64"}.get(scalar)
    if ctype is None:
        raise ValueError(f"block_rows_store stores float32 or float64 rows, got {scalar!r}")
    pitch = width | 1
    snippet = f"""
#if defined(__CUDA_ARCH__)
    __shared__ {ctype} tile[{OBS_BLOCK * pitch}];
    #pragma unroll
    for (int c = 0; c < {width}; ++c)
        tile[lane * {pitch} + c] = row[c];
    __syncthreads();
    char* base = (char*)rows_out.data;
    #pragma unroll 4
    for (int k = 0; k < {width}; ++k) {{
        const int i = lane + block_rows * k;
        const int r = i / {width};
        const int c = i - r * {width};
        if (first + r < rows_out.shape[0])
            *({ctype}*)(base + (size_t)(first + r) * rows_out.strides[0] + (size_t)c * rows_out.strides[1]) =
                tile[r * {pitch} + c];
    }}
    __syncthreads();
#else
    if (first + lane < rows_out.shape[0])
        for (int c = 0; c < {width}; ++c)
            wp::index(rows_out, first + lane, c) = row[c];
#endif
"""
    row_type = wp.types.vector(width, scalar)

    @wp.func_native(snippet)
    def store_rows(rows_out: wp.array2d(dtype=scalar), row: row_type, first: int, lane: int, block_rows: int): ...

    return store_rows


@functools.cache
def observe_kernels(Args, observe_agent, scalar: type, obs_dim: int) -> SimpleNamespace:
    """``masked(per_agent, save)``: ``observe(args, env_mask, use_mask, mode, agents_per_thread,
    obs_out, final_obs_out, non_finite_out)`` and its listed twin ``observe_listed`` (``env_mask,
    use_mask`` -> an ``EnvListArgs``), and ``observe_rows(args, mode, obs_rows, non_finite_out)``,
    around ``observe_agent`` (see the module docstring). ``masked``'s variants compile on first
    use: each keeps only the registers its case needs (docs/architecture.md, "Observation rows")."""
    row_type = wp.types.vector(obs_dim, scalar)
    save_row = episode.save_row_func(scalar)
    finite_row = health.funcs(scalar, obs_dim).finite_row
    store_rows = block_rows_store(scalar, obs_dim)

    @functools.cache
    def masked(per_agent: bool, save: bool) -> SimpleNamespace:
        """``observe`` and ``observe_listed`` compiled for one agent a thread (``per_agent``: the
        loop over a thread's agents compiles away) and for saving the rows they replace or not."""

        @wp.func
        def observe_env(
            args: Args,
            mode: int,
            env: int,
            first: int,
            agents_per_thread: int,
            obs_out: wp.array3d(dtype=scalar),
            final_obs_out: wp.array3d(dtype=scalar),
            non_finite_out: wp.array(dtype=wp.int32),
        ):
            """Observe agents ``[first, first + agents_per_thread)`` of ``env`` and store their rows
            (with ``save``, first copying each row it replaces to ``final_obs_out``), raising the
            env's ``non_finite_out`` flag for a non-finite row."""
            stop = wp.min(first + agents_per_thread, args.pos.shape[1])
            if wp.static(per_agent):
                stop = first + 1
            for agent in range(first, stop):
                if wp.static(save):
                    save_row(obs_out, final_obs_out, env, agent)  # an auto-reset: keep the last row
                row = observe_agent(args, mode, env, agent)
                for c in range(wp.static(obs_dim)):
                    obs_out[env, agent, c] = row[c]
                health.flag_env(non_finite_out, env, finite_row(row))

        @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
        def observe(
            args: Args,
            env_mask: wp.array(dtype=wp.bool),
            use_mask: int,
            mode: int,
            agents_per_thread: int,
            obs_out: wp.array3d(dtype=scalar),
            final_obs_out: wp.array3d(dtype=scalar),
            non_finite_out: wp.array(dtype=wp.int32),
        ):
            env, slot = wp.tid()
            if use_mask != 0 and not env_mask[env]:
                return
            first = slot * agents_per_thread
            observe_env(args, mode, env, first, agents_per_thread, obs_out, final_obs_out, non_finite_out)

        @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
        def observe_listed(
            args: Args,
            envs: EnvListArgs,
            mode: int,
            agents_per_thread: int,
            obs_out: wp.array3d(dtype=scalar),
            final_obs_out: wp.array3d(dtype=scalar),
            non_finite_out: wp.array(dtype=wp.int32),
        ):
            row, slot = wp.tid()
            first = slot * agents_per_thread
            for i in range(row, envs.count[0], envs.stride):
                env = envs.envs[i]
                observe_env(args, mode, env, first, agents_per_thread, obs_out, final_obs_out, non_finite_out)

        return SimpleNamespace(observe=observe, observe_listed=observe_listed)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def observe_rows(
        args: Args, mode: int, obs_rows: wp.array2d(dtype=scalar), non_finite_out: wp.array(dtype=wp.int32)
    ):
        block, lane = wp.tid()
        first = block * wp.static(OBS_BLOCK)
        n_agents = args.pos.shape[1]
        row = row_type()
        if first + lane < obs_rows.shape[0]:
            env = (first + lane) / n_agents
            row = observe_agent(args, mode, env, first + lane - env * n_agents)
            health.flag_env(non_finite_out, env, finite_row(row))
        store_rows(obs_rows, row, first, lane, wp.static(OBS_BLOCK))

    return SimpleNamespace(masked=masked, observe_rows=observe_rows)


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
    buffers: EnvBuffers,
    launcher: Launcher,
    kernels: SimpleNamespace,
    args,
    env_mask: wp.array | None,
    mode: int,
    rows_out: wp.array | None = None,
) -> None:
    """Launch a scenario's observation (``kernels`` from ``observe_kernels``, ``args`` its filled
    struct) for the envs of ``env_mask`` [E] bool, or for every env (``None``: the tiled store where
    ``plan.tiled_rows``), writing ``buffers.obs``; with ``mode=OBSERVE_ONLY`` (an auto-reset) first
    saving the rows it replaces to ``buffers.final_obs_saved``. ``rows_out``: write these
    [E, A, >= obs_dim] rows instead, saving none (a start prepared ahead; ``env_mask`` required)."""
    b, plan = buffers, buffers.plan
    dev = b.device
    per_thread, threads = plan.split(b.n_agents)
    if rows_out is not None:
        launcher.launch(
            kernels.masked(per_thread == 1, False).observe,
            dim=(b.n_envs, threads),
            inputs=[args, env_mask, 1, int(mode), per_thread],
            outputs=[rows_out, rows_out, b.non_finite],
            device=dev,
        )
        return
    if env_mask is None and plan.tiled_rows:
        rows = b.obs_rows()
        launcher.launch(
            kernels.observe_rows,
            dim=(-(-rows.shape[0] // OBS_BLOCK), OBS_BLOCK),
            inputs=[args, int(mode)],
            outputs=[rows, b.non_finite],
            device=dev,
            block_dim=OBS_BLOCK,
        )
        return
    masked = kernels.masked(per_thread == 1, mode == OBSERVE_ONLY)
    listed = b.list_envs(env_mask, threads)
    if listed is not None:
        launcher.launch(
            masked.observe_listed,
            dim=(listed[1], threads),
            inputs=[args, listed[0], int(mode), per_thread],
            outputs=[b.obs, b.final_obs_saved, b.non_finite],
            device=dev,
        )
        return
    mask = env_mask if env_mask is not None else b.no_mask
    launcher.launch(
        masked.observe,
        dim=(b.n_envs, threads),
        inputs=[args, mask, int(env_mask is not None), int(mode), per_thread],
        outputs=[b.obs, b.final_obs_saved, b.non_finite],
        device=dev,
    )
