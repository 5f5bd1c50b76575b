"""The access log checks hazards as the run goes and keeps only what can still conflict.

Its answer is compared with the whole-run check it replaced (every pair of accesses to one
memory that overlap in time and bytes, from two engines, one writing), on random access streams
fed as engines feed it: ``begin`` when an access starts, ``add`` + ``finish`` when it ends.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import simulate
from dspsim.probes import Access, AccessLog, _describe

ENGINES = ("core0", "core0.idma0", "core0.idma1")


def stream(rng: random.Random, ops_per_engine: int, memories: int = 2, span: int = 256):
    """Each engine's accesses one after another (an engine does one thing at a time): a list of
    (engine, start, end, [(memory, lo, nbytes, write), ...])."""
    ops = []
    for engine in ENGINES:
        t = rng.randint(0, 5)
        for _ in range(ops_per_engine):
            start = t + rng.choice((0, 0, 1, 3, 7))
            end = start + rng.choice((0, 1, 2, 5, 11))
            touched = [(f"m{rng.randrange(memories)}", rng.randrange(span),
                        rng.choice((0, 4, 16, 64)), rng.random() < 0.5)
                       for _ in range(rng.choice((1, 2)))]
            ops.append((engine, float(start), float(end), touched))
            t = end
    return ops


def feed(log: AccessLog, ops, rng: random.Random) -> int:
    """Feed the stream in time order as the engines would: each engine's own steps in order
    (begin, end, next begin), ties between engines in a random order. Return the most accesses
    the log held at once."""
    queues: dict[str, list] = {}
    for engine, start, end, touched in ops:
        queues.setdefault(engine, []).extend([(start, "begin", end, touched),
                                              (end, "end", start, touched)])
    peak = 0
    while any(queues.values()):
        now = min(q[0][0] for q in queues.values() if q)
        engine = rng.choice(sorted(e for e, q in queues.items() if q and q[0][0] == now))
        t, what, other, touched = queues[engine].pop(0)
        if what == "begin":
            log.begin(engine, t)
            continue
        for memory, lo, nbytes, write in touched:
            log.add(engine, memory, lo, nbytes, write, other, t, "x", 0, "p")
        log.finish(engine, t)
        peak = max(peak, sum(len(v) for v in log.active.values()))
    return peak


def whole_run(log_order: list[Access], origin: float = 0.0) -> list[dict]:
    """The whole-run check the log replaced, as it was: memory by memory (in the order first
    touched), each memory's accesses sorted by start, the overlapping ones paired; then a
    stable sort by cycle."""
    found = []
    by_memory: dict[str, list[Access]] = {}
    for a in log_order:
        by_memory.setdefault(a.memory, []).append(a)
    for memory, accesses in by_memory.items():
        accesses.sort(key=lambda a: a.start)
        active: list[Access] = []
        for b in accesses:
            active = [a for a in active if a.end > b.start]
            for a in active:
                if a.engine != b.engine and (a.write or b.write) and a.lo < b.hi and b.lo < a.hi:
                    found.append(_describe(memory, a, b, origin))
            active.append(b)
    return sorted(found, key=lambda h: h["cycle"])


class Recording(AccessLog):
    """An access log that also remembers every access, in arrival order (for the reference)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.all: list[Access] = []

    def add(self, *args) -> None:
        before = self.seq
        super().add(*args)
        if self.seq > before:
            self.all.append(self.active[args[1]][-1])


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 40))
def test_online_hazards_equal_the_whole_run_check(seed, ops):
    rng = random.Random(seed)
    log = Recording()
    feed(log, stream(rng, ops), rng)
    assert log.hazards(origin=3.0) == whole_run(log.all, origin=3.0)
    assert log.dropped == 0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), limit=st.integers(1, 20))
def test_a_limit_keeps_the_earliest_hazards_and_counts_the_rest(seed, limit):
    rng = random.Random(seed)
    ops = stream(rng, 60, memories=1, span=64)
    full, cut = Recording(), AccessLog(limit=limit)
    feed(full, ops, random.Random(seed))
    feed(cut, ops, random.Random(seed))
    want = full.hazards()
    assert cut.hazards() == want[:limit]
    assert cut.dropped == max(0, len(want) - limit)


def test_the_log_holds_only_what_overlaps_the_present():
    rng = random.Random(7)
    log = AccessLog()
    peak = feed(log, stream(rng, 20_000), rng)
    # while the longest access (11 cycles) is in flight, each other engine ends at most 12 of
    # its own (at least one cycle each), two touches apiece: 20,000 accesses an engine or 20
    assert peak <= 2 * 12 * 2 + 2 * 2
    assert sum(len(v) for v in log.active.values()) <= peak


def test_a_disabled_log_keeps_nothing():
    rng = random.Random(3)
    log = AccessLog(enabled=False)
    assert feed(log, stream(rng, 200), rng) == 0 and log.hazards() == []


def test_a_run_with_many_hazards_lists_the_earliest_and_warns(j6, monkeypatch):
    """The split schedule races on every tile: the run lists the hazards in full up to the
    limit and says how many more there were."""
    from dspsim import probes

    model = j6.with_overrides({"softmax.schedule": "split", "softmax.tile_bytes": 1024})
    full = simulate(model, variant="pingpong", n=60_000, data=False)
    assert len(full.hazards) > 20
    monkeypatch.setattr(probes, "HAZARD_LIMIT", 20)
    cut = simulate(model, variant="pingpong", n=60_000, data=False)
    assert cut.hazards == full.hazards[:20]
    (w,) = [w for w in cut.warnings if w["code"] == "hazards_not_listed"]
    assert w["count"] == len(full.hazards) - 20 and w["severity"] == "info"
    assert cut.cycles == full.cycles
