"""The int8 fully connected layer on the DSP, as the AmebaLite SDK example's C does it.

Set-up, untimed: the weights where ``fc.weights`` says (in place in the host's buffer, the
example's PSRAM; elsewhere taken as already there, on a cache line); input, bias and output in
the DataRAMs, input and bias copied there by one waited iDMA descriptor each on channel 0
(their bytes count in the port's traffic; busy cycles before the timer are not the op's).
``idma_init_loop(ch 0, buf, IDMA_1D_DESC, 2)`` as the timer starts.

- ``pingpong`` (the example's loop): ping in DRAM0, pong in DRAM1, both on channel 0. The
  first chunk (``fc.tile_rows`` rows) is fetched and waited for alone; then per pair ``(i,
  i+1)``: wait idle; copy chunk ``i+1`` into pong; kernel on ``i`` in ping; wait idle; unless
  last pair, copy chunk ``i+2`` into ping; kernel on ``i+1`` in pong (an odd count ends with a
  pair of one). "Wait idle" is ``while (idma_buffer_status(0) > 0) ;``.
- ``direct``: one kernel call on all rows, the weights read from their memory (through the
  data cache where cached; it starts cold).

After the timer (untimed): the output copied to the host's buffer by one waited descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.kernels.fc_s8 import groups, padded_bytes
from dspsim.ops.base import HOST, TCM
from dspsim.ops.fc.reference import layout
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1, Proc, at_byte, copy_bytes

if TYPE_CHECKING:
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

FC_CMD = 0x8004  # a custom command
CHANNEL = 0
RING_DESCRIPTORS = 2  # the example's fixed buffer of 2 descriptors
ALIGN_BYTES = 128


@dataclass
class hbDSPFcParam:  # noqa: N801 - named like the seed's structs
    out_depth: int
    in_depth: int
    input: int  # physical address of the packed weights, input and bias in the host's memory
    pingpong: int  # 1: pingpong, 0: direct


def _allocate_any(tm: TileManager, nbytes: int) -> Ptr:
    """A DataRAM buffer, in DataRAM 0 if it has room, else in the next that has."""
    for c in range(len(tm.banks)):
        try:
            return tm.allocate(nbytes, c, ALIGN_BYTES)
        except ValueError:
            if c == len(tm.banks) - 1:
                raise


class _Arrays:
    """The input, bias and output in the DataRAMs, and the kernel on rows of weights."""

    def __init__(self, dsp: Dsp, tm: TileManager, out_depth: int, in_depth: int):
        self.on = dsp.move_data
        self.x = _allocate_any(tm, -(-in_depth // 4) * 4)
        self.bias = _allocate_any(tm, 4 * out_depth)
        self.out = _allocate_any(tm, -(-out_depth // 4) * 4)
        self.out_depth, self.in_depth = out_depth, in_depth
        p = dsp.params
        self.quant = {"input_zero_bias": p.input_zero_bias, "out_multiplier": p.out_multiplier,
                      "out_shift": p.out_shift, "out_zero_bias": p.out_zero_bias}
        if self.on:  # views: what the copies land is what the kernel reads
            self.xs = self.x.mem.read(self.x.addr, in_depth).view(np.int8)
            self.biases = self.bias.mem.read(self.bias.addr, 4 * out_depth).view("<i4")
            self.outs = self.out.mem.read(self.out.addr, out_depth).view(np.int8)

    def kernel(self, dsp: Dsp, w: Ptr, first: int, rows: int) -> Proc:
        """The kernel on ``rows`` rows of weights at ``w`` (output rows ``first ..``)."""
        args = {} if not self.on else {  # the kernel computes nothing with the data path off
            "x": self.xs, "bias": self.biases[first:first + rows],
            "out": self.outs[first:first + rows], **self.quant}
        yield from dsp.core.call("fc_s8", self.in_depth, w, None, rows=groups(rows), **args)


def _untimed_copy(dsp: Dsp, src: Ptr, dst: Ptr, nbytes: int) -> Proc:
    """One waited descriptor on channel 0 outside the timed span: its bytes count in the port's
    traffic, but no core cycles or core trace row are booked."""
    ch = dsp.idma[CHANNEL]
    room = ch.when_pending_at_most(ch.ring - 1) if ch.ring is not None else None
    if room is not None:  # ring mode, every descriptor pending
        yield room
    transfer = ch.submit(src, dst, nbytes, kind="copy_out" if dst.external else "copy_in")
    yield transfer.done


def hb_dsp_fc(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPFcParam = dsp.ddr.load_struct(input)
    params = dsp.params
    out_depth, in_depth = ptr.out_depth, ptr.in_depth
    lay = layout((out_depth, in_depth))
    host = dsp.hb_dsp_mem_map(ptr.input, lay["bytes"])
    weights = _place_weights(dsp, tm, host, out_depth, in_depth)
    buffers: tuple[Ptr, ...] = ()
    tile = min(params.tile_rows, out_depth)
    if ptr.pingpong:
        buf = padded_bytes(tile, in_depth)
        buffers = (tm.allocate(buf, XV_MEM_BANK_COLOR_0, ALIGN_BYTES),
                   tm.allocate(buf, XV_MEM_BANK_COLOR_1, ALIGN_BYTES))
    arrays = _Arrays(dsp, tm, out_depth, in_depth)
    # set-up: the input and the bias from the host's buffer into their DataRAM buffers
    yield from _untimed_copy(dsp, at_byte(host, lay["input"]), arrays.x, in_depth)
    yield from _untimed_copy(dsp, at_byte(host, lay["bias"]), arrays.bias, 4 * out_depth)
    before = dsp.platform.busy_until(dsp.env.now)  # the set-up's, not the op's
    cycles_start = dsp.TIME_STAMP()
    if ptr.pingpong:
        # waits for descriptors an earlier op left on the channel (none alone)
        yield from dsp.core.idma_init_loop(CHANNEL, RING_DESCRIPTORS)
        yield from _pingpong(dsp, weights, *buffers, out_depth, in_depth, tile, arrays)
    else:
        dsp.begin_pass("fc")
        yield from arrays.kernel(dsp, weights, 0, out_depth)
        dsp.end_pass()
    cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)
    dsp.stats_at_stop = {k: v - before.get(k, 0.0) for k, v in dsp.stats_at_stop.items()}
    yield from _untimed_copy(dsp, arrays.out, output, out_depth)  # the int8 result
    # the DataRAMs and the memory as the call found them, for the next task on this core
    for p in (arrays.x, arrays.bias, arrays.out, *buffers):
        tm.free(p)
    if params.weights == TCM:
        tm.free(weights)
    elif params.weights != HOST:
        weights.mem.free_block(weights)
    return 0


def _place_weights(dsp: Dsp, tm: TileManager, host: Ptr, out_depth: int, in_depth: int) -> Ptr:
    """Set-up: the weights where ``fc.weights`` says, taken as already there (the host's
    buffer in place; else a DataRAM or a memory block on a cache line)."""
    w_host = at_byte(host, layout((out_depth, in_depth))["weights"])
    where, wbytes = dsp.params.weights, padded_bytes(out_depth, in_depth)
    if where == HOST:
        return w_host
    if where == TCM:
        weights = tm.allocate(wbytes, XV_MEM_BANK_COLOR_0, ALIGN_BYTES)
    else:
        # on a cache line (and on 128 bytes)
        line = dsp.model.dcache.line_bytes if dsp.model.dcache.capacity_bytes else 0
        weights = dsp.memory(where).add_block(wbytes, max(ALIGN_BYTES, line), "fc weights")
    if dsp.move_data:
        copy_bytes(weights, w_host, wbytes)
    return weights


def _pingpong(dsp: Dsp, weights: Ptr, ping: Ptr, pong: Ptr, out_depth: int, in_depth: int,
              tile: int, a: _Arrays) -> Proc:
    core = dsp.core
    chunks = -(-out_depth // tile)
    buffers = (ping, pong)

    def rows_of(i: int) -> int:
        return min(tile, out_depth - i * tile)

    def fetch(i: int) -> Proc:  # idma_copy_desc(0, buffer, weights + chunk i, size)
        dsp.labels.tile, dsp.labels.buffer = i, i % 2
        yield from core.idma_copy_desc(CHANNEL, buffers[i % 2],
                                       at_byte(weights, i * tile * in_depth), rows_of(i) * in_depth)

    def compute(i: int) -> Proc:
        dsp.labels.tile, dsp.labels.buffer = i, i % 2
        yield from a.kernel(dsp, buffers[i % 2], i * tile, rows_of(i))

    dsp.begin_pass("fc")
    yield from fetch(0)  # the first chunk, fetched and waited for alone
    yield from core.idma_poll(CHANNEL, 0)
    for i in range(0, chunks, 2):  # the pairs (i, i+1)
        yield from core.idma_poll(CHANNEL, 0)
        if i + 1 < chunks:
            yield from fetch(i + 1)
        yield from compute(i)
        yield from core.idma_poll(CHANNEL, 0)
        if i + 2 < chunks:  # unless this is the last pair
            yield from fetch(i + 2)
        if i + 1 < chunks:
            yield from compute(i + 1)
    dsp.end_pass()
