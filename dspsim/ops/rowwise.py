"""What every op over the rows of a float32 ``[rows, cols]`` tensor shares, so that writing one
is writing its math: the op gives its table (:func:`rowwise_params`), a block of rows' kernels
(:meth:`RowwiseOp.rows`), one row's calls (:attr:`RowwiseOp.row_calls`) and its reference;
this module the variants ``direct`` (kernels on DDR row by row, like the seed's direct
softmax) and ``pingpong`` (whole rows per ``<name>.tile_bytes`` tile through the seed's
frame, in place in TCM), the handler, refusals, search space and bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.cached import direct_bounds
from dspsim.kernels.shapes import LoopShape
from dspsim.ops.base import Bounds, Op, Proc, bind, check_tile_bytes
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1, hb_dsp_ping_pong_frame
from dspsim.ops.pingpong_bounds import Tiling, ping_pong_pass_cycles
from dspsim.schema import Key, OpSchema, Params

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp

# rows(dsp, out, x, rows, cols): normalise (or whatever the op does) ``rows`` consecutive rows
RowsFunc = Callable[["Dsp", "Ptr", "Ptr", int, int], Proc]


@dataclass
class hbDSPRowsParam:  # noqa: N801 - named like the seed's structs
    rows: int
    cols: int
    input: int  # physical address of the input in DDR
    run_tcm_opt: int  # 0: direct DDR, 1: ping-pong TCM


def rows_per_tile(tile_bytes: int, cols: int) -> int:
    """Whole rows of ``cols`` float32 that one ``tile_bytes`` buffer holds."""
    return tile_bytes // (4 * cols)


def rowwise_params(name: str, *keys: Key) -> OpSchema:
    """The ``[name]`` table: ``name.tile_bytes`` (checked against the DataRAM), then ``keys``."""
    tile_key = f"{name}.tile_bytes"

    def check(p: Params, model: HardwareModel) -> None:
        check_tile_bytes(tile_key, p.tile_bytes, model)

    # guess: like softmax.tile_bytes, 32 KiB of each 256 KiB DataRAM; holds whole rows only
    tile = Key(tile_key, int, "bytes per ping-pong buffer; a tile holds as many whole rows as "
               "fit (at least one)", default=32768, lo=4, hi=1 << 30, unit="bytes", multiple=4)
    return OpSchema(name, (tile, *keys), check=check)


def eps_key(name: str, added_to: str, default: float) -> Key:
    """A normalisation's ``name.eps``: added to ``added_to`` before the square root."""
    return Key(f"{name}.eps", float, f"added to {added_to} before the square root",
               default=default, lo=0.0, hi=1.0)


# ----------------------------------------------------------------------------- float32 limits
STATISTICS_WARNINGS = ("statistics_overflow", "statistics_underflow")
# rstd at or above 2**63: the denominator 1 / rstd**2 is below float32's smallest normal
_RSTD_UNDERFLOW = np.float32(2.0**63)


def report_statistics(dsp: Dsp, op: RowwiseOp, x: Ptr, rows: int, cols: int,
                      stats: tuple[Any, ...], rstd: Any) -> None:
    """Count (a model check, not in the C) the finite rows whose float32 ``stats`` (a value per
    row each) overflow, or whose denominator (``rstd = 1 / sqrt(denominator)``) underflows
    float32's smallest normal where :meth:`~RowwiseOp.exact_denominator` is not 0."""
    if not dsp.move_data:
        return
    stats32 = [np.atleast_1d(np.asarray(v, np.float32)) for v in stats]
    over = ~np.logical_and.reduce([np.isfinite(v) for v in stats32])
    with np.errstate(invalid="ignore"):
        under = ~over & (np.atleast_1d(np.asarray(rstd, np.float32)) >= _RSTD_UNDERFLOW)
    if not (over.any() or under.any()):
        return
    values = x.mem.f32(x, rows * cols).reshape(rows, cols)
    finite = np.isfinite(values).all(axis=1)
    over &= finite
    under &= finite
    if under.any():
        with np.errstate(over="ignore", under="ignore"):
            exact = op.exact_denominator(values[under].astype(np.float64), dsp.params.eps)
        under[under] = exact > 0
    if over.any():
        dsp.warn("statistics_overflow",
                 f"{op.name}: a row's float32 statistics overflow (|x - mean| or |x| beyond "
                 "about 1.8e19): its output is 0 or NaN where float64 gives finite values; the "
                 "count is the rows affected", int(over.sum()))
    if under.any():
        dsp.warn("statistics_underflow",
                 f"{op.name}: a row's float32 {op.denominator} underflows (below 1.2e-38: "
                 "its squares denormal or 0), so its output is inf, NaN or imprecise where "
                 f"float64 gives finite values ({op.name}.eps > 0 avoids it); the count is the "
                 "rows affected", int(under.sum()))


