"""Exact fast-forward of periodic streaming: channels moving long descriptors through one port.

While iDMA channels stream bursts through a shared port and nothing else acts (the core waits,
or computes in TCM until a time further off), the port and the channels go through the same
motions again and again: the state *relative to now* repeats. The elided engine (``elide``)
notes that state each time a streaming channel wakes at a real event; when a channel wakes in a
state it was in before, ``P`` cycles earlier, with the same channels streaming and no other
event processed or due in between, every period after it is the same period shifted by ``P``,
and the engine advances by whole periods at once, up to the next point where something changes
(a channel's last bursts, the next event of anyone else), booking what the skipped periods
would have booked: bytes, the contention they added, the port log's requests.

Exact, not approximate: in one binade ``[2^(e-1), 2^e)`` every float time is an integer number
of ``u = 2^(e-53)``; a difference of two of them is exact, and ``t + d`` for a constant ``d``
(a burst's data-path cycles, the latency) is ``t`` plus ``d`` rounded to ``u``, the same for every
``t``, unless ``d`` lies exactly half-way between two multiples of ``u`` (then rounding to even
depends on ``t``; the period must be an even number of ``u``). So while every time involved
stays in the binade of the first noted state, a repeat of the relative state (compared as exact
differences) repeats the arithmetic bit for bit, and shifting by ``k P`` is exact. The
contention counter is not a time: the skipped periods' increments (exact differences, the
same each period) are added to it one by one, as the reference does.
"""

from __future__ import annotations

import math
from collections import deque
from heapq import heapify
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    from dspsim.hw.port import MemoryPort


class Stream:
    """A descriptor moving burst by burst: where its walk is, as the fast-forward sees it.

    Between two steps the walk is about to issue burst ``i`` at its local time ``now`` (its
    wake-up, when it waited: the time of its pending event), with ``inflight`` the completions
    of its bursts in flight. ``now`` is ``None`` once the walk has issued its last burst."""

    __slots__ = ("name", "process", "i", "now", "inflight", "full", "count", "nbytes",
                 "ranges")

    def __init__(self, name: str, process: simpy.Process, burst_bytes: int, nbytes: int,
                 ranges: tuple = ()):
        self.name = name
        self.process = process
        self.i = 0
        self.now: float | None = None
        self.inflight: deque[float] = deque()
        self.full = nbytes // burst_bytes  # bursts of burst_bytes (a partial one may follow)
        self.count = -(-nbytes // burst_bytes)
        self.nbytes = burst_bytes
        self.ranges = ranges  # ((memory, first byte, end byte, written), ...) when moving data


class Repeats:
    """The fast-forward of one port's streams (the elided engine only)."""

    def __init__(self, port: MemoryPort):
        self.port = port
        self.streams: list[Stream] = []
        self.increments: list[float] = []  # contention the port added, since the last reset
        self._seen: dict[tuple, tuple] = {}

    def enter(self, stream: Stream) -> None:
        self.streams.append(stream)
        self.reset()

    def leave(self, stream: Stream) -> None:
        self.streams.remove(stream)
        self.reset()

    def reset(self) -> None:
        self._seen.clear()
        self.increments.clear()

    # ------------------------------------------------------------------ noting and matching
    def woke(self, stream: Stream) -> None:
        """``stream`` woke at a real event (``env.now == stream.now``); advance by whole
        periods if its state repeats one noted earlier."""
        port = self.port
        if port.speculation is not None or port.flows != len(self.streams):
            return
        t = stream.now
        others = [s for s in self.streams if s is not stream]
        if any(s.now is None for s in others):
            return
        pf = port._path_free
        key = (stream.name, pf - t if pf > t else None, *[s.now - t for s in others])
        snap = self._snapshot(stream, others)
        if snap is None:
            return
        before = self._seen.get(key)
        self._seen[key] = snap
        if before is not None and _relative(before) == _relative(snap):
            self._skip(before, snap, stream)

    def _snapshot(self, stream: Stream, others: list[Stream]) -> tuple | None:
        port = self.port
        env = port.env
        pending = {id(s.process._target): s for s in others}
        if len(pending) != len(others):
            return None
        outside = None
        queued = []
        for when, _, eid, event in env._queue:
            s = pending.get(id(event))
            if s is None:
                if outside is None or (when, eid) < outside:
                    outside = (when, eid)
            elif when != s.now:  # not waiting where its walk says
                return None
            else:
                queued.append((eid, s.name))
        if len(queued) != len(others):
            return None
        order = tuple(name for _, name in sorted(queued))  # who of equal times runs first
        walks = tuple((s, s.i, s.now, tuple(s.inflight)) for s in [stream, *others])
        log = port.log
        return (stream.now, tuple(port._slot_free), tuple(port._slot_holder), port._next_slot,
                port._path_free, port._path_owner, tuple(port._recent), walks, order,
                port.bytes_read, port.bytes_written, len(self.increments),
                None if log is None else (len(log), log.dropped), outside)

    # ------------------------------------------------------------------ advancing
    def _skip(self, before: tuple, now: tuple, stream: Stream) -> None:
        port, env = self.port, self.port.env
        t0, t = before[0], now[0]
        period = t - t0
        if not (t0 > 0 and period > 0) or before[13] != now[13]:
            return
        log = port.log
        if log is not None and before[12][1] != now[12][1]:
            return  # the log dropped some of the period's requests
        bursts = [w[1] - w0[1] for w, w0 in zip(now[7], before[7])]
        if any(b <= 0 for b in bursts) or any(w[0] is not w0[0] for w, w0 in zip(now[7],
                                                                               before[7])):
            return
        if not _disjoint(self.streams):
            return
        binade = math.frexp(t0)[1]
        top = math.ldexp(1.0, binade)  # every time must stay below, in t0's binade
        grid = binade - 53  # u = 2^grid
        if _odd(period, grid) and any(_half_way(d, grid) for d in self._constants()):
            return
        latest = _latest(now, t)
        k = min((min(s.full, s.count - 1) - s.i) // b for s, b in zip(self.streams_of(now),
                                                                       bursts))
        k = _fit(k, latest, period, top)
        if now[13] is not None:
            k = _fit(k, latest, period, now[13][0])
        if k < 1:
            return
        shift = k * period
        # counters: bytes; the contention the period added, increment by increment
        port.bytes_read += k * (now[9] - before[9])
        port.bytes_written += k * (now[10] - before[10])
        increments = self.increments[before[11]:now[11]]
        acc = port.contention_cycles
        for _ in range(k):
            for d in increments:
                acc += d
        port.contention_cycles = acc
        if log is not None:
            entries = log[before[12][0]:now[12][0]]
            for j in range(1, k + 1):
                step = j * period
                for e in entries:
                    log.append((e[0] + step, e[1] + step, e[2] + step, e[3] + step, *e[4:]))
        # the port: request slots (rotated by the requests issued), data path, recent spans
        m = port.max_outstanding
        slots, holders, first = now[1], now[2], now[3]
        nxt = (first + k * sum(bursts)) % m
        for r in range(m):
            a, b = (first + r) % m, (nxt + r) % m
            port._slot_free[b] = slots[a] + shift if slots[a] > t else slots[a]
            port._slot_holder[b] = holders[a]
        port._next_slot = nxt
        if port._path_free > t:
            port._path_free += shift
        port._recent = deque((a + shift, b + shift) for a, b in port._recent if b > t)
        # the streams, and the pending wake-ups of the others (keeping their queue order)
        for s, b in zip(self.streams_of(now), bursts):
            s.i += k * b
            s.now += shift
            moved_inflight = [x + shift if x > t else x for x in s.inflight]
            s.inflight.clear()  # in place: the walk holds it
            s.inflight.extend(moved_inflight)
        moved = {id(s.process._target) for s in self.streams if s is not stream}
        queue = env._queue
        for j, (when, prio, eid, event) in enumerate(queue):
            if id(event) in moved:
                queue[j] = (when + shift, prio, eid, event)
                event.since += shift
        heapify(queue)
        env._now = stream.now  # the waker wakes k periods later, as it would have
        self.reset()

    def streams_of(self, snap: tuple) -> list[Stream]:
        return [w[0] for w in snap[7]]

    def _constants(self) -> list[float]:
        """What the period's arithmetic adds to a time: each stream's burst on the data path,
        and the latency."""
        port = self.port
        return [port.latency_cycles, *[s.nbytes * port.cycles_per_byte for s in self.streams]]


