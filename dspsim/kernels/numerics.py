"""What the four kernels compute, in float32, vectorised with numpy.

Each function takes and returns float32 numpy arrays and follows the seed's evaluation order
where it changes the result (two vector accumulators, then a reduction across lanes).
"""

from __future__ import annotations

import numpy as np


def _lane_accumulators(x: np.ndarray, lanes: int, fill: float) -> np.ndarray:
    """Rows of the two accumulators' inputs: shape (iterations, 2, lanes), tail padded."""
    per_iter = 2 * lanes
    padded = -(-len(x) // per_iter) * per_iter
    buf = np.full(padded, fill, np.float32)
    buf[: len(x)] = x
    return buf.reshape(-1, 2, lanes)


def vecmaxf(x: np.ndarray, lanes: int) -> np.float32:
    if len(x) == 0:
        return np.float32(0.0)
    acc = np.max(_lane_accumulators(x, lanes, -np.inf), axis=0)  # (2, lanes)
    return np.float32(np.max(np.maximum(acc[0], acc[1])))


def vecsum(x: np.ndarray, lanes: int) -> np.float32:
    if len(x) == 0:
        return np.float32(0.0)
    # Each lane of each accumulator adds its elements in loop order: a sequential float32 sum,
    # which np.cumsum performs (np.sum would use pairwise summation).
    acc = np.cumsum(_lane_accumulators(x, lanes, 0.0), axis=0, dtype=np.float32)[-1]
    lanes_sum = (acc[0] + acc[1]).astype(np.float32)
    while len(lanes_sum) > 1:  # IVP_RADDN_2XF32: a pairwise adder tree across the lanes
        half = len(lanes_sum) // 2
        lanes_sum = (lanes_sum[:half] + lanes_sum[half:]).astype(np.float32)
    return np.float32(lanes_sum[0])


def vecexpf_max(x: np.ndarray, max_value: float) -> np.ndarray:
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return np.exp(x.astype(np.float32) - np.float32(max_value)).astype(np.float32)


def vecmul(x: np.ndarray, scalar: float) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return (x * np.float32(scalar)).astype(np.float32)
