"""Nothing lost, nothing misleading: failed writes leave old files whole, resumed sweeps trust no
row, and hostile inputs (damaged files, devices, bombs, huge grids, a full stdout) give one line
and an exit code, never a traceback, a hang or unbounded memory."""

from __future__ import annotations

import gzip
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dspsim.cli import main
from dspsim.config import load_model
from dspsim.run import simulate
from dspsim.study.sweep import read_sweep
from tests.cli_helpers import one_line, run_cli

CLI = [sys.executable, "-m", "dspsim.cli"]
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def cli(*argv, fsize: int | None = None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """``dspsim ARGV`` in a child process, optionally under a file-size limit (``ulimit -f``)."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    kw.setdefault("capture_output", True)
    return subprocess.run([*CLI, *map(str, argv)], preexec_fn=limit, timeout=timeout, text=True,
                          env=kw.pop("env", ENV), **kw)


# ------------------------------------------------------------------ failed writes lose nothing
@pytest.mark.parametrize(
    "option, name",
    [
        ("--save", "good.json"),
        ("--save", "good.json.gz"),
        ("--output", "good.npy"),
        ("--tiles", "good.csv"),
        ("--trace", "good.json"),
        ("--timeline", "good.png"),
    ],
)
def test_a_write_past_the_file_size_limit_leaves_the_old_file(tmp_path, option, name):
    old = tmp_path / name
    old.write_bytes(b"GOOD" * 8)
    p = cli("run", "--n", "5000", option, old, fsize=512)
    assert p.returncode == 2, p.stderr
    assert one_line(p.stderr) and "File too large" in p.stderr, p.stderr
    assert old.read_bytes() == b"GOOD" * 8  # untouched, not truncated
    assert sorted(x.name for x in tmp_path.iterdir()) == [name]  # no temporary file left


def test_a_sweep_past_the_file_size_limit_keeps_its_rows_and_finishes_later(tmp_path):
    out = tmp_path / "s.csv"
    argv = ["sweep", "--param", "ddr.latency_cycles=1:100:1", "--variant", "pingpong,direct",
            "--n", "4096", "--out", out]
    p = cli(*argv, fsize=4096)
    assert p.returncode == 2 and one_line(p.stderr) and "cannot append" in p.stderr, p.stderr
    kept = len(read_sweep(out))
    assert 0 < kept < 200
    p = cli(*argv)
    assert p.returncode == 0 and f"{kept} already in the file" in p.stdout, p.stdout + p.stderr
    assert len(read_sweep(out)) == 200


def test_an_atomic_write_that_fails_midway_keeps_the_old_file(tmp_path):
    from dspsim.paths import atomic_write, atomic_write_text

    p = tmp_path / "f.txt"
    p.write_text("old")
    p.chmod(0o640)

    def boom(f):
        f.write(b"partial")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(p, boom)
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]
    link = tmp_path / "link.txt"
    link.symlink_to(p)
    atomic_write_text(link, "new")  # through the link: the file is replaced, the link stays
    assert link.is_symlink() and p.read_text() == "new"
    assert (p.stat().st_mode & 0o777) == 0o640  # the old file's permissions carry over


# ------------------------------------------------------------------ one file, two names
def test_two_outputs_that_are_hard_links_to_one_file_are_refused(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    os.link(a, b)
    code, out, err = run_cli(capsys, "run", "--n", "2000", "--save", a, "--trace", b)
    assert code == 2 and "name the same file" in err and err.count("\n") == 1
    assert a.read_text() == "{}"


@pytest.mark.parametrize("option, name, device", [("--output", "y.npy", "/dev/full"),
                                                  ("--save", "r.json", "/dev/null"),
                                                  ("--tiles", "t.csv", "/dev/full")])
def test_outputs_that_are_devices_are_refused_before_simulating(tmp_path, capsys, option, name,
                                                                device):
    (tmp_path / name).symlink_to(device)
    code, out, err = run_cli(capsys, "run", "--n", "2000", option, tmp_path / name)
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1, err
    assert not out


def test_sweep_out_on_a_link_to_dev_full_is_refused_at_once(tmp_path):
    out = tmp_path / "s.csv"
    out.symlink_to("/dev/full")
    p = cli("sweep", "--param", "ddr.latency_cycles=50", "--n", "4096", "--out", out, timeout=30)
    assert p.returncode == 2 and one_line(p.stderr) and "not a regular file" in p.stderr


# ------------------------------------------------------------------ a huge grid
def test_a_huge_grid_streams(tmp_path):
    """About 5 million points: the first row is written within seconds and the process stays
    small (the grid is never built, only one byte per point is kept)."""
    out = tmp_path / "big.csv"
    argv = [*CLI, "sweep", "--param", "ddr.latency_cycles=1:2500:1",
            "--param", "idma.setup_cycles=0:999:1", "--variant", "pingpong,direct", "--n", "4096",
            "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    peak = 0
    try:
        deadline = time.monotonic() + 300  # stops a hung sweep only
        while True:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]))  # kB
            assert peak < 300_000, f"{peak / 1024:.0f} MB"
            if out.exists() and out.read_bytes().count(b"\n") >= 2:
                break
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no row within 300 s"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert peak < 300_000


# ------------------------------------------------------------------ memory of the numerics
def _summary_cases():
    from dspsim.ops import get_op, op_names

    for name in op_names():
        op = get_op(name)
        for ndim in op.ndims or (op.ndim,):
            yield name, (4_000_000,) if ndim == 1 else (4000, 1000)


@pytest.mark.parametrize("name, shape", list(_summary_cases()))
def test_the_error_summary_holds_no_copy_of_the_array(name, shape):
    """Errors against the float64 reference are gathered in slices of a bounded size, whatever
    the array's rank (a float64 copy of this array would be 30 MiB)."""
    import tracemalloc

    from dspsim.ops import get_op

    op = get_op(name)
    x = op.default_input(shape)
    out = x + np.float32(1e-3)
    params = load_model().params(name)
    tracemalloc.start()
    try:
        op.output_summary(out, x, params)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * 2**20, f"{peak / 2**20:.0f} MiB"


# ------------------------------------------------------------------ saved runs
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "run.json"
    assert main(["run", "--n", "3000", "--save", str(path)]) == 0
    return json.loads(path.read_text())


def _set(doc, path, value):
    *head, last = path
    for k in head:
        doc = doc[k]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value


_DELETE = object()


def test_a_saved_run_with_rows_repeated_is_refused(saved, tmp_path, capsys):
    """Every row twice: one engine doing two things at once is not a run."""
    doc = json.loads(json.dumps(saved))
    doc["trace"] = {c: v + v for c, v in doc["trace"].items()}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, "report", bad)
    assert code == 2 and "overlap" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("model", "sections", "core", "clock_mhz"), 0, "does not load here"),
        (("result", "cycles"), float("nan"), "result.cycles"),
        (("result", "cycles"), "many", "result.cycles"),
        (("result", "time_us"), -1.0, "result.time_us"),
        (("result", "shape"), "abc", "result.shape"),
        (("result", "shape"), [0], "result.shape"),
        (("result", "busy_cycles", "core7"), 5, "not one of its engines"),
        (("result", "engines", "ddr"), "gpu", "engine 'ddr'"),
        (("result", "core"), "ddr", "result.core"),
        (("result", "op"), "fft", "unknown op"),
        (("result", "variant"), "fast", "no variant"),
        (("result", "passes"), {"a": 1}, "result.passes"),
        (("result", "passes", 0, "end_cycle"), -5, "ends before it starts"),
        (("result", "warnings"), [1], "result.warnings"),
        (("result", "bytes"), _DELETE, "bytes"),
        (("trace", "engine", 0), "core9", "not one of the run's engines"),
        (("trace", "start_cycle", 0), "x", "trace.start_cycle"),
        (("trace", "end_cycle", 1), float("inf"), "trace.end_cycle"),
        (("trace", "tile", 0), 1.5, "trace.tile"),
        (("trace", "bytes", 0), -4, "trace.bytes"),
        (("trace", "kind"), ["compute"], "different lengths"),
        (("port_log", "requester", 0), "nobody", "not one of the run's engines"),
        (("port_log", "is_write", 0), 3, "port_log.is_write"),
        (("origin_cycle",), None, "origin_cycle"),
        (("model", "overrides"), "x", "overrides"),
        (("result", "cycles"), 10**400, "result.cycles"),
        (("origin_cycle",), 1e308, "origin_cycle"),
        (("format_version",), 2.0, "format version"),
        (("surprise",), 1, "unknown field 'surprise'"),
        (("result", "surprise"), 1, "unknown field result.'surprise'"),
        (("trace", "colour"), [], "trace column 'colour'"),
        (("trace", "kind", 0), "zzz", "not one of the trace's kinds"),
        (("trace", "end_cycle", 0), 1e300, "beyond 2**53"),
        # an integer too large for a float, in a float field, is one line too
        (("origin_cycle",), 10**400, "origin_cycle"),
        (("origin_cycle",), -10**400, "origin_cycle"),
        (("result", "time_us"), 10**400, "result.time_us"),
        (("result", "passes", 0, "end_cycle"), 10**400, "result.passes[0].end_cycle"),
        (("result", "output", "sum"), 10**400, "result.output.sum"),
        (("port_log_cut_cycle",), 10**400, "port_log_cut_cycle"),
        (("trace_cut_cycle",), -1e15, "before the run began"),
    ],
)
def test_a_saved_run_is_checked_field_by_field(saved, tmp_path, capsys, path, value, message):
    doc = json.loads(json.dumps(saved))
    _set(doc, path, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for argv in (("report", bad), ("plot", "timeline", bad, "--out", tmp_path / "t.png")):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert "Traceback" not in err and not out
    assert not (tmp_path / "t.png").exists()


def test_an_empty_trace_is_refused(saved, tmp_path, capsys):
    doc = json.loads(json.dumps(saved))
    doc["trace"] = {c: [] for c in doc["trace"]}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, "report", bad)
    assert code == 2 and "no rows" in err and err.count("\n") == 1


