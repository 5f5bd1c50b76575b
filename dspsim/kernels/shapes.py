"""Loop structure of the kernels, from which their cycle cost follows; the seed's four shapes.

A call is a prologue (call overhead, one priming load) and *segments*: runs of iterations that
touch memory alike, ``(count, load_bytes, store_bytes)`` (0 bytes: a predicated-off access).
With ``II = max(ceil(memory ops / load_store_units), ceil(alu ops / vector_alu_slots))``, a
call costs against TCM (pipelined) ``call_overhead + iterations * II + reduction_ops *
alu_latency``; against DDR (no cache) each load stalls the core for its round trip, an iteration
``sum(load stalls) + II``, and stores are posted to the write buffer, stalling only when full.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from dspsim.config import Core
from dspsim.hw.policy import RequestPolicy
from dspsim.kernels.toolkit import (
    Segment,
    log2_lanes,
    one_vector_extra_segments,
    one_vector_variable_segments,
    two_accumulator_segments,
)


@dataclass(frozen=True)
class LoopShape:
    """A kernel's loop: per-iteration operations, its segments and its reduction tail."""

    name: str
    data_loads: int  # vector loads of the input per iteration
    table_loads: int  # loads from local constant tables per iteration (never DDR)
    stores: int  # vector stores per iteration
    alu_ops: int  # vector ALU / multiply operations per iteration
    segments: Callable[[int, int], list[Segment]]  # (n, lanes) -> segments
    reduction_ops: Callable[[int], int]  # lanes -> dependent ops after the loop
    # IVP_LAN_2XF32_PP: the aligning load that primes the alignment register reads one whole
    # vector in the prologue, before the loop (from DDR it is one more stalling round trip).
    priming_loads: int = 1
    # a loop of its own vector width and call cost (an op file's ``loop``); None: the core's
    # ``lanes_f32`` and ``call_overhead_cycles``
    lanes: int | None = None
    call_overhead_cycles: int | None = None
    # the data loads of an iteration read this many rows of the call's row side by side (load
    # j from row j, the rows a call row's bytes / this apart: the fc kernel's interleaved weight
    # rows), which a data cache sees; 0 or 1: one stream through the call row's bytes
    interleaved_rows: int = 0
    # a measured cost's loop (an op file's cycles_per_element): iterations of this II whatever
    # its loads and stores; 0: the II its operations set
    ii: int = 0

    def on(self, core: Core) -> Core:
        """The core as this loop sees it: its own lanes (vector bytes) and call overhead if set."""
        if self.lanes is None and self.call_overhead_cycles is None:
            return core
        return _with_loop(core, self.lanes, self.call_overhead_cycles)

    def vector_lanes(self, lanes: int) -> int:
        """Float32 elements per vector of this loop on a core of ``lanes``."""
        return self.lanes or lanes

    def ii_cycles(self, core: Core) -> int:
        if self.ii:
            return self.ii
        mem_ops = self.data_loads + self.table_loads + self.stores
        return max(1, math.ceil(mem_ops / core.load_store_units),
                   math.ceil(self.alu_ops / core.vector_alu_slots))

    def iterations(self, n: int, lanes: int) -> int:
        return sum(count for count, _, _ in self.segments(n, self.vector_lanes(lanes)))

    def tcm_cycles(self, n: int, core: Core) -> int:
        """Cycles of one call whose input and output are in TCM (loads pipelined)."""
        if n <= 0:
            return 0
        core = self.on(core)
        return (core.call_overhead_cycles
                + self.iterations(n, core.lanes_f32) * self.ii_cycles(core)
                + self.reduction_ops(core.lanes_f32) * core.alu_latency_cycles)


@functools.lru_cache(maxsize=256)
def _with_loop(core: Core, lanes: int | None, call_overhead_cycles: int | None) -> Core:
    return dataclasses.replace(
        core, lanes_f32=core.lanes_f32 if lanes is None else lanes,
        call_overhead_cycles=(core.call_overhead_cycles if call_overhead_cycles is None
                              else call_overhead_cycles))


@dataclass(frozen=True)
class DdrCall:
    """A kernel call against DDR in closed form (the analytic bounds and estimates)."""

    cycles: float
    stall_cycles: float
    read_bytes: int
    write_bytes: int


