"""One row per tile per pass, what each TCM buffer holds when, the tiles CSV, and the readable
report of a run (the core's time per pass, engine utilisation, the tiles), from a run's trace;
cycles from the op's timer start. A tile's ``dma_cycles`` (its copies' durations, added)
split into ``hidden_dma_cycles`` (while the core computed or programmed descriptors) and
``exposed_dma_cycles`` (the rest: the core waiting or idle; hidden only behind another copy is
exposed); ``wait_in_cycles`` / ``wait_out_cycles``: the core in ``IDMA_WAIT`` on its copies.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import RunEngines, memory_label, shape_text
from dspsim.analysis.series import assign_lanes
from dspsim.analysis.stalls import (
    CORE_PARTS,
    OUTSIDE_PASSES,
    pass_names,
    require_trace,
    stall_summary,
)
from dspsim.ops.base import errors_text
from dspsim.paths import atomic_write_text, writable_file


def _busy_integral(core: pd.DataFrame):
    """``B(t)``: core cycles of useful work (compute net of DDR stalls, setup) before ``t``."""
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
    "pass", "tile", "buffer", "bytes",
    "copy_in_channel", "copy_in_start_cycle", "copy_in_end_cycle",
    "compute_start_cycle", "compute_end_cycle",
    "copy_out_channel", "copy_out_start_cycle", "copy_out_end_cycle",
    "copy_in_cycles", "compute_cycles", "ddr_stall_cycles", "copy_out_cycles",
    "wait_in_cycles", "wait_out_cycles", "dma_cycles", "hidden_dma_cycles", "exposed_dma_cycles",
]


def tile_table(trace: pd.DataFrame, passes: list[dict[str, Any]] | None = None,
               engines: RunEngines | None = None) -> pd.DataFrame:
    """One row per tile per pass: its copies, its compute, hidden and exposed DMA cycles.
    Kernel calls outside any tile give one row per pass with tile -1; missing parts are NaN;
    a copy's channel is its number among ``engines``'s channels (default: read off the trace)."""
    engines = engines or RunEngines.from_trace(trace)
    core = trace[engines.core_mask(trace)]
    copies = _copies(trace, engines, core)
    table = pd.concat(_tile_parts(core, copies), axis=1).reset_index()
    if table.empty:
        return pd.DataFrame(columns=TILE_COLUMNS)
    _tile_columns(table)
    order = {name: i for i, name in enumerate(pass_names(trace, passes))}
    table["_order"] = table["pass"].map(lambda p: order.get(p or OUTSIDE_PASSES, len(order)))
    table = table.sort_values(["_order", "tile"], kind="stable")
    return table[TILE_COLUMNS].reset_index(drop=True)


def _copies(trace: pd.DataFrame, engines: RunEngines, core: pd.DataFrame) -> pd.DataFrame:
    """The run's copies, each with its channel's number, its descriptor's index on it, its
    duration and the part of it the core's useful work hides."""
    copies = trace[trace["engine"].isin(engines.channels)
                   & trace["kind"].isin(["copy_in", "copy_out"])].copy()
    copies["channel"] = copies["engine"].map(engines.number).astype(int)
    copies["index"] = copies["what"].str.removeprefix("#").astype(int)
    integral = _busy_integral(core)
    start = copies["start_cycle"].to_numpy(float)
    end = copies["end_cycle"].to_numpy(float)
    copies["dur"] = end - start
    copies["hidden"] = integral(end) - integral(start) if len(copies) else 0.0
    return copies


