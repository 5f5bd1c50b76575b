"""The DSP subsystem's port to DDR, shared by the core's uncached accesses and every iDMA channel.

The port is a FIFO server with three parameters:

- ``max_outstanding`` requests may be in flight; a request that finds them all taken waits for
  the earliest one to finish (FIFO among waiters);
- the data path moves ``bytes_per_cycle``; requests occupy it one after another, in the order
  they were issued;
- a request completes ``latency_cycles`` after its data has crossed the data path.

One request alone therefore takes ``latency + bytes / bandwidth`` cycles.

At ``tile`` fidelity a whole transfer or kernel call is one reservation (:meth:`DdrPort.bulk`):
its duration alone is the closed form of the burst-level recursion (:func:`transfer_cycles`,
:func:`dspsim.kernels.shapes.ddr_call`), stretched when the port is shared.

Because service is deterministic and first-come-first-served, the completion time of a request
is fully known the moment it is issued. The port therefore computes it at issue (a calendar of
slot-free times and a data-path-free time) instead of running a process that wakes per request;
the requester waits on that time. This is exact for FIFO service and costs no SimPy event of its
own, which is what keeps burst-level runs fast. Requests must be issued at the simulated time
they really leave the requester (never booked ahead), or FIFO order would be wrong.
"""

from __future__ import annotations

import math

import simpy

from dspsim.config import Ddr


def transfer_cycles(
    nbytes: int, burst_bytes: int, window: int, latency_cycles: float, cycles_per_byte: float
) -> float:
    """Cycles from a transfer's first burst issue to its last burst's completion, alone on the
    port: bursts of ``burst_bytes`` (the last one partial), at most ``window`` in flight.

    Burst ``i`` completes at ``max(done[i-window] + size_i / bw + L, done[i-1] + size_i / bw)``:
    a max-plus recurrence whose longest path is either all data-path steps (bandwidth-bound)
    or as many window jumps as fit (latency-bound); the answer is the larger of the two.
    """
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


class DdrPort:
    def __init__(self, env: simpy.Environment, cfg: Ddr, log: bool = False):
        self.env = env
        self.latency_cycles = cfg.latency_cycles
        self.cycles_per_byte = 1.0 / cfg.bytes_per_cycle
        self.max_outstanding = cfg.max_outstanding
        # Request slots as a ring: the data path is FIFO and the latency constant, so requests
        # complete in the order they were issued and the next slot to free is always the one
        # the oldest request holds. When each slot frees, and who holds it until then:
        self._slot_free = [0.0] * cfg.max_outstanding
        self._slot_holder = [""] * cfg.max_outstanding
        self._next_slot = 0
        self._path_free = 0.0  # when the data path is next free
        self.bytes_read = 0
        self.bytes_written = 0
        # cycles requests waited for a slot or the data path that another requester held
        self.contention_cycles = 0.0
        self._path_owner = ""
        self._usage: list[tuple[float, float, float]] = []  # tile fidelity: path bookings
        # (issue, data_start, data_end, done, bytes, is_write, requester) when logging
        self.log: list[tuple] | None = [] if log else None

    def request(self, now: float, nbytes: int, write: bool, requester: str = "") -> float:
        """Issue a request of ``nbytes`` at ``now`` (the current simulated time, passed in by
        the requester, who already knows it); return the cycle at which it completes."""
        i = self._next_slot
        slot = self._slot_free[i]
        if slot > now:
            start = slot
            if self._slot_holder[i] != requester:  # all taken, the next to free by another
                self.contention_cycles += slot - now
        else:
            start = now
        data_start = self._path_free
        if data_start > start:
            if self._path_owner != requester:
                self.contention_cycles += data_start - start
        else:
            data_start = start
        self._path_owner = requester
        data_end = self._path_free = data_start + nbytes * self.cycles_per_byte
        done = data_end + self.latency_cycles
        self._slot_free[i] = done
        self._slot_holder[i] = requester
        self._next_slot = i + 1 if i + 1 < self.max_outstanding else 0
        if write:
            self.bytes_written += nbytes
        else:
            self.bytes_read += nbytes
        if self.log is not None:
            self.log.append((now, data_start, data_end, done, nbytes, write, requester))
        return done

    @property
    def busy_cycles(self) -> float:
        """Data-path occupancy: every byte crosses it once at the port's bandwidth."""
        return (self.bytes_read + self.bytes_written) * self.cycles_per_byte

    def bulk(
        self,
        now: float,
        read_bytes: int,
        write_bytes: int,
        alone_cycles: float,
        requester: str,
        request_bytes: int,
    ) -> float:
        """Tile fidelity: a whole transfer or kernel call issued at ``now`` that would take
        ``alone_cycles`` alone on the port; return the cycle at which it completes.

        The port is shared as a fluid, first come first served: each reservation would use the
        data path at its own average pace alone (its bytes' path time over ``alone_cycles``),
        but only out of the share that earlier reservations leave. It completes when it has
        accumulated its path time, and no earlier than alone. A window-bound transfer that
        leaves gaps between its bursts thus does not delay a concurrent one, while
        bandwidth-bound ones queue behind each other. The port's request slots cap the share
        all reservations together can use: ``max_outstanding`` requests of ``request_bytes``,
        each holding its slot for a round trip. One SimPy event per reservation.
        """
        # a kernel's last posted stores cross the path after it returns: book what fits
        path_cycles = min((read_bytes + write_bytes) * self.cycles_per_byte, alone_cycles)
        own_rate = path_cycles / alone_cycles if alone_cycles > 0 else 1.0
        beat = request_bytes * self.cycles_per_byte
        capacity = min(1.0, self.max_outstanding * beat / (beat + self.latency_cycles))
        served_at = self._take_capacity(now, path_cycles, min(own_rate, capacity), capacity)
        duration = max(alone_cycles, served_at - now)
        self.contention_cycles += duration - alone_cycles
        self.bytes_read += read_bytes
        self.bytes_written += write_bytes
        if self.log is not None:
            self.log.append((now, now, served_at, now + duration, read_bytes + write_bytes,
                             write_bytes > 0, requester))
        return now + duration

    def _take_capacity(self, now: float, need: float, own_rate: float, capacity: float) -> float:
        """Book ``need`` cycles of data path from ``now`` at up to ``own_rate`` of it, out of
        the ``capacity`` earlier bookings leave free; return when the last of it is served."""
        use = [seg for seg in self._usage if seg[1] > now]  # (start, end, share) segments
        cuts = sorted({now, *(t for s, e, _ in use for t in (s, e) if t > now)})
        booked: list[tuple[float, float, float]] = []
        t, left = now, need
        for nxt in cuts[1:] + [math.inf]:
            busy = sum(share for s, e, share in use if s <= t < e)
            rate = min(own_rate, max(0.0, capacity - busy))
            if rate > 0 and (nxt == math.inf or rate * (nxt - t) >= left):
                booked.append((t, t + left / rate, rate))
                t += left / rate
                break
            if rate > 0:
                booked.append((t, nxt, rate))
                left -= rate * (nxt - t)
            t = nxt
        self._usage = use + booked
        return t
