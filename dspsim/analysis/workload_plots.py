"""Figures and traces of a workload run: task streams on one or more DSP cores.

They read a workload run (``dspsim.study.workload.WorkloadRun``) and its task table by attribute
only, so that this layer does not import the study layer.

**Timeline**, on one time axis since the workload's t = 0 (ms, or us for short runs): a lane per
core, each task's op span a bar coloured by its stream (labelled where the label fits, a red tick
over a missed deadline), or, when tasks are too short to draw (median under
:data:`OCCUPANCY_PX`), each stream's busy share per bin; the queue's backlog; the host memory's
data path busy share per bin, its mean dashed.

**Trace** (Chrome Trace Event JSON): process ``DSP cores`` (a thread per core, a slice per task,
counters for the queue and the memory's data path) and ``host streams`` (a thread per stream, a
slice per task from submit to done; overlapping tasks on extra threads). Times as in the run
trace (:mod:`dspsim.analysis.perfetto`): whole cycles, then whole nanoseconds.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dspsim.analysis.engines import memory_label
from dspsim.analysis.perfetto import _Clock, _durations_us, _meta, _us, check_trace_path, lane_name
from dspsim.analysis.series import assign_lanes, binned_mean
from dspsim.analysis.timeline import check_figure_path, save_figure
from dspsim.analysis.timeline_draw import DPI, figure_name
from dspsim.analysis.timeline_draw import memory_label as figure_memory_label
from dspsim.analysis.timeline_memories import label_gap
from dspsim.paths import atomic_write_bytes, plain_text
from dspsim.results import json_default

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MIN_BAR_PX = 1.0
OCCUPANCY_PX = 3.0  # median task narrower than this: draw occupancy, not bars
BIN_PX = 2.0
MAX_BIN_PX = 40.0
LEGEND_COLUMNS = 4
LABEL_MIN_PX_PER_CHAR = 3.0  # no 7-pt label character is narrower: bars below are not measured
LABEL_MARGIN_PX = 2.0  # a task label keeps this far from its bar's ends and the previous label
MISS_COLOUR = "#d62728"
STREAM_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
                  "#ccb974", "#64b5cd", "#c44e52", "#2f4b7c", "#a05195", "#665191", "#ffa600",
                  "#003f5c", "#7a5195")
MAX_DDR_COUNTER_BINS = 2000


def _unit_name(div: float) -> str:
    """The time axis's unit, ``div`` microseconds (ms for runs of 20 ms or more, else us)."""
    return "ms" if div == 1000.0 else "us"


def _queue_steps(run: Any) -> tuple[np.ndarray, np.ndarray]:
    """The queue's log as (times in cycles, tasks waiting from then)."""
    q = np.asarray(run.queue_log, float).reshape(-1, 2)
    return q[:, 0], q[:, 1]


def _bins(run: Any, tasks: pd.DataFrame, div: float,
          width_px: float) -> tuple[bool, np.ndarray, str]:
    """Whether the core lanes show occupancy, the bins' edges (x units): :data:`BIN_PX` pixels,
    or with occupancy the longest stream period (so that periodic streams do not beat against
    the bins) within :data:`BIN_PX` to :data:`MAX_BIN_PX` pixels; the note that says which."""
    clock = run.model.core.clock_mhz
    end_x = run.end_cycle / clock / div
    x_per_px = end_x / max(width_px, 1.0)
    widths_px = (tasks["op_cycles"].to_numpy(float) / clock / div) / x_per_px
    occupancy = len(tasks) > 0 and float(np.median(widths_px)) < OCCUPANCY_PX
    width = BIN_PX * x_per_px
    if occupancy:
        period = max(s.period_us for s in run.workload.streams) / div
        width = min(max(period, width), MAX_BIN_PX * x_per_px)
    edges = np.linspace(0.0, end_x, max(1, int(round(end_x / width))) + 1)
    if occupancy:
        return occupancy, edges, (f"core lanes: busy share per {edges[1] - edges[0]:,.1f}-"
                                  f"{_unit_name(div)} bin, stacked by stream (dotted: 100 %); "
                                  "tasks too short to draw one by one")
    return occupancy, edges, (f"core lanes: one bar per task (its op span); bars narrower than "
                              f"{MIN_BAR_PX:g} px drawn {MIN_BAR_PX:g} px wide")


