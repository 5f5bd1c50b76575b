"""What a run records while it runs; engine names come from the platform, none are known here.

- :class:`Recorder` -> :class:`TraceTable`: one row per engine action, as numpy columns; with a
  ``limit``, the first rows kept, the rest counted.
- :class:`AccessLog`: who touched which bytes when, and the data hazards between engines.
- :class:`PortLog`: a port's requests (``PORT_LOG_FIELDS``) as compact columns.
- :class:`PassLog`: the passes an op ran; a run of identical rows is one block.
- :class:`RunContext`: these observers and the run's switches, handed to every engine the
  platform wires (as ns.py attaches a monitor to a port), not threaded through constructors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from dspsim.ticks import TICKS_PER_CYCLE, cycles

if TYPE_CHECKING:
    import pandas as pd
    import simpy

PORT_LOG_FIELDS = ("issue", "data_start", "data_end", "done", "bytes", "is_write", "requester")


class PortLog:
    """A port's request log (``PORT_LOG_FIELDS``) as typed columns: ~45 bytes a request, not a
    tuple's 250; with a ``limit``, the rest counted (``dropped``). Appended in ticks, it reads
    like a list of tuples in cycles; :meth:`columns` gives numpy arrays."""

    def __init__(self, limit: int | None = None) -> None:
        from array import array

        self.limit = limit
        self.cut_cycle: float | None = None  # the first request not kept was issued here
        self.dropped = 0
        self._times = [array("q") for _ in range(4)]  # issue, data_start, data_end, done: ticks
        self._bytes = array("q")
        self._write = array("b")
        self._who = array("H")  # index into _names
        self._names: list[str] = []
        self._index: dict[str, int] = {}

    def append(self, entry: tuple) -> None:
        if self.limit is not None and len(self._bytes) >= self.limit:
            if self.cut_cycle is None:
                self.cut_cycle = cycles(entry[0])  # the log is whole up to this issue
            self.dropped += 1
            return
        issue, data_start, data_end, done, nbytes, write, requester = entry
        t = self._times
        t[0].append(issue)
        t[1].append(data_start)
        t[2].append(data_end)
        t[3].append(done)
        self._bytes.append(nbytes)
        self._write.append(bool(write))
        who = self._index.get(requester)
        if who is None:
            who = self._index[requester] = len(self._names)
            self._names.append(requester)
        self._who.append(who)

    @classmethod
    def from_columns(cls, columns: dict[str, Any]) -> PortLog:
        """A log from its columns (``PORT_LOG_FIELDS`` -> sequences), a column at a time."""
        log = cls()
        for t, f in zip(log._times, PORT_LOG_FIELDS[:4]):  # (cycles: whole ticks over 2^24)
            ticks = np.rint(np.asarray(columns[f], dtype=np.float64) * TICKS_PER_CYCLE)
            t.frombytes(ticks.astype(np.int64).tobytes())
        log._bytes.frombytes(np.asarray(columns["bytes"], dtype=np.int64).tobytes())
        log._write.frombytes(np.asarray(columns["is_write"], dtype=bool).astype(np.int8).tobytes())
        names, who = np.unique(np.asarray(columns["requester"], dtype=str), return_inverse=True)
        log._names = names.tolist()
        log._index = {n: i for i, n in enumerate(log._names)}
        log._who.frombytes(who.astype(np.uint16).tobytes())
        return log

    @classmethod
    def of(cls, log: Any) -> PortLog:
        """``log`` as a PortLog (a list of entry tuples is converted)."""
        if isinstance(log, PortLog):
            return log
        entries = list(log)
        return cls.from_columns(dict(zip(PORT_LOG_FIELDS, zip(*entries)))) if entries else cls()

    def __len__(self) -> int:
        return len(self._bytes)

    def _entry(self, i: int) -> tuple:
        t = self._times
        return (cycles(t[0][i]), cycles(t[1][i]), cycles(t[2][i]), cycles(t[3][i]),
                self._bytes[i], bool(self._write[i]), self._names[self._who[i]])

    def ticks(self, lo: int, hi: int) -> list[tuple]:
        """Entries ``lo:hi`` as appended (ticks): what a fast-forward compares and shifts."""
        t, names, who, nb, wr = self._times, self._names, self._who, self._bytes, self._write
        return [(t[0][i], t[1][i], t[2][i], t[3][i], nb[i], bool(wr[i]), names[who[i]])
                for i in range(lo, min(hi, len(nb)))]

    def __iter__(self):
        return (self._entry(i) for i in range(len(self)))

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._entry(k) for k in range(*i.indices(len(self)))]
        return self._entry(range(len(self))[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PortLog | list | tuple):
            return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def columns(self) -> dict[str, np.ndarray]:
        """The log as numpy columns (times in absolute cycles)."""
        out = {f: np.frombuffer(t, dtype=np.int64) / TICKS_PER_CYCLE if len(t) else np.zeros(0)
               for f, t in zip(PORT_LOG_FIELDS[:4], self._times)}
        out["bytes"] = np.asarray(self._bytes, dtype=np.int64)
        out["is_write"] = np.asarray(self._write, dtype=bool)
        names = np.asarray(self._names + [""], dtype=str)
        out["requester"] = names[np.asarray(self._who, dtype=np.int64)]
        return out


@dataclass(eq=False, slots=True)
class PassRun:
    """``count`` rows repeating the first row's passes (``template``), each ``shift_ticks``
    later."""

    template: list[dict[str, Any]]
    count: int
    shift_ticks: int

    def __len__(self) -> int:
        return len(self.template) * self.count

    def entry(self, i: int) -> dict[str, Any]:
        q, r = divmod(i, len(self.template))
        p, dt = self.template[r], q * self.shift_ticks
        return {"name": p["name"], "start_tick": p["start_tick"] + dt,
                "end_tick": p["end_tick"] + dt}


class PassLog(Sequence):
    """One core's passes in order, each ``{"name", "start_tick", "end_tick"}`` (absolute
    ticks): dicts begun one by one (the last may be open) and :class:`PassRun` blocks. Reads
    like a list; :meth:`view` maps every entry on reading (no copy per pass)."""

    def __init__(self, fn: Callable[[dict[str, Any]], Any] | None = None,
                 parts: list | None = None) -> None:
        self._fn = fn
        self._parts: list[list[dict[str, Any]] | PassRun] = [] if parts is None else parts

    def append(self, entry: dict[str, Any]) -> None:
        if not self._parts or isinstance(self._parts[-1], PassRun):
            self._parts.append([])
        self._parts[-1].append(entry)

    def append_run(self, run: PassRun) -> None:
        if len(run):
            self._parts.append(run)

    def view(self, fn: Callable[[dict[str, Any]], Any]) -> PassLog:
        """The same passes, each read through ``fn``."""
        return PassLog(fn, self._parts)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return self._slice(i)
        k = range(len(self))[i]
        return self._slice(slice(k, k + 1))[0]

    def _slice(self, i: slice) -> list[Any]:
        """The entries of ``i``, in one walk over the parts that hold them."""
        start, stop, step = i.indices(len(self))
        if step != 1:
            return list(self)[i]
        out, base = [], 0
        for part in self._parts:
            n = len(part)
            for j in range(max(start - base, 0), min(stop - base, n)):
                raw = part[j] if isinstance(part, list) else part.entry(j)
                out.append(raw if self._fn is None else self._fn(raw))
            base += n
            if base >= stop:
                break
        return out

    def __iter__(self) -> Iterator[Any]:
        for part in self._parts:
            entries = part if isinstance(part, list) else (part.entry(i) for i in range(len(part)))
            for raw in entries:
                yield raw if self._fn is None else self._fn(raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PassLog | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PassLog({len(self)} passes)"


def pass_totals(passes: Sequence[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """Per pass name (first-run order) of a pass log or a list of passes: span count and total
    cycles (unrounded; a run of rows in closed form)."""
    out: dict[str, tuple[int, float]] = {}
    for part in passes._parts if isinstance(passes, PassLog) else [list(passes)]:
        count = 1 if isinstance(part, list) else part.count
        for p in (part if isinstance(part, list) else part.template):
            n, total = out.get(p["name"], (0, 0.0))
            span = (cycles(p["end_tick"] - p["start_tick"]) if "end_tick" in p
                    else p["end_cycle"] - p["start_cycle"])
            out[p["name"]] = (n + count, total + count * span)
    return out


COLUMNS = [
    "engine",  # core, idma0, idma1, ...
    "kind",  # compute, setup, wait_in, wait_out, copy_in, copy_out
    "what",  # kernel name or transfer description
    "start_cycle",
    "end_cycle",
    "bytes",
    "tile",  # tile index within the pass, -1 when not a tile
    "pass",  # pass name (max, exp_sum, mul / max, exp, sum, mul)
    "buffer",  # TCM buffer (ping-pong index), -1 when none
    "ddr_stall_cycles",  # part of the row spent stalled on DDR (direct-mode kernels)
]
TRACE_KINDS = ("compute", "setup", "wait_in", "wait_out", "copy_in", "copy_out")
TEXT_COLUMNS = ("engine", "kind", "what", "pass")
INT_COLUMNS = ("bytes", "tile", "buffer")


def typed_column(column: str, values: Any) -> np.ndarray:
    """``values`` as ``column``'s array: text as objects, ``INT_COLUMNS`` int64, else float64."""
    if column in TEXT_COLUMNS:
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
        return arr
    return np.asarray(values, dtype=np.int64 if column in INT_COLUMNS else np.float64)


