"""Softmax's parameters: the ``[softmax]`` table of a model file."""

from __future__ import annotations

from typing import Any

from dspsim.errors import ConfigError
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    if p.tile_bytes % 4:
        raise ConfigError(f"softmax.tile_bytes = {p.tile_bytes}: must be a multiple of 4 (float32)")
    if p.tile_bytes > model.tcm.bank_bytes:
        raise ConfigError(
            f"softmax.tile_bytes = {p.tile_bytes}: larger than a DataRAM "
            f"(tcm.bank_bytes = {model.tcm.bank_bytes}); allowed 4 to {model.tcm.bank_bytes}"
        )


PARAMS = OpSchema(
    "softmax",
    (
        # guess: the seed does not give TILE_SIZE (models/j6.toml says why 32 KiB)
        Key("softmax.tile_bytes", int, "TILE_SIZE: bytes per ping-pong tile (multiple of 4)",
            default=32768, lo=4, hi=1 << 30, unit="bytes"),
        Key("softmax.max_init", str, "running max start in the ping-pong path: 'zero' as the "
            "seed's C, '-inf' corrected", default="zero", choices=("zero", "-inf")),
        Key("softmax.schedule", str, "'seed': buffer b uses channel b for in and out; 'split': "
            "inputs on channel 0, outputs on channel 1", default="seed",
            choices=("seed", "split")),
        Key("softmax.guard_shifted_input", bool, "vecexpf_max's overflow guard tests x - max "
            "(true, corrected) or the raw x (false, as the seed)", default=False),
    ),
    check=_check,
)
