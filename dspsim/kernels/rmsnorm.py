"""RMSNorm's kernel, its loop shape, and the row chain it serves.

RMSNorm scales each row of ``C`` elements by the reciprocal of its root mean square,
``y = x / sqrt(mean(x^2) + eps)``. Per row: ``ss = vecsumsq(x)``, the float32 sum of squares
(below); ``rstd = 1 / sqrt(ss / C + eps)`` in scalar float32 on the core
(:func:`rmsnorm_rstd`); the seed's ``vecmul(z, x, rstd)``. No mean is subtracted, so there is
no cancellation: the square sum of positive terms is accurate to a few float32 ulps whatever the
offset. :func:`rmsnorm_rows` chains the steps for a ``(rows, C)`` array, as the op does.

Instructions as collected in :mod:`dspsim.kernels.numerics`. ``vecsumsq`` (C: ``float32_t
vecsumsq(const float32_t *x, int N)``), after one priming load of the alignment register, per
iteration two ``IVP_LAN_2XF32_IP`` loads ``x0, x1`` and ``q0 = MULA(q0, x0, x0); q1 = MULA(q1,
x1, x1)`` (fused: one rounding of the exact square plus the accumulator); in the tail two
``IVP_LAVN_2XF32_XP`` loads with the ``MULA`` predicated (``IVP_MULAN_2XF32T``) under a mask of
the valid lanes, so lanes past the end leave the accumulators unchanged; then ``RADD(q0 + q1)``.
"""

from __future__ import annotations

import numpy as np

from dspsim.kernels.numerics import vecmul
from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import two_accumulator_reduction
from dspsim.kernels.toolkit import (
    F32,
    as_f32,
    fused_square_sum,
    log2_lanes,
    scalar_result,
    two_accumulator_sum,
)

# IVP_MULAN_2XF32 x2; add the two accumulators, then the IVP_RADDN_2XF32 tree
VECSUMSQ = two_accumulator_reduction("vecsumsq", 2, lambda lanes: 1 + log2_lanes(lanes))


def vecsumsq(x: np.ndarray, lanes: int) -> np.float32 | np.ndarray:
    """``sum(x * x)`` in float32 as the kernel computes it (element ``i`` to accumulator
    ``(i // lanes) % 2``, lane ``i % lanes``, from +0.0); ``(rows,)`` for a batch; 0.0 if empty."""
    return two_accumulator_sum(x, lanes, fused_square_sum)


def rmsnorm_rstd(ss: np.float32 | np.ndarray, cols: int, eps: float
                 ) -> np.float32 | np.ndarray:
    """Step 2: ``rstd = 1 / sqrt(ss / C + eps)`` in float32 (``C``, ``eps`` too), each of the
    divide, add, sqrt (correctly rounded) and reciprocal rounded."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        ms = (np.asarray(ss, F32) / F32(cols)).astype(F32)
        rstd = (F32(1.0) / np.sqrt((ms + F32(eps)).astype(F32))).astype(F32)
    return scalar_result(rstd)


def rmsnorm_rows(x2d: np.ndarray, eps: float, lanes: int) -> np.ndarray:
    """RMSNorm of each row of ``x2d`` (``(rows, cols)`` or ``(cols,)``) through the kernels,
    as the op chains them: :func:`vecsumsq` -> :func:`rmsnorm_rstd` -> ``vecmul``. Accuracy
    (tests/test_rmsnorm.py, against float64): within ``max(1e-5 |ref|, 1e-6)`` on normal data of
    sigma 1e-4 to 1e4 offset by up to 1e5, uniform, constant and tiny rows (``|x|`` down to
    1e-30, where ``eps`` dominates). Limits: ``|x|`` beyond ~1.8e19 overflows the float32 square
    sum (the row scales to 0); with ``eps = 0`` a row whose squares all underflow (``|x|`` below
    ~1e-23) gives inf or NaN."""
    x = as_f32(x2d)
    cols = x.shape[-1]
    if cols == 0:
        return np.empty(x.shape, F32)
    return vecmul(x, rmsnorm_rstd(vecsumsq(x, lanes), cols, eps))


register(Kernel("vecsumsq", VECSUMSQ, lambda src, dst, lanes: vecsumsq(src, lanes), results=1))
