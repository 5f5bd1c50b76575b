"""Where the time goes: per-pass breakdown reconciles, tiles add up, helpers match brute force."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.analysis.series import assign_lanes, binned_mean, interval_integral
from dspsim.analysis.stalls import CORE_PARTS, core_breakdown, stall_summary
from dspsim.analysis.tiles import tcm_segments, tile_table
from dspsim.cli import main
from dspsim.run import simulate


@pytest.fixture(scope="module")
def runs(j6):
    return {
        mode: simulate(j6, mode=mode, n=50_000, data=False, trace=True, port_log=True)
        for mode in ("pingpong", "direct")
    }


def check_reconciles(result):
    rows = core_breakdown(result.trace, result.passes)
    assert [r["pass"] for r in rows] == [p["name"] for p in result.passes]
    for row, p in zip(rows, result.passes):
        parts = sum(row[k] for k in CORE_PARTS)
        assert parts == pytest.approx(row["span_cycles"], rel=1e-12, abs=1e-6)
        # the core's span is the pass as the op timed it, and every cycle of it is attributed
        assert row["start_cycle"] == pytest.approx(p["start_cycle"], abs=1.0)
        assert row["end_cycle"] == pytest.approx(p["end_cycle"], abs=1.0)
        assert abs(row["other_cycles"]) < 1e-6 * row["span_cycles"] + 1e-6
        assert all(row[k] >= -1e-9 for k in CORE_PARTS)
    return rows


@pytest.mark.parametrize("mode", ["pingpong", "direct"])
def test_per_pass_compute_plus_waits_is_the_core_span(runs, mode):
    r = runs[mode]
    rows = check_reconciles(r)
    assert sum(x["span_cycles"] for x in rows) == pytest.approx(r.cycles, abs=1.0)
    # the same totals as the core's own accounting, kept independently of the trace
    total = stall_summary(r)["total"]
    assert total["wait_in_cycles"] == pytest.approx(r.stall_cycles["idma_in"], abs=1.0)
    assert total["wait_out_cycles"] == pytest.approx(r.stall_cycles["idma_out"], abs=1.0)
    assert total["wait_ddr_cycles"] == pytest.approx(r.stall_cycles["ddr"], abs=1.0)
    busy = total["compute_cycles"] + total["idma_setup_cycles"]
    assert busy == pytest.approx(r.busy_cycles[r.core], abs=1.0)


def test_versions_stall_where_expected(runs):
    pp = stall_summary(runs["pingpong"])["total"]
    direct = stall_summary(runs["direct"])["total"]
    assert pp["wait_ddr_cycles"] == 0 and pp["wait_in_cycles"] > 0
    assert direct["wait_in_cycles"] == direct["wait_out_cycles"] == 0
    assert direct["wait_ddr_cycles"] > 0 and direct["idma_setup_cycles"] == 0


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 30_000),
    tile_floats=st.sampled_from([64, 1000, 2048, 8192]),
    mode=st.sampled_from(["pingpong", "direct"]),
    schedule=st.sampled_from(["seed", "split"]),
)
def test_reconciles_for_any_size_and_schedule(j6, n, tile_floats, mode, schedule):
    model = j6.with_overrides(
        {"softmax.tile_bytes": 4 * tile_floats, "softmax.schedule": schedule}
    )
    r = simulate(model, mode=mode, n=n, data=False, trace=True)
    check_reconciles(r)
    tiles = tile_table(r.trace, r.passes)
    assert (tiles["hidden_dma_cycles"] >= -1e-9).all()
    assert np.allclose(tiles["hidden_dma_cycles"] + tiles["exposed_dma_cycles"],
                       tiles["dma_cycles"])


def test_engine_utilisation(runs):
    r = runs["pingpong"]
    eng = stall_summary(r)["engines"]
    # the core, both iDMA channels and the DDR port, by the run's names
    assert list(eng) == list(r.engines)
    assert r.engines_of("core") == [r.core] and len(r.engines_of("idma")) == 2
    for e in eng.values():
        assert 0.0 <= e["utilisation_pct"] <= 100.0 + 1e-9
        assert e["utilisation_pct"] == pytest.approx(100.0 * e["busy_cycles"] / r.cycles)
    copies = r.trace[r.trace["kind"].isin(["copy_in", "copy_out"])]
    for ch in r.engines_of("idma"):
        rows = copies[copies["engine"] == ch]
        assert eng[ch]["busy_cycles"] == pytest.approx(
            (rows["end_cycle"] - rows["start_cycle"]).sum()
        )
    moved = r.bytes["ddr_read"] + r.bytes["ddr_write"]
    (ddr,) = r.engines_of("ddr")
    assert eng[ddr]["achieved_bytes_per_cycle"] == pytest.approx(moved / r.cycles)
    assert eng[ddr]["achieved_bytes_per_cycle"] <= r.model.ddr.bytes_per_cycle * (1 + 1e-9)


@pytest.mark.parametrize("model, op, variant, shape, settings", [
    ("j6", "softmax", "pingpong", (100_000,), {"softmax.tile_bytes": 131072}),  # unwaited copy
    ("ameba_hifi5", "fc", "pingpong", (1, 8192), {}),  # input copied in before the timer
])
def test_achieved_bandwidth_counts_the_bytes_inside_the_span(model, op, variant, shape,
                                                              settings):
    """Bytes moved before the timer starts or after it stops are not the op's: the achieved
    rate is the port's bytes inside the span (pipelined: its busy cycles there at its bytes per
    cycle), never above what the port can move."""
    from dspsim.config import load_model

    m = load_model(model).with_overrides(settings)
    r = simulate(m, op, variant, shape=shape, data=False, trace=True)
    port = m.host.memory
    moved = r.bytes[f"{port}_read"] + r.bytes[f"{port}_write"]
    assert r.busy_cycles[port] < r.memories[port]["busy_cycles"]  # traffic outside the span
    rate = stall_summary(r)["engines"][port]["achieved_bytes_per_cycle"]
    assert rate == pytest.approx(moved * r.busy_cycles[port] / r.memories[port]["busy_cycles"]
                                 / r.cycles)
    peak = (m.ddr.bytes_per_cycle if port == "ddr"
            else m.psram.bytes_per_clock / m.psram.clock_cycles)
    assert rate <= peak


def test_tile_table_one_row_per_tile_per_pass(runs, j6):
    r = runs["pingpong"]
    tiles = tile_table(r.trace, r.passes)
    block = j6.softmax.tile_bytes // 4
    per_pass = math.ceil(r.n / block)
    assert list(tiles.groupby("pass", sort=False).size()) == [per_pass] * 3
    assert list(tiles["pass"].unique()) == ["max", "exp_sum", "mul"]
    for _, g in tiles.groupby("pass"):
        assert list(g["tile"]) == list(range(per_pass))
        assert g["bytes"].sum() == 4 * r.n
        assert (g["buffer"] == np.arange(per_pass) % 2).all()
    # order inside a tile: filled, then computed, then drained
    assert (tiles["copy_in_end_cycle"] <= tiles["compute_start_cycle"] + 1e-9).all()
    wb = tiles.dropna(subset=["copy_out_start_cycle"])
    assert len(wb) == 2 * per_pass  # the max pass writes nothing back
    assert (wb["compute_end_cycle"] <= wb["copy_out_start_cycle"] + 1e-9).all()
    # every wait is charged to the tile whose copy it waited on
    assert tiles["wait_in_cycles"].sum() == pytest.approx(r.stall_cycles["idma_in"], abs=1.0)
    assert tiles["wait_out_cycles"].sum() == pytest.approx(r.stall_cycles["idma_out"], abs=1.0)
    # hidden DMA time is core work overlapping a copy: no more than the core's work
    assert tiles["hidden_dma_cycles"].sum() <= r.busy_cycles[r.core] * 2 + 1e-6
    for c in tiles.columns:
        if c not in ("pass", "tile", "buffer", "bytes"):
            assert c.endswith(("_cycles", "_cycle", "_channel")), c


def test_hidden_dma_matches_brute_force_overlap(runs):
    r = runs["pingpong"]
    tiles = tile_table(r.trace, r.passes)
    core = r.trace[(r.trace["engine"] == r.core) & r.trace["kind"].isin(["compute", "setup"])]
    cs, ce = core["start_cycle"].to_numpy(), core["end_cycle"].to_numpy()
    for t in tiles.head(8).itertuples():
        expect = 0.0
        for a, b in ((t.copy_in_start_cycle, t.copy_in_end_cycle),
                     (t.copy_out_start_cycle, t.copy_out_end_cycle)):
            if not np.isnan(a):
                expect += np.clip(np.minimum(ce, b) - np.maximum(cs, a), 0, None).sum()
        assert t.hidden_dma_cycles == pytest.approx(expect, abs=1e-6)


def test_direct_tiles_are_one_row_per_pass(runs):
    r = runs["direct"]
    tiles = tile_table(r.trace, r.passes)
    assert list(tiles["pass"]) == ["max", "exp", "sum", "mul"]
    assert (tiles["tile"] == -1).all() and (tiles["dma_cycles"] == 0).all()
    assert tiles["ddr_stall_cycles"].sum() == pytest.approx(r.stall_cycles["ddr"], abs=1.0)


def test_tcm_segments_cover_each_tile_without_gaps(runs):
    r = runs["pingpong"]
    segs = tcm_segments(r.trace, r.passes)
    for (_, _), g in segs.groupby(["pass", "tile"]):
        g = g.sort_values("start_cycle")
        assert np.allclose(g["start_cycle"].to_numpy()[1:], g["end_cycle"].to_numpy()[:-1])
    assert (segs["lane"] == 0).all()  # the seed's schedule never refills a draining buffer


def test_split_schedule_refills_a_draining_buffer(j6):
    model = j6.with_overrides({"softmax.schedule": "split"})
    r = simulate(model, variant="pingpong", n=40_000, data=False, trace=True)
    segs = tcm_segments(r.trace, r.passes)
    assert segs["lane"].max() >= 1


# ------------------------------------------------------------------------------ helpers
intervals = st.lists(
    st.tuples(st.floats(0, 1000, allow_nan=False), st.floats(0, 200, allow_nan=False),
              st.floats(0, 10, allow_nan=False)),
    min_size=0, max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(iv=intervals, ts=st.lists(st.floats(-10, 1300, allow_nan=False), min_size=1, max_size=10))
def test_interval_integral_matches_brute_force(iv, ts):
    s = np.array([a for a, _, _ in iv])
    e = np.array([a + d for a, d, _ in iv])
    w = np.array([x for _, _, x in iv])
    t = np.array(ts)
    got = interval_integral(s, e, w, t)
    want = [sum(wi * max(0.0, min(ti, ei) - si) for si, ei, wi in zip(s, e, w)) for ti in t]
    assert np.allclose(got, want, rtol=1e-9, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(iv=intervals, bins=st.integers(1, 20))
def test_binned_mean_conserves_the_integral(iv, bins):
    s = np.array([a for a, _, _ in iv])
    e = np.array([a + d for a, d, _ in iv])
    w = np.array([x for _, _, x in iv])
    edges = np.linspace(0.0, 1300.0, bins + 1)
    got = (binned_mean(s, e, w, edges) * np.diff(edges)).sum()
    assert got == pytest.approx(float((w * (e - s)).sum()), rel=1e-9, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(iv=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30)), max_size=40))
def test_assign_lanes_never_overlaps_and_uses_no_needless_lane(iv):
    s = np.array([a for a, _ in iv], float)
    e = np.array([a + d for a, d in iv], float)
    lanes = assign_lanes(s, e)

    def overlap(i, j):  # touching end to start is not an overlap
        return not (e[i] <= s[j] or e[j] <= s[i])

    for i in range(len(iv)):
        for j in range(i + 1, len(iv)):
            if lanes[i] == lanes[j]:
                assert not overlap(i, j)
        # it could not have gone to a lower lane: each one holds an interval it overlaps
        for k in range(lanes[i] if len(iv) else 0):
            assert any(overlap(i, j) for j in np.flatnonzero(lanes == k))
    if len(iv):
        assert set(lanes.tolist()) == set(range(lanes.max() + 1))


# ------------------------------------------------------------------------------ CLI
def test_run_json_has_stalls(capsys):
    code = main(["run", "--mode", "pingpong", "--n", "20000", "--json"])
    obj = json.loads(capsys.readouterr().out)
    assert code == 0
    stalls = obj["stalls"]
    assert [p["pass"] for p in stalls["per_pass"]] == ["max", "exp_sum", "mul"]
    for p in stalls["per_pass"]:
        assert sum(p[k] for k in CORE_PARTS) == pytest.approx(p["span_cycles"])
    # the core, both iDMA channels and the DDR port, by the run's names
    assert list(stalls["engines"]) == list(obj["engines"])
    assert sorted(obj["engines"].values()) == ["core", "ddr", "idma", "idma"]
    assert obj["engines"][obj["core"]] == "core"


def test_tiles_csv_and_report(tmp_path, capsys):
    csv, saved = tmp_path / "tiles.csv", tmp_path / "run.json"
    code = main(["run", "--n", "20000", "--tiles", str(csv), "--save", str(saved)])
    assert code == 0
    import pandas as pd

    tiles = pd.read_csv(csv)
    assert len(tiles) == 3 * math.ceil(20000 / 8192)
    assert {"copy_in_start_cycle", "hidden_dma_cycles", "exposed_dma_cycles"} <= set(tiles)
    capsys.readouterr()
    assert main(["report", str(saved)]) == 0
    out = capsys.readouterr().out
    for word in ("wait_in_cycles", "utilisation_pct", "hidden_dma_cycles", "exp_sum", "total"):
        assert word in out


def test_the_reports_tiles_leave_out_what_is_no_tile():
    """HiFi5 fc ping-pong: its input and bias copied in before the timer and its output out
    after it are no tile: the report names them outside the passes with no tile or buffer
    (not -1, the CSV's blanks) and its DMA total is the tiles' (7,660, not 8,373)."""
    from dspsim.analysis.tiles import report_text
    from dspsim.config import load_model

    r = simulate(load_model("ameba_hifi5"), "fc", "pingpong", shape=(100, 64), data=False,
                 trace=True)
    text = report_text(r)
    table = text[text.index("tiles (cycles"):]
    assert " -1 " not in table and "(outside passes)" in table
    assert "all tiles: 7,660 DMA cycles" in table


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--n", "100", "--tiles", "x.txt"], "allowed .csv"),
        (["run", "--n", "100", "--tiles", "/nonexistent-dir/x.csv"], "does not exist"),
    ],
)
def test_tiles_bad_path_is_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_report_names_the_runs_warnings_and_output_check(tmp_path, capsys):
    from dspsim.cli import main

    path = tmp_path / "r.json"
    assert main(["run", "--n", "3000", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning [unwritten_handle]" in out and "max relative error vs float64" in out


def test_many_rows_give_one_breakdown_per_pass_name():
    """A softmax of many rows repeats its four passes' names: one breakdown row per name (it
    was one per pass, each summing every row: quadratic, and 4 x rows repeated rows)."""
    from dspsim import load_model, simulate

    r = simulate(load_model(), "softmax", "direct", shape=(50, 8), data=False, trace=True)
    rows = core_breakdown(r.trace, list(r.passes))
    assert [b["pass"] for b in rows] == ["max", "exp", "sum", "mul"]
    starts = [p["start_cycle"] for p in r.passes if p["name"] == "max"]
    assert rows[0]["start_cycle"] <= min(starts) and len(starts) == 50
