"""Timeline (Gantt) figures of a run: lanes for the passes, the core (kernels, their stalled share
hatched, iDMA waits and programming), each iDMA channel and each TCM buffer's tiles by state;
below, each memory's bandwidth and requests in flight (:mod:`~dspsim.analysis.timeline_memories`);
and several runs compared on one cycle axis (:func:`compare_figure`). The x axis is cycles from
the op's timer start, microseconds on top. Lanes are drawn as per-pixel occupancy
(:mod:`~dspsim.analysis.timeline_draw`) on an Agg canvas (no pyplot), text plain.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dspsim.analysis import timeline_draw as draw
from dspsim.analysis.engines import COPY_KINDS, RunEngines, memory_label, shape_text
from dspsim.analysis.series import host_memory, logged_memories, memory_logs
from dspsim.analysis.stalls import core_breakdown, require_trace, stalled_memories
from dspsim.analysis.tiles import tcm_segments
from dspsim.analysis.timeline_draw import DPI, WAIT_COLOURS, Lanes, memories_text
from dspsim.analysis.timeline_memories import (
    copy_memories,
    ddr_stall_handle,
    draw_ddr,
    draw_not_recorded,
    stall_memories,
)
from dspsim.errors import DspsimInputError
from dspsim.ops.registry import OPS
from dspsim.paths import atomic_savefig, check_suffix, plain_text, writable_file

FIGURE_FORMATS = (".png", ".svg", ".pdf")  # every figure dspsim writes
RIGHT = 0.97  # figure fraction: leaves room for the last x tick label
OCCUPANCY_NOTE = (
    "each pixel column of a lane shows the share of its time in each state, stacked "
    f"(white: idle), so bars narrower than {draw.MIN_BAR_PX:g} px show as partial columns"
)
MIN_WINDOW_CYCLES = 1  # the model's time step: a narrower window shows nothing more
PASS_LINE_MIN_PX = 12.0  # pass boundaries closer than this (many rows) are not drawn
MEMORY_PANELS_IN = 2.0  # inches a further memory's pair of panels adds to the timeline


# ------------------------------------------------------------------------------ arguments
def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in cycles (underscores allowed) -> (start, end)."""
    start_s, sep, end_s = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        start, end = float(start_s.replace("_", "")), float(end_s.replace("_", ""))
    except ValueError:
        raise DspsimInputError(
            f"window {text!r}: expected START:END in cycles, e.g. 0:200000") from None
    if not (np.isfinite(start) and np.isfinite(end)):
        raise DspsimInputError(
            f"window {text!r}: START and END must be finite numbers of cycles, e.g. 0:200000")
    if start >= end:
        raise DspsimInputError(f"window {text!r}: START must be less than END (cycles)")
    return start, end


def check_window(window: tuple[float, float] | None, cycles: float) -> tuple[float, float]:
    """The window to draw: the whole run, or ``window`` if it lies inside the run."""
    if window is None:
        return 0.0, float(cycles)
    start, end = window
    text = f"window {start:,.10g}:{end:,.10g}"
    if start < 0 or end > cycles or start >= end:
        raise DspsimInputError(f"{text} is outside the run: allowed 0 <= START < END <= "
                               f"{cycles:,.10g} cycles")
    if end - start < MIN_WINDOW_CYCLES:
        raise DspsimInputError(f"{text} spans less than {MIN_WINDOW_CYCLES} cycle: nothing in "
                               "the model is finer; allowed END - START >= 1")
    return float(start), float(end)


def check_figure_path(path: str | Path, what: str = "timeline file") -> Path:
    """A writable figure path, ``.png``, ``.svg`` or ``.pdf`` (checked before simulating)."""
    return writable_file(path, what, FIGURE_FORMATS)


def save_figure(fig, path: str | Path, dpi: float = DPI, what: str = "figure") -> Path:
    """Save ``fig`` atomically, its extension picking the format (SVG keeps text as text)."""
    path = Path(path)
    fmt = check_suffix(path, what, FIGURE_FORMATS)
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
        return atomic_savefig(fig, path, what, dpi=dpi, format=fmt[1:])


# ------------------------------------------------------------------------------ lanes
def kernel_colours(core: pd.DataFrame) -> dict[str, str]:
    """A colour per kernel the core's rows call, in the order of their first call."""
    comp = core[core["kind"] == "compute"].sort_values("start_cycle", kind="stable")
    colours = draw.KERNEL_COLOURS
    return {str(k): colours[i % len(colours)] for i, k in enumerate(pd.unique(comp["what"]))}


