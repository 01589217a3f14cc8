"""Shared fixtures of the physics tests: a seeded random generator per test."""

import numpy as np
import pytest

SEED = 20240611


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded numpy generator: every test sees the same random worlds on every run."""
    return np.random.default_rng(SEED)
