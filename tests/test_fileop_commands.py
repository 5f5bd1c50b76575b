"""An op file's op in every command: sweep (its tile key swept, worker processes), optimize
(its search space), validate and workload files (``op_file`` relative to the file), and a
worker process that finds the parent's op files through ``DSPSIM_OP_FILES``."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dspsim.cli import main
from dspsim.ops.fileop import unload_op_file

SCALE_BIAS = Path(__file__).resolve().parents[1] / "examples" / "ops" / "scale_bias.toml"


@pytest.fixture(autouse=True)
def forget():
    yield
    unload_op_file(SCALE_BIAS)


def test_a_sweep_of_the_files_tile_key_in_worker_processes(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", "--op-file", str(SCALE_BIAS), "--param",
                 "scale_bias.tile_bytes=1024,4096", "--n", "1000", "--variant", "pingpong",
                 "--out", str(out), "--jobs", "2"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["op"], r["scale_bias.tile_bytes"], r["error"]) for r in rows] == [
        ("scale_bias", "1024", ""), ("scale_bias", "4096", "")]
    assert all(int(r["cycles"]) > 0 for r in rows)


def test_optimize_searches_the_files_keys(capsys):
    assert main(["optimize", "--op-file", str(SCALE_BIAS), "--n", "1000", "--variant",
                 "nbuffer"]) == 0
    out = capsys.readouterr().out
    assert "scale_bias of 1,000 float32" in out and "buffers=" in out


def test_a_measurement_row_names_an_op_file(tmp_path, capsys):
    (tmp_path / "sb.toml").write_text(SCALE_BIAS.read_text())
    meas = tmp_path / "m.toml"
    meas.write_text('platform = "j6"\nsource = "a test"\n[[measurement]]\nname = "sb"\n'
                    'op_file = "sb.toml"\nn = 1000\ncycles = 20961\nrole = "check"\n')
    assert main(["validate", "--measurements", str(meas), "--only"]) == 0
    assert "20,961" in capsys.readouterr().out
    unload_op_file(tmp_path / "sb.toml")


def test_a_workload_stream_names_an_op_file(tmp_path, capsys):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "sb.toml").write_text(SCALE_BIAS.read_text())
    w = tmp_path / "w.toml"
    w.write_text('[[stream]]\nname = "sb"\nop_file = "ops/sb.toml"\nn = 1000\n'
                 'period_us = 100\ncount = 2\n')
    assert main(["workload", str(w)]) == 0
    assert "scale_bias/pingpong" in capsys.readouterr().out
    unload_op_file(tmp_path / "ops" / "sb.toml")


def test_a_worker_finds_its_parents_op_files():
    env = {**os.environ, "DSPSIM_OP_FILES": str(SCALE_BIAS)}
    code = ("from dspsim.workers import _worker_init; import os; "
            "_worker_init(os.getppid(), False, None, ()); "
            "from dspsim.ops import get_op; print(get_op('scale_bias').name)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "scale_bias", out.stderr


def test_plot_sweep_reads_a_table_of_the_files_keys(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", "--op-file", str(SCALE_BIAS), "--param",
                 "scale_bias.tile_bytes=1024,4096", "--n", "1000", "--variant", "pingpong",
                 "--out", str(out)]) == 0
    png = tmp_path / "s.png"
    assert main(["plot", "sweep", str(out), "--op-file", str(SCALE_BIAS), "--x",
                 "scale_bias.tile_bytes", "--out", str(png)]) == 0
    assert png.stat().st_size > 0


def test_a_dask_task_carries_the_op_files_it_needs():
    """A worker on another machine has loaded nothing: the task's paths load the op."""
    code = ("from dspsim.study.sweep.executors import evaluate_points; "
            "from dspsim.config import load_model; "
            "r = evaluate_points([(load_model('j6'), {'op': 'scale_bias', 'n': 1000, "
            f"'variant': 'pingpong'}})], 'tile', ({str(SCALE_BIAS)!r},)); "
            "print(r[0]['error'] or r[0]['cycles'])")
    env = {k: v for k, v in os.environ.items() if k != "DSPSIM_OP_FILES"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "20961", out.stderr


def test_a_saved_run_of_a_files_op_reports_with_the_file(tmp_path, capsys):
    saved = tmp_path / "r.json"
    assert main(["run", "--op-file", str(SCALE_BIAS), "--n", "1000", "--save",
                 str(saved)]) == 0
    unload_op_file(SCALE_BIAS)  # a new command: nothing loaded
    capsys.readouterr()
    assert main(["report", str(saved)]) == 2  # its model has the op's table
    assert "unknown table [scale_bias]" in capsys.readouterr().err
    assert main(["report", str(saved), "--op-file", str(SCALE_BIAS)]) == 0
    assert "20,961 cycles" in capsys.readouterr().out


@pytest.mark.parametrize("command", [
    ["run", "--n", "100", "--save"],
    ["calibrate", "--measured", "scale_bias:direct,n=1000=25000", "--free",
     "ddr.latency_cycles", "--out"],
])
def test_an_output_never_replaces_the_op_file(tmp_path, capsys, command):
    """The op file was overwritten by --save or calibrate's --out given its name."""
    path = tmp_path / ("op.json" if "--save" in command else "op.toml")
    path.write_text(SCALE_BIAS.read_text())
    assert main([command[0], "--op-file", str(path), *command[1:], str(path)]) == 2
    assert "is --op-file" in capsys.readouterr().err
    assert path.read_text() == SCALE_BIAS.read_text()
    unload_op_file(path)
