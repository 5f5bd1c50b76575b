"""Workloads that reuse what cannot differ: a task whose op runs alone from an idle platform is
booked from an earlier one of its stream on its core instead of simulated, and the run is the
same, task by task and column by column, as simulating every task (``reuse=False``); tasks that
overlap on the shared memory are simulated. And an op's own cycles do not depend on when it
runs: each runs in a clock that starts at the platform's last idle moment."""

from __future__ import annotations

import numpy as np
import pytest

from dspsim.config import load_model
from dspsim.run import simulate
from dspsim.study.workload import run_workload, summarise, task_table
from tests.workload_helpers import stream_spec, workload

N = 5_000  # small softmax: ~0.26 M cycles ping-pong on the J6 model


def stream(name, **kw):
    return stream_spec(name, (N, 1_000.0, 6), **kw)


def both(wl, model, **kw):
    """The run with reuse and the run simulating every task."""
    return run_workload(wl, model, reuse=True, **kw), run_workload(wl, model, reuse=False, **kw)


def assert_same_run(on, off):
    """Every column of the task table, the summary's figures (but the events and wall time,
    which reuse is there to change), the DDR profile and the outputs: identical."""
    assert_same_tasks(on, off)
    assert off.reused_tasks == 0


def assert_same_tasks(on, off):
    """:func:`assert_same_run` but for which tasks were reused."""
    a, b = task_table(on), task_table(off)
    assert a.equals(b)
    sa, sb = summarise(on, a), summarise(off, b)
    for s in (sa, sb):
        for key in ("events", "wall_s", "reuse", "parts"):
            s.pop(key)
    assert sa == sb
    if on.ddr is not None:
        for k in on.ddr:
            assert np.array_equal(on.ddr[k], off.ddr[k]), k
    if on.outputs is not None:
        assert on.outputs.keys() == off.outputs.keys()
        for k in on.outputs:
            assert np.array_equal(on.outputs[k], off.outputs[k]), k


# ------------------------------------------------------------------ tasks that never overlap
def test_tasks_alone_are_reused_and_identical_to_simulating_them(j6):
    # one core: a camera-like stream with jitter, a LayerNorm stream and a direct softmax, all
    # queueing on the one core at times (priorities decide), never two ops at once
    wl = workload(
        stream("cam", jitter_us=300.0, count=12, period_us=400.0),
        stream("ln", op="layernorm", shape=[32, 256], priority=9, period_us=900.0,
               start_us=50.0, count=5),
        stream("direct", variant="direct", n=2_000, period_us=2_000.0, count=3, jitter_us=7.5),
    )
    on, off = both(wl, j6, ddr_profile=True)
    assert_same_run(on, off)
    df = task_table(on)
    assert (df["start_cycle"] > df["queued_cycle"]).any()  # some waited for the core
    # a direct op returns with its last store still crossing: the task the core takes at that
    # moment starts beside it and is simulated (a little slower than alone), and that direct
    # task's run is no booking; the others are booked from the first of their stream that ran
    # alone
    df["reused"] = on.tasks.reused
    behind = df["start_cycle"].isin(df.loc[df["stream"] == "direct", "core_end_cycle"])
    assert behind.any() and not df.loc[behind, "reused"].any()
    alone = df[~behind & (df["stream"] != "direct")]
    for _, d in alone.groupby("stream"):
        assert not d["reused"].iloc[0] and d["reused"].iloc[1:].all()
    assert on.reused_tasks >= wl.tasks // 2
    assert summarise(on)["reuse"]["reused_tasks"] == on.reused_tasks
    # each op's cycles are the op's alone (dspsim run), every time it starts on an idle platform
    for name, op, variant, kw in (("cam", "softmax", "pingpong", {"n": N}),
                                  ("ln", "layernorm", "pingpong", {"shape": (32, 256)})):
        cycles = simulate(j6, op, variant, data=False, fidelity="tile", **kw).cycles
        assert (alone.loc[alone["stream"] == name, "op_cycles"] == cycles).all()
        assert (df.loc[behind & (df["stream"] == name), "op_cycles"] > cycles).all()


def test_an_op_takes_the_same_cycles_after_a_day(j6):
    wl = workload(stream("early", count=2), stream("late", count=2, start_us=86_399e6))
    for reuse in (True, False):
        t = run_workload(wl, j6, reuse=reuse).tasks
        assert len(set(t.op_cycles.tolist())) == 1  # to the last bit
        # absolute times there are resolved to 2^-6 cycle (below 2^47 cycles): the span read
        # off them is the op's to within that
        span = t.core_end_cycle - t.op_start_cycle
        assert np.abs(span - span[0]).max() <= 2.0**-6


@pytest.mark.parametrize("fidelity", ["tile", "burst"])
def test_reuse_is_the_same_at_both_fidelities(j6, fidelity):
    wl = workload(stream("a", jitter_us=100.0, count=4, period_us=300.0),
                  stream("b", op="layernorm", shape=[8, 256], count=3, period_us=500.0))
    on, off = both(wl, j6, fidelity=fidelity)
    assert_same_run(on, off)
    assert on.reused_tasks == wl.tasks - 2


def test_values_are_reused_too(j6):
    wl = workload(stream("a", n=1_000, count=3), stream("b", op="layernorm", shape=[4, 256],
                                                        count=3, period_us=700.0))
    on, off = both(wl, j6, data=True)
    assert_same_run(on, off)
    assert on.reused_tasks == 4
    assert np.isfinite(on.outputs["a"]).all() and on.outputs["a"].sum() == pytest.approx(1.0)


