"""A prediction's interval: the fewest and most cycles its model's ranges allow.

Instead of every corner of the ranges (2^k runs) the search uses what is proven of each key
(:func:`trend`, each claim a property test in ``tests/test_interval_trends.py``): with every
trended key at its slow end the run is slowest, at its fast end fastest; a key with no proven
trend (a tile size) is tried at its range's ends and its value, in every combination with the
others of its kind (at most :data:`MAX_UNTRENDED`). The dominant key is the one whose range
alone moves the cycles most; a key's second end is run only when it could still be the
dominant one (docs/validation.md, "Intervals").

:func:`tolerance_ranges` is the other range of a key: where a calibration's measurements stay
within the tolerance, the other keys at their fitted values."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspsim.config import HardwareModel, is_memory_section, model_key
from dspsim.errors import DspsimInputError

MAX_UNTRENDED = 3
# what is proven of the hardware keys; a memory's keys (any memory's name) by their short name
# (+1: cycles never fall as it rises, -1: never rise, 0: do not depend on it)
_HARDWARE_TRENDS: dict[str, int] = {
    "core.clock_mhz": 0, "host.rpc_latency_us": 0,
    "core.alu_latency_cycles": 1, "core.call_overhead_cycles": 1, "idma.setup_cycles": 1,
    "core.vector_alu_slots": -1, "core.load_store_units": -1,
    "core.write_buffer_entries": -1, "idma.max_outstanding": -1, "dcache.miss_cycles": 1,
    "idma.descriptor_cycles": 1, "idma.engine_bytes_per_cycle": -1}
_MEMORY_TRENDS: dict[str, int] = {"latency_cycles": 1, "write_latency_cycles": 1,
                                  "bytes_per_cycle": -1, "max_outstanding": -1,
                                  "refresh_clocks": 1, "command_clocks": 1,
                                  "read_hold_clocks": 1, "write_hold_clocks": 1}
# keys that act only through the TCM a run's buffers get (whether they fit, how much stays
# resident, a ring's descriptors): no trend; its slow and fast ends are those it moves a run to
FIT_KEYS = ("tcm.reserved_bytes",)


def trend(key: str) -> int | None:
    """How a run's cycles move as ``key`` rises (+1, -1, 0: not at all, None: unknown); an
    op's key says so itself (:attr:`dspsim.schema.Key.trend`)."""
    section, _, short = key.partition(".")
    if key in _HARDWARE_TRENDS:
        return _HARDWARE_TRENDS[key]
    return (_MEMORY_TRENDS.get(short) if is_memory_section(section)
            else getattr(model_key(key), "trend", None))


@dataclass
class Interval:
    """A run's cycles, their interval over the model's ranges, and what moves it."""

    point_cycles: int
    low_cycles: int
    high_cycles: int
    dominant_key: str | None  # None: no range moves it
    # each ranged key's (low, high) cycles with it alone over its range; None: not run (it
    # cannot move the cycles more than the dominant key's range does)
    alone: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    runs: int = 0

    @property
    def width_cycles(self) -> int:
        return self.high_cycles - self.low_cycles

    def contains(self, cycles: float) -> bool:
        return self.low_cycles <= cycles <= self.high_cycles

    def to_json(self) -> dict[str, Any]:
        return {"low_cycles": self.low_cycles, "high_cycles": self.high_cycles,
                "dominant_key": self.dominant_key}


def _runner(model: HardwareModel, run: Callable[[HardwareModel], int]
            ) -> tuple[Callable[[dict[str, Any]], int], dict[tuple, int]]:
    """Runs under the model with some keys moved, each distinct configuration once; and the
    runs made, by configuration."""
    seen: dict[tuple, int] = {}

    def runner(moved: dict[str, Any]) -> int:
        moved = {k: v for k, v in moved.items() if v != model.get(k)}
        ident = tuple(sorted(moved.items()))
        if ident not in seen:
            try:
                seen[ident] = run(model.with_overrides(moved) if moved else model)
            except DspsimInputError as e:
                at = ", ".join(f"{k}={v}" for k, v in moved.items())
                raise DspsimInputError(f"interval: at {at} (an end of the model's ranges) the "
                                       f"run is refused: {e}") from None
        return seen[ident]

    return runner, seen


def _slow_fast(model: HardwareModel, run: Callable[[dict[str, Any]], int]
               ) -> tuple[dict, dict, dict[str, tuple]]:
    """Each trended key's slow and fast end, and the values to try of each untrended key (a
    :data:`FIT_KEYS` key: the value or end, where the run takes it, that alone gives the run
    the most cycles is its slow end, the fewest its fast one)."""
    slow, fast, free = {}, {}, {}
    for key, (lo, hi) in model.ranges.items():
        t = trend(key)
        if key in FIT_KEYS:
            alone = {}
            for v in (lo, model.get(key), hi):
                try:
                    alone[v] = run({key: v})
                except DspsimInputError:  # an end may leave the run's buffers no room
                    pass
            slow[key], fast[key] = max(alone, key=alone.get), min(alone, key=alone.get)
        elif t is None:
            free[key] = tuple(dict.fromkeys((lo, model.get(key), hi)))
        elif t < 0 and lo <= 0:  # a rate at 0 is no limit (the fastest): no slowest end
            raise DspsimInputError(
                f"interval: [ranges] {key} = [{lo!r}, {hi!r}] reaches 0, which means no limit "
                "(the fastest, not the slowest); allowed: a range above 0")
        elif t:
            slow[key], fast[key] = (hi, lo) if t > 0 else (lo, hi)
    if len(free) > MAX_UNTRENDED:
        raise DspsimInputError(
            f"interval: {len(free)} ranged keys without a proven trend ({', '.join(free)}); at "
            f"most {MAX_UNTRENDED} can be searched (3 values each)")
    return slow, fast, free


