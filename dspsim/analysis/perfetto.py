"""Export a run as a Chrome Trace Event Format file for Perfetto (ui.perfetto.dev) and
chrome://tracing.

The file is one JSON object ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``:

- one process (the DSP subsystem) with named threads (``M`` metadata events): ``core`` (the
  core the op ran on), ``iDMA ch0``, ``iDMA ch1`` (its channels, numbered by position),
  ``TCM buffer 0``, ``TCM buffer 1``. Events on one thread never
  overlap: where an engine's rows overlap (a TCM buffer refilled while it drains) the extra ones
  go to a thread of their own (``TCM buffer 0 (2)``);
- ``X`` complete events, one per trace row (kernel, wait, descriptor programming, copy) and per
  TCM buffer state; ``ts`` and ``dur`` are microseconds computed from cycles and the model's
  clock, rounded to whole nanoseconds so that back-to-back events stay back to back; ``args``
  carry ``tile``, ``pass``, ``bytes``, ``buffer`` and ``cycles`` (plus ``start_cycle``,
  ``end_cycle`` and, for kernels, ``ddr_stall_cycles``);
- ``C`` counter events: ``DDR bytes in flight`` (requests issued and not yet completed, from the
  DDR port log) and ``TCM occupancy`` (bytes held per buffer);
- flow events (``s`` -> ``f``, bound to the enclosing slices) linking each tile's input copy to
  its compute, and its compute to its output copy.

**Size limit.** Big runs would produce a trace the viewers choke on (the DDR counter alone has
two samples per DDR request), so the export keeps at most ``limit`` events
(:data:`DEFAULT_EVENT_LIMIT` unless told otherwise): slices and flows come first and are cut at a
point in time if they alone exceed their share; the DDR counter is exact when it fits what is
left, else resampled as time-weighted means over equal bins. What was kept, cut or resampled is
written to ``otherData`` in the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import RunEngines, shape_text
from dspsim.analysis.series import assign_lanes, binned_mean, port_log_arrays
from dspsim.analysis.stalls import require_trace
from dspsim.analysis.tiles import tcm_segments, tile_table
from dspsim.errors import DspsimInputError
from dspsim.paths import writable_file
from dspsim.results import json_default

DEFAULT_EVENT_LIMIT = 200_000
MIN_EVENT_LIMIT = 100
PID = 1
DDR_COUNTER = "DDR bytes in flight"
TCM_COUNTER = "TCM occupancy (bytes)"
FLOW_CATEGORY = "tile dataflow"

_NAMES = {
    "wait_in": "wait for iDMA input",
    "wait_out": "wait for iDMA output",
    "setup": "program iDMA descriptor",
}


def check_trace_path(path: str | Path) -> Path:
    return writable_file(path, "trace file", (".json",))


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
        limit = -1
    if limit < MIN_EVENT_LIMIT:
        raise DspsimInputError(
            f"trace limit {limit!r}: must be an integer of at least {MIN_EVENT_LIMIT} events"
        )
    return int(limit)


class _Clock:
    """Cycles -> integer nanoseconds -> microseconds as the format wants."""

    def __init__(self, clock_mhz: float):
        self.ns_per_cycle = 1000.0 / clock_mhz

    def ns(self, cycles: Any) -> np.ndarray:
        return np.rint(np.asarray(cycles, float) * self.ns_per_cycle).astype(np.int64)


def _us(ns: int) -> float:
    return int(ns) / 1000.0


def _slice_args(row, **extra) -> dict:
    """The ``args`` of one X event: tile, pass, bytes, buffer and its cycles."""
    return {
        "tile": int(row.tile),
        "pass": row.pass_name,
        "bytes": int(row.bytes),
        "buffer": int(row.buffer),
        "cycles": float(row.end_cycle - row.start_cycle),
        "start_cycle": float(row.start_cycle),
        "end_cycle": float(row.end_cycle),
        **extra,
    }


def _slices(result: Any, clock: _Clock) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """All slices as a frame (thread, name, cat, ts_ns, end_ns, args, key) and the threads."""
    trace = require_trace(result)
    engines = RunEngines.of(result)
    rows = []
    # "pass" is a Python keyword: itertuples would rename the field
    for r in trace.rename(columns={"pass": "pass_name"}).itertuples(index=False):
        if engines.is_channel(r.engine):
            name = f"{r.kind} t{r.tile}" if r.tile >= 0 else f"{r.kind} {r.what}"
        else:
            name = r.what if r.kind == "compute" else _NAMES.get(r.kind, r.kind)
        thread = engines.label(r.engine)
        args = _slice_args(r, what=r.what)
        if r.kind == "compute":
            args["ddr_stall_cycles"] = float(r.ddr_stall_cycles)
        rows.append(
            (thread, name, r.kind, r.start_cycle, r.end_cycle, args, (r.pass_name, r.tile))
        )
    segs = tcm_segments(trace, result.passes, engines).rename(columns={"pass": "pass_name"})
    for s in segs.itertuples(index=False):
        args = _slice_args(s, state=s.state)
        rows.append((f"TCM buffer {s.buffer}", f"t{s.tile} {s.state}", "tcm", s.start_cycle,
                     s.end_cycle, args, (s.pass_name, s.tile)))
    df = pd.DataFrame(rows, columns=["thread", "name", "cat", "start", "end", "args", "key"])
    df["ts_ns"] = clock.ns(df["start"])
    df["end_ns"] = clock.ns(df["end"])

    # a thread per lane: an engine whose rows overlap gets extra threads
    labels = [engines.label(e) for e in (engines.core, *engines.channels) if e is not None]
    order = [t for t in labels if t in set(df["thread"])]
    order += sorted(set(df["thread"]) - set(order) - set(df.loc[df["cat"] == "tcm", "thread"]))
    order += sorted(t for t in df.loc[df["cat"] == "tcm", "thread"].unique())
    lane_names = []
    df["lane"] = ""
    for base in order:
        sel = (df["thread"] == base).to_numpy()
        lanes = assign_lanes(df.loc[sel, "ts_ns"], df.loc[sel, "end_ns"])
        names = [base if k == 0 else f"{base} ({k + 1})" for k in lanes]
        df.loc[sel, "lane"] = names
        lane_names += [base if k == 0 else f"{base} ({k + 1})" for k in range(lanes.max() + 1)]
    threads = [(i + 1, name) for i, name in enumerate(lane_names)]
    tid = {name: t for t, name in threads}
    df["tid"] = df["lane"].map(tid)
    df = df.sort_values(["ts_ns", "end_ns", "tid"], kind="stable").reset_index(drop=True)
    return df, threads


def _flows(result: Any, slices: pd.DataFrame) -> list[dict[str, Any]]:
    """Flow pairs input copy -> compute -> output copy, per tile, with the slices they bind to."""
    tiles = tile_table(result.trace, result.passes, RunEngines.of(result))
    tiles = tiles.rename(columns={"pass": "pass_name"})
    by_key: dict[tuple, dict[str, list[int]]] = {}
    for i, (cat, key) in enumerate(zip(slices["cat"], slices["key"])):
        if cat in ("copy_in", "compute", "copy_out"):
            by_key.setdefault(key, {}).setdefault(cat, []).append(i)
    flows = []
    for t in tiles.itertuples(index=False):
        parts = by_key.get((t.pass_name, t.tile), {})
        chain = [("copy_in", 0), ("compute", 0), ("compute", -1), ("copy_out", 0)]
        ends = [parts[c][k] if c in parts else None for c, k in chain]
        for a, b in ((ends[0], ends[1]), (ends[2], ends[3])):
            if a is not None and b is not None:
                flows.append({"from": a, "to": b, "name": f"{t.pass_name} t{t.tile}"})
    return flows


def _mid_ns(slices: pd.DataFrame, i: int) -> int:
    return int((slices.at[i, "ts_ns"] + slices.at[i, "end_ns"]) // 2)


def _ddr_counter(result: Any, clock: _Clock, end_ns: int, budget: int) -> tuple[list, str]:
    """(ts_ns, bytes) samples of DDR bytes in flight up to ``end_ns``, within ``budget``."""
    log = port_log_arrays(result)
    if not len(log["issue"]):
        return [(0, 0.0)], "no DDR requests"
    t_ns = clock.ns(np.concatenate([log["issue"], log["done"]]))
    delta = np.concatenate([log["bytes"], -log["bytes"]])
    order = np.argsort(t_ns, kind="stable")
    t_ns, level = t_ns[order], np.cumsum(delta[order])
    last = np.r_[t_ns[1:] != t_ns[:-1], True]  # the level once every change at that ns is in
    t_ns, level = t_ns[last], level[last]
    keep = t_ns <= end_ns
    t_ns, level = t_ns[keep], level[keep]
    if len(t_ns) <= budget:
        return list(zip(t_ns.tolist(), level.tolist())), "exact: one sample per change"
    bins = max(budget, 1)
    end_cycles = end_ns / clock.ns_per_cycle
    edges = np.linspace(0.0, end_cycles, bins + 1)
    mean = binned_mean(log["issue"], log["done"], log["bytes"], edges)
    samples = list(zip(clock.ns(edges[:-1]).tolist(), mean.tolist()))
    return samples, (
        f"resampled: time-weighted mean over {bins:,} bins of {end_cycles / bins:,.1f} cycles "
        f"(exact would need {len(t_ns):,} samples)"
    )


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
    out = []
    for b in buffers:
        h = held.loc[b]
        level = np.zeros(len(times))
        for s, e, nb in zip(h["start"], h["end"], h["nbytes"]):
            level[(times >= s) & (times < e)] += nb
        out.append(level)
    return [
        (int(t), {f"buffer {b}": float(lv[k]) for b, lv in zip(buffers, out)})
        for k, t in enumerate(times)
    ]


def trace_events(result: Any, limit: int = DEFAULT_EVENT_LIMIT) -> dict[str, Any]:
    """The whole trace object for ``result`` (a run with trace and DDR port log)."""
    limit = check_limit(limit)
    model = result.model
    clock = _Clock(model.core.clock_mhz)
    slices, threads = _slices(result, clock)
    flows = _flows(result, slices)
    end_ns = int(clock.ns(result.cycles))

    meta: list[dict[str, Any]] = [
        {"ph": "M", "pid": PID, "name": "process_name",
         "args": {"name": f"DSP subsystem ({model.name}, {result.op} {result.variant}, "
                          f"{shape_text(result.shape)}, {result.core})"}},
    ]
    for t, name in threads:
        meta.append({"ph": "M", "pid": PID, "tid": t, "name": "thread_name",
                     "args": {"name": name}})
        meta.append({"ph": "M", "pid": PID, "tid": t, "name": "thread_sort_index",
                     "args": {"sort_index": t}})

    # slices and flows first; cut at a point in time if they alone exceed their share
    tcm_samples = _tcm_counter(slices)
    share = limit - len(meta) - min(len(tcm_samples), limit // 10) - MIN_EVENT_LIMIT // 2
    cut_ns: int | None = None
    n_slices, n_flows = len(slices), len(flows)
    if len(slices) + 2 * len(flows) > share:
        # each slice may bring up to two flow events: keep the earliest slices that fit
        per_slice = 1 + 2 * len(flows) / max(len(slices), 1)
        keep = max(int(share / per_slice), 1)
        cut_ns = int(slices.at[min(keep, len(slices) - 1), "ts_ns"])
    if cut_ns is not None:
        kept = slices["end_ns"] <= cut_ns
        flows = [f for f in flows if kept[f["from"]] and kept[f["to"]]]
        slices = slices[kept]
        tcm_samples = [s for s in tcm_samples if s[0] <= cut_ns]
        end_ns = cut_ns
    events = list(meta)
    for r in slices.itertuples(index=False):
        events.append({"ph": "X", "pid": PID, "tid": int(r.tid), "name": r.name, "cat": r.cat,
                       "ts": _us(r.ts_ns), "dur": _us(r.end_ns - r.ts_ns), "args": r.args})
    all_slices = slices
    for k, f in enumerate(flows):
        a, b = f["from"], f["to"]
        common = {"pid": PID, "id": k + 1, "cat": FLOW_CATEGORY, "name": f["name"]}
        events.append({"ph": "s", "tid": int(all_slices.at[a, "tid"]),
                       "ts": _us(_mid_ns(all_slices, a))} | common)
        events.append({"ph": "f", "bp": "e", "tid": int(all_slices.at[b, "tid"]),
                       "ts": _us(_mid_ns(all_slices, b))} | common)
    for ts, values in tcm_samples:
        events.append({"ph": "C", "pid": PID, "name": TCM_COUNTER, "ts": _us(ts),
                       "args": values})
    budget = max(limit - len(events), 1)
    ddr, ddr_how = _ddr_counter(result, clock, end_ns, budget)
    for ts, value in ddr:
        events.append({"ph": "C", "pid": PID, "name": DDR_COUNTER, "ts": _us(ts),
                       "args": {"bytes": value}})

    other = {
        "generator": "dspsim",
        "op": result.op,
        "variant": result.variant,
        "shape": list(result.shape),
        "engines": dict(result.engines),  # the op's core, its channels and the DDR port
        "cycles": result.cycles,
        "clock_mhz": model.core.clock_mhz,
        "time_note": "ts and dur are microseconds = cycles / clock_mhz, rounded to 1 ns",
        "event_limit": limit,
        "events": len(events),
        "slices": (
            "all"
            if cut_ns is None
            else f"cut at {cut_ns / clock.ns_per_cycle:,.0f} cycles to stay within the limit: "
            f"kept {len(slices):,} of {n_slices:,} slices and {len(flows):,} of {n_flows:,} flows"
        ),
        "ddr_bytes_in_flight": ddr_how,
        "manifest": getattr(result, "manifest", {}),
    }
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write_trace(result: Any, path: str | Path, limit: int = DEFAULT_EVENT_LIMIT) -> Path:
    """Write the trace of ``result`` to a ``.json`` file; returns the path."""
    p = check_trace_path(path)
    obj = trace_events(result, limit)
    try:
        with open(p, "w", encoding="utf-8") as f:
            json.dump(obj, f, separators=(",", ":"), default=json_default)
    except OSError as e:
        raise DspsimInputError(f"cannot write {str(p)!r}: {e.strerror or e}") from None
    return p
