"""Two NatureDSP-style kernels for LayerNorm, their loop shapes, and the row chain they serve.

LayerNorm normalises each row of ``C`` elements, ``y = (x - mean) / sqrt(var + eps)`` (biased
variance); subtracting a float32 mean, then correcting for its error, avoids the cancellation of
``E[x^2] - mean^2`` when the mean is large against the spread:

1. ``s = vecsum(x)`` (the seed's kernel); ``mean_hi = float32(s * float32(1/C))``.
2. ``(sum_d, sum_d2) = vecsumsq_dev(x, mean_hi)``: the float32 sums of ``d = x - mean_hi`` and
   of ``d * d``. C: ``void vecsumsq_dev(float32_t *sum_d, float32_t *sum_d2, const float32_t
   *x, int N, float32_t mean)``; per iteration of two vectors ``x0, x1``, ``d = SUB(x, mean)``,
   ``s = ADD(s, d)``, ``q = MULA(q, d, d)`` (fused) into two accumulators each, then
   ``RADD(s0 + s1)`` and ``RADD(q0 + q1)``.
3. ``r = sum_d / C``; ``var = max(sum_d2 / C - r * r, 0)``; ``rstd = 1 / sqrt(var + eps)``,
   scalar float32 arithmetic on the core (:func:`layernorm_mean_hi`, :func:`layernorm_rstd`).
4. ``vecnorm(z, x, mean_hi, r, rstd)``: ``z = MUL(SUB(SUB(x, mean), r), rstd)`` per vector (C:
   ``void vecnorm(float32_t *z, const float32_t *x, int N, float32_t mean, float32_t r,
   float32_t rstd)``).

:func:`layernorm_rows` chains the four steps for a ``(rows, C)`` array, as the op does.
Instructions as collected in :mod:`dspsim.kernels.numerics`; ``IVP_LAN_2XF32_IP`` loads after
one priming load, ``IVP_LAVN_2XF32_XP`` / ``IVP_SAVN_2XF32_XP`` in the tail, where
``vecsumsq_dev``'s ``SUB``/``ADD``/``MULA`` are predicated (``...T``) under a mask of the valid
lanes, so lanes past the end leave both accumulators exactly unchanged.
"""

from __future__ import annotations

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.numerics import vecsum
from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import LoopShape, two_accumulator_reduction
from dspsim.kernels.toolkit import (
    F32,
    as_f32,
    canonical_nan,
    fused_square_sum,
    log2_lanes,
    one_vector_variable_segments,
    padded_iterations,
    radd,
    reduction_input,
    reduction_result,
    row_scalar,
    scalar_result,
    sequential_sum,
)

# ----------------------------------------------------------------------------- loop shapes
# IVP_SUBN_2XF32 x2, IVP_ADDN_2XF32 x2, IVP_MULAN_2XF32 x2; for each of the two quantities, add
# the two accumulators, then the IVP_RADDN_2XF32 tree
VECSUMSQ_DEV = two_accumulator_reduction("vecsumsq_dev", 6,
                                         lambda lanes: 2 * (1 + log2_lanes(lanes)))

VECNORM = LoopShape(
    "vecnorm", table_loads=0,
    data_loads=1,  # IVP_LAVN_2XF32_XP
    stores=1,  # IVP_SAVN_2XF32_XP
    alu_ops=3,  # IVP_SUBN_2XF32 x2, IVP_MULN_2XF32
    segments=one_vector_variable_segments,
    reduction_ops=lambda lanes: 0,
    priming_loads=1,
)


# ----------------------------------------------------------------------------- numerics
def vecsumsq_dev(x: np.ndarray, lanes: int, mean: float | np.ndarray
                 ) -> tuple[np.float32, np.float32] | tuple[np.ndarray, np.ndarray]:
    """``(sum(d), sum(d * d))``, ``d = x - mean`` (one rounding), in float32 as the kernel: the
    accumulators as ``vecsum``'s, squares by ``fma(d, d, acc)``; a padded ``d = -0.0`` is the
    add's exact identity and its square +0.0 leaves a square sum (never -0.0) unchanged. A batch
    gives two ``(rows,)`` arrays, each row the 1-D call's; an empty row ``(0.0, 0.0)``."""
    x, xb, empty = reduction_input(x, lanes)
    m = row_scalar(mean, xb)
    if empty is not None:
        return empty, empty
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        d = padded_iterations(xb - m, lanes, -0.0)  # (rows, iterations, 2, lanes)
        sum_d = radd(sequential_sum(d))
        sum_d2 = radd(fused_square_sum(d))
    return reduction_result(sum_d, x), reduction_result(sum_d2, x)


