"""The package's ``python -m`` entry points behave as commands: ``python -m dspsim`` is the
command line, and ``python -m dspsim.study.calibrate`` honours ``--help`` and refuses what it
does not know in one line."""

from __future__ import annotations

import subprocess
import sys

from tests.proc_helpers import ENV


def _py(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=ENV,
                          timeout=60)


def test_python_m_dspsim_is_the_command_line():
    """Before: exit 1, no module dspsim.__main__."""
    p = _py("-m", "dspsim", "--version")
    assert p.returncode == 0 and p.stdout.startswith("dspsim ")
    p = _py("-m", "dspsim", "ops")
    assert p.returncode == 0 and "softmax" in p.stdout
    p = _py("-m", "dspsim", "nosuch")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_the_calibrate_module_honours_help():
    """Before: --help was ignored and the refit ran."""
    p = _py("-m", "dspsim.study.calibrate", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: python -m dspsim.study.calibrate")
    assert "ddr.latency_cycles =" not in p.stdout  # nothing was fitted


def test_the_calibrate_module_refuses_unknown_arguments_in_one_line():
    p = _py("-m", "dspsim.study.calibrate", "--bogus", "x")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "unrecognized arguments: --bogus x" in p.stderr
    assert "Traceback" not in p.stderr
