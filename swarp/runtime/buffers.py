"""``EnvBuffers``: the environment's device buffers, as the one handle kernels get.

A fused scenario's launches, the lidar's and the runtime's own write observation rows, rewards,
termination flags and saved final observations, and read the episode counters and the plan. They
reach all of it through this object (``Scenario.bind`` gives it to a scenario as ``self.buffers``),
never through the environment's attributes, so what a kernel may touch is written down here.
"""

from __future__ import annotations

import warp as wp

from swarp.core import env_arrays
from swarp.core.rng import ResetStreams
from swarp.runtime import episode
from swarp.runtime.env_list import EnvList, EnvListArgs
from swarp.runtime.plan import ExecutionPlan


class EnvBuffers:
    """Persistent device buffers of a batch of ``n_envs`` envs of ``n_agents`` agents.

    Args:
        plan: The environment's ``ExecutionPlan``.
        n_envs, n_agents: E, A.
        scalar: ``wp.float32`` or ``wp.float64``.
        device: Warp device.
        max_steps: Episode length limit [steps], ``None``: none.
        auto_reset: Whether finished envs restart inside the step.
        env_offset: Global index of env 0 (keys the reset draws, ``swarp.core.rng``).
        non_finite: ``wp.array(int32)`` [E], the world's health flags (``World.non_finite_flags``).

    Attributes:
        plan, n_envs, n_agents, scalar, device: As given.
        reward: ``wp.array2d(scalar)`` [E, A], the step's rewards.
        terminated, truncated, done: ``wp.array(bool)`` [E]: the step's flags (``done``: either).
        reset_mask: ``wp.array(bool)`` [E], the envs an explicit reset restarts.
        step_count, episode: ``wp.array(int32)`` [E]: steps into the episode, episodes begun.
        seed: ``wp.array(int32)`` [1], the reset RNG's seed.
        non_finite: As given: a kernel that stores a non-finite observation or reward of env ``env``
            sets ``non_finite[env] = 1`` (``swarp.runtime.health``).
        episode_args: The ``episode.episode_struct`` of the arrays above with ``max_steps`` and
            ``auto_reset`` (and ``non_finite``, for the rewards such a kernel stores): a per-env kernel
            that ends the step calls ``episode.funcs(scalar).end_step`` with it.
        reset_streams: ``ResetStreams`` keying a reset kernel's draws (``rng.episode_key``).
        done_list: The ``EnvList`` of the envs an auto-reset restarts (used where
            ``plan.list_resets``; see ``list_envs``).
        no_mask: A one-element ``wp.array(bool)`` to pass where a kernel takes a mask it will not read.
        obs, final_obs, final_obs_saved, obs_dim, scenario_obs_dim: see ``allocate_rows``.
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        n_envs: int,
        n_agents: int,
        scalar: type,
        device: str,
        max_steps: int | None,
        auto_reset: bool,
        env_offset: int,
        non_finite: wp.array,
    ):
        self.plan = plan
        self.n_envs, self.n_agents = n_envs, n_agents
        self.scalar, self.device = scalar, device
        E = n_envs
        self.seed = wp.zeros(1, dtype=wp.int32, device=device)
        # Named for swarp.core.env_arrays: a CPU shard's buffers view its environment's.
        self.episode = env_arrays.zeros("env.episode", (E,), wp.int32, device)
        self.step_count = env_arrays.zeros("env.step_count", (E,), wp.int32, device)
        self.terminated = env_arrays.zeros("env.terminated", (E,), wp.bool, device)
        self.truncated = env_arrays.zeros("env.truncated", (E,), wp.bool, device)
        self.done = env_arrays.zeros("env.done", (E,), wp.bool, device)
        self.reset_mask = env_arrays.zeros("env.reset_mask", (E,), wp.bool, device)
        self.reward = env_arrays.zeros("env.reward", (E, n_agents), scalar, device)
        self.no_mask = wp.zeros(1, dtype=wp.bool, device=device)
        self.done_list = EnvList(E, device)
        self.env_offset = env_offset
        self.non_finite = non_finite
        self.reset_streams = self.streams_over(self.episode)
        ep = episode.episode_struct(scalar)()
        ep.max_steps = max_steps or 0
        ep.auto_reset = int(auto_reset)
        ep.step_count, ep.episode = self.step_count, self.episode
        ep.terminated, ep.truncated, ep.done = self.terminated, self.truncated, self.done
        ep.non_finite = non_finite
        self.episode_args = ep
        self.obs = self.final_obs = self.final_obs_saved = None
        self.obs_dim = self.scenario_obs_dim = 0

    def allocate_rows(self, obs_dim: int, scenario_obs_dim: int) -> None:
        """Allocate the observation rows, once the scenario is bound.

        Sets ``obs`` and ``final_obs`` (``wp.array3d(scalar)`` [E, A, obs_dim]: the scenario's
        ``scenario_obs_dim`` columns first, then a lidar's), ``final_obs_saved`` (the columns of
        ``final_obs`` a scenario's masked ``OBSERVE_ONLY`` observation saves before it overwrites a
        row: all, or a view of its own where a lidar's masked scan keeps its columns itself) and the
        two widths.
        """
        shape = (self.n_envs, self.n_agents, obs_dim)
        self.obs = env_arrays.zeros("env.obs", shape, self.scalar, self.device)
        self.final_obs = env_arrays.zeros("env.final_obs", shape, self.scalar, self.device)
        self.final_obs_saved = self.final_obs
        if scenario_obs_dim < obs_dim:
            self.final_obs_saved = self.final_obs[:, :, 0:scenario_obs_dim]
        self.obs_dim, self.scenario_obs_dim = obs_dim, scenario_obs_dim

    def streams_over(self, episode_counters: wp.array) -> ResetStreams:
        """The ``ResetStreams`` of this batch's seed and ``env_offset`` over ``episode_counters``
        [E] int32 (the episodes a reset kernel draws: the current ones, or those prepared ahead)."""
        streams = ResetStreams()
        streams.seed = self.seed
        streams.episode = episode_counters
        streams.env_offset = self.env_offset
        return streams

    def obs_rows(self) -> wp.array:
        """``obs`` as [E * A, obs_dim] rows (a view), for the tiled row stores."""
        return self.obs.reshape((self.n_envs * self.n_agents, self.obs_dim))

    def list_envs(self, env_mask: wp.array | None, threads_per_env: int) -> tuple[EnvListArgs, int] | None:
        """How a kernel with a listed twin (``swarp.runtime.env_list``) runs over the envs of
        ``env_mask`` [E] bool: ``(EnvListArgs, rows)`` for the twin, launched ``dim=(rows,
        threads_per_env)``, while the auto-reset's list holds that mask (``plan.list_resets``);
        ``None``: launch the masked kernel."""
        return self.done_list.select(env_mask, threads_per_env)
