"""Fit free model keys to measured cycle counts, and say how well the measurements pin them.

Measurements
------------
A measurement is a version of the op, optionally a length and any model keys it was taken
with, and the cycle count measured. On the command line (``--measured``) it is written::

    MODE[,n=N][,KEY=VALUE ...]=CYCLES

- ``MODE`` is ``pingpong`` or ``direct``; ``n`` is the number of float32 elements (default
  100000, at most :data:`MAX_N`: the host's input and output arrays must fit the DSP's DDR
  window, checked when the measurement is read); every other ``KEY=VALUE`` is a model key set
  for that measurement only, e.g. ``softmax.tile_bytes=8192`` (the board ran with that
  TILE_SIZE).
- Everything after the **last** ``=`` is the cycle count (digits, ``_`` allowed as a thousands
  separator), so the fields before it may hold ``=`` freely and nothing is ambiguous.

Examples: ``pingpong=5154293``, ``direct=7_648_254``,
``"pingpong,n=50000,softmax.tile_bytes=8192=2600000"``.

A CSV file (``--measured-csv``) holds one measurement per row: columns ``mode``, ``cycles``,
optionally ``n``, and any model keys as further columns (an empty cell leaves the key alone).

Fit
---
``--free KEY[=LO:HI]`` frees a numeric model key within ``[LO, HI]`` (default: a factor of 100
either side of its current value, within the key's allowed range). Continuous keys are fitted by
least squares on the relative error of every measurement (``scipy.optimize.least_squares``, in
log space where the range is positive). Integer keys (``idma.max_outstanding``, ...) are
enumerated on a grid and the continuous keys fitted for each grid value. Least squares is local,
so every fit starts from the model's values *and* from the minima of the closed-form estimate
(:mod:`dspsim.analytic`) over the free range: that is what finds a second, distant family of fits
when there is one.

Identifiability
---------------
For every free key, the interval over which some choice of the other free keys keeps **every**
measurement within the tolerance (1 %) is found by profiling: the key is pinned at values
stepping away from the fit, the other keys are refitted, and the edge is bisected. A key is
*determined* when that set is one interval strictly inside its search range (one value for an
integer key). When no value in the search ranges brings every measurement within the tolerance,
the verdict says so with the best residuals reached, and
:attr:`Calibration.fitted_within_tolerance` is false. When the measurements do not determine the
keys, the equally good fits are simulated on candidate measurements a board can take (version,
n, TILE_SIZE, schedule, the channels' outstanding-request limit) and the one on which they
differ most is proposed, with the cycles each fit predicts there.

``--out`` writes the input model file back with the fitted values, each with a comment saying
what it was fitted to and when; every other line and comment is kept.

The J6 model's two DDR values come from ``python -m dspsim.calibrate`` (the seed's two figures,
``ddr.latency_cycles`` and ``ddr.bytes_per_cycle`` free).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from dspsim.analytic import bounds as analytic_bounds
from dspsim.config import (
    HardwareModel,
    key_type,
    load_model,
    model_field,
    parse_value,
)
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.paths import writable_file
from dspsim.sim import DDR_WINDOW_BYTES, FIDELITIES, MODES, simulate

# The seed's profiling comment: cycles on J6 for 100,000 float32 elements.
SEED_MEASUREMENTS_CYCLES = MappingProxyType({"pingpong": 5_154_293, "direct": 7_648_254})

DEFAULT_N = 100_000
DEFAULT_TOLERANCE_PCT = 1.0
RANGE_FACTOR = 100.0  # default search range: current value / 100 .. x 100

Progress = Callable[[str], None] | None


# ------------------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class Measurement:
    """One measured run: version, length, the model keys it was taken with, cycles."""

    mode: str
    cycles: float
    n: int = DEFAULT_N
    settings: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        """``MODE,n=N[,KEY=VALUE...]``: the measurement without its cycles."""
        return ",".join([self.mode, f"n={self.n}"] + [f"{k}={v}" for k, v in self.settings.items()])

    def spec(self) -> str:
        """The measurement in the ``--measured`` syntax."""
        return f"{self.label()}={self.cycles:.0f}"


@dataclass(frozen=True)
class FreeParam:
    """A model key to fit, its search range and whether it takes integer values."""

    key: str
    lo: float
    hi: float
    integer: bool

    @property
    def log(self) -> bool:
        return self.lo > 0


def _is_int_key(key: str) -> bool:
    return key_type(key) is int


def _parse_cycles(text: str, where: str) -> float:
    t = text.strip().replace("_", "")
    try:
        value = float(t) if re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?", t) else None
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        hint = " (write 5154293 or 5_154_293, no commas)" if "," in text else ""
        raise DspsimInputError(f"{where}: cycles {text.strip()!r} is not a positive number{hint}")
    return value


# The host allocates the input and the output array (4 bytes an element each, on 4096-byte
# boundaries) and a 64-byte parameter block in the DSP's DDR window, as dspsim.sim.simulate does.
_HOST_ALIGN_BYTES = 4096
_PARAM_BLOCK_BYTES = 64


def ddr_bytes(n: int) -> int:
    """Bytes of the DSP's DDR window one run of the op on ``n`` elements takes."""
    array = -(-4 * n // _HOST_ALIGN_BYTES) * _HOST_ALIGN_BYTES
    return 2 * array + _PARAM_BLOCK_BYTES


MAX_N = (DDR_WINDOW_BYTES - _PARAM_BLOCK_BYTES) // 2 // _HOST_ALIGN_BYTES * _HOST_ALIGN_BYTES // 4
"""The largest ``n`` whose arrays fit the DSP's DDR window."""


def _parse_n(text: str, where: str) -> int:
    t = text.strip().replace("_", "")
    if not t.isdigit() or int(t) <= 0:
        raise DspsimInputError(f"{where}: n = {text.strip()!r} must be a positive integer")
    n = int(t)
    if ddr_bytes(n) > DDR_WINDOW_BYTES:
        raise DspsimInputError(
            f"{where}: n = {n} needs {ddr_bytes(n):,} bytes of DDR (input, output, parameter "
            f"block), more than the DSP's {DDR_WINDOW_BYTES:,}-byte window; allowed n up to "
            f"{MAX_N:,}"
        )
    return n


def _check_mode(mode: str, where: str) -> str:
    mode = mode.strip()
    if mode not in MODES:
        raise DspsimInputError(f"{where}: version {mode!r} unknown; allowed {', '.join(MODES)}")
    return mode


def parse_measurement(text: str) -> Measurement:
    """Parse ``MODE[,n=N][,KEY=VALUE...]=CYCLES`` (the last ``=`` separates the cycles)."""
    where = f"measurement {text!r}"
    spec, eq, cycles_text = text.rpartition("=")
    if not eq or not spec.strip():
        raise DspsimInputError(
            f"{where}: expected MODE[,n=N][,KEY=VALUE...]=CYCLES, e.g. pingpong=5154293 or "
            "pingpong,n=50000,softmax.tile_bytes=8192=2600000"
        )
    cycles = _parse_cycles(cycles_text, where)
    head, *rest = spec.split(",")
    mode = _check_mode(head, where)
    n = DEFAULT_N
    settings: dict[str, Any] = {}
    for item in rest:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise DspsimInputError(
                f"{where}: field {item!r} is not KEY=VALUE (n=N or a model key such as "
                "softmax.tile_bytes=8192)"
            )
        if key == "n":
            n = _parse_n(value, where)
        else:
            try:
                settings[key] = parse_value(key, value)
            except ConfigError as e:
                raise DspsimInputError(f"{where}: {e}") from None
    return Measurement(mode, cycles, n, settings)


def read_measurements_csv(path: str | Path) -> list[Measurement]:
    """Measurements from a CSV file: columns mode, cycles, optional n, and model-key columns."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DspsimInputError(f"measurements file {str(p)!r} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DspsimInputError(
            f"measurements file {str(p)!r} unreadable: {e.__class__.__name__}"
        ) from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise DspsimInputError(f"{p}: no measurements (expected a header mode,n,cycles and rows)")
    columns = [c.strip() for c in rows[0].keys() if c is not None]
    for need in ("mode", "cycles"):
        if need not in columns:
            raise DspsimInputError(
                f"{p}: missing column {need!r}; columns are mode, cycles, optional n and model "
                "keys such as softmax.tile_bytes"
            )
    for c in columns:
        if c not in ("mode", "cycles", "n"):
            try:
                model_field(c)  # unknown key: ConfigError
            except ConfigError as e:
                raise DspsimInputError(f"{p}: column {c!r}: {e}") from None
    out = []
    for i, raw in enumerate(rows, start=2):
        if None in raw:
            raise DspsimInputError(f"{p} line {i}: more cells than columns")
        row = {k.strip(): (v or "").strip() for k, v in raw.items()}
        where = f"{p} line {i}"
        mode = _check_mode(row["mode"], where)
        cycles = _parse_cycles(row["cycles"], where)
        n = _parse_n(row["n"], where) if row.get("n") else DEFAULT_N
        settings = {}
        for c in columns:
            if c in ("mode", "cycles", "n") or not row.get(c):
                continue
            try:
                settings[c] = parse_value(c, row[c])
            except ConfigError as e:
                raise DspsimInputError(f"{where}: {e}") from None
        out.append(Measurement(mode, cycles, n, settings))
    return out


def default_range(model: HardwareModel, key: str) -> tuple[float, float]:
    """A factor of 100 either side of the current value, clipped to the key's allowed range."""
    f = model_field(key)
    v = float(model.get(key))
    lo_allowed = f.metadata["lo"] if f.metadata["lo"] is not None else -math.inf
    hi_allowed = f.metadata["hi"] if f.metadata["hi"] is not None else math.inf
    if v > 0:
        lo, hi = v / RANGE_FACTOR, v * RANGE_FACTOR
    else:
        lo, hi = lo_allowed, max(hi_allowed, 1.0)
    lo, hi = max(lo, lo_allowed), min(hi, hi_allowed)
    if f.metadata["positive"] and lo <= 0:
        lo = min(v, hi) / RANGE_FACTOR if v > 0 else 1e-6
    if _is_int_key(key):
        lo, hi = math.ceil(lo), math.floor(hi)
    return lo, hi


def parse_free(text: str, model: HardwareModel) -> FreeParam:
    """Parse ``KEY`` or ``KEY=LO:HI`` into a :class:`FreeParam` checked against the key."""
    key, eq, rng = text.partition("=")
    key = key.strip()
    try:
        f = model_field(key)
    except ConfigError as e:
        raise DspsimInputError(f"--free {text!r}: {e}") from None
    if key_type(key) in (str, bool):
        kind = "text" if key_type(key) is str else "true/false"
        raise DspsimInputError(
            f"--free {text!r}: {key} takes {kind} values; only numeric keys can be fitted"
        )
    integer = _is_int_key(key)
    if not eq:
        lo, hi = default_range(model, key)
    else:
        a, colon, b = rng.partition(":")
        try:
            lo, hi = float(a.replace("_", "")), float(b.replace("_", ""))
        except ValueError:
            lo = hi = math.nan
        if not colon or not (math.isfinite(lo) and math.isfinite(hi)):
            raise DspsimInputError(
                f"--free {text!r}: expected KEY=LO:HI with two numbers, e.g. "
                "ddr.latency_cycles=50:400"
            )
        lo_allowed, hi_allowed = f.metadata["lo"], f.metadata["hi"]
        if (lo_allowed is not None and lo < lo_allowed) or (
            hi_allowed is not None and hi > hi_allowed
        ):
            raise DspsimInputError(
                f"--free {text!r}: {key} allows {lo_allowed:g} to {hi_allowed:g}"
            )
        if f.metadata["positive"] and lo <= 0:
            raise DspsimInputError(f"--free {text!r}: {key} must stay greater than 0")
        if integer:
            lo, hi = math.ceil(lo), math.floor(hi)
    if not lo < hi:
        raise DspsimInputError(f"--free {text!r}: the range must have LO < HI (got {lo:g}:{hi:g})")
    return FreeParam(key, float(lo), float(hi), integer)


def _as_free(model: HardwareModel, free: Any) -> list[FreeParam]:
    if isinstance(free, Mapping):
        out = []
        for k, (lo, hi) in free.items():
            out.append(parse_free(f"{k}={lo}:{hi}", model))
        return out
    return [parse_free(f, model) if isinstance(f, str) else f for f in free]


# ---------------------------------------------------------------------------- readings
def unit(key: str) -> str:
    """The unit of a model key, from its name."""
    name = key.split(".")[-1]
    for suffix, u in (
        ("bytes_per_cycle", "B/cycle"),
        ("_cycles", "cycles"),
        ("_bytes", "B"),
        ("_mhz", "MHz"),
        ("_us", "us"),
        ("max_outstanding", "requests"),
        ("_entries", "entries"),
        ("lanes_f32", "lanes"),
    ):
        if name.endswith(suffix):
            return u
    return ""


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
        cover = value * burst / model.ddr.bytes_per_cycle
        return (
            f"{value * burst:g} B in flight per channel ({value:g} x {burst} B bursts), "
            f"{cover:.0f} cycles of port transfer per round trip"
        )
    if key == "ddr.max_outstanding":
        return f"{value:g} requests in flight on the port"
    if name.endswith("_mhz"):
        return f"{1000 / value:.4g} ns per cycle"
    return ""


# ----------------------------------------------------------------------------- fitting
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


class _Problem:
    """Measurements, free keys and a cache of simulations (one per calibration, never shared)."""

    def __init__(
        self,
        model: HardwareModel,
        measurements: list[Measurement],
        free: list[FreeParam],
        fidelity: str,
        progress: Progress = None,
    ):
        if not measurements:
            raise DspsimInputError(
                "calibrate: no measurements; give --measured MODE=CYCLES or --measured-csv FILE"
            )
        if not free:
            raise DspsimInputError("calibrate: nothing to fit; give --free KEY[=LO:HI]")
        if fidelity not in FIDELITIES:
            raise DspsimInputError(f"fidelity {fidelity!r}: allowed {', '.join(FIDELITIES)}")
        keys = [p.key for p in free]
        if len(set(keys)) != len(keys):
            raise DspsimInputError(f"--free: a key is given twice ({', '.join(keys)})")
        for m in measurements:
            clash = set(m.settings) & set(keys)
            if clash:
                raise DspsimInputError(
                    f"measurement {m.label()!r} sets {sorted(clash)[0]}, which is free; a free "
                    "key cannot also be fixed by a measurement"
                )
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
        self._cache: dict[tuple, float] = {}
        self.simulations = 0

    # transforms between a key's value and the optimiser's coordinate
    @staticmethod
    def to_u(p: FreeParam, v: float) -> float:
        return math.log(v) if p.log else v

    @staticmethod
    def from_u(p: FreeParam, u: float) -> float:
        return math.exp(u) if p.log else u

    def _clip(self, p: FreeParam, v: float) -> float:
        return min(max(v, p.lo), p.hi)

    def model_with(self, values: dict[str, float], m: Measurement) -> HardwareModel:
        vals = {k: (int(round(v)) if _is_int_key(k) else float(v)) for k, v in values.items()}
        return self.model.with_overrides({**m.settings, **vals})

    def simulated(self, values: dict[str, float], index: int) -> float:
        key = (index,) + tuple(sorted((k, float(f"{v:.12g}")) for k, v in values.items()))
        hit = self._cache.get(key)
        if hit is None:
            m = self.measurements[index]
            try:
                model = self.model_with(values, m)
            except ConfigError:
                hit = math.inf  # outside what the model allows: no fit lives here
            else:
                r = simulate(model, m.mode, m.n, data=False, fidelity=self.fidelity)
                self.simulations += 1
                hit = float(r.cycles)
            self._cache[key] = hit
        return hit

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        out = np.empty(len(self.measurements))
        for i, m in enumerate(self.measurements):
            c = self.simulated(values, i)
            out[i] = c / m.cycles - 1.0 if math.isfinite(c) else 10.0
        return out

    def surrogate_residuals(self, values: dict[str, float]) -> np.ndarray:
        out = np.empty(len(self.measurements))
        for i, m in enumerate(self.measurements):
            try:
                est = analytic_bounds(self.model_with(values, m), m.mode, m.n)["estimate_cycles"]
            except ConfigError:
                est = math.inf
            out[i] = est / m.cycles - 1.0 if math.isfinite(est) else 10.0
        return out

    # ---------------------------------------------------------------- continuous fits
    def fit_continuous(
        self,
        ints: dict[str, float],
        start: dict[str, float],
        fixed: dict[str, float] | None = None,
        residual_fn: Callable[[dict[str, float]], np.ndarray] | None = None,
    ) -> FitPoint:
        """Least squares over the continuous keys not in ``fixed``, from ``start``."""
        from scipy.optimize import least_squares

        fixed = fixed or {}
        fn = residual_fn or self.residuals
        keys = [p for p in self.cont if p.key not in fixed]
        base = {**ints, **fixed}
        if not keys:
            return FitPoint(dict(base), fn(base))
        lo = np.array([self.to_u(p, p.lo) for p in keys])
        hi = np.array([self.to_u(p, p.hi) for p in keys])
        x0 = np.array([self.to_u(p, self._clip(p, start[p.key])) for p in keys])
        x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))

        def values_at(x: np.ndarray) -> dict[str, float]:
            return {**base, **{p.key: self.from_u(p, float(u)) for p, u in zip(keys, x)}}

        sol = least_squares(
            lambda x: fn(values_at(x)),
            x0,
            bounds=(lo, hi),
            diff_step=1e-3,
            xtol=1e-7,
            ftol=1e-9,
            gtol=1e-9,
            max_nfev=60 if residual_fn is None else 200,
        )
        vals = values_at(sol.x)
        return FitPoint(vals, fn(vals))

    def surrogate_seeds(self, ints: dict[str, float], limit: int = 3) -> list[dict[str, float]]:
        """Starting points: minima of the closed-form estimate's misfit over the free range."""
        from scipy.ndimage import minimum_filter

        if not self.cont:
            return []
        per_axis = max(3, int(round(400 ** (1 / len(self.cont)))))
        axes = [np.linspace(self.to_u(p, p.lo), self.to_u(p, p.hi), per_axis) for p in self.cont]
        grid = np.empty((per_axis,) * len(self.cont))
        for idx in itertools.product(range(per_axis), repeat=len(self.cont)):
            vals = {
                **ints,
                **{
                    p.key: self.from_u(p, axes[a][i])
                    for a, (p, i) in enumerate(zip(self.cont, idx))
                },
            }
            grid[idx] = np.max(np.abs(self.surrogate_residuals(vals)))
        minima = (grid == minimum_filter(grid, size=3, mode="nearest")) & (grid < 0.5)
        order = sorted(zip(grid[minima], np.argwhere(minima)), key=lambda t: t[0])
        seeds: list[dict[str, float]] = []
        for _, idx in order[: 3 * limit]:
            start = {
                p.key: self.from_u(p, axes[a][i]) for a, (p, i) in enumerate(zip(self.cont, idx))
            }
            refined = self.fit_continuous(ints, start, residual_fn=self.surrogate_residuals)
            seed = {p.key: refined.values[p.key] for p in self.cont}
            if not any(self._close(seed, s, 0.03) for s in seeds):
                seeds.append(seed)
            if len(seeds) == limit:
                break
        return seeds

    def _close(self, a: dict[str, float], b: dict[str, float], rel: float) -> bool:
        for p in self.free:
            if p.key not in a or p.key not in b:
                continue
            x, y = a[p.key], b[p.key]
            scale = max(abs(x), abs(y), 1e-12) if p.log else max(p.hi - p.lo, 1e-12)
            if abs(x - y) > rel * scale:
                return False
        return True

    # ---------------------------------------------------------------- integer grid
    def int_grid(self, p: FreeParam, points: int) -> list[int]:
        lo, hi = int(p.lo), int(p.hi)
        current = int(min(max(self.model.get(p.key), lo), hi))
        if hi - lo + 1 <= points + 2:
            return list(range(lo, hi + 1))
        span = np.geomspace(lo, hi, points) if lo >= 1 else np.linspace(lo, hi, points)
        return sorted({lo, hi, current} | {int(round(v)) for v in span})

    def combos(self) -> list[dict[str, float]]:
        if not self.ints:
            return [{}]
        points = 10
        while True:
            grids = [self.int_grid(p, points) for p in self.ints]
            if math.prod(len(g) for g in grids) <= 48 or points <= 3:
                break
            points -= 1
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
    def profile(
        self, at: FitPoint, p: FreeParam, tol: float
    ) -> tuple[list[float], list[FitPoint], list[bool]]:
        """Edges of ``p``'s interval around ``at`` with every measurement within ``tol``.

        Returns ([low, high], the fits at both edges, [low edge is the search bound, high ...]).
        """
        ints = {q.key: at.values[q.key] for q in self.ints}
        u0 = self.to_u(p, at.values[p.key])
        step0 = 0.02 if p.log else 0.02 * (p.hi - p.lo)
        edges, points, hit = [], [], []
        for direction in (-1, 1):
            bound_u = self.to_u(p, p.lo if direction < 0 else p.hi)
            good_u, good = u0, at
            bad_u = None
            step = step0
            reached = False
            while True:
                u = u0 + direction * step
                if (u - bound_u) * direction >= 0:
                    u = bound_u
                pt = self.fit_continuous(ints, good.values, {p.key: self.from_u(p, u)})
                if pt.worst <= tol:
                    good_u, good = u, pt
                    if u == bound_u:
                        reached = True
                        break
                    step *= 2
                else:
                    bad_u = u
                    break
            if bad_u is not None:
                for _ in range(8):
                    if abs(bad_u - good_u) < (5e-3 if p.log else 5e-3 * (p.hi - p.lo)):
                        break
                    mid = 0.5 * (good_u + bad_u)
                    pt = self.fit_continuous(ints, good.values, {p.key: self.from_u(p, mid)})
                    if pt.worst <= tol:
                        good_u, good = mid, pt
                    else:
                        bad_u = mid
            edges.append(self.from_u(p, good_u))
            points.append(good)
            hit.append(reached)
        return edges, points, hit


