"""Running a sweep into a file without ever losing work (``docs/sweeps.md``). The journal (the
CSV itself, or ``FILE.parquet.journal.csv``) gets its header, then each finished point as one
line, flushed at once (``kill -9`` loses nothing written), fsynced at most every second; a
complete grid is rewritten in grid order, or into the parquet file, atomically. The file is a
cache of points (:mod:`.table`): a rerun computes only the points no row has the key of. Memory
is bounded whatever the grid: points are generated as they are handed out, and the resume state
is one byte per grid point (eight more while the table is put in grid order). Only one sweep may
write a file at a time (an advisory lock on it).
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write, atomic_write_text
from dspsim.study.sweep.executors import (
    EXECUTORS,
    check_scheduler,
    dask_client,
    dask_results,
    import_dask,
    local_results,
)
from dspsim.study.sweep.files import check_out, csv_line, journal_path, sidecar_path
from dspsim.study.sweep.grid import Sweep, check_sweep
from dspsim.study.sweep.sidecar import compare, read_sidecar, sweep_meta
from dspsim.study.sweep.table import (
    DONE,
    FAILED,
    MISSING,
    Cache,
    journal_lines,
    read_header,
    read_parquet,
    typed_frame,
)
from dspsim.study.sweep.values import format_value
from dspsim.workers import MAX_JOBS, check_jobs  # noqa: F401 - the sweep's names for them

try:  # POSIX advisory locks; elsewhere two sweeps on one file are not guarded against
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

FSYNC_INTERVAL_S = 1.0


@dataclass
class SweepSummary:
    out: Path
    points: int  # in the grid
    computed: int  # by this run
    resumed: int  # found already in the file
    failed: int  # grid points whose row has an error
    wall_s: float
    dropped: int = 0  # invalid rows found in the file (their points were computed again)

    def line(self) -> str:
        bad = f", {self.dropped:,} invalid rows recomputed" if self.dropped else ""
        return (f"sweep: {self.points:,} points ({self.computed:,} computed, {self.resumed:,} "
                f"already in the file){bad}, {self.failed:,} failed, {self.wall_s:.1f} s -> "
                f"{self.out}")


def _row_texts(sweep: Sweep, point: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    def cell(c: str) -> str:
        if c in point:
            return format_value(point[c])
        if c == "wall_s":
            return f"{result.get(c, 0.0):.6f}"
        return format_value(result[c]) if c in result else ""

    return [cell(c) for c in sweep.columns]


def _lock(f: Any, path: Path) -> None:
    """Take the advisory lock of ``f`` (``path``); refuse when another sweep holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DspsimInputError(f"{path} is being written by another sweep; wait for it or "
                                   "choose another --out") from None


def _check_unlocked(path: Path) -> None:
    """Refuse early, before reading or rewriting anything, when another sweep holds the file."""
    if fcntl is not None and path.exists():
        with open(path, "rb") as f:
            _lock(f, path)


class _Journal:
    """The journal opened to append: its first ``good_bytes`` kept (a line torn by a kill cut
    off; none: begun with ``header``), a whole last row without its newline ended."""

    def __init__(self, path: Path, header: list[str], good_bytes: int, unterminated: bool):
        self.path = path
        self.failed = False  # a write failed (full disk, file-size limit): reported once
        self.f = open(path, "a+b")  # noqa: SIM115 - closed in close()
        try:
            _lock(self.f, path)
            if self.f.seek(0, os.SEEK_END) != good_bytes:
                self.f.truncate(good_bytes)
            self.f.seek(0, os.SEEK_END)
            if not good_bytes:
                self._write(csv_line(header))
            if unterminated:  # a whole last row without its newline: end it
                self._write(b"\n")
            self.fsync()
        except BaseException:
            self.f.close()
            raise

    def _write(self, data: bytes) -> None:
        try:
            self.f.write(data)
            self.f.flush()
        except OSError as e:
            self.failed = True
            raise DspsimInputError(f"cannot append to {self.path}: {e.strerror or e}; the "
                                   "finished points are in it: make room and rerun the same "
                                   "command to finish") from None

    def append(self, row: list[str]) -> None:
        self._write(csv_line(row))  # one line, one write
        if time.monotonic() - self.synced >= FSYNC_INTERVAL_S:
            self.fsync()

    def fsync(self) -> None:
        os.fsync(self.f.fileno())
        self.synced = time.monotonic()

    def close(self) -> None:
        if self.f.closed:
            return
        try:
            self.fsync()
        except OSError:
            if not self.failed:  # already reported: the write that failed said it
                raise
        finally:
            with contextlib.suppress(OSError):
                self.f.close()


