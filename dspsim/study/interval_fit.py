"""The range of a fitted key its calibration allows: with every other key at its value, the
smallest and largest value at which every measurement stays within the tolerance, found by
stepping out from the fitted value (doubling the step) and bisecting the last step to
:data:`REL_PRECISION`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dspsim.config import HardwareModel, model_key
from dspsim.errors import DspsimInputError

REL_PRECISION = 1e-4
MAX_STEPS = 60


def _fits(model: HardwareModel, key: str, value: Any, rows: Sequence[Any],
          tolerance_pct: float) -> bool:
    """Whether every measurement in ``rows`` is within ``tolerance_pct`` with ``key`` at
    ``value``."""
    from dspsim.study.calibrate.measure import simulated_cycles

    try:
        m = model.with_overrides({key: value})
        return all(abs(100.0 * (simulated_cycles(m, r) / r.cycles - 1.0)) <= tolerance_pct
                   for r in rows)
    except DspsimInputError:  # a value the model refuses is outside the range
        return False


def _edge(model: HardwareModel, key: str, rows: Sequence[Any], tol: float, up: bool) -> Any:
    """The last value (walking up or down from the key's value) at which every row fits."""
    k = model_key(key)
    value = model.get(key)
    bound = k.hi if up else (k.lo if k.lo is not None else 0)
    sign = 1 if up else -1
    step = max(abs(value) * REL_PRECISION, 1 if k.type is int else 1e-9)
    good = value
    for _ in range(MAX_STEPS):  # step out, doubling, until a value misfits (or the bound)
        trial = value + sign * step
        trial = min(trial, bound) if up else max(trial, bound)
        trial = int(round(trial)) if k.type is int else trial
        if not _fits(model, key, trial, rows, tol):
            bad = trial
            break
        good = trial
        if trial == bound:
            return good
        step *= 2
    else:
        return good
    while abs(bad - good) > max(abs(good) * REL_PRECISION, 1 if k.type is int else 0):
        mid = (good + bad) / 2
        mid = int(round(mid)) if k.type is int else mid
        if mid in (good, bad):
            break
        good, bad = (mid, bad) if _fits(model, key, mid, rows, tol) else (good, mid)
    return good


def tolerance_ranges(model: HardwareModel, keys: Sequence[str], rows: Sequence[Any],
                     tolerance_pct: float) -> dict[str, tuple[Any, Any]]:
    """Each key's (low, high): the values that keep every row (op, variant, shape, settings,
    cycles) within ``tolerance_pct``, the other keys at their values. A key the rows do not
    all fit at its own value gets (value, value)."""
    out = {}
    for key in keys:
        value = model.get(key)
        if not _fits(model, key, value, rows, tolerance_pct):
            out[key] = (value, value)
            continue
        out[key] = (_edge(model, key, rows, tolerance_pct, up=False),
                    _edge(model, key, rows, tolerance_pct, up=True))
    return out
