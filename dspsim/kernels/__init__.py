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

Writing a kernel: :mod:`dspsim.kernels.toolkit` has the float32 helpers (each the Vision
instruction it models) and the loop-segment builders; :mod:`dspsim.kernels.layernorm` is a
worked example (docs/contributing.md walks through it).
"""

from dspsim.kernels.registry import KERNELS, Kernel, get_kernel, register

__all__ = ["KERNELS", "Kernel", "get_kernel", "register"]

# The seed's kernels, memcpy and the int8 fully connected kernel, linked into every firmware
# image (an op's own kernels are registered when the op imports its kernel module).
from dspsim.kernels import fc_s8, library, memcpy  # noqa: E402, F401
