"""Calibrations: :func:`calibrate` (the fit, identifiability, proposal), :func:`fit` (the fit
alone), :func:`fit_seed` (the J6 model's two DDR values from the ops' document figures) and
:func:`run_calibration` (``dspsim calibrate`` from its options' texts); the result,
:class:`Calibration`, renders as text and JSON (:func:`unit` and :func:`reading` say what a
fitted value means physically).

``--out`` writes a complete model file of the fitted model (:func:`write_model_file`): every
table and key (the ``base`` chain resolved, ``--set`` and fitted values applied), so the file
loads on its own. Each key keeps its model file's comment; a fitted key says what it was fitted
to, when and how well; an operator table at its defaults is written as comments. The text must
read back to exactly the calibrated model (fitted floats at 6 significant digits) before it
replaces anything, atomically."""

from __future__ import annotations

import datetime as _dt
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.config import (
    OP_SCHEMAS,
    HardwareModel,
    build_model,
    checked_model,
    key_sources,
    load_model,
    model_key,
    read_model_tables,
    resolve_model_path,
)
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.paths import atomic_write_text, writable_file
from dspsim.study.calibrate.measure import (
    SEED_FREE,
    FreeParam,
    Measurement,
    as_free,
    is_int_key,
    parse_options,
    seed_measurements,
    value_text,
)
from dspsim.study.calibrate.problem import (
    FitPoint,
    Interval,
    Problem,
    Progress,
    Proposal,
    best_fit,
    find_families,
    find_intervals,
    propose_measurement,
    spanning_members,
)
from dspsim.text import cell

DEFAULT_TOLERANCE_PCT = 1.0
COMMENT_COLUMN = 29  # where a key's comment starts, as in models/j6.toml
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # not allowed in a TOML comment


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
        elif self.good and self.intervals and not self.determined:
            L += ["", "separating measurement: none found (every candidate run predicts the same "
                  "cycles with each of the equally good fits)"]
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


# ------------------------------------------------------------------ the fit
def check_tolerance(tolerance_pct: float) -> None:
    """Refuse a tolerance that is not a number between 0 and 100 (%)."""
    if not (isinstance(tolerance_pct, (int, float)) and 0 < tolerance_pct < 100):
        raise DspsimInputError(f"tolerance {tolerance_pct!r} %: must be a number between 0 and 100")


def calibrate(model: HardwareModel, measurements: list[Measurement],
              free: list[FreeParam] | list[str] | Mapping[str, tuple[float, float]],
              fidelity: str = "burst", tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
              identify: bool = True, progress: Progress = None,
              on_simulation: Callable[[], None] | None = None) -> Calibration:
    """Fit the free keys to the measurements; with ``identify``, the intervals and verdict.
    ``progress(msg)`` names each stage, ``on_simulation()`` follows every simulation."""
    check_tolerance(tolerance_pct)
    checked_model(model)  # one built or replaced in Python too
    params = as_free(model, free)
    prob = Problem(model, measurements, params, fidelity, progress, on_simulation)
    prob.refuse_inert()
    tol = tolerance_pct / 100.0
    points = prob.search()
    best = best_fit(prob, points, tol)
    good = [p for p in points if p.worst <= tol]
    families = find_families(prob, good)
    intervals, determined, proposal = [], False, None
    if identify:  # each key's interval; if they leave a key open, what would separate the fits
        intervals, edges = find_intervals(prob, good, families, tol)
        determined = bool(intervals) and all(iv.determined for iv in intervals)
        if good and not determined:
            prob.progress("calibrate: looking for the separating measurement")
            members = spanning_members(families, good, edges, prob.free)
            proposal = propose_measurement(prob, members, len(families))
    fitted = model.with_overrides(
        {k: (int(round(v)) if is_int_key(k) else v) for k, v in best.values.items()})
    return Calibration(model=model, fitted=fitted, measurements=list(measurements), free=params,
                       best=best, fidelity=fidelity, tolerance_pct=tolerance_pct, good=good,
                       families=families, intervals=intervals, determined=determined,
                       proposal=proposal, simulations=prob.simulations)


