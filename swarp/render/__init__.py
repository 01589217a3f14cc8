"""Rendering: headless frames and mosaics (numpy only), videos and notebook animations (imageio), and an
interactive viewer (pygame). The last two need the ``viz`` extra: ``pip install 'swarp[viz]'``.

    frame = env.render()                                   # (H, W, 3) uint8 of env 0
    grid = swarp.render.render_mosaic(env, cols=16)        # many envs in one image
    swarp.render.save_video(env, "run.mp4", n_steps=200)   # or .gif
    swarp.render.Viewer(env).run()                         # a window: pan, zoom, drag agents

Nothing here runs on the step path: a frame indexes the state on the device and copies it to the
host once.
"""

from swarp.render.frame import PALETTE, Layout, Overlays, Renderer, Style, render_frame, render_mosaic, renderer_for
from swarp.render.video import animate, random_action_fn, save_video
from swarp.scenarios.framework.drawables import AGENT_COLOR, Boxes, Circles, Crosses, Segments

__all__ = [
    "AGENT_COLOR",
    "Boxes",
    "Circles",
    "Crosses",
    "Layout",
    "Overlays",
    "PALETTE",
    "Renderer",
    "Segments",
    "Style",
    "Viewer",
    "animate",
    "random_action_fn",
    "render_frame",
    "render_mosaic",
    "renderer_for",
    "save_video",
]


def __getattr__(name: str):
    # The viewer imports pygame (the ``viz`` extra); load it only when asked for.
    if name == "Viewer":
        from swarp.render.viewer import Viewer

        return Viewer
    raise AttributeError(f"module 'swarp.render' has no attribute {name!r}")
