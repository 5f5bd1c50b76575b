"""The studies (optimize, calibrate, sweep, plot) on a platform that is not J6: a model whose
memories are not named ``ddr`` (the packaged ``ameba_hifi5``: ``psram`` and ``sram`` behind a
data cache), several models in one sweep, a worker process killed under ``optimize`` or
``calibrate --explore``, and what the studies print."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from dspsim.config import load_model
from dspsim.errors import DspsimInputError, WorkerError
from dspsim.ops import get_op
from dspsim.run import simulate
from dspsim.study.calibrate.explore import explore_space
from dspsim.study.calibrate.measure import Measurement, parse_measurement
from dspsim.study.optimize import optimize
from dspsim.study.sweep import build_sweep, read_sweep, run_sweep
from dspsim.study.sweep.same import identical_cycles_notes
from dspsim.study.sweep.table import check_row
from dspsim.study.sweep_plot import default_heatmap_y, heatmap, line_plot, speedup_table
from tests.cli_helpers import one_line, run_cli


@pytest.fixture(scope="module")
def hifi5():
    return load_model("ameba_hifi5")


# ------------------------------------------------------------------ optimize on any platform
def test_optimize_counts_the_bytes_of_the_models_own_memories(hifi5):
    res = optimize("softmax", n=4096, model="ameba_hifi5", top=1, check_numerics=False,
                   progress=False)
    best = res.best
    r = simulate(hifi5, "softmax", best.variant, n=4096, data=False, fidelity="burst")
    assert best.cycles == r.cycles
    assert best.read_bytes == {m: r.bytes[f"{m}_read"] for m in hifi5.memories}
    assert best.write_bytes == {m: r.bytes[f"{m}_write"] for m in hifi5.memories}
    obj = res.to_json()["best"] | res.to_json()["candidates"][0]
    assert obj["psram_read_bytes"] == r.bytes["psram_read"] and "ddr_read_bytes" not in obj
    row = res.table_rows()[0]
    assert row["psram_write_bytes"] == r.bytes["psram_write"]


def test_optimize_over_two_platforms_takes_the_worst_models_memories(capsys, tmp_path):
    fast = tmp_path / "fast.toml"  # J6 with a port so fast that the HiFi5 is the worst case
    fast.write_text('base = "j6"\n[ddr]\nbytes_per_cycle = 64.0\nlatency_cycles = 1.0\n')
    code, out, err = run_cli(capsys, "optimize", "--op", "softmax", "--n", "4096",
                             "--variants", "direct", "--models", f"{fast},ameba_hifi5",
                             "--top", "1", "--no-check", "--json")
    assert code == 0, err
    best = json.loads(out)["candidates"][0]
    assert best["worst_model"] == "ameba_hifi5"
    assert best["psram_read_bytes"] > 0 and "ddr_read_bytes" not in best


def test_optimize_names_the_ops_own_element_type(capsys):
    code, out, err = run_cli(capsys, "optimize", "--op", "fc", "--top", "1", "--no-check")
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("fc of 512 x 768 weights on ") and "float32" not in first
    code, out, err = run_cli(capsys, "optimize", "--op", "softmax", "--n", "4096", "--top", "1",
                             "--no-check", "--variants", "direct")
    assert out.splitlines()[0].startswith("softmax of 4,096 float32 on ")


# ------------------------------------------------------------------ calibrate on any platform
def test_explore_fits_the_host_memory_of_the_model(hifi5):
    # explore walks a pipelined memory's latency and bandwidth: the HiFi5's PSRAM as one
    # (the packaged model's is a transactions memory, whose keys explore does not walk)
    piped = hifi5.with_overrides({"psram.protocol": "pipelined", "psram.latency_cycles": 15.0,
                                  "psram.bytes_per_cycle": 1.0})
    ms = [Measurement("direct", 3_100_977, 100_000)]
    space = explore_space(piped, ms)
    assert [p.key for p in space.cont] == [
        "psram.latency_cycles", "psram.bytes_per_cycle", "idma.setup_cycles"]
    assert "psram.max_outstanding" in space.grid
    # one measurement, three keys: the setup and the port's bandwidth pinned, the latency walked
    assert set(space.anchors[0]) == {"idma.setup_cycles", "psram.bytes_per_cycle"}
    assert space.pin_grid_key == "psram.latency_cycles"
    assert not any(k.startswith("ddr.") for k in space.keys)


def test_explore_on_a_transactions_host_memory_is_one_line_exit_2(capsys):
    """The packaged HiFi5's PSRAM has no latency or bandwidth to walk: refused in one line
    (was a TypeError traceback)."""
    code, _, err = run_cli(capsys, "calibrate", "--model", "ameba_hifi5", "--explore",
                           "--measured", "copy:idma,n=98304=117434",
                           "--free", "psram.refresh_clocks")
    assert code == 2 and one_line(err), err
    assert "psram" in err and "transactions" in err and "without --explore" in err


def test_a_fitted_host_memory_window_reads_as_requests_on_its_port(hifi5, j6):
    from dspsim.study.calibrate.fitting import reading

    assert reading("psram.max_outstanding", 4, hifi5) == "4 requests in flight on the port"
    assert reading("ddr.max_outstanding", 4, j6) == "4 requests in flight on the port"


@pytest.mark.parametrize("argv", [
    ["calibrate", "--model", "ameba_hifi5", "--free", "ddr.latency_cycles", "--measured",
     "direct=3100977"],
    ["calibrate", "--free", "sram.latency_cycles", "--measured", "direct=7648254"],
    ["sweep", "--model", "ameba_hifi5", "--param", "ddr.latency_cycles=100,200"],
    ["sweep", "--models", "j6,ameba_hifi5", "--param", "psram.latency_cycles=10,20"],
    ["optimize", "--model", "ameba_hifi5", "--param", "ddr.latency_cycles=10,20"],
    ["optimize", "--models", "j6,ameba_hifi5", "--param", "sram.latency_cycles=10,20"],
])
def test_a_memory_the_model_lacks_is_one_line_exit_2(argv, capsys, tmp_path):
    if argv[0] == "sweep":
        argv = [*argv, "--out", str(tmp_path / "s.csv")]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and one_line(err), err
    assert "has no memory" in err and "its memories: " in err
    assert not (tmp_path / "s.csv").exists()


def test_a_key_given_twice_in_a_measurement_is_refused(capsys):
    for spec in ("pingpong,ddr.latency_cycles=100,ddr.latency_cycles=200=5154293",
                 "pingpong,n=4096,softmax.tile_bytes=8192,n=4096,softmax.tile_bytes=8192=9"):
        with pytest.raises(DspsimInputError, match="is given twice; give each key once"):
            parse_measurement(spec)
        code, _, err = run_cli(capsys, "calibrate", "--measured", spec, "--free",
                               "ddr.latency_cycles")
        assert code == 2 and one_line(err) and "given twice" in err


@pytest.mark.parametrize("cycles, met", [(150000, True), (100, False)])
def test_calibrate_out_writes_the_fits_verdict_and_says_so(cycles, met, capsys, tmp_path):
    out = tmp_path / "fit.toml"
    code, stdout, err = run_cli(capsys, "calibrate", "--measured", f"pingpong,n=2048={cycles}",
                                "--free", "ddr.latency_cycles", "--fidelity", "tile",
                                "--out", out)
    assert code == (0 if met else 1), err
    verdict = out.read_text().splitlines()[1]
    wrote = stdout.splitlines()[-1]
    if met:
        assert verdict.startswith("# Verdict: the fit reproduces every measurement within 1 %")
        assert wrote == f"wrote {out}"
    else:
        assert verdict.startswith("# Verdict: the fit did NOT reproduce every measurement "
                                  "within 1 %")
        assert wrote == (f"wrote {out} (the fit missed the tolerance: the file's verdict "
                         "comment says so)")
    load_model(out)  # a verdict is a comment: the file loads


# ------------------------------------------------------------------ a sweep of two platforms
@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_a_sweep_of_two_platforms_keeps_every_models_rows(ext, tmp_path, hifi5, j6):
    s = build_sweep({"idma.max_outstanding": [8, 16]}, n=4096, variants="direct",
                    models=["j6", "ameba_hifi5"])
    assert [c for c in s.columns if c.endswith("_read_bytes")] == [
        "ddr_read_bytes", "psram_read_bytes", "sram_read_bytes"]
    out = tmp_path / f"s{ext}"
    first = run_sweep(s, out)
    assert (first.points, first.computed, first.failed) == (4, 4, 0)
    again = run_sweep(s, out)
    assert (again.computed, again.resumed) == (0, 4)
    df = read_sweep(out)
    assert len(df) == 4 and list(df["model"]) == ["j6", "j6", "ameba_hifi5", "ameba_hifi5"]
    for row in df.to_dict("records"):
        model = (j6 if row["model"] == "j6" else hifi5).with_overrides(
            {"idma.max_outstanding": row["idma.max_outstanding"]})
        r = simulate(model, "softmax", "direct", n=4096, data=False)
        assert row["cycles"] == r.cycles
        for m in ("ddr", "psram", "sram"):
            if m in model.memories:
                assert row[f"{m}_read_bytes"] == r.bytes[f"{m}_read"]
            else:
                assert pd.isna(row[f"{m}_read_bytes"]) and pd.isna(row[f"{m}_busy_cycles"])


def test_a_row_with_a_value_for_a_memory_its_model_lacks_is_invalid():
    s = build_sweep({"idma.max_outstanding": [8]}, n=4096, variants="direct",
                    models=["j6", "ameba_hifi5"])
    cols = s.columns
    cells = {c: "0" for c in cols} | {"model": "j6", "op": "softmax", "variant": "direct",
                                      "n": "4096", "idma.max_outstanding": "8", "warnings": "",
                                      "error": "", "time_us": "1.0", "wall_s": "0.1"}
    cells.update({c: "" for c in cols if c.startswith(("psram_", "sram_"))})
    assert check_row(s, [cells[c] for c in cols])[1] is False
    cells["psram_read_bytes"] = "5"
    with pytest.raises(ValueError, match="psram_read_bytes = '5' for a model without"):
        check_row(s, [cells[c] for c in cols])


# ------------------------------------------------------------------ one meaning of speedup
def test_speedup_means_baseline_over_variant_in_optimize_and_in_plots(tmp_path):
    res = optimize("softmax", n=4096, variants="direct", top=1, check_numerics=False,
                   progress=False)
    base, best = res.baseline, res.best
    assert best.speedup == base.cycles / best.cycles  # pingpong / direct
    out = tmp_path / "s.csv"
    run_sweep(build_sweep(n=4096, variants="pingpong,direct", fidelity="burst"), out)
    df = read_sweep(out)
    table = speedup_table(df)
    assert list(table["speedup"]) == [best.speedup]
    ax = line_plot(df, "n", "speedup").axes[0]
    assert ax.get_ylabel().replace("\n", " ") == (  # wrapped to the axes' height
        "speedup (pingpong cycles / direct cycles; above 1 direct is faster)")


def test_a_heatmap_draws_cycles_unless_asked_and_its_colour_bar_says_the_unit(tmp_path):
    out = tmp_path / "s.csv"
    run_sweep(build_sweep({"idma.max_outstanding": [8, 16]}, n=[2048, 4096],
                          variants="pingpong,direct"), out)
    df = read_sweep(out)
    assert default_heatmap_y(df) == "cycles" and default_heatmap_y(df, "pingpong") == "speedup"
    fig = heatmap(df, "n", "idma.max_outstanding")
    bars = [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel().startswith("cycles")]
    assert bars == ["cycles (core clock cycles)"] * 2  # a panel per variant, each its bar
    fig = heatmap(df, "n", "idma.max_outstanding", "speedup")
    assert [ax.get_ylabel().replace("\n", " ") for ax in fig.axes
            if "speedup" in ax.get_ylabel()] == [
        "speedup (pingpong cycles / direct cycles; above 1 direct is faster)"]


# ------------------------------------------------------------------ a knob that did not move
def test_a_sweep_says_which_values_gave_identical_cycles_and_why(capsys, tmp_path):
    out = tmp_path / "t.csv"
    code, stdout, err = run_cli(capsys, "sweep", "--n", "10000", "--variant", "pingpong",
                                "--param", "softmax.tile_bytes=4096,8192,16384", "--out", out)
    assert code == 0, err
    cycles = {int(r["softmax.tile_bytes"]): int(r["cycles"]) for r in read_sweep(out).to_dict(
        "records")}
    assert cycles[8192] == cycles[16384] != cycles[4096]
    # 10,000 = 4 x 2,048 + 1,808 = 2 x 4,096 + 1,808; 1,024-element tiles leave 784
    assert stdout.splitlines()[1:] == [
        f"note: softmax.tile_bytes = 8192, 16384 gave identical cycles ({cycles[8192]:,} at "
        "variant=pingpong, n=10000): every value leaves the same last tile (1,808 elements, "
        "after 2 or 4 whole tiles that move the same bytes in all)"]
    code, stdout, _ = run_cli(capsys, "plot", "sweep", out, "--x", "softmax.tile_bytes",
                              "--out", tmp_path / "t.png")
    assert code == 0 and stdout.splitlines()[1].startswith("note: softmax.tile_bytes = 8192, ")


def test_the_default_reason_comes_from_the_ops_tiling():
    op = get_op("softmax")
    assert op.same_cycles_reason("pingpong", (100_000,), "softmax.tile_bytes",
                                 [8192, 16384, 32768]) == (
        "every value leaves the same last tile (1,696 elements, after 12, 24 or 48 whole tiles "
        "that move the same bytes in all)")
    assert op.same_cycles_reason("pingpong", (4096,), "softmax.tile_bytes", [32768, 65536]) == (
        "the tile count (1) and the last tile (4,096 elements) are the same for these values")
    assert op.same_cycles_reason("pingpong", (100_000,), "softmax.tile_bytes",
                                 [4096, 8192]) is None  # 672 and 1,696 elements last
    assert op.same_cycles_reason("direct", (100_000,), "softmax.tile_bytes", [4096, 8192]) == (
        "softmax.tile_bytes does not act in softmax direct")
    assert op.same_cycles_reason("pingpong", (100_000,), "ddr.latency_cycles", [1, 2]) is None
    # an iDMA key in a variant of no channel (the note said "port-bound ... 761,457 cycles
    # either way" of a run of 843,244: the port is not what left it alike)
    assert op.same_cycles_reason("direct", (100_000,), "idma.max_outstanding", [16, 64]) == (
        "idma.max_outstanding does not act in softmax direct: it uses no iDMA channel")
    assert op.same_cycles_reason("pingpong", (100_000,), "idma.max_outstanding", [16]) is None
    assert op.same_cycles_reason("direct", (100_000,), "tcm.bank_bytes", [65536, 131072]) == (
        "tcm.bank_bytes does not act in softmax direct: it uses no DataRAM")


def test_another_ops_key_is_not_blamed_on_the_port(j6):
    """A sweep of softmax over layernorm.eps: the note said "port-bound: the DDR port moves
    1,967,232 bytes ... either way", as if the port had left a key that acts alike."""
    models = [j6.with_overrides({"layernorm.eps": e}) for e in (0.1, 0.2)]
    assert get_op("softmax").same_cycles_reason("pingpong", (100_000,), "layernorm.eps",
                                                [0.1, 0.2], models) == (
        "layernorm.eps does not act in softmax pingpong")