def _waits(core: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    """The core's waits, each charged to the tile of the copy it names ("ch0 #7")."""
    waits = core[core["kind"].isin(["wait_in", "wait_out"])].copy()
    handle = waits["what"].str.extract(r"ch(\d+) #(\d+)").astype(float)
    waits["channel"], waits["index"] = handle[0], handle[1]
    waits["dur"] = waits["end_cycle"] - waits["start_cycle"]
    waits = waits.dropna(subset=["channel"]).astype({"channel": int, "index": int})
    return waits.merge(copies[["channel", "index", "pass", "tile"]], on=["channel", "index"],
                       suffixes=("_core", ""))


def _tile_parts(core: pd.DataFrame, copies: pd.DataFrame) -> list[pd.DataFrame]:
    """Per (pass, tile): its input copies, output copies, compute and waits (a frame each)."""
    key = ["pass", "tile"]
    parts = []
    for kind in ("copy_in", "copy_out"):
        g = copies[copies["kind"] == kind].groupby(key, sort=False)
        parts.append(g.agg(**{
            f"{kind}_channel": ("channel", "first"), f"{kind}_start_cycle": ("start_cycle", "min"),
            f"{kind}_end_cycle": ("end_cycle", "max"), f"{kind}_cycles": ("dur", "sum"),
            f"{kind}_hidden": ("hidden", "sum"), f"{kind}_bytes": ("bytes", "sum"),
            f"{kind}_buffer": ("buffer", "first")}))
    comp = core[core["kind"] == "compute"].copy()
    comp["dur"] = comp["end_cycle"] - comp["start_cycle"]
    parts.append(comp.groupby(key, sort=False).agg(
        compute_start_cycle=("start_cycle", "min"), compute_end_cycle=("end_cycle", "max"),
        compute_cycles=("dur", "sum"), ddr_stall_cycles=("ddr_stall_cycles", "sum"),
        compute_bytes=("bytes", "max"), compute_buffer=("buffer", "first")))
    waits = _waits(core, copies)
    for kind in ("wait_in", "wait_out"):
        w = waits[waits["kind"] == kind].groupby(key, sort=False)["dur"].sum()
        parts.append(w.rename(f"{kind}_cycles").to_frame())
    return parts


def _tile_columns(table: pd.DataFrame) -> None:
    """The table's derived columns, in place: compute net of stalls, DMA cycles hidden and
    exposed, the tile's bytes and buffer (missing counts 0)."""
    table["compute_cycles"] = table["compute_cycles"] - table["ddr_stall_cycles"].fillna(0.0)
    for col in ("wait_in_cycles", "wait_out_cycles", "ddr_stall_cycles"):
        table[col] = table[col].fillna(0.0)
    dma = table["copy_in_cycles"].fillna(0.0) + table["copy_out_cycles"].fillna(0.0)
    hidden = table["copy_in_hidden"].fillna(0.0) + table["copy_out_hidden"].fillna(0.0)
    table["dma_cycles"], table["hidden_dma_cycles"] = dma, hidden
    table["exposed_dma_cycles"] = dma - hidden
    table["bytes"] = table["copy_in_bytes"].fillna(table["compute_bytes"]).fillna(0).astype("int64")
    buffer = table["copy_in_buffer"].fillna(table["copy_out_buffer"])
    table["buffer"] = buffer.fillna(table["compute_buffer"]).fillna(-1).astype("int64")
    for col in ("copy_in_channel", "copy_out_channel"):
        table[col] = table[col].astype("Int64")


def tcm_segments(trace: pd.DataFrame, passes: list[dict[str, Any]] | None = None,
                 engines: RunEngines | None = None) -> pd.DataFrame:
    """What each TCM buffer holds, one row per (tile, state: filling, ready, computing, computed,
    draining); a tile computed on again by a later pass without a copy in is the same tile;
    ``lane`` splits a buffer where two tiles occupy it at once (refilled while it drains)."""
    cols = ["buffer", "lane", "pass", "tile", "state", "start_cycle", "end_cycle", "bytes"]
    tiles = tile_table(trace, passes, engines)
    tiles = tiles[tiles["buffer"] >= 0]
    loaded = tiles["copy_in_start_cycle"].notna().to_numpy()
    if not loaded.any():
        return pd.DataFrame(columns=cols)
    rows = tiles.to_dict("records")
    later = _tile_chains(rows, loaded)
    segs, starts, ends = [], [], []
    for head, parts in later.items():
        pieces = _states([rows[head], *parts])
        segs += [(head, *p) for p in pieces]
        starts.append(pieces[0][2])
        ends.append(max(p[3] for p in pieces))
    lane_of = _lanes(rows, starts, ends, list(later))
    out = pd.DataFrame([(int(rows[h]["buffer"]), lane_of[h], name, int(rows[h]["tile"]), state,
                         a, b, int(rows[h]["bytes"])) for h, state, name, a, b in segs if b > a],
                       columns=cols)
    return out.sort_values(["buffer", "start_cycle"], kind="stable").reset_index(drop=True)


def _tile_chains(rows: list[dict[str, Any]], loaded: np.ndarray) -> dict[int, list[dict[str, Any]]]:
    """Each loaded tile's row -> the later rows that continue it: a tile computed on without a
    copy in continues the latest open tile of that number and buffer (loaded, not yet copied
    out) whose compute ended by then."""
    opened: dict[tuple[int, int], int] = {}
    later: dict[int, list[dict[str, Any]]] = {}
    order = sorted(range(len(rows)), key=lambda i: _first_cycle(rows[i]))
    for i in order:
        r = rows[i]
        key = (int(r["tile"]), int(r["buffer"]))
        if loaded[i]:
            opened[key] = i
            later[i] = []
        elif key in opened and not pd.isna(r["compute_start_cycle"]):  # not loaded: no copy in
            head = opened[key]
            later[head].append(r)
            if not pd.isna(r["copy_out_start_cycle"]):
                del opened[key]  # copied out: what comes next is another tile
    return later


def _lanes(rows: list[dict[str, Any]], starts: list[float], ends: list[float],
           owner: list[int]) -> dict[int, int]:
    """Each tile's sub-lane in its buffer (tiles holding one buffer at once: separate lanes)."""
    lane_of: dict[int, int] = {}
    buffers = np.array([int(rows[h]["buffer"]) for h in owner])
    for b in np.unique(buffers):
        sel = np.flatnonzero(buffers == b)
        lanes = assign_lanes(np.asarray(starts)[sel], np.asarray(ends)[sel])
        lane_of.update({owner[k]: int(lane) for k, lane in zip(sel, lanes)})
    return lane_of


def _first_cycle(r: dict[str, Any]) -> float:
    starts = ("copy_in_start_cycle", "compute_start_cycle", "copy_out_start_cycle")
    return next((float(r[c]) for c in starts if not pd.isna(r[c])), float("inf"))


def _states(chain: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    """(state, pass, start, end) of a tile over its passes: filled once, computed on in each
    pass (``ready`` in between), then waiting for and draining through its output copy."""
    head = chain[0]
    out = [("filling", head["pass"], head["copy_in_start_cycle"], head["copy_in_end_cycle"])]
    held = head["copy_in_end_cycle"]
    last = head
    for r in chain:
        if pd.isna(r["compute_start_cycle"]):
            continue
        out.append(("ready", r["pass"], held, r["compute_start_cycle"]))
        out.append(("computing", r["pass"], r["compute_start_cycle"], r["compute_end_cycle"]))
        held, last = r["compute_end_cycle"], r
    if not pd.isna(last["copy_out_start_cycle"]):
        out.append(("computed", last["pass"], held, last["copy_out_start_cycle"]))
        out.append(("draining", last["pass"], last["copy_out_start_cycle"],
                    last["copy_out_end_cycle"]))
    return [(s, p, float(a), float(b)) for s, p, a, b in out if not (pd.isna(a) or pd.isna(b))]


def check_tiles_path(path: str | Path) -> Path:
    """A writable ``.csv`` path (checked before simulating)."""
    return writable_file(path, "tiles file", (".csv",))


def write_tiles_csv(result: Any, path: str | Path) -> Path:
    """One row per tile per pass (see :func:`tile_table`) as CSV, written atomically; no tile
    (kernel calls outside any tile) and no buffer are empty cells, not -1."""
    p = check_tiles_path(path)
    table = tile_table(require_trace(result), result.passes, RunEngines.of(result))
    for col in ("tile", "buffer"):
        table[col] = table[col].astype("Int64").mask(table[col] < 0)
    return atomic_write_text(p, table.to_csv(index=False, float_format="%.3f"), "tiles file")


# ------------------------------------------------------------------------------ the report

def table_text(headers: list[str], rows: list[list[str]], left: Collection[int] = (0,),
               rule: bool = True) -> str:
    """A text table, columns two spaces apart: the ``left`` columns (default the first)
    left-aligned, the others right-aligned, no trailing spaces; ``rule``: a line of dashes
    under the headers. The report's tables, and ``dspsim optimize``'s ranking (no rule)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    dashes = ["  ".join("-" * w for w in widths)] if rule else []
    return "\n".join([line(headers), *dashes, *map(line, rows)])


def _num(v: Any, digits: int = 0) -> str:
    """A number with thousands separators; ``-`` for a missing one."""
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "-"
    return f"{v:,.{digits}f}"


def report_text(result: Any) -> str:
    """Readable tables: the core's time per pass, engine utilisation, and the tiles."""
    summary = stall_summary(result)
    engines = RunEngines.of(result)
    out = _headline(result)
    out += ["", "where the core's time goes, per pass (cycles, and % of the pass span)"]
    out += _core_time(result, summary)
    out += ["", "engine utilisation (busy cycles, % of the op's cycles)"]
    rows = [[name, _num(e["busy_cycles"]), _num(e["utilisation_pct"], 1)]
            for name, e in summary["engines"].items()]
    out.append(table_text(["engine", "busy_cycles", "utilisation_pct"], rows))
    for port in engines.ports:
        rate = summary["engines"][port]["achieved_bytes_per_cycle"]
        out.append(f"{memory_label(port)} achieved {rate:.4f} bytes/cycle over the op")
    out += _tiles(result, engines)
    return "\n".join(out)


def _headline(result: Any) -> list[str]:
    """What ran and how long, the output's check, the run's warnings and hazards."""
    model = getattr(result, "model", None)
    clock = f" at {model.core.clock_mhz:g} MHz" if model is not None else ""
    out = [f"{result.op} {result.variant} on {result.core}: {shape_text(result.shape)}, "
           f"{result.cycles:,} cycles = {result.time_us:,.1f} us" + clock]
    o = getattr(result, "output", None)
    if o and "exact" in o:  # an integer or byte output, against the op's exact reference
        out.append(f"output: {'equals' if o['exact'] else 'DIFFERS FROM'} the reference bit for "
                   f"bit ({o.get('mismatch_count', 0):,} elements differ)")
    elif o and "max_rel_err" in o:  # the values the run computed, against the op's float64
        out.append(f"output: {o.get('nan_count', 0)} NaN, {o.get('inf_count', 0)} inf, "
                   f"{errors_text(o)}")
    for w in getattr(result, "warnings", None) or []:
        out.append(f"warning [{w['code']}] x{w.get('count', 1)}: {w['message']}")
    for h in getattr(result, "hazards", None) or []:
        out.append(f"hazard: {h['message']}")
    return out


def _core_time(result: Any, summary: dict[str, Any]) -> list[str]:
    """The core's time per pass and in all, and its stalls per memory."""
    headers = ["pass", "span_cycles"] + list(CORE_PARTS)
    rows = []
    for p in summary["per_pass"] + [{"pass": "total"} | summary["total"]]:
        span = p["span_cycles"]
        cells = [p["pass"], _num(span)]
        for k in CORE_PARTS:
            pct = 100.0 * p[k] / span if span else 0.0
            cells.append(f"{_num(p[k])} ({pct:4.1f}%)")
        rows.append(cells)
    out = [table_text(headers, rows)]
    stalled = {m: v for m, v in summary["on_memory"].items() if v > 0}
    if stalled:  # the run's own count per memory (the trace's rows do not split a stall)
        out.append("wait_ddr_cycles: the core stalled on " + ", ".join(
            f"{m} {_num(v)} cycles ({100.0 * v / result.cycles if result.cycles else 0.0:.1f}% "
            "of the op)" for m, v in stalled.items()))
    return out


_TILE_REPORT_COLUMNS = ["pass", "tile", "buffer", "copy_in_start_cycle", "compute_start_cycle",
                        "compute_end_cycle", "copy_out_end_cycle", "compute_cycles",
                        "dma_cycles", "hidden_dma_cycles", "exposed_dma_cycles"]


def _tiles(result: Any, engines: RunEngines) -> list[str]:
    """The tiles' table and their DMA cycles hidden and exposed (none: nothing)."""
    tiles = tile_table(result.trace, result.passes, engines)
    if not len(tiles):
        return []
    out = ["", "tiles (cycles; hidden = copy time overlapped by the core's work)"]
    cols = _TILE_REPORT_COLUMNS
    rows = [[str(r["pass"] or OUTSIDE_PASSES)] + [str(r[c]) if r[c] >= 0 else "-"
                                                   for c in ("tile", "buffer")]
            + [_num(r[c]) for c in cols[3:]] for _, r in tiles.iterrows()]
    out.append(table_text(cols, rows))
    tiles = tiles[tiles["tile"] >= 0]  # copies no tile owns (set-up before the timer) are not
    dma, hidden = tiles["dma_cycles"].sum(), tiles["hidden_dma_cycles"].sum()
    if dma:
        out.append(f"all tiles: {_num(dma)} DMA cycles, {_num(hidden)} hidden "
                   f"({100.0 * hidden / dma:.2f}%), {_num(dma - hidden)} exposed")
    return out
