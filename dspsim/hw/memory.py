"""Byte-addressable memories (DDR, PSRAM, SRAM; each DataRAM) and typed pointers into them.

A :class:`Ptr` is a C ``float32_t *``: a memory and a byte address; ``ptr + k`` advances ``k``
float32 elements. With the data path on, a memory is backed by numpy arrays so that kernels and
iDMA transfers move real values; with it off, only addresses exist.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.errors import AllocationError


@dataclass(frozen=True)
class Ptr:
    """A byte address in a memory."""

    mem: Memory
    addr: int

    def __add__(self, elements: int) -> Ptr:
        return Ptr(self.mem, self.addr + 4 * int(elements))

    @property
    def external(self) -> bool:
        """Into an external memory (reached through a port), not TCM."""
        return self.mem.port is not None

    @property
    def requested(self) -> bool:
        """The core's loads and stores through it are requests on a port (an external memory
        not ``core_local``, which is as TCM)."""
        return self.mem.port is not None and not self.mem.core_local

    def __repr__(self) -> str:
        return f"{self.mem.name}:0x{self.addr:x}"


class Memory:
    """A range of addresses made of allocated blocks, each optionally backed by bytes; an
    external memory has a ``port`` (set by the platform) and may be ``cached``."""

    def __init__(self, name: str, kind: str, base: int, size_bytes: int, data: bool,
                 bank: int = -1):
        self.name = name
        self.bank = bank  # DataRAM index for TCM, -1 for an external memory
        self.kind = kind  # "memory" (external) or "tcm"
        self.port: Any = None  # the external memory's MemoryPort
        self.cached = False
        self.core_local = False  # the core's loops reach it without a request (an SRAM)
        self.base = base
        self.size_bytes = size_bytes
        self.data = data
        self._starts: list[int] = []
        self._blocks: list[tuple[int, int, np.ndarray | None]] = []  # (start, size, bytes)
        self._next = base  # the top: past every block
        self._holes: list[tuple[int, int]] = []  # freed space below the top, (start, end) sorted
        self._structs: dict[int, object] = {}

    def store_struct(self, ptr: Ptr, value: object) -> None:
        """Keep a small C struct (a parameter block) at ``ptr`` as a Python object."""
        self._structs[ptr.addr] = value

    def load_struct(self, ptr: Ptr) -> object:
        if ptr.addr not in self._structs:
            raise AllocationError(f"{self.name} 0x{ptr.addr:x} holds no parameter block")
        return self._structs[ptr.addr]

    def add_block(self, size_bytes: int, alignment: int = 128, what: str = "buffer",
                  elsewhere: str = "the array in another memory") -> Ptr:
        """Reserve ``size_bytes`` at an aligned address: the first freed space it fits, else
        the next aligned address after the top (while nothing is freed, every block goes where
        it always has). ``elsewhere``: how the refusal says to use another memory."""
        start = self._from_holes(size_bytes, alignment)
        if start is None:
            start = -(-self._next // alignment) * alignment
            if start + size_bytes > self.base + self.size_bytes:
                free = self.base + self.size_bytes - start
                raise AllocationError(
                    f"{what} of {size_bytes} bytes does not fit {self.name} "
                    f"({max(free, 0)} bytes free of {self.size_bytes}); allowed: a smaller "
                    f"input, a larger {self.name}.size_bytes, or {elsewhere}")
            self._next = start + size_bytes
        backing = np.zeros(size_bytes, np.uint8) if self.data else None
        i = bisect.bisect_left(self._starts, start)
        self._starts.insert(i, start)
        self._blocks.insert(i, (start, size_bytes, backing))
        return Ptr(self, start)

    def _from_holes(self, size_bytes: int, alignment: int) -> int | None:
        """The start of ``size_bytes`` in the first freed space it fits (taken from it)."""
        for k, (lo, hi) in enumerate(self._holes):
            at = -(-lo // alignment) * alignment
            if at + size_bytes <= hi:
                rest = [(a, b) for a, b in ((lo, at), (at + size_bytes, hi)) if b > a]
                self._holes[k:k + 1] = rest
                return at
        return None

    def free_block(self, ptr: Ptr) -> None:
        """Give back the block at ``ptr``: a later block may take its space; the top comes down
        when the top block goes."""
        i = bisect.bisect_left(self._starts, ptr.addr)
        if ptr.mem is not self or i == len(self._starts) or self._starts[i] != ptr.addr:
            raise AllocationError(f"free of {ptr!r}: not a block of {self.name}")
        start, size, _ = self._blocks[i]
        del self._starts[i], self._blocks[i]
        lo, hi = start, start + size
        k = bisect.bisect_left(self._holes, (lo, hi))
        if k < len(self._holes) and self._holes[k][0] == hi:  # merged with the next hole
            hi = self._holes.pop(k)[1]
        if k > 0 and self._holes[k - 1][1] == lo:  # and with the one before
            lo = self._holes.pop(k - 1)[0]
            k -= 1
        if hi == self._next:  # the top block went: the top comes down (below, a block ends)
            self._next = self._blocks[-1][0] + self._blocks[-1][1] if self._blocks else self.base
            self._holes = [h for h in self._holes if h[0] < self._next]  # none crosses it
        else:
            self._holes.insert(k, (lo, hi))

    def locate(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        """The backing (None with the data path off) and offset of ``nbytes`` at ``addr``;
        refused outside every allocation or past its end."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            raise AllocationError(f"{self.name} address 0x{addr:x} is outside any allocation")
        start, size, backing = self._blocks[i]
        off = addr - start
        if off + nbytes > size:
            raise AllocationError(f"{self.name} access 0x{addr:x}+{nbytes} runs past its "
                                  f"allocation of {size} bytes")
        return backing, off

    def f32(self, ptr: Ptr, n: int) -> np.ndarray:
        """A writable float32 view of ``n`` elements at ``ptr`` (data path on only)."""
        backing, off = self.locate(ptr.addr, 4 * n)
        return backing[off : off + 4 * n].view(np.float32)

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        backing, off = self.locate(addr, nbytes)
        return backing[off : off + nbytes]

    def write(self, addr: int, values: np.ndarray) -> None:
        backing, off = self.locate(addr, len(values))
        backing[off : off + len(values)] = values
