"""The fully connected op's parameters: the ``[fc]`` table of a model file.

Defaults are the AmebaLite SDK example's (fact): ``input_zero_bias = 0``, ``out_multiplier =
1776441054``, ``out_shift = -9``, ``out_zero_bias = -128``, chunks of 128 rows; the weights in
the host's memory (the example's PSRAM).
"""

from __future__ import annotations

from typing import Any

from dspsim.ops.base import HOST, check_memory_key
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    check_memory_key("fc.weights", p.weights, model)


PARAMS = OpSchema(
    "fc",
    (
        Key("fc.input_zero_bias", int, "added to every input before the multiply (TFLite's "
            "input_offset, minus the input zero point)", default=0, lo=-127, hi=128),
        Key("fc.out_multiplier", int, "requantization multiplier (Q31)", default=1776441054,
            lo=0, hi=(1 << 31) - 1),
        Key("fc.out_shift", int, "requantization shift: > 0 left before the multiply, < 0 a "
            "rounding right shift after it", default=-9, lo=-31, hi=30),
        Key("fc.out_zero_bias", int, "added to the requantized value before the clamp to int8 "
            "(the output zero point)", default=-128, lo=-128, hi=127),
        Key("fc.tile_rows", int, "pingpong: rows of weights fetched per chunk (each chunk's "
            "buffer must fit a DataRAM)", default=128, lo=1, hi=1 << 20, unit="rows"),
        Key("fc.weights", str, "where the weights live: host (the host's memory, host.memory), "
            "a memory of the model, or tcm (direct only: a DataRAM)", default=HOST),
    ),
    check=_check,
)