def _open(sweep: Sweep, out: Path, journal: Path
          ) -> tuple[bool, Cache, list[list[str]], dict[str, Any] | None, bool]:
    """(whether the journal has its header, the cache of what the files hold, an earlier
    parquet file's rows, the file's sidecar, whether to write the sidecar)."""
    header = read_header(journal)[0] if journal.exists() else []
    if header:
        sweep.check_columns(journal, header)
    parquet: list[list[str]] = []
    if out.suffix == ".parquet" and out.exists():
        columns, parquet = read_parquet(out)
        sweep.check_columns(out, columns)
    has_rows = header and any(line for _, line, _ in journal_lines(journal))  # up to the first
    old = read_sidecar(out) if parquet or has_rows else None
    cache = Cache(sweep, old)
    for _ in cache.scan(journal if header else None, parquet):
        pass
    rewrite = compare(out, sweep, old, cache.rows + cache.stale) if old is not None else True
    if cache.dropped:
        print(f"dspsim: {cache.dropped:,} invalid rows in {journal} (e.g. {cache.reasons[0]}) "
              "are dropped; their points are computed again", file=sys.stderr)
    return bool(header), cache, parquet, old, rewrite or not cache.rows


def _rewrite_journal(journal: Path, sweep: Sweep, old: dict[str, Any] | None,
                     parquet: list[list[str]], drop_failed: bool) -> None:
    """Rewrite the journal (atomically) with only the rows that count, an earlier parquet
    file's too, the failed points' too unless ``drop_failed``."""
    cache = Cache(sweep, old)

    def write(f) -> None:
        f.write(csv_line(sweep.columns))
        f.writelines(line for i, line in cache.scan(journal if journal.exists() else None, parquet)
                     if not (drop_failed and cache.state[i] == FAILED))

    atomic_write(journal, write, "sweep journal")


def check_run(out: str | Path, executor: str, scheduler: str | None, jobs: int) -> Path:
    """The checked ``out`` of a sweep run by ``executor`` on ``jobs`` workers."""
    out = check_out(out)
    if executor not in EXECUTORS:
        raise DspsimInputError(f"executor {executor!r}: allowed {', '.join(EXECUTORS)}")
    if executor == "dask":
        import_dask()
        if scheduler:
            check_scheduler(scheduler)
    elif scheduler:
        raise DspsimInputError("--scheduler needs --executor dask")
    check_jobs(jobs, "jobs")
    if not out.parent.is_dir():
        raise DspsimInputError(f"output directory {str(out.parent)!r} does not exist")
    _check_unlocked(journal_path(out))  # check_out refused the three files naming one
    return out


