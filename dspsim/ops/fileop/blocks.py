"""2-D blocks: a 2-D op file's op tiled in blocks of ``R`` rows of ``C`` columns (``C`` =
``<op>.block_cols``, 0: whole rows), moved by 2-D iDMA descriptors. A block's input copy
brings ``h`` rows of halo above and below (the sum over the passes of each one's reach in
``shift_rows``; fewer at the image's edges), packed in the TCM buffer; the passes run on it in
place; the output copy takes its ``R`` middle rows back. ``R = tile_bytes // (4 C) - 2h``.
Blocks go row band by row band, left to right, through two buffers and channels as the seed's
frame does (block ``i`` in buffer and on channel ``i % 2``); at the end the frame waits for
every output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dspsim.ops.frames import IDMA_COPY, IDMA_WAIT

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.ops.fileop.spec import OpSpec
    from dspsim.platform import Dsp


@dataclass(frozen=True)
class Block:
    """One block's rows and columns in the image."""

    r0: int  # output rows r0:r1
    r1: int
    a0: int  # input rows a0:a1 (the output rows and their halo, within the image)
    a1: int
    c0: int  # columns c0:c1
    c1: int

    @property
    def cols(self) -> int:
        return self.c1 - self.c0


def uses_blocks(spec: OpSpec, block_cols: int) -> bool:
    """Whether a 2-D op's tiled schedule moves 2-D blocks (a halo, or columns cut)."""
    return spec.ndim == 2 and (spec.halo > 0 or block_cols > 0)


def block_shape(tile_bytes: int, cols: int, block_cols: int, halo: int) -> tuple[int, int]:
    """(output rows, columns) of a block: 0 rows when a buffer cannot hold one with its halo."""
    width = min(cols, block_cols) if block_cols > 0 else cols
    return max(0, tile_bytes // (4 * width) - 2 * halo), width


def blocks(rows: int, cols: int, out_rows: int, width: int, halo: int) -> list[Block]:
    """The blocks, row band by row band, left to right."""
    return [Block(r, min(rows, r + out_rows), max(0, r - halo), min(rows, r + out_rows + halo),
                  c, min(cols, c + width))
            for r in range(0, rows, out_rows) for c in range(0, cols, width)]


def run_blocks(dsp: Dsp, spec: OpSpec, bufs: list[Ptr], x: Ptr, y: Ptr, rows: int, cols: int,
               pass_block: Any) -> Any:
    """The blocks through two buffers; ``pass_block(buf, block)`` runs the passes on one."""
    out_rows, width = block_shape(dsp.params.tile_bytes, cols, dsp.params.block_cols,
                                  spec.halo)
    todo = blocks(rows, cols, out_rows, width, spec.halo)
    dsp.labels.new_tile_group()
    vret_in: list[Any] = [None, None]
    vret_out: list[Any] = [None, None]

    def fetch(i: int) -> Any:
        b = todo[i]
        vret_in[i % 2] = yield from IDMA_COPY(
            dsp, i % 2, x + b.a0 * cols + b.c0, bufs[i % 2], 4 * b.cols, i, rows=b.a1 - b.a0,
            src_pitch=4 * cols, dst_pitch=4 * b.cols)

    for i in range(min(2, len(todo))):
        yield from fetch(i)
    for i, b in enumerate(todo):
        k = i % 2
        dsp.labels.tile, dsp.labels.buffer = i, k
        yield from IDMA_WAIT(dsp, k, vret_in[k], "wait_in")
        yield from pass_block(bufs[k], b)
        vret_out[k] = yield from IDMA_COPY(
            dsp, k, bufs[k] + (b.r0 - b.a0) * b.cols, y + b.r0 * cols + b.c0, 4 * b.cols, i,
            rows=b.r1 - b.r0, src_pitch=4 * b.cols, dst_pitch=4 * cols)
        if i + 2 < len(todo):
            yield from fetch(i + 2)
    for k in range(2):
        yield from IDMA_WAIT(dsp, k, vret_out[k], "wait_out")
    dsp.labels.tile = dsp.labels.buffer = -1


def block_bounds(model: HardwareModel, spec: OpSpec, shape: tuple[int, int],
                 row_cycles: Any) -> dict[str, Any]:
    """Traffic and lower bounds of the blocks (``row_cycles(n)``: the passes' kernel cycles on
    a row of ``n`` in TCM): every input (halo included) and output row over the port; their
    bursts, cut at row ends, over ``min(m, 2k)`` in flight; the passes on every input row plus
    two descriptors a block. The estimate: the larger of the port or the core busy throughout
    but for the ends."""
    rows, cols = shape
    mem, idma = model.host_memory, model.idma
    policy, burst = mem.policy, idma.burst_bytes  # what a request costs (dspsim.hw.policy)
    p = model.params(spec.name)
    out_rows, width = block_shape(p.tile_bytes, cols, p.block_cols, spec.halo)
    todo = blocks(rows, cols, out_rows, width, spec.halo)
    read = sum(4 * (b.a1 - b.a0) * b.cols for b in todo)
    write = 4 * rows * cols
    per_row = {b.cols: -(-4 * b.cols // burst) for b in todo}
    reads = sum(per_row[b.cols] * (b.a1 - b.a0) for b in todo)
    writes = sum(per_row[b.cols] * (b.r1 - b.r0) for b in todo)
    work = [(b.a1 - b.a0) * row_cycles(b.cols) for b in todo]
    window = min(mem.max_outstanding, 2 * idma.max_outstanding)
    first, last = todo[0], todo[-1]

    def copy(block_rows: int, n: int, write: bool) -> float:
        return policy.transfer_cycles(4 * block_rows * n, burst,
                                      min(idma.max_outstanding, mem.max_outstanding), write)

    dma = policy.data_cycles(read + write)
    compute = sum(work) + 2 * len(todo) * idma.setup_cycles
    estimate = max(dma + work[-1] + idma.setup_cycles,  # the port busy but for the last block
                   compute + copy(first.a1 - first.a0, first.cols, False)
                   + copy(last.r1 - last.r0, last.cols, True))  # the core busy but for the ends
    return {"ddr_read_bytes": read, "ddr_write_bytes": write,
            "dma_bound_cycles": dma,
            "latency_bound_cycles": policy.latency_total(reads, writes) / window,
            "compute_bound_cycles": compute,
            "blocks": len(todo), "block_rows": out_rows, "block_cols": width,
            "halo_rows": spec.halo, "estimate_cycles": estimate}
