"""Command 0x1402's handler: the seed's ``hb_dsp_softmax`` (``run_tcm_opt`` 0: direct, 1:
ping-pong; passes in ``program.py``), the new schedules switched in ahead for codes from 2
(:data:`~dspsim.ops.softmax.layout.VARIANT_CODES`)::

    switch (ptr->run_tcm_opt) {
    case 2: return softmax_online(...);        case 3: return softmax_resident(...);
    case 4: return softmax_multibuffer(...);   case 5: return softmax_rows(...);
    }   // 0 and 1: the seed's code, below

Every schedule computes softmax along the last axis of ``[rows, cols]`` (``rows`` in the
parameter block; 1 for the seed's array).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1, Proc
from dspsim.ops.softmax.layout import VARIANT_NAMES
from dspsim.ops.softmax.online import softmax_streamed
from dspsim.ops.softmax.program import (
    check_inf_input,
    dsp_softmax,
    hbDSPSoftmaxParam,
    ping_pong_softmax,
)
from dspsim.ops.softmax.resident import softmax_resident
from dspsim.ops.softmax.rows import softmax_rows

if TYPE_CHECKING:
    from dspsim.platform import Dsp


def hb_dsp_softmax(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPSoftmaxParam = dsp.ddr.load_struct(input)
    src = dsp.hb_dsp_mem_map(ptr.input, ptr.data_size)
    dst = output
    rows = ptr.rows  # 1 in the seed; a [rows, cols] input runs its rows one after the other
    variant = VARIANT_NAMES[ptr.run_tcm_opt]
    check_inf_input(dsp, src, ptr.data_size >> 2)  # the model's report, untimed
    if variant not in ("direct", "pingpong"):  # the new schedules (not in the seed)
        cols = (ptr.data_size >> 2) // rows
        if variant == "resident":
            return (yield from softmax_resident(dsp, src, dst, tm, rows, cols))
        if variant == "rows":
            return (yield from softmax_rows(dsp, src, dst, tm, rows, cols))
        return (yield from softmax_streamed(dsp, src, dst, tm, rows, cols,
                                            multibuffer=variant == "multibuffer"))

    TILE_SIZE = dsp.params.tile_bytes  # noqa: N806 - the seed's macro
    if dsp.params.schedule == "split":  # inputs on channel 0, outputs on channel 1
        dsp.channel_map = lambda channel, kind: 0 if kind == "copy_in" else 1
    if ptr.run_tcm_opt:  # ping-pong optimisation
        src_0 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_0, dsp.IVP_2N)
        dst_0 = src_0
        src_1 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_1, dsp.IVP_2N)
        dst_1 = src_1
        src_idma = [src_0, src_1]
        dst_idma = [dst_0, dst_1]
        length = (ptr.data_size >> 2) // rows
        block = TILE_SIZE >> 2

        cycles_start = dsp.TIME_STAMP()
        for r in range(rows):
            yield from ping_pong_softmax(dsp, dst + r * length, src + r * length, src_idma,
                                         dst_idma, length, block)
        tm.free(src_0)
        tm.free(src_1)
        cycles_stop = dsp.TIME_STAMP()
    else:  # direct call to DDR
        cycles_start = dsp.TIME_STAMP()
        N = (ptr.data_size >> 2) // rows  # noqa: N806
        # for (r = 0; r < rows; r++): alike rows booked at once, their values as one batch
        yield from dsp.row_loop(
            rows, lambda r: dsp_softmax(dsp, src + r * N, N, dst + r * N),
            lambda lo, hi: dsp_softmax(dsp, src + lo * N, N, dst + lo * N, hi - lo), N)
        cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)  # self_cycles = cycles_stop - cycles_start; DSP_LOGI
    return 0
