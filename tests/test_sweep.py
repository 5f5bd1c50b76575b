"""Parameter sweeps: grid expansion, rows against simulate(), failures, resume after kill -9,
parallel and Dask executors, parquet, spec files, every op and variant, figures."""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.cli import main
from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.platform import FIDELITIES
from dspsim.run import simulate
from dspsim.study.experiments import bench_sweep
from dspsim.study.sweep import (
    build_sweep,
    check_out,
    key_columns,
    parse_values,
    read_sweep,
    run_sweep,
)
from dspsim.study.sweep import executors as sweep_module
from dspsim.study.sweep_plot import heatmap, line_plot, plot_sweep, plot_sweep_cli, speedup_table

N = 4096
CLI = [sys.executable, "-m", "dspsim.cli", "sweep"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def without_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"]).reset_index(drop=True)


def small_sweep(**kw):
    kw.setdefault("n", N)
    kw.setdefault("fidelity", "burst")
    return build_sweep(kw.pop("params", {"ddr.latency_cycles": [50, 400]}), **kw)


# ------------------------------------------------------------------------------ values
def test_ranges_include_stop_only_on_the_grid():
    assert parse_values("idma.max_outstanding", "1:9:4") == [1, 5, 9]
    assert parse_values("idma.max_outstanding", "1:10:4") == [1, 5, 9]
    assert parse_values("ddr.latency_cycles", "0.1:0.5:0.1") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_values("ddr.latency_cycles", "100,200") == [100.0, 200.0]
    assert parse_values("n", "1024:4096:1024") == [1024, 2048, 3072, 4096]
    assert parse_values("mode", "direct,pingpong") == ["direct", "pingpong"]
    assert parse_values("variant", "direct,pingpong") == ["direct", "pingpong"]
    assert parse_values("op", "softmax,layernorm") == ["softmax", "layernorm"]
    assert parse_values("shape", "1024x256, 512X512") == ["1024x256", "512x512"]
    assert parse_values("softmax.schedule", "seed, split") == ["seed", "split"]


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(1, 500),
    step=st.integers(1, 50),
    count=st.integers(1, 40),
    extra=st.integers(0, 49),
)
def test_integer_range_is_pythons_inclusive_range(start, step, count, extra):
    stop = start + (count - 1) * step + min(extra, step - 1)
    values = parse_values("idma.burst_bytes", f"{start}:{stop}:{step}")
    assert values == list(range(start, stop + 1, step))
    assert len(values) == count


@settings(max_examples=60, deadline=None)
@given(
    start=st.floats(0.01, 100.0),
    step=st.floats(0.01, 10.0),
    count=st.integers(1, 30),
)
def test_float_range_steps_evenly_up_to_stop(start, step, count):
    stop = start + (count - 1) * step
    values = parse_values("ddr.bytes_per_cycle", f"{start!r}:{stop!r}:{step!r}")
    assert len(values) == count  # STOP lands on the grid: included
    assert values[0] == pytest.approx(start, rel=1e-9)
    assert values[-1] <= stop * (1 + 1e-9)
    assert np.allclose(np.diff(values), step, rtol=1e-6, atol=1e-9)


def test_grid_is_the_cartesian_product_first_key_outermost():
    s = build_sweep(
        ["ddr.latency_cycles=50,100,150", "idma.max_outstanding=1:4:1"],
        modes="pingpong,direct",
        n="4096",
        fidelity="burst",
    )
    assert s.size == 3 * 4 * 2 * 1
    points = list(s.points())
    assert len(points) == s.size
    assert len({s.identity(p) for p in points}) == s.size
    assert points[0] == {
        "ddr.latency_cycles": 50.0,
        "idma.max_outstanding": 1,
        "op": "softmax",
        "mode": "pingpong",
        "n": 4096,
    }
    assert points[1]["mode"] == "direct" and points[2]["idma.max_outstanding"] == 2
    # the table: op, the variant column, the size column, the swept keys, then the results
    assert s.columns[:6] == [
        "op", "mode", "n", "ddr.latency_cycles", "idma.max_outstanding", "cycles"
    ]
    assert s.columns[-4:] == ["warnings", "hazards", "wall_s", "error"]
    for c in (
        "core_busy_cycles",
        "idma0_busy_cycles",
        "idma1_busy_cycles",
        "ddr_busy_cycles",
        "ddr_stall_cycles",
        "idma_in_stall_cycles",
        "idma_out_stall_cycles",
        "ddr_read_bytes",
        "ddr_write_bytes",
        "time_us",
    ):
        assert c in s.columns


