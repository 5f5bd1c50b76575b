"""Runs of identical rows at the price of a few: an op's row loop booked in closed form.

An op whose rows run the same kernel calls on their own data (a row reads and writes its own
bytes, same offsets and lengths) writes ``yield from dsp.row_loop(rows, row, values)``. Rows run
one by one; now and then the loop reads every engine's state relative to now at row starts ``k``,
``k+1``, ``k+2`` (:class:`_Engines`): the port's slots and data path (in ring order), the core's
write buffer, trace labels, the access log, and that nothing else moves (iDMA idle, other cores
unchanged, no data cache touched, no warning). When the three agree (the row took ``D`` cycles
twice, every counter grew alike twice) the following rows are booked at once: time moves by
``J x D`` with what is in flight, counters grow ``J`` times, the passes are one block
(:class:`~dspsim.probes.PassRun`), and the values come from one vectorised untimed call
(``values(lo, hi)``, :meth:`dspsim.platform.Dsp.untimed`).

Why exact: time is an integer (ticks, :mod:`dspsim.hw.clock`) and so is every counter. A row
adds constants to times, subtracts two times and compares, so it is a function ``F`` commuting
with every shift; ``F(S) = S + D`` and ``F(S + D) = S + 2D`` give every row start ``S + jD``. A
run is booked while no other process's event comes first (``env.peek()``); then rows run one by
one and the next probe starts a new run.

With a port log, a trace cut at a row limit, a non-uniform port policy (no ring to shift) or the
reference engine (``elide=False``) every row is simulated. A whole trace gets the booked rows'
rows as one block (:class:`~dspsim.probes.TraceRun`: the last row's, ``D`` apart, checked alike
on the two rows probed). Nothing here knows an op: the op promises alike rows, the state check
sees that the engines agree.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from dspsim.hw.clock import at
from dspsim.hw.repeats import Snapshot as _Snapshot
from dspsim.hw.repeats import assign, repeats
from dspsim.probes import PassRun, TraceRun

if TYPE_CHECKING:
    from dspsim.hw.views import DspView

Proc = Generator[Any, Any, Any]
# rows run one by one between two probes after a probe that found no run (doubling from 1)
MAX_PROBE_GAP_ROWS = 64
# the booked rows' values are computed this many elements at a time (whole rows, one at least)
VALUES_BATCH_ELEMENTS = 1 << 18


class _Engines:
    """What a row loop may touch, read and moved in one place: the core running the op, every
    memory's port, the other cores and every iDMA channel (which must stay still), the access
    log, the passes and labels of the op's core."""

    def __init__(self, dsp: DspView):
        platform = dsp.platform
        self.dsp = dsp
        self.core = dsp.core
        self.ctx = ctx = platform.ctx
        self.env = ctx.env
        self.platform = platform
        self.ports = [m.port for m in platform.memories.values()]
        # a record of every row is asked for, or the reference engine: every row simulated
        recorder = ctx.recorder
        self.recorder = recorder if recorder.enabled else None
        # a port whose requests may complete out of order has no ring to shift
        self.enabled = (ctx.elide and (recorder.limit is None or not recorder.enabled)
                        and all(p.log is None and p.ring for p in self.ports))

    # ------------------------------------------------------------------ reading
    def _accumulators(self) -> list[tuple[Any, Any]]:
        """The growing counters (ticks) as (owner, key), in a fixed order."""
        core = self.core
        out: list[tuple[Any, Any]] = [(core, "compute_ticks")]
        out += [(core.stall_ticks, k) for k in sorted(core.stall_ticks)]
        out += [(core.idma_wait_ticks, k) for k in sorted(core.idma_wait_ticks)]
        out += [(p, "contention_ticks") for p in self.ports]
        return out

    @staticmethod
    def _get(owner: Any, key: str) -> int:
        return owner[key] if isinstance(owner, dict) else getattr(owner, key)

    def snapshot(self) -> _Snapshot | None:
        """The engines now; ``None`` when they are in no state a run of rows repeats from
        (something in flight that the rows do not own)."""
        now, core, dsp, acc = self.env.now, self.core, self.dsp, self.ctx.accesses
        if core.waiting_for is not None or acc.in_flight or any(acc.active.values()):
            return None
        key: list[Any] = [len(core.write_buffer),  # (a store in the past tells nothing later)
                          tuple(t - now if t > now else None for t in core.write_buffer),
                          tuple(sorted(core.stall_ticks)), tuple(sorted(core.idma_wait_ticks)),
                          repr(core.dcache.stats()) if core.dcache is not None else None]
        labels = dsp.labels
        key += [labels.pass_name, labels.buffer, labels.tile, labels.tile_next,
                tuple(sorted(dsp.tiles_seen.items())), len(acc.pairs), acc.dropped]
        for other in self.platform.dsps:
            for ch in other.idma:
                if ch.current is not None or ch.buffer_status():
                    return None
                key.append(repr(ch.stats()))
            if other is not dsp:
                key += [other.core.waiting_for, repr(other.core.stats())]
        rings = []
        for p in self.ports:
            if p.flows:
                return None
            state, _, ns = p.relative_state(now)
            key.append(state)
            rings.append(ns)
        if not self.ctx.data:  # with values, the rows' own checks warn (``values`` redoes them)
            key.append(tuple((w["code"], w["count"]) for w in self.platform.warnings.values()))
        floats = [self._get(o, k) for o, k in self._accumulators()]
        ints = [acc.seq] + [n for p in self.ports for n in (p.bytes_read, p.bytes_written)]
        count = len(dsp.passes)
        last = dict(dsp.passes[-1]) if count else None
        traced = len(self.recorder.rows) if self.recorder is not None else 0
        return _Snapshot(now, tuple(key), floats, ints, rings, count, last, traced)

    # ------------------------------------------------------------------ the run
    def run_length(self, s: list[_Snapshot], remaining: int) -> tuple[int, list | None]:
        """How many of the ``remaining`` rows after three row starts ``s`` repeat the last row
        exactly (0: none may be booked), and the passes and trace rows of the first of them."""
        s0, s1, s2 = s
        count = repeats(s, self.ports, remaining, self.env.peek())
        if count <= 0 or s0.passes > s1.passes:
            return 0, None
        d = s1.now - s0.now
        template = self._next_passes(s0, s1, s2, d)
        trace = self._next_trace(s0, s1, s2, d)
        if template is None or trace is None:
            return 0, None
        return count, (template, trace)

    def _next_passes(self, s0: _Snapshot, s1: _Snapshot, s2: _Snapshot, d: int
                     ) -> list[dict[str, Any]] | None:
        """The passes the row after ``s2`` books (those of the last row, ``d`` later), if the
        two rows booked the same passes ``d`` apart and left the earlier ones alone."""
        passes = self.dsp.passes
        per_row = s1.passes - s0.passes
        if s2.passes - s1.passes != per_row:
            return None
        for snap in (s0, s1):
            if snap.passes and passes[snap.passes - 1] != snap.last_pass:
                return None
        first, last = passes[s0.passes:s1.passes], passes[s1.passes:s2.passes]
        template = []
        for a, b in zip(first, last):
            if (a["end_tick"] is None or b["end_tick"] is None or a["name"] != b["name"]
                    or b["start_tick"] != a["start_tick"] + d
                    or b["end_tick"] != a["end_tick"] + d):
                return None
            template.append({"name": b["name"], "start_tick": b["start_tick"] + d,
                             "end_tick": b["end_tick"] + d})
        return template

    def _next_trace(self, s0: _Snapshot, s1: _Snapshot, s2: _Snapshot, d: int
                    ) -> list[tuple] | None:
        """The trace rows the row after ``s2`` records (those of the last row, ``d`` later),
        if the two rows recorded the same rows ``d`` apart; ``[]`` with no trace."""
        if self.recorder is None:
            return []
        rows = self.recorder.rows
        first, last = rows[s0.trace_rows:s1.trace_rows], rows[s1.trace_rows:s2.trace_rows]
        if len(first) != len(last):
            return None
        template = []
        for a, b in zip(first, last):  # (engine, kind, what, start, end, bytes, ...)
            if not (isinstance(a, tuple) and isinstance(b, tuple) and a[:3] == b[:3]
                    and a[5:] == b[5:] and b[3] == a[3] + d and b[4] == a[4] + d):
                return None
            template.append((*b[:3], b[3] + d, b[4] + d, *b[5:]))
        return template

    def jump(self, s: list[_Snapshot], rows: int,
             template: tuple[list[dict[str, Any]], list[tuple]]) -> Proc:
        """Book ``rows`` rows like the last one from now (the state ``s[2]``)."""
        s0, s1, s2 = s
        d = s2.now - s1.now
        dt = rows * d
        now = s2.now
        wb = self.core.write_buffer
        for i, t in enumerate(wb):
            if t > now:
                wb[i] = t + dt
        for p, a, b in zip(self.ports, s1.rings, s2.rings):
            p.shift(a, b, rows, now, dt)
        for (owner, key), b, c in zip(self._accumulators(), s1.floats, s2.floats):
            if c != b:
                assign(owner, key, c + rows * (c - b))
        ints = [c + rows * (c - b) for b, c in zip(s1.ints, s2.ints)]
        self.ctx.accesses.seq = ints[0]
        for k, p in enumerate(self.ports):
            p.bytes_read, p.bytes_written = ints[1 + 2 * k], ints[2 + 2 * k]
        passes, trace = template
        if passes:
            self.dsp.passes.append_run(PassRun(passes, rows, d))
        if trace:
            self.recorder.append_run(TraceRun(trace, rows, d))
        if dt:
            yield at(self.env, now + dt)


