"""Timeline (Gantt) figures of a run: one lane per engine, each memory's port below.

Lanes, top to bottom:

- **pass**: the op's passes and their spans;
- **core** (the core the op ran on): kernels, a colour per kernel in the order of its first
  call; kernels stalled on memory (grey, hatched: an uncached kernel's stalls are spread over
  all of its accesses, so they have no interval of their own: a kernel row stalled for a share
  ``f`` of its time counts ``1 - f`` as its kernel and ``f`` as stalled, and its label gives
  ``f`` and the memory: the one the core sent requests to during the kernel, from the port
  logs); waiting on an input copy, on an output copy; descriptor programming;
- **iDMA ch0, ch1, ...** (the core's channels, numbered by position): input copies
  (memory -> TCM) and output copies (TCM -> memory), tile numbers;
- **TCM buffer 0, 1, ...**: which tile each buffer holds and whether it is filling, ready,
  computing, computed (waiting for its output copy) or draining; a buffer that holds two tiles
  at once (refilled while it drains) is split into sub-lanes;
- per memory (J6: its DDR): **data path**: achieved bandwidth (bytes/cycle, reads and writes
  stacked) per time bin; **requests in flight**: mean outstanding requests per time bin, by
  requester (the run's engine names; the core grey, channels coloured by their number). The
  host's memory always has its pair of panels; every other memory has one when its port log
  holds a request (``Result.port_logs``); each is named by its memory (``SRAM data path``).

Memories are named in capitals (``DDR``, ``SRAM``: :func:`dspsim.analysis.engines.memory_label`)
from the run's own names; a one-memory run (J6) names its one memory in every label, a run of
several names each panel and stall by its memory and shares the read / write / requester keys.
The memory panels, and which memory a stall or a copy went to, are
:mod:`dspsim.analysis.timeline_memories`.

The x axis is DSP cycles from the op's timer start, with microseconds (model clock) on top, both
in plain notation (no offset). Every lane is drawn as the occupancy of each pixel column (one
column per pixel, edges on pixel boundaries): the share of the column's time spent in each
state, stacked from the bottom of the lane (the white rest is idle time), painted without
seams, so that a lane's coloured area is its time in each state whatever the zoom; bars at least
:data:`EDGE_MIN_PX` wide keep their outlines. A label is drawn only where it fits inside its bar
(and its pass) without touching another; the y tick labels always fit inside the figure. The
legend lists only what the window shows; memory requesters have colours of their own
(:mod:`dspsim.analysis.timeline_draw`).

Several runs on one cycle axis: :mod:`dspsim.analysis.compare`.

Figures are drawn with matplotlib's object API on an Agg canvas (no pyplot, no global state) and
saved as ``.png``, ``.svg`` (text kept as text) or ``.pdf`` (:data:`FIGURE_FORMATS`, shared by
every figure dspsim writes), atomically (:func:`dspsim.paths.atomic_savefig`). Every text is
drawn as written, never as math text: a figure builder is decorated with
:func:`dspsim.paths.plain_text`, and the saver makes text added later plain too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import COPY_KINDS, RunEngines, shape_text
from dspsim.analysis.series import logged_memories, memory_logs
from dspsim.analysis.stalls import require_trace
from dspsim.analysis.tiles import tcm_segments
from dspsim.analysis.timeline_draw import (  # the requesters' colours: for callers
    CHANNEL_REQUEST_COLOURS,  # noqa: F401
    COPY_COLOURS,
    CORE_REQUEST_COLOUR,  # noqa: F401
    DPI,
    EDGE_MIN_PX,
    KERNEL_COLOURS,
    LANE_H,
    MIN_BAR_PX,
    OTHER_REQUEST_COLOUR,  # noqa: F401
    PASS_COLOURS,
    SETUP_COLOUR,
    STALL_COLOUR,
    STALL_HATCH,
    TCM_COLOURS,
    WAIT_COLOURS,
    Lanes,
    PlainFormatter,
    figure_name,
    fit_left,
    memories_text,
)
from dspsim.analysis.timeline_memories import (
    copy_memories,
    ddr_series,  # noqa: F401 - a memory's panel as numbers, for callers
    ddr_stall_handle,
    draw_ddr,
    draw_not_recorded,
    requester_colour,  # noqa: F401 - a requester's colour, for callers
    stall_memories,
)
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_savefig, plain_text, suffix_of, writable_file

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURE_FORMATS = (".png", ".svg", ".pdf")  # every figure dspsim writes
RIGHT = 0.97  # figure fraction: leaves room for the last x tick label
OCCUPANCY_NOTE = (
    "each pixel column of a lane shows the share of its time in each state, stacked "
    f"(white: idle), so bars narrower than {MIN_BAR_PX:g} px show as partial columns"
)


# ------------------------------------------------------------------------------ arguments
def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in cycles (underscores allowed) -> (start, end); checked against the run
    by :func:`check_window`."""
    start_s, sep, end_s = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        start, end = float(start_s.replace("_", "")), float(end_s.replace("_", ""))
    except ValueError:
        raise DspsimInputError(
            f"window {text!r}: expected START:END in cycles, e.g. 0:200000"
        ) from None
    if not (np.isfinite(start) and np.isfinite(end)):
        raise DspsimInputError(
            f"window {text!r}: START and END must be finite numbers of cycles, e.g. 0:200000")
    if start >= end:
        raise DspsimInputError(f"window {text!r}: START must be less than END (cycles)")
    return start, end


