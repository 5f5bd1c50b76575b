"""A workload run in parts at once (``jobs``) is the same run: every task, byte, warning, output,
queue length and DDR segment equal to one run's, on random workloads (cores, priorities,
backends, jitter, overload, the data path), wherever the parts happen to start (at a clean
moment or in the middle of a busy one), and when no part's run meets another's (this process
runs on between them)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dspsim.errors import AllocationError, DeadlockError, DspsimInputError, WorkerError
from dspsim.study.workload import engine, parts, run_workload
from tests.test_workload_reuse import assert_same_tasks
from tests.workload_helpers import stream_spec, workload

N = 3_000  # small softmax ping-pong: ~0.16 M cycles on the J6 model


def random_workload(rng: np.random.Generator, cores: int):
    streams = []
    for k in range(int(rng.integers(2, 5))):
        op = rng.choice(["softmax", "layernorm"])
        kw = {"op": str(op), "priority": int(rng.integers(0, 3)) * 100,
              "backend": str(rng.choice(["any", *[f"core{c}" for c in range(cores)]])),
              "period_us": (period := float(rng.choice([150.0, 300.0, 700.0]))),
              "jitter_us": float(rng.choice([0.0, 40.0, 0.8 * period])),
              "start_us": float(rng.integers(0, 300)), "count": int(rng.integers(8, 30))}
        if op == "layernorm":
            kw["shape"] = [int(rng.choice([8, 32])), 256]
        else:
            kw["variant"] = str(rng.choice(["pingpong", "direct"]))
            kw["n"] = int(rng.choice([N, 2 * N]))
        streams.append(stream_spec(f"s{k}", (N, 300.0, 10), **kw))
    return workload(*streams, seed=int(rng.integers(1 << 16)))


def assert_same_run(parts, one):
    """Everything but how the run went (events, episodes, tasks reused, wall time)."""
    assert_same_tasks(parts, one)
    assert parts.warnings == one.warnings
    assert np.array_equal(parts.queue_log, one.queue_log)
    assert parts.ddr_bytes == one.ddr_bytes and parts.end_cycle == one.end_cycle
    assert (parts.ddr is None) == (one.ddr is None) and (parts.outputs is None) == (
        one.outputs is None)


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of a few tasks, so that small workloads are split."""
    monkeypatch.setattr(parts, "MIN_PART_TASKS", 4)


@pytest.mark.parametrize("seed", range(6))
def test_parts_at_once_equal_one_run_on_random_workloads(j6, small_parts, seed):
    rng = np.random.default_rng(seed)
    cores = int(rng.integers(1, 4))
    model = j6.with_overrides({"core.count": cores})
    wl = random_workload(rng, cores)
    kw = {"data": bool(seed % 3 == 0), "ddr_profile": bool(seed % 2 == 0)}
    one = run_workload(wl, model, **kw)
    for jobs in (2, 3):
        assert_same_run(run_workload(wl, model, jobs=jobs, **kw), one)


def _in_process_without_starts(fn, items, jobs, work=None, args=None, **_):
    """``imap_unordered`` run here, each part's run but the first forgetting its first three
    clean moments (the one it started at, and where the run before it likely ended): no part
    goes on from where the one before it ended, so this process runs on from there to a later
    clean moment of the next part's run."""
    for item in items:
        seg = fn(*args(item))
        if seg.first > 0:
            for i in sorted(seg.marks)[:3]:
                del seg.marks[i]
        yield item, seg


def test_parts_that_never_meet_are_joined_by_running_on(j6, small_parts, monkeypatch):
    model = j6.with_overrides({"core.count": 2})
    wl = workload(stream_spec("cam", (N, 400.0, 40), jitter_us=150.0),
                  stream_spec("ln", (N, 700.0, 20), op="layernorm", shape=[8, 256],
                              priority=100, start_us=90.0))
    one = run_workload(wl, model, ddr_profile=True)
    calls = []
    segment_from = engine._segment_from
    monkeypatch.setattr(parts, "imap_unordered", _in_process_without_starts)
    monkeypatch.setattr(engine, "_segment_from",
                        lambda *a: calls.append(a[6:]) or segment_from(*a))
    assert_same_run(run_workload(wl, model, jobs=4, ddr_profile=True), one)
    ran_on = [a for a in calls if len(a) == 3]  # (first, until, targets): this process's
    assert ran_on and all(targets for _, _, targets in ran_on)


def test_an_overloaded_platform_is_never_clean_and_one_part_runs_it_all(j6, small_parts):
    # arrivals faster than the core can serve: the queue never empties, no moment is clean
    wl = workload(stream_spec("busy", (N, 20.0, 40)))
    one = run_workload(wl, j6)
    assert_same_run(run_workload(wl, j6, jobs=2), one)


def test_a_platform_with_a_data_cache_is_run_whole(j6, small_parts):
    model = j6.with_overrides({"ddr.cached": True, "dcache.capacity_bytes": 16384})
    wl = workload(stream_spec("cam", (N, 400.0, 10), variant="direct"))
    assert_same_run(run_workload(wl, model, jobs=2), run_workload(wl, model))


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2", 10**6])
def test_jobs_must_be_a_whole_number_of_workers(j6, jobs):
    wl = workload(stream_spec("cam", (N, 400.0, 3)))
    with pytest.raises(DspsimInputError, match="jobs"):
        run_workload(wl, j6, jobs=jobs)


