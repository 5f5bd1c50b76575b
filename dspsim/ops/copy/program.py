"""The copy microbenchmark as its C would be: what a vendor's copy benchmark does between two
reads of the cycle counter.

- ``idma``: ``idma_init_loop(ch 0, buf, IDMA_1D_DESC, copy.ring_descriptors)`` once the timer
  runs; (``copy.prologue_cycles`` of cache maintenance when ``copy.timed_prologue``); one
  ``idma_copy_desc`` per ``copy.descriptor_bytes`` as soon as the buffer has room (for a TCM
  ring, also once the descriptor that last used its slot is done); ``while
  (idma_buffer_status(0) > 0) ;``; with ``copy.completion_interrupt``, the handler.
- ``memcpy``: the core's ``memcpy`` kernel (a vector load and store per iteration, through the
  data cache where cached), one call per descriptor's worth into a TCM ring, else one call;
  then ``MEMW`` before the timer is read, so posted stores (uncached or write-through) finish
  inside the span: the copy never reports more bytes per cycle than the port moves. (A
  write-back cache's dirty lines stay in the cache.)

Set-up, untimed: the source placed where ``copy.src`` says, the destination allocated. Landed
pieces are gathered into the host's output (before a ring slot is reused), so the output is
compared with the input byte for byte whatever the destination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dspsim.hw.idma import rows_view
from dspsim.hw.memory import Ptr
from dspsim.kernels.memcpy import memcpy_words
from dspsim.ops.base import HOST, TCM, free_bank_bytes
from dspsim.ops.copy.loop import flush, loop_copy
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1, Proc, at_byte, copy_bytes

if TYPE_CHECKING:
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

COPY_CMD = 0x8005  # a custom command
LOOP = 2  # hbDSPCopyParam.use_idma of the loop variant
CHANNEL = 0
ALIGN_BYTES = 128
# a ring cut by the copy itself: two slots of a power of two in whole aligned blocks
RING_MIN_BYTES = ALIGN_BYTES


@dataclass
class hbDSPCopyParam:  # noqa: N801 - named like the seed's structs
    nbytes: int
    input: int  # physical address of the source bytes in the host's memory
    use_idma: int  # 1: idma, 0: memcpy, 2: loop (LOOP)


@dataclass(frozen=True)
class Plan:
    """A copy of ``nbytes`` cut into pieces of ``piece_bytes`` (the last may be shorter) landing
    in ``slots`` slots in turn (a ring). 2-D (``rows > 1``): rows of ``nbytes / rows`` read
    ``src_pitch`` and written ``dst_pitch`` apart; pieces of whole rows, no ring."""

    nbytes: int
    piece_bytes: int
    slots: int
    rows: int = 1
    src_pitch: int = 0
    dst_pitch: int = 0

    @property
    def row_bytes(self) -> int:
        return self.nbytes // self.rows

    def piece_rows(self, i: int) -> int:
        """Rows of piece ``i`` (1 for a 1-D copy: the piece is its one row)."""
        return self.size(i) // self.row_bytes if self.rows > 1 else 1

    def src_offset(self, i: int) -> int:
        if self.rows == 1:
            return i * self.piece_bytes
        return i * (self.piece_bytes // self.row_bytes) * self.src_pitch

    def dst_offset(self, i: int) -> int:
        if self.rows == 1:
            return (i % self.slots) * self.piece_bytes
        return i * (self.piece_bytes // self.row_bytes) * self.dst_pitch

    def span(self, pitch: int) -> int:
        """Bytes from a 2-D block's first byte to its last at ``pitch``."""
        return (self.rows - 1) * pitch + self.row_bytes

    @property
    def pieces(self) -> int:
        return -(-self.nbytes // self.piece_bytes)

    def size(self, i: int) -> int:
        return min(self.piece_bytes, self.nbytes - i * self.piece_bytes)

    @property
    def one_call(self) -> bool:  # the destination holds it all: a core copies it in one call
        return self.slots * self.piece_bytes >= self.nbytes

    @property
    def dst_bytes(self) -> int:
        if self.rows > 1:
            return self.span(self.dst_pitch)
        return min(self.nbytes, self.slots * self.piece_bytes)

    @property
    def src_bytes(self) -> int:
        return self.span(self.src_pitch) if self.rows > 1 else self.nbytes


def plan(model: Any, params: Any, nbytes: int) -> Plan:
    """The pieces and slots of a copy (checked beforehand by ``Copy.check_run``)."""
    given = params.descriptor_bytes
    if params.rows > 1:
        row = nbytes // params.rows
        piece = given or nbytes
        return Plan(nbytes, piece, -(-nbytes // piece), params.rows,
                    params.src_pitch_bytes or row, params.dst_pitch_bytes or row)
    if params.dst != TCM:
        return Plan(nbytes, given or nbytes, -(-nbytes // (given or nbytes)))
    free = free_bank_bytes(model) // ALIGN_BYTES * ALIGN_BYTES
    if given:
        piece = given
    elif nbytes <= free_bank_bytes(model):
        piece = nbytes
    else:
        piece = 1 << ((free // 2).bit_length() - 1)  # two of them fit the DataRAM
    slots = max(1, min(-(-nbytes // piece), free // piece))
    return Plan(nbytes, piece, slots)


def _place(dsp: Dsp, tm: TileManager, where: str, nbytes: int, colour: int, what: str) -> Ptr:
    """A buffer of ``nbytes`` (rounded up to a word) in ``where`` (a memory, or TCM: a DataRAM
    of ``colour``)."""
    nbytes = -(-nbytes // 4) * 4
    if where == TCM:
        return tm.allocate(nbytes, min(colour, len(tm.banks) - 1), ALIGN_BYTES)
    mem = dsp.ddr if where == HOST else dsp.memory(where)
    return mem.add_block(nbytes, ALIGN_BYTES, what)


class _Gather:
    """The landed pieces, copied into the host's output buffer as each is known complete."""

    def __init__(self, dsp: Dsp, out: Ptr, dst: Ptr, p: Plan):
        self.on = dsp.move_data
        self.out, self.dst, self.plan = out, dst, p
        self.done = 0

    def upto(self, pieces: int) -> None:
        if not self.on:
            self.done = pieces
            return
        p = self.plan
        for i in range(self.done, pieces):  # one numpy copy per piece, not per byte
            slot = at_byte(self.dst, p.dst_offset(i))
            landed = rows_view(slot, p.piece_rows(i), p.size(i) // p.piece_rows(i),
                               p.dst_pitch or p.size(i))
            self.out.mem.write(self.out.addr + i * p.piece_bytes, landed.reshape(-1))
        self.done = max(self.done, pieces)


def hb_dsp_copy(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPCopyParam = dsp.ddr.load_struct(input)
    params, n = dsp.params, ptr.nbytes
    host_src = dsp.hb_dsp_mem_map(ptr.input, n)
    p = plan(dsp.model, params, n)
    # set-up, not timed: the source where copy.src says, the destination allocated
    if params.src == HOST and p.src_bytes == n:
        src = host_src
    else:
        src = _place(dsp, tm, params.src, p.src_bytes, XV_MEM_BANK_COLOR_0, "copy source")
        if dsp.move_data:
            rows = rows_view(src, p.rows, p.row_bytes, p.src_pitch or n)
            rows[:] = host_src.mem.read(host_src.addr, n).reshape(p.rows, p.row_bytes)
    if params.dst == HOST and p.dst_bytes == n:
        dst = output
    else:
        dst = _place(dsp, tm, params.dst, p.dst_bytes,
                     XV_MEM_BANK_COLOR_1 if params.src == TCM else XV_MEM_BANK_COLOR_0,
                     "copy destination")
    gather = _Gather(dsp, output, dst, p)

    cycles_start = dsp.TIME_STAMP()
    if ptr.use_idma == 1:  # waits for descriptors an earlier op left on the channel (none alone)
        yield from dsp.core.idma_init_loop(CHANNEL, params.ring_descriptors)
    dsp.begin_pass("copy")
    if params.timed_prologue and params.prologue_cycles:  # cache clean / invalidate
        yield from dsp.core.busy(params.prologue_cycles, "prologue")
    if ptr.use_idma == 1:
        yield from _idma_copy(dsp, src, dst, p, gather)
    else:
        yield from _memcpy(dsp, src, dst, p, gather, ptr.use_idma == LOOP)
    dsp.end_pass()
    cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)
    if dst is not output:
        gather.upto(p.pieces)
    # the DataRAMs and memories as the call found them, for the next task
    for where, buf, host in ((params.src, src, host_src), (params.dst, dst, output)):
        if where == TCM:
            tm.free(buf)
        elif buf is not host:
            buf.mem.free_block(buf)
    return 0


def _idma_copy(dsp: Dsp, src: Ptr, dst: Ptr, p: Plan, gather: _Gather) -> Proc:
    core, ch = dsp.core, dsp.idma[CHANNEL]
    yield from _cache_sync(dsp, src, p.src_bytes)  # the source's lines written back
    for i in range(p.pieces):
        dsp.labels.tile = i
        if i >= p.slots:  # the slot this piece lands in must have been filled and read
            yield from core.idma_poll(CHANNEL, p.slots - 1)
        gather.upto(i - ch.buffer_status())
        rows = p.piece_rows(i)
        yield from core.idma_copy_desc(CHANNEL, at_byte(dst, p.dst_offset(i)),
                                       at_byte(src, p.src_offset(i)), p.size(i) // rows, rows,
                                       p.src_pitch or None, p.dst_pitch or None)
    yield from core.idma_poll(CHANNEL, 0)  # while (idma_buffer_status(0) > 0) ;
    yield from _cache_sync(dsp, dst, p.dst_bytes)  # the destination's lines invalidated
    if dsp.params.completion_interrupt:  # the completion interrupt's handler
        handler = dsp.params.interrupt_handler_cycles
        if handler:
            yield from core.busy(handler, "interrupt handler")


def _cache_sync(dsp: Dsp, end: Ptr, nbytes: int) -> Proc:
    """The DMA driver's cache maintenance of a cached end, inside the span:
    ``copy.dma_cache_sync_cycles_per_line`` per line."""
    per_line, cache = dsp.params.dma_cache_sync_cycles_per_line, dsp.core.dcache
    if not per_line or cache is None or not (end.external and end.mem.cached):
        return
    line = cache.line_bytes
    cycles = per_line * ((end.addr + nbytes - 1) // line - end.addr // line + 1)
    yield from dsp.core.busy(cycles, "cache sync")


def _memcpy(dsp: Dsp, src: Ptr, dst: Ptr, p: Plan, gather: _Gather, loop: bool) -> Proc:
    """The memcpy kernel's calls, or the loop variant's loops (:mod:`dspsim.ops.copy.loop`),
    then the destination's flush (``copy.flush_destination``) and ``MEMW``."""
    core, params = dsp.core, dsp.params

    def one(s: Ptr, d: Ptr, nbytes: int) -> Proc:
        if loop:
            return _loop_piece(dsp, s, d, nbytes, params.access_bytes,
                               params.loop_cycles_per_iteration)
        if params.memcpy_access_bytes:  # the library's memcpy is a loop of known cost
            return _loop_piece(dsp, s, d, nbytes, params.memcpy_access_bytes,
                               params.memcpy_cycles_per_iteration)
        return core.call("memcpy", memcpy_words(nbytes), s, d)

    if p.one_call:
        yield from one(src, dst, p.nbytes)
    else:
        for i in range(p.pieces):
            dsp.labels.tile = i
            yield from one(at_byte(src, p.src_offset(i)), at_byte(dst, p.dst_offset(i)), p.size(i))
            gather.upto(i + 1)
    if params.flush_destination:  # esp_cache_msync: the dirty lines written back
        yield from flush(core, dst, p.dst_bytes)
    # MEMW before the timer is read: the stores still posted cross inside the span
    yield from core.memw(dst.mem if dst.external else None)


def _loop_piece(dsp: Dsp, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
                cycles_per_iteration: float) -> Proc:
    """One loop (the loop variant, or a memcpy run as one), then its bytes where it put them."""
    yield from loop_copy(dsp.core, src, dst, nbytes, access_bytes, cycles_per_iteration)
    if dsp.move_data:
        copy_bytes(dst, src, nbytes)