def test_without_a_reason_the_note_says_the_values_gave_identical_cycles():
    rows = [{"op": "softmax", "variant": v, "n": 4096, "ddr.latency_cycles": lat,
             "cycles": c, "warnings": "", "error": ""}
            for v, lat, c in (("pingpong", 50.0, 900), ("pingpong", 100.0, 900),
                              ("pingpong", 200.0, 950), ("direct", 50.0, 1000),
                              ("direct", 100.0, 1100), ("direct", 200.0, 1200))]
    assert identical_cycles_notes(pd.DataFrame(rows)) == [
        "note: ddr.latency_cycles = 50.0, 100.0 gave identical cycles (900 at "
        "variant=pingpong, n=4096)"]
    # the same values at several settings are one note
    again = [r | {"n": n} for r in rows for n in (1024, 2048)]
    assert identical_cycles_notes(pd.DataFrame(again)) == [
        "note: ddr.latency_cycles = 50.0, 100.0 gave identical cycles (900 at "
        "variant=pingpong, n=1024 and 1 other setting)"]
    many = [{**rows[0], "n": n, "ddr.latency_cycles": float(n + k), "cycles": 7}
            for n in range(1, 9) for k in (0, 100)]
    notes = identical_cycles_notes(pd.DataFrame(many), limit=5)
    assert len(notes) == 6 and notes[-1] == (
        "note: 3 more groups of values gave identical cycles (see the table)")


