"""Runs of alike loop iterations at the price of a few, channels in flight: the ping-pong frame.

The ping-pong frame's middle tiles are alike: each waits for its input, runs the same kernels in
the same TCM buffer, copies out and prefetches on the same channel while the other channel
streams the next tile. Every second tile (a *period*: buffers and channels back in their roles)
the platform is in the same state relative to now, up to numbers that move by a constant each
period (the tile's DDR offset, descriptor and tile numbers, the access log's order). The frame
asks at each iteration top (:meth:`LoopRun.skip`); now and then :class:`LoopRun` reads at three
period starts everything that can act or be reported (:func:`_capture`): SimPy's queue (only the
channels' wake-ups may lie in the booked stretch), each channel's descriptors in flight and
queued, each port's slots and data path, the core's counters and write buffer, trace labels,
the access log, warnings and passes, the other cores (still). When every relative time,
structural field and number step agree, the following periods are booked at once: times move by
``J x D``, numbers by ``J`` steps, counters grow ``J`` times, the frame's loop counters move on.

Exact for :mod:`dspsim.hw.rowrun`'s reason: times and counters are integers
(:mod:`dspsim.hw.clock`), so a period commutes with every shift, and was seen to shift the state
by ``D`` twice: every later period start is ``S + jD``. Addresses only pick the memory (the same,
for a tile inside one array) and decide overlaps; all of one memory move by the same step, so no
overlap appears or vanishes. No foreign event may lie before what the booked periods hold
(``latest``), so SimPy's order of equal-time events is kept.

Booked only by the elided engine with the data path off (skipped tiles' values are not computed),
every port's policy uniform (:mod:`dspsim.hw.policy`) and the loop-carried values unchanged.
Records get the booked periods' entries, the last period's ``D`` apart
(:meth:`LoopRun._next_records`): the trace its rows as one block
(:class:`~dspsim.probes.TraceRun`; row by row under a row limit), a port's request log its
requests one by one (its limit counts those past it).
"""

from __future__ import annotations

import math
import pickle
from typing import TYPE_CHECKING, Any

from dspsim.hw.clock import put_into, requeue, set_now, waits_on
from dspsim.hw.clock import queued as queued_events
from dspsim.hw.memory import Ptr
from dspsim.hw.repeats import LogTicks, assign, book_requests, next_entries, next_requests, room
from dspsim.probes import PortLog, TraceRun

if TYPE_CHECKING:
    from dspsim.hw.views import DspView

# periods run one by one between two probes after a probe that found no run (doubling from 0)
MAX_PROBE_GAP_PERIODS = 16


class _PtrEnd:
    """A descriptor's end (``src`` / ``dst``, a frozen pointer) as its address."""

    __slots__ = ("transfer", "end")

    def __init__(self, transfer: Any, end: str):
        self.transfer, self.end = transfer, end

    def assign(self, addr: int) -> None:
        ptr = getattr(self.transfer, self.end)
        setattr(self.transfer, self.end, Ptr(ptr.mem, addr))


def _numbered(label: str) -> tuple[str, int | None]:
    """``"copy_in #12"`` -> ``("copy_in #", 12)``; a label with no number -> ``(label, None)``."""
    head, sep, tail = label.rpartition("#")
    if sep and tail.isdigit():
        return head + sep, int(tail)
    return label, None


class _State:
    """Everything that can act or be reported at an iteration top: ``key`` must be equal at every
    probe; ``times`` absolute times moving with now (``time_at`` where each lives, ``None`` if
    moved otherwise); ``ints`` numbers moving one step a period (``int_at``; ``int_mem`` the
    memory of an address); ``accs`` growing counters (``acc_at``); ``records`` the access log's
    kept accesses (rebuilt from ``ints[i]`` and ``times[j]`` on); ``latest`` the latest of the
    times held; ``foreign`` the first queued event not owned, ``queue`` the owned (event, time);
    ``rings`` each port's next slot."""

    __slots__ = ("now", "alike", "key", "times", "time_at", "ints", "int_at", "int_mem",
                 "accs", "acc_at", "records", "latest", "foreign", "queue",
                 "rings", "logged")

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
        self.foreign = math.inf
        self.queue: list[tuple[Any, int]] = []
        self.rings: list[int] = []
        self.logged: list[tuple[int, int]] = []  # each record's (kept, dropped): LoopRun.logs

    def time(self, at: tuple[Any, Any] | None, t: int) -> None:
        self.times.append(t)
        self.time_at.append(at)
        if t > self.latest:
            self.latest = t

    def int_(self, at: tuple[Any, Any] | None, n: int, mem: str | None = None) -> None:
        self.ints.append(n)
        self.int_at.append(at)
        self.int_mem.append(mem)

    def acc(self, owner: Any, attr: Any, x: int) -> None:
        self.accs.append(x)
        self.acc_at.append((owner, attr))


