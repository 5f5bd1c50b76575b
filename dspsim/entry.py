"""Ctrl-C while the ``dspsim`` command starts (before numpy, simpy and the ops are imported).

Until a command installs its own handling (:func:`dspsim.cli.common.interrupts_handled`), a
SIGINT ends the process at once with one line and exit code 130: nothing has been written yet,
and an interrupted import would print a traceback. A library user, a worker or a test keeps the
interpreter's own handling.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped
ENTRY_MODULES = ("dspsim", "dspsim.__main__", "dspsim.cli", "dspsim.cli.__main__")


def _started_as_command() -> bool:
    """Whether this process is the ``dspsim`` command (not a worker, a library user, a test)."""
    if "multiprocessing" in sys.modules:  # a spawned or forkserver worker imports it first
        return False
    if sys.argv and os.path.basename(sys.argv[0]) == "dspsim":  # the console script
        return True
    argv = list(getattr(sys, "orig_argv", ()))
    for i, a in enumerate(argv[1:], 1):
        if a == "-m":
            return i + 1 < len(argv) and argv[i + 1] in ENTRY_MODULES
        if a.startswith("-m"):
            return a[2:] in ENTRY_MODULES
        if a == "-c":
            return False
    return False


def _stop_while_starting(signum: int, frame: object) -> None:
    with contextlib.suppress(OSError):
        os.write(2, b"dspsim: interrupted\n")
    os._exit(INTERRUPTED_EXIT)


def stop_on_interrupt_while_starting() -> None:
    """In the ``dspsim`` command only: SIGINT ends the process with one line and exit 130
    until a command installs its own handler."""
    if threading.current_thread() is not threading.main_thread() or not _started_as_command():
        return
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _stop_while_starting)
