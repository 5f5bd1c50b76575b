"""The DSP side of an op file: its passes as the C would run them.

- ``direct``: every pass's kernels on the host memory, row by row (alike rows booked at once
  by ``dsp.row_loop``; with a halo, every row in one batch so that a row sees its neighbours);
- ``pingpong``: the seed's frame (:func:`~dspsim.ops.frames.hb_dsp_ping_pong_frame`); a 1-D op
  runs one frame per pass (a reduction accumulates over the tiles, as the seed's softmax
  does), a 2-D op one frame of whole-row tiles, every pass on the tile in place;
- ``nbuffer``: the same through ``<op>.buffers`` buffers, inputs and outputs on separate
  channels (:func:`~dspsim.ops.stream.hb_dsp_stream_frame`).

2-D blocks (pingpong of a 2-D op with a halo or ``<op>.block_cols`` > 0): ``R`` rows of ``C``
columns (``C`` = ``<op>.block_cols``, 0: whole rows) moved by 2-D iDMA descriptors, the input
copy with ``h`` rows of halo above and below (the sum over the passes of each one's
``shift_rows`` reach; fewer at the image's edges) packed in the TCM buffer, the passes run on it
in place, the output copy takes the ``R`` middle rows back; ``R = tile_bytes // (4 C) - 2h``.
Row band by row band, left to right, through two buffers and channels as the seed's frame
(block ``i`` in buffer and on channel ``i % 2``); at the end the frame waits for every output.

A pass's first kernel reads its array; a kernel that writes writes the output array (in TCM:
the tile, in place), which the kernels after it read; the one returning a value gives the
pass's reduction.

A kernel the file declares by its cost is registered as ``<op>.<pass>``: a
:class:`~dspsim.kernels.shapes.LoopShape` and numerics evaluating the pass's ``value`` in
float32 (then a float32 ``max``, ``min`` or ``sum`` per row). A ``loop``: per iteration
``loads`` input vectors, ``table_loads`` of local tables, ``stores`` stores and ``alu`` vector
ALU operations, the last iteration predicated; then ``tail_ops`` dependent ALU operations
(default: a reduction's tree, ``1 + log2(lanes)``, or none); ``lanes`` and
``call_overhead_cycles`` default to the core's (:meth:`LoopShape.on`, run and bounds alike).
``cycles_per_element = c``: a measured cost: one vector load (and store) per ``lanes``
elements, padded with one-ALU-op iterations to ``ceil(n c)`` of II 1 on any core: a call of
``n`` in TCM takes ``core.call_overhead_cycles + ceil(n c)``; against DDR each vector load
still stalls for its round trip.

A pass's ``value`` is checked against the registered kernels it names: both run in float32 on
a probe input (the op's default input, small), pass after pass; a value the kernels do not
compute (within 1e-3 relative) is refused in one line. A ``loop`` or ``cycles_per_element``
pass computes its value itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import KERNELS, Kernel, get_kernel, register
from dspsim.kernels.shapes import LoopShape
from dspsim.kernels.toolkit import Segment, log2_lanes
from dspsim.ops.fileop.expr import ROW_REDUCTIONS
from dspsim.ops.frames import (
    IDMA_COPY,
    IDMA_WAIT,
    XV_MEM_BANK_COLOR_0,
    XV_MEM_BANK_COLOR_1,
    copy_bytes,
    hb_dsp_ping_pong_frame,
)
from dspsim.ops.stream import hb_dsp_stream_frame

if TYPE_CHECKING:
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.ops.base import Op as FileOp  # a FileOp (importing it would close a circle)
    from dspsim.ops.fileop.spec import LoopCost, OpSpec, PassSpec
    from dspsim.platform import Dsp

F32 = np.float32
VARIANT_CODES = {"direct": 0, "pingpong": 1, "nbuffer": 2}
_START = {"max": -np.inf, "min": np.inf, "sum": 0.0}


@dataclass
class hbDSPFileOpParam:  # noqa: N801 - named like the seed's structs
    rows: int
    cols: int
    input: int  # physical address of the input in the host memory
    run_tcm_opt: int  # VARIANT_CODES


def pass_kernels(spec: OpSpec, p: PassSpec) -> list[Kernel]:
    """A pass's kernels in call order (a ``loop`` pass: its own, ``<op>.<pass>``)."""
    if p.loop is not None:
        return [get_kernel(f"{spec.name}.{p.name}")]
    return [get_kernel(k.name) for k in p.kernels]


