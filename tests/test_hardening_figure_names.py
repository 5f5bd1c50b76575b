"""Names in timeline figures: a long memory name is shortened (the run keeps it whole), a
character the figure's font lacks is written as an ASCII escape, and neither warns."""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from dspsim import load_model, simulate
from dspsim.analysis.timeline import save_figure, timeline_figure
from tests.cli_helpers import run_cli

PNG = b"\x89PNG\r\n\x1a\n"
LONG = "m" + "x" * 398 + "z"  # a valid 400-character memory name


def board(tmp_path: Path, memory: str = "ddr", name: str | None = None) -> Path:
    """J6 whose host memory is ``memory`` (a second table when not ``ddr``), named ``name``."""
    text = 'base = "j6"\n'
    if name is not None:
        text += f"[model]\nname = {json.dumps(name)}\n"  # TOML reads JSON's escapes
    if memory != "ddr":
        text += (f'[host]\nmemory = "{memory}"\n[{memory}]\nlatency_cycles = 100.0\n'
                 "bytes_per_cycle = 0.5\nmax_outstanding = 16\nbase_address = 0x20000000\n"
                 "size_bytes = 0x10000000\n")
    p = tmp_path / "board.toml"
    p.write_text(text)
    return p


def traced(model_path: Path, n: int = 20_000):
    return simulate(load_model(model_path), "softmax", "pingpong", n=n, data=False,
                    trace=True, port_log=True)


def texts_of(fig) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def figure_name(*args):
    from dspsim.analysis.timeline_draw import figure_name

    return figure_name(*args)


def test_figure_name_keeps_short_names_and_shortens_long_ones():
    from dspsim.analysis.timeline_draw import FIGURE_NAME_CHARS, MEMORY_LABEL_CHARS

    assert figure_name("DDR") == "DDR"
    short = figure_name(LONG.upper(), MEMORY_LABEL_CHARS)
    assert len(short) == MEMORY_LABEL_CHARS and "…" in short
    assert short.startswith("MXXX") and short.endswith("XZ")
    assert len(figure_name("a" * 1000)) == FIGURE_NAME_CHARS
    # a character the font lacks (CJK), or one that cannot print, as an ASCII escape
    assert figure_name("模型") == "\\u6a21\\u578b"
    assert figure_name("a\x1bb") == "a\\x1bb"
    assert figure_name("µs → TCM") == "µs → TCM"  # the font has these


def test_a_400_character_memory_name_draws_a_timeline(tmp_path):
    """Before: ``ValueError: bottom cannot be >= top`` (the legend and the panels' labels
    were wider and taller than the figure)."""
    r = traced(board(tmp_path, LONG), n=4096)
    assert LONG in r.memories and LONG in r.engines  # the run keeps the whole name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = timeline_figure(r)
        out = save_figure(fig, tmp_path / "t.png")
    assert out.read_bytes().startswith(PNG)
    texts = texts_of(fig)
    assert not [t for t in texts if LONG.upper() in t]
    assert any("MXXXXXXX…XXZ" in t for t in texts)
    # every text inside the figure, and no two axis labels of the panels overlapping
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    labels = [a.yaxis.label for a in fig.axes if a.yaxis.label.get_text()]
    boxes = [t.get_window_extent(renderer) for t in labels]
    for t, b in zip(labels, boxes):
        assert b.x0 >= 0 and b.y0 >= 0 and b.x1 <= width and b.y1 <= height, t.get_text()
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)


@pytest.mark.parametrize("name", ["模型测试", "bo\x07ard"])
def test_a_model_name_the_font_lacks_draws_without_a_warning(tmp_path, name):
    """Before: ``UserWarning: Glyph 27169 missing from font(s) DejaVu Sans`` per character
    (the model's name is in the title)."""
    r = traced(board(tmp_path, name=name), n=4096)
    assert r.model.name == name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = timeline_figure(r)
        out = save_figure(fig, tmp_path / "t.png")
    assert out.read_bytes().startswith(PNG)
    title = fig._suptitle.get_text()
    assert title.startswith(figure_name(name) + " softmax")
    assert all(ord(c) < 0x3000 for c in title)


def test_the_command_line_writes_the_figure_and_nothing_on_stderr(tmp_path, capsys):
    out = tmp_path / "x.png"
    code, _, err = run_cli(capsys, "run", "--model", board(tmp_path, LONG, name="模型"),
                           "--n", "4096", "--no-data", "--timeline", out)
    assert code == 0 and err == "" and out.read_bytes().startswith(PNG)


def test_a_short_memory_name_keeps_its_panel_labels():
    r = simulate(load_model(), "softmax", "pingpong", n=4096, data=False, trace=True,
                 port_log=True)
    fig = timeline_figure(r)
    labels = [a.yaxis.label.get_text() for a in fig.axes]
    assert "DDR data path\n(bytes/cycle)" in labels
    assert "DDR requests\nin flight (count)" in labels
    assert np.isfinite(r.cycles)


def test_a_workload_figure_draws_names_its_font_lacks_without_a_warning(tmp_path):
    """Before: a glyph warning per CJK character of a stream's name, and the long memory's
    name as the data path's label."""
    from dspsim.analysis.workload_plots import plot_workload, workload_figure
    from dspsim.study.workload import parse_workload, run_workload, task_table

    wl = parse_workload({"seed": 1, "stream": [
        {"name": "流", "op": "softmax", "variant": "direct", "n": 2000, "period_us": 100,
         "count": 2}]}, "工作.toml")
    run = run_workload(wl, load_model(board(tmp_path, LONG)), fidelity="tile")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = workload_figure(run, task_table(run))
        FigureCanvasAgg(fig).draw()
        out = plot_workload(run, task_table(run), tmp_path / "w.png")
    assert out.read_bytes().startswith(PNG)
    texts = texts_of(fig)
    assert any("\\u6d41 (softmax direct" in t for t in texts)
    assert any(t.startswith("\\u5de5\\u4f5c.toml:") for t in texts)
    assert not [t for t in texts if LONG.upper() in t]
