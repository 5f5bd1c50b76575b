"""Running a sweep into a file without ever losing work: the journal, resuming, locking.

- CSV: the file itself is the journal. The header is written first; every finished point is
  appended as one line and flushed at once (so a killed process, ``kill -9`` included, loses
  nothing written), and fsynced at most every second and at the end (so an OS crash loses at most
  the last second). When the grid is complete the file is rewritten in grid order (to a temporary
  file, then renamed over it).
- Parquet: points go to a CSV journal ``FILE.parquet.journal.csv`` as above; when the grid is
  complete the parquet file is written (temporary file, then rename) with the journal's rows and
  any rows of an earlier parquet file, and the journal is removed. An interrupted parquet sweep
  therefore leaves its finished points readable in the journal. Needs ``pyarrow``
  (``pip install 'dspsim[parquet]'``).
- A sidecar ``FILE.sweep.json`` records how the file was made (columns, fidelity, the grid, the
  fixed model values, dspsim version, git commit; :mod:`dspsim.study.sweep.sidecar`). A file
  holding finished rows whose sidecar is missing or damaged is refused (nothing would tell which
  sweep wrote them).
- Rerunning the same sweep reads what is there as a stream (:mod:`dspsim.study.sweep.resume`:
  every cell of every row checked; invalid rows dropped and their points computed again; a torn
  last line dropped unless it is a whole row) and computes only the missing points (a point is
  identified by its parameter values; a row that is not a point of the grid is invalid). A
  file made by a different sweep (other columns, fidelity, fixed model values, or a grid that
  does not contain the recorded one) is refused with one line; a grid that adds values to the
  recorded one extends the file (a note says so). Points that failed count as done;
  ``retry_failed`` computes them again.
- Memory is bounded whatever the grid: points are generated as they are handed out, and the
  resume state is one byte per grid point (eight more while the table is put in grid order).
- Only one sweep may write a file at a time (an advisory lock on it).

A point that fails (e.g. ``softmax.tile_bytes`` larger than ``tcm.bank_bytes``) is recorded
with its error message and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.paths import check_distinct
from dspsim.study.sweep.executors import (
    EXECUTORS,
    DaskCluster,
    check_scheduler,
    dask_results,
    import_dask,
    local_results,
)
from dspsim.study.sweep.files import (
    atomic_write,
    check_out,
    csv_bytes,
    csv_line,
    journal_path,
    sidecar_path,
)
from dspsim.study.sweep.grid import Sweep
from dspsim.study.sweep.resume import (
    DONE,
    FAILED,
    MISSING,
    Locations,
    Scan,
    kept_rows,
    read_header,
    scan_rows,
)
from dspsim.study.sweep.sidecar import check_same_sweep
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
        return (
            f"sweep: {self.points:,} points ({self.computed:,} computed, {self.resumed:,} already "
            f"in the file){bad}, {self.failed:,} failed, {self.wall_s:.1f} s -> {self.out}"
        )


def _row_texts(sweep: Sweep, point: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    out = []
    for c in sweep.columns:
        if c in point:
            out.append(format_value(point[c]))
        elif c == "wall_s":
            out.append(f"{result.get(c, 0.0):.6f}")
        elif c in result:
            out.append(format_value(result[c]))
        else:
            out.append("")
    return out


def _busy(path: Path) -> DspsimInputError:
    return DspsimInputError(
        f"{path} is being written by another sweep; wait for it or choose another --out"
    )


def _check_unlocked(path: Path) -> None:
    """Refuse early, before reading or rewriting anything, when another sweep holds the file."""
    if fcntl is None or not path.exists():
        return
    with open(path, "rb") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise _busy(path) from None


class _Journal:
    """Append-only CSV: one line per finished point, flushed at once, fsynced every second."""

    def __init__(self, path: Path, header: list[str], good_bytes: int, fresh: bool,
                 unterminated: bool = False):
        self.path = path
        self.failed = False  # a write failed (full disk, file-size limit): reported once
        self.f = open(path, "a+b")  # noqa: SIM115 - closed in close()
        if fcntl is not None:
            try:
                fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.f.close()
                raise _busy(path) from None
        try:
            if fresh:
                self.f.truncate(0)
                self._write(csv_bytes(header, []))
            elif self.f.seek(0, os.SEEK_END) != good_bytes:
                self.f.truncate(good_bytes)  # drop a line torn by a kill
            self.f.seek(0, os.SEEK_END)
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
            raise DspsimInputError(
                f"cannot append to {self.path}: {e.strerror or e}; the finished points are in "
                "it: make room and rerun the same command to finish"
            ) from None

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
            self.f.close()
        except OSError:
            if not self.failed:  # already reported: the write that failed said it
                raise
        finally:
            if not self.f.closed:
                try:
                    self.f.close()
                except OSError:
                    pass


def _kept_lines(journal: Path, sweep: Sweep, drop_failed: bool) -> Iterator[bytes]:
    """The journal's lines a resume keeps (valid, first of their point), newline-ended, in one
    streamed pass; without the failed points' rows with ``drop_failed``."""
    scan = Scan(bytearray(sweep.size))
    for _, line, i in kept_rows(sweep, journal, scan):
        if drop_failed and scan.state[i] == FAILED:
            continue
        yield line + b"\n"


