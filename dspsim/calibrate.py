"""Fit free model parameters to measured cycle counts.

``fit(model, measurements, free)`` adjusts the ``free`` keys (within bounds) so that simulated
cycles match the measurements, by least squares on relative error (scipy). Each measurement is
a version (``pingpong`` / ``direct``), a length and optional model-key settings.

The J6 model's two fitted values come from::

    python -m dspsim.calibrate

which fits ``ddr.latency_cycles`` and ``ddr.bytes_per_cycle`` to the seed's two figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from dspsim.config import HardwareModel, load_model
from dspsim.sim import simulate

# The seed's profiling comment: cycles on J6 for 100,000 float32 elements.
SEED_MEASUREMENTS_CYCLES = {"pingpong": 5_154_293, "direct": 7_648_254}


@dataclass(frozen=True)
class Measurement:
    mode: str
    cycles: float
    n: int = 100_000
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fit:
    values: dict[str, float]
    residuals_pct: list[float]
    model: HardwareModel


def simulated_cycles(model: HardwareModel, m: Measurement) -> int:
    if m.settings:
        model = model.with_overrides(m.settings)
    return simulate(model, m.mode, m.n, data=False).cycles


def fit(
    model: HardwareModel,
    measurements: list[Measurement],
    free: dict[str, tuple[float, float]],
) -> Fit:
    """Least-squares fit of the ``free`` keys (name -> (lo, hi)) to the measurements."""
    keys = list(free)
    lo = np.array([free[k][0] for k in keys], float)
    hi = np.array([free[k][1] for k in keys], float)
    # Work in log space: the parameters span orders of magnitude and are positive.
    x0 = np.log(np.clip([float(model.get(k)) for k in keys], lo, hi))

    def with_values(logx: np.ndarray) -> HardwareModel:
        return model.with_overrides({k: float(math.exp(v)) for k, v in zip(keys, logx)})

    def residuals(logx: np.ndarray) -> np.ndarray:
        trial = with_values(logx)
        return np.array([simulated_cycles(trial, m) / m.cycles - 1.0 for m in measurements])

    sol = least_squares(
        residuals, x0, bounds=(np.log(lo), np.log(hi)), diff_step=1e-3, xtol=1e-10, ftol=1e-10
    )
    fitted = with_values(sol.x)
    return Fit(
        values={k: float(math.exp(v)) for k, v in zip(keys, sol.x)},
        residuals_pct=[100.0 * r for r in residuals(sol.x)],
        model=fitted,
    )


def fit_seed(model: HardwareModel | None = None) -> Fit:
    model = model or load_model()
    measurements = [Measurement(mode, c) for mode, c in SEED_MEASUREMENTS_CYCLES.items()]
    free = {"ddr.latency_cycles": (1.0, 5000.0), "ddr.bytes_per_cycle": (0.01, 64.0)}
    return fit(model, measurements, free)


def main() -> None:
    result = fit_seed()
    for k, v in result.values.items():
        print(f"{k} = {v:.6g}")
    for (mode, target), r in zip(SEED_MEASUREMENTS_CYCLES.items(), result.residuals_pct):
        print(f"{mode}: target {target} cycles, residual {r:+.4f} %")


if __name__ == "__main__":
    main()
