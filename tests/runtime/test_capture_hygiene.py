"""What a capture does to the process around it, on the CPU: the collector pause of
``swarp.runtime.sequence`` (every capture swarp opens or joins runs with Python's garbage collector
paused, issue 55 item 14) and ``swarp.train.Graphed``'s control flow where nothing is captured.
The captures themselves are tested on CUDA (``tests/train/test_process_history_gpu.py``)."""

import gc

import pytest
import torch

from swarp.runtime.sequence import collector_paused, open_capture, refuse_open_capture
from swarp.train.graphs import Graphed


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_paused_inside_and_back_after(collector_enabled):
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failure_inside(collector_enabled):
    with pytest.raises(ValueError, match="mid-capture"), collector_paused():
        raise ValueError("mid-capture")
    assert gc.isenabled()


def test_nested_pauses_resume_only_at_the_outermost(collector_enabled):
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause found it paused: it leaves it so
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled(collector_enabled):
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_explicit_collections_still_run_while_paused(collector_enabled):
    """The pause stops automatic collections only (what a capture needs); ``gc.collect()`` is the caller's call."""

    class Cycle:
        pass

    with collector_paused():
        cycle = Cycle()
        cycle.me = cycle
        del cycle
        assert gc.collect() >= 1


def test_nothing_is_open_on_the_cpu():
    assert open_capture("cpu") is None
    assert open_capture(torch.device("cpu")) is None
    refuse_open_capture("cpu", "a CPU stage")  # does not raise


def test_graphed_on_the_cpu_runs_eagerly_every_call_and_leaves_the_collector_alone(collector_enabled):
    calls = []
    stage = Graphed(lambda: calls.append(gc.isenabled()), torch.device("cpu"), enabled=True, warmup=1)
    assert not stage.enabled  # no CUDA graphs on the CPU
    for _ in range(3):
        stage()
    assert calls == [True, True, True] and stage.calls == 3
    assert stage.graph is None and stage.capture_seconds == 0.0
    assert gc.isenabled()


def test_graphed_keeps_its_device():
    assert Graphed(lambda: None, "cpu").device == torch.device("cpu")
