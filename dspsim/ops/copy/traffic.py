"""The bytes a copy moves through each memory's port, exactly as a lone run counts them, keyed
as a run's ``bytes`` (``<memory>_read``, ``<memory>_write``). ``idma`` reads ``n`` from the
source's memory and writes ``n`` to the destination's (TCM: none). ``memcpy`` counts the
kernel's vector loads and stores (:func:`memcpy_words`: up to 3 bytes past ``n``) at an uncached
end; a cached end moves whole lines: the loads', with ``write_back`` the stores' too
(write-allocate) and evicted dirty lines, with ``prefetch_next_line`` its prefetches;
``write_through`` stores go out as they are. Which lines move follows from a lone run's
placement (:func:`placement`) and the cache's replacement, replayed through
:class:`dspsim.hw.dcache.DataCache` with counting ports (which lines move does not depend on
when), one access per change of the lines the next load and store touch. ``loop`` (and
``memcpy`` with ``copy.memcpy_access_bytes``) is as ``memcpy`` with ``n / copy.access_bytes``
accesses each way; a write-back destination without ``dcache.write_allocate`` takes no line
for a store. A ``core_local`` memory carries none of a core copy's accesses. With
``copy.flush_destination`` (memcpy, loop) the destination's dirty lines are written back at
the end, whole lines each.
"""

from __future__ import annotations

from typing import Any

from dspsim.arrays import HOST_ALIGN_BYTES, ddr_window_bytes
from dspsim.hw.dcache import DataCache
from dspsim.kernels.memcpy import MEMCPY, memcpy_words
from dspsim.ops.base import HOST, TCM, align_up, memory_name
from dspsim.ops.copy.program import ALIGN_BYTES, plan


def traffic(model: Any, variant: str, n: int) -> dict[str, int]:
    """The bytes each memory's port carries in a lone run of the copy (module doc)."""
    counts = {f"{m}_{way}": 0 for m in model.memories for way in ("read", "write")}
    p = model.copy
    src, dst = memory_name(model, p.src), memory_name(model, p.dst)
    if variant == "idma":
        if src is not None:
            counts[f"{src}_read"] += n
        if dst is not None:
            counts[f"{dst}_write"] += n
        return counts
    _Replay(model, counts, variant == "loop").run(n)
    return counts


def placement(model: Any, n: int) -> tuple[int, int]:
    """The source's and destination's addresses in a lone run (0: TCM): the host's input,
    output and parameter blocks 4096-aligned from its memory's base, then the source and
    destination 128-aligned from the top of their memory (the host's: after those blocks)."""
    p, words_bytes = model.copy, align_up(n, 4)
    host = model.host.memory
    base = model.memories[host].base_address
    tops = {name: mem.base_address for name, mem in model.memories.items()}
    host_in = align_up(base, HOST_ALIGN_BYTES)
    window = ddr_window_bytes(words_bytes)  # input, output (aligned alike), parameter block
    host_out = host_in + align_up(words_bytes, HOST_ALIGN_BYTES)
    tops[host] = host_in + window
    out = []
    for where, nbytes, at_host in ((p.src, words_bytes, host_in),
                                   (p.dst, align_up(plan(model, p, n).dst_bytes, 4), host_out)):
        if where in (HOST, TCM):
            out.append(at_host if where == HOST else 0)
            continue
        start = align_up(tops[where], ALIGN_BYTES)
        tops[where] = start + nbytes
        out.append(start)
    return out[0], out[1]


class _Port:
    """A memory as the data cache sees it, its port counting what crosses it."""

    def __init__(self, name: str, cfg: Any, counts: dict[str, int]):
        self.name, self.base, self.size_bytes = name, cfg.base_address, cfg.size_bytes
        self.counts = counts
        self.port = self

    def request(self, now: float, nbytes: int, write: bool, requester: str = "") -> float:
        self.counts[f"{self.name}_{'write' if write else 'read'}"] += nbytes
        return now


