"""Calibrations: :func:`calibrate` (the fit, identifiability, proposal), :func:`fit` (the fit
alone) and :func:`fit_seed` (the J6 model's two DDR values from the ops' document figures)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dspsim.config import HardwareModel, load_model
from dspsim.errors import DspsimInputError
from dspsim.study.calibrate.identify import (
    Interval,
    Proposal,
    find_families,
    find_intervals,
    propose_measurement,
    spanning_members,
)
from dspsim.study.calibrate.measure import Measurement, is_int_key, seed_measurements
from dspsim.study.calibrate.params import SEED_FREE, FreeParam, as_free
from dspsim.study.calibrate.problem import FitPoint, Problem, Progress, best_fit
from dspsim.study.calibrate.report import Calibration

DEFAULT_TOLERANCE_PCT = 1.0


def check_tolerance(tolerance_pct: float) -> None:
    """Refuse a tolerance that is not a number between 0 and 100 (%)."""
    if not (isinstance(tolerance_pct, (int, float)) and 0 < tolerance_pct < 100):
        raise DspsimInputError(f"tolerance {tolerance_pct!r} %: must be a number between 0 and 100")


def calibrate(
    model: HardwareModel,
    measurements: list[Measurement],
    free: list[FreeParam] | list[str] | Mapping[str, tuple[float, float]],
    fidelity: str = "burst",
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    identify: bool = True,
    progress: Progress = None,
    on_simulation: Callable[[], None] | None = None,
) -> Calibration:
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
