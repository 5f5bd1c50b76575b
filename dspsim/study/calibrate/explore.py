"""``dspsim calibrate --explore``: every reading of the measurements, not only the nearest fit.

Two figures can be reproduced by physically different hardware (a narrow port, few requests in
flight, an expensive descriptor), so ``explore`` frees the structural keys too: integer keys on
a coarse log grid (neighbours ``GRID_FACTOR`` apart, the model's own value added: the iDMA's
and the host memory's ``max_outstanding``, and each integer op key the measured op's
``search_space`` marks, e.g. a tile size), the continuous ones (:data:`CONTINUOUS_RANGES`)
fitted at every grid point; ``--free`` adds a key or changes a range, and a key a measurement
sets is not explored. With more continuous keys than measurements the fits form a curve,
sampled at two kinds of anchor: (a) the extra keys at the model's values; (b) the next key of
:data:`PIN_ORDER` on a log grid ``WALK_FACTOR`` apart. An anchor whose closed-form lower bound
already exceeds a measurement by more than ``SCREEN`` is skipped; a near miss is refitted with
every key free. The screen runs at tile fidelity (a name for the one engine) in
``jobs`` worker processes; :mod:`~dspsim.study.calibrate.readings` groups the fits by what
binds them.

**What binds a fit** (:func:`classify`): the largest of the op's closed-form lower bounds at
the fitted values (:meth:`~dspsim.ops.base.Op.bounds`): port bandwidth, outstanding requests
(each request holding its slot for its round trip *and* its own transfer), or the core
(descriptor overhead plus compute); docs/readings.md, "How a fit is classified", gives the
rules. A fit's *reading* is the tuple of its measurements' binding resources; fits with the
same reading form a family."""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.config import HardwareModel
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.ops import get_op
from dspsim.study.calibrate.measure import FreeParam, Measurement, int_value, is_int_key, parse_free
from dspsim.study.calibrate.problem import FitPoint, Problem, Progress, built_once
from dspsim.workers import MAX_JOBS, check_jobs, imap_unordered, pool_failure

GRID_FACTOR = 4.0
WALK_FACTOR = 8.0  # anchor (b)'s grid: the curve's far end changes slowly along it
FIT_NFEV = 20  # least-squares evaluations of one fit (a near miss is refitted once)
SCREEN = 0.25  # an anchor's fit this close to every measurement is refitted with all keys free
# ``host.`` stands for the model's host memory (``host.memory``: J6's ``ddr``, a HiFi5's
# ``psram``): :func:`host_key` names it
CONTINUOUS_RANGES: Mapping[str, tuple[float, float]] = {
    "host.latency_cycles": (1.0, 5000.0), "host.bytes_per_cycle": (0.05, 64.0),
    "idma.setup_cycles": (1.0, 1e5)}
# grid keys of the hardware: (lo, hi, neighbours' ratio); the port's slots matter only below
# the channels' (2 x idma.max_outstanding), so their grid is coarser
HARDWARE_GRID: Mapping[str, tuple[int, int, float]] = {
    "idma.max_outstanding": (1, 64, GRID_FACTOR), "host.max_outstanding": (1, 64, 2 * GRID_FACTOR)}
# which continuous keys are pinned when there are more of them than measurements
PIN_ORDER = ("idma.setup_cycles", "host.bytes_per_cycle", "host.latency_cycles")
RESOURCES = {"port": "port bandwidth", "outstanding": "outstanding requests",
             "descriptor": "descriptor overhead", "compute": "compute",
             "unknown": "unknown (the op gives no bounds)"}


@dataclass(frozen=True)
class Binding:
    """What binds one measured run under one set of values."""

    measurement: str  # the measurement's label
    resource: str  # a key of RESOURCES
    bounds: Mapping[str, float]  # cycles per resource: port, outstanding, descriptor, compute
    share: float  # the binding resource's bound / the measured cycles
    window: float | None  # requests in flight the outstanding bound assumes
    margin: float = math.inf  # the binding bound / the next largest of port, outstanding, core

    def to_json(self) -> dict[str, Any]:
        return {"measurement": self.measurement, "binding": self.resource,
                "binding_name": RESOURCES[self.resource], "share_of_cycles": self.share,
                "bound_cycles": {k: round(v) for k, v in self.bounds.items()},
                "requests_in_flight": self.window,
                "margin": self.margin if math.isfinite(self.margin) else None}