MIN_WINDOW_CYCLES = 1  # the model's time step: a narrower window shows nothing more


def check_window(window: tuple[float, float] | None, cycles: float) -> tuple[float, float]:
    """The window to draw: the whole run, or ``window`` if it lies inside the run."""
    if window is None:
        return 0.0, float(cycles)
    start, end = window
    if start < 0 or end > cycles or start >= end:
        raise DspsimInputError(
            f"window {start:,.10g}:{end:,.10g} is outside the run: allowed 0 <= START < END <= "
            f"{cycles:,.10g} cycles"
        )
    if end - start < MIN_WINDOW_CYCLES:
        raise DspsimInputError(
            f"window {start:,.10g}:{end:,.10g} spans less than {MIN_WINDOW_CYCLES} cycle: "
            "nothing in the model is finer; allowed END - START >= 1"
        )
    return float(start), float(end)


def check_figure_path(path: str | Path, what: str = "timeline file") -> Path:
    """A writable figure path, ``.png``, ``.svg`` or ``.pdf`` (checked before simulating)."""
    return writable_file(path, what, FIGURE_FORMATS)


def save_figure(fig, path: str | Path, dpi: float = DPI, what: str = "figure") -> Path:
    """Save ``fig`` to ``path`` atomically, its extension picking the format (one of
    :data:`FIGURE_FORMATS`; SVG keeps its text as text)."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    fmt = suffix_of(path, FIGURE_FORMATS)
    if fmt not in FIGURE_FORMATS:
        raise DspsimInputError(
            f"{what} {str(path)!r}: unknown extension {fmt or '(none)'!r}; "
            f"allowed {', '.join(FIGURE_FORMATS)}"
        )
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
        return atomic_savefig(fig, path, what, dpi=dpi, format=fmt[1:])


# ------------------------------------------------------------------------------ drawing helpers
def kernel_colours(core: pd.DataFrame) -> dict[str, str]:
    """A colour per kernel the core's rows call, in the order of their first call."""
    comp = core[core["kind"] == "compute"].sort_values("start_cycle", kind="stable")
    return {
        str(k): KERNEL_COLOURS[i % len(KERNEL_COLOURS)]
        for i, k in enumerate(pd.unique(comp["what"]))
    }


def _engine_key(name: str) -> str:
    return f"engine:{name}"


def _lane_spec(engines: RunEngines, segs: pd.DataFrame) -> list[tuple[str, str]]:
    """(key, label) per lane, top to bottom: pass, the core, its channels (idle ones too), TCM."""
    lanes = [("pass", "pass")]
    if engines.core is not None:
        lanes.append((_engine_key(engines.core), engines.label(engines.core)))
    lanes += [(_engine_key(ch), engines.label(ch)) for ch in engines.channels]
    if len(segs):
        for b in sorted(segs["buffer"].unique()):
            n_sub = int(segs.loc[segs["buffer"] == b, "lane"].max()) + 1
            for k in range(n_sub):
                suffix = f" ({k + 1})" if n_sub > 1 else ""
                lanes.append((f"tcm{b}.{k}", f"TCM buffer {b}{suffix}"))
    else:
        lanes.append(("tcm", "TCM buffers"))
    return lanes


