"""Videos of a rollout: ``save_video`` to mp4 or gif, ``animate`` for notebooks (HTML5 video).

Both step the environment with a policy (``action_fn``) and draw a frame before the first step and
after every step, so ``n_steps`` steps make ``n_steps + 1`` frames. They need imageio (and
imageio-ffmpeg for mp4): the ``viz`` extra, ``pip install 'swarp[viz]'``.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from swarp.render.frame import render_frame, render_mosaic

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: ``action_fn(env, obs) -> actions``: obs [E, A, obs_dim], actions [E, A, act_dim] on the env's device.
ActionFn = Callable[["Environment", torch.Tensor], torch.Tensor]
VIDEO_SUFFIXES = (".mp4", ".gif")


def random_action_fn(seed: int = 0) -> ActionFn:
    """A policy of uniform random actions in ``env.action_bounds``, from its own seeded generator.

    Returns:
        ``action_fn(env, obs) -> [E, A, act_dim]`` tensor of the env's dtype on its device
        (physical units), reproducible for a given ``seed``.
    """
    generators: dict[str, torch.Generator] = {}

    def act(env: Environment, obs: torch.Tensor) -> torch.Tensor:
        device = env.torch_device
        if str(device) not in generators:
            generators[str(device)] = torch.Generator(device=device).manual_seed(seed)
        low, high = env.action_bounds
        shape = (env.n_envs, env.n_agents, env.act_dim)
        u = torch.rand(shape, generator=generators[str(device)], device=device, dtype=env.dtype)
        return low + (high - low) * u

    return act


def rollout_frames(
    env: Environment,
    n_steps: int,
    action_fn: ActionFn | None = None,
    env_index: int = 0,
    env_indices=None,
    **render_options: Any,
) -> Iterator[np.ndarray]:
    """Step ``env`` ``n_steps`` times under ``action_fn`` and yield ``n_steps + 1`` frames.

    The env is not reset: the first frame is its current state. Frames are (H, W, 3) uint8, of
    ``env_index`` or, when ``env_indices`` is given (``"all"`` for every env), a mosaic of those envs.

    Args:
        env: The environment (stepped in place, under ``torch.no_grad()``).
        n_steps: Steps to take (>= 0).
        action_fn: ``action_fn(env, obs) -> actions`` [E, A, act_dim]; default uniform random actions
            (``random_action_fn(0)``).
        env_index: The env of a single-env video.
        env_indices: Envs of a mosaic video (sequence, 1-D int tensor or ``"all"``).
        **render_options: ``render_frame`` / ``render_mosaic`` keywords (``width``, ``cols``,
            ``tile_size``, overlays such as ``neighbors=True``).
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 0:
        raise ValueError(f"n_steps must be an int >= 0, got {n_steps!r}")
    if action_fn is None:
        action_fn = random_action_fn(0)
    elif not callable(action_fn):
        raise TypeError(f"action_fn must be callable as action_fn(env, obs) -> actions, got {action_fn!r}")
    if isinstance(env_indices, str):
        if env_indices != "all":
            raise ValueError(f"env_indices must be a sequence of ints, a 1-D tensor or 'all', got {env_indices!r}")
        env_indices = None
        mosaic = True
    else:
        mosaic = env_indices is not None

    def frame() -> np.ndarray:
        if mosaic:
            return render_mosaic(env, env_indices, **render_options)
        return render_frame(env, env_index, **render_options)

    first = frame()  # validates the options before any step
    yield first
    obs = env.obs
    with torch.no_grad():
        for _ in range(int(n_steps)):
            obs = env.step(action_fn(env, obs))[0]
            yield frame()


def _even(frame: np.ndarray) -> np.ndarray:
    """Pad to even height and width (H.264 in yuv420p needs them) by repeating the last row/column."""
    pad_h, pad_w = frame.shape[0] % 2, frame.shape[1] % 2
    if pad_h or pad_w:
        frame = np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    return frame


