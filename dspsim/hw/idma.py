"""An iDMA channel: a descriptor FIFO served, in order, by one long-lived process.

``IDMA_COPY`` programs a descriptor (the core pays ``idma.setup_cycles``) and appends it to the
FIFO; the channel moves its bytes as requests of ``idma.burst_bytes``, at most
``idma.max_outstanding`` in flight, and finishes a descriptor before starting the next: that
order keeps the seed's write-back of a buffer ahead of the next prefetch into it. The Cadence
library's fixed-buffer mode too: :meth:`IdmaChannel.init_loop` gives a ring of N descriptors,
``idma_copy_desc`` adds one (waiting when all N are pending), :meth:`IdmaChannel.buffer_status`
counts those pending.

A transfer goes through the port of its external end. Between two external ends each burst is
read through the source's port and written through the destination's when its read completes,
holding its window place from read issue to write completion (:meth:`_walk_dual`: a write and a
read at one instant, the write first). An engine slower than its ports (the ESP32-S3's GDMA)
issues a burst no sooner than the previous burst's bytes at ``idma.engine_bytes_per_cycle``
after the previous issue, and waits ``idma.descriptor_cycles`` before each descriptor.

A 2-D descriptor (``idma_copy_2d_desc``) is one descriptor whose bursts are cut at row
boundaries (a 200-byte row in 64-byte bursts is 64+64+64+8). When a row is a whole number of
bursts the port sees a 1-D descriptor's bursts and the 1-D walk and its fast paths serve it.
Dual-ended, paced and cut-row transfers walk burst by burst, with no fast-forward: a sum of
per-row :func:`transfer_cycles` is not exact (the rows overlap in the window).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import simpy

from dspsim.config import Idma
from dspsim.errors import AllocationError, DspsimInputError
from dspsim.hw.clock import Walk, WalkState, drive, event_heap
from dspsim.hw.memory import Ptr
from dspsim.hw.port import MemoryPort
from dspsim.hw.repeats import Note, Stream, StreamRuns
from dspsim.probes import RunContext
from dspsim.ticks import cycles, ticks


@dataclass(eq=False)
class Transfer:
    """A descriptor and the handle ``IDMA_COPY`` returns (``vret``): ``nbytes`` in all (``rows
    * row_bytes``); a 1-D descriptor is one row, its pitches the row."""

    channel: int
    index: int
    src: Ptr
    dst: Ptr
    nbytes: int
    done: simpy.Event
    kind: str = "copy_in"  # copy_in: memory -> TCM, copy_out: TCM -> memory
    tile: int = -1
    pass_name: str = ""
    buffer: int = -1
    start: int = -1  # ticks (dspsim.hw.clock)
    end: int = -1
    rows: int = 1
    row_bytes: int = -1  # -1: nbytes (one row)
    src_pitch: int = -1  # -1: the row
    dst_pitch: int = -1

    def __post_init__(self) -> None:
        if self.row_bytes < 0:
            self.row_bytes = self.nbytes
        if self.src_pitch < 0:
            self.src_pitch = self.row_bytes
        if self.dst_pitch < 0:
            self.dst_pitch = self.row_bytes

    def aligned(self, burst_bytes: int) -> bool:
        """Its bursts are a 1-D descriptor's: one row, or whole bursts per row."""
        return self.rows == 1 or self.row_bytes % burst_bytes == 0

    def burst_sizes(self, burst_bytes: int) -> Iterator[int]:
        """Its bursts' bytes in issue order: each row cut in bursts, the last one partial."""
        full, rest = divmod(self.row_bytes, burst_bytes)
        for _ in range(self.rows):
            for _ in range(full):
                yield burst_bytes
            if rest:
                yield rest

    def note(self, st: Note, started: bool) -> bool:
        """A descriptor in flight (``started``) or queued, in a note: its shape, numbers,
        addresses (each end's moves with its memory) and start."""
        st.key.append((self.channel, self.kind, self.nbytes, self.rows, self.row_bytes,
                       self.src_pitch, self.dst_pitch, self.pass_name, self.buffer,
                       self.done.triggered, self.src.mem.name, self.dst.mem.name))
        if self.done.triggered:
            return False
        st.int_((self, "index"), self.index)
        st.int_((self, "tile"), self.tile)
        for end in ("src", "dst"):
            ptr = getattr(self, end)
            st.int_((_End(self, end), None), ptr.addr, ptr.mem.name)
        if started:
            st.time((self, "start"), self.start)
        return True

    def rows_of(self, ptr: Ptr) -> Iterator[tuple[int, int]]:
        """(address, bytes) of each row at ``ptr`` (its source or destination)."""
        pitch = self.src_pitch if ptr is self.src else self.dst_pitch
        return ((ptr.addr + r * pitch, self.row_bytes) for r in range(self.rows))


