"""Hostile arguments to the scripts in ``experiments/``: one line on stderr and exit 2, never a
traceback or the usage message; the out-dir is checked before anything slow runs; a figure that
cannot be written leaves the out-dir as it was (no new tables beside an old figure)."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def run_script(script: str, *args: str, cwd: Path, fsize: int | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, str(EXPERIMENTS / script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit if fsize is not None else None)


def assert_one_line(r: subprocess.CompletedProcess, script: str, message: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "usage:" not in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"{script}: error: "), r.stderr
    assert message in r.stderr, r.stderr


def digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


@pytest.fixture
def afile(tmp_path) -> Path:
    p = tmp_path / "afile"
    p.write_text("x")
    return p


# ------------------------------------------------------------------ --out-dir
@pytest.mark.parametrize("script", ["timelines.py", "camera_streams.py", "validation.py",
                                    "sweep_ddr_latency.py", "sweep_tile_size.py",
                                    "schedules.py", "readings.py"])
def test_out_dir_that_is_a_file_is_one_line(tmp_path, afile, script):
    """validation.py used to fail only after its minutes of calibration."""
    r = run_script(script, "--out-dir", str(afile), cwd=tmp_path, timeout=30)
    assert_one_line(r, script, "exists and is not a directory")


def test_out_dir_dev_full_is_one_line(tmp_path):
    r = run_script("timelines.py", "--out-dir", "/dev/full", cwd=tmp_path)
    assert_one_line(r, "timelines.py", "not a directory")


# ------------------------------------------------------------------ timelines.py model options
@pytest.mark.parametrize("args, message", [
    (["--set", "foo=1"], "unknown model key 'foo'"),
    (["--set", "ddr.latency_cycles=nan"], "ddr.latency_cycles"),
    (["--model", "nope"], "model file 'nope' not found"),
    (["--model", "/dev/zero"], "not a regular file"),
    (["--bogus"], "unrecognized arguments"),
])
def test_timelines_bad_model_is_one_line(tmp_path, args, message):
    r = run_script("timelines.py", "--out-dir", str(tmp_path / "d"), *args, cwd=tmp_path)
    assert_one_line(r, "timelines.py", message)


def test_timelines_figure_write_failure_is_one_line_and_keeps_the_old_files(tmp_path):
    out = tmp_path / "d"
    r = run_script("timelines.py", "--out-dir", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    before = digests(out)
    r = run_script("timelines.py", "--out-dir", str(out), cwd=tmp_path, fsize=50 * 1024)
    assert_one_line(r, "timelines.py", "File too large")
    assert str(out / "timeline_pingpong.png") in r.stderr  # the real name, not a staging one
    assert digests(out) == before  # nothing replaced, no staging folder left


# ------------------------------------------------------------------ sweep scripts
@pytest.mark.parametrize("args, message", [
    (["--jobs", "abc"], "argument --jobs: 'abc' is not an integer"),
    (["--jobs", "0"], "argument --jobs: '0': allowed 1 to"),
    (["--fidelity", "nope"], "argument --fidelity"),
])
def test_sweep_script_argument_errors_are_one_line(tmp_path, args, message):
    r = run_script("sweep_tile_size.py", *args, "--out-dir", str(tmp_path), cwd=tmp_path)
    assert_one_line(r, "sweep_tile_size.py", message)


def test_sweep_script_tables_and_figure_change_together(tmp_path):
    """Before: under a file-size limit the CSVs were replaced and the figure write failed, so
    the out-dir held new tables beside the old figure."""
    out = tmp_path / "d"
    args = ("--fidelity", "tile", "--jobs", "1", "--out-dir", str(out))
    r = run_script("sweep_ddr_latency.py", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["sweep_ddr_latency.csv", "sweep_ddr_latency.csv.sweep.json",
                                       "sweep_ddr_latency.png"]
    before = digests(out)
    assert os.path.getsize(out / "sweep_ddr_latency.png") > 50 * 1024 > os.path.getsize(
        out / "sweep_ddr_latency.csv")
    r = run_script("sweep_ddr_latency.py", *args, cwd=tmp_path, fsize=50 * 1024)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.splitlines()[-1]  # after the sweep's progress line
    assert last.startswith("sweep_ddr_latency.py: error: ") and "File too large" in last
    assert digests(out) == before  # the CSV (with its wall_s) was not rewritten either


# ------------------------------------------------------------------ camera_streams.py
@pytest.mark.parametrize("args, message", [
    (["--max-cameras", "0"], "argument --max-cameras: '0': allowed 1 to"),
    (["--max-cameras", "-1"], "argument --max-cameras"),
    (["--max-cameras", "x"], "argument --max-cameras"),
    (["--seconds", "nan"], "argument --seconds: 'nan'"),
    (["--seconds", "-1"], "argument --seconds"),
    (["--seconds", "0"], "argument --seconds"),
    (["--seconds", "1e300"], "argument --seconds"),
    (["--jobs", "0"], "argument --jobs"),
])
def test_camera_streams_bad_arguments_are_one_line(tmp_path, args, message):
    r = run_script("camera_streams.py", *args, "--out-dir", str(tmp_path), cwd=tmp_path)
    assert_one_line(r, "camera_streams.py", message)
    assert len(r.stderr) < 200


def test_camera_streams_replot_without_a_table_is_one_line(tmp_path):
    r = run_script("camera_streams.py", "--replot", "--out-dir", str(tmp_path), cwd=tmp_path)
    assert_one_line(r, "camera_streams.py", "not found")
    (tmp_path / "camera_streams.csv").write_text("a,b\n1,2\n")
    r = run_script("camera_streams.py", "--replot", "--out-dir", str(tmp_path), cwd=tmp_path)
    assert_one_line(r, "camera_streams.py", "is not a camera_streams table")


# ------------------------------------------------------------------ validation.py
def test_validation_report_path_is_checked_before_calibrating(tmp_path):
    (tmp_path / "validation.md").mkdir()
    r = run_script("validation.py", "--out-dir", str(tmp_path), cwd=tmp_path, timeout=30)
    assert_one_line(r, "validation.py", "is a directory")
