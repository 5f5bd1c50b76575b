"""A run as a Chrome Trace Event file (``.json`` or ``.json.gz``) for ui.perfetto.dev: a thread
per lane (pass, core, iDMA channels, TCM buffers; overlapping rows get extra threads,
``TCM buffer 0 (2)``), ``X`` slices per pass, trace row and TCM buffer state, ``C`` counters per
memory (bytes and requests in flight per requester) and for TCM occupancy, and flows from each
tile's input copy to its compute to its output copy.

**Time.** ``ts`` and ``dur`` are microseconds: each boundary rounded to a whole cycle, then to a
whole nanosecond at the model's clock (non-decreasing: slices apart in cycles stay apart), and a
``dur`` lowered by an ulp of the end where ``ts + dur`` in floating point would pass it.

**Size limit.** At most ``limit`` events, metadata included: counters are resampled first, then
slices, flows and TCM samples cut at a point in time (a slice across it ends there, ``"cut"``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import RunEngines, memory_label, shape_text
from dspsim.analysis.series import (
    assign_lanes,
    binned_mean,
    logged_memories,
    port_log_arrays,
    port_log_cut_cycle,
    requesters,
)
from dspsim.analysis.stalls import require_trace
from dspsim.analysis.tiles import tcm_segments, tile_table
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write, suffix_of, writable_file
from dspsim.results import json_default

DEFAULT_EVENT_LIMIT = 200_000
MIN_EVENT_LIMIT = 100
MIN_COUNTER_SAMPLES = 10  # per counter, when the counters must be resampled
TRACE_FORMATS = (".json", ".json.gz")
PID = 1
DDR_COUNTER = "DDR bytes in flight"  # J6's: each memory's counters are named by it
DDR_REQUESTS_COUNTER = "DDR requests in flight"
TCM_COUNTER = "TCM occupancy (bytes)"
PASS_THREAD = "pass"
LIMIT_NOTE = "every event in traceEvents counts, the metadata (M) events included"
_NAMES = {"wait_in": "wait for iDMA input", "wait_out": "wait for iDMA output",
          "setup": "program iDMA descriptor"}


def lane_name(base: str, lane: int) -> str:
    """The thread of an engine's (or stream's) ``lane``-th lane: ``base``, ``base (2)``, ..."""
    return base if lane == 0 else f"{base} ({lane + 1})"


def check_trace_path(path: str | Path) -> Path:
    """A writable ``.json`` or ``.json.gz`` path (checked before simulating)."""
    return writable_file(path, "trace file", TRACE_FORMATS)


def check_limit(limit: int) -> int:
    """``limit`` if it is an integer of at least :data:`MIN_EVENT_LIMIT` events."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
        limit = -1
    if limit < MIN_EVENT_LIMIT:
        raise DspsimInputError(
            f"trace limit {limit!r}: must be an integer of at least {MIN_EVENT_LIMIT} events")
    return int(limit)


class _Clock:
    """Cycles -> whole cycles -> integer nanoseconds (a non-decreasing map)."""

    def __init__(self, clock_mhz: float):
        self.clock_mhz = float(clock_mhz)

    def ns(self, cycles: Any) -> np.ndarray:
        """Cycles -> integer nanoseconds."""
        c = np.rint(np.asarray(cycles, float)).astype(np.int64)
        if self.clock_mhz.is_integer():  # exact: round half up of c * 1000 / MHz
            mhz = int(self.clock_mhz)
            return (2000 * c + mhz) // (2 * mhz)
        return np.rint(c * (1000.0 / self.clock_mhz)).astype(np.int64)

    def cycles(self, ns: float) -> float:
        """Nanoseconds back to cycles."""
        return ns * self.clock_mhz / 1000.0


def _us(ns: Any) -> np.ndarray:
    """Integer nanoseconds as the format's microseconds."""
    return np.asarray(ns, np.int64) / 1000.0


