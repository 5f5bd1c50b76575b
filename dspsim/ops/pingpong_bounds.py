"""Closed-form estimate of one pass of the seed's ping-pong frame
(:func:`dspsim.ops.frames.hb_dsp_ping_pong_frame`) for tiles whose kernels cost a known number
of cycles: the seed's softmax (three passes), the row-wise and file ops (one).

Requests are priced by the host memory's policy (:mod:`dspsim.hw.policy`). A pass of ``T``
tiles takes the larger of two forms. *Path*: its bytes at the two channels' joint throughput
``min(B, min(m, 2k) b / (L + b/B))`` (or one channel's share at its own, if longer), plus a
round trip, the setups ``S`` and the last tile's compute. *Staged*: the first tile's copy,
then per tile the largest of the core's work on the previous one, half a buffer's round trip
(the two buffers alternate) and, under 'split', one channel carrying every input (output);
then the last tile's compute and output copy. One tile is serial. When the timer stops after
a two-tile pass, tile 0's output beyond what crosses beside the last one is left out: nothing
waits for it. Every tile but the last is full, so every sum is a closed form over two sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dspsim.hw.policy import engine_paced_cycles

if TYPE_CHECKING:
    from dspsim.config import HardwareModel


@dataclass(frozen=True)
class Tiling:
    """A pass's tiles: ``full`` tiles of ``size`` elements, then one of ``rest`` if non-zero."""

    size: int
    full: int
    rest: int

    @classmethod
    def of(cls, n: int, tile_elems: int) -> Tiling:
        full, rest = divmod(n, tile_elems)
        return cls(tile_elems, full, rest)

    @property
    def elems(self) -> int:
        return self.full * self.size + self.rest

    @property
    def count(self) -> int:
        return self.full + (1 if self.rest else 0)

    def at(self, i: int) -> int:
        """Elements of tile ``i``."""
        return self.size if i < self.full else self.rest

    def total(self, f: Callable[[int], float]) -> float:
        """``f(elements)`` summed over the tiles."""
        return self.full * f(self.size) + (f(self.rest) if self.rest else 0)

    def parity_elems(self, j: int, p: int = 2) -> int:
        """Elements in the tiles whose index is ``j`` modulo ``p`` (``p`` = 2: buffer j's)."""
        full = (self.full - j + p - 1) // p
        rest = self.rest if self.full % p == j else 0
        return full * self.size + rest


def ping_pong_pass_cycles(model: HardwareModel, tiles: Tiling, cost: Callable[[int], float],
                          write_back: bool, split: bool = False, stops_timer: bool = False
                          ) -> float:
    """Estimated cycles of one pass over ``tiles`` (``cost(elements)``: a tile's kernel cycles
    in TCM); ``split``: inputs on channel 0, outputs on 1 (else buffer b's on channel b);
    ``stops_timer``: the op's timer stops when the pass ends."""
    p = _Pass(model, tiles, cost, write_back, split, stops_timer)
    last = tiles.count - 1
    tail = cost(tiles.at(last)) + ((p.setup + p.d_out(last)) if write_back else 0.0)
    if tiles.count == 1:
        return p.setup + p.d_in(0) + tail
    return max(p.staged(tail), p.path())


