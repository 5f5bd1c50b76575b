"""Calibrations: :func:`calibrate` (the fit, identifiability, proposal), :func:`fit` (the fit
alone), :func:`fit_seed` (the J6 model's two DDR values from the ops' document figures) and
:func:`run_calibration` (``dspsim calibrate`` from its options' texts).

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
    key_sources,
    load_model,
    read_model_tables,
    resolve_model_path,
)
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write_text, writable_file
from dspsim.study.calibrate.identify import (
    Interval,
    Proposal,
    find_families,
    find_intervals,
    propose_measurement,
    spanning_members,
)
from dspsim.study.calibrate.measure import (
    SEED_FREE,
    FreeParam,
    Measurement,
    as_free,
    is_int_key,
    parse_options,
    seed_measurements,
)
from dspsim.study.calibrate.problem import FitPoint, Problem, Progress, best_fit
from dspsim.study.calibrate.report import Calibration, reading

DEFAULT_TOLERANCE_PCT = 1.0
COMMENT_COLUMN = 29  # where a key's comment starts, as in models/j6.toml
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # not allowed in a TOML comment


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
    params = as_free(model, free)
    prob = Problem(model, measurements, params, fidelity, progress, on_simulation)
    prob.refuse_inert()
    tol = tolerance_pct / 100.0
    points = prob.search()
    best = best_fit(prob, points, tol)
    good = [p for p in points if p.worst <= tol]
    families = find_families(prob, good)
    intervals, determined, proposal = (_identify(prob, good, families, tol) if identify
                                       else ([], False, None))
    fitted = model.with_overrides(
        {k: (int(round(v)) if is_int_key(k) else v) for k, v in best.values.items()})
    return Calibration(model=model, fitted=fitted, measurements=list(measurements), free=params,
                       best=best, fidelity=fidelity, tolerance_pct=tolerance_pct, good=good,
                       families=families, intervals=intervals, determined=determined,
                       proposal=proposal, simulations=prob.simulations)


def _identify(prob: Problem, good: list[FitPoint], families: list[FitPoint], tol: float
              ) -> tuple[list[Interval], bool, Proposal | None]:
    """Each free key's interval, whether they determine every key, and (when they do not) the
    measurement that would separate the good fits."""
    intervals, edges = find_intervals(prob, good, families, tol)
    determined = bool(intervals) and all(iv.determined for iv in intervals)
    proposal = None
    if good and not determined:
        prob.progress("calibrate: looking for the separating measurement")
        members = spanning_members(families, good, edges, prob.free)
        proposal = propose_measurement(prob, members, len(families))
    return intervals, determined, proposal


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
        lines.append("")
        if at_defaults:
            lines.append(f"# [{section}] at the op's defaults (`dspsim ops`); to change them:")
        lines.append(("# " if at_defaults else "") + f"[{section}]")
        for name, value in values.items():
            key = f"{section}.{name}"
            text = _line(name, value, comments.get(key, "the op's default" if at_defaults else ""))
            lines.append(("# " if at_defaults else "") + text)
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
