"""Fixtures shared by every test package: seeded generators, the host-transfer guard and the
``gpu`` marker's skip."""

import contextlib

import numpy as np
import pytest
import torch

SEED = 20240611


@pytest.fixture
def generator() -> torch.Generator:
    """A fresh, seeded torch generator: every test sees the same random draws on every run."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded numpy generator."""
    return np.random.default_rng(SEED)


@pytest.fixture(autouse=True)
def _skip_gpu_tests_without_cuda(request):
    # GPU-only tests carry the ``gpu`` marker; they run on the GPU machine and skip elsewhere.
    if request.node.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: torch.cuda.is_available() is False on this machine")


#: Tensor methods that copy device data to the host (or block on it). None may run in the hot loop.
HOST_TRANSFERS = ("item", "cpu", "numpy", "tolist", "__bool__", "__int__", "__float__", "nonzero")


class HostTransferError(AssertionError):
    pass


@contextlib.contextmanager
def _forbid_host_transfers():
    """Make every ``HOST_TRANSFERS`` method of ``torch.Tensor`` raise; restore them on exit."""
    saved = {name: torch.Tensor.__dict__.get(name) for name in HOST_TRANSFERS}

    def forbidden(name):
        def method(self, *args, **kwargs):
            raise HostTransferError(f"host transfer in the hot loop: Tensor.{name}()")

        return method

    try:
        for name in HOST_TRANSFERS:
            setattr(torch.Tensor, name, forbidden(name))
        yield
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


@pytest.fixture
def forbid_host_transfers():
    """A context manager factory: inside ``with forbid_host_transfers():`` any device-to-host
    transfer (``HOST_TRANSFERS``) raises an ``AssertionError`` whose message says "host transfer"."""
    return _forbid_host_transfers
