"""The DSP subsystem's port to DDR, shared by the core's uncached accesses and every iDMA channel.

The port is a FIFO server with three parameters:

- ``max_outstanding`` requests may be in flight; a request that finds them all taken waits for
  the earliest one to finish (FIFO among waiters);
- the data path moves ``bytes_per_cycle``; requests occupy it one after another, in the order
  they were issued;
- a request completes ``latency_cycles`` after its data has crossed the data path.

One request alone therefore takes ``latency + bytes / bandwidth`` cycles.

Because service is deterministic and first-come-first-served, the completion time of a request
is fully known the moment it is issued. The port therefore computes it at issue (a calendar of
slot-free times and a data-path-free time) instead of running a process that wakes per request;
the requester waits on that time. This is exact for FIFO service and costs no SimPy event of its
own, which is what keeps burst-level runs fast. Requests must be issued at the simulated time
they really leave the requester (never booked ahead), or FIFO order would be wrong.
"""

from __future__ import annotations

import heapq

import simpy

from dspsim.config import Ddr


class DdrPort:
    def __init__(self, env: simpy.Environment, cfg: Ddr, log: bool = False):
        self.env = env
        self.latency_cycles = cfg.latency_cycles
        self.cycles_per_byte = 1.0 / cfg.bytes_per_cycle
        self._slot_free = [0.0] * cfg.max_outstanding  # heap: when each request slot frees
        self._path_free = 0.0  # when the data path is next free
        self.bytes_read = 0
        self.bytes_written = 0
        self.requests = 0
        self.busy_cycles = 0.0  # data-path occupancy
        # (issue, data_start, data_end, done, bytes, is_write, requester) when logging
        self.log: list[tuple] | None = [] if log else None

    def request(self, now: float, nbytes: int, write: bool, requester: str = "") -> float:
        """Issue a request of ``nbytes`` at ``now`` (the current simulated time, passed in by
        the requester, who already knows it); return the cycle at which it completes."""
        slot = self._slot_free[0]
        start = slot if slot > now else now
        path = self._path_free
        data_start = path if path > start else start
        data_end = data_start + nbytes * self.cycles_per_byte
        self._path_free = data_end
        done = data_end + self.latency_cycles
        heapq.heapreplace(self._slot_free, done)
        self.busy_cycles += data_end - data_start
        self.requests += 1
        if write:
            self.bytes_written += nbytes
        else:
            self.bytes_read += nbytes
        if self.log is not None:
            self.log.append((now, data_start, data_end, done, nbytes, write, requester))
        return done