def _draw_core_lanes(ax, run, tasks, colours, div, width_px, occupancy, edges,
                     labels: list) -> None:
    """Bars or occupancy per core; the candidate task labels ``(lane y, x0, x1, text)`` go to
    ``labels`` for :func:`_place_labels`."""
    clock = run.model.core.clock_mhz
    x_per_px = edges[-1] / max(width_px, 1.0)  # as _bins: the edges end at the run's end
    start = tasks["op_start_cycle"].to_numpy(float) / clock / div
    stop = (tasks["op_start_cycle"] + tasks["op_cycles"]).to_numpy(float) / clock / div
    ncores = len(run.core_names)
    h = 0.74
    bins = len(edges) - 1
    for k, core in enumerate(run.core_names):
        y = ncores - 1 - k
        on = (tasks["core"] == core).to_numpy()
        base = np.full(bins, y - h / 2)
        for name, colour in colours.items():
            sel = on & (tasks["stream"] == name).to_numpy()
            if not sel.any():
                continue
            if occupancy:
                share = binned_mean(start[sel], stop[sel], np.ones(sel.sum()), edges)
                ax.stairs(base + h * share, edges, baseline=base.copy(), fill=True,
                          color=colour, linewidth=0)
                base = base + h * share
            else:
                s, e = start[sel], stop[sel]
                w = np.maximum(e - s, MIN_BAR_PX * x_per_px)
                ax.broken_barh(np.column_stack([s, w]), (y - h / 2, h), facecolor=colour,
                               edgecolor="white",  # no outline over a bar it would whiten
                               linewidth=np.where(w / x_per_px >= OCCUPANCY_PX, 0.3, 0.0))
                idx = tasks["index"].to_numpy()[sel]
                for x0, x1, i in zip(s, e, idx):
                    text = f"{figure_name(name)}#{i}"
                    # a cheap lower bound first: _place_labels measures those that may fit
                    if (x1 - x0) / x_per_px >= LABEL_MIN_PX_PER_CHAR * len(text):
                        labels.append((y, x0, x1, text))
        if occupancy:
            ax.axhline(y + h / 2, color="#bbbbbb", linewidth=0.5, linestyle=":")
        missed = on & tasks["missed"].to_numpy(bool)
        if missed.any():
            ax.scatter(stop[missed], np.full(missed.sum(), y + h / 2 + 0.08), marker="v",
                       s=14, color=MISS_COLOUR, linewidths=0, zorder=3,
                       clip_on=False)  # the last task's mark is at the right edge: whole
    ax.set_yticks(range(ncores), [run.core_names[ncores - 1 - y] for y in range(ncores)],
                  fontsize=9)
    ax.set_ylim(-0.6, ncores - 0.4)


def _place_labels(ax, labels: list) -> None:
    """Label each bar whose label, measured as drawn, fits inside it with
    :data:`LABEL_MARGIN_PX` to spare on each side and does not touch the previous label of its
    lane. Call once the axes' limits and position are final."""
    renderer = ax.figure.canvas.get_renderer()
    last_right: dict[float, float] = {}
    for y, x0, x1, text in sorted(labels):
        (p0, _), (p1, _) = ax.transData.transform([(x0, y), (x1, y)])
        t = ax.text((x0 + x1) / 2, y, text, ha="center", va="center", fontsize=7,
                    color="white", clip_on=True)
        box = t.get_window_extent(renderer)
        if (box.x0 < p0 + LABEL_MARGIN_PX or box.x1 > p1 - LABEL_MARGIN_PX
                or box.x0 < last_right.get(y, -np.inf) + LABEL_MARGIN_PX):
            t.remove()
            continue
        last_right[y] = box.x1