TICK_COLUMNS = ("start_cycle", "end_cycle", "ddr_stall_cycles")  # recorded in ticks


def in_cycles(column: str, values: Any) -> Any:
    """A recorded column as the trace reports it: ``TICK_COLUMNS`` from ticks to cycles."""
    if column in TICK_COLUMNS:
        return np.asarray(values, dtype=np.float64) / TICKS_PER_CYCLE
    return values


class TraceTable:
    """A run's trace as one numpy array per column (``COLUMNS``; times in cycles);
    ``rows_dropped`` rows not kept."""

    def __init__(self, columns: dict[str, Any], rows_dropped: int = 0):
        self.columns = {c: typed_column(c, columns[c]).reshape(-1) for c in COLUMNS}
        lengths = {len(a) for a in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"trace columns of different lengths {sorted(lengths)}")
        self.rows_dropped = int(rows_dropped)
        self._frame: pd.DataFrame | None = None

    @classmethod
    def from_rows(cls, rows: list[tuple], rows_dropped: int = 0) -> TraceTable:
        """A table of :class:`Recorder` rows (times in ticks)."""
        cols = zip(COLUMNS, zip(*rows) if rows else [()] * len(COLUMNS))
        return cls({c: in_cycles(c, v) for c, v in cols}, rows_dropped)

    def __len__(self) -> int:
        return len(self.columns["engine"])

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    def shifted(self, origin: float) -> TraceTable:
        """Times counted from ``origin`` (the op's timer start, as the pass spans are)."""
        self.columns["start_cycle"] = self.columns["start_cycle"] - origin
        self.columns["end_cycle"] = self.columns["end_cycle"] - origin
        self._frame = None
        return self

    def frame(self) -> pd.DataFrame:
        """The trace as a DataFrame (built once; ``attrs["rows_dropped"]`` when rows were cut)."""
        if self._frame is None:
            import pandas as pd

            df = pd.DataFrame(self.columns, columns=COLUMNS)
            if self.rows_dropped:
                df.attrs["rows_dropped"] = self.rows_dropped
            self._frame = df
        return self._frame


