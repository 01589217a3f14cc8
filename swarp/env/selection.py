"""Which envs a masked launch works on: every env, the envs of a bool mask, or a compact list.

A masked kernel launched over every env pays for the envs it skips: at 262,144 x 16 the
auto-reset's masked reset and observation launched ~21 M threads per step to do the work of the
~1/200 envs that finished, and their blocks alone took ~130 us on an H200. ``EnvList`` compacts a
mask into a list of env indices on the device (``compact_envs``); a kernel reading an
``EnvSelection`` in list mode is launched over a fixed number of list rows (enough threads to
fill the GPU twice, ``list_rows``) and each row walks the list with that stride. The list's order
depends on thread timing, but each env is handled by one row with the same arithmetic, so the
results are the same bits as the masked launch. The list has a fixed cost of its own, so the
environment lists only at large batches (``list_pays``).

Kernel pattern (``row`` = the launch's first index)::

    row, slot = wp.tid()
    for i in range(row, selection_stop(sel, row), sel.stride):
        env = selection_env(sel, i)
        if env >= 0:
            ...  # the env's work
"""

import warp as wp

from swarp.core.launch import env_choice

#: ``EnvSelection.mode``: every env, the envs of ``mask``, the first ``count[0]`` of ``envs``.
SELECT_ALL = 0
SELECT_MASK = 1
SELECT_LIST = 2
_SELECT_MASK = wp.constant(SELECT_MASK)
_SELECT_LIST = wp.constant(SELECT_LIST)

#: Resident threads per SM of the GPUs swarp targets; a list launch asks for twice the GPU's worth.
THREADS_PER_SM = 2048


@wp.struct
class EnvSelection:
    mode: int  # SELECT_ALL, SELECT_MASK or SELECT_LIST
    mask: wp.array(dtype=wp.bool)  # [E] (SELECT_MASK)
    envs: wp.array(dtype=wp.int32)  # [E] env indices, the first count[0] valid (SELECT_LIST)
    count: wp.array(dtype=wp.int32)  # [1]
    stride: int  # rows launched: list entries row, row + stride, ... belong to one row (1 otherwise)


@wp.func
def selection_stop(sel: EnvSelection, row: int) -> int:
    """End of the list positions of launch row ``row`` (``range(row, stop, sel.stride)``)."""
    if sel.mode == _SELECT_LIST:
        return sel.count[0]
    return row + 1


@wp.func
def selection_env(sel: EnvSelection, i: int) -> int:
    """The env at list position ``i``, or -1 when the mask leaves it out."""
    if sel.mode == _SELECT_LIST:
        return sel.envs[i]
    if sel.mode == _SELECT_MASK:  # noqa: SIM102 (nested: the mask may be a 1-element stand-in)
        if not sel.mask[i]:
            return -1
    return i


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


#: ``SWARP_RESET_LIST=auto|on|off``: whether the auto-reset's launches walk a list of the finished
#: envs (``auto``: where ``list_pays``).
RESET_LIST_ENV = "SWARP_RESET_LIST"


def list_pays(device, n_envs: int, n_agents: int) -> bool:
    """Whether the auto-reset should list its envs (``SWARP_RESET_LIST`` forces it on or off).

    The list costs a fixed ~12 us per step on an H200 (a memset and the compaction in the chain, and
    the walk), measured at 16,384 x 16: 92 -> 104 us/step, and at 4,096 x 16: 44 -> 58. It saves
    the blocks of the envs the masks skip: 951 -> 864 us/step at 262,144 x 16, 193 -> 181 at
    262,144 x 3 (session 7). So on CUDA from two GPU-fulls of agent threads (E x A >= 2 x SMs x
    ``THREADS_PER_SM``; 262,144 x 3 is above, 16,384 x 16 below); never on the CPU, where a skipped
    env costs little and each launch a fixed overhead."""
    choice = env_choice(RESET_LIST_ENV, ("auto", "on", "off"))
    if choice != "auto":
        return choice == "on"
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
        self._no_mask = wp.zeros(1, dtype=wp.bool, device=device)
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

    def select(self, mask: wp.array | None, threads_per_env: int) -> tuple[EnvSelection, int]:
        """``(EnvSelection, rows to launch)`` for a kernel with ``threads_per_env`` threads per row
        over the envs of ``mask`` [E] bool (``None``: every env): the list when it holds ``mask``
        (``rows`` from ``list_rows``), else the mask itself (one row per env)."""
        sel = EnvSelection()
        sel.mask, sel.envs, sel.count, sel.stride = self._no_mask, self.envs, self.count, 1
        if mask is None:
            sel.mode = SELECT_ALL
            return sel, self.n_envs
        sel.mask = mask
        if mask is not self.mask:
            sel.mode = SELECT_MASK
            return sel, self.n_envs
        sel.mode = SELECT_LIST
        sel.stride = self.rows if self.rows is not None else list_rows(self.device, self.n_envs, threads_per_env)
        return sel, sel.stride