def queue_per_bin(t: np.ndarray, q: np.ndarray, end: float, edges: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The queue's step function (``q[i]`` from ``t[i]`` to the next step, the last until
    ``end``) per bin of ``edges``: its time-weighted mean and its maximum."""
    x = np.append(t, end)
    area = np.concatenate([[0.0], np.cumsum(q * np.diff(x))])  # the integral at each step

    def integral(at: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(x, at, side="right") - 1, 0, len(q) - 1)
        return area[i] + q[i] * (np.minimum(at, end) - x[i])

    mean = np.diff(integral(edges)) / np.maximum(np.diff(edges), 1e-300)
    # the maximum: the value in effect at each bin's start, and every step inside the bin
    first = np.clip(np.searchsorted(x, edges[:-1], side="right") - 1, 0, len(q) - 1)
    peak = q[first].copy()
    inside = np.searchsorted(edges, t, side="right") - 1
    ok = (inside >= 0) & (inside < len(peak))
    np.maximum.at(peak, inside[ok], q[ok])
    return mean, peak


def _draw_queue(ax, run, div, edges: np.ndarray) -> str | None:
    """The queue's length over time: its steps, or, when they are denser than the bins of
    ``edges`` (x units), each bin's time-weighted mean (filled) and maximum (line); the note
    that says so."""
    clock = run.model.core.clock_mhz
    t, q = _queue_steps(run)
    x = np.append(t, run.end_cycle) / clock / div
    y = np.append(q, q[-1])
    peak = int(np.argmax(q))
    top = max(1.0, float(q.max()))
    ax.set_ylim(0, top * 1.35)
    ax.set_ylabel("queue\n(tasks)", fontsize=8)
    ax.annotate(f"longest backlog {int(q[peak])}", (x[peak], q[peak]),
                xytext=(4, 2), textcoords="offset points", fontsize=7, color="#333333")
    if len(t) <= len(edges) - 1:
        ax.fill_between(x, y, step="post", color="#999999", alpha=0.45, linewidth=0)
        ax.step(x, y, where="post", color="#444444", linewidth=0.7)
        return None
    mean, most = queue_per_bin(t / clock / div, q, run.end_cycle / clock / div, edges)
    ax.stairs(mean, edges, fill=True, color="#999999", alpha=0.6, linewidth=0)
    ax.stairs(most, edges, color="#444444", linewidth=0.7)
    width = float(edges[1] - edges[0]) if len(edges) > 1 else 0.0
    return f"queue: per {width:,.3g}-{_unit_name(div)} bin, mean (grey) and maximum (line)"


def _draw_ddr(ax, run, div, edges) -> None:
    """The host memory's data path: its busy share per bin and its mean over the run."""
    clock = run.model.core.clock_mhz
    label = figure_memory_label(run.model.host.memory)  # shortened, drawable
    ax.set_ylabel(f"{label}{label_gap(label)}path\n(% busy)", fontsize=8)
    ax.set_ylim(0, 105)
    mean = 100.0 * run.ddr_busy_cycles / run.end_cycle if run.end_cycle > 0 else 0.0
    ax.axhline(mean, color="#333333", linestyle="--", linewidth=0.7,
               label=f"mean {mean:.1f} %")
    # the mean's key sits outside the axes, right of the lane: over the lane it hides bars
    ax.legend(loc="lower left", bbox_to_anchor=(1.0, 0.0), fontsize=7, frameon=False,
              handlelength=1.6, borderaxespad=0.3)
    if run.ddr is None:
        ax.text(0.5, 0.5, f"no {label} profile in this run", transform=ax.transAxes, ha="center",
                va="center", fontsize=8, color="#777777")
        return
    d = run.ddr
    util = 100.0 * binned_mean(d["start"], d["end"], d["share"], edges * div * clock)
    ax.stairs(np.minimum(util, 100.0), edges, fill=True, color="#4c72b0", linewidth=0)


