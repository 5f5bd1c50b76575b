"""Ctrl-C stops every command the same way: exit 130, one line on stderr, no traceback and no
worker left behind (:func:`dspsim.cli.common.interrupts_handled`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.proc_helpers import CLI, children, kill_group, start, survivors, wait_for_children

ROOT = Path(__file__).resolve().parents[1]
# about 7 CPU seconds, interrupted after 1.5: a loaded machine may run the command on between
# the test's last look and the signal, and it must still be running when the signal lands
LONG_WORKLOAD = """
[[stream]]
name = "s"
op = "softmax"
n = 1024
period_us = 5
count = 400000
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_busy(proc: subprocess.Popen, cpu_s: float, pids: list[int] | None = None,
              timeout_s: float = 60.0) -> None:
    """Until ``proc`` (or its workers ``pids``) has computed ``cpu_s`` seconds (past its
    imports)."""
    deadline = time.monotonic() + timeout_s

    def used() -> float:
        total = 0.0
        for pid in pids or [proc.pid]:
            try:
                total += cpu_seconds(pid)
            except OSError:
                pass
        return total

    while used() < cpu_s:
        assert proc.poll() is None, f"ended before it was interrupted: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "never got busy"
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen, timeout_s: float = 20.0) -> tuple[int, str, str]:
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group."""
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, err


def check_interrupted(code: int, err: str, line: str = "dspsim: interrupted",
                      notes: int = 0) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert code == 130, (code, err)
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(line), err
    assert len(lines) <= 1 + notes, err


CASES = {
    # the HiFi5's fc through a 16 MiB data cache: its rows are booked only once the cache is
    # full, so the first 16 MiB of interleaved weight rows are walked line by line
    "run": ([*CLI, "run", "--model", "ameba_hifi5", "--set", "psram.size_bytes=268435456",
             "--set", "dcache.capacity_bytes=16776960",
             "--op", "fc", "--variant", "direct", "--shape", "16384,8192", "--no-data",
             "--trace", "{trace}", "--trace-limit", "100"], 0),
    "workload": ([*CLI, "workload", "{workload}"], 0),
    "calibrate": ([*CLI, "calibrate", "--measured", "pingpong,n=2000000=103000000",
                   "--measured", "direct,n=2000000=153000000", "--free", "ddr.latency_cycles",
                   "--free", "ddr.bytes_per_cycle"], 0),
    "calibrate --explore": ([*CLI, "calibrate", "--explore", "--jobs", "2"], 2),
    "optimize": ([*CLI, "optimize", "--n", "20000", "--jobs", "2", "--no-check",
                  "--param", "ddr.latency_cycles=1:60:1"], 2),
    "sweep": ([*CLI, "sweep", "--param", "ddr.latency_cycles=1:4000:1", "--n", "200000",
               "--jobs", "2", "--out", "{out}"], 2),
    # the local dask cluster's workers are forked from the command: they ignore the SIGINT
    # sent to the group, and the command stops them
    "sweep --executor dask": ([*CLI, "sweep", "--param", "ddr.latency_cycles=1:4000:1", "--n",
                               "200000", "--jobs", "2", "--executor", "dask",
                               "--out", "{out}"], 2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ctrl_c_is_one_line_and_exit_130(name, tmp_path):
    """Before: run, workload, calibrate and calibrate --explore printed a 31-97 line traceback
    (and --explore took 28 s to stop: it waited for its workers' fits)."""
    wl = tmp_path / "long.toml"
    wl.write_text(LONG_WORKLOAD)
    argv, workers = CASES[name]
    argv = [str(a).format(workload=wl, out=tmp_path / "s.csv", trace=tmp_path / "t.json")
            for a in argv]
    proc = start(argv)
    try:
        kids = wait_for_children(proc, workers, 60) if workers else []
        wait_busy(proc, 1.5, kids)
        kids = kids or children(proc.pid)
        code, _, err = interrupt(proc)
        line = "dspsim: interrupted; finished" if name.startswith("sweep") else \
            "dspsim: interrupted"
        # calibrate --explore says on stderr what it starts
        check_interrupted(code, err, line, notes=1 if name == "calibrate --explore" else 0)
        assert not survivors(kids, 120.0)  # returns as soon as none is left
    finally:
        kill_group(proc)


def test_ctrl_c_stops_an_experiment_script_with_one_line(tmp_path):
    proc = start([sys.executable, ROOT / "experiments" / "camera_streams.py", "--seconds",
                  "0.5", "--max-cameras", "3", "--jobs", "2", "--out-dir", tmp_path])
    try:
        kids = wait_for_children(proc, 2, 60)
        code, _, err = interrupt(proc)
        check_interrupted(code, err, "camera_streams.py: interrupted", notes=20)
        assert not survivors(kids, 120.0)  # returns as soon as none is left
        assert not list(tmp_path.iterdir())  # no staging folder left
    finally:
        kill_group(proc)


def test_the_previous_sigint_handler_is_restored(capsys):
    """``main`` run in-process (as tests and notebooks do) leaves Python's handler in place."""
    from dspsim.cli import main

    before = signal.getsignal(signal.SIGINT)
    assert main(["ops"]) == 0
    assert signal.getsignal(signal.SIGINT) is before