class _End:
    """A descriptor's end (``src`` / ``dst``, a frozen pointer) as an address a booked run moves
    on (:func:`dspsim.hw.repeats.assign`)."""

    __slots__ = ("transfer", "end")

    def __init__(self, transfer: Transfer, end: str):
        self.transfer, self.end = transfer, end

    def assign(self, addr: int) -> None:
        ptr = getattr(self.transfer, self.end)
        setattr(self.transfer, self.end, Ptr(ptr.mem, addr))


def span_bytes(rows: int, row_bytes: int, pitch: int) -> int:
    """The bytes a 2-D block covers from its first byte to its last."""
    return (rows - 1) * pitch + row_bytes


def check_block(src: Ptr, dst: Ptr, row_bytes: int, rows: int, src_pitch: int | None,
                dst_pitch: int | None) -> tuple[int, int]:
    """A descriptor's shape checked (one line naming what is wrong); returns its pitches."""
    if isinstance(rows, bool) or not isinstance(rows, Integral) or rows < 1:
        raise DspsimInputError(f"iDMA 2-D copy of rows={rows!r}: rows must be an integer >= 1")
    pitches = []
    for name, ptr, pitch in (("src_pitch", src, src_pitch), ("dst_pitch", dst, dst_pitch)):
        pitch = row_bytes if pitch is None else pitch
        if isinstance(pitch, bool) or not isinstance(pitch, Integral) or pitch < row_bytes:
            raise DspsimInputError(f"iDMA 2-D copy: {name} = {pitch!r} bytes is smaller than "
                                   f"its row of {row_bytes} bytes; allowed: an integer >= "
                                   f"{row_bytes}")
        if rows > 1:
            span = span_bytes(rows, row_bytes, pitch)
            try:
                ptr.mem.locate(ptr.addr, span)
            except AllocationError as e:
                raise AllocationError(
                    f"iDMA 2-D block of {rows} rows x {row_bytes} bytes, {name} {pitch}, at "
                    f"{ptr!r} spans {span} bytes: {e}") from None
        pitches.append(int(pitch))
    return pitches[0], pitches[1]


