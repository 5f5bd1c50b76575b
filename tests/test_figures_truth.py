"""Figures, traces and tables that tell the truth at any scale: no label over another or off
its bar, no key or legend over data, no mark that hides a number, every axis with its unit,
trace times in whole nanoseconds, and task columns that mean one thing each."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from dspsim.analysis.workload_plots import workload_figure, workload_trace, write_workload_trace
from dspsim.config import load_model
from dspsim.study.sweep_plot import WARNED_HATCH, heatmap, line_plot
from dspsim.study.workload import parse_workload, run_workload, task_table, write_tasks_csv

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ a small busy workload
def busy_run(count: int = 21, **run_kw):
    """One core, a stream of back-to-back direct softmax tasks (all released at once, so each
    starts when the last ends) and a high-priority one that cuts in: bars of equal width side by
    side, as wide as long labels."""
    wl = parse_workload({"seed": 1, "stream": [
        {"name": "camera_b", "op": "softmax", "variant": "direct", "n": 4000,
         "period_us": 1, "count": count},
        {"name": "hp", "op": "softmax", "variant": "direct", "n": 2000, "priority": 200,
         "period_us": 2000, "count": 2, "start_us": 500},
    ]}, "busy")
    model = load_model().with_overrides({"core.count": 1})
    run = run_workload(wl, model, fidelity="tile", **run_kw)
    return run, task_table(run)


@pytest.fixture(scope="module")
def busy():
    return busy_run(ddr_profile=True)


def drawn(fig):
    canvas = FigureCanvasAgg(fig) if not isinstance(fig.canvas, FigureCanvasAgg) else fig.canvas
    canvas.draw()
    return canvas.get_renderer()


# ------------------------------------------------------------------ 1. workload task labels
@pytest.mark.parametrize("count", [8, 14, 17, 18, 19, 20])
def test_workload_labels_fit_their_bars_and_never_overlap(count):
    """Before: a label was drawn where an estimate (6 px a character) said it fitted; the real
    text was wider, so "cam_b#8" ran into "cam_b#10" and labels ran off their bars."""
    run, tasks = busy_run(count)
    fig = workload_figure(run, tasks)
    renderer = drawn(fig)
    ax = fig.axes[0]
    clock = run.model.core.clock_mhz
    div = 1000.0 if run.end_cycle / clock >= 20_000 else 1.0
    spans = {f"{r.stream}#{r.index}": (r.op_start_cycle / clock / div,
                                       (r.op_start_cycle + r.op_cycles) / clock / div)
             for r in tasks.itertuples()}
    boxes = []
    for t in ax.texts:
        if t.get_text() not in spans:
            continue
        box = t.get_window_extent(renderer)
        x0, x1 = spans[t.get_text()]
        (p0, _), (p1, _) = ax.transData.transform([(x0, 0), (x1, 0)])
        assert p0 <= box.x0 and box.x1 <= p1, f"{t.get_text()} runs off its bar"
        boxes.append(box)
    if count <= 14:  # bars wide enough for their labels
        assert boxes, "no bar was labelled: the test no longer covers labels"
    boxes.sort(key=lambda b: (round(b.y0), b.x0))
    for a, b in zip(boxes, boxes[1:]):
        if abs(a.y0 - b.y0) < 1:  # one lane
            assert a.x1 < b.x0, "two task labels overlap"


# ------------------------------------------------------------------ 2. DDR mean key
def test_workload_ddr_mean_key_covers_no_data(busy):
    """Before: "mean x % (dashed)" sat in a white box inside the DDR lane, over its bars."""
    run, tasks = busy
    fig = workload_figure(run, tasks)
    renderer = drawn(fig)
    ax_d = fig.axes[2]
    inside = ax_d.get_window_extent(renderer)
    mean = 100.0 * run.ddr_busy_cycles / run.end_cycle
    keys = [t for t in ax_d.texts if "mean" in t.get_text()]
    legend = ax_d.get_legend()
    if legend is not None:
        keys += [t for t in legend.get_texts() if "mean" in t.get_text()]
    assert keys and any(f"{mean:.1f} %" in t.get_text() for t in keys)
    for t in keys:
        box = t.get_window_extent(renderer)
        assert not box.overlaps(inside), "the DDR mean's key is drawn over the lane's data"
    if legend is not None:
        assert not legend.get_window_extent(renderer).overlaps(inside)


def test_workload_ddr_mean_key_fits_the_figure_at_100_percent(busy):
    """Before: the key, right of the DDR lane, fitted "mean 99.9 %" but ran off the figure's
    right edge at "mean 100.0 %" (a saturated port), its value cut."""
    import dataclasses

    run, tasks = busy
    full = dataclasses.replace(run, ddr_busy_cycles=run.end_cycle)
    fig = workload_figure(full, tasks)
    renderer = drawn(fig)
    legend = fig.axes[2].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["mean 100.0 %"]
    assert legend.get_window_extent(renderer).x1 <= fig.bbox.x1, "the key runs off the figure"


def test_workload_bar_narrower_than_a_pixel_is_drawn_in_its_colour():
    """Before: a task bar narrower than a pixel was widened to one pixel but kept its white
    0.3-pt outline, which covered it: the bar came out nearly white (250, 238, 231), a task
    the figure seemed not to have; and the x grid was drawn over the bars, a grey line across
    a busy lane that read as a gap (over a one-pixel bar, all of it)."""
    wl = parse_workload({"seed": 1, "stream": [
        {"name": "long", "op": "softmax", "variant": "direct", "n": 400000, "period_us": 1,
         "count": 1},
        {"name": "blip", "op": "copy", "n": 64, "period_us": 1, "count": 1,
         "start_us": 40000, "backend": "core1"},
    ]}, "blip")
    run = run_workload(wl, load_model().with_overrides({"core.count": 2}))
    tasks = task_table(run)
    fig = workload_figure(run, tasks)
    drawn(fig)
    ax = fig.axes[0]
    blip = tasks[tasks["stream"] == "blip"].iloc[0]
    x = (blip["op_start_cycle"] + blip["op_cycles"] / 2) / run.model.core.clock_mhz / 1000.0
    px, py = ax.transData.transform((x, 0))  # core1's lane is at y = 0
    rgb = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].astype(int)
    row = rgb.shape[0] - int(round(py))
    cols = rgb[row, int(px) - 2:int(px) + 3]
    assert (255 - cols).max() >= 100, f"the bar is drawn nearly white: {cols.tolist()}"
    long = tasks[tasks["stream"] == "long"].iloc[0]
    x0, x1 = (np.array([0, long["op_cycles"]]) + long["op_start_cycle"]) / 1e6
    ticks = [t for t in ax.get_xticks() if x0 + 1 < t < x1 - 1]
    assert ticks, "no grid line crosses the long bar: the test no longer covers the grid"
    for t in ticks:
        # near the lane's top, clear of the bar's label
        (px, py), (qx, _) = ax.transData.transform([(t, 1.3), ((x0 + x1) / 2, 1.3)])
        row = rgb.shape[0] - int(round(py))
        assert (rgb[row, int(round(px)) - 1:int(round(px)) + 2] == rgb[row, int(qx)]).all(), \
            f"a grid line is drawn over the bar at {t} ms"


def test_workload_last_deadline_miss_mark_is_drawn_whole():
    """Before: the mark sat at the missed task's op end, which for the run's last task is
    within a pixel of the axes' right edge (the run ends half the RPC round trip later): the
    axes clipped it to half a triangle."""
    wl = parse_workload({"seed": 1, "stream": [
        {"name": "late", "op": "softmax", "variant": "direct", "n": 20000,
         "period_us": 200000, "count": 3, "deadline_us": 1}]}, "late")
    run = run_workload(wl, load_model())
    tasks = task_table(run)
    fig = workload_figure(run, tasks)
    drawn(fig)
    ax = fig.axes[0]
    rgb = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].astype(int)
    red = (np.abs(rgb - [0xd6, 0x27, 0x28]).sum(axis=2) < 60)
    counts = []
    for r in tasks.itertuples():
        px, _ = ax.transData.transform(((r.op_start_cycle + r.op_cycles) / 1e6, 0))
        counts.append(int(red[:, int(px) - 10:int(px) + 11].sum()))
    assert counts[0] > 0 and counts[-1] == counts[0], counts


# ------------------------------------------------------------------ 3. heatmap warned cells
def warned_table() -> pd.DataFrame:
    rows = []
    for lat in (10.0, 100.0, 1000.0):
        for out in (1, 4, 16):
            for variant, cycles in (("pingpong", 1000 + lat / out), ("direct", 2000 + 200 * lat)):
                warn = variant == "pingpong" and (lat, out) in {(100.0, 1), (1000.0, 16)}
                rows.append({"op": "softmax", "variant": variant, "n": 1000,
                             "ddr.latency_cycles": lat, "idma.max_outstanding": out,
                             "cycles": int(cycles), "warnings": "unwaited_copy" if warn else "",
                             "hazards": 0, "wall_s": 0.0, "error": ""})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("y", ["cycles", "speedup"])
def test_heatmap_warning_dots_never_cross_a_cell_number(y):
    """Before: the dots of a warned cell ran through its number ("3.85" hard to read). The
    pixels around each number (2 px beyond its text) must be the same with the dots hidden."""
    fig = heatmap(warned_table(), "ddr.latency_cycles", "idma.max_outstanding", y)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    canvas.draw()  # the layout settles on the first draw
    with_dots = np.asarray(canvas.buffer_rgba()).copy()
    hatches = [p for ax in fig.axes for p in ax.patches if p.get_hatch() == WARNED_HATCH]
    assert hatches
    for p in hatches:
        p.set_visible(False)
    canvas.draw()
    without = np.asarray(canvas.buffer_rgba()).copy()
    renderer, height = canvas.get_renderer(), with_dots.shape[0]
    for ax in fig.axes:
        for t in ax.texts:
            e = t.get_window_extent(renderer)
            x0, x1 = int(e.x0) - 2, int(np.ceil(e.x1)) + 2
            y0, y1 = height - int(np.ceil(e.y1)) - 2, height - int(e.y0) + 2
            diff = (with_dots[y0:y1, x0:x1] != without[y0:y1, x0:x1]).any(axis=2)
            assert not diff.any(), f"warning dots cross the number {t.get_text()}"


# ------------------------------------------------------------------ 4. line plot legend
def test_line_plot_legend_covers_no_line():
    """Before: a 13-entry legend sat inside the axes, over the lines."""
    rows = []
    for variant, base in (("online", 30), ("pingpong", 50), ("resident", 20)):
        for k, tile in enumerate((1024, 8192, 65536, 131072)):
            for n in (10_000, 30_000, 100_000, 1_000_000):
                rows.append({"op": "softmax", "variant": variant, "n": n,
                             "softmax.tile_bytes": tile, "cycles": (base + k) * n,
                             "warnings": "unwaited_copy" if (n, tile) == (30_000, 131072) else "",
                             "hazards": 0, "wall_s": 0.0, "error": ""})
    fig = line_plot(pd.DataFrame(rows), "n", hue="variant")
    renderer = drawn(fig)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None and len(legend.get_texts()) == 13
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    # and it is on the figure, not cut off
    fig_box = fig.bbox
    box = legend.get_window_extent(renderer)
    assert box.x1 <= fig_box.x1 and box.y0 >= fig_box.y0


# ------------------------------------------------------------------ 5. camera streams figure
def test_camera_streams_figure_has_a_unit_on_every_axis():
    """Before: the right panel (high-priority p99) had tick numbers and no label or unit."""
    spec = importlib.util.spec_from_file_location("camera_streams",
                                                  ROOT / "experiments" / "camera_streams.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = []
    for setup in ("seed pingpong, 1 core", "seed pingpong, 2 cores"):
        for cams in (1, 2, 3):
            rows.append({"setup": setup, "cores": 1, "variant": "pingpong", "cameras": cams,
                         "camera_p99_us": 5000.0 * cams, "hp_p99_us": 10_000.0 + 100 * cams})
    df = pd.DataFrame(rows)
    fig = mod.figure(df, {s: 2 for s in df["setup"].unique()})
    panels = [a for a in fig.axes if a.get_visible()]
    assert len(panels) == 2
    for ax in panels:
        assert "ms" in ax.get_ylabel() and ax.get_xlabel()


def _camera_figures():
    """experiments/camera_streams.py's figure of the committed results, up to 3 and 12 cameras."""
    spec = importlib.util.spec_from_file_location("camera_streams",
                                                  ROOT / "experiments" / "camera_streams.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    df = mod.read_table(ROOT / "results" / "camera_streams.csv")
    for most in (3, 12):
        small = df[df["cameras"] <= most]
        limits = {s: mod.sustain_limit(small[small["setup"] == s]) for s in small["setup"].unique()}
        yield mod.figure(small, limits)


def test_camera_streams_deadline_labels_stay_inside_their_panels_and_clear_of_the_legend():
    """Before: the deadline labels sat at 0.7 cameras, so a run of up to 3 cameras (x from about
    0.9) drew them across the y axis and its label, and the left one under the legend."""
    for fig in _camera_figures():
        renderer = drawn(fig)
        legend = fig.axes[0].get_legend().get_window_extent(renderer)
        labels = [(ax, t) for ax in fig.axes for t in ax.texts if "deadline" in t.get_text()]
        assert len(labels) == 2
        for ax, t in labels:
            box, inside = t.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1, f"{t.get_text()} leaves its axes"
            assert not box.overlaps(legend), f"{t.get_text()} is under the legend"


# ------------------------------------------------------------------ 6. workload trace time
def test_workload_trace_times_are_whole_nanoseconds(busy, tmp_path):
    """Before: whole microseconds, so identical ops lasted 78 or 79 us. Now each time is a whole
    number of ns and a core's slice lasts its op's cycles (to the ns at 1000 MHz)."""
    run, tasks = busy
    obj = workload_trace(run, tasks)
    clock = run.model.core.clock_mhz
    assert clock == 1000.0
    ev = obj["traceEvents"]
    timed = [e for e in ev if "ts" in e]
    for e in timed:
        for k in ("ts", "dur"):
            if k in e:
                ns = e[k] * 1000
                assert abs(ns - round(ns)) < 1e-6, f"{k} {e[k]} is not a whole ns"
    cores = [e for e in ev if e["ph"] == "X" and e["pid"] == 1]
    assert len(cores) == len(tasks)
    for e in cores:
        op_ns = e["args"]["op_cycles"] * 1000 / clock
        assert abs(e["dur"] * 1000 - op_ns) <= 1.0 + 1e-6
    # identical ops: durations within a ns of each other
    durs = [e["dur"] for e in cores if e["args"]["stream"] == "camera_b"]
    assert max(durs) - min(durs) <= 0.001 + 1e-9 + (tasks["op_cycles"].max()
                                                    - tasks["op_cycles"].min()) / clock
    for pid in (1, 2):  # no two slices of a thread overlap, even in ns
        for tid in {e["tid"] for e in ev if e["ph"] == "X" and e["pid"] == pid}:
            spans = sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
                           for e in ev if e["ph"] == "X" and e["pid"] == pid
                           and e["tid"] == tid)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    path = write_workload_trace(run, tasks, tmp_path / "w.json")
    assert json.loads(path.read_text())["traceEvents"]


