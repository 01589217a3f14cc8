"""The Warp decode of discrete actions into the physical command: ``swarp.core.spaces.decode_torch``'s
twin, the first launch of a discrete environment's step (the mapping is documented there)."""

from __future__ import annotations

import functools

import warp as wp


@functools.cache
def decode_kernel(scalar: type):
    """``decode(indices [E, A, W] int64, nvec [D] int32, flat, low [A, D], high [A, D], command
    [E, A, D], invalid [1] int32)``, one thread per agent (launch ``dim=(E, A)``): ``flat`` 1 reads
    one flat index per agent (``discrete``, W = 1), 0 one index per column (``multidiscrete``,
    W = D). An out-of-range index writes a zero command and sets ``invalid[0]``."""

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def decode(
        indices: wp.array3d(dtype=wp.int64),
        nvec: wp.array(dtype=wp.int32),
        flat: int,
        low: wp.array2d(dtype=scalar),
        high: wp.array2d(dtype=scalar),
        command: wp.array3d(dtype=scalar),
        invalid: wp.array(dtype=wp.int32),
    ):
        env, agent = wp.tid()
        n_columns = nvec.shape[0]
        total = wp.int64(1)
        for d in range(n_columns):
            total = total * wp.int64(nvec[d])
        bad = int(0)
        rest = wp.int64(0)
        if flat != 0:
            rest = indices[env, agent, 0]
            if rest < wp.int64(0) or rest >= total:
                bad = 1
        else:
            for d in range(n_columns):
                given = indices[env, agent, d]
                if given < wp.int64(0) or given >= wp.int64(nvec[d]):
                    bad = 1
        if bad != 0:
            invalid[0] = 1
        stride = total
        for d in range(n_columns):
            n = nvec[d]
            index = int(0)
            if flat != 0:
                stride = stride / wp.int64(n)
                index = int(rest / stride)
                rest = rest - wp.int64(index) * stride
            else:
                index = int(indices[env, agent, d])
            level = int(index)
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


__all__ = ["decode_kernel"]
