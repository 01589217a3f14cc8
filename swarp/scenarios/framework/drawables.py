"""Drawable records: what a scenario asks the renderer to draw besides agents, obstacles and bounds.

A scenario's ``drawables(env_index)`` hook returns a list of these. Geometry is in world units [m]
as device tensors with a leading dim N, the envs being drawn (``tensor[env_index]``); line and ring
widths are in pixels so they look the same at every zoom. The renderer gathers every tensor of every
record into its one device-to-host copy per frame, so a hook must only index, never copy to the host.

This module is a leaf (torch only): scenarios import it without importing the renderer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: An RGB color, each channel in [0, 255].
Color = tuple[int, int, int]
#: Color sentinel: item ``m`` of a record takes agent ``m``'s palette color.
AGENT_COLOR = "agent"


@dataclass(frozen=True)
class Circles:
    """Discs (``width_px == 0``) or rings (``width_px > 0``).

    Attributes:
        center: [N, M, 2] centres [m], world frame.
        radius: Radius [m]: a number, or an [N, M] tensor.
        color: One RGB color for every item, or ``AGENT_COLOR`` (item m in agent m's color).
        width_px: Ring width [px]; 0 draws filled discs.
        mask: Optional [N, M] bool tensor: only items where it is set are drawn.
    """

    center: torch.Tensor
    radius: float | torch.Tensor
    color: Color | str = AGENT_COLOR
    width_px: float = 0.0
    mask: torch.Tensor | None = None


@dataclass(frozen=True)
class Segments:
    """Straight lines with round caps (capsules of ``width_px`` diameter).

    Attributes:
        start: [N, M, 2] first end points [m].
        end: [N, M, 2] second end points [m].
        color: One RGB color, or ``AGENT_COLOR``.
        width_px: Line width [px].
        mask: Optional [N, M] bool tensor: only items where it is set are drawn.
    """

    start: torch.Tensor
    end: torch.Tensor
    color: Color | str = AGENT_COLOR
    width_px: float = 1.5
    mask: torch.Tensor | None = None


@dataclass(frozen=True)
class Crosses:
    """Axis-aligned plus signs (``diagonal=False``) or x marks (``diagonal=True``).

    Attributes:
        center: [N, M, 2] centres [m].
        size: Half arm length [m]: a number, or an [N, M] tensor.
        color: One RGB color, or ``AGENT_COLOR``.
        width_px: Line width [px].
        diagonal: Draw an x instead of a +.
        mask: Optional [N, M] bool tensor: only items where it is set are drawn.
    """

    center: torch.Tensor
    size: float | torch.Tensor
    color: Color | str = AGENT_COLOR
    width_px: float = 1.5
    diagonal: bool = False
    mask: torch.Tensor | None = None


@dataclass(frozen=True)
class Boxes:
    """Oriented rectangles, filled (``width_px == 0``) or outlined.

    Attributes:
        center: [N, M, 2] centres [m].
        half_extents: [N, M, 2] tensor or an ``(hx, hy)`` pair: half sizes [m] along the box axes.
        angle: Orientation [rad] (counter-clockwise): a number or an [N, M] tensor.
        color: One RGB color, or ``AGENT_COLOR``.
        width_px: Outline width [px]; 0 fills.
        mask: Optional [N, M] bool tensor: only items where it is set are drawn.
    """

    center: torch.Tensor
    half_extents: tuple[float, float] | torch.Tensor
    angle: float | torch.Tensor = 0.0
    color: Color | str = AGENT_COLOR
    width_px: float = 0.0
    mask: torch.Tensor | None = None


#: Every record type the renderer understands.
Drawable = Circles | Segments | Crosses | Boxes
DRAWABLE_TYPES = (Circles, Segments, Crosses, Boxes)

__all__ = ["AGENT_COLOR", "Boxes", "Circles", "Color", "Crosses", "DRAWABLE_TYPES", "Drawable", "Segments"]