def draw_engine_lanes(
    ax, result: Any, lo: float, hi: float, width_px: float, tcm: bool = True
) -> tuple[list[Any], bool]:
    """Draw the pass, core, iDMA and (optionally) TCM lanes over [lo, hi]; return the legend
    handles of what the window shows and whether any lane was drawn as occupancy."""
    trace = require_trace(result)
    engines = RunEngines.of(result)
    segs = (tcm_segments(trace, result.passes, engines) if tcm
            else pd.DataFrame(columns=["buffer"]))
    lanes = _lane_spec(engines, segs)
    if not tcm:
        lanes = [lane for lane in lanes if not lane[0].startswith("tcm")]
    ypos = {key: -i for i, (key, _) in enumerate(lanes)}
    if fit_left(ax, [label for _, label in lanes]):  # y tick labels inside the figure
        width_px = ax.figure.get_figwidth() * DPI * ax.get_position().width
    draw = Lanes(ax, lo, hi, width_px)
    handles: list[Any] = []
    _draw_pass_lane(draw, result.passes, ypos["pass"])
    y = ypos[_engine_key(engines.core)] if engines.core is not None else 0.0
    core = engines.core_rows(trace)
    handles += _draw_core_kernels(draw, result, engines, core, y)
    handles += _draw_core_waits(draw, core, y)
    handles += _draw_copy_lanes(draw, result, engines, trace, ypos)
    if tcm and len(segs):
        handles += _draw_tcm_lanes(draw, segs, ypos)
    elif tcm:
        ax.text(lo + 0.005 * (hi - lo), ypos["tcm"], "unused (no ping-pong buffers here)",
                va="center", fontsize=8, color="#777777")
    draw.finish()

    ax.set_yticks([ypos[k] for k, _ in lanes], [label for _, label in lanes])
    ax.set_ylim(-len(lanes) + 0.5, 0.5)
    ax.tick_params(axis="y", length=0)
    for i in range(1, len(lanes)):
        ax.axhline(-i + 0.5, color="#bbbbbb", linewidth=0.4)
    return handles, draw.used_occupancy


def _draw_pass_lane(draw: Lanes, passes: Sequence[Any], y: float) -> None:
    """The pass lane: the passes in turn in each shade (one state a shade, however many
    passes), labels never cross a pass boundary."""
    passes = list(passes)
    starts = np.array([float(p["start_cycle"]) for p in passes])
    ends = np.array([float(p["end_cycle"]) for p in passes])
    for shade, colour in enumerate(PASS_COLOURS):
        draw.bars(starts[shade::len(PASS_COLOURS)], ends[shade::len(PASS_COLOURS)], y, colour)
    draw.labels(starts, ends, [(f"{p['name']}: {e - s:,.0f} cycles", str(p["name"]))
                               for p, s, e in zip(passes, starts, ends)],
                y, fontsize=8)


def _draw_core_kernels(draw: Lanes, result: Any, engines: RunEngines, core: pd.DataFrame,
                       y: float) -> list[Any]:
    """The core lane's kernels, stacked bottom-up: computing (the longest first), then their
    stalled share on memory hatched on top (an uncached kernel's stalls are spread over all its
    accesses: each row counts its stalled share there; its label names the memory); the legend
    handles of what the window shows."""
    from matplotlib.patches import Patch

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
        colour = colours[str(kernel)]
        s, e = rows["start_cycle"].to_numpy(float), rows["end_cycle"].to_numpy(float)
        dur = e - s
        stall = rows["ddr_stall_cycles"].to_numpy(float)
        share = np.clip(np.divide(stall, dur, out=np.zeros_like(dur), where=dur > 0), 0, 1)
        if draw.bars(s, e, y, colour, weight=1.0 - share):
            handles.append(Patch(facecolor=colour, label=f"core: {kernel}"))
        stalled_rows.append((s[share > 0], e[share > 0], share[share > 0]))
        visible = draw.visible(s, e)
        for i, f, v in zip(rows.index, share, visible):
            if f > 0 and v:
                shown_on.update(dict.fromkeys(on.get(i, ())))
        texts = [
            (f"{kernel}: {100 * f:.1f}% of it stalled on {memories_text(on.get(i, ()), '+')}",
             str(kernel)) if f > 0
            else str(kernel)
            for i, f in zip(rows.index, share)
        ]
        draw.labels(s, e, texts, y, fontsize=8, pad_px=1 * DPI / 72,
                    bbox={"facecolor": "white", "alpha": 0.8, "pad": 1, "linewidth": 0})
    ss, se, sf = (np.concatenate(c) for c in zip(*stalled_rows)) if stalled_rows else ([],) * 3
    if draw.bars(ss, se, y, STALL_COLOUR, weight=sf, hatch=STALL_HATCH):
        order = list(engines.ports)
        handles.append(ddr_stall_handle(sorted(shown_on, key=lambda m: (
            order.index(m) if m in order else len(order), m))))
    return handles


