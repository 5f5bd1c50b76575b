"""The seed's four NatureDSP-style kernels, registered: loop shape + float32 numerics."""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.kernels import numerics
from dspsim.kernels.registry import Kernel, register
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECMUL, VECSUM


def _vecmaxf(src: np.ndarray, dst: None, lanes: int) -> Any:
    return numerics.vecmaxf(src, lanes)


def _vecsum(src: np.ndarray, dst: None, lanes: int) -> Any:
    return numerics.vecsum(src, lanes)


def _vecexpf_max(
    src: np.ndarray, dst: np.ndarray, lanes: int, max_value: Any, guard_shifted_input: bool = False
) -> None:
    dst[...] = numerics.vecexpf_max(src, max_value, guard_shifted_input)


def _vecmul(src: np.ndarray, dst: np.ndarray, lanes: int, scalar: Any) -> None:
    dst[...] = numerics.vecmul(src, scalar)


register(Kernel("vecmaxf", VECMAXF, _vecmaxf, results=1))
register(Kernel("vecsum", VECSUM, _vecsum, results=1))
register(Kernel("vecexpf_max", VECEXPF_MAX, _vecexpf_max, writes=True, elementwise=True,
                example_args=lambda size: {"max_value": np.float32(0.0)}))
register(Kernel("vecmul", VECMUL, _vecmul, writes=True, elementwise=True,
                example_args=lambda size: {"scalar": np.float32(1.0)}))
