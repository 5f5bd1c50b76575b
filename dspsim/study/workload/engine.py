"""Run a workload on a platform: one host process per stream releasing RPC tasks to the UCP.

Each stream allocates its DDR buffers once (input, output, parameter block) and reuses them for
every task, as a host program reusing its buffers would; each task is one ``hbDSPRpcV2`` +
``hbUCPSubmitTask`` (non-blocking: a camera does not wait for the previous frame) and is
released when done. The run ends when the last task is done, however late: an overloaded
platform shows up as a growing backlog and latencies, not as a hang.

Release ``i`` of a stream is at ``start_us + i * period_us + U[0, jitter_us)``, the jitter drawn
from ``numpy.random.default_rng([seed, stream position])``: same workload and seed, same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from dspsim.config import HardwareModel
from dspsim.errors import DeadlockError, DspsimInputError
from dspsim.host.program import HostProgram
from dspsim.host.ucp import Task, Ucp
from dspsim.hw.clock import events_scheduled
from dspsim.ops import get_op
from dspsim.ops.registry import firmware_registry
from dspsim.platform import FIDELITIES, Platform
from dspsim.study.workload.spec import Workload, check_workload


class DdrMeter:
    """The DDR data path's occupancy over time, as merged segments ``(start, end, share)``
    (``share``: the fraction of ``ddr.bytes_per_cycle`` in use).

    It stands in for the port's request log (the port calls ``log.append(entry)`` once per
    request or booking, :data:`dspsim.probes.PORT_LOG_FIELDS`) and keeps only the occupancy:
    an entry's bytes spread evenly over its ``data_start .. data_end``. A single request holds
    the whole path over that span (share 1: exact, as at burst fidelity); a booking that stands
    for a whole transfer or kernel call (tile fidelity) is spread over its span, which is exact
    for a bandwidth-bound flow and an average for one that leaves gaps between its bursts.
    Contiguous segments at the same share merge, so a busy port costs little memory. The
    hybrid tile engine books a closed form only for a flow that has the port to itself (a
    shared port runs burst by burst), so the spread bookings never overlap another's requests.
    """

    def __init__(self, port: Any):
        self.cycles_per_byte = port.cycles_per_byte
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.shares: list[float] = []

    def _add(self, start: float, end: float, share: float) -> None:
        if end <= start or share <= 0:
            return
        if (self.ends and abs(self.ends[-1] - start) < 1e-9
                and abs(self.shares[-1] - share) < 1e-9):
            self.ends[-1] = end  # contiguous at the same share: one segment
            return
        self.starts.append(start)
        self.ends.append(end)
        self.shares.append(share)

    def append(self, entry: tuple) -> None:
        data_start, data_end, nbytes = entry[1], entry[2], entry[4]
        if data_end > data_start and nbytes > 0:
            self._add(data_start, data_end,
                      nbytes * self.cycles_per_byte / (data_end - data_start))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"start": np.asarray(self.starts, float), "end": np.asarray(self.ends, float),
                "share": np.asarray(self.shares, float)}


@dataclass
class WorkloadRun:
    """What a workload run produced: the tasks, the queue over time, the DDR port."""

    workload: Workload
    model: HardwareModel
    fidelity: str
    data: bool
    tasks: list[Task]  # in submission order; task.tag: stream, index, deadline_us
    queue_log: np.ndarray  # (cycle, tasks waiting) at every change, cycle-sorted
    end_cycle: float  # the last task done (host side)
    core_names: list[str]
    ddr_bytes: dict[str, int]
    ddr_busy_cycles: float
    rpc_cycles: float  # the whole round trip, half on submit and half on completion
    events: int
    wall_s: float
    warnings: list[dict[str, Any]] = field(default_factory=list)
    ddr: dict[str, np.ndarray] | None = None  # DdrMeter.arrays() when profiled
    # with the data path: each stream's output buffer at the end (its last task's output)
    outputs: dict[str, np.ndarray] | None = None

    @property
    def clock_mhz(self) -> float:
        return self.model.core.clock_mhz

    def us(self, cycles: Any) -> Any:
        return np.asarray(cycles, float) / self.clock_mhz


def release_cycles(workload: Workload, clock_mhz: float) -> list[np.ndarray]:
    """Every stream's release times in cycles (jitter drawn from the workload's seed)."""
    out = []
    for k, s in enumerate(workload.streams):
        base = s.start_us + s.period_us * np.arange(s.count)
        if s.jitter_us > 0:
            rng = np.random.default_rng([workload.seed, k])
            base = base + rng.uniform(0.0, s.jitter_us, s.count)
        out.append(base * clock_mhz)
    return out


def run_workload(
    workload: Workload,
    model: HardwareModel,
    fidelity: str = "tile",
    data: bool = False,
    ddr_profile: bool = False,
    on_task_done: Callable[[], None] | None = None,
) -> WorkloadRun:
    """Simulate ``workload`` on a fresh platform of ``model``; ``data`` moves values (the
    op's default input in each stream's input buffer); ``ddr_profile`` keeps the DDR data
    path's occupancy over time (for figures and traces); ``on_task_done()`` is called as each
    task completes (a progress count)."""
    if fidelity not in FIDELITIES:
        raise DspsimInputError(f"fidelity {fidelity!r}: allowed {', '.join(FIDELITIES)}")
    check_workload(workload, model)
    wall_start = time.perf_counter()
    platform = Platform(simpy.Environment(), model, data=data, trace=False, fidelity=fidelity)
    env = platform.env
    port = platform.port  # the host memory's: the streams' buffers are there
    meter = None
    if ddr_profile:
        meter = DdrMeter(port)
        port.log = meter  # the port appends one entry per request / reservation
    ucp = Ucp(platform, firmware_registry())
    platform.accesses.enabled = False  # workloads do not check hazards (tasks share buffers)
    tasks: list[Task] = []
    programs: dict[str, HostProgram] = {}
    releases = release_cycles(workload, model.core.clock_mhz)

    def host(stream, times):
        op = get_op(stream.op)
        program = programs[stream.name] = HostProgram.load(
            ucp, op, stream.variant, stream.shape, what=stream.name)
        for i, t in enumerate(times):
            if t > env.now:
                yield env.timeout(t - env.now)
            task = program.submit(
                priority=stream.priority, backend=stream.backend,
                tag={"stream": stream.name, "index": i, "deadline_us": stream.deadline_us})
            task.done.callbacks.append(lambda _ev, t=task: ucp.release(t))
            if on_task_done is not None:
                task.done.callbacks.append(lambda _ev: on_task_done())
            tasks.append(task)

    for stream, times in zip(workload.streams, releases):
        env.process(host(stream, times))
    env.run()
    unfinished = [t for t in tasks if t.finished_cycle < 0]
    if len(tasks) != workload.tasks or unfinished:
        raise DeadlockError(platform.waiting())
    wall_s = time.perf_counter() - wall_start
    stats = port.stats()
    return WorkloadRun(
        workload=workload,
        model=model,
        fidelity=fidelity,
        data=data,
        tasks=tasks,
        queue_log=np.asarray(ucp.queue_log, float).reshape(-1, 2),
        end_cycle=max(t.finished_cycle for t in tasks),
        core_names=[d.name for d in platform.dsps],
        ddr_bytes={f"{port.name}_read": stats["read_bytes"],
                   f"{port.name}_write": stats["write_bytes"]},
        ddr_busy_cycles=stats["busy_cycles"],
        rpc_cycles=2 * ucp.half_rpc_cycles,
        events=events_scheduled(env),
        wall_s=wall_s,
        warnings=list(platform.warnings.values()),
        ddr=meter.arrays() if meter is not None else None,
        outputs={name: p.array(p.output).copy() for name, p in programs.items()}
        if data else None,
    )