def model_at(model: HardwareModel, values: Mapping[str, float], m: Measurement | None = None
             ) -> HardwareModel:
    """``model`` with the fitted ``values``, then the measurement's own settings."""
    vals = {k: (int(round(v)) if is_int_key(k) else float(v)) for k, v in values.items()}
    return model.with_overrides({**vals, **(m.settings if m else {})})


def resource_bounds(model: HardwareModel, m: Measurement) -> tuple[dict[str, float], float | None]:
    """The four resources' lower bounds on ``m``'s cycles under ``model`` (empty if the op
    gives none), and the requests in flight the outstanding bound assumes."""
    op = get_op(m.op)
    b = op.bounds(model, m.variant, m.shape)
    if b is None:
        return {}, None
    policy = model.host_memory.policy  # what a request costs (dspsim.hw.policy)
    lat = policy.mean_latency(b.ddr_read_bytes, b.ddr_write_bytes)
    bw = policy.bytes_per_cycle
    requests = b.ddr_requests or 0
    nbytes = b.ddr_read_bytes + b.ddr_write_bytes
    latency_bound = float(b.latency_bound_cycles or 0.0)
    window = b.outstanding_requests  # the op's own, else what its latency bound implies
    if window is None and latency_bound > 0:
        window = requests * lat / latency_bound
    per_request = nbytes / requests if requests else 0.0
    outstanding = latency_bound * (1.0 + per_request / (bw * lat)) if lat > 0 else 0.0
    core = float(b.compute_bound_cycles or 0.0)
    descriptor = 0.0
    if model.idma.setup_cycles > 0 and core > 0:
        try:
            bare = op.bounds(model.with_overrides({"idma.setup_cycles": 0.0}), m.variant, m.shape)
            bare_core = bare.compute_bound_cycles if bare is not None else 0.0
            descriptor = max(0.0, core - float(bare_core or 0.0))
        except ConfigError:
            descriptor = 0.0
    return {"port": float(b.dma_bound_cycles), "outstanding": outstanding,
            "descriptor": descriptor, "compute": core - descriptor}, window


def classify(model: HardwareModel, values: Mapping[str, float],
             measurements: Sequence[Measurement]) -> tuple[Binding, ...]:
    """Every measurement's :class:`Binding` under ``values`` (see the module's rules)."""
    out = []
    for m in measurements:
        bounds, window = resource_bounds(model_at(model, values, m), m)
        if not bounds:
            out.append(Binding(m.label(), "unknown", {}, math.nan, None))
            continue
        core = bounds["descriptor"] + bounds["compute"]
        ranked = sorted((("port", bounds["port"]), ("outstanding", bounds["outstanding"]),
                         ("core", core)), key=lambda kv: -kv[1])
        (resource, top), (_, second) = ranked[0], ranked[1]
        if resource == "core":
            resource = "descriptor" if bounds["descriptor"] >= bounds["compute"] else "compute"
        margin = top / second if second > 0 else math.inf
        out.append(Binding(m.label(), resource, bounds, top / m.cycles, window, margin))
    return tuple(out)


def reading_of(bindings: Sequence[Binding]) -> tuple[str, ...]:
    """The family key: each measurement's binding resource, in order."""
    return tuple(b.resource for b in bindings)


def reading_name(reading: Sequence[str], labels: Sequence[str]) -> str:
    """``port-bandwidth-bound`` when every run agrees, else each run's, e.g.
    ``descriptor-overhead-bound (pingpong,n=100000), outstanding-requests-bound
    (direct,n=100000)``."""

    def bound(r: str) -> str:
        return RESOURCES[r].replace(" ", "-") + "-bound"

    if len(set(reading)) == 1:
        return bound(reading[0])
    return ", ".join(f"{bound(r)} ({lab})" for lab, r in zip(labels, reading))


