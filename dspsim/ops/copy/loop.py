"""The copy's ``loop`` variant: a core loop of known cost through the memory system.

Each iteration loads ``K`` = ``copy.access_bytes`` bytes then stores them (``K = 32``: two
16-byte vector loads, two stores, as the ESP32-S3 PIE loop) and costs ``C`` =
``copy.loop_cycles_per_iteration`` when nothing misses. As the core's kernel walk
(:mod:`dspsim.hw.core`): the load issues, the core waits for its data, ``C`` cycles pass, the
store leaves at the iteration's end.

- Uncached end (or ``write_through`` destination): every access a port request; a load blocks
  for its round trip, a store is posted to the write buffer (``core.write_buffer_entries``;
  full: the core waits for the oldest).
- Cached end (:mod:`dspsim.hw.dcache`): a missing line stalls a load for its fill; a store
  into a missing line fetches it (``dcache.write_allocate``) or, without allocation, goes
  through the write buffer; evicted dirty lines are posted write-backs (a later fill queues
  behind them).
- TCM: no request.

Only iterations whose access reaches the cache with a new line, or a port, are visited (and,
after one that brought a line in, the next: it may have evicted the other end's line, as when
source and destination share a direct-mapped set); those between are ``C x count`` cycles at
once. Burst and tile run the walk alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dspsim.hw.clock import Walk, WalkState
from dspsim.hw.memory import Ptr
from dspsim.ops.frames import Proc
from dspsim.ticks import ticks

if TYPE_CHECKING:
    from dspsim.hw.core import Core

VECTOR_BYTES = 16  # K = 32 is two accesses of this many bytes


def pieces_of(access_bytes: int, scalar_bytes: int = 0) -> tuple[int, ...]:
    """The accesses of one iteration's load (and store): 16-byte vectors for ``K > 16``; scalar
    accesses of ``scalar_bytes`` (``core.scalar_access_bytes``, 0: none) when ``K`` lies between
    (the LX7's 64-bit loop: two 32-bit loads, two stores); else one of ``K``."""
    if access_bytes > VECTOR_BYTES:
        return (VECTOR_BYTES,) * (access_bytes // VECTOR_BYTES)
    if 0 < scalar_bytes < access_bytes < VECTOR_BYTES:
        return (scalar_bytes,) * (access_bytes // scalar_bytes)
    return (access_bytes,)


class _End:
    """One end of the loop: which iterations reach the cache or a port, and what they cost."""

    def __init__(self, ptr: Ptr, access_bytes: int, cache: Any, write: bool,
                 scalar_bytes: int = 0):
        self.ptr, self.k, self.cache = ptr, access_bytes, cache
        self.mem = ptr.mem
        self.pieces = pieces_of(access_bytes, scalar_bytes)
        # a memory the core reaches on its own bus (core_local) is as TCM: no request
        self.reached = ptr.external and not ptr.mem.core_local
        self.cached = bool(self.reached and ptr.mem.cached and cache is not None
                           and (not write or cache.write_back))
        self.direct = self.reached and not self.cached  # every access a request
        self.posted = False  # the last store bypassed the cache (no allocation)

    def first(self, iterations: int) -> int:
        return 0 if self.reached else iterations

    def next_event(self, j: int, iterations: int) -> int:
        """The first iteration after ``j`` reaching a port or a new cache line (``iterations``:
        none)."""
        if self.direct or self.posted:
            return j + 1
        if not self.cached:
            return iterations
        line, addr, k = self.cache.line_bytes, self.ptr.addr, self.k
        last_line = (addr + j * k + k - 1) // line
        return min(iterations, max(j + 1, -(-((last_line + 1) * line - addr) // k)))

    def load(self, now: int, j: int, name: str) -> int:
        """Iteration ``j``'s load issued at ``now``: the cycle its data is there."""
        addr = self.ptr.addr + j * self.k
        for nbytes in self.pieces:  # one after another: each blocks
            if self.cached:
                now = max(now, self.cache.access(now, self.mem, addr, nbytes, False, name))
            else:
                now = max(now, self.mem.port.request(now, nbytes, False, name))
            addr += nbytes
        return now


def _store(end: _End, now: int, j: int, name: str, wb: Any, depth: int,
           state: WalkState) -> Walk:
    """Iteration ``j``'s store at ``now`` (``state.now``), into its lines or posted; its waits
    are store stalls."""
    addr = end.ptr.addr + j * end.k
    end.posted = False
    for nbytes in end.pieces:
        ready = end.cache.store(now, end.mem, addr, nbytes, name) if end.cached else None
        if ready is None:
            end.posted = end.cached
            if len(wb) == depth:  # full: wait for the oldest posted store
                ready = wb.popleft()
        if ready is not None and ready > now:
            state.stall += ready - now
            state.store_stall += ready - now
            now = ready
            yield now
            state.now = now
        if end.cached and not end.posted:
            addr += nbytes
            continue
        wb.append(end.mem.port.request(now, nbytes, True, name))
        addr += nbytes


def loop_walk(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
              cycles_per_iteration: float, state: WalkState) -> Walk:
    """The loop over ``nbytes`` from ``state.now`` (module doc), yielding each later time the
    core waits for; ``state`` ends at the loop's end, with its stalls."""
    iterations, c = nbytes // access_bytes, ticks(cycles_per_iteration)
    scalar = core.cfg.scalar_access_bytes
    load = _End(src, access_bytes, core.dcache, False, scalar)
    store = _End(dst, access_bytes, core.dcache, True, scalar)
    wb, depth = core.write_buffer, core.cfg.write_buffer_entries
    nl, ns = load.first(iterations), store.first(iterations)
    cache = core.dcache
    fills = cache.misses + cache.prefetches if cache is not None else 0
    j = min(nl, ns)
    now = state.now + ticks(core.cfg.call_overhead_cycles) + c * j
    while j < iterations:
        if j == nl:
            if now > state.now:
                yield now
                state.now = now
            ready = load.load(now, j, core.name)
            state.stall += ready - now
            now = ready
            nl = load.next_event(j, iterations)
        now += c
        if j == ns:
            yield now
            state.now = now
            yield from _store(store, now, j, core.name, wb, depth, state)
            now = state.now
            ns = store.next_event(j, iterations)
        if cache is not None and cache.misses + cache.prefetches != fills:
            # a line came in: it may have evicted the other end's line (a conflict), so the
            # next iteration goes through the cache again; one that fills nothing leaves it
            # as it found it, and so would every later one on the same lines
            fills = cache.misses + cache.prefetches
            nl = min(nl, j + 1) if load.cached else nl
            ns = min(ns, j + 1) if store.cached else ns
        nxt = min(nl, ns)
        now += c * (nxt - j - 1)
        j = nxt
    state.now = now


def _process(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
             cycles_per_iteration: float) -> Proc:
    state = WalkState(core.env.now)
    walk = loop_walk(core, src, dst, nbytes, access_bytes, cycles_per_iteration, state)
    return (yield from core.drive_walk(walk, state, src, dst))


def loop_copy(core: Core, src: Ptr, dst: Ptr, nbytes: int, access_bytes: int,
              cycles_per_iteration: float) -> Proc:
    """The loop as one core call: a process when it reaches a port, else one timeout; books
    its busy and stall cycles."""
    env, start = core.env, core.env.now
    core.accesses.begin(core.name, start)
    if src.external or dst.external:
        stall, store_stall = yield env.process(_process(core, src, dst, nbytes, access_bytes,
                                                             cycles_per_iteration))
        load_mem = src.mem if src.external else None
        store_mem = dst.mem if dst.external else None
        core.book_stall(load_mem or store_mem, stall - store_stall)
        core.book_stall(store_mem or load_mem, store_stall)
    else:
        yield env.timeout(ticks(core.cfg.call_overhead_cycles)
                          + nbytes // access_bytes * ticks(cycles_per_iteration))
        stall = 0
    core.compute_ticks += env.now - start - stall
    end = env.now
    for ptr, write in ((src, False), (dst, True)):
        core.accesses.add(core.name, ptr.mem.name, ptr.addr, nbytes, write, start, end,
                          "copy_loop", core.labels.tile, core.labels.pass_name)
    core.accesses.finish(core.name, end)
    core.recorder.record(core.name, "compute", "copy_loop", start, end, nbytes,
                         core.labels.tile, core.labels.pass_name, core.labels.buffer, stall)


def flush(core: Core, dst: Ptr, nbytes: int) -> Proc:
    """``esp_cache_msync``: the destination's dirty lines written back, the wait for the last a
    stall on its memory."""
    cache, env = core.dcache, core.env
    if cache is None or not (dst.external and dst.mem.cached and cache.write_back):
        return
    start = env.now
    done = cache.clean(start, dst.mem, dst.addr, nbytes, core.name)
    if done > start:
        yield env.timeout(done - start)
        core.book_stall(dst.mem, done - start)
        core.recorder.record(core.name, "compute", "cache_flush", start, env.now, 0,
                             core.labels.tile, core.labels.pass_name, core.labels.buffer,
                             done - start)
