"""What a kernel author needs: float32 helpers that compute as the Vision (IVP) instructions do
(each names the one it models; shared assumptions: :mod:`dspsim.kernels.numerics`), and the
segment builders of the usual NatureDSP-style loops. A kernel is a
:class:`~dspsim.kernels.shapes.LoopShape` and float32 numerics giving each row of a ``(rows,
n)`` batch bit for bit the 1-D call's result. Typically::

    x, xb, empty = reduction_input(src, lanes)   # float32, its (rows, n); 0.0f if n == 0
    vectors = padded_iterations(xb, lanes, -0.0)   # IVP_LAN_2XF32_IP x2, predicated tail
    acc = sequential_sum(vectors)         # two accumulators of IVP_ADDN_2XF32
    return reduction_result(radd(acc), x) # acc0 + acc1, IVP_RADDN_2XF32; scalar for a 1-D call

and its shape ``LoopShape("vecsum", data_loads=2, table_loads=0, stores=0, alu_ops=2,
segments=two_accumulator_segments, reduction_ops=lambda lanes: 1 + log2_lanes(lanes))``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dspsim.errors import DspsimInputError

F32 = np.float32

# (count, load_bytes, store_bytes): ``count`` iterations, each issuing the listed vector loads
# and stores (0 bytes: a predicated-off access that touches no memory)
Segment = tuple[int, tuple[int, ...], tuple[int, ...]]


# ----------------------------------------------------------------------------- arrays
def as_f32(x: np.ndarray) -> np.ndarray:
    """A kernel input as float32, of shape ``(n,)`` or ``(rows, n)`` (a batch of calls)."""
    x = np.asarray(x)
    if x.ndim not in (1, 2):
        raise DspsimInputError(f"kernel input must be a 1-D array or a 2-D batch of rows, got "
                               f"shape {x.shape}")
    return x.astype(F32, copy=False)


def as_batch(x: np.ndarray) -> np.ndarray:
    """A kernel input of shape ``(n,)`` or ``(rows, n)`` as ``(rows, n)`` (a view)."""
    return x if x.ndim == 2 else x[None, :]


def row_scalar(value: float | np.ndarray, x: np.ndarray) -> np.float32 | np.ndarray:
    """A kernel's scalar argument (the C's ``float32_t`` splat) in float32: a scalar, or for a
    batch ``x`` one value per row, returned as a ``(rows, 1)`` column."""
    v = np.asarray(value)
    if v.ndim == 0:
        return F32(v)
    if x.ndim == 2 and v.shape == (x.shape[0],):
        return v.astype(F32)[:, None]
    raise DspsimInputError(f"a kernel's scalar argument must be a scalar, or one value per row "
                           f"of a 2-D batch; got shape {v.shape} for input shape {x.shape}")


def canonical_nan(a: np.ndarray) -> np.ndarray:
    """``a`` (float32) with every NaN, in place, the default quiet NaN 0x7FC00000."""
    np.copyto(a, F32(np.nan), where=np.isnan(a))
    return a


def reduction_result(v: np.ndarray, x: np.ndarray) -> np.float32 | np.ndarray:
    """Per-row results ``(rows,)`` (``IVP_MOVF32`` of lane 0), an ``np.float32`` for a 1-D
    ``x``; NaN canonical."""
    v = canonical_nan(np.asarray(v, F32))
    return F32(v[0]) if x.ndim == 1 else v


def reduction_input(x: np.ndarray, lanes: int
                    ) -> tuple[np.ndarray, np.ndarray, np.float32 | np.ndarray | None]:
    """A reduction kernel's input, ``lanes`` checked: ``x`` in float32, its ``(rows, n)`` view,
    and for empty rows the C's ``if (N <= 0) return 0.f;`` result (else ``None``)."""
    if not isinstance(lanes, int | np.integer) or lanes < 1 or lanes & (lanes - 1):
        raise DspsimInputError(f"float32 lanes per vector must be a power of two >= 1 for the "
                               f"lane reduction, got {lanes!r}")
    x = as_f32(x)
    xb = as_batch(x)
    empty = reduction_result(np.zeros(xb.shape[0], F32), x) if xb.shape[1] == 0 else None
    return x, xb, empty


def scalar_result(v: np.ndarray) -> np.float32 | np.ndarray:
    """A scalar FPU step's float32 result, NaN canonical (``np.float32`` if 0-D)."""
    v = canonical_nan(np.asarray(v, F32))
    return F32(v) if v.ndim == 0 else v


