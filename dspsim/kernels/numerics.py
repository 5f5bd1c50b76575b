"""The seed's four SIMD kernels, registered: what they compute, bit for bit in float32, vectorised
with numpy (their loop shapes: :mod:`dspsim.kernels.shapes`).

Each follows the seed's C where the order or an instruction changes the result: the two
accumulators, predicated tail and lane reduction, and in ``vecexpf_max`` NatureDSP's fixed-point
range reduction, the polynomial in Estrin/Horner order and the scaling by two exponent halves.
``x`` is ``(n,)`` (one call) or ``(rows, n)`` (a call per row: a reduction returns ``(rows,)``,
a scalar argument may be one per row); each row is bit for bit the 1-D call's (the same float32
operations, lane for lane, in the same order).

Where the seed's C does not pin an instruction down, one documented choice, collected here:

* ``IVP_MAXN_2XF32`` propagates NaN (IEEE 754-2019 ``maximum``): the ISA has a separate
  ``IVP_MAXNUMN_2XF32`` for the NaN-ignoring ``maxNum``, which NatureDSP's softmax uses when it
  wants NaN ignored. It orders -0.0 below +0.0, so the max is a total order: ``vecmaxf``'s
  result does not depend on the order of its comparisons.
* A NaN result is the default quiet NaN (0x7FC00000): payloads and signs are not modelled
  (numpy returns one of the operands' NaNs, which one depending on its loop, so a batch row
  could otherwise differ from the 1-D call in a NaN's bits).
* ``IVP_MULAN_2XF32`` (``acc += a * b``) is fused: one rounding of the exact ``a * b + acc``.
* ``IVP_RADDN_2XF32`` sums the lanes as a pairwise tree of halves (lane i + lane i + lanes/2,
  down to one lane), each add rounded to float32.
* ``IVP_TRUNCN_2XF32`` truncates toward zero and saturates to int32; NaN gives INT32_MAX.
* ``IVP_PACKVRNRN_2X64W`` shifts the 64-bit lane right arithmetically *without* rounding
  (``nr``: neither round nor saturate) and keeps the low 32 bits. NatureDSP's softmax takes the
  integer exponent with it and a shift of 54, correct only if it floors; flooring makes the
  fraction and the integer part (``PACKH``, shift) agree: ``exp_int + exp_fract * 2^-31 ==
  floor(W / 2^23) / 2^31``.
* float32 arithmetic rounds to nearest even and keeps subnormals (no flush to zero).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM
from dspsim.kernels.toolkit import (
    F32,
    as_f32,
    canonical_nan,
    fma_f32,
    maxf,
    padded_iterations,
    reduction_input,
    reduction_result,
    row_scalar,
    sequential_sum,
    two_accumulator_sum,
)

# NatureDSP constants (Cadence NatureDSP expf tables, as published in pytorch/executorch).
# 2^x on [0, 1), highest degree first: the seed loads them as p0..p6.
EXPFTBLF_BITS: tuple[int, ...] = (
    0x39655635, 0x3AA24C7A, 0x3C1EB2D1, 0x3D633DDB, 0x3E75FF24, 0x3F317212, 0x3F800000)
INVLN2_Q30 = 1549082005  # round(2^30 / ln 2)
EXPF_MAX_BITS = 0x42B17218  # expfminmax[1] = 88.722839f, the overflow guard

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_MASK32 = 0xFFFFFFFF


def _f32_from_bits(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def expf_overflow_threshold() -> np.float32:
    """The guard ``x >= 88.722839f`` above which the seed's kernel returns +inf."""
    return _f32_from_bits(EXPF_MAX_BITS)


def _trunc_q(x: np.ndarray, frac_bits: int) -> np.ndarray:
    """IVP_TRUNCN_2XF32(x, q): int32(trunc(x * 2^q)), saturating, NaN -> INT32_MAX (int64)."""
    v = np.trunc(x.astype(np.float64) * float(2**frac_bits))
    v = np.where(np.isnan(v), float(_INT32_MAX), v)
    return np.clip(v, _INT32_MIN, _INT32_MAX).astype(np.int64)


def _mul_q30_via_16bit_halves(t: np.ndarray, constant: int) -> np.ndarray:
    """IVP_MULN_2X16X32_0 then IVP_MULAHN_2X16X32_1 with a 32-bit constant seen as two int16.

    ``IVP_MOVNX16_FROMN_2X32`` splits the constant into signed halves (element 0 low, 1 high);
    ``_0`` multiplies element 0 by ``t`` into the 64-bit lane, ``_1`` adds element 1 times ``t``
    shifted left by 16. invln2_Q30 = 0x5C551D95 has a positive low half (0x1D95), so the pair
    is exactly ``t * invln2_Q30`` (|W| < 2^62, no wrap in the lane)."""
    lo = constant & 0xFFFF
    hi = (constant >> 16) & 0xFFFF
    lo = lo - 0x10000 if lo >= 0x8000 else lo
    hi = hi - 0x10000 if hi >= 0x8000 else hi
    return t * lo + ((t * hi) << 16)