def ddr_call(shape: LoopShape, n: int, core: Core, policy: RequestPolicy, load_ddr: bool,
             store_ddr: bool, port_slots: int = 2) -> DdrCall:
    """:meth:`dspsim.hw.core.Core._stalling_loop`'s burst-level walk summed, the core alone on
    the port, priced by ``policy``: a DDR load stalls a read's ``latency + bytes / bandwidth``; a
    store leaves at its iteration's end and holds the data path ``bytes / bandwidth``, delaying
    the next load (one port slot: also a write's latency); a full write buffer bounds an
    iteration below by a store's round trip / entries. No DDR load: :func:`posted_stores_call`."""
    if n <= 0:
        return DdrCall(0.0, 0.0, 0, 0)
    core = shape.on(core)
    if store_ddr and not load_ddr:
        return posted_stores_call(shape, n, core, policy, port_slots)
    lat_r, lat_w, cpb = policy.latency(False), policy.latency(True), policy.cycles_per_byte
    ii = shape.ii_cycles(core)
    cycles, stall, read, write = float(core.call_overhead_cycles), 0.0, 0, 0
    prologue = (1, (core.vector_bytes,) * shape.priming_loads, ())
    runs = [(prologue, 0)] + [(seg, ii) for seg in shape.segments(n, core.lanes_f32)]
    trailing_store_delay = 0.0
    for (count, loads, stores), issue in runs:
        if not count:
            continue
        loads = [b for b in loads if b] if load_ddr else []
        stores = [b for b in stores if b] if store_ddr else []
        load_stall = sum(lat_r + b * cpb for b in loads)
        store_path = sum(b * cpb for b in stores)
        if port_slots == 1:  # the next load needs the slot the store holds until it is done
            store_path += lat_w * len(stores)
        # the previous iteration's stores hold the path when this iteration's first load issues
        delay = trailing_store_delay if loads else 0.0
        per_iter_delay = store_path if loads else 0.0
        per_iter = load_stall + issue + per_iter_delay
        if stores:
            per_iter = max(per_iter, (lat_w + store_path) / core.write_buffer_entries)
        cycles += delay + count * per_iter - per_iter_delay
        stall += delay + count * (per_iter - issue) - per_iter_delay
        trailing_store_delay = store_path
        read += count * sum(loads)
        write += count * sum(stores)
    cycles += shape.reduction_ops(core.lanes_f32) * core.alu_latency_cycles
    return DdrCall(cycles, stall, read, write)


