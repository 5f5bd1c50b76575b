"""The seed's softmax custom operator (RPC command 0x1402) on a 1-D array ``(n,)`` (the seed's)
or along the last axis of a ``[rows, cols]`` tensor.

``program.py`` reads beside the seed's C (``direct``, ``pingpong``); ``online.py``,
``resident.py`` and ``rows.py`` are the new schedules, ``handler.py`` the command's switch,
``layout.py`` the tiles, buffers and channels they share with ``bounds_variants.py`` (the
closed forms; ``bounds.py`` the seed's on one row); ``params.py`` is the ``[softmax]`` table,
``reference.py`` the float64 answer, ``document.py`` the document's figures,
``calibration.py`` the runs that separate calibrations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops.base import SUMMARY_CHUNK_ELEMENTS, Bounds, Candidate, Op, Proc, error_summary
from dspsim.ops.registry import register_op
from dspsim.ops.softmax import bounds_variants
from dspsim.ops.softmax.calibration import calibration_candidates
from dspsim.ops.softmax.document import DOCUMENT
from dspsim.ops.softmax.handler import hb_dsp_softmax
from dspsim.ops.softmax.layout import (
    VARIANT_CODES,
    buffers_fit,
    fits,
    free_bank_bytes,
    ping_pong_banks,
    resident_layout,
)
from dspsim.ops.softmax.params import PARAMS
from dspsim.ops.softmax.program import SOFTMAX_CMD, hbDSPSoftmaxParam
from dspsim.ops.softmax.reference import default_input, reference_softmax

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp
    from dspsim.schema import Params

_NEEDS = {"pingpong": {"channels": 2, "banks": 2}, "direct": {"channels": 0, "banks": 0},
          **dict.fromkeys(("online", "resident", "multibuffer", "rows"),
                          {"channels": 2, "banks": 1})}  # copied by requirements()
_KEY_VARIANTS = {"softmax.max_init": ("pingpong",), "softmax.schedule": ("pingpong",),
                 "softmax.guard_shifted_input": ("pingpong", "direct"),
                 "softmax.buffers": ("multibuffer",)}


class Softmax(Op):
    name = "softmax"
    doc = ("softmax of a float32 vector, or of each row of a [rows, cols] tensor: max; "
           "exp(x - max) and sum; multiply by 1/sum")
    cmd = SOFTMAX_CMD
    warning_codes = ("inf_input", "max_init_zero", "nan_input", "overflow_guard",
                     "partly_resident", "row_too_long", "zero_sum")
    variants = {
        "pingpong": "three passes through two TCM buffers fed by two iDMA channels (the seed's "
                    "run_tcm_opt = 1): 3 reads and 2 writes of the array",
        "direct": "the kernels read and write DDR directly (the seed's run_tcm_opt = 0)",
        "online": "two passes through the seed's two buffers and channels: a running max and "
                  "a rescaled running sum, then exp(x - max) / sum: 2 reads and 1 write",
        "resident": "the array stays in the DataRAMs' free space: copied in once (max as it "
                    "lands), exp, sum and multiply in TCM, copied out once; what does not fit "
                    "is streamed with the online schedule",
        "multibuffer": "the online schedule through softmax.buffers buffers over all DataRAMs, "
                       "inputs and outputs on separate channels over all iDMA channels",
        "rows": "whole rows per tile (2-D input), per-row max, exp, sum and multiply in TCM: "
                "1 read and 1 write; rows longer than a tile run the online schedule",
    }
    default_variant = "pingpong"
    study_variants = ("pingpong", "direct")  # the seed's trade-off: what a sweep compares
    params = PARAMS
    ndim = 1  # --n; a [rows, cols] shape (--shape) is accepted too (ndims)
    ndims = (1, 2)
    default_shape = (100_000,)
    document = DOCUMENT
    tile_key = "softmax.tile_bytes"

    def shape_refusal(self, given: Any, dims: tuple[Any, ...]) -> str:
        return (f"softmax shape {given!r}: expected a positive integer n or two positive "
                "integers ROWS,COLS")

    def requirements(self, variant: str) -> dict[str, int]:
        return dict(_NEEDS.get(variant, super().requirements(variant)))

    def checks_params(self, variant: str) -> bool:
        return variant != "direct"  # the table's hardware check is the TCM tile's

    def key_variants(self, key: str) -> tuple[str, ...]:
        # the seed's quirks are in its two schedules' code only; the buffer count is
        # multibuffer's; the tile is every TCM variant's (the default)
        return _KEY_VARIANTS.get(key) or super().key_variants(key)

    def check_run(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        if variant == "direct" or (
                variant == "resident" and not resident_layout(model, shape[-1]).streamed):
            return  # no TCM buffer
        banks = _banks(model, variant)
        if not buffers_fit(model, banks):
            per_bank = max(banks.count(b) for b in set(banks))
            tile, free = model.softmax.tile_bytes, free_bank_bytes(model)
            hint = {"multibuffer": ", fewer softmax.buffers or more tcm.banks",
                    "pingpong": ""}.get(variant, " or tcm.banks >= 2" if per_bank > 1 else "")
            raise DspsimInputError(
                f"softmax {variant} puts {per_bank} tile(s) of softmax.tile_bytes = {tile} in "
                f"one DataRAM, whose free space is {free} bytes (tcm.bank_bytes - "
                f"tcm.reserved_bytes = {model.tcm.bank_bytes} - {model.tcm.reserved_bytes}); "
                f"allowed: softmax.tile_bytes <= {_largest_tile(model, per_bank)}{hint}"
            )

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return default_input(shape)

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int
                    ) -> hbDSPSoftmaxParam:
        rows = shape[0] if len(shape) == 2 else 1
        return hbDSPSoftmaxParam(4 * int(np.prod(shape)), input_addr, VARIANT_CODES[variant],
                                 rows)

    def handler(self, dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
        return hb_dsp_softmax(dsp, input, output, tm)

    def reference(self, x: np.ndarray, params: Params | None) -> np.ndarray:
        return reference_softmax(x)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Params) -> dict[str, Any]:
        """Errors against :func:`reference_softmax`, made a slice at a time from each row's max
        and sum of exponentials: no float64 copy of a long run's whole output."""
        rows = x.reshape(-1, x.shape[-1])
        cols = rows.shape[1]
        flat = rows.reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            peak = rows.max(axis=1).astype(np.float64)
            total = np.zeros(len(rows))
            # blocks of at most SUMMARY_CHUNK_ELEMENTS: whole rows when they are short
            step_rows = max(1, SUMMARY_CHUNK_ELEMENTS // cols)
            step_cols = min(cols, SUMMARY_CHUNK_ELEMENTS)
            for r0 in range(0, len(rows), step_rows):
                block = slice(r0, r0 + step_rows)
                for c0 in range(0, cols, step_cols):
                    part = rows[block, c0:c0 + step_cols].astype(np.float64)
                    total[block] += np.exp(part - peak[block, None]).sum(axis=1)

        def reference(part: slice) -> np.ndarray:
            row = np.arange(part.start, min(part.stop, flat.size)) // cols
            with np.errstate(invalid="ignore", over="ignore"):
                return np.exp(flat[part].astype(np.float64) - peak[row]) / total[row]

        return error_summary(out, reference, floor=1e-30)

    def bounds(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
        return Bounds.of(bounds_variants.bounds(model, self.check_variant(variant),
                                                self.shape_of(shape=shape)))

    def search_space(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
                     ) -> dict[str, list]:
        """``softmax.tile_bytes``: powers of two from 1 KiB whose buffers fit the DataRAM holding
        most of them, and the model's own; ``softmax.buffers`` 2 to 4 for ``multibuffer`` (its
        tiles fit the fewest buffers: :meth:`check_run` refuses the rest). ``direct``: none."""
        self.check_variant(variant)
        if variant == "direct":
            return {}
        space: dict[str, list] = {}
        if variant == "multibuffer":
            key = PARAMS.key("buffers")
            counts = list(range(int(key.lo), int(key.hi) + 1))
            space["softmax.buffers"] = sorted({*counts, model.softmax.buffers})
        banks = _banks(model, variant, min(space.get("softmax.buffers", [0])))
        per_bank = max(banks.count(b) for b in set(banks))
        tiles, t = set(), 1024
        while fits(model, per_bank, t):
            tiles.add(t)
            t *= 2
        if fits(model, per_bank, model.softmax.tile_bytes):
            tiles.add(model.softmax.tile_bytes)
        if tiles:
            space["softmax.tile_bytes"] = sorted(tiles)
        return space

    def calibration_candidates(
        self, model: HardwareModel, free_keys: Iterable[str], longest_shape: tuple[int, ...]
    ) -> list[Candidate]:
        return calibration_candidates(model, free_keys, longest_shape)


def _banks(model: HardwareModel, variant: str, buffers: int = 0) -> list[int]:
    """The DataRAM of each of the variant's TCM buffers (``buffers``: multibuffer's count, 0:
    ``softmax.buffers``)."""
    if variant == "pingpong":
        return [0, 1]  # the seed's one tile in DataRAM 0 and one in DataRAM 1
    if variant == "multibuffer":
        return [b % model.tcm.banks for b in range(buffers or model.softmax.buffers)]
    return ping_pong_banks(model)  # online, rows, resident's streamed part: one pair


def _largest_tile(model: HardwareModel, buffers: int) -> int:
    """The largest multiple of 4 of which ``buffers`` tiles fit one DataRAM."""
    lo, hi = 0, free_bank_bytes(model) // 4
    while lo < hi:  # largest t with ``buffers`` tiles of 4 t bytes fitting
        mid = (lo + hi + 1) // 2
        if fits(model, buffers, 4 * mid):
            lo = mid
        else:
            hi = mid - 1
    return 4 * lo


SOFTMAX = register_op(Softmax(), default=True)
