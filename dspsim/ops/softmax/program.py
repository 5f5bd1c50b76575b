"""The seed's softmax (``run_tcm_opt`` 0 and 1), written to be read beside its C.

Each function is a SimPy process body on a DSP core: ``yield from`` is where the C calls a
kernel, an iDMA macro or the frame; ``dsp.params`` holds ``TILE_SIZE`` (``softmax.tile_bytes``)
and the quirk switches. ``hb_dsp_softmax`` is in ``__init__.py``; added to the seed: a ``[rows,
cols]`` input runs the seed's softmax row by row inside the timer, and codes from 2 run the new
schedules (``online.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dspsim.hw.memory import Ptr
from dspsim.kernels import numerics
from dspsim.ops.frames import Proc, hb_dsp_ping_pong_frame

if TYPE_CHECKING:
    from dspsim.platform import Dsp

SOFTMAX_CMD = 0x1402


@dataclass
class hbDSPSoftmaxParam:  # noqa: N801 - the seed's struct name
    data_size: int  # bytes
    input: int  # physical address of the input in DDR
    run_tcm_opt: int  # 0: direct DDR, 1: ping-pong TCM; 2 and up: the new schedules
    # (dspsim.ops.softmax.layout.VARIANT_CODES, run by dspsim.ops.softmax.hb_dsp_softmax)
    rows: int = 1  # softmax along the last axis of [rows, data_size / 4 / rows] (not the seed's)


# ------------------------------------------------------------------------- quirk reports
def reciprocal(dsp: Dsp, sum_value: float | np.ndarray) -> np.float32 | np.ndarray:
    """``1.0f / sum`` in float32 (one or one per row): each zero sum's +inf is reported (a
    sum below 2**-128 overflows too: underflowed exponentials, which
    :func:`check_running_max` reports)."""
    zeros = int(np.count_nonzero(np.asarray(sum_value) == 0)) if dsp.move_data else 0
    if zeros:
        dsp.warn("zero_sum", "the sum of exponentials is 0: 1/sum is +inf and the output "
                 "inf/NaN", zeros)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if np.ndim(sum_value):
            return (np.float32(1.0) / np.asarray(sum_value, np.float32)).astype(np.float32)
        return np.float32(1.0) / np.float32(sum_value)


def check_exp_input(dsp: Dsp, x: Ptr, n: int, max_value: float | np.ndarray,
                    rows: int = 1) -> None:
    """Report what vecexpf_max's flags see in its input (model check, not in the C); for
    ``rows`` rows of ``n`` at ``x`` (``max_value`` one per row), the counts of every row."""
    if not dsp.move_data or n <= 0:
        return
    guard = dsp.params.guard_shifted_input
    xs = x.mem.f32(x, rows * n)
    flags = numerics.expf_input_flags(xs.reshape(rows, n) if rows > 1 else xs, max_value,
                                      guard)
    flags = {k: int(np.sum(v)) for k, v in flags.items()}
    if flags["nan_inputs"]:
        dsp.warn("nan_input", "NaN inputs: vecexpf_max flags them (b_nan) but never uses the "
                 "flag, so they flow through to the output", flags["nan_inputs"])
    if flags["overflow_guard"]:
        dsp.warn("overflow_guard", "vecexpf_max's overflow guard tests the raw input, so an "
                 "element >= 88.72 gives exp = +inf and the softmax NaN although softmax is "
                 "shift-invariant (softmax.guard_shifted_input = true tests x - max instead)"
                 if not guard else "vecexpf_max's overflow guard fired on x - max >= 88.72",
                 flags["overflow_guard"])


def check_inf_input(dsp: Dsp, src: Ptr, n: int) -> None:
    """Report +inf among ``n`` inputs at ``src`` (model check, every variant): vecexpf_max
    passes +inf through (``b_inf``), the other exps are 0, the sum +inf, ``1/sum`` 0: the row
    is NaN at each +inf and 0 elsewhere, where float64 gives a NaN row."""
    if not dsp.move_data or n <= 0:
        return
    count = int(np.count_nonzero(src.mem.f32(src, n) == np.inf))
    if count:
        dsp.warn("inf_input", "+inf inputs: vecexpf_max passes +inf through, so exp is +inf "
                 "there and 0 elsewhere in its row, the sum +inf and 1/sum 0: the row's output "
                 "is NaN at each +inf and 0 elsewhere (a float64 softmax gives a NaN row)",
                 count)


def check_running_max(dsp: Dsp, max_value: float, src: Ptr, length: int) -> None:
    """Report the seed's running max that starts at 0.0f when it changed the result."""
    if not dsp.move_data or dsp.params.max_init != "zero" or max_value != 0.0:
        return
    # the max of the numbers (NaN when there are none, without numpy's All-NaN warning)
    true_max = float(np.fmax.reduce(src.mem.f32(src, length))) if length else 0.0
    if true_max < 0.0:
        effect = ("every exp(x - 0) underflows to 0: the sum is 0 and the output inf/NaN"
                  if true_max < -103.0 else "exp(x - 0) is used instead of exp(x - max)")
        dsp.warn(
            "max_init_zero",
            f"the ping-pong running max starts at 0.0f and every input is below 0 (true "
            f"max {true_max:.6g}), so the max used is 0.0: {effect}; "
            'softmax.max_init = "-inf" corrects it',
        )


