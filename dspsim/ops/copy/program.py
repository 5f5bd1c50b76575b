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
- ``loop``: a core loop of known cost (:func:`loop_walk`), called as ``memcpy`` is, then
  ``MEMW``. Each iteration loads ``K`` = ``copy.access_bytes`` bytes then stores them
  (:func:`pieces_of`) and costs ``C`` = ``copy.loop_cycles_per_iteration`` when nothing misses.
  As the core's kernel walk (:mod:`dspsim.hw.core`): the load issues, the core waits for its
  data, ``C`` cycles pass, the store leaves at the iteration's end. An uncached end (or a
  ``write_through`` destination): every access a port request; a load blocks for its round
  trip, a store is posted to the write buffer (``core.write_buffer_entries``; full: the core
  waits for the oldest). A cached end (:mod:`dspsim.hw.dcache`): a missing line stalls a load
  for its fill; a store into a missing line fetches it (``dcache.write_allocate``) or, without
  allocation, goes through the write buffer; evicted dirty lines are posted write-backs (a
  later fill queues behind them). TCM (or a ``core_local`` memory): no request. Only
  iterations whose access reaches the cache with a new line, or a port, are visited (and,
  after one that brought a line in, the next: it may have evicted the other end's line, as
  when source and destination share a direct-mapped set); those between are ``C x count``
  cycles at once. Burst and tile run the walk alike.

Set-up, untimed: the source placed where ``copy.src`` says, the destination allocated. Landed
pieces are gathered into the host's output (before a ring slot is reused), so the output is
compared with the input byte for byte whatever the destination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dspsim.hw.clock import Walk, WalkState
from dspsim.hw.idma import rows_view
from dspsim.hw.memory import Ptr
from dspsim.kernels.memcpy import memcpy_words
from dspsim.ops.base import HOST, TCM, free_bank_bytes
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1, Proc, at_byte, copy_bytes
from dspsim.ticks import ticks

if TYPE_CHECKING:
    from dspsim.hw.core import Core
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

