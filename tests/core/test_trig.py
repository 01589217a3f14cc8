"""``swarp.core.trig.cos_sin_f32``: the inline CPU cosine and sine against float64 truth."""

import math

import pytest
import torch
import warp as wp

from swarp.core.trig import cos_sin_f32


@wp.kernel
def _cos_sin(phi: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.vec2f)):
    i = wp.tid()
    out[i] = cos_sin_f32(phi[i])


def cos_sin(phi: torch.Tensor) -> torch.Tensor:
    out = wp.zeros(phi.numel(), dtype=wp.vec2f, device="cpu")
    wp.launch(_cos_sin, dim=phi.numel(), inputs=[wp.from_torch(phi)], outputs=[out], device="cpu")
    return wp.to_torch(out)


def test_cos_sin_is_within_one_ulp_of_the_exact_values():
    """Headings ([-pi, pi)), ray angles (to 4 pi) and far angles up to the inline limit (1e4 rad),
    the quadrant boundaries included: within 2^-23 (a float32 ulp at 1) of the exact values."""
    gen = torch.Generator().manual_seed(0)
    parts = [
        torch.linspace(-math.pi, math.pi, 200_001),
        torch.linspace(-4 * math.pi, 4 * math.pi, 100_001),
        (torch.rand(100_000, generator=gen) * 2 - 1) * 1.0e4,
        torch.arange(-64, 65) * (math.pi / 4),
    ]
    phi = torch.cat(parts).float()
    got = cos_sin(phi).double()
    exact = torch.stack([torch.cos(phi.double()), torch.sin(phi.double())], dim=1)
    assert (got - exact).abs().max().item() <= 2.0**-23
    assert got.abs().max().item() <= 1.0


@pytest.mark.parametrize("phi", [float("nan"), float("inf"), -float("inf"), 2.0e4, 1.0e6, -3.0e9, 0.0, -0.0])
def test_cos_sin_of_special_angles(phi):
    """NaN and infinities give NaN (health checks see them); beyond the inline range the library's
    values; zero gives (1, +-0)."""
    got = cos_sin(torch.tensor([phi], dtype=torch.float32))[0]
    if not math.isfinite(phi):
        assert torch.isnan(got).all()
    else:
        expected = torch.tensor([math.cos(phi), math.sin(phi)], dtype=torch.float32)
        torch.testing.assert_close(got, expected, rtol=0, atol=2.0**-23)