def row_loop(dsp: DspView, rows: int, row: Callable[[int], Proc],
             values: Callable[[int, int], Proc] | None = None, row_elements: int = 1) -> Proc:
    """``for r in range(rows): yield from row(r)``, booking runs of alike rows at once (module
    doc); every ``row(r)`` runs the same kernel calls on its own bytes at the same offsets.
    ``values(lo, hi)``: rows ``lo:hi``'s calls as one untimed batch, run for booked rows when the
    data path is on, in batches of about ``VALUES_BATCH_ELEMENTS`` (rows of ``row_elements``)."""
    engines = _Engines(dsp)
    if not engines.enabled:
        for r in range(rows):
            yield from row(r)
        return
    r, gap = 0, 0
    while r < rows:
        for _ in range(rows - r if rows - r < 3 else min(gap, rows - r)):
            yield from row(r)
            r += 1
        if rows - r < 3:
            continue
        snaps = [engines.snapshot()]
        for _ in range(2):
            yield from row(r)
            r += 1
            snaps.append(engines.snapshot())
        count, template = (engines.run_length(snaps, rows - r) if None not in snaps
                           else (0, None))
        if count <= 0:
            gap = min(2 * gap + 1, MAX_PROBE_GAP_ROWS)
            continue
        gap = 0
        yield from engines.jump(snaps, count, template)
        if values is not None and dsp.move_data:
            step = max(1, VALUES_BATCH_ELEMENTS // max(1, row_elements))
            with dsp.untimed():
                for lo in range(r, r + count, step):
                    _values(dsp.platform.warnings, values, lo, min(lo + step, r + count))
        r += count


def _values(warnings: dict[str, dict[str, Any]], values: Callable[[int, int], Proc],
            lo: int, hi: int) -> None:
    """Run ``values(lo, hi)`` (untimed: it must yield nothing). Warnings list in the order their
    codes first fire row by row, so a batch raising two new codes is undone and rerun in halves
    (a row's outputs do not overwrite its inputs: recomputing gives the same values)."""
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


