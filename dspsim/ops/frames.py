"""The seed's reusable pieces, for any op: ``IDMA_COPY``, ``IDMA_WAIT`` and the ping-pong frame,
as SimPy process bodies on a DSP core (``yield from`` one is where the C calls it; ``dsp``,
:class:`dspsim.platform.Dsp`, carries what the C reaches through globals)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dspsim.hw.idma import Transfer
from dspsim.hw.memory import Ptr
from dspsim.ops.base import Proc

if TYPE_CHECKING:
    from dspsim.platform import Dsp

# func(dsp, out_addr, in_addr, size, func_out, func_in): one tile's work, in TCM
TileFunc = Callable[["Dsp", Ptr, Ptr, int, list, Any], Proc]

HB_IDMA_CH0, HB_IDMA_CH1 = 0, 1
XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1 = 0, 1
UNWRITTEN_HANDLE = (
    "the ping-pong frame waits on vret_out[] before any output copy has set it (first tile of "
    "each buffer in a pass with write-back); modelled as an immediate return"
)


def at_byte(p: Ptr, offset: int) -> Ptr:
    """``(char *)p + offset``: ``p`` moved by ``offset`` bytes (``p + k`` moves by float32)."""
    return Ptr(p.mem, p.addr + offset)


def copy_bytes(dst: Ptr, src: Ptr, nbytes: int) -> None:
    """``memcpy(dst, src, nbytes)``, untimed (the values of a copy timed elsewhere)."""
    dst.mem.write(dst.addr, src.mem.read(src.addr, nbytes))


def IDMA_COPY(dsp: Dsp, channel: int, src: Ptr, dst: Ptr, size: int, tile: int, rows: int = 1,
              src_pitch: int | None = None, dst_pitch: int | None = None) -> Proc:
    """``IDMA_COPY(ch, vret, src, dst, size)``: returns the handle (``vret``); ``rows > 1``: a
    2-D descriptor, row ``r`` from ``src + r * src_pitch`` bytes to ``dst + r * dst_pitch``."""
    kind = "copy_in" if not dst.external else "copy_out"
    dsp.labels.tile = tile
    if dsp.channel_map is not None:
        channel = dsp.channel_map(channel, kind)
    return (yield from dsp.core.idma_copy(channel, src, dst, size, kind, rows, src_pitch,
                                          dst_pitch))


def IDMA_WAIT(dsp: Dsp, channel: int, vret: Transfer | None, kind: str) -> Proc:
    """``IDMA_WAIT(ch, vret)``: block until the descriptor behind ``vret`` is done."""
    yield from dsp.core.idma_wait(vret, kind, quirk=UNWRITTEN_HANDLE)


def hb_dsp_ping_pong_frame(dsp: Dsp, dst: Ptr, src: Ptr, src_idma: list[Ptr],
                           dst_idma: list[Ptr], length: int, func: TileFunc, func_out: list,
                           func_in: Any, with_out_idma: bool = True, block_elems: int = 0
                           ) -> Proc:
    """One pass over ``length`` float32 in tiles of ``block_elems`` (the seed's
    ``TILE_SIZE >> 2``) through two TCM buffers: prefetch tiles 0 and 1 on channels 0 and 1;
    per tile wait for its input (and, writing back, for the buffer's previous output), run
    ``func`` in TCM, copy the tile out on the same channel, prefetch the tile after next into
    the buffer; at the end wait for the last output."""
    size = [0, 0]
    vret_in = [None, None]
    vret_out = [None, None]  # uninitialised in the C
    i = 0
    block_start = 0
    output_start = 0
    ping_pong = 0
    dsp.labels.new_tile_group()  # numbered after the pass's earlier tiles
    tile_in = tile = 0  # tile indices, for the trace only

    block = min(block_elems, length)
    block_size = block << 2
    size[0] = block
    vret_in[0] = yield from IDMA_COPY(dsp, HB_IDMA_CH0, src, src_idma[0], block_size, tile_in)
    tile_in += 1

    block_start += block
    if block_start < length:
        block = min(block, length - block_start)
        block_size = block << 2
        size[1] = block
        vret_in[1] = yield from IDMA_COPY(dsp, HB_IDMA_CH1, src + block_start, src_idma[1],
                                          block_size, tile_in)
        tile_in += 1
        block_start += block

    # a run of full middle tiles, two apart (both buffers back in their roles), may be booked
    # at once while the channels stream (the model's, not the C's: dspsim.hw.finder)
    alike = dsp.alike_iterations(period=2)
    # the booked tiles' values as plain copies in program order: right where each buffer's
    # copies go through one channel (its FIFO keeps the program's order); where a buffer's
    # copy in and copy out take two channels, their order is the engines' timing's (walked)
    mapped = dsp.channel_map or (lambda channel, kind: channel)
    in_order = not with_out_idma or all(
        mapped(p, "copy_in") == mapped(p, "copy_out") for p in (0, 1))

    def values(count: int, pending: Callable[[Ptr, Ptr], bool]) -> None:
        # the booked tiles' values, untimed: each tile's work, its copy out and the prefetch
        # of the tile two on, as plain copies (those still pending after the run excepted)
        # (tile by tile, not one batch: a tile's numpy temporaries stay in cache, measured faster)
        for j in range(count):
            p = ping_pong ^ (j & 1)
            for _ in func(dsp, dst_idma[p], src_idma[p], block, func_out, func_in):
                raise RuntimeError("a tile's work yielded an event while computing values")
            out = dst + (output_start + j * block)
            if with_out_idma and not pending(dst_idma[p], out):
                copy_bytes(out, dst_idma[p], block << 2)
            ahead = src + (block_start + j * block)
            if not pending(ahead, src_idma[p]):
                copy_bytes(src_idma[p], ahead, block << 2)

    while i < length:
        booked = alike.skip((length - block_start) // block if block_start < length else 0,
                            func_out, values if in_order else None) if block else 0
        if booked:  # the tiles booked ran as the ones before them: the counters move on
            i += booked * block
            block_start += booked * block
            if with_out_idma:
                output_start += booked * block
            tile += booked
            tile_in += booked
        dsp.labels.tile, dsp.labels.buffer = tile, ping_pong
        i += size[ping_pong]
        yield from IDMA_WAIT(dsp, ping_pong, vret_in[ping_pong], "wait_in")
        if with_out_idma:
            yield from IDMA_WAIT(dsp, ping_pong, vret_out[ping_pong], "wait_out")
        dsp.labels.tile = tile
        yield from func(dsp, dst_idma[ping_pong], src_idma[ping_pong], size[ping_pong],
                        func_out, func_in)

        if with_out_idma:
            vret_out[ping_pong] = yield from IDMA_COPY(
                dsp, ping_pong, dst_idma[ping_pong], dst + output_start, size[ping_pong] << 2, tile
            )
            output_start += size[ping_pong]

        if block_start < length:
            block = min(block, length - block_start)
            block_size = block << 2
            size[ping_pong] = block
            vret_in[ping_pong] = yield from IDMA_COPY(dsp, ping_pong, src + block_start,
                                                      src_idma[ping_pong], block_size, tile_in)
            tile_in += 1
            block_start += block
        ping_pong ^= 0x1
        tile += 1

    if with_out_idma:
        yield from IDMA_WAIT(dsp, ping_pong ^ 0x01, vret_out[ping_pong ^ 0x01], "wait_out")
    dsp.labels.tile = dsp.labels.buffer = -1
    return 0
