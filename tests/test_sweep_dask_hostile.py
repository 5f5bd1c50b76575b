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

pytest.importorskip("distributed")

TIMEOUT_S = 2.0
# the sweep runs in a process of its own, its timeouts shortened: no dask thread ever runs in
# the test process (CPython 3.11's parser is not thread-safe, and pytest parses source)
SWEEP = f"""
import sys
from dspsim.study.sweep import executors
executors.DASK_CONNECT_TIMEOUT_S = executors.DASK_WORKER_TIMEOUT_S = {TIMEOUT_S}
from dspsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


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


def sweep_cli(tmp_path, address, points="50,100"):
    out = tmp_path / "s.csv"
    p = subprocess.run([sys.executable, "-c", SWEEP, "sweep", "--param",
                        f"ddr.latency_cycles={points}", "--n", "4096", "--executor", "dask",
                        "--scheduler", address, "--out", str(out)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return p.returncode, p.stderr, out


@pytest.mark.parametrize("server, says", [
    (lambda: tcp_server(None), "sent no dask handshake"),
    (http_server, "sent no dask handshake"),
    (lambda: tcp_server(b"SSH-2.0-OpenSSH_9.6\r\n" + bytes(range(256)) * 64),
     "not as a dask scheduler"),
    (lambda: tcp_server(b"\xff" * 64), "not as a dask scheduler"),
])
def test_an_address_that_is_not_a_dask_scheduler_is_named_in_one_line(tmp_path, server, says):
    with server() as address:
        code, err, out = sweep_cli(tmp_path, address)
    assert code == 2 and err.count("\n") == 1 and says in err and address in err, err
    assert "memory" not in err
    assert not out.exists()  # nothing written before the cluster answered


def dask_process(kind, *argv):
    """``dask scheduler`` or ``dask worker`` as a subprocess of its own."""
    return subprocess.Popen([sys.executable, "-m", f"distributed.cli.dask_{kind}", *argv,
                             "--no-dashboard"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


@contextlib.contextmanager
def processes(*procs):
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture
def scheduler():
    """A scheduler with no worker."""
    port = free_port()
    with processes(dask_process("scheduler", "--host", "127.0.0.1", "--port", str(port))):
        listening(port)
        yield f"tcp://127.0.0.1:{port}"


def worker_on(scheduler, port=None):
    """A worker of ``scheduler`` (no nanny: killed, it stays dead), up once it listens."""
    port = port or free_port()
    w = dask_process("worker", scheduler, "--no-nanny", "--nthreads", "1", "--host",
                     "127.0.0.1", "--worker-port", str(port))
    listening(port)
    return w, f"tcp://127.0.0.1:{port}"


def test_a_dask_worker_address_is_not_taken_for_the_scheduler(tmp_path, scheduler):
    worker, address = worker_on(scheduler)
    with processes(worker):
        code, err, _ = sweep_cli(tmp_path, address)
    assert code == 2 and err.count("\n") == 1 and "is a dask Worker, not a scheduler" in err


def test_a_scheduler_with_no_worker_is_one_line_after_the_worker_timeout(tmp_path, scheduler):
    """The sweep waits the worker timeout it is given (2 s here, not the 60 s default), then
    stops: the line names that timeout and how to start a worker."""
    code, err, out = sweep_cli(tmp_path, scheduler)
    assert code == 2 and err.count("\n") == 1 and "has no worker" in err, err
    assert f"none joined within {TIMEOUT_S:g} s" in err and "dask worker " + scheduler in err
    assert not out.exists()


def sweep_killing(tmp_path, scheduler, victim):
    """A 200-point sweep on ``scheduler`` (a worker up) whose ``victim`` process is killed
    once the first rows are in the file: (exit code, stderr, rows in the file)."""
    journal = tmp_path / "s.csv"
    killed = threading.Event()

    def kill_after_the_first_rows():
        while victim.poll() is None:
            if journal.exists() and journal.read_text().count("\n") >= 3:
                os.kill(victim.pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_after_the_first_rows, daemon=True)
    watcher.start()
    # 200 points: far more than run before the first rows reach the file
    points = ",".join(str(50 + i) for i in range(200))
    code, err, _ = sweep_cli(tmp_path, scheduler, points)
    watcher.join(5)
    assert killed.is_set()
    return code, err, len(journal.read_text().splitlines())


def test_a_worker_killed_mid_sweep_stops_the_sweep_and_keeps_its_rows(tmp_path, scheduler):
    worker, _ = worker_on(scheduler)
    with processes(worker):
        code, err, rows = sweep_killing(tmp_path, scheduler, worker)
    assert code == 1 and err.count("\n") == 1 and "has had no worker" in err, err
    assert "finished points are in" in err
    assert 3 <= rows < 201  # the header and the rows done before the kill


def test_a_scheduler_killed_mid_sweep_stops_the_sweep_and_keeps_its_rows(tmp_path):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = dask_process("scheduler", "--host", "127.0.0.1", "--port", str(port))
    with processes(scheduler):
        listening(port)
        worker, _ = worker_on(address)
        with processes(worker):
            code, err, rows = sweep_killing(tmp_path, address, scheduler)
    assert code == 1 and err.count("\n") == 1 and "finished points are in" in err, err
    assert 3 <= rows < 201
