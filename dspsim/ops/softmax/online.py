"""The new softmax schedules, written to be read as their C would be: ``online`` and
``multibuffer`` (two passes with the online normaliser, Milakov & Gimelshein 2018),
``resident`` (:func:`resident_row`) and ``rows`` (:func:`tile_rows`).

Pass 1 reads the row once, keeping a running max ``m`` and a running sum ``d`` of exponentials,
rescaled when the max grows; pass 2 reads it again and writes ``exp(x - m) * (1 / d)``: two
reads and one write instead of the seed's three and two. Per tile of pass 1
(:func:`tile_max_sum`), branch-free::

    m_t = vecmaxf(x, n);                        // the tile's max
    m = m_t > m ? m_t : m;                      // the running max (a NaN m_t is ignored)
    c = m - c_old > 1.0f ? m : c_old;           // the sum's reference max (RESCALE_MARGIN)
    vecexpf_max(x, x, n, c);                    // in place: pass 1 writes nothing back
    s_t = vecsum(x, n);                         // the tile's sum at c
    x[0] = c_old; vecexpf_max(x, x, 1, c);      // r = exp(c_old - c): 1.0f exactly if c == c_old
    s_t = c > -INFINITY ? s_t : 0.0f;           // masked so far (every element -inf): the
    r = c > -INFINITY ? r : 1.0f;               // tile adds nothing, d stays 0
    d = d * r + s_t; c_old = c;

and after the last tile ``d *= exp(c - m)``: ``d`` is the sum of ``exp(x - m)``. The sum is
rescaled only once the max outgrows its reference by more than ``RESCALE_MARGIN`` (1.0): each
rescale's exp truncates toward zero in its Q24 range reduction, a relative bias up to 2^-24
that accumulates. On the seed's ramp (the max grows every tile), rescaling at every growth gave
errors of 9.8e-7 at 1,000,000 float32 (123 tiles) and 9e-5 with 256-byte tiles; deferred, one
or two rescales per row keep the seed's 1.9e-7. Terms are at most e^1 above the reference, so
tile sums cannot overflow, and ``x - c`` of the largest elements stays within 1 of 0, where
float32 subtracts exactly or nearly so. The rescale is the seed's ``vecexpf_max`` on one
element (IVP_LAVN / IVP_SAVN of one lane, the same Q24 reduction and ``expftblf`` polynomial:
40 cycles on J6) on the tile buffer's first element (dead once ``vecsum`` read it); it runs
every tile (timing never depends on values); the scalar selects and multiply-add are untimed.
Pass 2 per tile (:func:`tile_exp_mul`): ``vecexpf_max(x, x, n, m); vecmul(x, x, 1 / d, n)``
in place, then the tile is copied out.

Masked (-inf) elements: while every element so far is -inf, ``c`` is -inf and ``vecexpf_max``
of ``-inf - -inf`` gives +inf, which would make ``d`` +inf then NaN; the two selects skip such
a tile (``d`` stays 0 until a tile has a finite element). A row -inf throughout gives NaN (as
float64 and the seed's variants do): ``d`` is 0 and ``0 * exp(-inf - -inf)`` is ``0 * inf``.

``online`` streams through the seed's two buffers and channels (tile i on i % 2),
``multibuffer`` through ``softmax.buffers`` buffers over the DataRAMs, inputs and outputs on
separate channels over all of the core's (:func:`~dspsim.ops.stream.hb_dsp_stream_frame`).
Every new schedule starts the max at -inf and guards ``x - max`` (the seed's quirk switches
are not theirs) and runs a ``[rows, cols]`` input row after row (``rows``: whole rows a tile).

``resident`` (:func:`resident_row`) keeps the row in TCM, crossing the DDR port twice (one
read, one write) instead of the seed's five times::

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
whole vectors, bank 0 first (:func:`~dspsim.ops.softmax.layout.resident_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import IDMA_COPY, IDMA_WAIT, Proc
from dspsim.ops.rowwise import rows_per_tile
from dspsim.ops.softmax.layout import (
    STREAM_BUFFERS,
    ResidentLayout,
    buffer_banks,
    resident_layout,
    tile_elems,
)
from dspsim.ops.softmax.program import reciprocal
from dspsim.ops.stream import hb_dsp_stream_frame

if TYPE_CHECKING:
    from dspsim.platform import Dsp

_F32 = np.float32
RESCALE_MARGIN = _F32(1.0)  # move the sum's reference max once the max outgrows it by this


@dataclass
class Running:
    """The C's running state: the max ``m``, the sum ``d`` of ``exp(x - c)`` at the reference
    max ``c``; pass 2's ``1/d``."""

    max: np.float32 = _F32(-np.inf)
    ref: np.float32 = _F32(-np.inf)
    sum: np.float32 = _F32(0.0)
    inv: np.float32 = _F32(0.0)