# ----------------------------------------------------------------------------- loops
def padded_iterations(x: np.ndarray, lanes: int, pad: float) -> np.ndarray:
    """``x`` (``(rows, n)``) as the ``(rows, iterations, 2, lanes)`` vectors of two
    ``IVP_LAN_2XF32_IP`` loads per iteration, the predicated tail (``IVP_LAVN_2XF32_XP``) padded
    with the operation's identity ``pad`` (``-0.0`` for an add, ``-inf`` for a max)."""
    rows, n = x.shape
    per_iter = 2 * lanes
    iterations = -(-n // per_iter)
    buf = np.full((rows, iterations * per_iter), pad, F32)
    buf[:, :n] = x
    return buf.reshape(rows, iterations, 2, lanes)


def sequential_sum(vectors: np.ndarray) -> np.ndarray:
    """Two ``IVP_ADDN_2XF32`` accumulators from +0.0 adding ``vectors[:, k]`` for k = 0, 1, ...
    in turn, one rounding per add: ``(rows, iterations, 2, lanes) -> (rows, 2, lanes)``."""
    # np.cumsum adds along the axis in order (np.sum may reorder into pairwise partial sums).
    # It starts from the first element rather than +0.0; adding +0.0 at the end gives the same
    # bits: the two differ only on a -0.0 running sum, which stays -0.0 only while every term
    # is -0.0, and then +0.0 + -0.0 = +0.0 as the accumulator would have it.
    return np.cumsum(vectors, axis=1, dtype=F32)[:, -1] + F32(0.0)


def fused_square_sum(d: np.ndarray) -> np.ndarray:
    """Two fused ``IVP_MULAN_2XF32`` accumulators (``acc += d * d``) from +0.0, as
    :func:`sequential_sum`; a padded ``d = ±0`` adds +0.0, leaving the accumulator (never -0.0)."""
    squares = np.square(d.astype(np.float64))  # exact: a float32 square fits a float64
    acc = np.zeros((d.shape[0],) + d.shape[2:], F32)
    for k in range(d.shape[1]):  # one fused add per iteration, vectorised over rows and lanes
        acc = add_exact_f32(squares[:, k], acc)
    return acc


def two_accumulator_sum(x: np.ndarray, lanes: int,
                        accumulate: Callable[[np.ndarray], np.ndarray]
                        ) -> np.float32 | np.ndarray:
    """``accumulate`` (:func:`sequential_sum`, :func:`fused_square_sum`) over ``x``'s vectors,
    the tail padded with -0.0, then :func:`radd`; 0.0f for an empty row."""
    x, xb, empty = reduction_input(x, lanes)
    if empty is not None:
        return empty
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        v = radd(accumulate(padded_iterations(xb, lanes, -0.0)))
    return reduction_result(v, x)


def radd(acc: np.ndarray) -> np.ndarray:
    """``acc0 + acc1`` (``IVP_ADDN_2XF32``), then ``IVP_RADDN_2XF32``, a pairwise tree of
    halves, each add rounded: ``(rows, 2, lanes) -> (rows,)``."""
    v = (acc[:, 0] + acc[:, 1]).astype(F32)
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = (v[:, :half] + v[:, half:]).astype(F32)
    return v[:, 0]


# ----------------------------------------------------------------------------- arithmetic
def maxf(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """``IVP_MAXN_2XF32``: IEEE 754-2019 ``maximum`` (NaN if either is, +0.0 above -0.0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.maximum(a, b)  # propagates NaN, but returns either zero when they compare equal
        both_zero = (a == 0) & (b == 0)
        m = np.where(both_zero, a + b, m).astype(F32)  # -0 + -0 = -0; any +0 gives +0
    return canonical_nan(m)


def fma_f32(a: np.ndarray, b: np.ndarray | np.float32, c: np.ndarray | np.float32) -> np.ndarray:
    """``IVP_MULAN_2XF32``: ``a * b + c`` rounded once to float32 (a fused multiply-add)."""
    return add_exact_f32(np.asarray(a, np.float64) * np.asarray(b, np.float64), c)


def add_exact_f32(p: np.ndarray, c: np.ndarray | np.float32) -> np.ndarray:
    """``p + c`` rounded once to float32, ``p`` a float64 holding an exact float32 product. The
    float64 sum is made round-to-odd (truncated, last bit set if an exact TwoSum lost anything),
    which rounds to float32 as the correctly rounded fused result: no double rounding."""
    p = np.asarray(p, np.float64)
    c64 = np.asarray(c, np.float64)
    s = np.asarray(p + c64)
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    inexact = err != 0
    inexact &= np.isfinite(s)
    if inexact.any():
        bits = s.view(np.int64)  # s is a fresh array: adjust its bits in place
        # s was rounded away from zero when the lost part has the opposite sign: step back one
        # ulp toward zero (one less in the magnitude bits, whatever the sign), then make it odd.
        away = np.not_equal(err < 0, s < 0)
        away &= inexact
        np.subtract(bits, away, out=bits)
        np.bitwise_or(bits, inexact, out=bits)
    return s.astype(F32)


# ----------------------------------------------------------------------------- segments
def log2_lanes(lanes: int) -> int:
    """Levels of a lane-reduction tree (``IVP_RADDN_2XF32``, or rotate-and-max) over ``lanes``."""
    return max(0, (lanes - 1).bit_length())


def two_accumulator_segments(n: int, lanes: int) -> list[Segment]:
    """Two accumulators: ``n // (2 lanes)`` iterations of two ``IVP_LAN_2XF32_IP`` loads, then
    one predicated pass of two ``IVP_LAVN_2XF32_XP`` over the rest (0 bytes where off)."""
    vb = 4 * lanes
    main = n // (2 * lanes)
    tail_bytes = (n & (2 * lanes - 1)) * 4
    tail = (1, (max(0, min(vb, tail_bytes)), max(0, min(vb, tail_bytes - vb))), ())
    return [(main, (vb, vb), ()), tail]


def one_vector_variable_segments(n: int, lanes: int) -> list[Segment]:
    """``ceil(n / lanes)`` iterations of one vector in and out, the last variable-length
    (``IVP_LAVN_2XF32_XP`` / ``IVP_SAVN_2XF32_XP``)."""
    vb = 4 * lanes
    full, rest = divmod(n, lanes)
    segs = [(full, (vb,), (vb,))]
    if rest:
        segs.append((1, (4 * rest,), (4 * rest,)))
    return segs


def one_vector_extra_segments(n: int, lanes: int) -> list[Segment]:
    """``n // lanes`` iterations (``IVP_LAN_2XF32_IP`` / ``IVP_SAN_2XF32_IP``), then a whole
    aligning load and a variable store of the rest: a whole vector even when n is a multiple of
    the lanes (the seed's ``vecmul`` reads one past the end), then storing nothing: last a load."""
    vb = 4 * lanes
    full, rest = divmod(n, lanes)
    return [(full, (vb,), (vb,)), (1, (vb,), (4 * rest,))]
