"""The readings of the measurements: the explored fits grouped into families by what binds.

Fits with the same binding resource on every measurement
(:mod:`~dspsim.study.calibrate.explore`) are one family, one physical reading of the figures.
A family's *representative* is its fit nearest the model's own values (squared log ratios): the
reading that changes the model least (:func:`nearer` moves one found on anchor (b)'s coarse
walk toward the model while it stays in the family). The representatives are re-simulated at
burst fidelity, and the measurement that tells the families apart is proposed; the op keys
explored (a tile size) stay out of the free keys so the candidates can set them, and a
candidate's settings win over a fit's values (another TILE_SIZE is another firmware build).
Each family's prediction there is given for its representative and over its spanning fits."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dspsim.config import HardwareModel
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.ops import get_op
from dspsim.platform import check_fidelity
from dspsim.run import simulate
from dspsim.schema import OP_SCHEMAS
from dspsim.study.calibrate.explore import (
    FIT_NFEV,
    GRID_FACTOR,
    RESOURCES,
    Binding,
    Search,
    Space,
    classify,
    explore_space,
    model_at,
    physical_reading,
    reading_name,
    reading_of,
    search_grid,
)
from dspsim.study.calibrate.fitting import DEFAULT_TOLERANCE_PCT, check_tolerance
from dspsim.study.calibrate.measure import (
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
    Problem,
    Progress,
    Proposal,
    candidate_measurements,
    largest_shapes,
    propose_measurement,
    run_key,
    spanning_members,
)
from dspsim.text import cell


@dataclass
class Family:
    """One reading: the fits that agree on what binds every measurement."""

    reading: tuple[str, ...]  # each measurement's binding resource
    name: str
    members: list[FitPoint]
    representative: FitPoint
    bindings: tuple[Binding, ...]  # the representative's
    physical: list[str]
    final_residuals: list[float] = field(default_factory=list)  # the representative, burst
    prediction: float | None = None  # on the separating measurement, the representative
    prediction_range: tuple[float, float] | None = None  # over the spanning fits

    def ranges(self) -> dict[str, tuple[float, float]]:
        return {k: (min(f.values[k] for f in self.members), max(f.values[k] for f in self.members))
                for k in self.representative.values}


def distance(model: HardwareModel, values: Mapping[str, float]) -> float:
    """Squared log distance of ``values`` from the model's own (keys whose value is > 0)."""
    own = {k: float(model.get(k)) for k in values}
    return sum((math.log(v / own[k]) ** 2 for k, v in values.items() if own[k] > 0 and v > 0),
               0.0)


def group(model: HardwareModel, measurements: Sequence[Measurement], fits: Sequence[FitPoint]
          ) -> list[Family]:
    """The families of ``fits``, the one nearest the model first."""
    labels = [m.label() for m in measurements]
    by: dict[tuple[str, ...], list[tuple[FitPoint, tuple[Binding, ...]]]] = {}
    for f in fits:
        b = classify(model, f.values, measurements)
        by.setdefault(reading_of(b), []).append((f, b))
    out = []
    for reading, pairs in by.items():
        rep, bindings = min(pairs, key=lambda fb: distance(model, fb[0].values))
        out.append(Family(reading, reading_name(reading, labels), [f for f, _ in pairs], rep,
                          bindings, physical_reading(model, rep.values, bindings)))
    return sorted(out, key=lambda fam: distance(model, fam.representative.values))


NEARER_STEPS = 6


def nearer(model: HardwareModel, measurements: Sequence[Measurement], space: Space, fam: Family,
           tol: float, fidelity: str, steps: int = NEARER_STEPS) -> int:
    """Move the family's representative toward the model: when it was found with the walked
    key pinned on its coarse grid (anchor (b)), that key is bisected (in log space, ``steps``
    times) between its grid value and the model's, the other continuous keys refitted, as far
    as the fit stays within the tolerance and in the family. Returns the simulations."""
    key, rep = space.pin_grid_key, fam.representative
    if key is None or not any(math.isclose(rep.values[key], a[key], rel_tol=1e-9)
                              for a in space.anchors[1:] if key in a):
        return 0
    target = float(model.get(key))
    if target <= 0 or math.isclose(rep.values[key], target, rel_tol=1e-3):
        return 0
    point = {k: rep.values[k] for k in space.grid}
    base = model.with_overrides(point)
    fitted = [p for p in space.cont if p.key != key]
    good, bad = math.log(rep.values[key]), math.log(target)
    best, sims = rep, 0
    for _ in range(steps):
        mid = 0.5 * (good + bad)
        prob = Problem(base.with_overrides({key: math.exp(mid)}), list(measurements), fitted,
                       fidelity)
        pt = prob.fit_continuous({}, {p.key: best.values[p.key] for p in fitted},
                                 max_nfev=FIT_NFEV)
        sims += prob.simulations
        vals = {**point, key: math.exp(mid), **pt.values}
        if pt.worst <= tol and reading_of(classify(model, vals, measurements)) == fam.reading:
            good, best = mid, FitPoint(vals, pt.residuals)
        else:
            bad = mid
    if best is not rep:  # its bindings and physical reading again
        fam.members.append(best)
        fam.representative = best
        fam.bindings = classify(model, best.values, measurements)
        fam.physical = physical_reading(model, best.values, fam.bindings)
    return sims


