"""A sweep's rows read back, trusting none of them: a resume streams a file's rows into the cache
of points it skips (:class:`Cache`: one byte per grid point); :func:`read_sweep` reads a table
whole into a typed DataFrame. One row per point: the parameter columns (everything before
``cycles``), then the results (``docs/reference.md``, "Sweep tables and their sidecar").

Every cell is checked (:func:`check_cells`): parameter cells as their keys' values, a finished
point's results as counts, times and warning codes dspsim raises, a failed point's empty but
``wall_s`` and ``error``. A resume drops an invalid row (its point is computed again), a table
read whole refuses it. A last line without its newline is kept when it is a whole row of a
finished point (a kill cannot tear a line into one: its last cell, ``error``, is empty).
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspsim.config import is_memory_section
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op, op_names
from dspsim.paths import BOM, check_regular_or_absent
from dspsim.platform import WARNING_CODES as PLATFORM_WARNINGS
from dspsim.study.sweep.files import check_extension, csv_line, journal_path
from dspsim.study.sweep.grid import DEFAULT_OP, MEMORY_COLUMNS, WAIT_COLUMNS, Sweep
from dspsim.study.sweep.sidecar import canon, key_default, point_key, sweep_values, sweep_version
from dspsim.study.sweep.values import (
    MODEL_KEY,
    SIZE_KEYS,
    SPECIAL_KEYS,
    VARIANT_KEYS,
    canon_text,
    cell_value,
    check_value,
    format_value,
    key_type,
)
from dspsim.text import one_line

if TYPE_CHECKING:
    import pandas as pd

    from dspsim.config import HardwareModel

MISSING, DONE, FAILED = 0, 1, 2
_UINT = re.compile(r"[0-9]{1,19}")
_CODES = re.compile(r"([A-Za-z0-9_]+(;[A-Za-z0-9_]+)*)?")
FLOAT_COLUMNS = ("time_us", "wall_s")  # the other result counts are integers
TEXT_RESULT_COLUMNS = ("warnings", "error")
BUSY = re.compile(r"idma[0-9]+_busy_cycles")
_MEMORY = re.compile(r"(?P<memory>[A-Za-z][A-Za-z0-9_]*)_(?:" + "|".join(MEMORY_COLUMNS) + ")")
MAX_COUNT = 2**63 - 1  # counts are int64 in a typed table
MAX_TABLE_BYTES = 64 << 20  # a table read back whole (a figure of it, an experiment's table):
# its cells as text take about 15x the file, so 64 MiB stays near 1 GB
MAX_PARQUET_ROWS = 1_000_000  # rows of a parquet table read back whole (its metadata says)
# J6's result columns (a model's other memories and iDMA channels add columns of their own)
_RESULT_COLUMNS = ("cycles", "time_us", "ddr_read_bytes", "ddr_write_bytes", "core_busy_cycles",
                   "ddr_busy_cycles", "ddr_stall_cycles", "idma_in_stall_cycles",
                   "idma_out_stall_cycles", "warnings", "hazards", "wall_s", "error")


def warning_codes() -> frozenset[str]:
    """Every warning code a run can carry: the platform's and each registered op's."""
    return frozenset(PLATFORM_WARNINGS).union(*(get_op(o).warning_codes for o in op_names()))


def _non_negative(column: str, text: str) -> None:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{column} = {text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{column} = {text!r} is not a finite non-negative number")


def check_row(sweep: Sweep, cells: list[str]) -> tuple[tuple[str, ...], bool]:
    """(identity, failed) of a valid row of ``sweep``'s table, else ``ValueError``."""
    model: HardwareModel | None = sweep.model
    if sweep.models and len(cells) == len(sweep.columns):  # the row's model
        model = dict(sweep.models).get(cells[sweep.keys.index(MODEL_KEY)])
    channels = model.idma.channels if model is not None else None
    memories = set(model.memories) if model is not None else None
    return check_cells(sweep.keys, sweep.columns, cells, channels, memories)