def _import_imageio():
    try:
        import imageio.v2 as imageio_v2
        import imageio.v3 as imageio_v3
    except ImportError:
        raise ImportError(
            "swarp.render.save_video needs imageio (and imageio-ffmpeg for mp4): pip install 'swarp[viz]'"
        ) from None
    return imageio_v2, imageio_v3


def check_video_path(path: str | Path) -> Path:
    """``path`` as a ``Path``; raises ``ValueError`` unless its suffix is one ``save_video`` writes
    (check it before the work whose result is to be written)."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ValueError(f"video path must end in one of {VIDEO_SUFFIXES}, got {str(path)!r}")
    return path


def save_video(
    env: Environment,
    path: str | os.PathLike,
    n_steps: int,
    action_fn: ActionFn | None = None,
    fps: float = 20.0,
    env_index: int = 0,
    env_indices=None,
    **render_options: Any,
) -> Path:
    """Roll ``env`` out for ``n_steps`` steps and write the ``n_steps + 1`` frames to an mp4 or gif.

    Args:
        env: The environment (stepped in place from its current state; not reset).
        path: Output file; the suffix picks the format: ``.mp4`` (H.264, via imageio-ffmpeg) or
            ``.gif`` (looping). Parent folders must exist.
        n_steps: Steps to take (>= 0).
        action_fn: ``action_fn(env, obs) -> actions`` [E, A, act_dim]; default uniform random actions
            within ``env.action_bounds``.
        fps: Frames per second of the video (> 0).
        env_index: The env shown (single-env video).
        env_indices: Draw a mosaic of these envs instead (sequence, 1-D int tensor or ``"all"``).
        **render_options: ``render_frame`` / ``render_mosaic`` keywords (``width``, ``height``,
            ``cols``, ``tile_size``, overlays such as ``neighbors=True``).

    Returns:
        The path written. mp4 frames are padded to even sizes (an H.264 requirement).
    """
    path = check_video_path(path)
    suffix = path.suffix.lower()
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise ValueError(f"fps must be a number > 0, got {fps!r}")
    imageio_v2, imageio_v3 = _import_imageio()
    frames = rollout_frames(env, n_steps, action_fn, env_index, env_indices, **render_options)
    if suffix == ".gif":
        stack = np.stack(list(frames))
        # Pillow's GIF writer takes the frame duration in milliseconds; loop=0 repeats forever.
        imageio_v3.imwrite(path, stack, extension=".gif", duration=1000.0 / fps, loop=0)
        return path
    try:
        writer = imageio_v2.get_writer(
            path, format="FFMPEG", mode="I", fps=fps, codec="libx264", pixelformat="yuv420p", macro_block_size=1
        )
    except Exception as error:  # imageio raises a bare ImportError/RuntimeError without the ffmpeg backend
        raise ImportError(f"writing mp4 needs imageio-ffmpeg: pip install 'swarp[viz]' ({error})") from error
    with writer:
        for frame in frames:
            writer.append_data(_even(frame))
    return path


def animate(
    env: Environment,
    n_steps: int,
    action_fn: ActionFn | None = None,
    fps: float = 20.0,
    env_index: int = 0,
    env_indices=None,
    **render_options: Any,
):
    """A rollout as an HTML5 ``<video>`` for notebooks (mp4, embedded as base64).

    Arguments are those of ``save_video`` (without ``path``).

    Returns:
        ``IPython.display.HTML`` (shown inline when it is a cell's last value), or the raw HTML
        string when IPython is not installed.
    """
    with tempfile.TemporaryDirectory() as folder:
        path = save_video(
            env, Path(folder) / "rollout.mp4", n_steps, action_fn, fps, env_index, env_indices, **render_options
        )
        payload = base64.b64encode(path.read_bytes()).decode("ascii")
    html = (
        "<video controls autoplay loop muted playsinline>"
        f'<source type="video/mp4" src="data:video/mp4;base64,{payload}"></video>'
    )
    try:
        from IPython.display import HTML
    except ImportError:
        return html
    return HTML(html)


__all__ = ["ActionFn", "animate", "random_action_fn", "rollout_frames", "save_video"]