def explore_candidates(model: HardwareModel, space: Space, measurements: Sequence[Measurement],
                       free_keys: Sequence[str]) -> list[Measurement]:
    """The measured ops' candidate runs (:func:`candidate_measurements`, ``free_keys`` free),
    and for every op key on the grid, the op's candidates at one grid step below its smallest
    value (e.g. a tile a quarter of the smallest explored: where a per-descriptor cost shows
    against a per-byte one)."""
    cands = candidate_measurements(model, free_keys, list(measurements))
    longest = largest_shapes(measurements)
    seen = {run_key(m) for m in [*measurements, *cands]}  # measured or proposed already
    for key, values in space.grid.items():
        op_name = key.partition(".")[0]
        if op_name not in OP_SCHEMAS or op_name not in longest:
            continue
        below = int(min(values) // GRID_FACTOR)
        try:
            at = model.with_overrides({key: below})
            runs = get_op(op_name).calibration_candidates(at, [*free_keys, key], longest[op_name])
        except (ConfigError, DspsimInputError):
            continue
        for variant, shape, settings in runs:
            c = Measurement(variant, math.nan, tuple(shape), {**settings, key: below}, op_name)
            if run_key(c) not in seen:
                seen.add(run_key(c))
                cands.append(c)
    return cands


class _SettingsWin(Problem):
    """A problem whose measurements' settings win over the fitted values (candidates)."""

    def model_with(self, values: dict[str, float], m: Measurement) -> HardwareModel:
        return model_at(self.model, values, m)


def _cycles(model: HardwareModel, values: Mapping[str, float], m: Measurement,
            fidelity: str) -> float:
    r = simulate(model_at(model, values, m), m.op, m.variant, shape=m.shape, data=False,
                 fidelity=fidelity)
    return float(r.cycles)


@dataclass
class Exploration:
    """An exploration: the search, its families and the measurement that separates them."""

    model: HardwareModel
    measurements: list[Measurement]
    search: Search
    families: list[Family]
    proposal: Proposal | None
    tolerance_pct: float
    final_fidelity: str
    simulations: int
    wall_s: float

    # ------------------------------------------------------------ rendering
    def to_json(self) -> dict[str, Any]:
        sp, prop = self.search.space, self.proposal
        return {
            "model": self.model.source, "tolerance_pct": self.tolerance_pct,
            "screen_fidelity": self.search.fidelity, "final_fidelity": self.final_fidelity,
            "measurements": [{"spec": m.spec(with_op=True), **m.run_fields(),
                              "measured_cycles": m.cycles} for m in self.measurements],
            "grid": {k: list(v) for k, v in sp.grid.items()},
            "fitted": {p.key: {"lo": p.lo, "hi": p.hi} for p in sp.cont},
            "anchors": [dict(a) for a in sp.anchors],
            "grid_points": sp.size,
            "fits_within_tolerance": len(self.search.fits),
            "families": [_family_json(f) for f in self.families],
            "separating_measurement": None if prop is None else {
                "spec": prop.measurement.label(with_op=True), **prop.measurement.run_fields(),
                "family_gap_pct": prop.family_gap_pct, "spread_pct": prop.spread_pct,
                "families_disjoint": ranges_disjoint(self.families),
            },
            "simulations": self.simulations,
            "wall_s": self.wall_s,
        }

    def text(self) -> str:
        sp = self.search.space
        ops = ", ".join(dict.fromkeys(m.op for m in self.measurements))
        grid = "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in sp.grid.items())
        L = [f"explored {ops} on {cell(self.model.name)} ({cell(self.model.source, 200)}): "
             f"{len(self.measurements)} measurement(s), {self.search.fidelity} fidelity for "
             f"the screen, {self.final_fidelity} for the finalists",
             *(f"  {m.label()}: {m.cycles:,.0f} cycles" for m in self.measurements),
             f"grid ({sp.size} points): {grid}",
             "fitted at each point: " + "; ".join(f"{p.key} {p.lo:g} .. {p.hi:g}"
                                                  for p in sp.cont)]
        if sp.pin_grid_key or any(sp.anchors):
            first = ", ".join(f"{k} = {v:g} (the model's)" for k, v in sp.anchors[0].items())
            walk = [a[sp.pin_grid_key] for a in sp.anchors[1:]] if sp.pin_grid_key else []
            text = f"anchors: {first}" if first else "anchors: none pinned"
            if walk:
                text += f"; {sp.pin_grid_key} at {', '.join(f'{v:g}' for v in walk)}"
            L.append(text)
        L.append(f"{len(self.search.fits)} fits reproduce every measurement within "
                 f"{self.tolerance_pct:g} %: {len(self.families)} reading(s) "
                 f"({self.simulations:,} simulations, {self.wall_s:.0f} s)")
        for i, f in enumerate(self.families, start=1):
            L += self._reading_lines(i, f)
        if self.proposal is not None:
            L += self._proposal_lines()
        elif len(self.families) >= 2:
            L += ["", "separating measurement: none found (every candidate run predicts the same "
                  "cycles with each reading)"]
        return "\n".join(L)

    def _reading_lines(self, i: int, f: Family) -> list[str]:
        """Reading ``i``: what binds each measurement, its physical reading, its fit nearest
        the model and how far its fits spread."""
        L = ["", f"reading {i}: {f.name} ({len(f.members)} fits)", "  binding: " + "; ".join(
            f"{b.measurement}: {RESOURCES[b.resource]} ({100 * b.share:.0f} % of its cycles)"
            for b in f.bindings), *(f"  physically: {p}" for p in f.physical),
            "  nearest the model: " + ", ".join(
                f"{k}={value_text(k, v, 5)}" for k, v in f.representative.values.items())]
        if f.final_residuals:
            L.append(f"  at {self.final_fidelity} fidelity: residuals " + ", ".join(
                f"{r:+.3f} %" for r in f.final_residuals))
        spans = [f"{k} {value_text(k, lo)} .. {value_text(k, hi)}"
                 for k, (lo, hi) in f.ranges().items()
                 if not math.isclose(lo, hi, rel_tol=1e-3)]
        if spans:
            L.append("  across the family: " + "; ".join(spans))
        return L

    def _proposal_lines(self) -> list[str]:
        """The separating measurement and what each reading predicts of it."""
        pr = self.proposal
        assert pr is not None
        gap = "" if pr.family_gap_pct is None else (
            f": the readings differ by at least {pr.family_gap_pct:.1f} %")
        L = ["", f"separating measurement: {pr.measurement.label()}{gap}"]
        for i, f in enumerate(self.families, start=1):
            if f.prediction is not None:
                rng = ("" if f.prediction_range is None
                       else " (its fits: {:,.0f} .. {:,.0f})".format(*f.prediction_range))
                L.append(f"  reading {i} ({f.name}): {f.prediction:,.0f} cycles{rng}")
        L.append("  the readings' spanning fits " + (
            "do not overlap there" if ranges_disjoint(self.families) else
            "overlap there: it tells the representatives apart, not every fit"))
        return L


def _family_json(f: Family) -> dict[str, Any]:
    return {
        "reading": list(f.reading), "name": f.name, "fits": len(f.members),
        "bindings": [b.to_json() for b in f.bindings], "physical_reading": f.physical,
        "representative": {k: (int(round(v)) if is_int_key(k) else v)
                           for k, v in f.representative.values.items()},
        "final_residuals_pct": f.final_residuals,
        "ranges": {k: [lo, hi] for k, (lo, hi) in f.ranges().items()},
        "predicted_cycles": None if f.prediction is None else round(f.prediction),
        "predicted_range_cycles": None if f.prediction_range is None
        else [round(x) for x in f.prediction_range],
    }


def ranges_disjoint(families: Sequence[Family]) -> bool:
    """Whether the families' prediction ranges on the separating measurement do not overlap
    (every fit kept, not only the representatives, is told apart)."""
    spans = sorted(f.prediction_range for f in families if f.prediction_range is not None)
    return len(spans) == len(families) and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def find_readings(model: HardwareModel, measurements: Sequence[Measurement], space: Space,
                  tolerance_pct: float, fidelity: str = "tile", final_fidelity: str = "burst",
                  jobs: int | None = None, progress: Progress = None) -> Exploration:
    """Search the grid, group the fits into readings, check the representatives at
    ``final_fidelity`` and propose the measurement that tells the readings apart."""
    say = progress or (lambda _msg: None)
    start = time.perf_counter()
    measurements = list(measurements)
    search = search_grid(model, measurements, space, tolerance_pct, fidelity, jobs, progress)
    families = group(model, measurements, search.fits)
    sims = search.simulations
    tol = tolerance_pct / 100.0
    for fam in families:
        say(f"explore: the fit of reading '{fam.name}' nearest the model")
        sims += nearer(model, measurements, space, fam, tol, fidelity)
    families.sort(key=lambda fam: distance(model, fam.representative.values))
    for fam in families:  # the finalists: the representatives at burst fidelity
        say(f"explore: checking reading '{fam.name}' at {final_fidelity} fidelity")
        res = [_cycles(model, fam.representative.values, m, final_fidelity) / m.cycles - 1
               for m in measurements]
        sims += len(measurements)
        fam.final_residuals = [100.0 * r for r in res]
        if max(abs(r) for r in res) > tol:  # not expected: tile equals burst at these sizes
            fam.name += f" (NOT within {tolerance_pct:g} % at {final_fidelity} fidelity)"
    proposal = None
    if len(families) >= 2:
        say("explore: looking for the measurement that separates the readings")
        proposal, n = _separate(model, measurements, space, families, fidelity, final_fidelity)
        sims += n
    return Exploration(model, measurements, search, families, proposal, tolerance_pct,
                       final_fidelity, sims, time.perf_counter() - start)


def _separate(model: HardwareModel, measurements: list[Measurement], space: Space,
              families: list[Family], fidelity: str, final_fidelity: str) -> tuple[Any, int]:
    """The measurement that tells the readings apart, with each reading's prediction of it
    (and the range its spanning fits predict), or None; the simulations that took."""
    grid = [FreeParam(k, min(v), max(v), True) for k, v in space.grid.items()]
    hw = [p for p in grid if p.key.partition(".")[0] not in OP_SCHEMAS]
    prob = _SettingsWin(model, measurements, [*space.cont, *hw], fidelity)
    cands = explore_candidates(model, space, measurements, [p.key for p in prob.free])
    proposal = propose_measurement(prob, [f.representative for f in families], len(families),
                                   cands)
    sims = prob.simulations
    if proposal is not None:
        cand = proposal.measurement
        for fam in families:
            fam.prediction = _cycles(model, fam.representative.values, cand, final_fidelity)
            span = spanning_members([fam.representative], fam.members, [], [*space.cont, *grid])
            preds = [_cycles(model, g.values, cand, fidelity) for g in span]
            sims += 1 + len(span)
            fam.prediction_range = (float(np.min(preds)), float(np.max(preds)))
    return proposal, sims


def explore(model: HardwareModel, measurements: Sequence[Measurement] | None = None,
            free: Sequence[str | FreeParam] = (), tolerance_pct: float = 1.0,
            jobs: int | None = None, grid: Mapping[str, Sequence[int]] | None = None,
            fidelity: str = "tile", final_fidelity: str = "burst", progress: Progress = None
            ) -> Exploration:
    """Every reading of ``measurements`` (default: the documents' figures) on ``model``:
    :func:`~dspsim.study.calibrate.explore.explore_space` (``free`` adds keys, ``grid``
    replaces a grid key's values), then :func:`find_readings`."""
    measurements = list(measurements) if measurements else seed_measurements(model)
    if not measurements:
        raise DspsimInputError(
            f"calibrate --explore: no measurements given, and no document figures were "
            f"measured on this model's platform ({cell(model.name)}); allowed: --measured "
            "SPEC=CYCLES or --measured-csv FILE (dspsim calibrate --help)")
    space = explore_space(model, measurements, free, grid)
    if free:  # the keys given: each must change some measurement (the structural ones do)
        Problem(model, measurements, as_free(model, free), fidelity).refuse_inert()
    return find_readings(model, measurements, space, tolerance_pct, fidelity, final_fidelity,
                         jobs, progress)


def run_exploration(model: HardwareModel, measured: Iterable[str] = (),
                    measured_csv: Iterable[str | Path] = (), free: Iterable[str] = (),
                    tolerance_pct: float = DEFAULT_TOLERANCE_PCT, final_fidelity: str = "burst",
                    jobs: int | None = None, progress: Progress = None) -> Exploration:
    """``--explore``: parse the options (no measurement: the documents' figures), then
    :func:`explore`."""
    check_tolerance(tolerance_pct)
    check_fidelity(final_fidelity)
    measurements, params = parse_options(model, measured, measured_csv, free)
    return explore(model, measurements or None, params, tolerance_pct, jobs=jobs,
                   final_fidelity=final_fidelity, progress=progress)
