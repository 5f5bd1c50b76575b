"""Data hazards between engines: who touched which bytes when.

Every iDMA transfer and every kernel call logs its memory accesses: the engine, the memory, the
byte range, read or write, and the cycles over which it happens (a transfer writes its
destination and reads its source from its start to its end; a kernel reads its input and
writes its output over its whole call). A hazard is two accesses by different engines to
overlapping bytes of one memory, overlapping in time, at least one of them a write: a read of
bytes while a write to them is in flight, or a write to bytes that an unfinished read still
needs. The log is small (a few entries per tile), so the check runs after the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
