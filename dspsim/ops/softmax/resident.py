"""``resident``: the row stays in TCM, so it crosses the DDR port twice (one read, one write)
instead of the seed's five times. Written as its C would be.

Per row (:func:`resident_row`)::

    for (j = 0; j < chunks; j++)                       // copy in, tile by tile, on all channels
        vret_in[j] = IDMA_COPY(j % C, &in[off_j], &res[j], size_j);
    for (j = 0; j < chunks; j++) {                     // the max, tile by tile as it lands
        IDMA_WAIT(vret_in[j]); m_j = vecmaxf(&res[j], size_j); M = m_j > M ? m_j : M;
    }
    if (streamed) online pass 1 over the rest -> (m_s, c_s, d_s); M = max(M, m_s)
    for (b = 0; b < banks; b++) {                      // exp and sum in place, per DataRAM
        vecexpf_max(res_b, res_b, n_b, M); d += vecsum(res_b, n_b);
    }
    if (streamed) d += d_s * exp(c_s - M);             // vecexpf_max on one element
    inv = 1.0f / d;
    for (j = 0; j < chunks; j++) {                     // multiply and copy out, tile by tile
        vecmul(&res[j], &res[j], inv, size_j);
        vret_out[j] = IDMA_COPY(j % C, &res[j], &out[off_j], size_j);
    }
    if (streamed) online pass 2 over the rest
    for (j = 0; j < chunks; j++) IDMA_WAIT(vret_out[j]);

The resident part is the row's first elements, as many as the DataRAMs' free space holds in
whole vectors, bank 0 first. When the row does not fit, two ``softmax.tile_bytes`` stream
buffers (one per bank) come out of that space first and the rest is streamed with the
``online`` schedule (reported: ``partly_resident``, info; ``bounds`` gives ``resident_bytes``
and ``streamed_bytes``). A ``[rows, cols]`` input runs row after row.

The running max starts at -inf and the exp guards ``x - max`` (corrected, whatever
``softmax.max_init`` and ``softmax.guard_shifted_input`` say: they describe the seed's code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import IDMA_COPY, IDMA_WAIT, Proc
from dspsim.ops.softmax.layout import ResidentLayout, ping_pong_banks, resident_layout, tile_elems
from dspsim.ops.softmax.online import (
    Running,
    allocate_buffers,
    new_max,
    online_pass1,
    online_pass2,
    rescale,
    vecexpf_max,
)
from dspsim.ops.softmax.program import reciprocal

if TYPE_CHECKING:
    from dspsim.platform import Dsp

_F32 = np.float32


def resident_row(dsp: Dsp, dst: Ptr, src: Ptr, lay: ResidentLayout, res: list[Ptr | None],
                 bufs: list[Ptr]) -> Proc:
    core, channels = dsp.core, len(dsp.idma)
    chunks = lay.chunks

    def tcm(bank: int, off: int) -> Ptr:
        return res[bank] + off

    with dsp.pass_("load_max"):
        vret_in = []
        for j, (bank, off, row, size) in enumerate(chunks):
            vret_in.append((yield from IDMA_COPY(dsp, j % channels, src + row, tcm(bank, off),
                                                 size << 2, j)))
        big = _F32(-np.inf)
        for j, (bank, off, _, size) in enumerate(chunks):
            dsp.labels.tile, dsp.labels.buffer = j, bank
            yield from IDMA_WAIT(dsp, j % channels, vret_in[j], "wait_in")
            m_j = yield from core.call("vecmaxf", size, tcm(bank, off))
            big = new_max(m_j, big)
        dsp.labels.tile = dsp.labels.buffer = -1
        block = tile_elems(dsp.model)
        st = Running()
        if lay.streamed:
            yield from online_pass1(dsp, src + lay.resident, bufs, lay.streamed, block, "pingpong",
                                    st)
            big = new_max(st.max, big)

    with dsp.pass_("exp_sum"):
        total = _F32(0.0)
        for bank, count in enumerate(lay.per_bank):
            if count:
                yield from vecexpf_max(dsp, res[bank], res[bank], count, big)
                total = _F32(total + (yield from core.call("vecsum", count, res[bank])))
        if lay.streamed:  # the streamed part's sum, at its reference max, to the max
            total = _F32(total + (yield from rescale(dsp, bufs[0], st, big)))  # buffer 0 is free
        st.max, st.inv = big, reciprocal(dsp, total)

    with dsp.pass_("mul_out"):
        vret_out = []
        for j, (bank, off, row, size) in enumerate(chunks):
            dsp.labels.tile, dsp.labels.buffer = j, bank
            yield from core.call("vecmul", size, tcm(bank, off), tcm(bank, off), scalar=st.inv)
            vret_out.append((yield from IDMA_COPY(dsp, j % channels, tcm(bank, off), dst + row,
                                                  size << 2, j)))
        dsp.labels.tile = dsp.labels.buffer = -1
        if lay.streamed:
            yield from online_pass2(dsp, dst + lay.resident, src + lay.resident, bufs,
                                    lay.streamed, block, "pingpong", st)
        for j, vret in enumerate(vret_out):
            yield from IDMA_WAIT(dsp, j % channels, vret, "wait_out")


def softmax_resident(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int
                     ) -> Proc:
    model = dsp.model
    lay = resident_layout(model, cols)
    bufs = allocate_buffers(dsp, tm, ping_pong_banks(model)) if lay.streamed else []
    res = [tm.allocate(count << 2, bank, dsp.IVP_2N) if count else None
           for bank, count in enumerate(lay.per_bank)]
    if lay.streamed:
        dsp.warn("partly_resident",
                 f"a row of {4 * cols:,} bytes does not fit the DataRAMs' free space: "
                 f"{4 * lay.resident:,} bytes stay resident (one read, one write), "
                 f"{4 * lay.streamed:,} are streamed with the online schedule (two reads, one "
                 "write)", rows, severity="info")

    cycles_start = dsp.TIME_STAMP()
    for r in range(rows):
        yield from resident_row(dsp, dst + r * cols, src + r * cols, lay, res, bufs)
    cycles_stop = dsp.TIME_STAMP()
    for ptr in [p for p in res if p is not None] + bufs:
        tm.free(ptr)
    dsp.PROF(cycles_start, cycles_stop)
    return 0
