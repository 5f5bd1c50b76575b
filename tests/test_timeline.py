"""Timeline figures, saved runs and their command-line errors."""

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dspsim.analysis.engines import RunEngines
from dspsim.analysis.stalls import stall_summary
from dspsim.analysis.tiles import tcm_segments, tile_table
from dspsim.analysis.timeline import (
    FIGURE_FORMATS,
    check_figure_path,
    check_window,
    compare_figure,
    default_timeline_path,
    kernel_colours,
    parse_window,
    plot_compare,
    plot_timeline,
    timeline_figure,
)
from dspsim.analysis.timeline_draw import (
    COPY_COLOURS,
    DPI,
    LANE_H,
    SETUP_COLOUR,
    TCM_COLOURS,
    WAIT_COLOURS,
)
from dspsim.analysis.timeline_memories import ddr_series
from dspsim.errors import DspsimInputError
from dspsim.results import load_run, save_run
from dspsim.run import simulate
from tests.cli_helpers import run_cli

PNG = b"\x89PNG\r\n\x1a\n"
# written by the release before operators plugged in (format version 1):
# dspsim run --n 2000 --save run_v1_pingpong_n2000.json.gz
V1_RUN = Path(__file__).parent / "data" / "run_v1_pingpong_n2000.json.gz"


@pytest.fixture(scope="module")
def headline(j6):
    """The headline run: all tiles of all three passes."""
    return simulate(j6, variant="pingpong", n=100_000, data=False, trace=True, port_log=True)


@pytest.fixture(scope="module")
def direct(j6):
    return simulate(j6, variant="direct", n=20_000, data=False, trace=True, port_log=True)


def test_headline_figure_has_every_lane_and_a_full_title(headline):
    fig = timeline_figure(headline)
    lanes = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert lanes == ["pass", "core", "iDMA ch0", "iDMA ch1", "TCM buffer 0", "TCM buffer 1"]
    title = fig._suptitle.get_text()
    for part in ("softmax, pingpong", "n = 100,000", "tile 32,768 bytes",
                 f"{headline.cycles:,} cycles"):
        assert part in title
    assert fig.axes[0].get_xlim() == (0.0, float(headline.cycles))
    labels = [a.get_ylabel() for a in fig.axes] + [a.get_xlabel() for a in fig.axes]
    assert any("bytes/cycle" in t for t in labels) and any("(cycles" in t for t in labels)
    assert any("(µs)" in t for t in labels + [c.get_xlabel() for a in fig.axes
                                               for c in a.child_axes])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    for entry in ("core waiting on iDMA input", "iDMA input copy (DDR→TCM)",
                  "iDMA output copy (TCM→DDR)", "TCM tile draining", "core: vecmaxf"):
        assert entry in legend


def test_png_and_svg_files(headline, direct, tmp_path):
    png = plot_timeline(headline, tmp_path / "pp.png")
    assert png.read_bytes()[:8] == PNG
    svg = plot_timeline(direct, tmp_path / "d.svg")
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()[:2000]
    cmp = plot_compare([headline, direct], tmp_path / "cmp.png")
    assert cmp.read_bytes()[:8] == PNG


def test_direct_core_is_drawn_stalled_on_ddr(direct):
    fig = timeline_figure(direct)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("stalled on DDR" in t for t in texts)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "core stalled on DDR (hatched)" in legend
    assert "core waiting on iDMA input" not in legend  # only what is drawn


def test_window_zooms(headline, tmp_path):
    fig = timeline_figure(headline, (1_000_000, 1_300_000))
    assert fig.axes[0].get_xlim() == (1_000_000.0, 1_300_000.0)
    assert "window 1,000,000 .. 1,300,000 cycles" in fig._suptitle.get_text()
    plot_timeline(headline, tmp_path / "w.png", (0, 1000))


def test_ddr_lane_conserves_bytes(headline):
    # all bytes moved during the op appear under the bandwidth curve, whatever the bins
    for bins in (1, 7, 600):
        s = ddr_series(headline, 0.0, float(headline.cycles), bins)
        width = np.diff(s["edges"])
        read = float((s["read_bytes_per_cycle"] * width).sum())
        write = float((s["write_bytes_per_cycle"] * width).sum())
        assert read == pytest.approx(headline.bytes["ddr_read"], rel=1e-9)
        assert write == pytest.approx(headline.bytes["ddr_write"], rel=1e-9)
        peak = headline.model.ddr.bytes_per_cycle
        assert (s["read_bytes_per_cycle"] + s["write_bytes_per_cycle"] <= peak * (1 + 1e-6)).all()
        inflight = sum(s["requests_in_flight"].values())
        assert inflight.max() <= headline.model.ddr.max_outstanding * (1 + 1e-6)
    assert set(s["requests_in_flight"]) == set(headline.engines_of("idma"))  # both channels


