"""The Warp decode of discrete actions into the physical command: ``swarp.core.spaces.decode_torch``'s
twin, the first launch of a step with discrete actions (the mapping is documented there)."""

from __future__ import annotations

import functools

import warp as wp

#: Each agent's decode in the kernel's ``kinds`` table, by action space kind (0: not decoded).
KIND_CODES = {"continuous": 0, "discrete": 1, "multidiscrete": 2}


@functools.cache
def decode_kernel(scalar: type):
    """``decode(indices [E, A, W] int64, kinds [A] int32, levels [A, D] int32, low [A, D], high [A, D],
    command [E, A, D], invalid [1] int32)``, one thread per agent (launch ``dim=(E, A)``).

    ``kinds`` (``KIND_CODES``): 1 reads one flat index per agent (``discrete``), 2 one index per
    column (``multidiscrete``), 0 skips the agent (a continuous group's: its command is the action).
    ``levels[agent, d]``: levels of column ``d``, 0 for a column the agent's group does not have (its
    command is 0). An out-of-range index writes a zero command and sets ``invalid[0]``."""

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def decode(
        indices: wp.array3d(dtype=wp.int64),
        kinds: wp.array(dtype=wp.int32),
        levels: wp.array2d(dtype=wp.int32),
        low: wp.array2d(dtype=scalar),
        high: wp.array2d(dtype=scalar),
        command: wp.array3d(dtype=scalar),
        invalid: wp.array(dtype=wp.int32),
    ):
        env, agent = wp.tid()
        kind = kinds[agent]
        if kind == 0:
            return
        n_columns = levels.shape[1]
        total = wp.int64(1)
        for d in range(n_columns):
            if levels[agent, d] > 0:
                total = total * wp.int64(levels[agent, d])
        bad = int(0)
        rest = wp.int64(0)
        if kind == 1:
            rest = indices[env, agent, 0]
            if rest < wp.int64(0) or rest >= total:
                bad = 1
        else:
            for d in range(n_columns):
                n = levels[agent, d]
                if n > 0:
                    given = indices[env, agent, d]
                    if given < wp.int64(0) or given >= wp.int64(n):
                        bad = 1
        if bad != 0:
            invalid[0] = 1
        stride = total
        for d in range(n_columns):
            n = levels[agent, d]
            value = scalar(0.0)
            if n > 0:
                index = int(0)
                # Not a conditional expression: Warp evaluates both sides, and a flat index has one column.
                if kind == 1:  # noqa: SIM108
                    stride = stride / wp.int64(n)
                    index = int(rest / stride)
                    rest = rest - wp.int64(index) * stride
                else:
                    index = int(indices[env, agent, d])
                level = index
                if n % 2 == 1:
                    if index == 0:
                        level = n / 2
                    elif index <= n / 2:
                        level = index - 1
                lo = low[agent, d]
                value = lo + (scalar(level) / scalar(n - 1)) * (high[agent, d] - lo)
                if bad != 0:
                    value = scalar(0.0)
            command[env, agent, d] = value

    return decode


__all__ = ["KIND_CODES", "decode_kernel"]