def vecnorm(x: np.ndarray, mean: float | np.ndarray, r: float | np.ndarray,
            rstd: float | np.ndarray) -> np.ndarray:
    """``((x - mean) - r) * rstd`` per element, each step one float32 rounding (SUB, SUB, MUL)."""
    x = as_f32(x)
    m, rr, s = (row_scalar(v, x) for v in (mean, r, rstd))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return canonical_nan((((x - m).astype(F32) - rr).astype(F32) * s).astype(F32))


def layernorm_mean_hi(s: np.float32 | np.ndarray, cols: int) -> np.float32 | np.ndarray:
    """Step 1's scalar part: ``mean_hi = float32(s * (1.0f / C))`` (two float32 roundings)."""
    inv_c = F32(1.0) / F32(cols)
    with np.errstate(over="ignore", invalid="ignore"):
        out = (np.asarray(s, F32) * inv_c).astype(F32)
    return F32(out) if out.ndim == 0 else out


def layernorm_rstd(sum_d: np.float32 | np.ndarray, sum_d2: np.float32 | np.ndarray, cols: int,
                   eps: float) -> tuple[np.float32, np.float32] | tuple[np.ndarray, np.ndarray]:
    """Step 3: ``(r, rstd)`` from ``vecsumsq_dev``'s sums in float32 (``C``, ``eps`` too), each
    step rounded (``r * r`` before the subtraction; sqrt correctly rounded); NaN ``var`` stays."""
    c = F32(cols)
    sd = np.asarray(sum_d, F32)
    sq = np.asarray(sum_d2, F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        r = (sd / c).astype(F32)
        var = ((sq / c).astype(F32) - (r * r).astype(F32)).astype(F32)
        var = np.maximum(var, F32(0.0))  # NaN propagates
        rstd = (F32(1.0) / np.sqrt((var + F32(eps)).astype(F32))).astype(F32)
    return scalar_result(r), scalar_result(rstd)


def layernorm_rows(x2d: np.ndarray, eps: float, lanes: int) -> np.ndarray:
    """LayerNorm of each row of ``x2d`` (``(rows, cols)`` or ``(cols,)``) through the kernels,
    chained as the op does (steps 1-4 above); float32, shaped like ``x2d``. Accuracy
    (tests/test_layernorm_kernels.py, against float64): within ``max(1e-5 |ref|, 1e-6)`` on
    normal data of sigma 1e-3 to 1e3 offset by up to 1e5, uniform, outlier and constant rows
    (within 1e-6 of 0, never NaN), 1 to 1000 elements; worst ~0.05 of that with 32 lanes
    (relative ~2-4e-7), ~0.15 with 1 lane (up to ~1.4e-6). Limit: the float32 square sum
    overflows for ``|x - mean_hi|`` beyond ~1.8e19 (and a constant row above ~1e26, its
    ``mean_hi`` a few ulps off): ``var`` is then +inf (the row normalises to 0) or NaN."""
    x = as_f32(x2d)
    cols = x.shape[-1]
    if cols == 0:
        return np.empty(x.shape, F32)
    mean_hi = layernorm_mean_hi(vecsum(x, lanes), cols)
    sum_d, sum_d2 = vecsumsq_dev(x, lanes, mean_hi)
    r, rstd = layernorm_rstd(sum_d, sum_d2, cols, eps)
    return vecnorm(x, mean_hi, r, rstd)


# ----------------------------------------------------------------------------- registry
def compute_vecnorm(src: np.ndarray, dst: np.ndarray, lanes: int, mean: float | np.ndarray,
                    r: float | np.ndarray, rstd: float | np.ndarray) -> None:
    """Writes ``((src - mean) - r) * rstd`` into ``dst``."""
    if dst is None or np.shape(dst) != np.shape(src):
        raise DspsimInputError(f"vecnorm needs a destination shaped like its source "
                               f"{np.shape(src)}, got {None if dst is None else np.shape(dst)}")
    dst[...] = vecnorm(src, mean, r, rstd)


# results=2: the C returns two values (through pointers), (sum_d, sum_d2)
register(Kernel("vecsumsq_dev", VECSUMSQ_DEV,
                lambda src, dst, lanes, mean: vecsumsq_dev(src, lanes, mean), results=2,
                example_args=lambda size: {"mean": F32(0.0)}))
register(Kernel("vecnorm", VECNORM, compute_vecnorm, writes=True, elementwise=True,
                example_args=lambda size: {"mean": F32(0.0), "r": F32(0.0), "rstd": F32(1.0)}))