def _expf_masks(
    x: np.ndarray, mx: np.float32 | np.ndarray, guard_shifted_input: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """b_nan, b_max, b_inf and x - max, as the seed's kernel computes them."""
    shifted = x - mx
    b_nan = np.isnan(x)  # IVP_UNN_2XF32(x, x)
    guarded = shifted if guard_shifted_input else x
    b_max = ~(guarded < expf_overflow_threshold())  # IVP_ULEN_2XF32(88.72f, v): <= or unordered
    b_inf = (x == np.inf) | b_nan  # IVP_UEQN_2XF32(x, +inf): == or unordered
    return b_nan, b_max, b_inf, shifted


def expf_input_flags(
    x: np.ndarray, max_value: float | np.ndarray, guard_shifted_input: bool = False
) -> dict[str, int] | dict[str, np.ndarray]:
    """How many elements raise the kernel's NaN flag and its overflow guard (NaN excluded:
    what ``vecexpf_max`` replaces by 127, so +inf: raw inputs >= 88.722839, or with
    ``guard_shifted_input`` ``x - max`` >= 88.722839 or unordered); ``int``, or ``(rows,)``."""
    x = as_f32(x)
    mx = row_scalar(max_value, x)
    with np.errstate(all="ignore"):
        b_nan, b_max, _, _ = _expf_masks(x, mx, guard_shifted_input)
    counts = {"nan_inputs": np.count_nonzero(b_nan, axis=-1),
              "overflow_guard": np.count_nonzero(b_max & ~b_nan, axis=-1)}
    if x.ndim == 1:
        return {k: int(v) for k, v in counts.items()}
    return {k: np.asarray(v, np.int64) for k, v in counts.items()}


def vecmaxf(x: np.ndarray, lanes: int) -> np.float32 | np.ndarray:
    """The seed's ``vecmaxf``: the largest element (0.0f if empty; any NaN gives NaN). Two
    accumulators from -inf, the tail a predicated max (padding -inf); then combined and rotated
    by lanes/2, ..., 1 with a max at each step; lane 0 returned."""
    x, xb, empty = reduction_input(x, lanes)
    if empty is not None:
        return empty
    vectors = padded_iterations(xb, lanes, -np.inf)  # (rows, iterations, 2, lanes)
    # Each lane's running max over the iterations. np.maximum.reduce finds the right value in
    # any order but may return either zero of a tie or any NaN's payload: fix both up to the
    # IEEE maximum (+0.0 if the lane saw one; the default quiet NaN).
    acc = np.maximum.reduce(vectors, axis=1)  # (rows, 2, lanes)
    zero = acc == 0
    if zero.any():
        saw_plus_zero = (vectors.view(np.uint32) == 0).any(axis=1)
        acc = np.where(zero & saw_plus_zero, F32(0.0), acc)
    acc = canonical_nan(acc)
    v = maxf(acc[:, 0], acc[:, 1])
    step = lanes // 2
    while step >= 1:  # IVP_SELN_2XF32I(v, v, ROTATE_RIGHT_<step>) then max
        v = maxf(v, np.roll(v, -step, axis=-1))
        step //= 2
    return reduction_result(v[:, 0], x)


def vecsum(x: np.ndarray, lanes: int) -> np.float32 | np.ndarray:
    """The seed's ``vecsum`` in the kernel's order (0.0f if empty): element ``i`` to accumulator
    ``(i // lanes) % 2`` lane ``i % lanes`` from +0.0, the tail padded with -0.0 (IEEE addition's
    exact identity); then ``acc0 + acc1`` and the ``IVP_RADDN_2XF32`` tree."""
    return two_accumulator_sum(x, lanes, sequential_sum)


def vecexpf_max(
    x: np.ndarray, max_value: float | np.ndarray, guard_shifted_input: bool = False
) -> np.ndarray:
    """The seed's ``vecexpf_max``: ``exp(x - max_value)`` in float32, as the C: the guard ``x >=
    88.722839f`` tests ``x`` (or ``x - max`` with ``guard_shifted_input``, the corrected kernel);
    ``xin = x - max``, 127 where guarded, floored at -128 by ``IVP_MAXN``; Q24 times invln2 in
    Q30 gives ``W`` in Q54, split into a Q31 fraction ``f`` and an integer ``k``, ``k + f = W /
    2^54`` (to 2^-31); ``2^f`` by the degree-6 ``expftblf`` polynomial in the seed's order
    (FMAs); times ``2^k`` as two scales ``2^(e1-127) * 2^(e2-127)``, ``e1 + e2 = k + 254``. +inf
    and NaN pass through; guarded elements give +inf, as does a NaN ``x - max`` on a non-NaN
    input (it survives ``IVP_MAXN``, truncates to INT32_MAX). Measured: relative error <= 3e-7
    for a normal float32 result, within 2 subnormal ULPs below."""
    x = as_f32(x)
    mx = row_scalar(max_value, x)
    if x.shape[-1] == 0:
        return np.empty(x.shape, F32)
    with np.errstate(all="ignore"):
        _, b_max, b_inf, xin = _expf_masks(x, mx, guard_shifted_input)
        xin = np.where(b_max, F32(127.0), xin)
        xin = maxf(xin, F32(-128.0))

        exp_fract, exp_int = _log2_split(xin)

        # IVP_FLOATN_2X32(exp_fract, 31): int32 -> float32 (round to nearest), times 2^-31.
        xin = exp_fract.astype(np.int32).astype(F32) * F32(2.0**-31)
        xin = np.where(b_inf, x, xin)  # +inf / NaN pass through

        p0, p1, p2, p3, p4, p5, p6 = (_f32_from_bits(b) for b in EXPFTBLF_BITS)
        xin2 = xin * xin
        p1 = fma_f32(xin, p0, p1)
        p3 = fma_f32(xin, p2, p3)
        p5 = fma_f32(xin, p4, p5)
        p3 = fma_f32(xin2, p1, p3)
        p5 = fma_f32(xin2, p3, p5)
        p6 = fma_f32(xin, p5, p6)

        zout = _times_pow2(p6, exp_int)
    return canonical_nan(zout)


def _log2_split(xin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``xin`` times invln2 in fixed point, split into ``f`` (Q31) and ``k`` (vecexpf_max)."""
    t = _trunc_q(xin, 24)  # Q24, int32 range
    w = _mul_q30_via_16bit_halves(t, INVLN2_Q30)  # Q24 * Q30 -> Q54, int64
    # IVP_PACKVRNRN_2X64W(W, 22): arithmetic shift, low 32 bits (Q54 -> Q32 fraction);
    # IVP_SRLIN_2X32U(., 1): logical shift to an unsigned Q31 in [0, 2^31).
    exp_fract = ((w >> 22) & _MASK32) >> 1
    # IVP_PACKHN_2X64W(W): bits 63..32 (Q54 -> Q22); IVP_SRLIN_2X32(., 22): logical shift.
    # For negative exponents this yields k + 1024 instead of k; the extra 1024 becomes 512 in
    # each half below and 512 << 23 falls off the 32-bit lane, so the scales are exact.
    exp_int = ((w >> 32) & _MASK32) >> 22
    return exp_fract, exp_int


def _times_pow2(p6: np.ndarray, exp_int: np.ndarray) -> np.ndarray:
    """``p6 * 2^k`` as two float32 scales ``2^(e1-127) * 2^(e2-127)``, ``e1 + e2 = k + 254``."""
    exp_int = (exp_int + 254) & _MASK32
    e1 = exp_int >> 1
    e2 = (exp_int - e1) & _MASK32
    scl1 = ((e1 << 23) & _MASK32).astype(np.uint32).view(F32)
    scl2 = ((e2 << 23) & _MASK32).astype(np.uint32).view(F32)
    zout = (p6 * scl1).astype(F32)
    return (zout * scl2).astype(F32)


def vecmul(x: np.ndarray, scalar: float | np.ndarray) -> np.ndarray:
    """The seed's ``vecmul``: each element times ``scalar``, one float32 rounding each."""
    x = as_f32(x)
    s = row_scalar(scalar, x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return canonical_nan((x * s).astype(F32))


# ----------------------------------------------------------------------------- registered
def _vecexpf_max(src: np.ndarray, dst: np.ndarray, lanes: int, max_value: Any,
                 guard_shifted_input: bool = False) -> None:
    dst[...] = vecexpf_max(src, max_value, guard_shifted_input)


def _vecmul(src: np.ndarray, dst: np.ndarray, lanes: int, scalar: Any) -> None:
    dst[...] = vecmul(src, scalar)


register(Kernel("vecmaxf", VECMAXF, lambda src, dst, lanes: vecmaxf(src, lanes), results=1))
register(Kernel("vecsum", VECSUM, lambda src, dst, lanes: vecsum(src, lanes), results=1))
register(Kernel("vecexpf_max", VECEXPF_MAX, _vecexpf_max, writes=True, elementwise=True,
                example_args=lambda size: {"max_value": np.float32(0.0)}))
register(Kernel("vecmul", VECMUL, _vecmul, writes=True, elementwise=True,
                example_args=lambda size: {"scalar": np.float32(1.0)}))
