"""The DSP core: runs the kernels' cost model against TCM or uncached DDR, programs and waits on
iDMA descriptors.

Kernels are generators, called from the op's process with ``yield from``; their return value is
what the C function returns. Against TCM a kernel call is one timeout of its closed-form cost
(loads are pipelined). Against DDR there is no vector data cache: every vector load issues a
request on the DDR port at the simulated time the core reaches it and stalls the core until the
data is back; stores are posted to a write buffer of ``core.write_buffer_entries`` and stall the
core only when it is full. One SimPy event per DDR access, none per cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from dspsim.config import Core as CoreCfg
from dspsim.hw.ddr import DdrPort
from dspsim.hw.idma import IdmaChannel, Transfer
from dspsim.hw.memory import Ptr
from dspsim.kernels import numerics
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM, LoopShape, ddr_call
from dspsim.probes import AccessLog, Recorder

Proc = Generator[simpy.Event, Any, Any]


class Core:
    def __init__(
        self,
        env: simpy.Environment,
        cfg: CoreCfg,
        port: DdrPort,
        idma: list[IdmaChannel],
        recorder: Recorder,
        warn: Callable[..., None],
        move_data: bool,
        accesses: AccessLog,
        tile_fidelity: bool = False,
        guard_shifted_input: bool = False,
    ):
        self.env = env
        self.cfg = cfg
        self.port = port
        self.idma = idma
        self.recorder = recorder
        self.warn = warn
        self.move_data = move_data
        self.tile_fidelity = tile_fidelity
        self.accesses = accesses
        self.guard_shifted_input = guard_shifted_input
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
            "core",
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
                self.warn("unwritten_handle", quirk)
            return
        if transfer.done.triggered:
            return
        start = self.env.now
        self.waiting_for = f"core (waiting for idma{transfer.channel} #{transfer.index})"
        yield transfer.done
        self.waiting_for = None
        self.idma_wait_cycles[kind] += self.env.now - start
        self.recorder.record(
            "core",
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
    def vecmaxf(self, x: Ptr, n: int) -> Proc:
        yield from self._execute(VECMAXF, n, x, None)
        if not self.move_data or n <= 0:
            return np.float32(0.0)
        return numerics.vecmaxf(x.mem.f32(x, n), self.cfg.lanes_f32)

    def vecexpf_max(self, z: Ptr, x: Ptr, n: int, max_value: float) -> Proc:
        yield from self._execute(VECEXPF_MAX, n, x, z)
        if self.move_data and n > 0:
            xs, guard = x.mem.f32(x, n), self.guard_shifted_input
            flags = numerics.expf_input_flags(xs, max_value, guard)
            if flags["nan_inputs"]:
                self.warn("nan_input", "NaN inputs: vecexpf_max flags them (b_nan) but never "
                          "uses the flag, so they flow through to the output",
                          flags["nan_inputs"])
            if flags["overflow_guard"]:
                self.warn("overflow_guard", "vecexpf_max's overflow guard tests the raw input, "
                          "so an element >= 88.72 gives exp = +inf and the softmax NaN although "
                          "softmax is shift-invariant (softmax.guard_shifted_input = true tests "
                          "x - max instead)" if not guard else "vecexpf_max's overflow guard "
                          "fired on x - max >= 88.72", flags["overflow_guard"])
            z.mem.f32(z, n)[:] = numerics.vecexpf_max(xs, max_value, guard)

    def vecsum(self, x: Ptr, n: int) -> Proc:
        yield from self._execute(VECSUM, n, x, None)
        if not self.move_data or n <= 0:
            return np.float32(0.0)
        return numerics.vecsum(x.mem.f32(x, n), self.cfg.lanes_f32)

    def vecmul(self, z: Ptr, x: Ptr, scalar: float, n: int) -> Proc:
        yield from self._execute(VECMUL, n, x, z)
        if self.move_data and n > 0:
            z.mem.f32(z, n)[:] = numerics.vecmul(x.mem.f32(x, n), scalar)

    def _execute(self, shape: LoopShape, n: int, src: Ptr, dst: Ptr | None) -> Proc:
        if n <= 0:  # the C returns before doing anything
            return
        start = self.env.now
        load_ddr, store_ddr = src.in_ddr, dst is not None and dst.in_ddr
        if (load_ddr or store_ddr) and self.tile_fidelity:
            stall = yield from self._ddr_call(shape, n, load_ddr, store_ddr)
        elif load_ddr or store_ddr:
            # its own process: each of its many events resumes one generator, not the op's
            # whole chain of `yield from` frames
            stall = yield self.env.process(self._stalling_loop(shape, n, load_ddr, store_ddr))
        else:
            yield self.env.timeout(shape.tcm_cycles(n, self.cfg))
            stall = 0.0
        self.compute_cycles += self.env.now - start - stall
        self.ddr_stall_cycles += stall
        end = self.env.now
        for ptr, write in ((src, False), (dst, True)):
            if ptr is not None:
                self.accesses.add("core", ptr.mem.name, ptr.addr, 4 * n, write, start, end,
                                  shape.name, self.tile, self.pass_name)
        self.recorder.record(
            "core",
            "compute",
            shape.name,
            start,
            self.env.now,
            4 * n,
            self.tile,
            self.pass_name,
            self.buffer,
            stall,
        )

    def _ddr_call(self, shape: LoopShape, n: int, load_ddr: bool, store_ddr: bool) -> Proc:
        """Tile fidelity: the whole call as one timeout, from the closed form of the walk."""
        port, now = self.port, self.env.now
        call = ddr_call(shape, n, self.cfg, port.latency_cycles, port.cycles_per_byte,
                        load_ddr, store_ddr, port.max_outstanding)
        done = port.bulk(now, call.read_bytes, call.write_bytes, call.cycles, "core",
                         self.cfg.vector_bytes)
        yield self.env.timeout(done - now)
        return call.stall_cycles + (done - now - call.cycles)

    def _stalling_loop(self, shape: LoopShape, n: int, load_ddr: bool, store_ddr: bool) -> Proc:
        """Walk the loop access by access; return the cycles stalled on DDR.

        ``owed`` is issue time the core must spend before its next memory access; it is paid
        with the timeout that brings the core to that access, so each DDR access costs one event.
        """
        env, cfg, request = self.env, self.cfg, self.port.request
        ii = shape.ii_cycles(cfg)
        wb, wb_depth = self._write_buffer, cfg.write_buffer_entries
        stall = 0.0
        owed = float(cfg.call_overhead_cycles)
        # the prologue's priming load(s) issue no loop iteration, hence 0 issue cycles
        prologue = (1, (cfg.vector_bytes,) * shape.priming_loads, (), 0)
        body = [
            (count, loads, stores, ii) for count, loads, stores in shape.segments(n, cfg.lanes_f32)
        ]
        for count, loads, stores, issue in [prologue] + body:
            # only accesses that reach DDR cost events; predicated-off (0-byte) ones vanish
            loads = tuple(b for b in loads if b) if load_ddr else ()
            stores = tuple(b for b in stores if b) if store_ddr else ()
            for _ in range(count):
                for nbytes in loads:
                    if owed:
                        yield env.timeout(owed)
                    now = env.now
                    owed = request(now, nbytes, False, "core") - now  # the round trip
                    stall += owed
                owed += issue
                for nbytes in stores:  # a store leaves at the end of its iteration
                    yield env.timeout(owed)
                    owed = 0.0
                    now = env.now
                    if len(wb) == wb_depth:  # full: wait for the oldest posted store
                        oldest = wb.popleft()
                        if oldest > now:
                            stall += oldest - now
                            yield env.timeout(oldest - now)
                            now = env.now
                    wb.append(request(now, nbytes, True, "core"))
        owed += shape.reduction_ops(cfg.lanes_f32) * cfg.alu_latency_cycles
        if owed:
            yield env.timeout(owed)
        return stall