class _Replay:
    """The memcpy calls' loads and stores, the cached ones through a data cache."""

    def __init__(self, model: Any, counts: dict[str, int], loop: bool = False):
        p, dc = model.copy, model.dcache
        self.model, self.counts = model, counts
        # a loop's access bytes (memcpy run as a word loop: copy.memcpy_access_bytes); 0: the
        # core's vector memcpy kernel
        self.loop_bytes = p.access_bytes if loop else p.memcpy_access_bytes
        self.cache = DataCache(dc) if dc.capacity_bytes else None
        self.line = dc.line_bytes
        self.ends = []
        ports: dict[str, _Port] = {}  # one per memory, as the run's (a line knows its memory)
        for where, write in ((p.src, False), (p.dst, True)):
            name = memory_name(model, where)
            mem = None if name is None else model.memories[name]
            if mem is not None and mem.core_local:  # the core's own bus: no port, as TCM
                name, mem = None, None
            through = (mem is not None and mem.cached and self.cache is not None
                       and (not write or (self.cache.write_back and self.cache.allocate)))
            port = ports.setdefault(name, _Port(name, mem, counts)) if through else None
            self.ends.append((name, port, write))

    def run(self, n: int) -> None:
        p = self.model.copy
        pl = plan(self.model, p, n)
        src, dst = placement(self.model, n)
        if pl.one_call:
            self._piece(n, src, dst)
        else:
            for i in range(pl.pieces):
                self._piece(pl.size(i), src + pl.src_offset(i), dst + pl.dst_offset(i))
        _, port, _ = self.ends[1]
        if p.flush_destination and port is not None:  # esp_cache_msync of the destination
            self.cache.clean(0.0, port, dst, pl.dst_bytes, "")

    def _piece(self, nbytes: int, src: int, dst: int) -> None:
        if not self.loop_bytes:
            self._call(memcpy_words(nbytes), src, dst)
            return
        k = self.loop_bytes
        self._uncached(nbytes, nbytes)
        self._lines(nbytes // k, (src, k), (dst, k))

    def _uncached(self, load_bytes: int, store_bytes: int) -> None:
        """The bytes of the uncached ends, counted as they are."""
        for (name, port, write), nbytes in zip(self.ends, (load_bytes, store_bytes)):
            if name is not None and port is None:
                self.counts[f"{name}_{'write' if write else 'read'}"] += nbytes

    def _call(self, words: int, src: int, dst: int) -> None:
        lanes = self.model.core.lanes_f32
        for count, loads, stores in MEMCPY.segments(words, lanes):
            (load,), (store,) = loads, stores
            self._uncached(count * load, count * store)
            self._lines(count, (src, load), (dst, store))
            src, dst = src + count * load, dst + count * store

    def _lines(self, count: int, *accesses: tuple[int, int]) -> None:
        """``count`` iterations of a vector load and store (address, bytes) through the cache.
        On unchanged lines, an iteration that fills nothing (hits only, those lines already
        the most recent) leaves the cache as it was, as would every later one: the walk skips
        to the next change of lines."""
        cached = [(port, addr, nbytes, write) for (_, port, write), (addr, nbytes)
                  in zip(self.ends, accesses) if port is not None]
        if not cached:
            return
        cache, line, j = self.cache, self.line, 0
        while j < count:
            nxt = count
            for _, addr, nbytes, _ in cached:  # the next vector whose first or last line moves
                for edge in (addr + j * nbytes, addr + (j + 1) * nbytes - 1):
                    nxt = min(nxt, j + -(-((edge // line + 1) * line - edge) // nbytes))
            while j < nxt:
                fills = cache.misses + cache.prefetches
                for port, addr, nbytes, write in cached:
                    cache.access(0.0, port, addr + j * nbytes, nbytes, write, "")
                j = nxt if cache.misses + cache.prefetches == fills else j + 1
