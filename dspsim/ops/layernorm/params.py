"""LayerNorm's parameters: the ``[layernorm]`` table of a model file."""

from __future__ import annotations

from typing import Any

from dspsim.errors import ConfigError
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    if p.tile_bytes % 4:
        raise ConfigError(
            f"layernorm.tile_bytes = {p.tile_bytes}: must be a multiple of 4 (float32)")
    if p.tile_bytes > model.tcm.bank_bytes:
        raise ConfigError(
            f"layernorm.tile_bytes = {p.tile_bytes}: larger than a DataRAM "
            f"(tcm.bank_bytes = {model.tcm.bank_bytes}); allowed 4 to {model.tcm.bank_bytes}"
        )


PARAMS = OpSchema(
    "layernorm",
    (
        # guess: like softmax.tile_bytes, 32 KiB of each 256 KiB DataRAM; holds whole rows only
        Key("layernorm.tile_bytes", int, "bytes per ping-pong buffer; a tile holds as many whole "
            "rows as fit (at least one)", default=32768, lo=4, hi=1 << 30, unit="bytes"),
        Key("layernorm.eps", float, "added to the variance before the square root",
            default=1e-5, lo=0.0, hi=1.0),
    ),
    check=_check,
)
