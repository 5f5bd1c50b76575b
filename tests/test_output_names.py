"""Output names at the file system's limit: a name that fits is written (its temporary file has
a short name of its own), one that does not is refused before any work with one line, and a
temporary file a killed writer left behind is removed by the next write into its folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import dspsim.cli.run
from dspsim.paths import STALE_TEMP_S, TEMP_PREFIX, remove_stale_temps, temp_prefix
from tests.cli_helpers import one_line, run_cli

NAME_MAX = 255
WORKLOAD = """
[[stream]]
name = "s"
op = "softmax"
n = 1000
period_us = 100
count = 3
"""


def long_name(tmp_path, suffix: str, length: int = NAME_MAX):
    return tmp_path / ("a" * (length - len(suffix)) + suffix)


RUN_OUTPUTS = [("--tiles", ".csv"), ("--trace", ".json"), ("--save", ".json.gz"),
               ("--timeline", ".png"), ("--output", ".npy")]


@pytest.mark.parametrize("opt, suffix", RUN_OUTPUTS)
def test_a_255_byte_run_output_is_written(tmp_path, capsys, opt, suffix):
    """Before: "File name too long" after the run (the temporary name was 13 bytes longer)."""
    out = long_name(tmp_path, suffix)
    code, _, err = run_cli(capsys, "run", "--n", "2000", opt, out)
    assert code == 0, err
    assert out.is_file() and os.listdir(tmp_path) == [out.name]


@pytest.fixture
def no_simulation(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("simulated before the output name was checked")

    monkeypatch.setattr(dspsim.cli.run, "simulate", refuse)


@pytest.mark.parametrize("opt, suffix", RUN_OUTPUTS)
def test_a_256_byte_run_output_is_refused_before_the_run(tmp_path, capsys, no_simulation, opt,
                                                        suffix):
    out = long_name(tmp_path, suffix, NAME_MAX + 1)
    code, _, err = run_cli(capsys, "run", "--n", "2000", opt, out)
    assert code == 2 and one_line(err) and "256 bytes" in err and "at most 255" in err


def test_workload_outputs_at_the_limit(tmp_path, capsys):
    wl = tmp_path / "w.toml"
    wl.write_text(WORKLOAD)
    outs = {"--out": long_name(tmp_path, ".csv"), "--trace": long_name(tmp_path, ".json"),
            "--timeline": long_name(tmp_path, ".svg")}
    code, _, err = run_cli(capsys, "workload", wl, *[x for kv in outs.items() for x in kv])
    assert code == 0, err
    assert all(p.is_file() for p in outs.values())
    assert sorted(os.listdir(tmp_path)) == sorted([wl.name, *(p.name for p in outs.values())])
    too_long = long_name(tmp_path, ".csv", NAME_MAX + 1)
    code, out, err = run_cli(capsys, "workload", wl, "--out", too_long)
    assert code == 2 and one_line(err) and "256 bytes" in err and out == ""


def test_a_sweep_whose_sidecar_name_would_not_fit_is_refused_before_any_point(tmp_path, capsys):
    """The sidecar (NAME.sweep.json) is 11 bytes longer than the table: a 255-byte table name
    cannot have one."""
    out = long_name(tmp_path, ".csv")
    code, _, err = run_cli(capsys, "sweep", "--param", "ddr.latency_cycles=50,60", "--n", "2000",
                           "--out", out)
    assert code == 2 and one_line(err) and "sidecar" in err
    assert os.listdir(tmp_path) == []
    fits = long_name(tmp_path, ".csv", NAME_MAX - len(".sweep.json"))
    code, _, err = run_cli(capsys, "sweep", "--param", "ddr.latency_cycles=50,60", "--n", "2000",
                           "--out", fits)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == sorted([fits.name, fits.name + ".sweep.json"])


def test_optimize_and_calibrate_refuse_a_long_out_before_the_work(tmp_path, capsys):
    code, out, err = run_cli(capsys, "optimize", "--n", "2000", "--out",
                             long_name(tmp_path, ".csv", NAME_MAX + 1))
    assert code == 2 and one_line(err) and "256 bytes" in err and out == ""
    code, out, err = run_cli(capsys, "calibrate", "--measured", "pingpong=5154293", "--free",
                             "ddr.latency_cycles", "--out",
                             long_name(tmp_path, ".toml", NAME_MAX + 1))
    assert code == 2 and one_line(err) and "256 bytes" in err and out == ""


def test_plot_timeline_at_the_limit(tmp_path, capsys):
    from pathlib import Path

    saved = Path(__file__).parent / "data" / "run_v1_pingpong_n2000.json.gz"
    out = long_name(tmp_path, ".pdf")
    code, _, err = run_cli(capsys, "plot", "timeline", saved, "--out", out)
    assert code == 0 and out.is_file(), err
    code, _, err = run_cli(capsys, "plot", "timeline", saved, "--out",
                           long_name(tmp_path, ".pdf", NAME_MAX + 1))
    assert code == 2 and one_line(err)


# ------------------------------------------------------------------ stale temporary files
def _temp_of_a_dead_writer(folder) -> str:
    """A temporary file as a writer killed with -9 leaves it: made by another process that
    is gone."""
    code = ("import sys, tempfile; from dspsim.paths import temp_prefix; "
            "fd, p = tempfile.mkstemp(prefix=temp_prefix(), suffix='.tmp', dir=sys.argv[1]); "
            "print(p)")
    return subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_next_write_removes_a_dead_writers_temporary_file(tmp_path, capsys):
    left = _temp_of_a_dead_writer(tmp_path)
    assert os.path.basename(left).startswith(TEMP_PREFIX)
    keep = tmp_path / ".dspsim-notes.txt"  # not a temporary name: never touched
    keep.write_text("mine")
    out = tmp_path / "t.csv"
    code, _, err = run_cli(capsys, "run", "--n", "2000", "--tiles", out)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == sorted([keep.name, out.name])


def test_a_live_writers_temporary_file_is_kept(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f"{TEMP_PREFIX}{temp_prefix().split('-')[1]}-{sleeper.pid}-abcdefgh.tmp"
        live.write_text("being written")
        own = tmp_path / f"{temp_prefix()}abcdefgh.tmp"
        own.write_text("this process's")
        assert remove_stale_temps(tmp_path, force=True) == []
        assert live.exists() and own.exists()
        # untouched for longer than STALE_TEMP_S, even a live pid's is stale
        old = time.time() - STALE_TEMP_S - 60
        os.utime(live, (old, old))
        assert remove_stale_temps(tmp_path, force=True) == [live]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_temporary_names_are_short_whatever_the_output(tmp_path):
    from dspsim.paths import TEMP_NAME_MAX, atomic_write

    seen = []

    def writer(f):
        seen.extend(n for n in os.listdir(tmp_path) if n.startswith(TEMP_PREFIX))
        f.write(b"x")

    atomic_write(long_name(tmp_path, ".txt"), writer)
    assert len(seen) == 1 and len(seen[0]) <= TEMP_NAME_MAX
