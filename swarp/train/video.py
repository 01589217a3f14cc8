"""A video of a trained policy: a mosaic of a few envs over one episode (needs the ``viz`` extra)."""

from __future__ import annotations

from pathlib import Path

from swarp.env.make import make
from swarp.render.video import check_video_path
from swarp.train.action_spaces import step_actions
from swarp.train.evaluate import check_policy_fits
from swarp.train.tasks import policy_task


def write_video(policy, path, scenario: str | None = None, *, device=None, seed: int = 0, n_envs: int = 4,
                steps: int | None = None, fps: float = 15.0, tile_size: int = 192,
                options: dict | None = None) -> Path:  # fmt: skip
    """Write ``n_envs`` envs (a mosaic) under the greedy ``policy`` for ``steps`` steps (default: one
    episode) to ``path`` (``.gif`` or ``.mp4``).

    Args:
        policy: A ``swarp.train.Policy`` or ``GroupedPolicy``, or a checkpoint path.
        scenario: The scenario (default: the checkpoint's; required with a policy object).
        device: Where to simulate (default: CPU; rendering reads the state back anyway).
        seed: Reset seed of the episodes shown.
        options: Scenario options over the task's (as ``swarp.train.evaluate``'s).

    Returns:
        The path written.
    """
    from swarp.render import save_video
    from swarp.train.checkpoint import resolve_policy

    check_video_path(path)
    device = device or "cpu"
    policy, scenario, task, origin = resolve_policy(policy, scenario, device, "write_video")
    actions = policy.env_kwargs() if hasattr(policy, "env_kwargs") else {}  # a Policy's action space
    task = policy_task(task, scenario, actions, options)
    env = make(scenario, n_envs=n_envs, device=device, seed=seed, **task.env_kwargs(), **actions)
    check_policy_fits(policy, env, scenario, task, origin)
    env.reset(seed=seed)
    policy = policy.to(env.torch_device)
    steps = steps if steps is not None else (env.max_steps or 200)
    cols = max(1, int(n_envs**0.5))

    def act(_env, obs):
        return step_actions(env, policy(obs))  # int64 indices go to step as they are; by group with groups

    return save_video(env, path, steps, act, fps=fps,
                      env_indices=list(range(n_envs)), cols=cols, tile_size=tile_size)  # fmt: skip
