"""How kernels get launched: eagerly, or recorded once and replayed.

Every launch site of the step pipeline takes a ``Launcher`` instead of calling ``wp.launch``
directly, so one readable sequence of launches serves three execution modes:

* ``Launcher`` runs each launch eagerly (Warp marshals the arguments every call).
* ``Recorder`` runs each launch once while recording it (``wp.launch(..., record_cmd=True)``);
  the resulting ``Program`` replays the sequence with pre-packed arguments, skipping most of the
  Python marshalling. Recorded launches bake in array pointers, shapes and scalar values, so the
  owner of a program must invalidate it whenever one of those changes.
* Under ``wp.ScopedCapture`` the eager ``Launcher`` sequence becomes one CUDA graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import warp as wp

#: The package's only two environment variables, escape hatches for debugging (everything else
#: is the ``ExecutionPlan``'s): ``SWARP_LAUNCH_MODE=eager`` turns recorded-launch replay into plain
#: launches everywhere; ``SWARP_LAUNCH_DEBUG=1`` validates recorded pointers, shapes and scalars on
#: every replay.
LAUNCH_MODE_ENV = "SWARP_LAUNCH_MODE"
LAUNCH_DEBUG_ENV = "SWARP_LAUNCH_DEBUG"


def replay_enabled() -> bool:
    """Whether recorded-launch replay is on (``SWARP_LAUNCH_MODE``: ``replay``, the default, or
    ``eager``; anything else raises a ValueError naming the valid values)."""
    value = os.environ.get(LAUNCH_MODE_ENV, "replay").lower()
    if value not in ("replay", "eager"):
        raise ValueError(f"{LAUNCH_MODE_ENV} must be 'replay' or 'eager', got {value!r}")
    return value == "replay"


def launch_debug() -> bool:
    """Whether replays validate their recorded arguments (``SWARP_LAUNCH_DEBUG=1``)."""
    return os.environ.get(LAUNCH_DEBUG_ENV, "0") not in ("", "0", "false", "False")


class Launcher:
    """Eager launches: each call goes straight to Warp.

    ``launch`` takes what ``wp.launch`` takes; ``block_dim`` (threads per block, Warp's default 256
    when ``None``) matters for kernels that use tiles, whose blocks cooperate.
    """

    def launch(
        self, kernel, dim, inputs: Sequence[Any], outputs: Sequence[Any] = (), device=None, block_dim: int | None = None
    ) -> None:
        wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device, **_block(block_dim))

    def zero(self, array: wp.array) -> None:
        array.zero_()

    def copy(self, dst: wp.array, src: wp.array) -> None:
        wp.copy(dst, src)


def _fingerprint(value: Any) -> Any:
    """What a recorded argument must still look like for a replay to be valid."""
    if isinstance(value, wp.array):
        return ("array", value.ptr, value.shape, value.strides, value.dtype)
    struct = getattr(value, "_cls", None)
    if struct is not None and hasattr(struct, "vars"):
        # A Warp struct instance: its fields, recursively.
        return ("struct", struct.key, tuple((name, _fingerprint(getattr(value, name))) for name in struct.vars))
    return ("value", repr(value))


def _block(block_dim: int | None) -> dict[str, int]:
    return {} if block_dim is None else {"block_dim": int(block_dim)}


def _launch_check(kernel, dim, args: Sequence[Any], block_dim: int | None = None) -> tuple:
    """The check entry of one launch: which kernel, over what grid and blocks, with which arguments."""
    return ("launch", getattr(kernel, "key", repr(kernel)), repr(dim), block_dim, [_fingerprint(a) for a in args])


def _replay_command(cmd: wp.Launch) -> Callable[[], None]:
    """The replay of one recorded launch: on CUDA a direct call of Warp's native launch with the
    recorded arguments (its handles and packed parameters bound once here), on the current stream.

    ``wp.Launch.launch`` looks up capture state, the device's stream and the launch's fields on
    every call; bound once, a replayed launch costs less host time, which a host-bound replayed step
    feels (docs/benchmarks.md, "Other measured choices in the code"). It reaches into
    Warp's runtime (``warp._src.context.runtime``): where that is not as expected, or
    under any capture (a CUDA graph, or Warp's own command capture), it is ``cmd.launch``.
    """
    if cmd.device.is_cpu or cmd.adjoint:
        return cmd.launch
    try:
        from warp._src.context import runtime

        native = runtime.core.wp_cuda_launch_kernel
        device = cmd.device
        bound = (
            device.context,
            cmd.hooks.forward,
            cmd.bounds.size,
            cmd.max_blocks,
            cmd.block_dim,
            int(cmd.grid_stride),
            cmd.cluster_dim,
            cmd.hooks.forward_smem_bytes,
            cmd.params_addr,
        )
    except (ImportError, AttributeError):
        return cmd.launch
    if not (hasattr(runtime, "captures") and hasattr(runtime, "_apic_capture")):
        return cmd.launch

    def launch() -> None:
        if runtime.captures or runtime._apic_capture is not None:
            cmd.launch()  # a capture records more than the launch
        elif native(*bound, device.stream.cuda_stream, None):
            raise RuntimeError(f"CUDA launch of kernel {cmd.kernel.key!r} failed on {device}")

    return launch


class Program:
    """A recorded sequence of launches and memory operations, replayed in order.

    Attributes:
        n_launches: Number of kernel launches in the sequence.
    """

    def __init__(
        self,
        commands: list[Callable[[], None]],
        checks: list[tuple],
        source: Callable[[Launcher], None] | None = None,
    ):
        self._commands = commands
        self._checks = checks
        self._source = source
        self.n_launches = sum(1 for c in checks if c[0] == "launch")

    def commands(self) -> list[tuple[str, Callable[[], None]]]:
        """``(what, replay)`` of each recorded command in order: a launch's kernel key, ``"copy"``
        or ``"zero"``, and the call that replays it alone (a profile's unit)."""
        return [
            (check[1] if check[0] == "launch" else check[0], command)
            for check, command in zip(self._checks, self._commands, strict=True)
        ]

    def __call__(self) -> None:
        """Replay every recorded command (validating arguments first in debug mode)."""
        if launch_debug():
            self.validate()
        for command in self._commands:
            command()

    def validate(self) -> None:
        """Raise if any recorded array was reallocated, reshaped, or a recorded value changed.

        The launch sequence is traced again from its ``source`` (without launching anything) and
        every argument it would pass now is compared with the one recorded: a replay reuses the
        recorded pointers and values, so any difference means the replay is stale.
        """
        if self._source is None:
            raise RuntimeError("this program was recorded without a source; pass source= to Recorder.program()")
        tracer = _Tracer()
        self._source(tracer)
        if len(tracer.checks) != len(self._checks):
            raise RuntimeError(
                f"stale recorded program: it recorded {len(self._checks)} commands but its source now issues "
                f"{len(tracer.checks)}; invalidate the program that owns it"
            )
        for index, (recorded, current) in enumerate(zip(self._checks, tracer.checks, strict=True)):
            if current != recorded:
                raise RuntimeError(
                    f"stale recorded {recorded[0]} (command {index}): its arguments changed since recording "
                    f"(recorded {recorded}, now {current}); invalidate the program that owns it"
                )


class _Tracer(Launcher):
    """Collects the check entries a launch sequence would record, without running anything."""

    def __init__(self) -> None:
        self.checks: list[tuple] = []

    def launch(
        self, kernel, dim, inputs: Sequence[Any], outputs: Sequence[Any] = (), device=None, block_dim: int | None = None
    ) -> None:
        self.checks.append(_launch_check(kernel, dim, list(inputs) + list(outputs), block_dim))

    def zero(self, array: wp.array) -> None:
        self.checks.append(("zero", [_fingerprint(array)]))

    def copy(self, dst: wp.array, src: wp.array) -> None:
        self.checks.append(("copy", [_fingerprint(dst), _fingerprint(src)]))


class Recorder(Launcher):
    """Runs each launch once while recording it; ``program()`` returns the replayable sequence."""

    def __init__(self) -> None:
        self._commands: list[Callable[[], None]] = []
        self._checks: list[tuple] = []

    def launch(
        self, kernel, dim, inputs: Sequence[Any], outputs: Sequence[Any] = (), device=None, block_dim: int | None = None
    ) -> None:
        cmd = wp.launch(
            kernel,
            dim=dim,
            inputs=list(inputs),
            outputs=list(outputs),
            device=device,
            record_cmd=True,
            **_block(block_dim),
        )
        cmd.launch()
        self._commands.append(_replay_command(cmd))
        self._checks.append(_launch_check(kernel, dim, list(inputs) + list(outputs), block_dim))

    def zero(self, array: wp.array) -> None:
        array.zero_()
        self._commands.append(array.zero_)
        self._checks.append(("zero", [_fingerprint(array)]))

    def copy(self, dst: wp.array, src: wp.array) -> None:
        wp.copy(dst, src)
        self._commands.append(lambda: wp.copy(dst, src))
        self._checks.append(("copy", [_fingerprint(dst), _fingerprint(src)]))

    def program(self, source: Callable[[Launcher], None] | None = None) -> Program:
        """The recorded sequence as a ``Program``.

        Args:
            source: The function that issued the recorded launches, called as ``source(launcher)``;
                ``Program.validate`` traces it again to detect arrays or values that changed since.
        """
        return Program(self._commands, self._checks, source)


EAGER = Launcher()


class Preloader(Launcher):
    """Loads (compiling if needed) the module of every kernel a sequence would launch, launching
    nothing; run it before ``wp.ScopedCapture`` so no module load happens inside a capture."""

    def launch(
        self, kernel, dim, inputs: Sequence[Any], outputs: Sequence[Any] = (), device=None, block_dim: int | None = None
    ) -> None:
        wp.load_module(kernel.module, device=device, **_block(block_dim))

    def zero(self, array: wp.array) -> None:
        pass

    def copy(self, dst: wp.array, src: wp.array) -> None:
        pass