def test_a_gzip_bomb_is_refused_at_the_cap(tmp_path, capsys, monkeypatch):
    import dspsim.results

    monkeypatch.setattr(dspsim.results, "MAX_RUN_BYTES", 1 << 20, raising=False)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"format": "dspsim-run", "x": "' + b"0" * (8 << 20)))
    code, _, err = run_cli(capsys, "report", bomb)
    assert code == 2 and "decompresses to more than 1,048,576 bytes" in err
    assert err.count("\n") == 1


def test_a_saved_run_that_is_a_device_is_refused(capsys):
    code, _, err = run_cli(capsys, "report", "/dev/zero")
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1


# ------------------------------------------------------------------ model, spec and CSV files
@pytest.mark.parametrize(
    "text, message",
    [
        ("model = 5\n", "model must be a table"),
        ("[model]\nname = 'x'\ncolour = 'red'\n", "unknown key model.colour"),
        ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_hostile_model_files_are_one_line(tmp_path, capsys, text, message):
    m = tmp_path / "m.toml"
    m.write_text(text)
    code, _, err = run_cli(capsys, "run", "--n", "2000", "--model", m)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_a_device_as_a_model_is_refused(capsys):
    code, _, err = run_cli(capsys, "run", "--model", "/dev/zero")
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_text("[params]\na = " + "[" * 5000 + "]" * 5000), "nested too deeply"),
        (lambda p: p.write_text("[params]\n" + ".".join(["x"] * 3000) + " = 1\n"),
         "nested too deeply"),
        (lambda p: p.write_text("# " + "x" * (2 << 20)), "larger than"),
        (lambda p: os.symlink("/dev/zero", p), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
)
def test_hostile_sweep_specs_are_one_line(tmp_path, make, message):
    spec = tmp_path / "spec.toml"
    make(spec)
    p = cli("sweep", "--spec", spec, "--out", tmp_path / "s.csv", timeout=30)
    assert p.returncode == 2 and one_line(p.stderr) and message in p.stderr, p.stderr


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_text("variant,cycles,cycles\npingpong,5154293,1\n"), "given twice"),
        (lambda p: p.write_text("variant,cycles\n" + "pingpong,1\n" * 200_000), "larger than"),
        (lambda p: os.symlink("/dev/zero", p), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
)
def test_hostile_measurement_files_are_one_line(tmp_path, make, message):
    m = tmp_path / "m.csv"
    make(m)
    p = cli("calibrate", "--measured-csv", m, "--free", "ddr.latency_cycles", timeout=30)
    assert p.returncode == 2 and one_line(p.stderr) and message in p.stderr, p.stderr


