"""Workloads at scale and their messages: the trace of an overloaded workload (its backlog, and
so its host-stream lanes, grow with its tasks) is built in n log n time with the same content as
the straightforward per-task build; camera_streams.py refuses at argument time a run whose
largest workload has too many tasks; the workload bounds are printed right (24 h) and with
every digit that matters."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dspsim.analysis.perfetto import _Clock, _durations_us, _us
from dspsim.analysis.series import assign_lanes, binned_mean
from dspsim.analysis.workload_plots import (
    MAX_DDR_COUNTER_BINS,
    _queue_steps,
    workload_trace,
)
from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.study.workload import WorkloadError, parse_workload, run_workload, task_table
from dspsim.study.workload.spec import MAX_TASKS, MAX_TIME_US

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the trace, overloaded
def reference_trace(run: Any, tasks) -> dict[str, Any]:
    """The trace built the straightforward way, one task at a time (the build before it was
    made n log n: its lanes scan was quadratic in an overloaded workload's backlog)."""
    clock = run.model.core.clock_mhz
    to_ns = _Clock(clock).ns
    ev: list[dict[str, Any]] = []

    def x(pid, tid, start_ns, end_ns, **rest):
        ts = np.array([start_ns], np.int64)
        dur = _durations_us(ts, np.array([end_ns], np.int64))[0]
        return {"ph": "X", "pid": pid, "tid": tid, "ts": float(_us(ts)[0]),
                "dur": float(dur)} | rest

    def meta(pid, tid, kind, name, sort=None):
        ev.append({"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}})
        if sort is not None:
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": sort}})

    meta(1, 0, "process_name", "DSP cores")
    meta(2, 0, "process_name", "host streams")
    core_tid = {c: k + 1 for k, c in enumerate(run.core_names)}
    for c, tid in core_tid.items():
        meta(1, tid, "thread_name", c, tid)
    op_start, op_end = to_ns(tasks["start_cycle"]), to_ns(tasks["core_end_cycle"])
    submit, done = to_ns(tasks["submit_cycle"]), to_ns(tasks["done_cycle"])
    for i, r in enumerate(tasks.itertuples(index=False)):
        args = {"stream": r.stream, "index": int(r.index), "priority": int(r.priority),
                "backend": r.backend, "latency_us": round(float(r.latency_us), 3),
                "wait_us": round(float(r.start_us - r.queued_us), 3),
                "op_cycles": int(r.op_cycles), "missed": bool(r.missed)}
        ev.append(x(1, core_tid[r.core], op_start[i], op_end[i], name=r.stream, cat="task",
                    args=args))
    index = tasks["index"].to_numpy()
    latency = tasks["latency_us"].to_numpy(float)
    core = tasks["core"].to_numpy()
    missed = tasks["missed"].to_numpy(bool)
    tid = 1
    for s in run.workload.streams:
        idx = np.flatnonzero((tasks["stream"] == s.name).to_numpy())
        lanes = assign_lanes(submit[idx], done[idx]) if len(idx) else np.zeros(0, int)
        for lane in range(int(lanes.max()) + 1 if len(lanes) else 0):
            meta(2, tid + lane, "thread_name", s.name if lane == 0 else f"{s.name} ({lane + 1})",
                 tid + lane)
        for j, lane in zip(idx, lanes):
            ev.append(x(2, tid + int(lane), submit[j], done[j], name=f"{s.name}#{int(index[j])}",
                        cat="latency", args={"latency_us": round(float(latency[j]), 3),
                                             "core": str(core[j]), "missed": bool(missed[j])}))
        tid += int(lanes.max()) + 1 if len(lanes) else 1
    t, q = _queue_steps(run)
    last = {}
    for a, b in zip(to_ns(t), q):
        last[int(a)] = int(b)
    for a, b in last.items():
        ev.append({"ph": "C", "pid": 1, "tid": 0, "name": "queue (tasks waiting)",
                   "ts": float(_us(a)), "args": {"tasks": b}})
    if run.ddr is not None and run.end_cycle > 0:
        bins = int(min(MAX_DDR_COUNTER_BINS, max(1, run.end_cycle / clock // 10)))
        edges = np.linspace(0.0, run.end_cycle, bins + 1)
        util = 100.0 * binned_mean(run.ddr["start"], run.ddr["end"], run.ddr["share"], edges)
        for a, u in zip(_us(to_ns(edges[:-1])), util):
            ev.append({"ph": "C", "pid": 1, "tid": 0, "name": "DDR data path (%)",
                       "ts": float(a), "args": {"busy": round(float(min(u, 100.0)), 2)}})
    return {"traceEvents": ev}


def overloaded(count: int, cores: int = 2):
    """Two streams released far faster than the cores run them (one jittered, one on a fixed
    core at a higher priority): the backlog grows with every release."""
    workload = parse_workload({"seed": 3, "stream": [
        {"name": "a", "op": "softmax", "variant": "direct", "n": 1, "period_us": 0.001,
         "count": count},
        {"name": "b", "op": "softmax", "variant": "direct", "n": 64, "period_us": 0.7,
         "count": max(1, count // 4), "jitter_us": 0.5, "priority": 3, "backend": "core1"},
    ]})
    run = run_workload(workload, load_model(None, [f"core.count={cores}"]), ddr_profile=True)
    return run, task_table(run)


def host_lanes(obj) -> dict[str, int]:
    return {e["args"]["name"]: e["tid"] for e in obj["traceEvents"]
            if e["ph"] == "M" and e["pid"] == 2 and e["name"] == "thread_name"}


def test_overloaded_trace_matches_the_straightforward_build():
    run, tasks = overloaded(200)
    obj = workload_trace(run, tasks)
    assert obj["traceEvents"] == reference_trace(run, tasks)["traceEvents"]
    assert len(host_lanes(obj)) > 50  # overloaded: many tasks of a stream in flight at once


def test_overloaded_trace_of_thousands_of_tasks():
    run, tasks = overloaded(4000)
    obj = workload_trace(run, tasks)
    ev = obj["traceEvents"]
    x = [e for e in ev if e["ph"] == "X"]
    assert len(x) == 2 * len(tasks)
    lanes = host_lanes(obj)
    assert len(lanes) > 1000  # the backlog: one lane per task in flight at once
    for pid in (1, 2):  # no two slices of a thread overlap, even in ns
        by_tid: dict[int, list] = {}
        for e in x:
            if e["pid"] == pid:
                by_tid.setdefault(e["tid"], []).append(
                    (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
        for spans in by_tid.values():
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # each stream's lanes are as few as its tasks in flight at once (greedy is optimal)
    clock = _Clock(run.model.core.clock_mhz)
    for name in ("a", "b"):
        sel = (tasks["stream"] == name).to_numpy()
        s, d = clock.ns(tasks["submit_cycle"])[sel], clock.ns(tasks["done_cycle"])[sel]
        t = np.concatenate([s, d])
        step = np.concatenate([np.ones(len(s)), -np.ones(len(d))])
        most = int(np.cumsum(step[np.lexsort((step, t))]).max())  # ends first at a tie
        assert sum(1 for n in lanes if n == name or n.startswith(f"{name} (")) == most


def _scan_lanes(starts, ends):
    """The lanes as a plain scan gives them: by start, the lowest-numbered lane free by then."""
    lanes = np.zeros(len(starts), dtype=int)
    lane_end: list[float] = []
    for i in np.lexsort((ends, starts)):
        for k, free in enumerate(lane_end):
            if free <= starts[i]:
                lanes[i], lane_end[k] = k, ends[i]
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(ends[i])
    return lanes


@pytest.mark.parametrize("seed", range(6))
def test_assign_lanes_gives_the_lanes_of_a_plain_scan(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    starts = np.round(rng.uniform(0, 100, n), 1)  # ties in starts, zero-length intervals
    ends = starts + np.round(rng.exponential(5 if seed % 2 else 200, n), 1) * (rng.random(n) > 0.1)
    assert np.array_equal(assign_lanes(starts, ends), _scan_lanes(starts, ends))
    assert len(assign_lanes(starts[:0], ends[:0])) == 0


# ------------------------------------------------------------------ camera_streams.py
def camera_streams():
    spec = importlib.util.spec_from_file_location("camera_streams_scale",
                                                  ROOT / "experiments" / "camera_streams.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_camera_streams_largest_workload_is_checked_against_max_tasks():
    mod = camera_streams()
    for cameras in (1, 7, 12, 64):
        top = mod.max_seconds_for(cameras)
        assert mod.tasks_of(cameras, top) <= MAX_TASKS
        if top < mod.MAX_SECONDS:
            assert mod.tasks_of(cameras, round(top + 0.1, 1)) > MAX_TASKS
            with pytest.raises(DspsimInputError, match=f"--seconds at most {top:g} for "
                               f"--max-cameras {cameras}"):
                mod.check_size(cameras, round(top + 0.1, 1))
        mod.check_size(cameras, top)  # at the bound: accepted
    assert mod.max_seconds_for(12) == 2702.7 and mod.max_seconds_for(64) == 518.1
    assert mod.max_seconds_for(1) == 25000.0 < mod.MAX_SECONDS
    # the count is the workload's own, and the workload at the bound parses
    w = mod.workload(12, "pingpong", 2702.7)
    assert w.tasks == mod.tasks_of(12, 2702.7)
    with pytest.raises(WorkloadError, match="allowed at most 1,000,000"):
        mod.workload(12, "pingpong", 2702.8)


def test_camera_streams_too_many_tasks_is_one_line_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "camera_streams.py"),
                        "--seconds", "3000", "--max-cameras", "12", "--out-dir", str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("camera_streams.py: error: --seconds 3000 with --max-cameras 12")
    assert "1,110,000 tasks" in r.stderr and "--seconds at most 2702.7" in r.stderr
    assert "--max-cameras at most 10 for --seconds 3000" in r.stderr
    assert r.stdout == "" and not out.exists()  # refused before the out-dir or a simulation


# ------------------------------------------------------------------ workload bounds, as printed
def one_stream(**kw):
    return parse_workload({"stream": [{"name": "a", "op": "softmax", "variant": "direct",
                                       "n": 1, "period_us": 1, "count": 1} | kw]})


@pytest.mark.parametrize("key", ["period_us", "deadline_us", "start_us"])
def test_time_bound_is_printed_as_24_hours(key):
    with pytest.raises(WorkloadError) as e:
        one_stream(**{key: 2e11})
    text = str(e.value)
    assert "86,400,000,000 us (24 h)" in text, text
    assert "8.64e+10" not in text and "2e+11" not in text, text
    assert MAX_TIME_US == 86_400e6


def test_deadline_range_says_more_than_zero():
    with pytest.raises(WorkloadError, match=r"deadline_us = 200000000000.0: allowed more than "
                       r"0 and at most 86,400,000,000 us \(24 h\)"):
        one_stream(deadline_us=2e11)
    with pytest.raises(WorkloadError, match="period_us = 0.0001: allowed 0.001 to "
                       "86,400,000,000 us"):
        one_stream(period_us=1e-4)


@pytest.mark.parametrize("kw, shown", [
    ({"start_us": 86_399_999_999.5, "count": 2},
     "= 86,400,000,000.5 us, is past 86,400,000,000 us"),
    ({"start_us": 1e-3, "period_us": 86_400e6, "count": 2},
     "= 86,400,000,000.001 us, is past 86,400,000,000 us"),
    ({"period_us": 86_400e6, "count": 100_000}, "= 8,639,913,600,000,000.0 us, is past"),
])
def test_last_release_past_the_bound_prints_its_digits(kw, shown):
    with pytest.raises(WorkloadError) as e:
        one_stream(**kw)
    assert shown in str(e.value), str(e.value)
    assert "(24 h)" in str(e.value)