def _rewrite_journal(journal: Path, sweep: Sweep, drop_failed: bool) -> None:
    """Rewrite the journal with only the rows a resume keeps (atomically)."""
    header = csv_bytes(sweep.columns, [])

    def write(f) -> None:
        f.write(header)
        for line in _kept_lines(journal, sweep, drop_failed):
            f.write(line)

    atomic_write(journal, write, "sweep journal")


def _read_parquet_rows(out: Path, sweep: Sweep) -> list[list[str]]:
    from dspsim.study.sweep.table import parquet_rows

    return parquet_rows(out, sweep) if out.suffix == ".parquet" and out.exists() else []


def _scan(sweep: Sweep, out: Path, journal: Path) -> tuple[list[str], Scan, list]:
    """(journal header, the scan, parquet rows) of what the files hold for ``sweep``."""
    header, _ = read_header(journal) if journal.exists() else ([], 0)
    if header and header != sweep.columns:
        raise DspsimInputError(
            f"{journal} was written by a different sweep (columns {','.join(header)}; this sweep "
            f"has {','.join(sweep.columns)}); choose another --out or delete it"
        )
    parquet = _read_parquet_rows(out, sweep)
    return header, scan_rows(sweep, journal if header else None, parquet), parquet


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    progress: bool | None = None,
    retry_failed: bool = False,
    fresh: bool = False,
    dask_processes: bool = True,
    timeout_s: float | None = None,
) -> SweepSummary:
    """Run every point of ``sweep`` not yet in ``out`` and write each row as it completes.

    ``progress``: draw a progress bar (default: when stderr is a terminal). ``fresh``: discard an
    existing file first. ``dask_processes``: LocalCluster workers as processes (else threads).
    ``timeout_s``: give up on a dask cluster after this long (the file keeps what finished).
    """
    t0 = time.perf_counter()
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
    journal = journal_path(out)
    side = sidecar_path(out)
    check_distinct([("--out", out), ("its journal", journal if journal != out else None),
                    ("its sidecar", side)])
    _check_unlocked(journal)
    if fresh:
        for p in (out, journal, side):
            p.unlink(missing_ok=True)

    header, scan, parquet = _scan(sweep, out, journal)
    grown = None
    if scan.rows or scan.dropped or scan.duplicates:
        grown = check_same_sweep(out, sweep, scan.rows + scan.dropped + scan.duplicates)
    retry = retry_failed and FAILED in scan.state
    if retry:
        scan.state = bytearray(scan.state.replace(bytes([FAILED]), bytes([MISSING])))
    resumed = sweep.size - scan.state.count(MISSING)
    if scan.dropped:
        print(
            f"dspsim: {scan.dropped:,} invalid rows in {journal} (e.g. {scan.reasons[0]}) are "
            "dropped; their points are computed again",
            file=sys.stderr,
        )

    with contextlib.ExitStack() as stack:
        cluster = None
        if executor == "dask" and resumed < sweep.size:  # connect before writing anything
            cluster = stack.enter_context(
                DaskCluster(scheduler, min(jobs, sweep.size - resumed), dask_processes))
        if header and (not scan.clean or retry):  # the file never holds two rows for a point
            _rewrite_journal(journal, sweep, drop_failed=retry)
            header, scan_after, _ = _scan(sweep, out, journal)
            scan.good, scan.unterminated = scan_after.good, scan_after.unterminated
        if not scan.rows or grown is not None:
            meta = grown if grown is not None else sweep.meta()
            atomic_write(side, lambda f: f.write(json.dumps(meta, indent=2).encode()),
                         "sweep sidecar")
        # never more workers than points to compute (a pool of 5,000 for 3 points would hang)
        workers = max(1, min(jobs, sweep.size - resumed))
        computed = _run_points(sweep, journal, header, scan, resumed, workers, executor, cluster,
                               progress, timeout_s)

    failed = _finish(sweep, out, journal, parquet)
    return SweepSummary(out, sweep.size, computed, resumed, failed, time.perf_counter() - t0,
                        scan.dropped)