def physical_reading(model: HardwareModel, values: Mapping[str, float],
                     bindings: Sequence[Binding]) -> list[str]:
    """What each binding resource means at ``values`` in physical units, one line per distinct
    phrase naming the runs it binds, e.g. ``port bandwidth: 0.3881 B/cycle, 388 MB/s at 1000
    MHz (pingpong,n=100000; direct,n=100000)``."""
    m = model_at(model, values)
    clock = m.core.clock_mhz
    phrases: dict[str, list[str]] = {}
    for b in bindings:
        if b.resource == "port":
            text = (f"{m.host_memory.bytes_per_cycle:.4g} B/cycle, "
                    f"{m.host_memory.bytes_per_cycle * clock:.0f} MB/s at {clock:g} MHz")
        elif b.resource == "outstanding":
            w = b.window if b.window is not None else math.nan
            lat = m.host_memory.policy.latency(False)
            text = (f"{w:.3g} request(s) in flight, each a {lat:.0f}-cycle round "
                    f"trip ({lat / clock * 1000:.0f} ns at {clock:g} MHz; "
                    f"idma.max_outstanding = {m.idma.max_outstanding} per channel, "
                    f"{m.host.memory}.max_outstanding = {m.host_memory.max_outstanding})")
        elif b.resource == "descriptor":
            text = (f"{m.idma.setup_cycles:.0f} cycles per descriptor, "
                    f"{m.idma.setup_cycles / clock:.3g} us at {clock:g} MHz")
        elif b.resource == "compute":
            text = f"the core's kernels, {b.bounds['compute']:,.0f} cycles"
        else:
            text = "no closed-form bounds"
        phrases.setdefault(f"{RESOURCES[b.resource]}: {text}", []).append(b.measurement)
    return [f"{text} ({'; '.join(runs)})" for text, runs in phrases.items()]


def host_key(model: HardwareModel, key: str) -> str:
    """``key`` with a leading ``host.`` (the tables above) named as the model's host memory."""
    section, dot, rest = key.partition(".")
    return f"{model.host.memory}.{rest}" if section == "host" and dot else key


@dataclass(frozen=True)
class Space:
    """What ``explore`` searches: the fitted keys, the grid and the anchors."""

    cont: tuple[FreeParam, ...]
    grid: Mapping[str, tuple[int, ...]]
    anchors: tuple[Mapping[str, float], ...]
    pin_grid_key: str | None = None  # the key anchor (b) walks, if any

    @property
    def keys(self) -> list[str]:
        return list(self.grid) + [p.key for p in self.cont]

    def points(self) -> list[dict[str, int]]:
        return [dict(zip(self.grid, c)) for c in itertools.product(*self.grid.values())]

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.grid.values())


def log_grid(lo: float, hi: float, factor: float = GRID_FACTOR, integer: bool = False) -> list:
    """Points from ``lo`` to ``hi``, neighbours at most ``factor`` apart (log-spaced)."""
    if lo <= 0 or hi <= lo:
        return [lo] if hi <= lo else list(np.linspace(lo, hi, 3))
    n = max(2, math.ceil(math.log(hi / lo) / math.log(factor) - 1e-9) + 1)
    vals = np.geomspace(lo, hi, n)
    if integer:
        return sorted({int(round(v)) for v in vals})
    return [float(f"{v:.4g}") for v in vals]


def thin(values: Iterable[int], factor: float = GRID_FACTOR, keep: Iterable[int] = ()) -> list:
    """``values`` thinned to neighbours at least ``factor`` apart (the first and the last
    kept), plus ``keep``."""
    vals = sorted(set(values))
    if not vals:
        return []
    out = [vals[0]]
    for v in vals[1:]:
        if v >= out[-1] * factor * (1 - 1e-9):
            out.append(v)
    return sorted({*out, vals[-1], *(k for k in keep if vals[0] <= k <= vals[-1])})


def op_grid_keys(model: HardwareModel, measurements: Sequence[Measurement]) -> dict[str, list]:
    """Every integer op key the measured ops' ``search_space`` marks for a measured variant,
    with the candidates it gives (union over the measurements)."""
    out: dict[str, set] = {}
    for m in measurements:
        space = get_op(m.op).search_space(model, m.variant, m.shape)
        for key, values in space.items():
            if is_int_key(key):
                out.setdefault(key, set()).update(int(v) for v in values)
    return {k: sorted(v) for k, v in out.items()}


