"""Where the new softmax variants put things: pure functions of the model and the shape, shared
by the programs (what the C does) and ``bounds.py`` (what it costs), so the two cannot disagree
on a tile, a buffer or a channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dspsim.ops.base import align_up, free_bank_bytes
from dspsim.ops.stream import stream_channels

# the host's run_tcm_opt: the seed's two values, then the new schedules
VARIANT_CODES = {"direct": 0, "pingpong": 1, "online": 2, "resident": 3, "multibuffer": 4,
                 "rows": 5}
VARIANT_NAMES = {code: name for name, code in VARIANT_CODES.items()}
STREAM_BUFFERS = 2  # online, rows and the streamed part of resident: one ping-pong pair


def tile_elems(model: Any) -> int:
    """``TILE_SIZE >> 2``: float32 per tile."""
    return max(1, model.softmax.tile_bytes // 4)


def fits(model: Any, buffers: int, nbytes: int) -> bool:
    """Whether ``buffers`` buffers of ``nbytes``, each aligned to a vector, fit one DataRAM's
    free space (first fit from the bottom, as the tile manager allocates them)."""
    if buffers <= 0:
        return True
    align = model.core.vector_bytes
    return (buffers - 1) * align_up(nbytes, align) + nbytes <= free_bank_bytes(model)


def buffer_banks(model: Any, buffers: int = STREAM_BUFFERS) -> list[int]:
    """The DataRAM of each of ``buffers`` buffers: round robin over the banks (the ping-pong
    pair: buffer b in bank b, both in bank 0 with one bank)."""
    return [b % model.tcm.banks for b in range(buffers)]


def channels_used(policy: str, channels: int, write_back: bool, tiles: int) -> int:
    """Distinct channels a pass of ``tiles`` tiles programs (the window of the latency bound)."""
    ins, outs = stream_channels(policy, channels, write_back)
    if policy == "pingpong":
        return min(tiles, 2)
    return min(tiles, len(ins)) + (min(tiles, len(outs)) if write_back else 0)


@dataclass(frozen=True)
class ResidentLayout:
    """How ``resident`` holds a row of ``length`` float32: ``per_bank`` float32 in each DataRAM
    (the row's first ``resident``, bank 0 first); ``streamed``, the rest, through two ping-pong
    buffers (allocated first); ``chunks``, the resident copies as ``(bank, offset in the bank's
    buffer, offset in the row, elements)``, at most a tile each, never across banks."""

    length: int
    per_bank: tuple[int, ...]
    chunks: tuple[tuple[int, int, int, int], ...]

    @property
    def resident(self) -> int:
        return sum(self.per_bank)

    @property
    def streamed(self) -> int:
        return self.length - self.resident


def resident_layout(model: Any, length: int) -> ResidentLayout:
    """The largest resident prefix of a row of ``length`` float32 that the DataRAMs' free space
    holds: all of it when it fits; otherwise what is left beside the two stream buffers."""
    banks, align = model.tcm.banks, model.core.vector_bytes
    free = free_bank_bytes(model)
    whole = [free // align * align // 4] * banks  # vectors' worth per bank, nothing streamed
    if sum(whole) < length:
        stream = buffer_banks(model)
        tile = align_up(model.softmax.tile_bytes, align)
        whole = [max(0, free - stream.count(b) * tile) // align * align // 4
                 for b in range(banks)]
    per_bank, left = [], length
    for cap in whole:
        take = min(cap, left)
        per_bank.append(take)
        left -= take
    step = tile_elems(model)
    chunks, row = [], 0
    for bank, count in enumerate(per_bank):
        for off in range(0, count, step):
            chunks.append((bank, off, row + off, min(step, count - off)))
        row += count
    return ResidentLayout(length, tuple(per_bank), tuple(chunks))