class LoopRun:
    """The alike iterations of one loop on ``dsp``'s core, ``period`` iterations apart."""

    def __init__(self, dsp: DspView, period: int):
        ctx = dsp.platform.ctx
        self.dsp = dsp
        self.env = ctx.env
        self.period = period
        self.ports = [m.port for m in dsp.platform.memories.values()]
        # a port whose requests may complete out of order has no ring to shift; the records
        # kept as the periods run (the trace, the ports' request logs) get the booked ones'
        self.recorder = ctx.recorder if ctx.recorder.enabled else None
        self.logs: list[Any] = [self.recorder, *[p.log for p in self.ports]]
        self.enabled = (ctx.elide and not ctx.data and all(
            p.ring and (p.log is None or isinstance(p.log, PortLog)) for p in self.ports))
        self._tick = 0  # iterations since the last probe (or jump, or failure)
        self._gap = 0  # periods to run before the next probe
        self._states: list[_State] = []

    def skip(self, alike: int, carried: Any = None) -> int:
        """At an iteration top, book at once (a multiple of ``period``) as many of the ``alike``
        iterations ahead (same code, same sizes) as provably repeat the last ones, the loop's
        ``carried`` values unchanged; return how many (the caller moves its counters on)."""
        if not self.enabled:
            return 0
        self._tick += 1
        if self._tick <= self.period * self._gap or (self._tick - 1) % self.period:
            return 0
        if alike < (3 - len(self._states)) * self.period:  # too few left to book one
            self._states.clear()
            return 0
        state = _capture(self, alike, pickle.dumps(carried)) if self._others_still() else None
        if state is None:
            return self._failed()
        self._states.append(state)
        if len(self._states) < 3:
            return 0
        periods = self._run_length(self._states)
        records = self._next_records(self._states) if periods > 0 else None
        if periods < 0 or (periods > 0 and records is None):
            return self._failed()
        if periods == 0:  # alike, but another's event comes too soon: look again a period on
            del self._states[0]
            return 0
        self._jump(self._states, periods)
        self._book_records(records, periods)
        self._states.clear()
        self._tick, self._gap = 0, 0
        return periods * self.period

    def _others_still(self) -> bool:
        """No other core's engine moves (a cheap look before a whole capture): with two
        loops at once the platform's state repeats only by chance."""
        for other in self.dsp.platform.dsps:
            if other is not self.dsp and (other.core.waiting_for is not None or any(
                    ch.current is not None or ch.fifo.items for ch in other.idma)):
                return False
        return True

    def _failed(self) -> int:
        self._states.clear()
        self._tick, self._gap = 0, min(2 * self._gap + 1, MAX_PROBE_GAP_PERIODS)
        return 0

    # ------------------------------------------------------------------ the run
    def _run_length(self, s: list[_State]) -> int:
        """How many periods after the three starts ``s`` repeat the last: -1 if they do not,
        0 if no period fits before another's event (a period on, one may)."""
        s0, s1, s2 = s
        if not (s0.key == s1.key == s2.key
                and s0.alike - s1.alike == self.period == s1.alike - s2.alike):
            return -1
        d = s1.now - s0.now
        if not (d > 0 and s2.now - s1.now == d):
            return -1
        for a, b, c in zip(s0.times, s1.times, s2.times):
            if not (b - s1.now == a - s0.now and c - s2.now == b - s1.now):
                return -1
        steps: dict[str, int] = {}  # per memory: the one step of every address in it
        for a, b, c, mem in zip(s0.ints, s1.ints, s2.ints, s2.int_mem):
            if c - b != b - a:
                return -1
            if mem is not None and steps.setdefault(mem, b - a) != b - a:
                return -1
        for p, a, b, c in zip(self.ports, s0.rings, s1.rings, s2.rings):
            m = p.max_outstanding
            if (b - a) % m != (c - b) % m:
                return -1
        for a, b, c in zip(s0.accs, s1.accs, s2.accs):
            if b < a or c - b != b - a:
                return -1
        return max(0, min(s2.alike // self.period, room(s2.latest, d, s2.foreign)))

    def _next_records(self, s: list[_State]) -> list[Any] | None:
        """What each record (:attr:`logs`) gets in the period after ``s[2]`` if both probed
        periods gave it the same, ``D`` apart (:func:`~dspsim.hw.repeats.next_entries`; a
        trace's ``(template, numbers)``, numbers one step on as :class:`~dspsim.probes.TraceRun`
        moves them): ``None`` for no record; ``None`` if a record's periods differ."""
        d = s[2].now - s[1].now
        out: list[Any] = []
        for k, log in enumerate(self.logs):
            if log is None:
                out.append(None)
                continue
            kept, follow = ((log.rows, _next_rows) if log is self.recorder
                            else (LogTicks(log), next_requests))
            entries = next_entries([x.logged[k] for x in s], kept, follow, d)
            if entries is None:
                return None
            out.append(entries)
        return out

    def _book_records(self, records: list[Any], periods: int) -> None:
        """Each record's entries of ``periods`` booked periods: the trace's as one
        :class:`~dspsim.probes.TraceRun` block (row by row under a row limit), a request log's
        entry by entry (it counts what passes its limit)."""
        d = self._states[2].now - self._states[1].now
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

    def _jump(self, s: list[_State], periods: int) -> None:
        """Book ``periods`` periods like the last one from now (the state ``s[2]``)."""
        _, s1, s2 = s
        now = s2.now
        dt = periods * (now - s1.now)
        ints = [c + periods * (c - b) if c != b else c for b, c in zip(s1.ints, s2.ints)]
        times = [t + dt for t in s2.times]
        for at, n in zip(s2.int_at, ints):
            if at is None:
                continue
            owner, attr = at
            if isinstance(owner, _PtrEnd):
                owner.assign(n)
            else:
                assign(owner, attr, n)
        for at, t in zip(s2.time_at, times):
            if at is not None:
                assign(at[0], at[1], t)
        for (owner, attr), b, c in zip(s2.acc_at, s1.accs, s2.accs):
            if c != b:
                assign(owner, attr, c + periods * (c - b))
        for kept, j, prefix, i, k in s2.records:  # frozen: each is rebuilt
            lo, hi, tile, seq = ints[i:i + 4]
            what = kept[j].what if prefix is None else f"{prefix}{ints[i + 4]}"
            kept[j] = kept[j]._replace(lo=lo, hi=hi, tile=tile, seq=seq, what=what,
                                        start=times[k], end=times[k + 1])
        for p, a, b in zip(self.ports, s1.rings, s2.rings):
            p.shift(a, b, periods, now, dt)
            if p.repeats is not None:
                p.repeats.reset()  # its noted states are of times now passed
        requeue(self.env, {id(event): t + dt for event, t in s2.queue})
        set_now(self.env, now + dt)


def _capture(run: LoopRun, alike: int, carried: bytes) -> _State | None:
    """The platform at an iteration top; ``None`` where nothing may be booked from it."""
    dsp = run.dsp
    st = _State(run.env.now, alike)
    st.logged = [(len(x.rows) if x is run.recorder else len(x), x.dropped) if x is not None
                 else (0, 0) for x in run.logs]
    if dsp.core.waiting_for is not None or dsp.core.dcache is not None:
        return None
    st.key.append(carried)
    if not (_queue(st, run) and _core(st, dsp) and _channels(st, dsp) and _ports(st, run)):
        return None
    _accesses(st, dsp.platform.ctx.accesses)
    st.key = tuple(st.key)
    return st


def _queue(st: _State, run: LoopRun) -> bool:
    """Who waits until when: channels' walks and just-queued descriptors (owned), anything else
    (foreign: only the first time kept). ``False`` if a channel in flight has no wake-up queued."""
    walking, fifos = {}, {}
    for other in run.dsp.platform.dsps:
        for ch in other.idma:
            target = waits_on(ch.process)
            if ch.current is not None and target is not None:
                walking[id(target)] = ch
            fifos[id(ch.fifo)] = ch
    order = []
    for when, eid, event in queued_events(run.env):
        ch = walking.pop(id(event), None)
        if ch is not None:
            order.append((when, eid, ch.name, event))
        elif id(put_into(event)) in fifos:
            order.append((when, eid, f"put {fifos[id(put_into(event))].name}", event))
        elif when < st.foreign:
            st.foreign = when
    if walking:
        return False
    order.sort(key=lambda q: q[:2])
    st.key.append(tuple(name for _, _, name, _ in order))
    for when, _, _, event in order:
        st.queue.append((event, when))
        st.time(None, when)  # requeue moves it
    return True


def _core(st: _State, dsp: DspView) -> bool:
    """The core running the loop (its counters; no store posted still in flight: a TCM loop
    posts none), its trace labels, passes and warnings."""
    core, platform = dsp.core, dsp.platform
    if any(t > st.now for t in core.write_buffer):
        return False
    st.acc(core, "compute_ticks", core.compute_ticks)
    st.key.append((tuple(sorted(core.stall_ticks)), tuple(sorted(core.idma_wait_ticks))))
    for counters in (core.stall_ticks, core.idma_wait_ticks):
        for k in sorted(counters):
            st.acc(counters, k, counters[k])
    labels = dsp.labels
    st.key += [labels.pass_name, labels.buffer, len(dsp.passes),
               tuple(sorted(dsp.tiles_seen.items())),
               tuple((w["code"], w["count"]) for w in platform.warnings.values())]
    for attr in ("tile_number", "tile_base", "tile_next"):
        st.int_((labels, attr), getattr(labels, attr))
    return True


def _channels(st: _State, dsp: DspView) -> bool:
    """Every channel of every core: counters, descriptors in flight and queued, the walk in
    flight (other cores' own state only compared: they must be still)."""
    for other in dsp.platform.dsps:
        if other is not dsp:
            st.key += [other.core.waiting_for, repr(other.core.stats())]
        for ch in other.idma:
            for attr in ("submitted", "completed", "bytes_moved"):
                st.int_((ch, attr), getattr(ch, attr))
            st.acc(ch, "busy_ticks", ch.busy_ticks)
            current = ch.current
            if current is not None and current is not ch.issued[0]:
                return False
            st.key.append((current is not None, len(ch.fifo.items), len(ch.issued), ch.ring))
            for j, t in enumerate(ch.issued):
                if not _transfer(st, t, started=j == 0 and current is not None):
                    return False
            if current is not None and not _stream(st, ch):
                return False
    return True


def _ports(st: _State, run: LoopRun) -> bool:
    """Every memory port: its slots and data path relative to now, its ring's next slot, its
    counters."""
    for p in run.ports:
        state, held, ns = p.relative_state(st.now)
        st.key += [p.flows, state]
        st.latest = max(st.latest, held)
        st.rings.append(ns)
        st.int_((p, "bytes_read"), p.bytes_read)
        st.int_((p, "bytes_written"), p.bytes_written)
        st.acc(p, "contention_ticks", p.contention_ticks)
    return True


def _accesses(st: _State, acc: Any) -> None:
    """The access log, when kept: the accesses in flight, those kept for the hazard check
    (frozen records, rebuilt from their numbers and times when booked), its numbering."""
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
            what, number = _numbered(a.what)  # a descriptor's "copy_in #12"
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


def _transfer(st: _State, t: Any, started: bool) -> bool:
    """A descriptor in flight (``started``) or queued: its shape, numbers and times."""
    st.key.append((t.channel, t.kind, t.nbytes, t.pass_name, t.buffer, t.done.triggered,
                   t.src.mem.name, t.dst.mem.name))
    if t.done.triggered:
        return False
    st.int_((t, "index"), t.index)
    st.int_((t, "tile"), t.tile)
    for end in ("src", "dst"):
        ptr = getattr(t, end)
        st.int_((_PtrEnd(t, end), None), ptr.addr, ptr.mem.name)
    if started:
        st.time((t, "start"), t.start)
    return True


def _stream(st: _State, ch: Any) -> bool:
    """The walk of the descriptor ``ch`` moves: where it is, what it has in flight."""
    port = ch.port_of(ch.current)
    stream = next((x for x in (port.repeats.streams if port.repeats else ())
                   if x.process is ch.process), None)
    if stream is None:
        return False
    now, inflight = st.now, stream.inflight
    st.key.append((stream.i, stream.now is None, stream.kind, stream.count,
                   tuple(x > now for x in inflight)))
    if stream.now is not None:
        st.time((stream, "now"), stream.now)
    for j, x in enumerate(inflight):
        if x > now:
            st.time((inflight, j), x)
    return True


def _next_rows(first: list, last: list, d: int) -> tuple[list[tuple], list] | None:
    """The trace rows of the period after ``last`` (``first`` before it) and how their numbers
    move (:class:`~dspsim.probes.TraceRun`); ``None`` unless both are alike, ``d`` apart."""
    if len(first) != len(last):
        return None
    template, numbers = [], []
    for a, b in zip(first, last):  # (engine, kind, what, start, end, bytes, tile, ...)
        if not (isinstance(a, tuple) and isinstance(b, tuple) and a[:2] == b[:2]
                and a[5] == b[5] and a[7:] == b[7:] and b[3] == a[3] + d and b[4] == a[4] + d):
            return None
        (head, n), (head_b, m) = _numbered(a[2]), _numbered(b[2])
        if head != head_b or (n is None) != (m is None):
            return None
        step = b[6] - a[6]
        template.append((*b[:3], b[3] + d, b[4] + d, b[5], b[6] + step, *b[7:]))
        numbers.append((step, None, 0, 0) if n is None else (step, head, 2 * m - n, m - n))
    return template, numbers
