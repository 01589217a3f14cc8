"""The ``swarp::step`` custom op's seed import path; the code lives in ``swarp.physics.compile``."""

from swarp.physics.compile import compiled_warp_step, register_stepper

__all__ = ["compiled_warp_step", "register_stepper"]
