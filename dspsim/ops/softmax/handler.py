"""The handler the firmware registers for command 0x1402: the seed's ``hb_dsp_softmax`` for
``run_tcm_opt`` 0 (direct) and 1 (ping-pong), unchanged; the new schedules for 2 and up
(:data:`~dspsim.ops.softmax.layout.VARIANT_CODES`)::

    switch (ptr->run_tcm_opt) {
    case 0: case 1: return seed_softmax(input, output, tm);      // program.py
    case 2: return softmax_online(...);        case 3: return softmax_resident(...);
    case 4: return softmax_multibuffer(...);   case 5: return softmax_rows(...);
    }

Every schedule takes a ``[rows, cols]`` input (``rows`` in the parameter block; 1 for the
seed's 1-D array) and computes softmax along its last axis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import Proc
from dspsim.ops.softmax import program
from dspsim.ops.softmax.layout import VARIANT_NAMES
from dspsim.ops.softmax.online import softmax_streamed
from dspsim.ops.softmax.program import hbDSPSoftmaxParam
from dspsim.ops.softmax.resident import softmax_resident
from dspsim.ops.softmax.rows import softmax_rows

if TYPE_CHECKING:
    from dspsim.platform import Dsp


def hb_dsp_softmax(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPSoftmaxParam = dsp.ddr.load_struct(input)
    variant = VARIANT_NAMES[ptr.run_tcm_opt]
    if variant in ("direct", "pingpong"):
        return (yield from program.hb_dsp_softmax(dsp, input, output, tm))
    src = dsp.hb_dsp_mem_map(ptr.input, ptr.data_size)
    rows = ptr.rows
    cols = (ptr.data_size >> 2) // rows
    if variant == "resident":
        return (yield from softmax_resident(dsp, src, output, tm, rows, cols))
    if variant == "rows":
        return (yield from softmax_rows(dsp, src, output, tm, rows, cols))
    return (yield from softmax_streamed(dsp, src, output, tm, rows, cols,
                                        multibuffer=variant == "multibuffer"))
