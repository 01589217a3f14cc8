"""``swarp.runtime.workers.GraphWorker``: a thread that replays Warp CPU graphs in native code."""

import time
from types import SimpleNamespace

import numpy as np
import pytest
import warp as wp

from swarp.runtime.workers import GraphWorker, available, native_replay


@wp.kernel
def _bump(x: wp.array(dtype=wp.int32)):
    i = wp.tid()
    x[i] = x[i] + i + 1


def _graph(x: wp.array):
    wp.launch(_bump, dim=x.shape[0], inputs=[x], device="cpu")  # load the module outside the capture
    with wp.ScopedCapture(device="cpu") as capture:
        wp.launch(_bump, dim=x.shape[0], inputs=[x], device="cpu")
    return capture.graph


def test_this_warp_replays_cpu_graphs_natively():
    assert available()
    # The shards' fast hand-off needs these Warp internals; if an upgrade drops them, this fails
    # (the shards then fall back to a thread pool, silently slower).
    target = native_replay(_graph(wp.zeros(4, dtype=wp.int32, device="cpu")))
    assert target is not None and all(isinstance(v, int) and v for v in target)


def test_a_worker_replays_each_submitted_graph_once_and_its_writes_are_visible_after_wait():
    x = wp.zeros(64, dtype=wp.int32, device="cpu")
    graph = _graph(x)
    base = x.numpy().copy()  # one launch before the capture
    worker = GraphWorker()
    try:
        for n in range(1, 201):
            worker.submit(graph)
            worker.wait()
            assert (x.numpy() == base + n * np.arange(1, 65)).all()
    finally:
        worker.close()


def test_a_worker_that_went_to_sleep_still_runs_the_next_submit():
    x = wp.zeros(8, dtype=wp.int32, device="cpu")
    graph = _graph(x)
    before = x.numpy().copy()
    worker = GraphWorker(spin_s=1e-5)
    try:
        for _ in range(5):
            time.sleep(0.02)  # far past its spin: it sleeps on its event
            worker.submit(graph)
            worker.wait()
        assert worker.sleeps >= 1
        assert (x.numpy() - before == 5 * np.arange(1, 9)).all()
    finally:
        worker.close()


def test_work_the_worker_has_not_started_is_taken_back_and_replayed_by_the_caller():
    x = wp.zeros(8, dtype=wp.int32, device="cpu")
    graph = _graph(x)
    before = x.numpy().copy()
    worker = GraphWorker(spin_s=1e-5)
    try:
        worker.submit(graph)
        worker.wait()
        deadline = time.monotonic() + 5
        while worker.sleeps < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert worker.sleeps >= 1  # asleep on its event
        shared, taken = worker._shared, worker.taken_back  # the first submit may be taken back too
        wake, shared.wake = shared.wake, SimpleNamespace(set=lambda: None)  # this submit does not wake it
        try:
            worker.submit(graph)
            worker.wait()
        finally:
            shared.wake = wake
        assert worker.taken_back == taken + 1
        worker.submit(graph)  # woken again the normal way
        worker.wait()
        assert (x.numpy() - before == 3 * np.arange(1, 9)).all()
    finally:
        worker.close()


def test_misuse_is_an_error_and_close_is_idempotent():
    x = wp.zeros(4, dtype=wp.int32, device="cpu")
    graph = _graph(x)
    worker = GraphWorker()
    with pytest.raises(ValueError, match="no native replay"):
        worker.submit(object())
    worker.submit(graph)
    with pytest.raises(RuntimeError, match="twice without wait"):
        worker.submit(graph)
    worker.wait()
    worker.wait()  # nothing pending: returns
    worker.close()
    worker.close()
    assert not worker._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(graph)


def test_a_worker_closed_before_any_submit_stops():
    worker = GraphWorker()
    worker.close()
    assert not worker._thread.is_alive()


def test_a_dropped_worker_stops_its_thread():
    import gc

    worker = GraphWorker()
    worker.submit(_graph(wp.zeros(4, dtype=wp.int32, device="cpu")))
    worker.wait()
    thread = worker._thread
    del worker
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()