def pass_calls(spec: OpSpec, p: PassSpec, env: dict[str, Any]
               ) -> list[tuple[Kernel, dict[str, Any]]]:
    """``(kernel, scalar arguments)`` of a pass's calls in order, the arguments read in
    ``env`` (a ``loop`` pass's own kernel: every scalar and param its value reads)."""
    if p.loop is not None:
        kw = {k: env[k] for k in p.value.names if k != p.reads}  # a loop pass has a value
        return [(get_kernel(f"{spec.name}.{p.name}"), kw)]
    return [(get_kernel(k.name), {a: e.evaluate(env, F32) for a, e in k.args})
            for k in p.kernels]


def run_pass(dsp: Dsp, spec: OpSpec, p: PassSpec, src: Ptr, dst: Ptr, n: int, rows: int,
             env: dict[str, Any]) -> Any:
    """One pass's kernel calls on ``rows`` rows of ``n`` at ``src`` (writing ``dst``); the
    value the reducing kernel returns (None if none)."""
    cur, result = src, None
    for kernel, kw in pass_calls(spec, p, env):
        out = yield from dsp.core.call(kernel.name, n, cur, dst if kernel.writes else None,
                                       rows=rows, **kw)
        if kernel.writes:
            cur = dst
        if kernel.results:
            result = out
    return result


def _accumulate(op: str, acc: Any, r: Any) -> Any:
    """A reduction over tiles, in float32 (the seed's running max and sum)."""
    if op == "sum":
        return F32(acc + r)
    return max(acc, r) if op == "max" else min(acc, r)  # a NaN r leaves acc


def _params_env(dsp: Dsp, spec: OpSpec, cols: int) -> dict[str, Any]:
    """What expressions read besides arrays and scalars: the params, the row's length."""
    return {"cols": F32(cols), **{k: F32(getattr(dsp.params, k)) for k in spec.params}}


def run_passes(dsp: Dsp, spec: OpSpec, x: Ptr, y: Ptr, rows: int, n: int,
               env: dict[str, Any], named: bool = False) -> Any:
    """Every pass in order on ``rows`` rows of ``n``: each reads its array (``x`` the input,
    ``y`` the output; in TCM both are the tile) and writes ``y``, its reduction into ``env``;
    ``named``: each pass a pass of the timeline (the direct variant's)."""
    arrays = {spec.input: x, spec.output: y}
    for p in spec.passes:
        with dsp.pass_(p.name) if named else nullcontext():
            r = yield from run_pass(dsp, spec, p, arrays[p.reads], y, n, rows, env)
        if p.into:
            env[p.into] = r
    return 0


def frame(dsp: Dsp, variant: str, bufs: list[Ptr], dst: Ptr, src: Ptr, length: int,
          block: int, func: Any, state: list, write: bool) -> Any:
    """One frame of tiles through ``bufs``: the seed's ping-pong, or nbuffer's k-buffer
    stream; ``func(dsp, out, in, size, state, _)`` on each tile (its last argument unused)."""
    if variant == "pingpong":
        return hb_dsp_ping_pong_frame(dsp, dst, src, bufs, bufs, length, func, state, None,
                                      write, block)
    return hb_dsp_stream_frame(dsp, dst, src, bufs, length, block, func, state, write, "split")


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