@pytest.mark.parametrize("text", ["5", "a:b", "10:5", "3:3", ":7", "nan:4"])
def test_parse_window_rejects(text):
    with pytest.raises(DspsimInputError, match="window"):
        parse_window(text)


def test_window_outside_the_run():
    assert parse_window("1_000:2_000") == (1000.0, 2000.0)
    assert check_window(None, 500) == (0.0, 500.0)
    with pytest.raises(DspsimInputError, match="outside the run"):
        check_window((100.0, 600.0), 500)
    with pytest.raises(DspsimInputError, match="outside the run"):
        check_window((-1.0, 100.0), 500)


def test_save_and_load_round_trip(headline, tmp_path):
    for name in ("run.json", "run.json.gz"):
        p = save_run(headline, tmp_path / name)
        back = load_run(p)
        pd.testing.assert_frame_equal(back.trace, headline.trace)
        assert back.port_log == [tuple(x) for x in headline.port_log]
        assert back.model == headline.model
        assert back.to_json() == json.loads(json.dumps(headline.to_json()))
        assert back.origin_cycle == headline.origin_cycle
        assert stall_summary(back) == stall_summary(headline)
    assert gzip.open(tmp_path / "run.json.gz").read(30).startswith(b'{"format":"dspsim-run"')


def _every_op_and_variant():
    from dspsim.ops import get_op, op_names

    return [(op, v) for op in op_names() for v in get_op(op).variants]


@pytest.mark.parametrize("op, variant", _every_op_and_variant())
def test_every_op_saved_with_values_loads_back(op, variant, tmp_path, j6):
    """An op's output summary (its own fields: numbers, flags) survives a save and a load."""
    from dspsim.ops import get_op

    shape = get_op(op).shape_of(shape=(4, 512) if get_op(op).ndim == 2 else (3000,))
    r = simulate(j6, op, variant, shape=shape, trace=True, port_log=True, fidelity="tile")
    back = load_run(save_run(r, tmp_path / "r.json.gz"))
    assert back.output == r.output and back.cycles == r.cycles
    pd.testing.assert_frame_equal(back.trace, r.trace)


def test_a_version_1_run_loads_with_todays_names(j6):
    r = load_run(V1_RUN)
    assert (r.op, r.variant, r.mode, r.shape, r.n) == ("softmax", "pingpong", "pingpong",
                                                       (2000,), 2000)
    assert r.model.core.count == 1 and r.model.softmax.tile_bytes == j6.softmax.tile_bytes
    # the names a run simulated now has, everywhere: engines, busy cycles, trace, DDR requesters
    now = simulate(r.model, variant="pingpong", n=2000, data=False, trace=True, port_log=True)
    assert r.engines == now.engines and r.core == now.core
    assert list(r.busy_cycles) == list(now.busy_cycles)
    assert set(r.trace["engine"]) == set(now.trace["engine"])
    assert {x[-1] for x in r.port_log} == {x[-1] for x in now.port_log}
    assert set(stall_summary(r)["engines"]) == set(stall_summary(now)["engines"])
    lanes = [t.get_text() for t in timeline_figure(r).axes[0].get_yticklabels()]
    assert lanes == ["pass", "core", "iDMA ch0", "iDMA ch1", "TCM buffer 0"]  # one tile a pass


def test_a_version_1_run_reports_plots_and_saves_as_version_2(tmp_path, capsys):
    code, out, err = run_cli(capsys, "report", V1_RUN)
    assert code == 0 and not err
    assert out.startswith("softmax pingpong on core0: n = 2,000")
    for word in ("wait_in_cycles", "core0.idma0", "hidden_dma_cycles", "exp_sum", "total"):
        assert word in out
    code, out, _ = run_cli(capsys, "plot", "timeline", V1_RUN, "--out", tmp_path / "v1.png")
    assert code == 0 and (tmp_path / "v1.png").read_bytes()[:8] == PNG
    r = load_run(V1_RUN)
    back = load_run(save_run(r, tmp_path / "v2.json"))
    assert json.loads((tmp_path / "v2.json").read_text())["format_version"] == 2
    assert back.to_json() == r.to_json() and back.model == r.model
    pd.testing.assert_frame_equal(back.trace, r.trace)