@dataclass
class Fit:
    """The best fit alone: the free keys' values, the residuals, the fitted model."""

    values: dict[str, float]
    residuals_pct: list[float]
    model: HardwareModel


def fit(model: HardwareModel, measurements: list[Measurement],
        free: Mapping[str, tuple[float, float]], fidelity: str = "burst") -> Fit:
    """Best fit of the ``free`` keys (name -> (lo, hi)) to the measurements, no identifiability."""
    c = calibrate(model, measurements, free, fidelity=fidelity, identify=False)
    return Fit(values=dict(c.values), residuals_pct=c.residuals_pct, model=c.fitted)


def fit_seed(model: HardwareModel | None = None, fidelity: str = "burst") -> Fit:
    """The J6 fit: ``ddr.latency_cycles`` and ``ddr.bytes_per_cycle`` to the document figures
    of every op that has them (:func:`~dspsim.study.calibrate.measure.seed_measurements`)."""
    return fit(model or load_model(), seed_measurements(), SEED_FREE, fidelity=fidelity)


def run_calibration(model: HardwareModel, measured: Iterable[str] = (),
                    measured_csv: Iterable[str | Path] = (), free: Iterable[str] = (),
                    fidelity: str = "burst", tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
                    out: str | Path | None = None, progress: Progress = None,
                    on_simulation: Callable[[], None] | None = None) -> Calibration:
    """Parse the options, calibrate, and with ``out`` write the fitted model file (its path
    checked before the fit)."""
    measurements, params = parse_options(model, measured, measured_csv, free)
    if out:  # before the fit, which may take minutes
        writable_file(out, "--out", (".toml",))
    cal = calibrate(model, measurements, params, fidelity=fidelity, tolerance_pct=tolerance_pct,
                    progress=progress, on_simulation=on_simulation)
    if out:
        cal.out_path = str(write_model_file(cal, out))
    return cal


