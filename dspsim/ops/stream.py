"""The seed's ping-pong frame generalised (``hb_dsp_stream_frame``: softmax's online,
multibuffer and rows schedules, an op file's nbuffer): one pass over ``length`` float32 in
tiles of ``block`` as :func:`dspsim.ops.frames.hb_dsp_ping_pong_frame`, but with ``k`` buffers
(tile i in buffer i % k, its input on ``ins[i % len(ins)]``, its output on ``outs[i %
len(outs)]``: :func:`stream_channels`); a buffer's refill waits for its output copy when that
runs on another channel (FIFO order protects only one), deferred by one tile (after tile i's
output is programmed, the frame waits for tile i - 1's and refills that buffer with tile
i - 1 + k); no handle is waited on before it is written (the seed's ``unwritten_handle``), and
the end waits for *every* output copy (the seed's ``unwaited_copy``).
``func(dsp, out_addr, in_addr, size, state, tile)`` runs one tile in TCM, in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dspsim.hw.idma import Transfer
from dspsim.hw.memory import Ptr
from dspsim.ops.frames import IDMA_COPY, IDMA_WAIT, Proc

if TYPE_CHECKING:
    from dspsim.platform import Dsp

StreamFunc = Callable[["Dsp", Ptr, Ptr, int, Any, int], Proc]


def stream_channels(policy: str, channels: int, write_back: bool) -> tuple[list[int], list[int]]:
    """(input channels, output channels) of a streamed pass. ``pingpong``: the seed's, tile
    i's both on channel i % 2 (FIFO keeps a write-back ahead of the next prefetch). ``split``:
    the first ceil(C / 2) channels carry inputs, the rest outputs (no write-back: all inputs)."""
    if policy == "pingpong":
        both = [0, 1]
        return both, both
    if not write_back:
        return list(range(channels)), []
    half = -(-channels // 2)
    return list(range(half)), list(range(half, channels))


def hb_dsp_stream_frame(dsp: Dsp, dst: Ptr, src: Ptr, bufs: list[Ptr], length: int, block: int,
                        func: StreamFunc, state: Any, with_out_idma: bool,
                        policy: str = "pingpong") -> Proc:
    dsp.labels.new_tile_group()  # numbered after the pass's earlier tiles
    k = len(bufs)
    count = -(-length // block) if length > 0 else 0
    ins, outs = stream_channels(policy, len(dsp.idma), with_out_idma)

    def size(i: int) -> int:
        return min(block, length - i * block)

    def in_ch(i: int) -> int:
        return ins[i % len(ins)]

    def out_ch(i: int) -> int:
        return outs[i % len(outs)]

    vret_in: list[Transfer | None] = [None] * k
    vret_out: list[Transfer | None] = [None] * k
    issued_out: list[tuple[int, Transfer]] = []

    def fetch(i: int) -> Proc:
        vret_in[i % k] = yield from IDMA_COPY(dsp, in_ch(i), src + i * block, bufs[i % k],
                                              size(i) << 2, i)

    for i in range(min(k, count)):
        yield from fetch(i)
    pending = -1  # a tile whose buffer is refilled once its output copy is done
    for i in range(count):
        b = i % k
        dsp.labels.tile, dsp.labels.buffer = i, b
        yield from IDMA_WAIT(dsp, in_ch(i), vret_in[b], "wait_in")
        yield from func(dsp, bufs[b], bufs[b], size(i), state, i)
        if with_out_idma:
            vret_out[b] = yield from IDMA_COPY(dsp, out_ch(i), bufs[b], dst + i * block,
                                               size(i) << 2, i)
            issued_out.append((out_ch(i), vret_out[b]))
        # no write-back, or the channel's FIFO keeps the write-back first
        if not with_out_idma or out_ch(i) == in_ch(i + k):
            if i + k < count:
                yield from fetch(i + k)
            continue
        if pending >= 0 and pending + k < count:
            dsp.labels.tile, dsp.labels.buffer = pending, pending % k
            yield from IDMA_WAIT(dsp, out_ch(pending), vret_out[pending % k], "wait_out")
            yield from fetch(pending + k)
        pending = i
    for channel, vret in issued_out:  # every output, in the order they were programmed
        yield from IDMA_WAIT(dsp, channel, vret, "wait_out")
    dsp.labels.tile = dsp.labels.buffer = -1
    return 0