def _alone(run: Callable[[dict[str, Any]], int], slow: dict, fast: dict, free: dict,
           point: int, low: int, high: int) -> dict[str, tuple[int, int] | None]:
    """Each ranged key's cycles over its range alone; a trended key's second end only when
    the first end plus the interval's bound on the other side could still beat the best."""
    out: dict[str, tuple[int, int] | None] = {}
    for key, values in free.items():
        cycles = [run({key: v}) for v in values]
        out[key] = (min(cycles), max(cycles))
    up_bound, down_bound = high - point, point - low
    first_slow = up_bound >= down_bound  # run the side with the looser bound first
    known = {k: run({k: (slow if first_slow else fast)[k]}) for k in slow}
    best = max((hi - lo for lo, hi in out.values()), default=0)
    other_bound = down_bound if first_slow else up_bound
    for key in sorted(known, key=lambda k: -abs(known[k] - point)):
        if abs(known[key] - point) + other_bound <= best and best > 0:
            out[key] = None
            continue
        other = run({key: (fast if first_slow else slow)[key]})
        out[key] = (min(other, known[key]), max(other, known[key]))
        best = max(best, out[key][1] - out[key][0])
    return out


def op_interval(model: HardwareModel, op: str, variant: str | None, shape: tuple[int, ...],
                fidelity: str = "burst") -> Interval:
    """The interval of one op's run (data path off) over the ranges of ``model``."""
    from dspsim.run import simulate

    runner, runs = _runner(model, lambda m: simulate(m, op, variant, shape=shape, data=False,
                                                     fidelity=fidelity).cycles)
    point = runner({})
    slow, fast, free = _slow_fast(model, runner)
    combos = [dict(zip(free, vs)) for vs in itertools.product(*free.values())]
    high = max([point] + [runner({**slow, **c}) for c in combos])
    low = min([point] + [runner({**fast, **c}) for c in combos])
    alone = _alone(runner, slow, fast, free, point, low, high)
    widths = {k: v[1] - v[0] for k, v in alone.items() if v is not None}
    dominant = max(widths, key=lambda k: widths[k], default=None)
    if dominant is not None and widths[dominant] == 0:
        dominant = None
    return Interval(point, low, high, dominant, alone, len(runs))


# ------------------------------------------------------------------ tolerance ranges
REL_PRECISION = 1e-4  # a tolerance range's edge, relative to the value
MAX_STEPS = 60


def _within(model: HardwareModel, key: str, value: Any, rows: Sequence[Any],
            tolerance_pct: float) -> bool:
    """Whether every row (a run with its settings, simulated at burst fidelity, data path
    off) is within ``tolerance_pct`` with ``key`` at ``value`` (a value the model refuses is
    outside the range)."""
    from dspsim.run import simulate

    try:
        at = model.with_overrides({key: value})
        for r in rows:
            run = at.with_overrides(r.settings) if r.settings else at
            cycles = simulate(run, r.op, r.variant, shape=r.shape, data=False).cycles
            if abs(100.0 * (cycles / r.cycles - 1.0)) > tolerance_pct:
                return False
        return True
    except DspsimInputError:
        return False


def _edge(model: HardwareModel, key: str, rows: Sequence[Any], tol: float, up: bool) -> Any:
    """The last value (walking up or down from the key's value) at which every row fits:
    out in doubling steps until a misfit (or the bound), then the last step bisected. A key
    that must stay above 0 walks down to its value x REL_PRECISION (the walk's first step),
    not towards 0, which it refuses (halving down to the smallest float)."""
    k = model_key(key)
    integer = k.type is int
    unit = k.multiple or 1  # an integer key's step: the values it takes (multiples of 4, say)
    value = good = model.get(key)
    bound = k.hi if up else (k.lo if k.lo is not None else 0)
    if not up and k.positive:
        bound = abs(value) * REL_PRECISION
    step = max(abs(value) * REL_PRECISION, unit if integer else 1e-9)
    for _ in range(MAX_STEPS):
        trial = min(value + step, bound) if up else max(value - step, bound)
        trial = int(round(trial / unit)) * unit if integer else trial
        if not _within(model, key, trial, rows, tol):
            bad = trial
            break
        good = trial
        if trial == bound:
            return good
        step *= 2
    else:
        return good
    while abs(bad - good) > max(abs(good) * REL_PRECISION, unit if integer else 0):
        mid = (good + bad) / 2
        mid = int(round(mid / unit)) * unit if integer else mid
        if mid in (good, bad):
            break
        good, bad = (mid, bad) if _within(model, key, mid, rows, tol) else (good, mid)
    return good


def tolerance_ranges(model: HardwareModel, keys: Sequence[str], rows: Sequence[Any],
                     tolerance_pct: float) -> dict[str, tuple[Any, Any]]:
    """Each key's (low, high): the values that keep every row (op, variant, shape, settings,
    cycles) within ``tolerance_pct``, the other keys at their values. A key the rows do not
    all fit at its own value gets (value, value)."""
    out = {}
    for key in keys:
        value = model.get(key)
        out[key] = ((_edge(model, key, rows, tolerance_pct, up=False),
                     _edge(model, key, rows, tolerance_pct, up=True))
                    if _within(model, key, value, rows, tolerance_pct) else (value, value))
    return out
