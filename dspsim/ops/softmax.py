"""The seed's softmax operator, written to be read beside its C.

Every function here is a SimPy process body running on the DSP core: ``yield from`` a kernel or
an iDMA macro is where the C calls it. ``dsp`` carries what the C reaches through globals
(the core, the iDMA channels, TILE_SIZE, the timer).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.hw.idma import Transfer
from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager

if TYPE_CHECKING:
    from dspsim.sim import Dsp

Proc = Generator[Any, Any, Any]  # a SimPy process body: what ``yield from`` runs
TileFunc = Callable[["Dsp", Ptr, Ptr, int, list, float], Proc]

HB_IDMA_CH0, HB_IDMA_CH1 = 0, 1
XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1 = 0, 1
SOFTMAX_CMD = 0x1402


@dataclass
class hbDSPSoftmaxParam:  # noqa: N801 - the seed's struct name
    data_size: int  # bytes
    input: int  # physical address of the input in DDR
    run_tcm_opt: int  # 0: direct DDR, 1: ping-pong TCM


# ------------------------------------------------------------------------- iDMA macros
def IDMA_COPY(dsp: Dsp, channel: int, src: Ptr, dst: Ptr, size: int, tile: int) -> Proc:
    """``IDMA_COPY(ch, vret, src, dst, size)``: returns the handle (``vret``)."""
    kind = "copy_in" if dst.mem.kind == "tcm" else "copy_out"
    dsp.core.tile = tile
    return (yield from dsp.core.idma_copy(dsp.channel_for(channel, kind), src, dst, size, kind))


def IDMA_WAIT(dsp: Dsp, channel: int, vret: Transfer | None, kind: str) -> Proc:
    """``IDMA_WAIT(ch, vret)``: block until the descriptor behind ``vret`` is done."""
    yield from dsp.core.idma_wait(
        vret,
        kind,
        quirk="the ping-pong frame waits on vret_out[] before any output copy has set it "
        "(first tile of each buffer in a pass with write-back); modelled as an immediate return",
    )


def reciprocal(dsp: Dsp, sum_value: float) -> np.float32:
    """``1.0f / sum`` in float32: +inf for a zero sum, which the model reports."""
    if dsp.core.move_data and not sum_value:
        dsp.warn("zero_sum", "the sum of exponentials is 0: 1/sum is +inf and the output "
                 "inf/NaN")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float32(1.0) / np.float32(sum_value)


# ------------------------------------------------------------------------- tile functions
def tile_max(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, max_: list, param: float) -> Proc:
    max_value = yield from dsp.core.vecmaxf(in_addr, size)
    max_[0] = max_value if max_value > max_[0] else max_[0]


def tile_sum(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, sum_: list, param: float) -> Proc:
    yield from dsp.core.vecexpf_max(out_addr, in_addr, size, param)
    sum_[0] = np.float32(sum_[0] + (yield from dsp.core.vecsum(out_addr, size)))


def tile_mul(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, out: list, param: float) -> Proc:
    div = reciprocal(dsp, param)
    yield from dsp.core.vecmul(out_addr, in_addr, div, size)


# ------------------------------------------------------------------------- ping-pong frame
def hb_dsp_ping_pong_frame(
    dsp: Dsp,
    dst: Ptr,
    src: Ptr,
    src_idma: list[Ptr],
    dst_idma: list[Ptr],
    length: int,
    func: TileFunc,
    func_out: list,
    func_in: float,
    with_out_idma: bool = True,
) -> Proc:
    size = [0, 0]
    vret_in = [None, None]
    vret_out = [None, None]  # uninitialised in the C
    i = 0
    block_start = 0
    output_start = 0
    ping_pong = 0
    tile_in = tile = 0  # tile indices, for the trace only

    block = min(dsp.TILE_SIZE >> 2, length)
    block_size = block << 2
    size[0] = block
    vret_in[0] = yield from IDMA_COPY(dsp, HB_IDMA_CH0, src, src_idma[0], block_size, tile_in)
    tile_in += 1

    block_start += block
    if block_start < length:
        block = min(block, length - block_start)
        block_size = block << 2
        size[1] = block
        vret_in[1] = yield from IDMA_COPY(
            dsp, HB_IDMA_CH1, src + block_start, src_idma[1], block_size, tile_in
        )
        tile_in += 1
        block_start += block

    while i < length:
        dsp.core.tile, dsp.core.buffer = tile, ping_pong
        i += size[ping_pong]
        yield from IDMA_WAIT(dsp, ping_pong, vret_in[ping_pong], "wait_in")
        if with_out_idma:
            yield from IDMA_WAIT(dsp, ping_pong, vret_out[ping_pong], "wait_out")
        dsp.core.tile = tile
        yield from func(
            dsp, dst_idma[ping_pong], src_idma[ping_pong], size[ping_pong], func_out, func_in
        )

        if with_out_idma:
            vret_out[ping_pong] = yield from IDMA_COPY(
                dsp, ping_pong, dst_idma[ping_pong], dst + output_start, size[ping_pong] << 2, tile
            )
            output_start += size[ping_pong]

        if block_start < length:
            block = min(block, length - block_start)
            block_size = block << 2
            size[ping_pong] = block
            vret_in[ping_pong] = yield from IDMA_COPY(
                dsp, ping_pong, src + block_start, src_idma[ping_pong], block_size, tile_in
            )
            tile_in += 1
            block_start += block
        ping_pong ^= 0x1
        tile += 1

    if with_out_idma:
        yield from IDMA_WAIT(dsp, ping_pong ^ 0x01, vret_out[ping_pong ^ 0x01], "wait_out")
    dsp.core.tile = dsp.core.buffer = -1
    return 0


# ------------------------------------------------------------------------- direct version
def dsp_softmax(dsp: Dsp, input: Ptr, length: int, output: Ptr) -> Proc:
    core = dsp.core
    dsp.begin_pass("max")
    max_value = yield from core.vecmaxf(input, length)
    dsp.begin_pass("exp")
    yield from core.vecexpf_max(output, input, length, max_value)
    dsp.begin_pass("sum")
    sum_ = yield from core.vecsum(output, length)
    dsp.begin_pass("mul")
    div = reciprocal(dsp, sum_)
    yield from core.vecmul(output, output, div, length)
    dsp.end_pass()
    return 0


# ------------------------------------------------------------------------- the operator
def hb_dsp_softmax(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPSoftmaxParam = dsp.ddr.load_struct(input)
    src = dsp.hb_dsp_mem_map(ptr.input, ptr.data_size)
    dst = output

    if ptr.run_tcm_opt:  # ping-pong optimisation
        src_0 = tm.allocate(dsp.TILE_SIZE, XV_MEM_BANK_COLOR_0, dsp.IVP_2N)
        dst_0 = src_0
        src_1 = tm.allocate(dsp.TILE_SIZE, XV_MEM_BANK_COLOR_1, dsp.IVP_2N)
        dst_1 = src_1
        src_idma = [src_0, src_1]
        dst_idma = [dst_0, dst_1]
        length = ptr.data_size >> 2

        cycles_start = dsp.TIME_STAMP()
        dsp.begin_pass("max")
        max_value = [dsp.softmax_max_init()]
        yield from hb_dsp_ping_pong_frame(
            dsp, dst, src, src_idma, dst_idma, length, tile_max, max_value, 0, False
        )
        dsp.check_running_max(max_value[0], src, length)  # model check, not in the C
        dsp.begin_pass("exp_sum")
        sum_value = [np.float32(0.0)]
        yield from hb_dsp_ping_pong_frame(
            dsp, dst, src, src_idma, dst_idma, length, tile_sum, sum_value, max_value[0], True
        )
        dsp.begin_pass("mul")
        yield from hb_dsp_ping_pong_frame(
            dsp, dst, dst, src_idma, dst_idma, length, tile_mul, [0], sum_value[0], True
        )
        dsp.end_pass()
        tm.free(src_0)
        tm.free(src_1)
        cycles_stop = dsp.TIME_STAMP()
    else:  # direct call to DDR
        cycles_start = dsp.TIME_STAMP()
        N = ptr.data_size >> 2  # noqa: N806
        yield from dsp_softmax(dsp, src, N, dst)
        cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)  # self_cycles = cycles_stop - cycles_start; DSP_LOGI
    return 0