def test_version_1_hazards_take_todays_names(tmp_path):
    doc = json.loads(gzip.open(V1_RUN).read())
    doc["result"]["hazards"] = [{
        "cycle": 10, "kind": "write to bytes an unfinished read still needs", "memory": "dram0",
        "address_range": ["0x8000000", "0x8000040"], "bytes": 64, "tiles": [2, 0],
        "engines": ["idma1 copy_out #0", "idma0 copy_in #2"], "pass": "mul", "message": "...",
    }]
    path = tmp_path / "hazard.json"
    path.write_text(json.dumps(doc))
    (h,) = load_run(path).hazards
    assert h["memory"] == "core0.dram0"
    assert h["engines"] == ["core0.idma1 copy_out #0", "core0.idma0 copy_in #2"]


def test_default_plot_path():
    assert default_timeline_path("a/run.json.gz").as_posix() == "a/run_timeline.png"
    assert default_timeline_path("run.json").as_posix() == "run_timeline.png"


def test_cli_run_then_plot_from_the_saved_run(tmp_path, capsys):
    saved = tmp_path / "run.json.gz"
    code, out, _ = run_cli(capsys, "run", "--mode", "direct", "--n", "3000", "--save", saved,
                           "--timeline", tmp_path / "live.png", "--window", "0:100000")
    assert code == 0 and "wrote timeline" in out
    code, out, _ = run_cli(capsys, "plot", "timeline", saved)
    assert code == 0 and (tmp_path / "run_timeline.png").read_bytes()[:8] == PNG
    code, _, _ = run_cli(capsys, "plot", "timeline", saved, "--out", tmp_path / "z.svg",
                         "--window", "1000:20000")
    assert code == 0 and (tmp_path / "z.svg").exists()


def test_plot_sweep_dispatches_its_arguments(monkeypatch, capsys):
    import sys
    import types

    seen = {}
    fake = types.ModuleType("dspsim.study.sweep_plot")
    fake.plot_sweep_cli = lambda args: seen.update(vars(args)) or 0
    monkeypatch.setitem(sys.modules, "dspsim.study.sweep_plot", fake)
    code, _, _ = run_cli(capsys, "plot", "sweep", "t.csv", "--x", "n", "--heatmap", "a", "b")
    assert code == 0
    assert (seen["file"], seen["x"], seen["y"], seen["hue"], seen["heatmap"], seen["out"]) == (
        "t.csv", "n", None, None, ["a", "b"], None)  # plot_sweep picks speedup or cycles


