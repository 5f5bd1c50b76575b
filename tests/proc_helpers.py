"""What the process tests share: start ``dspsim`` (or a script) in a subprocess, find its
worker processes, and see whether they are still there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CLI = [sys.executable, "-m", "dspsim.cli"]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "100"}


def _proc_children(pid: int) -> list[int]:
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parent_of[int(entry.name)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        nxt = [c for c, p in parent_of.items() if p in frontier]
        out += nxt
        frontier = nxt
    return out


def children(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    return [c for c in _proc_children(pid) if alive(c)]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_children(proc: subprocess.Popen, count: int, timeout_s: float) -> list[int]:
    """The descendants of ``proc`` once there are at least ``count`` (the workers are up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        kids = children(proc.pid)
        if len(kids) >= count:
            time.sleep(0.3)  # let them reach their work
            return children(proc.pid)
        if proc.poll() is not None:
            raise AssertionError(f"ended before its workers started: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(kids)} workers after {timeout_s} s")
        time.sleep(0.05)


def survivors(pids: list[int], within_s: float) -> list[int]:
    """Those of ``pids`` still alive after ``within_s`` seconds (checked as they go)."""
    deadline = time.monotonic() + within_s
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def start(argv: list[str], cwd: str | Path | None = None) -> subprocess.Popen:
    return subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, text=True, cwd=cwd,
                            start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """Clean up after a test, whatever it left."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait(timeout=30)
