"""What softmax should give, in float64, and the seed's input."""

from __future__ import annotations

import numpy as np


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax in float64 along the last axis (each row of a 2-D input), shifted by the max
    (NaN where the input makes it undefined)."""
    x64 = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x64 - np.max(x64, axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def seed_input(n: int) -> np.ndarray:
    """The seed's data: ``x[i] = 1 + i / n`` in float32."""
    return (1 + np.arange(n, dtype=np.float32) / np.float32(n)).astype(np.float32)


def default_input(shape: tuple[int, ...]) -> np.ndarray:
    """The seed's data for ``shape``: its ramp over all the elements, laid out as rows."""
    return seed_input(int(np.prod(shape))).reshape(shape)
