"""Fixtures of the physics tests."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one intra-op thread for a module of small-tensor steps (the VMAS mode's reference):
    its threads gain nothing there, and where another process holds a core their parallel regions
    wait for it (measured 10-30x slower steps on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
