"""A device-side list of the envs of a mask, for launches that would otherwise skip most envs.

A masked kernel launched over every env pays for the envs it skips: at 262,144 x 16 the
auto-reset's masked reset and observation launched ~21 M threads per step to do the work of the
~1/200 envs that finished, and their blocks alone took ~130 us on an H200. ``EnvList`` compacts a
mask into a list of env indices on the device (``compact_envs``); a kernel's listed twin takes an
``EnvListArgs`` and is launched over a fixed number of list rows (enough threads to fill the GPU
twice, ``list_rows``), each row walking the list with that stride. The list's order depends on
thread timing, but each env is handled by one row with the same arithmetic as the masked kernel,
so the results are the same bits. The list has a fixed cost of its own, so the environment lists
only where it pays (``list_pays``: large CUDA batches, and the CPU); elsewhere the masked kernels
run unchanged.

A listed kernel (``row`` = the launch's first index)::

    row, slot = wp.tid()
    for i in range(row, envs.count[0], envs.stride):
        env = envs.envs[i]
        ...  # the env's work, the masked kernel's body (a shared ``wp.func``)
"""

import warp as wp

from swarp.core.launch import env_choice

#: Resident threads per SM of the GPUs swarp targets; a list launch asks for twice the GPU's worth.
THREADS_PER_SM = 2048
#: ``SWARP_RESET_LIST=auto|on|off``: whether the auto-reset's launches walk a list of the finished
#: envs (``auto``: where ``list_pays``).
RESET_LIST_ENV = "SWARP_RESET_LIST"


@wp.struct
class EnvListArgs:
    envs: wp.array(dtype=wp.int32)  # [E] env indices, the first count[0] valid
    count: wp.array(dtype=wp.int32)  # [1]
    stride: int  # rows launched: list entries row, row + stride, ... belong to launch row ``row``


@wp.kernel(enable_backward=False)
def compact_envs(mask: wp.array(dtype=wp.bool), count: wp.array(dtype=wp.int32), envs: wp.array(dtype=wp.int32)):
    """Append every env of ``mask`` to ``envs`` (``count`` [1] zeroed before the launch)."""
    env = wp.tid()
    if mask[env]:
        envs[wp.atomic_add(count, 0, 1)] = env


def list_rows(device, n_envs: int, threads_per_env: int) -> int:
    """Rows of a list launch with ``threads_per_env`` threads per row: enough to fill every SM of a
    GPU twice (at most ``n_envs``); one on the CPU, whose threads run one after another anyway."""
    dev = wp.get_device(device)
    if not dev.is_cuda:
        return 1
    return max(1, min(n_envs, -(-2 * dev.sm_count * THREADS_PER_SM // max(1, threads_per_env))))


def list_pays(device, n_envs: int, n_agents: int) -> bool:
    """Whether the auto-reset should list its envs (``SWARP_RESET_LIST`` forces it on or off).

    The list costs a fixed ~12 us per step on an H200 (a memset and the compaction in the chain, and
    the walk), measured at 16,384 x 16: 92 -> 104 us/step, and at 4,096 x 16: 44 -> 58. It saves
    the blocks of the envs the masks skip: 951 -> 864 us/step at 262,144 x 16, 193 -> 181 at
    262,144 x 3 (session 7). So on CUDA from two GPU-fulls of agent threads (E x A >= 2 x SMs x
    ``THREADS_PER_SM``; 262,144 x 3 is above, 16,384 x 16 below).

    Always on the CPU, where a skipped env is not free: navigation's masked reset and observation
    cost 11.5 and 15.3 us at 1,024 x 4 with no env selected (a bare masked kernel: 1.9; each Warp
    CPU thread's prologue copies the kernel's arguments, 1.1-1.4 KB of structs here, before it can
    test its mask), while a one-row list walk pays the prologue once. Measured on the 2-core EPYC (session 9, three
    rounds each): 1,024 x 4 322-326 -> 295-303 us/step, 1,024 x 16 2,720-2,768 -> 2,693-2,705,
    64 x 4 19.1-20.2 -> 18.1-18.7, 4,096 x 4 1,418-1,434 -> 1,331-1,368; 1 and 16 envs within noise."""
    choice = env_choice(RESET_LIST_ENV, ("auto", "on", "off"))
    if choice != "auto":
        return choice == "on"
    return not wp.get_device(device).is_cuda or throughput_bound(device, n_envs, n_agents)


def throughput_bound(device, n_envs: int, n_agents: int) -> bool:
    """Whether a step's per-agent launches over ``n_envs`` x ``n_agents`` threads on ``device`` are
    bound by throughput rather than latency: on CUDA from two GPU-fulls of agent threads (E x A >=
    2 x SMs x ``THREADS_PER_SM``: 540,672 on an H200; 262,144 x 3 is above, 16,384 x 16 below).
    Below, a step is a chain of launches whose latency a fusion saves; above, the blocks' work
    dominates. False on the CPU."""
    dev = wp.get_device(device)
    return dev.is_cuda and n_envs * n_agents >= 2 * dev.sm_count * THREADS_PER_SM


class EnvList:
    """A device-side list of the envs of a mask, rebuilt by ``launch_compact`` (persistent arrays,
    no allocation per step, no host read).

    Args:
        n_envs: E.
        device: Warp device.
    """

    def __init__(self, n_envs: int, device):
        self.n_envs = n_envs
        self.device = device
        self.envs = wp.zeros(n_envs, dtype=wp.int32, device=device)
        self.count = wp.zeros(1, dtype=wp.int32, device=device)
        #: The mask the list holds, while the caller says it is current (``launch_compact`` sets
        #: it, the caller clears it once the mask may change); ``select`` lists only that mask.
        self.mask: wp.array | None = None
        #: Rows of a list launch, overriding ``list_rows`` (tests use a few, to exercise the stride).
        self.rows: int | None = None

    def launch_compact(self, launcher, mask: wp.array) -> None:
        """Launch the rebuild of the list from ``mask`` [E] bool (a memset and one launch)."""
        launcher.zero(self.count)
        launcher.launch(
            compact_envs, dim=self.n_envs, inputs=[mask, self.count], outputs=[self.envs], device=self.device
        )
        self.mask = mask

    def select(self, mask: wp.array | None, threads_per_env: int) -> tuple[EnvListArgs, int] | None:
        """``(EnvListArgs, rows to launch)`` for a listed kernel with ``threads_per_env`` threads per
        row when the list holds ``mask`` [E] bool; ``None`` otherwise (launch the masked kernel)."""
        if mask is None or mask is not self.mask:
            return None
        args = EnvListArgs()
        args.envs, args.count = self.envs, self.count
        args.stride = self.rows if self.rows is not None else list_rows(self.device, self.n_envs, threads_per_env)
        return args, args.stride
