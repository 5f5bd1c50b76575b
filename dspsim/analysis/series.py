"""Numeric helpers over a run's intervals (numpy only): lanes, the memories' port logs as
arrays, time integrals and means per time bin."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from dspsim.analysis.engines import RunEngines
from dspsim.errors import DspsimInputError
from dspsim.probes import PORT_LOG_FIELDS, PortLog


def assign_lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning: each interval, by start, in the lowest-numbered lane free
    by then (touching end-to-start is fine), using the fewest lanes; n log n (two heaps)."""
    starts, ends = np.asarray(starts, float), np.asarray(ends, float)
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


def host_memory(result: Any) -> str | None:
    """The memory the run's host allocated its buffers from (``port_log`` is its log)."""
    model = getattr(result, "model", None)
    if model is not None:
        return model.host.memory
    ports = RunEngines.of(result).ports
    return ports[0] if ports else None


def memory_logs(result: Any) -> dict[str, Any]:
    """Every memory's port log the run kept, by memory name in the run's engine order."""
    logs = {m: log for m, log in (getattr(result, "port_logs", None) or {}).items()
            if log is not None}
    host = getattr(result, "port_log", None)
    if not logs and host is not None:
        logs = {host_memory(result) or "": host}
    order = {name: i for i, name in enumerate(getattr(result, "engines", None) or {})}
    return dict(sorted(logs.items(), key=lambda kv: order.get(kv[0], len(order))))


def logged_memories(result: Any) -> list[str]:
    """The memories a figure or a trace shows a port for: the host's (if logged, busy or not),
    and every other memory whose log holds a request."""
    host = host_memory(result)
    out = [m for m, log in memory_logs(result).items() if m == host or len(log)]
    if not out:
        raise _no_port_log("")
    return out


def _no_port_log(what: str) -> DspsimInputError:
    return DspsimInputError(f"this run has no{what} port log: simulate it with port_log=True "
                            "(the CLI does so for --timeline, --trace and --save)")


def port_log_cut_cycle(result: Any, memory: str) -> float | None:
    """Up to which cycle (from the op's timer start) ``memory``'s log is whole (None: whole;
    ``--trace-limit`` cuts each log at its own count)."""
    if memory == host_memory(result):
        return getattr(result, "port_log_cut_cycle", None)
    cut = getattr(memory_logs(result).get(memory), "cut_cycle", None)
    return None if cut is None else cut - float(getattr(result, "origin_cycle", 0.0))


def port_log_arrays(result: Any, memory: str | None = None) -> dict[str, np.ndarray]:
    """A memory's port log (default: the host memory's) as numpy columns, times in cycles from
    the op's timer start."""
    log = (getattr(result, "port_log", None) if memory is None
           else memory_logs(result).get(memory))
    if log is None:
        raise _no_port_log("" if memory is None else f" {memory!r}")
    origin = float(getattr(result, "origin_cycle", 0.0))
    out = PortLog.of(log).columns()
    for f in PORT_LOG_FIELDS[:4]:
        out[f] = out[f] - origin
    out["bytes"] = out["bytes"].astype(float)
    return out


def requesters(result: Any, log: dict[str, np.ndarray]) -> list[str]:
    """The requesters in a port log's columns, in the run's engine order (others by name)."""
    order = {name: i for i, name in enumerate(getattr(result, "engines", None) or {})}
    return sorted(set(log["requester"].tolist()), key=lambda w: (order.get(w, len(order)), w))


def memories_requested(result: Any, requester: str, starts: np.ndarray,
                       ends: np.ndarray) -> list[tuple[str, ...]]:
    """Per interval ``[starts[i], ends[i])`` (cycles from the op's timer start), the memories
    to which ``requester`` issued a request in it (the logged ones, in the run's order)."""
    starts, ends = np.asarray(starts, float), np.asarray(ends, float)
    hits = []
    for memory in memory_logs(result):
        log = port_log_arrays(result, memory)
        issue = np.sort(log["issue"][log["requester"] == requester])
        count = (np.searchsorted(issue, ends, side="left")
                 - np.searchsorted(issue, starts, side="left"))
        hits.append((memory, count > 0))
    return [tuple(m for m, hit in hits if hit[i]) for i in range(len(starts))]


def interval_integral(starts: np.ndarray, ends: np.ndarray, weights: np.ndarray,
                      t: np.ndarray) -> np.ndarray:
    """``F(t) = sum_i weights_i * |[starts_i, ends_i] ∩ (-inf, t]|`` at every ``t``: with the
    intervals sorted by start and by end, ``F(t) = t W_s(t) - WS_s(t) - (t W_e(t) - WE_e(t))``."""
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


def binned_mean(starts: np.ndarray, ends: np.ndarray, weights: np.ndarray,
                edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean, per bin, of the sum of ``weights`` of the intervals active then (one
    wholly outside the edges is left out: exactly 0, not the rounding of adding and taking away
    its length)."""
    starts, ends = np.asarray(starts, float), np.asarray(ends, float)
    inside = (ends > edges[0]) & (starts < edges[-1])
    f = interval_integral(starts[inside], ends[inside], np.asarray(weights, float)[inside],
                          edges)
    width = np.diff(edges)
    return np.divide(np.diff(f), width, out=np.zeros(len(width)), where=width > 0)