def tiled(dsp: Dsp, spec: OpSpec, variant: str, bufs: list[Ptr], x: Ptr, y: Ptr, rows: int,
          cols: int) -> Any:
    """The tiled schedules: 2-D blocks, one frame of whole-row tiles (2-D) or one per pass."""
    tile_bytes = dsp.params.tile_bytes
    env = _params_env(dsp, spec, cols)
    if uses_blocks(spec, getattr(dsp.params, "block_cols", 0)):
        def pass_block(buf: Ptr, b: Block) -> Any:  # no reductions: 2-D blocks have none
            return run_passes(dsp, spec, buf, buf, b.a1 - b.a0, b.cols, env)

        with dsp.pass_(spec.name):
            yield from run_blocks(dsp, spec, bufs, x, y, rows, cols, pass_block)
        return
    if spec.ndim == 2:
        def rows_tile(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, state: list,
                      _: Any) -> Any:  # a tile of whole rows: every pass in TCM, in place
            yield from run_passes(dsp, spec, in_addr, out_addr, size // cols, cols, dict(env))

        block = max(1, tile_bytes // (4 * cols)) * cols
        with dsp.pass_(spec.name):
            yield from frame(dsp, variant, bufs, y, x, rows * cols, block, rows_tile, [0], True)
        return
    arrays = {spec.input: x, spec.output: y}
    for p in spec.passes:
        def pass_tile(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, state: list, _: Any,
                      p: PassSpec = p) -> Any:  # a 1-D tile of one pass, reduced into state[0]
            r = yield from run_pass(dsp, spec, p, in_addr, out_addr, size, 1, env)
            if p.reduce_op:
                state[0] = _accumulate(p.reduce_op, state[0], r)

        state = [F32(_START[p.reduce_op])] if p.reduce_op else [0]
        with dsp.pass_(p.name):
            yield from frame(dsp, variant, bufs, y, arrays[p.reads], cols, tile_bytes >> 2,
                             pass_tile, state, bool(p.writes))
        if p.into:
            env[p.into] = state[0]


def buffer_banks(variant: str, buffers: int, banks: int) -> list[int]:
    """The DataRAM of each buffer: the seed's 0 and 1, or round robin over the banks."""
    if variant == "pingpong":
        return [XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1]
    return [b % banks for b in range(buffers)]


def hb_dsp_fileop(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager, spec: OpSpec) -> Any:
    """``hb_dsp_<op>(input, output, tm)``: the parameter block, then the variant, timed."""
    ptr: hbDSPFileOpParam = dsp.ddr.load_struct(input)
    rows, cols = ptr.rows, ptr.cols
    host_x = dsp.hb_dsp_mem_map(ptr.input, 4 * rows * cols)
    # set-up, not timed: an array that lives in another memory is placed there
    x = place(dsp, getattr(dsp.params, f"{spec.input}_memory"), host_x, rows * cols, True)
    y = place(dsp, getattr(dsp.params, f"{spec.output}_memory"), output, rows * cols, False)
    variant = next(v for v, code in VARIANT_CODES.items() if code == ptr.run_tcm_opt)

    def block(lo: int, hi: int) -> Any:  # rows lo:hi, every pass on the host memory
        return run_passes(dsp, spec, x + lo * cols, y + lo * cols, hi - lo, cols,
                          _params_env(dsp, spec, cols), named=True)

    start = dsp.TIME_STAMP()
    if variant == "direct" and spec.halo:  # rows that read their neighbours: one batch
        yield from block(0, rows)
    elif variant == "direct":
        yield from dsp.row_loop(rows, lambda r: block(r, r + 1), block, cols)
    else:  # the buffers' allocation and release take no time
        count = dsp.params.buffers if variant == "nbuffer" else 2
        bufs = [tm.allocate(dsp.params.tile_bytes, b, dsp.IVP_2N)
                for b in buffer_banks(variant, count, dsp.model.tcm.banks)]
        yield from tiled(dsp, spec, variant, bufs, x, y, rows, cols)
        for b in bufs:
            tm.free(b)
    dsp.PROF(start, dsp.TIME_STAMP())
    for placed, host in ((y, output), (x, host_x)):
        if placed is not host:
            if placed is y and dsp.move_data:  # the result, back to the host's buffer
                copy_bytes(output, placed, 4 * rows * cols)
            placed.mem.free_block(placed)
    return 0


def place(dsp: Dsp, where: str, host: Ptr, n: int, fill: bool) -> Ptr:
    """``n`` float32 in memory ``where`` (``host``: the host's buffer itself), holding the
    host's values when ``fill``."""
    if where == "host" or dsp.memory(where) is host.mem:
        return host
    ptr = dsp.memory(where).add_block(4 * n, 128, f"{where} array")
    if fill and dsp.move_data:
        copy_bytes(ptr, host, 4 * n)
    return ptr


# ----------------------------------------------------------------------------- declared kernels
PROBE_LANES = 16  # the probe's vector of float32 (the check's tolerance covers any order of sums)
PROBE_SHAPES = {1: (1000,), 2: (3, 100)}
AGREE_REL = 1e-3


def loop_shape(name: str, cost: LoopCost, reduces: bool) -> LoopShape:
    """The loop shape of a declared loop (a reduction adds its tree after it)."""

    def segments(n: int, lanes: int) -> list[Segment]:
        vb = 4 * lanes
        per = cost.loads * lanes
        full, rest = divmod(n, per)
        segs: list[Segment] = [(full, (vb,) * cost.loads, (vb,) * cost.stores)]
        if rest:
            tail = tuple(max(0, min(vb, 4 * rest - i * vb)) for i in range(cost.loads))
            segs.append((1, tail, tail[:cost.stores]))
        if cost.cpe:
            pad = math.ceil(n * cost.cpe) - full - (1 if rest else 0)
            if pad > 0:
                segs.append((pad, (), ()))
        return segs

    def reduction_ops(lanes: int) -> int:
        if cost.tail_ops is not None:
            return cost.tail_ops
        return 1 + log2_lanes(lanes) if reduces else 0

    return LoopShape(name, data_loads=cost.loads, table_loads=cost.table_loads,
                     stores=cost.stores, alu_ops=cost.alu, segments=segments,
                     reduction_ops=reduction_ops, priming_loads=1, lanes=cost.lanes,
                     call_overhead_cycles=cost.call_overhead_cycles, ii=1 if cost.cpe else 0)


def columns(env: dict[str, Any], rows_2d: bool) -> dict[str, Any]:
    """``env`` with each per-row scalar (one value per row of a batch) as a column, to be
    read beside a ``(rows, n)`` array."""
    if not rows_2d:
        return env
    return {k: np.asarray(v)[:, None] if np.ndim(v) == 1 else v for k, v in env.items()}


def pass_numerics(p: PassSpec) -> Callable[..., Any]:
    """``compute(src, dst, lanes, **scalars)``: the pass's value in float32, written to
    ``dst`` and/or reduced (a scalar for a 1-D call, one per row for a batch)."""
    value = p.value
    assert value is not None

    def compute(src: np.ndarray, dst: np.ndarray | None, lanes: int, **scalars: Any) -> Any:
        env = {**columns(scalars, src.ndim == 2), p.reads: np.asarray(src, F32)}
        vals = np.broadcast_to(value.evaluate(env, F32), src.shape)
        if dst is not None and p.writes:
            dst[...] = vals
        if p.reduce_op:  # float32 in, float32 sums
            with np.errstate(all="ignore"):
                r = ROW_REDUCTIONS[p.reduce_op](vals, axis=-1)
            return F32(r) if np.ndim(r) == 0 else r.astype(F32)
        return None

    return compute


def register_pass_kernel(op_name: str, p: PassSpec, params: dict[str, float]) -> None:
    """Register the kernel of a pass declared by its cost; its name ``<op>.<pass>``. As a
    microbenchmark (``--op kernel``) its scalars are the op's params' defaults, and 1 for
    the scalars earlier passes reduce into."""
    assert p.loop is not None and p.value is not None  # a cost needs a value (spec._cost)
    name = f"{op_name}.{p.name}"
    if name in KERNELS:
        return
    example = {k: F32(params.get(k, 1.0)) for k in p.value.names if k != p.reads}
    elementwise = bool(p.writes) and not p.reduce_op and not (p.value.shifts or p.value.halo)
    register(Kernel(name, loop_shape(name, p.loop, bool(p.reduce_op)), pass_numerics(p),
                    writes=bool(p.writes), results=1 if p.reduce_op else 0,
                    elementwise=elementwise,
                    example_args=lambda size: {**example, "cols": F32(size[-1])}
                    if "cols" in example else example))


# ----------------------------------------------------------------------------- the check
def _disagree(op: FileOp, p: PassSpec, got: np.ndarray, want: np.ndarray, what: str) -> None:
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.nanmax(np.abs(want64))) if want64.size else 0.0, 1e-30)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isclose(got64, want64, rtol=AGREE_REL, atol=AGREE_REL * 1e-3 * scale)
                | (np.isnan(got64) & np.isnan(want64)))
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        names = ", ".join(u.name for u in p.kernels)
        raise DspsimInputError(
            f"op file {op.spec.path}: {p.label}: value {p.value.text!r} disagrees with its "
            f"kernels ({names}) on a probe input: {what} {i} is {got64.reshape(-1)[i]:.6g} by "
            f"the kernels, {want64.reshape(-1)[i]:.6g} by the value; allowed: the value the "
            "kernels compute, or no value")