# ------------------------------------------------------------------ --out
def _toml_value(v: Any) -> str:
    """A value as TOML: a bool, an int, a float (round-trip exact) or a basic string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return json.dumps(str(v))  # JSON's escapes are TOML's basic-string escapes


def _line(name: str, value: Any, comment: str) -> str:
    lead = f"{name} = {_toml_value(value)}"
    if not comment:
        return lead
    pad = max(1, COMMENT_COLUMN - len(lead))
    return f"{lead}{' ' * pad}# {_CONTROL.sub(' ', comment)}"


def _fitted_comments(cal: Calibration, day: str) -> dict[str, str]:
    """What each fitted key was fitted to, when, with what, and how well."""
    targets = [m.spec(with_op=True) for m in cal.measurements]  # the op named: read alone
    what = (", ".join(targets) if len(targets) <= 4
            else f"{len(targets)} measurements ({', '.join(targets[:3])}, ...)")
    out = {}
    for p in cal.free:
        with_ = [o.key for o in cal.free if o.key != p.key]
        comment = (f"fitted by `dspsim calibrate` on {day} to {what}"
                   + (f" (with {', '.join(with_)})" if with_ else "")
                   + f", {cal.fidelity} fidelity")
        r = reading(p.key, cal.values[p.key], cal.fitted)
        if r:
            comment += f"; {r}"
        iv = next((iv for iv in cal.intervals if iv.key == p.key), None)
        if not cal.fitted_within_tolerance:
            comment += (f"; NOT within {cal.tolerance_pct:g} % of every measurement (worst "
                        f"{100 * cal.best.worst:.3g} %)")
        elif iv is not None:
            comment += (f"; all measurements within {cal.tolerance_pct:g} % for {iv.lo:.4g} .. "
                        f"{iv.hi:.4g}" + ("" if iv.determined else " (NOT determined)"))
        out[p.key] = comment
    return out


def _sources(model: HardwareModel) -> tuple[dict[str, str], set[str]]:
    """The comment each key has in the input model's files, and the tables they give (none for
    a model not from a file)."""
    try:
        if not model.source:
            return {}, set()
        return key_sources(model.source), set(read_model_tables(resolve_model_path(model.source)))
    except DspsimInputError:
        return {}, set()


def calibrated_model(cal: Calibration) -> HardwareModel:
    """The model ``--out`` writes: the fitted model, fitted floats at 6 significant digits."""
    rounded = {p.key: cal.fitted.get(p.key) if is_int_key(p.key)
               else float(f"{float(cal.fitted.get(p.key)):.6g}") for p in cal.free}
    return cal.fitted.with_overrides(rounded) if rounded else cal.fitted


def verdict_comment(cal: Calibration) -> str:
    """The file's verdict line: whether the fit reproduces every measurement within the
    tolerance (a file is written either way; a missed fit says so here first)."""
    worst = f"worst {100 * cal.best.worst:.3g} %"
    if cal.fitted_within_tolerance:
        return (f"# Verdict: the fit reproduces every measurement within "
                f"{cal.tolerance_pct:g} % ({worst}).")
    return (f"# Verdict: the fit did NOT reproduce every measurement within {cal.tolerance_pct:g} "
            f"% ({worst}): the values are the best reached, not a calibration; check the "
            "measurements, the free keys and their ranges before using this file.")


def model_file_text(cal: Calibration, out: str | Path, date: _dt.date | None = None) -> str:
    """The text of the complete model file of ``cal``'s calibrated model."""
    day = (date or _dt.date.today()).isoformat()
    model = calibrated_model(cal)
    comments, given = _sources(cal.model)
    given |= {k.partition(".")[0] for k, _ in model.overrides}  # --set and fitted keys' tables
    for k, _ in cal.model.overrides:
        comments[k] = f"set with --set on {day}"
    comments.update(_fitted_comments(cal, day))
    keys = ", ".join(p.key for p in cal.free) or "no key"
    source = _CONTROL.sub(" ", cal.model.source or "the calibration's model")
    lines = [
        f"# Written by `dspsim calibrate --out` on {day}: {source} with {keys} fitted.",
        verdict_comment(cal),
        "# Every table and key is written out, so that this file loads on its own (no base).",
        f"# The model is named after this file ({_CONTROL.sub(' ', Path(out).stem)}); a [model] "
        "table with name = \"...\" names it otherwise.",
        "# Labels as in models/j6.toml: fact / derived / inferred / guess, or fitted (to what).",
    ]
    for section, values in model.as_dict().items():  # every table the model has, in order
        at_defaults = (section in OP_SCHEMAS and section not in given
                       and values == OP_SCHEMAS[section].defaults())
        hide, default = ("# ", "the op's default") if at_defaults else ("", "")
        lines.append("")
        if at_defaults:
            lines.append(f"# [{section}] at the op's defaults (`dspsim ops`); to change them:")
        lines.append(f"{hide}[{section}]")
        lines += [hide + _line(name, value, comments.get(f"{section}.{name}", default))
                  for name, value in values.items()]
    return "\n".join(lines) + "\n"


def write_model_file(cal: Calibration, path: str | Path, date: _dt.date | None = None) -> Path:
    """Write the complete model file of the calibrated model to ``path``, checked first: its
    text must load (as a model file) to exactly :func:`calibrated_model`; an existing file is
    replaced only then, atomically."""
    out = Path(path)
    text = model_file_text(cal, out, date)
    intended = calibrated_model(cal)
    try:
        written = build_model(tomllib.loads(text), str(out))
    except (tomllib.TOMLDecodeError, DspsimInputError) as e:
        raise DspsimInputError(f"--out {out}: the model file would not load ({e}); nothing "
                               "was written") from None
    for key, want in intended.flat().items():
        got = written.get(key)
        if got != want or type(got) is not type(want):
            raise DspsimInputError(f"--out {out}: {key} would read back as {got!r}, not "
                                   f"{want!r}; nothing was written")
    atomic_write_text(out, text, "--out")  # an earlier file survives a failed write
    return out
