"""The unit of simulated time: the tick, a fixed fraction of a core cycle (the one place it is
stated). Time is kept as an integer count of ticks (:mod:`dspsim.hw.clock`); results are
reported in cycles."""

from __future__ import annotations

TICKS_PER_CYCLE = 1 << 24  # a tick is 2^-24 of a core cycle
CYCLE = 1 / TICKS_PER_CYCLE  # a tick in cycles: ``t * CYCLE`` is ``cycles(t)`` to the bit


def ticks(cycles: float) -> int:
    """``cycles`` (a model's latency, rate or cost) as whole ticks, to the nearest."""
    return round(cycles * TICKS_PER_CYCLE)


def cycles(t: float) -> float:
    """Ticks ``t`` (a time or a duration) in cycles, as results report them."""
    return t / TICKS_PER_CYCLE