def run_sweep(sweep: Sweep, out: str | Path, *, jobs: int = 1, executor: str = "local",
              scheduler: str | None = None, progress: bool | None = None,
              retry_failed: bool = False, fresh: bool = False, dask_processes: bool = True,
              timeout_s: float | None = None) -> SweepSummary:
    """Run every point of ``sweep`` not yet in ``out``, writing each row as it completes;
    ``progress`` (default: stderr is a terminal) draws a bar, ``fresh`` discards the file first,
    ``timeout_s`` bounds a dask cluster's run (what finished is kept)."""
    t0 = time.perf_counter()
    check_sweep(sweep)  # one built in Python was not checked as build_sweep checks its own
    out = check_run(out, executor, scheduler, jobs)
    journal, side = journal_path(out), sidecar_path(out)
    if fresh:
        for p in (out, journal, side):
            p.unlink(missing_ok=True)
    header, cache, parquet, old, rewrite = _open(sweep, out, journal)
    retry = retry_failed and cache.forget_failed()
    resumed = sweep.size - cache.state.count(MISSING)
    with contextlib.ExitStack() as stack:
        cluster = None
        if executor == "dask" and resumed < sweep.size:  # connect before writing anything
            cluster = stack.enter_context(
                dask_client(scheduler, min(jobs, sweep.size - resumed), dask_processes))
        if parquet or (header and (not cache.clean or retry)):  # one row a point, all keyed
            _rewrite_journal(journal, sweep, old, parquet, drop_failed=retry)  # before the
            cache.good, cache.unterminated = journal.stat().st_size, False
        if rewrite:  # sidecar that keys them
            atomic_write_text(side, json.dumps(sweep_meta(sweep), indent=2), "sweep sidecar")
        # never more workers than points to compute (a pool of 5,000 for 3 points would hang)
        workers = max(1, min(jobs, sweep.size - resumed))
        writer = _Journal(journal, sweep.columns, cache.good, cache.unterminated)
        computed = _run_points(sweep, writer, cache.state, resumed, workers, cluster,
                               progress, timeout_s)
    failed = _finish(sweep, out, journal)
    return SweepSummary(out, sweep.size, computed, resumed, failed, time.perf_counter() - t0,
                        cache.dropped)


def _run_points(sweep: Sweep, writer: _Journal, state: bytearray, resumed: int, jobs: int,
                cluster: tuple[Any, str] | None, progress: bool | None,
                timeout_s: float | None) -> int:
    """Compute the missing points, appending each row as it completes; returns how many."""
    todo = (p for i, p in enumerate(sweep.points()) if state[i] == MISSING)  # a generator
    show = sys.stderr.isatty() if progress is None else progress
    bars: list[Any] = []  # the progress bar, once the workers are up
    computed = 0
    results = None
    try:
        def started() -> None:
            if show:
                from tqdm import tqdm

                bars.append(tqdm(total=sweep.size, initial=resumed, unit="pt", desc="sweep",
                                 file=sys.stderr, dynamic_ncols=True, smoothing=0.05))

        if resumed < sweep.size:
            results = (dask_results(sweep, todo, cluster, started, timeout_s,
                                    total=sweep.size - resumed) if cluster is not None
                       else local_results(sweep, todo, jobs, started))
            for point, result in results:
                row = _row_texts(sweep, point, result)
                writer.append(row)
                state[sweep.index_of(sweep.identity(point))] = FAILED if row[-1] else DONE
                computed += 1
                for bar in bars:
                    bar.update(1)
    finally:
        if results is not None:
            results.close()  # the executor's own clean-up runs now, not at garbage collection
        for bar in bars:
            bar.close()
        writer.close()
    return computed


def _finish(sweep: Sweep, out: Path, journal: Path) -> int:
    """Write the table in grid order unless it already is; returns the failed points."""
    cache = Cache(sweep, None, where=True)
    for _ in cache.scan(journal):
        pass

    def order() -> Iterator[int]:  # where each row is, in grid order
        return (o for o in cache.where if o != -1)

    def lines() -> Iterator[bytes]:
        with open(journal, "rb") as f:
            for where in order():
                f.seek(where)
                line = f.readline()
                yield line if line.endswith(b"\n") else line + b"\n"

    def write(f) -> None:
        f.write(csv_line(sweep.columns))
        f.writelines(lines())

    if out.suffix == ".csv":
        in_order = cache.clean and not cache.torn and all(
            a < b for a, b in itertools.pairwise(order()))
        if not in_order:
            atomic_write(out, write, "sweep table")
    else:
        df = typed_frame(sweep, [r for line in lines() for r in csv.reader([line.decode()])])
        atomic_write(out, lambda f: df.to_parquet(f, index=False), "sweep table")
        journal.unlink(missing_ok=True)
    return cache.state.count(FAILED)