def _lane_spec(engines: RunEngines, segs: pd.DataFrame) -> list[tuple[str, str]]:
    """(key, label) per lane, top to bottom: pass, the core, its channels (idle ones too), TCM."""
    lanes = [("pass", "pass")]
    lanes += [(f"engine:{e}", engines.label(e))
              for e in ([engines.core] if engines.core is not None else []) + [*engines.channels]]
    if not len(segs):
        return lanes + [("tcm", "TCM buffers")]
    for b in sorted(segs["buffer"].unique()):
        n_sub = int(segs.loc[segs["buffer"] == b, "lane"].max()) + 1
        lanes += [(f"tcm{b}.{k}", f"TCM buffer {b}" + (f" ({k + 1})" if n_sub > 1 else ""))
                  for k in range(n_sub)]
    return lanes


def draw_engine_lanes(
    ax, result: Any, lo: float, hi: float, width_px: float, tcm: bool = True
) -> tuple[list[Any], bool]:
    """Draw the pass, core, iDMA and (optionally) TCM lanes over [lo, hi]; the legend handles of
    what the window shows, and whether any lane was drawn as occupancy."""
    trace = require_trace(result)
    engines = RunEngines.of(result)
    segs = (tcm_segments(trace, result.passes, engines) if tcm
            else pd.DataFrame(columns=["buffer"]))
    lanes = [lane for lane in _lane_spec(engines, segs) if tcm or not lane[0].startswith("tcm")]
    ypos = {key: -i for i, (key, _) in enumerate(lanes)}
    if draw.fit_left(ax, [label for _, label in lanes]):  # y tick labels inside the figure
        width_px = ax.figure.get_figwidth() * DPI * ax.get_position().width
    lanes_draw = Lanes(ax, lo, hi, width_px)
    _draw_pass_lane(lanes_draw, result.passes, ypos["pass"])
    y = ypos[f"engine:{engines.core}"] if engines.core is not None else 0.0
    core = trace[engines.core_mask(trace)]
    handles = _draw_core_kernels(lanes_draw, result, engines, core, y)
    handles += _draw_core_waits(lanes_draw, core, y)
    handles += _draw_copy_lanes(lanes_draw, result, engines, trace, ypos)
    if tcm and len(segs):
        handles += _draw_tcm_lanes(lanes_draw, segs, ypos)
    elif tcm:
        _grey_text(ax, lo, hi, ypos["tcm"], "unused (no ping-pong buffers here)")
    lanes_draw.finish()
    ax.set_yticks([ypos[k] for k, _ in lanes], [label for _, label in lanes])
    ax.set_ylim(-len(lanes) + 0.5, 0.5)
    ax.tick_params(axis="y", length=0)
    for i in range(1, len(lanes)):
        ax.axhline(-i + 0.5, color="#bbbbbb", linewidth=0.4)
    return handles, lanes_draw.used_occupancy


def _grey_text(ax, lo: float, hi: float, y: float, text: str) -> None:
    ax.text(lo + 0.005 * (hi - lo), y, text, va="center", fontsize=8, color="#777777")


def _draw_pass_lane(lanes: Lanes, passes: Sequence[Any], y: float) -> None:
    """The passes in turn in each shade; labels never cross a pass boundary."""
    starts = np.array([float(p["start_cycle"]) for p in passes])
    ends = np.array([float(p["end_cycle"]) for p in passes])
    shades = len(draw.PASS_COLOURS)
    for shade, colour in enumerate(draw.PASS_COLOURS):
        lanes.bars(starts[shade::shades], ends[shade::shades], y, colour)
    lanes.labels(starts, ends, [(f"{p['name']}: {e - s:,.0f} cycles", str(p["name"]))
                                for p, s, e in zip(passes, starts, ends)], y, fontsize=8)