def numbered(label: str) -> tuple[str, int | None]:
    """``"copy_in #12"`` -> ``("copy_in #", 12)``; a label with no number -> ``(label, None)``."""
    head, sep, tail = label.rpartition("#")
    if sep and tail.isdigit():
        return head + sep, int(tail)
    return label, None


@dataclass(eq=False, slots=True)
class Labels:
    """The pass, tile and TCM buffer the op on one core works on, stamped on every trace row
    and access (tile numbering fields public: a fast-forward moves them on)."""

    pass_name: str = ""
    buffer: int = -1
    tile_number: int = -1
    tile_base: int = 0  # tiles of earlier groups in this pass (see ``tile``)
    tile_next: int = 0  # one past the highest tile number used in this pass

    @property
    def tile(self) -> int:
        """The tile worked on (-1: none): the op's index ``j`` numbered after the pass's earlier
        groups' tiles, so no two tiles of a pass share a number."""
        return self.tile_number

    @tile.setter
    def tile(self, j: int) -> None:
        if j < 0:
            self.tile_number = -1
            return
        self.tile_number = self.tile_base + j
        if self.tile_number >= self.tile_next:
            self.tile_next = self.tile_number + 1

    def new_tile_group(self) -> None:
        """The tiles that follow are numbered after every tile of the pass so far."""
        self.tile_base = self.tile_next

    def start_tiles(self, base: int) -> None:
        """A pass begins: number its tiles from ``base`` (past an earlier same-named pass's)."""
        self.tile_base = self.tile_next = base
        self.tile_number = -1


