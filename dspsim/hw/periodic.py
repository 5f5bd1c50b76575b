"""Exact fast-forward of periodic streaming: iDMA channels moving long descriptors through one port.

While channels stream bursts through a shared port and nothing else acts, the state *relative to
now* repeats. The elided engine notes that state each time a streaming channel wakes at a real
event (channels named by place: the waker, then the others in wake-up order). When a channel wakes
in a state noted ``h`` ticks earlier, with the same channels streaming, no other event processed
or due in between, and places possibly passed between channels (two of one kind swap every half
period), every later step is the same shifted by ``h``: the engine advances by whole steps up to
the next change (a channel's last window, anyone else's next event), booking the skipped steps'
bytes, contention and port-log requests. A found step is kept and reused wherever the same
relative state recurs.

Exact: times are integers (ticks, :mod:`dspsim.hw.clock`), so a repeated relative state
(compared as differences) repeats the arithmetic exactly, shifted, and ``k`` steps' contention
is ``k`` times one step's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import repeat
from operator import add, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

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

    slots: tuple[int, ...]
    holders: tuple[str, ...]
    next_slot: int
    path_free: int
    path_owner: str
    recent: tuple[tuple[int, int], ...]


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
    contention_ticks: int
    path_free: int

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
        self.now: int | None = None
        self.inflight: deque[int] = deque()
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
        self._latest: int | None = None

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
        recent = [(a - t if a > t else 0, b - t) for a, b in self.live()]
        walks = [(s.kind, now - t, [x - t if x > t else None for x in inflight])
                 for s, now, inflight in zip(self.streams, self.nows, self.inflights)]
        self._relative = times, who, path, recent, walks
        return self._relative

    def live(self) -> tuple[tuple[int, int], ...]:
        """The data path's busy stretches still crossing after ``t`` (ends grow: a suffix)."""
        return self.recent[bisect_right(self.recent, self.t, key=_end):]

    def latest(self) -> int:
        """The latest time the state holds (a period's computation stays below it, shifted)."""
        if self._latest is None:
            last = [x[-1] for x in self.inflights if x]  # completions and spans end in order
            if self.recent:
                last.append(self.recent[-1][1])
            self._latest = max(self.t, self.path_free, max(self.slots), *self.nows, *last)
        return self._latest

    def fits(self, h: int) -> bool:
        """A step of ``h`` from here ends before the first other event (a cheap look before
        the whole state is compared)."""
        return self.outside is None or _fit(1, self.latest(), h, self.outside[0]) > 0


class Step:
    """What port and streams did between two noted states ``h`` ticks apart, by role (place in
    a snapshot's order): role ``k``'s holder issued ``issues[k]`` bursts; the end's role ``k``
    had role ``turn[k]`` at the start; plus the contention increments, bytes and log requests
    (times after the first state's, requesters as roles). A later state equal to the end's,
    relative to its time, goes on the same way."""

    __slots__ = ("h", "turn", "issues", "increments", "read", "written",
                 "requests", "end", "cycle", "issued")

    def __init__(self, before: Snapshot, now: Snapshot, end: tuple, increments: list[int],
                 log: Any) -> None:
        self.h = now.t - before.t
        place = {id(x): k for k, x in enumerate(before.streams)}
        self.turn = [place[id(x)] for x in now.streams]
        self.issues = [x.i - p for x, p in zip(before.streams, before.positions)]
        self.increments = increments
        self.read, self.written = now.read - before.read, now.written - before.written
        self.requests = None
        if log is not None:
            t0 = before.t
            self.requests = [(e[0] - t0, e[1] - t0, e[2] - t0, e[3] - t0, e[4], e[5],
                              place.get(id(_named(before.streams, e[6])), e[6]))
                             for e in log.ticks(before.logged, now.logged)]
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

    def accumulate(self, acc: int, count: int) -> int:
        """``acc`` after this step's increments are added ``count`` times (integers: exact)."""
        return acc + count * sum(self.increments)


def _named(streams: list[Stream], name: str) -> Stream | None:
    return next((x for x in streams if x.name == name), None)


_end = itemgetter(1)  # a busy stretch's end

# Steps kept per port for states met again later (a stream's next descriptor, say): bounded
KNOWN_STEPS = 64


class Repeats:
    """The fast-forward of one port's streams (elided engine, uniform request policy:
    requests complete in issue order)."""

    def __init__(self, port: RingPort):
        self.port = port
        self.streams: list[Stream] = []
        self.increments: list[int] = []  # contention the port added, since the last reset
        self._seen: dict[tuple, Snapshot] = {}
        self._known: dict[tuple, list[Step]] = {}  # by a snapshot's key, across resets
        self._count = 0  # the known steps

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
        for step in self._known.get(key, ()):
            if _room(step, streams) < 1 or not snap.fits(step.h):
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
        """How many whole steps from ``now`` the streams take alike: none reaching another's
        event, none issuing a partial or extra burst, and with more than two streams the roles
        back with their own streams (times are integers: every step is exact); 0 if none."""
        h = step.h
        if h <= 0 or not _disjoint(now.streams):
            return 0
        count = _room(step, now.streams)
        latest = now.latest()
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
        port.contention_ticks = step.accumulate(port.contention_ticks, count)
        if step.requests is not None:
            role = {id(x): now.streams[k] for x, k in zip(now.streams, step.turn)}
            self._log(step, now.t, count, role, now.streams)

    def _shift_port(self, step: Step, now: Snapshot, count: int, names: dict[str, str],
                    shift: int) -> None:
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

    def _shift_walks(self, now: Snapshot, holders: list[Stream], shift: int) -> None:
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

    def _log(self, step: Step, t: int, count: int, role: dict, streams: list[Stream]
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


def _fit(k: int, latest: int, period: int, bound: int) -> int:
    """The largest ``j <= k`` with ``latest + j period < bound`` (0 if none)."""
    return max(0, min(k, (bound - 1 - latest) // period))


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
