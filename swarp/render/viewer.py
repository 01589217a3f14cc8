"""An interactive pygame window over a running environment (the ``viz`` extra).

    swarp.render.Viewer(env, action_fn=policy).run()

=======================  =====================================================================
input                    action
=======================  =====================================================================
space                    pause / resume
. (period)               one step (while paused)
n / tab, p               next / previous env
g, v, i, h, o, s         toggle neighbor graph, velocity arrows, ids, headings, obstacles,
                         scenario drawables (goals)
r                        reset the env shown (``env.reset_at``)
mouse wheel, + / -       zoom (about the cursor with the wheel)
right or middle drag,    pan
arrow keys
0                        reset the camera
left drag                move an agent, or a goal (a scenario with a ``goals`` [E, A, 2]
                         tensor; hold shift to prefer goals); writes into the env shown only
q, escape                quit
=======================  =====================================================================

It runs without a display for tests and scripts: set ``SDL_VIDEODRIVER=dummy`` and call
``run(max_frames=N)``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import warp as wp

from swarp.core.types import PARAM_RADIUS
from swarp.render.frame import Overlays, Renderer, Style, check_size
from swarp.render.video import ActionFn, random_action_fn

if TYPE_CHECKING:
    from swarp.env.environment import Environment

#: Zoom factor per wheel notch or +/- key press.
ZOOM_STEP = 1.25
#: Pan per arrow-key press, as a fraction of the visible extent.
PAN_STEP = 0.1
#: A click picks an agent or goal within this many pixels of its edge.
PICK_SLACK_PX = 6.0
#: Zoom limits (1 = the whole world fits the window).
MIN_ZOOM, MAX_ZOOM = 0.2, 50.0


def _import_pygame():
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError:
        raise ImportError("the swarp viewer needs pygame: pip install 'swarp[viz]'") from None
    return pygame


def show_frame(frame: np.ndarray, title: str = "swarp") -> None:
    """Show an (H, W, 3) uint8 image in a pygame window (``env.render(mode="human")``); non-blocking."""
    pygame = _import_pygame()
    if not pygame.display.get_init():
        pygame.display.init()
    height, width = frame.shape[:2]
    screen = pygame.display.get_surface()
    if screen is None or screen.get_size() != (width, height):
        screen = pygame.display.set_mode((width, height))
    pygame.display.set_caption(title)
    screen.blit(pygame.image.frombuffer(np.ascontiguousarray(frame).tobytes(), (width, height), "RGB"), (0, 0))
    pygame.display.flip()
    pygame.event.pump()


class Viewer:
    """A window showing one env of ``env`` at a time while a policy steps the whole batch.

    Args:
        env: The environment (stepped in place by ``run`` unless paused).
        action_fn: ``action_fn(env, obs) -> actions`` [E, A, act_dim]; default uniform random actions.
        env_index: The env shown first.
        width: Window width [px].
        height: Window height [px].
        fps: Frame-rate cap [1/s]; 0 runs as fast as it can (tests).
        paused: Start paused.
        style: Colors and sizes of the frames.
        **overlays: Initial ``swarp.render.Overlays`` switches (``neighbors=True``...).

    Attributes:
        env_index, paused, zoom, center ([2] world point [m] at the window centre), overlays (dict),
        frames (frames shown), steps (steps taken), running.
    """

    def __init__(
        self,
        env: Environment,
        action_fn: ActionFn | None = None,
        env_index: int = 0,
        width: int = 720,
        height: int = 720,
        fps: float = 30.0,
        paused: bool = False,
        style: Style | None = None,
        **overlays: Any,
    ):
        width, height = check_size("width", width, low=64), check_size("height", height, low=64)
        self.pygame = _import_pygame()
        self.env = env
        self.renderer = Renderer(env, style)
        self.env_index = self.renderer.check_env_index(env_index)
        self.action_fn = action_fn if action_fn is not None else random_action_fn(0)
        if not callable(self.action_fn):
            raise TypeError(f"action_fn must be callable as action_fn(env, obs) -> actions, got {action_fn!r}")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps < 0:
            raise ValueError(f"fps must be a number >= 0, got {fps!r}")
        self.fps = float(fps)
        self.paused = bool(paused)
        self.overlays = vars(Overlays.from_kwargs(**overlays)).copy()
        self.zoom = 1.0
        self.center: np.ndarray | None = None  # set from the first frame's extent
        self._base_half: float | None = None
        self.frames = 0
        self.steps = 0
        self.running = True
        self._step_once = False
        self._drag: tuple[str, int] | None = None  # ("agent" | "goal" | "pan", index)
        self._obs = env.obs
        pygame = self.pygame
        if not pygame.display.get_init():
            pygame.display.init()
        self.screen = pygame.display.set_mode((width, height), pygame.RESIZABLE)
        self.clock = pygame.time.Clock()

    # --- the loop -------------------------------------------------------------------------------

    def run(self, max_frames: int | None = None) -> int:
        """Show frames until the window closes (or ``max_frames`` frames); returns the frames shown.

        The window is closed at the end.
        """
        if max_frames is not None and (
            isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 0
        ):
            raise ValueError(f"max_frames must be an int >= 0 or None, got {max_frames!r}")
        shown = 0
        try:
            while self.running and (max_frames is None or shown < max_frames):
                self.frame()
                shown += 1
        finally:
            self.close()
        return shown

    def frame(self) -> np.ndarray:
        """One iteration: handle input, step (unless paused), draw. Returns the (H, W, 3) uint8 frame."""
        for event in self.pygame.event.get():
            self.handle_event(event)
        if self.running and (not self.paused or self._step_once):
            with torch.no_grad():
                self._obs = self.env.step(self.action_fn(self.env, self._obs))[0]
            self.steps += 1
            self._step_once = False
        image = self._draw()
        if self.fps:
            self.clock.tick(self.fps)
        self.frames += 1
        return image

    def close(self) -> None:
        """Close the window."""
        self.running = False
        if self.pygame.display.get_init():
            self.pygame.display.quit()

    # --- camera ---------------------------------------------------------------------------------

    def extent(self) -> tuple[float, float, float, float] | None:
        """The world rectangle ``(x_min, x_max, y_min, y_max)`` [m] the camera shows (None before the
        first frame: the renderer's default)."""
        if self.center is None:
            return None
        half = self._base_half / self.zoom
        return (self.center[0] - half, self.center[0] + half, self.center[1] - half, self.center[1] + half)

    def reset_camera(self) -> None:
        """Show the whole world again."""
        self.zoom, self.center = 1.0, None

    def world_to_screen(self, xy) -> np.ndarray:
        """Window pixel coordinates [..., 2] of world points ``xy`` [..., 2] [m] (after a frame)."""
        return self.renderer.layout.world_to_pixel(xy)

    def screen_to_world(self, pixel) -> np.ndarray:
        """World points [..., 2] [m] under window pixels ``pixel`` [..., 2] (after a frame)."""
        return self.renderer.layout.pixel_to_world(pixel)

    def _zoom_about(self, factor: float, pixel=None) -> None:
        if self.center is None:
            return
        new_zoom = float(np.clip(self.zoom * factor, MIN_ZOOM, MAX_ZOOM))
        if pixel is not None:  # keep the world point under the cursor fixed
            anchor = self.screen_to_world(pixel)
            self.center = anchor + (self.center - anchor) * (self.zoom / new_zoom)
        self.zoom = new_zoom

    # --- input ----------------------------------------------------------------------------------

    def handle_event(self, event) -> None:
        """Apply one pygame event (keys, mouse, window); see the module docstring for the bindings."""
        pg = self.pygame
        if event.type == pg.QUIT:
            self.running = False
        elif event.type == pg.KEYDOWN:
            self._handle_key(event)
        elif event.type == pg.MOUSEWHEEL:
            self._zoom_about(ZOOM_STEP ** (1 if event.y > 0 else -1), pg.mouse.get_pos())
        elif event.type == pg.MOUSEBUTTONDOWN:
            if event.button == 1:
                self._drag = self._pick(event.pos)
            elif event.button in (2, 3):
                self._drag = ("pan", -1)
            elif event.button in (4, 5):  # wheel on older SDL
                self._zoom_about(ZOOM_STEP ** (1 if event.button == 4 else -1), event.pos)
        elif event.type == pg.MOUSEBUTTONUP:
            self._drag = None
        elif event.type == pg.MOUSEMOTION and self._drag is not None and self.renderer.layout is not None:
            kind, index = self._drag
            if kind == "pan":
                self.center = self.center - np.array([event.rel[0], -event.rel[1]]) / self.renderer.layout.scale
            else:
                self._move(kind, index, self.screen_to_world(event.pos))
        elif event.type == pg.VIDEORESIZE:
            self.screen = pg.display.set_mode((max(event.w, 64), max(event.h, 64)), pg.RESIZABLE)

    def _handle_key(self, event) -> None:
        pg = self.pygame
        key = event.key
        toggles = {
            pg.K_g: "neighbors",
            pg.K_v: "velocity",
            pg.K_i: "ids",
            pg.K_h: "headings",
            pg.K_o: "obstacles",
            pg.K_s: "scenario",
        }
        if key in (pg.K_q, pg.K_ESCAPE):
            self.running = False
        elif key == pg.K_SPACE:
            self.paused = not self.paused
        elif key == pg.K_PERIOD:
            self._step_once = True
        elif key in (pg.K_n, pg.K_TAB):
            self.env_index = (self.env_index + 1) % self.env.n_envs
        elif key == pg.K_p:
            self.env_index = (self.env_index - 1) % self.env.n_envs
        elif key in toggles:
            self.overlays[toggles[key]] = not self.overlays[toggles[key]]
        elif key == pg.K_r:
            mask = torch.zeros(self.env.n_envs, dtype=torch.bool, device=self.env.torch_device)
            mask[self.env_index] = True
            self._obs = self.env.reset_at(mask)
        elif key in (pg.K_PLUS, pg.K_EQUALS, pg.K_KP_PLUS):
            self._zoom_about(ZOOM_STEP)
        elif key in (pg.K_MINUS, pg.K_KP_MINUS):
            self._zoom_about(1.0 / ZOOM_STEP)
        elif key in (pg.K_0, pg.K_HOME):
            self.reset_camera()
        elif key in (pg.K_LEFT, pg.K_RIGHT, pg.K_UP, pg.K_DOWN) and self.center is not None:
            step = PAN_STEP * 2.0 * self._base_half / self.zoom
            dx = {pg.K_LEFT: -step, pg.K_RIGHT: step}.get(key, 0.0)
            dy = {pg.K_DOWN: -step, pg.K_UP: step}.get(key, 0.0)
            self.center = self.center + np.array([dx, dy])

    def _goals(self) -> torch.Tensor | None:
        goals = getattr(self.env.scenario, "goals", None)
        if isinstance(goals, torch.Tensor) and goals.shape == self.env.state.pos.shape:
            return goals
        return None

    def _pick(self, pixel) -> tuple[str, int] | None:
        """The agent or goal of the shown env under ``pixel`` (shift prefers goals), or None."""
        if self.renderer.layout is None:
            return None
        point = self.screen_to_world(pixel)
        slack = PICK_SLACK_PX / self.renderer.layout.scale
        radii = self.env.agent_params[..., PARAM_RADIUS]  # [E_p, A]: a row per env when randomized
        radius = radii[min(self.env_index, radii.shape[0] - 1)].detach().cpu().numpy()
        candidates = []
        # A click is rare: these small copies are off the step path.
        pos = self.env.state.pos[self.env_index].detach().cpu().numpy()
        distance = np.linalg.norm(pos - point, axis=1)
        agent = int(distance.argmin())
        if distance[agent] <= radius[agent] + slack:
            candidates.append((distance[agent] - radius[agent], "agent", agent))
        goals = self._goals()
        if goals is not None:
            distance = np.linalg.norm(goals[self.env_index].detach().cpu().numpy() - point, axis=1)
            goal = int(distance.argmin())
            if distance[goal] <= radius[goal] + slack:
                candidates.append((distance[goal] - radius[goal], "goal", goal))
        if not candidates:
            return None
        shift = bool(self.pygame.key.get_mods() & self.pygame.KMOD_SHIFT)
        candidates.sort(key=lambda c: (not (shift and c[1] == "goal"), c[0]))
        return candidates[0][1], candidates[0][2]

    def _move(self, kind: str, index: int, point: np.ndarray) -> None:
        """Put agent (at rest) or goal ``index`` of the shown env at ``point`` [m]; other envs untouched."""
        env, e = self.env, self.env_index
        state = env.state
        value = torch.as_tensor(point, dtype=state.pos.dtype).to(state.pos.device)
        if kind == "goal":
            self._goals()[e, index] = value
            return
        state.pos[e, index] = value
        state.vel[e, index] = 0.0
        state.speed[e, index] = 0.0
        state.ang_vel[e, index] = 0.0
        mask = torch.zeros(env.n_envs, dtype=torch.bool, device=env.torch_device)
        mask[e] = True
        env.world.build_neighbors(wp.from_torch(mask))

    # --- drawing --------------------------------------------------------------------------------

    def _draw(self) -> np.ndarray:
        width, height = self.screen.get_size()
        image = self.renderer.render(self.env_index, width=width, height=height, extent=self.extent(), **self.overlays)
        if self.center is None:  # first frame: the camera starts on the renderer's default view
            x_min, x_max, y_min, y_max = self.renderer.layout.extent
            self.center = np.array([0.5 * (x_min + x_max), 0.5 * (y_min + y_max)])
            self._base_half = 0.5 * max(x_max - x_min, y_max - y_min)
        pg = self.pygame
        self.screen.blit(pg.image.frombuffer(image.tobytes(), (width, height), "RGB"), (0, 0))
        state = "paused" if self.paused else "running"
        pg.display.set_caption(
            f"swarp {self.env.scenario.name}: env {self.env_index}/{self.env.n_envs}, step {self.steps}, "
            f"{state}, zoom {self.zoom:.2f}"
        )
        pg.display.flip()
        return image


__all__ = ["Viewer", "show_frame"]
