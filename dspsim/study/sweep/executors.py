"""Running the points of a sweep: one point, a local pool of ``--jobs`` processes, or a
dask.distributed cluster (``--scheduler ADDRESS`` or a LocalCluster of ``--jobs`` workers; on
many machines: ``docs/sweeps.md``). Both yield ``(point, result)`` pairs as points complete and
call ``started()`` once the workers are up. Every wait on a cluster is bounded and its cause
named in one line.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dspsim.config import HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.ops.fileop import load_op_files, loaded_op_files
from dspsim.run import Result, simulate
from dspsim.study.sweep.grid import DEFAULT_OP, Sweep
from dspsim.study.sweep.values import MODEL_KEY, SPECIAL_KEYS, VARIANT_KEYS, parse_shape
from dspsim.text import one_line
from dspsim.workers import can_fork_workers, fork_processes, imap_unordered, stop_processes

EXECUTORS = ("local", "dask")


class SweepAbortedError(RuntimeError):
    """The sweep stopped before the grid was complete (a worker died, a cluster timed out);
    every finished point is in the file."""


def result_row(r: Result) -> dict[str, Any]:
    """The result columns of one run (:attr:`Sweep.columns`), named by role rather than by
    engine: ``core_busy_cycles``, ``idma<j>_busy_cycles``, ``<memory>_...`` per memory."""
    row: dict[str, Any] = {"cycles": r.cycles, "time_us": float(r.time_us)}
    memories = r.engines_of("ddr")  # every memory's port, named as its memory
    for m in memories:
        row[f"{m}_read_bytes"] = r.bytes[f"{m}_read"]
        row[f"{m}_write_bytes"] = r.bytes[f"{m}_write"]
    row["core_busy_cycles"] = r.busy_cycles[r.core]
    row.update({f"idma{j}_busy_cycles": r.busy_cycles[e]
                for j, e in enumerate(r.engines_of("idma"))})
    row.update({f"{m}_busy_cycles": r.busy_cycles[m] for m in memories})
    row.update({f"{k}_stall_cycles": v for k, v in r.stall_cycles.items()})
    # the warnings that change a result; notes (severity "info") do not mark a point
    row["warnings"] = ";".join(dict.fromkeys(str(w["code"]) for w in r.warnings
                                             if w.get("severity") != "info"))
    row["hazards"] = len(r.hazards)
    return row


def evaluate_point(model: HardwareModel, point: Mapping[str, Any], fidelity: str) -> dict[str, Any]:
    """Run one point; never raises for the point's own failure: the reason goes in ``error``."""
    start = time.perf_counter()
    try:
        overrides = {k: v for k, v in point.items() if k not in (*SPECIAL_KEYS, MODEL_KEY)}
        m = model.with_overrides(overrides) if overrides else model
        variant = next((point[k] for k in VARIANT_KEYS if k in point), None)
        shape = parse_shape(point["shape"]) if "shape" in point else None
        row = result_row(simulate(m, point.get("op", DEFAULT_OP), variant, n=point.get("n"),
                                  shape=shape, data=False, fidelity=fidelity))
    except Exception as e:  # noqa: BLE001 - every failure of a point is recorded, not fatal
        msg = one_line(e, "no message")
        return {"wall_s": time.perf_counter() - start, "error": f"{type(e).__name__}: {msg}"}
    row["wall_s"] = time.perf_counter() - start
    row["error"] = ""
    return row


