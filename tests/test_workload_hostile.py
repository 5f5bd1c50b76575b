"""Hostile workload files: each is one line on stderr and exit 2 (or a WorkloadError from the
API), never a traceback, a numpy warning, a hang or unbounded memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dspsim.cli import main
from dspsim.errors import DspsimInputError
from dspsim.study.workload import WorkloadError, load_workload, parse_workload
from dspsim.study.workload.spec import MAX_TASKS, MAX_TIME_US, MIN_PERIOD_US

STREAM = {"name": "s", "op": "softmax", "variant": "direct", "n": 1000, "period_us": 1000,
          "count": 3}


def toml_of(**kw) -> str:
    lines = ["[[stream]]"]
    for k, v in (STREAM | kw).items():
        lines.append(f"{k} = {v!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


def one_line_exit_2(capsys, argv: list[str], message: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("dspsim: error: "), err
    assert message in err, err
    return err


# ---------------------------------------------------------------- 4: nesting
def test_deeply_nested_file_is_one_line(tmp_path, capsys):
    f = tmp_path / "nested.toml"
    f.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], "nested too deeply")


def test_nested_or_huge_values_are_quoted_short(tmp_path, capsys):
    f = tmp_path / "w.toml"
    f.write_text(toml_of().replace("n = 1000", "n = " + "[" * 100 + "]" * 100), "utf-8")
    err = one_line_exit_2(capsys, ["workload", str(f)],
                          "n = [[[...]]]: expected a positive integer")
    assert len(err) < 300
    f.write_text(toml_of().replace("n = 1000", "n = [" + "1," * 100_000 + "]"), "utf-8")
    err = one_line_exit_2(capsys, ["workload", str(f)], "expected a positive integer")
    assert len(err) < 300


# ---------------------------------------------------------------- 5: extreme times
@pytest.mark.parametrize("extra, message", [
    ({"period_us": 1e-300}, "period_us = 1e-300: allowed 0.001 to"),
    ({"period_us": 1e300}, "period_us = 1e+300: allowed"),
    ({"period_us": 10**30}, "period_us = 1000000000000000000000000000000: allowed"),
    ({"start_us": 1e300}, "start_us = 1e+300: allowed 0 to"),
    ({"deadline_us": 1e300}, "deadline_us = 1e+300: allowed"),
    ({"jitter_us": 1e300}, "jitter_us = 1e+300: allowed"),
    ({"period_us": MAX_TIME_US, "count": 3}, "the last release"),
    ({"start_us": MAX_TIME_US - 1, "count": 3}, "the last release"),
])
def test_extreme_times_are_refused(tmp_path, capsys, extra, message):
    f = tmp_path / "w.toml"
    f.write_text(toml_of(**extra), "utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], message)
    with pytest.raises(WorkloadError, match="allowed"):
        parse_workload({"stream": [STREAM | extra]})


def test_extremes_inside_the_bounds_run_without_warnings(tmp_path):
    """The smallest period and the latest start allowed: exit 0, nothing on stderr (no numpy
    RuntimeWarning or RankWarning), and the op takes exactly what it takes early on: its cycles
    are counted from the platform's last idle moment, not rounded with its absolute time."""
    f = tmp_path / "w.toml"
    f.write_text(
        toml_of(period_us=MIN_PERIOD_US, jitter_us=0.0005)
        + toml_of(name="late", start_us=MAX_TIME_US - 3000, jitter_us=0.7)
        + toml_of(name="early", start_us=1e6, jitter_us=0.7), "utf-8")
    import json

    r = subprocess.run([sys.executable, "-m", "dspsim.cli", "workload", str(f), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    streams = {s["name"]: s for s in json.loads(r.stdout)["streams"]}
    late, early = streams["late"]["op_cycles"], streams["early"]["op_cycles"]
    assert late == early


# ---------------------------------------------------------------- 6: total tasks
def test_more_than_a_million_tasks_are_refused_before_running(tmp_path, capsys):
    f = tmp_path / "mem.toml"
    f.write_text(toml_of(n=1, period_us=1, count=MAX_TASKS + 1), "utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], f"allowed 1 to {MAX_TASKS:,}")


def test_many_streams_are_capped_in_total(tmp_path, capsys):
    per = MAX_TASKS // 4 + 1
    f = tmp_path / "many.toml"
    f.write_text("".join(toml_of(name=f"s{k}", n=1, period_us=1, count=per) for k in range(4)),
                 "utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], "tasks in all streams; allowed at most")


def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    import dspsim.study.workload as wl

    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(wl, "run_workload", boom)
    f = tmp_path / "w.toml"
    f.write_text(toml_of(), "utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], "out of memory")


# ---------------------------------------------------------------- 15: not a regular file
@pytest.mark.parametrize("kind", ["devzero", "fifo", "directory"])
def test_not_a_regular_file(tmp_path, capsys, kind):
    p = tmp_path / "w.toml"
    if kind == "devzero":
        os.symlink("/dev/zero", p)
    elif kind == "fifo":
        os.mkfifo(p)
    else:
        p.mkdir()
    one_line_exit_2(capsys, ["workload", str(p)], "is not a regular file")
    with pytest.raises(DspsimInputError, match="not a regular file"):
        load_workload(p)


def test_missing_file_still_says_not_found(tmp_path, capsys):
    one_line_exit_2(capsys, ["workload", str(tmp_path / "none.toml")], "not found")


# ---------------------------------------------------------------- 16: backend spelling
@pytest.mark.parametrize("backend", ["core00", "core01", "core\u0660", "core\uff10", "core 0",
                                     "core-0", "core+1"])
def test_backend_only_the_documented_form(tmp_path, capsys, backend):
    with pytest.raises(WorkloadError, match="backend"):
        parse_workload({"stream": [STREAM | {"backend": backend}]})
    f = tmp_path / "w.toml"
    f.write_text(toml_of(backend=backend), "utf-8")
    one_line_exit_2(capsys, ["workload", str(f)], "backend")


@pytest.mark.parametrize("backend", ["any", "core0", "core10"])
def test_documented_backends_parse(backend):
    assert parse_workload({"stream": [STREAM | {"backend": backend}]}).streams[0].backend == backend


# ---------------------------------------------------------------- the DDR window
def test_a_stream_too_large_for_the_ddr_window_says_what_fits(tmp_path, capsys):
    """As run, sweep and calibrate do: the host's window check names the largest length."""
    f = tmp_path / "big.toml"
    f.write_text(toml_of(n=300_000_000), encoding="utf-8")
    one_line_exit_2(capsys, ["workload", str(f)],
                    "stream 's': n = 300000000 needs 2,400,002,112 bytes of DDR")


def test_a_workload_built_in_python_is_checked_like_a_file():
    """check_workload still refuses a shape past the host's window (it was only checked as a
    file is read, so a Workload built in Python failed mid-run on an allocation), and the
    engine takes any backend check_workload accepts (an integer core was an AttributeError)."""
    from dspsim import load_model
    from dspsim.study.workload import Stream, Workload, run_workload
    model = load_model()
    big = Stream("big", "softmax", "direct", (10**9,), 1000.0, 1)
    with pytest.raises(WorkloadError, match=r"stream 'big': n = 1000000000 needs .* allowed n "):
        run_workload(Workload((big,), 0, "api"), model)
    one = Stream("one", "softmax", "direct", (1000,), 1000.0, 2, backend=0)
    named = Stream("one", "softmax", "direct", (1000,), 1000.0, 2, backend="core0")
    runs = [run_workload(Workload((s,), 0, "api"), model) for s in (one, named)]
    assert runs[0].end_cycle == runs[1].end_cycle and (runs[0].tasks.core == 0).all()


@pytest.mark.parametrize("priority", ["1", 300, -1, 5.5, True])
def test_a_priority_built_in_python_is_checked_like_a_file(priority):
    """A file's priority is checked as it is read; one in a Stream built in Python was taken
    silently (300 outside 0-255, 5.5 truncated, "1" parsed) until check_workload checked it."""
    from dspsim import load_model
    from dspsim.study.workload import Stream, Workload, run_workload
    s = Stream("p", "softmax", "direct", (1000,), 1000.0, 1, priority=priority)
    with pytest.raises(WorkloadError, match=r"stream 'p': task priority .*: allowed integers 0 "):
        run_workload(Workload((s,), 0, "api"), load_model())


@pytest.mark.parametrize("setting, message", [
    ("layernorm.eps=0.5", "it is a key of layernorm"),
    ("softmax.tile_bytes=8192", "it acts in softmax pingpong"),
    ("idma.max_outstanding=2", "does nothing in softmax direct"),  # direct uses no channel
])
def test_a_set_key_that_acts_on_no_stream_is_refused(tmp_path, capsys, setting, message):
    """Every key does something or is refused: the run took these silently, its cycles as
    without them (``dspsim run`` refuses them in a direct run)."""
    f = tmp_path / "w.toml"
    f.write_text(toml_of())
    one_line_exit_2(capsys, ["workload", str(f), "--set", setting], message)
    one_line_exit_2(capsys, ["run", "--variant", "direct", "--no-data", "--set", setting],
                    "does nothing in")
BAD_STREAM_FIELDS = [
    ("count", 0), ("count", -1), ("count", 2.5), ("count", True), ("count", MAX_TASKS + 1),
    ("period_us", float("nan")), ("period_us", 0), ("period_us", -1.0), ("period_us", "1"),
    ("period_us", MIN_PERIOD_US / 2), ("jitter_us", 1000.0), ("jitter_us", -1.0),
    ("deadline_us", -1), ("deadline_us", 0), ("start_us", -5), ("start_us", float("inf")),
    ("start_us", MAX_TIME_US), ("name", ""), ("name", 3), ("variant", "nope"), ("variant", 3),
    ("op", 3), ("shape", (0,)), ("shape", 1000), ("backend", "core01"), ("backend", -1),
]


@pytest.mark.parametrize(("field", "value"), BAD_STREAM_FIELDS)
def test_a_stream_built_in_python_is_refused_as_its_file_is(field, value):
    """check_workload checked a Stream built in Python for only some of what a file's stream is
    checked for: a count of 0 or 2.5 and a NaN period were numpy errors mid-run, an unknown
    variant a KeyError, a zero period, a jitter past the period, a negative deadline or start and
    an empty name ran. Now each is the file reader's own line, naming the stream and the key."""
    from dspsim import load_model
    from dspsim.study.workload import Stream, Workload, check_workload
    kw = {"name": "s", "op": "softmax", "variant": "direct", "shape": (1000,),
          "period_us": 1000.0, "count": 2, field: value}
    with pytest.raises(DspsimInputError) as e:
        check_workload(Workload((Stream(**kw),), 0, "api"), load_model())
    table = kw | {"shape": list(kw["shape"]) if isinstance(kw["shape"], tuple) else kw["shape"]}
    with pytest.raises(WorkloadError) as as_file:
        parse_workload({"stream": [table]}, "api")
    message = str(e.value)
    assert message == str(as_file.value) and "\n" not in message
    stream = repr(kw["name"]) if isinstance(kw["name"], str) else "1"  # its place if no name
    assert message.startswith(f"api: stream {stream}: ") and field in message.split(": ", 2)[2]


def _stream(name: str = "s", count: int = 2):
    from dspsim.study.workload import Stream
    return Stream(name, "softmax", "direct", (1000,), 1000.0, count)


@pytest.mark.parametrize(("fields", "message"), [
    ({"seed": -1}, "api: seed = -1: expected a non-negative integer"),
    ({"seed": 1.5}, "api: seed = 1.5: expected a non-negative integer"),
    ({"seed": True}, "api: seed = True: expected a non-negative integer"),
    ({"streams": ()}, "workload 'api': streams = (): expected a non-empty tuple of Stream"),
    ({"streams": ({"name": "s"},)}, "workload 'api': streams = ({'name': 's'},): expected a "),
    ({"streams": "s"}, "workload 'api': streams = 's': expected a non-empty tuple of Stream"),
    ({"source": 5}, "workload 5: streams = (Stream(name='s', "),
    ({"streams": (_stream(), _stream())}, "api: stream name 's' is used twice"),
    ({"streams": (_stream("a", MAX_TASKS), _stream("b"))},
     f"api: {MAX_TASKS + 2:,} tasks in all streams; allowed at most {MAX_TASKS:,}"),
])
def test_a_workload_built_in_python_is_refused_as_its_file_is(fields, message):
    """A Workload's own fields were not checked: a negative or fractional seed, no streams, two
    streams of one name and more tasks than a run holds ran (or failed mid-run); not a tuple of
    Stream was an AttributeError. Each is one line now, the file reader's where it has one."""
    from dspsim import load_model
    from dspsim.study.workload import Workload, check_workload
    w = Workload(**({"streams": (_stream(),), "seed": 0, "source": "api"} | fields))
    with pytest.raises(DspsimInputError) as e:
        check_workload(w, load_model())
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_check_workload_returns_the_workload_its_file_gives():
    """What runs is what the file reader gives for the same tables: a shape as a tuple, times as
    floats, an integer backend K as "core<K>" (the run's table and summary name it so)."""
    from dspsim import load_model
    from dspsim.study.workload import Stream, Workload, check_workload
    s = Stream("s", "softmax", "direct", [1000], 1000, 2, backend=0, start_us=5, jitter_us=1)
    table = {"name": "s", "op": "softmax", "variant": "direct", "shape": [1000],
             "period_us": 1000, "count": 2, "backend": "core0", "start_us": 5, "jitter_us": 1}
    got = check_workload(Workload((s,), 3, "api"), load_model())
    assert got == parse_workload({"seed": 3, "stream": [table]}, "api")
    assert got.streams[0].shape == (1000,) and got.streams[0].backend == "core0"


@pytest.mark.parametrize("flag", ["data", "ddr_profile", "reuse"])
def test_a_workload_switch_that_is_not_a_bool_is_refused(flag):
    """``reuse="no"`` used to turn reuse on (any truthy value did): one line instead."""
    from dspsim import load_model
    from dspsim.errors import DspsimInputError
    from dspsim.study.workload import Stream, Workload, run_workload

    w = Workload((Stream("s", "softmax", "direct", (1000,), 1000.0, 1),), 0, "api")
    with pytest.raises(DspsimInputError, match=rf"^{flag} = 'no': expected True or False$"):
        run_workload(w, load_model(), **{flag: "no"})
