"""``dspsim validate --suggest``: the measurement that would narrow the widest interval most.

A run pins a ranged key as far as that key alone explains the run's own interval. The
candidates are runs not yet measured of each op the platform is measured with (every variant at
the measurement's size and at half of it, with its settings), each scored by the share of its
interval its dominant key explains times what pinning that key takes off the widest interval
(relative to its prediction)."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.config import models_dir
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op
from dspsim.study.interval import Interval, op_interval
from dspsim.study.sweep.values import format_value


@dataclass(frozen=True)
class Candidate:
    """A run to measure: an op's variant at a shape, with a measurement's settings."""

    op: str
    variant: str
    shape: tuple[int, ...]
    settings: dict[str, Any]
    interval: Interval


@dataclass(frozen=True)
class Suggestion:
    """The widest row, the run to measure, the key it pins and the interval after."""

    widest: Any  # the Row with the widest interval
    measure: Candidate  # the run to measure
    key: str  # the key that run pins
    share: float  # of the measured run's interval, what the key alone explains
    narrowed: Interval  # the widest row's interval with the key pinned

    def to_json(self) -> dict[str, Any]:
        w, m = self.widest, self.measure
        iv = w.interval
        return {
            "widest": {"model": w.model, "name": w.measurement.name,
                       "low_cycles": iv.low_cycles, "high_cycles": iv.high_cycles},
            "measure": {"op": m.op, "variant": m.variant, "shape": list(m.shape),
                        "settings": m.settings, "low_cycles": m.interval.low_cycles,
                        "high_cycles": m.interval.high_cycles},
            "key": self.key, "key_share": self.share,
            "narrowed": {"low_cycles": self.narrowed.low_cycles,
                         "high_cycles": self.narrowed.high_cycles},
            "narrowed_by_pct": 100.0 * (1 - self.narrowed.width_cycles / max(1, iv.width_cycles)),
        }

    def text(self) -> str:
        j = self.to_json()
        w, m = j["widest"], j["measure"]
        size = "x".join(map(str, m["shape"]))
        sets = "".join(f" --set {k}={format_value(v)}" for k, v in m["settings"].items())
        shown = (f"n = {m['shape'][0]:,}" if len(m["shape"]) == 1 else f"shape {size}")
        source = Path(self.widest.run_model.source)  # a packaged model by its name
        model = source.stem if source.parent == models_dir() else shlex.quote(str(source))
        return (f"widest interval: {w['name']} under {w['model']}, [{w['low_cycles']:,}, "
                f"{w['high_cycles']:,}] cycles. Measure {m['op']} {m['variant']} at {shown}"
                f"{sets} (`dspsim run --model {model} --op {m['op']} --variant {m['variant']} "
                f"{'--n' if len(m['shape']) == 1 else '--shape'} {size.replace('x', ',')}"
                f"{sets} --interval`): {self.key} alone explains {100 * self.share:.0f} % of "
                f"its interval; pinning {self.key} narrows the widest to "
                f"[{j['narrowed']['low_cycles']:,}, {j['narrowed']['high_cycles']:,}] "
                f"({j['narrowed_by_pct']:.0f} % narrower)")


def _share(iv: Interval) -> float:
    """What the dominant key alone explains of an interval's width."""
    if iv.dominant_key is None or iv.width_cycles == 0:
        return 0.0
    lo, hi = iv.alone[iv.dominant_key]
    return (hi - lo) / iv.width_cycles


def _pinned(row: Any, key: str) -> Interval:
    """A row's interval with ``key``'s range removed (the key known at its value)."""
    model = row.run_model
    ranges = {k: r for k, r in model.ranges.items() if k != key}
    m = row.measurement
    return op_interval(dataclasses.replace(model, ranges=ranges), m.op, m.variant, m.shape)


def _ident(op: str, variant: str, shape: tuple[int, ...], settings: dict) -> tuple:
    return op, variant, tuple(shape), tuple(sorted(settings.items()))


def candidates(rows: list[Any], label: str) -> list[Candidate]:
    """The runs not yet measured of the ops measured under model ``label``: every variant at
    each measurement's size and at half its first dimension."""
    mine = [r for r in rows if r.model == label and r.run_model is not None]
    seen = {_ident(r.measurement.op, r.measurement.variant, r.measurement.shape,
                   r.measurement.settings) for r in mine}
    out = []
    for r in mine:
        m = r.measurement
        half = (max(1, m.shape[0] // 2), *m.shape[1:])
        for variant in get_op(m.op).variants:
            for shape in dict.fromkeys((tuple(m.shape), half)):
                ident = _ident(m.op, variant, shape, m.settings)
                if ident in seen:
                    continue
                seen.add(ident)
                try:
                    iv = op_interval(r.run_model, m.op, variant, shape)
                except DspsimInputError:  # a run this platform refuses
                    continue
                out.append(Candidate(m.op, variant, shape, m.settings, iv))
    return out


def suggest(rows: list[Any]) -> Suggestion | None:
    """For the widest interval of ``rows``, the measurement that would narrow it most; None
    when no interval has a width."""
    ranged = [r for r in rows if r.interval is not None and r.interval.width_cycles > 0]
    if not ranged:
        return None
    widest = max(ranged, key=lambda r: r.interval.width_cycles / max(1, r.predicted))
    found = [c for c in candidates(rows, widest.model)
             if c.interval.dominant_key in widest.run_model.ranges]
    pinned: dict[str, Interval] = {}
    best: tuple[float, Any] | None = None
    for c in found:
        key = c.interval.dominant_key
        if key not in pinned:
            pinned[key] = _pinned(widest, key)
        gain = (widest.interval.width_cycles - pinned[key].width_cycles) * _share(c.interval)
        if best is None or gain > best[0]:
            best = (gain, c)
    if best is None:
        return None
    c = best[1]
    key = c.interval.dominant_key
    return Suggestion(widest, c, key, _share(c.interval), pinned[key])
