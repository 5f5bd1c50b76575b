"""A DSP core: runs registered kernels against TCM or an external memory, programs and waits on
iDMA descriptors.

Kernels are generators (``yield from core.call(name, ...)``) returning what the C returns.
Against TCM a call is one timeout of its closed-form cost. Against an uncached external memory
(J6's DDR) every vector load is a request on its port when the core reaches it, stalling the
core until the data is back; stores are posted to a write buffer of
``core.write_buffer_entries``, stalling only when it is full. One event per access, none per
cycle. Through a data cache (:mod:`dspsim.hw.dcache`) the walk pays per line missed; runs of
alike iterations are booked at once (:class:`dspsim.hw.repeats.IterationRuns`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

import simpy

from dspsim.config import Core as CoreCfg
from dspsim.errors import DspsimInputError
from dspsim.hw.clock import Walk, WalkState, drive
from dspsim.hw.dcache import DataCache
from dspsim.hw.idma import IdmaChannel, Transfer, check_block
from dspsim.hw.memory import Ptr
from dspsim.hw.repeats import IterationRuns, Note
from dspsim.kernels import get_kernel
from dspsim.kernels.shapes import LoopShape
from dspsim.probes import RunContext
from dspsim.ticks import cycles, ticks

Proc = Generator[simpy.Event, Any, Any]
# Elementwise kernel numerics run in slices of this many elements (bounded temporaries).
NUMERICS_CHUNK_ELEMENTS = 1 << 16


class Core:
    """One core: its kernel calls, its iDMA programming and waits, its accounting (ticks)."""

    def __init__(self, ctx: RunContext, name: str, cfg: CoreCfg, idma: list[IdmaChannel],
                 dcache: DataCache | None = None):
        self.env = ctx.env
        self.elide = ctx.elide
        self.name = name
        self.cfg = cfg
        self.idma = idma
        self.dcache = dcache
        self.recorder = ctx.recorder
        self.warn = ctx.warn
        self.move_data = ctx.data
        self.accesses = ctx.accesses
        self.labels = ctx.labels(name)  # what the op is doing now, stamped on every trace row
        # the posted stores' completion times, oldest first (at most write_buffer_entries)
        self.write_buffer: deque[int] = deque()
        self.waiting_for: str | None = None
        self.timed = True  # False: kernel calls compute values only (Dsp.untimed)
        self.known_runs: dict = {}  # periods of alike iterations found (IterationRuns)
        # accounting, in ticks (dspsim.hw.clock; stats() reports cycles)
        self.compute_ticks = 0  # kernels' issue cycles and overheads, descriptor programming
        self.stall_ticks: dict[str, int] = {}  # memory -> ticks stalled on it
        self.idma_wait_ticks = {"wait_in": 0, "wait_out": 0}

    def stats(self) -> dict[str, Any]:
        """Busy (compute) cycles, cycles stalled on each memory, cycles waiting for iDMA input
        and output copies, and its data cache's counters (if any)."""
        out: dict[str, Any] = {
            "busy_cycles": cycles(self.compute_ticks),
            "stall_cycles": {m: cycles(t) for m, t in self.stall_ticks.items()},
            "idma_wait_cycles": {k: cycles(t) for k, t in self.idma_wait_ticks.items()}}
        if self.dcache is not None:
            out["dcache"] = self.dcache.stats()
        return out

    def note(self, st: Note) -> bool:
        """The core's part of a note (:class:`dspsim.hw.repeats.Note`): waiting on nothing
        (``False`` if it is), its write buffer's stores in flight, its counters, its data
        cache's (which the alike iterations must leave untouched)."""
        if self.waiting_for is not None:
            return False
        now, wb = st.now, self.write_buffer
        st.key.append((tuple(t > now for t in wb), tuple(sorted(self.stall_ticks)),
                       tuple(sorted(self.idma_wait_ticks)),
                       repr(self.dcache.stats()) if self.dcache is not None else None))
        for i, t in enumerate(wb):
            if t > now:
                st.time((wb, i), t)
        st.acc(self, "compute_ticks", self.compute_ticks)
        for counters in (self.stall_ticks, self.idma_wait_ticks):
            for k in sorted(counters):
                st.acc(counters, k, counters[k])
        return True

    @property
    def ddr_stall_cycles(self) -> float:
        """Cycles stalled on every memory together."""
        return cycles(sum(self.stall_ticks.values()))

    def idma_copy(self, channel: int, src: Ptr, dst: Ptr, nbytes: int, kind: str,
                  rows: int = 1, src_pitch: int | None = None, dst_pitch: int | None = None
                  ) -> Proc:
        """Program a descriptor on ``channel``: costs the core ``idma.setup_cycles``. With
        ``rows > 1`` it is 2-D (``idma_copy_2d_desc``): ``rows`` rows of ``nbytes`` each, row
        ``r`` from ``src + r * src_pitch`` to ``dst + r * dst_pitch`` (pitches in bytes,
        ``None``: the row), still one descriptor and one set-up (:mod:`dspsim.hw.idma`)."""
        check_block(src, dst, nbytes, rows, src_pitch, dst_pitch)  # before the set-up
        ch = self.idma[channel]
        if ch.ring is not None:  # ring mode: wait for a free descriptor
            event = ch.when_pending_at_most(ch.ring - 1)
            if event is not None:
                yield from self._wait_event(event, ch, "wait_ring")
        start = self.env.now
        setup = self.idma[channel].setup_ticks
        if setup:
            yield self.env.timeout(setup)
        self.compute_ticks += setup
        tcm_side = dst if kind == "copy_in" else src
        t = self.idma[channel].submit(src, dst, nbytes, rows, src_pitch, dst_pitch, kind=kind,
                                      tile=self.labels.tile, pass_name=self.labels.pass_name,
                                      buffer=tcm_side.mem.bank)
        self._record("setup", f"{kind} ch{channel} #{t.index}", start, t.nbytes)
        return t

    def idma_copy_desc(self, channel: int, dst: Ptr, src: Ptr, nbytes: int, rows: int = 1,
                       src_pitch: int | None = None, dst_pitch: int | None = None) -> Proc:
        """``idma_copy_desc(ch, dst, src, size, flags)`` in ring mode (``rows > 1``:
        ``idma_copy_2d_desc``): :meth:`idma_copy`, waiting first for a free descriptor."""
        if self.idma[channel].ring is None:
            raise DspsimInputError(f"idma_copy_desc on {self.idma[channel].name} before "
                                   "idma_init_loop")
        kind = "copy_in" if not dst.external else "copy_out"
        return (yield from self.idma_copy(channel, src, dst, nbytes, kind, rows, src_pitch,
                                          dst_pitch))

    def idma_init_loop(self, channel: int, descriptors: int) -> Proc:
        """``idma_init_loop(ch, buf, IDMA_1D_DESC, descriptors, ...)``: the library wants an
        idle channel, so it first polls out what an earlier op left queued (booked as
        ``wait_out``: that op's traffic), then sets the ring up."""
        yield from self.idma_poll(channel, 0, "wait_out")
        self.idma[channel].init_loop(descriptors)

    def idma_poll(self, channel: int, pending: int = 0, kind: str = "wait_in") -> Proc:
        """``while (idma_buffer_status(ch) > pending) ;``: one event, at the completion that
        leaves ``pending``; booked as ``kind`` (``wait_in`` / ``wait_out``)."""
        ch = self.idma[channel]
        event = ch.when_pending_at_most(pending)
        if event is not None:
            yield from self._wait_event(event, ch, kind)

    def _wait_event(self, event: simpy.Event, ch: IdmaChannel, kind: str) -> Proc:
        start = self.env.now
        first = ch.current.index if ch.current is not None else ch.completed
        self.waiting_for = f"{self.name} (polling {ch.name} from #{first})"
        yield event
        self.waiting_for = None
        booked = kind if kind in self.idma_wait_ticks else "wait_in"
        self.idma_wait_ticks[booked] += self.env.now - start
        self._record(booked, f"ch{ch.index} poll", start, 0)

    def idma_wait(self, transfer: Transfer | None, kind: str, quirk: str = "") -> Proc:
        """Block until ``transfer`` is done. ``None`` is a handle the C never wrote."""
        if transfer is None:
            if quirk:
                self.warn("unwritten_handle", quirk, severity="info")
            return
        if transfer.done.triggered:
            return
        start = self.env.now
        channel = self.idma[transfer.channel].name
        self.waiting_for = f"{self.name} (waiting for {channel} #{transfer.index})"
        yield transfer.done
        self.waiting_for = None
        self.idma_wait_ticks[kind] += self.env.now - start
        self._record(kind, f"ch{transfer.channel} #{transfer.index}", start, transfer.nbytes)

    def _record(self, kind: str, label: str, start: int, nbytes: int, *stall: int) -> None:
        """A trace row of the core's from ``start`` to now, stamped with its labels."""
        self.recorder.record(self.name, kind, label, start, self.env.now, nbytes, self.labels.tile,
                             self.labels.pass_name, self.labels.buffer, *stall)

    def call(self, name: str, n: int, src: Ptr, dst: Ptr | None = None, rows: int = 1,
             **args: Any) -> Proc:
        """Run the registered kernel ``name`` on ``n`` elements at ``src`` (writing ``dst``), or
        on ``rows`` consecutive rows of ``n`` (a call per row, back to back); return what the C
        returns (per row when ``rows`` > 1)."""
        kernel = get_kernel(name)
        if self.timed:
            yield from self._execute(kernel.shape, n, src, dst, rows)
        if not self.move_data or n <= 0:
            return kernel.no_data_result(rows)
        shape = (rows, n) if rows > 1 else (n,)
        xs = src.mem.f32(src, rows * n).reshape(shape)
        zs = dst.mem.f32(dst, rows * n).reshape(shape) if dst is not None else None
        if kernel.elementwise and rows * n > NUMERICS_CHUNK_ELEMENTS:
            return self._in_chunks(kernel, xs, zs, rows, n, args)
        return kernel.compute(xs, zs, self.cfg.lanes_f32, **args)

    def _in_chunks(self, kernel: Any, xs: Any, zs: Any, rows: int, n: int,
                   args: dict[str, Any]) -> None:
        """An elementwise kernel a slice at a time (a block of short rows, or a run of one
        row): the same bits, with temporaries bounded."""
        lanes, chunk = self.cfg.lanes_f32, NUMERICS_CHUNK_ELEMENTS

        def per_row(lo: int, hi: int) -> dict[str, Any]:  # per-row scalars of rows lo:hi
            return {k: (v[lo:hi] if getattr(v, "ndim", 0) == 1 else v) for k, v in args.items()}

        if n < chunk:  # blocks of whole rows
            step = chunk // n
            for lo in range(0, rows, step):
                kernel.compute(xs[lo:lo + step], zs[lo:lo + step], lanes, **per_row(lo, lo + step))
            return
        for r in range(rows):  # each long row in runs
            x, z = (xs[r], zs[r]) if rows > 1 else (xs, zs)
            row_args = {k: (v[0] if getattr(v, "ndim", 0) == 1 else v)
                        for k, v in per_row(r, r + 1).items()} if rows > 1 else args
            for lo in range(0, n, chunk):
                kernel.compute(x[lo:lo + chunk], z[lo:lo + chunk], lanes, **row_args)

    def _execute(self, shape: LoopShape, n: int, src: Ptr, dst: Ptr | None, rows: int = 1) -> Proc:
        if n <= 0 or rows <= 0:  # the C returns before doing anything
            return
        start = self.env.now
        self.accesses.begin(self.name, start)
        load_mem = src.mem if src.requested else None
        store_mem = dst.mem if dst is not None and dst.requested else None
        if load_mem is not None or store_mem is not None:
            stall, store_stall = yield from self._stalling_loop(shape, n, rows, src, dst)
            # stalls are the memory's that held the core: the loads' memory for its lines or
            # round trips, the stores' for theirs (a store miss's line, the write buffer full)
            self.book_stall(load_mem or store_mem, stall - store_stall)
            self.book_stall(store_mem or load_mem, store_stall)
        else:
            yield self.env.timeout(ticks(rows * shape.tcm_cycles(n, self.cfg)))
            stall = 0
        self.compute_ticks += self.env.now - start - stall
        end = self.env.now
        for ptr, write in ((src, False), (dst, True)):
            if ptr is not None:
                self.accesses.add(self.name, ptr.mem.name, ptr.addr, 4 * n * rows, write, start,
                                  end, shape.name, self.labels.tile, self.labels.pass_name)
        self.accesses.finish(self.name, end)
        self._record("compute", shape.name, start, 4 * n * rows, stall)

    def memw(self, mem: Any) -> Proc:
        """``MEMW`` (or a cache write-back call): wait until every posted store completed, a
        stall on ``mem``, the memory stored to (None: TCM, nothing posted)."""
        start = self.env.now
        wait = max(self.write_buffer, default=start) - start
        if wait <= 0 or mem is None:
            return
        yield self.env.timeout(wait)
        self.book_stall(mem, wait)
        self._record("compute", "memw", start, 0, wait)

    def busy(self, busy_cycles: float, label: str) -> Proc:
        """The core busy ``busy_cycles`` on work priced whole (cache maintenance, an interrupt
        handler, a fixed overhead): compute time, drawn as ``label``."""
        busy = ticks(busy_cycles)
        if busy <= 0:
            return
        start = self.env.now
        yield self.env.timeout(busy)
        self.compute_ticks += busy
        self._record("compute", label, start, 0)

    def book_stall(self, mem: Any, stall: int) -> None:
        """Count ``stall`` ticks the core stalled on memory ``mem`` (None: on none)."""
        if mem is not None:
            self.stall_ticks[mem.name] = self.stall_ticks.get(mem.name, 0) + stall

    def _stalling_loop(self, shape: LoopShape, n: int, rows: int, src: Ptr, dst: Ptr | None
                       ) -> Proc:
        """Walk the loop (:meth:`_walk`) in a process of its own (an event resumes one
        generator, not the op's chain of ``yield from`` frames); return the stalls (all, and
        the stores')."""
        state = WalkState(self.env.now)
        walk = self._walk(shape, n, rows, src, dst, state)
        return (yield self.env.process(self.drive_walk(walk, state, src, dst)))

    def _ports(self, src: Ptr, dst: Ptr | None) -> list[Any]:
        return list({id(p.mem.port): p.mem.port for p in (src, dst)
                     if p is not None and p.external}.values())

    def drive_walk(self, walk: Walk, state: WalkState, src: Ptr, dst: Ptr | None) -> Proc:
        """Run a walk of the core's accesses between ``src`` and ``dst`` (a flow on each of
        their ports meanwhile); return its stalls (all, and the stores')."""
        ports = self._ports(src, dst)
        for port in ports:
            port.flows += 1
        yield from drive(self.env, walk, state, self.elide)
        for port in ports:
            port.flows -= 1
        return state.stall, state.store_stall

    def _walk(self, shape: LoopShape, n: int, rows: int, src: Ptr, dst: Ptr | None,
              state: WalkState) -> Walk:
        """Walk the loop access by access from ``state.now``, yielding at each wait;
        ``state.stall`` ends as the ticks stalled (``state.store_stall`` the stores' part).

        ``owed`` (issue time due before the next access) is paid with the wait that brings the
        core to that access: at most one wait an access. A cached memory is read (write-back:
        written) a line at a time. A store leaves at its iteration's end: into its line
        (write-allocate: fetched first; a non-allocating miss goes through the write buffer) or
        posted to the write buffer, after the oldest when it is full."""
        cfg = shape.on(self.cfg)  # a loop of its own lanes and call cost
        load_ext = src.external
        store_ext = dst is not None and dst.external
        reduction = ticks(shape.reduction_ops(cfg.lanes_f32) * cfg.alu_latency_cycles)
        iterations = _iterations(shape, n, cfg, load_ext, store_ext)
        # interleaved rows through a data cache: bytes from one row to the next
        k = shape.interleaved_rows
        stride = (sum(c * sum(loads) for c, loads, _, _ in iterations) // k
                  if k > 1 and load_ext and src.mem.cached else 0)
        dst = dst if store_ext else None
        if stride:
            return self._rows(state, cfg, rows, iterations, reduction, src, dst, stride)
        return self._accesses(state, cfg, rows, iterations, reduction, src, dst)

    def _rows(self, state: WalkState, cfg: CoreCfg, rows: int, iterations: list[tuple],
              reduction: int, src: Ptr, dst: Ptr | None, stride: int) -> Walk:
        """:meth:`_accesses` a row at a time where a call reads rows side by side through the
        cache (``stride``: bytes from one to the next), its runs of alike rows booked at once
        (:class:`IterationRuns`, a row as one iteration: it moves every row's address on by
        the bytes its loads read)."""
        runs = self._routes(src, dst, state)[4]
        # the bytes a row's loads and stores move on
        load_step = sum(count * sum(loads) for count, loads, _, _ in iterations)
        store_step = sum(count * sum(stores) for count, _, stores, _ in iterations)
        at = runs.first(rows, (load_step,), (store_step,) if dst is not None else (),
                        ("rows", tuple(iterations), reduction, stride)) if runs else -1
        left, addr, store_addr = rows, src.addr, dst.addr if dst is not None else 0
        now, owed = state.now, 0
        while left:
            left -= 1
            now, owed = yield from self._accesses(
                state, cfg, 1, iterations, reduction, Ptr(src.mem, addr),
                Ptr(dst.mem, store_addr) if dst is not None else None, stride, owed)
            addr, store_addr = addr + load_step, store_addr + store_step
            if left == at:
                now, left, at, addr, store_addr = runs.note(now, owed, left, addr, store_addr)
            state.now = now
        state.now = now + owed

    def _accesses(self, state: WalkState, cfg: CoreCfg, rows: int, iterations: list[tuple],
                  reduction: int, src: Ptr, dst: Ptr | None, stride: int = 0, owed: int = 0
                  ) -> Generator[int, None, tuple[int, int]]:
        """:meth:`_walk`'s accesses (``stride`` > 0: an iteration's load ``j`` reads row ``j``)
        from ``state.now`` with ``owed`` due; return the walk's clock and what it owes."""
        cache, wb, depth, name = self.dcache, self.write_buffer, cfg.write_buffer_entries, self.name
        load_cached, store_cached, load, store, runs = self._routes(src, dst, state, stride)
        load_addr = row_addr = src.addr  # (interleaved rows: the row's start, its column)
        now, col, store_addr = state.now, 0, dst.addr if dst is not None else 0
        call = ticks(cfg.call_overhead_cycles)
        for _ in range(rows):
            owed += call
            for count, loads, stores, issue in iterations:
                left, at = count, runs.first(count, loads, stores, issue) if runs else -1
                while left:
                    left -= 1
                    for j, nbytes in enumerate(loads):
                        if owed:
                            now = now + owed
                            yield now
                        if load_cached:
                            at_addr = row_addr + col + j * stride if stride else load_addr
                            owed = cache.access(now, src.mem, at_addr, nbytes, False, name) - now
                            load_addr += nbytes
                        else:
                            owed = load(now, nbytes, False, name) - now  # the round trip
                        state.stall += owed
                    owed += issue
                    col += loads[0] if stride and loads else 0
                    for nbytes in stores:
                        now, owed = now + owed, 0
                        yield now
                        ready = (cache.store(now, dst.mem, store_addr, nbytes, name)
                                 if store_cached else None)
                        if posted := ready is None:
                            ready = wb.popleft() if len(wb) == depth else now
                        if ready > now:
                            state.stall += ready - now
                            state.store_stall += ready - now
                            now = ready
                            yield now
                        if posted:
                            wb.append(store(now, nbytes, True, name))
                        store_addr += nbytes
                    if left == at:
                        now, left, at, load_addr, store_addr = runs.note(
                            now, owed, left, load_addr, store_addr)
            owed, row_addr, col = owed + reduction, load_addr, 0
        state.now = now + owed  # (now itself when nothing is owed)
        return now, owed

    def _routes(self, src: Ptr, dst: Ptr | None, state: WalkState, stride: int = 0
                ) -> tuple[bool, bool, Any, Any, IterationRuns | None]:
        """How :meth:`_accesses` reaches memory: loads cached or not, stores cached
        (write-back) or not, the ports' ``request`` for loads and stores (``None``: none), and
        its :class:`IterationRuns` (``None`` where none may be; a row of interleaved rows,
        ``stride``, has none: :meth:`_rows` books alike rows)."""
        load_cached = src.external and src.mem.cached
        store_cached = dst is not None and dst.mem.cached and self.dcache.write_back
        load = src.mem.port.request if src.external else None
        store = dst.mem.port.request if dst is not None else None
        ports = self._ports(src, dst)
        runs = (IterationRuns(self.env, ports, self.write_buffer, state,
                              self.dcache if load_cached or store_cached else None,
                              (load_cached, store_cached), self.known_runs,
                              (src.mem.name, dst.mem.name if dst is not None else None,
                               load_cached, store_cached))
                if not stride and IterationRuns.applies(ports, self.elide) else None)
        return load_cached, store_cached, load, store, runs


def _iterations(shape: LoopShape, n: int, cfg: CoreCfg, load_ext: bool, store_ext: bool
                ) -> list[tuple[int, tuple[int, ...], tuple[int, ...], int]]:
    """The loop of ``n`` elements as runs of alike iterations ``(count, load bytes, store
    bytes, issue ticks)``, the prologue's priming load(s) first (no loop iteration issued:
    0 cycles); only accesses that reach a memory port are kept (predicated-off, 0-byte ones
    vanish; so do those of a side in TCM)."""
    prologue = (1, (cfg.vector_bytes,) * shape.priming_loads, (), 0)
    ii = ticks(shape.ii_cycles(cfg))
    body = [(count, loads, stores, ii) for count, loads, stores in shape.segments(n, cfg.lanes_f32)]
    return [(count, tuple(b for b in loads if b) if load_ext else (),
             tuple(b for b in stores if b) if store_ext else (), issue)
            for count, loads, stores, issue in [prologue] + body]

