"""Task streams on one or more DSP cores: ``load_workload`` reads a file (:mod:`.spec`),
``run_workload`` simulates it (:mod:`.engine`, in parts: :mod:`.parts`) into a
:class:`WorkloadRun`, which :mod:`.summary` reads. The scheduling is the UCP's
(:class:`dspsim.host.ucp.SchedulingPolicy`)."""

from __future__ import annotations

from dspsim.study.workload.engine import run_workload
from dspsim.study.workload.spec import (
    Stream,
    Workload,
    WorkloadError,
    check_workload,
    load_workload,
    parse_workload,
)
from dspsim.study.workload.summary import (
    TASK_COLUMNS,
    DdrMeter,
    WorkloadRun,
    check_csv_path,
    summarise,
    task_table,
    write_tasks_csv,
)

__all__ = [
    "TASK_COLUMNS", "DdrMeter", "Stream", "Workload", "WorkloadError", "WorkloadRun",
    "check_csv_path", "check_workload", "load_workload", "parse_workload", "run_workload",
    "summarise", "task_table", "write_tasks_csv",
]
