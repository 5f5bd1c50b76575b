"""``rows``: softmax along the last axis of a ``[rows, cols]`` tensor with whole rows in TCM,
one read and one write of the tensor. Written as its C would be.

Each tile holds ``k = TILE_SIZE / (4 * cols)`` whole rows; tiles ping-pong through two buffers
(:func:`~dspsim.ops.stream.hb_dsp_stream_frame`, tile i in buffer and on channel i % 2). Per
tile (:func:`tile_rows`), each kernel runs once per row, back to back (``rows=k``)::

    vecmaxf(x + r * cols, cols) -> m[r]               for r < k
    vecexpf_max(x + r * cols, x + r * cols, cols, m[r])
    vecsum(x + r * cols, cols) -> d[r]
    inv[r] = 1.0f / d[r]                              (scalar loop)
    vecmul(x + r * cols, x + r * cols, inv[r], cols)

then the tile is copied out. Rows longer than a buffer each run the ``online`` schedule (two
reads, one write; reported: ``row_too_long``, info). A 1-D input is one row. Each row's max is
its own (no running max) and the exp guards ``x - max`` whatever
``softmax.guard_shifted_input`` says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import Proc
from dspsim.ops.rowwise import rows_per_tile
from dspsim.ops.softmax.layout import ping_pong_banks, tile_elems
from dspsim.ops.softmax.online import allocate_buffers, online_row, vecexpf_max
from dspsim.ops.stream import hb_dsp_stream_frame

if TYPE_CHECKING:
    from dspsim.platform import Dsp

_F32 = np.float32


def reciprocals(dsp: Dsp, sums: np.ndarray) -> np.ndarray:
    """``1.0f / d[r]`` per row; a zero sum gives +inf, which the model reports."""
    sums = np.asarray(sums, _F32)
    if dsp.move_data and not np.all(sums):
        dsp.warn("zero_sum", "the sum of exponentials of a row is 0: 1/sum is +inf and the "
                 "row's output inf/NaN", int(np.count_nonzero(sums == 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (_F32(1.0) / sums).astype(_F32)


def tile_rows(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, cols: int, tile: int) -> Proc:
    core, k = dsp.core, size // cols
    m = yield from core.call("vecmaxf", cols, in_addr, rows=k)
    yield from vecexpf_max(dsp, out_addr, in_addr, cols, m, rows=k)
    d = yield from core.call("vecsum", cols, out_addr, rows=k)
    inv = reciprocals(dsp, np.atleast_1d(d))
    yield from core.call("vecmul", cols, out_addr, out_addr, rows=k,
                         scalar=inv if k > 1 else inv[0])


def softmax_rows(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int) -> Proc:
    model = dsp.model
    per_tile = rows_per_tile(model.softmax.tile_bytes, cols)
    bufs = allocate_buffers(dsp, tm, ping_pong_banks(model))
    if not per_tile:
        dsp.warn("row_too_long",
                 f"a row of {4 * cols:,} bytes does not fit a {model.softmax.tile_bytes:,}-byte "
                 "tile (softmax.tile_bytes): each row runs the online schedule instead (two "
                 "reads and one write of the row instead of one and one)", rows, severity="info")

    cycles_start = dsp.TIME_STAMP()
    if per_tile:
        with dsp.pass_("rows"):
            yield from hb_dsp_stream_frame(dsp, dst, src, bufs, rows * cols, per_tile * cols,
                                           tile_rows, cols, True, "pingpong")
    else:
        for r in range(rows):
            yield from online_row(dsp, dst + r * cols, src + r * cols, bufs, cols,
                                  tile_elems(model), "pingpong")
    cycles_stop = dsp.TIME_STAMP()
    for buf in bufs:
        tm.free(buf)
    dsp.PROF(cycles_start, cycles_stop)
    return 0
