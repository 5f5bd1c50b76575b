"""LayerNorm's parameters: the ``[layernorm]`` table of a model file."""

from __future__ import annotations

from typing import Any

from dspsim.ops.base import check_tile_bytes
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    check_tile_bytes("layernorm.tile_bytes", p.tile_bytes, model)


PARAMS = OpSchema(
    "layernorm",
    (
        # guess: like softmax.tile_bytes, 32 KiB of each 256 KiB DataRAM; holds whole rows only
        Key("layernorm.tile_bytes", int, "bytes per ping-pong buffer; a tile holds as many whole "
            "rows as fit (at least one)", default=32768, lo=4, hi=1 << 30, unit="bytes",
            multiple=4),
        Key("layernorm.eps", float, "added to the variance before the square root",
            default=1e-5, lo=0.0, hi=1.0),
    ),
    check=_check,
)
