"""Kernel calls on a memory the core reaches through its data cache, in closed form.

The direct variants of the row-wise ops and softmax sweep their arrays front to back in lock
step; on a cached memory (:mod:`dspsim.hw.dcache`) the core pays per line missed. This gives
each call's missed lines and their cost without walking a line.

**Which lines miss.** The cache is taken as fully associative LRU over ``C = capacity / line``
lines (the simulated one is ``ways``-way set associative; a sequential sweep spreads evenly
over the sets, so the two agree up to a set's rounding). Line ``i`` of array ``A`` hits in call
``k`` iff fewer than ``C`` other lines were touched since its last touch in call ``j``: the
*reuse distance* (``L`` lines per array)

    d(i) = (L - 1) + sum over arrays touched strictly between j and k of L
                   + (L - 1) for each array in both j and k
                   + (L - 1 - i) for each array in j only + i for each array in k only

is linear in ``i``, so a call's hits are a count of integers under a line. A first touch misses
(write-allocate: with ``write_back`` a store miss fetches the line; with ``write_through``
stores bypass the cache as uncached posted stores).

**What it costs.** A line fill holds the port ``F = latency + line / bandwidth``. Blocking
misses (no prefetch): a call costs its TCM cycles plus ``misses x F``. Next-line prefetch: a
missing stream runs one line ahead, so a line costs the larger of the core's cycles per line
and the port's (``F`` per stream's line one at a time; on the data path the lines of all the
call's missing streams, ``streams x line / bandwidth``, ``streams x F`` with one request slot):
the call costs its TCM cycles, one ``F`` for the first miss, and the excess of that period over
the core's per line on every missed line. A call takes at least the port's own time: its fills,
the write-backs below and, with ``write_through``, its vector stores, one posted request each.
Dirty lines a write-back cache evicts are posted but share the port with the fills: a dirty
line missed again was written back in between, and dirty lines left at the end are written
back as later rows evict them, but for the last lines touched; their port time is spread over
the calls that miss once something is dirty.

Lower bounds (exact, whatever the sets do): every touched byte's line is fetched once
(``compulsory_lines``, at least ``ceil(bytes / line)``): ``dma_bound_cycles`` = those bytes
(with ``write_through`` plus the stores but the last ``core.write_buffer_entries``, still
posted when the last call returns) / bandwidth; ``latency_bound_cycles`` = their round trips,
one at a time with blocking misses, else over the memory's request slots.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from dspsim.config import Core, Dcache, HardwareModel, MemoryCfg
from dspsim.kernels.shapes import LoopShape, ddr_call_sequence, ddr_requests, posted_store_bytes

ELEMENT_BYTES = 4  # float32: the row-wise and softmax kernels' elements

CachedCall = tuple[LoopShape, str, "str | None"]
"""One kernel call: its loop shape, the array it loads, the array it stores (or ``None``)."""


@dataclass(frozen=True)
class CachedWalk:
    """A sequence of kernel calls on a cached memory, in closed form."""

    cycles: float  # the estimate
    compute_cycles: int  # the kernels' cycles in TCM
    missed_lines: int  # lines fetched because an access needed them (estimate)
    writeback_lines: int  # dirty lines evicted (estimate)
    compulsory_lines: int  # lines that must be fetched whatever the cache does (a bound)
    uncached_store_bytes: int  # stores that bypass the cache (write-through)
    dma_bound_cycles: float
    latency_bound_cycles: float


def _hits(lines: int, capacity: int, const: int, slope: int) -> int:
    """How many ``i`` in ``0 .. lines - 1`` have ``const + slope * i < capacity``."""
    if slope == 0:
        return lines if const < capacity else 0
    if slope > 0:  # i < (capacity - const) / slope
        bound = math.ceil((capacity - const) / slope)
        return max(0, min(lines, bound))
    # slope < 0: i > (const - capacity) / -slope
    first = math.floor((const - capacity) / -slope) + 1
    return max(0, lines - max(0, first))


def _distance(lines: int, arrays: set[str], before: set[str], between: set[str]
              ) -> tuple[int, int]:
    """The reuse distance ``d(i) = const + slope * i`` of an array's line ``i``, touched with
    the other ``arrays``, last with the others ``before``, ``between`` touched fully between."""
    both = before & arrays
    const = (lines - 1) * (1 + len(before)) + lines * len(between)
    return const, len(arrays - both) - len(before - both)


def cached_call_sequence(calls: tuple[CachedCall, ...], n: int, core: Core, mem: MemoryCfg,
                         cache: Dcache, repeat: int = 1) -> CachedWalk:
    """``calls`` in turn on arrays of ``n`` float32 each, all ``repeat`` times on fresh arrays
    (a row-wise op's rows), on ``mem`` through ``cache`` (cached per request policy too)."""
    return _cached_call_sequence(calls, n, core, mem, mem.policy, cache, repeat)


def prefetches(cache: Dcache, streams: int) -> bool:
    """The next-line prefetch runs ahead of ``streams`` interleaved streams: it is on and follows
    each (``dcache.prefetch_streams`` 0 or >= ``streams``); else every line is a demand miss."""
    return cache.prefetch_next_line and (not cache.prefetch_streams
                                         or cache.prefetch_streams >= streams)


@functools.lru_cache(maxsize=1024)
def _cached_call_sequence(calls: tuple[CachedCall, ...], n: int, core: Core, mem: MemoryCfg,
                          policy: Any, cache: Dcache, repeat: int) -> CachedWalk:
    line = cache.line_bytes
    capacity = cache.capacity_bytes // line
    lines = -(-ELEMENT_BYTES * n // line)
    # a row's first touch of an array fetches its new lines: on fresh contiguous rows, on
    # average its bytes / line (short rows share lines with the row before)
    new_lines = ELEMENT_BYTES * n / line if repeat > 1 else lines
    write_back = cache.write_policy == "write_back"
    # per call, the arrays it touches through the cache (loads, and stores when write-back)
    touched = [set(a for a in (src, dst if write_back else None) if a) for _, src, dst in calls]
    misses, writebacks, dirty, last_seen = _call_misses(calls, touched, lines, capacity,
                                                        new_lines, write_back)
    tail = sum(dirty.values())
    resident = _resident_dirty(dirty, last_seen, touched, lines, capacity, new_lines, repeat,
                               tail)
    writebacks = max(0.0, repeat * (writebacks + tail) - resident)
    missed = sum(sum(c.values()) for c in misses)
    cycles, compute = _sequence_cycles(calls, misses, writebacks, n, core, mem, cache,
                                       new_lines, repeat)
    uncached_store = 0 if write_back else sum(
        ELEMENT_BYTES * n for _, _, dst in calls if dst is not None)
    posted = 0 if write_back else _posted_bytes(calls, n, core, repeat)
    streams = len(set().union(*touched))  # the arrays the calls touch
    # every byte touched, over all the rows (short rows share lines: count bytes, not rows)
    compulsory = -(-repeat * ELEMENT_BYTES * n * streams // line)
    cpb = policy.cycles_per_byte
    prefetching = prefetches(cache, streams)
    slots = 1 if not prefetching else mem.max_outstanding
    first_misses = 0.0  # on contiguous rows a prefetching stream waits once, not per row
    if repeat > 1 and prefetching:
        first_misses = streams * (policy.request_cycles(line, False) + cache.miss_cycles)
    return CachedWalk(
        cycles=cycles * repeat + first_misses, compute_cycles=compute * repeat,
        missed_lines=round(missed * repeat), writeback_lines=round(writebacks),
        compulsory_lines=compulsory, uncached_store_bytes=uncached_store * repeat,
        dma_bound_cycles=(compulsory * line + uncached_store * repeat - posted) * cpb,
        latency_bound_cycles=compulsory * policy.latency(False) / slots)


def _call_misses(calls: tuple[CachedCall, ...], touched: list[set[str]], lines: int,
                 capacity: int, new_lines: float, write_back: bool
                 ) -> tuple[list[dict[str, float]], float, dict[str, float], dict[str, int]]:
    """Per call, the missed lines of each array it touches (LRU); the dirty lines those misses
    wrote back, the dirty lines per array at the end, and each array's last call."""
    last_seen: dict[str, int] = {}
    dirty: dict[str, float] = {}  # dirty lines per array
    misses: list[dict[str, float]] = []
    writebacks: float = 0
    for k, ((_, _, dst), arrays) in enumerate(zip(calls, touched, strict=True)):
        call: dict[str, float] = {}
        for a in sorted(arrays):
            j = last_seen.get(a)
            if j is None:
                call[a] = new_lines
                continue
            between = set().union(*touched[j + 1:k]) - {a}
            const, slope = _distance(lines, arrays - between - {a}, touched[j] - between - {a},
                                     between)
            call[a] = lines - _hits(lines, capacity, const, slope)
            evicted = min(call[a], dirty.get(a, 0))  # a dirty line missed was written back
            writebacks += evicted
            dirty[a] = dirty.get(a, 0) - evicted
        for a in arrays:
            last_seen[a] = k
        if dst is not None and write_back:
            dirty[dst] = new_lines
        misses.append(call)
    return misses, writebacks, dirty, last_seen


def _resident_dirty(dirty: dict[str, float], last_seen: dict[str, int],
                    touched: list[set[str]], lines: int, capacity: int, new_lines: float,
                    repeat: int, tail: float) -> float:
    """The dirty lines still cached after the sequence (the others are evicted by the next
    rows, unless among the last lines touched)."""
    if repeat > 1:  # the last lines touched stay: the dirty share of what the cache holds
        row_lines = new_lines * len(set().union(*touched))
        return min(capacity, repeat * row_lines) * tail / row_lines if row_lines else 0.0
    # line i of a dirty array stays iff fewer than capacity lines were touched after it
    resident = 0
    for a, d in dirty.items():
        j = last_seen[a]
        after = set().union(*touched[j + 1:len(touched)]) - {a}
        others = len(touched[j] - after - {a})  # touched with it in its last call only
        const = (lines - 1) * (1 + others) + lines * len(after)
        resident += min(d, _hits(lines, capacity, const, -(1 + others)))
    return resident


def _sequence_cycles(calls: tuple[CachedCall, ...], misses: list[dict[str, float]],
                     writebacks: float, n: int, core: Core, mem: MemoryCfg, cache: Dcache,
                     new_lines: float, repeat: int) -> tuple[float, int]:
    """One pass's cycles and compute cycles: each call's compute plus its misses, or its port's
    time if longer; posted write-backs spread over the calls that miss once something is dirty."""
    end = len(calls)
    first_store = next((k for k, (_, _, dst) in enumerate(calls) if dst is not None), end)
    after_store = sum(sum(c.values()) for c in misses[first_store:])
    per_miss = writebacks / (repeat * after_store) if after_store else 0.0
    cycles = 0.0
    compute = 0
    for k, ((shape, _, dst), call) in enumerate(zip(calls, misses, strict=True)):
        tcm = shape.tcm_cycles(n, core)
        compute += tcm
        wb = per_miss if k >= first_store else 0.0
        cycles += max(tcm + _miss_cycles(call, new_lines, tcm, wb, mem, cache, repeat == 1),
                      _port_cycles(call, wb, shape, n, core, mem, cache, dst))
    return cycles, compute


def _posted_bytes(calls: tuple[CachedCall, ...], n: int, core: Core, repeat: int) -> int:
    """Bytes of the last ``core.write_buffer_entries`` stores (write-through: all posted): what
    the write buffer may hold when the last call returns."""
    storing = [shape for shape, _, dst in calls if dst is not None]
    if not storing:
        return 0
    posted, left = 0, core.write_buffer_entries
    for _ in range(repeat):
        for shape in reversed(storing):
            if left <= 0:
                return posted
            posted += posted_store_bytes(shape, n, core.lanes_f32, left)
            left -= ddr_requests(shape, n, core.lanes_f32, True)[1]
    return posted


def _port_cycles(misses: dict[str, float], writebacks_per_miss: float, shape: LoopShape, n: int,
                 core: Core, mem: MemoryCfg, cache: Dcache, dst: str | None) -> float:
    """A call's port time: its fills, the write-backs they evict and, with ``write_through``,
    its vector stores (one posted request each), back to back."""
    policy, line = mem.policy, cache.line_bytes
    one_slot = mem.max_outstanding == 1  # a request holds the port for its round trip
    fill = (policy.latency(False) if one_slot else 0.0) + policy.data_cycles(line)
    evict = (policy.latency(True) if one_slot else 0.0) + policy.data_cycles(line)
    total = _fills_and_evictions(sum(misses.values()), writebacks_per_miss, fill, evict)
    if dst is not None and cache.write_policy == "write_through":
        stores = ddr_requests(shape, n, core.lanes_f32, True)[1]
        vector_bytes = shape.on(core).vector_bytes
        total += stores * ((policy.latency(True) if one_slot else 0.0)
                           + policy.data_cycles(vector_bytes))
    return total


def _fills_and_evictions(lines: float, writebacks_per_line: float, fill_cycles: float,
                         evict_cycles: float) -> float:
    """``lines`` fills and the write-backs they evict (``writebacks_per_line`` each)."""
    if evict_cycles == fill_cycles:
        return lines * (1 + writebacks_per_line) * fill_cycles
    return lines * fill_cycles + lines * writebacks_per_line * evict_cycles


def _miss_cycles(misses: dict[str, float], lines: float, tcm: int, writebacks_per_miss: float,
                 mem: MemoryCfg, cache: Dcache, first_miss: bool = True) -> float:
    """What a call's missed lines (and their write-backs) add to its TCM cycles (module text)."""
    total = sum(misses.values())
    if not total:
        return 0.0
    line, policy = cache.line_bytes, mem.policy
    fill = policy.request_cycles(line, False)  # a line alone on the port
    one_slot = mem.max_outstanding == 1  # a request holds the port for its round trip
    slot = fill if one_slot else policy.data_cycles(line)
    evict = policy.request_cycles(line, True) if one_slot else slot
    streams = sum(1 for m in misses.values() if m)
    if not prefetches(cache, streams):
        # blocking: each demand miss's fill, then its own cost, beside which the write-back
        # it evicted (posted behind the fill) holds the port
        return total * (fill + max(cache.miss_cycles, writebacks_per_miss * evict))
    period = max(fill, _fills_and_evictions(streams, writebacks_per_miss, slot, evict))
    # the first miss waits its round trip (on average a share of one, for short rows)
    first = min(1.0, total) * (fill + cache.miss_cycles) if first_miss else 0.0
    return first + max(misses.values()) * max(0.0, period - tcm / lines)


def direct_bounds(model: HardwareModel, calls: tuple[CachedCall, ...], n: int,
                  repeat: int = 1) -> dict[str, Any]:
    """Traffic, bounds and estimate of a direct variant: ``calls`` on ``n`` float32 arrays in
    ``host.memory``, ``repeat`` times on fresh ones: :func:`cached_call_sequence` if cached, else
    :func:`~dspsim.kernels.shapes.ddr_call_sequence` (traffic exact; cycles exact for the core
    alone on the port)."""
    mem = model.host_memory
    policy = mem.policy  # what a request costs (dspsim.hw.policy)
    if mem.cached and model.dcache.capacity_bytes:
        w = cached_call_sequence(calls, n, model.core, mem, model.dcache, repeat)
        line = model.dcache.line_bytes
        return {
            "ddr_read_bytes": w.missed_lines * line,  # estimate: fills (a prefetch adds)
            "ddr_write_bytes": w.uncached_store_bytes,  # dirty lines stay or are evicted
            "ddr_requests": w.missed_lines + w.uncached_store_bytes // model.core.vector_bytes,
            "dma_bound_cycles": w.dma_bound_cycles,
            "latency_bound_cycles": w.latency_bound_cycles,
            "compute_bound_cycles": w.compute_cycles,
            "estimate_cycles": w.cycles,
            "outstanding_requests": 1,
            "missed_lines": w.missed_lines,
            "compulsory_lines": w.compulsory_lines,
            "writeback_lines": w.writeback_lines,
        }
    uncached = tuple((shape, dst is not None) for shape, _, dst in calls)
    compute = repeat * sum(s.tcm_cycles(n, model.core) for s, _ in uncached)
    if mem.core_local:  # on the core's own bus, as TCM: the loops' cycles, no request
        return {"ddr_read_bytes": 0, "ddr_write_bytes": 0, "ddr_requests": 0,
                "dma_bound_cycles": 0.0, "latency_bound_cycles": 0.0,
                "compute_bound_cycles": compute, "estimate_cycles": compute,
                "outstanding_requests": 1}
    walk = ddr_call_sequence(uncached, n, model.core, policy, mem.max_outstanding, repeat)
    return {
        "ddr_read_bytes": walk.read_bytes,
        "ddr_write_bytes": walk.write_bytes,
        "ddr_requests": walk.loads + walk.stores,
        # the last posted store may still cross when the timer stops
        "dma_bound_cycles": policy.data_cycles(walk.must_cross_bytes),
        # dependent loads, one at a time
        "latency_bound_cycles": walk.loads * policy.latency(False),
        "compute_bound_cycles": compute,
        "estimate_cycles": walk.cycles,
        "outstanding_requests": 1,
    }