@dataclass(eq=False, slots=True)
class TraceRun:
    """``count`` booked rows repeating the first row's trace rows (``template``, ticks), each
    ``shift_ticks`` later; ``numbers``: per template row, ``None`` or ``(tile step, label head,
    label number, label step)``, how its numbers move on a row (``"copy_in ch0 #12"``)."""

    template: list[tuple]
    count: int
    shift_ticks: int
    numbers: list[tuple | None] | None = None

    def columns(self, in_ticks: bool = False) -> list[np.ndarray]:
        """The rows' columns (``COLUMNS``' order), times in cycles (``in_ticks``: as recorded)."""
        out = []
        steps = np.arange(self.count, dtype=np.int64) * self.shift_ticks
        for c, values in zip(COLUMNS, zip(*self.template)):
            if self.numbers is not None and c in ("what", "tile"):
                out.append(self._numbered(c, values))
            elif c in ("start_cycle", "end_cycle"):
                out.append((np.asarray(values, np.int64)[None, :] + steps[:, None]).ravel())
            else:
                out.append(np.tile(typed_column(c, values), self.count))
        return out if in_ticks else [in_cycles(c, v) for c, v in zip(COLUMNS, out)]

    def rows(self) -> list[tuple]:
        """The rows, one tuple each, as :meth:`Recorder.record` takes them (ticks)."""
        return list(zip(*(column.tolist() for column in self.columns(in_ticks=True))))

    def _numbered(self, column: str, values: tuple) -> np.ndarray:
        """The ``what`` or ``tile`` column, each row's numbers moved on row by row."""
        k = np.arange(self.count)[:, None]
        if column == "tile":
            step = np.array([n[0] if n else 0 for n in self.numbers], np.int64)
            return (np.asarray(values, np.int64)[None, :] + k * step).ravel()
        out = np.empty((self.count, len(values)), dtype=object)
        for j, (what, n) in enumerate(zip(values, self.numbers)):
            out[:, j] = what if n is None or n[1] is None else \
                [f"{n[1]}{n[2] + i * n[3]}" for i in range(self.count)]
        return out.ravel()


class Recorder:
    """The trace: a row per engine action (``record``, ticks) and :class:`TraceRun` blocks
    (``append_run``; only with no row limit); :meth:`table` gives them in cycles."""

    def __init__(self, enabled: bool = True, limit: int | None = None):
        self.enabled = enabled
        self.rows: list[tuple | TraceRun] = []
        self.limit = limit  # keep at most this many rows (None: all)
        self.dropped = 0  # rows not kept because of the limit
        self.cut_cycle: float | None = None  # the first row not kept ended here

    def record(self, engine: str, kind: str, what: str, start: int, end: int,
               nbytes: int = 0, tile: int = -1, pass_name: str = "", buffer: int = -1,
               ddr_stall: int = 0) -> None:
        if self.enabled:
            if self.limit is not None and len(self.rows) >= self.limit:
                if self.cut_cycle is None:
                    self.cut_cycle = cycles(end)
                self.dropped += 1
                return
            self.rows.append((engine, kind, what, start, end, nbytes, tile, pass_name, buffer,
                              ddr_stall))

    def rows_between(self, a: int, b: int) -> list[tuple | TraceRun]:
        """The rows ``a:b`` as recorded (a booked run's block one entry)."""
        return self.rows[a:b]

    def append_run(self, run: TraceRun) -> None:
        if run.count and run.template:
            self.rows.append(run)

    def table(self) -> TraceTable:
        if not any(isinstance(r, TraceRun) for r in self.rows):
            return TraceTable.from_rows(self.rows, self.dropped)
        parts: list[list[np.ndarray]] = []
        plain: list[tuple] = []
        for row in self.rows + [None]:
            if isinstance(row, tuple):
                plain.append(row)
                continue
            if plain:
                parts.append(list(TraceTable.from_rows(plain).columns.values()))
                plain = []
            if row is not None:
                parts.append(row.columns())
        columns = {c: np.concatenate([p[k] for p in parts]) for k, c in enumerate(COLUMNS)}
        return TraceTable(columns, self.dropped)


class Access(NamedTuple):
    """One engine's access to a memory's bytes (a tuple: cheap, as every call logs one or two)."""

    engine: str
    memory: str
    lo: int  # first byte address
    hi: int  # one past the last byte
    write: bool
    start: int  # ticks
    end: int
    what: str
    tile: int
    pass_name: str
    seq: int  # order of arrival in the log


HAZARD_LIMIT = 10_000  # hazards listed in full; later ones are counted (``AccessLog.dropped``)


