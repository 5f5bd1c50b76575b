"""Worker processes die with their parent: ``kill -9`` of a command or script that runs a pool
leaves no worker behind (:mod:`dspsim.workers`), and no pool starts more workers than work."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from dspsim import workers
from tests.proc_helpers import CLI, kill_group, start, survivors, wait_for_children

ROOT = Path(__file__).resolve().parents[1]
GONE_WITHIN_S = 120.0  # how long a worker may take to notice; returns as soon as none is left


def _kill_parent_and_check(argv: list, workers_expected: int = 2, startup_s: float = 60.0,
                           cwd=None) -> None:
    proc = start(argv, cwd=cwd)
    try:
        kids = wait_for_children(proc, workers_expected, startup_s)
        os.kill(proc.pid, signal.SIGKILL)  # the parent only, as `kill -9 PID` does
        proc.wait(timeout=10)
        left = survivors(kids, GONE_WITHIN_S)
        assert not left, f"{len(left)} of {len(kids)} workers outlived their parent"
    finally:
        kill_group(proc)


def test_optimize_workers_die_with_the_command():
    """Before: both workers of `optimize --jobs 2` kept running for tens of minutes."""
    _kill_parent_and_check([*CLI, "optimize", "--n", "20000", "--jobs", "2", "--no-check",
                            "--param", "ddr.latency_cycles=1:60:1"])


def test_calibrate_explore_workers_die_with_the_command():
    _kill_parent_and_check([*CLI, "calibrate", "--explore", "--jobs", "2"])


def test_sweep_workers_die_with_the_command(tmp_path):
    _kill_parent_and_check([*CLI, "sweep", "--param", "ddr.latency_cycles=1:400:1", "--n",
                            "20000", "--jobs", "2", "--out", tmp_path / "s.csv"])


def test_experiment_script_workers_die_with_the_script(tmp_path):
    _kill_parent_and_check([sys.executable, ROOT / "experiments" / "camera_streams.py",
                            "--seconds", "0.5", "--max-cameras", "3", "--jobs", "2",
                            "--out-dir", tmp_path])


def test_dask_local_cluster_workers_die_with_the_command(tmp_path):
    pytest.importorskip("distributed")
    # nannies and their workers: at least two processes
    _kill_parent_and_check([*CLI, "sweep", "--param", "ddr.latency_cycles=1:400:1", "--n",
                            "20000", "--jobs", "2", "--executor", "dask",
                            "--out", tmp_path / "s.csv"])


POOL_SCRIPT = """
import sys, time
from dspsim import workers
if sys.argv[1] == "poll":  # no parent-death signal: the workers' polling thread alone
    workers.set_parent_death_signal = lambda sig=None: False
with workers.process_pool(2, 10) as pool:
    futures = [pool.submit(time.sleep, 600) for _ in range(2)]
    time.sleep(600)
"""


@pytest.mark.parametrize("how", ["signal", "poll"])
def test_a_pool_dies_with_its_parent_either_way(how):
    """The kernel's parent-death signal, and without it the polling thread, each suffice."""
    _kill_parent_and_check([sys.executable, "-c", textwrap.dedent(POOL_SCRIPT), how],
                           startup_s=30)


FORK_SCRIPT = """
import sys, time
from dspsim import workers
if sys.argv[1] == "poll":  # no parent-death signal: the workers' polling thread alone
    workers.set_parent_death_signal = lambda sig=None: False
procs = workers.fork_processes([(time.sleep, (600,))] * 2)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["signal", "poll"])
def test_forked_processes_die_with_their_parent_either_way(how):
    """The local dask cluster's workers are forked so: busy in a point when the parent is
    killed, they go too."""
    _kill_parent_and_check([sys.executable, "-c", textwrap.dedent(FORK_SCRIPT), how],
                           startup_s=30)


SINGLE_THREAD_SCRIPT = """
import threading, time
from dspsim import workers

assert workers.can_fork_workers()
stop = threading.Event()
t = threading.Thread(target=stop.wait, daemon=True)
t.start()
try:
    assert not workers.can_fork_workers()
    try:
        workers.fork_processes([(time.sleep, (60,))])
    except RuntimeError as e:
        assert "single-threaded" in str(e)
    else:
        raise AssertionError("forked beside another thread")
finally:
    stop.set()
    t.join()
procs = workers.fork_processes([(time.sleep, (60,))])
assert procs[0].is_alive()
workers.stop_processes(procs)
assert not procs[0].is_alive()
print("ok")
"""


def test_processes_are_forked_only_from_a_single_threaded_process():
    # in a fresh interpreter: a test run before this one in the same process may leave a
    # thread behind (a pool's watch, dask's), and then nothing may be forked here
    import subprocess

    p = subprocess.run([sys.executable, "-c", SINGLE_THREAD_SCRIPT], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_a_pool_never_has_more_workers_than_work():
    with workers.process_pool(8, 2) as pool:
        assert pool._max_workers == 2
        assert sorted(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
    got = dict(workers.imap_unordered(abs, [-1, -2, -3], jobs=50, work=3))
    assert got == {-1: 1, -2: 2, -3: 3}


def test_leaving_a_pool_by_an_exception_stops_its_running_workers():
    """Ctrl-C (or an error) does not wait for the workers' current tasks."""
    import time

    with pytest.raises(KeyboardInterrupt), workers.process_pool(2) as pool:
        pool.submit(time.sleep, 60)
        pool.submit(time.sleep, 60)
        procs = list(pool._processes.values())
        raise KeyboardInterrupt
    assert not any(p.is_alive() for p in procs)
    # stopped by a signal in their sleep, not left to finish it and exit normally
    assert all(p.exitcode is not None and p.exitcode < 0 for p in procs), procs


@pytest.mark.parametrize("jobs", [0, -1, 257, 100_000, True, 2.0])
def test_jobs_out_of_range_is_refused(jobs):
    from dspsim.errors import DspsimInputError

    with pytest.raises(DspsimInputError, match="1 to 256"):
        workers.check_jobs(jobs)


@pytest.mark.parametrize("jobs", ["0", "-3", "257", "100000", "two"])
def test_calibrate_explore_jobs_is_bounded_as_sweep_and_optimize_are(capsys, jobs):
    """Before: `calibrate --explore --jobs 100000` was accepted and forked 100,000 workers."""
    from tests.cli_helpers import one_line, run_cli

    code, _, err = run_cli(capsys, "calibrate", "--explore", "--jobs", jobs)
    assert code == 2 and one_line(err) and "--jobs" in err and "1 to 256" in err


def test_the_exploration_api_bounds_jobs_too(j6):
    from dspsim.errors import DspsimInputError
    from dspsim.study.calibrate.explore import explore_space, search_grid
    from dspsim.study.calibrate.measure import seed_measurements

    ms = seed_measurements()
    with pytest.raises(DspsimInputError, match="1 to 256"):
        search_grid(j6, ms, explore_space(j6, ms), 1.0, jobs=100_000)


def test_the_explorer_starts_no_more_workers_than_grid_points(monkeypatch):
    import importlib

    explore = importlib.import_module("dspsim.study.calibrate.explore")
    sizes = []
    real = workers.process_pool

    def spy(jobs, work=None, *a, **k):
        sizes.append(min(jobs, work))
        return real(jobs, work, *a, **k)

    monkeypatch.setattr(workers, "process_pool", spy)
    monkeypatch.setattr(explore, "fit_point", abs)
    assert sorted(explore._results([-1, -2, -3], 64)) == [1, 2, 3]
    assert sizes == [3]
