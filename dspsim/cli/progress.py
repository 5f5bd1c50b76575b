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


class _Bar:
    """``update(n)`` and ``describe(msg)`` (names the stage) of a tqdm bar; of none, nothing."""

    def __init__(self, bar: Any = None):
        self._bar = bar

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def describe(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.set_description_str(msg, refresh=True)


@contextlib.contextmanager
def counter(desc: str, total: int | None = None, unit: str = "it") -> Iterator[_Bar]:
    """A progress counter of ``unit`` (``total`` of them, when known) on a terminal, else an
    object that does nothing; removed from the screen when the block ends."""
    if not on_terminal():
        yield _Bar()
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
               leave=False, smoothing=0.05)
    try:
        yield _Bar(bar)
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
