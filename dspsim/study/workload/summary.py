"""What a workload run produced (:class:`WorkloadRun`: the task columns, the queue, the DDR
port's occupancy) and what it means: one row per task, and the summary per stream, per core, of
the host memory's port (J6: DDR) and of the queue.

**latency** is submit to done, RPC round trip included; ``op_cycles`` the op's own
``TIME_STAMP`` span (as ``dspsim run`` reports it); percentiles are numpy's default (linear).
**utilisation** of a core is the time its ops cover over the run; of the port, its data-path
occupancy. **reuse** counts the tasks booked from an earlier one instead of simulated
(:mod:`.engine`); **parts** the parts asked for, made, and why fewer (:mod:`.parts`). The
queue's **backlog** is the tasks waiting; the run is **overloaded** when a least-squares line
through the tasks outstanding at each release rises by :data:`GROWTH_LIMIT` or more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dspsim.config import HardwareModel
from dspsim.paths import atomic_write_bytes, writable_file
from dspsim.study.workload.spec import Workload
from dspsim.ticks import cycles

TASK_COLUMNS = (
    "stream", "index", "core", "backend", "priority", "submit_us", "queued_us", "start_us",
    "core_end_us", "done_us", "latency_us", "op_cycles", "deadline_us", "missed",
)
PERCENTILES = (50, 95, 99)
GROWTH_LIMIT = 1.0  # tasks: a backlog line rising by this much over the releases is overload


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
        share = nbytes * self.cycles_per_byte / (end - start) if end > start else 0.0
        if nbytes <= 0 or share <= 0:
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


def task_table(run: WorkloadRun) -> pd.DataFrame:
    """One row per task, in submission order (``TASK_COLUMNS`` plus the cycle columns): the
    times of :class:`TaskColumns` since t = 0 in cycles (``*_cycle``) and us
    (``*_us``); ``latency_us`` is ``done_us - submit_us``."""
    t = run.tasks
    streams = run.workload.streams
    names = np.array([s.name for s in streams], object)
    backends = np.array([s.backend for s in streams], object)
    df = pd.DataFrame({
        "stream": names[t.stream], "index": t.index,
        "core": np.array(run.core_names, object)[t.core], "backend": backends[t.stream],
        "priority": t.priority.astype(np.int64), "submit_cycle": t.submitted_cycle,
        "queued_cycle": t.queued_cycle, "start_cycle": t.started_cycle,
        "done_cycle": t.finished_cycle, "op_start_cycle": t.op_start_cycle,
        "op_cycles": t.op_cycles, "core_end_cycle": t.core_end_cycle,
    })
    for c in ("submit", "queued", "start", "core_end", "done"):
        df[f"{c}_us"] = df[f"{c}_cycle"].to_numpy(float) / run.clock_mhz
    df["latency_us"] = df["done_us"] - df["submit_us"]
    df["deadline_us"] = np.array(
        [np.nan if s.deadline_us is None else s.deadline_us for s in streams], float)[t.stream]
    df["missed"] = df["deadline_us"].notna() & (df["latency_us"] > df["deadline_us"])
    df["op_cycles"] = df["op_cycles"].round().astype("int64")
    return df


def _percentiles(values: np.ndarray) -> dict[str, float]:
    out = {f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES}
    return out | {"max": float(values.max()), "mean": float(values.mean())}


def backlog_growth(df: pd.DataFrame) -> float:
    """The rise, over the release window, of a least-squares line through the tasks
    outstanding that each release finds (0 with fewer than 3 releases)."""
    submit = np.sort(df["submit_cycle"].to_numpy())
    if len(submit) < 3 or submit[-1] <= submit[0]:
        return 0.0
    ends = np.sort(df["done_cycle"].to_numpy())
    before = np.arange(len(submit))  # releases strictly before each one (ties: order)
    done = np.searchsorted(ends, submit, side="right")
    outstanding = before - done
    # over the window scaled to [0, 1] (whatever its length in cycles: no ill-conditioned fit),
    # the slope is the rise over the whole window
    x = (submit - submit[0]) / (submit[-1] - submit[0])
    with np.errstate(all="ignore"):
        slope = np.polyfit(x, outstanding.astype(float), 1)[0]
    return float(slope) if np.isfinite(slope) else 0.0


def summarise(run: WorkloadRun, df: pd.DataFrame | None = None) -> dict[str, Any]:
    """Per stream, per core, the host memory's port, queue and run figures (JSON-able)."""
    df = task_table(run) if df is None else df
    total = run.end_cycle
    clock = run.clock_mhz
    streams = [_stream_summary(s, df[df["stream"] == s.name], clock)
               for s in run.workload.streams]
    cores = []  # each core's tasks, busy cycles and share of the run
    for name in run.core_names:
        d = df[df["core"] == name]
        busy = float(d["op_cycles"].sum())
        cores.append({"core": name, "tasks": len(d), "busy_cycles": int(round(busy)),
                      "utilisation": float(busy / total) if total > 0 else 0.0})
    q, growth = run.queue_log, backlog_growth(df)  # the longest backlog, and when
    peak = int(np.argmax(q[:, 1]))
    return {
        "workload": run.workload.source, "model": run.model.source, "fidelity": run.fidelity,
        "data": run.data, "seed": run.workload.seed, "tasks": len(df),
        "cores": len(run.core_names), "end_cycle": int(round(total)), "end_us": total / clock,
        "rpc_latency_us": run.rpc_cycles / clock, "streams": streams, "core_utilisation": cores,
        "ddr": {  # the host memory's port, whatever its name (J6: ddr)
            "memory": run.model.host.memory, "busy_cycles": int(round(run.ddr_busy_cycles)),
            "utilisation": run.ddr_busy_cycles / total if total > 0 else 0.0,
            "bytes": run.ddr_bytes,
        },
        "queue": {"longest_backlog": int(q[peak, 1]),
                  "longest_backlog_at_us": float(q[peak, 0] / clock),
                  "backlog_growth": growth, "overloaded": growth >= GROWTH_LIMIT},
        "deadline_misses": int(df["missed"].sum()),
        "reuse": {  # tasks booked from an earlier identical one instead of simulated
            "enabled": run.reuse, "reused_tasks": run.reused_tasks,
            "simulated_tasks": len(df) - run.reused_tasks, "episodes": run.episodes,
            "note": run.reuse_note,
        },
        # the run cut into parts at once (jobs), and why fewer than asked
        "parts": {"jobs": run.jobs, "parts": run.parts, "note": run.parts_note},
        "events": run.events, "wall_s": run.wall_s, "warnings": run.warnings,
    }