def _relative(snap: tuple) -> tuple:
    """A snapshot's state relative to its time, as exact differences; what lies at or before
    that time (a slot freed, the data path idle) only compares as past."""
    t = snap[0]
    slots, holders, first = snap[1], snap[2], snap[3]
    ring = [(x - t, h) if x > t else None
            for x, h in zip(slots[first:] + slots[:first], holders[first:] + holders[:first])]
    path = (snap[4] - t, snap[5]) if snap[4] > t else None
    recent = [(a - t if a > t else 0.0, b - t) for a, b in snap[6] if b > t]
    walks = [(w[0].name, w[2] - t, [x - t if x > t else None for x in w[3]]) for w in snap[7]]
    return ring, path, recent, walks, snap[8]


def _latest(snap: tuple, t: float) -> float:
    """The latest time the state holds (every time the next period computes is below it
    shifted by the period)."""
    values = [*snap[1], snap[4], *[b for _, b in snap[6]]]
    for w in snap[7]:
        values.append(w[2])
        values.extend(w[3])
    return max(t, *values)


def _fit(k: int, latest: float, period: float, bound: float) -> int:
    """The largest ``j <= k`` with ``latest + j period < bound``."""
    if k < 1 or latest + period >= bound:
        return 0
    j = min(k, int((bound - latest) / period) + 1)
    while j > 0 and not latest + j * period < bound:
        j -= 1
    return j


def _odd(x: float, grid: int) -> bool:
    return int(math.ldexp(x, -grid)) % 2 == 1


def _half_way(d: float, grid: int) -> bool:
    """``d`` is an odd multiple of half of ``2^grid``: adding it rounds to even."""
    x = math.ldexp(d, -grid)
    return x - math.floor(x) == 0.5


def _disjoint(streams: list[Stream]) -> bool:
    """No stream moving data writes where another reads or writes (then when each lands
    its bytes, which a fast-forward does not keep, could matter)."""
    for i, s in enumerate(streams):
        for other in streams[i + 1:]:
            for mem, lo, hi, written in s.ranges:
                for mem2, lo2, hi2, written2 in other.ranges:
                    if mem is mem2 and (written or written2) and lo < hi2 and lo2 < hi:
                        return False
    return True
