"""Sensors computed from the world state: lidar (``swarp.sensors.lidar``)."""

from swarp.sensors.lidar import Lidar, LidarConfig, LidarScan, lidar_reference, lidar_warp

__all__ = ["Lidar", "LidarConfig", "LidarScan", "lidar_reference", "lidar_warp"]