def _run_points(sweep: Sweep, journal: Path, header: list[str], scan: Scan, resumed: int,
                jobs: int, executor: str, cluster: DaskCluster | None, progress: bool | None,
                timeout_s: float | None) -> int:
    """Compute the points the scan found missing, appending each row as it completes; returns
    how many were computed."""
    state = scan.state
    todo = (p for i, p in enumerate(sweep.points()) if state[i] == MISSING)  # a generator
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    computed = 0
    writer = _Journal(journal, sweep.columns, scan.good, fresh=not header,
                      unterminated=scan.unterminated)
    results = None
    try:

        def started() -> None:
            nonlocal bar
            if show:
                from tqdm import tqdm

                bar = tqdm(
                    total=sweep.size,
                    initial=resumed,
                    unit="pt",
                    desc="sweep",
                    file=sys.stderr,
                    dynamic_ncols=True,
                    smoothing=0.05,
                )

        if resumed < sweep.size:
            if cluster is not None:
                results = dask_results(sweep, todo, cluster, started, timeout_s,
                                       total=sweep.size - resumed)
            else:
                results = local_results(sweep, todo, jobs, started)
            for point, result in results:
                row = _row_texts(sweep, point, result)
                writer.append(row)
                i = sweep.index_of(sweep.identity(point))
                state[i] = FAILED if row[-1] else DONE
                computed += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if results is not None:
            results.close()  # the executor's own clean-up runs now, not at garbage collection
        if bar is not None:
            bar.close()
        writer.close()
    return computed


def _increasing(values: Iterator[int]) -> bool:
    last = None
    for v in values:
        if last is not None and v <= last:
            return False
        last = v
    return True


def _finish(sweep: Sweep, out: Path, journal: Path, parquet: list[list[str]]) -> int:
    """Write the table in grid order unless it already is;
    returns the failed points of the grid."""
    loc = Locations(sweep.size)
    # the journal is newer than a parquet file: its row of a point replaces the file's
    scan = scan_rows(sweep, journal, parquet, loc, replace=True)

    def order() -> Iterator[int]:  # where each row is, in grid order
        yield from (o for o in loc.slots if o != -1)

    in_order = scan.clean and not scan.torn and _increasing(order())

    def lines() -> Iterator[bytes]:
        with contextlib.ExitStack() as stack:
            f = stack.enter_context(open(journal, "rb")) if journal.exists() else None
            for where in order():
                if where < -1:
                    yield csv_line(parquet[-2 - where])
                    continue
                f.seek(where)
                line = f.readline()
                yield line if line.endswith(b"\n") else line + b"\n"

    if out.suffix == ".csv":
        if not in_order:
            header = csv_bytes(sweep.columns, [])

            def write(f) -> None:
                f.write(header)
                for line in lines():
                    f.write(line)

            atomic_write(out, write, "sweep table")
    else:
        import csv as _csv

        from dspsim.study.sweep.table import typed_frame

        rows = [r for line in lines() for r in _csv.reader([line.decode("utf-8")])]
        df = typed_frame(sweep, rows)
        atomic_write(out, lambda f: df.to_parquet(f, index=False), "sweep table")
        journal.unlink(missing_ok=True)
    return scan.state.count(FAILED)