class IdmaChannel:
    """One channel: its FIFO, its serving process, its counters (ticks)."""

    def __init__(self, ctx: RunContext, index: int, name: str, cfg: Idma):
        self.env = env = ctx.env
        self.elide = ctx.elide
        self.index = index
        self.name = name
        self.setup_ticks = ticks(cfg.setup_cycles)  # what programming a descriptor costs the core
        self.burst_bytes = cfg.burst_bytes
        self.max_outstanding = cfg.max_outstanding
        self.tcm_end_required = cfg.tcm_end_required
        # the engine's own pace (0: none) and its cost per descriptor (module doc)
        rate = cfg.engine_bytes_per_cycle
        self.ticks_per_byte = ticks(1.0 / rate) if rate else 0
        self.descriptor_ticks = ticks(cfg.descriptor_cycles)
        self.recorder = ctx.recorder
        self.move_data = ctx.data
        self.accesses = ctx.accesses
        self.fifo: simpy.Store = simpy.Store(env)
        self.submitted = 0
        self.completed = 0
        self.busy_ticks = 0
        self.bytes_moved = 0
        self.ring: int | None = None  # idma_init_loop's descriptor count (None: the FIFO)
        self.current: Transfer | None = None
        self.issued: deque[Transfer] = deque()  # submitted, not yet done, oldest first
        # the descriptor moving now, with the data path on: its bytes landing and its walk
        self.lander: _Lander | None = None
        self.stream: Stream | None = None
        self._landed = (0, 0)  # what the lander had landed when a repeat run was booked
        self.process = env.process(self._serve())

    def stats(self) -> dict[str, float]:
        """Descriptors done, bytes moved, cycles busy moving them."""
        return {"descriptors": self.completed, "bytes": self.bytes_moved,
                "busy_cycles": cycles(self.busy_ticks)}

    def busy_until(self, t: int) -> int:
        """Busy ticks up to ``t`` (the present): the descriptors done, and the one moving."""
        current = self.current
        return self.busy_ticks + (t - current.start if current is not None else 0)

    def init_loop(self, descriptors: int) -> None:
        """``idma_init_loop(ch, buf, IDMA_1D_DESC, descriptors, ...)``: a fixed buffer of
        ``descriptors`` that ``idma_copy_desc`` fills in turn."""
        if isinstance(descriptors, bool) or not isinstance(descriptors, int) or descriptors < 1:
            raise DspsimInputError(f"idma_init_loop of {descriptors!r} descriptors: the "
                                   "buffer holds at least 1")
        if self.issued:
            raise DspsimInputError(f"idma_init_loop on {self.name} with descriptors pending")
        self.ring = descriptors

    def buffer_status(self) -> int:
        """``idma_buffer_status(ch)``: descriptors added and not yet done."""
        return len(self.issued)

    def when_pending_at_most(self, count: int) -> simpy.Event | None:
        """The event of the moment at most ``count`` descriptors are pending (``None``: now):
        the done of the one ``count`` places from the end (they finish in order)."""
        if len(self.issued) <= count:
            return None
        return self.issued[len(self.issued) - 1 - count].done

    def submit(self, src: Ptr, dst: Ptr, nbytes: int, rows: int = 1,
               src_pitch: int | None = None, dst_pitch: int | None = None, **tags) -> Transfer:
        """Append a descriptor (paid for by the core) to the FIFO: ``rows`` rows of ``nbytes``,
        at ``src_pitch`` / ``dst_pitch`` (``None``: the row)."""
        src_pitch, dst_pitch = check_block(src, dst, nbytes, rows, src_pitch, dst_pitch)
        if not (src.external or dst.external):
            raise DspsimInputError(f"iDMA copy {src!r} -> {dst!r}: one side must be an external "
                                   "memory (TCM-to-TCM not modelled)")
        if src.external and dst.external and self.tcm_end_required:
            raise DspsimInputError(
                f"iDMA copy {src!r} -> {dst!r}: between two external ends; one end of a "
                "transfer must be TCM (idma.tcm_end_required)")
        if self.ring is not None and len(self.issued) >= self.ring:
            raise DspsimInputError(f"{self.name}: idma_copy_desc with all {self.ring} "
                                   "descriptors of the buffer pending")
        rows = int(rows)
        t = Transfer(self.index, self.submitted, src, dst, rows * nbytes, self.env.event(),
                     rows=rows, row_bytes=nbytes, src_pitch=src_pitch, dst_pitch=dst_pitch,
                     **tags)
        self.submitted += 1
        self.issued.append(t)
        self.fifo.put(t)
        return t

    def _serve(self):
        env = self.env
        while True:
            t: Transfer = yield self.fifo.get()
            self.current = t
            t.start = env.now
            self.accesses.begin(self.name, t.start)
            yield from self._move(t)
            t.end = env.now
            if self.accesses.enabled:
                for ptr, is_write in ((t.src, False), (t.dst, True)):
                    for addr, nbytes in t.rows_of(ptr):
                        self.accesses.add(self.name, ptr.mem.name, addr, nbytes, is_write,
                                          t.start, t.end, f"{t.kind} #{t.index}", t.tile,
                                          t.pass_name)
            self.accesses.finish(self.name, t.end)
            self.busy_ticks += t.end - t.start
            self.bytes_moved += t.nbytes
            self.completed += 1
            self.issued.popleft()
            self.current = None
            self.recorder.record(self.name, t.kind, f"#{t.index}", t.start, t.end, t.nbytes,
                                 t.tile, t.pass_name, t.buffer)
            t.done.succeed()

    def note(self, st: Note) -> bool:
        """The channel's part of a note (:class:`dspsim.hw.repeats.Note`): its counters, its
        descriptors in flight and queued, the walk of the one moving; ``False`` where nothing
        may be booked (a walk the fast-forward does not know, a descriptor done, not let go)."""
        for attr in ("submitted", "completed", "bytes_moved"):
            st.int_((self, attr), getattr(self, attr))
        st.acc(self, "busy_ticks", self.busy_ticks)
        current = self.current
        if current is not None and current is not self.issued[0]:
            return False
        st.key.append((current is not None, len(self.fifo.items), len(self.issued), self.ring))
        for j, t in enumerate(self.issued):
            if not t.note(st, started=j == 0 and current is not None):
                return False
        if current is None:
            return True
        repeats = self.port_of(current).repeats  # the walk moving, if the stream runs follow it
        if self.stream is None or repeats is None or self.stream not in repeats.streams:
            return False
        self.stream.note(st)
        return True

    def known(self, t: Transfer) -> bool:
        """The fast-forward knows the transfer's walk: one port, 1-D bursts, no engine pace."""
        return not self.dual(t) and t.aligned(self.burst_bytes) and not self.ticks_per_byte

    @staticmethod
    def port_of(t: Transfer) -> MemoryPort:
        """The port a transfer's requests go through: that of its external end."""
        return (t.dst if t.dst.external else t.src).mem.port

    @staticmethod
    def dual(t: Transfer) -> bool:
        """Both ends external: every burst is read through one port and written through one."""
        return t.src.external and t.dst.external

    def _move(self, t: Transfer):
        """Move the descriptor's bytes burst by burst, after ``idma.descriptor_cycles``."""
        if self.descriptor_ticks:
            yield self.env.timeout(self.descriptor_ticks)
        state = WalkState(self.env.now)
        lander = self.lander = _Lander(t) if self.move_data else None
        stream = self.stream = self._stream(t)
        dual, known = self.dual(t), self.known(t)
        walk = (self._walk_dual(t, state, lander, stream) if dual
                else self._walk(t, state, lander, stream) if known
                else self._walk_rows(t, state, lander))  # a paced engine's too
        ports = {t.src.mem.port, t.dst.mem.port} if dual else {self.port_of(t)}
        for port in ports:  # a flow the stream runs do not know stops them (StreamRuns.woke)
            port.flows += 1
            if known and port.repeats is not None:
                port.repeats.enter(stream)
        stream.elides = self.elide
        yield from drive(self.env, walk, state, self.elide, lander.land if lander else None)
        for port in ports:
            port.flows -= 1
            if known and port.repeats is not None:
                port.repeats.leave(stream)
        if lander:
            lander.completed(t.nbytes, immediately=True)
        self.lander = self.stream = None

    def land_all(self) -> None:
        """Before a run is booked with the data path on: every descriptor pending lands, in
        order, the bytes it has left (each is done within the booked stretch; the objects go
        on as later descriptors), what the one moving had landed kept for :meth:`reland`."""
        for t in self.issued:
            lander = self.lander if t is self.current else None
            if lander is not None:
                self._landed = (lander.landed, lander.upto)
            (lander or _Lander(t)).completed(t.nbytes, immediately=True)

    def reland(self) -> None:
        """After: the descriptor moving (moved on by the booked periods) has landed what the
        one before had (its bytes from its own addresses)."""
        lander, t = self.lander, self.current
        if lander is not None and t is not None:
            landed, upto = self._landed
            lander.rebase(t)
            lander.completed(landed, immediately=True)
            lander.upto = upto
            if self.stream is not None:
                self.stream.ranges = self._stream(t).ranges

    def _stream(self, t: Transfer) -> Stream:
        ranges = tuple((p.mem, p.addr, p.addr + span_bytes(t.rows, t.row_bytes, pitch),
                        p is t.dst) for p, pitch in ((t.src, t.src_pitch), (t.dst, t.dst_pitch))
                       ) if self.move_data else ()
        return Stream(self.name, self.process, self.burst_bytes, self.max_outstanding,
                      t.nbytes, t.dst.external, ranges)

    def _walk(self, t: Transfer, state: WalkState, lander: _Lander | None, stream: Stream
              ) -> Walk:
        """Bursts of ``idma.burst_bytes``, at most ``max_outstanding`` in flight, from
        ``state.now``, yielding at each wait the elided driver would not pass; leaves
        ``state.now`` at the last completion. Bursts land in order. ``stream`` holds the walk's
        place, which :class:`~dspsim.hw.repeats.StreamRuns` may advance by periods."""
        port = self.port_of(t)
        name, request = self.name, port.request
        repeats = port.repeats
        queue = event_heap(self.env)  # queue[0][0]: what ``env.peek()`` reads
        burst, window = self.burst_bytes, self.max_outstanding
        now = state.now
        write = t.dst.external
        inflight = stream.inflight
        full, count = stream.full, stream.count
        rest = t.nbytes - full * burst
        i = 0
        while i < count:
            # the bursts whose waits the walk passes itself, booked by the port in one call
            if lander is None and stream.elides:
                i, now = port.stream(now, inflight, i, count, full, burst, rest, window, write,
                                     name, queue[0][0] if queue else math.inf)
                state.now = now
                if i == count:
                    break
            if len(inflight) == window:
                oldest = inflight.popleft()
                if oldest > now:
                    now = oldest
                    if not (stream.elides and (not queue or now < queue[0][0])):
                        # a wait the driver would not pass at once (``drive``): ask it
                        if repeats is None:
                            yield now
                        else:  # a stream run may move it on meanwhile
                            i, now = yield from self._wait_for_slot(stream, repeats, i, now)
                        if i == count:  # its last burst went in the steps skipped: woken
                            state.now = now  # where its last burst completes, it is done
                            break
                    state.now = now
                if lander:  # bursts complete in order
                    lander.completed((i - window + 1) * burst, immediately=not self.elide)
            inflight.append(request(now, burst if i < full else rest, write, name))
            i += 1
        stream.now = None  # the last burst is issued
        if inflight and inflight[-1] > now:  # FIFO port: the last burst ends last
            state.now = inflight[-1]

    def _wait_for_slot(self, stream: Stream, repeats: StreamRuns, i: int, now: int
                       ) -> Generator[int, None, tuple[int, int]]:
        """Wait for a window slot until ``now`` on a port whose stream runs may book steps
        ahead; return where the walk stands after."""
        env = self.env
        stream.i, stream.now = i, now
        yield now
        i, now = stream.i, stream.now
        while now == env.now and env.active_process is stream.process \
                and repeats.woke(stream):  # a real wake-up, steps ahead
            i, now = stream.i, stream.now
            if now > env.now:  # in another's role: wait as it would
                yield now
                i, now = stream.i, stream.now
        return i, now

    def _walk_dual(self, t: Transfer, state: WalkState, lander: _Lander | None,
                   stream: Stream) -> Walk:
        """Between two external ends, burst by burst: a read issued when the window has room
        (from read issue to write completion), its write when it completes; the clock goes to
        the earlier next action, and ends at the last write's completion."""
        read, write = t.src.mem.port.request, t.dst.mem.port.request
        name, window = self.name, self.max_outstanding
        sizes = t.burst_sizes(self.burst_bytes)
        size = next(sizes, 0)  # the next burst to read (0: none left)
        now = state.now
        reads: deque[tuple[int, int]] = deque()  # (read's completion, bytes): to write
        writes: deque[int] = deque()  # write completions, oldest first
        landed: deque[int] = deque()  # the bytes landed once each write completes
        moved, pace, paced = 0, self.ticks_per_byte, now  # paced: the engine's next read
        while size or reads:
            due = reads[0][0] if reads else math.inf  # the oldest read's data is in
            free = now if len(reads) + len(writes) < window else (
                writes[0] if writes else math.inf)  # a window slot
            free = max(free, paced)
            at = due if due <= free or not size else free
            if at > now:
                now = at
                yield now
            while writes and writes[0] <= now:  # bursts done: their slots free
                writes.popleft()
                upto = landed.popleft()
                if lander:
                    lander.completed(upto, immediately=not self.elide)
            if at == due:
                written = reads.popleft()[1]
                writes.append(write(now, written, True, name))
                moved += written
                landed.append(moved)
            else:
                reads.append((read(now, size, False, name), size))
                paced = now + size * pace
                size = next(sizes, 0)
        if writes and writes[-1] > now:  # FIFO port: the last write ends last
            now = writes[-1]
        state.now = now
        stream.now = None

    def _walk_rows(self, t: Transfer, state: WalkState, lander: _Lander | None) -> Walk:
        """A cut-row 2-D descriptor (or a paced engine's), burst by burst through one port as
        the 1-D walk issues; leaves ``state.now`` at the last completion."""
        request = self.port_of(t).request
        name, window, write = self.name, self.max_outstanding, t.dst.external
        now = state.now
        inflight: deque[tuple[int, int]] = deque()  # (completion, bytes landed by then)
        moved, pace, paced = 0, self.ticks_per_byte, now  # paced: the engine's next burst
        for size in t.burst_sizes(self.burst_bytes):
            if len(inflight) == window:
                oldest, upto = inflight.popleft()
                if oldest > now:
                    now = oldest
                    yield now
                    state.now = now
                if lander:  # bursts complete in order
                    lander.completed(upto, immediately=not self.elide)
            if paced > now:
                now = paced
                yield now
                state.now = now
            paced = now + size * pace
            moved += size
            inflight.append((request(now, size, write, name), moved))
        if inflight and inflight[-1][0] > now:  # FIFO port: the last burst ends last
            state.now = inflight[-1][0]

    def describe_waiting(self) -> str | None:
        """What this channel is stuck on, if anything (deadlock reports)."""
        if self.current is not None:
            return f"{self.name} (in descriptor #{self.current.index})"
        if self.fifo.items:
            return f"{self.name} ({len(self.fifo.items)} descriptors queued)"
        return None