def memory_of(column: str) -> str | None:
    """The memory a ``<memory>_read_bytes`` (and so on) column is of, else None."""
    m = _MEMORY.fullmatch(column)
    if (m is None or column in WAIT_COLUMNS or re.fullmatch(r"idma[0-9]+", m["memory"])
            or not is_memory_section(m["memory"])):
        return None
    return m["memory"]


def _absent(column: str, text: str, memories: set[str] | None, several: bool) -> bool:
    """Whether ``column`` is a memory's the row's model lacks (its cell must be empty) or, in a
    table of ``several`` models read alone, an empty memory or channel cell."""
    memory = memory_of(column)
    if memory is not None and memories is not None and memory not in memories:
        if text != "":
            raise ValueError(f"{column} = {text!r} for a model without the memory {memory}")
        return True
    return several and text == "" and (memory is not None or bool(BUSY.fullmatch(column)))


def _check_result_cell(c: str, v: str, failed: bool, channels: int | None) -> None:
    """One result cell of a row: empty in a failed point's row, else of its column's kind."""
    if failed:
        if v != "":
            raise ValueError(f"{c} = {v!r} in the row of a failed point")
    elif c == "warnings":
        if not _CODES.fullmatch(v):
            raise ValueError(f"warnings = {v!r} is not a list of warning codes")
        known = warning_codes()
        unknown = [code for code in v.split(";") if code and code not in known]
        if unknown:
            raise ValueError(f"warnings: {unknown[0]!r} is not a warning code dspsim "
                             f"raises (allowed: {', '.join(sorted(known))})")
    elif c in FLOAT_COLUMNS:
        _non_negative(c, v)
    elif channels is not None and BUSY.fullmatch(c) and int(c[4:-12]) >= channels:
        if v != "":
            raise ValueError(f"{c} = {v!r} for a point with {channels} channels")
    elif not _UINT.fullmatch(v):
        raise ValueError(f"{c} = {v!r} is not a non-negative integer")
    elif int(v) > MAX_COUNT:
        raise ValueError(f"{c} = {v} is larger than {MAX_COUNT:,}")


def check_cells(keys: list[str], columns: list[str], cells: list[str],
                channels: int | None, memories: set[str] | None = None,
                ) -> tuple[tuple[str, ...], bool]:
    """(identity, failed) of a valid row of parameter ``keys`` then result ``columns`` (all, or
    some: a hand-made table), else ``ValueError`` naming the first bad cell. ``channels`` (iDMA)
    and ``memories`` of the row's model: None when unknown."""
    if len(cells) != len(columns):
        raise ValueError(f"{len(cells)} fields, expected {len(columns)}")
    ident = []
    for key, text in zip(keys, cells):
        value = cell_value(key, text)
        try:
            check_value(key, value)
        except DspsimInputError as e:
            raise ValueError(str(e)) from None
        canon = format_value(value)
        if key == "n" and int(canon) > MAX_COUNT:  # int64 in a typed table, as the counts
            raise ValueError(f"n = {canon} is larger than {MAX_COUNT:,}")
        ident.append(canon)
    values = dict(zip(keys, ident))
    for key in VARIANT_KEYS:
        if key in values:
            op = get_op(values.get("op", DEFAULT_OP))
            if values[key] not in op.variants:
                raise ValueError(f"{key} {values[key]!r} is not a variant of {op.name} "
                                 f"(allowed: {', '.join(op.variants)})")
    result = dict(zip(columns[len(keys):], cells[len(keys):]))
    failed = result.get("error", "") != ""
    if "wall_s" in result:
        _non_negative("wall_s", result["wall_s"])
    if "idma.channels" in values:
        channels = int(values["idma.channels"])
    several = memories is None and MODEL_KEY in keys  # read alone: the row's model unknown
    for c, v in result.items():
        if c not in ("wall_s", "error") and not _absent(c, v, memories, several):
            _check_result_cell(c, v, failed, channels)
    return tuple(ident), failed