def _legend(fig, run, colours, any_missed: bool, y: float) -> None:
    """A key per stream (its op, priority and backend), and the deadline miss mark."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    streams = {s.name: s for s in run.workload.streams}
    handles = [Patch(facecolor=c, label=f"{figure_name(n)} ({streams[n].op} {streams[n].variant}"
                     f", prio {streams[n].priority}, {streams[n].backend})")
               for n, c in colours.items()]
    if any_missed:
        handles.append(Line2D([], [], marker="v", linestyle="", color=MISS_COLOUR,
                              label="deadline missed"))
    fig.legend(handles=handles, loc="upper center", ncol=min(LEGEND_COLUMNS, len(handles)),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, y))


@plain_text
def workload_figure(run: Any, tasks: pd.DataFrame) -> Figure:
    """The timeline of a workload run (not yet saved)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    clock = run.model.core.clock_mhz
    div = 1000.0 if run.end_cycle / clock >= 20_000 else 1.0
    ncores = len(run.core_names)
    colours = {s.name: STREAM_COLOURS[i % len(STREAM_COLOURS)]
               for i, s in enumerate(run.workload.streams)}
    misses = int(tasks["missed"].sum())
    legend_rows = -(-(len(colours) + (misses > 0)) // LEGEND_COLUMNS)
    # heights in inches: title 0.75, lanes, queue, DDR, x label 0.55, legend rows
    lanes_in, strip_in, top_in, xlab_in = 0.62 * ncores + 0.3, 0.85, 0.75, 0.55
    legend_in = 0.22 * legend_rows + 0.1
    height = top_in + lanes_in + 2 * strip_in + 0.25 + xlab_in + legend_in
    fig = Figure(figsize=(14, height), dpi=DPI)
    FigureCanvasAgg(fig)  # measures the task labels
    gs = fig.add_gridspec(3, 1, height_ratios=[lanes_in, strip_in, strip_in], hspace=0.1,
                          left=0.07, right=0.915, top=1 - top_in / height,
                          bottom=(xlab_in + legend_in) / height)  # right: "mean 100.0 %" fits
    ax = fig.add_subplot(gs[0])
    ax_q = fig.add_subplot(gs[1], sharex=ax)
    ax_d = fig.add_subplot(gs[2], sharex=ax)
    width_px = fig.get_figwidth() * DPI * ax.get_position().width
    occupancy, edges, note = _bins(run, tasks, div, width_px)
    labels: list = []
    _draw_core_lanes(ax, run, tasks, colours, div, width_px, occupancy, edges, labels)
    note = "; ".join(filter(None, [note, _draw_queue(ax_q, run, div, edges)]))
    _draw_ddr(ax_d, run, div, edges)
    ax.set_xlim(0, run.end_cycle / clock / div)
    for a in (ax, ax_q, ax_d):
        a.tick_params(axis="x", labelbottom=a is ax_d, labelsize=8)
        a.tick_params(axis="y", labelsize=8)
        a.grid(axis="x", color="#e4e4e4", linewidth=0.5)
        a.set_axisbelow(True)  # under the bars: a grid line over a busy lane reads as a gap
    ax_d.set_xlabel(f"time ({_unit_name(div)} since the workload's t = 0; model clock "
                    f"{clock:g} MHz)", fontsize=9)
    fig.suptitle(
        f"{figure_name(Path(str(run.workload.source)).name)}: {len(tasks):,} tasks, {len(colours)} "
        f"stream(s) on {ncores} core(s), {run.fidelity} fidelity; {misses:,} deadline "
        f"miss(es)\n{note}", fontsize=10, y=1 - 0.08 / height, va="top",
    )
    _legend(fig, run, colours, misses > 0, legend_in / height)
    _place_labels(ax, labels)
    return fig


def plot_workload(run: Any, tasks: pd.DataFrame, path: str | Path) -> Path:
    """Draw the workload timeline to a figure file."""
    p = check_figure_path(path)
    return save_figure(workload_figure(run, tasks), p)


# ------------------------------------------------------------------------------ trace
def _slices(pid: int, tid: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray,
            names: list[str], cat: str, args: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """X events, one per row: times as :func:`_us`, durations as :func:`_durations_us`."""
    start_ns = np.asarray(start_ns, np.int64)
    ts = _us(start_ns).tolist()
    dur = _durations_us(start_ns, np.asarray(end_ns, np.int64)).tolist()
    return [{"ph": "X", "pid": pid, "tid": t, "ts": a, "dur": d, "name": n, "cat": cat,
             "args": g}
            for t, a, d, n, g in zip(np.asarray(tid).tolist(), ts, dur, names, args)]


def workload_trace(run: Any, tasks: pd.DataFrame) -> dict[str, Any]:
    """The Chrome Trace Event object of a workload run (format in the module docstring)."""
    clock = run.model.core.clock_mhz
    to_ns = _Clock(clock).ns  # cycles -> whole cycles -> integer ns, as the run trace does
    ev: list[dict[str, Any]] = []
    _meta(ev, 1, 0, "process_name", "DSP cores")
    _meta(ev, 2, 0, "process_name", "host streams")
    core_tid = {c: k + 1 for k, c in enumerate(run.core_names)}
    for c, tid in core_tid.items():
        _meta(ev, 1, tid, "thread_name", c, tid)
    col = _task_columns(tasks)
    ev += _slices(
        1, np.array([core_tid[c] for c in col["core"]], int), to_ns(tasks["start_cycle"]),
        to_ns(tasks["core_end_cycle"]), col["stream"], "task",  # the task on its core: its op
        [dict(zip(_TASK_ARGS, values)) for values in zip(*(col[k] for k in _TASK_ARGS))])
    _stream_events(ev, run, tasks, col, to_ns)
    _queue_events(ev, run, to_ns)
    ddr_note = _memory_events(ev, run, to_ns)
    return {
        "traceEvents": ev, "displayTimeUnit": "ms",
        "otherData": {
            "workload": str(run.workload.source), "model": run.model.source,
            "fidelity": run.fidelity, "seed": run.workload.seed, "clock_mhz": clock,
            "time_unit": ("microseconds since the workload's t = 0, each a whole number of "
                          "nanoseconds (three decimals)"),
            "ddr_counter": ddr_note,
        },
    }


_TASK_ARGS = ("stream", "index", "priority", "backend", "latency_us", "wait_us", "op_cycles",
              "missed")  # a task's slice on its core: its args, in this order


def _task_columns(tasks: pd.DataFrame) -> dict[str, list[Any]]:
    """The task table's columns the trace's arguments show, as plain Python values."""
    def ints(name: str) -> list[int]:
        return tasks[name].to_numpy().astype(np.int64).tolist()

    def us(values: pd.Series) -> list[float]:
        # Python's round (correctly rounded), not numpy's (scaled, off by an ulp at times)
        return [round(v, 3) for v in values.to_numpy(float).tolist()]

    return {"stream": tasks["stream"].astype(str).tolist(), "index": ints("index"),
            "priority": ints("priority"), "backend": tasks["backend"].tolist(),
            "latency_us": us(tasks["latency_us"]),
            "wait_us": us(tasks["start_us"] - tasks["queued_us"]),
            "op_cycles": ints("op_cycles"), "missed": tasks["missed"].to_numpy(bool).tolist(),
            "core": tasks["core"].astype(str).tolist()}


def _stream_events(ev: list[dict[str, Any]], run: Any, tasks: pd.DataFrame,
                   col: dict[str, list[Any]], to_ns: Any) -> None:
    """Each stream's tasks from submission to completion, as many lanes (threads) as tasks of
    the stream overlap."""
    submit = to_ns(tasks["submit_cycle"])
    done = to_ns(tasks["done_cycle"])
    index, latency, core, missed = col["index"], col["latency_us"], col["core"], col["missed"]
    stream_arr = tasks["stream"].to_numpy()
    tid = 1
    for s in run.workload.streams:
        idx = np.flatnonzero(stream_arr == s.name)
        lanes = assign_lanes(submit[idx], done[idx]) if len(idx) else np.zeros(0, int)
        used = int(lanes.max()) + 1 if len(lanes) else 0
        for lane in range(used):
            _meta(ev, 2, tid + lane, "thread_name", lane_name(s.name, lane), tid + lane)
        j = idx.tolist()
        ev += _slices(
            2, tid + lanes, submit[idx], done[idx],
            [f"{s.name}#{index[k]}" for k in j], "latency",
            [{"latency_us": latency[k], "core": core[k], "missed": missed[k]} for k in j])
        tid += max(used, 1)


def _queue_events(ev: list[dict[str, Any]], run: Any, to_ns: Any) -> None:
    """The queue's length as a counter, one sample per nanosecond (the state it ends in)."""
    t, q = _queue_steps(run)
    last = {int(a): int(b) for a, b in zip(to_ns(t), q)}  # a time's last value
    for a, b in last.items():
        ev.append({"ph": "C", "pid": 1, "tid": 0, "name": "queue (tasks waiting)",
                   "ts": float(_us(a)), "args": {"tasks": b}})


def _memory_events(ev: list[dict[str, Any]], run: Any, to_ns: Any) -> str:
    """The host memory's data path busy share per bin as a counter; the note saying how it was
    sampled."""
    label = memory_label(run.model.host.memory)  # the port the run profiles
    if run.ddr is None or run.end_cycle <= 0:
        return f"no {label} profile"
    bins = int(min(MAX_DDR_COUNTER_BINS, max(1, run.end_cycle / run.model.core.clock_mhz // 10)))
    edges = np.linspace(0.0, run.end_cycle, bins + 1)
    d = run.ddr
    util = 100.0 * binned_mean(d["start"], d["end"], d["share"], edges)
    for a, u in zip(_us(to_ns(edges[:-1])), util):
        ev.append({"ph": "C", "pid": 1, "tid": 0, "name": f"{label} data path (%)",
                   "ts": float(a), "args": {"busy": round(float(min(u, 100.0)), 2)}})
    return f"{label} data path: time-weighted mean per bin of {run.end_cycle / bins:,.0f} cycles"


def write_workload_trace(run: Any, tasks: pd.DataFrame, path: str | Path) -> Path:
    """Write the workload's trace as JSON (gzipped for ``.gz``), atomically."""
    p = check_trace_path(path)
    data = json.dumps(workload_trace(run, tasks), default=json_default).encode("utf-8")
    if p.name.lower().endswith(".gz"):
        data = gzip.compress(data)
    return atomic_write_bytes(p, data, "--trace")
