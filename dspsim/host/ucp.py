"""The host's view of the DSP (UCP): malloc, RPC task, submit, wait.

Thin on purpose: it exists so that a run drives the op the way the seed's ``test_softmax_op``
does: DDR buffers from ``hbUCPMalloc``, a parameter block, ``hbDSPRpcV2(cmd)``, submit with a
priority, wait for done. The RPC round trip (``host.rpc_latency_us``) is spent outside the op's
own cycle count, which is what the seed's ``TIME_STAMP`` measures.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from dspsim.errors import DspsimInputError
from dspsim.hw.memory import Ptr
from dspsim.ops.registry import Registry


@dataclass(frozen=True)
class SysMem:  # hbUCPSysMem
    phy_addr: int
    ptr: Ptr
    size_bytes: int


@dataclass(eq=False)
class Task:
    cmd: int
    input: SysMem
    output: SysMem
    done: simpy.Event
    priority: int = 0
    submitted_cycle: float = -1.0
    finished_cycle: float = -1.0


class Ucp:
    def __init__(self, dsp, registry: Registry):
        self.dsp = dsp
        self.env = dsp.env
        self.registry = registry
        self._core0 = simpy.PriorityResource(self.env, capacity=1)  # HB_UCP_DSP_CORE_0
        self._half_rpc_cycles = dsp.model.host.rpc_latency_us * dsp.model.core.clock_mhz / 2

    def malloc(self, size_bytes: int, what: str = "buffer") -> SysMem:
        """``hbUCPMalloc`` + ``hbDSPAddrMap``: DDR the DSP can see."""
        if size_bytes <= 0:
            raise DspsimInputError(f"hbUCPMalloc of {size_bytes} bytes: size must be positive")
        ptr = self.dsp.ddr.add_block(size_bytes, 4096, what)
        return SysMem(ptr.addr, ptr, size_bytes)

    def rpc(self, input_mem: SysMem, output_mem: SysMem, cmd: int) -> Task:
        """``hbDSPRpcV2``: a task carrying one input and one output buffer."""
        self.registry.lookup(cmd)
        return Task(cmd, input_mem, output_mem, self.env.event())

    def submit(self, task: Task, priority: int = 0) -> None:
        """``hbUCPSubmitTask`` to DSP core 0; priority 0-255 (higher first, FIFO within)."""
        if not 0 <= priority <= 255:
            raise DspsimInputError(f"task priority {priority}: allowed 0 to 255")
        task.priority = priority
        task.submitted_cycle = self.env.now
        self.env.process(self._execute(task))

    def wait_done(self, task: Task) -> simpy.Event:
        """``hbUCPWaitTaskDone``: an event the host process yields."""
        return task.done

    def _execute(self, task: Task):
        env = self.env
        yield env.timeout(self._half_rpc_cycles)
        with self._core0.request(priority=255 - task.priority) as slot:
            yield slot
            op = self.registry.lookup(task.cmd)
            yield from op.handler(self.dsp, task.input.ptr, task.output.ptr, self.dsp.tm)
        yield env.timeout(self._half_rpc_cycles)
        task.finished_cycle = env.now
        task.done.succeed()
