"""The int8 fully connected kernel (the HiFi NN library's
``xa_nn_fully_connected_sym8sxasym8s_asym8s``): its loop shape and its integer numerics.

``y[o] = clamp(MultiplyByQuantizedMultiplier(acc[o], out_multiplier, out_shift)
+ out_zero_bias, -128, 127)`` with ``acc[o] = bias[o] + sum_i W[o, i] * (x[i] + input_zero_bias)``
(TFLite's integer semantics; the tests hold it bit for bit equal to the op's separate
transcription of TFLite's reference, :mod:`dspsim.ops.fc.reference`).

Loop shape (HiFi5 style; the instructions are assumed, the vendor does not publish the inner
loop), per group of four rows: per iteration one vector of ``V = 4 core.lanes_f32`` bytes (16
on a HiFi5): four weight loads (``AE_L8X8X2_IP``, ``V`` bytes of each row), one input load
(``AE_L8X8X2_IP`` from TCM: a table load), three MACs: two ``AE_MULA8Q8X8`` (4 rows x 8 bytes
= 32 MACs each) for ``W x`` and one against ones for the row sums ``input_zero_bias``
multiplies; ``II = max(ceil(5 / load_store_units), ceil(3 / vector_alu_slots))``, 3 cycles for
64 MACs with two load/store units. A row length not a multiple of ``V`` loads the rest in one
more. The epilogue: 8 dependent operations (halves added, ``input_zero_bias`` x row sums, bias,
``AE_SLAA32S``, ``AE_MULFP32X2RAS``, the rounding right shift, the zero point,
saturate-pack-store), ``reduction_ops = 8`` x ``core.alu_latency_cycles``.

On the core a group is one row of a batch call (``rows = ceil(OUT / 4)``, ``n = IN`` 32-bit
words: four rows of ``IN`` int8; a last short group runs whole, its missing rows predicated
off, its buffer whole groups), each paying ``core.call_overhead_cycles`` besides loop and
epilogue. A memory (or its data cache) sees the four row streams side by side.

Numerics: 32-bit accumulators (a sum leaving int32 wraps, as the hardware's); the left shift
by ``max(out_shift, 0)`` saturates to int32 (``AE_SLAA32S``; TFLite's C overflows there); the
doubling high multiply adds ``2^30`` (``1 - 2^30`` for a negative product) and truncates toward
zero; the right shift by ``max(-out_shift, 0)`` rounds half away from zero. Computed as
magnitude and sign (the op's TFLite reference does the same with masks and thresholds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import LoopShape
from dspsim.kernels.toolkit import Segment

ROWS_PER_GROUP = 4
EPILOGUE_OPS = 8
# rows of a long call computed at a time (bounded int64 temporaries)
NUMERICS_ROWS = 1024


def _segments(n: int, lanes: int) -> list[Segment]:
    """One group of four rows of ``n`` int8 each (``n`` float32 words of the batch row)."""
    vb = 4 * lanes
    full, rest = divmod(n, vb)
    segs: list[Segment] = [(full, (vb,) * ROWS_PER_GROUP, ())]
    if rest:
        segs.append((1, (rest,) * ROWS_PER_GROUP, ()))
    return segs


FC_S8 = LoopShape(
    "fc_s8",
    data_loads=ROWS_PER_GROUP,  # AE_L8X8X2_IP x4: a vector of each of the four rows
    table_loads=1,  # AE_L8X8X2_IP: a vector of the input (TCM)
    stores=0,  # the four int8 outputs are stored in the epilogue
    alu_ops=3,  # AE_MULA8Q8X8 x2 (W x), x1 (row sums for input_zero_bias)
    segments=_segments,
    reduction_ops=lambda lanes: EPILOGUE_OPS,
    priming_loads=0,  # aligned rows
    interleaved_rows=ROWS_PER_GROUP,  # the four rows read side by side
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v.astype(np.int64) + (1 << 31)) & 0xFFFF_FFFF) - (1 << 31)


def requantize(acc: np.ndarray, out_multiplier: int, out_shift: int, out_zero_bias: int
               ) -> np.ndarray:
    """int32 accumulators to int8, as the kernel's epilogue computes them."""
    a = np.asarray(acc, np.int64)
    left, right = max(out_shift, 0), max(-out_shift, 0)
    a = np.clip(a * (1 << left), INT32_MIN, INT32_MAX)  # AE_SLAA32S saturates
    prod = a * np.int64(out_multiplier)  # |prod| < 2^62
    t = prod + np.where(prod >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    q = np.sign(t) * (np.abs(t) >> 31)  # divided by 2^31, truncated toward zero
    if right:
        q = np.sign(q) * ((np.abs(q) + (1 << (right - 1))) >> right)  # half away from zero
    return np.clip(q + out_zero_bias, -128, 127).astype(np.int8)


def fully_connected(w: np.ndarray, x: np.ndarray, bias: np.ndarray, input_zero_bias: int,
                    out_multiplier: int, out_shift: int, out_zero_bias: int) -> np.ndarray:
    """``y = requant(W (x + input_zero_bias) + bias)`` for int8 ``w`` ``[rows, IN]``, int8
    ``x`` ``[IN]``, int32 ``bias`` ``[rows]``: int8 ``[rows]``."""
    xz = x.astype(np.int64) + int(input_zero_bias)
    out = np.empty(w.shape[0], np.int8)
    for lo in range(0, w.shape[0], NUMERICS_ROWS):
        rows = slice(lo, lo + NUMERICS_ROWS)
        acc = _wrap32(w[rows].astype(np.int64) @ xz + bias[rows].astype(np.int64))
        out[rows] = requantize(acc, out_multiplier, out_shift, out_zero_bias)
    return out


def _compute(src: np.ndarray, dst: None, lanes: int, x: np.ndarray, bias: np.ndarray,
             out: np.ndarray, input_zero_bias: int, out_multiplier: int, out_shift: int,
             out_zero_bias: int) -> None:
    w = np.ascontiguousarray(src).reshape(-1).view(np.int8).reshape(-1, len(x))
    out[...] = fully_connected(w[:len(out)], x, bias, input_zero_bias, out_multiplier,
                               out_shift, out_zero_bias)


def groups(out_depth: int) -> int:
    """Groups of four of ``out_depth`` rows (a last short one reads and takes four rows' time)."""
    return -(-out_depth // ROWS_PER_GROUP)


def padded_bytes(out_depth: int, in_depth: int) -> int:
    """Bytes the kernel reads for ``out_depth`` x ``in_depth`` weights (whole groups)."""
    return ROWS_PER_GROUP * groups(out_depth) * in_depth


def _call(size: tuple[int, ...]) -> tuple[int, int]:
    """``(n, rows)`` of the batch call for ``OUT,IN`` weights (a row: four of ``IN`` int8)."""
    if len(size) != 2:
        raise DspsimInputError(f"fc_s8 size {size}: OUT,IN (--shape OUT,IN)")
    out_depth, in_depth = size
    return in_depth, groups(out_depth)


def _example_args(size: tuple[int, ...]) -> dict[str, Any]:
    out_depth, in_depth = size
    return {"x": np.zeros(in_depth, np.int8), "bias": np.zeros(out_depth, np.int32),
            "out": np.zeros(out_depth, np.int8), "input_zero_bias": 0,
            "out_multiplier": 1 << 30, "out_shift": 0, "out_zero_bias": 0}


register(Kernel("fc_s8", FC_S8, _compute, unit="OUT,IN int8 weights", call=_call,
                example_args=_example_args))