# ------------------------------------------------------------------ 7. task table columns
def test_tasks_on_one_core_never_overlap_and_done_is_separate(busy, tmp_path):
    """Before: ``end_us`` held the host's completion (the RPC's trailing half included) while
    ``start_us`` was the core taking the task, so a core's tasks overlapped by 150 us."""
    run, tasks = busy
    out = write_tasks_csv(tasks, tmp_path / "tasks.csv")
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    half_rpc_us = run.model.host.rpc_latency_us / 2
    clock = run.model.core.clock_mhz
    for r in rows:
        submit, queued, start = (float(r[k]) for k in ("submit_us", "queued_us", "start_us"))
        core_end, done = float(r["core_end_us"]), float(r["done_us"])
        assert submit <= queued <= start <= core_end <= done
        assert done - core_end == pytest.approx(half_rpc_us, abs=2e-3)
        assert core_end - start == pytest.approx(int(r["op_cycles"]) / clock, abs=2e-3)
        assert float(r["latency_us"]) == pytest.approx(done - submit, abs=2e-3)
    for core in {r["core"] for r in rows}:
        spans = sorted((float(r["start_us"]), float(r["core_end_us"])) for r in rows
                       if r["core"] == core)
        assert len(spans) > 1
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "tasks overlap on a core"
    # the frame's own columns agree with the CSV's
    assert np.allclose(tasks["core_end_us"], tasks["core_end_cycle"] / clock)
    assert np.allclose(tasks["done_us"], tasks["done_cycle"] / clock)


