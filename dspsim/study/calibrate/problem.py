"""The fit: least squares (``scipy.optimize.least_squares``, in log space where the range is
positive) on the relative error of every measurement; integer keys on a grid, the continuous
ones fitted at each grid value. Least squares is local, so every fit starts from the model's
values *and* from the minima of the closed-form estimate (each op's ``estimate_cycles``): that
finds a second, distant family of fits when there is one. :meth:`Problem.profile` walks one key
away from a fit to the edges of the tolerance (the identifiability intervals).

**Identifiability**: a key's interval is where some choice of the other free keys keeps
**every** measurement within the tolerance (profiled: the key pinned stepping away from the
fit, the others refitted, the edge bisected); it is *determined* when that is one interval
strictly inside its search range. Otherwise the equally good fits are simulated on the
candidate runs each measured op proposes (:meth:`~dspsim.ops.base.Op.calibration_candidates`),
and the one they differ most on is proposed."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from dspsim.config import HardwareModel
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.ops import get_op
from dspsim.platform import check_fidelity
from dspsim.run import simulate
from dspsim.study.calibrate.measure import (
    DEFAULT_OP,
    MAX_CYCLES,
    FreeParam,
    Measurement,
    allowed_range,
    int_value,
    is_int_key,
)

Progress = Callable[[str], None] | None

# Built models a problem keeps (see Problem.model_with): a fit step's point and its Jacobian's
# neighbours; older ones go first. A model is a few tens of KB.
MODEL_CACHE_SIZE = 256


def built_once(built: dict[tuple, HardwareModel | ConfigError], key: tuple,
               build: Callable[[], HardwareModel]) -> HardwareModel:
    """``built[key]``, built by ``build`` the first time; a ``ConfigError`` it raised is kept
    and raised again."""
    hit = built.get(key)
    if hit is None:
        try:
            hit = build()
        except ConfigError as e:
            hit = e
        built[key] = hit
    if isinstance(hit, ConfigError):
        raise hit.with_traceback(None)
    return hit


@dataclass
class FitPoint:
    """One set of free values and how the simulation matches every measurement with them."""

    values: dict[str, float]
    residuals: np.ndarray  # simulated / measured - 1, per measurement

    @property
    def worst(self) -> float:
        return float(np.max(np.abs(self.residuals))) if len(self.residuals) else 0.0

    @property
    def cost(self) -> float:
        return float(np.sum(self.residuals**2))


class Problem:
    """Measurements, free keys and a cache of simulations (one per calibration, never shared)."""

    def __init__(self, model: HardwareModel, measurements: list[Measurement],
                 free: list[FreeParam], fidelity: str, progress: Progress = None,
                 on_simulation: Callable[[], None] | None = None):
        if not measurements:
            raise DspsimInputError("calibrate: no measurements; give --measured "
                                   "[OP:]VARIANT=CYCLES or --measured-csv FILE")
        if not free:
            raise DspsimInputError("calibrate: nothing to fit; give --free KEY[=LO:HI]")
        check_fidelity(fidelity)
        keys = [p.key for p in free]
        if len(set(keys)) != len(keys):
            raise DspsimInputError(f"--free: a key is given twice ({', '.join(keys)})")
        for m in measurements:  # built in Python: a Measurement checks op, variant and shape
            if not isinstance(m, Measurement) or not isinstance(m.settings, dict):
                raise DspsimInputError(f"calibrate: measurement {m!r:.80}: expected a "
                                       "Measurement, its settings a dict of model keys")
            c, real = m.cycles, int | float | np.integer | np.floating
            if isinstance(c, bool) or not isinstance(c, real) or not 0 < c <= MAX_CYCLES:
                raise DspsimInputError(f"measurement {m.label()!r}: cycles {c!r}: expected a "
                                       "positive number of cycles, at most 2**53")
            clash = set(m.settings) & set(keys)
            if clash:
                raise DspsimInputError(f"measurement {m.label()!r} sets {sorted(clash)[0]}, which "
                                       "is free; a free key cannot also be fixed by a measurement")
            try:
                model.with_overrides(m.settings)
            except ConfigError as e:
                raise DspsimInputError(f"measurement {m.label()!r}: {e}") from None
        self.model = model
        self.measurements = measurements
        self.free = free
        self.cont = [p for p in free if not p.integer]
        self.ints = [p for p in free if p.integer]
        self.fidelity = fidelity
        self.progress = progress or (lambda _msg: None)
        self.on_simulation = on_simulation  # called after each simulation (a progress count)
        self._cache: dict[tuple, float] = {}
        self._models: dict[tuple, HardwareModel | ConfigError] = {}  # see model_with
        self.simulations = 0

    def model_with(self, values: dict[str, float], m: Measurement) -> HardwareModel:
        """The model with ``m``'s settings and ``values`` over it, built once per distinct
        override (every measurement of one fit point shares it, and the closed form and the
        simulation of one point share it): a ``ConfigError`` is kept and raised again."""
        vals = {k: (int_value(k, v) if is_int_key(k) else float(v)) for k, v in values.items()}
        pairs = {**m.settings, **vals}
        try:
            key = tuple((k, type(v), v) for k, v in pairs.items())  # 1 and 1.0 apart
            hit = self._models.get(key)
        except TypeError:  # a setting whose value is not hashable: built every time
            return self.model.with_overrides(pairs)
        if hit is None and len(self._models) >= MODEL_CACHE_SIZE:
            self._models.pop(next(iter(self._models)))  # the oldest goes
        return built_once(self._models, key, lambda: self.model.with_overrides(pairs))

    def simulated(self, values: dict[str, float], index: int, fidelity: str | None = None
                  ) -> float:
        """Cycles of measurement ``index``'s run with ``values`` (at ``fidelity``, default the
        calibration's), simulated once."""
        fidelity = fidelity or self.fidelity
        key = (index, fidelity, *sorted((k, float(f"{v:.12g}")) for k, v in values.items()))
        hit = self._cache.get(key)
        if hit is None:
            m = self.measurements[index]
            try:
                model = self.model_with(values, m)
            except ConfigError:
                hit = math.inf  # outside what the model allows: no fit lives here
            else:
                r = simulate(model, m.op, m.variant, shape=m.shape, data=False, fidelity=fidelity)
                self.simulations += 1
                if self.on_simulation is not None:
                    self.on_simulation()
                hit = float(r.cycles)
            self._cache[key] = hit
        return hit

    def refuse_inert(self) -> None:
        """Refuse a free key that changes no measurement's cycles at either end of its range
        (the other keys at the model's values): nothing the fit finds would say anything of it
        (``core.write_buffer_entries`` on an op whose every store follows a DDR load, say)."""
        for p in self.free:
            ends = [{p.key: v} for v in (p.lo, p.hi)]
            if all(self.simulated({}, i) == self.simulated(e, i)
                   for i in range(len(self.measurements)) for e in ends):
                raise DspsimInputError(
                    f"--free {p.key}: it changes no measurement's cycles between {p.lo:g} and "
                    f"{p.hi:g}, so no fit can tell its value; allowed: a key the measured "
                    "runs depend on")

    def _misfit(self, cycles: list[float]) -> np.ndarray:
        """Cycles / measured - 1 per measurement (10 where the model refuses the values)."""
        return np.array([c / m.cycles - 1.0 if math.isfinite(c) else 10.0
                         for c, m in zip(cycles, self.measurements)])

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        return self._misfit([self.simulated(values, i) for i in range(len(self.measurements))])

    def surrogate_residuals(self, values: dict[str, float]) -> np.ndarray:
        """Residuals of the op's closed-form estimate (cheap: no simulation), where it has one."""
        return self._misfit([self._estimate(values, i) for i in range(len(self.measurements))])

    def _estimate(self, values: dict[str, float], i: int) -> float:
        m = self.measurements[i]
        try:
            b = get_op(m.op).bounds(self.model_with(values, m), m.variant, m.shape)
            est = None if b is None else b.estimate_cycles
        except ConfigError:
            return math.inf
        # no closed-form estimate: a simulation (repeats booked at once, still cheap) stands in
        return self.simulated(values, i, fidelity="tile") if est is None else est

    # ---------------------------------------------------------------- continuous fits
    def fit_continuous(self, ints: dict[str, float], start: dict[str, float],
                       fixed: dict[str, float] | None = None,
                       residual_fn: Callable[[dict[str, float]], np.ndarray] | None = None,
                       max_nfev: int | None = None) -> FitPoint:
        """Least squares over the continuous keys not in ``fixed``, from ``start`` (at most
        ``max_nfev`` evaluations of the residuals besides the Jacobian's; default 60, 200 for
        a ``residual_fn``)."""
        from scipy.optimize import least_squares

        fixed = fixed or {}
        fn = residual_fn or self.residuals
        keys = [p for p in self.cont if p.key not in fixed]
        base = {**ints, **fixed}
        if not keys:
            return FitPoint(dict(base), fn(base))
        lo = np.array([p.to_u(p.lo) for p in keys])
        hi = np.array([p.to_u(p.hi) for p in keys])
        x0 = np.array([p.to_u(min(max(start[p.key], p.lo), p.hi)) for p in keys])
        x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))

        def values_at(x: np.ndarray) -> dict[str, float]:
            return {**base, **{p.key: p.from_u(float(u)) for p, u in zip(keys, x)}}

        sol = least_squares(lambda x: fn(values_at(x)), x0, bounds=(lo, hi), diff_step=1e-3,
                            xtol=1e-7, ftol=1e-9, gtol=1e-9,
                            max_nfev=max_nfev or (60 if residual_fn is None else 200))
        vals = values_at(sol.x)
        return FitPoint(vals, fn(vals))

    def surrogate_seeds(self, ints: dict[str, float], limit: int = 3) -> list[dict[str, float]]:
        """Starting points: minima of the closed-form estimate's misfit over the free range."""
        from scipy.ndimage import minimum_filter

        if not self.cont:
            return []
        per_axis = max(3, int(round(400 ** (1 / len(self.cont)))))
        axes = [np.linspace(p.to_u(p.lo), p.to_u(p.hi), per_axis) for p in self.cont]
        grid = np.empty((per_axis,) * len(self.cont))

        def at(idx: tuple) -> dict[str, float]:
            return {p.key: p.from_u(axes[a][i])
                    for a, (p, i) in enumerate(zip(self.cont, idx))}

        for idx in itertools.product(range(per_axis), repeat=len(self.cont)):
            grid[idx] = np.max(np.abs(self.surrogate_residuals({**ints, **at(idx)})))
        minima = (grid == minimum_filter(grid, size=3, mode="nearest")) & (grid < 0.5)
        order = sorted(zip(grid[minima], np.argwhere(minima)), key=lambda t: t[0])
        seeds: list[dict[str, float]] = []
        for _, idx in order[: 3 * limit]:
            refined = self.fit_continuous(ints, at(idx), residual_fn=self.surrogate_residuals)
            seed = {p.key: refined.values[p.key] for p in self.cont}
            if not any(self._close(seed, s, 0.03) for s in seeds):
                seeds.append(seed)
            if len(seeds) == limit:
                break
        return seeds

    def _close(self, a: dict[str, float], b: dict[str, float], rel: float) -> bool:
        """Whether ``a`` and ``b`` agree within ``rel`` on every free key both give (of the
        values where the range is in log space, else of the range)."""
        return all(abs(a[p.key] - b[p.key])
                   <= rel * (max(abs(a[p.key]), abs(b[p.key]), 1e-12) if p.log
                             else max(p.hi - p.lo, 1e-12))
                   for p in self.free if p.key in a and p.key in b)

    # ---------------------------------------------------------------- integer grid
    def int_grid(self, p: FreeParam, points: int) -> list[int]:
        """Every value of a short range, else about ``points`` of it, the model's value too;
        kept to the values the key takes (its multiples) inside [lo, hi]."""
        lo, hi = int(p.lo), int(p.hi)
        current = int(min(max(self.model.get(p.key), lo), hi))
        if hi - lo + 1 <= points + 2:
            values: Iterable[float] = range(lo, hi + 1)
        else:
            span = np.geomspace(lo, hi, points) if lo >= 1 else np.linspace(lo, hi, points)
            values = (lo, hi, current, *span)
        kept = {v for v in (int_value(p.key, x) for x in values) if p.lo <= v <= p.hi}
        return sorted(kept or {current})

    def combos(self) -> list[dict[str, float]]:
        """Every combination of the integer keys' grids: fewer points a key (10 down to 3)
        until there are at most 48."""
        grids: list[list[int]] = []
        for points in range(10, 2, -1):
            grids = [self.int_grid(p, points) for p in self.ints]
            if math.prod(len(g) for g in grids) <= 48:
                break
        return [dict(zip([p.key for p in self.ints], c)) for c in itertools.product(*grids)]

    def search(self) -> list[FitPoint]:
        """Fit the continuous keys for every integer combination, from several starts."""
        found: list[FitPoint] = []
        model_start = {p.key: float(self.model.get(p.key)) for p in self.cont}
        for ints in self.combos():
            label = ", ".join(f"{k}={v}" for k, v in ints.items()) or "continuous keys"
            self.progress(f"calibrate: fitting with {label}")
            starts = self.surrogate_seeds(ints)
            if not any(self._close({**ints, **model_start}, {**ints, **s}, 0.03) for s in starts):
                starts.append(model_start)
            local: list[FitPoint] = []
            for s in starts or [{}]:
                pt = self.fit_continuous(ints, s)
                if not any(self._close(pt.values, q.values, 0.005) for q in local):
                    local.append(pt)
            found.extend(local)
        return found

    # ---------------------------------------------------------------- profiles
    def profile(self, at: FitPoint, p: FreeParam, tol: float
                ) -> tuple[list[float], list[FitPoint], list[bool]]:
        """Edges of ``p``'s interval around ``at`` with every measurement within ``tol``:
        ([low, high], the fits at both edges, [low edge is the search bound, high ...])."""
        ints = {q.key: at.values[q.key] for q in self.ints}
        u0 = p.to_u(at.values[p.key])
        # a step's unit in the optimiser's coordinate: on a linear range (one from 0), the
        # value's size if it has one (0.5 % of 0 .. 1e6 would step over a value of 9,000), at
        # least 1e-6 of the range (at most ~26 doublings across it)
        width, v = p.hi - p.lo, abs(at.values[p.key])
        scale = 1.0 if p.log else (min(width, max(v, 1e-6 * width)) if v else width)
        edges, points, hit = [], [], []
        for direction in (-1, 1):
            bound_u = p.to_u(p.lo if direction < 0 else p.hi)
            good_u, good, bad_u = u0, at, None
            step = 0.02 * scale
            while True:  # out in doubling steps until a misfit or the search bound
                u = u0 + direction * step
                if (u - bound_u) * direction >= 0:
                    u = bound_u
                pt = self.fit_continuous(ints, good.values, {p.key: p.from_u(u)})
                if pt.worst > tol:
                    bad_u = u
                    break
                good_u, good = u, pt
                if u == bound_u:
                    break
                step *= 2
            if bad_u is not None:
                for _ in range(8):  # the edge bisected
                    if abs(bad_u - good_u) < 5e-3 * scale:
                        break
                    mid = 0.5 * (good_u + bad_u)
                    pt = self.fit_continuous(ints, good.values, {p.key: p.from_u(mid)})
                    if pt.worst <= tol:
                        good_u, good = mid, pt
                    else:
                        bad_u = mid
            edges.append(p.from_u(good_u))
            points.append(good)
            hit.append(bad_u is None)  # stopped at the search bound, not at a misfit
        return edges, points, hit