# ------------------------------------------------------------------------------ results
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


@dataclass
class Calibration:
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
    def to_json(self) -> dict[str, Any]:
        def fit_values(v: dict[str, float]) -> dict[str, float]:
            return {p.key: (int(round(v[p.key])) if p.integer else v[p.key]) for p in self.free}

        return {
            "model": self.model.source,
            "fidelity": self.fidelity,
            "tolerance_pct": self.tolerance_pct,
            "free": {p.key: {"lo": p.lo, "hi": p.hi, "integer": p.integer} for p in self.free},
            "fitted_within_tolerance": self.fitted_within_tolerance,
            "max_abs_residual_pct": 100.0 * self.best.worst,
            "fit": {
                p.key: {
                    "value": fit_values(self.values)[p.key],
                    "unit": unit(p.key),
                    "reading": reading(p.key, self.values[p.key], self.fitted),
                }
                for p in self.free
            },
            "measurements": [
                {
                    "spec": m.spec(),
                    "mode": m.mode,
                    "n": m.n,
                    "settings": m.settings,
                    "measured_cycles": m.cycles,
                    "simulated_cycles": round(c),
                    "residual_pct": r,
                }
                for m, c, r in zip(self.measurements, self.simulated_cycles(), self.residuals_pct)
            ],
            "identifiability": {
                "determined": self.determined,
                "intervals": {
                    iv.key: {
                        "lo": iv.lo,
                        "hi": iv.hi,
                        "segments": [list(s) for s in iv.segments],
                        "values": iv.values,
                        "reaches_search_bound": iv.reaches_search_bound,
                        "determined": iv.determined,
                    }
                    for iv in self.intervals
                },
                "families": [fit_values(f.values) for f in self.families],
                "equally_good_fits": [
                    {"values": fit_values(g.values), "max_abs_residual_pct": 100 * g.worst}
                    for g in self.good
                ],
                "separating_measurement": None
                if self.proposal is None
                else {
                    "spec": self.proposal.measurement.label(),
                    "mode": self.proposal.measurement.mode,
                    "n": self.proposal.measurement.n,
                    "settings": self.proposal.measurement.settings,
                    "predictions": [
                        {"values": fit_values(v), "predicted_cycles": round(c)}
                        for v, c in self.proposal.predictions
                    ],
                    "spread_cycles": round(self.proposal.spread_cycles),
                    "spread_pct": self.proposal.spread_pct,
                    "family_gap_pct": self.proposal.family_gap_pct,
                },
            },
            "simulations": self.simulations,
            "out": self.out_path,
        }

    def text(self) -> str:
        L: list[str] = []
        src = self.model.source
        L.append(
            f"calibrated {self.model.name} ({src}): {len(self.measurements)} measurement(s), "
            f"{len(self.free)} free key(s), {self.fidelity} fidelity, "
            f"{self.simulations} simulations"
        )
        L.append("")
        L.append("fitted values")
        width = max(len(p.key) for p in self.free)
        for p in self.free:
            v = self.values[p.key]
            shown = f"{int(round(v))}" if p.integer else f"{v:.6g}"
            L.append(
                f"  {p.key:<{width}}  {shown:>10} {unit(p.key):<9} "
                f"{reading(p.key, v, self.fitted)}   (searched {p.lo:g} .. {p.hi:g})"
            )
        L.append("")
        lw = max([len("measurement")] + [len(m.label()) for m in self.measurements])
        L.append(
            f"  {'measurement':<{lw}} {'measured_cycles':>16} {'simulated_cycles':>17} "
            f"{'residual_pct':>13}"
        )
        for m, c, r in zip(self.measurements, self.simulated_cycles(), self.residuals_pct):
            L.append(f"  {m.label():<{lw}} {m.cycles:>16,.0f} {c:>17,.0f} {r:>+13.3f}")
        L.append("")
        tol = self.tolerance_pct
        if not self.fitted_within_tolerance:
            keys = ", ".join(p.key for p in self.free)
            reached = ", ".join(
                f"{r:+,.3f} % ({m.label()})"
                for m, r in zip(self.measurements, self.residuals_pct)
            )
            L.append(
                f"verdict: no values of {keys} in the search ranges reproduce the measurements "
                f"within {tol:g} %; the best fit reached residuals of {reached}"
            )
        elif not self.intervals:
            L.append(
                f"verdict: every measurement is within {tol:g} %; identifiability not assessed"
            )
        else:
            L.append(f"identifiability: where every measurement stays within {tol:g} %")
            for iv in self.intervals:
                L.append("  " + describe_interval(iv, self.values[iv.key], width))
            L.append("")
            if self.determined:
                L.append(
                    "verdict: the measurements determine every free key (one interval each, "
                    "inside its search range)"
                )
            else:
                undetermined = [iv.key for iv in self.intervals if not iv.determined]
                L.append(
                    f"verdict: the measurements do NOT determine {', '.join(undetermined)}: "
                    f"{len(self.good)} distinct fit(s) match every measurement within {tol:g} %"
                )
                L.extend("  " + line for line in fits_table(self.good, self.free))
        if self.proposal is not None:
            pr = self.proposal
            L.append("")
            gap = (
                f"; the {len(self.families)} families of fits by at least {pr.family_gap_pct:.1f} %"
                if pr.family_gap_pct is not None
                else ""
            )
            L.append(
                f"separating measurement: {pr.measurement.label()}  (the equally good fits "
                f"differ by up to {pr.spread_cycles:,.0f} cycles, {pr.spread_pct:.1f} %{gap})"
            )
            for v, c in pr.predictions:
                desc = ", ".join(_fmt_value(q.key, v[q.key]) for q in self.free)
                L.append(f"  {c:>14,.0f} cycles with {desc}")
        if self.out_path:
            L.append("")
            L.append(f"wrote {self.out_path}")
        return "\n".join(L)


