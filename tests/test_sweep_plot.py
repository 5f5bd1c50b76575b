"""Sweep figures that tell the truth: a colour scale per heatmap panel, speed-up by default on a
two-variant heatmap, points with warnings marked, every figure format."""

import argparse

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import LogNorm
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from dspsim.analysis.timeline import FIGURE_FORMATS
from dspsim.study import sweep_plot
from dspsim.study.sweep_plot import (
    FIGURE_EXTENSIONS,
    WARNED_HATCH,
    default_heatmap_y,
    heatmap,
    panel_norm,
    plot_sweep,
    plot_sweep_cli,
)


def two_variants(warn_at=()) -> pd.DataFrame:
    """Ping-pong flat around 1,000 cycles, direct from 2,000 to 200,000: ranges 100x apart."""
    rows = []
    for lat in (10.0, 100.0, 1000.0):
        for out in (1, 4, 16):
            for variant, cycles in (("pingpong", 1000 + lat / out), ("direct", 2000 + 200 * lat)):
                warned = variant == "pingpong" and (lat, out) in warn_at
                rows.append({"op": "softmax", "variant": variant, "n": 1000,
                             "ddr.latency_cycles": lat, "idma.max_outstanding": out,
                             "cycles": int(cycles), "warnings": "unwaited_copy" if warned else "",
                             "hazards": 0, "wall_s": 0.0, "error": ""})
    return pd.DataFrame(rows)


def panels(fig):
    """(axes, image) of each heatmap panel, and the colour bars."""
    images = [(a, im) for a in fig.axes for im in a.get_images() if isinstance(im, AxesImage)]
    bars = [a for a in fig.axes if a.get_label() == "<colorbar>"]
    return images, bars


def test_each_panel_has_its_own_colour_scale_and_bar():
    """Before: one scale for both variants, so ping-pong (1,000 to 1,100 cycles) was one flat
    colour next to direct (2,000 to 200,000)."""
    df = two_variants()
    fig = heatmap(df, "ddr.latency_cycles", "idma.max_outstanding")
    images, bars = panels(fig)
    assert len(images) == 2 and len(bars) == 2
    for ax, im in images:
        variant = ax.get_title().split("=")[1]
        cycles = df[df["variant"] == variant]["cycles"].to_numpy(float)
        assert (im.norm.vmin, im.norm.vmax) == (cycles.min(), cycles.max())
        shown = im.norm(im.get_array().compressed())
        assert shown.min() == pytest.approx(0.0) and shown.max() == pytest.approx(1.0)
        # more than 10x: a log scale; ping-pong's 10 % spread: linear
        assert isinstance(im.norm, LogNorm) == (variant == "direct")
    assert "each panel its own colour scale" in fig._suptitle.get_text()


def test_panel_norms():
    norm, cmap = panel_norm(np.array([0.01, 0.2, 0.9, np.nan]), 0.5)  # straddles, 90x
    assert cmap == "RdBu" and norm(0.5) == pytest.approx(0.5)
    assert norm(0.01) == pytest.approx(0.0) and norm(0.9) == pytest.approx(1.0)
    assert norm.inverse(norm(0.2)) == pytest.approx(0.2)
    norm, cmap = panel_norm(np.array([0.8, 1.3]), 1.0)  # straddles, narrow: linear diverging
    assert cmap == "RdBu" and norm(1.0) == pytest.approx(0.5)
    norm, _ = panel_norm(np.array([5.0, 5.0]), None)  # one value: still a valid scale
    assert norm.vmin < 5.0 < norm.vmax


def test_a_heatmap_draws_what_was_asked_for_cycles_by_default(tmp_path, monkeypatch):
    """A heatmap of two variants once switched to speedup on its own: it draws cycles unless
    --y (or --baseline) asks for speedup."""
    src = tmp_path / "s.csv"
    two_variants().to_csv(src, index=False)
    assert default_heatmap_y(two_variants()) == "cycles"
    assert default_heatmap_y(two_variants(), "pingpong") == "speedup"
    one = two_variants()
    assert default_heatmap_y(one[one["variant"] == "pingpong"]) == "cycles"
    seen = []
    real = sweep_plot.heatmap
    monkeypatch.setattr(sweep_plot, "heatmap",
                        lambda df, kx, ky, y, **kw: seen.append(y) or real(df, kx, ky, y, **kw))
    plot_sweep(src, heatmap_keys=["ddr.latency_cycles", "idma.max_outstanding"])
    ns = argparse.Namespace(file=str(src), x=None, y=None, hue=None,
                            heatmap=["ddr.latency_cycles", "idma.max_outstanding"],
                            out=str(tmp_path / "m.png"))
    assert plot_sweep_cli(ns) == 0
    plot_sweep(src, y="cycles", heatmap_keys=["ddr.latency_cycles", "idma.max_outstanding"])
    single = tmp_path / "one.csv"
    one[one["variant"] == "pingpong"].to_csv(single, index=False)
    plot_sweep(single, heatmap_keys=["ddr.latency_cycles", "idma.max_outstanding"])
    assert seen == ["cycles", "cycles", "cycles", "cycles"]
    # line plots keep cycles
    plot_sweep(src, x="ddr.latency_cycles", hue="variant")