def test_the_command_runs_in_parts_and_refuses_bad_jobs(tmp_path, capsys, small_parts):
    from dspsim.cli import main
    from tests.test_workload_hostile import one_line_exit_2

    f = tmp_path / "w.toml"
    f.write_text('[[stream]]\nname = "cam"\nop = "softmax"\nvariant = "pingpong"\nn = 3000\n'
                 'period_us = 400.0\ncount = 24\njitter_us = 100.0\n')
    rows = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"tasks{jobs}.csv"
        assert main(["workload", str(f), "--jobs", jobs, "--out", str(out)]) == 0
        rows[jobs] = out.read_text()
    assert rows["1"] == rows["2"]
    capsys.readouterr()
    for bad in ("0", "x", "257"):
        one_line_exit_2(capsys, ["workload", str(f), "--jobs", bad], "--jobs")


def _deadlocks(*_args):
    raise DeadlockError(["core0 (waiting for ch0)", "ch1"])


_segment_from = engine._segment_from


def _later_parts_fail(*args):
    """A part's run that does not start where the whole run does fails (as one started at a
    moment that is busy in the whole run may: its platform is one that run never has)."""
    if args[6] > 0 and args[7] is not None:  # first > 0, run in a worker up to ``until``
        raise AllocationError("a buffer that does not fit")
    return _segment_from(*args)


def _first_part_fails(*args):
    if args[6] == 0:
        raise AllocationError("a buffer of 9 bytes does not fit")
    return _segment_from(*args)


def _dies(*_args):
    os._exit(3)  # a worker killed mid-part (the OOM killer, kill -9)


def test_a_deadlock_in_a_part_reaches_the_caller_whole(j6, small_parts, monkeypatch):
    e = pickle.loads(pickle.dumps(DeadlockError(["core0 (waiting for ch0)", "ch1"])))
    assert e.waiting == ["core0 (waiting for ch0)", "ch1"]
    monkeypatch.setattr(engine, "_segment_from", _deadlocks)  # run in the workers
    wl = workload(stream_spec("cam", (N, 400.0, 16)))
    with pytest.raises(DeadlockError) as raised:
        run_workload(wl, j6, jobs=2)
    assert raised.value.waiting == e.waiting and str(raised.value) == str(e)


def test_a_worker_that_dies_is_one_line_not_a_partial_run(j6, small_parts, monkeypatch,
                                                         tmp_path, capsys):
    from dspsim.cli import main

    monkeypatch.setattr(engine, "_segment_from", _dies)
    wl = workload(stream_spec("cam", (N, 400.0, 16)))
    with pytest.raises(WorkerError, match="worker process running a part failed"):
        run_workload(wl, j6, jobs=2)
    f = tmp_path / "w.toml"
    f.write_text('[[stream]]\nname = "cam"\nop = "softmax"\nvariant = "pingpong"\nn = 3000\n'
                 'period_us = 400.0\ncount = 16\n')
    out = tmp_path / "tasks.csv"
    assert main(["workload", str(f), "--jobs", "2", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dspsim: error: workload: a worker"), err
    assert not out.exists()


def test_the_progress_count_moves_with_the_workers_and_ends_at_every_task(j6, small_parts,
                                                                          monkeypatch):
    model = j6.with_overrides({"core.count": 2})
    wl = workload(stream_spec("cam", (N, 300.0, 30), jitter_us=120.0),
                  stream_spec("ln", (N, 500.0, 18), op="layernorm", shape=[8, 256]))
    sizes, at_first_join, counts = [], [], []
    imap, take = parts.imap_unordered, parts.take

    def recording(*a, **kw):  # the workers' segments as they come back
        for item, seg in imap(*a, **kw):
            sizes.append(seg.end - seg.first)
            yield item, seg

    def joining(sched, seg, first):
        if not at_first_join:
            at_first_join.append(len(counts))
        return take(sched, seg, first)

    monkeypatch.setattr(parts, "imap_unordered", recording)
    monkeypatch.setattr(parts, "take", joining)
    run = run_workload(wl, model, jobs=3, on_task_done=lambda: counts.append(1))
    n = wl.tasks
    assert len(sizes) == 3 and len(counts) == n
    # before any part is joined the count is every task the workers ran (parts may overlap)
    assert at_first_join == [min(n, sum(sizes))] and sum(sizes) >= n
    assert_same_tasks(run, run_workload(wl, model))


def test_a_later_part_that_fails_is_run_again_here_and_the_run_is_the_same(j6, small_parts,
                                                                           monkeypatch):
    model = j6.with_overrides({"core.count": 2})
    wl = workload(stream_spec("cam", (N, 300.0, 30), jitter_us=120.0),
                  stream_spec("ln", (N, 500.0, 18), op="layernorm", shape=[8, 256]))
    one = run_workload(wl, model, ddr_profile=True)
    monkeypatch.setattr(engine, "_segment_from", _later_parts_fail)  # in the workers too
    assert_same_run(run_workload(wl, model, jobs=3, ddr_profile=True), one)


def test_the_first_part_fails_as_the_run_does(j6, small_parts, monkeypatch):
    monkeypatch.setattr(engine, "_segment_from", _first_part_fails)
    wl = workload(stream_spec("cam", (N, 400.0, 16)))
    with pytest.raises(AllocationError, match="9 bytes"):  # not a WorkerError
        run_workload(wl, j6, jobs=2)
