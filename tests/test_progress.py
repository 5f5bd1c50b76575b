"""Progress on a terminal for the long commands, as sweep and optimize have it: a count of
workload tasks and of calibration simulations, an elapsed-time line for one run; nothing
off a terminal, except the one line `calibrate --explore` prints to say what it starts."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time

from tests.proc_helpers import CLI, ENV, kill_group, start

WORKLOAD = """
[[stream]]
name = "s"
op = "softmax"
n = 1024
period_us = 5
count = 1000
"""
CALIBRATE = ["calibrate", "--measured", "pingpong,n=4096=215000", "--free",
             "ddr.latency_cycles"]
# a run of several seconds, past the delay (+ a trace path): the HiFi5's fc over 16384 x 8192
# int8 weights through a 16 MiB data cache: four weight rows read side by side, whose alike
# rows are booked only once the cache is full, so the first 16 MiB are walked line by line
LONG_RUN = ["run", "--model", "ameba_hifi5", "--set", "psram.size_bytes=268435456", "--set",
            "dcache.capacity_bytes=16776960", "--op", "fc", "--variant", "direct", "--shape",
            "16384,8192", "--no-data", "--trace-limit", "100", "--trace"]


def on_tty(argv: list, timeout_s: float = 300) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal: (exit code, what was drawn there)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.DEVNULL, stderr=slave,
                            env={**ENV, "TERM": "xterm"})
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def off_tty(argv: list, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=ENV,
                          timeout=timeout_s)


def test_workload_counts_its_tasks_on_a_terminal(tmp_path):
    """Before: nothing was drawn while the tasks ran."""
    wl = tmp_path / "w.toml"
    wl.write_text(WORKLOAD)
    code, drawn = on_tty([*CLI, "workload", wl])
    assert code == 0
    assert "workload" in drawn and "/1000" in drawn and "task" in drawn
    p = off_tty([*CLI, "workload", wl])
    assert p.returncode == 0 and p.stderr == ""


def test_calibrate_counts_its_simulations_on_a_terminal():
    code, drawn = on_tty([*CLI, *CALIBRATE])
    assert code in (0, 1)
    assert "sim" in drawn and "calibrate: fitting" in drawn
    p = off_tty([*CLI, *CALIBRATE])
    assert p.returncode in (0, 1) and p.stderr == ""


def test_a_long_run_shows_how_long_it_has_run_on_a_terminal(tmp_path):
    code, drawn = on_tty([*CLI, *LONG_RUN, str(tmp_path / "tty.json")])
    assert code == 0 and "run: fc direct: " in drawn and " s" in drawn
    assert drawn.endswith("\x1b[K")  # the line is cleared when the run ends
    p = off_tty([*CLI, *LONG_RUN, str(tmp_path / "pipe.json")])
    assert p.returncode == 0 and p.stderr == ""


def test_calibrate_explore_says_what_it_starts_off_a_terminal():
    """Before: silent for minutes in a pipe or a log file."""
    proc = start([*CLI, "calibrate", "--explore", "--jobs", "1"])
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 120)
        assert ready, "nothing on stderr within 120 s"
        line = proc.stderr.readline()
        assert line.startswith("explore: 90 grid points (") and "worker process" in line
        assert "takes minutes" in line
    finally:
        kill_group(proc)