# ------------------------------------------------------------------ the trace limit
def test_the_trace_limit_bounds_what_the_run_holds():
    model = load_model()
    r = simulate(model, variant="pingpong", n=200_000, data=False, trace=True,
                 fidelity="tile", trace_limit=100)
    assert len(r.trace) == 100 and r.trace.attrs["rows_dropped"] > 0
    full = simulate(model, variant="pingpong", n=200_000, data=False, trace=True,
                    fidelity="tile")
    assert len(full.trace) == 100 + r.trace.attrs["rows_dropped"]
    pd.testing.assert_frame_equal(r.trace, full.trace.head(100))


def test_the_trace_limit_bounds_the_port_log_too():
    model = load_model()
    kw = dict(variant="pingpong", n=100_000, data=False, trace=True, port_log=True)
    full = simulate(model, **kw)
    cut = simulate(model, **kw, trace_limit=500)
    assert len(full.port_log) > 10_000 and list(cut.port_log) == full.port_log[:500]
    assert cut.port_log.dropped == len(full.port_log) - 500 and cut.cycles == full.cycles


def test_trace_limit_applies_to_save_and_is_refused_with_tiles(tmp_path, capsys):
    saved = tmp_path / "r.json.gz"
    code, out, err = run_cli(capsys, "run", "--n", "50000", "--save", saved,
                             "--trace-limit", "40", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["stalls"] is None and obj["trace_rows_dropped"] > 0
    doc = json.loads(gzip.open(saved).read())
    assert len(doc["trace"]["engine"]) == 40 and doc["trace_rows_dropped"] > 0
    code, _, err = run_cli(capsys, "run", "--n", "5000", "--tiles", tmp_path / "t.csv",
                           "--trace", tmp_path / "t.json", "--trace-limit", "150")
    assert code == 2 and "--tiles needs all of them" in err and err.count("\n") == 1


# ------------------------------------------------------------------ tables
def test_the_tiles_csv_leaves_no_tile_and_no_buffer_cells_empty(tmp_path, capsys):
    t = tmp_path / "t.csv"
    assert run_cli(capsys, "run", "--variant", "direct", "--n", "5000", "--tiles", t)[0] == 0
    table = pd.read_csv(t)
    assert table["tile"].isna().all() and table["buffer"].isna().all()
    assert "-1" not in t.read_text().split("\n", 1)[1].split(",")
    t2 = tmp_path / "t2.csv"
    assert run_cli(capsys, "run", "--variant", "pingpong", "--n", "20000", "--tiles", t2)[0] == 0
    table = pd.read_csv(t2)
    assert table["tile"].notna().all() and set(table["buffer"]) == {0, 1}
    assert len(table) == 3 * math.ceil(20000 / 8192)


# ------------------------------------------------------------------ messages that name the cause
def _npy_with_an_expression(path):
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1+2,), }"
    header += b" " * (118 - len(header)) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
                     + b"\0" * 12)
    return path


