"""What a run records while it runs: the trace, the memory-access log, the DDR port log.

- :class:`Recorder`: one row per thing an engine did (compute, setup, waits, copies), turned into
  one DataFrame at the end (nothing is kept when tracing is off). With a ``limit`` it keeps the
  first ``limit`` rows and counts the others (``dropped``; the frame's ``attrs["rows_dropped"]``),
  so a huge run's trace holds bounded memory.
- :class:`AccessLog`: which bytes each engine touched when, and the data hazards between them
  (two engines on overlapping bytes of one memory at overlapping times, one of them writing).
- ``PORT_LOG_FIELDS``: the columns of the DDR port's request log (one tuple per request).

Engine names (``core0``, ``core0.idma1``, ``ddr``) come from the platform that built the run;
nothing here knows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

PORT_LOG_FIELDS = ("issue", "data_start", "data_end", "done", "bytes", "is_write", "requester")

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


class Recorder:
    def __init__(self, enabled: bool = True, limit: int | None = None):
        self.enabled = enabled
        self.rows: list[tuple] = []
        self.limit = limit  # keep at most this many rows (None: all)
        self.dropped = 0  # rows not kept because of the limit

    def record(
        self,
        engine: str,
        kind: str,
        what: str,
        start: float,
        end: float,
        nbytes: int = 0,
        tile: int = -1,
        pass_name: str = "",
        buffer: int = -1,
        ddr_stall: float = 0.0,
    ) -> None:
        if self.enabled:
            if self.limit is not None and len(self.rows) >= self.limit:
                self.dropped += 1
                return
            self.rows.append(
                (engine, kind, what, start, end, nbytes, tile, pass_name, buffer, ddr_stall)
            )

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        df = pd.DataFrame(self.rows, columns=COLUMNS)
        df = df.astype({"bytes": "int64", "tile": "int64", "buffer": "int64"})
        if self.dropped:
            df.attrs["rows_dropped"] = self.dropped
        return df


@dataclass(frozen=True)
class Access:
    engine: str
    memory: str
    lo: int  # first byte address
    hi: int  # one past the last byte
    write: bool
    start: float
    end: float
    what: str
    tile: int
    pass_name: str


class AccessLog:
    def __init__(self) -> None:
        self.accesses: list[Access] = []

    def add(self, engine: str, memory: str, lo: int, nbytes: int, write: bool, start: float,
            end: float, what: str, tile: int, pass_name: str) -> None:
        if nbytes > 0 and end > start:
            self.accesses.append(
                Access(engine, memory, lo, lo + nbytes, write, start, end, what, tile, pass_name)
            )

    def hazards(self, origin: float = 0.0) -> list[dict[str, Any]]:
        """Every conflicting pair, earliest first; cycles counted from ``origin``."""
        found = []
        by_memory: dict[str, list[Access]] = {}
        for a in self.accesses:
            by_memory.setdefault(a.memory, []).append(a)
        for memory, accesses in by_memory.items():
            accesses.sort(key=lambda a: a.start)
            active: list[Access] = []
            for b in accesses:
                active = [a for a in active if a.end > b.start]
                for a in active:
                    if (a.engine != b.engine and (a.write or b.write)
                            and a.lo < b.hi and b.lo < a.hi):
                        found.append(_describe(memory, a, b, origin))
                active.append(b)
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
    return {
        "cycle": int(round(b.start - origin)),
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
            f"{b.pass_name or a.pass_name} at cycle {int(round(b.start - origin)):,}"
        ),
    }
