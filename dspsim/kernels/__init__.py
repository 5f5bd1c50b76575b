"""The DSP's kernel library: ``name -> Kernel(loop shape, float32 numerics)``.

A kernel is a NatureDSP-style C function on the core: its *loop shape*
(:class:`dspsim.kernels.shapes.LoopShape`) gives its cycles against TCM or DDR, its *numerics*
its float32 result as the C computes it; the core runs it by name
(:meth:`dspsim.hw.core.Core.call`); an op adds kernels by registering them here.
``compute(src, dst, lanes, **args)``: ``src`` float32 ``(n,)`` or ``(rows, n)`` (a batch of
calls), ``dst`` a writable array of that shape or ``None``; returns the C's return value per
row (a scalar for 1-D input), a tuple of them, or ``None``; a scalar arg may be one per row.
Writing one: :mod:`dspsim.kernels.toolkit`, and :mod:`dspsim.kernels.layernorm`,
docs/contributing.md's worked example.
"""

from dspsim.kernels.registry import KERNELS, Kernel, get_kernel, register

__all__ = ["KERNELS", "Kernel", "get_kernel", "register"]

# linked into every firmware image (an op's own kernels register when it imports them)
from dspsim.kernels import fc_s8, memcpy, numerics  # noqa: E402, F401
