"""A DSP core: runs any registered kernel against TCM or uncached DDR, programs and waits on
iDMA descriptors.

Kernels are generators, called from the op's process with ``yield from core.call(name, ...)``;
their return value is what the C function returns. Against TCM a kernel call is one timeout of
its closed-form cost (loads are pipelined). Against DDR there is no vector data cache: every
vector load issues a request on the DDR port at the simulated time the core reaches it and
stalls the core until the data is back; stores are posted to a write buffer of
``core.write_buffer_entries`` and stall the core only when it is full. One SimPy event per DDR
access, none per cycle. :class:`TileCore` (tile fidelity) instead runs a whole DDR kernel call
as one timeout from the closed form of the same walk; the platform picks the class.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import simpy

from dspsim.config import Core as CoreCfg
from dspsim.hw.clock import At, Walk, WalkState, drive
from dspsim.hw.ddr import DdrPort
from dspsim.hw.idma import IdmaChannel, Transfer
from dspsim.hw.memory import Ptr
from dspsim.kernels import get_kernel
from dspsim.kernels.shapes import LoopShape, ddr_call_sequence, last_stores
from dspsim.probes import AccessLog, Recorder

Proc = Generator[simpy.Event, Any, Any]
# Elementwise kernel numerics run in slices of this many elements (bounded temporaries).
NUMERICS_CHUNK_ELEMENTS = 1 << 16
# Tile fidelity walks a call this short access by access: as exact, and cheaper than a closed
# form that another requester might cut.
CLOSED_FORM_MIN_ELEMENTS = 512


class Core:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        cfg: CoreCfg,
        port: DdrPort,
        idma: list[IdmaChannel],
        recorder: Recorder,
        warn: Callable[..., None],
        move_data: bool,
        accesses: AccessLog,
        elide: bool = True,
    ):
        self.env = env
        self.elide = elide
        self.name = name
        self.cfg = cfg
        self.port = port
        self.idma = idma
        self.recorder = recorder
        self.warn = warn
        self.move_data = move_data
        self.accesses = accesses
        self._write_buffer: deque[float] = deque()
        # what the op is doing now, stamped on every trace row
        self.pass_name = ""
        self._tile = -1
        self._tile_base = 0  # tiles of earlier groups in this pass (see ``tile``)
        self._tile_next = 0  # one past the highest tile number used in this pass
        self.buffer = -1
        self.waiting_for: str | None = None
        # accounting
        self.compute_cycles = 0.0  # kernels' issue cycles and overheads, descriptor programming
        self.ddr_stall_cycles = 0.0
        self.idma_wait_cycles = {"wait_in": 0.0, "wait_out": 0.0}

    # ---------------------------------------------------------------- tiles
    @property
    def tile(self) -> int:
        """The tile the core works on (-1: none), numbered within its pass: the op sets its
        own index (``core.tile = j``), numbered after the tiles of the pass's earlier groups
        (:meth:`new_tile_group`: a row, a frame call), so that no two tiles of one pass share a
        number in the trace."""
        return self._tile

    @tile.setter
    def tile(self, j: int) -> None:
        if j < 0:
            self._tile = -1
            return
        self._tile = self._tile_base + j
        if self._tile >= self._tile_next:
            self._tile_next = self._tile + 1

    @property
    def tiles_used(self) -> int:
        """One past the highest tile number of the pass so far."""
        return self._tile_next

    def new_tile_group(self) -> None:
        """The tiles that follow are numbered after every tile of the pass so far."""
        self._tile_base = self._tile_next

    def start_tiles(self, base: int) -> None:
        """A pass begins: number its tiles from ``base`` (past those of an earlier pass of
        the same name)."""
        self._tile_base = self._tile_next = base
        self._tile = -1

    # ---------------------------------------------------------------- iDMA (IDMA_COPY / IDMA_WAIT)
    def idma_copy(self, channel: int, src: Ptr, dst: Ptr, nbytes: int, kind: str) -> Proc:
        """Program a descriptor on ``channel``: costs the core ``idma.setup_cycles``."""
        start = self.env.now
        setup = self.idma[channel].setup_cycles
        if setup:
            yield self.env.timeout(setup)
        self.compute_cycles += setup
        tcm_side = dst if kind == "copy_in" else src
        t = self.idma[channel].submit(
            src,
            dst,
            nbytes,
            kind=kind,
            tile=self.tile,
            pass_name=self.pass_name,
            buffer=tcm_side.mem.bank,
        )
        self.recorder.record(
            self.name,
            "setup",
            f"{kind} ch{channel} #{t.index}",
            start,
            self.env.now,
            nbytes,
            self.tile,
            self.pass_name,
            self.buffer,
        )
        return t

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
        self.idma_wait_cycles[kind] += self.env.now - start
        self.recorder.record(
            self.name,
            kind,
            f"ch{transfer.channel} #{transfer.index}",
            start,
            self.env.now,
            transfer.nbytes,
            self.tile,
            self.pass_name,
            self.buffer,
        )

    # ---------------------------------------------------------------- kernels
    def call(
        self, name: str, n: int, src: Ptr, dst: Ptr | None = None, rows: int = 1, **args: Any
    ) -> Proc:
        """Run the registered kernel ``name`` on ``n`` elements at ``src`` (writing ``dst``), or
        on ``rows`` consecutive rows of ``n`` elements (one call per row, back to back); return
        what the C function returns (per row when ``rows`` > 1)."""
        kernel = get_kernel(name)
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
        """An elementwise kernel over a long array, a slice at a time: the same bits, with
        temporaries bounded by the slice (a block of short rows, or a run of one row)."""
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

    def _execute(
        self, shape: LoopShape, n: int, src: Ptr, dst: Ptr | None, rows: int = 1
    ) -> Proc:
        if n <= 0 or rows <= 0:  # the C returns before doing anything
            return
        start = self.env.now
        self.accesses.begin(self.name, start)
        load_ddr, store_ddr = src.in_ddr, dst is not None and dst.in_ddr
        if load_ddr or store_ddr:
            stall = yield from self._ddr_kernel(shape, n, rows, load_ddr, store_ddr)
        else:
            yield self.env.timeout(rows * shape.tcm_cycles(n, self.cfg))
            stall = 0.0
        self.compute_cycles += self.env.now - start - stall
        self.ddr_stall_cycles += stall
        end = self.env.now
        for ptr, write in ((src, False), (dst, True)):
            if ptr is not None:
                self.accesses.add(self.name, ptr.mem.name, ptr.addr, 4 * n * rows, write, start,
                                  end, shape.name, self.tile, self.pass_name)
        self.accesses.finish(self.name, end)
        self.recorder.record(
            self.name,
            "compute",
            shape.name,
            start,
            self.env.now,
            4 * n * rows,
            self.tile,
            self.pass_name,
            self.buffer,
            stall,
        )

    def _ddr_kernel(self, shape: LoopShape, n: int, rows: int, load_ddr: bool,
                    store_ddr: bool) -> Proc:
        """Burst fidelity: walk the loop access by access in a process of its own (each of its
        many events resumes one generator, not the op's whole chain of ``yield from``
        frames); return the cycles stalled on DDR."""
        return (yield self.env.process(self._stalling_loop(shape, n, rows, load_ddr, store_ddr)))

    def _stalling_loop(
        self, shape: LoopShape, n: int, rows: int, load_ddr: bool, store_ddr: bool
    ) -> Proc:
        """The call access by access (:meth:`_walk`), as a process; return the DDR stall."""
        state = WalkState(self.env.now)
        walk = self._walk(shape, n, rows, load_ddr, store_ddr, state)
        self.port.flows += 1
        yield from drive(self.env, walk, state, self.elide)
        self.port.flows -= 1
        return state.stall

    def _walk(
        self, shape: LoopShape, n: int, rows: int, load_ddr: bool, store_ddr: bool,
        state: WalkState,
    ) -> Walk:
        """Walk the loop access by access from ``state.now``, yielding each time the core waits
        until a later time; ``state.stall`` ends as the cycles stalled on DDR.

        ``owed`` is issue time the core must spend before its next memory access; it is paid
        with the wait that brings the core to that access, so each DDR access costs at most one
        wait (and, with elision, an event only when another process could act before it ends:
        :mod:`dspsim.hw.clock`).
        """
        cfg, request, name = self.cfg, self.port.request, self.name
        ii = shape.ii_cycles(cfg)
        wb, wb_depth = self._write_buffer, cfg.write_buffer_entries
        owed = 0.0
        now = state.now
        # the prologue's priming load(s) issue no loop iteration, hence 0 issue cycles
        prologue = (1, (cfg.vector_bytes,) * shape.priming_loads, (), 0)
        body = [
            (count, loads, stores, ii) for count, loads, stores in shape.segments(n, cfg.lanes_f32)
        ]
        # only accesses that reach DDR cost events; predicated-off (0-byte) ones vanish
        walk = [
            (count, tuple(b for b in loads if b) if load_ddr else (),
             tuple(b for b in stores if b) if store_ddr else (), issue)
            for count, loads, stores, issue in [prologue] + body
        ]
        reduction = shape.reduction_ops(cfg.lanes_f32) * cfg.alu_latency_cycles
        for _ in range(rows):
            owed += cfg.call_overhead_cycles
            for count, loads, stores, issue in walk:
                for _ in range(count):
                    for nbytes in loads:
                        if owed:
                            now = now + owed
                            yield now
                            state.now = now
                        owed = request(now, nbytes, False, name) - now  # the round trip
                        state.stall += owed
                    owed += issue
                    for nbytes in stores:  # a store leaves at the end of its iteration
                        now = now + owed
                        yield now
                        state.now = now
                        owed = 0.0
                        if len(wb) == wb_depth:  # full: wait for the oldest posted store
                            oldest = wb.popleft()
                            if oldest > now:
                                state.stall += oldest - now
                                now = now + (oldest - now)
                                yield now
                                state.now = now
                        wb.append(request(now, nbytes, True, name))
            owed += reduction
        if owed:
            state.now = now + owed


class TileCore(Core):
    """Tile fidelity: a DDR kernel call that starts alone on the port is one event, its
    duration the closed form of the walk (:func:`dspsim.kernels.shapes.ddr_call_sequence`)
    plus the wait of its first load for what the port still carries (the previous call's last
    posted store); if another requester touches the port meanwhile, the port cuts it and the
    call goes on access by access (:meth:`dspsim.hw.ddr.DdrPort.cut`)."""

    def _ddr_kernel(self, shape: LoopShape, n: int, rows: int, load_ddr: bool,
                    store_ddr: bool) -> Proc:
        port, env, cfg = self.port, self.env, self.cfg
        start = env.now
        if rows * n < CLOSED_FORM_MIN_ELEMENTS or not (
                load_ddr and port.idle_for(self.name, start)):
            return (yield from super()._ddr_kernel(shape, n, rows, load_ddr, store_ddr))
        seq = ddr_call_sequence(((shape, store_ddr),), n, cfg, port.latency_cycles,
                                port.cycles_per_byte, port.max_outstanding, repeat=rows)
        first = start + cfg.call_overhead_cycles
        extra = port.first_request_start(first) - first
        end = start + extra + seq.cycles
        state = WalkState(start)
        walk = self._walk(shape, n, rows, load_ddr, store_ddr, state)
        spec = port.speculate(self.name, env.active_process, walk)
        port.flows += 1
        try:
            yield At(env, end)
        except simpy.Interrupt:  # cut: on access by access from where the replay paused
            yield from drive(env, walk, state, self.elide, pending=spec.pending)
            stall = state.stall
        else:
            last = last_stores(shape, n, cfg.lanes_f32) if store_ddr else ()
            tail = shape.reduction_ops(cfg.lanes_f32) * cfg.alu_latency_cycles
            store = (end - tail, last[-1]) if last else None
            done = port.book_call(self.name, start, end, seq.loads + seq.stores,
                                  seq.read_bytes, seq.write_bytes, store)
            if store:
                self._write_buffer.append(done)
                while len(self._write_buffer) > cfg.write_buffer_entries:
                    self._write_buffer.popleft()
            stall = seq.stall_cycles + extra
        port.flows -= 1
        return stall
