"""The readable report of a run: the core's time per pass, engine utilisation, the tiles."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import RunEngines, memory_label, shape_text
from dspsim.analysis.stalls import CORE_PARTS, OUTSIDE_PASSES, stall_summary
from dspsim.analysis.tiles import tile_table
from dspsim.ops.base import errors_text


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
