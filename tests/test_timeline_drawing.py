"""The timeline figure tells the truth at any scale: drawing defects found by the figures audit
(stalled kernels, idle seams, text that does not fit, bin widths, offset notation, colours)."""

import itertools
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from dspsim import load_model, simulate
from dspsim.analysis.timeline import kernel_colours, timeline_figure
from dspsim.analysis.timeline_draw import (
    CHANNEL_REQUEST_COLOURS,
    COPY_COLOURS,
    CORE_REQUEST_COLOUR,
    KERNEL_COLOURS,
    OTHER_REQUEST_COLOUR,
    PASS_COLOURS,
    SETUP_COLOUR,
    TCM_COLOURS,
    WAIT_COLOURS,
)
from dspsim.analysis.timeline_memories import ddr_stall_handle


def run(variant, model=None, **kw):
    return simulate(model or load_model(), "softmax", variant, data=False, trace=True,
                    port_log=True, fidelity="tile", **kw)


def rendered(fig):
    """The figure drawn on an Agg canvas: (RGB array, top row first; renderer)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].astype(int), canvas.get_renderer()


def lane_band(fig, ax, label, img):
    """Pixel rows and columns of the inside of the lane called ``label`` (rows top first)."""
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    y = ax.get_yticks()[ticks.index(label)]
    height = img.shape[0]
    (x0, y_lo), (x1, y_hi) = ax.transData.transform([(ax.get_xlim()[0], y - 0.3),
                                                    (ax.get_xlim()[1], y + 0.3)])
    return (slice(int(height - y_hi) + 1, int(height - y_lo) - 1),
            slice(int(np.ceil(x0)) + 1, int(x1) - 1))


def near(img, colour, tol=12):
    return (np.abs(img - np.array(to_rgb(colour)) * 255).max(axis=-1) <= tol)


def lab(colour):
    """CIELAB (D65) of a colour, for ΔE distances."""
    rgb = np.array(to_rgb(colour))
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                  [0.0193, 0.1192, 0.9505]])
    xyz = m @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


# ------------------------------------------------------------------ 1. stalled kernels
@pytest.mark.parametrize("window", [None, (200_000, 200_500)])
def test_direct_core_lane_is_as_busy_as_the_core(window):
    """A direct kernel stalled on DDR 99 % of its time colours ~1 % of the core lane, at the
    whole run and in a 500-cycle window; the rest is drawn as 'stalled on DDR'."""
    r = run("direct", n=20_000)
    core = r.trace[r.trace["engine"] == "core0"]
    comp = core[core["kind"] == "compute"]
    busy = 1 - comp["ddr_stall_cycles"].sum() / (comp["end_cycle"] - comp["start_cycle"]).sum()
    assert busy < 0.02
    fig = timeline_figure(r, window)
    img, _ = rendered(fig)
    rows, cols = lane_band(fig, fig.axes[0], "core", img)
    band = img[rows, cols]
    kernel = np.zeros(band.shape[:2], bool)
    for c in kernel_colours(core).values():
        kernel |= near(band, c, tol=25)
    assert kernel.mean() < busy + 0.03
    stalled = near(band, ddr_stall_handle().get_facecolor()[:3], tol=25)
    assert stalled.mean() > 0.3  # the hatch lines take the rest
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("stalled on DDR" in t for t in legend)


# ------------------------------------------------------------------ 2. idle seams
def test_busy_channels_have_no_white_columns():
    """Copies 3.5 px wide, back to back (gaps far below a pixel): no pixel column of the
    channel lanes is white."""
    model = load_model().with_overrides({"softmax.tile_bytes": 2048})
    r = run("pingpong", model=model, n=100_000)
    fig = timeline_figure(r)
    img, _ = rendered(fig)
    ax = fig.axes[0]
    for lane in ("iDMA ch0", "iDMA ch1"):
        rows, cols = lane_band(fig, ax, lane, img)
        band = img[rows, cols]
        white = (band.min(axis=-1) >= 235).all(axis=0)
        # the copies on this channel cover every column from the first copy to the last
        ch = r.trace[(r.trace["engine"] == f"core0.idma{lane[-1]}")
                     & r.trace["kind"].isin(["copy_in", "copy_out"])]
        gaps = ch["start_cycle"].to_numpy()[1:] - ch["end_cycle"].to_numpy()[:-1]
        cycles_per_px = r.cycles / (cols.stop - cols.start)
        assert gaps.max() < 0.5 * cycles_per_px
        first = int(ch["start_cycle"].min() / cycles_per_px) + 2
        last = int(ch["end_cycle"].max() / cycles_per_px) - 2
        assert not white[first:last].any(), np.nonzero(white[first:last])[0][:10] + first


# ------------------------------------------------------------------ 3. text
def texts_of(fig, renderer, ax):
    return [(t, t.get_window_extent(renderer)) for t in ax.texts
            if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("variant,kw", [
    ("resident", {"n": 150_000}),
    ("rows", {"shape": (4, 40_000)}),
    ("multibuffer", {"n": 100_000}),
])
def test_lane_labels_fit_their_bars_and_do_not_overlap(variant, kw):
    r = run(variant, **kw)
    fig = timeline_figure(r)
    _, renderer = rendered(fig)
    ax = fig.axes[0]
    box = ax.get_window_extent(renderer)
    texts = texts_of(fig, renderer, ax)
    assert texts
    for t, ext in texts:
        assert box.x0 - 0.5 <= ext.x0 and ext.x1 <= box.x1 + 0.5, t.get_text()
    for (a, ea), (b, eb) in itertools.combinations(texts, 2):
        assert not ea.overlaps(eb), (a.get_text(), b.get_text())
    # a pass label stays inside its pass
    to_px = ax.transData.transform
    for p in r.passes:
        x0 = to_px((p["start_cycle"], 0))[0]
        x1 = to_px((p["end_cycle"], 0))[0]
        for t, ext in texts:
            if t.get_text().split(":")[0] == p["name"] and x0 <= (ext.x0 + ext.x1) / 2 <= x1:
                assert x0 - 0.5 <= ext.x0 and ext.x1 <= x1 + 0.5, t.get_text()


def test_y_tick_labels_inside_the_figure():
    r = run("resident", n=100_000)
    fig = timeline_figure(r)
    _, renderer = rendered(fig)
    labels = fig.axes[0].get_yticklabels()
    assert any("(1)" in t.get_text() for t in labels)  # the long "TCM buffer 0 (1)" labels
    for t in labels:
        assert t.get_window_extent(renderer).x0 >= 4, t.get_text()


# ------------------------------------------------------------------ 4. bin width
def test_bin_width_of_a_tiny_window_is_not_rounded_to_zero():
    r = run("pingpong", n=20_000)
    fig = timeline_figure(r, (0, 100))
    notes = [t.get_text() for a in fig.axes for t in a.texts if "bins" in t.get_text()]
    assert len(notes) == 1
    width = float(re.search(r"over ([0-9.,]+)-cycle bins", notes[0]).group(1).replace(",", ""))
    assert 0.01 < width < 1.0  # 100 cycles over a bin per pixel column


# ------------------------------------------------------------------ 5. offset notation
def test_narrow_window_of_a_long_run_has_no_offset_notation():
    r = run("direct", n=20_000)
    lo, hi = 1_000_000, 1_000_500
    fig = timeline_figure(r, (lo, hi))
    _, renderer = rendered(fig)
    axes = fig.axes + [c for a in fig.axes for c in a.child_axes]
    for a in axes:
        assert a.xaxis.get_offset_text().get_text() == ""
        assert a.xaxis.get_major_formatter().get_offset() == ""
    us = fig.axes[0].child_axes[0]
    values = [float(t.get_text().replace(",", "")) for t in us.get_xticklabels()
              if t.get_text()]
    assert values and all(999.9 <= v <= 1000.6 for v in values)
    cycles = [float(t.get_text().replace(",", "")) for t in fig.axes[2].get_xticklabels()
              if t.get_text()]
    assert cycles and all(lo <= v <= hi for v in cycles) and len(set(cycles)) == len(cycles)


# ------------------------------------------------------------------ 6. colours
OTHER_STATE_COLOURS = (
    set(KERNEL_COLOURS) | set(COPY_COLOURS.values()) | set(WAIT_COLOURS.values())
    | set(TCM_COLOURS.values()) | set(PASS_COLOURS) | {SETUP_COLOUR, "#000000", "#ffffff"}
)


def test_requester_colours_are_their_own_for_up_to_eight_channels():
    requesters = [CORE_REQUEST_COLOUR, *CHANNEL_REQUEST_COLOURS[:8], OTHER_REQUEST_COLOUR]
    assert len(CHANNEL_REQUEST_COLOURS) >= 8
    assert len({c.lower() for c in requesters}) == len(requesters)
    others = OTHER_STATE_COLOURS | {ddr_stall_handle().get_facecolor()}
    for c, o in itertools.product(requesters, others):
        assert np.linalg.norm(lab(c) - lab(o)) >= 20, (c, o)
    for a, b in itertools.combinations(requesters, 2):
        assert np.linalg.norm(lab(a) - lab(b)) >= 20, (a, b)


def test_four_channel_figure_legend_colours_are_unique():
    model = load_model().with_overrides(
        {"idma.channels": 4, "tcm.banks": 4, "softmax.buffers": 4})
    r = run("multibuffer", model=model, n=60_000)
    fig = timeline_figure(r)
    entries = {t.get_text(): h.get_facecolor() for t, h in
               zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles)
               if hasattr(h, "get_facecolor")}
    requests = {k: v for k, v in entries.items() if "requests in flight" in k}
    assert len(requests) == 4
    other = [v for k, v in entries.items() if k not in requests]
    for k, c in requests.items():
        for o in other:
            assert np.linalg.norm(lab(c[:3]) - lab(o[:3])) >= 20, k
    for a, b in itertools.combinations(requests.values(), 2):
        assert np.linalg.norm(lab(a[:3]) - lab(b[:3])) >= 20


def test_pass_boundaries_too_dense_to_draw_are_noted_not_drawn():
    """A few passes: a dashed vertical at each boundary. Many rows' passes (2,559 boundaries
    on 640 rows) would hide every lane: none drawn, and the note says how many there are."""
    import matplotlib.pyplot as plt

    def dashed(fig):
        return sum(1 for ax in fig.axes for line in ax.get_lines()
                   if line.get_linestyle() not in ("-", "None", "solid")
                   and len(set(line.get_xdata())) == 1)

    def notes(fig):
        return " ".join(t.get_text() for t in fig.texts)

    few = timeline_figure(run("direct", n=4000))
    assert dashed(few) >= 3 and "dashed verticals: pass boundaries" in notes(few)
    many = timeline_figure(run("direct", shape=(640, 100)))
    assert dashed(many) == 0
    assert "2,559 pass boundaries, too close to draw" in notes(many)
    plt.close("all")


@pytest.mark.parametrize("model_name, op, settings, shape, label", [
    ("esp32s3", "copy", {"copy.src": "psram", "copy.dst": "psram"}, (8184,),
     "iDMA copy (PSRAM→PSRAM)"),
    ("ameba_hifi5", "copy", {"copy.src": "tcm", "copy.dst": "psram"}, (4096,),
     "iDMA output copy (TCM→PSRAM)"),
    ("ameba_hifi5", "fc", {}, (256, 768), "iDMA input copy (PSRAM→TCM)"),
])
def test_a_copys_legend_names_its_two_ends(model_name, op, settings, shape, label):
    """A memory-to-memory copy is labelled by its two memories; a copy with a TCM end (a
    ping-pong's output written back after its inputs, a copy out of TCM) keeps 'TCM'."""
    m = load_model(model_name).with_overrides(settings)
    variant = "dma" if model_name == "esp32s3" else ("idma" if op == "copy" else "pingpong")
    kw = {"n": shape[0]} if op == "copy" else {"shape": shape}
    r = simulate(m, op, variant, data=False, trace=True, port_log=True, **kw)
    fig = timeline_figure(r)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert label in legend
    assert any(t.startswith("iDMA copy (") for t in legend) == (model_name == "esp32s3")


def test_requests_wholly_outside_the_window_count_exactly_zero():
    """An interval before or after the bins adds nothing, not the rounding of adding and taking
    away its length (a requester seen only outside the window once got a legend entry)."""
    from dspsim.analysis.series import binned_mean

    edges = np.linspace(0.0, 1_371_496.0, 800)
    starts = np.array([-7483.126150965691, 1_371_600.0, 10.0])
    ends = np.array([-7204.231193010, 1_372_929.3074221015, 10.0 + 0.1])
    got = binned_mean(starts[:2], ends[:2], np.ones(2), edges)
    assert not got.any()
    got = binned_mean(starts, ends, np.ones(3), edges)
    assert got[0] * (edges[1] - edges[0]) == pytest.approx(0.1, rel=1e-6)
    assert np.abs(got[1:]).max() < 1e-12


def test_a_channel_that_copies_only_outside_the_window_is_idle_and_not_in_the_legend():
    """fc direct: the host's copies run before and after the timer; in the op's window no
    channel works, so both channel lanes say idle and no channel has a requests entry."""
    res = simulate(load_model(), op="fc", variant="direct", trace=True, port_log=True)
    assert (res.trace["engine"] == "core0.idma0").any()  # copies outside the window exist
    fig = timeline_figure(res)
    keys = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "DDR requests in flight: core0" in keys
    assert not any("idma" in k for k in keys)
    assert [t.get_text() for t in fig.axes[0].texts].count("idle") == 2


def test_a_tcm_buffer_that_holds_nothing_in_the_window_says_empty():
    """A window of the first 5 cycles (the core programming the first descriptor): the channel
    lanes said idle and the two TCM buffer lanes were blank, unlabelled."""
    res = simulate(load_model(), n=20_000, data=False, trace=True, port_log=True)
    fig = timeline_figure(res, window=(0.0, 5.0))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("idle") == 2 and texts.count("empty") == 2
    texts = [t.get_text() for t in timeline_figure(res).axes[0].texts]
    assert "empty" not in texts  # the whole run: both buffers hold tiles
