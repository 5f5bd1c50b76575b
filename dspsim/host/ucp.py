"""The host's view of the DSPs (UCP): malloc, RPC task, submit, wait.

It drives an op as the seed's ``test_softmax_op`` does (``hbUCPMalloc``, a parameter block,
``hbDSPRpcV2(cmd)``, ``hbUCPSubmitTask`` to a backend with a priority, ``hbUCPWaitTaskDone``).
The RPC round trip (``host.rpc_latency_us``) lies outside the op's ``TIME_STAMP`` span: half
before the task reaches the DSP side, half after the op ends. Backends: ``core<K>`` (or an int
``K``) or ``any``; tasks that find no eligible core free wait in one shared queue, ordered by
:class:`SchedulingPolicy`.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from dspsim.errors import DspsimInputError
from dspsim.hw.memory import Ptr
from dspsim.ops.registry import Registry
from dspsim.ticks import cycles, ticks

ANY = "any"  # HB_UCP_DSP_CORE_ANY
PRIORITY_MIN, PRIORITY_MAX = 0, 255
_CORE_NAME = re.compile(r"core(\d+)")


@dataclass(frozen=True)
class SysMem:  # hbUCPSysMem
    phy_addr: int
    ptr: Ptr
    size_bytes: int


@dataclass(eq=False)
class Task:
    """One RPC. Times are absolute cycles, -1 until they happen."""

    cmd: int
    input: SysMem
    output: SysMem
    done: simpy.Event
    priority: int = 0
    backend: int | None = 0  # the core asked for; None: any core
    core: int = -1  # the core it ran on
    seq: int = -1  # submission order (the FIFO tie-break)
    tag: dict[str, Any] = field(default_factory=dict)  # the submitter's labels (stream, index)
    submitted_cycle: float = -1.0  # hbUCPSubmitTask
    queued_cycle: float = -1.0  # reached the DSP side (half the RPC latency later)
    started_cycle: float = -1.0  # a core took it
    op_start_cycle: float = -1.0  # the op's TIME_STAMP start
    op_cycles: float = -1.0  # the op's own span (PROF), what ``dspsim run`` reports
    core_end_cycle: float = -1.0  # the op's handler returned: the core is free
    finished_cycle: float = -1.0  # the host sees it done (half the RPC latency later)


class SchedulingPolicy:
    """The UCP's scheduling, the one place to change it. A core runs one task at a time;
    waiting tasks go highest ``priority`` (0-255) first, FIFO within a priority; ``any`` starts
    on the lowest-numbered free core, ``core<K>`` waits for core K; a freed core takes the best
    task it may run. **No preemption**: the J6 UCP guide says priority 254 preempts 0-253 and
    255 preempts both; not modelled (an op would have to stop mid-transfer)."""

    PREEMPTIVE = False

    def __init__(self, cores: int):
        self.cores = cores
        # one heap per fixed core, one for "any": (-priority, seq, task); together one queue
        self._fixed: list[list[tuple[int, int, Task]]] = [[] for _ in range(cores)]
        self._any: list[tuple[int, int, Task]] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def core_for(self, task: Task, free: list[bool]) -> int | None:
        """The core a task just arrived should start on now, or None (it waits)."""
        if task.backend is not None:
            return task.backend if free[task.backend] else None
        for k, f in enumerate(free):  # the first free core (a loop: called once a task)
            if f:
                return k
        return None

    def push(self, task: Task) -> None:
        heap = self._any if task.backend is None else self._fixed[task.backend]
        heapq.heappush(heap, (-task.priority, task.seq, task))
        self._count += 1

    def pop_for(self, core: int) -> Task | None:
        """The best waiting task ``core`` may run (removed from the queue), or None."""
        fixed, anyq = self._fixed[core], self._any
        if not fixed and not anyq:
            return None
        heap = fixed if not anyq or (fixed and fixed[0][:2] < anyq[0][:2]) else anyq
        self._count -= 1
        return heapq.heappop(heap)[2]


def parse_backend(backend: Any, cores: int) -> int | None:
    """``core<K>``, ``K`` or ``any`` -> the core index, or None for any; checked."""
    allowed = f"allowed {ANY!r} or core0 to core{cores - 1} (core.count = {cores})"
    if isinstance(backend, str):
        if backend == ANY:
            return None
        m = _CORE_NAME.fullmatch(backend)
        backend = int(m.group(1)) if m else backend  # a string left is refused below
    if isinstance(backend, bool) or not isinstance(backend, int):
        raise DspsimInputError(f"backend {backend!r}: {allowed}")
    if not 0 <= backend < cores:
        raise DspsimInputError(f"backend core{backend}: the platform has no such core; {allowed}")
    return backend


def check_priority(priority: Any) -> int:
    if (isinstance(priority, bool) or not isinstance(priority, int)
            or not PRIORITY_MIN <= priority <= PRIORITY_MAX):
        raise DspsimInputError(
            f"task priority {priority!r}: allowed integers {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return priority


class Ucp:
    """The UCP of one platform: its cores, the shared queue and the RPC round trip."""

    def __init__(self, platform, registry: Registry, policy: SchedulingPolicy | None = None):
        self.platform, self.env, self.registry = platform, platform.env, registry
        self.cores = len(platform.dsps)
        self.policy = policy or SchedulingPolicy(self.cores)
        self._free = [True] * self.cores
        self._seq = itertools.count()
        model = platform.model
        self._half_rpc_ticks = ticks(model.host.rpc_latency_us * model.core.clock_mhz / 2)

    def malloc(self, size_bytes: int, what: str = "buffer") -> SysMem:
        """``hbUCPMalloc`` + ``hbDSPAddrMap``: memory the DSP can see, in the host's memory
        (``host.memory``; J6: DDR)."""
        if size_bytes <= 0:
            raise DspsimInputError(f"hbUCPMalloc of {size_bytes} bytes: size must be positive")
        ptr = self.platform.host_memory.add_block(
            size_bytes, 4096, what, "host.memory naming another memory (the host's buffers "
            "live in host.memory)")
        return SysMem(ptr.addr, ptr, size_bytes)

    def rpc(self, input_mem: SysMem, output_mem: SysMem, cmd: int) -> Task:
        """``hbDSPRpcV2``: a task carrying one input and one output buffer."""
        self.registry.lookup(cmd)
        return Task(cmd, input_mem, output_mem, self.env.event())

    def submit(self, task: Task, priority: int = 0, backend: int | str = 0) -> None:
        """``hbUCPSubmitTask``: to ``backend`` (``core<K>``, ``K`` or ``any``) with
        ``priority`` 0-255 (higher first). Returns at once; ``wait_done`` waits."""
        task.priority = check_priority(priority)
        task.backend = parse_backend(backend, self.cores)
        if task.submitted_cycle >= 0:
            raise DspsimInputError("task submitted twice: make a new one with rpc()")
        task.submitted_cycle = cycles(self.env.now)
        self.env.process(self._arrive(task))

    def wait_done(self, task: Task) -> simpy.Event:
        """``hbUCPWaitTaskDone``: an event the host process yields."""
        return task.done

    # ------------------------------------------------------------------ the DSP side
    def _arrive(self, task: Task):
        yield self.env.timeout(self._half_rpc_ticks)
        task.queued_cycle = cycles(self.env.now)
        task.seq = next(self._seq)
        core = self.policy.core_for(task, self._free)
        if core is None:
            self.policy.push(task)
        else:
            self._start(task, core)

    def _start(self, task: Task, core: int) -> None:
        self._free[core] = False
        task.core = core
        task.started_cycle = cycles(self.env.now)
        self.env.process(self._run(task))

    def run_op(self, core: int, cmd: int, input_mem: SysMem, output_mem: SysMem
               ) -> Generator[Any, Any, tuple[float, float]]:
        """The DSP side of one task: the op of ``cmd`` on ``core`` (a process body); returns
        its ``TIME_STAMP`` start and its own cycles (PROF; -1 when it never profiled)."""
        dsp = self.platform.dsps[core]
        op = self.registry.lookup(cmd)
        dsp.self_cycles = None  # set by the op's PROF
        yield from op.handler(dsp, input_mem.ptr, output_mem.ptr, dsp.tm)
        return dsp.cycles_start, dsp.self_cycles if dsp.self_cycles is not None else -1.0

    def _run(self, task: Task):
        env = self.env
        task.op_start_cycle, task.op_cycles = yield from self.run_op(
            task.core, task.cmd, task.input, task.output)
        task.core_end_cycle = cycles(env.now)
        self._free[task.core] = True
        nxt = self.policy.pop_for(task.core)
        if nxt is not None:
            self._start(nxt, task.core)
        yield env.timeout(self._half_rpc_ticks)
        task.finished_cycle = cycles(env.now)
        task.done.succeed()
