"""The one repeat check: the platform noted at three starts, and how a run of alike periods is
booked; and the two places inside a walk it is taken.

Each engine adds its part of a note (``note(st)``; a data cache its ``relative_state``): what
must be equal (``key``), the times that move with now, the numbers that move a step a period,
the counters that grow. Three notes a period ``D`` apart that agree (:func:`alike`) show a
period taking the state ``S`` to ``S + D`` twice; times and counters being integers, it goes on
doing so while nothing else acts, and :func:`book` moves every noted place on by ``J`` periods
at once (each port by its own ``shift``). Notes are taken at a loop top or a row start
(:mod:`dspsim.hw.finder`), at a kernel call's iteration end inside its walk
(:class:`IterationRuns`), and when an iDMA channel streaming bursts through a port wakes
(:class:`StreamRuns`). :func:`room` counts the periods that fit before another's event.

Streams (:class:`StreamRuns`): each time a streaming channel wakes at a real event, its port's
runs note the port, each stream's walk (the burst it is at, its clock, its bursts in flight)
and the order their wake-ups are queued in. When the waker wakes in a state noted ``D`` ticks
earlier, with the same first foreign event pending, every later step is the same shifted by
``D``: :func:`book` moves every noted place on by whole steps, up to the next change (a
stream's last window of bursts, anyone else's next event), the others' queued wake-ups with
them. A found step is kept and reused wherever the same state recurs (a stream's next
descriptor, say).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import simpy

from dspsim.hw.clock import requeue, set_now, split_queue, waits_on
from dspsim.probes import PortLog


class Note:
    """The platform at one period start, each engine adding its part (``note(st)``): ``key``
    must be equal at every note; ``times`` absolute times moving with now (``time_at`` where
    each lives, ``None`` if moved otherwise); ``ints`` numbers moving one step a period
    (``int_at``; ``int_mem`` an address's memory); ``accs`` growing counters (``acc_at``);
    ``records`` the access log's kept accesses (rebuilt from ``ints[i]`` and ``times[j]`` on);
    ``latest`` the latest time held; ``foreign`` the first queued event not owned, ``queue``
    the owned (event, and its time or the stream it wakes); ``rings`` each port's next slot;
    ``logged`` each record's (kept, dropped); ``passes`` begun, ``last_pass`` the last's copy."""

    __slots__ = ("now", "alike", "key", "times", "time_at", "ints", "int_at", "int_mem",
                 "accs", "acc_at", "records", "latest", "foreign", "queue", "rings", "logged",
                 "passes", "last_pass", "foreign_id", "movers")

    def __init__(self, now: int, alike: int):
        self.now = now
        self.alike = alike
        self.key: list[Any] = []
        self.times: list[int] = []
        self.time_at: list[tuple[Any, Any] | None] = []
        self.ints: list[int] = []
        self.int_at: list[tuple[Any, Any] | None] = []
        self.int_mem: list[str | None] = []
        self.accs: list[int] = []
        self.acc_at: list[tuple[Any, Any]] = []
        self.records: list[tuple[list, int, str | None, int, int]] = []
        self.latest = now
        self.foreign: float = math.inf
        self.queue: list[tuple[Any, int]] = []
        self.rings: list[int] = []
        self.logged: list[tuple[int, int]] = []
        self.passes = 0
        self.last_pass: dict[str, Any] | None = None
        self.foreign_id: tuple[int, int] | None = None  # the first foreign event (time, order)
        self.movers: list[Any] = []  # what moves its own times on: move(now, dt)

    def time(self, at: tuple[Any, Any] | None, t: int) -> None:
        """An absolute time (held at ``at``: ``owner[key]`` or ``owner.key``) moving with now."""
        self.times.append(t)
        self.time_at.append(at)
        if t > self.latest:
            self.latest = t

    def int_(self, at: tuple[Any, Any] | None, n: int, mem: str | None = None) -> None:
        """A number that moves one step a period (an address in ``mem``: one step for all of
        that memory's)."""
        self.ints.append(n)
        self.int_at.append(at)
        self.int_mem.append(mem)

    def acc(self, owner: Any, attr: Any, x: int) -> None:
        """A counter that only grows."""
        self.accs.append(x)
        self.acc_at.append((owner, attr))

    def steps_since(self, before: Note, ports: list[Any]
                    ) -> tuple[list[int], list[int], list[int]]:
        """The period's steps from ``before``: of the numbers, the counters and the ports'
        next slots (what :meth:`earlier` undoes)."""
        return ([b - a for a, b in zip(before.ints, self.ints)],
                [b - a for a, b in zip(before.accs, self.accs)],
                [(b - a) % p.max_outstanding for p, a, b in zip(ports, before.rings, self.rings)])

    def earlier(self, k: int, d: int, steps: tuple[list[int], list[int], list[int]],
                ports: list[Any]) -> Note:
        """This note as it stood ``k`` periods of ``d`` earlier, the period's ``steps`` undone
        (what :func:`alike` reads)."""
        ints, accs, rings = steps
        st = Note(self.now - k * d, self.alike)
        st.key, st.int_mem, st.logged = self.key, self.int_mem, self.logged
        st.times = [t - k * d for t in self.times]
        st.ints = [c - k * x for c, x in zip(self.ints, ints)]
        st.accs = [c - k * x for c, x in zip(self.accs, accs)]
        st.rings = [(c - k * x) % p.max_outstanding for p, c, x in zip(ports, self.rings, rings)]
        return st


def ranges_meet(groups: list[list[tuple[Any, int, int, bool]]]) -> bool:
    """Two groups (a stream's, a channel's pending copies) hold ranges ``(memory, first byte,
    end byte, written)`` that overlap, one written: when each lands (a booked run does not keep
    it) could matter."""
    for i, group in enumerate(groups):
        for other in groups[i + 1:]:
            for mem, lo, hi, written in group:
                for mem2, lo2, hi2, written2 in other:
                    if mem == mem2 and (written or written2) and lo < hi2 and lo2 < hi:
                        return True
    return False


def assign(owner: Any, key: Any, value: Any) -> None:
    """``owner[key] = value`` (a dict, list or deque), ``owner.assign(value)`` (a descriptor's
    end) or ``setattr``."""
    if hasattr(owner, "assign"):
        owner.assign(value)
    elif isinstance(owner, (dict, list, deque)):
        owner[key] = value
    else:
        setattr(owner, key, value)


def room(latest: int, step: int, limit: float) -> int:
    """How many steps of ``step`` (> 0) ``latest`` may take staying below ``limit`` (``inf``:
    unbounded)."""
    if limit == float("inf"):
        return 1 << 62
    return max(0, (int(limit) - 1 - latest) // step)


def alike(notes: list[Note], ports: list[Any]) -> int:
    """The period ``D`` (ticks) three notes show, -1 if they do not repeat: equal keys, each
    time the same relative to its note, every number moving by one step twice (all addresses of
    one memory by the same), every port's next slot turning alike, every counter growing alike."""
    s0, s1, s2 = notes
    d = s1.now - s0.now
    if not (s0.key == s1.key == s2.key and d >= 0 and s2.now - s1.now == d):
        return -1
    for a, b, c in zip(s0.times, s1.times, s2.times):
        if not (b - a == d == c - b):
            return -1
    steps: dict[str, int] = {}  # per memory: the one step of every address in it
    for a, b, c, mem in zip(s0.ints, s1.ints, s2.ints, s2.int_mem):
        if c - b != b - a:
            return -1
        if mem is not None and steps.setdefault(mem, b - a) != b - a:
            return -1
    for p, a, b, c in zip(ports, s0.rings, s1.rings, s2.rings):
        m = p.max_outstanding
        if (b - a) % m != (c - b) % m:
            return -1
    for a, b, c in zip(s0.accs, s1.accs, s2.accs):
        if b < a or c - b != b - a:
            return -1
    return d


def book(s1: Note, s2: Note, periods: int, ports: list[Any]) -> int:
    """Move every place ``s2`` holds on by ``periods`` periods like the one from ``s1``:
    numbers by their step, times and the ports' requests in flight by ``dt``, counters by their
    growth, the access log's kept records rebuilt; return ``dt``."""
    now = s2.now
    dt = periods * (now - s1.now)
    ints = [c + periods * (c - b) if c != b else c for b, c in zip(s1.ints, s2.ints)]
    times = [t + dt for t in s2.times]
    for at, n in zip(s2.int_at, ints):
        if at is not None:
            assign(at[0], at[1], n)
    for at, t in zip(s2.time_at, times):
        if at is not None:
            assign(at[0], at[1], t)
    for (owner, attr), b, c in zip(s2.acc_at, s1.accs, s2.accs):
        if c != b:
            assign(owner, attr, c + periods * (c - b))
    for mover in s2.movers:
        mover.move(now, dt)
    for kept, j, prefix, i, k in s2.records:  # frozen: each is rebuilt
        lo, hi, tile, seq = ints[i:i + 4]
        what = kept[j].what if prefix is None else f"{prefix}{ints[i + 4]}"
        kept[j] = kept[j]._replace(lo=lo, hi=hi, tile=tile, seq=seq, what=what,
                                    start=times[k], end=times[k + 1])
    for p, a, b in zip(ports, s1.rings, s2.rings):
        p.shift(a, b, periods, now, dt)
    return dt


def next_requests(first: list, last: list, d: int) -> list[tuple] | None:
    """A port log's requests of the period after ``last``: ``None`` unless ``first`` logged the
    same, ``d`` earlier."""
    if len(first) != len(last):
        return None
    template = []
    for a, b in zip(first, last):  # (issue, data_start, data_end, done, bytes, write, who)
        if a[4:] != b[4:] or any(b[k] != a[k] + d for k in range(4)):
            return None
        template.append((*(b[k] + d for k in range(4)), *b[4:]))
    return template


def next_entries(marks: list[tuple[int, int]], kept: Any, follow: Any, d: int
                 ) -> tuple[str, Any] | None:
    """What a record gets in the period after three notes ``d`` apart, from its ``(kept,
    dropped)`` at each: ``("drop", c)`` when full (``c`` a period), ``("keep", follow(first,
    last, d))`` when it kept both periods alike (``kept(a, b)``: entries ``a:b``), else None."""
    (a0, x0), (a1, x1), (a2, x2) = marks
    if a0 == a1 == a2 and x1 - x0 == x2 - x1:
        return "drop", x2 - x1
    if x0 == x1 == x2 and a1 - a0 == a2 - a1:
        entries = follow(kept(a0, a1), kept(a1, a2), d)
        return None if entries is None else ("keep", entries)
    return None


def book_requests(log: Any, entries: tuple[str, Any], periods: int, d: int) -> None:
    """A port log's requests of ``periods`` booked periods ``d`` apart (:func:`next_entries`);
    its limit counts those past it."""
    mode, template = entries
    if mode == "drop":
        log.dropped += periods * template
        return
    for j in range(periods):
        for e in template:
            log.append((e[0] + j * d, e[1] + j * d, e[2] + j * d, e[3] + j * d, *e[4:]))


KNOWN_PERIODS = 64  # periods a core keeps for its later calls (bounded)


class IterationRuns:
    """Runs of alike iterations inside one kernel call's walk, booked at once (softmax
    ``direct``: every vector load a round trip to DDR; a memcpy through the data cache).

    Now and then, at an iteration's end, :meth:`note` reads what the walk owes, its ports'
    state, the write buffer, the data cache's lines (relative to the line the walk streams
    through) and the counters. When three notes ``gap`` iterations apart agree (:func:`alike`),
    the iterations that follow are booked at once, before any other process's event; a port
    log gets the booked requests. Through a cache a period moves the cached loads' and stores'
    addresses alike by whole lines; the last period and the lines next to a memory's end
    (where the prefetcher stops) are walked. Elided engine only (:meth:`applies`)."""

    def __init__(self, env: Any, ports: list[Any], write_buffer: Any, state: Any,
                 cache: Any = None, cached: tuple[bool, bool] = (False, False),
                 known: dict | None = None, route: tuple = ()):
        self.env, self.ports, self.wb, self.state = env, ports, write_buffer, state
        # periods found by earlier calls of the core, by the state they start from: a call
        # meeting one books from its first note (:meth:`_known_period`)
        self.known = {} if known is None else known
        self.route = route  # where the loads and the stores go (part of a known period's key)
        self.shape: tuple = ()
        self.cache, self.cached = cache, cached  # (loads, stores) through the cache
        self.unit = 1  # iterations a period is a whole number of
        self.gap = 1  # iterations between two notes of a triple
        self.wait = 16  # iterations before the next triple's first note
        self.steps = (0, 0)  # bytes an iteration moves the loads' and the stores' address on
        self.step = 0  # of those, the cached addresses' (alike)
        self.notes: list[Note] = []

    @staticmethod
    def applies(ports: list[Any], elide: bool) -> bool:
        """A walk over ``ports`` may be booked in runs: elided, every port log readable."""
        return elide and bool(ports) and all(
            p.log is None or isinstance(p.log, PortLog) for p in ports)

    def first(self, count: int, loads: tuple[int, ...], stores: tuple[int, ...], issue: Any
              ) -> int:
        """A run of ``count`` alike iterations (``loads``, ``stores``, ``issue`` ticks; or rows,
        ``issue`` the row's loop) begins: how many are left at the first note (-1: none)."""
        self.notes.clear()
        self.steps = (sum(loads), sum(stores))
        self.shape = (loads, stores, issue, self.route)
        if self.cache is not None:
            if not self._period():
                return -1
            # a cache not yet full changes as the walk fills it: the first note after that
            free = self.cache.ways * self.cache.set_count - self.cache.lines_held()
            self.wait = max(self.unit, free * self.cache.line_bytes // self.step)
        at = count - max(self.wait, self.unit)
        return at if at > 3 * self.gap else -1

    def _period(self) -> bool:
        """Through the cache: the fewest iterations moving the cached addresses on by whole
        lines, alike (``False``: none)."""
        steps = [s for s, cached in zip(self.steps, self.cached) if cached]
        if not steps or min(steps) != max(steps) or steps[0] <= 0:
            return False
        line = self.cache.line_bytes
        self.step, self.unit = steps[0], line // math.gcd(line, steps[0])
        if self.gap % self.unit:
            self.gap = self.unit
        return True

    def note(self, now: int, owed: int, left: int, load_addr: int, store_addr: int
             ) -> tuple[int, int, int, int, int]:
        """At an iteration's end, ``left`` to go: the walk's clock and iterations left after any
        run booked, how many are left at the next note (-1: none), the next addresses."""
        notes = self.notes
        notes.append(self._note(now, owed, load_addr, store_addr))
        if len(notes) == 1:
            self._known_period(notes[0])
        if len(notes) == 3:
            d = alike(notes, self.ports)
            periods = -1 if d < 0 else left // self.gap if d == 0 else min(
                left // self.gap, room(now, d, self.env.peek()))
            if periods > 0 and self.cache is not None:
                periods = self._cache_limit(periods)
            logs = self._requests() if periods > 0 else None
            if logs is not None:
                self._remember(logs)
                now = self._book(periods, now, logs)
                left -= periods * self.gap
                load_addr += periods * self.gap * self.steps[0]
                store_addr += periods * self.gap * self.steps[1]
                self.wait = 1
            else:
                self.gap = min(2 * self.gap, 64 * self.unit)
                self.wait = min(2 * self.wait, 4096)
            notes.clear()
        at = left - (self.gap if notes else max(self.wait, self.unit))
        return now, left, at if at > 0 else -1, load_addr, store_addr

    def _remember(self, logs: list[Any]) -> None:
        """Keep the period the last two notes span, by its starting state (not with a port log,
        whose requests come from the notes; not one already kept, :meth:`_known_period`)."""
        _, s1, s2 = self.notes
        if any(entries is not None for entries in logs) or s1.key is s2.key \
                or s1.key != s2.key or len(self.known) >= KNOWN_PERIODS:
            return
        self.known[(self.shape, s2.key)] = (self.gap, s2.now - s1.now,
                                             s2.steps_since(s1, self.ports))

    def _known_period(self, st: Note) -> None:
        """If an earlier call's period started from ``st``'s state (same loop, ports, cache),
        put the two notes its steps imply before it, so the three-note check books from here."""
        found = self.known.get((self.shape, st.key))
        if found is None:
            return
        self.gap, d, steps = found
        self.notes[:0] = [st.earlier(k, d, steps, self.ports) for k in (2, 1)]

    def _cache_limit(self, periods: int) -> int:
        """Of ``periods``, those a cache lets be booked: one short of the run's end, clear of
        every memory's last lines (where the prefetcher stops)."""
        line = self.cache.line_bytes
        lines = self.gap * self.step // line  # a period's
        for mem, top in self.cache.top_lines().items():
            periods = min(periods, ((mem.base + mem.size_bytes) // line - top - 2) // lines)
        return periods - 1

    def _note(self, now: int, owed: int, load_addr: int, store_addr: int) -> Note:
        """The walk at an iteration's end: what it owes, its write buffer, its stalls, its
        ports, the cache relative to the line it streams through."""
        st, wb, state = Note(now, 0), self.wb, self.state
        st.key += [owed, tuple(t > now for t in wb)]
        for i, t in enumerate(wb):
            if t > now:
                st.time((wb, i), t)
        st.acc(state, "stall", state.stall)
        st.acc(state, "store_stall", state.store_stall)
        for p in self.ports:
            p.note(st)
        cache = self.cache
        if cache is not None:
            base = (load_addr if self.cached[0] else store_addr) // cache.line_bytes
            st.key.append(cache.relative_state(now, base))
            for k in cache.COUNTERS:
                st.int_((cache, k), getattr(cache, k))
        st.logged = [(len(p.log), p.log.dropped) if p.log is not None else (0, 0)
                     for p in self.ports]
        st.key = tuple(st.key)
        return st

    def _requests(self) -> list[Any] | None:
        """Each port log's requests in the period after the third note (``None``: no log);
        ``None`` if the two periods noted differ."""
        d = self.notes[2].now - self.notes[1].now
        out: list[Any] = []
        for k, p in enumerate(self.ports):
            entries = None if p.log is None else next_entries(
                [st.logged[k] for st in self.notes], p.log.ticks, next_requests, d)
            if p.log is not None and entries is None:
                return None
            out.append(entries)
        return out

    def _book(self, periods: int, now: int, logs: list[Any]) -> int:
        """Book ``periods`` periods like the last from ``now`` (port logs too); return the walk's
        clock after them."""
        dt = book(self.notes[1], self.notes[2], periods, self.ports)
        cache = self.cache
        if cache is not None:
            cache.shift(periods * self.gap * self.step // cache.line_bytes, now, dt)
        d = self.notes[2].now - self.notes[1].now
        for p, entries in zip(self.ports, logs):
            if entries is not None:
                book_requests(p.log, entries, periods, d)
        self.state.now = now + dt  # the walk is there (it may end with no wait after)
        return self.state.now


class Stream:
    """A descriptor's walk: about to issue burst ``i`` at local time ``now`` (``None`` once its
    last is issued), ``inflight`` its bursts' completions; ``kind``: burst bytes, window,
    direction; ``elides``: the walk passes waits that end before the next queued event."""

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

    def note(self, st: Note) -> None:
        """The walk's part of a note: which stream, its burst (moving on), its clock and bursts
        in flight relative to the note's time (moved by :meth:`move`)."""
        now = st.now
        st.key.append((self.name, self.kind, self.now is None,
                       tuple([x - now if x > now else None for x in self.inflight])))
        st.int_((self, "i"), self.i)
        if self.now is not None:
            st.time((self, "now"), self.now)
        st.movers.append(self)
        if self.inflight and self.inflight[-1] > st.latest:  # (completions end in order)
            st.latest = self.inflight[-1]

    def move(self, now: int, dt: int) -> None:
        """The bursts in flight after ``now`` complete ``dt`` later (a booked run)."""
        inflight = self.inflight
        for j, x in enumerate(inflight):
            if x > now:
                inflight[j] = x + dt


# Steps kept per port for states met again later (a stream's next descriptor, say): bounded
KNOWN_STEPS = 64


class StreamRuns:
    """The runs of alike steps of one port's streams (elided engine, uniform request policy:
    requests complete in issue order)."""

    def __init__(self, port: Any):  # (a MemoryPort, which imports this module)
        self.port = port
        self.streams: list[Stream] = []
        self._seen: dict[tuple, Note] = {}
        self._cheap: set[tuple] = set()  # the cheap looks at the states met (woke)
        self._known: dict[tuple, tuple] = {}  # by a note's key, across resets
        self._known_cheap: set[tuple] = set()  # their cheap looks

    def enter(self, stream: Stream) -> None:
        self.streams.append(stream)
        self.reset()

    def leave(self, stream: Stream) -> None:
        self.streams.remove(stream)
        self.reset()

    def reset(self) -> None:
        self._seen.clear()
        self._cheap.clear()

    def woke(self, stream: Stream) -> bool:
        """``stream`` woke at a real event: book whole steps ahead if the state was noted
        before (or a step from it is known); ``True`` if it did."""
        port = self.port
        if port.flows != len(self.streams) \
                or not (port.log is None or isinstance(port.log, PortLog)) \
                or any(s.i > s.last_window for s in self.streams) \
                or ranges_meet([s.ranges for s in self.streams]):
            return False
        order = self._order(stream)
        if order is None:
            return False
        # a cheap look first: the full state is noted from the second time this one is met
        # with the same foreign event pending (or where a step from it may be known)
        t, pf = stream.now, port.path_free
        cheap = (stream.name, len(stream.inflight), pf - t if pf > t else None,
                 *[(s.name, s.now - t) for _, _, s, _ in order[1]])
        if (cheap, order[0]) not in self._cheap and cheap not in self._known_cheap:
            self._cheap.add((cheap, order[0]))
            return False
        st = self._note(stream, *order)
        before = self._seen.get(st.key)
        self._seen[st.key] = st
        if before is None or before.foreign_id != st.foreign_id or not _alike_log(before, st):
            before = self._known_step(st)
        if before is None:
            return False
        d = st.now - before.now
        periods = room(st.latest, d, st.foreign) if d > 0 else 0
        for at, a, b in zip(st.int_at, before.ints, st.ints):
            if isinstance(at[0], Stream) and b > a:  # no partial burst, none past the last
                periods = min(periods, (at[0].full - at[0].i) // (b - a))
        if periods < 1 or any(b < a for a, b in zip(before.accs, st.accs)):
            return False
        requests = self._requests(before, st, d)
        if requests is None:
            self._remember(before, st, cheap)
        dt = book(before, st, periods, [port])
        if requests is not None:
            book_requests(port.log, requests, periods, d)
        for s in self.streams:
            if s.i == s.count:  # its last burst went in the steps booked: it waits for them all
                s.inflight.appendleft(s.now)  # (the one it would have waited on is in flight)
                s.now = s.inflight[-1]  # the walk's end, where it is woken (FIFO: last is last)
        requeue(port.env, {id(event): s.now for event, s in st.queue})
        set_now(port.env, st.now + dt)
        self.reset()
        return True

    def _order(self, waker: Stream) -> tuple[tuple[int, int] | None, list] | None:
        """The first foreign queued event (time, order) and the other streams' wake-ups as
        queued (time, order, stream, event); ``None`` if a stream waits elsewhere."""
        env = self.port.env
        others = {id(waits_on(s.process)): s for s in self.streams if s is not waker}
        order, foreign = split_queue(env, lambda event: others.get(id(event)))
        if len(order) != len(others) or waker.now != env.now \
                or any(s.now != when for when, _, s, _ in order):
            return None
        return foreign, order

    def _note(self, waker: Stream, foreign: tuple[int, int] | None, order: list) -> Note:
        """The port and its streams when ``waker`` woke (the others in queue order)."""
        port = self.port
        st = Note(port.env.now, 0)
        st.foreign_id = foreign
        st.foreign = foreign[0] if foreign is not None else st.foreign
        for s in (waker, *[q[2] for q in order]):
            s.note(st)
        st.queue = [(event, s) for _, _, s, event in order]  # (booked: requeued at s.now)
        port.note(st)
        log = port.log
        st.logged = [(len(log), log.dropped) if log is not None else (0, 0)]
        st.key = tuple(st.key)
        return st

    def _requests(self, before: Note, st: Note, d: int) -> tuple[str, Any] | None:
        """The port log's requests of a step after ``st``: the noted step's, ``d`` later (or
        a count it drops, once full); ``None`` with no log."""
        log = self.port.log
        if log is None:
            return None
        (a0, x0), (a1, x1) = before.logged[0], st.logged[0]
        if a0 == a1:
            return "drop", x1 - x0
        return "keep", [(e[0] + d, e[1] + d, e[2] + d, e[3] + d, *e[4:])
                        for e in log.ticks(a0, a1)]

    def _remember(self, before: Note, st: Note, cheap: tuple) -> None:
        """Keep the step from ``st``'s state."""
        if len(self._known) < KNOWN_STEPS and st.key not in self._known:
            self._known_cheap.add(cheap)
            self._known[st.key] = (st.now - before.now, st.steps_since(before, [self.port]))

    def _known_step(self, st: Note) -> Note | None:
        """A note one known step before ``st``, if any (and no port log to fill)."""
        found = self._known.get(st.key)
        if found is None or self.port.log is not None:
            return None
        d, steps = found
        return st.earlier(1, d, steps, [self.port])


def _alike_log(before: Note, st: Note) -> bool:
    """Between two notes, the port log kept every request or dropped every one."""
    (a0, x0), (a1, x1) = before.logged[0], st.logged[0]
    return a0 == a1 or x0 == x1
