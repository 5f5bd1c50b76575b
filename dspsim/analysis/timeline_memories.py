"""The memories' part of the timeline figures: a pair of panels per memory (bandwidth, requests
in flight per requester), which memory a stalled kernel or a copy went to, what a cut log lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from dspsim.analysis import series
from dspsim.analysis import timeline_draw as draw
from dspsim.analysis.engines import RunEngines
from dspsim.analysis.stalls import stalled_memories
from dspsim.analysis.timeline_draw import memories_text, memory_label

SHORT_LABEL_CHARS = 8  # a memory's label up to this long shares a line of a panel's label


def label_gap(label: str) -> str:
    """What follows a memory's label in its panels' y labels: a space, or a line break."""
    return " " if len(label) <= SHORT_LABEL_CHARS else "\n"


def ddr_stall_handle(memories: Sequence[str] = ("ddr",)):
    """The legend entry of the core's stalls, naming the memories stalled on (J6: DDR)."""
    label = f"core stalled on {memories_text(memories) or 'memory'} (hatched)"
    return Patch(facecolor=draw.STALL_COLOUR, edgecolor=draw.STALL_HATCH_COLOUR,
                 hatch=draw.STALL_HATCH, label=label)


def stall_memories(result: Any, starts: Any, ends: Any) -> list[tuple[str, ...]]:
    """Per kernel row of the core, the memories it sent requests to during the row (port logs);
    where the logs show none (cut, or none kept), those the core stalled on."""
    fallback = tuple(stalled_memories(result)) or tuple(filter(None, [series.host_memory(result)]))
    if not len(starts):
        return []
    engines = RunEngines.of(result)
    if not series.memory_logs(result) or engines.core is None:
        return [fallback] * len(starts)
    found = series.memories_requested(result, engines.core, starts, ends)
    return [f or fallback for f in found]


def copy_memories(result: Any, engines: RunEngines) -> dict[str, tuple[str, ...]]:
    """Per copy kind, the memories the channels read (``copy_in``) or wrote (``copy_out``), from
    the port logs (none logged: none; the figure's labels then name the host's memory)."""
    out: dict[str, tuple[str, ...]] = {"copy_in": (), "copy_out": ()}
    for memory in series.memory_logs(result):
        log = series.port_log_arrays(result, memory)
        by_channel = np.isin(log["requester"], engines.channels)
        for kind, write in (("copy_in", False), ("copy_out", True)):
            if (by_channel & (log["is_write"] == write)).any():
                out[kind] += (memory,)
    return out


def requester_colour(who: str, engines: RunEngines) -> str:
    """The colour of a DDR requester: the core's, or its channel's by number."""
    if who == engines.core:
        return draw.CORE_REQUEST_COLOUR
    if who in engines.channels:
        colours = draw.CHANNEL_REQUEST_COLOURS
        return colours[engines.number(who) % len(colours)]
    return draw.OTHER_REQUEST_COLOUR


def ddr_series(result: Any, lo: float, hi: float, bins: int, memory: str | None = None
               ) -> dict[str, Any]:
    """A memory's port (default: the host's) per bin over [lo, hi]: read and write bytes/cycle (a
    request's bytes cross evenly over its data phase), mean requests in flight per requester."""
    log = series.port_log_arrays(result, memory)
    edges = np.linspace(lo, hi, bins + 1)
    span = log["data_end"] - log["data_start"]
    rate = np.divide(log["bytes"], span, out=np.zeros_like(span), where=span > 0)
    out: dict[str, Any] = {"edges": edges}
    for write, key in ((False, "read_bytes_per_cycle"), (True, "write_bytes_per_cycle")):
        sel = log["is_write"] == write
        out[key] = series.binned_mean(log["data_start"][sel], log["data_end"][sel], rate[sel],
                                      edges)
    out["requests_in_flight"] = {
        who: series.binned_mean(log["issue"][sel], log["done"][sel], np.ones(sel.sum()), edges)
        for who in series.requesters(result, log) for sel in [log["requester"] == who]}
    return out


