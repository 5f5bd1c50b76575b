"""The result of a calibration (:class:`Calibration`) and its text and JSON renderings;
:func:`unit` and :func:`reading` say what a fitted value means physically."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dspsim.config import HardwareModel, model_key
from dspsim.errors import ConfigError
from dspsim.study.calibrate.identify import Interval, Proposal
from dspsim.study.calibrate.measure import FreeParam, Measurement, is_int_key, value_text
from dspsim.study.calibrate.problem import FitPoint
from dspsim.text import cell

_UNITS = (("bytes_per_cycle", "B/cycle"), ("_cycles", "cycles"), ("_bytes", "B"),
          ("_mhz", "MHz"), ("_us", "us"), ("max_outstanding", "requests"),
          ("_entries", "entries"), ("lanes_f32", "lanes"))  # the first suffix that ends it


def unit(key: str) -> str:
    """The unit of a model key, from its name (else the one its schema gives)."""
    name = key.split(".")[-1]
    try:
        declared = model_key(key).unit
    except ConfigError:
        declared = ""
    return next((u for suffix, u in _UNITS if name.endswith(suffix)), declared)


def reading(key: str, value: float, model: HardwareModel) -> str:
    """What a value means physically, at the model's clock."""
    clock = model.core.clock_mhz
    name = key.split(".")[-1]
    if name.endswith("bytes_per_cycle"):
        return f"{value * clock / 1000:.4g} GB/s at {clock:g} MHz"
    if name.endswith("_cycles"):
        return f"{value / clock * 1000:.4g} ns at {clock:g} MHz"
    if key == "idma.max_outstanding":
        burst = model.idma.burst_bytes
        cover = value * burst / model.host_memory.bytes_per_cycle
        return (f"{value * burst:g} B in flight per channel ({value:g} x {burst} B bursts), "
                f"{cover:.0f} cycles of port transfer per round trip")
    if key == f"{model.host.memory}.max_outstanding":
        return f"{value:g} requests in flight on the port"
    if name.endswith("_mhz"):
        return f"{1000 / value:.4g} ns per cycle"
    return ""


