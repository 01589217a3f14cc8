"""Shared fixtures of the interop tests: a seeded torch generator, and the ``gpu`` marker's skip."""

import pytest
import torch

SEED = 20240611


@pytest.fixture
def generator() -> torch.Generator:
    """A fresh, seeded torch generator: every test sees the same random states on every run."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture(autouse=True)
def _skip_gpu_tests_without_cuda(request):
    if request.node.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: torch.cuda.is_available() is False on this machine")
