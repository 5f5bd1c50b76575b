"""RMSNorm (RPC command 0x8002): ``y = x / sqrt(mean(x^2) + eps)`` over the last axis of a
float32 ``[rows, cols]`` tensor, as a J6 custom operator would be written: the math of a
:class:`~dspsim.ops.rowwise.RowwiseOp` (kernel: :mod:`dspsim.kernels.rmsnorm`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dspsim.kernels.rmsnorm import VECSUMSQ, rmsnorm_rstd
from dspsim.kernels.shapes import VECMUL
from dspsim.ops.base import Proc
from dspsim.ops.registry import register_op
from dspsim.ops.rowwise import RowwiseOp, eps_key, report_statistics, rowwise_params
from dspsim.schema import Params

if TYPE_CHECKING:
    from dspsim.hw.memory import Ptr
    from dspsim.platform import Dsp


class RmsNorm(RowwiseOp):
    """Per row: ``vecsumsq`` -> ``rstd = 1 / sqrt(ss / C + eps)`` (the core's scalar unit,
    untimed) -> the seed's ``vecmul`` by ``rstd``."""

    name = "rmsnorm"
    doc = "scale each row of a float32 [rows, cols] tensor: x / sqrt(mean(x^2) + eps)"
    cmd = 0x8002  # a custom command, after layernorm's
    tcm_work = "the square sum then the scaling"
    direct_traffic = "two reads and one write"
    params = rowwise_params("rmsnorm", eps_key("rmsnorm", "the mean square", 1e-6))
    row_calls = ((VECSUMSQ, False), (VECMUL, True))
    denominator = "mean square"

    def rows(self, dsp: Dsp, out: Ptr, x: Ptr, rows: int, cols: int) -> Proc:
        ss = yield from dsp.core.call("vecsumsq", cols, x, rows=rows)
        rstd = rmsnorm_rstd(ss, cols, dsp.params.eps)
        report_statistics(dsp, self, x, rows, cols, (ss,), rstd)
        yield from dsp.core.call("vecmul", cols, x, out, rows=rows, scalar=rstd)

    def exact_denominator(self, x64: np.ndarray, eps: float) -> np.ndarray:
        return np.mean(x64 * x64, axis=-1) + eps

    def reference(self, x: np.ndarray, params: Params) -> np.ndarray:
        """``x / sqrt(mean(x^2) + eps)`` per row in float64."""
        x64 = np.asarray(x, np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + params.eps)


RMSNORM = register_op(RmsNorm())
