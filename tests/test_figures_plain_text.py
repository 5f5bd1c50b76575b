"""Every figure draws names as written: a ``$`` in a model's name, a saved run's trace labels,
a workload's stream or file name, a sweep table's values or an experiment's table is neither
typeset as math (``a$b$c``) nor a mathtext error (``$x^$``). Checked in the SVG each writer
writes, which keeps text as text: each name is one text element, character for character."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dspsim.analysis.timeline import plot_compare, plot_timeline, save_figure
from dspsim.analysis.workload_plots import plot_workload
from dspsim.config import load_model
from dspsim.results import load_run
from dspsim.study.sweep_plot import heatmap, line_plot
from dspsim.study.workload import parse_workload, run_workload, task_table

ROOT = Path(__file__).resolve().parents[1]
SAVED = Path(__file__).parent / "data" / "run_v1_pingpong_n2000.json.gz"
NAMES = ("$x^$", "a$b$c")  # a broken and a well-formed piece of math text


def svg_texts(path: Path) -> list[str]:
    """The text of every text element of an SVG file, as drawn."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def assert_drawn_as_written(path: Path, names=NAMES) -> None:
    texts = svg_texts(path)
    for name in names:
        assert any(name in t for t in texts), (name, texts)
    assert not any("mathdefault" in t for t in texts), texts


def experiment(name: str):
    if str(ROOT / "experiments") not in sys.path:  # (the scripts import their _results)
        sys.path.insert(0, str(ROOT / "experiments"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def named_run(name: str, label: str):
    """The saved run under a model called ``name``, its kernels and passes called ``label``."""
    r = load_run(SAVED)
    r.model = dataclasses.replace(r.model, name=name)
    compute = r.trace["kind"] == "compute"
    r.trace.loc[compute, "what"] = label + "_" + r.trace.loc[compute, "what"].astype(str)
    r.passes = [dict(p, name=f"{label}{i}") for i, p in enumerate(r.passes)]
    return r


def test_timeline_draws_model_name_and_trace_labels_as_written(tmp_path):
    out = plot_timeline(named_run(NAMES[0], NAMES[1]), tmp_path / "t.svg")
    assert_drawn_as_written(out)


def test_compare_draws_model_names_as_written(tmp_path):
    out = plot_compare([named_run(NAMES[0], NAMES[1]), named_run(NAMES[1], NAMES[0])],
                       tmp_path / "c.svg")
    assert_drawn_as_written(out)


def test_workload_draws_stream_and_file_names_as_written(tmp_path):
    wl = parse_workload({"seed": 1, "stream": [
        {"name": name, "op": "softmax", "variant": "direct", "n": 2000, "period_us": 100,
         "count": 2} for name in NAMES
    ]}, "w$x^$.toml")
    run = run_workload(wl, load_model(), fidelity="tile")
    out = plot_workload(run, task_table(run), tmp_path / "w.svg")
    assert_drawn_as_written(out, NAMES + ("w$x^$.toml",))


def sweep_table() -> pd.DataFrame:
    rows = [{"op": "softmax", "variant": v, "n": 1000, "ddr.latency_cycles": lat,
             "idma.max_outstanding": out, "cycles": int(1000 + i * lat + out),
             "warnings": "", "hazards": 0, "wall_s": 0.0, "error": ""}
            for i, v in enumerate(NAMES) for lat in (10.0, 100.0) for out in (1, 4)]
    return pd.DataFrame(rows)


def test_sweep_line_plot_draws_values_as_written(tmp_path):
    fig = line_plot(sweep_table(), "ddr.latency_cycles", hue="variant")
    assert_drawn_as_written(save_figure(fig, tmp_path / "l.svg"))


def test_sweep_heatmap_draws_values_as_written(tmp_path):
    fig = heatmap(sweep_table(), "ddr.latency_cycles", "idma.max_outstanding")
    assert_drawn_as_written(save_figure(fig, tmp_path / "h.svg"))


def test_camera_streams_figure_draws_setup_names_as_written(tmp_path):
    """The script replots a table it reads back: its setup names are the file's."""
    mod = experiment("camera_streams")
    df = pd.DataFrame([{"setup": s, "cameras": c, "camera_p99_us": 1000.0 * (c + i),
                        "hp_p99_us": 9000.0 + c} for i, s in enumerate(NAMES) for c in (1, 2)])
    out = tmp_path / "cam.svg"
    save_figure(mod.figure(df, {s: 1 for s in NAMES}), out)
    assert_drawn_as_written(out)


def test_schedules_figure_labels_its_log_axes_in_plain_text(tmp_path):
    from dspsim.ops import get_op

    mod = experiment("schedules")
    op = get_op(mod.OP)
    n = np.array([1000, 10000, 100000, 1000000])
    df = pd.DataFrame({"config": "j6", "n": n, "best_cycles": n * 2.0,
                       "lower_bound_cycles": n * 1.5, "speedup_vs_seed": 1.5,
                       "seed_warnings": "", **{f"cycles_{v}": n * 3.0 for v in op.variants}})
    out = tmp_path / "s.svg"
    mod.plot(df, 20000, "tile", out)
    texts = svg_texts(out)
    assert "1,000" in texts or "1000" in texts, texts
    assert not any("mathdefault" in t or "$" in t for t in texts), texts


def test_schedules_rows_are_built_from_the_optimizers_result():
    """The script's table row per size reads the optimizer's best candidate (its bytes moved
    were read under a name the candidate no longer had: the script crashed at its first size)."""
    from types import SimpleNamespace

    from dspsim import load_model

    mod = experiment("schedules")
    args = SimpleNamespace(fidelity="tile", jobs=1)
    rows, _ = mod.config_rows("j6", [load_model()], [2000], args, False, set())
    (row,) = rows
    assert row["n"] == 2000 and row["best_cycles"] > 0 and row["ddr_bytes"] >= 2 * 4 * 2000


@pytest.mark.parametrize("name", NAMES)
def test_run_with_a_math_model_name_writes_its_timeline(tmp_path, capsys, name):
    from tests.cli_helpers import run_cli

    model = tmp_path / "m.toml"
    model.write_text(f'base = "j6"\n[model]\nname = "{name}"\n')
    out = tmp_path / "t.svg"
    code, _, err = run_cli(capsys, "run", "--model", model, "--timeline", out)
    assert code == 0, err
    assert_drawn_as_written(out, (name,))