def write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.json", "not found"),
        (lambda d: write(d / "x.json", b"\x00\x01garbage"), "is not a dspsim result"),
        (lambda d: write(d / "x.json", b'{"traceEvents": []}'), "is not a dspsim result"),
        (lambda d: write(d / "x.json", b"[1, 2]"), "is not a dspsim result"),
        (lambda d: write(d / "x.json.gz", gzip.compress(b'{"format": "dspsim-run", '
                                                        b'"format_version": 1}')),
         "is not a dspsim result"),
        (lambda d: write(d / "x.json", b'{"format": "dspsim-run", "format_version": 99}'),
         "format version 99; this dspsim reads versions 1 and 2"),
        (lambda d: write(d / "x.json", b'{"format": "dspsim-run", "format_version": "2"}'),
         "format version '2'"),
    ],
)
def test_plot_or_report_a_file_that_is_not_a_result(tmp_path, capsys, make, message):
    path = make(tmp_path)
    for argv in (("plot", "timeline", path, "--out", tmp_path / "o.png"), ("report", path)):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1 and not out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--timeline", "x.jpg"], "unknown extension '.jpg'; allowed .png, .svg"),
        (["--timeline", "noext"], "unknown extension '(none)'"),
        (["--timeline", "/nonexistent-dir/x.png"], "does not exist"),
        (["--save", "x.pickle"], "allowed .json, .json.gz"),
        (["--window", "0:10"], "give --timeline"),
        (["--timeline", "{tmp}/x.png", "--window", "0:99999999"], "outside the run"),
        (["--timeline", "{tmp}/x.png", "--window", "9:1"], "START must be less than END"),
    ],
)
def test_run_output_errors_are_one_line(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, "run", "--n", "1000", *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and not out
    assert not (tmp_path / "x.png").exists()


def test_unwritable_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        import os

        if os.access(locked, os.W_OK):  # running as root: permissions do not bind
            pytest.skip("directory permissions are not enforced for this user")
        code, _, err = run_cli(capsys, "run", "--n", "1000", "--timeline", locked / "x.png")
        assert code == 2 and "not writable" in err
    finally:
        locked.chmod(0o700)


# ------------------------------------------------------------------ the drawing tells the truth
def agg_pixels(fig):
    """The figure as the PNG has it: RGB pixels at the save resolution, and its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.set_dpi(DPI)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].astype(float), canvas.get_renderer()


def hex_rgb(colour):
    from matplotlib.colors import to_rgb

    return np.array(to_rgb(colour)) * 255


def lane_pixels(fig, pixels, y):
    """The pixels inside one lane's bars (a pixel's margin left out at the top and bottom)."""
    ax = fig.axes[0]
    height = pixels.shape[0]
    (x0, y_lo), (x1, y_hi) = ax.transData.transform(
        [(ax.get_xlim()[0], y - LANE_H / 2), (ax.get_xlim()[1], y + LANE_H / 2)])
    rows = slice(int(np.ceil(height - y_hi)) + 1, int(np.floor(height - y_lo)) - 1)
    return pixels[rows, int(np.ceil(x0)) + 1:int(np.floor(x1)) - 1]


def drawn_shares(block, colours: dict[str, str]) -> dict[str, float]:
    """The share of a lane's pixels nearest to each state's colour (white: idle)."""
    names = [*colours, "idle"]
    palette = np.array([hex_rgb(c) for c in colours.values()] + [[255.0, 255.0, 255.0]])
    dist = ((block[:, :, None, :] - palette[None, None]) ** 2).sum(axis=-1)
    nearest = dist.argmin(axis=-1)
    return {n: float((nearest == k).mean()) for k, n in enumerate(names)}


def time_shares(rows: pd.DataFrame, key: str, lo: float, hi: float) -> dict[str, float]:
    s = rows["start_cycle"].clip(lo, hi)
    e = rows["end_cycle"].clip(lo, hi)
    return ((e - s).groupby(rows[key]).sum() / (hi - lo)).to_dict()


@pytest.fixture(scope="module")
def million(j6):
    """n = 10^6 with 8 KiB tiles: every bar narrower than a pixel at full width."""
    model = j6.with_overrides({"softmax.tile_bytes": 8192})
    return simulate(model, variant="pingpong", n=1_000_000, data=False, trace=True,
                    port_log=True)


def test_sub_pixel_bars_are_drawn_as_their_share_of_time(million):
    """Before: every bar was drawn at least 2 px wide, so the core lane looked busy computing
    all run (1 % busy) and the iDMA lanes, their copies framed in white, half idle (99.5 %)."""
    fig = timeline_figure(million)
    pixels, _ = agg_pixels(fig)
    trace = million.trace
    lo, hi = 0.0, float(million.cycles)
    engines = million.engines_of("idma")
    # the core: each kernel, descriptor programming, both waits
    core = trace[trace["engine"] == million.core]
    state = core["kind"].where(core["kind"] != "compute", "kernel " + core["what"])
    want = time_shares(core.assign(state=state), "state", lo, hi)
    colours = {f"kernel {k}": c for k, c in kernel_colours(core).items()}
    colours |= {"setup": SETUP_COLOUR} | WAIT_COLOURS
    got = drawn_shares(lane_pixels(fig, pixels, -1), colours)
    assert sum(v for k, v in want.items() if k.startswith("kernel")) < 0.02  # 1 % busy
    for name in colours:
        assert got[name] == pytest.approx(want.get(name, 0.0), abs=0.02), (name, got, want)
    # both channels: busy 99.5 % of the run, half input, half output copies
    for y, ch in ((-2, engines[0]), (-3, engines[1])):
        want = time_shares(trace[trace["engine"] == ch], "kind", lo, hi)
        got = drawn_shares(lane_pixels(fig, pixels, y), COPY_COLOURS)
        assert got["copy_in"] + got["copy_out"] > 0.95
        for kind in COPY_COLOURS:
            assert got[kind] == pytest.approx(want[kind], abs=0.03), (ch, got, want)
    # the TCM buffers: filling, computing, draining... as long as they last
    segs = tcm_segments(trace, million.passes, RunEngines.of(million))
    for y, b in ((-4, 0), (-5, 1)):
        want = time_shares(segs[segs["buffer"] == b], "state", lo, hi)
        got = drawn_shares(lane_pixels(fig, pixels, y), TCM_COLOURS)
        for name in TCM_COLOURS:
            assert got[name] == pytest.approx(want.get(name, 0.0), abs=0.03), (b, got, want)
    assert any("share of its time" in t.get_text() for t in fig.texts)


def test_wide_bars_keep_their_labels_and_narrow_ones_their_share(headline):
    # the headline: copies are wide (labelled bars), kernels a few hundred cycles (columns)
    fig = timeline_figure(headline)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "t0" in texts and "t11" in texts
    pixels, _ = agg_pixels(fig)
    core = headline.trace[headline.trace["engine"] == headline.core]
    busy = float((core["end_cycle"] - core["start_cycle"])[core["kind"] == "compute"].sum())
    colours = {f"kernel {k}": c for k, c in kernel_colours(core).items()} | WAIT_COLOURS
    got = drawn_shares(lane_pixels(fig, pixels, -1), colours)
    drawn = sum(v for k, v in got.items() if k.startswith("kernel"))
    assert drawn == pytest.approx(busy / headline.cycles, abs=0.01)  # 0.8 %, not 2 px each


def test_window_tick_labels_stay_inside_the_figure(headline):
    for window in ((1_000_000, 1_300_000), (0, 100_000), (12_345, 987_654), None):
        fig = timeline_figure(headline, window)
        _, renderer = agg_pixels(fig)
        width = fig.bbox.width
        for a in fig.axes + [c for ax in fig.axes for c in ax.child_axes]:
            lo, hi = sorted(a.get_xlim())
            for tick in a.xaxis.get_major_ticks():
                label = tick.label1
                if lo <= tick.get_loc() <= hi and label.get_visible() and label.get_text():
                    box = label.get_window_extent(renderer)
                    assert 0 <= box.x0 and box.x1 <= width, (window, label.get_text())


def test_the_legend_lists_only_what_the_window_shows(headline):
    tiles = tile_table(headline.trace, headline.passes)
    t = tiles[(tiles["pass"] == "exp_sum") & (tiles["tile"] == 2)].iloc[0]
    fig = timeline_figure(headline, (t["copy_in_start_cycle"], t["copy_out_end_cycle"]))
    legend = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "core: vecexpf_max" in legend and "iDMA output copy (TCM→DDR)" in legend
    for absent in ("core: vecmaxf", "core: vecmul"):  # kernels of other passes
        assert absent not in legend
    # the whole run lists them all
    legend = [x.get_text() for x in timeline_figure(headline).legends[0].get_texts()]
    assert {"core: vecmaxf", "core: vecmul", "core: vecexpf_max"} <= set(legend)
    # a window of the max pass only reads: no output copy, nothing drains, no DDR write
    legend = [x.get_text() for x in timeline_figure(headline, (0, 100_000)).legends[0]
              .get_texts()]
    for absent in ("iDMA output copy (TCM→DDR)", "TCM tile draining", "DDR write (bytes/cycle)",
                   "core: vecexpf_max"):
        assert absent not in legend


def boxes_overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_compare_footnote_legend_and_axes_do_not_overlap(headline, direct):
    for fig in (compare_figure([headline, direct]), timeline_figure(headline)):
        _, renderer = agg_pixels(fig)
        legend = fig.legends[0].get_window_extent(renderer)
        (note,) = [t for t in fig.texts if "verticals" in t.get_text()
                   or "share of its time" in t.get_text()]
        note = note.get_window_extent(renderer)
        assert not boxes_overlap(legend, note)
        assert 0 <= note.x0 and note.x1 <= fig.bbox.width
        for a in fig.axes:
            if a.get_visible():
                assert not boxes_overlap(a.get_tightbbox(renderer), legend)


def test_svg_keeps_text_and_pdf_is_a_figure_format(headline, tmp_path):
    svg = plot_timeline(headline, tmp_path / "t.svg", (1_000_000, 1_300_000)).read_text()
    assert "<text" in svg and "exp_sum: 2,06" in svg  # text stays text, searchable
    pdf = plot_timeline(headline, tmp_path / "t.pdf", (1_000_000, 1_300_000))
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert plot_compare([headline], tmp_path / "c.pdf").read_bytes()[:5] == b"%PDF-"
    assert FIGURE_FORMATS == (".png", ".svg", ".pdf")
    assert check_figure_path(tmp_path / "x.PDF")
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file


def test_plot_timeline_takes_pdf(tmp_path, capsys, headline):
    saved = save_run(headline, tmp_path / "run.json.gz")
    code, out, err = run_cli(capsys, "plot", "timeline", saved, "--out", tmp_path / "t.pdf",
                             "--window", "0:200000")
    assert code == 0, err
    assert (tmp_path / "t.pdf").read_bytes()[:5] == b"%PDF-"


TILED_CASES = [
    ("softmax", "pingpong", (6, 3000)), ("softmax", "online", (4, 40_000)),
    ("softmax", "rows", (4, 40_000)), ("softmax", "multibuffer", (3, 40_000)),
    ("softmax", "resident", (300_000,)), ("softmax", "resident", (3, 20_000)),
    ("layernorm", "pingpong", (64, 1024)),
]


@pytest.mark.parametrize("op, variant, shape", TILED_CASES)
def test_no_two_tiles_of_a_pass_share_a_number(j6, op, variant, shape):
    """Rows, frame calls and a streamed remainder number their tiles after the pass's earlier
    ones: one row per tile, each with at most one input copy (never two copies summed)."""
    r = simulate(j6, op, variant, shape=shape, data=False, trace=True, fidelity="tile")
    tiles = tile_table(r.trace, r.passes, RunEngines.of(r))
    assert not tiles.duplicated(["pass", "tile"]).any()
    ins = r.trace[r.trace["kind"] == "copy_in"]
    assert not ins.duplicated(["pass", "tile"]).any()
    assert int(tiles["copy_in_cycles"].notna().sum()) == len(ins)  # a tile per input copy
    segs = tcm_segments(r.trace, r.passes, RunEngines.of(r))
    held = segs.groupby(["buffer", "lane"])
    for _, lane in held:  # a sub-lane never holds two tiles at once
        lane = lane.sort_values("start_cycle")
        assert (lane["start_cycle"].to_numpy()[1:] >= lane["end_cycle"].to_numpy()[:-1] - 1e-6
                ).all() or lane["tile"].nunique() == 1


def test_resident_tiles_hold_their_dataram_until_they_drain(j6):
    """The resident array stays in TCM from its copy in to its copy out: the TCM lanes show
    every resident tile held through exp_sum, not freed after the max."""
    r = simulate(j6, "softmax", "resident", n=100_000, data=False, trace=True)
    segs = tcm_segments(r.trace, r.passes, RunEngines.of(r))
    exp_sum = next(p for p in r.passes if p["name"] == "exp_sum")
    mid = (exp_sum["start_cycle"] + exp_sum["end_cycle"]) / 2
    now = segs[(segs["start_cycle"] <= mid) & (segs["end_cycle"] > mid)]
    assert int(now["bytes"].sum()) == 4 * 100_000  # every byte of the array, in TCM
    for _, tile in segs.groupby(["buffer", "tile"]):
        states = tile.sort_values("start_cycle")["state"].tolist()
        assert states[0] == "filling" and states[-1] == "draining"


@pytest.mark.parametrize("window", [(1e-300, 2e-300), (10.0, 10.5)])
def test_a_window_narrower_than_a_cycle_is_refused(window):
    with pytest.raises(DspsimInputError, match="less than 1 cycle"):
        check_window(window, 5000)


def test_many_passes_draw_the_pass_lane_as_one_state_a_shade(j6):
    """Before: a patch a pass (4,000 rows of softmax direct: 16,000 patches; 200,000 rows ran
    out of 24 GiB). The lane's shades cover the run between them, whatever the pass count."""
    from matplotlib.patches import StepPatch

    from dspsim.analysis.timeline_draw import PASS_COLOURS

    r = simulate(j6, "softmax", "direct", shape=(4000, 1), data=False, trace=True,
                 port_log=True)
    assert len(list(r.passes)) == 16_000
    ax = timeline_figure(r).axes[0]
    pass_y = -[t.get_text() for t in ax.get_yticklabels()].index("pass")
    lane = [a for a in ax.patches if isinstance(a, StepPatch)
            and abs(a.get_data().baseline - (pass_y - LANE_H / 2)) < 1e-9]
    colours = {tuple(round(c, 3) for c in a.get_facecolor()[:3]) for a in lane}
    assert len(lane) == len(PASS_COLOURS) == len(colours)
    # stacked, the shades fill every pixel column of the lane (the passes cover the run)
    top = np.max([a.get_data().values for a in lane], axis=0)
    assert np.allclose(top, pass_y + LANE_H / 2)
