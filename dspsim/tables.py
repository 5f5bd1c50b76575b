"""The hardware tables of a model file, as frozen dataclasses: ``[core]``, each memory's table
(J6: ``[ddr]``), ``[idma]``, ``[tcm]``, ``[host]``, ``[dcache]``. Each field is a key with its
range or choices, unit and meaning (:func:`_key`); :mod:`dspsim.config` loads and checks them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any


def _key(lo: float | None = None, hi: float | None = None, unit: str = "", doc: str = "",
         positive: bool = False, default: Any = dataclasses.MISSING, choices: tuple = ()) -> Any:
    """A hardware key: its :class:`dspsim.schema.Key` fields as the dataclass field's metadata
    (``positive``: strictly above 0); ``default``: the value of a model file that does not give
    the key (else it must)."""
    return field(default=default, metadata=dict(lo=lo, hi=hi, unit=unit, doc=doc,
                                                 positive=positive, choices=choices))


@dataclass(frozen=True)
class Core:
    count: int = _key(1, 4, "cores", "DSP cores, each with its own iDMA channels and DataRAMs")
    clock_mhz: float = _key(1.0, 10_000.0, "MHz", "DSP core clock")
    lanes_f32: int = _key(1, 256, "lanes", "float32 lanes per vector (IVP_N_2)")
    load_store_units: int = _key(1, 8, "ops/cycle", "vector loads/stores issued per cycle")
    vector_alu_slots: int = _key(1, 16, "ops/cycle", "vector ALU/multiply ops issued per cycle")
    alu_latency_cycles: int = _key(1, 64, "cycles", "latency of one dependent vector op")
    call_overhead_cycles: int = _key(0, 100_000, "cycles", "kernel call, prologue, pipeline fill")
    write_buffer_entries: int = _key(
        1, 1024, "stores", "posted stores before the core stalls (stores to an uncached memory or "
        "through a write-through cache; 8 in a file that does not give it, which a file whose "
        "memories are all behind a write-back cache must not: it cannot act there)", default=8)
    scalar_access_bytes: int = _key(
        0, 64, "bytes", "the widest scalar load or store: a copy loop's access wider than this and "
        "narrower than a vector is issued as several of this size (the LX7's 64-bit loop: two "
        "32-bit loads, two stores); 0: any access up to the vector is one, in a file that does not "
        "give it", default=0)

    @property
    def vector_bytes(self) -> int:
        return self.lanes_f32 * 4


@dataclass(frozen=True)
class MemoryCfg:
    """One external memory behind its own port (J6: ``[ddr]``; a smaller SoC: ``[psram]`` and
    ``[sram]``). Every table of a model file that is not a hardware or op table is one."""

    max_outstanding: int = _key(1, 4096, "requests", "requests in flight on the port (1 on a "
                                                    "transactions memory, which serves one)")
    latency_cycles: float = _key(
        0.0, 1e6, "cycles", "round trip of one request, port to the memory and back (a read's; a "
        "write's too unless write_latency_cycles is given; a pipelined memory gives it, a "
        "transactions memory does not take it)", positive=True, default=None)
    bytes_per_cycle: float = _key(
        1e-6, 1e4, "bytes/cycle", "port bandwidth, shared by all (a pipelined memory gives it, a "
        "transactions memory does not take it)", default=None)
    base_address: int = _key(
        0, (1 << 32) - 1, "bytes", "first address of the memory in the DSP's 32-bit map "
        "(0x80000000 in a file that does not give it)", default=0x8000_0000)
    size_bytes: int = _key(
        4096, 1 << 32, "bytes", "bytes of the memory the DSP can address (2 GiB in a file that "
        "does not give it)", default=0x8000_0000)
    cached: bool = _key(
        unit="", doc="the core reaches it through its data cache ([dcache]; false in a file that "
        "does not give it)", default=False)
    core_local: bool = _key(
        unit="", doc="the core reaches it on its own bus, as a DataRAM: a copy loop's or a "
        "kernel's loads and stores to it cost nothing beyond the loop's cycles, as TCM (no request "
        "on the port, which serves the DMA engine); not with cached; false in a file that does not "
        "give it", default=False)
    write_latency_cycles: float | None = _key(
        0.0, 1e6, "cycles", "round trip of one write request, port to the memory and back (the "
        "same as latency_cycles, which then holds for reads and writes alike, in a file that does "
        "not give it)", positive=True, default=None)
    protocol: str = _key(
        unit="", doc="how the memory serves requests: pipelined (up to max_outstanding in flight, "
        "each latency_cycles after its bytes at bytes_per_cycle) or transactions (one at a time, "
        "each its command, data and hold clocks: the keys below; a PSRAM behind its controller; "
        "pipelined in a file that does not give it)", default="pipelined",
        choices=("pipelined", "transactions"))
    clock_cycles: float | None = _key(
        0.0, 1e4, "cycles", "DSP cycles per memory clock, T (transactions; a transactions memory "
        "gives it)", positive=True, default=None)
    command_clocks: int | None = _key(
        0, 1e4, "clocks", "memory clocks of a transaction before its data: command and address "
        "plus the latency count less one, e.g. 9 for LC = 7 (transactions; a transactions memory "
        "gives it)", default=None)
    bytes_per_clock: float | None = _key(
        1e-6, 1e4, "bytes/clock", "bytes a transaction moves per memory clock, data clocks rounded "
        "up (transactions; a transactions memory gives it)", default=None)
    read_hold_clocks: int = _key(
        0, 1e4, "clocks", "memory clocks a read holds the bus after its data (transactions; 2 in a "
        "file that does not give it)", default=2)
    write_hold_clocks: int = _key(
        0, 1e4, "clocks", "memory clocks a write holds the bus after its data (transactions; 1 in "
        "a file that does not give it)", default=1)
    page_bytes: int = _key(
        0, 1 << 24, "bytes", "a request longer than this is chopped into transactions of at most a "
        "page, each paying its command and hold (transactions; 0: never chopped, in a file that "
        "does not give it)", default=0)
    refresh_clocks: float = _key(
        0.0, 1e4, "clocks", "memory clocks a transaction pays on average for refresh collisions "
        "(the PSRAM doubles its latency count LC on a collision: the share of transactions that "
        "collide x LC; applied to every transaction alike, no randomness) (transactions; 0 in a "
        "file that does not give it)", default=0.0)

    @property
    def policy(self) -> Any:
        """What a request costs on this memory's port (:mod:`dspsim.hw.policy`), built once."""
        from dspsim.hw import policy

        return policy.request_policy(self)


