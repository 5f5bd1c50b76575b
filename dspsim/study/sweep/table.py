"""Sweep tables read back: CSV journals as text rows, parquet files, and typed DataFrames. One
row per point: the parameter columns (everything before ``cycles``), then the results
(``docs/reference.md``, "Sweep tables and their sidecar"); a failed point's are empty but
``wall_s`` and ``error``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.paths import BOM, check_regular_or_absent
from dspsim.study.sweep.files import check_extension, journal_path
from dspsim.study.sweep.grid import Sweep
from dspsim.study.sweep.resume import BUSY, FLOAT_COLUMNS, check_cells, memory_of, parse_line
from dspsim.study.sweep.values import (
    SIZE_KEYS,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    canon_text,
    format_value,
    key_type,
)
from dspsim.text import one_line

TEXT_RESULT_COLUMNS = ("warnings", "error")
MAX_TABLE_BYTES = 64 << 20  # a table read back whole (a figure of it, an experiment's table):
# its cells as text take about 15x the file, so 64 MiB stays near 1 GB
MAX_PARQUET_ROWS = 1_000_000  # rows of a parquet table read back whole (its metadata says)
# J6's result columns (a model's other memories and iDMA channels add columns of their own)
_RESULT_COLUMNS = ("cycles", "time_us", "ddr_read_bytes", "ddr_write_bytes", "core_busy_cycles",
                   "ddr_busy_cycles", "ddr_stall_cycles", "idma_in_stall_cycles",
                   "idma_out_stall_cycles", "warnings", "hazards", "wall_s", "error")


def read_sweep(path: str | Path) -> pd.DataFrame:
    """A sweep file as a DataFrame: CSV (a torn last line left out), or parquet plus the journal
    an interrupted run left (its rows first), every row checked as a resume checks it; one line
    naming the file, line and fault for a bad one or a file over :data:`MAX_TABLE_BYTES`."""
    p = Path(path)
    check_extension(p, "sweep file")
    check_regular_or_absent(p, "sweep file")
    tables = []
    if p.suffix == ".parquet" and p.exists():
        _check_size(p)
        header, rows = _read_parquet(p)
        tables.append((str(p), header, [(f"row {k + 1}", cells) for k, cells in enumerate(rows)]))
    j = journal_path(p)
    if j.exists():
        check_regular_or_absent(j, "sweep file")
        _check_size(j)
        header, rows = _csv_text(j)
        if header:
            tables.append((str(j), header, rows))
    if not tables:
        raise DspsimInputError(f"sweep file {str(p)!r} not found or empty")
    header = tables[0][1]
    if len(tables) > 1 and tables[1][1] != header:
        raise DspsimInputError(f"{tables[1][0]}: its columns are not those of {p}; "
                               "not the journal of this table")
    keys = _check_header(header, tables[0][0])
    return _typed(header, keys, _checked_rows(tables, keys, header))


def _checked_rows(tables: list[tuple[str, list[str], list[tuple[str, list[str]]]]],
                  keys: list[str], header: list[str]) -> list[list[str]]:
    """Every row of ``tables`` (source, header, [(where, cells)]) checked, a later table's row
    of a point in place of an earlier one's."""
    rows: dict[tuple[str, ...], list[str]] = {}
    for source, _, part in tables:
        seen: set[tuple[str, ...]] = set()
        for where, cells in part:
            try:
                ident, _ = check_cells(keys, header, cells, None)
            except ValueError as e:
                raise DspsimInputError(
                    f"{source} {where}: {one_line(e)}; not a valid sweep table (rerun the "
                    "dspsim sweep that wrote it to compute bad rows again)") from None
            if ident in seen:
                raise DspsimInputError(
                    f"{source} {where}: a second row of the point "
                    f"{', '.join(f'{k}={v}' for k, v in zip(keys, ident))}; not a valid sweep "
                    "table (rerun the dspsim sweep that wrote it to repair it)")
            seen.add(ident)
            rows[ident] = list(ident) + cells[len(keys):]
    return list(rows.values())


def _check_size(p: Path) -> None:
    size = p.stat().st_size
    if size > MAX_TABLE_BYTES:
        raise DspsimInputError(f"sweep file {str(p)!r} is {size:,} bytes; at most "
                               f"{MAX_TABLE_BYTES:,} are read back (plot a smaller sweep)")


def _check_header(header: list[str], source: str) -> list[str]:
    """The parameter columns of a table's ``header``, every column checked."""
    for c in ("cycles", "error"):
        if c not in header:
            raise DspsimInputError(f"{source}: not a dspsim sweep table (no {c} column)")
    for i, c in enumerate(header):
        if c in header[:i]:
            raise DspsimInputError(f"{source}: column {c!r} appears twice; not a sweep table")
    keys = header[: header.index("cycles")]
    for k in keys:
        try:
            key_type(k)
        except DspsimInputError:
            raise DspsimInputError(
                f"{source}: parameter column {k!r} is not a sweep key; allowed: "
                f"{', '.join(SPECIAL_KEYS)} or a model key (dspsim keys; an op file's keys "
                "with its --op-file)") from None
    for group in (VARIANT_KEYS, SIZE_KEYS):
        if all(k in keys for k in group):
            raise DspsimInputError(f"{source}: columns {' and '.join(group)} both; a sweep "
                                   "table has one of them")
    for c in header[len(keys):]:
        if c not in _RESULT_COLUMNS and not BUSY.fullmatch(c) and memory_of(c) is None:
            raise DspsimInputError(
                f"{source}: column {c!r} after cycles is not a result column; allowed: "
                f"{', '.join(_RESULT_COLUMNS)}, idma<k>_busy_cycles, <memory>_read_bytes, "
                "<memory>_write_bytes, <memory>_busy_cycles, <memory>_stall_cycles")
    return keys


