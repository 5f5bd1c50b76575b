"""What a request costs on a memory's port: the memory's *request policy*.

A request of ``nbytes`` occupies the data path for :meth:`RequestPolicy.data_cycles` and
completes :meth:`RequestPolicy.latency` after its data crossed it. The port, the closed forms,
the ops' bounds, the kernels and the calibration all ask the policy; a new pricing is a new
policy here.

- :class:`OneLatency`: every request completes ``latency_cycles`` after its data (J6's);
- :class:`ReadWriteLatency`: reads take ``latency_cycles``, writes ``write_latency_cycles``;
- :class:`Transactions` (``protocol = "transactions"``: the HiFi5's PSRAM controller): one
  transaction at a time, each holding the data path for its command, data and hold clocks.

A policy is built from the model's values quantized to whole ticks (:mod:`dspsim.hw.clock`):
its cycle figures are tick counts over a power of two, so a closed form summed from them in
floats is exact (below 2^29 cycles) and equals what the port books in ticks.

A *uniform* policy (one latency) completes requests in issue order, which the port's ring, its
inlined burst loop and the fast-forwards rely on; on other ports those fast paths are off (same
cycles, slower to compute).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from dspsim.ticks import TICKS_PER_CYCLE, ticks


def quantized(cycles: float) -> float:
    """``cycles`` rounded to whole ticks, in cycles (exact: a tick count over a power of two)."""
    return ticks(cycles) / TICKS_PER_CYCLE


def transfer_cycles(nbytes: int, burst_bytes: int, window: int, latency_cycles: float,
                    cycles_per_byte: float) -> float:
    """Cycles from a transfer's first burst issue to its last completion, alone on the port:
    bursts of ``burst_bytes`` (the last partial), at most ``window`` in flight, each completing
    ``latency_cycles`` after its data crossed. Burst ``i`` completes at ``max(done[i-window] +
    size_i / bw + L, done[i-1] + size_i / bw)``: a max-plus recurrence whose longest path is all
    data-path steps or as many window jumps as fit; the answer is the larger."""
    if nbytes <= 0:
        return 0.0
    n = math.ceil(nbytes / burst_bytes)
    last = nbytes - (n - 1) * burst_bytes
    bandwidth_bound = nbytes * cycles_per_byte + latency_cycles
    jumps, lead = divmod(n - 1, window)  # window jumps, then bursts of the first wave
    if jumps == 0:
        return bandwidth_bound
    beat = burst_bytes * cycles_per_byte
    latency_bound = (lead + 1) * beat + (jumps - 1) * (beat + latency_cycles) \
        + last * cycles_per_byte + 2 * latency_cycles
    return max(bandwidth_bound, latency_bound)


def engine_paced_cycles(idma: Any, nbytes: int, row: int, port_cycles: float,
                        last_trip: Any) -> float:
    """A descriptor of ``nbytes`` (rows of ``row`` bytes) on an iDMA engine with its own pace:
    its fetch (``idma.descriptor_cycles``), then the slower of the ports (``port_cycles``) and
    the engine: every byte but the last burst's at ``idma.engine_bytes_per_cycle`` (0: no
    pace), then that burst's trip (``last_trip(bytes)``)."""
    burst, rate = idma.burst_bytes, idma.engine_bytes_per_cycle
    last = row - (math.ceil(row / burst) - 1) * burst
    paced = (nbytes - last) / rate + last_trip(last) if rate else 0.0
    return idma.descriptor_cycles + max(port_cycles, paced)


@dataclass(frozen=True)
class OneLatency:
    """Every request: ``nbytes / bytes_per_cycle`` on the data path, then ``latency_cycles``."""

    latency_cycles: float
    bytes_per_cycle: float
    uniform: ClassVar[bool] = True  # every request the same latency (module doc)
    linear: ClassVar[bool] = True  # a request's data-path cycles: its bytes x cycles_per_byte

    @functools.cached_property
    def ticks_per_byte(self) -> int:
        """Data-path ticks per byte: the bandwidth's reciprocal, quantized."""
        return ticks(1.0 / self.bytes_per_cycle)

    @functools.cached_property
    def cycles_per_byte(self) -> float:
        return self.ticks_per_byte / TICKS_PER_CYCLE

    def latency(self, write: bool) -> float:
        """Cycles from a request's data crossing the path to its completion."""
        return self.latency_cycles

    def latency_ticks(self, write: bool) -> int:
        return ticks(self.latency(write))  # (built on whole ticks: exact)

    def path_ticks(self, nbytes: int, write: bool) -> int:
        """:meth:`path_cycles` in ticks (the port books them)."""
        return nbytes * self.ticks_per_byte

    def data_cycles(self, nbytes: float) -> float:
        """Cycles ``nbytes`` hold the data path (as the port books them)."""
        return nbytes * self.cycles_per_byte

    def path_cycles(self, nbytes: float, write: bool) -> float:
        """Cycles one request of ``nbytes`` holds the data path, either way."""
        return self.data_cycles(nbytes)

    def stream_path_cycles(self, nbytes: int, burst_bytes: int, write: bool) -> float:
        """Data-path cycles of ``nbytes`` in requests of ``burst_bytes``, either way (here
        whatever the requests' size)."""
        return nbytes * self.cycles_per_byte

    def request_cycles(self, nbytes: float, write: bool) -> float:
        """One request alone on an idle port, issue to completion."""
        return self.latency(write) + nbytes * self.cycles_per_byte

    def latency_total(self, reads: int, writes: int) -> float:
        """The latencies of ``reads`` reads and ``writes`` writes, summed (slot time beyond the
        data path)."""
        read, write = self.latency(False), self.latency(True)
        if read == write:
            return (reads + writes) * read
        return reads * read + writes * write

    def mean_latency(self, reads: float, writes: float) -> float:
        """Mean latency over ``reads`` reads and ``writes`` writes (counts or bytes)."""
        read, write = self.latency(False), self.latency(True)
        if read == write or reads + writes <= 0:
            return read
        return (reads * read + writes * write) / (reads + writes)

    def transfer_cycles(self, nbytes: int, burst_bytes: int, window: int,
                        write: bool) -> float:
        """:func:`transfer_cycles` at this policy's latency for the direction."""
        return transfer_cycles(nbytes, burst_bytes, window, self.latency(write),
                               self.cycles_per_byte)