# ------------------------------------------------------------------------ local processes
def local_results(sweep: Sweep, todo: Iterable[dict[str, Any]], jobs: int, started
                  ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The points of ``todo`` (never materialised) in a pool of ``jobs`` processes that die with
    this one (:func:`dspsim.workers.imap_unordered`; in this process for ``jobs`` 1)."""
    # evaluate_point records a point's own failure: an exception here is the pool's (a worker
    # killed, a result that cannot be sent back)
    yield from imap_unordered(
        evaluate_point, todo, jobs, args=lambda p: (sweep.model_of(p), p, sweep.fidelity),
        started=started, failed=lambda e: SweepAbortedError(
            f"a worker process failed ({type(e).__name__}: {e})"))


# ------------------------------------------------------------------------------------ dask
# the schemes a dask scheduler can be reached by from another process, each HOST:PORT
SCHEDULER_SCHEMES = ("tcp", "tls")
# every wait on a cluster is bounded: the TCP connection and dask's handshake (and any later
# call to the scheduler), and how long the cluster may be without a worker (none joined yet,
# or every one died or left) before the sweep gives up, keeping the rows done
DASK_CONNECT_TIMEOUT_S = 10.0
DASK_WORKER_TIMEOUT_S = 60.0
_ADDRESS = re.compile(r"(?P<scheme>[a-z]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|"
                      r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>[0-9]{1,5})")


def import_dask():
    """``distributed``, or a one-line input error naming the extra to install."""
    try:
        import distributed
    except ImportError:
        raise DspsimInputError(
            "--executor dask needs dask.distributed; install it with: pip install 'dspsim[dask]'"
        ) from None
    return distributed


def check_scheduler(address: str) -> str:
    """``--scheduler``: ``tcp://HOST:PORT`` or ``tls://HOST:PORT``, checked before connecting."""
    m = _ADDRESS.fullmatch(address.strip()) if isinstance(address, str) else None
    if m is None or m["scheme"] not in SCHEDULER_SCHEMES or not 0 < int(m["port"]) < 65536:
        allowed = " or ".join(f"{scheme}://HOST:PORT" for scheme in SCHEDULER_SCHEMES)
        raise DspsimInputError(
            f"--scheduler {address!r}: expected {allowed}, e.g. tcp://10.0.0.5:8786")
    return address.strip()


def probe_scheduler(address: str, timeout_s: float) -> None:
    """Reach ``address``, do dask's handshake and ask who answers within ``timeout_s`` (dask's
    connect bounds the connection, not the handshake); one line names what is there instead."""
    import socket

    m = _ADDRESS.fullmatch(check_scheduler(address))
    start = time.monotonic()
    try:
        socket.create_connection((m["host"].strip("[]"), int(m["port"])),
                                 timeout=timeout_s).close()
    except OSError as e:
        raise DspsimInputError(f"cannot reach the dask scheduler {address} within "
                               f"{timeout_s:g} s: {one_line(e)}") from None
    answer = _identity(address, max(0.1, timeout_s - (time.monotonic() - start)))
    error = answer.get("error")
    if "reply" not in answer and (error is None or isinstance(error, TimeoutError)):
        raise DspsimInputError(
            f"{address} accepted the connection but sent no dask handshake within {timeout_s:g} "
            "s: it is not a dask scheduler (an HTTP server, say) or it is not answering")
    reply = answer.get("reply")
    kind = reply.get("type") if isinstance(reply, dict) else None
    if error is not None or kind is None:
        cause = "an unreadable reply" if isinstance(error, MemoryError) or error is None \
            else one_line(error)
        raise DspsimInputError(
            f"{address} answers, but not as a dask scheduler ({cause}): check the address "
            "(a dask scheduler listens on port 8786 unless told otherwise)")
    if kind != "Scheduler":
        raise DspsimInputError(f"{address} is a dask {kind}, not a scheduler: give the "
                               "scheduler's address")


def _identity(address: str, left: float) -> dict[str, Any]:
    """``{"reply": ...}`` or ``{"error": ...}`` of dask's identity request to ``address`` in
    ``left`` seconds (empty when it did not finish)."""
    import asyncio
    import threading

    async def identity() -> Any:
        from distributed.comm import connect
        from distributed.security import Security

        comm = await connect(address, timeout=left,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            answer["reply"] = asyncio.run(asyncio.wait_for(identity(), left))
        except BaseException as e:  # noqa: BLE001 - whatever it was, it is reported
            answer["error"] = e

    asker = threading.Thread(target=ask, name="dspsim-dask-probe", daemon=True)
    asker.start()
    asker.join(left + 1.0)
    return {} if asker.is_alive() else dict(answer)


@contextlib.contextmanager
def dask_client(scheduler: str | None, jobs: int, processes: bool) -> Iterator[tuple[Any, str]]:
    """(a dask client, where it is) on ``scheduler`` or on a LocalCluster of ``jobs``
    single-threaded workers (threads unless ``processes``), connected with every wait bounded,
    closed on exit with its local cluster, so that no worker outlives the sweep."""
    import dask

    distributed = import_dask()
    scheduler = check_scheduler(scheduler) if scheduler else None
    where = f"the dask scheduler {scheduler}" if scheduler else "a local cluster"
    timeout = DASK_CONNECT_TIMEOUT_S
    with contextlib.ExitStack() as stack:
        stack.callback(_quiet_dask_logs())
        stack.enter_context(dask.config.set({"distributed.comm.timeouts.connect": timeout}))
        forked: list[Any] = []
        try:
            if scheduler:
                probe_scheduler(scheduler, timeout)
            else:
                cluster, forked = _local_cluster(stack, distributed, jobs, processes)
            client = distributed.Client(scheduler or cluster, timeout=timeout)
        except DspsimInputError:
            raise  # the probe's line, whole (it is a ValueError too)
        except (OSError, TimeoutError, ValueError, TypeError, MemoryError) as e:  # TypeError:
            # tls:// needs dask's TLS configuration (distributed.comm.tls)
            raise DspsimInputError(f"cannot reach {where} within {timeout:g} s: "
                                   f"{one_line(e)}") from None
        stack.callback(_close, client)
        try:
            client.wait_for_workers(1, timeout=DASK_WORKER_TIMEOUT_S)
        except (OSError, TimeoutError):
            start = f"; start one with: dask worker {scheduler}" if scheduler else ""
            raise DspsimInputError(f"{where} has no worker: none joined within "
                                   f"{DASK_WORKER_TIMEOUT_S:g} s{start}") from None
        if len(forked) > 1:  # forked together, they join together: start on them all
            with contextlib.suppress(OSError, TimeoutError):
                client.wait_for_workers(len(forked), timeout=timeout)
        yield client, where


def _quiet_dask_logs() -> Any:
    """Silence dask's loggers, returning what restores them: dask's client logs a lost
    connection as a traceback, and leaves the fetch of a result lost with its worker to
    asyncio's "never retrieved": the sweep names it in one line."""
    names = [n for n in logging.Logger.manager.loggerDict if n.split(".")[0] == "distributed"]
    levels = {n: logging.getLogger(n).level for n in {"distributed", "asyncio", *names}}
    for n in levels:
        logging.getLogger(n).setLevel(logging.CRITICAL)

    def restore() -> None:
        gc.collect()  # what the closed client left is reported (and silenced) now
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)

    return restore


def _close(*things: Any) -> None:
    """Close what is left, best effort: a list is of worker processes (every result is in)."""
    for thing in things:
        with contextlib.suppress(Exception):
            if isinstance(thing, list):
                stop_processes(thing)
            elif thing is not None:
                thing.close()


def _local_cluster(stack: contextlib.ExitStack, distributed: Any, jobs: int,
                   processes: bool) -> tuple[Any, list[Any]]:
    """(a LocalCluster of ``jobs`` single-threaded workers, its worker processes when forked
    from this one: :func:`dspsim.workers.can_fork_workers`, they start with dspsim imported
    and die with it, each sent the scheduler's address once it is up); closed by ``stack``."""
    import multiprocessing

    n = max(1, jobs)
    fork = processes and can_fork_workers()
    pipes = [multiprocessing.Pipe(duplex=False) for _ in range(n)] if fork else []
    forked = fork_processes((_serve_forked_worker, (r,)) for r, _ in pipes) if fork else []
    cluster = None
    stack.callback(lambda: _close(forked, cluster))
    for r, _ in pipes:
        r.close()
    try:
        cluster = distributed.LocalCluster(
            n_workers=0 if fork else n, threads_per_worker=1, processes=processes,
            dashboard_address=None, silence_logs=logging.ERROR)
        for _, w in pipes:
            w.send(cluster.scheduler_address)
    finally:
        for _, w in pipes:
            w.close()
    return cluster, forked


def _check_workers(client: Any, where: str, since: float | None) -> float | None:
    """Since when the cluster has been without a worker, or the client without its scheduler
    (None: it has one); :class:`SweepAbortedError` once that is :data:`DASK_WORKER_TIMEOUT_S`."""
    cause = "every worker died or left"
    try:
        if client.status == "running":
            workers = len(client.nthreads())
        else:
            workers, cause = 0, f"the scheduler is lost: the client is {client.status}"
    except (OSError, TimeoutError) as e:
        workers, cause = 0, f"the scheduler is lost: {one_line(e)}"
    now = time.monotonic()
    if workers:
        return None
    if since is not None and now - since >= DASK_WORKER_TIMEOUT_S:
        raise SweepAbortedError(f"{where} has had no worker for "
                                f"{DASK_WORKER_TIMEOUT_S:g} s ({cause})")
    return now if since is None else since


def _serve_forked_worker(conn: Any) -> None:
    """A forked worker process: one single-threaded dask worker on the scheduler whose address
    arrives on ``conn``, until the cluster stops it."""
    try:
        address = conn.recv()
    except (EOFError, OSError):  # the cluster did not start
        return
    finally:
        conn.close()
    import asyncio

    import dask
    import distributed

    async def serve() -> None:
        async with distributed.Worker(address, nthreads=1, host="127.0.0.1", dashboard=False,
                                      memory_limit=0) as worker:
            await worker.finished()

    with dask.config.set({"distributed.worker.profile.enabled": False}):
        asyncio.run(serve())


def evaluate_points(points: list[tuple[HardwareModel, Mapping[str, Any]]], fidelity: str,
                    op_files: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One dask task: :func:`evaluate_point` on each ``(model, point)``, after loading the op
    files the sweep's process loaded (a worker elsewhere has none)."""
    if op_files:
        load_op_files(op_files)
    return [evaluate_point(model, point, fidelity) for model, point in points]


# a dask task costs the scheduler and the worker a few milliseconds: points are sent in batches
# of about TASK_TARGET_S seconds of work (measured from the points done so far), at most
# MAX_BATCH points each; until a point has been timed the batches are of 1, 2, then 4 points
# (their results time the points), and a batch is at most twice the largest batch done (the
# first points timed may be the quick ones)
TASK_TARGET_S = 1.0
MAX_BATCH = 1024
FIRST_BATCHES = (1, 2, 4)


def batch_size(done_points: int, done_wall_s: float, *, submitted: int = 0,
               largest_done: int = 0, left: int | None = None, workers: int = 1) -> int:
    """Points in the next dask task (the rule: above); near the end (``left`` points not yet
    sent) at most ``left / (2 * workers)``, rounded up, so that the last tasks end together."""
    if not done_points:
        n = FIRST_BATCHES[min(submitted, len(FIRST_BATCHES) - 1)]
    else:
        mean = done_wall_s / done_points
        n = int(TASK_TARGET_S / mean) if mean > 0 else MAX_BATCH
        n = min(n, 2 * max(largest_done, FIRST_BATCHES[-1]), MAX_BATCH)
    if left is not None:
        n = min(n, -(-left // (2 * max(1, workers))))
    return max(1, n)


class _Batches:
    """The points of ``todo`` (``total`` of them) as dask tasks of :func:`batch_size` points,
    at most ``window`` in flight; ``pending`` maps each future to its points."""

    def __init__(self, sweep: Sweep, todo: Iterable[dict[str, Any]], client: Any, total: int,
                 workers: int):
        self.sweep, self.it, self.client = sweep, iter(todo), client
        self.total, self.workers, self.window = total, workers, 2 * workers
        self.pending: dict[Any, list[dict[str, Any]]] = {}
        self.points, self.wall_s, self.tasks, self.largest, self.sent = 0, 0.0, 0, 0, 0

    def fill(self) -> None:
        while len(self.pending) < self.window:
            size = batch_size(self.points, self.wall_s, submitted=self.tasks,
                              largest_done=self.largest, left=max(0, self.total - self.sent),
                              workers=self.workers)
            batch = list(itertools.islice(self.it, size))
            if not batch:
                return
            self.tasks += 1
            self.sent += len(batch)
            pairs = [(self.sweep.model_of(p), p) for p in batch]
            future = self.client.submit(evaluate_points, pairs, self.sweep.fidelity,
                                        tuple(loaded_op_files()), pure=False)
            self.pending[future] = batch

    def done(self, future: Any, results: list[dict[str, Any]]
             ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        batch = self.pending.pop(future)
        self.largest = max(self.largest, len(batch))
        for p, result in zip(batch, results, strict=True):
            self.points += 1
            self.wall_s += float(result.get("wall_s", 0.0))
            yield p, result


def _wait(pending: Iterable[Any], deadline: float | None) -> set[Any]:
    """The futures done within one poll of the cluster (a lost scheduler: the sweep stops)."""
    import distributed

    wait_s = min(1.0, DASK_WORKER_TIMEOUT_S / 4)  # how often the cluster's workers are checked
    if deadline is not None:
        wait_s = max(0.01, min(wait_s, deadline - time.monotonic()))
    try:
        return distributed.wait(list(pending), timeout=wait_s, return_when="FIRST_COMPLETED").done
    except TimeoutError:
        return set()
    except Exception as e:  # noqa: BLE001 - the futures cancelled: the scheduler is lost
        raise SweepAbortedError(f"the dask cluster failed ({type(e).__name__}: "
                                f"{one_line(e)})") from None


def dask_results(sweep: Sweep, todo: Iterable[dict[str, Any]], cluster: tuple[Any, str], started,
                 timeout_s: float | None, total: int
                 ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``total`` points of ``todo`` on ``cluster`` (:func:`dask_client`) in batches, each
    yielded as its batch completes; ``timeout_s`` bounds the whole."""
    started()
    client, where = cluster
    batches = _Batches(sweep, todo, client, total, max(1, sum(client.nthreads().values())))
    workerless_since = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    batches.fill()
    while batches.pending:
        done = _wait(batches.pending, deadline)
        if not done and deadline is not None and time.monotonic() >= deadline:
            raise SweepAbortedError(f"the dask cluster did not finish within {timeout_s} s")
        fetched = 0
        for f in done:
            try:
                results = f.result(timeout=DASK_CONNECT_TIMEOUT_S)
            except TimeoutError:  # its result was on a worker that is gone: it is computed
                continue  # again when a worker is back (check_workers bounds the wait)
            except Exception as e:
                msg = f"a dask task failed ({type(e).__name__}: {one_line(e)})"
                raise SweepAbortedError(msg) from None
            fetched += 1
            yield from batches.done(f, results)
        if not fetched:
            workerless_since = _check_workers(client, where, workerless_since)
        batches.fill()
