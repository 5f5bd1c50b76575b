"""Two-pass softmax with the online normaliser (Milakov & Gimelshein 2018): ``online`` and
``multibuffer``, written to be read as their C would be.

Pass 1 reads the row once, keeping a running max ``m`` and a running sum ``d`` of exponentials,
rescaled when the max grows; pass 2 reads it again and writes ``exp(x - m) * (1 / d)``: two
reads and one write of the array instead of the seed's three and two. Per tile of pass 1
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

and after the last tile ``d *= exp(c - m)`` (one more one-element exp): ``d`` is the sum of
``exp(x - m)``. The sum is rescaled only once the max outgrows its reference by more than
``RESCALE_MARGIN`` (1.0): each rescale's exp truncates toward zero in its Q24 range reduction,
a relative bias up to 2^-24 that accumulates. On the seed's ramp (the max grows every tile),
rescaling at every growth gave errors of 9.8e-7 at 1,000,000 float32 (123 tiles) and 9e-5 with
256-byte tiles; deferred, one or two rescales per row keep the seed's 1.9e-7. Terms are at most
e^1 above the reference, so tile sums cannot overflow, and ``x - c`` of the largest elements
stays within 1 of 0, where float32 subtracts exactly or nearly so.

The rescale is the seed's ``vecexpf_max`` on one element (IVP_LAVN / IVP_SAVN of one lane, the
same Q24 reduction and ``expftblf`` polynomial: 40 cycles on J6), on the tile buffer's first
element (dead once ``vecsum`` read it: no TCM of its own). It runs every tile (timing never
depends on values); the scalar selects and multiply-add are not timed.

Pass 2 per tile (:func:`tile_exp_mul`): ``vecexpf_max(x, x, n, m); vecmul(x, x, 1 / d, n)`` in
place, then the tile is copied out. Both variants start the max at -inf and guard ``x - max``
(the seed's ``softmax.max_init`` and ``softmax.guard_shifted_input`` quirks are not theirs).

Masked (-inf) elements: while every element so far is -inf, ``c`` is -inf and ``vecexpf_max``
of ``-inf - -inf`` gives +inf, which would make ``d`` +inf then NaN; the two selects skip such
a tile (``d`` stays 0 until a tile has a finite element). A row -inf throughout gives NaN (no
softmax; float64: NaN), as the seed's variants do: ``d`` is 0 and ``0 * exp(-inf - -inf)``
is ``0 * inf``.

- ``online``: the passes through the seed's two buffers and channels (tile i on i % 2), with
  :func:`~dspsim.ops.stream.hb_dsp_stream_frame`.
- ``multibuffer``: through ``softmax.buffers`` buffers over the DataRAMs, inputs and outputs on
  separate channels spread over all of the core's.

A ``[rows, cols]`` input runs the two passes row after row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.ops.frames import Proc
from dspsim.ops.softmax.layout import multibuffer_banks, ping_pong_banks, tile_elems
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


# ----------------------------------------------------------------------------- model checks
def report_exp_input(dsp: Dsp, x: Ptr, n: int, rows: int = 1) -> None:
    """NaN inputs reach vecexpf_max, which flags them and never uses the flag (model check,
    not in the C). The guard tests ``x - max`` here, so it never fires on finite input."""
    if not dsp.move_data or n <= 0:
        return
    nans = int(np.count_nonzero(np.isnan(x.mem.f32(x, rows * n))))
    if nans:
        dsp.warn("nan_input", "NaN inputs: vecexpf_max flags them (b_nan) but never uses the "
                 "flag, so they flow through to the output", nans)


# ----------------------------------------------------------------------------- kernels
def vecexpf_max(dsp: Dsp, z: Ptr, x: Ptr, n: int, max_value: Any, rows: int = 1) -> Proc:
    """The seed's kernel with the corrected guard (``x - max``); ``max_value`` per row."""
    report_exp_input(dsp, x, n, rows)
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


# ----------------------------------------------------------------------------- tile functions
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


# ----------------------------------------------------------------------------- one row
def online_pass1(dsp: Dsp, src: Ptr, bufs: list[Ptr], length: int, block: int, policy: str,
                 st: Running) -> Proc:
    yield from hb_dsp_stream_frame(dsp, src, src, bufs, length, block, tile_max_sum, st,
                                   False, policy)


def online_pass2(dsp: Dsp, dst: Ptr, src: Ptr, bufs: list[Ptr], length: int, block: int,
                 policy: str, st: Running) -> Proc:
    yield from hb_dsp_stream_frame(dsp, dst, src, bufs, length, block, tile_exp_mul, st,
                                   True, policy)


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
        yield from online_pass1(dsp, src, bufs, length, block, policy, st)
        st.sum = yield from rescale(dsp, bufs[0], st, st.max)  # buffer 0 is free between passes
        st.ref = st.max
        st.inv = reciprocal(dsp, st.sum)
    with dsp.pass_("exp_mul"):
        yield from online_pass2(dsp, dst, src, bufs, length, block, policy, st)


# ----------------------------------------------------------------------------- the variants
def allocate_buffers(dsp: Dsp, tm: TileManager, banks: list[int]) -> list[Ptr]:
    return [tm.allocate(dsp.params.tile_bytes, bank, dsp.IVP_2N) for bank in banks]


def softmax_streamed(dsp: Dsp, src: Ptr, dst: Ptr, tm: TileManager, rows: int, cols: int,
                     multibuffer: bool) -> Proc:
    """``online`` (two buffers, the seed's channels) or ``multibuffer`` (``softmax.buffers``
    buffers over the DataRAMs, inputs and outputs on separate channels), row after row."""
    model = dsp.model
    banks = multibuffer_banks(model) if multibuffer else ping_pong_banks(model)
    policy = "split" if multibuffer else "pingpong"
    bufs = allocate_buffers(dsp, tm, banks)
    block = tile_elems(model)

    cycles_start = dsp.TIME_STAMP()
    for r in range(rows):
        yield from online_row(dsp, dst + r * cols, src + r * cols, bufs, cols, block, policy)
    cycles_stop = dsp.TIME_STAMP()
    for buf in bufs:
        tm.free(buf)
    dsp.PROF(cycles_start, cycles_stop)
    return 0
