"""The repeat finder: runs of alike loop iterations or rows at the price of a few.

A loop whose iterations run alike asks the finder at each iteration top (:meth:`Finder.skip`):
the ping-pong frame's middle tiles (a *period* is two tiles, buffers and channels back in their
roles) and an op's rows (:func:`row_loop`: each row runs the same kernel calls on its own bytes
at the same offsets; a period is a row). Now and then the finder notes the platform at three
period starts (:class:`~dspsim.hw.repeats.Note`), each engine adding its part: SimPy's queue
(only the channels' wake-ups may lie in the booked stretch), the core, every channel with its
descriptors in flight and queued, every port's slots and data path, the access log, the op's
trace labels, tiles and warnings, the other cores (still). When every relative time,
structural field and number step agree, the following periods are booked at once: times move
by ``J x D``, numbers by ``J`` steps, counters grow ``J`` times, and the records get the booked
periods' entries, the last period's ``D`` apart (passes and trace rows as one block; a port's
request log one by one, its limit counting those past it).

Why exact: times and counters are integers (ticks), so a period, which adds constants to times,
subtracts two times and compares, commutes with every shift; seen to take the state ``S`` to
``S + D`` twice, it gives every later period start ``S + jD``. Addresses only pick the memory
(the same, for a tile inside one array) and decide overlaps; all of one memory move by the same
step, so no overlap appears or vanishes. No foreign event may lie before what the booked
periods hold (``latest``), so SimPy's order of equal-time events is kept.

Booked only by the elided engine. With the data path on, the booked iterations' values are the
loop's to compute, untimed: a loop passes ``values(k, pending)``, the ``k`` iterations in
program order, their copies done as plain copies except those ``pending(src, dst)`` says are
still pending after the run (the loop-carried values are then left out of the notes). The
finder first lands every descriptor pending at the top (each is done within the run), books,
runs ``values``, then lands again what the moved-on descriptor in flight had landed; rows are
booked with no channel moving, their values computed after in batches (``values(lo, hi)``).
Nothing here knows an op: the op promises alike iterations, the notes see that the engines
agree.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Generator
from typing import Any

from dspsim.hw.clock import put_into, requeue, set_now, split_queue, waits_on
from dspsim.hw.repeats import (
    Note,
    alike,
    book,
    book_requests,
    next_entries,
    next_requests,
    ranges_meet,
    room,
)
from dspsim.probes import PassRun, PortLog, TraceRun, numbered

Proc = Generator[Any, Any, Any]
# a loop's booked iterations' values: values(k, pending) (module doc)
Values = Callable[[int, Callable[[Any, Any], bool]], None]
# periods run one by one between two notes after a note that found no run (doubling from 0)
MAX_PROBE_GAP_PERIODS = 16
# the booked rows' values are computed this many elements at a time (whole rows, one at least)
VALUES_BATCH_ELEMENTS = 1 << 18


class Finder:
    """The alike iterations of one loop on ``dsp``'s core (a :class:`dspsim.platform.Dsp`),
    ``period`` iterations apart; ``rows``: an op's row loop (its values batched)."""

    def __init__(self, dsp: Any, period: int, rows: bool = False):
        ctx = dsp.platform.ctx
        self.dsp = dsp
        self.env = ctx.env
        self.period = period
        self.data = ctx.data
        self.ports = [m.port for m in dsp.platform.memories.values()]
        # the records kept as the periods run (the trace, the ports' request logs)
        self.recorder = ctx.recorder if ctx.recorder.enabled else None
        self.logs: list[Any] = [self.recorder, *[p.log for p in self.ports]]
        self.rows = rows
        self.enabled = ctx.elide and all(
            p.log is None or isinstance(p.log, PortLog) for p in self.ports)
        self._tick = 0  # iterations since the last note (or jump, or failure)
        self._gap = 0  # periods to run before the next note
        self._notes: list[Note] = []

    def skip(self, alike: int, carried: Any = None,
             values: Values | None = None) -> int:
        """At an iteration top, book at once as many of the ``alike`` iterations ahead as
        provably repeat the last ones (a multiple of ``period``; ``carried`` unchanged, or data
        path on: ``values`` computes them); return how many (the caller moves on)."""
        if not self.enabled or (self.data and values is None and not self.rows):
            return 0
        self._tick += 1
        if self._tick <= self.period * self._gap or (self._tick - 1) % self.period:
            return 0
        notes = self._notes
        if alike < (3 - len(notes)) * self.period:  # too few left to book one
            notes.clear()
            return 0
        if self.data and values is not None and not _apart(self.dsp):
            return self._failed()  # two channels' pending copies meet: their order is timing's
        st = self._note(alike, pickle.dumps(None if self.data else carried))
        if st is None:
            return self._failed()
        notes.append(st)
        if len(notes) < 3:
            return 0
        periods = self._run_length(notes)
        records = self._next_records(notes) if periods > 0 else None
        passes = self._next_passes(notes) if periods > 0 else None
        if periods < 0 or (periods > 0 and (records is None or passes is None)):
            return self._failed()
        if periods == 0:  # alike, but another's event comes too soon: look again a period on
            del notes[0]
            return 0
        self._jump(notes, periods, records, passes, values)
        notes.clear()
        self._tick, self._gap = 0, 0
        return periods * self.period

    def _failed(self) -> int:
        self._notes.clear()
        self._tick, self._gap = 0, min(2 * self._gap + 1, MAX_PROBE_GAP_PERIODS)
        return 0

    def _note(self, alike: int, carried: bytes) -> Note | None:
        """The platform at an iteration top; ``None`` where nothing may be booked from it."""
        dsp = self.dsp
        if not self._others_still():
            return None
        st = Note(self.env.now, alike)
        st.logged = [(len(x.rows) if x is self.recorder else len(x), x.dropped)
                     if x is not None else (0, 0) for x in self.logs]
        st.passes = len(dsp.passes)
        st.last_pass = dict(dsp.passes[-1]) if st.passes else None
        st.key.append(carried)
        if not (self._waits(st) and dsp.core.note(st) and self._channels(st)):
            return None
        self._op(st)
        for p in self.ports:
            p.note(st)
        _accesses(st, dsp.platform.ctx.accesses)
        st.key = tuple(st.key)
        return st

    def _others_still(self) -> bool:
        """No other core's engine moves (with two loops at once the state repeats only by
        chance); with the data path on, a row loop's own channels are still too."""
        for other in self.dsp.platform.dsps:
            mine = other is self.dsp
            if mine and not (self.data and self.rows):
                continue
            if (not mine and other.core.waiting_for is not None) or any(
                    ch.current is not None or ch.fifo.items for ch in other.idma):
                return False
        return True

    def _waits(self, st: Note) -> bool:
        """Who waits until when: channels' walks and just-queued descriptors (owned), anything
        else (foreign: the first kept). ``False`` if a channel in flight has no wake-up."""
        walking, fifos = {}, {}
        for other in self.dsp.platform.dsps:
            for ch in other.idma:
                target = waits_on(ch.process)
                if ch.current is not None and target is not None:
                    walking[id(target)] = ch
                fifos[id(ch.fifo)] = ch
        def owner(event: Any) -> str | None:
            ch = walking.get(id(event))
            if ch is not None:
                return ch.name
            ch = fifos.get(id(put_into(event)))
            return None if ch is None else f"put {ch.name}"

        order, foreign = split_queue(self.env, owner)
        if len(order) - sum(name.startswith("put ") for _, _, name, _ in order) != len(walking):
            return False  # a channel in flight with no wake-up queued
        if foreign is not None:
            st.foreign = foreign[0]
        st.key.append(tuple(name for _, _, name, _ in order))
        for when, _, _, event in order:
            st.queue.append((event, when))
            st.time(None, when)  # requeue moves it
        return True

    def _channels(self, st: Note) -> bool:
        """Every channel of every core (other cores' state only compared: they are still)."""
        for other in self.dsp.platform.dsps:
            if other is not self.dsp:
                st.key += [other.core.waiting_for, repr(other.core.stats())]
            for ch in other.idma:
                if not ch.note(st):
                    return False
        return True

    def _op(self, st: Note) -> None:
        """The op's trace labels (tile numbers move on), tiles per pass, warnings (data path
        on: the booked rows' values redo their checks)."""
        dsp = self.dsp
        labels = dsp.labels
        st.key += [labels.pass_name, labels.buffer, tuple(sorted(dsp.tiles_seen.items()))]
        if not self.data:
            st.key.append(tuple((w["code"], w["count"])
                                for w in dsp.platform.warnings.values()))
        for attr in ("tile_number", "tile_base", "tile_next"):
            st.int_((labels, attr), getattr(labels, attr))

    def _run_length(self, s: list[Note]) -> int:
        """How many periods after the three starts ``s`` repeat the last: -1 if they do not,
        0 if none fits before another's event."""
        s0, s1, s2 = s
        if not (s0.alike - s1.alike == self.period == s1.alike - s2.alike):
            return -1
        d = alike(s, self.ports)
        if d <= 0:
            return -1
        return max(0, min(s2.alike // self.period, room(s2.latest, d, s2.foreign)))

    def _next_passes(self, s: list[Note]) -> list[dict[str, Any]] | None:
        """The passes the period after ``s[2]`` begins (the last's, ``D`` later) if the two
        noted began the same passes ``D`` apart, ended them, left earlier ones alone."""
        s0, s1, s2 = s
        d = s2.now - s1.now
        passes = self.dsp.passes
        if not (s1.passes - s0.passes == s2.passes - s1.passes >= 0):
            return None
        for note in (s0, s1):
            if note.passes and passes[note.passes - 1] != note.last_pass:
                return None
        template = []
        for a, b in zip(passes[s0.passes:s1.passes], passes[s1.passes:s2.passes]):
            if (a["end_tick"] is None or b["end_tick"] is None or a["name"] != b["name"]
                    or b["start_tick"] != a["start_tick"] + d
                    or b["end_tick"] != a["end_tick"] + d):
                return None
            template.append({"name": b["name"], "start_tick": b["start_tick"] + d,
                             "end_tick": b["end_tick"] + d})
        return template

    def _next_records(self, s: list[Note]) -> list[Any] | None:
        """What each record (:attr:`logs`) gets in the period after ``s[2]``
        (:func:`~dspsim.hw.repeats.next_entries`; ``None`` per absent record); ``None`` if a
        record's two noted periods differ."""
        d = s[2].now - s[1].now
        out: list[Any] = []
        for k, log in enumerate(self.logs):
            if log is None:
                out.append(None)
                continue
            kept, follow = ((log.rows_between, _next_rows) if log is self.recorder
                            else (log.ticks, next_requests))
            entries = next_entries([x.logged[k] for x in s], kept, follow, d)
            if entries is None:
                return None
            out.append(entries)
        return out

    def _book_records(self, records: list[Any], periods: int, d: int) -> None:
        """Each record's entries of ``periods`` booked periods: the trace's as one
        :class:`~dspsim.probes.TraceRun` (row by row under a row limit), a request log's one by
        one."""
        for log, entries in zip(self.logs, records):
            if entries is None:
                continue
            if log is not self.recorder:
                book_requests(log, entries, periods, d)
            elif entries[0] == "drop":
                log.dropped += periods * entries[1]
            elif not entries[1][0]:
                continue  # (the periods recorded no row)
            elif log.limit is None:
                log.append_run(TraceRun(entries[1][0], periods, d, entries[1][1]))
            else:  # row by row up to one period past the limit (it sets the cut), then counted
                template, numbers = entries[1]
                shown = min(periods, max(0, log.limit - len(log.rows)) // len(template) + 1)
                for row in TraceRun(template, shown, d, numbers).rows():
                    log.record(*row)
                log.dropped += (periods - shown) * len(template)

    def _jump(self, s: list[Note], periods: int, records: list[Any],
              passes: list[dict[str, Any]], values: Values | None) -> None:
        """Book ``periods`` periods like the last from ``s[2]``: the engines, the values, the
        records, the queued wake-ups, the clock."""
        now, d = s[2].now, s[2].now - s[1].now
        channels = [ch for other in self.dsp.platform.dsps for ch in other.idma]
        if self.data and values is not None:
            for ch in channels:
                ch.land_all()
        dt = book(s[1], s[2], periods, self.ports)
        if self.data and values is not None:
            pending = {_ends(t.src, t.dst) for ch in channels for t in ch.issued}
            with self.dsp.untimed():
                values(periods * self.period, lambda src, dst: _ends(src, dst) in pending)
            for ch in channels:
                ch.reland()
        for p in self.ports:
            if p.repeats is not None:
                p.repeats.reset()  # its noted states are of times now passed
        if passes:
            self.dsp.passes.append_run(PassRun(passes, periods, d))
        self._book_records(records, periods, d)
        requeue(self.env, {id(event): t + dt for event, t in s[2].queue})
        set_now(self.env, now + dt)


def _apart(dsp: Any) -> bool:
    """No descriptor pending on one channel writes where one pending on another reads or writes
    (the order they land in is then immaterial)."""
    return not ranges_meet([[(t.src.mem.name, t.src.addr, t.src.addr + t.src_pitch * t.rows,
                              False) for t in ch.issued]
                            + [(t.dst.mem.name, t.dst.addr, t.dst.addr + t.dst_pitch * t.rows,
                                True) for t in ch.issued]
                            for other in dsp.platform.dsps for ch in other.idma])


def _ends(src: Any, dst: Any) -> tuple:
    """A copy by its two ends (pointers)."""
    return src.mem.name, src.addr, dst.mem.name, dst.addr


def _accesses(st: Note, acc: Any) -> None:
    """The access log, when kept: the accesses in flight, those kept for the hazard check
    (rebuilt from their numbers and times when booked), its numbering."""
    if not acc.enabled:
        return
    st.key += [len(acc.pairs), acc.dropped, tuple(sorted(acc.in_flight))]
    st.int_((acc, "seq"), acc.seq)
    for engine in sorted(acc.in_flight):
        st.time((acc.in_flight, engine), acc.in_flight[engine])
    for memory in sorted(acc.active):
        kept = acc.active[memory]
        st.key.append((memory, len(kept)))
        for j, a in enumerate(kept):
            what, number = numbered(a.what)  # a descriptor's "copy_in #12"
            st.key.append((a.engine, a.write, what, a.pass_name, a.hi - a.lo))
            st.records.append((kept, j, what if number is not None else None,
                               len(st.ints), len(st.times)))
            st.int_(None, a.lo, memory)
            st.int_(None, a.hi, memory)
            st.int_(None, a.tile)
            st.int_(None, a.seq)
            if number is not None:
                st.int_(None, number)
            st.time(None, a.start)
            st.time(None, a.end)


def _next_rows(first: list, last: list, d: int) -> tuple[list[tuple], list] | None:
    """The trace rows of the period after ``last`` and how their numbers move
    (:class:`~dspsim.probes.TraceRun`); ``None`` unless ``first`` and ``last`` are alike."""
    if len(first) != len(last):
        return None
    template, numbers = [], []
    for a, b in zip(first, last):  # (engine, kind, what, start, end, bytes, tile, ...)
        if not (isinstance(a, tuple) and isinstance(b, tuple) and a[:2] == b[:2]
                and a[5] == b[5] and a[7:] == b[7:] and b[3] == a[3] + d and b[4] == a[4] + d):
            return None
        (head, n), (head_b, m) = numbered(a[2]), numbered(b[2])
        if head != head_b or (n is None) != (m is None):
            return None
        step = b[6] - a[6]
        template.append((*b[:3], b[3] + d, b[4] + d, b[5], b[6] + step, *b[7:]))
        numbers.append((step, None, 0, 0) if n is None else (step, head, 2 * m - n, m - n))
    return template, numbers


def row_loop(dsp: Any, rows: int, row: Callable[[int], Proc],
             values: Callable[[int, int], Proc] | None = None, row_elements: int = 1) -> Proc:
    """``for r in range(rows): yield from row(r)``, booking runs of alike rows at once.
    ``values(lo, hi)``: rows ``lo:hi``'s calls, untimed, run for booked rows with the data path
    on, in batches of about ``VALUES_BATCH_ELEMENTS`` (rows of ``row_elements``)."""
    finder = Finder(dsp, period=1, rows=True)
    r = 0
    while r < rows:
        booked = finder.skip(rows - r)
        if booked and values is not None and dsp.move_data:
            step = max(1, VALUES_BATCH_ELEMENTS // max(1, row_elements))
            with dsp.untimed():
                for lo in range(r, r + booked, step):
                    _values(dsp.platform.warnings, values, lo, min(lo + step, r + booked))
        r += booked
        if r < rows:
            yield from row(r)
            r += 1


def _values(warnings: dict[str, dict[str, Any]], values: Callable[[int, int], Proc],
            lo: int, hi: int) -> None:
    """Run ``values(lo, hi)`` (untimed: it yields nothing). Warnings list in the order codes
    first fire row by row, so a batch raising two new codes is undone and rerun in halves (a
    row's outputs do not overwrite its inputs: recomputing gives the same values)."""
    before = {code: dict(w) for code, w in warnings.items()}
    for _ in values(lo, hi):
        raise RuntimeError("a row loop's values(lo, hi) yielded an event: it must only "
                           "compute")
    if hi - lo > 1 and len(warnings) - len(before) > 1:
        warnings.clear()
        warnings.update(before)
        mid = (lo + hi) // 2
        _values(warnings, values, lo, mid)
        _values(warnings, values, mid, hi)