def explore_space(model: HardwareModel, measurements: Sequence[Measurement],
                  free: Iterable[str | FreeParam] = (),
                  grid: Mapping[str, Sequence[int]] | None = None) -> Space:
    """The keys, grid and anchors of an exploration (see the module). ``grid`` replaces the
    values of grid keys (a test's tiny grid)."""
    if model.host_memory.protocol == "transactions":  # no latency or bandwidth to walk
        raise DspsimInputError(
            f"calibrate --explore walks the host memory's latency_cycles and bytes_per_cycle; "
            f"{model.host.memory} is a transactions memory, which has neither; allowed: "
            f"calibrate without --explore (--free its keys, e.g. {model.host.memory}."
            "command_clocks), or host.memory a pipelined memory")
    fixed = {k for m in measurements for k in m.settings}
    cont = {host_key(model, k): FreeParam(host_key(model, k), lo, hi, False)
            for k, (lo, hi) in CONTINUOUS_RANGES.items()}
    ranges = {host_key(model, k): v for k, v in HARDWARE_GRID.items()}
    values = {key: thin(cands, keep=[model.get(key)])
              for key, cands in op_grid_keys(model, measurements).items()}
    for f in free:
        p = parse_free(f, model) if isinstance(f, str) else f
        if p.integer:
            values.pop(p.key, None)
            ranges[p.key] = (int(p.lo), int(p.hi), GRID_FACTOR)
        else:
            cont[p.key] = p
    for key, (lo, hi, f) in ranges.items():
        own = int(model.get(key))
        snapped = (int_value(key, v) for v in log_grid(lo, hi, f, integer=True))
        values[key] = sorted({*(v for v in snapped if lo <= v <= hi),  # values the key takes
                              *([own] if lo <= own <= hi else [])})
    for key, vals in (grid or {}).items():
        if key not in values:
            raise DspsimInputError(f"explore grid: {key} is not a grid key ({', '.join(values)})")
        values[key] = sorted({int(v) for v in vals})
    values = {k: v for k, v in values.items() if k not in fixed and v}
    conts = tuple(p for k, p in cont.items() if k not in fixed and k not in values)
    pins, walk = _pins(model, conts, len(measurements))
    return Space(conts, {k: tuple(v) for k, v in values.items()}, pins, walk)


def _pins(model: HardwareModel, cont: Sequence[FreeParam], n_meas: int
          ) -> tuple[tuple[dict[str, float], ...], str | None]:
    """The anchors: (a) the extra continuous keys at the model's values, (b) the next key of
    :data:`PIN_ORDER` on its log grid (the keys before it at the model's values)."""
    extra = len(cont) - n_meas
    if extra <= 0:
        return ({},), None
    by_key = {p.key: p for p in cont}
    pin_order = [host_key(model, k) for k in PIN_ORDER]
    order = [k for k in pin_order if k in by_key] + [k for k in by_key if k not in pin_order]

    def own(k: str) -> float:
        p = by_key[k]
        return min(max(float(model.get(k)), p.lo), p.hi)

    pinned = order[:extra]
    out = [{k: own(k) for k in pinned}]
    walk = order[extra] if len(order) > extra else None
    if walk is not None:
        p = by_key[walk]
        for v in log_grid(p.lo, p.hi, WALK_FACTOR):
            out.append({**{k: own(k) for k in pinned[:-1]}, walk: v})
    return tuple(out), walk


# ------------------------------------------------------------------ one grid point
def _runnable(model: HardwareModel, measurements: Sequence[Measurement]) -> bool:
    for m in measurements:
        try:  # a measurement with no settings of its own runs on the model as it is
            get_op(m.op).check_run(model.with_overrides(m.settings) if m.settings else model,
                                   m.variant, m.shape)
        except (ConfigError, DspsimInputError):
            return False
    return True


def _feasible(model: HardwareModel, fitted: Sequence[FreeParam],
              measurements: Sequence[Measurement], screen: float) -> bool:
    """Whether the op's closed-form lower bound, at the best corner of the fitted keys'
    ranges, leaves every measurement within reach (bounds are monotone in each key)."""
    corners = list(itertools.product(*[(p.lo, p.hi) for p in fitted])) or [()]
    built: dict[tuple, HardwareModel | ConfigError] = {}  # measurements alike share a corner

    def corner(c: tuple, m: Measurement) -> HardwareModel:
        return built_once(built, (c, tuple(m.settings.items())),
                          lambda: model_at(model, dict(zip([p.key for p in fitted], c)), m))

    for m in measurements:
        best = math.inf
        for c in corners:
            try:
                b = get_op(m.op).bounds(corner(c, m), m.variant, m.shape)
            except (ConfigError, DspsimInputError):
                continue
            best = min(best, float(b.lower_bound_cycles or 0.0) if b is not None else 0.0)
        if best > m.cycles * (1 + screen):
            return False
    return True


