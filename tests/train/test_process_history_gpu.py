"""A captured training run works whatever the process did before it (issue 55, item 14).

``pytest -m gpu tests`` failed in ``test_a_captured_training_run_learns_navigation`` with torch's
"operation not permitted when stream is capturing (function reset)" and Warp CUDA error 901,
though the test passes alone. ``reset`` is torch's ``CUDAGraph::reset``, the destructor of a
``torch.cuda.CUDAGraph``: Python's garbage collector ran during the trainer's capture of its
rollout and freed a graph of earlier work (a captured trainer of an earlier test, which its stages
keep in a reference cycle), whose ``cudaGraphExecDestroy`` is forbidden during a global-mode
capture and invalidates it; Warp's next launch into the capture then failed with error 901. Since
torch 2.5 ``torch.cuda.graph`` no longer collects before capturing, so the garbage of a long
process lives on until a collection that may fall inside a capture.

Here the process history is played first: an earlier captured trainer, a failed capture inside
``pytest.raises`` that leaves torch on its capture stream, Warp settings and a failed Warp capture,
and a collector tuned to collect at every chance, with a ``gc`` callback that does what the
collector did in the failing session: at a collection during a capture it frees the earlier
trainer's graphs. Then a small captured training run must start, capture and finish.
"""

from __future__ import annotations

import gc

import pytest
import torch
import warp as wp

import swarp
from swarp.runtime import sequence
from swarp.train import Trainer, get_task, make_config, train
from swarp.train.graphs import Graphed

pytestmark = pytest.mark.gpu

N_ENVS, ROLLOUT = 256, 16


def captured_trainer(seed: int = 0) -> Trainer:
    """A trainer whose collect stage is captured (what ``test_a_captured_rollout...`` leaves behind)."""
    env = swarp.make("navigation", n_envs=N_ENVS, device="cuda", seed=seed, auto_reset=True, max_steps=10,
                     n_agents=4, substeps=1)  # fmt: skip
    config = make_config({"n_envs": N_ENVS, "rollout_steps": ROLLOUT, "minibatches": 4, "hidden": 64,
                          "run_dir": "", "progress": False, "capture": True})  # fmt: skip
    trainer = Trainer.build([env], get_task("navigation"), config, [seed])
    stage = trainer.stages["collect"]
    stage()  # warm-up
    stage()  # captured
    assert stage.graph is not None
    return trainer


class FreesGraphsMidCapture:
    """A ``gc.callbacks`` entry: at the first collection that starts while torch's current stream
    is capturing, it frees ``trainer``'s CUDA graphs (as the collector does when it clears an
    unreachable trainer's reference cycle), then does nothing more."""

    def __init__(self, trainer: Trainer):
        self.trainer: Trainer | None = trainer
        self.fired_during_capture = False

    def __call__(self, phase: str, info: dict) -> None:
        if phase != "start" or self.trainer is None:
            return
        try:
            capturing = torch.cuda.is_current_stream_capturing()
        except RuntimeError:  # the legacy stream, queried while a blocking stream captures
            capturing = True
        if not capturing:
            return
        trainer, self.trainer = self.trainer, None
        self.fired_during_capture = True
        trainer.stages.clear()  # the Graphed stages go, and their graphs' destructors run now


def fail_a_torch_capture() -> None:
    """A host read inside ``torch.cuda.graph``, under ``pytest.raises``: torch leaves its capture's
    side stream current (and its default generator mid-capture) after a capture fails."""
    x = torch.ones(4, device="cuda")
    torch.cuda.synchronize()
    with pytest.raises(RuntimeError), torch.cuda.graph(torch.cuda.CUDAGraph()):
        (x * 2).sum().item()


def small_run():
    return train("navigation", device="cuda", n_envs=N_ENVS, total_steps=N_ENVS * ROLLOUT * 3, rollout_steps=ROLLOUT,
                 minibatches=4, hidden=64, eval_every=0, eval_envs=N_ENVS, run_dir="", progress=False)  # fmt: skip


@pytest.fixture
def restored_process():
    """Put back what the history changes: torch's stream, the collector, Warp's settings."""
    stream = torch.cuda.current_stream()
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    release = wp.get_mempool_release_threshold("cuda:0")
    module_load = wp.config.enable_graph_capture_module_load_by_default
    yield
    gc.callbacks[:] = callbacks
    gc.set_threshold(*thresholds)
    torch.cuda.set_stream(stream)
    wp.set_mempool_release_threshold("cuda:0", release)
    wp.config.enable_graph_capture_module_load_by_default = module_load
    sequence.end_failed_torch_capture("cuda", None)  # the default generator, if the history left it mid-capture
    gc.collect()  # the history's garbage goes now, outside any capture


