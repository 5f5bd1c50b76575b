"""The core's data cache, in front of the memories the platform marks ``cached``.

Set-associative, LRU, ``dcache.line_bytes`` lines; a vector access goes through it line by line.
A line present (or on its way) costs only waiting for it; a missing line is fetched whole from
its memory's port and the core waits. ``write_back``: a store dirties its line (a store miss
fetches it first, unless ``write_allocate = false``: then it goes through the core's write
buffer); a dirty victim is written back whole, posted at eviction. ``write_through``: stores go
through the write buffer as uncached stores. ``prefetch_next_line`` fetches line ``k + 1`` (no
wait) on a miss of line ``k`` and on the first use of a line it prefetched. With
``prefetch_streams`` S > 0 at most S streams are followed (LRU makes room): a demand miss on a
stream's expected line continues it, any other miss starts a stream fetching nothing yet, and a
prefetched line's first use goes on only while its stream is followed. ``miss_cycles``: what a
demand miss costs besides its fill; a line prefetched before use does not pay it.

One dictionary look-up per line touched, no event: the core waits on the times returned. Dirty
lines stay at the end of a run (``dirty_lines``) unless it cleans them (:meth:`DataCache.clean`).
"""

from __future__ import annotations

from typing import Any

from dspsim.config import Dcache
from dspsim.ticks import ticks


