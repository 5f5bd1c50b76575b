"""Exact fast-forward of periodic streaming: iDMA channels moving long descriptors through one port.

While channels stream bursts through a shared port and nothing else acts, the state *relative to
now* repeats. The elided engine notes that state each time a streaming channel wakes at a real
event (channels named by place: the waker, then the others in wake-up order). When a channel wakes
in a state noted ``h`` cycles earlier, with the same channels streaming, no other event processed
or due in between, and places possibly passed between channels (two of one kind swap every half
period), every later step is the same shifted by ``h``: the engine advances by whole steps up to
the next change (a channel's last window, anyone else's next event, the binade's end), booking
the skipped steps' bytes, contention and port-log requests. A found step is kept (for its binade)
and reused wherever the same relative state recurs.

Exact: in a binade ``[2^(e-1), 2^e)`` every float time is a whole number of ``u = 2^(e-53)``; a
difference of two is exact, and ``t + d`` for a constant ``d`` is ``t`` plus ``d`` rounded to
``u``, the same for every ``t``, unless ``d`` is half-way between two multiples of ``u`` (round to
even depends on ``t``: the shift must be an even number of ``u``). So while all times stay in one
binade, a repeated relative state (compared as exact differences) repeats the arithmetic bit for
bit. The contention counter likewise: each step adds a whole number of its grid while it stays in
one binade (by its parity where an increment is half-way), added one by one, as the reference
does, where it crosses one (:func:`accumulate`).
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_right
from collections import deque
from itertools import repeat
from operator import add, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import simpy

from dspsim.hw.clock import queued as queued_events
from dspsim.hw.clock import requeue, set_now, waits_on
from dspsim.probes import PortLog

if TYPE_CHECKING:
    from dspsim.hw.policy import OneLatency


class RingState(NamedTuple):
    """A port's request slots and data path as values (:meth:`MemoryPort.ring_state`): each
    slot's free time and holder, the next slot, the data path's free time, last owner and busy
    stretches ``(start, end)`` still read; put back shifted by :meth:`MemoryPort.restore`."""

    slots: tuple[float, ...]
    holders: tuple[str, ...]
    next_slot: int
    path_free: float
    path_owner: str
    recent: tuple[tuple[float, float], ...]


class RingPort(Protocol):
    """What the fast-forward reads and moves of a port (:class:`dspsim.hw.port.MemoryPort`):
    the slot ring, the data path, the counters and the log. Declared here so that the port
    imports this module and not the reverse."""

    env: simpy.Environment
    policy: OneLatency
    log: Any
    flows: int
    max_outstanding: int
    bytes_read: int
    bytes_written: int
    contention_cycles: float
    path_free: float

    def ring_state(self) -> RingState: ...

    def restore(self, state: RingState) -> None: ...


class Stream:
    """A descriptor's walk, burst by burst: about to issue burst ``i`` at local time ``now``
    (``None`` once its last is issued), ``inflight`` its bursts' completions. Streams of one
    ``kind`` (burst bytes, window, direction) are interchangeable. ``elides``: the walk itself
    passes the waits that end before the next queued event."""

    __slots__ = ("name", "process", "i", "now", "inflight", "full", "count", "burst_bytes",
                 "kind", "ranges", "elides", "last_window")

    def __init__(self, name: str, process: simpy.Process, burst_bytes: int, window: int,
                 nbytes: int, write: bool, ranges: tuple = ()):
        self.name = name
        self.process = process
        self.i = 0
        self.now: float | None = None
        self.inflight: deque[float] = deque()
        self.full = nbytes // burst_bytes  # bursts of burst_bytes (a partial one may follow)
        self.count = -(-nbytes // burst_bytes)
        self.burst_bytes = burst_bytes
        self.kind = (burst_bytes, window, write)
        self.ranges = ranges  # ((memory, first byte, end byte, written), ...) when moving data
        self.elides = False
        # past this burst the walk is in its last window (no step is worth noting)
        self.last_window = min(self.full, self.count - 1) - window


class Snapshot:
    """The port's and its streams' state when ``streams[0]`` woke at ``t`` (the others in the
    order their wake-ups are queued), and the counters then."""

    __slots__ = ("t", "slots", "holders", "first", "path_free", "path_owner", "recent",
                 "streams", "positions", "nows", "inflights", "read", "written",
                 "increments", "logged", "dropped", "outside", "_relative", "_latest")

    def __init__(self, repeats: Repeats, streams: list[Stream], outside: tuple | None):
        port = repeats.port
        self.t = streams[0].now
        ring = port.ring_state()
        self.slots, self.holders, self.first = ring.slots, ring.holders, ring.next_slot
        self.path_free, self.path_owner, self.recent = ring.path_free, ring.path_owner, \
            ring.recent
        self.streams = streams
        self.positions = [s.i for s in streams]
        self.nows = [s.now for s in streams]
        self.inflights = [tuple(s.inflight) for s in streams]
        self.read, self.written = port.bytes_read, port.bytes_written
        self.increments = len(repeats.increments)
        log = port.log
        self.logged, self.dropped = (len(log), log.dropped) if log is not None else (0, 0)
        self.outside = outside
        self._relative: tuple | None = None
        self._latest: float | None = None

    def relative(self) -> tuple:
        """The state relative to ``t`` as exact differences, streams named by place; what lies
        at or before ``t`` compares as past, but a freed slot's holder still counts (stricter
        than need be, and cheaper)."""
        if self._relative is not None:
            return self._relative
        t, first = self.t, self.first
        rank = {s.name: k for k, s in enumerate(self.streams)}
        slots, holders = self.slots, self.holders
        ring = slots[first:] + slots[:first]
        times = [x - t if x > t else None for x in ring]  # each slot's free time less t
        held = holders[first:] + holders[:first]
        who = list(map(rank.get, held, held))  # rank.get(h, h), each
        path = (self.path_free - t, rank.get(self.path_owner, self.path_owner)) \
            if self.path_free > t else None
        recent = [(a - t if a > t else 0.0, b - t) for a, b in self.live()]
        walks = [(s.kind, now - t, [x - t if x > t else None for x in inflight])
                 for s, now, inflight in zip(self.streams, self.nows, self.inflights)]
        self._relative = times, who, path, recent, walks
        return self._relative

    def live(self) -> tuple[tuple[float, float], ...]:
        """The data path's busy stretches still crossing after ``t`` (ends grow: a suffix)."""
        return self.recent[bisect_right(self.recent, self.t, key=_end):]

    def latest(self) -> float:
        """The latest time the state holds (a period's computation stays below it, shifted)."""
        if self._latest is None:
            last = [x[-1] for x in self.inflights if x]  # completions and spans end in order
            if self.recent:
                last.append(self.recent[-1][1])
            self._latest = max(self.t, self.path_free, max(self.slots), *self.nows, *last)
        return self._latest

    def fits(self, h: float, binade: int) -> bool:
        """A step of ``h`` from here ends below ``binade``'s top and before the first other
        event (a cheap look before the whole state is compared)."""
        latest = self.latest()
        return _fit(1, latest, h, math.ldexp(1.0, binade)) > 0 and (
            self.outside is None or _fit(1, latest, h, self.outside[0]) > 0)


