"""Closed forms of the copy microbenchmark: lower bounds and an estimate per variant, from the
bytes each port carries (:mod:`dspsim.ops.copy.traffic`).

Bounds and estimates price every request by its memory's policy (:mod:`dspsim.hw.policy`). Per
port ``p``: ``L_p`` its latency, ``B_p`` its bytes per cycle, ``m_p`` its request slots, ``c_p``
the copy's directions through it (2 within one memory); ``b``, ``k``, ``S``: the iDMA's burst,
outstanding requests and setup; ``P`` the timed prologue, added to every bound and estimate.
The iDMA's bounds hold per descriptor, summed; a core copy's count the bytes that must cross
each port before its closing ``MEMW`` (a write-allocate destination's are the run's own line
fills and write-backs). An iDMA copy's also count its engine's own pace
(``idma.engine_bytes_per_cycle``, ``idma.descriptor_cycles``) and the driver's cache sync of
each cached end (``copy.dma_cache_sync_cycles_per_line``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from dspsim.hw.policy import engine_paced_cycles, transfer_cycles
from dspsim.kernels.cached import prefetches
from dspsim.kernels.memcpy import MEMCPY, memcpy_words
from dspsim.kernels.shapes import ddr_call, last_stores
from dspsim.ops.base import TCM, memory_name, memory_of
from dspsim.ops.copy.program import pieces_of, plan
from dspsim.ops.copy.traffic import traffic


def crossing_bytes(model: Any, variant: str, n: int) -> dict[str, tuple[Any, int]]:
    """Per external memory: its table and :func:`way_bytes`'s reads and writes together."""
    return {name: (mem, r + w) for name, (mem, r, w) in way_bytes(model, variant, n).items()}


def way_bytes(model: Any, variant: str, n: int,
              moved: dict[str, int] | None = None) -> dict[str, tuple[Any, int, int]]:
    """Per external memory: its table, the bytes read and written through its port inside the
    timed span (``n`` each way through it, none on the core's own bus; a core copy's
    write-allocate destination, the run's own: ``moved``, its traffic, if known)."""
    p = model.copy
    out: dict[str, tuple[Any, int, int]] = {}
    for where, write in ((p.src, False), (p.dst, True)):
        mem = memory_of(model, where)
        if mem is None:
            continue
        name = memory_name(model, where)
        if _allocates(model, variant, mem) and write:  # the run's bytes, both ways
            moved = moved or traffic(model, variant, n)
            out[name] = (mem, *_inside_span(model, mem, n, moved[f"{name}_read"],
                                            moved[f"{name}_write"]))
            continue
        _, r, w = out.get(name, (mem, 0, 0))
        if variant == "idma" or not mem.core_local:  # a core copy's own bus needs no port
            r, w = (r, w + n) if write else (r + n, w)
        out[name] = (mem, r, w)
    return out


def _inside_span(model: Any, mem: Any, n: int, read_bytes: int, write_bytes: int
                 ) -> tuple[int, int]:
    """Of a run's bytes through a write-allocate destination's port, those that must cross
    inside the span: not a line prefetched past a stream's last (a followed stream of more than
    one line: its second miss starts the prefetch), nor, without a flush, the last dirty line
    evicted (posted: it may still drain)."""
    p, dc = model.copy, model.dcache
    streams = sum(memory_of(model, where) is mem for where in (p.src, p.dst))
    if prefetches(dc, _streams(model)) and n > dc.line_bytes:
        read_bytes = max(0, read_bytes - streams * dc.line_bytes)
    if not p.flush_destination:
        write_bytes = max(0, write_bytes - dc.line_bytes)
    return read_bytes, write_bytes


def _allocates(model: Any, variant: str, mem: Any) -> bool:
    """Whether a core copy's stores to ``mem`` go through a write-back, write-allocate cache."""
    dc = model.dcache
    return bool(variant != "idma" and mem.cached and dc.capacity_bytes and not mem.core_local
                and dc.write_policy == "write_back" and dc.write_allocate)


def _core_request_bytes(model: Any, variant: str, mem: Any) -> int:
    """A core copy's request size at ``mem``: a cache line, else its accesses (a loop's
    ``copy.access_bytes`` in pieces of at most 16, a memcpy's words or vectors)."""
    p = model.copy
    if mem.cached and model.dcache.capacity_bytes:
        return model.dcache.line_bytes
    if variant == "loop":
        return min(p.access_bytes, 16)
    return p.memcpy_access_bytes or model.core.vector_bytes


