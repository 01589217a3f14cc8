"""The VMAS physics mode: VMAS 1.5.2's ``World.step`` over a flat table of entities.

VMAS (the Vectorized Multi-Agent Simulator) steps spheres, boxes and line segments with soft
penalty contacts, friction, gravity, drag and semi-implicit Euler integration, in a fixed order of
floating-point operations. This package models that world as data: ``VmasWorldConfig`` (the world's
constants), ``EntityTable`` (one row per entity, in VMAS's ``world.entities`` order) and
``EntityState`` (per-env positions and velocities), and steps it with ``step_torch``, a torch
reference that follows docs/vmas_reference.md and reproduces VMAS's states to the float32 bit in
the cases tests/physics/test_vmas_mode.py checks (``VmasTorchStep``: the same step built once, for
a step that runs every step or inside a CUDA graph capture), or with ``VmasStep``, its Warp twin (one
thread per env, the same float32 operations in the same order). ``VmasActions`` turns the policy
agents' actions into the forces the step takes, as VMAS's action processing does. Joints are not
modelled yet.

The stages: ``actions.py`` (actions to forces), ``entities.py`` (config, table, state),
``geometry.py`` (closest points between shapes), ``contacts.py`` (the pair list and the contact
law), ``reference.py`` (the step); the step's Warp twins ``warp_geometry.py``, ``warp_contacts.py``
and ``kernels.py`` (the step kernel and ``VmasStep``).
"""

from swarp.physics.vmas_mode.actions import AgentAction, ProcessedActions, VmasActions
from swarp.physics.vmas_mode.entities import (
    BOX,
    LINE,
    SPHERE,
    EntitySpec,
    EntityState,
    EntityTable,
    VmasWorldConfig,
)
from swarp.physics.vmas_mode.kernels import VmasStep
from swarp.physics.vmas_mode.reference import VmasTorchStep, step_torch

__all__ = [
    "BOX",
    "LINE",
    "SPHERE",
    "AgentAction",
    "EntitySpec",
    "EntityState",
    "EntityTable",
    "ProcessedActions",
    "VmasActions",
    "VmasStep",
    "VmasTorchStep",
    "VmasWorldConfig",
    "step_torch",
]
