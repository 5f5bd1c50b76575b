"""Identifiability: how well the measurements pin every free key, and what to measure next.

A key's interval is where some choice of the other free keys keeps **every** measurement within
the tolerance (profiled: the key pinned stepping away from the fit, the others refitted, the
edge bisected); it is *determined* when that is one interval strictly inside its search range.
Otherwise the equally good fits are simulated on the candidate runs each measured op proposes
(:meth:`~dspsim.ops.base.Op.calibration_candidates`), and the one they differ most on is
proposed."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from dspsim.config import HardwareModel
from dspsim.errors import ConfigError
from dspsim.ops import get_op
from dspsim.run import simulate
from dspsim.study.calibrate.measure import DEFAULT_OP, FreeParam, Measurement, allowed_range
from dspsim.study.calibrate.problem import FitPoint, Problem


@dataclass
class Interval:
    """Where a free key may lie with every measurement within the tolerance."""

    key: str
    lo: float
    hi: float
    segments: list[tuple[float, float]]
    values: list[float] | None  # integer keys: the grid values that fit
    reaches_search_bound: bool
    determined: bool


@dataclass
class Proposal:
    """The measurement on which the equally good fits differ most."""

    measurement: Measurement
    predictions: list[tuple[dict[str, float], float]]  # (fit values, predicted cycles)
    spread_cycles: float
    spread_pct: float
    family_gap_pct: float | None = None  # smallest difference between two families' fits


def _merge(segments: list[tuple[float, float]], rel: float = 1e-3) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(segments):
        if out and a <= out[-1][1] * (1 + rel) + 1e-12:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def find_families(prob: Problem, good: list[FitPoint], limit: int = 4) -> list[FitPoint]:
    """One representative (the best) per family of good fits: fits whose continuous values
    agree within 1 % are one family, whatever their integer keys."""
    families: list[FitPoint] = []
    for g in sorted(good, key=lambda g: g.cost):
        if not any(all(abs(g.values[p.key] - f.values[p.key])
                       <= 0.01 * max(abs(f.values[p.key]), 1e-12) for p in prob.cont)
                   for f in families):
            families.append(g)
    return families[:limit]


def find_intervals(prob: Problem, good: list[FitPoint], families: list[FitPoint], tol: float
                   ) -> tuple[list[Interval], list[FitPoint]]:
    """Identifiability interval of every free key (profiled once per family); also the fits
    at the intervals' edges."""
    if not good:
        return [], []
    segments: dict[str, list[tuple[float, float]]] = {p.key: [] for p in prob.cont}
    hits: dict[str, bool] = {p.key: False for p in prob.free}
    edge_points: list[FitPoint] = []
    for fam in families:
        for p in prob.cont:
            prob.progress(f"calibrate: profiling {p.key}")
            (lo, hi), pts, hit = prob.profile(fam, p, tol)
            segments[p.key].append((lo, hi))
            edge_points.extend(pts)
            hits[p.key] |= any(hit)
    for g in good:  # fits not profiled still belong to the set
        for p in prob.cont:
            v = g.values[p.key]
            segments[p.key].append((v, v))
    return [_interval(prob, p, good, segments.get(p.key), hits[p.key]) for p in prob.free
            ], edge_points


def _interval(prob: Problem, p: FreeParam, good: list[FitPoint],
              segments: list[tuple[float, float]] | None, hit: bool) -> Interval:
    """A key's interval. An integer key's: its values among the good fits, one segment when
    they are neighbours on its grid. A continuous key's: its profiles' ``segments`` merged;
    ``hit``: a profile stopped at the search range (not at a misfit: it may go on beyond)."""
    lo_allowed, hi_allowed = allowed_range(p.key)
    vals = None
    if p.integer:
        vals = sorted({int(round(g.values[p.key])) for g in good})
        grid = sorted({int(round(c[p.key])) for c in prob.combos() if p.key in c})
        pos = [grid.index(v) for v in vals]
        segs = ([(float(vals[0]), float(vals[-1]))] if pos == list(range(pos[0], pos[-1] + 1))
                else [(float(v), float(v)) for v in vals])
    else:
        segs = _merge(segments or [])
    lo, hi = segs[0][0], segs[-1][1]
    at_lo, at_hi = (math.isclose(lo, p.lo, rel_tol=1e-9), math.isclose(hi, p.hi, rel_tol=1e-9))
    at_search = ((p.integer or hit) and ((at_lo and p.lo > lo_allowed)
                                         or (at_hi and p.hi < hi_allowed)))
    if p.integer:
        return Interval(p.key, vals[0], vals[-1], segs, vals, at_search,
                        len(vals) == 1 and not at_search)
    # every value searched fits (unconstrained): the measurements do not depend on the key
    determined = len(segs) == 1 and not at_search and not (at_lo and at_hi)
    return Interval(p.key, lo, hi, segs, None, at_search, determined)