def fit_point(task: tuple) -> tuple[dict[str, int], list[tuple[dict[str, float], list]], int]:
    """Every fit within the tolerance at one grid point (see the module): ``(point, [(values,
    residuals)], simulations)``."""
    model, measurements, space, point, tol, fidelity = task
    found: list[FitPoint] = []
    sims = 0
    try:
        base = model.with_overrides(point)
    except ConfigError:  # a combination the model refuses (e.g. a tile larger than a DataRAM)
        return point, [], 0
    if not _runnable(base, measurements):
        return point, [], 0
    for i, pinned in enumerate(space.anchors):
        fitted = [p for p in space.cont if p.key not in pinned]
        try:
            at = base.with_overrides(dict(pinned))
        except ConfigError:
            continue
        if not _feasible(at, fitted, measurements, SCREEN):
            continue
        prob = Problem(at, list(measurements), fitted, fidelity)
        seeds = prob.surrogate_seeds({}, limit=3 if i == 0 else 1)
        if i == 0:  # the model's own values start a fit too: where its guesses stand
            own = {p.key: float(prob.model.get(p.key)) for p in fitted}
            if not any(_same(own, q, 0.03) for q in seeds):
                seeds.append(own)
        # only where the closed form comes near every measurement
        seeds = [q for q in seeds if np.max(np.abs(prob.surrogate_residuals(q))) <= SCREEN]
        pts: list[FitPoint] = []
        for q in seeds:
            pt = prob.fit_continuous({}, q, max_nfev=FIT_NFEV)
            if not any(_same(pt.values, r.values) for r in pts):
                pts.append(pt)
        sims += prob.simulations
        for pt in pts:
            vals = {**pinned, **pt.values}
            if tol < pt.worst <= SCREEN and pinned:
                full = Problem(base, list(measurements), list(space.cont), fidelity)
                again = full.fit_continuous({}, vals, max_nfev=FIT_NFEV)
                sims += full.simulations
                if again.worst < pt.worst:
                    pt, vals = again, dict(again.values)
            if pt.worst <= tol and not any(_same(vals, q.values) for q in found):
                found.append(FitPoint(vals, pt.residuals))
    return point, [({**point, **f.values}, list(f.residuals)) for f in found], sims


def _same(a: Mapping[str, float], b: Mapping[str, float], rel: float = 0.005) -> bool:
    return all(abs(a[k] - b[k]) <= rel * max(abs(a[k]), abs(b[k]), 1e-12) for k in a)


# ------------------------------------------------------------------ the whole grid
def _results(tasks: list[tuple], jobs: int) -> Iterator[tuple]:
    """:func:`fit_point` of every task, as they complete, in at most ``jobs`` processes (never
    more than tasks; they die with this one, and a Ctrl-C stops them at once)."""
    for _, result in imap_unordered(fit_point, tasks, jobs, work=len(tasks),
                                    failed=pool_failure("calibrate --explore")):
        yield result


@dataclass
class Search:
    """Every fit within the tolerance over the grid, and the simulations it took."""

    space: Space
    fits: list[FitPoint]
    simulations: int
    fidelity: str


def search_grid(model: HardwareModel, measurements: Sequence[Measurement], space: Space,
                tolerance_pct: float, fidelity: str = "tile", jobs: int | None = None,
                progress: Progress = None) -> Search:
    """Run :func:`fit_point` on every grid point (``jobs`` processes, 1 to
    :data:`~dspsim.workers.MAX_JOBS`; default: every CPU; never more than grid points)."""
    say = progress or (lambda _msg: None)
    jobs = (check_jobs(jobs, "jobs", "grid points") if jobs is not None
            else max(1, min(MAX_JOBS, os.cpu_count() or 1)))
    tol = tolerance_pct / 100.0
    tasks = [(model, list(measurements), space, p, tol, fidelity) for p in space.points()]
    workers = max(1, min(jobs, len(tasks)))
    say(f"explore: {len(tasks)} grid points ({', '.join(space.grid) or 'none'}), fitting "
        f"{', '.join(p.key for p in space.cont)} at each, in {workers} worker "
        f"process{'es' if workers > 1 else ''}; this takes minutes")
    start = time.perf_counter()
    fits: list[FitPoint] = []
    sims = 0
    for done, (_, found, n) in enumerate(_results(tasks, jobs), start=1):
        sims += n
        fits.extend(FitPoint(v, np.asarray(r)) for v, r in found)
        say(f"explore: {done}/{len(tasks)} grid points, {len(fits)} fits within "
            f"{tolerance_pct:g} %, {sims} simulations, {time.perf_counter() - start:.0f} s")
    return Search(space, fits, sims, fidelity)
