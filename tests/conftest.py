"""Fixtures shared by every test package: seeded generators and the ``gpu`` marker's skip."""

import numpy as np
import pytest
import torch

SEED = 20240611


@pytest.fixture
def generator() -> torch.Generator:
    """A fresh, seeded torch generator: every test sees the same random draws on every run."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture
def launched(monkeypatch) -> set[str]:
    """The keys of the kernels launched through ``swarp.runtime.launch.Launcher`` while the test runs
    (eager launches and the first, recording call of replayed ones)."""
    from swarp.runtime.launch import Launcher

    keys = set()
    launch = Launcher.launch

    def spy(self, kernel, *args, **kwargs):
        keys.add(kernel.key)
        return launch(self, kernel, *args, **kwargs)

    monkeypatch.setattr(Launcher, "launch", spy)
    return keys


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded numpy generator."""
    return np.random.default_rng(SEED)


@pytest.fixture(autouse=True)
def _skip_gpu_tests_without_cuda(request):
    # GPU-only tests carry the ``gpu`` marker; they run on the GPU machine and skip elsewhere.
    if request.node.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: torch.cuda.is_available() is False on this machine")
