"""The Warp decode of discrete actions into the physical command and of messages into the channel:
``swarp.core.spaces.decode_torch``'s twin (the mapping is documented there), run by the step's first
physics launch (``swarp.physics.substep``) or, where that cannot take it, a launch of its own."""

import functools
from typing import NamedTuple

import warp as wp

#: Each agent's decode in the kernel's ``kinds`` table, by action space kind (0: not decoded).
KIND_CODES = {"continuous": 0, "discrete": 1, "multidiscrete": 2}


class Decode(NamedTuple):
    """A step's decode, handed to the physics (``Stepper.simulate``): its ``DecodeArgs`` instance
    and the width of the messages it writes (``comm``: the channel's C, 0 without one)."""

    args: object
    comm: int


@functools.cache
def decode_args(scalar: type):
    """``DecodeArgs``: the decode's tables and buffers (``decode_func``), one struct so a physics
    kernel can take them whole (``swarp.physics.substep`` folds the decode into its first launch).

    Fields: ``indices [E, A, W]`` int64, ``kinds [A]`` int32, ``levels [A, D]`` int32, ``low``,
    ``high [A, D]``, and the channel's (``None`` without one): ``speaks [A]`` int32, ``raw`` and
    ``message [E, A, C]``."""

    @wp.struct
    class DecodeArgs:
        indices: wp.array3d(dtype=wp.int64)
        kinds: wp.array(dtype=wp.int32)
        levels: wp.array2d(dtype=wp.int32)
        low: wp.array2d(dtype=scalar)
        high: wp.array2d(dtype=scalar)
        speaks: wp.array(dtype=wp.int32)
        raw: wp.array3d(dtype=scalar)
        message: wp.array3d(dtype=scalar)

    return DecodeArgs


@functools.cache
def decode_func(scalar: type, comm: int):
    """``decode_agent(d: DecodeArgs, command [E, A, D], invalid [1] int32, env, agent)``: one
    agent's decode into its row of ``command`` (and with a channel of width ``comm`` > 0, of
    ``d.message`` [E, A, comm]).

    ``d.kinds`` (``KIND_CODES``): 1 reads one flat index per agent (``discrete``), 2 one index per
    column (``multidiscrete``), 0 leaves the agent's command (a continuous group's: its command is
    the action). ``d.levels[agent, d]``: levels of column ``d``, 0 for a column the agent's group
    does not have (its command is 0). An out-of-range index writes a zero command and sets
    ``invalid[0]``.

    With ``comm``, ``d.speaks[agent]`` is the agent's channel width (0: silent, its message row is
    not written): a continuous agent's message is its ``d.raw`` row clamped to [0, 1] (a
    non-finite entry 0, setting ``invalid[0]``); a discrete agent's is the one-hot of its last
    digit (the flat index's least significant, or the column after its physical ones), 0 where
    its index is out of range."""
    DecodeArgs = decode_args(scalar)
    message_vec = wp.types.vector(max(comm, 1), scalar)

    @wp.func
    def decode_agent(
        d: DecodeArgs,
        command: wp.array3d(dtype=scalar),
        invalid: wp.array(dtype=wp.int32),
        env: int,
        agent: int,
    ):
        kind = d.kinds[agent]
        speak = int(0)
        if wp.static(comm > 0):
            speak = d.speaks[agent]
            if kind == 0 and speak > 0:
                # The whole row loaded before any store: the compiler cannot tell the stores from
                # the loads apart, so loads between stores would wait for them, one round trip each.
                raw = message_vec()
                for c in range(wp.static(comm)):
                    raw[c] = d.raw[env, agent, c]
                finite = bool(True)
                for c in range(wp.static(comm)):
                    if c < speak:
                        value = raw[c]
                        finite = finite and wp.isfinite(value)
                        said = wp.where(wp.isfinite(value), wp.clamp(value, scalar(0.0), scalar(1.0)), scalar(0.0))
                        d.message[env, agent, c] = said
                if not finite:
                    invalid[0] = 1
        if kind == 0:
            return
        n_columns = d.levels.shape[1]
        total = wp.int64(1)
        used = int(0)
        for col in range(n_columns):
            if d.levels[agent, col] > 0:
                total = total * wp.int64(d.levels[agent, col])
                used = used + 1
        if speak > 0:
            total = total * wp.int64(speak)
        bad = int(0)
        rest = wp.int64(0)
        if kind == 1:
            rest = d.indices[env, agent, 0]
            if rest < wp.int64(0) or rest >= total:
                bad = 1
        else:
            for col in range(n_columns):
                n = d.levels[agent, col]
                if n > 0:
                    given = d.indices[env, agent, col]
                    if given < wp.int64(0) or given >= wp.int64(n):
                        bad = 1
            if speak > 0:
                rest = d.indices[env, agent, used]
                if rest < wp.int64(0) or rest >= wp.int64(speak):
                    bad = 1
        if bad != 0:
            invalid[0] = 1
        stride = total
        for col in range(n_columns):
            n = d.levels[agent, col]
            value = scalar(0.0)
            if n > 0:
                index = int(0)
                # Not a conditional expression: Warp evaluates both sides, and a flat index has one column.
                if kind == 1:  # noqa: SIM108
                    stride = stride / wp.int64(n)
                    index = int(rest / stride)
                    rest = rest - wp.int64(index) * stride
                else:
                    index = int(d.indices[env, agent, col])
                level = index
                if n % 2 == 1:
                    if index == 0:
                        level = n / 2
                    elif index <= n / 2:
                        level = index - 1
                lo = d.low[agent, col]
                value = lo + (scalar(level) / scalar(n - 1)) * (d.high[agent, col] - lo)
                if bad != 0:
                    value = scalar(0.0)
            command[env, agent, col] = value
        if wp.static(comm > 0):
            # What is left of a flat index, or the message's own column: the message's choice.
            for c in range(speak):
                hot = scalar(0.0)
                if bad == 0 and wp.int64(c) == rest:
                    hot = scalar(1.0)
                d.message[env, agent, c] = hot

    return decode_agent


@functools.cache
def decode_kernel(scalar: type, comm: int = 0):
    """``decode(d: DecodeArgs, command [E, A, D], invalid [1] int32)``: ``decode_func``'s decode of
    every agent, one thread each (launch ``dim=(E, A)``): where the physics cannot fold it into its
    first launch."""
    DecodeArgs = decode_args(scalar)
    decode_agent = decode_func(scalar, comm)

    @wp.kernel(enable_backward=False, module="unique", grid_stride=False)
    def decode(d: DecodeArgs, command: wp.array3d(dtype=scalar), invalid: wp.array(dtype=wp.int32)):
        env, agent = wp.tid()
        decode_agent(d, command, invalid, env, agent)

    return decode


__all__ = ["KIND_CODES", "Decode", "decode_args", "decode_func", "decode_kernel"]