def _draw_core_kernels(lanes: Lanes, result: Any, engines: RunEngines, core: pd.DataFrame,
                       y: float) -> list[Any]:
    """The core's kernels (the longest first), their stalled share hatched on top and labelled
    with its memory; legend handles."""
    handles: list[Any] = []
    comp = core[core["kind"] == "compute"]
    colours = kernel_colours(core)
    stalled_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    stalled = comp[comp["ddr_stall_cycles"] > 0]
    on = dict(zip(stalled.index, stall_memories(result, stalled["start_cycle"].to_numpy(float),
                                                 stalled["end_cycle"].to_numpy(float))))
    shown_on: dict[str, None] = {}  # the memories of the stalled rows in the window
    total = (comp["end_cycle"] - comp["start_cycle"]).groupby(comp["what"], sort=False).sum()
    for kernel in total.sort_values(ascending=False, kind="stable").index:
        rows = comp[comp["what"] == kernel]
        s, e = rows["start_cycle"].to_numpy(float), rows["end_cycle"].to_numpy(float)
        dur = e - s
        stall = rows["ddr_stall_cycles"].to_numpy(float)
        share = np.clip(np.divide(stall, dur, out=np.zeros_like(dur), where=dur > 0), 0, 1)
        if lanes.bars(s, e, y, colours[str(kernel)], weight=1.0 - share):
            handles.append(Patch(facecolor=colours[str(kernel)], label=f"core: {kernel}"))
        stalled_rows.append((s[share > 0], e[share > 0], share[share > 0]))
        for i, f, v in zip(rows.index, share, lanes.visible(s, e)):
            if f > 0 and v:
                shown_on.update(dict.fromkeys(on.get(i, ())))
        texts = [(f"{kernel}: {100 * f:.1f}% of it stalled on "
                  f"{memories_text(on.get(i, ()), '+')}", str(kernel)) if f > 0 else str(kernel)
                 for i, f in zip(rows.index, share)]
        lanes.labels(s, e, texts, y, fontsize=8, pad_px=1 * DPI / 72,
                     bbox={"facecolor": "white", "alpha": 0.8, "pad": 1, "linewidth": 0})
    ss, se, sf = (np.concatenate(c) for c in zip(*stalled_rows)) if stalled_rows else ([],) * 3
    if lanes.bars(ss, se, y, draw.STALL_COLOUR, weight=sf, hatch=draw.STALL_HATCH):
        order = list(engines.ports)
        handles.append(ddr_stall_handle(sorted(shown_on, key=lambda m: (
            order.index(m) if m in order else len(order), m))))
    return handles


def _draw_core_waits(lanes: Lanes, core: pd.DataFrame, y: float) -> list[Any]:
    """The core lane's descriptor programming and iDMA waits; their legend handles."""
    handles = []
    for kind, colour, label in (
            ("setup", draw.SETUP_COLOUR, "core programming an iDMA descriptor"),
            ("wait_in", WAIT_COLOURS["wait_in"], "core waiting on iDMA input"),
            ("wait_out", WAIT_COLOURS["wait_out"], "core waiting on iDMA output")):
        rows = core[core["kind"] == kind]
        if lanes.bars(rows["start_cycle"], rows["end_cycle"], y, colour):
            handles.append(Patch(facecolor=colour, label=label))
    return handles


def _draw_copy_lanes(lanes: Lanes, result: Any, engines: RunEngines, trace: pd.DataFrame,
                     ypos: dict[str, float]) -> list[Any]:
    """One lane per iDMA channel, its copies labelled by tile; legend handles."""
    logged = copy_memories(result, engines)  # one pass over the port logs, for both uses
    host = tuple(filter(None, [host_memory(result)]))  # what a kind none logged went to
    ends = {kind: memories_text(m or host, "/") for kind, m in logged.items()}
    copy_labels = {"copy_in": f"iDMA input copy ({ends['copy_in']}→TCM)",
                   "copy_out": f"iDMA output copy (TCM→{ends['copy_out']})"}
    # copies that read an external memory and none into TCM: memory to memory
    if (trace["kind"] != "copy_in").all() and logged["copy_in"]:
        copy_labels["copy_out"] = f"iDMA copy ({ends['copy_in']}→{ends['copy_out']})"
    copies_shown: set[str] = set()
    for ch in engines.channels:
        y = ypos[f"engine:{ch}"]
        rows = trace[trace["engine"] == ch]
        if not lanes.visible(rows["start_cycle"], rows["end_cycle"]).any():  # none in the window
            _grey_text(lanes.ax, lanes.lo, lanes.hi, y, "idle")
            continue
        for kind in ("copy_in", "copy_out"):
            r = rows[rows["kind"] == kind]
            if lanes.bars(r["start_cycle"], r["end_cycle"], y, draw.COPY_COLOURS[kind],
                          edge="white"):
                copies_shown.add(kind)
            lanes.labels(r["start_cycle"], r["end_cycle"], [f"t{t}" for t in r["tile"]], y,
                         color="white")
    return [Patch(facecolor=draw.COPY_COLOURS[kind], label=copy_labels[kind])
            for kind in copy_labels if kind in copies_shown]


