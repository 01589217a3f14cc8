"""A device-side list of the envs of a mask, for launches that would otherwise skip most envs.

A masked kernel launched over every env pays for the envs it skips: at 262,144 x 16 the auto-reset's
masked reset and observation launched ~21 M threads per step to do the work of the ~1/200 envs that
finished, and their blocks alone were a large share of the step (docs/benchmarks.md,
``list_resets``). ``EnvList`` compacts a mask into a list of env indices on the device
(``compact_envs``); a kernel's listed twin takes an ``EnvListArgs`` and is launched over a fixed
number of list rows (enough threads to fill the GPU twice, ``list_rows``), each row walking the list
with that stride. The list's order depends on thread timing, but each env is handled by one row with
the same arithmetic as the masked kernel, so the results are the same bits. The list has a fixed
cost of its own, so the environment lists only where it pays (``ExecutionPlan.list_resets``: large
CUDA batches, and the CPU); elsewhere the masked kernels run unchanged.

A listed kernel (``row`` = the launch's first index)::

    row, slot = wp.tid()
    for i in range(row, envs.count[0], envs.stride):
        env = envs.envs[i]
        ...  # the env's work, the masked kernel's body (a shared ``wp.func``)
"""

import warp as wp

from swarp.runtime.plan import THREADS_PER_SM


@wp.struct
class EnvListArgs:
    envs: wp.array(dtype=wp.int32)  # [E] env indices, the first count[0] valid
    count: wp.array(dtype=wp.int32)  # [1]
    stride: int  # rows launched: list entries row, row + stride, ... belong to launch row ``row``


@wp.kernel(enable_backward=False, grid_stride=False)
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
