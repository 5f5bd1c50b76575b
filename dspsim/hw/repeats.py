"""What the repeat finders share: the engines' state at a few starts, and how far a run of
alike steps from them may be booked exactly.

A step (a row of a row loop, a period of a loop's iterations) that takes the engines from a
state ``S`` to ``S + D`` twice, every time in one binade, goes on doing so while every time
and counter stays in that binade (:mod:`dspsim.hw.rowrun` gives the argument): :func:`room`
counts the steps that fit, :func:`binade` names the binade, :func:`repeats` checks three
notes and counts the steps that repeat them. :class:`IterationRuns` books runs of alike
iterations inside one kernel call's walk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Snapshot:
    """The engines at a row start (or an iteration's end): ``key`` their state relative to
    ``now`` (exact where it matters), ``latest`` the latest time any of them holds, ``floats``
    / ``ints`` the counters, ``rings`` each port's next slot, ``passes`` how many passes were
    booked and ``last_pass`` a copy of the last one, ``trace_rows`` the trace's length."""

    now: float
    key: tuple
    latest: float
    floats: list[float]
    ints: list[int]
    rings: list[int]
    passes: int
    last_pass: dict[str, Any] | None
    trace_rows: int


def binade(x: float) -> tuple[float, float]:
    """``(2^(e+1), u)``: the top of the binade of ``x`` > 0 and its ulp."""
    _, ex = math.frexp(x)
    return math.ldexp(1.0, ex), math.ldexp(1.0, ex - 53)


def room(start: float, latest: float, step: float, limit: float | None = None) -> int:
    """How many more steps of ``step`` (> 0) ``latest`` may take staying below ``limit``
    (default: the top of the binade of ``start``; every value a multiple of that binade's
    ulp: integer arithmetic, exact)."""
    top, u = binade(start)
    limit = top if limit is None else min(limit, top)
    if latest >= limit:
        return 0
    return (int(limit / u) - 1 - int(latest / u)) // int(step / u)




def repeats(notes: list[Snapshot], ports: list[Any], limit: int, peek: float) -> int:
    """How many more steps like the last of the three ``notes`` (a step apart) repeat it
    exactly, at most ``limit`` (0: none may be booked): the notes agree relative to their
    times, each step takes the same time ``d`` and moves every port's ring and every integer
    counter alike; the steps stay below the top of the binade of the first note's time and
    before ``peek`` (another process's next event), and each float counter that grows stays
    in its own binade."""
    s0, s1, s2 = notes
    d = s1.now - s0.now
    if not (s0.key == s1.key == s2.key and s2.now - s1.now == d and d >= 0 and s0.now > 0):
        return 0
    for p, a, b, c in zip(ports, s0.rings, s1.rings, s2.rings):
        if (b - a) % p.max_outstanding != (c - b) % p.max_outstanding:
            return 0
    if any(b - a != c - b for a, b, c in zip(s0.ints, s1.ints, s2.ints)):
        return 0
    top, _ = binade(s0.now)
    if max(s0.latest, s1.latest, s2.latest) >= top:
        return 0
    runs = [limit]
    if d > 0:
        runs += [room(s0.now, s2.latest, d), room(s0.now, s2.now, d, peek)]
    for a, b, c in zip(s0.floats, s1.floats, s2.floats):
        step = b - a
        if c - b != step or step < 0:
            return 0
        if step > 0:
            if a <= 0 or c >= binade(a)[0]:
                return 0
            runs.append(room(a, c, step))
    return max(0, min(runs))


class IterationRuns:
    """Runs of alike iterations inside one kernel call's walk, booked at once: the loop of a
    call on a memory port (softmax ``direct``: every vector load a round trip to DDR; a memcpy
    streaming through the data cache) whose state relative to the walk's clock repeats.

    Now and then, at an iteration's end, :meth:`note` reads what the walk owes, its ports'
    slots and data paths (:meth:`dspsim.hw.port.MemoryPort.relative_state`), the write buffer
    and the data cache's lines (:meth:`dspsim.hw.dcache.DataCache.relative_state`, relative to
    the line the walk streams through), and the counters (the walk's stalls, the ports' and
    the cache's). When three notes ``gap`` iterations apart agree as a row loop's three row
    starts do (:func:`repeats`; the argument: :mod:`dspsim.hw.rowrun`), the iterations that
    follow are booked at once, within the binade and before any other process's event.
    Through a cache a period moves the cached loads' and stores' addresses alike by whole
    lines; the last period and the lines next to a memory's end (where the prefetcher stops)
    are walked."""

    def __init__(self, env: Any, ports: list[Any], write_buffer: Any, state: Any,
                 cache: Any = None, cached: tuple[bool, bool] = (False, False)):
        self.env, self.ports, self.wb, self.state = env, ports, write_buffer, state
        self.cache, self.cached = cache, cached  # (loads, stores) through the cache
        self.unit = 1  # iterations a period is a whole number of
        self.gap = 1  # iterations between two notes of a triple
        self.wait = 16  # iterations before the next triple's first note
        self.steps = (0, 0)  # bytes an iteration moves the loads' and the stores' address on
        self.step = 0  # of those, the cached addresses' (alike)
        self.notes: list[Snapshot] = []

    @staticmethod
    def applies(ports: list[Any], elide: bool) -> bool:
        """A walk over ``ports`` may be booked in runs: the elided engine, no request log."""
        return elide and bool(ports) and all(p.log is None for p in ports)

    def first(self, count: int, loads: tuple[int, ...], stores: tuple[int, ...]) -> int:
        """A run of ``count`` alike iterations (each its ``loads`` and ``stores``) begins: how
        many are left at the first note (-1: none)."""
        self.notes.clear()
        self.steps = (sum(loads), sum(stores))
        if self.cache is not None and not self._period():
            return -1
        at = count - max(self.wait, self.unit)
        return at if at > 3 * self.gap else -1

    def _period(self) -> bool:
        """Through the cache: the fewest iterations that move the cached addresses on by whole
        lines, alike (``False``: they do not)."""
        steps = [s for s, cached in zip(self.steps, self.cached) if cached]
        if not steps or min(steps) != max(steps) or steps[0] <= 0:
            return False
        line = self.cache.line_bytes
        self.step, self.unit = steps[0], line // math.gcd(line, steps[0])
        if self.gap % self.unit:
            self.gap = self.unit
        return True

    def note(self, now: float, owed: float, left: int, load_addr: int, store_addr: int
             ) -> tuple[float, int, int, int, int]:
        """At an iteration's end, ``left`` alike ones to go: the walk's clock, the iterations
        left once the run found (if any) is booked, how many are left at the next note (-1:
        none), and the loads' and the stores' next addresses."""
        notes = self.notes
        notes.append(self._snapshot(now, owed, load_addr, store_addr))
        if len(notes) == 3:
            periods = repeats(notes, self.ports, self._limit(left), self.env.peek())
            if periods > 0:
                now = self._book(periods, now)
                left -= periods * self.gap
                load_addr += periods * self.gap * self.steps[0]
                store_addr += periods * self.gap * self.steps[1]
                self.wait = 1
            elif notes[0].key == notes[2].key:  # alike, but a binade ends too soon: soon again
                self.wait = 1
            else:
                self.gap = min(2 * self.gap, 64 * self.unit)
                self.wait = min(2 * self.wait, 4096)
            notes.clear()
        at = left - (self.gap if notes else max(self.wait, self.unit))
        return now, left, at if at > 0 else -1, load_addr, store_addr

    def _limit(self, left: int) -> int:
        """The most periods the notes may stand for: within the run, and through the cache
        one period short of its end and clear of every memory's last lines."""
        periods = left // self.gap
        if self.cache is None:
            return periods
        line = self.cache.line_bytes
        lines = self.gap * self.step // line  # a period's
        for mem, top in self.cache.top_lines().items():
            periods = min(periods, ((mem.base + mem.size_bytes) // line - top - 2) // lines)
        return periods - 1

    def _snapshot(self, now: float, owed: float, load_addr: int, store_addr: int) -> Snapshot:
        latest = now + owed
        key: list[Any] = [owed, len(self.wb), tuple(t - now if t > now else None
                                                    for t in self.wb)]
        rings = []
        for p in self.ports:
            state, held, ns = p.relative_state(now)
            key.append(state)
            latest = max(latest, held)
            rings.append(ns)
        latest = max(latest, *self.wb) if self.wb else latest
        floats = [self.state.stall, self.state.store_stall,
                  *[x for p in self.ports for x in (p.contention_cycles, p.path_busy_cycles)]]
        ints = [n for p in self.ports for n in (p.bytes_read, p.bytes_written)]
        cache = self.cache
        if cache is not None:
            base = (load_addr if self.cached[0] else store_addr) // cache.line_bytes
            state, held = cache.relative_state(now, base)
            key.append(state)
            latest = max(latest, held)
            ints += [getattr(cache, k) for k in cache.COUNTERS]
        return Snapshot(now, tuple(key), latest, floats, ints, rings, 0, None, 0)

    def _book(self, periods: int, now: float) -> float:
        """Book ``periods`` periods like the last from ``now`` (the third note's time); return
        the walk's clock after them."""
        _, s1, s2 = self.notes
        dt = periods * (s2.now - s1.now)  # exact: a multiple of the binade's ulp below its top
        for p, a, b in zip(self.ports, s1.rings, s2.rings):
            p.shift(a, b, periods, now, dt)
        wb = self.wb
        for i, t in enumerate(wb):
            if t > now:
                wb[i] = t + dt
        floats = [c + periods * (c - b) if c != b else c for b, c in zip(s1.floats, s2.floats)]
        ints = [c + periods * (c - b) for b, c in zip(s1.ints, s2.ints)]
        state, ports = self.state, self.ports
        state.stall, state.store_stall = floats[:2]
        for k, p in enumerate(ports):
            p.contention_cycles, p.path_busy_cycles = floats[2 + 2 * k:4 + 2 * k]
            p.bytes_read, p.bytes_written = ints[2 * k:2 * k + 2]
        cache = self.cache
        if cache is not None:
            cache.shift(periods * self.gap * self.step // cache.line_bytes, now, dt)
            for k, n in zip(cache.COUNTERS, ints[2 * len(ports):]):
                setattr(cache, k, n)
        state.now = now + dt  # the walk is there (it may end with no wait after)
        return state.now