# ----------------------------------------------------------------------------- the program
def tile_rows(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, out: list,
              rows_cols: tuple[RowsFunc, int]) -> Proc:
    """The ping-pong frame's tile function: the tile's whole rows, in place in TCM."""
    rows, cols = rows_cols
    yield from rows(dsp, out_addr, in_addr, size // cols, cols)


def hb_dsp_rowwise(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager, rows: RowsFunc,
                   name: str) -> Proc:
    """``hb_dsp_<name>(input, output, tm)``: the parameter block, then ping-pong over row
    blocks (``run_tcm_opt = 1``) or every row on DDR, timed and profiled."""
    ptr: hbDSPRowsParam = dsp.ddr.load_struct(input)
    src = dsp.hb_dsp_mem_map(ptr.input, 4 * ptr.rows * ptr.cols)
    dst, cols = output, ptr.cols
    TILE_SIZE = dsp.params.tile_bytes  # noqa: N806 - as the seed's macro

    if ptr.run_tcm_opt:  # ping-pong over row blocks
        buf_0 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_0, dsp.IVP_2N)
        buf_1 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_1, dsp.IVP_2N)
        block = rows_per_tile(TILE_SIZE, cols) * cols  # whole rows per tile

        cycles_start = dsp.TIME_STAMP()
        with dsp.pass_(name):
            yield from hb_dsp_ping_pong_frame(
                dsp, dst, src, [buf_0, buf_1], [buf_0, buf_1], ptr.rows * cols, tile_rows,
                [np.float32(0)], (rows, cols), True, block,
            )
        tm.free(buf_0)
        tm.free(buf_1)
        cycles_stop = dsp.TIME_STAMP()
    else:  # direct call to DDR, one row after the other
        cycles_start = dsp.TIME_STAMP()
        with dsp.pass_(name):  # alike rows booked at once; their values as one batch
            yield from dsp.row_loop(
                ptr.rows, lambda r: rows(dsp, dst + r * cols, src + r * cols, 1, cols),
                lambda lo, hi: rows(dsp, dst + lo * cols, src + lo * cols, hi - lo, cols), cols)
        cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)
    return 0


# ----------------------------------------------------------------------------- the bounds
def rowwise_bounds(model: HardwareModel, variant: str, shape: tuple[int, int],
                   row_calls: tuple[tuple[LoopShape, bool], ...], tile_bytes: int) -> Bounds:
    """Closed-form traffic and bounds of a row-wise op whose rows each run ``row_calls``
    (``(shape, stores to DDR in the direct variant)``), with the host memory's ``L``
    (:mod:`dspsim.hw.policy`), ``B``, ``m`` and ``S`` = ``idma.setup_cycles`` (direct through
    the data cache: per line, :mod:`dspsim.kernels.cached`). **DMA**: bytes that must cross
    before the timer stops / ``B``; **latency**: direct, dependent vector loads one at a time,
    ping-pong, bursts ``min(m, 2 idma.max_outstanding)`` in flight; **compute**: the kernels'
    TCM cycles + ``S`` per descriptor. ``estimate_cycles``: direct, the kernels' walk (exact for
    the core alone on an uncached port whose reads and writes share a latency; with slower
    writes the write buffer's state between calls is not followed: off by up to 10-20 %);
    ping-pong, the frame's one pass (:func:`~dspsim.ops.pingpong_bounds.ping_pong_pass_cycles`:
    exact when the rows fit one tile)."""
    rows, cols = shape
    row_compute = sum(s.tcm_cycles(cols, model.core) for s, _ in row_calls)
    if variant == "direct":
        calls = tuple((s, "x", "y" if stores else None) for s, stores in row_calls)
        out = direct_bounds(model, calls, cols, rows)
        estimate = out.pop("estimate_cycles")
        del out["ddr_requests"], out["outstanding_requests"]  # calibrate derives the window
    else:
        out, estimate = _pingpong_bounds(model, shape, row_compute, tile_bytes)
    return bounds_with_binding(out, estimate)