def largest_shapes(measured: Iterable[Measurement]) -> dict[str, tuple[int, ...]]:
    """Each measured op's largest measured shape, the ops in the order they first appear."""
    longest: dict[str, tuple[int, ...]] = {}
    for m in measured:
        if m.op not in longest or m.n > math.prod(longest[m.op]):
            longest[m.op] = m.shape
    return longest


def run_key(m: Measurement) -> tuple:
    """What tells two runs apart: op, variant, shape and settings."""
    return (m.op, m.variant, m.shape, tuple(sorted(m.settings.items())))


def candidate_measurements(model: HardwareModel, free_keys: Iterable[str],
                           measured: list[Measurement]) -> list[Measurement]:
    """Runs a board can make, as each measured op proposes them (given the free keys and the
    op's largest measured shape), less those already measured; with no measurement, the
    default op's at its default shape."""
    free_keys = list(free_keys)
    longest = largest_shapes(measured) or {DEFAULT_OP: tuple(get_op(DEFAULT_OP).default_shape)}
    out = [Measurement(variant, math.nan, tuple(cand_shape), dict(settings), name)
           for name, shape in longest.items()
           for variant, cand_shape, settings
           in get_op(name).calibration_candidates(model, free_keys, shape)]
    seen = {run_key(m) for m in measured}
    return [m for m in out if run_key(m) not in seen]


def propose_measurement(prob: Problem, members: list[FitPoint], n_families: int,
                        candidates: list[Measurement] | None = None) -> Proposal | None:
    """The candidate on which the fits differ most: first the one whose smallest difference
    between two families is largest (it tells every family apart), then the widest spread.
    ``candidates`` default to :func:`candidate_measurements` for the problem's free keys."""
    if len(members) < 2:
        return None
    cands = candidates
    if cands is None:
        cands = candidate_measurements(prob.model, [p.key for p in prob.free], prob.measurements)
    best: Proposal | None = None
    best_score = (-math.inf, -math.inf)
    for cand in cands:
        preds = []
        for mem in members:
            try:
                model = prob.model_with(mem.values, cand)
            except ConfigError:
                preds = []
                break
            r = simulate(model, cand.op, cand.variant, shape=cand.shape, data=False,
                         fidelity=prob.fidelity)
            preds.append(float(r.cycles))
            prob.simulations += 1
        if not preds:
            continue
        fam = preds[:n_families]
        gap = (min(100 * abs(a / b - 1) for a, b in itertools.combinations(fam, 2))
               if len(fam) >= 2 else None)
        lo, hi = min(preds), max(preds)
        spread_pct = 100 * (hi / lo - 1)
        score = (gap if gap is not None else 0.0, spread_pct)
        if score > best_score:
            best_score = score
            best = Proposal(cand, [(m.values, c) for m, c in zip(members, preds)], hi - lo,
                            spread_pct, gap)
    return best


def spanning_members(families: list[FitPoint], good: list[FitPoint], edges: list[FitPoint],
                     free: list[FreeParam], limit: int = 8) -> list[FitPoint]:
    """Fits spanning the equally good set: one per family first, then the extremes of every
    key (the fits at the edges of the identifiability intervals)."""
    pool = good + edges
    chosen = list(families)
    for p in free:
        for pick in (min, max):
            chosen.append(pick(pool, key=lambda g: g.values[p.key]))
    distinct: list[FitPoint] = []
    for c in chosen:
        if not any(all(math.isclose(c.values[k], d.values[k], rel_tol=1e-4) for k in c.values)
                   for d in distinct):
            distinct.append(c)
    return distinct[: max(limit, len(families))]