def _draw_tcm_lanes(lanes: Lanes, segs: pd.DataFrame, ypos: dict[str, float]) -> list[Any]:
    """One lane per TCM buffer half, coloured by the tile's state, tiles outlined and labelled;
    legend handles."""
    states_shown: set[str] = set()
    for (b, k), group in segs.groupby(["buffer", "lane"]):
        yk = ypos[f"tcm{b}.{k}"]
        if not lanes.visible(group["start_cycle"], group["end_cycle"]).any():  # as idle
            _grey_text(lanes.ax, lanes.lo, lanes.hi, yk, "empty")
            continue
        for state, colour in draw.TCM_COLOURS.items():
            r = group[group["state"] == state]
            if lanes.bars(r["start_cycle"], r["end_cycle"], yk, colour):
                states_shown.add(state)
        held = group.groupby(["pass", "tile"], sort=False).agg(
            start=("start_cycle", "min"), end=("end_cycle", "max"))
        lanes.outline(held["start"], held["end"], yk, "#555555", 0.5)
        lanes.labels(held["start"], held["end"], [f"t{t}" for _, t in held.index], yk,
                     fontsize=7)
    return [Patch(facecolor=colour, label=f"TCM tile {state}")
            for state, colour in draw.TCM_COLOURS.items() if state in states_shown]


# ------------------------------------------------------------------------------ axes, layout
def add_us_axis(ax, clock_mhz: float) -> None:
    """Microseconds at the model's clock on top of ``ax``."""
    sec = ax.secondary_xaxis("top", functions=(lambda c: c / clock_mhz,
                                               lambda us: us * clock_mhz))
    sec.set_xlabel("time (µs)", fontsize=9)
    sec.xaxis.set_major_formatter(draw.PlainFormatter())  # no offset on narrow windows
    sec.tick_params(labelsize=8)


def draw_pass_lines(axes, result: Any, lo: float, hi: float) -> str | None:
    """Dashed verticals at the pass boundaries inside (lo, hi), unless closer than
    :data:`PASS_LINE_MIN_PX` on average (they would hide every lane); the note saying which."""
    xs = [x for x in (float(p["start_cycle"]) for p in result.passes[1:]) if lo < x < hi]
    if not xs:
        return None
    width_px = axes[0].figure.get_figwidth() * axes[0].figure.dpi * axes[0].get_position().width
    if width_px / len(xs) < PASS_LINE_MIN_PX:
        return (f"{len(xs):,} pass boundaries, too close to draw (the pass lane alternates "
                "its shades; --window shows them)")
    for x in xs:
        for a in axes:
            a.axvline(x, color="black", linestyle=(0, (4, 3)), linewidth=0.8, zorder=5)
    return "dashed verticals: pass boundaries"


def tile_bytes(trace: pd.DataFrame) -> int | None:
    """The largest tile the run copied into TCM (bytes), or None when it has no tiles."""
    copies = trace[(trace["tile"] >= 0) & trace["kind"].isin(COPY_KINDS)]
    if copies.empty:
        return None
    return int(copies.groupby(["pass", "tile", "kind"], sort=False)["bytes"].sum().max())


def run_title(result: Any, lo: float, hi: float) -> str:
    """What ran, its tile and its cycles; the window when it is not the whole run."""
    model = result.model
    tile = tile_bytes(require_trace(result))
    op = OPS.get(result.op)  # (None: a saved run of an op file not loaded)
    unit = op.size_unit if op is not None else "float32"  # fc's tiles are int8 weights
    count = f" ({tile // 4:,} float32)" if tile and unit == "float32" else ""
    tile_text = f"tile {tile:,} bytes{count}" if tile else "no tiles"
    text = (f"{draw.figure_name(model.name)} {result.op}, {result.variant}, "
            f"{shape_text(result.shape)}, {tile_text}: {result.cycles:,} cycles = "
            f"{result.time_us:,.1f} µs at {model.core.clock_mhz:g} MHz")
    if lo > 0 or hi < result.cycles:
        text += f"\nwindow {lo:,.0f} .. {hi:,.0f} cycles"
    return text


