"""``swarp/interop/checks.py``: the adapters' boundary checks, from metadata alone."""

import numpy as np
import pytest
import torch

from swarp.interop.checks import env_mask, real_tensor

CPU = torch.device("cpu")
SHAPE = (3, 4, 2)
FLOAT32_MAX = torch.finfo(torch.float32).max


def convert(value, shape=SHAPE):
    return real_tensor(value, "actions", shape, torch.float32, CPU, "[n_envs, n_agents, act_dim]")


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (None, TypeError, "got NoneType None"),
        ("0.5", TypeError, "got str"),
        ({"a": 1}, TypeError, "got dict"),
        (np.full(SHAPE, None), TypeError, "dtype object"),
        (np.full(SHAPE, "x"), TypeError, "dtype <U1"),
        ([[0.0, 1.0], [2.0]], TypeError, "not an array"),
        (np.zeros(SHAPE, dtype=bool), TypeError, "dtype bool"),
        (torch.zeros(SHAPE, dtype=torch.bool), TypeError, "dtype torch.bool"),
        (torch.zeros(SHAPE, dtype=torch.complex64), TypeError, "complex64"),
        (0.5, ValueError, r"= \[3, 4, 2\], got \[\]"),
        (np.zeros((4, 2)), ValueError, r"got \[4, 2\]"),  # a missing env dim
        (np.zeros((1, 4, 2)), ValueError, r"got \[1, 4, 2\]"),  # broadcastable, still wrong
        (np.zeros((3, 4, 2, 1)), ValueError, r"got \[3, 4, 2, 1\]"),  # an extra dim
        (torch.zeros(3, 2, 4), ValueError, r"got \[3, 2, 4\]"),  # transposed
    ],
)
def test_bad_values_raise_naming_the_argument(value, error, match):
    with pytest.raises(error, match=match) as caught:
        convert(value)
    assert str(caught.value).startswith("actions must")
    assert "[n_envs, n_agents, act_dim]" in str(caught.value)


def test_real_values_of_any_int_or_float_dtype_convert_exactly():
    values = np.arange(24).reshape(SHAPE)
    expected = torch.arange(24, dtype=torch.float32).reshape(SHAPE)
    for value in (values, values.astype(np.uint8), values.astype(np.float64), values.tolist(), torch.tensor(values)):
        assert torch.equal(convert(value), expected)
    assert torch.equal(convert(values[::-1].copy()), convert(values[::-1]))  # a reversed view is copied
    same = torch.zeros(SHAPE)
    assert convert(same) is same  # the simulator's dtype and device already: no copy


def test_narrowing_keeps_finite_values_finite_and_passes_inf_and_nan():
    value = np.array([1e300, -1e300, 3.5e38, np.inf, -np.inf, np.nan, 0.1, -2.5])
    got = real_tensor(value, "a", (8,), torch.float32, CPU)
    assert got[:3].tolist() == [FLOAT32_MAX, -FLOAT32_MAX, FLOAT32_MAX]
    assert got[3] == float("inf") and got[4] == -float("inf") and torch.isnan(got[5])
    # Values in range cast exactly as a plain cast does.
    assert torch.equal(got[6:], torch.tensor(value[6:]).to(torch.float32))
    # A float64 simulator takes float64 values unchanged.
    assert torch.equal(real_tensor(value[:3], "a", (3,), torch.float64, CPU), torch.tensor(value[:3]))


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (np.arange(4), TypeError, "got dtype int64: env indices"),
        (np.array([1, 0, 1, 0]), TypeError, "dtype int64"),
        (torch.ones(4, dtype=torch.uint8), TypeError, "torch.uint8"),
        (np.ones(4, dtype=np.float32), TypeError, "float32"),
        (None, TypeError, "NoneType"),
        (np.ones(3, dtype=bool), ValueError, r"got shape \[3\]"),
        (np.ones((4, 1), dtype=bool), ValueError, r"got shape \[4, 1\]"),
        (torch.ones(2, 2, dtype=torch.bool), ValueError, r"got shape \[2, 2\]"),
    ],
)
def test_env_mask_rejects_everything_but_a_bool_mask(value, error, match):
    with pytest.raises(error, match=match) as caught:
        env_mask(value, "reset_mask", 4, CPU)
    assert str(caught.value).startswith("reset_mask must be a bool mask of shape [4]")


def test_env_mask_accepts_bool_arrays_lists_tensors_and_extra_shapes():
    expected = torch.tensor([True, False, True, False])
    for value in (expected.numpy(), expected.tolist(), expected):
        assert torch.equal(env_mask(value, "m", 4, CPU), expected)
    assert torch.equal(env_mask(expected.view(4, 1), "m", 4, CPU, shapes=[(4, 1)]), expected)