# ------------------------------------------------------------------ tasks that overlap
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlapping_tasks_are_simulated_and_the_run_is_identical(j6, seed):
    # two cores, "any" tasks released often enough with jitter that some run side by side on
    # the one DDR port (then slower than alone) and some alone
    model = j6.with_overrides({"core.count": 2})
    wl = workload(stream("a", count=12, period_us=900.0, jitter_us=800.0),
                  stream("b", count=12, period_us=1000.0, jitter_us=900.0, start_us=100.0),
                  stream("c", op="layernorm", shape=[16, 256], count=5, period_us=2_100.0,
                         backend="core1", jitter_us=50.0), seed=seed)
    on, off = both(wl, model, ddr_profile=True)
    assert_same_run(on, off)
    df = task_table(on)
    alone = simulate(model, "softmax", "pingpong", n=N, data=False, fidelity="tile").cycles
    shared = df[(df["stream"] != "c") & (df["op_cycles"] > alone)]
    assert len(shared)  # some overlapped, slower than alone
    reused = on.tasks.reused
    assert 0 < on.reused_tasks < wl.tasks - 3
    assert not reused[(df["op_cycles"] > alone).to_numpy() & (df["stream"] != "c").to_numpy()].any()


@pytest.mark.parametrize("fidelity", ["tile", "burst"])
def test_a_task_another_core_starts_beside_is_not_booked(j6, fidelity):
    # a's second task starts on an idle platform, but b's arrives on core1 during it: booked
    # from a's first task it would take a's alone cycles; simulated, it shares the port
    model = j6.with_overrides({"core.count": 2})
    wl = workload(stream("a", backend="core0", count=2, period_us=1_000.0),
                  stream("b", backend="core1", count=1, start_us=1_050.0))
    on, off = both(wl, model, fidelity=fidelity)
    assert_same_run(on, off)
    t = on.tasks
    assert on.reused_tasks == 0
    assert t.op_cycles[1] > t.op_cycles[0]


def test_a_platform_with_a_data_cache_reuses_nothing_and_says_why():
    model = load_model("ameba_hifi5")
    wl = workload(stream("a", variant="direct", n=2_000, count=3, period_us=20_000.0))
    on, off = both(wl, model)
    assert_same_run(on, off)
    assert on.reused_tasks == 0 and "data cache" in summarise(on)["reuse"]["note"]


# ------------------------------------------------------------------ the command
def test_the_command_says_how_many_tasks_were_reused_and_no_reuse_agrees(tmp_path, capsys):
    import json

    from dspsim.cli import main

    f = tmp_path / "w.toml"
    f.write_text('seed = 4\n[[stream]]\nname = "cam"\nop = "softmax"\nvariant = "pingpong"\n'
                 'n = 5000\nperiod_us = 400\njitter_us = 300\ncount = 8\n', "utf-8")
    outs = {}
    for flag in ([], ["--no-reuse"]):
        csv = tmp_path / f"tasks{len(flag)}.csv"
        assert main(["workload", str(f), "--json", "--out", str(csv), *flag]) == 0
        s = json.loads(capsys.readouterr().out)
        outs[bool(flag)] = (s, csv.read_bytes())
    (on, on_csv), (off, off_csv) = outs[False], outs[True]
    assert on["reuse"] == {"enabled": True, "reused_tasks": 7, "simulated_tasks": 1,
                           "episodes": 1, "note": None}
    assert off["reuse"] == {"enabled": False, "reused_tasks": 0, "simulated_tasks": 8,
                            "episodes": 8, "note": None}
    assert on_csv == off_csv
    for s in (on, off):
        for key in ("events", "wall_s", "reuse", "files"):
            s.pop(key)
    assert on == off
    assert main(["workload", str(f)]) == 0
    assert "reused 7 of 8 tasks" in capsys.readouterr().out
    assert main(["workload", str(f), "--no-reuse"]) == 0
    assert "reuse off (--no-reuse): all 8 tasks simulated" in capsys.readouterr().out


@pytest.mark.parametrize("fidelity", ["burst", "tile"])
def test_an_arrival_just_as_a_task_would_end_is_a_tie_left_to_the_platform(j6, fidelity):
    # a's second task would be booked, but b (priority 9) arrives exactly as it ends while c
    # waits for the core: which goes first is the order of the platform's own events (at burst
    # fidelity b is queued before the core frees and overtakes c); booked, the core would free
    # first and take c. The task is simulated, and the run is the one simulating every task.
    def wl(b_start_us):
        return workload(stream("a", count=2), stream("c", count=1, start_us=1_100.0),
                        stream("b", op="layernorm", shape=[8, 256], priority=9, count=1,
                               start_us=b_start_us))

    end = run_workload(wl(1_500.0), j6, fidelity=fidelity).tasks.core_end_cycle[1]
    half_rpc = j6.host.rpc_latency_us * j6.core.clock_mhz / 2
    start_us = (end - half_rpc) / j6.core.clock_mhz
    for _ in range(1000):  # the release whose arrival is that end, to the last bit
        arrival = start_us * j6.core.clock_mhz + half_rpc
        if arrival == end:
            break
        start_us = np.nextafter(start_us, np.inf if arrival < end else -np.inf)
    assert start_us * j6.core.clock_mhz + half_rpc == end
    on, off = both(wl(float(start_us)), j6, fidelity=fidelity)
    assert_same_run(on, off)
    assert not on.tasks.reused[1]
