"""Where the time goes: the core's cycles per pass, engine utilisation, and a per-tile table.

Everything here is computed from a run's trace (``simulate(..., trace=True)``); all times are DSP
cycles counted from the op's timer start.

Per pass, the core's span is split into disjoint parts:

``span_cycles``
    from the first to the last core trace row of the pass.
``compute_cycles``
    kernels executing, minus the part of them stalled on DDR.
``idma_setup_cycles``
    programming iDMA descriptors (``IDMA_COPY``).
``wait_in_cycles`` / ``wait_out_cycles``
    blocked in ``IDMA_WAIT`` on an input copy (DDR -> TCM) / an output copy (TCM -> DDR).
``wait_ddr_cycles``
    kernels stalled on uncached DDR accesses (the direct version).
``other_cycles``
    the part of the span no core row covers (0 for the seed's op).

so that ``compute + idma_setup + wait_in + wait_out + wait_ddr + other = span`` exactly.

Per tile (one row per tile per pass, :func:`tile_table`):

``dma_cycles``
    the durations of the tile's input copy and output copy, added.
``hidden_dma_cycles``
    the part of those copies during which the core was doing useful work (computing or
    programming descriptors): DMA time the double buffering hides behind the core's work.
``exposed_dma_cycles``
    ``dma_cycles - hidden_dma_cycles``: copy time during which the core was waiting (on this
    copy, on another one, or on DDR) or idle. A copy that runs while the core waits on the other
    buffer's copy is exposed: it hides behind another copy, not behind compute.
``wait_in_cycles`` / ``wait_out_cycles``
    core cycles in ``IDMA_WAIT`` on this tile's own input / output copy (the C's handles).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.probes import PORT_LOG_FIELDS

CORE_PARTS = (
    "compute_cycles",
    "idma_setup_cycles",
    "wait_in_cycles",
    "wait_out_cycles",
    "wait_ddr_cycles",
    "other_cycles",
)
OUTSIDE_PASSES = "(outside passes)"


def require_trace(result: Any) -> pd.DataFrame:
    trace = getattr(result, "trace", None)
    if trace is None:
        raise DspsimInputError(
            "this run has no trace: simulate it with trace=True (the CLI does so for --json, "
            "--timeline, --trace, --tiles and --save)"
        )
    return trace


def _pass_names(trace: pd.DataFrame, passes: list[dict[str, Any]] | None) -> list[str]:
    """Pass names in run order: the run's pass list first, then any the trace adds."""
    names = [p["name"] for p in passes or []]
    for name in pd.unique(trace["pass"]):
        label = name or OUTSIDE_PASSES
        if label not in names:
            names.append(label)
    return names


