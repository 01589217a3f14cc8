"""The differentiable step's seed import path; the code lives in ``swarp.physics.autograd``."""

from swarp.physics.autograd import GradRing, RolloutGraph, TorchState, invalid_actions, rollout, step_fields, warp_step

__all__ = ["GradRing", "RolloutGraph", "TorchState", "invalid_actions", "rollout", "step_fields", "warp_step"]
