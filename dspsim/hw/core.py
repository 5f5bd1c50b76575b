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
from dspsim.hw.clock import At
from dspsim.hw.ddr import DdrPort
from dspsim.hw.idma import IdmaChannel, Transfer
from dspsim.hw.memory import Ptr
from dspsim.kernels import get_kernel
from dspsim.kernels.shapes import LoopShape, ddr_call
from dspsim.probes import AccessLog, Recorder

Proc = Generator[simpy.Event, Any, Any]


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
        self.tile = -1
        self.buffer = -1
        self.waiting_for: str | None = None
        # accounting
        self.compute_cycles = 0.0  # kernels' issue cycles and overheads, descriptor programming
        self.ddr_stall_cycles = 0.0
        self.idma_wait_cycles = {"wait_in": 0.0, "wait_out": 0.0}

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
        return kernel.compute(xs, zs, self.cfg.lanes_f32, **args)

    def _execute(
        self, shape: LoopShape, n: int, src: Ptr, dst: Ptr | None, rows: int = 1
    ) -> Proc:
        if n <= 0 or rows <= 0:  # the C returns before doing anything
            return
        start = self.env.now
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
        """Walk the loop access by access; return the cycles stalled on DDR.

        ``owed`` is issue time the core must spend before its next memory access; it is paid
        with the wait that brings the core to that access, so each DDR access costs at most one
        event. With ``elide``, a wait that ends before anything else in the queue advances the
        local clock ``now`` instead (:mod:`dspsim.hw.clock`); the loop returns at a real event.
        """
        env, cfg, request, name, elide = self.env, self.cfg, self.port.request, self.name, \
            self.elide
        ii = shape.ii_cycles(cfg)
        wb, wb_depth = self._write_buffer, cfg.write_buffer_entries
        stall = 0.0
        owed = 0.0
        now = env.now
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
                            target = now + owed
                            if not (elide and target < env.peek()):
                                yield At(env, target)
                            now = target
                        owed = request(now, nbytes, False, name) - now  # the round trip
                        stall += owed
                    owed += issue
                    for nbytes in stores:  # a store leaves at the end of its iteration
                        target = now + owed
                        if not (elide and target < env.peek()):
                            yield At(env, target)
                        now = target
                        owed = 0.0
                        if len(wb) == wb_depth:  # full: wait for the oldest posted store
                            oldest = wb.popleft()
                            if oldest > now:
                                stall += oldest - now
                                target = now + (oldest - now)
                                if not (elide and target < env.peek()):
                                    yield At(env, target)
                                now = target
                        wb.append(request(now, nbytes, True, name))
            owed += reduction
        if owed:
            now = now + owed
        if now != env.now:  # the call returns where the op can see it: a real event
            yield At(env, now)
        return stall


class TileCore(Core):
    """Tile fidelity: a DDR kernel call is one timeout, its duration from the closed form of
    the burst-level walk (:func:`dspsim.kernels.shapes.ddr_call`), stretched by the port when
    it is shared."""

    def _ddr_kernel(self, shape: LoopShape, n: int, rows: int, load_ddr: bool,
                    store_ddr: bool) -> Proc:
        port, now = self.port, self.env.now
        call = ddr_call(shape, n, self.cfg, port.latency_cycles, port.cycles_per_byte,
                        load_ddr, store_ddr, port.max_outstanding)
        done = port.bulk(now, rows * call.read_bytes, rows * call.write_bytes,
                         rows * call.cycles, self.name, self.cfg.vector_bytes)
        yield self.env.timeout(done - now)
        return rows * call.stall_cycles + (done - now - rows * call.cycles)