class Step:
    """What port and streams did between two noted states ``h`` cycles apart (the first at
    ``t0``), by role (place in a snapshot's order): role ``k``'s holder issued ``issues[k]``
    bursts; the end's role ``k`` had role ``turn[k]`` at the start; plus the contention
    increments, bytes and log requests (times after ``t0``, requesters as roles). A later state
    equal to the end's, relative to its time and in the same binade, goes on the same way."""

    __slots__ = ("t0", "h", "binade", "turn", "issues", "increments", "read", "written",
                 "requests", "end", "cycle", "issued", "_units")

    def __init__(self, before: Snapshot, now: Snapshot, end: tuple, increments: list[float],
                 log: Any) -> None:
        self.t0, self.h = before.t, now.t - before.t
        self.binade = math.frexp(before.t)[1]
        place = {id(x): k for k, x in enumerate(before.streams)}
        self.turn = [place[id(x)] for x in now.streams]
        self.issues = [x.i - p for x, p in zip(before.streams, before.positions)]
        self.increments = increments
        self._units: dict[int, Any] = {}  # by binade (accumulate)
        self.read, self.written = now.read - before.read, now.written - before.written
        self.requests = None
        if log is not None:
            t0 = before.t
            self.requests = [(e[0] - t0, e[1] - t0, e[2] - t0, e[3] - t0, e[4], e[5],
                              place.get(id(_named(before.streams, e[6])), e[6]))
                             for e in log[before.logged:now.logged]]
        self.end = end  # now.relative()
        # the roles' holders (places at the end) at each step's start until they are back,
        # and the bursts the stream in each place has issued after j steps of that turn
        self.cycle = [list(range(len(self.turn)))]
        while True:
            nxt = [self.cycle[-1][k] for k in self.turn]
            if nxt == self.cycle[0]:
                break
            self.cycle.append(nxt)
        self.issued = [[0] for _ in self.turn]
        for places in self.cycle:
            for place, b in zip(places, self.issues):
                self.issued[place].append(self.issued[place][-1] + b)

    def accumulate(self, acc: float, count: int) -> float:
        """``acc`` after this step's increments are added ``count`` times (:func:`accumulate`)."""
        return accumulate(acc, self.increments, count, self._units)