def _call_kernels(op: FileOp, p: PassSpec, src: np.ndarray, dst: np.ndarray,
                  env: dict[str, Any]) -> Any:
    """The pass's kernels on ``src`` (writing ``dst``), as the run calls them; what the
    reducing one returns."""
    cur, result = src, None
    for k, kw in pass_calls(op.spec, p, env):
        with np.errstate(all="ignore"):
            out = k.compute(cur, dst if k.writes else None, PROBE_LANES, **kw)
        cur, result = (dst if k.writes else cur), (out if k.results else result)
    return result


def _probe_pass(op: FileOp, p: PassSpec, arrays: dict[str, np.ndarray], env: dict[str, Any]
                ) -> Any:
    """One pass on the probe: its kernels' result (and output), checked against its value."""
    src = arrays[p.reads].copy()
    dst = arrays[op.spec.output]
    result = _call_kernels(op, p, src, dst, env)
    if p.reduce_op and p.kernels:  # tiles combine their kernels' results by reduce.op
        h = src.shape[-1] // 2
        halves = [_call_kernels(op, p, part.copy(), np.zeros_like(part), env)
                  for part in (src[..., :h], src[..., h:])]
        whole = ROW_REDUCTIONS[p.reduce_op](np.stack(halves, axis=-1), axis=-1)
        if not np.allclose(np.asarray(result, np.float64), whole, rtol=AGREE_REL):
            names = ", ".join(u.name for u in p.kernels)
            raise DspsimInputError(
                f"op file {op.spec.path}: {p.label}: reduce.op = {p.reduce_op!r}, but what its "
                f"kernels ({names}) return for a row is not the {p.reduce_op} of what they "
                "return for its halves (a probe input), so the variants would differ; allowed: "
                "the reduction its kernels compute (max, min or sum)")
    if p.loop is None and p.value is not None:
        seen = {**columns(env, src.ndim == 2), p.reads: src}
        want = np.broadcast_to(p.value.evaluate(seen), src.shape)
        if p.writes:
            _disagree(op, p, dst, want, "element")
        if p.reduce_op:
            _disagree(op, p, result, ROW_REDUCTIONS[p.reduce_op](want, axis=-1), "row")
    return result


def check_kernels_agree(op: FileOp) -> None:
    """Run the passes on the probe input; refuse a value its kernels do not compute, and a
    pass the probe cannot run (one line)."""
    spec = op.spec
    x = op.default_input(PROBE_SHAPES[spec.ndim])
    arrays = {spec.input: x, spec.output: np.zeros_like(x)}
    env: dict[str, Any] = {"cols": F32(x.shape[-1]), **{k: F32(v) for k, v in
                                                         spec.params.items()}}
    for p in spec.passes:
        try:
            result = _probe_pass(op, p, arrays, env)
        except (ValueError, TypeError, ArithmeticError) as e:
            if isinstance(e, DspsimInputError):
                raise
            raise DspsimInputError(
                f"op file {spec.path}: {p.label}: the pass fails on a probe input "
                f"({type(e).__name__}: {' '.join(str(e).split())[:200]}); allowed: values "
                "and kernel arguments of the shapes the pass reads") from None
        if p.into:
            env[p.into] = result
