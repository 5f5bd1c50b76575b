"""What softmax should give, in float64, and the seed's input."""

from __future__ import annotations

import numpy as np


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax in float64, shifted by the max (NaN where the input makes it undefined)."""
    x64 = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x64 - np.max(x64))
        return e / e.sum()


def seed_input(n: int) -> np.ndarray:
    """The seed's data: ``x[i] = 1 + i / n`` in float32."""
    return (1 + np.arange(n, dtype=np.float32) / np.float32(n)).astype(np.float32)
