"""The environment's launch sequences: its step and reset, and how each one runs.

``Launches.step`` and ``Launches.reset`` are the fused path's sequences, each a short list of
stages (``swarp.env.stages``; the step's end is the ``StepEnd`` strategy of ``swarp.env.step_end``),
that the plan's ``launch`` mode runs as a graph, a recorded program or eager launches
(``CompiledSequence``). ``run_step`` and ``run_reset`` pick the path: the CPU shards
(``swarp.env.shards``), the fused sequences, or the torch reference (``swarp.env.reference``).
"""

from __future__ import annotations

from swarp.env import reference
from swarp.env.core import EnvCore
from swarp.env.shards import Shards
from swarp.env.stages import Stages
from swarp.env.step_end import StepEnd
from swarp.runtime.launch import Launcher
from swarp.runtime.rows import OBSERVE_RESET
from swarp.runtime.sequence import CompiledSequence


class Launches:
    """The step and reset sequences of one environment and the paths that run them.

    Args:
        env: The ``Environment`` (the torch reference's functions take it whole).
        core: Its core.
        stages: Its single launches.
        step_end: Its step end (``make_step_end``; ``None`` on the torch reference).

    Attributes:
        shards: The ``Shards`` that run the step and reset where ``plan.cpu_shards > 1``, else
            ``None`` (``attach_shards``).
        torch_step: The torch reference's step on CUDA (captured, or launched into the caller's
            capture), else ``None``.
        torch_calls: The torch reference's torch work, compiled where ``plan.compile_torch``.
    """

    def __init__(self, env, core: EnvCore, stages: Stages, step_end: StepEnd | None):
        self.env, self.core, self.stages, self.step_end = env, core, stages, step_end
        self.shards: Shards | None = None
        plan, device, streams = core.plan, core.device, core.streams
        if core.fused:
            self.step_seq = CompiledSequence(self.step, plan.launch, device, streams)
            self.reset_seq = CompiledSequence(self.reset, plan.launch, device, streams)
        cuda = device.startswith("cuda")
        self.torch_step = reference.CapturedTorchStep(env) if cuda and not core.fused else None
        self.torch_calls = reference.TorchCalls(env)
        # The torch paths' end-of-step launches, recorded on first use (plain under "eager").
        end_mode = "eager" if plan.launch == "eager" else "graph" if plan.compile_torch else "replay"
        self.torch_end_seq = CompiledSequence(self.torch_end, end_mode, device, streams)

    # --- the sequences -----------------------------------------------------------------------

    def step(self, launcher: Launcher) -> None:
        """The launches of one fused step, in order."""
        core, stages, end = self.core, self.stages, self.step_end
        end.begin_step(launcher)
        # Discrete actions and messages are decoded by the physics' first launch (or one before it).
        decode = stages.action_input.decode
        core.world.simulate(launcher, rebuild_neighbors=not core.scenario.builds_neighbors, decode=decode)
        # The lidar columns go first, so rows are whole when finished envs save them to final_obs.
        stages.lidar(launcher)
        end.observe(launcher)
        if core.auto_reset:
            end.restart(launcher)
        stages.check_outputs(launcher, None)

    def reset(self, launcher: Launcher) -> None:
        """The launches of a fused reset of the envs in ``reset_mask``, in order."""
        core, stages = self.core, self.stages
        mask = core.buffers.reset_mask
        stages.begin_episodes(launcher)
        stages.randomize(launcher, mask)
        core.scenario.launch_reset(launcher, mask)
        stages.refresh_neighbors(launcher, mask)
        stages.lidar(launcher, mask)
        core.scenario.launch_observe(launcher, env_mask=mask, mode=OBSERVE_RESET)
        self.step_end.after_reset(launcher, mask)
        stages.check_outputs(launcher, mask)

    def torch_end(self, launcher: Launcher) -> None:
        """The torch paths' end of a step: the fused path's bookkeeping (``Stages.advance``) and the
        save of finished envs' rows (``Stages.save_final_obs``)."""
        self.stages.advance(launcher)
        self.stages.save_final_obs(launcher)

    # --- running them ------------------------------------------------------------------------

    def attach_shards(self, shards: Shards) -> None:
        """Run the step and reset on ``shards`` from now on."""
        self.shards = shards

    def run_step(self) -> None:
        """One no-grad step from the action buffer, writing the output buffers."""
        if self.shards is not None:
            self.shards.step()
        elif self.core.fused:
            self.step_seq()
        elif self.torch_step is not None:
            self.torch_step()
        else:
            reference.torch_step(self.env)

    def prepare_step(self) -> None:
        """Capture the step's graphs now where they are missing (its shards' with ``cpu_shards``);
        runs nothing. For a caller that runs the step on a worker thread (``send``)."""
        if self.shards is not None:
            self.shards.prepare("step")
        elif self.core.fused:
            self.step_seq.prepare()

    def run_reset(self) -> None:
        """A reset of the envs in ``reset_mask``."""
        if self.shards is not None:
            self.shards.reset()
        elif self.core.fused:
            self.reset_seq()
        else:
            reference.torch_reset(self.env)

    def run_torch_end(self) -> None:
        """``torch_end`` as its recorded sequence."""
        self.torch_end_seq()

    def start_again(self) -> None:
        """After a change outside the step (a restored snapshot, new agent parameters): the step
        end drops whatever it computed from the old values (``StepEnd.start_again``)."""
        if self.step_end is not None:
            self.step_end.start_again()

    def invalidate(self) -> None:
        """Drop captured graphs and recorded launches."""
        self.core.world.invalidate()
        if self.core.fused:
            self.step_seq.invalidate()
            self.reset_seq.invalidate()
        if self.torch_step is not None:
            self.torch_step.invalidate()
        self.torch_end_seq.invalidate()
        if self.shards is not None:
            self.shards.invalidate()