# ------------------------------------------------------------------ a killed worker
def _dies(*_args):
    os._exit(3)  # a worker killed mid-run (the OOM killer, kill -9)


def test_a_killed_optimize_worker_is_one_line_exit_1(monkeypatch, capsys):
    import dspsim.study.optimize as study

    monkeypatch.setattr(study, "evaluate_point", _dies)
    with pytest.raises(WorkerError, match="optimize .*a worker process failed"):
        optimize("softmax", n=4096, top=1, jobs=2, check_numerics=False, progress=False)
    code, _, err = run_cli(capsys, "optimize", "--n", "4096", "--jobs", "2", "--no-check")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("dspsim: error: optimize (screen): a worker process failed")


def test_a_killed_explore_worker_is_one_line_exit_1(monkeypatch, capsys):
    import importlib

    explore = importlib.import_module("dspsim.study.calibrate.explore")
    monkeypatch.setattr(explore, "fit_point", _dies)
    code, _, err = run_cli(capsys, "calibrate", "--explore", "--jobs", "2")
    assert code == 1 and "Traceback" not in err, err  # its progress lines, then the error
    last = err.splitlines()[-1]
    assert last.startswith("dspsim: error: calibrate --explore: a worker process failed")


def test_a_tasks_own_error_in_a_worker_is_not_called_a_pool_failure():
    from dspsim.workers import pool_failure

    own = DspsimInputError("a value out of range")
    assert pool_failure("optimize")(own) is own