def draw_ddr(ax_bw, ax_req, result: Any, lo: float, hi: float, bins: int, memory: str,
             named: bool) -> list[Any]:
    """A memory's bandwidth and requests in flight, binned over [lo, hi]; legend handles.
    ``named``: the legend's entries name the memory (a figure of one memory)."""
    label = memory_label(memory)
    prefix = f"{label} " if named else ""
    panel = ddr_series(result, lo, hi, bins, memory)
    edges = panel["edges"]
    handles: list[Any] = []
    model = getattr(result, "model", None)
    cfg = model.memories.get(memory) if model is not None else None  # its port's keys
    base = np.zeros(bins)
    for key, way, colour in (("read_bytes_per_cycle", "read", draw.COPY_COLOURS["copy_in"]),
                             ("write_bytes_per_cycle", "write", draw.COPY_COLOURS["copy_out"])):
        v = panel[key]
        if v.any():
            ax_bw.stairs(base + v, edges, baseline=base, fill=True, color=colour, alpha=0.85)
            handles.append(Patch(facecolor=colour, label=f"{prefix}{way} (bytes/cycle)"))
        base = base + v
    if cfg is not None:
        peak = cfg.policy.bytes_per_cycle  # the data path's rate
        ax_bw.axhline(peak, color="black", linestyle="--", linewidth=0.8)
        handles.append(Line2D([], [], color="black", linestyle="--",
                              label=f"{label} port peak {peak:g} bytes/cycle"))
        ax_bw.set_ylim(0, peak * 1.25)
    # a long name on a line of its own: the panel is too short for it and the words after it
    ax_bw.set_ylabel(f"{label}{label_gap(label)}data path\n(bytes/cycle)", fontsize=8)

    base = np.zeros(bins)
    engines = RunEngines.of(result)
    for who, v in panel["requests_in_flight"].items():
        if not v.any():  # no request of this engine in the window
            continue
        colour = requester_colour(who, engines)
        ax_req.stairs(base + v, edges, baseline=base, fill=True, color=colour, alpha=0.85)
        handles.append(Patch(facecolor=colour, label=f"{prefix}requests in flight: {who}"))
        base = base + v
    top = max(float(base.max()) if bins else 0.0, 1.0)
    if cfg is not None and top > cfg.max_outstanding * (1 + 1e-6):  # the rest wait (fp: 1e-6)
        ax_req.axhline(cfg.max_outstanding, color="black", linestyle="--", linewidth=0.8)
        handles.append(Line2D([], [], color="black", linestyle="--", label=f"{label} port "
                              f"slots: {cfg.max_outstanding} (the requests above wait for one)"))
    ax_req.set_ylim(0, top * 1.2)
    ax_req.set_ylabel(f"{label}{label_gap(label)}requests\nin flight (count)", fontsize=8)
    ax_req.text(0.995, 0.95, f"means over {draw.bin_text((hi - lo) / bins)}-cycle bins",
                transform=ax_req.transAxes, ha="right", va="top", fontsize=7, color="#555555")
    return handles


def draw_not_recorded(lanes, memory_axes: dict[str, list[Any]], result: Any, lo: float,
                      hi: float) -> list[Any]:
    """Cover what a ``--trace-limit`` run did not record (unknown, not idle): the lanes after
    ``trace_cut_cycle``, each memory's axes after its log's cut; the legend handle, if any."""
    style = {"facecolor": "#eeeeee", "edgecolor": "#999999", "hatch": "xx", "linewidth": 0,
             "zorder": 10}
    covered = []
    cuts = [([lanes], getattr(result, "trace_cut_cycle", None), "trace")]
    cuts += [(axes, series.port_log_cut_cycle(result, m), f"{memory_label(m or '')} port log")
             for m, axes in memory_axes.items()]
    for axes, cut, what in cuts:
        if cut is None or cut >= hi:
            continue
        for a in axes:
            a.axvspan(max(lo, cut), hi, **style)
        covered.append(f"{what} after cycle {cut:,.0f}")
    if not covered:
        return []
    return [Patch(label="not recorded (--trace-limit): " + ", ".join(covered), **style)]
