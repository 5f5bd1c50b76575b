"""The host's view of the DSPs (UCP): malloc, RPC task, submit, wait.

Thin on purpose: it exists so that a run drives an op the way the seed's ``test_softmax_op``
does: DDR buffers from ``hbUCPMalloc``, a parameter block, ``hbDSPRpcV2(cmd)``, submit to a
backend core with a priority, wait for done. The RPC round trip (``host.rpc_latency_us``) is
spent outside the op's own cycle count, which is what the seed's ``TIME_STAMP`` measures.

Scheduling (one place to change it): each core runs one task at a time; waiting tasks go
highest priority first (0-255), first come first served within a priority; a running task is
never preempted.
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
    backend: int = 0  # the core it runs on
    submitted_cycle: float = -1.0
    started_cycle: float = -1.0
    finished_cycle: float = -1.0


class Ucp:
    def __init__(self, platform, registry: Registry):
        self.platform = platform
        self.env = platform.env
        self.registry = registry
        # HB_UCP_DSP_CORE_<k>: one task at a time per core, higher priority first
        self._cores = [simpy.PriorityResource(self.env, capacity=1) for _ in platform.dsps]
        model = platform.model
        self._half_rpc_cycles = model.host.rpc_latency_us * model.core.clock_mhz / 2

    def malloc(self, size_bytes: int, what: str = "buffer") -> SysMem:
        """``hbUCPMalloc`` + ``hbDSPAddrMap``: DDR the DSP can see."""
        if size_bytes <= 0:
            raise DspsimInputError(f"hbUCPMalloc of {size_bytes} bytes: size must be positive")
        ptr = self.platform.ddr.add_block(size_bytes, 4096, what)
        return SysMem(ptr.addr, ptr, size_bytes)

    def rpc(self, input_mem: SysMem, output_mem: SysMem, cmd: int) -> Task:
        """``hbDSPRpcV2``: a task carrying one input and one output buffer."""
        self.registry.lookup(cmd)
        return Task(cmd, input_mem, output_mem, self.env.event())

    def submit(self, task: Task, priority: int = 0, backend: int = 0) -> None:
        """``hbUCPSubmitTask`` to DSP core ``backend``; priority 0-255 (higher first)."""
        if not 0 <= priority <= 255:
            raise DspsimInputError(f"task priority {priority}: allowed 0 to 255")
        if not 0 <= backend < len(self._cores):
            raise DspsimInputError(
                f"backend core{backend}: the platform has core0 to core{len(self._cores) - 1} "
                f"(core.count = {len(self._cores)})"
            )
        task.priority = priority
        task.backend = backend
        task.submitted_cycle = self.env.now
        self.env.process(self._execute(task))

    def wait_done(self, task: Task) -> simpy.Event:
        """``hbUCPWaitTaskDone``: an event the host process yields."""
        return task.done

    def _execute(self, task: Task):
        env = self.env
        yield env.timeout(self._half_rpc_cycles)
        with self._cores[task.backend].request(priority=255 - task.priority) as slot:
            yield slot
            task.started_cycle = env.now
            dsp = self.platform.dsps[task.backend]
            op = self.registry.lookup(task.cmd)
            yield from op.handler(dsp, task.input.ptr, task.output.ptr, dsp.tm)
        yield env.timeout(self._half_rpc_cycles)
        task.finished_cycle = env.now
        task.done.succeed()
