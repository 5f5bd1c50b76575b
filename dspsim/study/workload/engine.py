"""Run a workload: streams of RPC tasks, the UCP's queue, and the ops on the cores.

Each stream allocates its DDR buffers once (input, output, parameter block) and reuses them; each
task is one non-blocking ``hbDSPRpcV2`` + ``hbUCPSubmitTask``, released when done. The run ends
when the last task is done, however late: overload shows as backlog and latency, not a hang.
Release ``i`` of a stream is at ``start_us + i * period_us + U[0, jitter_us)``, the jitter drawn
from ``numpy.random.default_rng([seed, stream position])``.

**One clock**, in integer ticks (:mod:`dspsim.ticks`): the host side (releases, the RPC round
trip's halves, the queue and its choice of core, :class:`dspsim.host.ucp.SchedulingPolicy`) is
booked on it, in submission order at equal times. The ops run in *episodes*, each on a fresh
platform whose clock starts when a task starts on an idle one; time being integers, a fresh
platform is the idle one exactly. With ``reuse`` a task starting on an idle platform is booked
from an earlier task of its stream that ran alone on that core, unless another task may start
beside it (:meth:`_Schedule._contended`). ``jobs`` cuts the run at *clean* moments into parts
run at once (:mod:`.parts`). Why each is exact, and why a data cache rules both out:
docs/workloads.md, "Episodes and reuse" and "Parts at once".
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from dspsim.config import HardwareModel
from dspsim.errors import DeadlockError, check_flags
from dspsim.host.program import HostProgram
from dspsim.host.ucp import SchedulingPolicy, Ucp, parse_backend
from dspsim.hw.clock import at, events_scheduled
from dspsim.ops import get_op
from dspsim.ops.registry import firmware_registry
from dspsim.platform import Platform, check_fidelity
from dspsim.study.workload import parts
from dspsim.study.workload.spec import Workload, check_workload
from dspsim.study.workload.summary import DdrMeter, TaskColumns, WorkloadRun
from dspsim.ticks import CYCLE, TICKS_PER_CYCLE, cycles, ticks
from dspsim.workers import check_jobs

INF = float("inf")
CACHE_NOTE = ("the data cache keeps its lines from task to task, so the platform is never idle "
              "between tasks: every task is simulated")


def _shifted(segments: dict[str, np.ndarray], offset: float) -> dict[str, np.ndarray]:
    return {"start": offset + segments["start"], "end": offset + segments["end"],
            "share": segments["share"]}


# what an episode (or a booking of one) adds to the run: bytes read and written, the port's
# data-path busy ticks (its own count: per request on a transactions one), warnings, DDR
# segments (cycles), outputs by stream
_Totals = namedtuple("_Totals", "read_bytes write_bytes busy_ticks warnings ddr outputs")
# a task alone on an idle platform, from its episode's start: its end (ticks), its op's start
# and cycles, and its totals (DDR segments from the episode's start)
_Booked = namedtuple("_Booked", "end op_start op_cycles totals")
# a task in the UCP's queue, as :class:`SchedulingPolicy` reads it (backend: a core or None)
_Waiting = namedtuple("_Waiting", "task priority backend seq")


class _Episode:
    """A fresh platform from ``start`` (ticks) on, every stream's buffers allocated in stream
    order as on one platform, and the ops started on it."""

    def __init__(self, run: _Schedule, start: int):
        self.run = run
        self.start = start
        self.env = simpy.Environment(initial_time=start)
        self.platform = Platform(self.env, run.model, data=run.data, trace=False,
                                 fidelity=run.fidelity)
        self.platform.accesses.enabled = False  # workloads do not check hazards
        ucp = Ucp(self.platform, run.registry)
        self.meter = None
        if run.ddr_profile:
            self.meter = self.platform.port.log = DdrMeter(self.platform.port)  # per request
        self.programs = [HostProgram.load(ucp, get_op(s.op), s.variant, s.shape, what=s.name)
                         for s in run.workload.streams]
        self.never_idle = run.model.dcache.capacity_bytes > 0
        self.running = self.tasks_started = 0
        self.last: tuple[int, float, float, int] | None = None  # the latest done
        self.streams: set[int] = set()  # the streams whose ops ran here
        self.sentinel_for = -1  # the arrival a process of this platform waits to hand over

    def begin(self, task: int, stream: int, core: int, t: int) -> None:
        """Start the task's op at ``t``: now, from a process of this platform, or later, from
        the host side while nothing here is pending."""
        if t > self.env.now:
            self.env.run(until=t)
        self.running += 1
        self.tasks_started += 1
        self.streams.add(stream)
        self.env.process(self._op(task, stream, core))

    def _op(self, task: int, stream: int, core: int):
        op_start, op_cycles = yield from self.programs[stream].run(core)
        self.last = (stream, op_start, op_cycles, self.env.now)
        self.run.op_done(self, task, core)

    def sentinel(self, task: int):
        """A process waiting for the host side's next arrival, so that no engine here runs
        ahead of it (event elision looks at this platform's queue only); it hands the arrival
        over as a process of this platform would, at its exact time."""
        run = self.run
        yield at(self.env, max(self.env.now, run.queued[task]))
        if run.episode is self and run.next_arrival == task:
            run.next_arrival += 1
            run.arrive(task, run.queued[task])

    def idle(self, t: int) -> bool:
        """Nothing running or in flight at ``t``: a fresh platform is the same."""
        if self.never_idle or self.running:
            return False
        p = self.platform
        # (a port whose requests may complete out of order is never taken as idle: the
        # platform is not restarted under it)
        return (all(m.port.ring and m.port.idle_at(t) for m in p.memories.values())
                and all(ch.current is None and not ch.fifo.items
                        for d in p.dsps for ch in d.idma))

    def totals(self, origin: float = 0.0) -> _Totals:
        """What this episode adds to the run, its DDR segments from ``origin`` (cycles)."""
        p = self.platform
        stats = p.port.stats()
        return _Totals(stats["read_bytes"], stats["write_bytes"], p.port.busy_ticks,
                       [dict(w) for w in p.warnings.values()],
                       None if self.meter is None else _shifted(self.meter.arrays(), -origin),
                       {k: self.output(k) for k in self.streams} if p.data else {})

    def booked(self) -> _Booked:
        """This episode, a single task that left the platform idle, as a booking."""
        _, op_start, op_cycles, end = self.last
        origin = cycles(self.start)
        return _Booked(end - self.start, op_start - origin, op_cycles, self.totals(origin))

    def output(self, stream: int) -> np.ndarray:
        p = self.programs[stream]
        return p.array(p.output).copy()


class _Schedule:
    """The host side on the one clock (ticks), driving the episodes (module docstring). As a
    part of the run (:func:`.parts.run_parts`): from arrival ``first`` on a clean platform to
    the first clean moment ``stop`` accepts, noting the totals at each clean moment."""

    def __init__(self, workload: Workload, model: HardwareModel, fidelity: str, data: bool,
                 ddr_profile: bool, reuse: bool, on_task_done: Callable[[], None] | None,
                 first: int = 0, stop: Callable[[int], bool] | None = None):
        self.workload, self.model, self.fidelity, self.data = workload, model, fidelity, data
        self.ddr_profile, self.reuse, self.on_task_done = ddr_profile, reuse, on_task_done
        self.first, self.stop, self.stopped = first, stop, None
        self.marks: dict[int, parts.Mark] | None = None if stop is None else {}
        self.registry = firmware_registry()
        cores = self.cores = model.core.count
        clock = model.core.clock_mhz
        self.half_rpc = ticks(model.host.rpc_latency_us * clock / 2)  # as the UCP's
        stream, self.index, self.release = _arrival_order(workload, clock)
        n = len(stream)
        # at the DSP side (ticks(r) inlined)
        self.queued = [round(r * TICKS_PER_CYCLE) + self.half_rpc for r in self.release.tolist()]
        self.stream = stream.tolist()
        priority, backend = zip(*((s.priority, parse_backend(s.backend, cores))
                                  for s in workload.streams))
        self.priority = [priority[k] for k in self.stream]
        self.backend = [backend[k] for k in self.stream]  # None: any core
        # what the run fills in, task by task (lists: cheaper to set one at a time than arrays)
        self.core = [-1] * n
        self.started, self.op_start, self.op_cycles, self.core_end_cycle = (
            [-1.0] * n for _ in range(4))
        self.reused = [False] * n
        # the arrivals a core other than c could take: "any" ones and those for core k
        kind = np.array([-1 if b is None else b for b in self.backend], np.int64)
        self.arrivals_of = {k: np.flatnonzero(kind == k) for k in range(-1, cores)}
        self.policy = SchedulingPolicy(cores)
        self.free = [True] * cores
        self.heap: list[tuple[int, int]] = []  # (core end, task)
        self.next_arrival = first
        self.queue_log: list[tuple[float, int]] = [(0.0, 0)]
        self.episode: _Episode | None = None
        self.memo: dict[tuple[int, int], _Booked] = {}
        self.episodes = self.events = self.stamp = 0
        self.bytes = [0, 0, 0]  # read, written, data-path busy ticks (the host memory's port)
        self.warnings: list[tuple[int, list[dict[str, Any]]]] = []  # (episode start, ...)
        self.ddr_parts: list[dict[str, np.ndarray]] = []
        self.outputs: dict[int, tuple[int, np.ndarray]] = {}  # (stamp when set, last output)

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        queued, heap = self.queued, self.heap
        n = len(queued)
        while self.stopped is None:
            ep = self.episode
            if ep is not None:
                if self.next_arrival < n and ep.sentinel_for != self.next_arrival:
                    ep.sentinel_for = self.next_arrival
                    ep.env.process(ep.sentinel(self.next_arrival))
                nxt = ep.env.peek()
                if nxt < INF and not (heap and heap[0][0] < nxt):
                    ep.env.step()  # the ops; arrivals and completions act from inside
                    continue
            # nothing pending on the platform: the host side goes on
            t_arr = queued[self.next_arrival] if self.next_arrival < n else INF
            t_end = heap[0][0] if heap else INF
            if t_arr == INF and t_end == INF:
                break
            if t_end <= t_arr:  # a booked task ends before (or as) a task arrives
                t, task = heapq.heappop(heap)
                self.core_end(task, t)
            else:
                task = self.next_arrival
                self.next_arrival += 1
                self.arrive(task, t_arr)
        if self.episode is not None:
            if self.episode.running:
                raise DeadlockError(self.episode.platform.waiting())
            self._close(self.episode)

    def arrive(self, task: int, t: int) -> None:
        """A task reaches the DSP side at ``t``."""
        if self.marks is not None and self._clean(t):
            if self.episode is not None:  # idle: closed here rather than as the task starts
                self._close(self.episode)
            self.marks[task] = parts.mark(self)
            if task > self.first and self.stop(task):
                self.stopped = task  # this part ends here: the arrival is the next part's
                return
        waiting = _Waiting(task, self.priority[task], self.backend[task], task)
        core = self.policy.core_for(waiting, self.free)
        if core is None:
            self.policy.push(waiting)
            self._log_queue(t)
        else:
            self._start(task, core, t)

    def _clean(self, t: int) -> bool:
        """Nothing runs, waits or is booked at ``t``: what follows depends only on the
        arrivals from here on, as from the start of a run."""
        if self.heap or len(self.policy) or not all(self.free):
            return False
        return self.episode is None or self.episode.idle(t)

    def core_end(self, task: int, t: int) -> None:
        c = self.core[task]
        self.free[c] = True
        self.core_end_cycle[task] = t * CYCLE
        if self.on_task_done is not None:
            self.on_task_done()
        nxt = self.policy.pop_for(c)
        if nxt is not None:
            self._log_queue(t)
            self._start(nxt.task, c, t)

    def _start(self, task: int, core: int, t: int) -> None:
        self.free[core] = False
        self.core[task] = core
        self.started[task] = t * CYCLE
        ep = self.episode
        if ep is not None and ep.idle(t):
            self._close(ep)
            ep = None
        stream = self.stream[task]
        if ep is None:
            booked = self.memo.get((stream, core)) if self.reuse else None
            if booked is not None and not self._contended(core, t + booked.end):
                self._book(task, booked, t)
                return
            ep = self.episode = _Episode(self, t)
            self.episodes += 1
        ep.begin(task, stream, core, t)

    def _contended(self, core: int, end: int) -> bool:
        """Whether a task not yet arrived may start beside one on ``core`` until ``end`` (the
        next arrival another core could take comes at or before it: the other cores are idle,
        nothing else runs), or arrives just as it ends (who goes first then, the arrival or
        the end, is the order of the platform's events: the task is simulated)."""
        i = bisect.bisect_left(self.queued, end, self.next_arrival)
        if i < len(self.queued) and self.queued[i] == end:
            return True
        for k, positions in self.arrivals_of.items():
            if k == core or (k == -1 and self.cores == 1) or not len(positions):
                continue
            i = int(np.searchsorted(positions, self.next_arrival))
            if i < len(positions) and self.queued[positions[i]] <= end:
                return True
        return False

    # ------------------------------------------------------------------ the ops
    def op_done(self, ep: _Episode, task: int, core: int) -> None:
        """A simulated op returned (called from its process, at its end)."""
        stream, op_start, op_cycles, end = ep.last
        ep.running -= 1
        self.op_start[task] = op_start
        self.op_cycles[task] = op_cycles
        if ep.idle(end):
            if ep.tasks_started == 1 and self.reuse:
                self.memo.setdefault((stream, core), ep.booked())
            self._close(ep)
        self.core_end(task, end)

    def _book(self, task: int, b: _Booked, t: int) -> None:
        at_cycle = t * CYCLE
        self.op_start[task] = at_cycle + b.op_start
        self.op_cycles[task] = b.op_cycles
        self.reused[task] = True
        self._add(b.totals, t, at_cycle)
        heapq.heappush(self.heap, (t + b.end, task))

    def _close(self, ep: _Episode) -> None:
        self.events += events_scheduled(ep.env)
        self._add(ep.totals(), ep.start)
        self.episode = None

    def _add(self, tot: _Totals, t: int, shift: float = 0.0) -> None:
        """Add an episode's (or a booking's) totals at ``t``, its DDR segments ``shift`` cycles
        later."""
        for i, v in enumerate((tot.read_bytes, tot.write_bytes, tot.busy_ticks)):
            self.bytes[i] += v
        if tot.warnings:
            self.warnings.append((t, tot.warnings))
        if tot.ddr is not None:
            self.ddr_parts.append(_shifted(tot.ddr, shift))
        for stream, out in tot.outputs.items():
            self.output(stream, out)

    def output(self, stream: int, out: np.ndarray) -> None:
        self.stamp += 1
        self.outputs[stream] = (self.stamp, out)

    def _log_queue(self, t: int) -> None:
        now = t * CYCLE
        if self.queue_log[-1][0] == now:  # one entry a time: its last count
            self.queue_log.pop()
        self.queue_log.append((now, len(self.policy)))

    # ------------------------------------------------------------------ the totals
    def columns(self) -> TaskColumns:
        core_end = np.array(self.core_end_cycle)
        return TaskColumns(
            np.array(self.stream, np.int32), self.index, np.array(self.priority, np.int16),
            np.array(self.core, np.int16), self.release, np.array(self.queued, float) * CYCLE,
            np.array(self.started), np.array(self.op_start), np.array(self.op_cycles),
            core_end, np.where(core_end >= 0, core_end + cycles(self.half_rpc), -1.0),
            np.array(self.reused, bool))

    def merged_warnings(self) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for _, ws in sorted(self.warnings, key=lambda w: w[0]):
            for w in ws:
                out.setdefault(w["code"], {**w, "count": 0})["count"] += w["count"]
        return list(out.values())

    def ddr(self) -> dict[str, np.ndarray]:
        """The DDR occupancy of every episode and booking, in time order."""
        keys = ("start", "end", "share")
        cat = {k: np.concatenate([np.zeros(0)] + [p[k] for p in self.ddr_parts]) for k in keys}
        order = np.lexsort((cat["share"], cat["end"], cat["start"]))
        return {k: v[order] for k, v in cat.items()}


def _segment_from(workload: Workload, model: HardwareModel, fidelity: str, data: bool,
                  ddr_profile: bool, reuse: bool, first: int, until: int | None,
                  targets: frozenset[int] | None = None,
                  part: int | None = None) -> parts.Segment:
    """The run from arrival ``first`` on a clean platform, to its first clean moment at or
    after arrival ``until`` (or at one of ``targets``; with neither, to the end); its tasks
    done counted as ``part``'s (:func:`.parts.counter`)."""
    stop = until.__le__ if until is not None else (targets or frozenset()).__contains__
    sched = _Schedule(workload, model, fidelity, data, ddr_profile, reuse, parts.counter(part),
                      first, stop)
    sched.run()
    return parts.segment(sched)


def run_workload(
    workload: Workload, model: HardwareModel, fidelity: str = "tile", data: bool = False,
    ddr_profile: bool = False, on_task_done: Callable[[], None] | None = None,
    reuse: bool = True, jobs: int = 1,
) -> WorkloadRun:
    """Simulate ``workload`` on ``model``'s platform; ``data`` moves values (the op's default
    input in each stream's input buffer); ``ddr_profile`` keeps the DDR data path's occupancy
    over time (for figures and traces); ``on_task_done()`` is called as each task completes
    (a progress count); ``reuse`` books a task from an earlier identical one where nothing
    else can run beside it (module docstring), ``False`` simulates every task; ``jobs`` runs
    it in that many parts at once, in worker processes (module docstring: the same tasks)."""
    check_fidelity(fidelity)
    check_jobs(jobs, "jobs", "parts of the run")
    check_flags(data=data, ddr_profile=ddr_profile, reuse=reuse)
    workload = check_workload(workload, model)  # as a file gives it
    wall_start = time.perf_counter()
    sched = _Schedule(workload, model, fidelity, data, ddr_profile, reuse, on_task_done)
    cached = model.dcache.capacity_bytes > 0
    k, parts_note = parts.plan_parts(len(sched.queued), jobs, cached)
    if k > 1:
        parts.run_parts(sched, k, jobs, _segment_from)
    else:
        sched.run()
    cols = sched.columns()
    if (cols.core_end_cycle < 0).any():
        raise DeadlockError(["host (waiting for a task that never finished)"])
    names, mem = [s.name for s in workload.streams], model.host.memory
    return WorkloadRun(
        workload=workload, model=model, fidelity=fidelity, data=data, tasks=cols,
        queue_log=np.asarray(sched.queue_log, float).reshape(-1, 2),
        end_cycle=float(cols.finished_cycle.max()),
        core_names=[f"core{c}" for c in range(model.core.count)],
        # the host memory's port: its own count of busy cycles, as `dspsim run` reports it
        ddr_bytes={f"{mem}_read": sched.bytes[0], f"{mem}_write": sched.bytes[1]},
        ddr_busy_cycles=cycles(sched.bytes[2]), rpc_cycles=cycles(2 * sched.half_rpc),
        events=sched.events, wall_s=time.perf_counter() - wall_start,
        warnings=sched.merged_warnings(), ddr=sched.ddr() if ddr_profile else None,
        outputs={names[s]: v for s, (_, v) in sorted(sched.outputs.items())} if data else None,
        reuse=reuse, reuse_note=CACHE_NOTE if reuse and cached else None,
        episodes=sched.episodes, jobs=jobs, parts=k, parts_note=parts_note,
    )


def _arrival_order(workload: Workload,
                   clock: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every task's stream, index in its stream and release cycle (jitter drawn from the
    workload's seed), by time, then stream order."""
    streams, release = workload.streams, []
    for k, s in enumerate(streams):
        base = s.start_us + s.period_us * np.arange(s.count)
        if s.jitter_us > 0:
            rng = np.random.default_rng([workload.seed, k])
            base = base + rng.uniform(0.0, s.jitter_us, s.count)
        release.append(base * clock)
    release = np.concatenate(release)
    stream = np.concatenate([np.full(s.count, k, np.int32) for k, s in enumerate(streams)])
    index = np.concatenate([np.arange(s.count, dtype=np.int64) for s in streams])
    order = np.lexsort((index, stream, release))  # by time, then stream order
    return stream[order], index[order], release[order]
