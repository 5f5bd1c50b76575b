"""The Dask executor bounds every wait: an address that is not a dask scheduler (silent, HTTP,
another protocol, a worker), a scheduler with no worker, a worker killed mid-sweep. Each
names its cause in one line, within the (here shortened) timeouts, and keeps the rows done."""

import contextlib
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from dspsim.cli import main

distributed = pytest.importorskip("distributed")

from dspsim.study.sweep import executors  # noqa: E402

TIMEOUT_S = 2.0


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch):
    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT_S", TIMEOUT_S)
    monkeypatch.setattr(executors, "DASK_WORKER_TIMEOUT_S", TIMEOUT_S, raising=False)


@contextlib.contextmanager
def tcp_server(answer: bytes | None):
    """A TCP server on a free port that accepts and then sends ``answer`` (None: stays
    silent, holding the connection open)."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        server.close()


@contextlib.contextmanager
def http_server():
    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def sweep_cli(capsys, tmp_path, address, points="50,100"):
    out = tmp_path / "s.csv"
    t0 = time.monotonic()
    code = main(["sweep", "--param", f"ddr.latency_cycles={points}", "--n", "4096",
                 "--executor", "dask", "--scheduler", address, "--out", str(out)])
    _, err = capsys.readouterr()
    return code, err, time.monotonic() - t0, out


@pytest.mark.parametrize("server, says", [
    (lambda: tcp_server(None), "sent no dask handshake"),
    (http_server, "sent no dask handshake"),
    (lambda: tcp_server(b"SSH-2.0-OpenSSH_9.6\r\n" + bytes(range(256)) * 64),
     "not as a dask scheduler"),
    (lambda: tcp_server(b"\xff" * 64), "not as a dask scheduler"),
])
def test_an_address_that_is_not_a_dask_scheduler_is_named_in_one_line(capsys, tmp_path, server,
                                                                        says):
    with server() as address:
        code, err, wall_s, out = sweep_cli(capsys, tmp_path, address)
    assert code == 2 and err.count("\n") == 1 and says in err and address in err, err
    assert "memory" not in err
    assert wall_s < 4 * TIMEOUT_S + 5
    assert not out.exists()  # nothing written before the cluster answered


@pytest.fixture
def scheduler():
    """A scheduler with no worker, in this process."""
    cluster = distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp",
                                       dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_a_dask_worker_address_is_not_taken_for_the_scheduler(capsys, tmp_path):
    cluster = distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                       protocol="tcp", dashboard_address=None)
    try:
        worker = next(iter(cluster.scheduler_info["workers"]))
        code, err, _, _ = sweep_cli(capsys, tmp_path, worker)
    finally:
        cluster.close()
    assert code == 2 and err.count("\n") == 1 and "is a dask Worker, not a scheduler" in err


def test_a_scheduler_with_no_worker_is_one_line_after_the_worker_timeout(capsys, tmp_path,
                                                                           scheduler):
    code, err, wall_s, out = sweep_cli(capsys, tmp_path, scheduler)
    assert code == 2 and err.count("\n") == 1 and "has no worker" in err, err
    assert "dask worker " + scheduler in err
    assert wall_s < 2 * TIMEOUT_S + 5
    assert not out.exists()


def test_a_worker_killed_mid_sweep_stops_the_sweep_and_keeps_its_rows(capsys, tmp_path,
                                                                       scheduler):
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--no-nanny",
         "--nthreads", "1", "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        client = distributed.Client(scheduler, timeout=30)
        client.wait_for_workers(1, timeout=60)
        client.close()
        journal = tmp_path / "s.csv"
        killed = threading.Event()

        def kill_after_the_first_rows():
            while worker.poll() is None:
                if journal.exists() and journal.read_text().count("\n") >= 3:
                    os.kill(worker.pid, signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.01)

        watcher = threading.Thread(target=kill_after_the_first_rows, daemon=True)
        watcher.start()
        # 200 points: far more than run before the first rows reach the file
        points = ",".join(str(50 + i) for i in range(200))
        code, err, wall_s, _ = sweep_cli(capsys, tmp_path, scheduler, points)
        watcher.join(5)
    finally:
        worker.kill()
        worker.wait()
    assert killed.is_set()
    assert code == 1 and err.count("\n") == 1 and "has had no worker" in err, err
    assert "finished points are in" in err
    rows = journal.read_text().splitlines()
    assert 3 <= len(rows) < 201  # the header and the rows done before the kill
