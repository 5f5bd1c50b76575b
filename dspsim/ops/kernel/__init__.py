"""One kernel call on TCM (RPC command 0x8003): the microbenchmark that fits a kernel's loop
shape to a measured cycle count. Every registered kernel is a variant.

``dspsim run --op kernel --variant NAME --n N`` (``--shape R,C``: ``R`` back-to-back calls
of ``C``, or a size of two dimensions such as ``fc_s8``'s ``OUT,IN``; in the kernel's own
:attr:`~dspsim.kernels.Kernel.unit`) times one call of ``NAME``, its source in DataRAM 0 and
its destination (if any) in DataRAM 1, between two reads of the cycle counter. Its values are
the DataRAMs' zeros: this op measures time; each kernel's numerics are tested on their own.
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

ALIGN_BYTES = 128


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
    cmd = 0x8003
    default_variant = "memcpy"
    params = OpSchema("kernel", ())
    ndim = 2  # R,C: R back-to-back calls of C (the seed's kernels), or a kernel's own two
    ndims = (1, 2)
    default_shape = (1, 4096)
    size_unit = "in the kernel's unit"
    variants_differ = "its variants are different kernels, not ways to compute one result"

    @property
    def variants(self) -> dict[str, str]:  # type: ignore[override]
        """Every registered kernel, by name, the default first (what --variant defaults to)."""
        return {name: f"{k.shape.name}: one call, size in {k.unit}"
                for name, k in sorted(KERNELS.items(), key=lambda i: i[0] != self.default_variant)}

    def shape_refusal(self, given: Any, dims: tuple[Any, ...]) -> str:
        return (f"kernel size {given!r}: expected a positive integer n or two positive "
                "integers R,C")

    # the host passes nothing but the parameter block: the call's buffers are in TCM
    def input_bytes(self, shape: tuple[int, ...]) -> int:
        return 4

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(1, np.float32)

    def check_input(self, x: Any) -> tuple[np.ndarray, tuple[int, ...] | None]:
        raise DspsimInputError(_NO_INPUT)

    def read_input_file(self, path: str) -> Any:
        raise DspsimInputError(f"--input {path!r}: {_NO_INPUT}")

    def check_output_file(self, path: str) -> None:
        raise DspsimInputError(f"--output {path!r}: the kernel op has no output array to write "
                               "(its kernel's buffers are in TCM: a timing microbenchmark)")

    def host_array(self, memory: Any, ptr: Any, shape: tuple[int, ...], output: bool
                   ) -> np.ndarray:
        return memory.f32(ptr, 1)

    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 0, "banks": 1}

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        n, rows = get_kernel(variant).call_size(shape)
        free = model.tcm.bank_bytes - model.tcm.reserved_bytes
        need = 4 * n * rows * (2 if get_kernel(variant).writes and model.tcm.banks < 2 else 1)
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
        cycles_start = dsp.TIME_STAMP()
        with dsp.pass_(kernel.name):
            yield from dsp.core.call(kernel.name, n, src, dst, rows=rows,
                                     **kernel.example_args(ptr.size))
        dsp.PROF(cycles_start, dsp.TIME_STAMP())
        tm.free(src)  # the core's DataRAMs as the call found them, for the next task
        if dst is not None:
            tm.free(dst)
        return 0

    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        """The host's one-element buffer is not written: the output is what was there."""
        return np.zeros_like(x)

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        return {"values": "zeros: a timing microbenchmark (the kernels' numerics are tested "
                          "on their own)"}

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> Bounds:
        kernel = get_kernel(self.check_variant(variant))
        n, rows = kernel.call_size(self.shape_of(shape=shape))
        cycles = rows * kernel.shape.tcm_cycles(n, model.core)
        return Bounds.of({**NO_BOUND,
                          "iterations": rows * kernel.shape.iterations(n, model.core.lanes_f32),
                          "ii_cycles": kernel.shape.ii_cycles(model.core),
                          "compute_bound_cycles": cycles, "lower_bound_cycles": cycles,
                          "binding_bound": "compute", "estimate_cycles": cycles})


KERNEL = register_op(KernelBench())
