"""Running the points of a sweep: one point, a local process pool, a dask cluster.

``--jobs N`` runs the points in N worker processes; the parent writes each row as its point
completes. A progress bar (points done / total, rate, ETA) is drawn when stderr is a terminal.

``--executor dask`` sends the points to a dask.distributed cluster (``pip install
'dspsim[dask]'``): ``--scheduler ADDRESS`` (e.g. ``tcp://10.0.0.5:8786``) for an existing cluster,
otherwise a LocalCluster of ``--jobs`` single-threaded worker processes. On a real cluster every
worker needs the same dspsim installed (``pip install dspsim[dask]`` on each machine, then
``dask scheduler`` on one and ``dask worker tcp://SCHEDULER:8786`` on the others); the machine
running ``dspsim sweep`` writes the file, so only it needs the output directory.

Both executors yield ``(point, result)`` pairs as points complete, with at most a few points per
worker in flight, and call ``started()`` once the workers are up.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dspsim.config import HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.run import Result, simulate
from dspsim.study.sweep.grid import DEFAULT_OP, Sweep
from dspsim.study.sweep.values import SPECIAL_KEYS, VARIANT_KEYS, parse_shape

EXECUTORS = ("local", "dask")


class SweepAbortedError(RuntimeError):
    """The sweep stopped before the grid was complete (a worker died, a cluster timed out);
    every finished point is in the file."""


def result_row(r: Result) -> dict[str, Any]:
    """The result columns of one run, named by role rather than by engine: ``core_busy_cycles``
    (the core the op ran on), ``idma<j>_busy_cycles`` (its channels in order),
    ``ddr_busy_cycles``; the warning codes that fired (``;``-separated) and the hazard count."""
    row: dict[str, Any] = {
        "cycles": r.cycles,
        "time_us": float(r.time_us),
        # every external memory's (J6: DDR's)
        "ddr_read_bytes": sum(m["read_bytes"] for m in r.memories.values()),
        "ddr_write_bytes": sum(m["write_bytes"] for m in r.memories.values()),
        "core_busy_cycles": r.busy_cycles[r.core],
    }
    row.update(
        {f"idma{j}_busy_cycles": r.busy_cycles[e] for j, e in enumerate(r.engines_of("idma"))}
    )
    row["ddr_busy_cycles"] = sum(r.busy_cycles[e] for e in r.engines_of("ddr"))
    stalls = dict(r.stall_cycles)  # the core's stalls on every external memory, as one
    row["ddr_stall_cycles"] = sum(stalls.pop(m, 0) for m in r.memories)
    row.update({f"{k}_stall_cycles": v for k, v in stalls.items()})
    # the warnings that change a result; notes (severity "info") do not mark a point
    row["warnings"] = ";".join(
        dict.fromkeys(str(w["code"]) for w in r.warnings if w.get("severity") != "info")
    )
    row["hazards"] = len(r.hazards)
    return row


def evaluate_point(model: HardwareModel, point: Mapping[str, Any], fidelity: str) -> dict[str, Any]:
    """Run one point; never raises for the point's own failure: the reason goes in ``error``."""
    start = time.perf_counter()
    try:
        overrides = {k: v for k, v in point.items() if k not in SPECIAL_KEYS}
        m = model.with_overrides(overrides) if overrides else model
        variant = next((point[k] for k in VARIANT_KEYS if k in point), None)
        shape = parse_shape(point["shape"]) if "shape" in point else None
        r = simulate(
            m,
            point.get("op", DEFAULT_OP),
            variant,
            n=point.get("n"),
            shape=shape,
            data=False,
            fidelity=fidelity,
        )
        row = result_row(r)
    except Exception as e:  # noqa: BLE001 - every failure of a point is recorded, not fatal
        msg = " ".join(str(e).split()) or "no message"
        return {"wall_s": time.perf_counter() - start, "error": f"{type(e).__name__}: {msg}"}
    row["wall_s"] = time.perf_counter() - start
    row["error"] = ""
    return row


# ------------------------------------------------------------------------ local processes
def _worker_init(parent_pid: int) -> None:
    # Ctrl-C reaches the whole process group: only the parent acts on it (it stops handing out
    # points and keeps what finished); workers finish their point quietly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed with -9 cannot shut the pool down, and forked workers share the queue's
    # pipe so they would never see it close: they leave on their own once orphaned.
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)


