"""Worker processes that die with their parent: every process pool dspsim starts goes through
:func:`process_pool` (or :func:`imap_unordered`), the local dask cluster's workers through
:func:`fork_processes`.

A parent killed with ``kill -9`` cannot shut its pool down, and forked workers share the task
queue's pipe, so they would wait on it for ever. Each worker therefore watches its parent: on
Linux by ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (the kernel kills it the moment its parent dies),
everywhere by a daemon thread that checks ``os.getppid()`` every :data:`PARENT_POLL_S` seconds.
Workers ignore SIGINT (only the parent acts on Ctrl-C); a pool left by an exception terminates
its workers at once. No pool has more workers than work items.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from dspsim.errors import DspsimInputError
from dspsim.text import one_line

if TYPE_CHECKING:  # imported when a pool is made: the command line starts without them
    from concurrent.futures import ProcessPoolExecutor

MAX_JOBS = 256  # worker processes of any pool; more than the work items are never started
PARENT_POLL_S = 0.5  # how often an idle worker thread checks that its parent is alive
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_GRACE_S = 2.0  # terminated workers that have not gone after this are killed


def check_jobs(jobs: object, what: str = "--jobs", work: str = "points to compute") -> int:
    """``--jobs``: a whole number from 1 to :data:`MAX_JOBS`, else a one-line input error."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise DspsimInputError(
            f"{what} {jobs!r}: allowed a whole number from 1 to {MAX_JOBS} (worker processes; "
            f"never more are started than {work})"
        )
    return jobs


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Linux: have the kernel send ``sig`` to this process when its parent (the thread that
    forked it) exits. Returns whether it was set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def watch_parent(parent_pid: int, death_signal: bool = True) -> None:
    """In a worker: leave as soon as ``parent_pid`` is no longer this process's parent (the
    kernel's parent-death signal where there is one, and a polling daemon thread)."""
    if death_signal:
        set_parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True,
                     name="dspsim-watch-parent").start()


def _worker_init(parent_pid: int, death_signal: bool, init: Callable[..., Any] | None,
                 initargs: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    watch_parent(parent_pid, death_signal)
    if os.environ.get("DSPSIM_OP_FILES"):  # the parent's op files (a spawned worker has none)
        from dspsim.ops.fileop import load_op_files

        load_op_files()
    if init is not None:
        init(*initargs)


def stop_processes(procs: Iterable[Any]) -> None:
    """Terminate ``procs`` (``multiprocessing`` processes, whatever they are running), kill
    those not gone after :data:`STOP_GRACE_S`, and reap them."""
    procs = list(procs)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)


def can_fork_workers() -> bool:
    """Whether workers may be forked here: on Linux, from the main thread of a process with no
    other thread (a thread holding a lock at the fork would leave it held in the child)."""
    return (sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()
            and threading.active_count() == 1)


def _forked_main(parent_pid: int, target: Callable[..., Any], args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    watch_parent(parent_pid, death_signal=True)
    target(*args)


def fork_processes(targets: Iterable[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """One process forked now (from the main thread: :func:`can_fork_workers`) for each
    ``(target, args)``, running ``target(*args)`` and dying with this process. Returns them,
    started; :func:`stop_processes` ends them."""
    import multiprocessing

    if not can_fork_workers():
        raise RuntimeError("worker processes are forked only from a single-threaded process")
    ctx = multiprocessing.get_context("fork")
    procs: list[Any] = []
    try:
        for target, args in targets:
            p = ctx.Process(target=_forked_main, args=(os.getpid(), target, tuple(args)),
                            daemon=True)
            p.start()
            procs.append(p)
    except BaseException:
        stop_processes(procs)
        raise
    return procs


@contextlib.contextmanager
def process_pool(jobs: int, work: int | None = None,
                 initializer: Callable[..., Any] | None = None,
                 initargs: tuple = ()) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``min(jobs, work)`` workers (at least one) that die with
    this process, all started before the block runs. Leaving the block normally waits for the
    tasks; leaving it by an exception (Ctrl-C, ``GeneratorExit``) terminates the workers."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = max(1, int(jobs) if work is None else min(int(jobs), int(work)))
    main = threading.current_thread() is threading.main_thread()
    # fork (Linux's default under Python 3.11, chosen explicitly so a newer default does not
    # change who the workers' parent is): every worker is forked at the first task, here
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    pool = ProcessPoolExecutor(
        max_workers=n, mp_context=context, initializer=_worker_init,
        # the parent-death signal follows the forking thread: armed only when that is the
        # main thread (a helper thread may end before the pool does); the polling covers both
        initargs=(os.getpid(), main, initializer, tuple(initargs)),
    )
    try:
        pool.submit(int).result()  # every worker forked now, before any other thread starts
        yield pool
    except BaseException:  # GeneratorExit and Ctrl-C included: abandon the pool now
        procs = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)  # what has not started, cancelled
        stop_processes(procs)
        # the pool's manager thread sees its workers gone and closes its pipes: wait for it, or
        # the interpreter's exit hook may write to a pipe it is closing (EBADF, a traceback)
        if manager is not None:
            manager.join(STOP_GRACE_S)
        raise
    pool.shutdown(wait=True)


def imap_unordered(fn: Callable[..., Any], items: Iterable[Any], jobs: int,
                   work: int | None = None, window: int | None = None,
                   args: Callable[[Any], tuple] | None = None,
                   started: Callable[[], None] | None = None,
                   failed: Callable[[Exception], BaseException] | None = None,
                   ) -> Iterator[tuple[Any, Any]]:
    """``(item, fn(*args(item)))`` for each item as they complete, in :func:`process_pool`
    (``work``: the items' count, when known), at most ``window`` (``4 * workers``) in flight;
    with one job or item, here in order. ``started()``: once the workers are up. A task's or
    the pool's exception is raised here, as ``failed(e)`` when given."""
    call, started = args or (lambda item: (item,)), started or (lambda: None)
    it = iter(items)
    head = list(itertools.islice(it, 2))
    it = itertools.chain(head, it)
    if jobs <= 1 or len(head) <= 1 or (work is not None and work <= 1):
        started()
        for item in it:
            yield item, fn(*call(item))
        return
    from concurrent.futures import FIRST_COMPLETED, wait

    with process_pool(jobs, work) as pool:
        started()
        limit = window or 4 * pool._max_workers
        pending: dict[Any, Any] = {}

        def fill() -> None:
            for item in itertools.islice(it, max(0, limit - len(pending))):
                pending[pool.submit(fn, *call(item))] = item

        fill()
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                item = pending.pop(f)
                try:
                    result = f.result()
                except Exception as e:
                    if failed is None:
                        raise
                    raise failed(e) from None
                yield item, result
            fill()


def pool_failure(what: str) -> Callable[[Exception], BaseException]:
    """For :func:`imap_unordered`'s ``failed``: a failure of the pool itself (a worker killed,
    a result not sent back) as a one-line ``WorkerError`` naming ``what``; a task's unchanged."""
    import pickle
    from concurrent.futures.process import BrokenProcessPool

    from dspsim.errors import WorkerError

    def failed(e: Exception) -> BaseException:
        if not isinstance(e, BrokenProcessPool | pickle.PicklingError):
            return e
        why = one_line(e, "no message")
        return WorkerError(f"{what}: a worker process failed ({type(e).__name__}: {why}); no "
                           "result was kept (with --jobs 1 everything runs in one process)")

    return failed