class AccessLog:
    """Which bytes each engine touched when, checked for hazards as the run goes.

    An engine calls :meth:`begin`, then :meth:`add` when the access ends, then :meth:`finish`.
    An access that ended before every in-flight access began can meet no later one and is let
    go. The earliest ``limit`` hazards (by start) are kept; ``dropped`` counts the rest."""

    def __init__(self, enabled: bool = True, limit: int | None = None) -> None:
        self.enabled = enabled
        self.limit = HAZARD_LIMIT if limit is None else limit
        self.dropped = 0
        self.active: dict[str, list[Access]] = {}  # memory -> accesses that may still conflict
        self.in_flight: dict[str, int] = {}  # engine -> start of the access it is making
        self.pairs: list[tuple[tuple, str, Access, Access]] = []  # (order, memory, first, second)
        self.seq = 0  # the next access's number (a fast-forward saves and shifts it)

    def begin(self, engine: str, start: int) -> None:
        if self.enabled:
            self.in_flight[engine] = start

    def add(self, engine: str, memory: str, lo: int, nbytes: int, write: bool, start: int,
            end: int, what: str, tile: int, pass_name: str) -> None:
        if not self.enabled or nbytes <= 0 or end <= start:
            return
        b = Access(engine, memory, lo, lo + nbytes, write, start, end, what, tile, pass_name,
                   self.seq)
        self.seq += 1
        kept = self.active.setdefault(memory, [])
        for a in kept:
            first, second = (a, b) if a.start <= b.start else (b, a)
            if (first.end > second.start and a.engine != b.engine and (a.write or b.write)
                    and a.lo < b.hi and b.lo < a.hi):
                order = (second.start, second.seq, first.start, first.seq)
                self.pairs.append((order, memory, first, second))
        kept.append(b)
        if len(self.pairs) > 2 * self.limit:
            self._keep_earliest()

    def finish(self, engine: str, now: int) -> None:
        """``engine``'s access is logged: let go of what no access in flight can meet."""
        if not self.enabled:
            return
        self.in_flight.pop(engine, None)
        horizon = min(self.in_flight.values(), default=now)
        for memory, kept in self.active.items():
            if any(a.end <= horizon for a in kept):
                self.active[memory] = [a for a in kept if a.end > horizon]

    def _keep_earliest(self) -> None:
        self.pairs.sort(key=lambda p: p[0])
        self.dropped += len(self.pairs) - self.limit
        del self.pairs[self.limit:]

    def hazards(self, origin: float = 0.0) -> list[dict[str, Any]]:
        """Every conflicting pair (up to ``limit``), earliest first; cycles counted from
        ``origin`` (a cycle)."""
        if len(self.pairs) > self.limit:
            self._keep_earliest()
        # memory by memory in the order they were first touched, then by cycle: the order a
        # whole-run check (each memory's accesses sorted by start) gives
        rank = {memory: i for i, memory in enumerate(self.active)}
        self.pairs.sort(key=lambda p: (rank[p[1]], p[0]))
        found = [_describe(memory, a, b, origin) for _, memory, a, b in self.pairs]
        return sorted(found, key=lambda h: h["cycle"])


def _describe(memory: str, a: Access, b: Access, origin: float) -> dict[str, Any]:
    writer, other = (a, b) if a.write else (b, a)
    if other.write:
        kind = "write while another write is in flight"
    elif other.start >= writer.start:
        kind = "read of bytes while a write to them is in flight"
    else:
        kind = "write to bytes an unfinished read still needs"
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    at = int(round(cycles(b.start) - origin))
    return {
        "cycle": at,
        "kind": kind,
        "memory": memory,
        "address_range": [f"0x{lo:x}", f"0x{hi:x}"],
        "bytes": hi - lo,
        "engines": [f"{a.engine} {a.what}", f"{b.engine} {b.what}"],
        "tiles": [a.tile, b.tile],
        "pass": b.pass_name or a.pass_name,
        "message": (
            f"{kind}: {writer.engine} {writer.what} (tile {writer.tile}) and {other.engine} "
            f"{other.what} (tile {other.tile}) on {memory} 0x{lo:x}-0x{hi:x} in pass "
            f"{b.pass_name or a.pass_name} at cycle {at:,}"
        ),
    }


@dataclass(eq=False)
class RunContext:
    """What every engine of one run shares: the observers and the run's switches."""

    env: simpy.Environment
    data: bool = True  # move values (the data path)
    elide: bool = True  # skip the events nothing else can observe (hw.clock)
    fidelity: str = "burst"  # burst | tile: the name asked for (one engine runs both)
    port_log: bool = False  # every memory port logs its requests (PortLog)
    log_limit: int | None = None  # keep at most this many trace rows / port requests each
    recorder: Recorder = field(default_factory=lambda: Recorder(False))
    accesses: AccessLog = field(default_factory=AccessLog)
    warn: Callable[..., None] = lambda *args, **kwargs: None
    _labels: dict[str, Labels] = field(default_factory=dict)

    def labels(self, core: str) -> Labels:
        """The trace labels (pass, tile, buffer) of the op running on ``core``: the op sets
        them through its DSP, the core's engines stamp them on what they record."""
        return self._labels.setdefault(core, Labels())
