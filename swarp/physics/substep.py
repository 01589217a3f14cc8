"""One substep as one kernel: contact forces and integration together (``ExecutionPlan.fused_substep``).

Split, a substep is two launches: ``contacts.contact_forces`` writes every agent's force, then
``dynamics.integrate`` reads it back. Fused, a block holds whole envs. Each thread computes the
forces of its agents from the substep's input state, a block barrier waits until every agent of
the block has read that state, and then each thread integrates its agents (in place: no thread
writes a state another one still reads; on the CPU one thread holds an env, or Warp's CPU blocks
run the block's threads in turns between barriers). With one agent per thread the force stays in
a register (``forces`` is still written, the scratch the split substep leaves). Both run the same Warp
functions (``contacts.kernels(...).agent_force``, ``dynamics.integrate_agent_func(...)``), so
the states are the same bits.

Not for worlds with bodies (their contacts and joints run between the two), fleets with drones
(their own 6-DOF kernel) or a taped step (the kernel has no adjoint): ``can_fuse`` and
``Stepper.substep`` decide.
"""

import functools

import warp as wp

from swarp.core.config import DynamicsModel
from swarp.core.precision import vec2_type
from swarp.physics import contacts, dynamics
from swarp.runtime import health
from swarp.runtime.actions import decode_args, decode_func

#: ``kernel``'s ``decode``: none; the actions; the actions and the messages.
NO_DECODE, DECODE, DECODE_COMM = 0, 1, 2
#: Threads per block of the fused substep (whole envs; an env of more agents, one per thread, is a
#: block of its own, up to ``FUSED_SUBSTEP_MAX_AGENTS``).
SUBSTEP_BLOCK = 64


def can_fuse(agents, world) -> bool:
    """Whether the substeps of a fleet of ``agents`` (``AgentConfig``) in ``world`` (``WorldConfig``)
    can run fused: no movable bodies and no drones."""
    return not world.bodies and all(cfg.model != DynamicsModel.DRONE for cfg in agents)


@wp.func_native("WP_TILE_SYNC();")
def block_barrier():
    """Every thread of the block waits here for the others: ``__syncthreads`` on CUDA; on the CPU
    a yield between a block's threads where Warp runs blocks (``wp.config.enable_cpu_blocks``),
    else nothing (then each thread holds a whole env: ``plan.one_thread_per_env``)."""
    ...


def layout(n_envs: int, n_agents: int, one_thread_per_env: bool) -> tuple[int, int, int]:
    """``(blocks, envs per block, threads per env)`` of the fused substep's launch (the plan keeps
    an env's threads within ``FUSED_SUBSTEP_MAX_AGENTS``: ``plan.fused_substep_problem``)."""
    threads = 1 if one_thread_per_env else n_agents
    per_block = max(1, SUBSTEP_BLOCK // threads)
    return -(-n_envs // per_block), per_block, threads


@functools.cache
def kernel(
    scalar: type,
    obstacles: bool,
    models: frozenset,
    ctrl_modes: frozenset,
    integrators: frozenset,
    per_agent: bool,
    decode: int = NO_DECODE,
    masked: bool = False,
    comm: int = 0,
):
    """``fused_substep``: one substep of every env, launched over ``layout``'s ``(blocks, envs per
    block x threads per env)`` threads with ``block_dim`` the second (see the module docstring).
    ``per_agent``: one agent per thread (``plan.one_thread_per_env`` off). The other arguments are
    ``contacts.kernels``' and ``dynamics.integrate_agent_func``'; the model travels in their
    ``ContactArgs`` and ``IntegrateArgs`` (``Stepper.contact_args``, ``Stepper.integrate_args``);
    ``masked``: their variants for a world with an alive mask (``swarp.runtime.alive``).
    ``decode``: ``NO_DECODE``, or the step's first substep decodes each agent's discrete actions
    (and messages ``comm`` wide: ``DECODE_COMM``) into ``actions`` before integrating it
    (``swarp.runtime.actions.decode_func``, its ``DecodeArgs`` the kernel's ``d``): the decode's
    own launch saved."""
    vec2 = vec2_type(scalar)
    DecodeArgs = decode_args(scalar)
    decode_agent = decode_func(scalar, comm if decode == DECODE_COMM else 0)
    agent_force = contacts.kernels(scalar, obstacles, masked).agent_force
    integrate_agent = dynamics.integrate_agent_func(scalar, models, ctrl_modes, integrators, masked)
    Contact = contacts.contact_args(scalar, masked)
    Integrate = dynamics.integrate_args(scalar, masked)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def fused_substep(
        c: Contact,
        m: Integrate,
        d: DecodeArgs,
        # layout (``m.agents_per_thread`` agents per thread)
        envs_per_block: int,
        threads_per_env: int,
        # inputs
        actions: wp.array3d(dtype=scalar),
        nbr: wp.array3d(dtype=wp.int32),
        nbr_near: wp.array2d(dtype=wp.int32),
        pos: wp.array2d(dtype=vec2),
        theta: wp.array2d(dtype=scalar),
        vel: wp.array2d(dtype=vec2),
        speed: wp.array2d(dtype=scalar),
        ang_vel: wp.array2d(dtype=scalar),
        # outputs (may alias the inputs: the barrier orders every read of the block before its writes)
        forces_out: wp.array2d(dtype=vec2),
        pos_out: wp.array2d(dtype=vec2),
        theta_out: wp.array2d(dtype=scalar),
        vel_out: wp.array2d(dtype=vec2),
        speed_out: wp.array2d(dtype=scalar),
        ang_vel_out: wp.array2d(dtype=scalar),
        invalid_out: wp.array(dtype=wp.int32),
        non_finite_out: wp.array(dtype=wp.int32),
    ):
        block, lane = wp.tid()
        agents_per_thread = m.agents_per_thread
        local = lane / threads_per_env
        env = block * envs_per_block + local
        first = (lane - local * threads_per_env) * agents_per_thread
        stop = wp.min(first + agents_per_thread, pos.shape[1])
        if wp.static(per_agent):
            stop = first + 1
        live = env < pos.shape[0]
        force = vec2()
        if live:
            for agent in range(first, stop):
                force = agent_force(c, pos, vel, nbr, nbr_near, env, agent)
                forces_out[env, agent] = force
        block_barrier()
        if live:
            finite = bool(True)
            for agent in range(first, stop):
                if wp.static(not per_agent):
                    force = forces_out[env, agent]
                if wp.static(decode != NO_DECODE):
                    decode_agent(d, actions, invalid_out, env, agent)
                agent_finite = integrate_agent(
                    m,
                    actions,
                    force,
                    pos,
                    theta,
                    vel,
                    speed,
                    ang_vel,
                    pos_out,
                    theta_out,
                    vel_out,
                    speed_out,
                    ang_vel_out,
                    invalid_out,
                    env,
                    agent,
                )
                finite = finite and agent_finite
            health.flag_env(non_finite_out, env, finite)

    return fused_substep