def test_a_captured_training_run_starts_after_the_history_of_a_gpu_session(restored_process):
    # 1. An earlier captured trainer, kept alive until the callback frees its graphs.
    callback = FreesGraphsMidCapture(captured_trainer())
    # 2. Warp settings, and a Warp capture that failed inside pytest.raises.
    wp.set_mempool_release_threshold("cuda:0", 0)
    wp.config.enable_graph_capture_module_load_by_default = False
    with pytest.raises(ValueError), wp.ScopedCapture(device="cuda:0"):
        raise ValueError("a failure mid-capture")
    # 3. A torch capture that failed inside pytest.raises: torch stays on its capture stream.
    fail_a_torch_capture()
    # 4. A collector that collects at every chance, and frees the earlier graphs mid-capture.
    gc.set_threshold(1)
    gc.callbacks.append(callback)

    result = small_run()

    assert not callback.fired_during_capture  # no collection ran during a capture
    assert result.capture_seconds > 0
    assert result.frames == N_ENVS * ROLLOUT * 3
    row = result.final
    assert "eval/success" in row and 0.0 <= row["eval/success"] <= 1.0
    assert all(v == v for v in row.values() if isinstance(v, float))  # no NaN


def test_a_training_run_after_a_user_stream_was_left_current(restored_process):
    torch.cuda.set_stream(torch.cuda.Stream())
    result = small_run()
    assert result.capture_seconds > 0 and result.frames == N_ENVS * ROLLOUT * 3


# --- Graphed's capture on its own -------------------------------------------------------------------


def test_the_collector_is_paused_during_the_capture_only():
    seen, x = [], torch.zeros(4, device="cuda")
    stage = Graphed(lambda: (seen.append(gc.isenabled()), x.add_(1.0)), torch.device("cuda"), warmup=1)
    assert gc.isenabled()
    stage()  # warm-up: eager
    stage()  # captured: the Python function runs once more, inside the capture
    stage()  # replayed: no Python
    torch.cuda.synchronize()
    assert seen == [True, False] and gc.isenabled() and stage.graph is not None
    assert torch.equal(x, torch.full((4,), 3.0, device="cuda"))  # warm-up, capture's replay, replay


def test_graphed_refuses_to_start_under_an_open_capture():
    wp.init()  # (not inside the capture below)
    x = torch.zeros(4, device="cuda")
    stage = Graphed(lambda: x.add_(1.0), torch.device("cuda"), warmup=0)
    outer, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream):
        outer.capture_begin()
        try:
            with pytest.raises(RuntimeError, match="torch's current stream .* is capturing"):
                stage()
        finally:
            outer.capture_end()
    wp_stream = wp.get_stream("cuda:0")
    wp.capture_begin(device="cuda:0", force_module_load=False)
    try:
        with pytest.raises(RuntimeError, match="Warp has 1 graph capture"):
            stage()
    finally:
        wp.capture_end(stream=wp_stream)
    assert stage.calls == 0
    stage()  # nothing was left behind: it captures now
    torch.cuda.synchronize()
    assert stage.graph is not None and torch.equal(x, torch.ones(4, device="cuda"))


def test_a_failed_capture_leaves_torch_as_it_found_it():
    x, noise = torch.ones(4, device="cuda"), torch.Generator(device="cuda").manual_seed(1)
    caller = torch.cuda.current_stream()
    stage = Graphed(lambda: (x * 2).sum().item(), torch.device("cuda"), warmup=0, generators=[noise])
    with pytest.raises(RuntimeError):
        stage()
    assert stage.graph is None
    assert torch.cuda.current_stream() == caller
    assert not torch.cuda.is_current_stream_capturing()
    assert sequence.open_capture("cuda") is None
    assert torch.rand(4, device="cuda").shape == (4,)  # the default generator is not left mid-capture
    assert torch.rand(4, device="cuda", generator=noise).shape == (4,)  # nor the stage's own
    assert gc.isenabled()
    fine = Graphed(lambda: x.mul_(2.0), torch.device("cuda"), warmup=0)
    fine()
    torch.cuda.synchronize()
    assert fine.graph is not None and torch.equal(x, torch.full((4,), 2.0, device="cuda"))