class PortCosts:
    """The host memory's and the iDMA's constants the ping-pong closed forms price copies by."""

    def __init__(self, model: HardwareModel) -> None:
        ddr, idma = model.host_memory, model.idma
        self.policy = policy = ddr.policy  # what a request costs (dspsim.hw.policy)
        self.lat, self.cpb = policy.latency(False), policy.cycles_per_byte
        self.burst, self.k, self.m = idma.burst_bytes, idma.max_outstanding, ddr.max_outstanding
        self.setup = idma.setup_cycles
        # the engine's own pace per channel (0: none) and its fetch of each descriptor
        self.idma, self.rate = idma, idma.engine_bytes_per_cycle or math.inf

    def requests(self, nbytes: int) -> int:
        """Bursts of a copy of ``nbytes``."""
        return -(-nbytes // self.burst)

    def single(self, nbytes: int, write: bool = False) -> float:
        """A copy alone on its channel and the port (into TCM, or out: ``write``): its descriptor
        fetched, then at the slower of the port and the engine's pace (the bytes but the last
        burst's at the channel's rate, then that burst's trip)."""
        moved = self.policy.transfer_cycles(nbytes, self.burst, min(self.k, self.m), write)
        return engine_paced_cycles(self.idma, nbytes, nbytes, moved,
                                   lambda last: self.policy.request_cycles(last, write))


class _Pass(PortCosts):
    """One pass of the ping-pong frame, its two forms (the module's text)."""

    def __init__(self, model: HardwareModel, tiles: Tiling, cost: Callable[[int], float],
                 write_back: bool, split: bool, stops_timer: bool) -> None:
        super().__init__(model)
        policy = self.policy
        self.tiles, self.cost, self.write_back, self.split = tiles, cost, write_back, split
        self.stops_timer = stops_timer  # the op's timer stops when the pass ends
        self.n_tiles = tiles.count
        # a burst's slot time, path free: a read's, or the mean of a read's and a write's when
        # the pass writes back as much as it reads
        self.occupancy = policy.request_cycles(self.burst, False)
        if write_back:
            self.occupancy = (self.occupancy + policy.request_cycles(self.burst, True)) / 2
        # the pass's last copy: its output's, else its input's
        self.last_latency = policy.latency(write_back)

    def throughput(self, channels: int) -> float:
        return min(self.policy.bytes_per_cycle, channels * self.rate,
                   min(self.m, channels * self.k) * self.burst / self.occupancy)

    def d_in(self, i: int) -> float:
        return self.single(4 * self.tiles.at(i))

    def d_out(self, i: int) -> float:
        return self.single(4 * self.tiles.at(i), True) if self.write_back else 0.0

    def gap(self, i: int) -> float:
        """Between the core's starts of tiles i - 1 and i: its work, a buffer's round trip or,
        under 'split', one channel carrying every input (output)."""
        j = i - 1  # the buffer cycle that ends with tile i + 1's input, averaged per tile
        n_tiles, d_in, d_out = self.n_tiles, self.d_in, self.d_out
        # descriptors the core programs after tile j: its output copy, the prefetch of j + 2
        descriptors = (1 if self.write_back else 0) + (1 if j + 2 < n_tiles else 0)
        work = self.cost(self.tiles.at(j)) + descriptors * self.setup
        nxt = d_in(j + 2) if j + 2 < n_tiles else 0.0
        if self.split:
            cycle = (work + max(d_out(j), nxt)) / 2
            serial = max(d_in(i), d_out(j))
        else:
            # no tile j + 2, and the timer stops on the last output or the channels are paced
            # by their engine, not a shared port: nothing waits for tile j's output
            paced = self.rate < self.policy.bytes_per_cycle
            own = j + 2 >= n_tiles and (self.stops_timer or paced)
            # paced: the round trip is the channel's own; the prefetch's descriptor is
            # programmed while tile j's output crosses
            overlap = min(self.setup, d_out(j)) if paced and descriptors == 2 else 0.0
            cycle = 0.0 if own else (work - overlap + d_out(j) + nxt) / 2
            serial = 0.0
        return max(work, cycle, serial)

    def staged(self, tail: float) -> float:
        """Staged form. Gaps 1 .. T-3 see full tiles and a prefetch only, so are equal; the
        last two see the final, possibly partial, tile."""
        n_tiles, tiles = self.n_tiles, self.tiles
        generic = max(0, n_tiles - 3)
        gaps = (generic * self.gap(1) if generic else 0.0) + sum(
            self.gap(i) for i in range(max(1, n_tiles - 2), n_tiles)
        )
        # the first two inputs share the path (seed) or queue on channel 0 ('split')
        first_in = self.d_in(0) if self.split else max(
            self.d_in(0), self.lat + 4 * (tiles.at(0) + tiles.at(1)) * self.cpb)
        return 2 * self.setup + first_in + gaps + tail

    def path(self) -> float:
        """Path form (the last output copy overlaps the other channel's)."""
        tiles, write_back, split = self.tiles, self.write_back, self.split
        copies = 2 if write_back else 1
        channels = 1 if (split and not write_back) else 2
        in_bytes = 4 * tiles.elems
        # each channel's bytes and descriptors (the engine fetches each in turn)
        if split:  # inputs on channel 0, outputs on channel 1
            lanes, fetches = [in_bytes], [self.n_tiles]
        else:  # buffer b's copies go on channel b: even tiles on 0, odd tiles on 1
            lanes = [copies * 4 * tiles.parity_elems(p) for p in (0, 1)]
            fetches = [copies * ((self.n_tiles - p + 1) // 2) for p in (0, 1)]
        left = 0  # tile 0's output bytes still in flight when the timer stops
        if self.stops_timer and write_back and not split and self.n_tiles == 2:
            out0 = 4 * tiles.at(0)
            left = max(0, out0 - (min(self.k, self.m) * self.burst + 4 * tiles.at(1)))
            lanes[0] -= left
        transfer = max((copies * in_bytes - left) / self.throughput(channels),
                       max(b / self.throughput(1) + k * self.idma.descriptor_cycles
                           for b, k in zip(lanes, fetches)))
        return (2 * self.setup + transfer + self.last_latency
                + self.cost(tiles.at(self.n_tiles - 1))
                + (self.setup if write_back else 0.0))
