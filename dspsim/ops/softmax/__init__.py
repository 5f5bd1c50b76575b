"""The seed's softmax custom operator (RPC command 0x1402) on a 1-D array ``(n,)`` (the seed's)
or along the last axis of a ``[rows, cols]`` tensor.

This module holds the op, its ``[softmax]`` table, the document's figures, the runs that
separate calibrations and the command's handler. ``program.py`` reads beside the seed's C
(``direct``, ``pingpong``); ``online.py`` holds the new schedules (``online``, ``multibuffer``,
``resident``, ``rows``); ``layout.py`` the tiles, buffers and channels they share with
``bounds.py`` (the closed forms); ``reference.py`` the float64 answer.

The quirk switches (``max_init``, ``guard_shifted_input``) and ``schedule`` describe the seed's
code (``pingpong``; the guard also ``direct``); the new variants are written corrected whatever
they say. ``tile_bytes`` must fit a DataRAM (checked with the model) and its free space (checked
when a variant runs: :meth:`Softmax.check_run`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops.base import (
    SUMMARY_CHUNK_ELEMENTS,
    Bounds,
    Candidate,
    Op,
    Proc,
    check_tile_bytes,
    error_summary,
)
from dspsim.ops.frames import XV_MEM_BANK_COLOR_0, XV_MEM_BANK_COLOR_1
from dspsim.ops.registry import register_op
from dspsim.ops.softmax import bounds as _bounds
from dspsim.ops.softmax import layout, online, program
from dspsim.ops.softmax.program import SOFTMAX_CMD, hbDSPSoftmaxParam
from dspsim.ops.softmax.reference import default_input, reference_softmax
from dspsim.schema import Key, OpSchema

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp
    from dspsim.schema import Params

PARAMS = OpSchema(
    "softmax",
    (
        # guess: the seed does not give TILE_SIZE (models/j6.toml says why 32 KiB)
        Key("softmax.tile_bytes", int, "TILE_SIZE: bytes per ping-pong tile (multiple of 4); "
            "every TCM variant's tile", default=32768, lo=4, hi=1 << 30, unit="bytes",
            multiple=4),
        Key("softmax.max_init", str, "running max start in the seed's ping-pong path: 'zero' as "
            "the seed's C, '-inf' corrected (the new variants always start at -inf)",
            default="zero", choices=("zero", "-inf")),
        Key("softmax.schedule", str, "pingpong's channels: 'seed': buffer b uses channel b for "
            "in and out; 'split': inputs on channel 0, outputs on channel 1",
            default="seed", choices=("seed", "split")),
        Key("softmax.guard_shifted_input", bool, "the seed's vecexpf_max overflow guard (pingpong, "
            "direct) tests x - max (true, corrected) or the raw x (false, as the seed); the new "
            "variants always test x - max", default=False),
        Key("softmax.buffers", int, "multibuffer: TCM buffers of tile_bytes, spread over the "
            "DataRAMs (tile i in buffer i % buffers)", default=3, lo=2, hi=4, unit="buffers"),
    ),
    check=lambda p, model: check_tile_bytes("softmax.tile_bytes", p.tile_bytes, model),
)

# What the seed document (Horizon Robotics J6 OpenExplorer, DSP development flow) measured for
# its softmax: the figures ``dspsim reproduce`` compares with and the J6 model is calibrated to.
# Measured on the board, not computed here.
DOCUMENT = MappingProxyType({
    "title": "softmax of 100,000 float32",
    # the platform the figures were measured on: reproduce compares them only on a model of it
    # (its model file, or one with base = "j6")
    "platform": "j6",
    "shape": (100_000,),
    "cycles": MappingProxyType({"pingpong": 5_154_293, "direct": 7_648_254}),  # measured
    # the host's check of the two outputs: relative difference per element
    "check": ("direct", "pingpong", 1e-6),
})

_NEEDS = {"pingpong": {"channels": 2, "banks": 2}, "direct": {"channels": 0, "banks": 0},
          **dict.fromkeys(("online", "resident", "multibuffer", "rows"),
                          {"channels": 2, "banks": 1})}  # copied by requirements()
_KEY_VARIANTS = {"softmax.max_init": ("pingpong",), "softmax.schedule": ("pingpong",),
                 "softmax.guard_shifted_input": ("pingpong", "direct"),
                 "softmax.buffers": ("multibuffer",)}
# calibration runs: TILE_SIZE values tried (those that fit a DataRAM) besides the model's own
CANDIDATE_TILE_BYTES = (1024, 4096, 16384, 65536)
DIRECT_SHORT_N = 1024


class Softmax(Op):
    name = "softmax"
    doc = ("softmax of a float32 vector, or of each row of a [rows, cols] tensor: max; "
           "exp(x - max) and sum; multiply by 1/sum")
    cmd = SOFTMAX_CMD
    warning_codes = ("inf_input", "max_init_zero", "nan_input", "overflow_guard",
                     "partly_resident", "row_too_long", "zero_sum")
    variants = {
        "pingpong": "three passes through two TCM buffers fed by two iDMA channels (the seed's "
                    "run_tcm_opt = 1): 3 reads and 2 writes of the array",
        "direct": "the kernels read and write DDR directly (the seed's run_tcm_opt = 0)",
        "online": "two passes through the seed's two buffers and channels: a running max and "
                  "a rescaled running sum, then exp(x - max) / sum: 2 reads and 1 write",
        "resident": "the array stays in the DataRAMs' free space: copied in once (max as it "
                    "lands), exp, sum and multiply in TCM, copied out once; what does not fit "
                    "is streamed with the online schedule",
        "multibuffer": "the online schedule through softmax.buffers buffers over all DataRAMs, "
                       "inputs and outputs on separate channels over all iDMA channels",
        "rows": "whole rows per tile (2-D input), per-row max, exp, sum and multiply in TCM: "
                "1 read and 1 write; rows longer than a tile run the online schedule",
    }
    default_variant = "pingpong"
    study_variants = ("pingpong", "direct")  # the seed's trade-off: what a sweep compares
    params = PARAMS
    ndim = 1  # --n; a [rows, cols] shape (--shape) is accepted too (ndims)
    ndims = (1, 2)
    default_shape = (100_000,)
    document = DOCUMENT
    tile_key = "softmax.tile_bytes"

    def shape_refusal(self, given: Any, dims: tuple[Any, ...]) -> str:
        return (f"softmax shape {given!r}: expected a positive integer n or two positive "
                "integers ROWS,COLS")

    def requirements(self, variant: str) -> dict[str, int]:
        return dict(_NEEDS.get(variant, super().requirements(variant)))

    def checks_params(self, variant: str) -> bool:
        return variant != "direct"  # the table's hardware check is the TCM tile's

    def key_variants(self, key: str) -> tuple[str, ...]:
        # the seed's quirks are in its two schedules' code only; the buffer count is
        # multibuffer's; the tile is every TCM variant's (the default)
        return _KEY_VARIANTS.get(key) or super().key_variants(key)

    def check_run(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        if variant == "direct" or (
                variant == "resident" and not layout.resident_layout(model, shape[-1]).streamed):
            return  # no TCM buffer
        banks = _banks(model, variant)
        per_bank = max(banks.count(b) for b in set(banks))
        tile, free = model.softmax.tile_bytes, layout.free_bank_bytes(model)
        if not layout.fits(model, per_bank, tile):  # the fullest DataRAM's tiles
            hint = {"multibuffer": ", fewer softmax.buffers or more tcm.banks",
                    "pingpong": ""}.get(variant, " or tcm.banks >= 2" if per_bank > 1 else "")
            raise DspsimInputError(
                f"softmax {variant} puts {per_bank} tile(s) of softmax.tile_bytes = {tile} in "
                f"one DataRAM, whose free space is {free} bytes (tcm.bank_bytes - "
                f"tcm.reserved_bytes = {model.tcm.bank_bytes} - {model.tcm.reserved_bytes}); "
                f"allowed: softmax.tile_bytes <= {_largest_tile(model, per_bank)}{hint}"
            )

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return default_input(shape)

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int
                    ) -> hbDSPSoftmaxParam:
        rows = shape[0] if len(shape) == 2 else 1
        return hbDSPSoftmaxParam(4 * int(np.prod(shape)), input_addr, layout.VARIANT_CODES[variant],
                                 rows)

    def handler(self, dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
        return hb_dsp_softmax(dsp, input, output, tm)

    def reference(self, x: np.ndarray, params: Params | None) -> np.ndarray:
        return reference_softmax(x)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Params) -> dict[str, Any]:
        """Errors against :func:`reference_softmax`, made a slice at a time from each row's max
        and sum of exponentials: no float64 copy of a long run's whole output."""
        rows = x.reshape(-1, x.shape[-1])
        cols = rows.shape[1]
        flat = rows.reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            peak = rows.max(axis=1).astype(np.float64)
            total = np.zeros(len(rows))
            # blocks of at most SUMMARY_CHUNK_ELEMENTS: whole rows when they are short
            step_rows = max(1, SUMMARY_CHUNK_ELEMENTS // cols)
            step_cols = min(cols, SUMMARY_CHUNK_ELEMENTS)
            for r0 in range(0, len(rows), step_rows):
                block = slice(r0, r0 + step_rows)
                for c0 in range(0, cols, step_cols):
                    part = rows[block, c0:c0 + step_cols].astype(np.float64)
                    total[block] += np.exp(part - peak[block, None]).sum(axis=1)

        def reference(part: slice) -> np.ndarray:
            row = np.arange(part.start, min(part.stop, flat.size)) // cols
            with np.errstate(invalid="ignore", over="ignore"):
                return np.exp(flat[part].astype(np.float64) - peak[row]) / total[row]

        return error_summary(out, reference, floor=1e-30)

    def bounds(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
        return Bounds.of(_bounds.variant_bounds(model, self.check_variant(variant),
                                                self.shape_of(shape=shape)))

    def search_space(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
                     ) -> dict[str, list]:
        """``softmax.tile_bytes``: powers of two from 1 KiB whose buffers fit the DataRAM holding
        most of them, and the model's own; ``softmax.buffers`` 2 to 4 for ``multibuffer`` (its
        tiles fit the fewest buffers: :meth:`check_run` refuses the rest). ``direct``: none."""
        self.check_variant(variant)
        if variant == "direct":
            return {}
        space: dict[str, list] = {}
        if variant == "multibuffer":
            key = PARAMS.key("buffers")
            counts = list(range(int(key.lo), int(key.hi) + 1))
            space["softmax.buffers"] = sorted({*counts, model.softmax.buffers})
        banks = _banks(model, variant, min(space.get("softmax.buffers", [0])))
        per_bank = max(banks.count(b) for b in set(banks))
        tiles, t = set(), 1024
        while layout.fits(model, per_bank, t):
            tiles.add(t)
            t *= 2
        if layout.fits(model, per_bank, model.softmax.tile_bytes):
            tiles.add(model.softmax.tile_bytes)
        if tiles:
            space["softmax.tile_bytes"] = sorted(tiles)
        return space

    def calibration_candidates(
        self, model: HardwareModel, free_keys: Iterable[str], longest_shape: tuple[int, ...]
    ) -> list[Candidate]:
        return calibration_candidates(model, free_keys, longest_shape)


def _banks(model: HardwareModel, variant: str, buffers: int = 0) -> list[int]:
    """The DataRAM of each of the variant's TCM buffers (``buffers``: multibuffer's count, 0:
    ``softmax.buffers``)."""
    if variant == "pingpong":
        return [0, 1]  # the seed's one tile in DataRAM 0 and one in DataRAM 1
    if variant == "multibuffer":
        return layout.buffer_banks(model, buffers or model.softmax.buffers)
    return layout.buffer_banks(model)  # online, rows, resident's streamed part: one pair


def _largest_tile(model: HardwareModel, buffers: int) -> int:
    """The largest multiple of 4 of which ``buffers`` tiles fit one DataRAM."""
    lo, hi = 0, layout.free_bank_bytes(model) // 4
    while lo < hi:  # largest t with ``buffers`` tiles of 4 t bytes fitting
        mid = (lo + hi + 1) // 2
        if layout.fits(model, buffers, 4 * mid):
            lo = mid
        else:
            hi = mid - 1
    return 4 * lo


def calibration_candidates(model: Any, free_keys: Iterable[str], longest_shape: tuple[int, ...]
                           ) -> list[tuple[str, tuple[int, ...], dict[str, Any]]]:
    """``(variant, shape, settings)`` of the runs a board can make to separate calibrations:
    ping-pong at every TILE_SIZE (the model's own when ``softmax.tile_bytes`` is free), both
    schedules, with and without one request in flight per channel (unless a limit is free), at
    one tile, four tiles and one element, and the longest length; direct at 1024 elements and
    the longest length."""
    free_keys = set(free_keys)
    p = model.softmax
    tiles = [p.tile_bytes]
    if "softmax.tile_bytes" not in free_keys:
        tiles = sorted(
            {t for t in (*CANDIDATE_TILE_BYTES, p.tile_bytes) if t <= model.tcm.bank_bytes}
        )
    windows: list[int | None] = [None]
    if "idma.max_outstanding" not in free_keys and "ddr.max_outstanding" not in free_keys:
        windows.append(1)  # max_pif_req is an idma_init() argument: firmware can lower it
    longest = longest_shape[0]
    out: list[tuple[str, tuple[int, ...], dict[str, Any]]] = []
    for tile in tiles:
        lengths = sorted({tile // 4, 4 * (tile // 4) + 1, longest})
        for n, schedule, window in itertools.product(lengths, ("seed", "split"), windows):
            # the settings that differ from the model's (a window of None: the model's)
            given = (("softmax.tile_bytes", tile, p.tile_bytes),
                     ("softmax.schedule", schedule, p.schedule),
                     ("idma.max_outstanding", window, None))
            out.append(("pingpong", (n,), {k: v for k, v, own in given if v != own}))
    return out + [("direct", (n,), {}) for n in sorted({DIRECT_SHORT_N, longest})]


def hb_dsp_softmax(dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
    """Command 0x1402's handler: the seed's ``hb_dsp_softmax`` (``run_tcm_opt`` 0: direct, 1:
    ping-pong), the new schedules switched in ahead for codes from 2 (``case 2:
    softmax_online``, ``3: softmax_resident``, ``4: softmax_multibuffer``, ``5: softmax_rows``).
    Every schedule works along the last axis of ``[rows, cols]`` (``rows`` 1 in the seed)."""
    ptr: hbDSPSoftmaxParam = dsp.ddr.load_struct(input)
    src = dsp.hb_dsp_mem_map(ptr.input, ptr.data_size)
    dst = output
    rows = ptr.rows  # 1 in the seed; a [rows, cols] input runs its rows one after the other
    variant = layout.VARIANT_NAMES[ptr.run_tcm_opt]
    program.check_inf_input(dsp, src, ptr.data_size >> 2)  # the model's report, untimed
    if variant not in ("direct", "pingpong"):  # the new schedules (not in the seed)
        cols = (ptr.data_size >> 2) // rows
        if variant == "resident":
            return (yield from online.softmax_resident(dsp, src, dst, tm, rows, cols))
        if variant == "rows":
            return (yield from online.softmax_rows(dsp, src, dst, tm, rows, cols))
        return (yield from online.softmax_streamed(dsp, src, dst, tm, rows, cols,
                                            multibuffer=variant == "multibuffer"))

    TILE_SIZE = dsp.params.tile_bytes  # noqa: N806 - the seed's macro
    if dsp.params.schedule == "split":  # inputs on channel 0, outputs on channel 1
        dsp.channel_map = lambda channel, kind: 0 if kind == "copy_in" else 1
    if ptr.run_tcm_opt:  # ping-pong optimisation
        src_0 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_0, dsp.IVP_2N)
        dst_0 = src_0
        src_1 = tm.allocate(TILE_SIZE, XV_MEM_BANK_COLOR_1, dsp.IVP_2N)
        dst_1 = src_1
        src_idma = [src_0, src_1]
        dst_idma = [dst_0, dst_1]
        length = (ptr.data_size >> 2) // rows
        block = TILE_SIZE >> 2

        cycles_start = dsp.TIME_STAMP()
        for r in range(rows):
            yield from program.ping_pong_softmax(dsp, dst + r * length, src + r * length, src_idma,
                                         dst_idma, length, block)
        tm.free(src_0)
        tm.free(src_1)
        cycles_stop = dsp.TIME_STAMP()
    else:  # direct call to DDR
        cycles_start = dsp.TIME_STAMP()
        N = (ptr.data_size >> 2) // rows  # noqa: N806
        # for (r = 0; r < rows; r++): alike rows booked at once, their values as one batch
        yield from dsp.row_loop(
            rows, lambda r: program.dsp_softmax(dsp, src + r * N, N, dst + r * N),
            lambda lo, hi: program.dsp_softmax(dsp, src + lo * N, N, dst + lo * N, hi - lo), N)
        cycles_stop = dsp.TIME_STAMP()
    dsp.PROF(cycles_start, cycles_stop)  # self_cycles = cycles_stop - cycles_start; DSP_LOGI
    return 0


SOFTMAX = register_op(Softmax(), default=True)
