"""The single launches an environment's step and reset sequences are made of.

Each method of ``Stages`` launches one stage over the core's buffers (or nothing where the
environment has no use for it: no lidar, a scenario that checks its own outputs...). The sequences
that order them are ``swarp.env.launches``; the end of a step is ``swarp.env.step_end``'s.
"""

from __future__ import annotations

import warp as wp

from swarp.env.action_input import ActionInput
from swarp.env.core import EnvCore
from swarp.env.parameters import AgentParameters
from swarp.runtime import episode, health
from swarp.runtime.launch import Launcher


class Stages:
    """The launches of one environment's stages (see the module docstring).

    Args:
        core: The environment's core.
        parameters: Its agent parameters (``launch_randomize``).
        action_input: Its action input (its ``decode``, which the step hands the physics).
    """

    def __init__(self, core: EnvCore, parameters: AgentParameters, action_input: ActionInput):
        self.core = core
        self.parameters = parameters
        self.action_input = action_input

    def randomize(self, launcher: Launcher, env_mask: wp.array) -> None:
        """Re-draw the parameters of the envs in ``env_mask`` (no-op without ``randomize_params``)."""
        self.parameters.launch_randomize(launcher, env_mask)

    def lidar(self, launcher: Launcher, env_mask: wp.array | None = None, final_out: wp.array | None = None) -> None:
        """The lidar scan into the observation columns after the scenario's (no-op without lidar),
        copying the readings it replaces to ``final_out`` if given."""
        core = self.core
        if core.lidar is not None:
            core.lidar.launch(launcher, core.buffers.obs, core.scenario_obs_dim, env_mask, final_out)

    def begin_episodes(self, launcher: Launcher) -> None:
        """Advance the episode counter and zero the step counter of every env in ``reset_mask``."""
        core, b = self.core, self.core.buffers
        launcher.launch(
            episode.begin_episodes,
            dim=core.n_envs,
            inputs=[b.reset_mask],
            outputs=[b.step_count, b.episode],
            device=core.device,
            block_dim=core.plan.env_block,
        )

    def refresh_neighbors(self, launcher: Launcher, env_mask: wp.array) -> None:
        """Neighbor lists of the envs in ``env_mask`` after their reset: rebuilt here, or only binned
        when the scenario's observe kernel builds them."""
        core = self.core
        if core.scenario.builds_neighbors:
            core.world.prepare_neighbors(launcher)
        else:
            core.world.build_neighbors(env_mask, launcher)

    def save_final_obs(self, launcher: Launcher) -> None:
        """With auto-reset, copy the observation rows of the envs that finished this step
        (``done``) to ``final_obs``, before their reset overwrites them."""
        core, b = self.core, self.core.buffers
        if not core.auto_reset:
            return
        per_thread, threads = core.plan.split(core.n_agents)
        launcher.launch(
            episode.save_final_obs_kernel(core.stepper.scalar),
            dim=(core.n_envs, threads),
            inputs=[b.done, b.obs, per_thread],
            outputs=[b.final_obs],
            device=core.device,
        )

    def advance(self, launcher: Launcher) -> None:
        """Count the step, flag time limits, and with auto-reset start the next episode of finished
        envs (one thread per env)."""
        core = self.core
        launcher.launch(
            episode.funcs(core.stepper.scalar).advance_episodes,
            dim=core.n_envs,
            inputs=[core.buffers.episode_args],
            device=core.device,
            block_dim=core.plan.env_block,
        )

    def check_outputs(self, launcher: Launcher, env_mask: wp.array | None) -> None:
        """Raise the health flag of envs with non-finite outputs by reading them back: after a
        step (``env_mask=None``: every env's rows and rewards, and the final rows of finished envs),
        or a reset of the envs of ``env_mask`` (their rows). A no-op for a scenario that checks its
        own (``FusedScenario.checks_finite``)."""
        core, b = self.core, self.core.buffers
        if core.scenario.checks_finite:
            return
        step = env_mask is None
        launcher.launch(
            health.check_outputs_kernel(core.stepper.scalar),
            dim=(core.n_envs, core.n_agents),
            inputs=[
                b.no_mask if step else env_mask,
                int(not step),
                b.obs,
                b.reward,
                int(step),
                b.final_obs,
                b.done,
                int(step and core.auto_reset),
            ],
            outputs=[b.non_finite],
            device=core.device,
        )
