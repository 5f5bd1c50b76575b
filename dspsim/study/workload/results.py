"""What a workload run produced (:func:`.engine.run_workload`): the task table, the queue, the
DDR port's occupancy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dspsim.config import HardwareModel
from dspsim.study.workload.spec import Workload
from dspsim.ticks import cycles


class DdrMeter:
    """The DDR data path's occupancy as merged segments ``(start, end, share of
    bytes_per_cycle)``: a port request log (``append(entry)``, :data:`dspsim.probes.
    PORT_LOG_FIELDS`) that keeps each entry's bytes spread evenly over its data span (exact:
    an entry is one request)."""

    def __init__(self, port: Any):
        self.cycles_per_byte = port.policy.cycles_per_byte
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.shares: list[float] = []

    def append(self, entry: tuple) -> None:
        """A port's request (times in ticks, :mod:`dspsim.hw.clock`), metered in cycles."""
        start, end, nbytes = cycles(entry[1]), cycles(entry[2]), entry[4]
        if end <= start or nbytes <= 0:
            return
        share = nbytes * self.cycles_per_byte / (end - start)
        if share <= 0:
            return
        if (self.ends and abs(self.ends[-1] - start) < 1e-9
                and abs(self.shares[-1] - share) < 1e-9):
            self.ends[-1] = end  # contiguous at the same share: one segment
            return
        self.starts.append(start)
        self.ends.append(end)
        self.shares.append(share)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"start": np.asarray(self.starts, float), "end": np.asarray(self.ends, float),
                "share": np.asarray(self.shares, float)}


@dataclass
class TaskColumns:
    """Every task of a run, in submission order, one array per field (about 100 bytes a
    task). Cycles are absolute, -1 until they happen."""

    stream: np.ndarray  # the stream's position in ``workload.streams``
    index: np.ndarray  # the task's index in its stream
    priority: np.ndarray
    core: np.ndarray  # the core it ran on
    submitted_cycle: np.ndarray  # hbUCPSubmitTask
    queued_cycle: np.ndarray  # reached the DSP side (half the RPC round trip later)
    started_cycle: np.ndarray  # a core took it
    op_start_cycle: np.ndarray  # the op's TIME_STAMP start
    op_cycles: np.ndarray  # the op's own span (PROF)
    core_end_cycle: np.ndarray  # the op returned: the core is free
    finished_cycle: np.ndarray  # the host sees it done (the other half later)
    reused: np.ndarray  # booked from an earlier identical task instead of simulated

    def __len__(self) -> int:
        return len(self.stream)


@dataclass
class WorkloadRun:
    """What a workload run produced: the tasks, the queue over time, the DDR port."""

    workload: Workload
    model: HardwareModel
    fidelity: str
    data: bool
    tasks: TaskColumns
    queue_log: np.ndarray  # (cycle, tasks waiting) at every change, cycle-sorted
    end_cycle: float  # the last task done (host side)
    core_names: list[str]
    ddr_bytes: dict[str, int]
    ddr_busy_cycles: float
    rpc_cycles: float  # the whole round trip, half on submit and half on completion
    events: int  # the events simulated (none for a reused task)
    wall_s: float
    warnings: list[dict[str, Any]] = field(default_factory=list)
    ddr: dict[str, np.ndarray] | None = None  # DdrMeter.arrays() when profiled
    # with the data path: each stream's output buffer at the end (its last task's output)
    outputs: dict[str, np.ndarray] | None = None
    reuse: bool = True  # whether tasks could be booked from earlier identical ones
    reuse_note: str | None = None  # why none could be, when the platform rules it out
    episodes: int = 0  # platforms simulated (a run of ops between idle moments each)
    jobs: int = 1  # the parts asked for (``run_workload(..., jobs=)``)
    parts: int = 1  # the parts the run was cut into
    parts_note: str | None = None  # why fewer parts than jobs (None: as many as asked)

    @property
    def clock_mhz(self) -> float:
        return self.model.core.clock_mhz

    @property
    def reused_tasks(self) -> int:
        return int(self.tasks.reused.sum())
