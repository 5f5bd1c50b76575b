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
from dspsim.hw.clock import At
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
        elide: bool = True,
    ):
        self.env = env
        self.elide = elide
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
        land in order as they complete. With ``elide``, a wait that ends before anything else
        in the queue advances a local clock instead of yielding (:mod:`dspsim.hw.clock`), and
        the bursts completed meanwhile land at once, before the next real yield: nobody can
        look at the destination in between."""
        env, name, elide = self.env, self.name, self.elide
        request = self.port.request
        burst, window = self.burst_bytes, self.max_outstanding
        now = t.start
        write = t.dst.in_ddr
        inflight: deque[float] = deque()
        full, rest = divmod(t.nbytes, burst)
        bursts = [burst] * full + ([rest] if rest else [])
        lander = _Lander(t) if self.move_data else None
        for i, nbytes in enumerate(bursts):
            if len(inflight) == window:
                oldest = inflight.popleft()
                if oldest > now:
                    target = now + (oldest - now)  # what Timeout(oldest - now) would give
                    if not (elide and target < env.peek()):
                        if lander:
                            lander.land()
                        yield At(env, target)
                    now = target
                if lander:  # bursts complete in order
                    lander.completed((i - window + 1) * burst, immediately=not elide)
            inflight.append(request(now, nbytes, write, name))
        if inflight and inflight[-1] > now:  # FIFO port: the last burst ends last
            now = now + (inflight[-1] - now)
        if now != env.now:  # the copy ends where everyone can see it: a real event
            if lander:
                lander.land()
            yield At(env, now)
        if lander:
            lander.completed(t.nbytes, immediately=True)


    def describe_waiting(self) -> str | None:
        """What this channel is stuck on, if anything (for deadlock reports)."""
        if self.current is not None:
            return f"{self.name} (in descriptor #{self.current.index})"
        if self.fifo.items:
            return f"{self.name} ({len(self.fifo.items)} descriptors queued)"
        return None


class _Lander:
    """A descriptor's bytes landing in its destination in order, as its bursts complete."""

    def __init__(self, t: Transfer):
        self.src = t.src.mem.read(t.src.addr, t.nbytes)
        self.dst = t.dst.mem.read(t.dst.addr, t.nbytes)  # a writable view
        self.landed = self.upto = 0

    def completed(self, upto: int, immediately: bool) -> None:
        self.upto = upto
        if immediately:
            self.land()

    def land(self) -> None:
        if self.upto > self.landed:
            self.dst[self.landed:self.upto] = self.src[self.landed:self.upto]
            self.landed = self.upto


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
