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
- A sidecar ``FILE.sweep.json`` records how the file was made (columns, fidelity, the fixed model
  values, dspsim version, git commit).
- Rerunning the same sweep reads what is there, drops a torn last line left by a kill, and
  computes only the missing points (a point is identified by its parameter values). A file made
  by a different sweep (other columns, fidelity or fixed model values) is refused with one line.
  Points that failed count as done; ``retry_failed`` computes them again.
- Only one sweep may write a file at a time (an advisory lock on it).

A point that fails (e.g. ``softmax.tile_bytes`` larger than ``tcm.bank_bytes``) is recorded
with its error message and the sweep goes on.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.study.sweep.executors import EXECUTORS, dask_results, import_dask, local_results
from dspsim.study.sweep.files import (
    atomic_write,
    check_out,
    csv_bytes,
    journal_path,
    sidecar_path,
)
from dspsim.study.sweep.grid import Sweep
from dspsim.study.sweep.table import parquet_rows, read_csv_rows, typed_frame
from dspsim.study.sweep.values import canon_text, format_value

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

    def line(self) -> str:
        return (
            f"sweep: {self.points:,} points ({self.computed:,} computed, {self.resumed:,} already "
            f"in the file), {self.failed:,} failed, {self.wall_s:.1f} s -> {self.out}"
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


def _check_meta(out: Path, sweep: Sweep) -> None:
    side = sidecar_path(out)
    if not side.exists():
        return
    try:
        old = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # a damaged sidecar is rewritten; the header check still guards the columns
    new = sweep.meta()
    for k in ("columns", "fidelity"):
        if old.get(k) != new[k]:
            raise DspsimInputError(
                f"{out} was written by a different sweep ({k} {old.get(k)} there, {new[k]} "
                "here); choose another --out or delete it"
            )
    for k, v in new["fixed_model"].items():
        if k in old.get("fixed_model", {}) and old["fixed_model"][k] != v:
            raise DspsimInputError(
                f"{out} was written by a different sweep ({k} = {old['fixed_model'][k]} there, "
                f"{v} here); choose another --out or delete it"
            )


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

    def __init__(self, path: Path, header: list[str], good_bytes: int, fresh: bool):
        self.path = path
        self.f = open(path, "a+b")  # noqa: SIM115 - closed in close()
        if fcntl is not None:
            try:
                fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.f.close()
                raise _busy(path) from None
        if fresh:
            self.f.truncate(0)
            self._write(csv_bytes(header, []))
        elif self.f.seek(0, os.SEEK_END) != good_bytes:
            self.f.truncate(good_bytes)  # drop a line torn by a kill
        self.f.seek(0, os.SEEK_END)
        self.fsync()

    def _write(self, data: bytes) -> None:
        self.f.write(data)
        self.f.flush()

    def append(self, row: list[str]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(row)
        self._write(buf.getvalue().encode("utf-8"))  # one line, one write
        if time.monotonic() - self.synced >= FSYNC_INTERVAL_S:
            self.fsync()

    def fsync(self) -> None:
        os.fsync(self.f.fileno())
        self.synced = time.monotonic()

    def close(self) -> None:
        if not self.f.closed:
            self.fsync()
            self.f.close()


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
    elif scheduler:
        raise DspsimInputError("--scheduler needs --executor dask")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DspsimInputError(f"jobs = {jobs!r}: must be a positive integer")
    if not out.parent.is_dir():
        raise DspsimInputError(f"output directory {str(out.parent)!r} does not exist")
    journal = journal_path(out)
    _check_unlocked(journal)
    if fresh:
        for p in (out, journal, sidecar_path(out)):
            p.unlink(missing_ok=True)

    columns = sweep.columns
    existing: list[list[str]] = []
    good = 0
    header: list[str] = []
    if journal.exists():
        header, existing, good = read_csv_rows(journal, columns)
    if out.suffix == ".parquet" and out.exists():
        existing = parquet_rows(out, sweep) + existing
    if existing:
        _check_meta(out, sweep)

    nkeys = len(sweep.keys)
    done: dict[tuple[str, ...], list[str]] = {}
    for r in existing:
        try:
            ident = tuple(canon_text(k, v) for k, v in zip(sweep.keys, r[:nkeys]))
        except ValueError as e:
            raise DspsimInputError(f"{journal}: {e}; the file is damaged") from None
        done.setdefault(ident, r)
    grid_ids = {sweep.identity(p) for p in sweep.points()}
    if retry_failed:
        failed_ids = {i for i, r in done.items() if r[-1] and i in grid_ids}
        if failed_ids:
            for i in failed_ids:
                del done[i]
            # rewrite without them so the file never holds two rows for a point
            atomic_write(journal, lambda f: f.write(csv_bytes(columns, done.values())))
            header, _, good = read_csv_rows(journal, columns)
    todo = [p for p in sweep.points() if sweep.identity(p) not in done]
    resumed = sweep.size - len(todo)

    side = sidecar_path(out)
    if not existing or not side.exists():
        atomic_write(side, lambda f: f.write(json.dumps(sweep.meta(), indent=2).encode()))

    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    computed = 0
    writer = _Journal(journal, columns, good, fresh=not header)
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

        if todo:
            if executor == "dask":
                results = dask_results(
                    sweep, todo, jobs, started, scheduler, dask_processes, timeout_s
                )
            else:
                results = local_results(sweep, todo, jobs, started)
            for point, result in results:
                row = _row_texts(sweep, point, result)
                writer.append(row)
                done[sweep.identity(point)] = row
                computed += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        writer.close()

    order = [sweep.identity(p) for p in sweep.points()]
    extra = [i for i in done if i not in grid_ids]  # rows of earlier, other grids: kept
    rows = [done[i] for i in order] + [done[i] for i in extra]
    if out.suffix == ".csv":
        if rows != existing:  # grid order once complete; untouched if already so
            atomic_write(out, lambda f: f.write(csv_bytes(columns, rows)))
    else:
        df = typed_frame(sweep, rows)
        atomic_write(out, lambda f: df.to_parquet(f, index=False))
        journal.unlink(missing_ok=True)
    failed = sum(1 for i in order if done[i][-1])
    return SweepSummary(out, sweep.size, computed, resumed, failed, time.perf_counter() - t0)
