"""The DSP's kernel library: ``name -> Kernel(loop shape, float32 numerics)``.

A kernel is what a NatureDSP-style C function is on the core: its *loop shape*
(:class:`dspsim.kernels.shapes.LoopShape`: iterations x II, tail, reduction tree, call overhead)
gives its cycle cost against TCM or DDR, and its *numerics* compute its result in float32 as
the C does. The core runs any registered kernel by name (:meth:`dspsim.hw.core.Core.call`); an
op adds kernels by registering them here.

``compute(src, dst, lanes, **args)``: ``src`` is a float32 array of shape ``(n,)`` or
``(rows, n)`` (a batch of independent calls on rows of ``n`` elements); ``dst`` is a writable
float32 array of the same shape, or ``None`` for a kernel without output; it returns the C
function's return value per row (shape ``src.shape[:-1]``: a scalar for 1-D input), a tuple of
such values, or ``None``. Scalar arguments in ``args`` may be per-row arrays of shape
``(rows,)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.kernels.shapes import LoopShape


@dataclass(frozen=True)
class Kernel:
    name: str
    shape: LoopShape
    compute: Callable[..., Any]
    reads: bool = True  # takes a source array
    writes: bool = False  # writes a destination array


KERNELS: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Add a kernel to the library (a name may be registered once)."""
    if kernel.name in KERNELS and KERNELS[kernel.name] is not kernel:
        raise ValueError(f"kernel {kernel.name!r} is already registered")
    KERNELS[kernel.name] = kernel
    return kernel


def get_kernel(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise DspsimInputError(
            f"no kernel {name!r}; registered: {', '.join(sorted(KERNELS))}"
        ) from None