def _csv_text(path: Path) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(header, [(where, cells)]) of a CSV table; a torn last line (no newline) is left out
    unless it is a whole row of a finished point (the rows a resume keeps too)."""
    data = path.read_bytes()
    if len(data) > MAX_TABLE_BYTES:
        raise DspsimInputError(f"sweep file {str(path)!r} is larger than {MAX_TABLE_BYTES:,} "
                               "bytes")
    data = data.removeprefix(BOM.encode())  # a spreadsheet's "CSV UTF-8"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DspsimInputError(f"{path} line {line}: not UTF-8 text; not a sweep table written "
                               "by dspsim sweep") from None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if not lines:
        return [], []
    header = parse_line(lines[0])
    if header is None:
        raise DspsimInputError(f"{path} line 1: not a CSV header; not a sweep table")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue  # a blank line, as a resume skips it
        cells = parse_line(line)
        if cells is None:
            raise DspsimInputError(f"{path} line {number}: not a CSV line; not a sweep table")
        rows.append((f"line {number}", cells))
    cells = parse_line(tail) if tail.strip() else None
    if cells is not None and len(cells) == len(header) and cells[-1] == "":
        rows.append((f"line {len(lines) + 1}", cells))  # a whole row without its newline
    return header, rows


def _read_parquet(path: Path) -> tuple[list[str], list[list[str]]]:
    """(columns, rows as the journal's text cells) of a parquet file; one line when it is not
    a readable parquet table."""
    try:
        import pyarrow.parquet as pq

        rows_in_file = pq.ParquetFile(path).metadata.num_rows  # before decoding anything
        if rows_in_file > MAX_PARQUET_ROWS:
            raise DspsimInputError(
                f"{path}: a parquet sweep table of {rows_in_file:,} rows; at most "
                f"{MAX_PARQUET_ROWS:,} are read back whole (write larger sweeps as .csv, which "
                "resumes without reading the table whole)")
        df = pd.read_parquet(path)
    except DspsimInputError:
        raise
    except ImportError:
        raise DspsimInputError(
            "reading .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
        ) from None
    except Exception as e:  # noqa: BLE001 - pyarrow raises its own kinds (ArrowInvalid, ...)
        why = one_line(e)
        why = why if len(why) <= 120 else why[:117] + "..."
        raise DspsimInputError(
            f"{path}: not a readable parquet sweep table ({type(e).__name__}: {why}); delete it "
            "(with its journal and sidecar) to start its sweep afresh") from None

    def cell(v: Any) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return ""
        return format_value(v.item() if hasattr(v, "item") else v)

    return [str(c) for c in df.columns], [[cell(v) for v in rec]
                                          for rec in df.itertuples(index=False)]


def _typed(columns: list[str], keys: list[str], rows: list[list[str]]) -> pd.DataFrame:
    """Text rows as a DataFrame: parameter columns by their keys' types, counts as nullable
    integers, times as floats, warnings and error as text."""
    df = pd.DataFrame(rows, columns=columns, dtype=object)
    for c in columns:
        if c in keys:
            t = key_type(c)
            if t is bool:
                df[c] = df[c].map({"true": True, "false": False}).astype(bool)
            elif t is not str:
                df[c] = df[c].astype("int64" if t is int else "float64")
            else:
                df[c] = df[c].astype(str)
        elif c in FLOAT_COLUMNS:
            df[c] = pd.to_numeric(df[c].replace("", None), errors="raise").astype("float64")
        elif c in TEXT_RESULT_COLUMNS:
            df[c] = df[c].fillna("").astype(str)
        else:
            df[c] = pd.to_numeric(df[c].replace("", None), errors="raise").astype("Int64")
    return df


def key_columns(df: pd.DataFrame) -> list[str]:
    """The parameter columns of a sweep table: everything before ``cycles``."""
    cols = list(df.columns)
    return cols[: cols.index("cycles")] if "cycles" in cols else []


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of a sweep table whose point succeeded (``error`` empty; a table without that
    column, every row)."""
    return df[df["error"] == ""] if "error" in df.columns else df


def parquet_rows(path: Path, sweep: Sweep) -> list[list[str]]:
    """The rows of a parquet sweep file as the journal's text cells."""
    columns, rows = _read_parquet(path)
    sweep.check_columns(path, columns)
    return rows


def typed_frame(sweep: Sweep, rows: list[list[str]]) -> pd.DataFrame:
    """Text rows of ``sweep``'s table as a DataFrame with the key types' dtypes and nullable
    integer counts."""
    return _typed(sweep.columns, sweep.keys, [
        [canon_text(k, c) for k, c in zip(sweep.keys, row)] + row[len(sweep.keys):]
        for row in rows
    ])
