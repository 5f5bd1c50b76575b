"""Numeric helpers over a run's intervals: lanes, the DDR port log as arrays, time integrals,
occupancy per time bin.

Shared by the tile analysis, the timeline figure and the Perfetto export; numpy only (no
plotting, no pandas).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.probes import PORT_LOG_FIELDS, PortLog


def assign_lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning: each interval, by start, in the lowest-numbered lane free
    by then (touching end-to-start is fine), using the fewest lanes; n log n (two heaps: the
    lanes in use by end, the free ones by number), so a backlog of many lanes stays cheap."""
    starts = np.asarray(starts, float)
    ends = np.asarray(ends, float)
    lanes = np.zeros(len(starts), dtype=int)
    busy: list[tuple[float, int]] = []  # (end, lane) of the lanes in use
    free: list[int] = []  # lanes free since an earlier start (starts only grow)
    count = 0
    for i in np.lexsort((ends, starts)).tolist():  # by start, zero-length intervals first
        s = starts[i]
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes[i] = lane
        heapq.heappush(busy, (float(ends[i]), lane))
    return lanes


def port_log_arrays(result: Any) -> dict[str, np.ndarray]:
    """The DDR port log as numpy columns, times relative to the op's timer start (cycles)."""
    log = getattr(result, "port_log", None)
    if log is None:
        raise DspsimInputError(
            "this run has no DDR port log: simulate it with port_log=True (the CLI does so for "
            "--timeline, --trace and --save)"
        )
    origin = float(getattr(result, "origin_cycle", 0.0))
    out = PortLog.of(log).columns()
    for f in PORT_LOG_FIELDS[:4]:
        out[f] = out[f] - origin
    out["bytes"] = out["bytes"].astype(float)
    return out


def interval_integral(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """``F(t) = sum_i weights_i * |[starts_i, ends_i] ∩ (-inf, t]|`` at every ``t``.

    Differences of F over bin edges give time-weighted sums per bin without a loop per interval:
    with intervals sorted by start and by end, F(t) = t W_s(t) - WS_s(t) - (t W_e(t) - WE_e(t)).
    """
    t = np.asarray(t, float)
    out = np.zeros_like(t)
    for edge, sign in ((np.asarray(starts, float), 1.0), (np.asarray(ends, float), -1.0)):
        order = np.argsort(edge, kind="stable")
        e, w = edge[order], np.asarray(weights, float)[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwe = np.concatenate([[0.0], np.cumsum(w * e)])
        k = np.searchsorted(e, t, side="right")
        out += sign * (t * cw[k] - cwe[k])
    return out


def binned_mean(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """Time-weighted mean, per bin, of the sum of ``weights`` of the intervals active then."""
    f = interval_integral(starts, ends, weights, edges)
    width = np.diff(edges)
    return np.divide(np.diff(f), width, out=np.zeros(len(width)), where=width > 0)


def occupancy(
    groups: list[tuple[np.ndarray, np.ndarray]], edges: np.ndarray
) -> np.ndarray:
    """Share of each bin's time spent in each group of intervals: an array (groups, bins).

    ``groups`` is one ``(starts, ends)`` pair per state of one lane (intervals of one state may
    not overlap each other). Where the groups of a bin add up to more than the whole bin (the
    lane's intervals overlap), the bin's shares are scaled down to fill it exactly, so that a
    stack of them never spills out of the lane.
    """
    edges = np.asarray(edges, float)
    shares = np.zeros((len(groups), len(edges) - 1))
    for k, (starts, ends) in enumerate(groups):
        starts = np.asarray(starts, float)
        if len(starts):
            shares[k] = binned_mean(starts, ends, np.ones(len(starts)), edges)
    total = shares.sum(axis=0)
    over = total > 1.0
    shares[:, over] /= total[over]
    return np.clip(shares, 0.0, 1.0)
