"""What a lidar measures (``LidarConfig``) and what a scan returns (``LidarScan``)."""

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch


@dataclass(frozen=True)
class LidarConfig:
    """What a lidar measures.

    Attributes:
        n_rays: Rays per agent (>= 1), evenly spaced over the full circle from the heading.
        max_range: Reading [m] when nothing is hit within it (> 0, finite).
        see_agents: Whether rays hit the other agents of the env.
        see_walls: Whether rays hit the world bounds (ignored in an unbounded world).
    """

    n_rays: int
    max_range: float = 1.0
    see_agents: bool = True
    see_walls: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.n_rays, bool) or not isinstance(self.n_rays, int) or self.n_rays < 1:
            raise ValueError(f"lidar n_rays must be an int >= 1, got {self.n_rays!r}")
        r = self.max_range
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0:
            raise ValueError(f"lidar max_range must be a finite number > 0 [m], got {r!r}")
        for name in ("see_agents", "see_walls"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"lidar {name} must be a bool, got {getattr(self, name)!r}")


class LidarScan(NamedTuple):
    """Readings of every ray of every agent.

    Fields:
        distance: [E, A, n_rays] distance [m] to the first hit, ``max_range`` where none.
        kind: [E, A, n_rays] int32 ``HIT_*`` code of what was hit.
        index: [E, A, n_rays] int32 agent index (``HIT_AGENT``), obstacle slot (``HIT_OBSTACLE``)
            or body index (``HIT_BODY``) hit; -1 otherwise.
    """

    distance: torch.Tensor
    kind: torch.Tensor
    index: torch.Tensor