def core_breakdown(
    trace: pd.DataFrame, passes: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Per pass: the core's span and its parts (see the module docstring), in cycles."""
    core = trace[trace["engine"] == "core"]
    dur = core["end_cycle"] - core["start_cycle"]
    stall = core["ddr_stall_cycles"]
    kind = core["kind"]
    label = core["pass"].where(core["pass"] != "", OUTSIDE_PASSES)
    rows = []
    for name in _pass_names(trace, passes):
        sel = (label == name).to_numpy()
        if not sel.any():
            continue
        k, d, s = kind[sel], dur[sel], stall[sel]
        start = float(core["start_cycle"][sel].min())
        end = float(core["end_cycle"][sel].max())
        parts = {
            "compute_cycles": float((d - s)[k == "compute"].sum()),
            "idma_setup_cycles": float(d[k == "setup"].sum()),
            "wait_in_cycles": float(d[k == "wait_in"].sum()),
            "wait_out_cycles": float(d[k == "wait_out"].sum()),
            "wait_ddr_cycles": float(s[k == "compute"].sum()),
        }
        parts["other_cycles"] = (end - start) - float(d.sum())
        rows.append(
            {"pass": name, "start_cycle": start, "end_cycle": end, "span_cycles": end - start}
            | parts
        )
    return rows


def _clipped_busy(rows: pd.DataFrame, end_cycle: float) -> float:
    start = rows["start_cycle"].clip(0.0, end_cycle)
    end = rows["end_cycle"].clip(0.0, end_cycle)
    return float((end - start).sum())


def engine_utilisation(result: Any) -> dict[str, dict[str, float]]:
    """Busy cycles and utilisation (percent of the op's cycles) of every engine.

    core: computing or programming descriptors (not waiting, not stalled on DDR);
    iDMA channels: a descriptor in progress; DDR: the port's data path moving bytes.
    """
    trace = require_trace(result)
    total = float(result.cycles)
    out: dict[str, dict[str, float]] = {}
    core = trace[(trace["engine"] == "core") & trace["kind"].isin(["compute", "setup"])]
    busy = _clipped_busy(core, total) - float(core["ddr_stall_cycles"].sum())
    out["core"] = {"busy_cycles": busy}
    channels = sorted(
        {e for e in result.busy_cycles if e.startswith("idma")} | set(trace["engine"]) - {"core"}
    )
    for ch in channels:
        out[ch] = {"busy_cycles": _clipped_busy(trace[trace["engine"] == ch], total)}
    ddr = float(result.busy_cycles.get("ddr", 0))
    moved = float(sum(result.bytes.values()))
    out["ddr"] = {
        "busy_cycles": ddr,
        "achieved_bytes_per_cycle": moved / total if total else 0.0,
    }
    for entry in out.values():
        entry["utilisation_pct"] = 100.0 * entry["busy_cycles"] / total if total else 0.0
    return out


def stall_summary(result: Any) -> dict[str, Any]:
    """The ``stalls`` object of ``dspsim run --json``: per pass, totals, per engine."""
    per_pass = core_breakdown(require_trace(result), result.passes)
    total = {"span_cycles": sum(p["span_cycles"] for p in per_pass)}
    total |= {k: sum(p[k] for p in per_pass) for k in CORE_PARTS}
    return {
        "per_pass": per_pass,
        "total": total,
        "engines": engine_utilisation(result),
    }


# ------------------------------------------------------------------------------ per tile
def _busy_integral(core: pd.DataFrame):
    """``B(t)``: core cycles of useful work (compute net of DDR stalls, setup) before ``t``.

    Core rows never overlap, so B is a running sum over rows sorted by start.
    """
    busy = core[core["kind"].isin(["compute", "setup"])].sort_values("start_cycle")
    starts = busy["start_cycle"].to_numpy(float)
    dur = (busy["end_cycle"] - busy["start_cycle"]).to_numpy(float)
    stall = busy["ddr_stall_cycles"].to_numpy(float)
    weight = np.divide(dur - stall, dur, out=np.zeros_like(dur), where=dur > 0)
    before = np.concatenate([[0.0], np.cumsum(weight * dur)])

    def integral(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, t, side="right") - 1
        j = np.clip(i, 0, None)
        inside = np.clip(t - starts[j], 0.0, dur[j]) * weight[j] if len(starts) else 0.0
        return np.where(i >= 0, before[j] + inside, 0.0)

    return integral


TILE_COLUMNS = [
    "pass",
    "tile",
    "buffer",
    "bytes",
    "copy_in_channel",
    "copy_in_start_cycle",
    "copy_in_end_cycle",
    "compute_start_cycle",
    "compute_end_cycle",
    "copy_out_channel",
    "copy_out_start_cycle",
    "copy_out_end_cycle",
    "copy_in_cycles",
    "compute_cycles",
    "ddr_stall_cycles",
    "copy_out_cycles",
    "wait_in_cycles",
    "wait_out_cycles",
    "dma_cycles",
    "hidden_dma_cycles",
    "exposed_dma_cycles",
]


def tile_table(trace: pd.DataFrame, passes: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per tile per pass: its copies, its compute, hidden and exposed DMA cycles.

    Kernel calls outside any tile (the direct version) give one row per pass with tile -1.
    Missing parts (no output copy in the max pass) are NaN.
    """
    core = trace[trace["engine"] == "core"]
    copies = trace[trace["kind"].isin(["copy_in", "copy_out"])].copy()
    copies["channel"] = copies["engine"].str.removeprefix("idma").astype(int)
    copies["index"] = copies["what"].str.removeprefix("#").astype(int)
    integral = _busy_integral(core)
    start = copies["start_cycle"].to_numpy(float)
    end = copies["end_cycle"].to_numpy(float)
    copies["dur"] = end - start
    copies["hidden"] = integral(end) - integral(start) if len(copies) else 0.0

    # a wait names the descriptor it waits on ("ch0 #7"): charge it to that copy's tile
    waits = core[core["kind"].isin(["wait_in", "wait_out"])].copy()
    handle = waits["what"].str.extract(r"ch(\d+) #(\d+)").astype(float)
    waits["channel"], waits["index"] = handle[0], handle[1]
    waits["dur"] = waits["end_cycle"] - waits["start_cycle"]
    waits = waits.dropna(subset=["channel"]).astype({"channel": int, "index": int})
    waits = waits.merge(
        copies[["channel", "index", "pass", "tile"]],
        on=["channel", "index"],
        suffixes=("_core", ""),
    )

    key = ["pass", "tile"]
    parts = []
    for kind in ("copy_in", "copy_out"):
        g = copies[copies["kind"] == kind].groupby(key, sort=False)
        part = g.agg(
            **{
                f"{kind}_channel": ("channel", "first"),
                f"{kind}_start_cycle": ("start_cycle", "min"),
                f"{kind}_end_cycle": ("end_cycle", "max"),
                f"{kind}_cycles": ("dur", "sum"),
                f"{kind}_hidden": ("hidden", "sum"),
                f"{kind}_bytes": ("bytes", "sum"),
                f"{kind}_buffer": ("buffer", "first"),
            }
        )
        parts.append(part)
    comp = core[core["kind"] == "compute"].copy()
    comp["dur"] = comp["end_cycle"] - comp["start_cycle"]
    parts.append(
        comp.groupby(key, sort=False).agg(
            compute_start_cycle=("start_cycle", "min"),
            compute_end_cycle=("end_cycle", "max"),
            compute_cycles=("dur", "sum"),
            ddr_stall_cycles=("ddr_stall_cycles", "sum"),
            compute_bytes=("bytes", "max"),
            compute_buffer=("buffer", "first"),
        )
    )
    for kind in ("wait_in", "wait_out"):
        w = waits[waits["kind"] == kind].groupby(key, sort=False)["dur"].sum()
        parts.append(w.rename(f"{kind}_cycles").to_frame())
    table = pd.concat(parts, axis=1).reset_index()
    if table.empty:
        return pd.DataFrame(columns=TILE_COLUMNS)

    table["compute_cycles"] = table["compute_cycles"] - table["ddr_stall_cycles"].fillna(0.0)
    for col in ("wait_in_cycles", "wait_out_cycles", "ddr_stall_cycles"):
        table[col] = table[col].fillna(0.0)
    dma = table["copy_in_cycles"].fillna(0.0) + table["copy_out_cycles"].fillna(0.0)
    hidden = table["copy_in_hidden"].fillna(0.0) + table["copy_out_hidden"].fillna(0.0)
    table["dma_cycles"] = dma
    table["hidden_dma_cycles"] = hidden
    table["exposed_dma_cycles"] = dma - hidden
    table["bytes"] = (
        table["copy_in_bytes"].fillna(table["compute_bytes"]).fillna(0).astype("int64")
    )
    buffer = table["copy_in_buffer"].fillna(table["copy_out_buffer"])
    table["buffer"] = buffer.fillna(table["compute_buffer"]).fillna(-1).astype("int64")
    for col in ("copy_in_channel", "copy_out_channel"):
        table[col] = table[col].astype("Int64")

    order = {name: i for i, name in enumerate(_pass_names(trace, passes))}
    table["_order"] = table["pass"].map(lambda p: order.get(p or OUTSIDE_PASSES, len(order)))
    table = table.sort_values(["_order", "tile"], kind="stable")
    return table[TILE_COLUMNS].reset_index(drop=True)


# ------------------------------------------------------------------------------ text report
def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    first = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                      enumerate(zip(headers, widths)))
    lines = [first, "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                      enumerate(zip(r, widths)))
        )
    return "\n".join(lines)


def _num(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "-"
    return f"{v:,.{digits}f}"


def report_text(result: Any) -> str:
    """Readable tables: the core's time per pass, engine utilisation, and the tiles."""
    summary = stall_summary(result)
    model = getattr(result, "model", None)
    clock = f" at {model.core.clock_mhz:g} MHz" if model is not None else ""
    out = [
        f"{result.mode}: n = {result.n:,}, {result.cycles:,} cycles = {result.time_us:,.1f} us"
        + clock,
        "",
        "where the core's time goes, per pass (cycles, and % of the pass span)",
    ]
    headers = ["pass", "span_cycles"] + list(CORE_PARTS)
    rows = []
    for p in summary["per_pass"] + [{"pass": "total"} | summary["total"]]:
        span = p["span_cycles"]
        cells = [p["pass"], _num(span)]
        for k in CORE_PARTS:
            pct = 100.0 * p[k] / span if span else 0.0
            cells.append(f"{_num(p[k])} ({pct:4.1f}%)")
        rows.append(cells)
    out.append(_table(headers, rows))
    out += ["", "engine utilisation (busy cycles, % of the op's cycles)"]
    rows = [
        [name, _num(e["busy_cycles"]), _num(e["utilisation_pct"], 1)]
        for name, e in summary["engines"].items()
    ]
    out.append(_table(["engine", "busy_cycles", "utilisation_pct"], rows))
    ddr = summary["engines"]["ddr"]
    out.append(f"DDR achieved {ddr['achieved_bytes_per_cycle']:.4f} bytes/cycle over the op")

    tiles = tile_table(result.trace, result.passes)
    if len(tiles):
        out += ["", "tiles (cycles; hidden = copy time overlapped by the core's work)"]
        cols = [
            "pass",
            "tile",
            "buffer",
            "copy_in_start_cycle",
            "compute_start_cycle",
            "compute_end_cycle",
            "copy_out_end_cycle",
            "compute_cycles",
            "dma_cycles",
            "hidden_dma_cycles",
            "exposed_dma_cycles",
        ]
        rows = [
            [str(r["pass"]), str(r["tile"]), str(r["buffer"])] + [_num(r[c]) for c in cols[3:]]
            for _, r in tiles.iterrows()
        ]
        out.append(_table(cols, rows))
        dma, hidden = tiles["dma_cycles"].sum(), tiles["hidden_dma_cycles"].sum()
        if dma:
            out.append(
                f"all tiles: {_num(dma)} DMA cycles, {_num(hidden)} hidden "
                f"({100.0 * hidden / dma:.2f}%), {_num(dma - hidden)} exposed"
            )
    return "\n".join(out)


# ------------------------------------------------------------------------------ schedule helpers
# Shared by the timeline figure and the Perfetto export; numpy only (no plotting here).
def assign_lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning: a lane per interval so that no lane holds two overlapping
    intervals (touching end-to-start is fine), using the fewest lanes."""
    starts = np.asarray(starts, float)
    ends = np.asarray(ends, float)
    lanes = np.zeros(len(starts), dtype=int)
    lane_end: list[float] = []
    for i in np.lexsort((ends, starts)):  # by start, zero-length intervals first
        for k, free in enumerate(lane_end):
            if free <= starts[i]:
                lanes[i], lane_end[k] = k, ends[i]
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(ends[i])
    return lanes


TCM_STATES = ("filling", "ready", "computing", "computed", "draining")


def tcm_segments(trace: pd.DataFrame, passes: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """What each TCM buffer holds, as segments: one row per (tile, state).

    States: ``filling`` (input copy), ``ready`` (filled, core not there yet), ``computing``,
    ``computed`` (waiting for its output copy), ``draining`` (output copy). A tile occupies its
    buffer from the start of its input copy to the end of its output copy (or of its compute
    when nothing is written back). ``lane`` splits a buffer into sub-lanes where two tiles
    occupy it at once (a buffer refilled while it drains).
    """
    cols = ["buffer", "lane", "pass", "tile", "state", "start_cycle", "end_cycle", "bytes"]
    tiles = tile_table(trace, passes)
    tiles = tiles[(tiles["buffer"] >= 0) & tiles["copy_in_start_cycle"].notna()]
    if tiles.empty:
        return pd.DataFrame(columns=cols)
    hold_end = tiles["copy_out_end_cycle"].fillna(tiles["compute_end_cycle"])
    hold_end = hold_end.fillna(tiles["copy_in_end_cycle"])
    lanes = np.zeros(len(tiles), dtype=int)
    for b in tiles["buffer"].unique():
        sel = (tiles["buffer"] == b).to_numpy()
        lanes[sel] = assign_lanes(tiles["copy_in_start_cycle"][sel], hold_end[sel])
    bounds = {
        "filling": ("copy_in_start_cycle", "copy_in_end_cycle"),
        "ready": ("copy_in_end_cycle", "compute_start_cycle"),
        "computing": ("compute_start_cycle", "compute_end_cycle"),
        "computed": ("compute_end_cycle", "copy_out_start_cycle"),
        "draining": ("copy_out_start_cycle", "copy_out_end_cycle"),
    }
    parts = []
    for state, (a, b) in bounds.items():
        seg = pd.DataFrame(
            {
                "buffer": tiles["buffer"].to_numpy(),
                "lane": lanes,
                "pass": tiles["pass"].to_numpy(),
                "tile": tiles["tile"].to_numpy(),
                "state": state,
                "start_cycle": tiles[a].to_numpy(float),
                "end_cycle": tiles[b].to_numpy(float),
                "bytes": tiles["bytes"].to_numpy(),
            }
        )
        parts.append(seg[(seg["end_cycle"] > seg["start_cycle"])])
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["buffer", "start_cycle"], kind="stable").reset_index(drop=True)




def port_log_arrays(result: Any) -> dict[str, np.ndarray]:
    """The DDR port log as numpy columns, times relative to the op's timer start (cycles)."""
    log = getattr(result, "port_log", None)
    if log is None:
        raise DspsimInputError(
            "this run has no DDR port log: simulate it with port_log=True (the CLI does so for "
            "--timeline, --trace and --save)"
        )
    origin = float(getattr(result, "origin_cycle", 0.0))
    if not log:
        empty = np.zeros(0)
        return {f: empty for f in PORT_LOG_FIELDS[:5]} | {
            "is_write": np.zeros(0, bool),
            "requester": np.zeros(0, dtype=str),
        }
    cols = list(zip(*log))
    out = {f: np.asarray(cols[i], float) - origin for i, f in enumerate(PORT_LOG_FIELDS[:4])}
    out["bytes"] = np.asarray(cols[4], float)
    out["is_write"] = np.asarray(cols[5], bool)
    out["requester"] = np.asarray(cols[6], dtype=str)
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