# A round's whole number costs about as much as this many float adds to count
ROUND_UNITS_ADDS = 1000


def accumulate(acc: float, increments: list[float], count: int,
               units: dict[int, Any] | None = None) -> float:
    """``acc`` after ``increments`` (positive) are added ``count`` times over, one float add
    each as the reference does, with as few adds as are exact.

    In a binade ``[2^(e-1), 2^e)`` ``acc`` is a whole number ``A`` of ``w = 2^(e-53)`` and
    ``acc + d`` adds ``d`` rounded to whole ``w`` (nearest, half-way to even). So a round adds a
    whole number of ``w`` that depends only on ``A``'s parity (:func:`_round_units`): rounds that
    stay in the binade are counted in integers, one that crosses is added the reference's way.
    ``units`` keeps by binade those two numbers (``None``: uncountable), or the adds made one by
    one there until they cost more than counting."""
    units = {} if units is None else units
    while count > 0:
        if acc >= sys.float_info.min:  # normal: its grid is 2^(e-53)
            grid = math.frexp(acc)[1] - 53
            deltas = units.get(grid, 0)
            if type(deltas) is int:  # the adds made so far: worth counting once they add up
                spent = deltas + count * len(increments)
                if spent < ROUND_UNITS_ADDS:
                    units[grid] = spent
                    break
                deltas = units[grid] = _round_units(increments, grid)
            if deltas is not None:
                whole = int(math.ldexp(acc, -grid))  # in [2^52, 2^53)
                most = max(deltas)
                k = count if most == 0 else min(count, ((1 << 53) - 1 - whole) // most)
                if k > 0:  # below 2^53: exact as a float
                    acc = math.ldexp(float(_rounds(whole, deltas, k)), grid)
                    count -= k
                    continue
        for d in increments:  # a round the reference's way (it crosses a binade)
            acc += d
        count -= 1
    for _ in range(count):  # the rounds left, the reference's way
        for d in increments:
            acc += d
    return acc


def _round_units(increments: list[float], grid: int) -> tuple[int, int] | None:
    """What a round of ``increments`` adds to ``A`` whole ``2^grid``, in those units, for ``A``
    even and odd (nearest, half-way to even); ``None`` if one reaches ``2^(grid + 53)``."""
    d = np.asarray(increments)
    if not len(d) or d.max() >= math.ldexp(1.0, grid + 53):
        return None if len(d) else (0, 0)
    x = np.ldexp(d, -grid)  # exact: a power of two
    whole = np.floor(x)
    frac = x - whole
    adds = whole.astype(np.int64) + (frac > 0.5)  # each below 2^53: the sums are exact
    total = int(adds.sum())
    ties = np.flatnonzero(frac == 0.5)
    if not len(ties):
        return total, total
    # at the j-th half-way one, the sum so far (it included) is odd or even: b_j, and
    # rounding to even leaves the count of those rounded up with the parity of b_j; so each
    # rounds up where b_j differs from b_(j-1), the first where it differs from the start's
    b = np.cumsum(adds)[ties] & 1
    changes = int(np.count_nonzero(b[1:] != b[:-1]))
    first = int(b[0])
    return total + changes + first, total + changes + 1 - first


def _rounds(whole: int, deltas: tuple[int, int], k: int) -> int:
    """``whole`` after ``k >= 1`` rounds of ``deltas[whole % 2]``. From the second round on
    each adds the same: the deltas are equal without a half-way increment, and with one both
    parities end even."""
    first = deltas[whole & 1]
    return whole + first + (k - 1) * deltas[(whole + first) & 1]


def _named(streams: list[Stream], name: str) -> Stream | None:
    return next((x for x in streams if x.name == name), None)


_end = itemgetter(1)  # a busy stretch's end

# Steps kept per port for states met again later (a stream's next descriptor, say), in
# the binade they were found in: bounded
KNOWN_STEPS = 64


class Repeats:
    """The fast-forward of one port's streams (elided engine, uniform request policy:
    requests complete in issue order)."""

    def __init__(self, port: RingPort):
        self.port = port
        self.streams: list[Stream] = []
        self.increments: list[float] = []  # contention the port added, since the last reset
        self._seen: dict[tuple, Snapshot] = {}
        self._known: dict[tuple, list[Step]] = {}  # by a snapshot's key, across resets
        self._binade, self._count = 0, 0  # the known steps' binade, how many

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
    def woke(self, stream: Stream) -> bool:
        """``stream`` woke at a real event; advance by whole steps if a step is known from
        this state (noted earlier in this stretch, roles possibly swapped, or met before).
        ``True`` if it did."""
        port = self.port
        if port.flows != len(self.streams) \
                or not (port.log is None or isinstance(port.log, PortLog)):
            return False  # a log that cannot be read back (only appended to) is not repeated
        for s in self.streams:
            if s.i > s.last_window:
                return False  # a stream is in its last window of bursts: no step is worth noting
        found = self._wake_order(stream)
        if found is None:
            return False
        streams, outside = found
        t, pf = stream.now, port.path_free
        key = (pf - t if pf > t else None, len(stream.inflight),
               *[(s.kind, s.now - t) for s in streams[1:]])
        snap = Snapshot(self, streams, outside)
        relative = None
        for step in self._known.get(key, ()) if math.frexp(t)[1] == self._binade else ():
            if _room(step, streams) < 1 or not snap.fits(step.h, step.binade):
                continue  # no room for a step (last bursts, another's event): not worth a look
            relative = relative or snap.relative()
            if step.end == relative and self._advance(step, snap):
                return True
        before = self._seen.get(key)
        self._seen[key] = snap
        if before is None or before.outside != outside or before.dropped != snap.dropped \
                or {id(x) for x in before.streams} != {id(x) for x in streams}:
            return False
        relative = relative or snap.relative()
        if before.relative() != relative:
            return False
        step = Step(before, snap, relative, self.increments[before.increments:snap.increments],
                    port.log)
        if step.binade != self._binade:  # time only grows: an earlier binade is done with
            self._known.clear()
            self._binade, self._count = step.binade, 0
        if self._count < KNOWN_STEPS:
            self._known.setdefault(key, []).append(step)
            self._count += 1
        return self._advance(step, snap)

    def _wake_order(self, stream: Stream) -> tuple[list[Stream], tuple | None] | None:
        """The streams (waker first, then others in wake-up order) and the first other queued
        event (time, order); ``None`` if a stream is not waiting where its walk says."""
        others = {id(waits_on(s.process)): s for s in self.streams if s is not stream}
        if len(others) != len(self.streams) - 1:
            return None
        outside = None
        queued = []
        for when, eid, event in queued_events(self.port.env):
            s = others.get(id(event))
            if s is None:
                if outside is None or (when, eid) < outside:
                    outside = (when, eid)
            elif s.now is None or when != s.now:
                return None
            else:
                queued.append((when, eid, s))
        if len(queued) != len(others):
            return None
        queued.sort(key=lambda q: q[:2])
        return [stream, *[q[2] for q in queued]], outside

    # ------------------------------------------------------------------ advancing
    def _advance(self, step: Step, now: Snapshot) -> bool:
        """``now`` is where ``step`` ended: advance by as many whole steps as are provably
        exact, roles passed on the same way; ``True`` if it did (the waker may then be another
        stream)."""
        count = self._exact_steps(step, now)
        if count < 1:
            return False
        q, j = divmod(count, len(step.cycle))
        holders = [now.streams[place] for place in step.cycle[j]]
        for x, c in zip(now.streams, step.issued):
            x.i += q * c[-1] + c[j]
        self._book(step, now, count)
        shift = count * step.h
        self._shift_port(step, now, count, {x.name: y.name for x, y in zip(now.streams, holders)},
                         shift)
        self._shift_walks(now, holders, shift)
        self.reset()
        return True

    def _exact_steps(self, step: Step, now: Snapshot) -> int:
        """How many whole steps from ``now`` are exact: all in the step's binade (an even
        shift where a constant is half-way on its grid), none reaching the binade's top or
        another's event, none issuing a partial or extra burst, and with more than two streams
        the roles back with their own streams; 0 if none."""
        t, h = now.t, step.h
        if not (step.t0 > 0 and h > 0) or math.frexp(t)[1] != step.binade \
                or not _disjoint(now.streams):
            return 0
        grid = step.binade - 53  # every time of the steps is a whole number of 2^grid
        if (_odd(h, grid) or _odd(t - step.t0, grid)) \
                and any(_half_way(d, grid) for d in self._constants()):
            return 0
        count = _room(step, now.streams)
        latest = now.latest()
        count = _fit(count, latest, h, math.ldexp(1.0, step.binade))
        if now.outside is not None:
            count = _fit(count, latest, h, now.outside[0])
        if len(now.streams) > 2:  # roles back with their own streams
            count -= count % len(step.cycle)
        return count

    def _book(self, step: Step, now: Snapshot, count: int) -> None:
        """Book ``count`` steps on the port: bytes, contention, the log's requests."""
        port = self.port
        port.bytes_read += count * step.read
        port.bytes_written += count * step.written
        port.contention_cycles = step.accumulate(port.contention_cycles, count)
        if step.requests is not None:
            role = {id(x): now.streams[k] for x, k in zip(now.streams, step.turn)}
            self._log(step, now.t, count, role, now.streams)

    def _shift_port(self, step: Step, now: Snapshot, count: int, names: dict[str, str],
                    shift: float) -> None:
        """Put the port's slots and data path as at ``now``, ``shift`` later, ``count`` steps
        on in the ring, holders renamed by ``names``."""
        port = self.port
        m, first = port.max_outstanding, now.first
        nxt = (first + count * sum(step.issues)) % m  # a request a burst
        d = (first - nxt) % m  # slot p now holds what slot p + d held at ``now``
        slots, who = now.slots[d:] + now.slots[:d], now.holders[d:] + now.holders[:d]
        by = repeat(shift)  # a slot freed by t stays free by the shifted t: all move alike
        path_free, owner = now.path_free, now.path_owner
        if path_free > now.t:  # (else the data path stays as it was at ``now``: idle)
            path_free, owner = path_free + shift, names.get(owner, owner)
        port.restore(RingState(
            tuple(map(add, slots, by)), tuple(map(names.get, who, who)),  # names.get(w, w)
            nxt, path_free, owner, tuple((a + shift, b + shift) for a, b in now.live())))

    def _shift_walks(self, now: Snapshot, holders: list[Stream], shift: float) -> None:
        """Each role's new holder takes its role's walk state at ``now``, ``shift`` later;
        the others' wake-ups move with them, and the waker, if it keeps its role, wakes steps
        later, as it would have."""
        by = repeat(shift)
        for x, wake, inflight in zip(holders, now.nows, now.inflights):
            x.now = wake + shift
            x.inflight.clear()  # in place: the walk holds it
            x.inflight.extend(map(add, inflight, by))  # (those done by t stay done)
            if x.i == x.count:  # its last burst issued in the steps: it waits for them all
                x.inflight.appendleft(x.now)  # (the one it would have waited on is in flight)
                x.now = x.inflight[-1]  # the walk's end, where it is woken (FIFO: last is last)
        waker = now.streams[0]
        waiting = {id(waits_on(x.process)): x for x in now.streams if x is not waker}
        requeue(self.port.env, {k: x.now for k, x in waiting.items()})
        if holders[0] is waker and waker.i < waker.count:
            set_now(self.port.env, waker.now)

    def _log(self, step: Step, t: float, count: int, role: dict, streams: list[Stream]
             ) -> None:
        """Append ``count`` steps of ``step``'s requests from ``t``, each role's by its holder."""
        log = self.port.log
        holders = list(streams)
        for j in range(count):
            start = t + j * step.h
            for e in step.requests:
                who = holders[e[6]].name if isinstance(e[6], int) else e[6]
                log.append((start + e[0], start + e[1], start + e[2], start + e[3], e[4],
                            e[5], who))
            holders = [role[id(x)] for x in holders]

    def _constants(self) -> list[float]:
        """What the steps add to a time: the latency and each stream's burst data cycles."""
        policy = self.port.policy
        return [policy.latency(False), *[policy.data_cycles(s.burst_bytes) for s in self.streams]]


def _room(step: Step, streams: list[Stream]) -> int:
    """How many steps the ``streams`` can go on for before one would issue a partial last
    burst or one past its last (a walk of whole bursts may issue its last in the steps: after
    it, it only waits for completions)."""
    count, period = 1 << 62, len(step.cycle)
    for x, c in zip(streams, step.issued):
        room = x.full - x.i  # (x.full == x.count unless the last burst is partial)
        if c[-1] > 0:
            q, left = divmod(room, c[-1])
            j = period - 1  # the most steps of the next turn that fit in what is left
            while c[j] > left:
                j -= 1
            count = min(count, q * period + j)
        elif room < 0:
            return 0
    return count if count < 1 << 62 else 0


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
    """No data-moving stream writes where another reads or writes (when each lands its bytes,
    which a fast-forward does not keep, could matter)."""
    for i, s in enumerate(streams):
        for other in streams[i + 1:]:
            for mem, lo, hi, written in s.ranges:
                for mem2, lo2, hi2, written2 in other.ranges:
                    if mem is mem2 and (written or written2) and lo < hi2 and lo2 < hi:
                        return False
    return True
