"""Task streams on one or more cores: the UCP's scheduling, workload files, their runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import simpy

from dspsim.cli import main
from dspsim.host.ucp import SchedulingPolicy, Task
from dspsim.run import simulate
from dspsim.study.workload import (
    TASK_COLUMNS,
    WorkloadError,
    parse_workload,
    run_workload,
    summarise,
    task_table,
)
from tests.workload_helpers import stream_spec, workload

N = 20_000  # small softmax: ~1 M cycles ping-pong on the J6 model


def stream(name, **kw):
    return stream_spec(name, (N, 1_000_000, 1), **kw)


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def max_share(ddr) -> float:
    """The largest sum of data-path shares in use at any instant."""
    t = np.concatenate([ddr["start"], ddr["end"]])
    d = np.concatenate([ddr["share"], -ddr["share"]])
    order = np.lexsort((d, t))  # at equal times, ends (negative) before starts
    return float(np.cumsum(d[order]).max())


# ------------------------------------------------------------------ one task = dspsim run
@pytest.mark.parametrize("fidelity", ["tile", "burst"])
@pytest.mark.parametrize("op, variant, size", [
    ("softmax", "pingpong", {"n": N}),
    ("softmax", "direct", {"n": 5_000}),
    ("layernorm", "pingpong", {"shape": [64, 256]}),
])
def test_one_task_alone_has_the_op_cycles_of_simulate(j6, fidelity, op, variant, size):
    wl = workload(stream("one", op=op, variant=variant, **size))
    run = run_workload(wl, j6, fidelity=fidelity)
    df = task_table(run)
    alone = simulate(j6, op, variant, data=False, fidelity=fidelity,
                     **({"n": size["n"]} if "n" in size else {"shape": tuple(size["shape"])}))
    assert df["op_cycles"].iloc[0] == alone.cycles
    rpc = j6.host.rpc_latency_us * j6.core.clock_mhz
    end_to_end = df["done_cycle"].iloc[0] - df["submit_cycle"].iloc[0]
    assert end_to_end == pytest.approx(alone.cycles + alone.rpc_cycles, abs=1.0)
    assert alone.rpc_cycles == pytest.approx(rpc, abs=1.0)
    s = summarise(run, df)
    assert s["rpc_latency_us"] == j6.host.rpc_latency_us  # reported on its own
    assert s["streams"][0]["op_cycles"]["max"] == alone.cycles


# ------------------------------------------------------------------ two cores, one DDR port
@pytest.mark.parametrize("fidelity", ["tile", "burst"])
def test_bandwidth_bound_tasks_on_two_cores_share_the_port(j6, fidelity):
    model = j6.with_overrides({"core.count": 2})
    alone = simulate(model, "softmax", "pingpong", n=N, data=False, fidelity=fidelity).cycles
    wl = workload(stream("a", backend="core0"), stream("b", backend="core1"))
    run = run_workload(wl, model, fidelity=fidelity, ddr_profile=True)
    df = task_table(run)
    assert sorted(df["core"]) == ["core0", "core1"]
    assert (df["op_cycles"] > 1.5 * alone).all()  # each finishes later than alone
    # the data path is never over-committed, and the profile accounts for every byte
    assert max_share(run.ddr) <= 1.0 + 1e-9
    ddr = run.ddr
    moved = float(np.sum((ddr["end"] - ddr["start"]) * ddr["share"])) * model.ddr.bytes_per_cycle
    assert moved == pytest.approx(sum(run.ddr_bytes.values()), rel=1e-6)
    span = (df["op_start_cycle"] + df["op_cycles"]).max() - df["op_start_cycle"].min()
    assert sum(run.ddr_bytes.values()) / span <= model.ddr.bytes_per_cycle * (1 + 1e-9)


def test_latency_bound_tasks_on_two_cores_overlap(j6):
    # a wider port (4 bytes/cycle) makes direct latency-bound: every vector load waits on
    # the DDR round trip, the data path is mostly idle
    model = j6.with_overrides({"core.count": 2, "ddr.bytes_per_cycle": 4.0})
    alone = simulate(model, "softmax", "direct", n=N, data=False, fidelity="tile")
    assert alone.busy_cycles["ddr"] < 0.5 * alone.cycles  # latency-bound alone
    wl = workload(stream("a", variant="direct", backend="core0"),
                  stream("b", variant="direct", backend="core1"))
    df = task_table(run_workload(wl, model, fidelity="tile"))
    end = (df["op_start_cycle"] + df["op_cycles"]).max()
    span = end - df["op_start_cycle"].min()
    assert span < 0.6 * (2 * alone.cycles)


# ------------------------------------------------------------------ priorities
def test_policy_orders_by_priority_then_fifo_and_respects_backends():
    env = simpy.Environment()
    policy = SchedulingPolicy(2)

    def task(seq, prio, backend):
        t = Task(0, None, None, env.event(), priority=prio, backend=backend)
        t.seq = seq
        return t

    a, b, c, d = task(0, 5, None), task(1, 9, 1), task(2, 5, None), task(3, 9, None)
    for t in (a, b, c, d):
        policy.push(t)
    assert policy.core_for(task(4, 0, 1), [True, False]) is None  # core1 busy: it waits
    assert policy.core_for(task(4, 0, None), [False, True]) == 1  # any: the free core
    assert policy.core_for(task(4, 0, None), [True, True]) == 0  # any: the lowest index
    assert policy.pop_for(0) is d  # b is core1's only
    assert policy.pop_for(0) is a  # FIFO within priority 5
    assert policy.pop_for(1) is b
    assert policy.pop_for(1) is c
    assert policy.pop_for(0) is None and len(policy) == 0
    assert SchedulingPolicy.PREEMPTIVE is False


LOADED = """
seed = 5
[[stream]]
name = "hi"
op = "softmax"
n = 20000
priority = 200
period_us = 1500
count = 16
jitter_us = 300
[[stream]]
name = "lo"
op = "softmax"
n = 20000
priority = 0
period_us = 1500
count = 16
jitter_us = 300
[[stream]]
name = "pinned"
op = "softmax"
variant = "direct"
n = 5000
priority = 100
backend = "core1"
period_us = 2000
count = 10
"""


def read_tasks(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_high_priority_p99_is_lower_and_priorities_never_invert(tmp_path, capsys):
    wl = write_toml(tmp_path / "loaded.toml", LOADED)
    out = tmp_path / "tasks.csv"
    assert main(["workload", str(wl), "--set", "core.count=2", "--out", str(out),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    by = {s["name"]: s for s in summary["streams"]}
    assert by["hi"]["latency_us"]["p99"] < by["lo"]["latency_us"]["p99"]
    assert summary["queue"]["longest_backlog"] >= 2  # it really was under load
    rows = read_tasks(out)
    assert list(rows[0]) == list(TASK_COLUMNS) and len(rows) == 42
    eps = 1e-3  # us: the CSV's resolution
    for r in rows:
        start = float(r["start_us"])
        for w in rows:
            waiting = float(w["queued_us"]) < start - eps and float(w["start_us"]) > start + eps
            eligible = w["backend"] in ("any", r["core"])
            assert not (waiting and eligible and int(w["priority"]) > int(r["priority"])), (
                f"{r['core']} started {r['stream']}#{r['index']} (priority {r['priority']}) at "
                f"{start} us while {w['stream']}#{w['index']} (priority {w['priority']}) waited"
            )
        assert r["backend"] in ("any", r["core"])


def test_overload_is_a_result_not_a_hang(j6):
    wl = workload(stream("cam", period_us=500, count=12, deadline_us=2000))  # 1 ms tasks
    s = summarise(run_workload(wl, j6))
    assert s["queue"]["overloaded"] and s["queue"]["longest_backlog"] >= 5
    assert s["streams"][0]["completed"] == 12 and s["deadline_misses"] > 0


# ------------------------------------------------------------------ determinism
def test_same_seed_same_run_other_seed_other_releases(tmp_path, capsys):
    text = LOADED
    wl = write_toml(tmp_path / "w.toml", text)
    outs = []
    for k in range(2):
        out = tmp_path / f"t{k}.csv"
        assert main(["workload", str(wl), "--set", "core.count=2", "--out", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    other = write_toml(tmp_path / "o.toml", text.replace("seed = 5", "seed = 6"))
    out = tmp_path / "other.csv"
    assert main(["workload", str(other), "--set", "core.count=2", "--out", str(out)]) == 0
    capsys.readouterr()
    a = {(r["stream"], r["index"]): r["submit_us"] for r in read_tasks(tmp_path / "t0.csv")}
    b = {(r["stream"], r["index"]): r["submit_us"] for r in read_tasks(out)}
    jittered = [k for k in a if k[0] in ("hi", "lo")]
    assert any(a[k] != b[k] for k in jittered)
    assert all(a[k] == b[k] for k in a if k[0] == "pinned")  # no jitter: same releases


# ------------------------------------------------------------------ bad files
GOOD = {"name": "s", "op": "softmax", "variant": "pingpong", "n": 1000, "period_us": 100,
        "count": 2}


def toml_of(streams, top="seed = 1") -> str:
    def value(v):
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

    parts = [top]
    for s in streams:
        parts.append("[[stream]]")
        parts += [f"{k} = {value(v)}" for k, v in s.items()]
    return "\n".join(parts) + "\n"


BAD = [
    (toml_of([GOOD | {"op": "fft"}]), "unknown op 'fft'"),
    (toml_of([GOOD | {"variant": "fast"}]), "no variant 'fast'"),
    (toml_of([GOOD | {"period_us": -5}]), "period_us = -5"),
    (toml_of([GOOD | {"period_us": 0}]), "period_us = 0"),
    (toml_of([GOOD | {"backend": "gpu"}]), "backend 'gpu'"),
    (toml_of([GOOD | {"backend": "core3"}]), "backend core3"),
    (toml_of([{k: v for k, v in GOOD.items() if k != "count"}]), "missing key 'count'"),
    (toml_of([GOOD | {"count": 0}]), "count = 0"),
    (toml_of([GOOD | {"colour": "red"}]), "unknown key 'colour'"),
    (toml_of([GOOD], top="seed = 1\nperiod = 3"), "unknown key 'period'"),
    (toml_of([GOOD | {"count": "ten"}]), "count = 'ten'"),
    (toml_of([GOOD | {"period_us": "fast"}]), "period_us = 'fast'"),
    (toml_of([GOOD | {"n": 2.5}]), "shape"),
    (toml_of([GOOD | {"priority": 256}]), "priority 256"),
    (toml_of([GOOD | {"priority": -1}]), "priority -1"),
    (toml_of([GOOD | {"deadline_us": 0}]), "deadline_us = 0"),
    (toml_of([GOOD | {"jitter_us": 200}]), "jitter_us = 200"),
    (toml_of([GOOD, GOOD]), "used twice"),
    (toml_of([GOOD | {"op": "layernorm", "variant": "direct"}]), "layernorm"),
    ("seed = 1\n", "missing [[stream]]"),
    ("seed = 1\n[[stream]\n", "not valid TOML"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m for _, m in BAD])
def test_bad_workload_files_are_one_line_and_exit_2(tmp_path, capsys, text, message):
    wl = write_toml(tmp_path / "bad.toml", text)
    code = main(["workload", str(wl), "--set", "core.count=2"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("dspsim: error: "), err
    assert message in err, err


def test_missing_file_and_bad_output_paths_exit_2(tmp_path, capsys):
    assert main(["workload", str(tmp_path / "none.toml")]) == 2
    wl = write_toml(tmp_path / "w.toml", toml_of([GOOD]))
    assert main(["workload", str(wl), "--out", str(tmp_path / "t.txt")]) == 2
    assert main(["workload", str(wl), "--timeline", str(tmp_path / "no" / "t.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and "not found" in err


def test_workload_errors_are_input_errors():
    with pytest.raises(WorkloadError, match="stream 's': count"):
        parse_workload({"stream": [GOOD | {"count": True}]})


# ------------------------------------------------------------------ up to four cores
def test_four_cores_each_run_their_stream(j6):
    model = j6.with_overrides({"core.count": 4})
    wl = workload(*[stream(f"s{k}", backend=f"core{k}", variant="direct", n=5000)
                    for k in range(4)])
    df = task_table(run_workload(wl, model))
    assert [f"core{k}" for k in range(4)] == list(df.sort_values("stream")["core"])
    wl_any = workload(*[stream(f"s{k}", variant="direct", n=5000) for k in range(4)])
    df = task_table(run_workload(wl_any, model))
    assert sorted(df["core"]) == [f"core{k}" for k in range(4)]  # all free: spread out


def test_backend_beyond_core_count_is_refused(j6):
    model = j6.with_overrides({"core.count": 2})
    with pytest.raises(WorkloadError, match=r"stream 's3'.*core3.*core.count = 2"):
        run_workload(workload(stream("s3", backend="core3")), model)


# ------------------------------------------------------------------ figures and traces
def test_timeline_and_trace(tmp_path, capsys):
    wl = write_toml(tmp_path / "loaded.toml", LOADED)
    png, trace = tmp_path / "w.png", tmp_path / "w.json"
    assert main(["workload", str(wl), "--set", "core.count=2", "--timeline", str(png),
                 "--trace", str(trace), "--fidelity", "burst"]) == 0
    capsys.readouterr()
    assert png.stat().st_size > 10_000
    obj = json.loads(trace.read_text())
    ev = obj["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    # whole nanoseconds (written as microseconds with three decimals)
    assert all(abs(e[k] * 1000 - round(e[k] * 1000)) < 1e-6 for e in slices for k in ("ts", "dur"))
    cores = [e for e in slices if e["pid"] == 1]
    assert len(cores) == 42 and {e["args"]["stream"] for e in cores} == {"hi", "lo", "pinned"}
    for tid in {e["tid"] for e in slices}:  # no two slices of one thread overlap
        for pid in (1, 2):
            spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices
                           if e["tid"] == tid and e["pid"] == pid)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    queue = [e for e in ev if e["ph"] == "C" and e["name"].startswith("queue")]
    assert queue and max(e["args"]["tasks"] for e in queue) >= 2
    assert any(e["ph"] == "C" and e["name"].startswith("DDR") for e in ev)


def test_data_path_moves_values(j6):
    from dspsim.ops import get_op

    wl = workload(stream("a", n=2048, count=2), stream("b", n=2048, variant="direct"))
    run = run_workload(wl, j6, data=True)
    softmax = get_op("softmax")
    ref = softmax.reference(softmax.default_input((2048,)), None)
    for name in ("a", "b"):
        np.testing.assert_allclose(run.outputs[name], ref, rtol=1e-5)
    assert run_workload(wl, j6).outputs is None  # off by default


def test_a_small_workloads_bytes_are_not_printed_as_zero_megabytes(tmp_path, capsys):
    """Two 8,192-byte copies: 16,384 bytes read, which one decimal of MB printed as 0.0."""
    wl = write_toml(tmp_path / "small.toml", '[[stream]]\nname = "c"\nop = "copy"\n'
                    'variant = "idma"\nn = 8192\nperiod_us = 1000\ncount = 2\n')
    assert main(["workload", str(wl)]) == 0
    out = capsys.readouterr().out
    assert "(data path; 0.0164 MB read, 0 MB written)" in out