def _draw_core_waits(draw: Lanes, core: pd.DataFrame, y: float) -> list[Any]:
    """The core lane's descriptor programming and iDMA waits; their legend handles."""
    from matplotlib.patches import Patch

    handles: list[Any] = []
    setup = core[core["kind"] == "setup"]
    if draw.bars(setup["start_cycle"], setup["end_cycle"], y, SETUP_COLOUR):
        handles.append(Patch(facecolor=SETUP_COLOUR, label="core programming an iDMA descriptor"))
    for kind, label in (("wait_in", "core waiting on iDMA input"),
                        ("wait_out", "core waiting on iDMA output")):
        rows = core[core["kind"] == kind]
        if draw.bars(rows["start_cycle"], rows["end_cycle"], y, WAIT_COLOURS[kind]):
            handles.append(Patch(facecolor=WAIT_COLOURS[kind], label=label))
    return handles


def _draw_copy_lanes(draw: Lanes, result: Any, engines: RunEngines, trace: pd.DataFrame,
                     ypos: dict[str, float]) -> list[Any]:
    """One lane per iDMA channel, its input and output copies labelled by tile; the legend
    handles of the copies the window shows."""
    from matplotlib.patches import Patch

    ax, lo, hi = draw.ax, draw.lo, draw.hi
    ends = {kind: memories_text(m, "/") for kind, m in copy_memories(result, engines).items()}
    copy_labels = {"copy_in": f"iDMA input copy ({ends['copy_in']}→TCM)",
                   "copy_out": f"iDMA output copy (TCM→{ends['copy_out']})"}
    # copies that read an external memory and none into TCM: memory to memory
    if (trace["kind"] != "copy_in").all() and copy_memories(result, engines, False)["copy_in"]:
        copy_labels["copy_out"] = f"iDMA copy ({ends['copy_in']}→{ends['copy_out']})"
    copies_shown: set[str] = set()
    for ch in engines.channels:
        key = _engine_key(ch)
        rows = trace[trace["engine"] == ch]
        if rows.empty:
            ax.text(lo + 0.005 * (hi - lo), ypos[key], "idle", va="center", fontsize=8,
                    color="#777777")
            continue
        for kind in ("copy_in", "copy_out"):
            r = rows[rows["kind"] == kind]
            if draw.bars(r["start_cycle"], r["end_cycle"], ypos[key], COPY_COLOURS[kind],
                         edge="white"):
                copies_shown.add(kind)
            draw.labels(r["start_cycle"], r["end_cycle"], [f"t{t}" for t in r["tile"]],
                        ypos[key], color="white")
    return [Patch(facecolor=COPY_COLOURS[kind], label=copy_labels[kind])
            for kind in copy_labels if kind in copies_shown]


def _draw_tcm_lanes(draw: Lanes, segs: pd.DataFrame, ypos: dict[str, float]) -> list[Any]:
    """One lane per TCM buffer half, coloured by the tile's state, each tile outlined and
    labelled; the legend handles of the states the window shows."""
    from matplotlib.patches import Patch

    states_shown: set[str] = set()
    for (b, k), group in segs.groupby(["buffer", "lane"]):
        yk = ypos[f"tcm{b}.{k}"]
        for state in TCM_COLOURS:
            r = group[group["state"] == state]
            if draw.bars(r["start_cycle"], r["end_cycle"], yk, TCM_COLOURS[state]):
                states_shown.add(state)
        held = group.groupby(["pass", "tile"], sort=False).agg(
            start=("start_cycle", "min"), end=("end_cycle", "max")
        )
        hs, he = draw.clip(held["start"], held["end"])
        wide = (he - hs) >= EDGE_MIN_PX * draw.cycles_per_px
        if wide.any():
            draw.ax.broken_barh(np.column_stack([hs[wide], (he - hs)[wide]]),
                                (yk - LANE_H / 2, LANE_H), facecolors="none",
                                edgecolor="#555555", linewidth=0.5, zorder=1.6)
        draw.labels(held["start"], held["end"],
                    [f"t{t}" for _, t in held.index], yk, fontsize=7)
    return [Patch(facecolor=TCM_COLOURS[state], label=f"TCM tile {state}")
            for state in TCM_COLOURS if state in states_shown]


def format_cycles_axis(ax) -> None:
    ax.xaxis.set_major_formatter(PlainFormatter())


