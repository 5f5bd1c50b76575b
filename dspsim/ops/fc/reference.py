"""What the int8 fully connected layer should give: TFLite's integer reference, transcribed.

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

import numpy as np

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