def _ways_path(mem: Any, ways: tuple[bool, ...], nbytes: int, burst_bytes: int,
               rows: int = 1) -> float:
    """Data-path cycles of ``nbytes`` (whole rows) each way of ``ways`` through ``mem``'s port,
    in requests of ``burst_bytes`` cut at ``rows`` rows' ends, as the policy prices them."""
    return rows * sum(mem.policy.stream_path_cycles(nbytes // rows, burst_bytes, w)
                      for w in ways)


def bounds(model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """Traffic, lower bounds and estimate of ``variant`` copying ``shape[0]`` bytes."""
    n = shape[0]
    p = model.copy
    out: dict[str, Any] = {"bytes": n, "traffic_bytes": traffic(model, variant, n)}
    prologue = p.prologue_cycles if p.timed_prologue else 0.0
    ways = way_bytes(model, variant, n, out["traffic_bytes"])
    if not any(r + w for _, r, w in ways.values()):  # TCM or the core's own bus: the core alone
        out["estimate_cycles"] = prologue + (
            loop_compute_cycles(model, n, variant) if variant == "loop" or p.memcpy_access_bytes
            else MEMCPY.tcm_cycles(n // 4, model.core))
        out["lower_bound_cycles"] = out["estimate_cycles"]
        out["binding_bound"] = "compute"
        return out
    pl = plan(model, p, n)
    sizes = [pl.size(i) for i in range(pl.pieces)]
    if variant == "idma":
        prologue += _sync_cycles(model, pl)
        # each descriptor's (rows, row bytes), one row for a 1-D one; each port's (memory, ways)
        blocks = [(pl.piece_rows(i), sizes[i] // pl.piece_rows(i)) for i in range(pl.pieces)]
        legs = [(m, _ways(model, m)) for m, *_ in ways.values()]
        named = _idma_bounds(model, legs, blocks)
        estimate = prologue + _idma_estimate(model, legs, blocks, out)
        out["descriptor_bytes"] = pl.piece_bytes
    elif variant == "loop":
        named = {**_port_bounds(model, variant, ways),
                 "compute": loop_compute_cycles(model, n)}
        estimate = prologue + _loop_estimate(model, n, named["compute"], out["traffic_bytes"])
    else:
        named = _port_bounds(model, variant, ways)
        estimate = prologue + _memcpy_estimate(model, [n] if pl.one_call else sizes, n, out)
    for k, v in named.items():
        out[f"{k}_bound_cycles"] = v
    binding = max(named, key=named.get)
    out["binding_bound"] = binding
    out["lower_bound_cycles"] = prologue + named[binding]
    out["estimate_cycles"] = max(estimate, out["lower_bound_cycles"])
    return out


def _sync_cycles(model: Any, pl: Any) -> float:
    """The DMA driver's cache sync of each cached end (the program's ``_cache_sync``):
    ``copy.dma_cache_sync_cycles_per_line`` per line, at least its bytes over the line."""
    per_line, line = model.copy.dma_cache_sync_cycles_per_line, model.dcache.line_bytes
    if not per_line or not model.dcache.capacity_bytes:
        return 0.0
    ends = ((model.copy.src, pl.src_bytes), (model.copy.dst, pl.dst_bytes))
    return per_line * sum(-(-b // line) for where, b in ends
                          if getattr(memory_of(model, where), "cached", False))


def _port_bounds(model: Any, variant: str,
                 ways: dict[str, tuple[Any, int, int]]) -> dict[str, float]:
    """A core copy's port bounds: every byte of :func:`way_bytes` crosses its port (in the
    core's requests on a non-linear policy), the last done ``L`` after its data."""
    crossing = [(m, r, w) for m, r, w in ways.values() if r + w > 0]

    def path(m: Any, r: int, w: int) -> float:
        size = _core_request_bytes(model, variant, m)
        return sum(m.policy.stream_path_cycles(b, size, way)
                   for b, way in ((r, False), (w, True)) if b > 0)

    def latency(m: Any, r: int, w: int) -> float:  # the last request's: a read's or a write's
        # as the bytes crossing are (a write-allocate destination's are its line fills: reads)
        return min(m.policy.latency(way) for b, way in ((r, False), (w, True)) if b > 0)

    return {"bandwidth": max((path(m, r, w) for m, r, w in crossing), default=0.0),
            "latency_bandwidth": max((latency(m, r, w) + path(m, r, w)
                                      for m, r, w in crossing), default=0.0)}


def _ways(model: Any, mem: Any) -> tuple[bool, ...]:
    """The ways through ``mem``'s port: ``False`` reads (the source), ``True`` writes."""
    p = model.copy
    return tuple(write for where, write in ((p.src, False), (p.dst, True))
                 if memory_of(model, where) is mem)


def _held(mem: Any, ways: tuple[bool, ...], requests: int, nbytes: int,
          burst_bytes: int = 0, rows: int = 1) -> float:
    """Slot time of ``requests`` requests of ``nbytes`` in all, each way through ``mem``'s port:
    their latencies and :func:`_ways_path` (``burst_bytes`` 0: one request)."""
    return sum(requests * mem.policy.latency(w) for w in ways) + _ways_path(
        mem, ways, nbytes, burst_bytes or nbytes, rows)


def _idma_bounds(model: Any, legs: list[tuple[Any, tuple[bool, ...]]],
                 blocks: list[tuple[int, int]]) -> dict[str, float]:
    """The channel's bounds, summed over its descriptors of ``d`` bytes in ``r`` requests:
    ``max_p (L_p + c_p d / B_p)`` (and the read-then-write chains), ``max_p c_p n / B_p``, and
    ``max(sum_p c_p (r L_p + d / B_p) / k, max_p c_p (r L_p + d / B_p) / m_p)``."""
    burst, k = model.idma.burst_bytes, model.idma.max_outstanding
    chain = _chain(model)
    per_descriptor = outstanding = 0.0
    for rows, row in blocks:
        d, per_row = rows * row, math.ceil(row / burst)
        r = rows * per_row  # bursts cut at row ends
        first, last = min(burst, row), row - (per_row - 1) * burst
        # the last request through a port is its last way's (a write, when it writes there)
        per_descriptor += max(max(m.policy.latency(w[-1]) + _ways_path(m, w, d, burst, rows)
                                  for m, w in legs),
                              *(chain(a, b) for a, b in ((first, d), (d, last))))
        # each port's, its slots
        held = [(_held(m, w, r, d, burst, rows), m.max_outstanding) for m, w in legs]
        outstanding += max(sum(h for h, _ in held) / k, *(h / slots for h, slots in held))
    # every descriptor's bursts through each port
    bandwidth = max(sum(_ways_path(m, w, rows * row, burst, rows) for rows, row in blocks)
                    for m, w in legs)
    named = {"latency_bandwidth": per_descriptor, "bandwidth": bandwidth,
             "outstanding": outstanding}
    if model.idma.engine_bytes_per_cycle or model.idma.descriptor_cycles:
        named["engine"] = sum(engine_paced_cycles(model.idma, rows * row, row, 0.0,
                                                  lambda _: 0.0) for rows, row in blocks)
    return named


def _idma_estimate(model: Any, legs: list[tuple[Any, tuple[bool, ...]]],
                   blocks: list[tuple[int, int]], out: dict[str, Any]) -> float:
    """``S + sum transfer_cycles(d) + H`` (``H`` the completion interrupt's handler; an engine
    slower than its ports: each descriptor's fetch and paced bursts): exact when the channel is
    alone on the port and ``S`` is shorter than a transfer."""
    p, burst, k = model.copy, model.idma.burst_bytes, model.idma.max_outstanding
    handler = p.interrupt_handler_cycles if p.completion_interrupt else 0.0
    ext, ways = max(legs, key=lambda mw: len(mw[1]) * mw[0].policy.cycles_per_byte)
    window = min(k, ext.max_outstanding)
    lat, cpb = ext.policy.latency(ways[-1]), len(ways) * ext.policy.cycles_per_byte
    one = _two_ended_descriptor(model, legs) if TCM not in (p.src, p.dst) else None

    def cost(rows: int, row: int) -> float:  # a descriptor's bursts through the ports
        if one is not None:  # two external ends
            return one(rows * row, min(burst, row))
        if not ext.policy.linear:  # one transaction at a time: the bursts' path cycles in turn
            return _ways_path(ext, ways, rows * row, burst, rows)
        return rows_transfer_cycles(rows, row, burst, window, lat, cpb)

    moved = sum(engine_paced_cycles(model.idma, rows * row, row, cost(rows, row),
                                    lambda b: cost(1, b)) for rows, row in blocks)
    estimate = model.idma.setup_cycles + handler + moved
    beat = _ways_path(ext, ways, burst, burst)
    requests = sum(rows * math.ceil(row / burst) for rows, row in blocks)
    out.update({"descriptors": len(blocks), "requests": requests,
                "outstanding_bytes_per_cycle": window * burst / (lat + beat)})
    return estimate


def rows_transfer_cycles(rows: int, row_bytes: int, burst_bytes: int, window: int,
                         latency_cycles: float, cycles_per_byte: float) -> float:
    """A descriptor of ``rows`` rows of ``row_bytes`` alone on the port: :func:`transfer_cycles`
    for rows of whole bursts (or one row), else the recurrence over its bursts cut at row ends
    (issued when the window has room, each done ``L`` after its data)."""
    if rows == 1 or row_bytes % burst_bytes == 0:
        return transfer_cycles(rows * row_bytes, burst_bytes, window, latency_cycles,
                               cycles_per_byte)
    full, rest = divmod(row_bytes, burst_bytes)
    sizes = ([burst_bytes] * full + [rest]) * rows
    done: deque[float] = deque(maxlen=window)
    path = 0.0
    for size in sizes:
        issue = done[0] if len(done) == window else 0.0
        path = max(issue, path) + size * cycles_per_byte
        done.append(path + latency_cycles)
    return done[-1]


def _chain(model: Any) -> Any:
    """Between two external ends, ``chain(a, b) = L_src + a / B_src + L_dst + b / B_dst`` (``a``
    bytes read, then ``b`` written: a burst is written once read); with a TCM end, 0."""
    p = model.copy
    src, dst = memory_of(model, p.src), memory_of(model, p.dst)
    if src is None or dst is None:
        return lambda a, b: 0.0
    read, write, burst = src.policy.latency(False), dst.policy.latency(True), model.idma.burst_bytes
    return lambda a, b: (read + src.policy.stream_path_cycles(a, burst, False) + write
                         + dst.policy.stream_path_cycles(b, burst, True))  # in the bursts


def _two_ended_descriptor(model: Any, legs: list[tuple[Any, int]]) -> Any:
    """A descriptor's cycles between two external ends: its first burst's round trip ``T``, then
    its other bytes at the least of the window's rate (``k`` bursts per ``T``), each port's
    slots' and each port's data path's."""
    burst, k = model.idma.burst_bytes, model.idma.max_outstanding

    def trip(b: int) -> float:
        return sum(_held(m, w, 1, b) for m, w in legs)

    def path_rate(m: Any, w: tuple[bool, ...]) -> float:
        if m.policy.linear:
            return m.policy.bytes_per_cycle
        return len(w) * burst / _ways_path(m, w, burst, burst)

    # a port's request holds its slot a request's time, on average over the ways through it
    rate = min(k * burst / trip(burst), *(min(m.max_outstanding * burst
                                              / (_held(m, w, 1, burst) / len(w)),
                                              path_rate(m, w)) / len(w) for m, w in legs))
    return lambda d, first: trip(first) + max(0, d - first) / rate


def _memcpy_estimate(model: Any, calls: list[int], n: int, out: dict[str, Any]) -> float:
    """The memcpy calls of ``calls`` bytes each and the ``MEMW`` after them, without the
    prologue: per line through the data cache, else each call's walk (every load stalls)."""
    p = model.copy
    ends = [m for m in (memory_of(model, p.src), memory_of(model, p.dst))
            if m is not None and not m.core_local]  # a memory on the core's own bus: no port
    ext = ends[0] if ends else memory_of(model, p.src) or memory_of(model, p.dst)
    if ext.cached and model.dcache.capacity_bytes:
        return _memcpy_cached(model, ext, len(calls), n, out)
    return _memcpy_uncached(model, ext, calls, n)


def _memcpy_cached(model: Any, ext: Any, calls: int, n: int, out: dict[str, Any]) -> float:
    """``n`` bytes in ``calls`` memcpy calls through the cache in front of ``ext``: ``lines x
    (F + M) + iterations x II + calls x O`` (``F`` a line's fill, ``M`` =
    ``dcache.miss_cycles``); with a next-line prefetch the fills overlap the loop."""
    p, core = model.copy, model.core
    policy = ext.policy  # what a request costs (dspsim.hw.policy)
    line = model.dcache.line_bytes
    lines = math.ceil(n / line)
    out["lines"] = lines
    fill = policy.request_cycles(line, False)
    dst = memory_of(model, p.dst)
    moved = out["traffic_bytes"]  # the run's traffic (bounds())
    extra = (0.0 if dst is None or dst.core_local
             else _store_lines_cycles(model, n, dst, moved))
    if p.memcpy_access_bytes:  # a word loop (copy.memcpy_access_bytes)
        issue = n // p.memcpy_access_bytes * p.memcpy_cycles_per_iteration
    else:
        issue = MEMCPY.iterations(n // 4, core.lanes_f32) * MEMCPY.ii_cycles(core)
    miss = model.dcache.miss_cycles  # a demand miss's own cost besides its fill
    ahead = prefetches(model.dcache, _streams(model))  # else every line a demand miss
    if extra:  # a line's stores issue while its evicted line is written back (demand misses:
        # also during the miss's own cycles, and the next source line's on another port)
        hide = issue / lines + (0.0 if ahead else miss + (fill + miss) * (ext is not dst))
        extra -= min(hide, _ways_path(dst, (True,), line, line)) * \
            _evicted_bytes(model, "memcpy", n, moved) // line
    if ahead:  # two demand misses (the second starts the stream),
        # then a line's first use prefetches the next: the port's data path line after line,
        # or two lines in flight per fill and a line's issue
        per_line = issue / lines
        ahead = max((lines - 1) * _ways_path(ext, (False,), line, line)
                    + min(1, lines - 1) * policy.latency(False),
                    min(1, lines - 1) * (fill + miss)
                    + max(0, lines - 2) * max(per_line, (fill + per_line) / 2))
        return (core.call_overhead_cycles * calls + fill + miss + 2 * per_line + ahead + extra)
    return (core.call_overhead_cycles * calls + lines * (fill + miss) + issue + extra)


def _memcpy_uncached(model: Any, ext: Any, calls: list[int], n: int) -> float:
    """Each memcpy call's walk on ``ext`` (every vector load stalls), then the ``MEMW``."""
    p, core, policy = model.copy, model.core, ext.policy
    load_ext = memory_of(model, p.src) is not None
    store_ext = memory_of(model, p.dst) is not None
    cycles = sum(ddr_call(MEMCPY, memcpy_words(d), core, policy, load_ext, store_ext,
                          ext.max_outstanding).cycles for d in calls)
    if not store_ext:
        return cycles
    # MEMW: the last store done L after its data; stores alone stream through min(E, m) slots
    words = memcpy_words(n)
    store = last_stores(MEMCPY, words, core.lanes_f32)[-1]
    drained = cycles + _ways_path(ext, (True,), store, store) + policy.latency(True)
    if load_ext:
        return drained
    return max(drained, core.call_overhead_cycles + MEMCPY.ii_cycles(core)
               + policy.transfer_cycles(4 * words, core.vector_bytes,
                                        min(core.write_buffer_entries, ext.max_outstanding), True))


def _store_lines_cycles(model: Any, n: int, mem: Any, moved: dict[str, int]) -> float:
    """What a memcpy's stores to ``mem`` add through a write-back, write-allocate cache: each
    missed line filled first (blocking; only when the source is external too), and the dirty
    lines written back inside the span (``moved``: the run's traffic)."""
    if not _allocates(model, "memcpy", mem):
        return 0.0
    p, dc = model.copy, model.dcache
    line, pol = dc.line_bytes, mem.policy
    name = memory_name(model, p.dst)
    src = memory_of(model, p.src)
    fills = 0.0
    if src is not None and not src.core_local:  # the source's lines are counted already
        fills = math.ceil(n / line) * (pol.request_cycles(line, False)
                                       + dc.miss_cycles)
    written = moved[f"{name}_write"]
    if not written:
        return fills
    return fills + pol.latency(True) + _ways_path(mem, (True,), written, line)


def _evicted_bytes(model: Any, variant: str, n: int, moved: dict[str, int]) -> int:
    """The destination's dirty bytes a core copy evicts before any flush (``moved``: the run's
    traffic, used when the run does not flush)."""
    name = memory_name(model, model.copy.dst)
    if model.copy.flush_destination:
        moved = traffic(model.with_overrides({"copy.flush_destination": False}), variant, n)
    return moved[f"{name}_write"]


def _streams(model: Any) -> int:
    """The line streams a core copy's ends bring into the cache (a cached source, a
    write-allocate write-back destination): past ``dcache.prefetch_streams``, none followed."""
    p, dc = model.copy, model.dcache
    mems = [(memory_of(model, where), write) for where, write in ((p.src, False),
                                                                  (p.dst, True))]
    return sum(1 for m, write in mems if m is not None and m.cached and dc.capacity_bytes
               and (not write or dc.write_allocate and dc.write_policy == "write_back"))


def loop_compute_cycles(model: Any, n: int, variant: str = "loop") -> float:
    """The loop's cycles when nothing misses: ``(n / K) x C`` and each call's overhead (one per
    piece into a TCM ring); the run between two TCM ends. A memcpy's word loop likewise."""
    p = model.copy
    pl = plan(model, p, n)
    calls = 1 if pl.one_call else pl.pieces
    k, c = ((p.access_bytes, p.loop_cycles_per_iteration) if variant == "loop"
            else (p.memcpy_access_bytes, p.memcpy_cycles_per_iteration))
    return calls * model.core.call_overhead_cycles + n // k * c


def _loop_estimate(model: Any, n: int, compute: float, moved: dict[str, int]) -> float:
    """The loop's estimate without the prologue: its compute and each line fill (or uncached
    load's round trip) in turn (a next-line prefetch: the larger of compute and fills; more
    streams than it follows: each line a demand miss, its fill and ``dcache.miss_cycles``); a
    flush's data; on a one-transaction port the write-backs between the fills, less the loop's
    cycles per evicted line (posted: the loop goes on while they drain); stores posted to a
    port, at least the write buffer's drain (each holds an entry its round trip)."""
    p, dc = model.copy, model.dcache
    k = p.access_bytes
    stall = data = drain = 0.0
    # else every line a demand miss (one line: its miss only starts the stream)
    ahead = prefetches(dc, _streams(model)) and n > dc.line_bytes
    for where, write in ((p.src, False), (p.dst, True)):
        mem = memory_of(model, where)
        if mem is None or mem.core_local:
            continue
        pol = mem.policy
        cached = mem.cached and dc.capacity_bytes and (not write or dc.write_policy ==
                                                       "write_back")
        if cached and (not write or dc.write_allocate):
            lines = math.ceil(n / dc.line_bytes)
            line = dc.line_bytes
            stall += lines * (pol.request_cycles(line, False) + (0.0 if ahead else
                                                                  dc.miss_cycles))
            data += _ways_path(mem, (False,), n, line)
            if write and p.flush_destination:
                stall += pol.latency(True) + _ways_path(mem, (True,), n, line)
            if write and not pol.linear:
                evicted = _evicted_bytes(model, "loop", n, moved)
                if not p.flush_destination:  # evicted dirty lines, one transaction each
                    stall += _ways_path(mem, (True,), evicted, line)
                # a line's compute while its evicted line is written
                stall -= (min(compute / lines, _ways_path(mem, (True,), line, line))
                          * (evicted // line))
        elif not write:
            pieces = max(1, k // 16) if k > 16 else 1
            stall += (n // k * pieces * pol.latency(False)
                      + _ways_path(mem, (False,), n, min(k, 16)))
        else:  # posted stores: a full write buffer paces the loop at its drain
            piece = pieces_of(k, model.core.scalar_access_bytes)
            hold = pol.request_cycles(piece[0], True)  # a store holds its entry
            drain = max(drain, n // k * len(piece) * max(
                hold / model.core.write_buffer_entries, _ways_path(mem, (True,), piece[0], k)))
            stall += hold  # MEMW: the last store
    if ahead and data:
        return max(compute, data) + stall / max(1, math.ceil(n / dc.line_bytes))
    return max(compute + stall, drain)
