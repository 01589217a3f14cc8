"""Shared fixtures of the scenario tests: a seeded torch generator per test."""

import pytest
import torch

SEED = 20240611


@pytest.fixture
def generator() -> torch.Generator:
    """A fresh, seeded torch generator: every test sees the same random actions on every run."""
    return torch.Generator().manual_seed(SEED)