def journal_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, line without its newline, whether it had one) of each line after the header."""
    with open(path, "rb") as f:
        header = f.readline()
        offset = len(header)
        for line in f:
            ended = line.endswith(b"\n")
            yield offset, line[:-1] if ended else line, ended
            offset += len(line)


def read_header(path: Path) -> tuple[list[str], int]:
    """(header cells, its length in bytes) of a journal; ``[]`` without a whole header."""
    with open(path, "rb") as f:
        line = f.readline()
    if not line.endswith(b"\n"):
        return [], 0
    try:
        text = line[:-1].decode("utf-8").removeprefix(BOM)  # a spreadsheet saved it with a BOM
        return next(csv.reader([text]), []), len(line)
    except (UnicodeDecodeError, csv.Error):
        raise DspsimInputError(f"{path}: not a UTF-8 CSV file written by dspsim sweep") from None


def parse_line(line: bytes) -> list[str] | None:
    """The cells of one CSV line, or None when it is not one."""
    try:
        rows = list(csv.reader([line.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, csv.Error):
        return None
    return rows[0] if len(rows) == 1 else None


class Cache:
    """Per grid point MISSING, DONE or FAILED (and, with ``where``, its row's offset): a row
    counts when it is valid, the first of a point of the grid, and its key (made from the
    sidecar ``old``; None: the sweep's own file) is the point's."""

    def __init__(self, sweep: Sweep, old: Mapping[str, Any] | None, where: bool = False):
        self.sweep, self.old = sweep, old
        self.state = bytearray(sweep.size)
        self.where = array("q", [-1]) * sweep.size if where else None
        self.rows = self.dropped = self.duplicates = self.stale = 0
        self.good = 0  # bytes of the journal to keep (a torn last line cut off)
        self.torn = self.unterminated = False
        self.reasons: list[str] = []  # the first few invalid rows, why
        self._fixed: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.version = sweep_version(sweep.ops)  # the rows' keys are of this version

    @property
    def clean(self) -> bool:
        """Nothing to drop: the journal can be appended to as it is."""
        return not (self.dropped or self.duplicates or self.stale)

    def forget_failed(self) -> bool:
        """Mark the failed points missing (computed again); whether there were any."""
        failed = FAILED in self.state
        self.state = bytearray(self.state.replace(bytes([FAILED]), bytes([MISSING])))
        return failed

    def _contexts(self, label: str | None) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """(the file's, the sweep's) fixed values of the model ``label`` (the file's missing
        keys at their defaults) and whether every point's key is the same under both."""
        if label not in self._fixed:
            model = self.sweep.model_of({MODEL_KEY: label} if label is not None else {})
            ours = sweep_values(model.flat(), self.sweep.keys, self.sweep.ops)
            theirs = self.old["fixed_model"]
            theirs = theirs[label] if label is not None else theirs
            # a key the file lacks at its default; an optional key unset (None) on either side
            # left out, so that a key set on one side only makes other point keys
            theirs = {k: v for k in {**theirs, **ours}
                      if (v := theirs.get(k, key_default(k))) is not None}
            same = (self.old["fidelity"] == self.sweep.fidelity
                    and self.old["dspsim_version"] == self.version and theirs.keys() == ours.keys()
                    and all(canon(k, v) == canon(k, theirs[k]) for k, v in ours.items()))
            self._fixed[label] = (theirs, ours, same)
        return self._fixed[label]

    def same_key(self, point: dict[str, str]) -> bool:
        """Whether the row of ``point`` (its parameter cells) has the point's key."""
        label = point.get(MODEL_KEY)
        if self.old is None:
            return True
        if label is not None and label not in self.old["fixed_model"]:
            return False  # a model the file's sidecar does not have
        theirs, ours, same = self._contexts(label)
        old, sweep = self.old, self.sweep
        return same or (point_key(theirs, point, old["fidelity"], old["dspsim_version"])
                == point_key(ours, point, sweep.fidelity, self.version))

    def add(self, cells: list[str] | None, where: str, offset: int = -1) -> int | None:
        """The grid index of a row that counts, else None (the row is dropped)."""
        try:
            ident, failed = _checked(self.sweep, cells)
            i = self.sweep.index_of(ident)
            if i is None:
                raise ValueError(_off_grid(self.sweep, ident))
        except ValueError as e:
            self.dropped += 1
            if len(self.reasons) < 3:
                self.reasons.append(f"{where}: {e}")
            return None
        if self.state[i] != MISSING:
            self.duplicates += 1
            return None
        if not self.same_key(dict(zip(self.sweep.keys, ident))):
            self.stale += 1
            return None
        self.rows += 1
        self.state[i] = FAILED if failed else DONE
        if self.where is not None:
            self.where[i] = offset
        return i

    def scan(self, journal: Path | None, parquet: Sequence[list[str]] = ()
             ) -> Iterator[tuple[int, bytes]]:
        """Add every row of ``journal``, then of ``parquet`` (text cells: an older file); yield
        (grid index, CSV line) of each row that counts."""
        if journal is not None and journal.exists():
            self.good = read_header(journal)[1]
            for offset, line, ended in journal_lines(journal):
                if not line and ended:
                    self.good = offset + 1
                    continue  # a blank line
                cells = parse_line(line)
                if not ended:  # a torn line is kept only when it is a whole finished row
                    try:
                        whole = not _checked(self.sweep, cells)[1]
                    except ValueError:
                        whole = False
                    if not whole:
                        self.torn = True
                        break
                    self.unterminated = True
                self.good = offset + len(line) + ended
                i = self.add(cells, f"{journal} at byte {offset}", offset)
                if i is not None:
                    yield i, line + b"\n"
        for k, cells in enumerate(parquet):
            i = self.add(cells, f"parquet row {k + 1}")
            if i is not None:
                yield i, csv_line(cells)


def _checked(sweep: Sweep, cells: list[str] | None) -> tuple[tuple[str, ...], bool]:
    if cells is None:
        raise ValueError("not a CSV line")
    return check_row(sweep, cells)


def _off_grid(sweep: Sweep, ident: tuple[str, ...]) -> str:
    """Why a valid row is not a point of the grid: its first cell off the grid's values."""
    grid = dict(sweep.axes)
    for key, cell in zip(sweep.keys, ident):
        allowed = [format_value(v) for v in grid[key]]
        if cell not in allowed:
            shown = ", ".join(allowed[:6]) + (", ..." if len(allowed) > 6 else "")
            return f"{key} = {cell!r} is not a value this sweep has ({shown})"
    return "not a point of this sweep"


def read_sweep(path: str | Path) -> pd.DataFrame:
    """A sweep file as a DataFrame: CSV (a torn last line left out), or parquet plus the journal
    an interrupted run left, every row checked; one line naming the file, line and fault."""
    p = Path(path)
    check_extension(p, "sweep file")
    check_regular_or_absent(p, "sweep file")
    tables = []
    if p.suffix == ".parquet" and p.exists():
        _check_size(p)
        header, rows = read_parquet(p)
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


def read_parquet(path: Path) -> tuple[list[str], list[list[str]]]:
    """(columns, rows as the journal's text cells) of a parquet file; one line when it is not
    a readable parquet table."""
    import pandas as pd

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
    import pandas as pd

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


def typed_frame(sweep: Sweep, rows: list[list[str]]) -> pd.DataFrame:
    """Text rows of ``sweep``'s table as a DataFrame with the key types' dtypes and nullable
    integer counts."""
    return _typed(sweep.columns, sweep.keys, [
        [canon_text(k, c) for k, c in zip(sweep.keys, row)] + row[len(sweep.keys):]
        for row in rows
    ])