def finish_layout(fig, gs, handles: list[Any], notes: Sequence[str], ncol: int = 5) -> None:
    """The footnote at the bottom right, the legend (one entry per label) above it, the axes
    above, every x tick label inside the figure."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    height = fig.bbox.height
    pad = 6.0 / height  # 6 px
    y = pad / 2
    if notes:
        note = fig.text(RIGHT, y, "; ".join(notes), ha="right", va="bottom", fontsize=7,
                        color="#555555")
        y = note.get_window_extent(renderer).y1 / height + pad
    unique: dict[str, Any] = {}
    for h in handles:
        unique.setdefault(h.get_label(), h)
    legend = fig.legend(handles=list(unique.values()), loc="lower center", ncol=ncol,
                        fontsize=8, frameon=False, bbox_to_anchor=(0.5, y))
    top = legend.get_window_extent(renderer).y1 / height + pad
    axes = [a for a in fig.axes if a.get_subplotspec() is not None and a.get_visible()]
    lowest = min(axes, key=lambda a: a.get_position().y0)
    below = lowest.get_position().y0 - lowest.get_tightbbox(renderer).y0 / height
    draw.update_grid(fig, gs, bottom=top + below)
    # an x tick label that would cross the figure's right edge ends at its tick instead
    for a in fig.axes + [child for ax in fig.axes for child in ax.child_axes]:
        for label in a.xaxis.get_ticklabels():
            if label.get_text() and label.get_window_extent(renderer).x1 > fig.bbox.width - 1:
                label.set_horizontalalignment("right")


# ------------------------------------------------------------------------------ figures
@plain_text
def timeline_figure(result: Any, window: tuple[float, float] | None = None) -> Figure:
    """The timeline of one run as a matplotlib Figure (not yet saved)."""
    require_trace(result)
    lo, hi = check_window(window, result.cycles)
    memories = logged_memories(result)
    fig, gs, ax, panels = _timeline_axes(memories)
    width_px = fig.get_figwidth() * DPI * ax.get_position().width
    handles, used_occupancy = draw_engine_lanes(ax, result, lo, hi, width_px)
    width_px = fig.get_figwidth() * DPI * ax.get_position().width  # the lanes may move it
    # one bin per pixel column: the finest mean the figure can show, so a pattern finer than
    # a bin cannot beat against the bins into a slower one that never happened
    for m, (ax_bw, ax_req) in panels.items():
        handles += draw_ddr(ax_bw, ax_req, result, lo, hi, bins=max(1, int(width_px)),
                            memory=m, named=len(memories) == 1)
    ax.set_xlim(lo, hi)
    below = [a for pair in panels.values() for a in pair]
    for a in [ax, *below[:-1]]:
        a.tick_params(axis="x", labelbottom=False)
    for a in below:
        a.tick_params(axis="y", labelsize=8)
        a.grid(axis="y", color="#dddddd", linewidth=0.5)
    below[-1].xaxis.set_major_formatter(draw.PlainFormatter())
    below[-1].set_xlabel("time (cycles from the op's timer start)", fontsize=9)
    below[-1].tick_params(axis="x", labelsize=8)
    add_us_axis(ax, result.model.core.clock_mhz)
    notes = [OCCUPANCY_NOTE] if used_occupancy else []
    idle = [m for m in memory_logs(result) if m not in panels]
    if idle:
        notes.append(f"no requests on {memories_text(idle)} (no panel)")
    handles += draw_not_recorded(ax, {m: list(pair) for m, pair in panels.items()}, result,
                                 lo, hi)
    pass_note = draw_pass_lines([ax, *below], result, lo, hi)
    if pass_note:
        notes.append(pass_note)
    fig.suptitle(run_title(result, lo, hi), fontsize=11,
                 y=1 - 0.025 * 9.5 / fig.get_figheight())
    finish_layout(fig, gs, handles, notes)
    return fig


def _timeline_axes(memories: Sequence[str]) -> tuple[Figure, Any, Any,
                                                   dict[str, tuple[Any, Any]]]:
    """The timeline's figure, grid, lanes axes and each memory's pair of panels below it."""
    # the headline figure (one memory) is 9.5 inches high; each further memory's pair of
    # panels adds its own height, the margins above and below keeping their size in inches
    height = 9.5 + MEMORY_PANELS_IN * (len(memories) - 1)
    fig = Figure(figsize=(16, height))
    gs = fig.add_gridspec(1 + 2 * len(memories), 1,
                          height_ratios=[6.2] + [1.3, 1.3] * len(memories), hspace=0.08,
                          left=0.075, right=RIGHT, top=1 - 0.115 * 9.5 / height,
                          bottom=0.165 * 9.5 / height)
    ax = fig.add_subplot(gs[0])
    panels = {m: (fig.add_subplot(gs[1 + 2 * k], sharex=ax),
                  fig.add_subplot(gs[2 + 2 * k], sharex=ax)) for k, m in enumerate(memories)}
    return fig, gs, ax, panels


def plot_timeline(
    result: Any, path: str | Path, window: tuple[float, float] | None = None
) -> Path:
    """Draw the timeline of ``result`` (a run with trace and port log) to a figure file."""
    p = check_figure_path(path)
    return save_figure(timeline_figure(result, window), p)


def default_timeline_path(result_path: str | Path) -> Path:
    """``run.json`` / ``run.json.gz`` -> ``run_timeline.png`` beside it."""
    p = Path(result_path)
    if not p.name:  # "/", ".": no file to name the figure after
        raise DspsimInputError(f"result file {str(p)!r} is not a regular file")
    stem = p.name[: -len(".json.gz")] if p.name.lower().endswith(".json.gz") else p.stem
    return p.with_name(f"{stem}_timeline.png")


# ------------------------------------------------------------------------------ runs compared
COMPUTE_SUMMARY_COLOUR = "#f2c14e"


@plain_text
def compare_figure(results: Sequence[Any]) -> Figure:
    """Runs above each other on one cycle axis, each the timeline's lanes without the TCM buffers
    and its memories' bandwidth; below, each core's cycles per part as bars as long as the runs."""
    longest = float(max(r.cycles for r in results))
    xmax = longest * 1.16  # room after the bars for their totals
    for r in results:
        require_trace(r)
    memories = [logged_memories(r) for r in results]
    heights = [h for m in memories for h in [3.0] + [1.0] * len(m)]
    heights.append(0.25 + 0.55 * len(results))
    extra = sum(len(m) - 1 for m in memories)  # bandwidth panels beyond one per run
    # one legend entry for the core's stalls, naming every memory a run stalled on
    stalled = list(dict.fromkeys(m for r in results for m in stalled_memories(r)))
    stall_handle = ddr_stall_handle(stalled)
    fig = Figure(figsize=(16, 3.4 * len(results) + 2.6 + 0.8 * extra))
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.35,
                          left=0.075, right=RIGHT, top=0.90, bottom=0.12)
    axes, handles, width_px, notes = _draw_runs(fig, gs, results, memories, xmax, stall_handle)
    ax_sum = fig.add_subplot(gs[-1], sharex=axes[0])
    drawn = _draw_core_summary(ax_sum, results, xmax, width_px)
    if "compute_cycles" in drawn:
        handles.append(Patch(facecolor=COMPUTE_SUMMARY_COLOUR,
                             label="core computing (summary bar)"))
    if "wait_ddr_cycles" in drawn:
        handles.append(stall_handle)
    ax_sum.set_xlim(0, xmax)
    ax_sum.xaxis.set_major_formatter(draw.PlainFormatter())
    ax_sum.set_xlabel("time (cycles from the op's timer start)", fontsize=9)
    add_us_axis(axes[0], results[0].model.core.clock_mhz)
    fig.suptitle("the same op, its versions on one time scale", fontsize=12, y=0.995)
    finish_layout(fig, gs, handles, ["red verticals: end of each run", *notes])
    return fig


def _draw_runs(fig: Figure, gs: Any, results: Sequence[Any], memories: list[list[str]],
               xmax: float, stall_handle: Any) -> tuple[list[Any], list[Any], float, list[str]]:
    """Each run's lanes and bandwidth panels, one run below the other: their axes, legend
    handles, the lanes' width (px) and footnotes."""
    # the legend names the memory when every run shows the same one memory (J6's DDR)
    named = len({tuple(m) for m in memories}) == 1 and len(memories[0]) == 1
    axes: list[Any] = []
    handles: list[Any] = []
    width_px = None
    any_occupancy = False
    pass_notes: dict[str, None] = {}
    row = 0
    for i, r in enumerate(results):
        ax = fig.add_subplot(gs[row], sharex=axes[0] if axes else None)
        bws = [fig.add_subplot(gs[row + 1 + k], sharex=ax) for k in range(len(memories[i]))]
        row += 1 + len(bws)
        width_px = width_px or fig.get_figwidth() * DPI * ax.get_position().width
        lane_handles, used = draw_engine_lanes(ax, r, 0.0, xmax, width_px, tcm=False)
        handles += [stall_handle if h.get_label().startswith("core stalled on") else h
                    for h in lane_handles]
        any_occupancy |= used
        for ax_bw, memory in zip(bws, memories[i]):
            twin = ax_bw.twinx()  # requests are drawn but hidden: only bandwidth here
            bw_handles = draw_ddr(ax_bw, twin, r, 0.0, float(r.cycles),
                                  bins=int(width_px // 2), memory=memory, named=named)
            handles += [h for h in bw_handles if "requests in flight" not in h.get_label()
                        and "port slots" not in h.get_label()]
            twin.set_visible(False)
            ax_bw.tick_params(axis="x", labelbottom=False)
            ax_bw.tick_params(axis="y", labelsize=8)
        ax.set_title(run_title(r, 0.0, float(r.cycles)), fontsize=10, loc="left",
                     pad=34 if i == 0 else 6)
        ax.tick_params(axis="x", labelbottom=False)
        pass_note = draw_pass_lines([ax, *bws], r, 0.0, float(r.cycles))
        if pass_note:
            pass_notes[pass_note] = None
        for a in (ax, *bws):
            a.axvline(r.cycles, color="#c44e52", linewidth=1.2)
        axes += [ax, *bws]
    notes = [*pass_notes, OCCUPANCY_NOTE] if any_occupancy else [*pass_notes]
    return axes, handles, width_px, notes


# the core-time summary's parts: the breakdown's key, its label, colour and hatch
_SUMMARY_PARTS = (("compute_cycles", "computing", COMPUTE_SUMMARY_COLOUR, None),
                  ("idma_setup_cycles", "programming iDMA", draw.SETUP_COLOUR, None),
                  ("wait_in_cycles", "waiting on iDMA input", WAIT_COLOURS["wait_in"], None),
                  ("wait_out_cycles", "waiting on iDMA output", WAIT_COLOURS["wait_out"], None),
                  ("wait_ddr_cycles", "stalled on", "#bbbbbb", "xx"),  # + the run's memories
                  ("other_cycles", "other", "#ffffff", None))


def _draw_core_summary(ax_sum: Any, results: Sequence[Any], xmax: float,
                       width_px: float) -> set[str]:
    """Each core's time per part at its true length (parts too short to label named after the
    bar); the parts drawn."""
    longest = float(max(r.cycles for r in results))
    drawn: set[str] = set()
    for i, r in enumerate(results):
        rows = core_breakdown(r.trace, r.passes, RunEngines.of(r))
        left, y, small = 0.0, -i, []
        for key, label, colour, hatch in _SUMMARY_PARTS:
            v = sum(p[key] for p in rows)
            if v <= 0:
                continue
            if key == "wait_ddr_cycles":
                on = ", ".join(map(memory_label, stalled_memories(r)))
                label = f"{label} {on or 'memory'}"
            ax_sum.barh(y, v, left=left, height=0.6, color=colour, hatch=hatch,
                        edgecolor="#333333" if hatch else colour, linewidth=0)
            drawn.add(key)
            pct = 100.0 * v / r.cycles
            if v / xmax * width_px > 90:
                ax_sum.text(left + v / 2, y, f"{label} {pct:.1f}%", ha="center", va="center",
                            fontsize=8, bbox={"facecolor": "white", "alpha": 0.85, "pad": 1,
                                              "linewidth": 0})
            else:
                small.append(f"{label} {pct:.2g}%")
            left += v
        text = f"{r.cycles:,} cycles" + (f"\n{', '.join(small)}" if small else "")
        ax_sum.text(left + longest * 0.005, y, text, va="center", fontsize=7.5)
    ax_sum.set_yticks([-i for i in range(len(results))],
                      [f"core time,\n{r.variant}" for r in results])
    ax_sum.set_ylim(-len(results) + 0.4, 0.6)
    ax_sum.tick_params(axis="y", length=0, labelsize=8)
    return drawn


def plot_compare(results: Sequence[Any], path: str | Path) -> Path:
    """Several runs on one cycle axis (a .png, .svg or .pdf file)."""
    if not results:
        raise DspsimInputError("compare: give at least one run")
    p = check_figure_path(path)
    return save_figure(compare_figure(results), p)
