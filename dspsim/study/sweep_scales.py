"""The scales of sweep figures, each keeping a figure truthful at any scale: a line plot's
y-axis from 0 when its points hardly differ (a small spread is not drawn as a jump), a heatmap
panel's own colour scale (linear, logarithmic, diverging around a level; at least 1 % of its
largest value wide) and its log ticks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.colors import LogNorm, Normalize, TwoSlopeNorm

LOG_RANGE = 10.0  # a heatmap panel whose values span more than this factor: log colour scale
# a line plot whose values all lie within this fraction of the largest: its y-axis reaches 0
# (a zoom to the data's range would draw a flat curve as a jump) and the figure says the spread
FLAT_SPREAD = 0.01


def flat_axis(ax: Any, values: np.ndarray) -> None:
    """When the finite ``values`` lie within :data:`FLAT_SPREAD` of the largest: the y-axis
    from 0 and the spread written in the axes' lower left."""
    v = values[np.isfinite(values)]
    top = float(np.max(np.abs(v))) if v.size else 0.0
    spread = float(np.ptp(v)) / top if top > 0 else None
    if spread is None or spread >= FLAT_SPREAD:
        return
    low, high = float(v.min()), float(v.max())
    ax.set_ylim(0.0, high * 1.08) if low > 0 else ax.set_ylim(low * 1.08, 0.0)
    text = (f"all points equal: {_short_number(low)}" if spread == 0 else
            f"all within {100 * spread:.2g} % of each other: {_short_number(low)} to "
            f"{_short_number(high)}")
    ax.text(0.01, 0.02, text, transform=ax.transAxes, ha="left", va="bottom",
            fontsize="small", bbox={"facecolor": "white", "edgecolor": "0.6", "alpha": 0.9})


def _short_number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1e3 and float(v).is_integer() else f"{v:.6g}"


class LogTwoSlopeNorm(Normalize):
    """A diverging scale on a log axis: ``vmin`` -> 0, ``vcenter`` -> 0.5, ``vmax`` -> 1."""

    def __init__(self, vcenter: float, vmin: float, vmax: float):
        super().__init__(vmin, vmax)
        self._knots = np.log([vmin, vcenter, vmax])

    def __call__(self, value, clip=None):
        v = np.ma.masked_invalid(np.ma.asarray(value, float))
        out = np.interp(np.log(np.clip(v.filled(1.0), 1e-300, None)), self._knots,
                        [0.0, 0.5, 1.0])
        return np.ma.array(out, mask=np.ma.getmaskarray(v))

    def inverse(self, value):
        return np.exp(np.interp(value, [0.0, 0.5, 1.0], self._knots))


def panel_norm(values: np.ndarray, level: float | None) -> tuple[Normalize, str]:
    """A panel's (norm, colour map): diverging around ``level`` when the values straddle it,
    logarithmic when they span more than :data:`LOG_RANGE` times, else linear, at least
    :data:`FLAT_SPREAD` of the largest value wide (a tiny spread is not drawn as the map)."""
    v = values[np.isfinite(values)]
    if not v.size:
        return Normalize(0.0, 1.0), "viridis"
    vmin, vmax = float(v.min()), float(v.max())
    wide = vmin > 0 and vmax / vmin > LOG_RANGE
    if level is not None and vmin < level < vmax:
        return (LogTwoSlopeNorm(level, vmin, vmax) if wide
                else TwoSlopeNorm(level, vmin, vmax)), "RdBu"
    if wide:
        return LogNorm(vmin, vmax), "viridis"
    top = max(abs(vmin), abs(vmax))
    if vmax - vmin < FLAT_SPREAD * top or vmin == vmax:  # a tiny spread is not the whole map
        pad = (FLAT_SPREAD * top - (vmax - vmin)) / 2 or 0.5
        vmin, vmax = vmin - pad, vmax + pad
    return Normalize(vmin, vmax), "viridis"


def log_ticks(vmin: float, vmax: float, level: float | None = None) -> list[float]:
    """Colour bar ticks on a log scale: 1, 2 and 5 times the powers of ten within
    [vmin, vmax], both ends and ``level``."""
    ticks = {vmin, vmax} | ({level} if level is not None and vmin < level < vmax else set())
    for e in range(math.floor(math.log10(vmin)), math.ceil(math.log10(vmax)) + 1):
        ticks |= {m * 10.0**e for m in (1, 2, 5) if vmin * 1.5 < m * 10.0**e < vmax / 1.5}
    return sorted(ticks)
