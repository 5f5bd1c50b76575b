"""The seed's softmax custom operator (RPC command 0x1402), as an :class:`~dspsim.ops.base.Op`.

``program.py`` reads beside the C; ``params.py`` is the ``[softmax]`` table; ``reference.py``
the float64 answer and the seed's input; ``bounds.py`` the closed forms; ``document.py`` the
document's figures; ``calibration.py`` the runs that separate calibrations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.ops.base import Op, Proc, error_summary
from dspsim.ops.registry import register_op
from dspsim.ops.softmax import bounds as _bounds
from dspsim.ops.softmax.calibration import calibration_candidates
from dspsim.ops.softmax.document import DOCUMENT
from dspsim.ops.softmax.params import PARAMS
from dspsim.ops.softmax.program import SOFTMAX_CMD, hb_dsp_softmax, hbDSPSoftmaxParam
from dspsim.ops.softmax.reference import reference_softmax, seed_input


class Softmax(Op):
    name = "softmax"
    doc = "softmax of a float32 vector: max; exp(x - max) and sum; multiply by 1/sum"
    cmd = SOFTMAX_CMD
    variants = {
        "pingpong": "three passes through two TCM buffers fed by two iDMA channels (the seed's "
                    "run_tcm_opt = 1)",
        "direct": "the kernels read and write DDR directly (the seed's run_tcm_opt = 0)",
    }
    default_variant = "pingpong"
    params = PARAMS
    ndim = 1
    default_shape = (100_000,)
    document = DOCUMENT

    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 2, "banks": 2} if variant == "pingpong" else super().requirements(
            variant)

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return seed_input(shape[0])

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        return hbDSPSoftmaxParam(4 * shape[0], input_addr, int(variant == "pingpong"))

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        return hb_dsp_softmax(dsp, input, output, tm)

    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        return reference_softmax(x)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        return error_summary(out, self.reference(x, params), floor=1e-30)

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
        return _bounds.bounds(model, variant, shape[0])

    def calibration_candidates(
        self, model: Any, free_keys: Any, longest_shape: tuple[int, ...]
    ) -> list[tuple[str, tuple[int, ...], dict[str, Any]]]:
        return calibration_candidates(model, free_keys, longest_shape)


SOFTMAX = register_op(Softmax(), default=True)
