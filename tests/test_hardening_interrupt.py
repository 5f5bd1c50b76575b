"""Ctrl-C at any moment of the command line's start, imports included: exit 130 and one line
(or none), never a traceback, for every way of starting it (console script, ``python -m
dspsim``, ``python -m dspsim.cli``). The moment is found by polling the process for the shared
libraries its imports map (numpy's first, ``_uuid`` near their end), not by sleeping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.proc_helpers import ENV, kill_group

SCRIPT = Path(sys.executable).parent / "dspsim"
ENTRIES = {
    "console script": [str(SCRIPT)],
    "python -m dspsim": [sys.executable, "-m", "dspsim"],
    "python -m dspsim.cli": [sys.executable, "-m", "dspsim.cli"],
}
# mapped in this order while dspsim imports numpy, its linear algebra, subprocess, uuid
MARKERS = ["_multiarray_umath.", "_umath_linalg.", "_posixsubprocess.", "_uuid."]


def _wait_mapped(proc: subprocess.Popen, marker: str) -> None:
    deadline = time.monotonic() + 300  # stops a hung test only
    while True:
        try:
            if marker in Path(f"/proc/{proc.pid}/maps").read_text():
                return
        except OSError:
            pass
        assert proc.poll() is None, f"ended before {marker} was mapped: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"{marker} never mapped"
        time.sleep(0.0005)


@pytest.mark.parametrize("marker", MARKERS)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_ctrl_c_while_starting_is_exit_130_and_at_most_one_line(tmp_path, entry, marker):
    if entry == "console script" and not SCRIPT.exists():
        pytest.skip("the console script is not installed beside this interpreter")
    argv = [*ENTRIES[entry], "run", "--n", "100000000", "--no-data", "--trace",
            str(tmp_path / "t.json"), "--trace-limit", "100"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            text=True, start_new_session=True)
    try:
        _wait_mapped(proc, marker)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert proc.returncode == 130, (proc.returncode, err)
        assert err.strip() in ("", "dspsim: interrupted"), err
    finally:
        kill_group(proc)


def test_a_library_import_keeps_the_interpreters_own_ctrl_c():
    """Imported (not run as the command), dspsim leaves SIGINT to the interpreter."""
    code = ("import signal, dspsim, dspsim.cli; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert p.returncode == 0, p.stderr