class _Lander:
    """A descriptor's bytes landing in order as its bursts complete: byte ``k`` is byte ``k %
    row`` of row ``k // row``, at its end's pitch."""

    def __init__(self, t: Transfer):
        self.rebase(t)

    def rebase(self, t: Transfer) -> None:
        """Land ``t``'s bytes, none landed yet (a booked run moves the descriptor on)."""
        self.src = rows_view(t.src, t.rows, t.row_bytes, t.src_pitch)
        self.dst = rows_view(t.dst, t.rows, t.row_bytes, t.dst_pitch)  # writable
        self.row = max(t.row_bytes, 1)
        self.landed = self.upto = 0

    def completed(self, upto: int, immediately: bool) -> None:
        self.upto = upto
        if immediately:
            self.land()

    def land(self) -> None:
        if self.upto <= self.landed:
            return
        (r0, c0), (r1, c1) = divmod(self.landed, self.row), divmod(self.upto, self.row)
        src, dst = self.src, self.dst
        if r0 == r1:
            dst[r0, c0:c1] = src[r0, c0:c1]
        else:
            dst[r0, c0:] = src[r0, c0:]
            dst[r0 + 1:r1] = src[r0 + 1:r1]
            if c1:
                dst[r1, :c1] = src[r1, :c1]
        self.landed = self.upto


def rows_view(ptr: Ptr, rows: int, row_bytes: int, pitch: int) -> np.ndarray:
    """The ``rows x row_bytes`` block at ``ptr``, rows ``pitch`` apart, as a strided view."""
    flat = ptr.mem.read(ptr.addr, span_bytes(rows, row_bytes, pitch))
    step = flat.strides[0]
    return np.lib.stride_tricks.as_strided(flat, shape=(rows, row_bytes),
                                           strides=(pitch * step, step))

