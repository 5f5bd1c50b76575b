"""The files of a sweep: the table (``.csv`` or ``.parquet``), its journal (the CSV itself, or
``FILE.parquet.journal.csv``) and its sidecar ``FILE.sweep.json``."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from dspsim.errors import DspsimInputError
from dspsim.paths import check_distinct, check_name_fits, check_regular_or_absent, unknown_extension

EXTENSIONS = (".csv", ".parquet")


def sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".sweep.json")


def journal_path(out: Path) -> Path:
    """Where finished points are appended: the CSV itself, or a CSV beside a parquet file."""
    return out if out.suffix == ".csv" else out.with_name(out.name + ".journal.csv")


def check_extension(p: Path, what: str) -> None:
    """Refuse a table (``what``: how messages name it) whose extension is not a sweep's."""
    if p.suffix not in EXTENSIONS:  # as written: a sweep's ".CSV" is not its ".csv"
        raise unknown_extension(p, what, p.suffix, EXTENSIONS)


def check_out(out: str | Path) -> Path:
    """The sweep's output path, checked before anything runs: its extension, pyarrow for
    parquet; it, its journal and its sidecar regular files or absent (``/dev/full`` would be
    read forever), with names that fit, three files, not one under two names."""
    p = Path(out)
    check_extension(p, "output")
    if p.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise DspsimInputError(
                "writing .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
            ) from None
    named = [("--out", p), ("its sidecar", sidecar_path(p))]
    if journal_path(p) != p:
        named.append(("its journal", journal_path(p)))
    for what, path in named:  # the sidecar's and journal's names are longer than --out's
        shown = what if what == "--out" else f"--out {what}"
        check_name_fits(path, shown)
        check_regular_or_absent(path, shown)
    check_distinct(named)
    return p


def csv_line(row: list[str]) -> bytes:
    """One row as one CSV line, newline included."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue().encode("utf-8")