@dataclass(frozen=True)
class Dcache:
    """The core's data cache in front of the memories marked ``cached`` (off: capacity 0)."""

    capacity_bytes: int = _key(
        0, 1 << 24, "bytes", "data cache capacity; 0: no data cache (J6's Vision DSP has none; 0 "
        "in a file that does not give it)", default=0)
    line_bytes: int = _key(
        4, 4096, "bytes", "bytes per cache line (a power of two; a model with a data cache gives "
        "it)", default=128)
    ways: int = _key(
        1, 64, "ways", "associativity (LRU within a set; a model with a data cache gives it)",
        default=4)
    write_policy: str = _key(
        unit="", doc="write_back (allocate on a store miss, write a dirty line back when it is "
        "evicted) or write_through (stores go to the memory through the write buffer, no "
        "allocation; a model with a data cache gives it)", default="write_back",
        choices=("write_back", "write_through"))
    prefetch_next_line: bool = _key(
        unit="", doc="a miss or a first hit on a prefetched line also fetches the next line, "
        "without stalling (a model with a data cache gives it)", default=False)
    write_allocate: bool = _key(
        unit="", doc="write_back: a store miss fetches its line first (a read of the line, then "
        "the store hits); false: the store goes to the memory through the core's write buffer "
        "without allocating a line", default=True)
    miss_cycles: float = _key(
        0.0, 1e6, "cycles", "core cycles a demand miss costs besides its line's fill on the port "
        "(the request's way out of the core and the refill into the cache; a line prefetched "
        "before it is used does not pay it); 0 in a file that does not give it", default=0.0)
    prefetch_streams: int = _key(
        0, 64, "streams", "with prefetch_next_line: the sequential streams the prefetcher follows; "
        "a demand miss to the line after a followed stream's last continues it (fetches the next "
        "line), any other starts a stream in the least recently used entry, fetching nothing yet; "
        "0: every miss fetches the next line (no stream detection), in a file that does not give "
        "it", default=0)


@dataclass(frozen=True)
class Idma:
    channels: int = _key(1, 8, "channels", "iDMA channels (descriptor FIFOs) per core")
    max_outstanding: int = _key(1, 1024, "requests", "bursts in flight per channel (max_pif_req)")
    burst_bytes: int = _key(1, 1 << 20, "bytes", "bytes per DDR request of a channel")
    setup_cycles: float = _key(0.0, 1e6, "cycles", "core cycles to program one descriptor")
    tcm_end_required: bool = _key(
        unit="", doc="every transfer must have one end in TCM (a copy within one external memory "
        "is refused; false in a file that does not give it)", default=False)
    engine_bytes_per_cycle: float = _key(
        0.0, 1e4, "bytes/cycle", "the engine's own rate: a burst's read issues no sooner than its "
        "bytes at this rate after the previous burst's (a GDMA slower than its memories' ports); "
        "0: no limit but the ports', in a file that does not give it", default=0.0)
    descriptor_cycles: float = _key(
        0.0, 1e6, "cycles", "engine cycles before a descriptor's first burst (fetching the "
        "descriptor from memory); 0 in a file that does not give it", default=0.0)


@dataclass(frozen=True)
class Tcm:
    banks: int = _key(1, 8, "banks", "DataRAM banks (tile-manager colours) per core")
    bank_bytes: int = _key(4, 1 << 30, "bytes", "capacity of one DataRAM (at least one float32)")
    reserved_bytes: int = _key(
        0, 1 << 30, "bytes", "TCM per DataRAM the firmware keeps for itself: the tile manager "
        "never hands it out (less than a DataRAM; 0 in a model file that does not give it)",
        default=0)


@dataclass(frozen=True)
class Host:
    rpc_latency_us: float = _key(0.0, 1e6, "us", "host submit-to-start plus done-to-wake latency")
    memory: str = _key(
        unit="", doc="the memory the host allocates the op's buffers from (a memory table of the "
        "model; \"ddr\" in a file that does not give it)", default="ddr")


HARDWARE: dict[str, type] = {"core": Core, "idma": Idma, "tcm": Tcm, "host": Host,
                             "dcache": Dcache}
MEMORY_FIELDS = {f.name for f in fields(MemoryCfg)}
