"""One kernel call on TCM (RPC command 0x8003): the microbenchmark that fits a kernel's loop
shape to a measured cycle count.

``dspsim run --op kernel --variant NAME --n N`` (``--shape R,C``: ``R`` back-to-back calls
of ``C``, or a size of two dimensions such as ``fc_s8``'s ``OUT,IN``) times one call of the
registered kernel ``NAME`` with its source in DataRAM 0 and its destination (if it writes one)
in DataRAM 1, between two reads of the cycle counter: the call overhead, the loop, the
epilogue. The size is in the kernel's own unit (:attr:`dspsim.kernels.Kernel.unit`: float32
elements for the seed's kernels, 32-bit words for ``memcpy``, ``OUT,IN`` for ``fc_s8``).
Every registered kernel is a variant.

Its values are the zeros the DataRAMs start with and the kernel's example arguments: this op
measures time; each kernel's numerics are checked on their own (``tests/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.kernels import KERNELS, get_kernel
from dspsim.ops.base import NO_BOUND, Bounds, Op, Proc  # noqa: I001
from dspsim.ops.registry import register_op
from dspsim.schema import OpSchema

KERNEL_CMD = 0x8003
ALIGN_BYTES = 128

PARAMS = OpSchema("kernel", ())


@dataclass
class hbDSPKernelParam:  # noqa: N801 - named like the seed's structs
    kernel: str
    size: tuple[int, ...]


_NO_INPUT = ("the kernel op takes no input: it calls its kernel on TCM buffers of its own, "
             "sized by --n or --shape")


class KernelBench(Op):
    name = "kernel"
    doc = ("one call of a registered kernel on TCM (a kernel microbenchmark); the size is in "
           "the kernel's unit")
    cmd = KERNEL_CMD
    default_variant = "memcpy"
    params = PARAMS
    ndim = 2  # R,C: R back-to-back calls of C (the seed's kernels), or a kernel's own two
    ndims = (1, 2)
    default_shape = (1, 4096)
    size_unit = "in the kernel's unit"

    @property
    def variants(self) -> dict[str, str]:  # type: ignore[override]
        """Every registered kernel, by name."""
        return {name: f"{k.shape.name}: one call, size in {k.unit}"
                for name, k in KERNELS.items()}

    def shape_of(self, n: Any = None, shape: Any = None) -> tuple[int, ...]:
        """``n`` (one call of ``n``) or ``shape`` of one or two dimensions (``R,C``: a kernel
        of two, or ``R`` back-to-back calls of ``C``), default :attr:`default_shape`."""
        if n is not None and shape is not None:
            raise DspsimInputError("give n or shape, not both")
        if n is not None:
            shape = (n,)
        if shape is None:
            return tuple(self.default_shape)
        dims = tuple(shape) if isinstance(shape, list | tuple) else (shape,)
        if len(dims) not in (1, 2) or any(isinstance(d, bool) or not isinstance(
                d, int | np.integer) or d <= 0 for d in dims):
            raise DspsimInputError(f"kernel size {shape!r}: expected a positive integer n or "
                                   "two positive integers R,C")
        return tuple(int(d) for d in dims)

    # the host passes nothing but the parameter block: the call's buffers are in TCM
    def input_bytes(self, shape: tuple[int, ...]) -> int:
        return 4

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(1, np.float32)

    def check_input(self, x: Any) -> tuple[np.ndarray, tuple[int, ...] | None]:
        raise DspsimInputError(_NO_INPUT)

    def read_input_file(self, path: str) -> Any:
        raise DspsimInputError(f"--input {path!r}: {_NO_INPUT}")

    def host_array(self, memory: Any, ptr: Any, shape: tuple[int, ...], output: bool
                   ) -> np.ndarray:
        return memory.f32(ptr, 1)

    def _buffers(self, model: Any, variant: str, shape: tuple[int, ...]
                 ) -> tuple[int, int, int]:
        kernel = get_kernel(variant)
        n, rows = kernel.call_size(shape)
        nbytes = 4 * n * rows
        return n, rows, nbytes

    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 0, "banks": 1}

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        _, _, nbytes = self._buffers(model, variant, shape)
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        need = nbytes * (2 if get_kernel(variant).writes and model.tcm.banks < 2 else 1)
        if need > free:
            size = "x".join(map(str, shape))
            raise DspsimInputError(
                f"kernel {variant} on {size}: its buffers ({need:,} bytes) do not fit a "
                f"DataRAM's free space ({free:,} bytes: tcm.bank_bytes - tcm.reserved_bytes)")

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        return hbDSPKernelParam(variant, tuple(shape))

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        ptr: hbDSPKernelParam = dsp.ddr.load_struct(input)
        kernel = get_kernel(ptr.kernel)
        n, rows = kernel.call_size(ptr.size)
        nbytes = 4 * n * rows
        src = tm.allocate(nbytes, 0, ALIGN_BYTES)
        dst = tm.allocate(nbytes, min(1, len(tm.banks) - 1), ALIGN_BYTES) if kernel.writes \
            else None
        args = kernel.bench_args(ptr.size)
        cycles_start = dsp.TIME_STAMP()
        dsp.begin_pass(kernel.name)
        yield from dsp.core.call(kernel.name, n, src, dst, rows=rows, **args)
        dsp.end_pass()
        cycles_stop = dsp.TIME_STAMP()
        dsp.PROF(cycles_start, cycles_stop)
        tm.free(src)  # the core's DataRAMs as the call found them, for the next task
        if dst is not None:
            tm.free(dst)
        return 0

    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        """The host's one-element buffer is not written: the output is what was there (a
        timing microbenchmark; each kernel's numerics are tested on their own)."""
        return np.zeros_like(x)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        return {"values": "zeros: a timing microbenchmark (the kernels' numerics are tested "
                          "on their own)"}

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> Bounds:
        return Bounds.of({**NO_BOUND, **self._bounds(model, variant, shape)})

    def _bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
        kernel = get_kernel(variant)
        n, rows = kernel.call_size(shape)
        cycles = rows * kernel.shape.tcm_cycles(n, model.core)
        return {"iterations": rows * kernel.shape.iterations(n, model.core.lanes_f32),
                "ii_cycles": kernel.shape.ii_cycles(model.core),
                "compute_bound_cycles": cycles, "lower_bound_cycles": cycles,
                "binding_bound": "compute", "estimate_cycles": cycles}


KERNEL = register_op(KernelBench())