def local_results(
    sweep: Sweep, todo: Iterable[dict[str, Any]], jobs: int, started
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The points of ``todo`` (an iterator: never materialised) in this process (``jobs`` 1,
    or a single point) or a pool of ``jobs`` processes."""
    it = iter(todo)
    first = list(itertools.islice(it, 2))
    if jobs <= 1 or len(first) <= 1:
        started()
        for p in itertools.chain(first, it):
            yield p, evaluate_point(sweep.model, p, sweep.fidelity)
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    it = itertools.chain(first, it)
    pool = ProcessPoolExecutor(
        max_workers=jobs, initializer=_worker_init, initargs=(os.getpid(),)
    )
    try:
        # workers are forked before the progress bar starts its thread
        pool.submit(int).result()
        started()
        window = 4 * jobs  # bounded in flight: a huge grid is not all queued at once
        pending: dict[Any, dict[str, Any]] = {}

        def fill() -> None:
            for p in itertools.islice(it, max(0, window - len(pending))):
                pending[pool.submit(evaluate_point, sweep.model, p, sweep.fidelity)] = p

        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                p = pending.pop(f)
                try:
                    result = f.result()
                except Exception as e:
                    raise SweepAbortedError(
                        f"a worker process failed ({type(e).__name__}: {e})"
                    ) from None
                yield p, result
            fill()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


# ------------------------------------------------------------------------------------ dask
# the schemes a dask scheduler can be reached by from another process, each HOST:PORT
SCHEDULER_SCHEMES = ("tcp", "tls")
DASK_CONNECT_TIMEOUT_S = 10.0
_ADDRESS = re.compile(
    r"(?P<scheme>[a-z]+)://"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":(?P<port>[0-9]{1,5})"
)


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
    """``--scheduler``: ``tcp://HOST:PORT`` or ``tls://HOST:PORT``, checked before connecting
    (no file://, http://, bare names)."""
    m = _ADDRESS.fullmatch(address.strip()) if isinstance(address, str) else None
    if m is None or m["scheme"] not in SCHEDULER_SCHEMES or not 0 < int(m["port"]) < 65536:
        allowed = " or ".join(f"{scheme}://HOST:PORT" for scheme in SCHEDULER_SCHEMES)
        raise DspsimInputError(
            f"--scheduler {address!r}: expected {allowed}, e.g. tcp://10.0.0.5:8786"
        )
    return address.strip()


class DaskCluster:
    """A dask client on the scheduler at ``scheduler`` or on a LocalCluster of ``jobs``
    single-threaded workers (processes, or threads when ``processes`` is false). Connects on
    entry (an unreachable scheduler: one line after :data:`DASK_CONNECT_TIMEOUT_S`), and always
    closes the client and the local cluster on exit, so no worker outlives the sweep."""

    def __init__(self, scheduler: str | None, jobs: int, processes: bool):
        self.scheduler = check_scheduler(scheduler) if scheduler else None
        self.jobs = jobs
        self.processes = processes
        self.client = None
        self.cluster = None

    def __enter__(self) -> DaskCluster:
        import logging

        distributed = import_dask()
        timeout = DASK_CONNECT_TIMEOUT_S
        try:
            if self.scheduler:
                self.client = distributed.Client(self.scheduler, timeout=timeout)
            else:
                self.cluster = distributed.LocalCluster(
                    n_workers=max(1, self.jobs),
                    threads_per_worker=1,
                    processes=self.processes,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
                self.client = distributed.Client(self.cluster, timeout=timeout)
        except (OSError, TimeoutError, ValueError, TypeError) as e:  # TypeError: tls:// needs
            self.close()  # dask's TLS configuration (distributed.comm.tls in dask's config)
            where = f"the dask scheduler {self.scheduler}" if self.scheduler else "a local cluster"
            msg = " ".join(str(e).split()) or type(e).__name__
            raise DspsimInputError(f"cannot reach {where} within {timeout:g} s: {msg}") from None
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        client, cluster, self.client, self.cluster = self.client, self.cluster, None, None
        for thing in (client, cluster):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001, S110 - closing what is left, best effort
                    pass


def dask_results(
    sweep: Sweep,
    todo: Iterable[dict[str, Any]],
    cluster: DaskCluster,
    started,
    timeout_s: float | None,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The points of ``todo`` on ``cluster`` (connected), at most a few per worker in flight."""
    import distributed

    client = cluster.client
    started()
    window = 4 * max(1, sum(client.nthreads().values()))
    it = iter(todo)
    pending: dict[str, dict[str, Any]] = {}
    ac = distributed.as_completed(timeout=timeout_s)

    def fill() -> None:
        for p in itertools.islice(it, max(0, window - len(pending))):
            f = client.submit(evaluate_point, sweep.model, p, sweep.fidelity, pure=False)
            pending[f.key] = p
            ac.add(f)

    fill()
    try:
        for f in ac:
            p = pending.pop(f.key)
            try:
                result = f.result()
            except Exception as e:
                msg = f"a dask task failed ({type(e).__name__}: {e})"
                raise SweepAbortedError(msg) from None
            yield p, result
            fill()
    except TimeoutError:
        msg = f"the dask cluster did not finish within {timeout_s} s"
        raise SweepAbortedError(msg) from None
