"""An iDMA channel: a descriptor FIFO served, in order, by one long-lived process.

``IDMA_COPY`` programs a descriptor (the core pays ``idma.setup_cycles``, see
:meth:`dspsim.hw.core.Core.idma_copy`) and appends it to the channel's FIFO; the channel moves
its bytes as DDR requests of ``idma.burst_bytes``, keeping at most ``idma.max_outstanding`` in
flight, and finishes a descriptor (all its bursts back) before it starts the next. That FIFO
order is what keeps the seed's write-back of a buffer ahead of the next prefetch into it.
:class:`TileIdmaChannel` (tile fidelity) moves a whole descriptor as one reservation on the
port instead of bursts; the platform picks the class.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import simpy

from dspsim.config import Idma
from dspsim.errors import DspsimInputError
from dspsim.hw.ddr import DdrPort, transfer_cycles
from dspsim.hw.memory import Ptr
from dspsim.probes import AccessLog, Recorder


@dataclass(eq=False)
class Transfer:
    """A descriptor and the handle ``IDMA_COPY`` returns (``vret``)."""

    channel: int
    index: int
    src: Ptr
    dst: Ptr
    nbytes: int
    done: simpy.Event
    kind: str = "copy_in"  # copy_in: DDR -> TCM, copy_out: TCM -> DDR
    tile: int = -1
    pass_name: str = ""
    buffer: int = -1
    start: float = -1.0
    end: float = -1.0


class IdmaChannel:
    def __init__(
        self,
        env: simpy.Environment,
        index: int,
        name: str,
        cfg: Idma,
        port: DdrPort,
        recorder: Recorder,
        move_data: bool,
        accesses: AccessLog,
    ):
        self.env = env
        self.index = index
        self.name = name
        self.setup_cycles = cfg.setup_cycles
        self.burst_bytes = cfg.burst_bytes
        self.max_outstanding = cfg.max_outstanding
        self.port = port
        self.recorder = recorder
        self.move_data = move_data
        self.accesses = accesses
        self.fifo: simpy.Store = simpy.Store(env)
        self.submitted = 0
        self.busy_cycles = 0.0
        self.current: Transfer | None = None
        self.process = env.process(self._serve())

    def submit(self, src: Ptr, dst: Ptr, nbytes: int, **tags) -> Transfer:
        """Append a descriptor to the FIFO (the core has already paid for programming it)."""
        if not (src.in_ddr or dst.in_ddr):
            raise DspsimInputError(
                f"iDMA copy {src!r} -> {dst!r}: one side must be DDR (TCM-to-TCM not modelled)"
            )
        t = Transfer(self.index, self.submitted, src, dst, nbytes, self.env.event(), **tags)
        self.submitted += 1
        self.fifo.put(t)
        return t

    def _serve(self):
        env = self.env
        while True:
            t: Transfer = yield self.fifo.get()
            self.current = t
            t.start = env.now
            yield from self._move(t)
            t.end = env.now
            for ptr, is_write in ((t.src, False), (t.dst, True)):
                self.accesses.add(self.name, ptr.mem.name, ptr.addr, t.nbytes, is_write, t.start,
                                  t.end, f"{t.kind} #{t.index}", t.tile, t.pass_name)
            self.busy_cycles += t.end - t.start
            self.current = None
            self.recorder.record(
                self.name,
                t.kind,
                f"#{t.index}",
                t.start,
                t.end,
                t.nbytes,
                t.tile,
                t.pass_name,
                t.buffer,
            )
            t.done.succeed()

    def _move(self, t: Transfer):
        """Move the descriptor's bytes as bursts, at most ``max_outstanding`` in flight; bursts
        land in order as they complete."""
        env, name, move_data = self.env, self.name, self.move_data
        request = self.port.request
        burst, window = self.burst_bytes, self.max_outstanding
        now = t.start
        write = t.dst.in_ddr
        inflight: deque[float] = deque()
        full, rest = divmod(t.nbytes, burst)
        bursts = [burst] * full + ([rest] if rest else [])
        landed = 0  # bytes already in the destination
        if move_data:
            src_bytes = t.src.mem.read(t.src.addr, t.nbytes)
            dst_bytes = t.dst.mem.read(t.dst.addr, t.nbytes)  # a writable view
        for i, nbytes in enumerate(bursts):
            if len(inflight) == window:
                oldest = inflight.popleft()
                if oldest > now:
                    yield env.timeout(oldest - now)
                    now = env.now
                if move_data:  # bursts land in order as they complete
                    upto = (i - window + 1) * burst
                    dst_bytes[landed:upto] = src_bytes[landed:upto]
                    landed = upto
            inflight.append(request(now, nbytes, write, name))
        if inflight and inflight[-1] > now:  # FIFO port: the last burst ends last
            yield env.timeout(inflight[-1] - now)
        if move_data:
            dst_bytes[landed:] = src_bytes[landed:]

    def describe_waiting(self) -> str | None:
        """What this channel is stuck on, if anything (for deadlock reports)."""
        if self.current is not None:
            return f"{self.name} (in descriptor #{self.current.index})"
        if self.fifo.items:
            return f"{self.name} ({len(self.fifo.items)} descriptors queued)"
        return None


class TileIdmaChannel(IdmaChannel):
    """Tile fidelity: the whole descriptor as one reservation on the port, no bursts."""

    def _move(self, t: Transfer):
        port = self.port
        alone = transfer_cycles(t.nbytes, self.burst_bytes,
                                min(self.max_outstanding, port.max_outstanding),
                                port.latency_cycles, port.cycles_per_byte)
        reads, writes = (0, t.nbytes) if t.dst.in_ddr else (t.nbytes, 0)
        done = port.bulk(t.start, reads, writes, alone, self.name, self.burst_bytes)
        if done > t.start:
            yield self.env.timeout(done - t.start)
        if self.move_data:
            t.dst.mem.read(t.dst.addr, t.nbytes)[:] = t.src.mem.read(t.src.addr, t.nbytes)