def posted_store_bytes(shape: LoopShape, n: int, lanes: int, entries: int) -> int:
    """Bytes of a call's last ``entries`` stores (predicated-off ones issue nothing): what a write
    buffer of ``entries`` may hold when a call with no DDR load returns."""
    posted, left = 0, entries
    for count, _, stores in reversed(shape.segments(n, shape.vector_lanes(lanes))):
        per = [b for b in stores if b]
        if not per or count <= 0:
            continue
        whole = min(count, left // len(per))
        posted += whole * sum(per)
        left -= whole * len(per)
        if whole < count:  # part of one more iteration: its last stores
            posted += sum(per[len(per) - left:]) if left else 0
            break
    return posted


def posted_stores_call(shape: LoopShape, n: int, core: Core, policy: RequestPolicy,
                       port_slots: int) -> DdrCall:
    """Loads in TCM, stores to uncached DDR, the core alone on the port: store ``i`` is posted at
    its iteration's end once the write buffer has room (store ``i - E`` done, ``E`` =
    ``core.write_buffer_entries``), crosses in ``bytes / B`` and holds its slot a write's ``L``
    more. The core returns after posting the last store: the larger of its issue (TCM cycles)
    and the wait for store ``N - 1 - E`` (the first iteration, then ``transfer_cycles`` of the
    first ``N - E`` stores, ``min(E, m)`` in flight): exact when either paces the whole call;
    the last ``E`` stores cross after it."""
    core = shape.on(core)
    issue = shape.tcm_cycles(n, core)
    total = sum(count * sum(stores) for count, _, stores in shape.segments(n, core.lanes_f32))
    posted = posted_store_bytes(shape, n, core.lanes_f32, core.write_buffer_entries)
    cycles = float(issue)
    if total > posted:
        first = core.call_overhead_cycles + shape.ii_cycles(core)
        drained = policy.transfer_cycles(total - posted, core.vector_bytes,
                                         min(core.write_buffer_entries, port_slots), True)
        cycles = max(cycles, first + drained
                     + shape.reduction_ops(core.lanes_f32) * core.alu_latency_cycles)
    return DdrCall(cycles, cycles - issue, 0, total)


@dataclass(frozen=True)
class DdrWalk:
    """A sequence of kernel calls against DDR in closed form (the core alone on the port)."""

    cycles: float
    read_bytes: int
    write_bytes: int
    stall_cycles: float  # the core waiting on DDR
    loads: int  # requests: vector loads (each stalls the core)
    stores: int  # requests: posted vector stores
    must_cross_bytes: int  # crossing before the last call returns: all but the last store


def last_stores(shape: LoopShape, n: int, lanes: int) -> tuple[int, ...]:
    """Bytes of the stores of a call's last iteration touching memory if its last request is a
    store, else ``()`` (a last iteration that only loads, ``vecmul``'s, waited): what it leaves
    on the port when it returns."""
    for count, loads, stores in reversed(shape.segments(n, shape.vector_lanes(lanes))):
        if count <= 0:
            continue
        if any(stores):
            return tuple(b for b in stores if b)
        if any(loads):
            return ()
    return ()


def ddr_requests(shape: LoopShape, n: int, lanes: int, store_ddr: bool) -> tuple[int, int]:
    """(loads, stores) one call against DDR issues: the priming load(s), then every access that
    touches memory."""
    loads, stores = shape.priming_loads, 0
    for count, seg_loads, seg_stores in shape.segments(n, shape.vector_lanes(lanes)):
        loads += count * sum(1 for b in seg_loads if b)
        if store_ddr:
            stores += count * sum(1 for b in seg_stores if b)
    return loads, stores


@functools.lru_cache(maxsize=4096)
def ddr_call_sequence(calls: tuple[tuple[LoopShape, bool], ...], n: int, core: Core,
                      policy: RequestPolicy, port_slots: int, repeat: int = 1) -> DdrWalk:
    """``calls`` (``(shape, stores to DDR)``, loads from DDR) in turn on ``n`` elements,
    ``repeat`` times: :func:`ddr_call` each, plus the hand-over (the last posted store still
    holds the data path, or with one port slot the slot, when the next call's first load issues
    after its call overhead). Exact up to rounding for the core alone on the port."""
    slot_blocks = port_slots == 1
    read = write = loads = stores = 0
    cycles = stall = 0.0
    carried = 0.0
    last_store_bytes = 0
    first_pass = first_stall = 0.0
    for rep in range(min(repeat, 2)):  # later repeats are the second one again
        start = cycles
        for shape, store_ddr in calls:
            call = ddr_call(shape, n, core, policy, True, store_ddr, port_slots)
            loop = shape.on(core)  # the core as this loop sees it
            lanes, handover = loop.lanes_f32, max(0.0, carried - loop.call_overhead_cycles)
            cycles += call.cycles + handover
            stall += call.stall_cycles + handover
            read += call.read_bytes
            write += call.write_bytes
            call_loads, call_stores = ddr_requests(shape, n, lanes, store_ddr)
            loads += call_loads
            stores += call_stores
            last = last_stores(shape, n, lanes) if store_ddr else ()
            last_store_bytes = last[-1] if last else 0  # a later load waited for the rest
            tail = shape.reduction_ops(lanes) * core.alu_latency_cycles
            store_wait = sum(last) * policy.cycles_per_byte + (
                policy.latency(True) * len(last) if slot_blocks else 0.0)
            carried = max(0.0, store_wait - tail)
        if rep == 0:
            first_pass, first_stall = cycles - start, stall
    if repeat > 2:
        cycles += (repeat - 2) * (cycles - first_pass)
        stall += (repeat - 2) * (stall - first_stall)
        read, write = read * repeat // 2, write * repeat // 2
        loads, stores = loads * repeat // 2, stores * repeat // 2
    return DdrWalk(cycles=cycles, stall_cycles=stall, read_bytes=read, write_bytes=write,
                   loads=loads, stores=stores, must_cross_bytes=read + write - last_store_bytes)


def two_accumulator_reduction(name: str, alu_ops: int,
                              reduction_ops: Callable[[int], int]) -> LoopShape:
    """A reduction over two accumulators (:func:`two_accumulator_segments`), no stores."""
    return LoopShape(name, data_loads=2, table_loads=0, stores=0, alu_ops=alu_ops,
                     segments=two_accumulator_segments, reduction_ops=reduction_ops)


# IVP_MAXN_2XF32 x2; combine the accumulators, log2(lanes) rotate (SEL) + max steps, MOVF32
VECMAXF = two_accumulator_reduction("vecmaxf", 2, lambda lanes: 2 + 2 * log2_lanes(lanes))
# IVP_ADDN_2XF32 x2; add the accumulators, then the IVP_RADDN_2XF32 tree of log2(lanes) levels
VECSUM = two_accumulator_reduction("vecsum", 2, lambda lanes: 1 + log2_lanes(lanes))

VECEXPF_MAX = LoopShape(
    "vecexpf_max",
    data_loads=1,  # IVP_LAVN_2XF32_XP
    table_loads=7,  # the seven expftblf coefficients (IVP_LSRN_2XF32_IP/XP) inside the loop
    stores=1,  # IVP_SAVN_2XF32_XP
    # UN, ULE, UEQ; SUB, MOVT, MAX; TRUNC; MUL, MULAH; PACKVRNR, SRLI, PACKH, SRLI; FLOAT; MOVT;
    # MUL (x^2); 6 MULA; ADD, SRLI, SUB, SLLI, SLLI; MUL, MUL
    alu_ops=30,
    segments=one_vector_variable_segments,
    reduction_ops=lambda lanes: 0,
)

VECMUL = LoopShape(
    "vecmul", table_loads=0,
    data_loads=1,  # IVP_LAN_2XF32_IP
    stores=1,  # IVP_SAN_2XF32_IP
    alu_ops=1,  # IVP_MULN_2XF32
    segments=one_vector_extra_segments,
    reduction_ops=lambda lanes: 0,
)

# the seed's four loop shapes by kernel name (the kernel registry, dspsim.kernels.KERNELS, holds
# every registered kernel with its numerics)
SEED_SHAPES = {k.name: k for k in (VECMAXF, VECEXPF_MAX, VECSUM, VECMUL)}