def add_us_axis(ax, clock_mhz: float) -> None:
    sec = ax.secondary_xaxis(
        "top", functions=(lambda c: c / clock_mhz, lambda us: us * clock_mhz)
    )
    sec.set_xlabel("time (µs)", fontsize=9)
    sec.xaxis.set_major_formatter(PlainFormatter())  # no offset ("+2.57e5") on narrow windows
    sec.tick_params(labelsize=8)


PASS_LINE_MIN_PX = 12.0  # pass boundaries closer than this (many rows) are not drawn


def draw_pass_lines(axes, result: Any, lo: float, hi: float) -> str | None:
    """Dashed verticals at the pass boundaries inside (lo, hi), unless they would stand closer
    than :data:`PASS_LINE_MIN_PX` on average (a run of many rows: they would hide every lane);
    the note that says which, or ``None`` when there is no boundary in the window."""
    xs = [x for x in (float(p["start_cycle"]) for p in result.passes[1:]) if lo < x < hi]
    if not xs:
        return None
    a = axes[0]
    width_px = a.figure.get_figwidth() * a.figure.dpi * a.get_position().width
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
    model = result.model
    tile = tile_bytes(require_trace(result))
    tile_text = f"tile {tile:,} bytes ({tile // 4:,} float32)" if tile else "no tiles"
    text = (
        f"{figure_name(model.name)} {result.op}, {result.variant}, "
        f"{shape_text(result.shape)}, {tile_text}: "
        f"{result.cycles:,} cycles = {result.time_us:,.1f} µs at {model.core.clock_mhz:g} MHz"
    )
    if lo > 0 or hi < result.cycles:
        text += f"\nwindow {lo:,.0f} .. {hi:,.0f} cycles"
    return text


def figure_legend(fig, handles: list[Any], ncol: int = 5, y: float = 0.0):
    seen: dict[str, Any] = {}
    for h in handles:
        seen.setdefault(h.get_label(), h)
    return fig.legend(handles=list(seen.values()), loc="lower center", ncol=ncol, fontsize=8,
                      frameon=False, bbox_to_anchor=(0.5, y))


def finish_layout(fig, gs, handles: list[Any], notes: Sequence[str], ncol: int = 5) -> None:
    """The footnote at the bottom right, the legend above it, the axes above the legend (room
    measured for their tick labels and x label), and every x tick label inside the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    height = fig.bbox.height
    pad = 6.0 / height  # 6 px
    y = pad / 2
    if notes:
        note = fig.text(RIGHT, y, "; ".join(notes), ha="right", va="bottom", fontsize=7,
                        color="#555555")
        y = note.get_window_extent(renderer).y1 / height + pad
    legend = figure_legend(fig, handles, ncol, y)
    top = legend.get_window_extent(renderer).y1 / height + pad
    axes = [a for a in fig.axes if a.get_subplotspec() is not None and a.get_visible()]
    lowest = min(axes, key=lambda a: a.get_position().y0)
    below = lowest.get_position().y0 - lowest.get_tightbbox(renderer).y0 / height
    gs.update(bottom=top + below)
    for a in fig.axes:  # GridSpec.update moves only pyplot's figures' axes
        spec = a.get_subplotspec()
        if spec is not None and spec.get_topmost_subplotspec().get_gridspec() is gs:
            a.set_position(spec.get_position(fig))
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
    ax_last = below[-1]
    for a in [ax, *below[:-1]]:
        a.tick_params(axis="x", labelbottom=False)
    for a in below:
        a.tick_params(axis="y", labelsize=8)
        a.grid(axis="y", color="#dddddd", linewidth=0.5)
    format_cycles_axis(ax_last)
    ax_last.set_xlabel("time (cycles from the op's timer start)", fontsize=9)
    ax_last.tick_params(axis="x", labelsize=8)
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
    from matplotlib.figure import Figure

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


MEMORY_PANELS_IN = 2.0  # inches a further memory's pair of panels adds to the timeline


def plot_timeline(
    result: Any, path: str | Path, window: tuple[float, float] | None = None
) -> Path:
    """Draw the timeline of ``result`` (a run with trace and port log) to a .png, .svg or .pdf
    file."""
    p = check_figure_path(path)
    return save_figure(timeline_figure(result, window), p)


def default_timeline_path(result_path: str | Path) -> Path:
    """``run.json`` / ``run.json.gz`` -> ``run_timeline.png`` beside it."""
    p = Path(result_path)
    stem = p.name[: -len(".json.gz")] if p.name.lower().endswith(".json.gz") else p.stem
    return p.with_name(f"{stem}_timeline.png")

