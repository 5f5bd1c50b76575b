"""Softmax's parameters: the ``[softmax]`` table of a model file.

The quirk switches (``max_init``, ``guard_shifted_input``) and ``schedule`` describe the seed's
code (``pingpong``; the guard also ``direct``); the new variants are written corrected whatever
they say. ``buffers`` is ``multibuffer``'s; ``tile_bytes`` every TCM variant's tile, which must
fit a DataRAM (checked with the model) and its free space (checked when a variant runs:
:meth:`dspsim.ops.softmax.Softmax.check_run`).
"""

from __future__ import annotations

from typing import Any

from dspsim.ops.base import check_tile_bytes
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    check_tile_bytes("softmax.tile_bytes", p.tile_bytes, model)


PARAMS = OpSchema(
    "softmax",
    (
        # guess: the seed does not give TILE_SIZE (models/j6.toml says why 32 KiB)
        Key("softmax.tile_bytes", int, "TILE_SIZE: bytes per ping-pong tile (multiple of 4); "
            "every TCM variant's tile", default=32768, lo=4, hi=1 << 30, unit="bytes",
            multiple=4),
        Key("softmax.max_init", str, "running max start in the seed's ping-pong path: 'zero' as "
            "the seed's C, '-inf' corrected (the new variants always start at -inf)",
            default="zero", choices=("zero", "-inf")),
        Key("softmax.schedule", str, "pingpong's channels: 'seed': buffer b uses channel b for "
            "in and out; 'split': inputs on channel 0, outputs on channel 1",
            default="seed", choices=("seed", "split")),
        Key("softmax.guard_shifted_input", bool, "the seed's vecexpf_max overflow guard (pingpong, "
            "direct) tests x - max (true, corrected) or the raw x (false, as the seed); the new "
            "variants always test x - max", default=False),
        Key("softmax.buffers", int, "multibuffer: TCM buffers of tile_bytes, spread over the "
            "DataRAMs (tile i in buffer i % buffers)", default=3, lo=2, hi=4, unit="buffers"),
    ),
    check=_check,
)
