"""Progress on a terminal, the same for every command: drawn on stderr only when stderr is a
terminal, never in a pipe or a log file. :func:`counter` counts units of work (tqdm);
:func:`elapsed` says how long work without a unit to count (one simulation) has run, redrawn
twice a second by a helper thread that sleeps between redraws (nothing is added to the
simulation)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

ELAPSED_DELAY_S = 1.0  # a short command draws nothing
ELAPSED_EVERY_S = 0.5


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def status_line(msg: str) -> None:
    """One status line on the terminal, rewritten in place (``""`` clears it)."""
    sys.stderr.write("\r\033[K" + msg)
    sys.stderr.flush()


@contextlib.contextmanager
def counter(desc: str, total: int | None = None, unit: str = "it") -> Iterator[Any]:
    """A tqdm counter of ``unit`` (``total`` of them, when known) on a terminal, else the two
    calls the commands make of one (count, name the stage) doing nothing; removed at the end."""
    if not on_terminal():
        yield SimpleNamespace(update=lambda n=1: None, set_description_str=lambda desc: None)
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
               leave=False, smoothing=0.05)
    try:
        yield bar
    finally:
        bar.close()


@contextlib.contextmanager
def elapsed(desc: str) -> Iterator[None]:
    """``desc: N s`` on a terminal while the block runs (after :data:`ELAPSED_DELAY_S`),
    cleared when it ends."""
    if not on_terminal():
        yield
        return
    stop = threading.Event()
    start = time.monotonic()
    drawn = False

    def draw() -> None:
        nonlocal drawn
        if stop.wait(ELAPSED_DELAY_S):
            return
        while not stop.is_set():
            try:
                status_line(f"{desc}: {time.monotonic() - start:,.0f} s")
                drawn = True
            except (OSError, ValueError):
                return
            stop.wait(ELAPSED_EVERY_S)

    thread = threading.Thread(target=draw, daemon=True, name="dspsim-elapsed")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if drawn:
            with contextlib.suppress(OSError, ValueError):
                status_line("")
