"""The int8 fully connected layer's values and what it should give.

The host's input buffer (in ``host.memory``) holds, in order: a header of two little-endian
uint32 (``OUT``, ``IN``), then at byte :data:`WEIGHTS_OFFSET` the int8 weights ``[OUT, IN]``
row by row (rounded up to whole groups of four rows, the extra rows zero: the kernel reads
whole groups), then the int8 input ``[IN]`` and the int32 bias ``[OUT]``, each on a 4-byte
boundary. The output buffer holds the int8 result ``[OUT]``. An ``.npz`` input (``--input
F.npz``, ``numpy.savez(F, weights=W, input=x, bias=b)``) must hold exactly ``weights`` (2-D
int8 ``[OUT, IN]``), ``input`` (1-D int8 ``[IN]``) and ``bias`` (1-D int32 ``[OUT]``). Each
member's header is checked before its data is read (no pickles, no allocation larger than the
header announces and the file holds).

The reference is TFLite's integer one, transcribed:

``reference_integer_ops::FullyConnected`` with ``MultiplyByQuantizedMultiplier`` (the classic
two-step rounding of ``tensorflow/lite/kernels/internal/common.h``), line by line in numpy::

    acc = bias[o]
    for i: acc += filter[o, i] * (input[i] + input_offset)
    acc = MultiplyByQuantizedMultiplier(acc, output_multiplier, output_shift)
    acc += output_offset
    output[o] = clamp(acc, -128, 127)

    MultiplyByQuantizedMultiplier(x, m, shift):
        left_shift = shift > 0 ? shift : 0;  right_shift = shift > 0 ? 0 : -shift
        return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * (1 << left_shift), m),
                                   right_shift)
    SaturatingRoundingDoublingHighMul(a, b):
        overflow = a == b && a == INT32_MIN
        ab = (int64) a * b;  nudge = ab >= 0 ? 1 << 30 : 1 - (1 << 30)
        high = (int32) ((ab + nudge) / (1ll << 31))       // C division: toward zero
        return overflow ? INT32_MAX : high
    RoundingDivideByPOT(x, e):
        mask = (1 << e) - 1;  remainder = x & mask;  threshold = (mask >> 1) + (x < 0)
        return (x >> e) + (remainder > threshold)

Where the C++ overflows int32 (undefined behaviour: an accumulator past int32, ``x << left_shift``
past int32), this transcription takes what the DSP does: the accumulator wraps (32-bit
accumulators) and the left shift saturates (``AE_SLAA32S``). Nothing else departs from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.arrays import read_npz_arrays
from dspsim.errors import DspsimInputError
from dspsim.kernels.fc_s8 import padded_bytes
from dspsim.ops.base import align_up

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _wrap_int32(v: np.ndarray) -> np.ndarray:
    return (v.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    a = np.asarray(a, np.int64)
    overflow = (a == b) & (a == INT32_MIN)
    ab = a * np.int64(b)
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    t = ab + nudge
    high = np.where(t >= 0, t // (1 << 31), -((-t) // (1 << 31)))  # toward zero
    return np.where(overflow, np.int64(INT32_MAX), high)


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    x = np.asarray(x, np.int64)
    mask = np.int64((1 << exponent) - 1)
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> exponent) + (remainder > threshold).astype(np.int64)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    left_shift = shift if shift > 0 else 0
    right_shift = 0 if shift > 0 else -shift
    shifted = np.clip(np.asarray(x, np.int64) * (1 << left_shift), INT32_MIN, INT32_MAX)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier),
                                  right_shift)


def accumulators(weights: np.ndarray, x: np.ndarray, bias: np.ndarray, input_offset: int
                 ) -> np.ndarray:
    """``bias[o] + sum_i W[o, i] * (x[i] + input_offset)`` in 32-bit accumulators."""
    acc = np.empty(weights.shape[0], np.int64)
    xo = x.astype(np.int64) + int(input_offset)
    for lo in range(0, weights.shape[0], 512):  # bounded int64 temporaries
        w = weights[lo:lo + 512].astype(np.int64)
        acc[lo:lo + 512] = bias[lo:lo + 512].astype(np.int64) + (w * xo).sum(axis=1)
    return _wrap_int32(acc)


def fully_connected_reference(weights: np.ndarray, x: np.ndarray, bias: np.ndarray,
                              input_offset: int, output_multiplier: int, output_shift: int,
                              output_offset: int) -> np.ndarray:
    """TFLite's integer fully connected: int8 ``[OUT]``."""
    acc = accumulators(weights, x, bias, input_offset)
    acc = multiply_by_quantized_multiplier(acc, output_multiplier, output_shift)
    acc = acc + int(output_offset)
    return np.clip(acc, -128, 127).astype(np.int8)


def reference_of(values: dict[str, np.ndarray], params: object) -> np.ndarray:
    """The reference for the op's values (weights, input, bias) and parameters."""
    return fully_connected_reference(values["weights"], values["input"], values["bias"],
                                     params.input_zero_bias, params.out_multiplier,
                                     params.out_shift, params.out_zero_bias)


DEFAULT_SEED = 20240519  # the default input's seed (numpy's PCG64)


