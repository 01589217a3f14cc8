"""Lidar: ``n_rays`` range readings per agent, against other agents, obstacles and world walls.

Ray ``k`` of agent ``i`` starts at the agent's centre and points along ``theta_i + 2 pi k / n_rays``
(the body frame: ray 0 looks straight ahead, rays go counter-clockwise). Its reading is the
distance [m] from the centre to the first surface it meets, or ``max_range`` when nothing is closer.
A ray whose origin is inside a shape reads 0. It sees:

* the other agents of the same env (discs of their radius; never the agent itself, never an agent
  of another env),
* every obstacle slot of the env, each shape solved analytically: CIRCLE (ray-disc), BOX (slabs in
  the box frame), SEGMENT (a capsule: the slabs of its core rectangle and the discs of its caps;
  a thickness of 0 is a bare segment),
* every shape of every movable body of the env (``WorldConfig.bodies``: CIRCLE, BOX or SEGMENT at
  its pose in the body's frame, moved with the body),
* the world bounds, when the world has them (``see_walls``).

The package, by form:

* ``config``: ``LidarConfig`` (what is measured) and ``LidarScan`` (what a scan returns);
* ``geometry``: the ray-shape intersections as Warp functions;
* ``kernels``: the scan kernels (per ray with an adjoint; per env on the CPU; grouped rays on CUDA);
* ``reference``: the torch reference over all (ray, target) pairs, the specification;
* ``sensor``: ``launch_scan``, ``Lidar`` (a lidar on every agent of a world, writing into an
  observation buffer inside the step's graph) and ``lidar_warp`` (the kernel as a differentiable
  torch function).

Tests pin the three forms together.
"""

from swarp.sensors.lidar.config import LidarConfig, LidarScan
from swarp.sensors.lidar.geometry import HIT_AGENT, HIT_BODY, HIT_NONE, HIT_OBSTACLE, HIT_WALL
from swarp.sensors.lidar.reference import lidar_reference, lidar_reference_model
from swarp.sensors.lidar.sensor import Lidar, SceneBodies, launch_scan, lidar_warp, world_bodies

__all__ = [
    "HIT_AGENT",
    "HIT_BODY",
    "HIT_NONE",
    "HIT_OBSTACLE",
    "HIT_WALL",
    "Lidar",
    "LidarConfig",
    "LidarScan",
    "SceneBodies",
    "launch_scan",
    "lidar_reference",
    "lidar_reference_model",
    "lidar_warp",
    "world_bodies",
]
