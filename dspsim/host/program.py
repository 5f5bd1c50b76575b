"""The host program, once for every caller: the seed's ``test_softmax_op`` for any op.

``hbUCPMalloc`` the input, output and parameter block in the host's memory, write the input and
the parameter block, then per task ``hbDSPRpcV2(cmd)`` and ``hbUCPSubmitTask``. Input and output
are float32 arrays of the op's shape unless it overrides ``write_input``, ``output_bytes`` or
``host_array`` (e.g. ``fc``'s int8 weights).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dspsim.host.ucp import SysMem, Task, Ucp

if TYPE_CHECKING:
    from dspsim.ops.base import Op

PARAM_BLOCK_BYTES = 64


@dataclass
class HostProgram:
    """One op's buffers in the host's memory, and the tasks that run it."""

    ucp: Ucp
    op: Op
    variant: str
    shape: tuple[int, ...]
    input: SysMem
    output: SysMem
    param: SysMem

    @classmethod
    def load(cls, ucp: Ucp, op: Op, variant: str, shape: tuple[int, ...],
             values: np.ndarray | None = None, what: str = "") -> HostProgram:
        """Allocate the buffers (``what`` prefixes their names in errors), write the input
        (``values`` or the op's default, with the data path on) and the parameter block."""
        prefix = f"{what} " if what else ""
        memory = ucp.platform.host_memory
        input_data = ucp.malloc(op.input_bytes(shape), f"{prefix}input array")
        if ucp.platform.data:
            x = op.default_input(shape) if values is None else values
            op.write_input(memory, input_data.ptr, x, shape)
        output = ucp.malloc(op.output_bytes(shape), f"{prefix}output array")
        param = ucp.malloc(PARAM_BLOCK_BYTES, f"{prefix}parameter block")
        memory.store_struct(param.ptr, op.param_block(variant, shape, input_data.phy_addr))
        return cls(ucp, op, variant, tuple(shape), input_data, output, param)

    def submit(self, priority: int = 0, backend: int | str = 0,
               tag: dict[str, Any] | None = None) -> Task:
        """``hbDSPRpcV2`` + ``hbUCPSubmitTask``: one task of the op (returns at once)."""
        task = self.ucp.rpc(self.param, self.output, self.op.cmd)
        if tag is not None:
            task.tag = tag
        self.ucp.submit(task, priority=priority, backend=backend)
        return task

    def run(self, core: int) -> Generator[Any, Any, tuple[float, float]]:
        """The DSP side of one task on ``core``, without the UCP's queue and RPC (a process
        body; returns the op's ``TIME_STAMP`` start and its own cycles)."""
        return (yield from self.ucp.run_op(core, self.op.cmd, self.param, self.output))

    def array(self, buffer: SysMem) -> np.ndarray:
        """A buffer's values in the op's shape (a view; data path on)."""
        memory = self.ucp.platform.host_memory
        return self.op.host_array(memory, buffer.ptr, self.shape, buffer is self.output)