class DataCache:
    """The cache's sets, prefetch streams and counters (times in ticks)."""

    __slots__ = ("line_bytes", "ways", "set_count", "write_back", "allocate", "prefetch", "_sets",
                 "hits", "misses", "prefetches", "writebacks", "fill_bytes", "miss_ticks",
                 "stream_entries", "_streams", "_delta")

    def __init__(self, cfg: Dcache):
        self.line_bytes = cfg.line_bytes
        self.ways = cfg.ways
        self.set_count = cfg.capacity_bytes // (cfg.line_bytes * cfg.ways)
        self.write_back = cfg.write_policy == "write_back"
        self.allocate = cfg.write_allocate
        self.prefetch = cfg.prefetch_next_line
        self.miss_ticks = ticks(cfg.miss_cycles)  # (dspsim.hw.clock)
        # the streams the prefetcher follows (0: none tracked, every miss prefetches): the line
        # each expects next, least recently used first
        self.stream_entries = cfg.prefetch_streams
        self._streams: dict[int, None] = {}
        # per set: line index less _delta -> [ready cycle, dirty, prefetched and not yet used,
        # memory], in LRU order (a dict keeps insertion order: a use moves the line to the end);
        # line k is in set k % set_count (a shift moves every line on by moving _delta on and
        # turning the list of sets, the sets themselves untouched)
        self._sets: list[dict[int, list[Any]]] = [{} for _ in range(self.set_count)]
        self._delta = 0
        self.hits = self.misses = self.prefetches = self.writebacks = 0
        self.fill_bytes = 0

    def access(self, now: int, mem: Any, addr: int, nbytes: int, write: bool,
               requester: str) -> int:
        """The bytes ``addr .. addr + nbytes`` of ``mem`` through the cache at ``now`` (a load,
        or a write-back store): return when the data is there."""
        ready = now
        line_bytes = self.line_bytes
        for line in range(addr // line_bytes, (addr + nbytes - 1) // line_bytes + 1):
            t = self._line(now, mem, line, write, requester)
            if t > ready:
                ready = t
        return ready

    def store(self, now: int, mem: Any, addr: int, nbytes: int, requester: str
              ) -> int | None:
        """A store into a write-back cache at ``now``: when its lines are there, or ``None`` for
        a miss with ``write_allocate`` off (the caller posts it through the write buffer)."""
        if not self.allocate:
            line_bytes = self.line_bytes
            for line in range(addr // line_bytes, (addr + nbytes - 1) // line_bytes + 1):
                if line - self._delta not in self._sets[line % self.set_count]:
                    return None
        return self.access(now, mem, addr, nbytes, True, requester)

    def clean(self, now: int, mem: Any, addr: int, nbytes: int, requester: str) -> int:
        """Write back every dirty line of ``mem`` in ``addr .. addr + nbytes`` at ``now`` (a
        request each, in address order; lines stay, clean): return when the last is done."""
        line_bytes = self.line_bytes
        first, last = addr // line_bytes, (addr + nbytes - 1) // line_bytes
        delta = self._delta
        dirty = sorted((key + delta, e) for lines in self._sets for key, e in lines.items()
                       if e[1] and e[3] is mem and first <= key + delta <= last)
        done = now
        for _, entry in dirty:
            entry[1] = False
            self.writebacks += 1
            done = max(done, mem.port.request(now, line_bytes, True, requester))
        return done

    def _line(self, now: int, mem: Any, line: int, write: bool, requester: str) -> int:
        lines, key = self._sets[line % self.set_count], line - self._delta
        entry = lines.pop(key, None)
        if entry is not None:
            lines[key] = entry  # most recently used
            self.hits += 1
            if write:
                entry[1] = True
            if entry[2]:  # first use of a prefetched line: the stream goes on
                entry[2] = False
                if self._goes_on(line + 1, line + 2):  # the stream that prefetched it
                    self._prefetch(now, mem, line + 1, requester)
            return entry[0]
        self.misses += 1
        done = self._fill(now, mem, line, requester) + self.miss_ticks
        self._insert(now, line, [done, write, False, mem], requester)
        if self.prefetch and self._continues(line):
            self._prefetch(now, mem, line + 1, requester)
        return done

    def _continues(self, line: int) -> bool:
        """A demand miss of ``line`` continues a followed stream (always, when none is tracked);
        one that does not starts a stream in the least recently used entry."""
        if self._goes_on(line, line + 2):
            return True
        streams = self._streams
        if len(streams) >= self.stream_entries:
            del streams[next(iter(streams))]
        streams[line + 1] = None
        return False

    def _goes_on(self, line: int, expected: int) -> bool:
        """A followed stream expects ``line`` (always, when none is tracked): it goes on,
        expecting ``expected`` next."""
        if not self.stream_entries:
            return True
        streams = self._streams
        if streams.pop(line, 0) is None:
            streams[expected] = None
            return True
        return False

    def _fill(self, now: int, mem: Any, line: int, requester: str) -> int:
        self.fill_bytes += self.line_bytes
        return mem.port.request(now, self.line_bytes, False, requester)

    def _insert(self, now: int, line: int, entry: list[Any], requester: str) -> None:
        lines = self._sets[line % self.set_count]
        if len(lines) >= self.ways:
            victim = next(iter(lines))
            _, dirty, _, victim_mem = lines.pop(victim)
            if dirty:  # posted: the core does not wait for a write-back
                self.writebacks += 1
                victim_mem.port.request(now, self.line_bytes, True, requester)
        lines[line - self._delta] = entry

    def _prefetch(self, now: int, mem: Any, line: int, requester: str) -> None:
        addr = line * self.line_bytes
        if line - self._delta in self._sets[line % self.set_count] or not (
                mem.base <= addr and addr + self.line_bytes <= mem.base + mem.size_bytes):
            return
        self.prefetches += 1
        done = self._fill(now, mem, line, requester)
        self._insert(now, line, [done, False, True, mem], requester)

    COUNTERS = ("hits", "misses", "prefetches", "writebacks", "fill_bytes")

    def relative_state(self, now: int, base: int) -> tuple:
        """What a later access can tell, relative to ``now`` and line ``base``: the sets from
        ``base``'s on, each set's lines in LRU order (line less ``base``, ready less ``now`` if
        after it, dirty, prefetched and unused, memory), and the streams' expected lines less
        ``base``. The cache does the same to lines moved on by any number (sets move along)."""
        count, held, off = self.set_count, self._sets, self._delta - base
        start = base % count
        sets = tuple([tuple([(key + off, r - now if r > now else None, d, f, m)
                             for key, (r, d, f, m) in held[k].items()])
                      for k in (*range(start, count), *range(start))])
        return sets, tuple(x - base for x in self._streams)

    def lines_held(self) -> int:
        return sum(len(lines) for lines in self._sets)

    def top_lines(self) -> dict[Any, int]:
        """Per memory, the highest line the cache holds."""
        top: dict[Any, int] = {}
        lowest = float("-inf")  # (a key is a line less _delta: it may be negative)
        for lines in self._sets:
            for key, entry in lines.items():
                if key > top.get(entry[3], lowest):
                    top[entry[3]] = key
        return {mem: key + self._delta for mem, key in top.items()}

    def shift(self, lines: int, now: int, dt: int) -> None:
        """Move every line held and expected on by ``lines`` (each to its new set), and what is
        ready after ``now`` by ``dt``."""
        turn = lines % self.set_count  # set k gets what set k - lines held
        if turn:
            self._sets = self._sets[-turn:] + self._sets[:-turn]
        self._delta += lines
        for held in self._sets:
            for entry in held.values():
                if entry[0] > now:
                    entry[0] += dt
        self._streams = dict.fromkeys(x + lines for x in self._streams)

    def stats(self) -> dict[str, int]:
        """Lines hit, missed (fetched because an access needed it), prefetched, written back,
        dirty at the end; bytes fetched."""
        return {"hits": self.hits, "misses": self.misses, "prefetches": self.prefetches,
                "writebacks": self.writebacks, "fill_bytes": self.fill_bytes,
                "dirty_lines": sum(e[1] for lines in self._sets for e in lines.values())}
