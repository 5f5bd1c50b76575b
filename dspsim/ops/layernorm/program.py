"""A LayerNorm custom operator for the J6 DSP, written as its C would be, in SimPy generators.

``y = (x - mean) / sqrt(var + eps)`` over the last axis of a float32 ``[rows, cols]`` tensor
(biased variance, no affine terms). Per row, to keep float32 accurate when the mean is large
against the spread: ``vecsum`` -> ``mean_hi``; ``vecsumsq_dev`` (sums of ``x - mean_hi`` and of
its square) -> the residual mean ``r`` and ``rstd``; ``vecnorm`` writes ``((x - mean_hi) - r)
* rstd`` (see :mod:`dspsim.kernels.layernorm`). The scalar steps between kernels run on the
core's scalar unit and are not timed (a few cycles against a row's kernels).

- ``direct`` (``run_tcm_opt = 0``): the three kernels read DDR row by row and ``vecnorm`` writes
  DDR, like the seed's direct softmax: three reads and one write of the tensor.
- ``pingpong`` (``run_tcm_opt = 1``): rows tiled through two TCM buffers with the seed's ping-pong
  frame, as many whole rows per tile as ``layernorm.tile_bytes`` holds; per tile the statistics
  then the normalisation, in place in TCM; one read and one write of the tensor. The three
  row loops of a tile run as row batches (``core.call(..., rows=k)``): the core is TCM's only
  user, so this takes the same cycles as interleaving the kernels row by row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.hw.tcm import TileManager
from dspsim.kernels.layernorm import layernorm_mean_hi, layernorm_rstd
from dspsim.ops.frames import (
    XV_MEM_BANK_COLOR_0,
    XV_MEM_BANK_COLOR_1,
    Proc,
    hb_dsp_ping_pong_frame,
)

if TYPE_CHECKING:
    from dspsim.platform import Dsp

LAYERNORM_CMD = 0x8001  # a custom command (0x1400-0x1405 are the built-in ones)


@dataclass
class hbDSPLayerNormParam:  # noqa: N801 - named like the seed's struct
    rows: int
    cols: int
    input: int  # physical address of the input in DDR
    run_tcm_opt: int  # 0: direct DDR, 1: ping-pong TCM


def rows_per_tile(tile_bytes: int, cols: int) -> int:
    """Whole rows of ``cols`` float32 that one ``tile_bytes`` buffer holds."""
    return tile_bytes // (4 * cols)


def layernorm_rows(dsp: Dsp, out: Ptr, x: Ptr, rows: int, cols: int) -> Proc:
    """Normalise ``rows`` consecutive rows at ``x`` into ``out`` (may be ``x``)."""
    core, eps = dsp.core, dsp.params.eps
    s = yield from core.call("vecsum", cols, x, rows=rows)
    mean_hi = layernorm_mean_hi(s, cols)
    sum_d, sum_d2 = yield from core.call("vecsumsq_dev", cols, x, rows=rows, mean=mean_hi)
    r, rstd = layernorm_rstd(sum_d, sum_d2, cols, eps)
    yield from core.call("vecnorm", cols, x, out, rows=rows, mean=mean_hi, r=r, rstd=rstd)


def tile_layernorm(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, out: list, cols: int
                   ) -> Proc:
    yield from layernorm_rows(dsp, out_addr, in_addr, size // cols, cols)


def dsp_layernorm(dsp: Dsp, input: Ptr, rows: int, cols: int, output: Ptr) -> Proc:
    """The direct version: every kernel on DDR, one row after the other."""
    with dsp.pass_("layernorm"):
        for r in range(rows):
            yield from layernorm_rows(dsp, output + r * cols, input + r * cols, 1, cols)
    return 0


def hb_dsp_layernorm(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    ptr: hbDSPLayerNormParam = dsp.ddr.load_struct(input)
    src = dsp.hb_dsp_mem_map(ptr.input, 4 * ptr.rows * ptr.cols)
    dst = output
    TILE_SIZE = dsp.params.tile_bytes  # noqa: N806 - as the seed's macro
    length = ptr.rows * ptr.cols

    if ptr.run_tcm_opt:  # ping-pong over row blocks
        buf_0 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_0, dsp.IVP_2N)
        buf_1 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_1, dsp.IVP_2N)
        block = rows_per_tile(TILE_SIZE, ptr.cols) * ptr.cols  # whole rows per tile

        cycles_start = dsp.TIME_STAMP()
        with dsp.pass_("layernorm"):
            yield from hb_dsp_ping_pong_frame(
                dsp, dst, src, [buf_0, buf_1], [buf_0, buf_1], length, tile_layernorm,
                [np.float32(0)], ptr.cols, True, block,
            )
        tm.free(buf_0)
        tm.free(buf_1)
        cycles_stop = dsp.TIME_STAMP()
    else:  # direct call to DDR
        cycles_start = dsp.TIME_STAMP()
        yield from dsp_layernorm(dsp, src, ptr.rows, ptr.cols, dst)
        cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)
    return 0
