"""Runs of alike steps of iDMA channels streaming bursts through one port, inside their
descriptors: the third place the one repeat check (:mod:`dspsim.hw.repeats`) is taken.

Each time a streaming channel wakes at a real event, its port's :class:`StreamRuns` notes the
port, each stream's walk (the burst it is at, its clock, its bursts in flight) and the order
their wake-ups are queued in. When the waker wakes in a state noted ``D`` ticks earlier, with
the same first foreign event pending, every later step is the same shifted by ``D`` (times and
counters are integers: the step commutes with every shift): :func:`~dspsim.hw.repeats.book`
moves every noted place on by whole steps, up to the next change (a stream's last window of
bursts, anyone else's next event), the others' queued wake-ups with them. A found step is kept
and reused wherever the same state recurs (a stream's next descriptor, say).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import simpy

from dspsim.hw.clock import requeue, set_now, split_queue, waits_on
from dspsim.hw.repeats import Note, book, book_requests, ranges_meet, room
from dspsim.probes import PortLog


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