COPY_CMD = 0x8005  # a custom command
LOOP = 2  # hbDSPCopyParam.use_idma of the loop variant
CHANNEL = 0
ALIGN_BYTES = 128
# a ring cut by the copy itself: two slots of a power of two in whole aligned blocks
RING_MIN_BYTES = ALIGN_BYTES
VECTOR_BYTES = 16  # the loop's K = 32 is two accesses of this many bytes


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
        return i * self._step(self.src_pitch)

    def dst_offset(self, i: int) -> int:  # a 2-D copy has a slot per piece: i % slots is i
        return (i % self.slots) * self._step(self.dst_pitch)

    def _step(self, pitch: int) -> int:
        """Bytes from one piece's start to the next's (whole rows ``pitch`` apart in 2-D)."""
        return (self.piece_bytes // self.row_bytes) * pitch if self.rows > 1 else self.piece_bytes

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
    """The memcpy kernel's calls, or the loop variant's loops (:func:`loop_walk`),
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


# ----------------------------------------------------------------------------- the loop
def pieces_of(access_bytes: int, scalar_bytes: int = 0) -> tuple[int, ...]:
    """The accesses of one iteration's load (and store): 16-byte vectors for ``K > 16``; scalar
    accesses of ``scalar_bytes`` (``core.scalar_access_bytes``, 0: none) when ``K`` lies between
    (the LX7's 64-bit loop: two 32-bit loads, two stores); else one of ``K``."""
    if access_bytes > VECTOR_BYTES:
        return (VECTOR_BYTES,) * (access_bytes // VECTOR_BYTES)
    if 0 < scalar_bytes < access_bytes < VECTOR_BYTES:
        return (scalar_bytes,) * (access_bytes // scalar_bytes)
    return (access_bytes,)


class _End:
    """One end of the loop: which iterations reach the cache or a port, and what they cost."""

    def __init__(self, ptr: Ptr, access_bytes: int, cache: Any, write: bool,
                 scalar_bytes: int = 0):
        self.ptr, self.k, self.cache = ptr, access_bytes, cache
        self.mem = ptr.mem
        self.pieces = pieces_of(access_bytes, scalar_bytes)
        # a memory the core reaches on its own bus (core_local) is as TCM: no request
        self.reached = ptr.external and not ptr.mem.core_local
        self.cached = bool(self.reached and ptr.mem.cached and cache is not None
                           and (not write or cache.write_back))
        self.direct = self.reached and not self.cached  # every access a request
        self.posted = False  # the last store bypassed the cache (no allocation)

    def first(self, iterations: int) -> int:
        return 0 if self.reached else iterations

    def next_event(self, j: int, iterations: int) -> int:
        """The first iteration after ``j`` reaching a port or a new cache line (``iterations``:
        none)."""
        if self.direct or self.posted:
            return j + 1
        if not self.cached:
            return iterations
        line, addr, k = self.cache.line_bytes, self.ptr.addr, self.k
        last_line = (addr + j * k + k - 1) // line
        return min(iterations, max(j + 1, -(-((last_line + 1) * line - addr) // k)))

    def load(self, now: int, j: int, name: str) -> int:
        """Iteration ``j``'s load issued at ``now``: the cycle its data is there."""
        addr = self.ptr.addr + j * self.k
        for nbytes in self.pieces:  # one after another: each blocks
            if self.cached:
                now = max(now, self.cache.access(now, self.mem, addr, nbytes, False, name))
            else:
                now = max(now, self.mem.port.request(now, nbytes, False, name))
            addr += nbytes
        return now


def _store(end: _End, now: int, j: int, name: str, wb: Any, depth: int,
           state: WalkState) -> Walk:
    """Iteration ``j``'s store at ``now`` (``state.now``), into its lines or posted; its waits
    are store stalls."""
    addr = end.ptr.addr + j * end.k
    end.posted = False
    for nbytes in end.pieces:
        ready = end.cache.store(now, end.mem, addr, nbytes, name) if end.cached else None
        if ready is None:
            end.posted = end.cached
            if len(wb) == depth:  # full: wait for the oldest posted store
                ready = wb.popleft()
        if ready is not None and ready > now:
            state.stall += ready - now
            state.store_stall += ready - now
            now = ready
            yield now
            state.now = now
        if end.cached and not end.posted:
            addr += nbytes
            continue
        wb.append(end.mem.port.request(now, nbytes, True, name))
        addr += nbytes


def loop_walk(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
              cycles_per_iteration: float, state: WalkState) -> Walk:
    """The loop variant over ``nbytes`` from ``state.now`` (module doc), yielding each later
    time the core waits for; ``state`` ends at the loop's end, with its stalls."""
    iterations, c = nbytes // access_bytes, ticks(cycles_per_iteration)
    scalar = core.cfg.scalar_access_bytes
    load = _End(src, access_bytes, core.dcache, False, scalar)
    store = _End(dst, access_bytes, core.dcache, True, scalar)
    wb, depth = core.write_buffer, core.cfg.write_buffer_entries
    nl, ns = load.first(iterations), store.first(iterations)
    cache = core.dcache
    fills = cache.misses + cache.prefetches if cache is not None else 0
    j = min(nl, ns)
    now = state.now + ticks(core.cfg.call_overhead_cycles) + c * j
    while j < iterations:
        if j == nl:
            if now > state.now:
                yield now
                state.now = now
            ready = load.load(now, j, core.name)
            state.stall += ready - now
            now = ready
            nl = load.next_event(j, iterations)
        now += c
        if j == ns:
            yield now
            state.now = now
            yield from _store(store, now, j, core.name, wb, depth, state)
            now = state.now
            ns = store.next_event(j, iterations)
        if cache is not None and cache.misses + cache.prefetches != fills:
            # a line came in: it may have evicted the other end's line (a conflict), so the
            # next iteration goes through the cache again; one that fills nothing leaves it
            # as it found it, and so would every later one on the same lines
            fills = cache.misses + cache.prefetches
            nl = min(nl, j + 1) if load.cached else nl
            ns = min(ns, j + 1) if store.cached else ns
        nxt = min(nl, ns)
        now += c * (nxt - j - 1)
        j = nxt
    state.now = now


def _process(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
             cycles_per_iteration: float) -> Proc:
    state = WalkState(core.env.now)
    walk = loop_walk(core, src, dst, nbytes, access_bytes, cycles_per_iteration, state)
    return (yield from core.drive_walk(walk, state, src, dst))


def loop_copy(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
              cycles_per_iteration: float) -> Proc:
    """The loop as one core call: a process when it reaches a port, else one timeout; books
    its busy and stall cycles."""
    env, start = core.env, core.env.now
    core.accesses.begin(core.name, start)
    if src.external or dst.external:
        stall, store_stall = yield env.process(_process(core, src, dst, nbytes, access_bytes,
                                                             cycles_per_iteration))
        load_mem = src.mem if src.external else None
        store_mem = dst.mem if dst.external else None
        core.book_stall(load_mem or store_mem, stall - store_stall)
        core.book_stall(store_mem or load_mem, store_stall)
    else:
        yield env.timeout(ticks(core.cfg.call_overhead_cycles)
                          + nbytes // access_bytes * ticks(cycles_per_iteration))
        stall = 0
    core.compute_ticks += env.now - start - stall
    end = env.now
    for ptr, write in ((src, False), (dst, True)):
        core.accesses.add(core.name, ptr.mem.name, ptr.addr, nbytes, write, start, end,
                          "copy_loop", core.labels.tile, core.labels.pass_name)
    core.accesses.finish(core.name, end)
    core.recorder.record(core.name, "compute", "copy_loop", start, end, nbytes,
                         core.labels.tile, core.labels.pass_name, core.labels.buffer, stall)


def flush(core: Core, dst: Ptr, nbytes: int) -> Proc:
    """``esp_cache_msync``: the destination's dirty lines written back, the wait for the last a
    stall on its memory."""
    cache, env = core.dcache, core.env
    if cache is None or not (dst.external and dst.mem.cached and cache.write_back):
        return
    start = env.now
    done = cache.clean(start, dst.mem, dst.addr, nbytes, core.name)
    if done > start:
        yield env.timeout(done - start)
        core.book_stall(dst.mem, done - start)
        core.recorder.record(core.name, "compute", "cache_flush", start, env.now, 0,
                             core.labels.tile, core.labels.pass_name, core.labels.buffer,
                             done - start)
