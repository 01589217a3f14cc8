"""``cos_sin``: the cosine and sine of an angle inside a kernel, inline on the CPU.

On the CPU, ``cosf`` and ``sinf`` are calls into the C library, and a navigation step spends a large
share of its time in them (docs/benchmarks.md, "Other measured choices in the code"). There
``cos_sin_f32`` is inline instead: the angle's nearest multiple ``q`` of pi/2 taken off in three
parts (Cody and Waite), minimax polynomials of degree 7 and 8 on the remainder in [-pi/4, pi/4], and
the quadrant's swap and signs as selects (a branch on the quadrant mispredicts on random headings).
It is within 2^-23 of the exact values for ``|phi| <= 1e4`` rad (tests/core/test_trig.py); beyond
that, where the reduction's second part is no longer exact, it calls the library, a branch headings
(wrapped to [-pi, pi)) and ray angles never take. NaN and infinities give NaN, as the library does.
On CUDA it is ``cosf`` and ``sinf``, what ``wp.cos`` and ``wp.sin`` compile to, so its callers' CUDA
code is unchanged; ``sincos_f32``, the lidar's grouped scan's, is ``sincosf`` there.
"""

import functools

import warp as wp

from swarp.core.precision import vec2_type

# The CPU's inline cosine and sine of ``phi``, shared by both funcs below.
_CPU = """
    if (__builtin_expect(fabsf(phi) > 1.0e4f, 0))
        return wp::vec2f(cosf(phi), sinf(phi));
    const float q = rintf(phi * 0.636619772367581343f);
    float r = phi - q * 1.5703125f;
    r = r - q * 4.83751296997070312e-4f;
    r = r - q * 7.54978995489188216e-8f;
    const float r2 = r * r;
    const float sn = r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
    const float cs = 1.0f - 0.5f * r2
        + r2 * r2 * (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
    const float quadrant = q - 4.0f * floorf(q * 0.25f);  // 0, 1, 2 or 3 (NaN compares false)
    const bool swap = quadrant == 1.0f || quadrant == 3.0f;
    const float c = swap ? sn : cs;
    const float s = swap ? cs : sn;
    return wp::vec2f(quadrant == 1.0f || quadrant == 2.0f ? -c : c, quadrant >= 2.0f ? -s : s);
"""


def _native(cuda: str) -> str:
    return f"#if defined(__CUDA_ARCH__)\n{cuda}\n#else{_CPU}#endif\n"


@wp.func_native(_native("    return wp::vec2f(cosf(phi), sinf(phi));"))
def cos_sin_f32(phi: wp.float32) -> wp.vec2f:
    """``(cos phi, sin phi)`` of an angle ``phi`` [rad], float32; on CUDA ``cosf`` and ``sinf``
    (see the module doc). No adjoint."""
    ...


@wp.func_native(_native("    float s, c;\n    sincosf(phi, &s, &c);\n    return wp::vec2f(c, s);"))
def sincos_f32(phi: wp.float32) -> wp.vec2f:
    """``cos_sin_f32`` with one argument reduction for both on CUDA (``sincosf``: the same bits as
    ``cosf`` and ``sinf``, pinned by a GPU test of the lidar's grouped scan against its per-ray
    one); the same inline code on the CPU. No adjoint."""
    ...


@functools.cache
def cos_sin(scalar: type):
    """The Warp func ``cos_sin(phi: scalar) -> vec2`` of one precision: ``cos_sin_f32`` for float32,
    the library's ``cos`` and ``sin`` for float64 (where exactness is the point)."""
    vec2 = vec2_type(scalar)

    @wp.func
    def cos_sin_of(phi: scalar) -> vec2:
        if wp.static(scalar is wp.float32):
            return cos_sin_f32(phi)
        return vec2(wp.cos(phi), wp.sin(phi))

    return cos_sin_of