def best_fit(prob: Problem, points: list[FitPoint], tol: float) -> FitPoint:
    """The least-squares fit among those within the tolerance (if any is); among fits as good
    (0.01 % of the worst measurement), the one nearest the model's own values, so that
    refitting a calibrated model leaves it alone."""
    pool = [p for p in points if p.worst <= tol] or points
    least = min(pool, key=lambda p: p.cost)
    tied = [p for p in pool if p.worst <= least.worst + 1e-4]

    def distance(p: FitPoint) -> float:
        total = 0.0
        for q in prob.free:
            here = float(prob.model.get(q.key))
            if q.log and here > 0:
                total += (math.log(p.values[q.key]) - math.log(here)) ** 2
            else:
                total += ((p.values[q.key] - here) / (q.hi - q.lo)) ** 2
        return total

    return min(tied, key=distance)


# ------------------------------------------------------------------ identifiability
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
    def at(v: float, end: float) -> bool:  # an integer key's grid is exact
        return v == end if p.integer else math.isclose(v, end, rel_tol=1e-9)
    at_lo, at_hi = at(lo, p.lo), at(hi, p.hi)
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
    op's largest measured shape) with the model's settings and with each measurement's (a copy
    measured TCM -> DDR is proposed TCM -> DDR runs too), less those already measured; with no
    measurement, the default op's at its default shape."""
    free_keys = list(free_keys)
    longest = largest_shapes(measured) or {DEFAULT_OP: tuple(get_op(DEFAULT_OP).default_shape)}
    given = {(m.op, repr(sorted(m.settings.items()))): (m.op, m.settings) for m in measured}
    out, seen = [], {run_key(m) for m in measured}
    for name, base in [(name, {}) for name in longest] + list(given.values()):
        for variant, cand_shape, settings in get_op(name).calibration_candidates(
                model.with_overrides(base), free_keys, longest[name]):
            c = Measurement(variant, math.nan, tuple(cand_shape), {**base, **settings}, name)
            if run_key(c) not in seen:
                seen.add(run_key(c))
                out.append(c)
    return out


def propose_measurement(prob: Problem, members: list[FitPoint], n_families: int,
                        candidates: list[Measurement] | None = None) -> Proposal | None:
    """The candidate on which the fits differ most: first the one whose smallest difference
    between two families is largest (it tells every family apart), then the widest spread;
    None when every candidate has every fit predict the same cycles. ``candidates`` default to
    :func:`candidate_measurements` for the problem's free keys."""
    if len(members) < 2:
        return None
    if candidates is None:
        candidates = candidate_measurements(prob.model, [p.key for p in prob.free],
                                            prob.measurements)
    best: Proposal | None = None
    best_score = (-math.inf, -math.inf)
    for cand in candidates:
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
        if not preds or min(preds) == max(preds):
            continue  # every fit predicts the same cycles: the run separates nothing
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
