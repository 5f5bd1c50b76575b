"""A memory's port (J6: DDR; a smaller SoC: PSRAM, SRAM), shared by the core's uncached
accesses, its data cache's line fills and every iDMA channel; one per memory.

A server of three parts: ``max_outstanding`` request slots (a request finding all taken waits
for the first to free); the data path, occupied in issue order; the request policy
(:mod:`dspsim.hw.policy`): a request completes its ``latency`` after its data crossed, holding
its slot until then. A lone request takes ``latency + bytes / bandwidth``.

With a *uniform* policy (one latency: J6's) requests complete in issue order, so the slots are
a ring turned one step a request; the inlined burst loop (:meth:`MemoryPort.stream`),
:meth:`MemoryPort.shift`, :meth:`MemoryPort.relative_state` and the fast-forwards
(:mod:`dspsim.hw.finder`, :mod:`~dspsim.hw.repeats`) rely on it.
Otherwise a request takes the slot that frees first, booked one by one (same cycles).

Service is deterministic and FIFO, so a completion is known at issue: the port computes it then
instead of waking a process per request. Requests must be issued when they really leave the
requester (never booked ahead), or FIFO order would be wrong.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from typing import Any

from dspsim.config import MemoryCfg
from dspsim.hw.policy import transfer_cycles
from dspsim.hw.repeats import Note, StreamRuns
from dspsim.probes import PortLog, RunContext
from dspsim.ticks import cycles

__all__ = ["MemoryPort", "transfer_cycles"]


class MemoryPort:
    """The port of the memory ``name`` (its table ``cfg``)."""

    def __init__(self, ctx: RunContext, name: str, cfg: MemoryCfg):
        self.env = ctx.env
        self.name = name
        self.policy = policy = cfg.policy  # what a request costs (built once per table)
        # the port books in ticks (dspsim.hw.clock): a read's latency, a byte's path time
        self.latency_ticks = policy.latency_ticks(False)
        self.ticks_per_byte = policy.ticks_per_byte
        self.max_outstanding = cfg.max_outstanding
        # Request slots: a ring under a uniform policy (the next slot to free is the oldest
        # request's); else the first to free (:meth:`_request_any` stands in for request)
        self.ring = policy.uniform
        self._latencies = (self.latency_ticks, policy.latency_ticks(True))  # a read's, a write's
        if not self.ring:  # (a policy that is not linear: :meth:`_request_path`)
            self.request = (self._request_any if policy.linear  # type: ignore[method-assign]
                            else self._request_path)
        # a request's path ticks are bytes x _per_byte + _fixed: _fixed 0 unless the policy is
        # not linear, which books each request's path ticks whole here (summed: path_busy_ticks)
        self._per_byte = self.ticks_per_byte if policy.linear else 0
        self._fixed = 0
        self.path_busy_ticks = 0
        self._slot_free = [0] * cfg.max_outstanding
        self._slot_holder = [""] * cfg.max_outstanding
        self._next_slot = 0
        self._path_free = 0  # when the data path is next free
        self.bytes_read = 0
        self.bytes_written = 0
        # data-path busy stretches (start, end) ending after the latest issue (busy_until);
        # back-to-back spans extend the last one; ends only grow
        self._recent: deque[tuple[int, int]] = deque()
        # ticks requests waited for a slot or the data path that another requester held
        self.contention_ticks = 0
        self._path_owner = ""
        self.flows = 0  # the walks running on the port now
        # (issue, data_start, data_end, done, bytes, is_write, requester) when logging
        self.log: Any = PortLog(ctx.log_limit) if ctx.port_log else None  # has append(entry)
        # the elided engine fast-forwards channels streaming through the port (repeats.StreamRuns)
        self.repeats = StreamRuns(self) if ctx.elide and self.ring else None

    def request(self, now: int, nbytes: int, write: bool, requester: str = "") -> int:
        """Issue a request of ``nbytes`` at ``now`` (ticks); return its completion
        (:meth:`stream` books bursts the same way, inlined: keep them alike)."""
        i = self._next_slot
        slot = self._slot_free[i]
        if slot > now:
            start = slot
            if self._slot_holder[i] != requester:  # all taken, the next to free by another
                self.contention_ticks += slot - now
        else:
            start = now
        data_start = self._path_free
        if data_start > start:
            if self._path_owner != requester:
                self.contention_ticks += data_start - start
        else:
            data_start = start
        self._path_owner = requester
        data_end = self._path_free = data_start + nbytes * self._per_byte + self._fixed
        recent = self._recent
        if recent and recent[-1][1] == data_start:  # back to back: one stretch
            recent[-1] = (recent[-1][0], data_end)
        else:
            recent.append((data_start, data_end))
        while recent and recent[0][1] <= now:
            recent.popleft()
        done = data_end + self._latencies[write]
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

    def _request_any(self, now: int, nbytes: int, write: bool, requester: str = "") -> int:
        """:meth:`request` where requests may complete out of order: the slot that frees first
        (on a tie, the first from the ring's next)."""
        free, m, k = self._slot_free, self.max_outstanding, self._next_slot
        self._next_slot = min(range(k, k + m), key=lambda j: free[j % m]) % m
        return MemoryPort.request(self, now, nbytes, write, requester)

    def _request_path(self, now: int, nbytes: int, write: bool, requester: str = ""
                      ) -> int:
        """:meth:`_request_any` under a non-linear policy: the path held for ``path_ticks``."""
        self._fixed = self.policy.path_ticks(nbytes, write)
        self.path_busy_ticks += self._fixed
        return self._request_any(now, nbytes, write, requester)

    def stream(self, now: int, inflight: deque[int], i: int, count: int, full: int,
               burst: int, rest: int, window: int, write: bool, requester: str,
               horizon: int) -> tuple[int, int]:
        """A walk's bursts ``i`` .. ``count - 1`` from ``now`` (``burst`` bytes up to ``full``,
        then one of ``rest``), at most ``window`` in flight (``inflight``), while each wait ends
        before ``horizon`` (the next queued event); return the next burst and its local time.
        Books as :meth:`request` does, inlined; on a non-uniform policy it books nothing."""
        if not self.ring:
            return i, now
        first = i
        i, now = self._book_bursts(now, inflight, i, count, full, burst, rest, window, write,
                                   requester, horizon)
        if i > first:  # what request lets go of at each burst: the stretches ended by the last
            recent = self._recent
            while recent and recent[0][1] <= now:
                recent.popleft()
        # bursts first .. i - 1: of ``burst`` bytes below ``full``, the one after of ``rest``
        moved = (min(i, full) - min(first, full)) * burst + (rest if first <= full < i else 0)
        if write:
            self.bytes_written += moved
        else:
            self.bytes_read += moved
        return i, now

    def _book_bursts(self, now: int, inflight: deque[int], i: int, count: int, full: int,
                     burst: int, rest: int, window: int, write: bool, requester: str,
                     horizon: int) -> tuple[int, int]:
        """:meth:`stream`'s burst loop: per burst the window, the ring's slot, the data path,
        its busy stretch, the booking."""
        (slot_free, slot_holder, m, k, path_free, owner, latency, recent, log,
         contention, beat, last_beat, run_start, run_end) = self._ring_locals(burst, rest)
        held = len(inflight)
        while i < count:
            if held == window:  # the window: wait for the oldest burst to complete
                oldest = inflight[0]
                if oldest > now:
                    if not oldest < horizon:
                        break  # a wait the walk yields for (it pops the oldest itself)
                    now = oldest
                inflight.popleft()
                held -= 1
            start = slot_free[k]  # the ring's slot, as request(now, size, write, requester)
            if start > now:
                if slot_holder[k] != requester:
                    contention += start - now
            else:
                start = now
            data_start = path_free  # the data path, after the ring's slot
            if data_start > start:
                if owner != requester:
                    contention += data_start - start
            else:
                data_start = start
            owner = requester
            data_end = path_free = data_start + (beat if i < full else last_beat)
            if data_start != run_end:  # the stretch: the path was idle before it, a new one
                if run_end is not None:
                    recent.append((run_start, run_end))
                run_start = data_start
            run_end = data_end
            slot_free[k] = done = data_end + latency  # the booking
            slot_holder[k] = requester
            k = k + 1 if k + 1 < m else 0
            if log is not None:
                log.append((now, data_start, data_end, done, burst if i < full else rest, write,
                            requester))
            inflight.append(done)
            held += 1
            i += 1
        self._store_ring(k, path_free, owner, contention, run_start, run_end)
        return i, now

    def _ring_locals(self, burst: int, rest: int) -> tuple:
        """The port's state as :meth:`_book_bursts` reads it into locals."""
        recent = self._recent
        # the last busy stretch, open: the bursts queued back to back on the path extend it
        run_start, run_end = recent.pop() if recent else (None, None)
        # a burst's data-path ticks, as request computes them (nbytes * ticks_per_byte)
        beat, last_beat = burst * self.ticks_per_byte, rest * self.ticks_per_byte
        return (self._slot_free, self._slot_holder, self.max_outstanding, self._next_slot,
                self._path_free, self._path_owner, self.latency_ticks, recent, self.log,
                self.contention_ticks, beat, last_beat, run_start, run_end)

    def _store_ring(self, k: int, path_free: int, owner: str, contention: int,
                    run_start: int | None, run_end: int | None) -> None:
        """:meth:`_book_bursts`'s locals stored back (its open busy stretch closed)."""
        if run_end is not None:
            self._recent.append((run_start, run_end))
        self._next_slot, self._path_free, self._path_owner = k, path_free, owner
        self.contention_ticks = contention

    @property
    def path_free(self) -> int:
        return self._path_free

    def shift(self, before: int, now_slot: int, runs: int, now: int, dt: int) -> None:
        """Move the port on by ``runs`` repeats of a stretch that turned its next slot from
        ``before`` to ``now_slot`` and lasted ``dt / runs`` (a booked run): what is in flight
        after ``now`` moves by ``dt`` (on a port that is no ring every slot's free time, whose
        order picks the next slot), the slots turn as the requests turned them."""
        m, free, holder = self.max_outstanding, self._slot_free, self._slot_holder
        order = free[now_slot:] + free[:now_slot]  # from the next slot on, as at ``now``
        held = holder[now_slot:] + holder[:now_slot]
        order = [t + dt if t > now or not self.ring else t for t in order]
        ns = (now_slot + runs * ((now_slot - before) % m)) % m
        free[ns:], free[:ns] = order[:m - ns], order[m - ns:]
        holder[ns:], holder[:ns] = held[:m - ns], held[m - ns:]
        self._next_slot = ns
        if self._path_free > now:
            self._path_free += dt
        self._recent = deque((max(a, now) + dt, e + dt) for a, e in self._recent if e > now)

    def note(self, st: Note) -> None:
        """The port's part of a note (:class:`dspsim.hw.repeats.Note`): the walks on it, its
        :meth:`relative_state`, its next slot, its counters."""
        state, held, ns = self.relative_state(st.now)
        st.key += [self.flows, state]
        if held > st.latest:
            st.latest = held
        st.rings.append(ns)
        st.ints += [self.bytes_read, self.bytes_written]
        st.int_at += [(self, "bytes_read"), (self, "bytes_written")]
        st.int_mem += [None, None]
        st.accs += [self.contention_ticks, self.path_busy_ticks]
        st.acc_at += [(self, "contention_ticks"), (self, "path_busy_ticks")]

    def relative_state(self, now: int) -> tuple[tuple, int, int]:
        """What a later request can tell, relative to ``now``: each slot from the next (free
        time less ``now`` if after it, else, on a port that is no ring, its rank among the free
        ones, which picks the next slot; a taken slot's holder, as contention depends on it),
        the data path and its owner likewise, the busy stretches still crossing; with the
        latest time held and the next slot."""
        ns, slots, holders = self._next_slot, self._slot_free, self._slot_holder
        order = slots[ns:] + slots[:ns]
        if self.ring:  # completions in issue order: the slots still taken are the last ones
            k = bisect_right(order, now)
            ring: tuple = (k, tuple([t - now for t in order[k:]]),
                           tuple((holders[ns:] + holders[:ns])[k:]))
        else:
            past = {t: k for k, t in enumerate(sorted({t for t in slots if t <= now}))}
            held = holders[ns:] + holders[:ns]
            ring = tuple([(t - now, h) if t > now else (past[t],) for t, h in zip(order, held)])
        path = self._path_free - now if self._path_free > now else None
        recent = tuple([(max(s, now) - now, e - now) for s, e in self._recent if e > now])
        latest = max(now, self._path_free, max(slots),  # (busy stretches' ends only grow)
                     self._recent[-1][1] if self._recent else now)
        return (ring, (path, self._path_owner if path is not None else None), recent), latest, ns

    @property
    def contention_cycles(self) -> float:
        return cycles(self.contention_ticks)

    @property
    def busy_cycles(self) -> float:
        return cycles(self.busy_ticks)

    @property
    def busy_ticks(self) -> int:
        """Data-path occupancy: every byte once at the port's bandwidth (a policy that is not
        linear: its requests' path ticks summed)."""
        if not self.policy.linear:
            return self.path_busy_ticks
        return (self.bytes_read + self.bytes_written) * self.ticks_per_byte

    def busy_until(self, t: int) -> int:
        """Data-path busy ticks up to ``t`` (>= every issue so far): those booked less what
        crosses after ``t``."""
        after = sum(end - max(start, t) for start, end in self._recent if end > t)
        return self.busy_ticks - after

    def idle_at(self, t: int) -> bool:
        """Nothing on the port after ``t``: no walk, no request in flight, the path free."""
        return not self.flows and self._path_free <= t and all(f <= t for f in self._slot_free)

    def stats(self) -> dict[str, float]:
        """Bytes each way, data-path busy cycles, contention cycles (requests queued for a slot
        or the data path behind another requester's)."""
        return {"read_bytes": self.bytes_read, "write_bytes": self.bytes_written,
                "busy_cycles": self.busy_cycles, "contention_cycles": self.contention_cycles}