def _fmt_value(key: str, v: float) -> str:
    return f"{key}={int(round(v))}" if _is_int_key(key) else f"{key}={v:.4g}"


def describe_interval(iv: Interval, fitted: float, width: int = 0) -> str:
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
    verdict = "determined" if iv.determined else "NOT determined"
    extra = f" [{'; '.join(flags)}]" if flags else ""
    return f"{iv.key:<{width}}  {where} {unit(iv.key)}: {verdict}{extra}"


def fits_table(points: list[FitPoint], free: list[FreeParam], limit: int = 16) -> list[str]:
    """The equally good fits, one line each (integer keys first)."""
    keys = [p.key for p in sorted(free, key=lambda p: not p.integer)]
    order = sorted(points, key=lambda g: tuple(g.values[k] for k in keys))
    head = "  ".join(f"{k:>22}" for k in keys) + f"  {'max_abs_residual_pct':>21}"
    rows = [head]
    for g in order[:limit]:
        cells = [
            f"{int(round(g.values[k])):>22}" if _is_int_key(k) else f"{g.values[k]:>22.5g}"
            for k in keys
        ]
        rows.append("  ".join(cells) + f"  {100 * g.worst:>21.3f}")
    if len(order) > limit:
        rows.append(f"... and {len(order) - limit} more")
    return rows