def _durations_us(ts_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """``dur`` so that ``ts + dur``, added in floating point, never passes ``end``."""
    ts, end = _us(ts_ns), _us(end_ns)
    dur = _us(np.asarray(end_ns) - np.asarray(ts_ns))
    for _ in range(8):
        over = ts + dur > end
        if not over.any():
            break
        dur[over] = np.maximum(dur[over] - np.spacing(end[over]), 0.0)
    return dur


def _slice_args(row, **extra) -> dict:
    """The ``args`` of one X event: tile, pass, bytes, buffer and its cycles."""
    return {"tile": int(row.tile), "pass": row.pass_name, "bytes": int(row.bytes),
            "buffer": int(row.buffer), "cycles": float(row.end_cycle - row.start_cycle),
            "start_cycle": float(row.start_cycle), "end_cycle": float(row.end_cycle), **extra}


def _slices(result: Any, clock: _Clock) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """All slices as a frame (thread, name, cat, ts_ns, end_ns, args, key) and the threads."""
    trace = require_trace(result)
    engines = RunEngines.of(result)
    rows = []
    for p in result.passes:
        s, e = float(p["start_cycle"]), float(p["end_cycle"])
        args = {"tile": -1, "pass": p["name"], "bytes": 0, "buffer": -1, "cycles": e - s,
                "start_cycle": s, "end_cycle": e}
        rows.append((PASS_THREAD, str(p["name"]), "pass", s, e, args, (p["name"], -1)))
    # "pass" is a Python keyword: itertuples would rename the field
    for r in trace.rename(columns={"pass": "pass_name"}).itertuples(index=False):
        if r.engine in engines.channels:
            name = f"{r.kind} t{r.tile}" if r.tile >= 0 else f"{r.kind} {r.what}"
        else:
            name = r.what if r.kind == "compute" else _NAMES.get(r.kind, r.kind)
        args = _slice_args(r, what=r.what)
        if r.kind == "compute":
            args["ddr_stall_cycles"] = float(r.ddr_stall_cycles)
        rows.append((engines.label(r.engine), name, r.kind, r.start_cycle, r.end_cycle, args,
                     (r.pass_name, r.tile)))
    segs = tcm_segments(trace, result.passes, engines).rename(columns={"pass": "pass_name"})
    for s in segs.itertuples(index=False):
        rows.append((f"TCM buffer {s.buffer}", f"t{s.tile} {s.state}", "tcm", s.start_cycle,
                     s.end_cycle, _slice_args(s, state=s.state), (s.pass_name, s.tile)))
    df = pd.DataFrame(rows, columns=["thread", "name", "cat", "start", "end", "args", "key"])
    df["ts_ns"] = clock.ns(df["start"].to_numpy(float))
    df["end_ns"] = clock.ns(df["end"].to_numpy(float))

    # a thread per lane: an engine whose rows overlap gets extra threads
    threads_in = set(df["thread"])
    tcm_threads = set(df.loc[df["cat"] == "tcm", "thread"])
    labels = [engines.label(e) for e in (engines.core, *engines.channels) if e is not None]
    order = [t for t in (PASS_THREAD, *labels) if t in threads_in]
    order += sorted(threads_in - set(order) - tcm_threads) + sorted(tcm_threads)
    threads: list[tuple[int, str]] = []  # (tid, name), numbered from 1 in this order
    df["tid"] = 0
    for base in order:
        sel = (df["thread"] == base).to_numpy()
        lanes = assign_lanes(df.loc[sel, "ts_ns"], df.loc[sel, "end_ns"])
        df.loc[sel, "tid"] = len(threads) + 1 + lanes
        threads += [(len(threads) + 1 + k, lane_name(base, k)) for k in range(lanes.max() + 1)]
    df = df.sort_values(["ts_ns", "end_ns", "tid"], kind="stable").reset_index(drop=True)
    return df, threads


def _flows(result: Any, slices: pd.DataFrame) -> list[dict[str, Any]]:
    """Flow pairs input copy -> compute -> output copy, per tile (the slices they bind and the
    category of the one each leaves)."""
    tiles = tile_table(result.trace, result.passes, RunEngines.of(result)).rename(
        columns={"pass": "pass_name"})
    by_key: dict[tuple, dict[str, list[int]]] = {}
    for i, (cat, key) in enumerate(zip(slices["cat"], slices["key"])):
        if cat in ("copy_in", "compute", "copy_out"):
            by_key.setdefault(key, {}).setdefault(cat, []).append(i)
    flows = []
    links = ((("copy_in", 0), ("compute", 0)), (("compute", -1), ("copy_out", 0)))
    for t in tiles.itertuples(index=False):
        parts = by_key.get((t.pass_name, t.tile), {})
        for (a, i), (b, j) in links:  # the first input copy to the first kernel, ...
            if a in parts and b in parts:
                flows.append({"from": parts[a][i], "to": parts[b][j], "cat": a,
                              "name": f"{t.pass_name} t{t.tile}"})
    return flows


def _tcm_counter(slices: pd.DataFrame) -> list[tuple[int, dict[str, float]]]:
    """(ts_ns, {buffer: bytes}) at every change of what the TCM buffers hold."""
    tcm = slices[slices["cat"] == "tcm"]
    if tcm.empty:
        return []
    held = tcm.groupby([tcm["args"].map(lambda a: a["buffer"]), "key"], sort=False).agg(
        start=("ts_ns", "min"), end=("end_ns", "max"),
        nbytes=("args", lambda a: a.iloc[0]["bytes"]),
    )
    buffers = sorted({b for b, _ in held.index})
    times = np.unique(np.concatenate([held["start"], held["end"]]))
    levels = []
    for b in buffers:
        h = held.loc[b]
        level = np.zeros(len(times))
        for s, e, nb in zip(h["start"], h["end"], h["nbytes"]):
            level[(times >= s) & (times < e)] += nb
        levels.append(level)
    return [(int(t), {f"buffer {b}": float(lv[k]) for b, lv in zip(buffers, levels)})
            for k, t in enumerate(times)]


class _DdrCounters:
    """A memory's two counters from its port log: bytes in flight, requests in flight per
    requester; exact (a sample per change) or resampled over equal bins, up to a time."""

    def __init__(self, result: Any, clock: _Clock, memory: str | None = None):
        self.log = port_log_arrays(result, memory)
        self.clock = clock
        self.issue_ns = clock.ns(self.log["issue"])
        self.done_ns = clock.ns(self.log["done"])
        engines = RunEngines.of(result)
        self.requesters = [(w, engines.label(w)) for w in requesters(result, self.log)]

    def _samples(self, times: list, nbytes: np.ndarray, counts: dict[str, np.ndarray]
                 ) -> tuple[list, list]:
        return ([(ts, {"bytes": float(v)}) for ts, v in zip(times, nbytes)],
                [(ts, {label: float(c[k]) for label, c in counts.items()})
                 for k, ts in enumerate(times)])

    def exact(self, end_ns: int) -> tuple[list, list]:
        """(bytes samples, requests samples), one per change up to ``end_ns``."""
        t = np.unique(np.concatenate([self.issue_ns, self.done_ns]))
        t = t[t <= end_ns]
        if not len(t):
            zero = {label: 0.0 for _, label in self.requesters}
            return [(0, {"bytes": 0.0})], [(0, zero)]

        def level(sel: np.ndarray, weights: np.ndarray) -> np.ndarray:
            out = np.zeros(len(t))
            for times, sign in ((self.issue_ns[sel], 1.0), (self.done_ns[sel], -1.0)):
                order = np.argsort(times, kind="stable")
                cum = np.concatenate([[0.0], np.cumsum(weights[sel][order])])
                out += sign * cum[np.searchsorted(times[order], t, side="right")]
            return out

        every = np.ones(len(self.issue_ns), bool)
        nbytes = level(every, self.log["bytes"])
        counts = {label: level(self.log["requester"] == who, np.ones(len(every)))
                  for who, label in self.requesters}
        return self._samples(t.tolist(), nbytes, counts)

    def resampled(self, end_ns: int, bins: int) -> tuple[list, list, str]:
        """Both counters as time-weighted means over ``bins`` equal bins up to ``end_ns``."""
        end_cycles = self.clock.cycles(end_ns)
        bins = max(1, min(bins, int(end_cycles)))
        edges = np.linspace(0.0, end_cycles, bins + 1)
        at = self.clock.ns(edges[:-1]).tolist()
        log = self.log
        mean = binned_mean(log["issue"], log["done"], log["bytes"], edges)
        counts = {label: binned_mean(log["issue"][sel], log["done"][sel], np.ones(sel.sum()),
                                     edges)
                  for who, label in self.requesters for sel in [log["requester"] == who]}
        how = f"resampled: time-weighted mean over {bins:,} bins of {end_cycles / bins:,.1f} cycles"
        return (*self._samples(at, mean, counts), how)


def _fit_memories(counters: dict[str, _DdrCounters], end_ns: int, room: int
                  ) -> dict[str, tuple[list, list, str]]:
    """Every memory's counters in at most ``room`` events together, and how each was sampled:
    the memories that need fewest first, each exact (one sample per change) when it fits its
    share of what is left (the rest split evenly), else resampled to that share."""
    exact = {m: c.exact(end_ns) for m, c in counters.items()}
    size = {m: len(b) + len(q) for m, (b, q) in exact.items()}
    out = {}
    left, todo = room, sorted(counters, key=lambda m: size[m])
    for k, m in enumerate(todo):
        share = left // (len(todo) - k)
        if size[m] <= share:
            out[m] = (*exact[m], "exact: one sample per change")
        else:
            nbytes, requests, how = counters[m].resampled(end_ns, max(share // 2, 1))
            out[m] = (nbytes, requests,
                      how + f" (exact would need {len(exact[m][0]):,} samples)")
        left -= len(out[m][0]) + len(out[m][1])
    return {m: out[m] for m in counters}


def _cut_time(slices: pd.DataFrame, flows: list[dict], tcm: list, room: int) -> int:
    """The latest time such that the slices starting before it, the flows both of whose
    slices end by it and the TCM samples up to it take at most ``room`` events."""
    ts = np.sort(slices["ts_ns"].to_numpy())
    ends = slices["end_ns"].to_numpy()
    flow_end = np.sort(np.array([max(ends[f["from"]], ends[f["to"]]) for f in flows], np.int64))
    tcm_t = np.sort(np.array([t for t, _ in tcm], np.int64))
    candidates = np.unique(np.concatenate([ts, ends]))
    used = (np.searchsorted(ts, candidates, side="left")  # non-decreasing in time
            + 2 * np.searchsorted(flow_end, candidates, side="right")
            + np.searchsorted(tcm_t, candidates, side="right"))
    fits = np.flatnonzero(used <= room)
    return int(candidates[fits[-1]] if len(fits) else candidates[0])


def trace_events(result: Any, limit: int = DEFAULT_EVENT_LIMIT) -> dict[str, Any]:
    """The trace object of ``result`` (a run with trace and port logs), at most ``limit``
    events."""
    limit = check_limit(limit)
    clock = _Clock(result.model.core.clock_mhz)
    slices, threads = _slices(result, clock)
    flows = _flows(result, slices)
    tcm_samples = _tcm_counter(slices)
    memories = logged_memories(result)
    counters = {m: _DdrCounters(result, clock, m) for m in memories}
    end_ns = int(clock.ns(result.cycles))
    n_slices, n_flows = len(slices), len(flows)
    meta = _metadata_events(result, threads)

    room = limit - len(meta)
    body = n_slices + 2 * n_flows + len(tcm_samples)
    slices_text = "all"
    least = 2 * MIN_COUNTER_SAMPLES * len(memories)
    if body + least > room:
        # cut slices, flows and TCM samples at a point in time; keep a share for the counters
        kept_for_counters = max(least, room // 5)
        cut_ns = _cut_time(slices, flows, tcm_samples, room - kept_for_counters)
        slices, flows, tcm_samples, n_clipped = _cut_at(cut_ns, slices, flows, tcm_samples)
        end_ns = cut_ns
        slices_text = (
            f"cut at {clock.cycles(cut_ns):,.0f} cycles to stay within the limit: kept "
            f"{len(slices):,} of {n_slices:,} slices ({n_clipped:,} end at the cut, marked "
            f"\"cut\") and {len(flows):,} of {n_flows:,} flows; TCM occupancy and the memory "
            "counters end at the cut too"
        )
    used = len(slices) + 2 * len(flows) + len(tcm_samples)
    fitted = _fit_memories(counters, end_ns, room - used)
    series = [(TCM_COUNTER, tcm_samples)]
    for m, (nbytes, requests, _) in fitted.items():  # J6's ddr: DDR_COUNTER, DDR_REQUESTS_COUNTER
        label = memory_label(m)
        series += [(f"{label} bytes in flight", nbytes), (f"{label} requests in flight", requests)]
    events = meta + _body_events(slices, flows, series)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": _other_data(result, limit, len(events), slices_text, fitted)}


def _metadata_events(result: Any, threads: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """The process's name, and each thread's name and place."""
    meta: list[dict[str, Any]] = [{
        "ph": "M", "pid": PID, "name": "process_name",
        "args": {"name": f"DSP subsystem ({result.model.name}, {result.op} {result.variant}, "
                         f"{shape_text(result.shape)}, {result.core})"}}]
    for t, name in threads:
        _meta(meta, PID, t, "thread_name", name, t)
    return meta


def _meta(ev: list[dict[str, Any]], pid: int, tid: int, kind: str, name: str,
          sort: int | None = None) -> None:
    """A process's or thread's name (and a thread's place) as metadata events."""
    ev.append({"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}})
    if sort is not None:
        ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                   "args": {"sort_index": sort}})


def _cut_at(cut_ns: int, slices: pd.DataFrame, flows: list[dict[str, Any]],
            tcm_samples: list[Any]) -> tuple[pd.DataFrame, list[dict[str, Any]], list[Any], int]:
    """The slices starting before ``cut_ns`` (those running past it end there, marked ``cut``),
    the flows between them ending by then, the TCM samples up to it; and how many were clipped."""
    kept = (slices["ts_ns"] < cut_ns).to_numpy()
    ends = slices["end_ns"].to_numpy()
    flows = [f for f in flows if kept[f["from"]] and kept[f["to"]]
             and max(ends[f["from"]], ends[f["to"]]) <= cut_ns]
    tcm_samples = [s for s in tcm_samples if s[0] <= cut_ns]
    clipped = kept & (ends > cut_ns)
    slices = slices.copy()
    slices["args"] = [a | {"cut": True} if c else a
                      for a, c in zip(slices["args"], clipped)]
    slices["end_ns"] = np.minimum(ends, cut_ns)
    index = np.cumsum(kept) - 1  # old row -> new row
    flows = [f | {"from": int(index[f["from"]]), "to": int(index[f["to"]])} for f in flows]
    return slices[kept].reset_index(drop=True), flows, tcm_samples, int(clipped.sum())


def _body_events(slices: pd.DataFrame, flows: list[dict[str, Any]],
                 series: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The slices (X), the flows between them (s, f) and the counters' samples (C)."""
    events: list[dict[str, Any]] = []
    ts_us = _us(slices["ts_ns"])
    dur_us = _durations_us(slices["ts_ns"].to_numpy(), slices["end_ns"].to_numpy())
    for r, ts, dur in zip(slices.itertuples(index=False), ts_us.tolist(), dur_us.tolist()):
        events.append({"ph": "X", "pid": PID, "tid": int(r.tid), "name": r.name, "cat": r.cat,
                       "ts": ts, "dur": dur, "args": r.args})
    mid = ((slices["ts_ns"] + slices["end_ns"]) // 2).to_numpy()
    tids = slices["tid"].to_numpy()
    for k, f in enumerate(flows):
        a, b = f["from"], f["to"]
        common = {"pid": PID, "id": k + 1, "cat": f["cat"], "name": f["name"]}
        events.append({"ph": "s", "tid": int(tids[a]), "ts": float(_us(mid[a]))} | common)
        events.append({"ph": "f", "bp": "e", "tid": int(tids[b]), "ts": float(_us(mid[b]))}
                      | common)
    for name, samples in series:
        for ts, values in samples:
            events.append({"ph": "C", "pid": PID, "name": name, "ts": float(_us(ts)),
                           "args": values})
    return events


def _other_data(result: Any, limit: int, n_events: int, slices_text: str,
                fitted: dict[str, Any]) -> dict[str, Any]:
    """The trace's ``otherData``: what was run, and how the events were made and counted."""
    return {
        "generator": "dspsim", "op": result.op, "variant": result.variant,
        "shape": list(result.shape),
        "engines": dict(result.engines),  # the op's core, its channels, the memories' ports
        "cycles": result.cycles, "clock_mhz": result.model.core.clock_mhz,
        "time_note": (
            "ts and dur are microseconds, as the format requires; each is a whole number of "
            "nanoseconds (cycle boundaries rounded to whole cycles, then to whole ns at "
            "clock_mhz); a dur may be lower by one unit in the last place of the slice's end "
            "so that ts + dur, added in floating point, never passes it"
        ),
        "event_limit": limit, "events": n_events, "limit_counts": LIMIT_NOTE,
        "slices": slices_text, "recorded": recorded_text(result),
        # per memory (J6: ddr_bytes_in_flight, ddr_requests_in_flight): how each was sampled
        **{f"{m}_{what}_in_flight": how for m, (_, _, how) in fitted.items()
           for what in ("bytes", "requests")},
        "flows": "each flow carries the category of the slice it leaves (copy_in, compute)",
        "manifest": getattr(result, "manifest", {}),
    }


def recorded_text(result: Any) -> str:
    """What of the run its logs hold (``--trace-limit`` cuts each at its own count)."""
    logs = [("trace", getattr(result, "trace_cut_cycle", None))]
    logs += [(f"{memory_label(m)} port log", port_log_cut_cycle(result, m))
             for m in logged_memories(result)]
    parts = [f"the {what} is whole only up to cycle {cut:,.0f}" for what, cut in logs
             if cut is not None]
    if not parts:
        return "the whole run"
    return ("; ".join(parts) + " (--trace-limit): after that, missing slices and zero counters "
            "mean not recorded, not idle")


def write_trace(result: Any, path: str | Path, limit: int = DEFAULT_EVENT_LIMIT) -> Path:
    """Write the trace of ``result`` atomically as JSON, gzipped for a ``.json.gz`` path."""
    p = check_trace_path(path)
    obj = trace_events(result, limit)
    data = json.dumps(obj, separators=(",", ":"), default=json_default).encode("utf-8")
    if suffix_of(p, TRACE_FORMATS) == ".json.gz":
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return atomic_write(p, lambda f: f.write(data), "trace file")
