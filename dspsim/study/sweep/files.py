"""The files of a sweep: the table (``.csv`` or ``.parquet``), its journal (the CSV itself, or
``FILE.parquet.journal.csv``), its sidecar ``FILE.sweep.json``, and how they are written (whole
files atomically: a temporary file, fsynced, then renamed over the old one)."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from dspsim.errors import DspsimInputError

EXTENSIONS = (".csv", ".parquet")


def sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".sweep.json")


def journal_path(out: Path) -> Path:
    """Where finished points are appended: the CSV itself, or a CSV beside a parquet file."""
    return out if out.suffix == ".csv" else out.with_name(out.name + ".journal.csv")


def check_out(out: str | Path) -> Path:
    p = Path(out)
    if p.suffix not in EXTENSIONS:
        raise DspsimInputError(
            f"output {str(p)!r}: unknown extension {p.suffix or '(none)'!r}; "
            f"allowed {', '.join(EXTENSIONS)}"
        )
    if p.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise DspsimInputError(
                "writing .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
            ) from None
    return p


def atomic_write(path: Path, write) -> None:
    """``write(f)`` to a temporary file beside ``path``, fsync it, then rename it over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def csv_bytes(header: list[str], rows: Iterable[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")