def _stream_summary(s: Any, d: pd.DataFrame, clock: float) -> dict[str, Any]:
    """One stream's figures from its tasks ``d``."""
    span_s = (d["done_cycle"].max() - d["submit_cycle"].min()) / clock / 1e6
    return {
        "name": s.name, "op": s.op, "variant": s.variant, "shape": list(s.shape),
        "priority": s.priority, "backend": s.backend, "period_us": s.period_us,
        "tasks": len(d), "completed": int((d["done_cycle"] >= 0).sum()),
        "latency_us": _percentiles(d["latency_us"].to_numpy()),
        "wait_us": _percentiles((d["start_us"] - d["queued_us"]).to_numpy()),
        "op_cycles": _percentiles(d["op_cycles"].to_numpy(float)),
        "deadline_us": s.deadline_us,
        "deadline_misses": int(d["missed"].sum()),
        "throughput_per_s": float(len(d) / span_s) if span_s > 0 else None,
    }


def check_csv_path(path: str | Path) -> Path:
    """``path`` if the task table can be written there, else a one-line error."""
    return writable_file(path, "task table", (".csv",))


def write_tasks_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """One row per task (``TASK_COLUMNS``), written atomically."""
    p = check_csv_path(path)
    out = df[list(TASK_COLUMNS)].copy()
    out["missed"] = out["missed"].astype(np.int64)  # 1 or 0
    # every float column is a time in us: 3 decimals, a deadline not given left empty
    text = out.to_csv(index=False, float_format="%.3f", na_rep="", lineterminator="\n")
    atomic_write_bytes(p, text.encode("utf-8"), "--out")
    return p


