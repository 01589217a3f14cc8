"""The Warp decode of discrete actions into the physical command: ``swarp.core.spaces.decode_torch``'s
twin, the first launch of a step with discrete actions (the mapping is documented there)."""

from __future__ import annotations

import functools

import warp as wp

#: Each agent's decode in the kernel's ``kinds`` table, by action space kind (0: not decoded).
KIND_CODES = {"continuous": 0, "discrete": 1, "multidiscrete": 2}


@functools.cache
def decode_kernel(scalar: type, comm: bool = False):
    """``decode(indices [E, A, W] int64, kinds [A] int32, levels [A, D] int32, low [A, D], high [A, D],
    command [E, A, D], invalid [1] int32)``, one thread per agent (launch ``dim=(E, A)``); with
    ``comm``, three more: ``(speaks [A] int32, raw [E, A, C], message [E, A, C])``.

    ``kinds`` (``KIND_CODES``): 1 reads one flat index per agent (``discrete``), 2 one index per
    column (``multidiscrete``), 0 skips the agent's command (a continuous group's: its command is the
    action). ``levels[agent, d]``: levels of column ``d``, 0 for a column the agent's group does not
    have (its command is 0). An out-of-range index writes a zero command and sets ``invalid[0]``.

    With ``comm``, ``speaks[agent]`` is the agent's channel width (0: silent, its message row is
    not written): a continuous agent's message is its ``raw`` row clamped to [0, 1] (a non-finite
    entry 0, setting ``invalid[0]``); a discrete agent's is the one-hot of its last digit (the
    flat index's least significant, or the column after its physical ones), 0 where its index is
    out of range."""

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def decode(
        indices: wp.array3d(dtype=wp.int64),
        kinds: wp.array(dtype=wp.int32),
        levels: wp.array2d(dtype=wp.int32),
        low: wp.array2d(dtype=scalar),
        high: wp.array2d(dtype=scalar),
        command: wp.array3d(dtype=scalar),
        invalid: wp.array(dtype=wp.int32),
        speaks: wp.array(dtype=wp.int32),
        raw: wp.array3d(dtype=scalar),
        message: wp.array3d(dtype=scalar),
    ):
        env, agent = wp.tid()
        kind = kinds[agent]
        speak = int(0)
        if wp.static(comm):
            speak = speaks[agent]
            if kind == 0 and speak > 0:
                for c in range(speak):
                    value = raw[env, agent, c]
                    if not wp.isfinite(value):
                        invalid[0] = 1
                        value = scalar(0.0)
                    message[env, agent, c] = wp.clamp(value, scalar(0.0), scalar(1.0))
        if kind == 0:
            return
        n_columns = levels.shape[1]
        total = wp.int64(1)
        used = int(0)
        for d in range(n_columns):
            if levels[agent, d] > 0:
                total = total * wp.int64(levels[agent, d])
                used = used + 1
        if speak > 0:
            total = total * wp.int64(speak)
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
            if speak > 0:
                rest = indices[env, agent, used]
                if rest < wp.int64(0) or rest >= wp.int64(speak):
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
        if wp.static(comm):
            # What is left of a flat index, or the message's own column: the message's choice.
            for c in range(speak):
                hot = scalar(0.0)
                if bad == 0 and wp.int64(c) == rest:
                    hot = scalar(1.0)
                message[env, agent, c] = hot

    return decode


__all__ = ["KIND_CODES", "decode_kernel"]