@dataclass
class Calibration:
    """A calibration: the input and the fitted model, the best fit, how well the measurements
    determine the free keys, and the measurement that would separate the fits."""

    model: HardwareModel  # the input model
    fitted: HardwareModel  # the input model with the best fit applied
    measurements: list[Measurement]
    free: list[FreeParam]
    best: FitPoint
    fidelity: str
    tolerance_pct: float
    good: list[FitPoint]  # every fit found with all measurements within tolerance
    families: list[FitPoint]  # one per family of good fits (continuous values within 1 %)
    intervals: list[Interval]
    determined: bool
    proposal: Proposal | None
    simulations: int
    out_path: str | None = None

    @property
    def values(self) -> dict[str, float]:
        return self.best.values

    @property
    def fitted_within_tolerance(self) -> bool:
        """Whether the best fit reproduces every measurement within the tolerance (if not, no
        value in the search ranges does: the measurements are out of the model's reach)."""
        return self.best.worst <= self.tolerance_pct / 100.0  # as calibrate() sorts fits

    @property
    def residuals_pct(self) -> list[float]:
        return [100.0 * float(r) for r in self.best.residuals]

    def simulated_cycles(self) -> list[float]:
        return [m.cycles * (1 + r) for m, r in zip(self.measurements, self.best.residuals)]

    # ------------------------------------------------------------ rendering
    def _fit_values(self, v: dict[str, float]) -> dict[str, float]:
        return {p.key: (int(round(v[p.key])) if p.integer else v[p.key]) for p in self.free}

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model.source, "fidelity": self.fidelity,
            "tolerance_pct": self.tolerance_pct,
            "free": {p.key: {"lo": p.lo, "hi": p.hi, "integer": p.integer} for p in self.free},
            "fitted_within_tolerance": self.fitted_within_tolerance,
            "max_abs_residual_pct": 100.0 * self.best.worst,
            "fit": {p.key: {"value": self._fit_values(self.values)[p.key], "unit": unit(p.key),
                            "reading": reading(p.key, self.values[p.key], self.fitted)}
                    for p in self.free},
            "measurements": [
                {"spec": m.spec(with_op=True), **m.run_fields(older_names=True),
                 "measured_cycles": m.cycles, "simulated_cycles": round(c), "residual_pct": r}
                for m, c, r in zip(self.measurements, self.simulated_cycles(), self.residuals_pct)
            ],
            "identifiability": self._identifiability_json(),
            "simulations": self.simulations,
            "out": self.out_path,
        }

    def _identifiability_json(self) -> dict[str, Any]:
        """Each free key's interval, the families and equally good fits, the measurement that
        would separate them."""
        fit_values, pr = self._fit_values, self.proposal
        return {
            "determined": self.determined,
            "intervals": {
                iv.key: {"lo": iv.lo, "hi": iv.hi, "segments": [list(s) for s in iv.segments],
                         "values": iv.values, "reaches_search_bound": iv.reaches_search_bound,
                         "determined": iv.determined}
                for iv in self.intervals
            },
            "families": [fit_values(f.values) for f in self.families],
            "equally_good_fits": [
                {"values": fit_values(g.values), "max_abs_residual_pct": 100 * g.worst}
                for g in self.good
            ],
            "separating_measurement": None if pr is None else {
                "spec": pr.measurement.label(with_op=True),
                **pr.measurement.run_fields(older_names=True),
                "predictions": [{"values": fit_values(v), "predicted_cycles": round(c)}
                                for v, c in pr.predictions],
                "spread_cycles": round(pr.spread_cycles), "spread_pct": pr.spread_pct,
                "family_gap_pct": pr.family_gap_pct,
            },
        }

    def text(self) -> str:
        L = [f"calibrated {cell(self.model.name)} ({cell(self.model.source, 200)}): "
             f"{len(self.measurements)} measurement(s) of "
             f"{', '.join(dict.fromkeys(m.op for m in self.measurements))}, "
             f"{len(self.free)} free key(s), {self.fidelity} fidelity, "
             f"{self.simulations} simulations", "", "fitted values"]
        width = max(len(p.key) for p in self.free)
        for p in self.free:
            v = self.values[p.key]
            shown = f"{int(round(v))}" if p.integer else f"{v:.6g}"
            L.append(f"  {p.key:<{width}}  {shown:>10} {unit(p.key):<9} "
                     f"{reading(p.key, v, self.fitted)}   (searched {p.lo:g} .. {p.hi:g})")
        lw = max([len("measurement")] + [len(m.label()) for m in self.measurements])
        L += ["", f"  {'measurement':<{lw}} {'measured_cycles':>16} {'simulated_cycles':>17} "
              f"{'residual_pct':>13}"]
        for m, c, r in zip(self.measurements, self.simulated_cycles(), self.residuals_pct):
            L.append(f"  {m.label():<{lw}} {m.cycles:>16,.0f} {c:>17,.0f} {r:>+13.3f}")
        L += ["", *self._verdict_lines(width)]
        if self.proposal is not None:
            L += self._proposal_lines()
        if self.out_path:
            missed = "" if self.fitted_within_tolerance else (
                " (the fit missed the tolerance: the file's verdict comment says so)")
            L += ["", f"wrote {self.out_path}{missed}"]
        return "\n".join(L)

    def _verdict_lines(self, width: int) -> list[str]:
        """Whether the fit reproduces the measurements, and whether they determine each free
        key (its interval, or the equally good fits)."""
        tol = self.tolerance_pct
        if not self.fitted_within_tolerance:
            keys = ", ".join(p.key for p in self.free)
            reached = ", ".join(f"{r:+,.3f} % ({m.label()})"
                                for m, r in zip(self.measurements, self.residuals_pct))
            return [f"verdict: no values of {keys} in the search ranges reproduce the "
                    f"measurements within {tol:g} %; the best fit reached residuals of {reached}"]
        if not self.intervals:
            return [f"verdict: every measurement is within {tol:g} %; identifiability not "
                    "assessed"]
        L = [f"identifiability: where every measurement stays within {tol:g} %"]
        L += ["  " + describe_interval(iv, self.values[iv.key], width) for iv in self.intervals]
        if self.determined:
            return L + ["", "verdict: the measurements determine every free key (one interval "
                        "each, inside its search range)"]
        undetermined = [iv.key for iv in self.intervals if not iv.determined]
        L += ["", f"verdict: the measurements do NOT determine {', '.join(undetermined)}: "
              f"{len(self.good)} distinct fit(s) match every measurement within {tol:g} %"]
        return L + ["  " + line for line in fits_table(self.good, self.free)]

    def _proposal_lines(self) -> list[str]:
        """The measurement that would separate the equally good fits, and what each predicts."""
        pr = self.proposal
        assert pr is not None
        gap = ("" if pr.family_gap_pct is None else
               f"; the {len(self.families)} families of fits by at least {pr.family_gap_pct:.1f} %")
        L = ["", f"separating measurement: {pr.measurement.label()}  (the equally good fits "
             f"differ by up to {pr.spread_cycles:,.0f} cycles, {pr.spread_pct:.1f} %{gap})"]
        for v, c in pr.predictions:
            desc = ", ".join(f"{q.key}={value_text(q.key, v[q.key])}" for q in self.free)
            L.append(f"  {c:>14,.0f} cycles with {desc}")
        return L


def describe_interval(iv: Interval, fitted: float, width: int = 0) -> str:
    """One line: where the key may lie (relative to ``fitted``), its unit and verdict."""
    if iv.values is not None:
        vals = iv.values
        span = f"{vals[0]}" if len(vals) == 1 else f"{vals[0]} .. {vals[-1]}"
        where = f"{span} (grid values that fit: {', '.join(map(str, vals))})"
    else:
        parts = [f"{a:.4g} .. {b:.4g}" for a, b in iv.segments]
        rel = f" ({100 * (iv.lo / fitted - 1):+.1f} % .. {100 * (iv.hi / fitted - 1):+.1f} %)"
        where = " and ".join(parts) + (rel if fitted else "")
    flags = []
    if iv.reaches_search_bound:
        flags.append("reaches the search bound")
    if len(iv.segments) > 1:
        flags.append(f"{len(iv.segments)} separate ranges")
    extra = f" [{'; '.join(flags)}]" if flags else ""
    return (f"{iv.key:<{width}}  {where} {unit(iv.key)}: "
            f"{'determined' if iv.determined else 'NOT determined'}{extra}")


def fits_table(points: list[FitPoint], free: list[FreeParam], limit: int = 16) -> list[str]:
    """The equally good fits, one line each (integer keys first)."""
    keys = [p.key for p in sorted(free, key=lambda p: not p.integer)]
    order = sorted(points, key=lambda g: tuple(g.values[k] for k in keys))
    rows = ["  ".join(f"{k:>22}" for k in keys) + f"  {'max_abs_residual_pct':>21}"]
    for g in order[:limit]:
        cells = [f"{int(round(g.values[k])):>22}" if is_int_key(k) else f"{g.values[k]:>22.5g}"
                 for k in keys]
        rows.append("  ".join(cells) + f"  {100 * g.worst:>21.3f}")
    if len(order) > limit:
        rows.append(f"... and {len(order) - limit} more")
    return rows
