"""Local memory: DataRAM banks and the tile manager's buffer allocator.

Each DataRAM is one :class:`Memory` of ``tcm.bank_bytes``. The tile manager hands out buffers
from the pool of a bank colour (``xvAllocateBuffer(tm, size, colour, alignment)``), first fit,
refusing what the pool cannot hold. The top ``tcm.reserved_bytes`` of each DataRAM are the
firmware's own.
"""

from __future__ import annotations

from dspsim.config import Tcm
from dspsim.errors import AllocationError
from dspsim.hw.memory import Memory, Ptr

# DataRAM 0 sits at 0x08000000 and DataRAM 1 at 0x08040000 in the S100 VDSP memory map.
TCM_BASE = 0x0800_0000
TCM_STRIDE = 0x0004_0000


class TileManager:
    """``xvAllocateBuffer`` / ``xvFreeBuffer`` over the DataRAM banks, one pool per colour."""

    def __init__(self, cfg: Tcm, data: bool, prefix: str = ""):
        stride = max(TCM_STRIDE, cfg.bank_bytes)
        self.banks = [Memory(f"{prefix}dram{i}", "tcm", TCM_BASE + i * stride, cfg.bank_bytes,
                             data, bank=i) for i in range(cfg.banks)]
        for bank in self.banks:
            bank.add_block(cfg.bank_bytes, 1, f"DataRAM {bank.name}")
        self._used: list[list[tuple[int, int]]] = [[] for _ in self.banks]  # sorted (start, end)
        reserved = min(cfg.reserved_bytes, cfg.bank_bytes)
        if reserved:
            for bank, used in zip(self.banks, self._used):
                top = bank.base + bank.size_bytes
                used.append((top - reserved, top))

    def allocate(self, size_bytes: int, colour: int, alignment: int) -> Ptr:
        if not 0 <= colour < len(self.banks):
            raise AllocationError(f"bank colour {colour} does not exist; allowed 0 to "
                                  f"{len(self.banks) - 1}")
        if size_bytes <= 0 or alignment <= 0 or alignment & (alignment - 1):
            raise AllocationError(f"buffer of {size_bytes} bytes aligned to {alignment}: size must "
                                  "be positive and alignment a power of two")
        bank = self.banks[colour]
        used = self._used[colour]
        cursor = bank.base
        for i, (start, end) in enumerate(used + [(bank.base + bank.size_bytes, 0)]):
            aligned = -(-cursor // alignment) * alignment
            if aligned + size_bytes <= start:
                used.insert(i, (aligned, aligned + size_bytes))
                return Ptr(bank, aligned)
            cursor = max(cursor, end)
        free = bank.size_bytes - sum(e - s for s, e in used)
        raise AllocationError(
            f"buffer of {size_bytes} bytes (alignment {alignment}) does not fit DataRAM colour "
            f"{colour}: {free} of {bank.size_bytes} bytes free; use smaller tiles or buffers")

    def free(self, ptr: Ptr) -> None:
        for bank, used in zip(self.banks, self._used):
            if bank is ptr.mem:
                for i, (start, _) in enumerate(used):
                    if start == ptr.addr:
                        del used[i]
                        return
        raise AllocationError(f"free of {ptr!r}: not a buffer the tile manager allocated")