# ----------------------------------------------------------------------------- kernels
def vecexpf_max(dsp: Dsp, z: Ptr, x: Ptr, n: int, max_value: Any, rows: int = 1) -> Proc:
    """The seed's kernel with the corrected guard (``x - max``); ``max_value`` per row. NaN
    inputs are reported (a model check, not in the C): vecexpf_max flags them and never uses
    the flag; the guard tests ``x - max`` here, so it never fires on finite input."""
    if dsp.move_data and n > 0:
        nans = int(np.count_nonzero(np.isnan(x.mem.f32(x, rows * n))))
        if nans:
            dsp.warn("nan_input", "NaN inputs: vecexpf_max flags them (b_nan) but never uses "
                     "the flag, so they flow through to the output", nans)
    yield from dsp.core.call("vecexpf_max", n, x, z, rows=rows, max_value=max_value,
                             guard_shifted_input=True)


def scalar_expf(dsp: Dsp, scratch: Ptr, x: np.float32, max_value: np.float32) -> Proc:
    """``exp(x - max)`` by vecexpf_max on a one-element vector at ``scratch`` (TCM)."""
    if dsp.move_data:
        scratch.mem.f32(scratch, 1)[0] = x
    yield from dsp.core.call("vecexpf_max", 1, scratch, scratch, max_value=max_value,
                             guard_shifted_input=True)
    return scratch.mem.f32(scratch, 1)[0] if dsp.move_data else _F32(1.0)


def new_max(m_t: np.float32, m: np.float32) -> np.float32:
    """``m_t > m ? m_t : m``."""
    return m_t if m_t > m else m