@dataclass(frozen=True)
class ReadWriteLatency(OneLatency):
    """Reads as :class:`OneLatency`; a write completes ``write_latency_cycles`` after its data
    crossed the path. Requests no longer complete in issue order: not uniform."""

    write_latency: float = 0.0
    uniform: ClassVar[bool] = False

    def latency(self, write: bool) -> float:
        return self.write_latency if write else self.latency_cycles


@dataclass(frozen=True)
class Transactions(OneLatency):
    """One transaction at a time (a PSRAM behind its controller): ``b`` bytes hold the data path
    ``(command_clocks + ceil(b / bytes_per_clock) + hold) x clock_cycles`` (``hold`` a read's or
    a write's) and complete on release (latency 0). ``page_bytes`` chops a request into
    page-sized transactions, each paying command and hold (requests taken to start on a page
    boundary). ``refresh_clocks``: clocks each transaction pays on average for refresh
    collisions (share colliding x LC), 0: none. ``bytes_per_cycle``: the data clocks' rate. In
    order, but path cycles are not bytes times one rate: neither uniform nor linear."""

    clock_cycles: float = 1.0
    command_clocks: int = 0
    bytes_per_clock: float = 1.0
    read_hold_clocks: int = 2
    write_hold_clocks: int = 1
    page_bytes: int = 0
    refresh_clocks: float = 0.0
    uniform: ClassVar[bool] = False
    linear: ClassVar[bool] = False

    def transaction_clocks(self, nbytes: float, write: bool) -> float:
        """Memory clocks of one unchopped transaction of ``nbytes`` (refresh on average)."""
        hold = self.write_hold_clocks if write else self.read_hold_clocks
        clocks = self.command_clocks + math.ceil(nbytes / self.bytes_per_clock) + hold
        return clocks + self.refresh_clocks if self.refresh_clocks else clocks

    def path_ticks(self, nbytes: int, write: bool) -> int:
        """The transactions' clocks times the clock's cycles, to the nearest tick."""
        page = self.page_bytes
        if page <= 0 or nbytes <= page:
            return ticks(self.transaction_clocks(nbytes, write) * self.clock_cycles)
        full, rest = divmod(int(nbytes), page)
        clocks = full * self.transaction_clocks(page, write)
        if rest:
            clocks += self.transaction_clocks(rest, write)
        return ticks(clocks * self.clock_cycles)

    def path_cycles(self, nbytes: float, write: bool) -> float:
        return self.path_ticks(int(nbytes), write) / TICKS_PER_CYCLE

    def data_cycles(self, nbytes: float) -> float:
        """A read's path cycles (a port counts its busy cycles per request)."""
        return self.path_cycles(nbytes, False)

    def request_cycles(self, nbytes: float, write: bool) -> float:
        return self.path_cycles(nbytes, write)

    def stream_cycles(self, count: int, nbytes: float, write: bool) -> float:
        """``count`` requests of ``nbytes`` issued together: the last completes after the sum."""
        return count * self.path_cycles(nbytes, write)

    def stream_path_cycles(self, nbytes: int, burst_bytes: int, write: bool) -> float:
        """``nbytes`` in requests of ``burst_bytes`` (the last partial), each paying its own."""
        if nbytes <= 0:
            return 0.0
        full, rest = divmod(int(nbytes), burst_bytes)
        cycles = self.stream_cycles(full, burst_bytes, write)
        return cycles + self.path_cycles(rest, write) if rest else cycles

    def transfer_cycles(self, nbytes: int, burst_bytes: int, window: int,
                        write: bool) -> float:
        """A transfer's bursts one transaction after another, however many are in flight."""
        return self.stream_path_cycles(nbytes, burst_bytes, write)


RequestPolicy = OneLatency  # every policy is one (a subclass), and may be used as one


@functools.lru_cache(maxsize=256)
def request_policy(cfg: Any) -> OneLatency:
    """The policy of a memory's table (once per table, on its values quantized to ticks)."""
    if cfg.protocol == "transactions":  # (path cycles quantized per request: path_ticks)
        return Transactions(0.0, cfg.bytes_per_clock / cfg.clock_cycles, cfg.clock_cycles,
                            cfg.command_clocks, cfg.bytes_per_clock, cfg.read_hold_clocks,
                            cfg.write_hold_clocks, cfg.page_bytes, cfg.refresh_clocks)
    read, write = quantized(cfg.latency_cycles), cfg.write_latency_cycles
    if write is None or quantized(write) == read:
        return OneLatency(read, cfg.bytes_per_cycle)
    return ReadWriteLatency(read, cfg.bytes_per_cycle, quantized(write))