def test_busy_columns_cover_the_most_channels_swept():
    s = small_sweep(params={"idma.channels": [2, 4]})
    assert [c for c in s.columns if c.startswith("idma") and c.endswith("_busy_cycles")] == [
        f"idma{k}_busy_cycles" for k in range(4)
    ]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--param", "foo.bar=1,2"], "unknown sweep key 'foo.bar'"),
        (["--param", "ddr.latency_cycles=1:10:0"], "STEP must be greater than 0"),
        (["--param", "ddr.latency_cycles=10:1:1"], "START is greater than STOP"),
        (["--param", "ddr.latency_cycles=a:10:1"], "is not a number"),
        (["--param", "ddr.latency_cycles=1:10"], "malformed range"),
        (["--param", "ddr.latency_cycles=abc"], "is not a number"),
        (["--param", "ddr.latency_cycles="], "no values"),
        (["--param", "ddr.latency_cycles=1,,2"], "empty value"),
        (["--param", "idma.max_outstanding=0,4"], "idma.max_outstanding = 0"),
        (["--param", "idma.max_outstanding=1.5:4:1"], "takes integers"),
        (["--param", "mode=1:2:1"], "need a numeric key"),
        (["--mode", "pingpong,fast"], "mode 'fast'"),
        (["--n", "0"], "n = 0"),
        (["--param", "n=64", "--n", "128"], "given twice"),
        (["--param", "ddr.latency_cycles=1", "--param", "ddr.latency_cycles=2"], "given twice"),
        (["--param", "ddr.latency_cycles=1", "--set", "ddr.latency_cycles=2"], "both fixed"),
        (["--param", "ddr.latency_cycles=1,1"], "given twice"),
        # a fixed key that acts at no point (a swept one gets a note): it was taken silently
        (["--variant", "online", "--set", "softmax.max_init=-inf"], "acts in softmax pingpong"),
        (["--variant", "direct", "--set", "idma.burst_bytes=128"], "does nothing in softmax"),
        (["--set", "layernorm.eps=0.5"], "it is a key of layernorm"),
        (["--param", "n=64", "--jobs", "0"], "--jobs 0"),
        (["--param", "n=64", "--scheduler", "tcp://x:1"], "--scheduler needs --executor dask"),
        (["--param", "n=64", "--spec", "missing.toml"], "not found"),
        (["--op", "nope"], "unknown op 'nope'"),
        (["--op", "layernorm", "--variant", "fast"], "allowed for layernorm: pingpong, direct"),
        (["--op", "softmax,layernorm"], "different dimensions"),
        (["--variant", "pingpong", "--mode", "direct"], "not both"),
        (["--param", "variant=pingpong", "--param", "mode=direct"], "not both"),
        (["--op", "layernorm", "--n", "64"], "not n"),
        (["--param", "shape=64x64"], "not shape"),
        (["--op", "layernorm", "--param", "shape=64"], "expected 2 dimensions"),
        (["--op", "layernorm", "--shape", "0,64"], "shape '0x64'"),
        (["--op", "layernorm", "--param", "shape=64:128:64"], "need a numeric key"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle, tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("name", ["s.txt", "s", "s.csv.gz"])
def test_bad_extension(name, tmp_path, capsys):
    assert main(["sweep", "--param", "n=64", "--out", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert "allowed .csv, .parquet" in err and err.count("\n") == 1


def test_parquet_without_pyarrow_names_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(DspsimInputError, match=r"pyarrow.*dspsim\[parquet\]"):
        check_out(tmp_path / "s.parquet")


def test_dask_executor_without_dask_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)
    argv = ["sweep", "--param", "n=64", "--executor", "dask", "--out", str(tmp_path / "s.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "dspsim[dask]" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------ rows
def test_rows_equal_simulate(tmp_path):
    s = small_sweep(params={"ddr.latency_cycles": [50, 400], "idma.max_outstanding": [2, 16]})
    summary = run_sweep(s, tmp_path / "s.csv")
    assert (summary.points, summary.computed, summary.resumed, summary.failed) == (8, 8, 0, 0)
    df = read_sweep(tmp_path / "s.csv")
    assert list(df.columns) == s.columns and len(df) == 8
    base = load_model()
    for r in df.to_dict("records"):
        m = base.with_overrides({k: r[k] for k in ("ddr.latency_cycles", "idma.max_outstanding")})
        want = simulate(m, r["op"], r["variant"], N, data=False, fidelity="burst")
        assert r["cycles"] == want.cycles
        assert r["time_us"] == pytest.approx(want.time_us)
        assert r["ddr_read_bytes"] == want.bytes["ddr_read"]
        assert r["ddr_write_bytes"] == want.bytes["ddr_write"]
        assert r["core_busy_cycles"] == want.busy_cycles[want.core]
        assert r["idma1_busy_cycles"] == want.busy_cycles[want.engines_of("idma")[1]]
        assert r["ddr_busy_cycles"] == want.busy_cycles[want.engines_of("ddr")[0]]
        assert r["ddr_stall_cycles"] == want.stall_cycles["ddr"]
        assert r["idma_in_stall_cycles"] == want.stall_cycles["idma_in"]
        assert r["warnings"] == ";".join(dict.fromkeys(
            w["code"] for w in want.warnings if w["severity"] != "info"))
        assert r["hazards"] == len(want.hazards)
        assert r["error"] == ""


def test_failed_points_are_recorded_and_counted(tmp_path, capsys):
    out = tmp_path / "s.csv"
    argv = [
        "sweep",
        "--param",
        "softmax.tile_bytes=4096,524288",
        "--n",
        str(N),
        "--fidelity",
        "burst",
        "--out",
        str(out),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "2 of 4 points failed" in err
    df = read_sweep(out)
    bad = df[df["softmax.tile_bytes"] == 524288]
    good = df[df["softmax.tile_bytes"] == 4096]
    assert len(bad) == 2 and len(good) == 2
    assert bad["error"].str.contains("larger than a DataRAM").all()
    assert bad["cycles"].isna().all()
    assert (good["error"] == "").all() and (good["cycles"] > 0).all()
    # failed points are done: a rerun computes nothing, --retry-failed recomputes only them
    assert main(argv) == 1
    assert "(0 computed, 4 already" in capsys.readouterr().out
    assert main([*argv, "--retry-failed"]) == 1
    assert "(2 computed, 2 already" in capsys.readouterr().out
    again = read_sweep(out)
    assert len(again) == 4
    assert without_wall(again).equals(without_wall(df))


def test_two_workers_give_the_same_rows(tmp_path):
    s = small_sweep(params={"ddr.latency_cycles": [50, 100, 400]})
    run_sweep(s, tmp_path / "one.csv", jobs=1)
    run_sweep(s, tmp_path / "two.csv", jobs=2)
    assert without_wall(read_sweep(tmp_path / "two.csv")).equals(
        without_wall(read_sweep(tmp_path / "one.csv"))
    )


def test_fidelity_is_passed_through(tmp_path):
    for fidelity in FIDELITIES:
        s = small_sweep(params={"ddr.latency_cycles": [50]}, modes="pingpong", fidelity=fidelity)
        assert s.fidelity == fidelity
        run_sweep(s, tmp_path / f"{fidelity}.csv")
        df = read_sweep(tmp_path / f"{fidelity}.csv")
        assert len(df) == 1
        model = load_model().with_overrides({"ddr.latency_cycles": 50})
        try:
            want = simulate(model, variant="pingpong", n=N, data=False, fidelity=fidelity)
        except Exception as e:  # noqa: BLE001 - a fidelity not built yet fails the point
            assert type(e).__name__ in df["error"].iloc[0]
        else:
            assert df["cycles"].iloc[0] == want.cycles


# ------------------------------------------------------------------------------ never lose work
def _data_lines(path: Path) -> int:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    return max(0, data.count(b"\n") - 1)


def _summary_counts(stdout: str) -> tuple[int, int]:
    m = re.search(r"\(([\d,]+) computed, ([\d,]+) already in the file\)", stdout)
    assert m, stdout
    return int(m[1].replace(",", "")), int(m[2].replace(",", ""))


def test_kill_9_then_rerun_finishes_only_the_missing_points(tmp_path, capsys):
    out = tmp_path / "k.csv"
    args = [
        "--param",
        "ddr.latency_cycles=10:4000:5",  # 1,598 points: not all done before the kill
        "--n",
        "50000",
        "--fidelity",
        "burst",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 90
    try:
        while _data_lines(out) < 5:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no rows appeared"
            time.sleep(0.02)
        # a second sweep on the same file is refused while the first runs
        assert main(["sweep", *args]) == 2
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its workers
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert "being written by another sweep" in capsys.readouterr().err
    partial = read_sweep(out)  # parses, whatever the kill tore
    total = 799 * 2
    assert 5 <= len(partial) < total
    assert not partial.duplicated(key_columns(partial)).any()

    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    computed, resumed = _summary_counts(done.stdout)
    assert resumed == len(partial) and computed == total - resumed

    final = read_sweep(out)
    ref = tmp_path / "ref.csv"
    run_sweep(build_sweep(["ddr.latency_cycles=10:4000:5"], n=50000, fidelity="burst"), ref, jobs=1)
    assert without_wall(final).equals(without_wall(read_sweep(ref)))
    merged = partial.merge(final, on=key_columns(final), suffixes=("", "_final"))
    assert (merged["cycles"] == merged["cycles_final"]).all()  # finished points kept as they were


def test_torn_last_line_is_dropped_and_recomputed(tmp_path, monkeypatch):
    out = tmp_path / "t.csv"
    s = small_sweep(params={"ddr.latency_cycles": [50, 100, 400]})
    run_sweep(s, out)
    whole = read_sweep(out)
    lines = out.read_bytes().splitlines(keepends=True)
    # the last two points lost, the last of them torn mid-line as a kill leaves it
    out.write_bytes(b"".join(lines[:-2]) + lines[-1][: len(lines[-1]) // 2])
    assert len(read_sweep(out)) == len(whole) - 2

    # a resume interrupted after one point must leave only whole lines behind
    real = sweep_module.evaluate_point
    calls = []

    def interrupted(*args):
        calls.append(args)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(sweep_module, "evaluate_point", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(s, out)
    monkeypatch.undo()
    text = out.read_text()
    assert text.endswith("\n")
    assert all(len(r) == len(s.columns) for r in csv.reader(io.StringIO(text)))
    assert len(read_sweep(out)) == len(whole) - 1

    summary = run_sweep(s, out)
    assert (summary.computed, summary.resumed) == (1, len(whole) - 1)
    assert without_wall(read_sweep(out)).equals(without_wall(whole))
    assert out.read_bytes().count(b"\n") == len(whole) + 1


@pytest.mark.parametrize(
    "other",
    [
        ["--param", "ddr.max_outstanding=8,16"],  # other columns
        ["--param", "ddr.latency_cycles=50,400", "--fidelity", "tile"],  # other fidelity
        ["--param", "ddr.latency_cycles=50,400", "--set", "idma.burst_bytes=128"],  # other model
    ],
)
def test_a_file_of_another_sweep_is_refused(other, tmp_path, capsys):
    out = tmp_path / "s.csv"
    base = ["sweep", "--n", str(N), "--out", str(out)]
    assert main([*base, "--param", "ddr.latency_cycles=50,400", "--fidelity", "burst"]) == 0
    before = out.read_bytes()
    capsys.readouterr()
    argv = [*base, *other]
    if "--fidelity" not in other:
        argv += ["--fidelity", "burst"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "different sweep" in err and err.count("\n") == 1
    assert out.read_bytes() == before


def test_extending_a_grid_computes_only_the_new_points(tmp_path):
    out = tmp_path / "s.csv"
    run_sweep(small_sweep(params={"ddr.latency_cycles": [50, 100]}), out)
    s = small_sweep(params={"ddr.latency_cycles": [50, 100, 400]})
    summary = run_sweep(s, out)
    assert (summary.computed, summary.resumed) == (2, 4)
    df = read_sweep(out)
    assert list(df["ddr.latency_cycles"]) == [50.0, 50.0, 100.0, 100.0, 400.0, 400.0]


def test_parquet_output_and_resume(tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "s.parquet"
    tiles = [4096, 524288]  # the second fails: larger than a DataRAM
    run_sweep(small_sweep(params={"ddr.latency_cycles": [50], "softmax.tile_bytes": tiles}), out)
    assert not (tmp_path / "s.parquet.journal.csv").exists()
    s = small_sweep(params={"ddr.latency_cycles": [50, 400], "softmax.tile_bytes": tiles})
    summary = run_sweep(s, out)
    assert (summary.computed, summary.resumed, summary.failed) == (4, 4, 4)
    pq = pd.read_parquet(out)
    assert list(pq.columns) == s.columns
    assert pq["cycles"].dtype.name == "Int64" and pq["ddr.latency_cycles"].dtype == float
    assert pq["cycles"].isna().sum() == 4 and (pq["cycles"].dropna() > 0).all()
    run_sweep(s, tmp_path / "s.csv")
    csv_rows = without_wall(read_sweep(tmp_path / "s.csv"))
    pq_rows = without_wall(read_sweep(out))
    pd.testing.assert_frame_equal(pq_rows, csv_rows)


def test_spec_file(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'fidelity = "burst"\nmode = "pingpong"\nn = 4096\n'
        '[set]\n"idma.burst_bytes" = 128\n'
        '[params]\n"ddr.latency_cycles" = [50, 100]\n"idma.max_outstanding" = "1:4:2"\n'
        'softmax = { tile_bytes = "4096,8192" }\n'
    )
    s = build_sweep(["ddr.bytes_per_cycle=1,2"], spec=spec)
    grid_order = [
        "ddr.latency_cycles",
        "idma.max_outstanding",
        "softmax.tile_bytes",
        "ddr.bytes_per_cycle",
        "op",
        "mode",
        "n",
    ]
    assert [k for k, _ in s.axes] == grid_order
    assert s.keys == ["op", "mode", "n", *grid_order[:4]]
    assert dict(s.axes)["idma.max_outstanding"] == (1, 3)
    assert s.size == 2 * 2 * 2 * 2
    assert s.fidelity == "burst" and s.model.idma.burst_bytes == 128
    assert build_sweep(spec=spec, modes="online").axes[-2] == ("mode", ("online",))
    with pytest.raises(DspsimInputError, match="idma.burst_bytes does nothing in softmax direct"):
        build_sweep(spec=spec, modes="direct")  # the [set] iDMA key acts at no point
    with pytest.raises(DspsimInputError, match="given twice"):
        build_sweep(["ddr.latency_cycles=1"], spec=spec)
    spec.write_text('[params]\n"ddr.latency_cycles" = []\n')
    with pytest.raises(DspsimInputError, match="no values"):
        build_sweep(spec=spec)
    spec.write_text("speed = 3\n")
    with pytest.raises(DspsimInputError, match="unknown entry 'speed'"):
        build_sweep(spec=spec)


def test_dask_local_cluster_gives_the_local_rows(tmp_path):
    pytest.importorskip("distributed")
    s = small_sweep(params={"ddr.latency_cycles": [50, 400]})
    run_sweep(s, tmp_path / "local.csv")
    run_sweep(
        s, tmp_path / "dask.csv", executor="dask", jobs=2, dask_processes=False, timeout_s=120
    )
    assert without_wall(read_sweep(tmp_path / "dask.csv")).equals(
        without_wall(read_sweep(tmp_path / "local.csv"))
    )


def test_bench_sweep_reports_its_rate():
    r = bench_sweep(points=4, jobs=1, n=N, fidelity="burst")
    assert r["points"] == 4
    assert r["points_per_s"] == pytest.approx(r["points"] / r["wall_s"])


# ------------------------------------------------------------------------------ figures
def synthetic(latencies=(1, 10, 100), outstanding=(1, 4, 16)) -> pd.DataFrame:
    """Direct gets slower with latency; ping-pong with latency / outstanding: crosses 1."""
    rows = []
    for lat in latencies:
        for out in outstanding:
            for mode, cycles in (("pingpong", 1000 + 40 * lat / out), ("direct", 1000 + 10 * lat)):
                rows.append(
                    {
                        "ddr.latency_cycles": float(lat),
                        "idma.max_outstanding": out,
                        "mode": mode,
                        "n": 1000,
                        "cycles": int(cycles),
                        "wall_s": 0.0,
                        "error": "",
                    }
                )
    return pd.DataFrame(rows)


def test_speedup_is_pingpong_over_direct():
    df = synthetic()
    table = speedup_table(df)
    assert len(table) == 9
    assert list(table.columns) == ["ddr.latency_cycles", "idma.max_outstanding", "n", "speedup"]
    for lat, out, _, speedup in table.itertuples(index=False):
        pick = df[(df["ddr.latency_cycles"] == lat) & (df["idma.max_outstanding"] == out)]
        cyc = pick.set_index("mode")["cycles"]
        assert speedup == pytest.approx(cyc["pingpong"] / cyc["direct"])


def test_heatmap_draws_the_crossover_contour():
    from matplotlib.contour import ContourSet

    df = synthetic()
    s = speedup_table(df)["speedup"]
    assert s.min() < 1 < s.max()
    fig = heatmap(df, "ddr.latency_cycles", "idma.max_outstanding", "speedup")
    ax = fig.axes[0]
    assert any(isinstance(c, ContourSet) for c in ax.collections)
    assert ax.get_xlabel() == "ddr.latency_cycles" and ax.get_ylabel() == "idma.max_outstanding"
    # cycles of both versions: one panel each, no contour
    fig = heatmap(df, "ddr.latency_cycles", "idma.max_outstanding")
    panels = [a for a in fig.axes if a.get_visible() and a.get_title()]
    assert sorted(a.get_title() for a in panels) == ["mode=direct", "mode=pingpong"]


def test_line_plot_one_line_per_hue():
    fig = line_plot(synthetic(outstanding=(4,)), "ddr.latency_cycles", hue="mode")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 2
    assert ax.get_xlabel() == "ddr.latency_cycles" and ax.get_ylabel() == "cycles"


def test_plot_cli_writes_figures_and_rejects_unknown_columns(tmp_path):
    src = tmp_path / "s.csv"
    synthetic().to_csv(src, index=False)
    ns = argparse.Namespace(
        file=str(src),
        x="ddr.latency_cycles",
        y=None,
        hue="mode",
        heatmap=None,
        out=str(tmp_path / "line.png"),
    )
    assert plot_sweep_cli(ns) == 0
    assert (tmp_path / "line.png").read_bytes()[:8] == PNG_MAGIC
    ns = argparse.Namespace(
        file=str(src),
        x=None,
        y="speedup",
        hue=None,
        heatmap=["ddr.latency_cycles", "idma.max_outstanding"],
        out=None,
    )
    assert plot_sweep_cli(ns) == 0
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC
    argv = [
        "plot",
        "sweep",
        str(src),
        "--x",
        "ddr.latency_cycles",
        "--heatmap",
        "ddr.latency_cycles",
        "idma.max_outstanding",
        "--y",
        "speedup",
        "--out",
        str(tmp_path / "map.svg"),
    ]
    assert main(argv) == 0
    assert b"<svg" in (tmp_path / "map.svg").read_bytes()[:2000]
    with pytest.raises(DspsimInputError, match="column 'ddr.nope' is not in"):
        plot_sweep(src, x="ddr.nope")
    with pytest.raises(DspsimInputError, match="column 'joules' is not in"):
        plot_sweep(src, x="ddr.latency_cycles", y="joules")
    with pytest.raises(DspsimInputError, match="allowed .png"):
        plot_sweep(src, x="ddr.latency_cycles", out=tmp_path / "f.bmp")


def test_true_false_keys_sweep_and_resume(tmp_path, capsys):
    out = tmp_path / "g.csv"
    argv = ["sweep", "--param", "softmax.guard_shifted_input=true,false", "--n", "1000",
            "--mode", "direct", "--out", str(out)]
    assert main(argv) == 0
    first = read_sweep(out)
    values = first["softmax.guard_shifted_input"].astype(str).str.lower()
    assert sorted(values) == ["false", "true"]
    assert main(argv) == 0  # resumes: nothing missing, same rows
    assert "(0 computed, 2 already in the file)" in capsys.readouterr().out
    assert main(["sweep", "--param", "softmax.guard_shifted_input=yes", "--out",
                 str(tmp_path / "h.csv")]) == 2
    assert parse_values("softmax.guard_shifted_input", "true,false") == [True, False]


# ------------------------------------------------------------------------------ every op
def test_layernorm_sweep_over_tile_bytes(tmp_path):
    out = tmp_path / "ln.csv"
    argv = ["sweep", "--op", "layernorm", "--param", "layernorm.tile_bytes=1024,4096",
            "--shape", "32,128", "--fidelity", "tile", "--jobs", "1", "--out", str(out)]
    assert main(argv) == 0
    df = read_sweep(out)
    assert key_columns(df) == ["op", "variant", "shape", "layernorm.tile_bytes"]
    assert len(df) == 4 and set(df["op"]) == {"layernorm"} and set(df["shape"]) == {"32x128"}
    assert sorted(set(df["variant"])) == ["direct", "pingpong"]  # every variant of the op
    assert (df["error"] == "").all()
    base = load_model()
    for r in df.to_dict("records"):
        m = base.with_overrides({"layernorm.tile_bytes": r["layernorm.tile_bytes"]})
        want = simulate(m, "layernorm", r["variant"], shape=(32, 128), data=False,
                        fidelity="tile")
        assert r["cycles"] == want.cycles
        assert r["core_busy_cycles"] == want.busy_cycles[want.core]
        assert r["idma0_busy_cycles"] == want.busy_cycles[want.engines_of("idma")[0]]


def test_layernorm_sweep_over_shape(tmp_path):
    out = tmp_path / "ln.csv"
    argv = ["sweep", "--op", "layernorm", "--param", "shape=32x128,64x64", "--variant",
            "pingpong", "--fidelity", "tile", "--jobs", "1", "--out", str(out)]
    assert main(argv) == 0
    df = read_sweep(out)
    assert key_columns(df) == ["op", "variant", "shape"]
    assert list(df["shape"]) == ["32x128", "64x64"] and set(df["variant"]) == {"pingpong"}
    for r in df.to_dict("records"):
        rows, cols = map(int, r["shape"].split("x"))
        want = simulate(load_model(), "layernorm", "pingpong", shape=(rows, cols), data=False,
                        fidelity="tile")
        assert r["cycles"] == want.cycles
    # --shape takes a list too, and resumes: the same points, nothing computed again
    s = build_sweep(op="layernorm", variants="pingpong", shape="32x128,64x64", fidelity="tile")
    assert (run_sweep(s, out).computed, run_sweep(s, out).resumed) == (0, 2)
    per_element = line_plot(df, "shape", "cycles_per_element")
    assert per_element.axes[0].get_ylabel() == "cycles_per_element (cycles / elements)"


def test_unknown_variant_for_the_op_is_refused_up_front():
    with pytest.raises(DspsimInputError, match=r"variant 'split' .*allowed.*pingpong, direct"):
        build_sweep(op="layernorm", variants="pingpong,split")
    with pytest.raises(DspsimInputError, match=r"mode 'fast' .*softmax.*pingpong, direct"):
        build_sweep(modes=["fast"])
    with pytest.raises(DspsimInputError, match=r"variant 'fast'"):
        build_sweep({"variant": "fast"}, op="softmax")


def test_ops_of_different_dimension_are_refused():
    with pytest.raises(DspsimInputError, match=r"softmax \(1-D\), layernorm \(2-D\)"):
        build_sweep(op=["softmax", "layernorm"])
    with pytest.raises(DspsimInputError, match="different dimensions"):
        build_sweep(["op=layernorm,softmax"])


def test_warnings_and_hazards_columns(tmp_path):
    model = load_model()
    # a large tile: the timer stops before the other channel's last write-back (burst fidelity)
    late = simulate(model.with_overrides({"softmax.tile_bytes": 131072}), variant="pingpong",
                    n=100_000, data=False, fidelity="burst")
    assert "unwaited_copy" in [w["code"] for w in late.warnings]
    split = simulate(model.with_overrides({"softmax.schedule": "split"}), variant="pingpong",
                     n=100_000, data=False, fidelity="burst")
    assert len(split.hazards) > 0
    s = build_sweep(["softmax.tile_bytes=32768,131072", "softmax.schedule=seed,split"],
                    modes="pingpong", n=100_000, fidelity="burst")
    run_sweep(s, tmp_path / "w.csv")
    df = read_sweep(tmp_path / "w.csv").set_index(["softmax.tile_bytes", "softmax.schedule"])
    assert df["hazards"].dtype.name == "Int64" and pd.api.types.is_string_dtype(df["warnings"])
    assert "unwaited_copy" in df.loc[(131072, "seed"), "warnings"].split(";")
    assert "unwaited_copy" not in df.loc[(32768, "seed"), "warnings"].split(";")
    assert df.loc[(32768, "split"), "hazards"] > 0 and df.loc[(32768, "seed"), "hazards"] == 0
    for (tile, schedule), r in df.iterrows():
        m = model.with_overrides({"softmax.tile_bytes": tile, "softmax.schedule": schedule})
        want = simulate(m, variant="pingpong", n=100_000, data=False, fidelity="burst")
        assert r["warnings"] == ";".join(dict.fromkeys(
            w["code"] for w in want.warnings if w["severity"] != "info"))
        assert r["hazards"] == len(want.hazards)
    # a direct point raises no warning: its cell is empty, not NaN
    s = build_sweep(modes="direct", n=N, fidelity="tile")
    run_sweep(s, tmp_path / "d.csv")
    assert list(read_sweep(tmp_path / "d.csv")["warnings"]) == [""]


def test_variant_and_mode_sweeps_both_work(tmp_path, capsys):
    tables = {}
    for name, argv in (
        ("variant", ["--variant", "direct,pingpong"]),
        ("mode", ["--mode", "direct,pingpong"]),
        ("param", ["--param", "variant=direct,pingpong"]),
    ):
        out = tmp_path / f"{name}.csv"
        assert main(["sweep", *argv, "--n", str(N), "--out", str(out)]) == 0
        tables[name] = read_sweep(out)
    capsys.readouterr()
    assert key_columns(tables["variant"]) == ["op", "variant", "n"]
    assert key_columns(tables["mode"]) == ["op", "mode", "n"]  # the name the user used
    assert key_columns(tables["param"]) == ["op", "variant", "n"]
    assert build_sweep(modes="direct").variant_key == "mode"
    assert build_sweep(variants="direct").variant_key == "variant"
    assert build_sweep(op="layernorm").size_key == "shape" and build_sweep().size_key == "n"
    assert build_sweep(op="layernorm").ops == ("layernorm",)
    assert list(tables["mode"]["mode"]) == list(tables["variant"]["variant"]) == [
        "direct", "pingpong"
    ]
    assert list(tables["mode"]["cycles"]) == list(tables["variant"]["cycles"])
    assert list(tables["param"]["cycles"]) == list(tables["variant"]["cycles"])
    # either name works for a figure of either table
    for table in tables.values():
        assert speedup_table(table)["speedup"].iloc[0] == pytest.approx(
            table["cycles"].iloc[1] / table["cycles"].iloc[0]  # pingpong / direct
        )
        fig = line_plot(table, "n", hue="mode")
        assert len([ln for ln in fig.axes[0].get_lines() if ln.get_label() != "_nolegend_"]) >= 2


def test_an_old_table_without_the_new_columns_is_refused(tmp_path, capsys):
    out = tmp_path / "old.csv"
    old = ("ddr.latency_cycles,mode,n,cycles,time_us,ddr_read_bytes,ddr_write_bytes,"
           "core_busy_cycles,idma0_busy_cycles,idma1_busy_cycles,ddr_busy_cycles,"
           "ddr_stall_cycles,idma_in_stall_cycles,idma_out_stall_cycles,wall_s,error\n"
           "50.0,pingpong,4096,1,1.0,1,1,1,1,1,1,0,0,0,0.1,\n")
    out.write_text(old)
    argv = ["sweep", "--param", "ddr.latency_cycles=50", "--mode", "pingpong", "--n", str(N),
            "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "different sweep" in err and err.count("\n") == 1
    assert out.read_text() == old
    # it still reads and plots: a table without an op column is of the default op
    assert line_plot(read_sweep(out), "ddr.latency_cycles").axes[0].get_ylabel() == "cycles"


def test_spec_file_names_the_op_variant_and_shape(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('op = "layernorm"\nvariant = "direct"\nshape = [64, 256]\n'
                    '[params]\nlayernorm = { tile_bytes = [8192, 16384] }\n')
    s = build_sweep(spec=spec)
    assert s.keys == ["op", "variant", "shape", "layernorm.tile_bytes"]
    assert dict(s.axes)["shape"] == ("64x256",) and dict(s.axes)["variant"] == ("direct",)
    # the options replace the file's scalars, the older name included
    s = build_sweep(spec=spec, modes="pingpong", shape="32x128,64x64")
    assert s.keys[:3] == ["op", "mode", "shape"]
    assert dict(s.axes)["shape"] == ("32x128", "64x64")


# ------------------------------------------------------------------------------ figures, any op
def two_variant_table(op="layernorm", variants=("pingpong", "direct"), warn="") -> pd.DataFrame:
    rows = []
    for tile in (1024, 4096):
        for i, v in enumerate(variants):
            rows.append({"op": op, "variant": v, "shape": "32x128", f"{op}.tile_bytes": tile,
                         "cycles": 1000 * (i + 1) + tile // 1024, "warnings": warn if i else "",
                         "hazards": 0, "wall_s": 0.0, "error": ""})
    return pd.DataFrame(rows)


def test_speedup_is_the_default_variant_over_the_other_one():
    df = two_variant_table()
    table = speedup_table(df)
    assert list(table.columns) == ["op", "shape", "layernorm.tile_bytes", "speedup", "warnings"]
    assert list(table["speedup"]) == pytest.approx([1001 / 2001, 1004 / 2004])
    fig = line_plot(df, "layernorm.tile_bytes", "speedup")
    assert fig.axes[0].get_ylabel().replace("\n", " ") == (  # wrapped to the axes' height
        "speedup (pingpong cycles / direct cycles; above 1 direct is faster)")
    # the default variant is the dividend whatever the order of the rows
    flipped = two_variant_table(variants=("direct", "pingpong"))
    assert list(speedup_table(flipped)["speedup"]) == pytest.approx([2001 / 1001, 2004 / 1004])
    with pytest.raises(DspsimInputError, match="two or more variants"):
        speedup_table(df[df["variant"] == "pingpong"])
    with pytest.raises(DspsimInputError, match="one op"):
        speedup_table(pd.concat([df, two_variant_table(op="softmax")]))
    with pytest.raises(DspsimInputError, match="variant .*column"):
        speedup_table(df.drop(columns=["variant"]))


def test_points_with_warnings_are_marked_on_line_plots():
    def rings(fig):
        return [ln for ln in fig.axes[0].get_lines() if ln.get_markerfacecolor() == "none"]

    def legend(fig):
        return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]

    quiet = line_plot(two_variant_table(), "layernorm.tile_bytes", hue="variant")
    assert not rings(quiet) and "point with warnings" not in legend(quiet)
    noisy = line_plot(two_variant_table(warn="unwaited_copy"), "layernorm.tile_bytes",
                      hue="variant")
    marked = [ln for ln in rings(noisy) if len(ln.get_xdata())]
    assert len(marked) == 1 and list(marked[0].get_xdata()) == [1024, 4096]  # direct's two
    assert legend(noisy).count("point with warnings") == 1
    # a speed-up point is marked when either of its two runs warned
    speed = line_plot(two_variant_table(warn="unwaited_copy"), "layernorm.tile_bytes", "speedup")
    assert len([ln for ln in rings(speed) if len(ln.get_xdata())]) == 1


# ------------------------------------------------------------------------------ trust no row
def _hostile_small(out: Path, **kw):
    kw.setdefault("n", 4096)
    kw.setdefault("fidelity", "tile")
    kw.setdefault("variants", ["pingpong", "direct"])
    return build_sweep(kw.pop("params", {"ddr.latency_cycles": [50, 100, 400]}), **kw)


@pytest.mark.parametrize("damage", ["delete", "garbage", "not a table"])
@pytest.mark.parametrize("other", [["--fidelity", "burst"], ["--set", "idma.burst_bytes=128"]])
def test_a_sweep_without_its_sidecar_is_not_resumed(tmp_path, capsys, damage, other):
    out = tmp_path / "s.csv"
    base = ["sweep", "--param", "ddr.latency_cycles=50,400", "--variant", "pingpong,direct",
            "--n", "4096", "--out", out]
    assert main([str(a) for a in base]) == 0
    side = tmp_path / "s.csv.sweep.json"
    if damage == "delete":
        side.unlink()
    else:
        side.write_text("{not json" if damage == "garbage" else "[1, 2]")
    before = out.read_bytes()
    capsys.readouterr()
    code, _, err = _run_cli(capsys, *base, *other)
    assert code == 2 and err.count("\n") == 1 and "sidecar" in err and "afresh" in err, err
    assert out.read_bytes() == before


def test_edited_values_are_checked_and_their_points_computed_again(tmp_path, capsys):
    out = tmp_path / "s.csv"
    s = _hostile_small(out)
    run_sweep(s, out)
    whole = read_sweep(out)
    rows = list(csv.reader(io.StringIO(out.read_text())))
    col = {c: i for i, c in enumerate(rows[0])}
    rows[1][col["cycles"]] = "abc"
    rows[2][col["time_us"]] = "-1"
    rows[3][col["warnings"]] = "a b,c"
    rows[4][col["hazards"]] = "1.5"
    rows[5][col["error"]] = ""  # fine as it is: a finished point
    rows[6][col["ddr_busy_cycles"]] = ""
    with open(out, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    summary = run_sweep(s, out)
    assert (summary.computed, summary.resumed, summary.dropped) == (5, len(whole) - 5, 5)
    assert "invalid rows" in capsys.readouterr().err
    again = read_sweep(out)
    assert again.drop(columns="wall_s").equals(whole.drop(columns="wall_s"))


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path):
    out = tmp_path / "s.csv"
    s = _hostile_small(out)
    run_sweep(s, out)
    whole = out.read_bytes()
    out.write_bytes(whole.rstrip(b"\n"))  # as an editor that strips the last newline leaves it
    assert len(read_sweep(out)) == s.size
    summary = run_sweep(s, out)
    assert (summary.computed, summary.resumed) == (0, s.size)
    assert out.read_bytes() == whole


# ------------------------------------------------------------------------------ dask addresses
@pytest.mark.parametrize("address", ["foo", "file:///tmp/x", "http://localhost:8786",
                                     "tcp://localhost", "tcp://host:99999", "tcp://a b:1"])
def test_a_scheduler_address_that_is_not_tcp_host_port_is_refused(tmp_path, capsys, address):
    pytest.importorskip("distributed")
    out = tmp_path / "s.csv"
    code, _, err = _run_cli(capsys, "sweep", "--param", "ddr.latency_cycles=50", "--n", "4096",
                            "--executor", "dask", "--scheduler", address, "--out", out)
    assert code == 2 and err.count("\n") == 1 and "tcp://HOST:PORT" in err
    assert not out.exists()


def test_an_unreachable_scheduler_is_one_line_after_the_timeout(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    from dspsim.study.sweep import executors

    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT_S", 1.0)
    out = tmp_path / "s.csv"
    code, _, err = _run_cli(capsys, "sweep", "--param", "ddr.latency_cycles=50", "--n", "4096",
                            "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9",
                            "--out", out)
    assert code == 2 and err.count("\n") == 1 and "cannot reach" in err, err
    assert "within 1 s" in err  # the timeout it was given, not the default
    assert err.count("cannot reach") == 1, err  # before: the probe's line wrapped in itself
    assert not out.exists()  # nothing written before the cluster answered


def test_a_dask_sweep_leaves_no_process_behind(tmp_path):
    pytest.importorskip("distributed")
    mark = f"dspsim-test-{os.getpid()}-{time.monotonic_ns()}"
    p = _cli("sweep", "--param", "ddr.latency_cycles=50,100,200,400", "--n", "4096",
             "--variant", "pingpong", "--executor", "dask", "--jobs", "2",
             "--out", tmp_path / "s.csv", env={"DSPSIM_TEST_MARK": mark}, timeout=120)
    assert p.returncode == 0, p.stderr
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"DSPSIM_TEST_MARK={mark}".encode() in environ.read_bytes():
                left.append(environ.parent.name)
        except OSError:
            pass
    assert not left, f"processes left: {left}"


def _run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _cli(*argv, timeout: float = 60, env=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dspsim.cli", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_dask_batches_small_points_and_keeps_every_row(tmp_path):
    """Points of a few milliseconds go to dask many to a task (batches of 1, 2, 4 until points
    are timed, then growing to about TASK_TARGET_S of work, shrinking near the end); the rows
    are the local executor's, one per point."""
    pytest.importorskip("distributed")
    from dspsim.study.sweep.executors import MAX_BATCH, TASK_TARGET_S, batch_size

    assert [batch_size(0, 0.0, submitted=k) for k in range(5)] == [1, 2, 4, 4, 4]
    assert batch_size(10, 10 * TASK_TARGET_S, largest_done=8) == 1  # as long as a task: one
    assert batch_size(10, 10 * TASK_TARGET_S / 8, largest_done=8) == 8
    # the first points timed may be the quick ones: a batch at most doubles the largest done
    assert batch_size(1, 0.0, largest_done=1) == 8
    assert batch_size(100, 0.0, largest_done=64) == 128
    assert batch_size(10**6, 0.0, largest_done=10**6) == MAX_BATCH
    # near the end: at most the points left over twice the workers, rounded up
    assert batch_size(100, 0.0, largest_done=64, left=100, workers=2) == 25
    assert batch_size(100, 0.0, largest_done=64, left=3, workers=2) == 1
    assert batch_size(100, 0.0, largest_done=64, left=0, workers=2) == 1
    s = small_sweep(params={"ddr.latency_cycles": [float(v) for v in range(10, 130, 2)]},
                    n=64, fidelity="tile")
    run_sweep(s, tmp_path / "local.csv")
    run_sweep(s, tmp_path / "dask.csv", executor="dask", jobs=2, dask_processes=False,
              timeout_s=120)
    local, dask = (without_wall(read_sweep(tmp_path / f"{k}.csv")) for k in ("local", "dask"))
    assert len(dask) == 120
    key = list(local.columns[:3])
    assert dask.sort_values(key).reset_index(drop=True).equals(
        local.sort_values(key).reset_index(drop=True))
