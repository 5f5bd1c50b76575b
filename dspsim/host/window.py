"""What a run takes of the DSP's DDR window (input, output, parameter block), and the refusal,
before anything runs (``run``, ``sweep``, ``calibrate``, ``workload``), of a shape that cannot
fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dspsim.arrays import DDR_WINDOW_BYTES, ddr_window_bytes
from dspsim.errors import DspsimInputError

if TYPE_CHECKING:
    from dspsim.ops.base import Op


def window_bytes(op: Op, shape: tuple[int, ...]) -> int:
    """Bytes of the DSP's DDR window a run of ``op`` on ``shape`` takes."""
    return ddr_window_bytes(op.input_bytes(shape))


def largest_first_dim(op: Op, shape: tuple[int, ...]) -> int:
    """The largest first dimension (the others as in ``shape``) whose run fits the DSP's DDR
    window (0 if none does)."""

    def fits(first: int) -> bool:
        return window_bytes(op, (first, *shape[1:])) <= DDR_WINDOW_BYTES

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # lo fits, hi does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def check_fits_window(op: Op, shape: tuple[int, ...], where: str = "") -> None:
    """Refuse, before anything runs, a shape whose run cannot fit the DSP's DDR window
    (``where``: what the message starts with, e.g. ``"softmax: "``)."""
    need = window_bytes(op, shape)
    if need <= DDR_WINDOW_BYTES:
        return
    largest = largest_first_dim(op, shape)
    dims = "x".join(str(int(d)) for d in shape)
    if len(shape) == 1:
        what, allowed = f"n = {dims}", f"n up to {largest:,}"
    else:
        rest = "x".join(str(int(d)) for d in shape[1:])
        what = f"shape = {dims}"
        allowed = f"shape up to {largest}x{rest}" if largest else "a smaller shape"
    shown = f"{need:,}" if need < 10**30 else f"{need:.3g}"
    raise DspsimInputError(
        f"{where}{what} needs {shown} bytes of DDR (input, output, parameter block), more "
        f"than the DSP's {DDR_WINDOW_BYTES:,}-byte window; allowed {allowed}"
    )