def vecexpf_max(dsp: Dsp, z: Ptr, x: Ptr, n: int, max_value: float | np.ndarray,
                rows: int = 1) -> Proc:
    check_exp_input(dsp, x, n, max_value, rows)
    yield from dsp.core.call("vecexpf_max", n, x, z, rows=rows, max_value=max_value,
                             guard_shifted_input=dsp.params.guard_shifted_input)


# ------------------------------------------------------------------------- tile functions
def tile_max(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, max_: list, param: float) -> Proc:
    max_value = yield from dsp.core.call("vecmaxf", size, in_addr)
    max_[0] = max_value if max_value > max_[0] else max_[0]


def tile_sum(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, sum_: list, param: float) -> Proc:
    yield from vecexpf_max(dsp, out_addr, in_addr, size, param)
    sum_[0] = np.float32(sum_[0] + (yield from dsp.core.call("vecsum", size, out_addr)))


def tile_mul(dsp: Dsp, out_addr: Ptr, in_addr: Ptr, size: int, out: list, param: float) -> Proc:
    div = reciprocal(dsp, param)
    yield from dsp.core.call("vecmul", size, in_addr, out_addr, scalar=div)


# ------------------------------------------------------------------------- direct version
def dsp_softmax(dsp: Dsp, input: Ptr, length: int, output: Ptr, rows: int = 1) -> Proc:
    """The seed's direct softmax of one array, or of ``rows`` consecutive rows as batched calls
    (the values of rows booked by ``dsp.row_loop``)."""
    core = dsp.core
    with dsp.pass_("max"):
        max_value = yield from core.call("vecmaxf", length, input, rows=rows)
    with dsp.pass_("exp"):
        yield from vecexpf_max(dsp, output, input, length, max_value, rows)
    with dsp.pass_("sum"):
        sum_ = yield from core.call("vecsum", length, output, rows=rows)
    with dsp.pass_("mul"):
        div = reciprocal(dsp, sum_)
        yield from core.call("vecmul", length, output, output, rows=rows, scalar=div)
    return 0


# ------------------------------------------------------------------------- ping-pong version
def ping_pong_softmax(
    dsp: Dsp, dst: Ptr, src: Ptr, src_idma: list[Ptr], dst_idma: list[Ptr], length: int,
    block: int,
) -> Proc:
    """The ping-pong branch's three passes over one array (one row) of ``length`` float32."""
    max_value = [np.float32(0.0 if dsp.params.max_init == "zero" else -np.inf)]
    with dsp.pass_("max"):
        yield from hb_dsp_ping_pong_frame(dsp, dst, src, src_idma, dst_idma, length, tile_max,
                                          max_value, 0, False, block)
        check_running_max(dsp, max_value[0], src, length)  # model check, not in the C
    sum_value = [np.float32(0.0)]
    with dsp.pass_("exp_sum"):
        yield from hb_dsp_ping_pong_frame(dsp, dst, src, src_idma, dst_idma, length, tile_sum,
                                          sum_value, max_value[0], True, block)
    with dsp.pass_("mul"):
        yield from hb_dsp_ping_pong_frame(dsp, dst, dst, src_idma, dst_idma, length, tile_mul,
                                          [0], sum_value[0], True, block)