@pytest.mark.parametrize("argv, message", [
    (["--set", "tcm.reserved_bytes=262144"], "allowed: tcm.reserved_bytes < tcm.bank_bytes"),
    (["--set", "tcm.bank_bytes=2"], "tcm.bank_bytes = 2"),
    (["--op", "layernorm", "--variant", "direct", "--shape", "16384,16384"],
     "more than the DSP's 2,147,483,648-byte window"),
    (["--window", "nan:5", "--timeline", "{tmp}/t.png"], "finite numbers"),
    (["--window", "0:1e400", "--timeline", "{tmp}/t.png"], "finite numbers"),
    (["--input", "{tmp}/weird.npy"], "not a dictionary of literals"),
])
def test_an_error_names_its_real_cause(tmp_path, capsys, argv, message):
    _npy_with_an_expression(tmp_path / "weird.npy")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, "run", "--n", "2000", *argv) if "--shape" not in argv \
        else run_cli(capsys, "run", *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "0x" not in err, err


def test_a_cut_recording_says_where_it_stops_and_figures_show_the_rest_unrecorded(tmp_path,
                                                                                    capsys):
    """--trace-limit cuts the trace and the port log each at its own count; each says up to
    where it is whole, and the saved run, the report, the timeline and the trace say which."""
    from dspsim.analysis.perfetto import trace_events
    from dspsim.analysis.timeline import timeline_figure
    from dspsim.results import load_run

    model = load_model()
    full = simulate(model, variant="direct", n=100_000, data=False, trace=True, port_log=True)
    cut = simulate(model, variant="direct", n=100_000, data=False, trace=True, port_log=True,
                   trace_limit=1000)
    until = cut.port_log_cut_cycle
    assert cut.trace_cut_cycle is None and len(cut.trace) == len(full.trace)  # trace whole
    assert until is not None and 0 < until < cut.cycles and full.port_log_cut_cycle is None
    issued = [e for e in full.port_log if e[0] - full.origin_cycle < until]
    assert list(cut.port_log) == issued  # whole up to the cut
    path = tmp_path / "cut.json"
    code, _, _ = run_cli(capsys, "run", "--variant", "direct", "--no-data", "--trace-limit",
                         "1000", "--save", path)
    back = load_run(path)
    assert code == 0 and back.port_log_cut_cycle == pytest.approx(until)
    assert back.trace_cut_cycle is None
    code, out, _ = run_cli(capsys, "report", path)
    assert code == 0 and f"DDR port log up to cycle {until:,.0f}" in out and "its trace" not in out
    fig = timeline_figure(back)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [la for la in labels if la.startswith("not recorded")] == [
        f"not recorded (--trace-limit): DDR port log after cycle {until:,.0f}"]
    assert "not recorded, not idle" in trace_events(back)["otherData"]["recorded"]
    # a trace cut as well: both named
    both = simulate(model, variant="pingpong", n=100_000, data=False, trace=True, port_log=True,
                    trace_limit=150)
    assert both.trace_cut_cycle is not None and both.port_log_cut_cycle is not None
