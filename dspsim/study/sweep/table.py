"""Sweep tables read back: CSV journals as text rows, parquet files, and typed DataFrames.

One row per point: ``op``, the variant column (``variant``, or ``mode`` when the sweep was given
that older name), the size column (``n`` for a 1-D op, ``shape`` as ``ROWSxCOLS`` for a 2-D
one), a column per other swept key, named exactly as given; then ``cycles``, ``time_us``,
``ddr_read_bytes``, ``ddr_write_bytes``, ``core_busy_cycles``, ``idma<k>_busy_cycles`` (one per
iDMA channel of the core, in order), ``ddr_busy_cycles``, ``ddr_stall_cycles``,
``idma_in_stall_cycles``, ``idma_out_stall_cycles`` (cycles the core stalled on DDR loads, on
input copies and on output copies), ``warnings`` (the codes of the warnings the run raised,
``;``-separated, empty when none), ``hazards`` (how many access hazards the run had),
``wall_s`` (host seconds for the point) and ``error`` (empty when the point succeeded, else the
one-line reason; its result cells are empty). Everything before ``cycles`` is a parameter
column.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pandas as pd

from dspsim.errors import DspsimInputError
from dspsim.paths import check_regular_or_absent
from dspsim.study.sweep.files import EXTENSIONS, journal_path
from dspsim.study.sweep.grid import TEXT_RESULT_COLUMNS, Sweep
from dspsim.study.sweep.values import format_value, key_type

FLOAT_RESULT_COLUMNS = ("time_us", "wall_s")


def read_sweep(path: str | Path) -> pd.DataFrame:
    """A sweep file as a DataFrame: CSV (a torn last line left out), or parquet plus its journal
    when an interrupted run left one."""
    p = Path(path)
    if p.suffix not in EXTENSIONS:
        raise DspsimInputError(
            f"sweep file {str(p)!r}: unknown extension {p.suffix or '(none)'!r}; "
            f"allowed {', '.join(EXTENSIONS)}"
        )
    check_regular_or_absent(p, "sweep file")
    frames = []
    if p.suffix == ".parquet" and p.exists():
        try:
            frames.append(pd.read_parquet(p))
        except ImportError:
            raise DspsimInputError(
                "reading .parquet needs pyarrow; install it with: pip install 'dspsim[parquet]'"
            ) from None
    j = journal_path(p)
    if j.exists():
        check_regular_or_absent(j, "sweep file")
        data = j.read_bytes()
        text = _whole_lines(data).decode("utf-8", errors="replace")
        if text.strip():
            try:
                text_dtypes = dict.fromkeys(TEXT_RESULT_COLUMNS, str)
                frames.append(pd.read_csv(io.StringIO(text), dtype=text_dtypes))
            except (pd.errors.ParserError, ValueError) as e:
                raise DspsimInputError(f"{j}: not a sweep table ({e})") from None
    if not frames:
        raise DspsimInputError(f"sweep file {str(p)!r} not found or empty")
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "cycles" not in df.columns or "error" not in df.columns:
        raise DspsimInputError(f"{p}: not a dspsim sweep table (no cycles or error column)")
    for c in TEXT_RESULT_COLUMNS:
        if c in df.columns:
            df[c] = df[c].fillna("").astype(str)
    keys = key_columns(df)
    # the same dtypes from CSV as from parquet: counts stay integers next to failed points' gaps
    for c in df.columns[len(keys) :]:
        if c in FLOAT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
        elif c not in TEXT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    if len(frames) > 1 and keys:
        df = df.drop_duplicates(subset=keys, keep="last", ignore_index=True)
    return df


def key_columns(df: pd.DataFrame) -> list[str]:
    """The parameter columns of a sweep table: everything before ``cycles``."""
    cols = list(df.columns)
    return cols[: cols.index("cycles")] if "cycles" in cols else []


def _whole_lines(data: bytes) -> bytes:
    """``data`` without a torn last line: a last line without its newline is kept only when it
    is a whole row of a finished point (as many cells as the header, the last, ``error``,
    empty), the rows a resume keeps too (:mod:`dspsim.study.sweep.resume`)."""
    good = data.rfind(b"\n") + 1
    tail = data[good:]
    if not tail.strip() or good == 0:
        return data[:good]
    try:
        header = next(csv.reader([data[: data.find(b"\n")].decode("utf-8")]))
        row = next(csv.reader([tail.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return data[:good]
    if len(row) == len(header) and row[-1] == "":
        return data + b"\n"
    return data[:good]


def parquet_rows(path: Path, sweep: Sweep) -> list[list[str]]:
    """The rows of a parquet sweep file as the journal's text cells."""
    df = pd.read_parquet(path)
    if list(df.columns) != sweep.columns:
        raise DspsimInputError(
            f"{path} was written by a different sweep (columns {','.join(map(str, df.columns))}; "
            f"this sweep has {','.join(sweep.columns)}); choose another --out or delete it"
        )
    rows = []
    for rec in df.itertuples(index=False):
        rows.append(
            [
                ""
                if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
                else format_value(v.item() if hasattr(v, "item") else v)
                for v in rec
            ]
        )
    return rows


def typed_frame(sweep: Sweep, rows: list[list[str]]) -> pd.DataFrame:
    """Text rows as a DataFrame with the key types' dtypes and nullable integer counts."""
    df = pd.DataFrame(rows, columns=sweep.columns)
    for c in sweep.columns:
        if c in sweep.keys:
            t = key_type(c)
            if t is not str:
                df[c] = df[c].astype("int64" if t is int else "float64")
        elif c in FLOAT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
        elif c not in TEXT_RESULT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df