def test_heatmap_cells_with_warnings_are_dotted():
    warned = {(100.0, 1), (1000.0, 16)}
    fig = heatmap(two_variants(warned), "ddr.latency_cycles", "idma.max_outstanding")
    images, _ = panels(fig)
    for ax, _ in images:
        dotted = [p for p in ax.patches if isinstance(p, Rectangle)
                  and p.get_hatch() == WARNED_HATCH]
        expect = 2 if ax.get_title() == "variant=pingpong" else 0
        assert len(dotted) == expect
        if expect:
            cells = sorted((p.get_x() + 0.5, p.get_y() + 0.5) for p in dotted)
            assert cells == [(1.0, 0.0), (2.0, 2.0)]  # (lat 100, out 1), (lat 1000, out 16)
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert legend == ["dotted: point with warnings (unwaited_copy)"]
    # a speed-up cell is dotted when either of its runs warned
    fig = heatmap(two_variants(warned), "ddr.latency_cycles", "idma.max_outstanding", "speedup")
    (ax, _), = panels(fig)[0]
    assert len([p for p in ax.patches if p.get_hatch() == WARNED_HATCH]) == 2
    # no warnings: nothing dotted, no legend
    fig = heatmap(two_variants(), "ddr.latency_cycles", "idma.max_outstanding", "speedup")
    assert not fig.legends and not panels(fig)[0][0][0].patches


def test_every_figure_format_and_svg_text(tmp_path):
    assert FIGURE_EXTENSIONS is FIGURE_FORMATS and ".pdf" in FIGURE_FORMATS
    src = tmp_path / "s.csv"
    two_variants({(10.0, 1)}).to_csv(src, index=False)
    keys = ["ddr.latency_cycles", "idma.max_outstanding"]
    svg = plot_sweep(src, heatmap_keys=keys, out=tmp_path / "m.svg").read_text()
    assert "<text" in svg and "cycles (core clock cycles)" in svg  # text kept as text
    assert plot_sweep(src, x=keys[0], out=tmp_path / "l.pdf").read_bytes()[:5] == b"%PDF-"
    assert (tmp_path / "s.png").exists() is False
    assert plot_sweep(src, x=keys[0]).read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob("*.tmp"))


def test_a_colour_bar_label_fits_beside_its_bar():
    """Before: three variants' speed-up panels labelled each bar "speedup (pingpong cycles /
    variant cycles; above 1 the variant is faster)" in one line, taller than the bar: it ran
    into the figure's title and off the figure's top."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    df = pd.concat([two_variants(), two_variants().query("variant == 'direct'")
                    .assign(variant="online", cycles=lambda d: d["cycles"] // 2)])
    fig = heatmap(df, "ddr.latency_cycles", "idma.max_outstanding", "speedup")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    _, bars = panels(fig)
    assert len(bars) == 2
    for bar in bars:
        text = bar.yaxis.label
        assert "above 1" in text.get_text()
        box = text.get_window_extent(renderer)
        assert box.y0 >= 0 and box.y1 <= title.y0, "the colour bar's label runs into the title"


def test_a_panel_of_values_that_hardly_differ_is_not_painted_as_the_whole_scale():
    """Before: online's speed-ups 1.6662 to 1.6664 (0.012 %) spanned the whole colour map,
    darkest to brightest, beside cell numbers all reading 1.67. As a line plot within 1 %
    starts at 0, a panel within 1 % gets a scale 1 % of its largest value wide."""
    values = np.array([1.6662, 1.6664, 1.6663])
    norm, cmap = panel_norm(values, None)
    shown = norm(values)
    assert cmap == "viridis" and np.ptp(shown) < 0.02 and 0.4 < shown.min() < shown.max() < 0.6
    assert norm.vmax - norm.vmin == pytest.approx(0.01 * 1.6664)
    norm, _ = panel_norm(np.array([1000.0, 1100.0]), None)  # 10 %: its own range, as before
    assert (norm.vmin, norm.vmax) == (1000.0, 1100.0)
    norm, _ = panel_norm(np.array([0.0, 0.0]), None)
    assert norm.vmin < 0.0 < norm.vmax


def test_a_speedup_line_plots_y_label_fits_the_figure():
    """Before: "speedup (direct cycles / pingpong cycles; above 1 pingpong is faster)" in one
    line was taller than the axes and ran off the figure's top (experiments'
    sweep_ddr_latency.png)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    df = two_variants()
    df = df[df["idma.max_outstanding"] == 1]
    fig = sweep_plot.line_plot(df, "ddr.latency_cycles", "speedup", baseline="direct")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    text = fig.axes[0].yaxis.label
    assert "above 1 pingpong is faster" in text.get_text().replace("\n", " ")
    box = text.get_window_extent(canvas.get_renderer())
    assert 0 <= box.y0 and box.y1 <= fig.bbox.height, "the y label runs off the figure"


def test_a_colour_bar_of_millions_reads_without_an_offset():
    """Before: ping-pong's bar read 1,000 to 1,100 fine, but cycles in millions were ticks
    "3.080 .. 3.105" under a "1e6" offset; as the line plot's axis, whole numbers with commas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    df = two_variants().assign(cycles=lambda d: d["cycles"] * 1000)
    fig = heatmap(df[df["variant"] == "pingpong"], "ddr.latency_cycles", "idma.max_outstanding")
    FigureCanvasAgg(fig).draw()
    _, bars = panels(fig)
    ticks = [t.get_text() for t in bars[0].yaxis.get_ticklabels() if t.get_text()]
    assert ticks and all("," in t for t in ticks)
    assert bars[0].yaxis.get_offset_text().get_text() == ""
