"""The differentiable step's seed import path; the code lives in ``swarp.physics.autograd``."""

from swarp.physics.autograd import GradRing, RolloutGraph, TorchState, rollout, warp_step

__all__ = ["GradRing", "RolloutGraph", "TorchState", "rollout", "warp_step"]
