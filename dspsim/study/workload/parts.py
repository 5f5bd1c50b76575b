"""A workload run in parts at once (``run_workload(..., jobs=N)``), joined at clean moments.

A *clean* moment (just before an arrival, the platform idle, the queue empty, every core free)
cuts a run in two. Each worker runs one share of the arrivals as if its start were clean, to its
first clean moment past the next share's start, noting its totals at every clean moment (a
:class:`Segment`); the join goes on from a moment clean in both, or runs on here to one. A part
that fails off the run's path is dropped (only the first part's error is the run's). Why this is
the same run, and why a data cache is never split: docs/workloads.md, "Parts at once".
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from dspsim.errors import WorkerError
from dspsim.workers import imap_unordered

MIN_PART_TASKS = 32  # a run in parts gives each at least this many tasks
PROGRESS_EVERY_S = 0.5  # how often the progress count reads the workers' counts

# while a run is in parts: each part's tasks done so far, shared with the workers (forked
# after it is made), each writing its own slot; ``None`` otherwise
_done: Any = None

TASK_FIELDS = ("core", "started", "op_start", "op_cycles", "core_end_cycle", "reused")  # a run's


# a run's totals at a clean moment, where a part from there begins in them (ints; the port's
# busy ticks as hi * 2^32 + lo: a day's overflow int64 whole)
Mark = namedtuple("Mark", "read_bytes write_bytes busy_hi busy_lo events episodes warnings "
                          "ddr_parts queue_log stamp")


@dataclass
class Segment:
    """A run from a clean moment before arrival ``first`` to one before ``end``, with its
    totals at every clean moment between (arrays: a worker sends it back pickled)."""

    first: int
    end: int
    mark_tasks: np.ndarray  # the arrivals a clean moment came before, in order
    mark_totals: np.ndarray  # the Mark of each, a row each
    fields: dict[str, np.ndarray]  # TASK_FIELDS of tasks first .. end - 1
    totals: Mark
    warnings: list[tuple[float, list[dict[str, Any]]]]
    ddr_parts: list[dict[str, np.ndarray]]
    queue_log: np.ndarray  # (cycle, tasks waiting) rows
    outputs: dict[int, tuple[int, np.ndarray]]  # stream: (stamp, its last output)

    @cached_property
    def marks(self) -> dict[int, int]:
        """The clean moments, by the arrival they came before: their row."""
        return {t: k for k, t in enumerate(self.mark_tasks.tolist())}

    def mark(self, first: int) -> Mark:
        """The totals at the clean moment before arrival ``first``."""
        return Mark(*self.mark_totals[self.marks[first]].tolist())


def mark(sched: Any) -> Mark:
    """The totals of ``sched`` (an ``engine._Schedule``) now."""
    return Mark(*sched.bytes[:2], *divmod(sched.bytes[2], 1 << 32), sched.events, sched.episodes,
                len(sched.warnings), len(sched.ddr_parts), len(sched.queue_log), sched.stamp)


def segment(sched: Any) -> Segment:
    """The run ``sched`` made (with ``marks``), to be cut into parts at its clean moments."""
    end = len(sched.queued) if sched.stopped is None else sched.stopped
    marks = sched.marks
    return Segment(sched.first, end, np.fromiter(marks, np.int64, len(marks)),
                   np.array(list(marks.values()), np.int64).reshape(len(marks), len(Mark._fields)),
                   {k: np.array(getattr(sched, k)[sched.first:end]) for k in TASK_FIELDS},
                   mark(sched), sched.warnings, sched.ddr_parts,
                   np.array(sched.queue_log, float).reshape(-1, 2), sched.outputs)


def take(sched: Any, seg: Segment, first: int) -> int:
    """Book in ``sched`` what ``seg`` did from its clean moment before arrival ``first`` on, as
    if ``sched`` had run it; returns ``seg.end``."""
    m, t = seg.mark(first), seg.totals
    for k, values in seg.fields.items():
        getattr(sched, k)[first:seg.end] = values[first - seg.first:].tolist()
    sched.bytes[0] += t.read_bytes - m.read_bytes
    sched.bytes[1] += t.write_bytes - m.write_bytes
    sched.bytes[2] += ((t.busy_hi - m.busy_hi) << 32) + t.busy_lo - m.busy_lo
    sched.events += t.events - m.events
    sched.episodes += t.episodes - m.episodes
    sched.warnings.extend(seg.warnings[m.warnings:])
    sched.ddr_parts.extend(seg.ddr_parts[m.ddr_parts:])
    log = seg.queue_log[m.queue_log:]  # merged within; at one time with the last before, one
    if len(log) and sched.queue_log[-1][0] == log[0, 0]:
        sched.queue_log.pop()
    sched.queue_log.extend(zip(log[:, 0].tolist(), log[:, 1].astype(int).tolist()))
    for stream, (stamp, out) in seg.outputs.items():
        if stamp > m.stamp:  # set after that moment: the last of the stream's
            sched.output(stream, out)
    return seg.end


def counter(part: int | None) -> Callable[[], None] | None:
    """In a worker: ``on_task_done`` counting the tasks of ``part`` for the parent's progress,
    or ``None`` where nothing reads it."""
    done = _done
    if part is None or done is None:
        return None
    return lambda: done.__setitem__(part, done[part] + 1)


class _Progress:
    """The run's progress count while its parts run (the workers' counts, read every
    :data:`PROGRESS_EVERY_S` by a helper thread) and as they are joined; never going back."""

    def __init__(self, tick: Callable[[], None], parts: int, tasks: int):
        import multiprocessing

        global _done
        self.tick, self.tasks, self.shown = tick, tasks, 0
        self.done = _done = multiprocessing.Array("q", parts, lock=False)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True,
                                       name="dspsim-parts-progress")
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.wait(PROGRESS_EVERY_S):
            self.show(sum(self.done))

    def show(self, total: int) -> None:
        """Bring the count to ``total`` tasks (at most all of them; never back)."""
        total = min(total, self.tasks)
        for _ in range(total - self.shown):
            self.tick()
        self.shown = max(self.shown, total)

    def workers_done(self) -> None:
        """The workers have returned: the helper stops, the count is theirs."""
        global _done
        self.stop.set()
        self.thread.join()
        _done = None
        self.show(sum(self.done))


CACHE_PARTS_NOTE = ("run in one part: a data cache keeps its lines from task to task, so the "
                    "platform is never idle between tasks and the run has no clean moment to "
                    "be cut at")


def plan_parts(tasks: int, jobs: int, cached: bool) -> tuple[int, str | None]:
    """The parts a run of ``tasks`` is cut into with ``jobs``, and why fewer (``None``: as many
    as asked)."""
    if jobs <= 1:
        return 1, None
    if cached:
        return 1, CACHE_PARTS_NOTE
    k = min(jobs, tasks // MIN_PART_TASKS)
    if k >= jobs:
        return k, None
    where = "one part" if k < 2 else f"{k} parts"
    return max(k, 1), (f"run in {where}: {tasks:,} tasks, and a part takes at least "
                       f"{MIN_PART_TASKS} (a worker's start costs more than so few save)")


def _part(segment_from: Callable[..., Segment], *args: Any) -> Segment | Exception:
    """In a worker: ``segment_from(*args)``, or what it raised, handed back as a result (the
    join decides whether that is the run's error: only the first part surely starts where the
    run does)."""
    try:
        return segment_from(*args)
    except Exception as e:  # noqa: BLE001 - the run's own error, judged by the join
        return e


def _pool_failed(e: Exception) -> BaseException:
    """What a failure of the pool (a worker killed, a result not sent back) raises here."""
    return WorkerError(f"workload: a worker process running a part failed ({type(e).__name__}: "
                       f"{e}); no result was kept (with --jobs 1 the run is one process)")


def run_parts(sched: Any, k: int, jobs: int, segment_from: Callable[..., Segment]) -> None:
    """Run ``sched`` (an ``engine._Schedule`` not yet run) in ``k`` parts, ``jobs`` at once.
    ``segment_from(workload, model, fidelity, data, ddr_profile, reuse, first, until,
    targets=None, part=None)`` (module-level) runs from arrival ``first`` to its first clean
    moment at or after ``until`` (or at one of ``targets``; else to the end)."""
    n = len(sched.queued)
    starts = [n * j // k for j in range(k)]
    spec = (sched.workload, sched.model, sched.fidelity, sched.data, sched.ddr_profile,
            sched.reuse)
    tick, sched.on_task_done = sched.on_task_done, None  # the count is _Progress's
    progress = _Progress(tick, k, n) if tick is not None else None
    segments: list[Segment] = []
    try:
        for j, seg in imap_unordered(
                _part, range(k), jobs, work=k,
                args=lambda j: (segment_from, *spec, starts[j],
                                starts[j + 1] if j + 1 < k else None, None, j),
                failed=_pool_failed):
            if isinstance(seg, Exception) and j == 0:
                raise seg  # the run's own start: it fails as the run does
            if isinstance(seg, Segment):  # a later part that failed gives no clean moments
                segments.append(seg)
    finally:
        if progress is not None:
            progress.workers_done()
    cur = 0
    while cur < n:
        seg = next((s for s in segments if s.first <= cur < s.end and cur in s.marks), None)
        if seg is None:  # no part starts clean here: run on to a moment where one does
            seg = segment_from(*spec, cur, None, frozenset(
                i for s in segments for i in s.marks if cur < i < s.end))
        cur = take(sched, seg, cur)
        if progress is not None:
            progress.show(cur)
    sched.on_task_done = tick