def _pingpong_bounds(model: HardwareModel, shape: tuple[int, int], row_compute: int,
                     tile_bytes: int) -> tuple[dict[str, Any], float]:
    """The ping-pong variant's traffic, bounds and estimate (tiles of whole rows)."""
    rows, cols = shape
    ddr, idma = model.host_memory, model.idma
    policy, tensor = ddr.policy, 4 * rows * cols
    per_tile = min(rows_per_tile(tile_bytes, cols), rows)  # the rows there are, at most
    tiles = -(-rows // per_tile) if per_tile else 0
    last_rows = rows - (tiles - 1) * per_tile if tiles else 0
    burst = idma.burst_bytes
    reads = -(-4 * per_tile * cols // burst) * (tiles - 1) + -(-4 * last_rows * cols // burst)
    # the frame waits for the last output only: the other buffer's may still be in flight
    unwaited = 4 * per_tile * cols if tiles >= 2 else 0
    window = min(ddr.max_outstanding, (1 if tiles == 1 else 2) * idma.max_outstanding)
    out = {
        "ddr_read_bytes": tensor,
        "ddr_write_bytes": tensor,
        "dma_bound_cycles": policy.data_cycles(2 * tensor - unwaited),
        "latency_bound_cycles": policy.latency_total(reads, reads - -(-unwaited // burst))
        / window,
        "compute_bound_cycles": rows * row_compute + 2 * tiles * idma.setup_cycles,
        "tiles": tiles,
        "rows_per_tile": per_tile,
    }
    estimate = ping_pong_pass_cycles(
        model, Tiling.of(rows * cols, per_tile * cols), lambda s: s // cols * row_compute,
        write_back=True, stops_timer=True) if per_tile else 0.0
    return out, estimate


def bounds_with_binding(out: dict[str, Any], estimate: float) -> Bounds:
    """``out`` completed: the lower bound (the largest of three), which binds, the estimate."""
    bind(out, raise_estimate=False)
    out["estimate_cycles"] = max(estimate, out["lower_bound_cycles"])
    return Bounds.of(out)


# ----------------------------------------------------------------------------- the op
def ramp_input(shape: tuple[int, ...]) -> np.ndarray:
    """``x[r, c] = r / rows + 1 + c / cols`` in float32: each row its own mean, one spread."""
    rows, cols = shape
    r = np.arange(rows, dtype=np.float32)[:, None] / np.float32(rows)
    c = np.arange(cols, dtype=np.float32)[None, :] / np.float32(cols)
    return (r + np.float32(1.0) + c).astype(np.float32)


class RowwiseOp(Op):
    """An op over a float32 ``[rows, cols]`` tensor's rows (``pingpong``, ``direct``); a subclass
    gives ``name``, ``doc``, ``cmd``, ``params``, :attr:`row_calls`, :meth:`rows`, ``reference``."""

    # one row's kernels in order: (loop shape, stores to DDR in the direct variant)
    row_calls: ClassVar[tuple[tuple[LoopShape, bool], ...]]
    # the variants' descriptions: a tile's work in TCM, the direct variant's reads and writes
    tcm_work: ClassVar[str] = "the kernels"
    direct_traffic: ClassVar[str] = ""
    denominator: ClassVar[str] = "variance"  # eps is added to it (the underflow warning)
    warning_codes = STATISTICS_WARNINGS
    default_variant = "pingpong"
    ndim = 2
    default_shape = (1024, 256)
    tolerance = (1e-5, 1e-6)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            cls.tile_key = f"{cls.name}.tile_bytes"
            cls.variants = {
                "pingpong": "whole rows tiled through two TCM buffers (the seed's ping-pong "
                            f"frame); {cls.tcm_work} in TCM; one read and one write",
                "direct": "the kernels read and write DDR row by row"
                          + (f": {cls.direct_traffic}" if cls.direct_traffic else ""),
            }

    def rows(self, dsp: Dsp, out: Ptr, x: Ptr, rows: int, cols: int) -> Proc:
        """The op's kernels and scalar steps on ``rows`` rows of ``cols`` at ``x`` into ``out``."""
        raise NotImplementedError

    def exact_denominator(self, x64: np.ndarray, eps: float) -> np.ndarray:
        """Per row of ``x64`` (float64), what it divides by the root of: ``denominator + eps``."""
        raise NotImplementedError

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int
                    ) -> hbDSPRowsParam:
        return hbDSPRowsParam(shape[0], shape[1], input_addr, int(variant == "pingpong"))

    def handler(self, dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
        return hb_dsp_rowwise(dsp, input, output, tm, self.rows, self.name)

    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 2, "banks": 2} if variant == "pingpong" else super().requirements(
            variant)

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return ramp_input(shape)

    def checks_params(self, variant: str) -> bool:
        return variant != "direct"  # the table's hardware check is the TCM tile's

    def check_run(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        if variant != "pingpong":
            return
        tile, row = model.params(self.name).tile_bytes, 4 * shape[1]
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        if row > free:
            raise DspsimInputError(
                f"{self.name} pingpong: a row of {shape[1]} float32 ({row} bytes) is larger "
                f"than a DataRAM's free space ({free} bytes: tcm.bank_bytes - "
                "tcm.reserved_bytes); allowed: the direct variant, or rows of at most "
                f"{free // 4} float32"
            )
        if rows_per_tile(tile, shape[1]) == 0 or tile > free:
            raise DspsimInputError(
                f"{self.name} pingpong: {self.tile_key} = {tile} must hold a row of "
                f"{shape[1]} float32 ({row} bytes) and fit a DataRAM's free space ({free} "
                f"bytes); allowed: {row} to {free}"
            )

    def search_space(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
                     ) -> dict[str, list]:
        """``pingpong``'s tiles that hold a row and fit a DataRAM's free space: one row, powers
        of two from 1 KiB, the model's own. ``direct`` has none."""
        self.check_variant(variant)
        if variant != "pingpong":
            return {}
        row = 4 * shape[-1]
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        tiles = {row} if row <= free else set()
        t = 1024
        while t <= free:
            if t >= row:
                tiles.add(t)
            t *= 2
        own = model.params(self.name).tile_bytes
        if row <= own <= free:
            tiles.add(own)
        return {self.tile_key: sorted(tiles)} if tiles else {}

    def bounds(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
        return rowwise_bounds(model, self.check_variant(variant), self.shape_of(shape=shape),
                              self.row_calls, model.params(self.name).tile_bytes)