def default_values(shape: tuple[int, int], seed: int = DEFAULT_SEED) -> dict[str, np.ndarray]:
    """Deterministic int8 weights and input and int32 bias from ``seed``: weights and input
    uniform over the whole int8 range, bias uniform over +-2^16."""
    out_depth, in_depth = shape
    rng = np.random.default_rng(seed)
    return {
        "weights": rng.integers(-128, 128, size=(out_depth, in_depth), dtype=np.int8),
        "input": rng.integers(-128, 128, size=in_depth, dtype=np.int8),
        "bias": rng.integers(-(1 << 16), 1 << 16, size=out_depth, dtype=np.int32),
    }


# ----------------------------------------------------------------------------- the values
WEIGHTS_OFFSET = 128
ARRAYS = {"weights": (np.int8, 2), "input": (np.int8, 1), "bias": (np.int32, 1)}
_HINT = ("write one with numpy.savez(path, weights=W.astype(numpy.int8), "
         "input=x.astype(numpy.int8), bias=b.astype(numpy.int32))")


def layout(shape: tuple[int, int]) -> dict[str, int]:
    """Byte offsets of the packed buffer's parts, and its size."""
    out_depth, in_depth = shape
    x_off = align_up(WEIGHTS_OFFSET + padded_bytes(out_depth, in_depth), 4)
    bias_off = align_up(x_off + in_depth, 4)
    return {"weights": WEIGHTS_OFFSET, "input": x_off, "bias": bias_off,
            "bytes": bias_off + 4 * out_depth}


def pack(values: dict[str, np.ndarray]) -> np.ndarray:
    """The host buffer's bytes for checked ``values``."""
    out_depth, in_depth = values["weights"].shape
    lay = layout((out_depth, in_depth))
    buf = np.zeros(lay["bytes"], np.uint8)
    buf[:8] = np.array([out_depth, in_depth], "<u4").view(np.uint8)
    w = values["weights"].reshape(-1).view(np.uint8)
    buf[lay["weights"]:lay["weights"] + w.size] = w
    buf[lay["input"]:lay["input"] + in_depth] = values["input"].view(np.uint8)
    buf[lay["bias"]:lay["bias"] + 4 * out_depth] = values["bias"].astype("<i4").view(np.uint8)
    return buf


def unpack(buf: np.ndarray) -> dict[str, np.ndarray]:
    """Views of the weights, input and bias in a packed buffer."""
    out_depth, in_depth = (int(v) for v in np.asarray(buf[:8], np.uint8).view("<u4"))
    lay = layout((out_depth, in_depth))
    return {
        "weights": buf[lay["weights"]:lay["weights"] + out_depth * in_depth]
        .view(np.int8).reshape(out_depth, in_depth),
        "input": buf[lay["input"]:lay["input"] + in_depth].view(np.int8),
        "bias": buf[lay["bias"]:lay["bias"] + 4 * out_depth].view("<i4"),
    }


def _check_names(names: set[str], what: str) -> None:
    missing = [k for k in ARRAYS if k not in names]
    if missing:
        raise DspsimInputError(f"{what}: missing array {missing[0]!r}; expected exactly "
                               f"weights, input and bias; {_HINT}")
    extra = sorted(names - set(ARRAYS))
    if extra:
        raise DspsimInputError(f"{what}: unexpected array {extra[0]!r}; expected exactly "
                               "weights, input and bias")


def check_values(values: Any, what: str = "fc input") -> dict[str, np.ndarray]:
    """``values`` (a mapping with ``weights``, ``input``, ``bias``) checked: dtypes, dimensions
    and sizes that agree; a one-line error naming what is wrong otherwise."""
    if not hasattr(values, "keys"):
        raise DspsimInputError(f"{what}: expected arrays weights, input and bias; {_HINT}")
    _check_names(set(values.keys()), what)
    out: dict[str, np.ndarray] = {}
    for name, (dtype, ndim) in ARRAYS.items():
        a = np.asarray(values[name])
        if a.dtype != dtype:
            raise DspsimInputError(f"{what}: {name} is {a.dtype}, expected "
                                   f"{np.dtype(dtype).name}; {_HINT}")
        if a.ndim != ndim or a.size == 0:
            raise DspsimInputError(f"{what}: {name} has shape {a.shape}, expected a non-empty "
                                   f"{ndim}-D array")
        out[name] = np.ascontiguousarray(a)
    out_depth, in_depth = out["weights"].shape
    if out["input"].shape != (in_depth,):
        raise DspsimInputError(f"{what}: input has {out['input'].size} values, the weights "
                               f"{in_depth} columns; they must agree")
    if out["bias"].shape != (out_depth,):
        raise DspsimInputError(f"{what}: bias has {out['bias'].size} values, the weights "
                               f"{out_depth} rows; they must agree")
    return out


def _check_headers(headers: dict[str, Any], what: str) -> None:
    """The archive's names, dtypes and dimensions, from its members' headers alone."""
    _check_names(set(headers), what)
    for name, (dtype, ndim) in ARRAYS.items():
        shape, _, got = headers[name]
        if got != dtype or len(shape) != ndim:
            raise DspsimInputError(
                f"{what}: {name} is a {len(shape)}-D {got} array, expected {ndim}-D "
                f"{np.dtype(dtype).name}; {_HINT}")


def read_npz(path: str) -> dict[str, np.ndarray]:
    """``weights``, ``input`` and ``bias`` from an ``.npz`` file, checked (every header
    before any data is read: :func:`dspsim.arrays.read_npz_arrays`)."""
    what = f"--input {path!r}"
    values = read_npz_arrays(path, lambda headers: _check_headers(headers, what), _HINT)
    return check_values(values, what)