# ------------------------------------------------------------------ the queue at any scale
def test_queue_per_bin_is_the_step_functions_mean_and_maximum():
    """Steps 1 from 0, 3 from 1, 0 from 3 to the end at 4, in bins [0, 2) and [2, 4): means
    (1 + 3) / 2 and (3 + 0) / 2, maxima 3 and 3 (in effect at the second bin's start)."""
    from dspsim.analysis.workload_plots import queue_per_bin

    mean, most = queue_per_bin(np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 0.0]), 4.0,
                               np.array([0.0, 2.0, 4.0]))
    assert mean.tolist() == [2.0, 1.5] and most.tolist() == [3.0, 3.0]


def test_a_queue_denser_than_its_bins_is_drawn_as_their_mean_and_maximum():
    """Hundreds of queue steps on a figure's bins: each bin's mean and maximum (a pixel of
    spikes merged reads as a queue never empty), and the title says so; a few steps: drawn."""
    run, tasks = busy_run(count=400)
    fig = workload_figure(run, tasks)
    assert "queue: per" in fig._suptitle.get_text() and "mean (grey) and maximum" in \
        fig._suptitle.get_text()
    few, few_tasks = busy_run(count=3)
    assert "queue: per" not in workload_figure(few, few_tasks)._suptitle.get_text()
    import matplotlib.pyplot as plt

    plt.close("all")


def test_camera_streams_panels_label_a_tick_below_their_lowest_point():
    """Before: with up to 3 cameras the left panel's lowest labelled tick was 5 ms and the
    resident setup's 2.4 ms line ran below it, its value unreadable."""
    for fig in _camera_figures():
        drawn(fig)
        for ax in fig.axes:
            lowest = min(float(np.min(line.get_ydata())) for line in ax.get_lines()
                         if len(line.get_ydata()) > 2)
            ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
            assert min(ticks) <= lowest, (ax.get_title(), ticks, lowest)