# ----------------------------------------------------------------------------- online
def tile_max_sum(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, st: Running, tile: int
                 ) -> Proc:
    """Pass 1: fold one tile into the running max and sum."""
    m_t = yield from dsp.core.call("vecmaxf", size, in_addr)
    st.max = new_max(m_t, st.max)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = st.max if _F32(st.max - st.ref) > RESCALE_MARGIN else st.ref
    yield from vecexpf_max(dsp, out_addr, in_addr, size, ref)
    s_t = yield from dsp.core.call("vecsum", size, out_addr)
    r = yield from scalar_expf(dsp, out_addr, st.ref, ref)
    if ref == -np.inf:  # every element so far is -inf (masked): the tile adds nothing yet
        s_t, r = _F32(0.0), _F32(1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        st.sum = _F32(_F32(st.sum * r) + s_t)
    st.ref = ref


def tile_exp_mul(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, st: Running, tile: int
                 ) -> Proc:
    """Pass 2: ``exp(x - m) * (1 / d)`` in place."""
    yield from vecexpf_max(dsp, out_addr, in_addr, size, st.max)
    yield from dsp.core.call("vecmul", size, out_addr, out_addr, scalar=st.inv)


def rescale(dsp: Dsp, scratch: Ptr, st: Running, big: np.float32) -> Proc:
    """``d * exp(c - big)``: the running sum at the max ``big`` (``scratch``: a dead TCM float)."""
    r = yield from scalar_expf(dsp, scratch, st.ref, big)
    with np.errstate(invalid="ignore", over="ignore"):
        return _F32(st.sum * r)


def online_row(dsp: Dsp, dst: Ptr, src: Ptr, bufs: list[Ptr], length: int, block: int,
               policy: str) -> Proc:
    """Softmax of one row of ``length`` float32: pass 1, ``1 / d``, pass 2."""
    st = Running()
    with dsp.pass_("max_sum"):
        yield from hb_dsp_stream_frame(dsp, src, src, bufs, length, block, tile_max_sum, st,
                                       False, policy)
        st.sum = yield from rescale(dsp, bufs[0], st, st.max)  # buffer 0 is free between passes
        st.ref = st.max
        st.inv = reciprocal(dsp, st.sum)
    with dsp.pass_("exp_mul"):
        yield from hb_dsp_stream_frame(dsp, dst, src, bufs, length, block, tile_exp_mul, st,
                                       True, policy)


def allocate_buffers(dsp: Dsp, tm: TileManager, buffers: int = STREAM_BUFFERS) -> list[Ptr]:
    """``buffers`` tiles of ``softmax.tile_bytes``, round robin over the DataRAMs."""
    return [tm.allocate(dsp.params.tile_bytes, bank, dsp.IVP_2N)
            for bank in buffer_banks(dsp.model, buffers)]


def softmax_streamed(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int,
                     multibuffer: bool) -> Proc:
    """``online`` (two buffers, the seed's channels) or ``multibuffer`` (``softmax.buffers``
    buffers over the DataRAMs, inputs and outputs on separate channels), row after row."""
    model = dsp.model
    policy = "split" if multibuffer else "pingpong"
    bufs = allocate_buffers(dsp, tm, model.softmax.buffers if multibuffer else STREAM_BUFFERS)
    block = tile_elems(model)

    cycles_start = dsp.TIME_STAMP()
    for r in range(rows):
        yield from online_row(dsp, dst + r * cols, src + r * cols, bufs, cols, block, policy)
    cycles_stop = dsp.TIME_STAMP()
    for buf in bufs:
        tm.free(buf)
    dsp.PROF(cycles_start, cycles_stop)
    return 0


# ----------------------------------------------------------------------------- resident
def resident_row(dsp: Dsp, dst: Ptr, src: Ptr, lay: ResidentLayout, res: list[Ptr | None],
                 bufs: list[Ptr]) -> Proc:
    """``resident`` on one row (module doc)."""
    core, channels, chunks = dsp.core, len(dsp.idma), lay.chunks

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
            yield from hb_dsp_stream_frame(dsp, src + lay.resident, src + lay.resident, bufs,
                                           lay.streamed, block, tile_max_sum, st, False)
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
            yield from hb_dsp_stream_frame(dsp, dst + lay.resident, src + lay.resident, bufs,
                                           lay.streamed, block, tile_exp_mul, st, True)
        for j, vret in enumerate(vret_out):
            yield from IDMA_WAIT(dsp, j % channels, vret, "wait_out")


def softmax_resident(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int
                     ) -> Proc:
    """``resident`` row after row; a row that does not fit streams its rest through two
    ``softmax.tile_bytes`` buffers (one per bank, allocated first) with the online schedule
    (reported: ``partly_resident``, info)."""
    lay = resident_layout(dsp.model, cols)
    bufs = allocate_buffers(dsp, tm) if lay.streamed else []
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


# ----------------------------------------------------------------------------- rows
def reciprocals(dsp: Dsp, sums: np.ndarray) -> np.ndarray:
    """``1.0f / d[r]`` per row; a zero sum gives +inf, which the model reports."""
    sums = np.asarray(sums, _F32)
    if dsp.move_data and not np.all(sums):
        dsp.warn("zero_sum", "the sum of exponentials of a row is 0: 1/sum is +inf and the "
                 "row's output inf/NaN", int(np.count_nonzero(sums == 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (_F32(1.0) / sums).astype(_F32)


def tile_rows(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, cols: int, tile: int) -> Proc:
    """``rows``: a tile of ``k = TILE_SIZE / (4 * cols)`` whole rows, each kernel once per row
    back to back (``rows=k``), each row's max its own::

        vecmaxf(x + r * cols, cols) -> m[r]               for r < k
        vecexpf_max(x + r * cols, x + r * cols, cols, m[r])
        vecsum(x + r * cols, cols) -> d[r]
        inv[r] = 1.0f / d[r]                              (scalar loop)
        vecmul(x + r * cols, x + r * cols, inv[r], cols)
    """
    core, k = dsp.core, size // cols
    m = yield from core.call("vecmaxf", cols, in_addr, rows=k)
    yield from vecexpf_max(dsp, out_addr, in_addr, cols, m, rows=k)
    d = yield from core.call("vecsum", cols, out_addr, rows=k)
    inv = reciprocals(dsp, np.atleast_1d(d))
    yield from core.call("vecmul", cols, out_addr, out_addr, rows=k,
                         scalar=inv if k > 1 else inv[0])


def softmax_rows(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int) -> Proc:
    """``rows``: tiles of whole rows ping-pong through two buffers (tile i in buffer and on
    channel i % 2), one read and one write; rows longer than a buffer each run the ``online``
    schedule (reported: ``row_too_long``, info). A 1-D input is one row."""
    model = dsp.model
    per_tile = rows_per_tile(model.softmax.tile_bytes, cols)
    bufs = allocate_buffers(dsp, tm)
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
