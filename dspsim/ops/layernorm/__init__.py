"""LayerNorm (RPC command 0x8001): ``y = (x - mean) / sqrt(var + eps)`` over the last axis of a
float32 ``[rows, cols]`` tensor (biased variance, no affine terms), as a J6 custom operator
would be written: the math of a :class:`~dspsim.ops.rowwise.RowwiseOp` (kernels:
:mod:`dspsim.kernels.layernorm`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dspsim.kernels.layernorm import VECNORM, VECSUMSQ_DEV, layernorm_mean_hi, layernorm_rstd
from dspsim.kernels.shapes import VECSUM
from dspsim.ops.base import Proc
from dspsim.ops.registry import register_op
from dspsim.ops.rowwise import RowwiseOp, eps_key, report_statistics, rowwise_params
from dspsim.schema import Params

if TYPE_CHECKING:
    from dspsim.hw.memory import Ptr
    from dspsim.platform import Dsp


class LayerNorm(RowwiseOp):
    """Per row, to keep float32 accurate when the mean is large against the spread:
    ``vecsum`` -> ``mean_hi``; ``vecsumsq_dev`` (sums of ``x - mean_hi`` and of its square) ->
    the residual mean ``r`` and ``rstd``; ``vecnorm`` writes ``((x - mean_hi) - r) * rstd``.
    The scalar steps between kernels run on the core's scalar unit and are not timed (a few
    cycles against a row's kernels)."""

    name = "layernorm"
    doc = "normalise each row of a float32 [rows, cols] tensor: (x - mean) / sqrt(var + eps)"
    cmd = 0x8001  # a custom command (0x1400-0x1405 are the built-in ones)
    tcm_work = "statistics then normalisation"
    direct_traffic = "three reads and one write"
    params = rowwise_params("layernorm", eps_key("layernorm", "the variance", 1e-5))
    row_calls = ((VECSUM, False), (VECSUMSQ_DEV, False), (VECNORM, True))

    def rows(self, dsp: Dsp, out: Ptr, x: Ptr, rows: int, cols: int) -> Proc:
        core, eps = dsp.core, dsp.params.eps
        s = yield from core.call("vecsum", cols, x, rows=rows)
        mean_hi = layernorm_mean_hi(s, cols)
        sum_d, sum_d2 = yield from core.call("vecsumsq_dev", cols, x, rows=rows, mean=mean_hi)
        r, rstd = layernorm_rstd(sum_d, sum_d2, cols, eps)
        report_statistics(dsp, self, x, rows, cols, (s, sum_d, sum_d2), rstd)
        yield from core.call("vecnorm", cols, x, out, rows=rows, mean=mean_hi, r=r, rstd=rstd)

    def exact_denominator(self, x64: np.ndarray, eps: float) -> np.ndarray:
        return x64.var(axis=-1) + eps

    def reference(self, x: np.ndarray, params: Params) -> np.ndarray:
        """``(x - mean) / sqrt(var + eps)`` per row in float64 (biased variance)."""
        x64 = np.asarray(x, np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # inf - inf: NaN
            mean = x64.mean(axis=-1, keepdims=True)
            var = x64.var(axis=-1, keepdims=True)
            return (x64 - mean) / np.sqrt(var + params.eps)


LAYERNORM = register_op(LayerNorm())
