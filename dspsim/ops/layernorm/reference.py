"""What LayerNorm should give, in float64, and the input a run uses by default."""

from __future__ import annotations

import numpy as np


def reference_layernorm(x: np.ndarray, eps: float) -> np.ndarray:
    """``(x - mean) / sqrt(var + eps)`` per row in float64 (biased variance)."""
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = x64.var(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return (x64 - mean) / np.sqrt(var + eps)


def default_input(shape: tuple[int, int]) -> np.ndarray:
    """A deterministic ramp per row with a row-dependent offset: ``x[r, c] = r / rows + 1 +
    c / cols`` in float32 (every row has a different mean, the same spread)."""
    rows, cols = shape
    r = np.arange(rows, dtype=np.float32)[:, None] / np.float32(rows)
    c = np.arange(cols, dtype=np.float32)[None, :] / np.float32(cols)
    return (r + np.float32(1.0) + c).astype(np.float32)
