"""LayerNorm (RPC command 0x8001) as an :class:`~dspsim.ops.base.Op`: the proof that an operator
plugs in. ``program.py`` is the DSP side, ``params.py`` the ``[layernorm]`` table,
``reference.py`` the float64 answer, ``bounds.py`` the closed forms; its kernels are in
:mod:`dspsim.kernels.layernorm`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops.base import Op, Proc, error_summary
from dspsim.ops.layernorm import bounds as _bounds
from dspsim.ops.layernorm.params import PARAMS
from dspsim.ops.layernorm.program import (
    LAYERNORM_CMD,
    hb_dsp_layernorm,
    hbDSPLayerNormParam,
    rows_per_tile,
)
from dspsim.ops.layernorm.reference import default_input, reference_layernorm
from dspsim.ops.registry import register_op


class LayerNorm(Op):
    name = "layernorm"
    doc = "normalise each row of a float32 [rows, cols] tensor: (x - mean) / sqrt(var + eps)"
    cmd = LAYERNORM_CMD
    variants = {
        "pingpong": "whole rows tiled through two TCM buffers (the seed's ping-pong frame); "
                    "statistics then normalisation in TCM; one read and one write",
        "direct": "the kernels read and write DDR row by row: three reads and one write",
    }
    default_variant = "pingpong"
    params = PARAMS
    ndim = 2
    default_shape = (1024, 256)

    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 2, "banks": 2} if variant == "pingpong" else super().requirements(
            variant)

    def checks_params(self, variant: str) -> bool:
        return variant != "direct"  # the table's hardware check is the TCM tile's

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        if variant != "pingpong":
            return
        tile, row = model.layernorm.tile_bytes, 4 * shape[1]
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        if row > free:
            raise DspsimInputError(
                f"layernorm pingpong: a row of {shape[1]} float32 ({row} bytes) is larger than "
                f"a DataRAM's free space ({free} bytes: tcm.bank_bytes - tcm.reserved_bytes); "
                "allowed: the direct variant, or rows of at most "
                f"{free // 4} float32"
            )
        if rows_per_tile(tile, shape[1]) == 0 or tile > free:
            raise DspsimInputError(
                f"layernorm pingpong: layernorm.tile_bytes = {tile} must hold a row of "
                f"{shape[1]} float32 ({row} bytes) and fit a DataRAM's free space ({free} "
                f"bytes); allowed: {row} to {free}"
            )

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return default_input(shape)

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        return hbDSPLayerNormParam(shape[0], shape[1], input_addr, int(variant == "pingpong"))

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        return hb_dsp_layernorm(dsp, input, output, tm)

    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        return reference_layernorm(x, params.eps)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        cols = x.shape[-1]
        flat_out = out.reshape(-1)
        within = [True]

        def reference(part: slice) -> np.ndarray:  # the rows covering a slice of the output
            lo, hi = part.start, min(part.stop, flat_out.size)
            first = lo // cols
            ref = self.reference(x[first:-(-hi // cols)], params).reshape(-1)
            ref = ref[lo - first * cols:hi - first * cols]
            with np.errstate(invalid="ignore"):
                ok = np.abs(flat_out[lo:hi].astype(np.float64) - ref) <= np.maximum(
                    1e-5 * np.abs(ref), 1e-6)
            within[0] &= bool(np.all(ok | ~np.isfinite(ref)))
            return ref

        summary = error_summary(out, reference, floor=1e-6)
        summary["within_tolerance"] = within[0]
        return summary

    def search_space(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, list]:
        """``layernorm.tile_bytes`` for ``pingpong``: the tiles that hold at least one row and
        fit a DataRAM's free space (``tcm.bank_bytes - tcm.reserved_bytes``): exactly one row,
        the powers of two from 1 KiB, and the model's own. ``direct`` has no tile."""
        self.check_variant(variant)
        if variant != "pingpong":
            return {}
        row = 4 * shape[-1]
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        tiles = {row} if row <= free else set()
        t = 1024
        while t <= free:
            if t >= row:
                tiles.add(t)
            t *= 2
        if row <= model.layernorm.tile_bytes <= free:
            tiles.add(model.layernorm.tile_bytes)
        return {"layernorm.tile_bytes": sorted(tiles)} if tiles else {}

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
        return _bounds.bounds(model, variant, shape)


LAYERNORM = register_op(LayerNorm())
