"""The kernel registry: ``name -> Kernel``; see :mod:`dspsim.kernels`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels.shapes import LoopShape


@dataclass(frozen=True)
class Kernel:
    name: str
    shape: LoopShape
    compute: Callable[..., Any]
    reads: bool = True  # takes a source array
    writes: bool = False  # writes a destination array
    results: int = 0  # values the C function returns (0: void, 1: a scalar, k: a tuple)
    # each output element depends on its input element only (and the call's scalars): the
    # core may compute a long call in chunks, with the same bits, to bound its temporaries
    elementwise: bool = False
    # as a microbenchmark (``dspsim run --op kernel --variant NAME``): ``call`` maps its size (in
    # ``unit``) to the core's ``(n float32 words per row, rows)``, refusing in one line a size
    # it cannot take; ``example_args`` gives its scalar arguments for that size (default: none)
    unit: str = "float32 elements"
    call: Callable[[tuple[int, ...]], tuple[int, int]] | None = None
    example_args: Callable[[tuple[int, ...]], dict[str, Any]] = lambda size: {}

    def call_size(self, size: tuple[int, ...]) -> tuple[int, int]:
        """``(n, rows)`` of one call on ``size`` (:attr:`call`; default: ``(n,)`` one call,
        ``(rows, n)`` a batch)."""
        if self.call is not None:
            return self.call(tuple(size))
        return (size[-1], 1) if len(size) == 1 else (size[1], size[0])

    def no_data_result(self, rows: int = 1) -> Any:
        """What a call returns with the data path off: zeros of the right shape."""
        if not self.results:
            return None
        zero = np.float32(0.0) if rows == 1 else np.zeros(rows, np.float32)
        return zero if self.results == 1 else (zero,) * self.results


KERNELS: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Add a kernel to the library (a name may be registered once)."""
    if kernel.name in KERNELS and KERNELS[kernel.name] is not kernel:
        raise ValueError(f"kernel {kernel.name!r} is already registered")
    KERNELS[kernel.name] = kernel
    return kernel


def get_kernel(name: str) -> Kernel:
    if name not in KERNELS:
        raise DspsimInputError(f"no kernel {name!r}; registered: {', '.join(sorted(KERNELS))}")
    return KERNELS[name]