# ---------------------------------------------------------------------- identifiability
def _merge(segments: list[tuple[float, float]], rel: float = 1e-3) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(segments):
        if out and a <= out[-1][1] * (1 + rel) + 1e-12:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _allowed(key: str) -> tuple[float, float]:
    f = model_field(key)
    lo = f.metadata["lo"] if f.metadata["lo"] is not None else -math.inf
    hi = f.metadata["hi"] if f.metadata["hi"] is not None else math.inf
    return lo, hi


def _families(prob: _Problem, good: list[FitPoint], limit: int = 4) -> list[FitPoint]:
    """One representative (the best) per family of good fits: fits whose continuous values
    agree within 1 % are one family, whatever their integer keys."""
    families: list[FitPoint] = []
    for g in sorted(good, key=lambda g: g.cost):
        same = any(
            all(
                abs(g.values[p.key] - f.values[p.key]) <= 0.01 * max(abs(f.values[p.key]), 1e-12)
                for p in prob.cont
            )
            for f in families
        )
        if not same:
            families.append(g)
    return families[:limit]


def _intervals(
    prob: _Problem, good: list[FitPoint], families: list[FitPoint], tol: float
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
    out = []
    for p in prob.free:
        lo_allowed, hi_allowed = _allowed(p.key)
        if p.integer:
            vals = sorted({int(round(g.values[p.key])) for g in good})
            grid = sorted(
                {int(round(v)) for c in prob.combos() for k, v in c.items() if k == p.key}
            )
            pos = [grid.index(v) for v in vals]
            contiguous = pos == list(range(pos[0], pos[-1] + 1))
            segs = (
                [(float(vals[0]), float(vals[-1]))]
                if contiguous
                else [(float(v), float(v)) for v in vals]
            )
            at_search = (vals[0] == p.lo and p.lo > lo_allowed) or (
                vals[-1] == p.hi and p.hi < hi_allowed
            )
            determined = len(vals) == 1 and not at_search
            out.append(Interval(p.key, vals[0], vals[-1], segs, vals, at_search, determined))
        else:
            segs = _merge(segments[p.key])
            lo, hi = segs[0][0], segs[-1][1]
            # the profile stopped at the search range, not at a misfit: it may go on beyond
            at_search = hits[p.key] and (
                (math.isclose(lo, p.lo, rel_tol=1e-9) and p.lo > lo_allowed)
                or (math.isclose(hi, p.hi, rel_tol=1e-9) and p.hi < hi_allowed)
            )
            determined = len(segs) == 1 and not at_search
            out.append(Interval(p.key, lo, hi, segs, None, at_search, determined))
    return out, edge_points


def candidate_measurements(
    model: HardwareModel, free_keys: Iterable[str], measured: list[Measurement]
) -> list[Measurement]:
    """Runs a board can do: version, n, TILE_SIZE, schedule, the channels' request limit.

    Lengths: one tile per pass, four tiles and one element, and the longest length measured.
    """
    free_keys = set(free_keys)
    out: list[Measurement] = []
    tiles = [model.softmax.tile_bytes]
    if "softmax.tile_bytes" not in free_keys:
        tiles = sorted(
            {
                t
                for t in (1024, 4096, 16384, 65536, model.softmax.tile_bytes)
                if t <= model.tcm.bank_bytes
            }
        )
    windows: list[int | None] = [None]
    if "idma.max_outstanding" not in free_keys and "ddr.max_outstanding" not in free_keys:
        windows.append(1)  # max_pif_req is an idma_init() argument: firmware can lower it
    longest = max((m.n for m in measured), default=DEFAULT_N)
    for tile in tiles:
        # one tile per pass (copies alone on one channel), a few tiles, the longest measured
        for n in sorted({tile // 4, 4 * (tile // 4) + 1, longest}):
            for schedule in ("seed", "split"):
                for window in windows:
                    settings: dict[str, Any] = {}
                    if tile != model.softmax.tile_bytes:
                        settings["softmax.tile_bytes"] = tile
                    if schedule != model.softmax.schedule:
                        settings["softmax.schedule"] = schedule
                    if window is not None:
                        settings["idma.max_outstanding"] = window
                    out.append(Measurement("pingpong", math.nan, n, settings))
    for n in sorted({1024, longest}):
        out.append(Measurement("direct", math.nan, n, {}))
    seen = {(m.mode, m.n, tuple(sorted(m.settings.items()))) for m in measured}
    return [m for m in out if (m.mode, m.n, tuple(sorted(m.settings.items()))) not in seen]


def _propose(prob: _Problem, members: list[FitPoint], n_families: int) -> Proposal | None:
    """The candidate on which the fits differ most: first the one whose smallest difference
    between two families is largest (it tells every family apart), then the widest spread."""
    if len(members) < 2:
        return None
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
            preds.append(
                float(simulate(model, cand.mode, cand.n, data=False, fidelity=prob.fidelity).cycles)
            )
            prob.simulations += 1
        if not preds:
            continue
        fam = preds[:n_families]
        gap = (
            min(100 * abs(a / b - 1) for a, b in itertools.combinations(fam, 2))
            if len(fam) >= 2
            else None
        )
        lo, hi = min(preds), max(preds)
        spread_pct = 100 * (hi / lo - 1)
        score = (gap if gap is not None else 0.0, spread_pct)
        if score > best_score:
            best_score = score
            best = Proposal(
                cand, [(m.values, c) for m, c in zip(members, preds)], hi - lo, spread_pct, gap
            )
    return best


def _members(
    families: list[FitPoint],
    good: list[FitPoint],
    edges: list[FitPoint],
    free: list[FreeParam],
    limit: int = 8,
) -> list[FitPoint]:
    """Fits spanning the equally good set: one per family first, then the extremes of every
    key (the fits at the edges of the identifiability intervals)."""
    pool = good + edges
    chosen = list(families)
    for p in free:
        for pick in (min, max):
            chosen.append(pick(pool, key=lambda g: g.values[p.key]))
    distinct: list[FitPoint] = []
    for c in chosen:
        if not any(
            all(math.isclose(c.values[k], d.values[k], rel_tol=1e-4) for k in c.values)
            for d in distinct
        ):
            distinct.append(c)
    return distinct[: max(limit, len(families))]


# ------------------------------------------------------------------------------- API
def _best(prob: _Problem, points: list[FitPoint], tol: float) -> FitPoint:
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


def calibrate(
    model: HardwareModel,
    measurements: list[Measurement],
    free: list[FreeParam] | list[str] | Mapping[str, tuple[float, float]],
    fidelity: str = "burst",
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    identify: bool = True,
    propose: bool = True,
    progress: Progress = None,
) -> Calibration:
    """Fit the free keys to the measurements; with ``identify``, the intervals and verdict."""
    if not (isinstance(tolerance_pct, (int, float)) and 0 < tolerance_pct < 100):
        raise DspsimInputError(f"tolerance {tolerance_pct!r} %: must be a number between 0 and 100")
    params = _as_free(model, free)
    prob = _Problem(model, measurements, params, fidelity, progress)
    tol = tolerance_pct / 100.0
    points = prob.search()
    best = _best(prob, points, tol)
    good = [p for p in points if p.worst <= tol]
    intervals: list[Interval] = []
    edges: list[FitPoint] = []
    determined = False
    proposal = None
    families = _families(prob, good)
    if identify:
        intervals, edges = _intervals(prob, good, families, tol)
        determined = bool(intervals) and all(iv.determined for iv in intervals)
        if propose and good and not determined:
            prob.progress("calibrate: looking for the separating measurement")
            members = _members(families, good, edges, params)
            proposal = _propose(prob, members, len(families))
    fitted = model.with_overrides(
        {k: (int(round(v)) if _is_int_key(k) else v) for k, v in best.values.items()}
    )
    return Calibration(
        model=model,
        fitted=fitted,
        measurements=list(measurements),
        free=params,
        best=best,
        fidelity=fidelity,
        tolerance_pct=tolerance_pct,
        good=good,
        families=families,
        intervals=intervals,
        determined=determined,
        proposal=proposal,
        simulations=prob.simulations,
    )


@dataclass
class Fit:
    values: dict[str, float]
    residuals_pct: list[float]
    model: HardwareModel


def simulated_cycles(model: HardwareModel, m: Measurement, fidelity: str = "burst") -> int:
    if m.settings:
        model = model.with_overrides(m.settings)
    return simulate(model, m.mode, m.n, data=False, fidelity=fidelity).cycles


def fit(
    model: HardwareModel,
    measurements: list[Measurement],
    free: Mapping[str, tuple[float, float]],
    fidelity: str = "burst",
) -> Fit:
    """Best fit of the ``free`` keys (name -> (lo, hi)) to the measurements, no identifiability."""
    c = calibrate(model, measurements, free, fidelity=fidelity, identify=False)
    return Fit(values=dict(c.values), residuals_pct=c.residuals_pct, model=c.fitted)


SEED_FREE = MappingProxyType(
    {"ddr.latency_cycles": (1.0, 5000.0), "ddr.bytes_per_cycle": (0.01, 64.0)}
)


def seed_measurements() -> list[Measurement]:
    return [Measurement(mode, c) for mode, c in SEED_MEASUREMENTS_CYCLES.items()]


def fit_seed(model: HardwareModel | None = None, fidelity: str = "burst") -> Fit:
    """The J6 fit: ``ddr.latency_cycles`` and ``ddr.bytes_per_cycle`` to the seed's figures."""
    model = model or load_model()
    return fit(model, seed_measurements(), SEED_FREE, fidelity=fidelity)


# ---------------------------------------------------------------------- model file
_LINE = re.compile(
    r"^(?P<lead>\s*(?P<name>[A-Za-z0-9_]+)\s*=\s*)(?P<value>[^#\r\n]*?)"
    r"(?P<gap>\s*)(?P<comment>#.*)?$"
)
_SECTION = re.compile(r"^\s*\[(?P<name>[A-Za-z0-9_.]+)\]\s*(#.*)?$")


def _toml_value(key: str, v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if _is_int_key(key):
        return str(int(round(v)))
    return repr(float(f"{float(v):.6g}"))


def write_model_file(cal: Calibration, path: str | Path, date: _dt.date | None = None) -> Path:
    """Write the input model file with the fitted values (and any --set overrides) replaced."""
    src = Path(cal.model.source)
    try:
        text = src.read_text(encoding="utf-8")
    except OSError as e:
        raise DspsimInputError(
            f"--out: cannot read the input model file {str(src)!r} to copy it: "
            f"{e.__class__.__name__}"
        ) from None
    day = (date or _dt.date.today()).isoformat()
    targets = [m.spec() for m in cal.measurements]
    what = (
        ", ".join(targets)
        if len(targets) <= 4
        else (f"{len(targets)} measurements ({', '.join(targets[:3])}, ...)")
    )
    others = [p.key for p in cal.free]
    replace: dict[str, tuple[Any, str]] = {}
    for k, v in cal.model.overrides:
        replace[k] = (v, f"set with --set on {day}")
    for p in cal.free:
        v = cal.values[p.key]
        with_ = [o for o in others if o != p.key]
        comment = (
            f"fitted by `dspsim calibrate` on {day} to {what}"
            + (f" (with {', '.join(with_)})" if with_ else "")
            + f", {cal.fidelity} fidelity"
        )
        r = reading(p.key, v, cal.fitted)
        if r:
            comment += f"; {r}"
        iv = next((iv for iv in cal.intervals if iv.key == p.key), None)
        if not cal.fitted_within_tolerance:
            comment += (
                f"; NOT within {cal.tolerance_pct:g} % of every measurement (worst "
                f"{100 * cal.best.worst:.3g} %)"
            )
        elif iv is not None:
            comment += (
                f"; all measurements within {cal.tolerance_pct:g} % for {iv.lo:.4g} .. "
                f"{iv.hi:.4g}" + ("" if iv.determined else " (NOT determined)")
            )
        replace[p.key] = (int(round(v)) if p.integer else v, comment)
    lines = text.splitlines(keepends=True)
    section = None
    done = set()
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        sec = _SECTION.match(body)
        if sec:
            section = sec.group("name")
            continue
        mt = _LINE.match(body)
        if not mt or section is None:
            continue
        key = f"{section}.{mt.group('name')}"
        if key not in replace:
            continue
        value, comment = replace[key]
        lead = mt.group("lead") + _toml_value(key, value)
        old_col = len(body) - len(mt.group("comment") or "") if mt.group("comment") else 0
        pad = max(1, old_col - len(lead)) if old_col else 2
        lines[i] = f"{lead}{' ' * pad}# {comment}{ending}"
        done.add(key)
    missing = set(replace) - done
    if missing:
        raise DspsimInputError(
            f"--out: {sorted(missing)[0]} has no `name = value` line under its [section] in "
            f"{src}; cannot write the fitted value back"
        )
    out = Path(path)
    try:
        out.write_text("".join(lines), encoding="utf-8")
    except OSError as e:
        raise DspsimInputError(
            f"--out {str(out)!r}: cannot write: {e.__class__.__name__}"
        ) from None
    check = load_model(out)
    for key, (value, _) in replace.items():
        got = check.get(key)
        ok = (
            got == value
            if isinstance(value, (str, int))
            else math.isclose(got, value, rel_tol=1e-5)
        )
        if not ok:
            raise DspsimInputError(f"--out {out}: {key} reads back as {got!r}, not {value!r}")
    return out


# ----------------------------------------------------------------------- command line
CLI_DESCRIPTION = """\
Fit free model keys to measured cycle counts, report the residuals, how well the measurements
determine each key, and (when they do not) the measurement that would separate the fits.

measurement syntax (--measured, repeatable):
  MODE[,n=N][,KEY=VALUE ...]=CYCLES
  MODE is pingpong or direct; n defaults to 100000; KEY=VALUE sets a model key for that
  measurement only; everything after the LAST '=' is the cycle count ('_' allowed).
  e.g. --measured pingpong=5154293 --measured direct=7648254
       --measured "pingpong,n=50000,softmax.tile_bytes=8192=2600000"
--measured-csv FILE: columns mode,cycles, optional n, and model keys as further columns.
--free KEY[=LO:HI]: default range a factor of 100 either side of the model's value.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``dspsim calibrate`` (besides --model / --set)."""
    p.add_argument(
        "--measured",
        metavar="SPEC=CYCLES",
        action="append",
        default=[],
        help="a measurement, MODE[,n=N][,KEY=VALUE...]=CYCLES (repeatable)",
    )
    p.add_argument(
        "--measured-csv",
        metavar="FILE",
        action="append",
        default=[],
        help="CSV of measurements: columns mode,cycles[,n][,model keys...] (repeatable)",
    )
    p.add_argument(
        "--free",
        metavar="KEY[=LO:HI]",
        action="append",
        default=[],
        help="a model key to fit, optionally its range (repeatable)",
    )
    p.add_argument(
        "--tolerance-pct",
        type=float,
        default=DEFAULT_TOLERANCE_PCT,
        metavar="PCT",
        help="identifiability: every measurement within this %% (default 1)",
    )
    p.add_argument("--fidelity", choices=FIDELITIES, default="burst", help="simulation fidelity")
    p.add_argument("--out", metavar="FILE.toml", help="write the fitted model file")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_from_args(
    model: HardwareModel, args: argparse.Namespace, progress: Progress = None
) -> Calibration:
    """What ``dspsim calibrate`` does with its parsed arguments."""
    measurements = [parse_measurement(t) for t in args.measured]
    for path in args.measured_csv:
        measurements.extend(read_measurements_csv(path))
    free = [parse_free(t, model) for t in args.free]
    if args.out:  # before the fit, which may take minutes
        writable_file(args.out, "--out", (".toml",))
    cal = calibrate(
        model,
        measurements,
        free,
        fidelity=args.fidelity,
        tolerance_pct=args.tolerance_pct,
        progress=progress,
    )
    if args.out:
        cal.out_path = str(write_model_file(cal, args.out))
    return cal


def main() -> None:
    result = fit_seed()
    for k, v in result.values.items():
        print(f"{k} = {v:.6g}")
    for (mode, target), r in zip(SEED_MEASUREMENTS_CYCLES.items(), result.residuals_pct):
        print(f"{mode}: target {target} cycles, residual {r:+.4f} %")


if __name__ == "__main__":
    main()
